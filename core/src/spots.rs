//! `Spots`: where the changes of one many-change splice go (a whole-file
//! Edit's `BufferOp::Splices`, and the undo record of one), packed.
//!
//! A million substitutions as a million entries cost a version, an undo
//! record and a log entry each; as one op they cost about three bytes
//! each. For each change in order the packing holds three varints: the
//! runes since the end of the change before (since the text's start for
//! the first), the runes it removes, and the runes it puts in. Positions
//! are in the text before any of them is made; the gaps between changes
//! are unchanged text, so the same gaps place the changes in the text
//! after them too, which makes the reversal the same packing with the two
//! counts swapped ([`Spots::swapped`]).

use crate::error::{Reject, Result};
use serde::{Deserialize, Deserializer, Serialize};
use std::fmt;
use std::sync::Arc;

/// One change: runes `q0..q1` of the text before become `inserted` runes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Spot {
    pub q0: u64,
    pub q1: u64,
    pub inserted: u64,
}

/// What [`Spots::check`] found: the runes the changes span, from the
/// first one's start to the last one's end (in the text before them),
/// and how many of those runes they remove.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Reach {
    pub start: u64,
    pub end: u64,
    pub removed: u64,
}

/// The changes, in order and apart, packed. Shared, not copied, by the op
/// that made them and the undo record that reverses them.
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Spots(#[serde(serialize_with = "crate::bytes::serialize", deserialize_with = "shared_bytes")] Arc<[u8]>);

fn shared_bytes<'de, D: Deserializer<'de>>(d: D) -> std::result::Result<Arc<[u8]>, D::Error> {
    crate::bytes::deserialize(d).map(Arc::from)
}

fn put(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push(v as u8 | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

/// A varint from `bytes` at `*at`, or `None` where the packing is cut
/// short or overlong.
fn take(bytes: &[u8], at: &mut usize) -> Option<u64> {
    let mut v = 0u64;
    for shift in (0..64).step_by(7) {
        let b = *bytes.get(*at)?;
        *at += 1;
        // The tenth byte holds the top bit alone.
        if shift == 63 && b > 1 {
            return None;
        }
        v |= u64::from(b & 0x7f) << shift;
        if b & 0x80 == 0 {
            return Some(v);
        }
    }
    None
}

/// Where the next change's numbers begin, and where the change before it
/// ended.
#[derive(Clone, Copy, Default)]
struct Cursor {
    at: usize,
    end: u64,
}

impl Cursor {
    /// The next change of `packed`; none at its end or where it is cut
    /// short.
    #[inline]
    fn next(&mut self, packed: &[u8]) -> Option<Spot> {
        if self.at == packed.len() {
            return None;
        }
        let q0 = self.end.checked_add(take(packed, &mut self.at)?)?;
        let q1 = q0.checked_add(take(packed, &mut self.at)?)?;
        let inserted = take(packed, &mut self.at)?;
        self.end = q1;
        Some(Spot { q0, q1, inserted })
    }
}

impl Spots {
    /// Packs `spots`, which must be in order and apart (each starting at
    /// or after the end of the one before).
    pub fn pack(spots: impl IntoIterator<Item = Spot>) -> Result<Spots> {
        let mut out = Vec::new();
        let mut end = 0;
        for s in spots {
            if s.q0 < end || s.q1 < s.q0 {
                return Err(Reject::Range { q0: s.q0, q1: s.q1, len: end });
            }
            put(&mut out, s.q0 - end);
            put(&mut out, s.q1 - s.q0);
            put(&mut out, s.inserted);
            end = s.q1;
        }
        Ok(Spots(out.into()))
    }

    /// The changes, in order. A packing cut short ends early: [`check`]
    /// says so first.
    ///
    /// [`check`]: Spots::check
    pub fn iter(&self) -> impl Iterator<Item = Spot> + '_ {
        let mut cursor = Cursor::default();
        std::iter::from_fn(move || cursor.next(&self.0))
    }

    /// Calls `f` on every change from the last to the first: decoded a
    /// block at a time from where one pass forward noted each block
    /// begins, not all held at once (a whole-file Edit's millions would
    /// be 24 bytes each).
    pub fn for_each_rev(&self, mut f: impl FnMut(Spot)) {
        const STEP: usize = 4096;
        let mut starts = Vec::new();
        let mut cursor = Cursor::default();
        loop {
            let start = cursor;
            if cursor.next(&self.0).is_none() {
                break;
            }
            starts.push(start);
            for _ in 1..STEP {
                if cursor.next(&self.0).is_none() {
                    break;
                }
            }
        }
        let mut block = Vec::with_capacity(STEP);
        for mut cursor in starts.into_iter().rev() {
            block.clear();
            block.extend(std::iter::from_fn(|| cursor.next(&self.0)).take(STEP));
            block.iter().rev().for_each(|s| f(*s));
        }
    }

    /// The changes, each with its runes of `text`, which holds what they
    /// put in, one after another.
    pub fn with_texts<'a>(&'a self, text: &'a str) -> impl Iterator<Item = (Spot, &'a str)> + 'a {
        let mut rest = text;
        self.iter().map(move |s| {
            let (piece, after) = rest.split_at(crate::text::utf8::byte_of_rune(rest, s.inserted as usize));
            rest = after;
            (s, piece)
        })
    }

    /// Bytes packed.
    pub fn len_bytes(&self) -> usize {
        self.0.len()
    }

    /// Checks that the changes apply to a text of `len` runes putting in
    /// `inserted` runes in all, and returns the runes they span and how
    /// many of those they remove.
    pub fn check(&self, len: u64, inserted: u64) -> Result<Reach> {
        let bad = |why: String| Reject::BadSpots { why };
        let (mut at, mut end, mut put_in, mut removed) = (0usize, 0u64, 0u64, 0u64);
        let mut first = None;
        while at < self.0.len() {
            let mut next = || take(&self.0, &mut at).ok_or_else(|| bad("the packing is cut short".into()));
            let (gap, deleted, more) = (next()?, next()?, next()?);
            let q0 = end.checked_add(gap).filter(|q| *q <= len);
            let q1 = q0.and_then(|q| q.checked_add(deleted)).filter(|q| *q <= len);
            let (Some(q0), Some(q1)) = (q0, q1) else {
                return Err(Reject::Range {
                    q0: end.saturating_add(gap),
                    q1: end.saturating_add(gap).saturating_add(deleted),
                    len,
                });
            };
            if q0 == q1 && more == 0 {
                return Err(bad(format!("the change at {q0} removes and puts in nothing")));
            }
            first.get_or_insert(q0);
            end = q1;
            put_in = put_in.saturating_add(more);
            removed += deleted;
        }
        let Some(start) = first else { return Err(bad("there is no change".into())) };
        if put_in != inserted {
            return Err(bad(format!("they put in {put_in} runes, the text holds {inserted}")));
        }
        Ok(Reach { start, end, removed })
    }

    /// The reversal's changes: the same places, each putting back as many
    /// runes as it removed and removing what it put in.
    pub fn swapped(&self) -> Spots {
        let mut out = Vec::with_capacity(self.0.len());
        let mut end = 0;
        for s in self.iter() {
            put(&mut out, s.q0 - end);
            put(&mut out, s.inserted);
            put(&mut out, s.q1 - s.q0);
            end = s.q1;
        }
        Spots(out.into())
    }
}

