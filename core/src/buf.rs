//! `Buffer`: one text, the views on it, its recent edits and its undo list.
//!
//! Everything a buffer shard's entries change lives here, so that any
//! replica, and any leader after leadership moves, can rebase a proposal or
//! undo an edit exactly as every other would: the history is in the state,
//! not in one UI.
//!
//! Structure of the undo list. `undo` is a stack of groups; a group is the
//! changes one user action made, in the order they were made. A `Mark` op
//! starts a new group. Each change records the runes it removed and how many
//! it inserted at `q0`, which is all it takes to reverse it (an insert keeps
//! no copy of its text; reversing takes the text back out of the rope).
//! Undoing a group reverses its changes last to first and pushes the group,
//! now holding the reversals, onto `redo`; redo does the same the other way.
//! A fresh edit clears `redo`, as in acme.
//!
//! The lists are bounded by bytes ([`Buffer::undo_bytes`]): past the
//! buffer's limit (256 MiB unless an `UndoLimit` op set it, and never
//! below four times the body's size) the oldest groups go first, then the
//! redo groups furthest from now; the newest undo group always stays, so
//! even an Edit of a million changes can be undone. The count is derived
//! from the groups, not stored, and the rule is `apply`'s, so every
//! replica drops the same groups at the same entry.

use crate::error::{Reject, Result};
use crate::id::{AttachmentId, GroupId};
use crate::op::{Action, BufferOp};
use crate::shard::ViewId;
use crate::spots::{Reach, Spots};
use crate::text::{Removed, Text};
use crate::undo::{Change, Group, Kept, CHANGE_COST, GROUP_COST, RENAMED};
use crate::view::{point_after_splice, View};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, VecDeque};
use std::sync::Arc;

/// Edits each buffer keeps for rebasing proposals made at older versions.
pub const HISTORY_LIMIT: usize = 10_000;

/// The bytes of undo and redo history a buffer keeps unless told
/// otherwise (`BufferOp::UndoLimit`); a larger body raises it to four times
/// its size.
pub const UNDO_LIMIT: u64 = 256 << 20;

/// One retained edit: runes `q0..q0+deleted` became `inserted` runes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Edit {
    pub q0: u64,
    pub deleted: u64,
    pub inserted: u64,
    /// A later change of the same op (an undo or redo makes several): a
    /// reader of events finds each op's changes in the history by it.
    pub continues: bool,
    /// A many-change edit's changes (`q0..q0+deleted` is the runes they
    /// span): a point rebased through it moves by each, as views do.
    pub spots: Option<Spots>,
}

impl Edit {
    /// Where point `p`, before this edit, is after it.
    pub fn moved(&self, p: u64) -> u64 {
        match &self.spots {
            Some(spots) if p > self.q0 && p <= self.q0 + self.deleted => {
                let mut p = p;
                spots.for_each_rev(|s| p = point_after_splice(p, s.q0, s.q1 - s.q0, s.inserted));
                p
            }
            _ => point_after_splice(p, self.q0, self.deleted, self.inserted),
        }
    }
}

/// `Edit::q0` as stored for a many-change edit, whose start its first
/// change says: histories stored before such edits decode as they were.
const STORED_SPOTS: u64 = u64::MAX;

impl Serialize for Edit {
    fn serialize<S: serde::Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        use serde::ser::SerializeTuple;
        let mut t = s.serialize_tuple(if self.spots.is_some() { 5 } else { 4 })?;
        t.serialize_element(&if self.spots.is_some() { STORED_SPOTS } else { self.q0 })?;
        t.serialize_element(&self.deleted)?;
        t.serialize_element(&self.inserted)?;
        t.serialize_element(&self.continues)?;
        if let Some(spots) = &self.spots {
            t.serialize_element(spots)?;
        }
        t.end()
    }
}

