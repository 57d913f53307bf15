//! A buffer's undo records: the changes one user action made (`Group`),
//! each reversible (`Change`), and what the undo bound counts of them.
//! `Buffer` (`buf.rs`) keeps the lists and applies them; this is what a
//! record holds and how it is stored.

use crate::id::GroupId;
use crate::spots::{Reach, Spots};
use crate::text::Removed;
use ropey::Rope;
use serde::{Deserialize, Serialize};
use std::borrow::Cow;
use std::fmt;

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

/// The fewest runes a many-change record's changes span for it to keep
/// that text whole rather than copy what they removed: below it a copy
/// costs less than the rope's nodes.
const KEEP_SPAN_FROM: u64 = 64 * 1024;

/// Whether a many-change record may keep the text its changes spanned
/// whole ([`Kept`]) rather than a copy of the runes they removed: when
/// they remove at least half of its runes (`,y/\n/c/ /` removes nearly
/// all of a file). It does if they remove half of its bytes too
/// ([`keeps_bytes`], known once the span is out), so that what is kept
/// is at most twice the text the bound counts. Decided by the changes
/// and the text alone, so every replica decides alike (not that it
/// shows: the two are stored, counted and compared as one).
pub(crate) fn keeps_span(reach: Reach) -> bool {
    let span = reach.end - reach.start;
    span >= KEEP_SPAN_FROM && reach.removed.saturating_mul(2) >= span
}

/// Whether a span of `span` bytes, of which the changes removed `removed`,
/// is kept ([`keeps_span`]): not where what lies between the runes removed
/// is of many bytes a rune (one ASCII rune removed in every two, the
/// other CJK, would keep four times what is counted).
pub(crate) fn keeps_bytes(span: u64, removed: u64) -> bool {
    removed.saturating_mul(2) >= span
}

/// One reversible change of an undo group.
#[derive(Clone, Debug)]
pub(crate) struct Change {
    /// Where it was made, [`RENAMED`] or [`SPOTS`].
    pub(crate) q0: u64,
    /// The runes it removed (none held here when `kept` holds them).
    pub(crate) removed: String,
    /// How many runes it put in their place.
    pub(crate) inserted: u64,
    /// Where a many-change record's changes went (`q0` is [`SPOTS`]).
    pub(crate) spots: Option<Spots>,
    /// A many-change record's text from its first change's start to its
    /// last one's end, as it was: kept whole, its rope's nodes taken out of
    /// the text, rather than the runes removed copied out of them (a 100
    /// MB copy for a `,y/\n/c/ /`, and an Undo that builds the text again
    /// where this puts it back). Never stored: a record is encoded with
    /// the runes removed, as one holding them, and decoded as one.
    /// Boxed: a keystroke's record costs a pointer's room for it.
    pub(crate) kept: Option<Box<Kept>>,
}

/// What a many-change record keeps in place of the runes it removed.
#[derive(Clone, Debug)]
pub(crate) struct Kept {
    /// The text its changes spanned, as it was.
    pub(crate) text: Rope,
    /// The runes and the bytes the changes removed of it.
    pub(crate) runes: u64,
    pub(crate) bytes: u64,
}

/// Equal when they reverse alike: a record keeping its span equals one
/// holding the runes removed from it.
impl PartialEq for Change {
    fn eq(&self, other: &Change) -> bool {
        (self.q0, self.inserted, &self.spots) == (other.q0, other.inserted, &other.spots)
            && self.removed_runes() == other.removed_runes()
            && self.removed_text() == other.removed_text()
    }
}

impl Eq for Change {}

