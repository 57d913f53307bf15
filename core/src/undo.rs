//! A buffer's undo records: the changes one user action made (`Group`),
//! each reversible (`Change`), and what the undo bound counts of them.
//! `Buffer` (`buf.rs`) keeps the lists and applies them; this is what a
//! record holds and how it is stored.

use crate::id::GroupId;
use crate::spots::Spots;
use serde::{Deserialize, Serialize};

/// What a change holds besides the runes it removed, and a group besides
/// its changes, as the bound counts them: about their size in memory, so
/// a million one-rune changes are not counted as nothing.
pub(crate) const CHANGE_COST: u64 = 40;
pub(crate) const GROUP_COST: u64 = 48;

/// `Change::q0` of a rename: `removed` holds the name before it. A rename
/// is undone as acme undoes one (`fileunsetname`), and keeping it in the
/// same record keeps the stored form of undo histories as it was.
pub(crate) const RENAMED: u64 = u64::MAX;

/// `Change::q0` of a many-change record (`BufferOp::Splices`, or its
/// reversal): `spots` says where each change went, `removed` holds what
/// they removed, one after another, and `inserted` how many runes they put
/// in all told.
pub(crate) const SPOTS: u64 = u64::MAX - 1;

/// One reversible change of an undo group.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Change {
    /// Where it was made, [`RENAMED`] or [`SPOTS`].
    pub(crate) q0: u64,
    /// The runes it removed.
    pub(crate) removed: String,
    /// How many runes it put in their place.
    pub(crate) inserted: u64,
    /// Where a many-change record's changes went (`q0` is [`SPOTS`]).
    pub(crate) spots: Option<Spots>,
}

/// Encoded as its three fields, and the spots after them only when `q0`
/// is [`SPOTS`]: undo lists stored before many-change records existed
/// decode as they were, and a one-rune change costs no byte more.
impl Serialize for Change {
    fn serialize<S: serde::Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        use serde::ser::SerializeTuple;
        let mut t = s.serialize_tuple(if self.spots.is_some() { 4 } else { 3 })?;
        t.serialize_element(&self.q0)?;
        t.serialize_element(&self.removed)?;
        t.serialize_element(&self.inserted)?;
        if let Some(spots) = &self.spots {
            t.serialize_element(spots)?;
        }
        t.end()
    }
}

impl<'de> Deserialize<'de> for Change {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> std::result::Result<Change, D::Error> {
        struct Fields;
        impl<'de> serde::de::Visitor<'de> for Fields {
            type Value = Change;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("an undo record")
            }
            fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut seq: A) -> std::result::Result<Change, A::Error> {
                use serde::de::Error;
                let missing = || A::Error::custom("an undo record cut short");
                let q0: u64 = seq.next_element()?.ok_or_else(missing)?;
                let removed: String = seq.next_element()?.ok_or_else(missing)?;
                let inserted: u64 = seq.next_element()?.ok_or_else(missing)?;
                let spots = match q0 == SPOTS {
                    true => Some(seq.next_element::<Spots>()?.ok_or_else(missing)?),
                    false => None,
                };
                Ok(Change { q0, removed, inserted, spots })
            }
        }
        d.deserialize_tuple(4, Fields)
    }
}

impl Change {
    /// What it holds, as the undo bound counts it.
    pub(crate) fn cost(&self) -> u64 {
        CHANGE_COST + self.removed.len() as u64 + self.spots.as_ref().map_or(0, |s| s.len_bytes() as u64)
    }

    /// Folds `next`, made right after `self` in the same group, into
    /// `self` when the two are one run: an insert continuing where the last
    /// one ended, or a delete ending where the last one began (backspace)
    /// or starting where it did (forward delete). Reversing the merged
    /// change restores exactly what reversing both would.
    pub(crate) fn coalesce(&mut self, next: &Change) -> bool {
        if [RENAMED, SPOTS].contains(&self.q0) || [RENAMED, SPOTS].contains(&next.q0) {
            return false;
        }
        let pure_insert = |c: &Change| c.removed.is_empty() && c.inserted > 0;
        let pure_delete = |c: &Change| !c.removed.is_empty() && c.inserted == 0;
        if pure_insert(self) && pure_insert(next) && next.q0 == self.q0 + self.inserted {
            self.inserted += next.inserted;
            return true;
        }
        if pure_delete(self) && pure_delete(next) {
            if next.q0 == self.q0 {
                self.removed.push_str(&next.removed);
                return true;
            }
            if next.q0 + next.removed.chars().count() as u64 == self.q0 {
                self.removed.insert_str(0, &next.removed);
                self.q0 = next.q0;
                return true;
            }
        }
        false
    }
}

/// The changes one user action made.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Group {
    /// The id from the `Mark` that started it, if any.
    pub(crate) id: Option<GroupId>,
    /// Unique within the buffer; `clean_at` names a group by it.
    pub(crate) serial: u64,
    pub(crate) changes: Vec<Change>,
}

impl Group {
    /// What the group holds, as the undo bound counts it.
    pub(crate) fn cost(&self) -> u64 {
        GROUP_COST + self.changes.iter().map(Change::cost).sum::<u64>()
    }
}