impl<'de> Deserialize<'de> for Edit {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> std::result::Result<Edit, D::Error> {
        struct Fields;
        impl<'de> serde::de::Visitor<'de> for Fields {
            type Value = Edit;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("an edit of the history")
            }
            fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut seq: A) -> std::result::Result<Edit, A::Error> {
                use serde::de::Error;
                let missing = || A::Error::custom("an edit of the history cut short");
                let q0: u64 = seq.next_element()?.ok_or_else(missing)?;
                let deleted: u64 = seq.next_element()?.ok_or_else(missing)?;
                let inserted: u64 = seq.next_element()?.ok_or_else(missing)?;
                let continues: bool = seq.next_element()?.ok_or_else(missing)?;
                if q0 != STORED_SPOTS {
                    return Ok(Edit { q0, deleted, inserted, continues, spots: None });
                }
                let spots: Spots = seq.next_element()?.ok_or_else(missing)?;
                let q0 = spots.iter().next().map_or(0, |s| s.q0);
                Ok(Edit { q0, deleted, inserted, continues, spots: Some(spots) })
            }
        }
        d.deserialize_tuple(5, Fields)
    }
}

/// Which button acted, for the last recorded action.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum ActionKind {
    Exec,
    Look,
}

/// A buffer: the state of one buffer shard.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Buffer {
    /// File name (acme's tag file name), possibly empty.
    pub name: String,
    pub text: Text,
    /// Length of `text` in runes, kept here because the rope computes its
    /// own by summing its root's children, on the path of every edit.
    /// Derived, so not encoded: `restore` sets it after decoding.
    #[serde(skip)]
    len: u64,
    /// Number of splices applied; a proposal names the version it saw.
    pub version: u64,
    /// Every text showing this buffer, with its selection and origin.
    pub views: BTreeMap<ViewId, View>,
    /// Modified since the last `Clean`.
    pub dirty: bool,
    /// The last `HISTORY_LIMIT` edits, oldest first.
    history: VecDeque<Edit>,
    /// Groups are shared, not copied, by a copy of the state (a snapshot,
    /// a Welcome, a built-in's view): copying one costs a pointer per
    /// group whatever text the groups hold. Encoded as the groups.
    undo: Vec<Arc<Group>>,
    redo: Vec<Arc<Group>>,
    next_serial: u64,
    /// Serial of the top undo group when the buffer was last clean (0: no
    /// group); `None` once marked dirty by hand.
    clean_at: Option<u64>,
    /// The last B2/B3 action sequenced on this buffer.
    pub last_action: Option<(ActionKind, Action)>,
    /// Highest undo-group counter each attachment has marked here.
    pub group_marks: BTreeMap<AttachmentId, u64>,
    /// The most bytes of undo and redo history kept (if the body's four
    /// times is not more). Last: snapshots before format 3 end without it.
    #[serde(deserialize_with = "undo_limit_as_stored")]
    undo_limit: u64,
    /// What `undo` and `redo` hold, as [`Group::cost`] counts it. Derived,
    /// so not encoded: `restore` counts it after decoding.
    #[serde(skip)]
    undo_bytes: u64,
}

/// A buffer's undo limit from a snapshot: format 3's encoding holds it;
/// older ones do not, and then nothing is read and the default holds.
fn undo_limit_as_stored<'de, D: serde::Deserializer<'de>>(d: D) -> std::result::Result<u64, D::Error> {
    match crate::format::reading_format() {
        ..=2 => Ok(UNDO_LIMIT),
        _ => u64::deserialize(d),
    }
}

pub use crate::op::check_name;

/// What checking an op found that applying it uses: a many-change
/// splice's reach, or an Undo's or Redo's reversals of its many-change
/// records (one a change, from the last), each worked out once.
enum Checked {
    Nothing,
    Reach(Reach),
    Reversals(Vec<Option<(Spots, Reach)>>),
}

impl Buffer {
    /// An empty, clean buffer.
    pub fn new(name: String) -> Buffer {
        Buffer {
            name,
            text: Text::new(),
            len: 0,
            version: 0,
            views: BTreeMap::new(),
            dirty: false,
            history: VecDeque::new(),
            undo: Vec::new(),
            redo: Vec::new(),
            next_serial: 1,
            clean_at: Some(0),
            last_action: None,
            group_marks: BTreeMap::new(),
            undo_limit: UNDO_LIMIT,
            undo_bytes: 0,
        }
    }

    /// The bytes of undo and redo history held, as the bound counts them:
    /// the runes each change removed, and a little for each change and
    /// group.
    pub fn undo_bytes(&self) -> u64 {
        self.undo_bytes
    }