/// Encoded as its three fields, and the spots after them only when `q0`
/// is [`SPOTS`]: undo lists stored before many-change records existed
/// decode as they were, and a one-rune change costs no byte more.
impl Serialize for Change {
    fn serialize<S: serde::Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        use serde::ser::SerializeTuple;
        let mut t = s.serialize_tuple(if self.spots.is_some() { 4 } else { 3 })?;
        t.serialize_element(&self.q0)?;
        match (&self.kept, &self.spots) {
            (Some(kept), Some(spots)) => t.serialize_element(&Streamed(&kept.text, spots))?,
            _ => t.serialize_element(&self.removed)?,
        }
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
                Ok(Change { q0, removed, inserted, spots, kept: None })
            }
        }
        d.deserialize_tuple(4, Fields)
    }
}

/// The runes a kept span's changes removed, encoded as the string they
/// make but streamed out of the span, not copied into one first (a
/// snapshot, the state's hash and a Welcome encode every record).
struct Streamed<'a>(&'a Rope, &'a Spots);

impl fmt::Display for Streamed<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut written = Ok(());
        crate::text::each_removed(self.0, self.1, |piece| {
            if written.is_ok() {
                written = f.write_str(piece);
            }
        });
        written
    }
}

impl Serialize for Streamed<'_> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl Change {
    /// A change of one place (`q0`, or [`RENAMED`]).
    pub(crate) fn plain(q0: u64, removed: String, inserted: u64) -> Change {
        Change { q0, removed, inserted, spots: None, kept: None }
    }

    /// A many-change record: `spots`, which removed `runes` runes and put
    /// in `inserted`.
    pub(crate) fn of_spots(spots: Spots, removed: Removed, runes: u64, inserted: u64) -> Change {
        let (removed, kept) = match removed {
            Removed::Runes(removed) => (removed, None),
            Removed::Span { text, bytes } => (String::new(), Some(Box::new(Kept { text, runes, bytes }))),
        };
        Change { q0: SPOTS, removed, inserted, spots: Some(spots), kept }
    }

    /// How many runes it removed.
    pub(crate) fn removed_runes(&self) -> u64 {
        match &self.kept {
            Some(kept) => kept.runes,
            None => self.removed.chars().count() as u64,
        }
    }

    /// The runes it removed, one after another: read out of the span it
    /// kept, if it kept one.
    pub(crate) fn removed_text(&self) -> Cow<'_, str> {
        match (&self.kept, &self.spots) {
            (Some(kept), Some(spots)) => Cow::Owned(crate::text::removed_from(&kept.text, spots)),
            _ => Cow::Borrowed(&self.removed),
        }
    }

    /// What it holds, as the undo bound counts it: the runes removed, as
    /// if copied, whether or not they are (a record keeping its span holds
    /// at most twice that, [`keeps_span`]).
    pub(crate) fn cost(&self) -> u64 {
        let removed = self.kept.as_ref().map_or(self.removed.len() as u64, |k| k.bytes);
        CHANGE_COST + removed + self.spots.as_ref().map_or(0, |s| s.len_bytes() as u64)
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

#[cfg(test)]
mod tests {
    use super::*;

    /// From 64 Ki runes spanned, half of them removed.
    #[test]
    fn a_span_may_be_kept_from_64_ki_runes_half_removed() {
        let reach = |end: u64, removed: u64| Reach { start: 10, end: 10 + end, removed };
        assert!(keeps_span(reach(KEEP_SPAN_FROM, KEEP_SPAN_FROM / 2)));
        assert!(!keeps_span(reach(KEEP_SPAN_FROM - 1, KEEP_SPAN_FROM)), "too short a span");
        assert!(!keeps_span(reach(KEEP_SPAN_FROM, KEEP_SPAN_FROM / 2 - 1)), "less than half removed");
        assert!(keeps_bytes(100, 50) && !keeps_bytes(100, 49));
    }

    /// A keystroke's record pays a pointer's room for a kept span, not
    /// the span's: typing makes records by the million.
    #[test]
    fn a_record_holds_a_kept_span_by_a_pointer() {
        let fields = std::mem::size_of::<(u64, String, u64, Option<Spots>)>();
        assert!(std::mem::size_of::<Change>() <= fields + 8, "{} bytes", std::mem::size_of::<Change>());
    }
}
