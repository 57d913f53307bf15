//! Views: one text's selection and scroll origin (acme's `Text`), and the
//! rules that move them when the text changes.
//!
//! The rules are acme's `textinsert`/`textdelete`: a point after an insert
//! moves right by its length, a point at the insert stays put; a point after
//! a delete moves left, a point inside it moves to its start. The same rule
//! rebases a proposal's positions through later edits (`buf.rs`), so views
//! and proposals move alike.

use serde::{Deserialize, Serialize};

/// A selection `q0..q1` and a scroll origin, in runes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct View {
    pub q0: u64,
    pub q1: u64,
    /// First rune shown.
    pub org: u64,
}

/// Where point `p` goes when `n` runes are inserted at `q0`.
pub fn point_after_insert(p: u64, q0: u64, n: u64) -> u64 {
    if q0 < p {
        p.saturating_add(n)
    } else {
        p
    }
}

/// Where point `p` goes when runes `q0..q1` are deleted.
pub fn point_after_delete(p: u64, q0: u64, q1: u64) -> u64 {
    if q0 < p {
        p - (q1 - q0).min(p - q0)
    } else {
        p
    }
}

/// Where point `p` goes when runes `q0..q0+deleted` are replaced by
/// `inserted` runes: the delete first, then the insert, as acme does it.
pub fn point_after_splice(p: u64, q0: u64, deleted: u64, inserted: u64) -> u64 {
    point_after_insert(point_after_delete(p, q0, q0 + deleted), q0, inserted)
}

impl View {
    /// Moves this view for a splice of `q0..q0+deleted` into `inserted` runes.
    pub fn splice(&mut self, q0: u64, deleted: u64, inserted: u64) {
        self.q0 = point_after_splice(self.q0, q0, deleted, inserted);
        self.q1 = point_after_splice(self.q1, q0, deleted, inserted);
        self.org = point_after_splice(self.org, q0, deleted, inserted);
    }
}