    /// The undo bound set for this buffer ([`UNDO_LIMIT`] unless changed);
    /// the history may grow to four times the body's size if that is more.
    pub fn undo_limit(&self) -> u64 {
        self.undo_limit
    }

    /// Length in runes.
    pub fn len(&self) -> u64 {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The runes `q0..q1` as a string.
    pub fn slice(&self, q0: u64, q1: u64) -> Result<String> {
        self.check_range(q0, q1)?;
        Ok(self.text.slice(q0 as usize..q1 as usize).to_string())
    }

    /// Whether `q0..q1` is a range of this text.
    pub fn check_range(&self, q0: u64, q1: u64) -> Result<()> {
        if q0 <= q1 && q1 <= self.len() {
            Ok(())
        } else {
            Err(Reject::Range { q0, q1, len: self.len() })
        }
    }

    /// The edits that took the buffer from `version` to now, oldest first,
    /// if they are still kept.
    pub fn edits_since(&self, version: u64) -> Option<impl Iterator<Item = &Edit>> {
        let oldest = self.oldest_version();
        (oldest..=self.version).contains(&version).then(|| self.history.iter().skip((version - oldest) as usize))
    }

    /// The id of the newest undo group, if a `Mark` began it.
    pub fn newest_group(&self) -> Option<GroupId> {
        self.undo.last().and_then(|g| g.id)
    }

    /// Whether there is an undo group to undo (acme's ctl field 9).
    pub fn can_undo(&self) -> bool {
        self.undo.iter().any(|g| !g.changes.is_empty())
    }

    /// Whether Put would write something the file does not hold as far
    /// as the buffer knows: changed, or renamed or undone since it was
    /// last clean (acme's tag shows Put while `seq != putseq`).
    pub fn differs_from_file(&self) -> bool {
        self.dirty || self.clean_at != Some(self.top_serial())
    }

    /// Whether there is an undone group to redo (acme's ctl field 10).
    pub fn can_redo(&self) -> bool {
        !self.redo.is_empty()
    }

    /// The oldest version a proposal may still be rebased from.
    pub fn oldest_version(&self) -> u64 {
        self.version - self.history.len() as u64
    }

    /// Moves point `p`, seen at `version`, through every edit since, the way
    /// views move. Refuses a version newer than the buffer's, or one whose
    /// edits are no longer retained.
    pub fn rebase(&self, version: u64, p: u64) -> Result<u64> {
        if version > self.version {
            return Err(Reject::FutureVersion { got: version, current: self.version });
        }
        let oldest = self.oldest_version();
        if version < oldest {
            return Err(Reject::StaleVersion { got: version, oldest });
        }
        let skip = (version - oldest) as usize;
        Ok(self.history.iter().skip(skip).fold(p, |p, e| e.moved(p)))
    }

    /// Checks `op` against this buffer without changing it: the same
    /// conditions `apply` enforces, so a caller can refuse before sequencing.
    pub fn check(&self, op: &BufferOp) -> Result<()> {
        self.checked(op).map(|_| ())
    }

    /// As [`Buffer::check`], returning what the check found that applying
    /// the op uses.
    fn checked(&self, op: &BufferOp) -> Result<Checked> {
        let plain = match op {
            // The state creates buffers; see `State::apply`.
            BufferOp::Create { .. } => Ok(()),
            BufferOp::Splice { q0, q1, .. } => self.check_range(*q0, *q1),
            BufferOp::Splices { spots, text, .. } => {
                return spots.check(self.len, text.chars().count() as u64).map(Checked::Reach);
            }
            BufferOp::ViewAdd { view } => match self.views.contains_key(view) {
                true => Err(Reject::ViewExists { view: *view }),
                false => Ok(()),
            },
            BufferOp::ViewDel { view } | BufferOp::SetOrigin { view, .. } => {
                self.view(*view).map(|_| ())?;
                if let BufferOp::SetOrigin { org, .. } = op {
                    self.check_range(*org, *org)?;
                }
                Ok(())
            }
            BufferOp::Select { view, q0, q1 } => {
                self.view(*view)?;
                self.check_range(*q0, *q1)
            }
            BufferOp::Undo => match self.undo.iter().rev().find(|g| !g.changes.is_empty()) {
                Some(g) => return self.check_reversible(g).map(Checked::Reversals),
                None => Err(Reject::NothingToUndo),
            },
            BufferOp::Redo => match self.redo.last() {
                Some(g) => return self.check_reversible(g).map(Checked::Reversals),
                None => Err(Reject::NothingToRedo),
            },
            BufferOp::ForgetUndo | BufferOp::UndoLimit { .. } => Ok(()),
            BufferOp::ExecAt(a) | BufferOp::LookAt(a) => {
                if a.version > self.version {
                    return Err(Reject::FutureVersion { got: a.version, current: self.version });
                }
                if a.q0 > a.q1 {
                    return Err(Reject::Range { q0: a.q0, q1: a.q1, len: self.len() });
                }
                if let Some((e0, e1)) = a.expansion {
                    if e0 > e1 {
                        return Err(Reject::Range { q0: e0, q1: e1, len: self.len() });
                    }
                }
                Ok(())
            }
            BufferOp::Name { .. }
            | BufferOp::Rename { .. }
            | BufferOp::Dirty
            | BufferOp::Clean
            | BufferOp::Mark { .. } => Ok(()),
        };
        plain.map(|()| Checked::Nothing)
    }

    /// Checks that reversing `g` stays inside the text at every step, so an
    /// undo list that came from a bad snapshot is refused, not obeyed; and
    /// returns, for each change from the last, the reversal of a
    /// many-change one and what its check found.
    fn check_reversible(&self, g: &Group) -> Result<Vec<Option<(Spots, Reach)>>> {
        let mut len = self.len;
        let mut reversals = Vec::with_capacity(g.changes.len());
        for c in g.changes.iter().rev() {
            if c.q0 == RENAMED {
                reversals.push(None);
                continue;
            }
            if let Some(spots) = &c.spots {
                // The runes the changes put in come out again: as the
                // places say, which must agree with the count kept.
                let back = spots.swapped();
                let put_back = c.removed_runes();
                let reach = back.check(len, put_back)?;
                if reach.removed != c.inserted {
                    let why = format!("an undo record says {} runes went in, its places {}", c.inserted, reach.removed);
                    return Err(Reject::BadSpots { why });
                }
                len = len - reach.removed + put_back;
                reversals.push(Some((back, reach)));
                continue;
            }
            let end = c.q0.checked_add(c.inserted).filter(|e| *e <= len);
            match end {
                Some(_) => len = len - c.inserted + c.removed_runes(),
                None => return Err(Reject::Range { q0: c.q0, q1: c.q0.saturating_add(c.inserted), len }),
            }
            reversals.push(None);
        }
        Ok(reversals)
    }

    /// Sets what is derived, not encoded, after a snapshot is decoded.
    pub(crate) fn restore(&mut self) {
        self.len = self.text.len_chars() as u64;
        self.undo_bytes = self.undo.iter().chain(&self.redo).map(|g| g.cost()).sum();
    }

    /// Applies `op`. `Create` is the state's to handle and does nothing
    /// here. On error the buffer is unchanged.
    pub fn apply(&mut self, op: &BufferOp) -> Result<()> {
        let checked = self.checked(op)?;
        self.apply_checked(op, checked);
        self.bound_undo();
        Ok(())
    }

    fn apply_checked(&mut self, op: &BufferOp, checked: Checked) {
        match op {
            BufferOp::Create { .. } => {}
            BufferOp::Splice { q0, q1, text, .. } => {
                let (removed, inserted) = self.splice(*q0, *q1, text);
                self.clear_redo();
                self.record(Change::plain(*q0, removed, inserted));
                self.dirty = true;
            }
            BufferOp::Splices { spots, text, .. } => {
                let Checked::Reach(reach) = checked else { unreachable!("a splice's check finds its reach") };
                let change = self.splice_spots(spots, text, reach);
                self.clear_redo();
                self.record(change);
                self.dirty = true;
            }
            BufferOp::ViewAdd { view } => {
                self.views.insert(*view, View::default());
            }
            BufferOp::ViewDel { view } => {
                self.views.remove(view);
            }
            BufferOp::Select { view, q0, q1 } => {
                let v = self.views.get_mut(view).expect("checked");
                v.q0 = *q0;
                v.q1 = *q1;
            }
            BufferOp::SetOrigin { view, org } => {
                self.views.get_mut(view).expect("checked").org = *org;
            }
            BufferOp::Name { name } => self.name.clone_from(name),
            // A rename is a change of its own that Undo reverses, as in
            // acme (ctl's `name` marks a new undo step, then renames).
            BufferOp::Rename { name } if *name != self.name => {
                let old = std::mem::replace(&mut self.name, name.clone());
                self.clear_redo();
                let serial = self.take_serial();
                let change = Change::plain(RENAMED, old, 0);
                self.push_undo(Group { id: None, serial, changes: vec![change] });
            }
            BufferOp::Rename { .. } => {}
            BufferOp::Dirty => {
                self.dirty = true;
                self.clean_at = None;
            }
            BufferOp::Clean => {
                self.dirty = false;
                self.clean_at = Some(self.top_serial());
            }
            BufferOp::Mark { group } => {
                self.mark(*group);
                crate::id::mark(&mut self.group_marks, group.issuer(), group.counter());
            }
            BufferOp::Undo => {
                // Empty groups above the one undone go with it.
                while self.undo.last().is_some_and(|g| g.changes.is_empty()) {
                    self.undo.pop();
                    self.undo_bytes -= GROUP_COST;
                }
                let g = self.undo.pop().expect("checked");
                self.undo_bytes -= g.cost();
                let g = self.reverse(Arc::unwrap_or_clone(g), checked);
                self.undo_bytes += g.cost();
                self.redo.push(Arc::new(g));
                self.dirty = self.clean_at != Some(self.top_serial());
            }
            BufferOp::Redo => {
                let g = self.redo.pop().expect("checked");
                self.undo_bytes -= g.cost();
                let g = self.reverse(Arc::unwrap_or_clone(g), checked);
                self.push_undo(g);
                self.dirty = self.clean_at != Some(self.top_serial());
            }
            BufferOp::ForgetUndo => {
                self.undo.clear();
                self.redo.clear();
                self.undo_bytes = 0;
                self.clean_at = (!self.dirty).then_some(0);
            }
            BufferOp::ExecAt(a) => self.last_action = Some((ActionKind::Exec, (**a).clone())),
            BufferOp::LookAt(a) => self.last_action = Some((ActionKind::Look, (**a).clone())),
            BufferOp::UndoLimit { bytes } => self.undo_limit = *bytes,
        }
    }

    fn push_undo(&mut self, g: Group) {
        self.undo_bytes += g.cost();
        self.undo.push(Arc::new(g));
    }

    fn clear_redo(&mut self) {
        self.undo_bytes -= self.redo.iter().map(|g| g.cost()).sum::<u64>();
        self.redo.clear();
    }

    /// Drops the oldest undo groups, then the redo groups furthest from
    /// now, while the history holds more than the bound; never the newest
    /// group with changes, nor the next redo.
    fn bound_undo(&mut self) {
        if self.undo_bytes <= self.undo_limit {
            return;
        }
        let bound = self.undo_limit.max((self.text.len_bytes() as u64).saturating_mul(4));
        if self.undo_bytes <= bound {
            return;
        }
        let newest = self.undo.iter().rposition(|g| !g.changes.is_empty()).unwrap_or(self.undo.len());
        let mut dropped_serial = None;
        let mut n = 0;
        while n < newest && self.undo_bytes > bound {
            let g = &self.undo[n];
            self.undo_bytes -= g.cost();
            if !g.changes.is_empty() {
                dropped_serial = Some(g.serial);
            }
            n += 1;
        }
        self.undo.drain(..n);
        let next_redo = self.redo.len().saturating_sub(1);
        let mut n = 0;
        while n < next_redo && self.undo_bytes > bound {
            self.undo_bytes -= self.redo[n].cost();
            n += 1;
        }
        self.redo.drain(..n);
        // With every group left undone, the text is now as the newest
        // dropped group left it: clean there if the file was, and the
        // text before it can no longer be reached.
        if let Some(s) = dropped_serial {
            self.clean_at = match self.clean_at {
                Some(c) if c == s => Some(0),
                Some(0) => None,
                other => other,
            };
        }
    }

    /// Replaces runes `q0..q1` with `text`, moves every view, records the
    /// edit for rebasing and returns the removed runes and how many runes
    /// went in.
    fn splice(&mut self, q0: u64, q1: u64, text: &str) -> (String, u64) {
        // Counting the runes of `text` is cheaper than asking the rope its
        // length twice (a rope sums its root's children for that).
        let inserted = text.chars().count() as u64;
        let removed = self.text.splice_counted(q0 as usize, q1 as usize, text, inserted as usize);
        let deleted = q1 - q0;
        self.len = self.len - deleted + inserted;
        for v in self.views.values_mut() {
            v.splice(q0, deleted, inserted);
        }
        if self.history.len() == HISTORY_LIMIT {
            self.history.pop_front();
        }
        self.history.push_back(Edit { q0, deleted, inserted, continues: false, spots: None });
        self.version = self.version.saturating_add(1);
        (removed, inserted)
    }

    /// Makes every change of `spots` (checked: `reach` is what its check
    /// found) with `text` holding what they put in, and returns the
    /// change's undo record.
    fn splice_spots(&mut self, spots: &Spots, text: &str, reach: Reach) -> Change {
        let (removed, _) = self.text.splice_many(spots, text, crate::undo::keeps_span(reach));
        let removed = kept_or_copied(removed, spots);
        let inserted = text.chars().count() as u64;
        self.spliced_spots(spots, reach, inserted);
        Change::of_spots(spots.clone(), removed, reach.removed, inserted)
    }

    /// Reverses a many-change record that kept what its changes spanned:
    /// `back`, their reversal (checked: `reach`), takes out what they put
    /// in and `kept` goes back in its place whole. Returns the reversal's
    /// undo record.
    fn swap_spots(&mut self, back: &Spots, reach: Reach, kept: Kept) -> Change {
        // What comes out is what the changes put in; what goes back, what
        // they spanned: the runes between them are in both alike.
        debug_assert_eq!(kept.text.len_chars() as u64, reach.end - reach.start - reach.removed + kept.runes);
        let between = kept.text.len_bytes() as u64 - kept.bytes;
        let now = self.text.swap_span(reach.start as usize, reach.end as usize, kept.text);
        let removed = match crate::undo::keeps_span(reach) {
            true => kept_or_copied(Removed::Span { bytes: now.len_bytes() as u64 - between, text: now }, back),
            false => Removed::Runes(crate::text::removed_from(&now, back)),
        };
        self.spliced_spots(back, reach, kept.runes);
        Change::of_spots(back.clone(), removed, reach.removed, kept.runes)
    }

    /// What follows the text's changes in [`Buffer::splice_spots`] and
    /// [`Buffer::swap_spots`]: moves every view as the changes made one at
    /// a time from the last would, and records one edit, from the first
    /// change's start to the last one's end, for rebasing.
    fn spliced_spots(&mut self, spots: &Spots, reach: Reach, inserted: u64) {
        let Reach { start, end, removed: deleted } = reach;
        // A point at or before the first change stays, one past the last
        // moves by what they all did; only a view with a point among them
        // goes through them one at a time.
        let moved = |p: u64| match p {
            p if p <= start => Some(p),
            p if p > end => Some(p - deleted + inserted),
            _ => None,
        };
        for v in self.views.values_mut() {
            match (moved(v.q0), moved(v.q1), moved(v.org)) {
                (Some(q0), Some(q1), Some(org)) => *v = View { q0, q1, org },
                _ => spots.for_each_rev(|s| v.splice(s.q0, s.q1 - s.q0, s.inserted)),
            }
        }
        self.len = self.len - deleted + inserted;
        if self.history.len() == HISTORY_LIMIT {
            self.history.pop_front();
        }
        let span = end - start;
        self.history.push_back(Edit {
            q0: start,
            deleted: span,
            inserted: span - deleted + inserted,
            continues: false,
            spots: Some(spots.clone()),
        });
        self.version = self.version.saturating_add(1);
    }

    /// An edit of nothing, so that an op that changed no text still has
    /// its place in the history and the version.
    fn no_edit(&mut self) {
        if self.history.len() == HISTORY_LIMIT {
            self.history.pop_front();
        }
        self.history.push_back(Edit { q0: 0, deleted: 0, inserted: 0, continues: false, spots: None });
        self.version = self.version.saturating_add(1);
    }

    fn record(&mut self, change: Change) {
        // A rename stays a step of its own.
        let after_rename = self.undo.last().is_some_and(|g| g.changes.last().is_some_and(|c| c.q0 == RENAMED));
        if self.undo.is_empty() || after_rename {
            let serial = self.take_serial();
            self.push_undo(Group { id: None, serial, changes: Vec::new() });
        }
        // Copied first only if a copy of the state shares it.
        let changes = &mut Arc::make_mut(self.undo.last_mut().expect("just ensured")).changes;
        // Typing and backspacing make runs of adjacent changes; one change
        // per run undoes the same and keeps the list small.
        self.undo_bytes += change.cost() - CHANGE_COST;
        if let Some(prev) = changes.last_mut() {
            if prev.coalesce(&change) {
                return;
            }
        }
        changes.push(change);
        self.undo_bytes += CHANGE_COST;
    }

    fn mark(&mut self, id: GroupId) {
        match self.undo.last_mut() {
            // An empty group takes the new mark rather than stacking up.
            Some(g) if g.changes.is_empty() => Arc::make_mut(g).id = Some(id),
            _ => {
                let serial = self.take_serial();
                self.push_undo(Group { id: Some(id), serial, changes: Vec::new() });
            }
        }
    }

    fn take_serial(&mut self) -> u64 {
        let s = self.next_serial;
        self.next_serial = self.next_serial.saturating_add(1);
        s
    }

    /// Serial of the newest undo group with changes (0 if none).
    fn top_serial(&self) -> u64 {
        self.undo.iter().rev().find(|g| !g.changes.is_empty()).map_or(0, |g| g.serial)
    }

    /// Reverses a group's changes, last first, returning the group of
    /// reversals (which, reversed again, redoes them). `checked` holds
    /// what checking it found ([`Buffer::check_reversible`]).
    fn reverse(&mut self, g: Group, checked: Checked) -> Group {
        let Checked::Reversals(reversals) = checked else { unreachable!("an undo's check finds its reversals") };
        let mut back = Vec::with_capacity(g.changes.len());
        let mut spliced = 0;
        for (c, reversal) in g.changes.into_iter().rev().zip(reversals) {
            if c.q0 == RENAMED {
                let now = std::mem::replace(&mut self.name, c.removed);
                back.push(Change::plain(RENAMED, now, 0));
                continue;
            }
            let change = match (reversal, c.kept) {
                (Some((spots, reach)), Some(kept)) => self.swap_spots(&spots, reach, *kept),
                (Some((spots, reach)), None) => self.splice_spots(&spots, &c.removed, reach),
                _ => {
                    let (removed, inserted) = self.splice(c.q0, c.q0 + c.inserted, &c.removed);
                    Change::plain(c.q0, removed, inserted)
                }
            };
            spliced += 1;
            if spliced > 1 {
                if let Some(e) = self.history.back_mut() {
                    e.continues = true;
                }
            }
            back.push(change);
        }
        if spliced == 0 {
            // An undone rename changes no text, but a reader of events
            // finds each undo's edits in the history: it gets an empty one.
            self.no_edit();
        }
        Group { id: g.id, serial: g.serial, changes: back }
    }

    /// The view `view`, or a clear error.
    pub fn view(&self, view: ViewId) -> Result<&View> {
        self.views.get(&view).ok_or(Reject::NoView { view })
    }
}

/// What a many-change record holds of what `spots` removed: the span it
/// kept, unless the runes removed are less than half of the span's bytes
/// ([`crate::undo::keeps_bytes`]), then a copy of them.
fn kept_or_copied(removed: Removed, spots: &Spots) -> Removed {
    match removed {
        Removed::Span { text, bytes } if !crate::undo::keeps_bytes(text.len_bytes() as u64, bytes) => {
            Removed::Runes(crate::text::removed_from(&text, spots))
        }
        removed => removed,
    }
}

#[cfg(test)]
mod tests;