impl fmt::Debug for Spots {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Spots({} bytes)", self.0.len())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn packs_and_unpacks_and_swaps_in_the_text_after() {
        let spots = [
            Spot { q0: 0, q1: 1, inserted: 3 },
            Spot { q0: 1, q1: 1, inserted: 1 },
            Spot { q0: 300, q1: 999, inserted: 0 },
        ];
        let packed = Spots::pack(spots).unwrap();
        assert_eq!(packed.iter().collect::<Vec<_>>(), spots);
        assert_eq!(packed.check(1000, 4).unwrap(), Reach { start: 0, end: 999, removed: 700 });
        // After: "xxx" at 0..3, one rune at 3..4, then 299 unchanged runes.
        let back: Vec<_> = packed.swapped().iter().collect();
        assert_eq!(
            back,
            [
                Spot { q0: 0, q1: 3, inserted: 1 },
                Spot { q0: 3, q1: 4, inserted: 0 },
                Spot { q0: 303, q1: 303, inserted: 699 }
            ]
        );
        assert_eq!(packed.swapped().swapped(), packed);
    }

    /// From the last change back, over blocks of them and their edges,
    /// and over none.
    #[test]
    fn read_back_from_the_last() {
        for n in [0u64, 1, 4095, 4096, 4097, 10_000] {
            let spots: Vec<Spot> = (0..n).map(|i| Spot { q0: i * 3, q1: i * 3 + i % 3, inserted: i % 200 }).collect();
            let mut back = Vec::new();
            Spots::pack(spots.iter().copied()).unwrap().for_each_rev(|s| back.push(s));
            back.reverse();
            assert_eq!(back, spots, "{n} changes");
        }
    }

    #[test]
    fn refuses_what_does_not_fit() {
        assert!(Spots::pack([Spot { q0: 5, q1: 6, inserted: 0 }, Spot { q0: 4, q1: 4, inserted: 1 }]).is_err());
        let packed = Spots::pack([Spot { q0: 5, q1: 6, inserted: 2 }]).unwrap();
        assert!(packed.check(5, 2).is_err(), "past the end");
        assert!(packed.check(6, 1).is_err(), "the text holds another count");
        assert!(Spots(Arc::from(&[0x80u8][..])).check(10, 0).is_err(), "cut short");
        assert!(Spots(Arc::from(&[1u8, 1, 0, 0x80][..])).check(10, 0).is_err(), "cut after a change");
        assert!(Spots::pack([]).unwrap().check(10, 0).is_err(), "nothing");
        assert!(
            Spots::pack([Spot { q0: 2, q1: 2, inserted: 0 }]).unwrap().check(10, 0).is_err(),
            "a change of nothing"
        );
        let overlong = [0xffu8, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x02, 0, 1];
        assert!(Spots(Arc::from(&overlong[..])).check(u64::MAX, 1).is_err(), "past 64 bits");
    }
}
