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
use crate::spots::Spots;
use crate::text::Text;
use crate::undo::{Change, Group, CHANGE_COST, GROUP_COST, RENAMED, SPOTS};
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
        match op {
            // The state creates buffers; see `State::apply`.
            BufferOp::Create { .. } => Ok(()),
            BufferOp::Splice { q0, q1, .. } => self.check_range(*q0, *q1),
            BufferOp::Splices { spots, text, .. } => spots.check(self.len, text.chars().count() as u64).map(|_| ()),
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
                Some(g) => self.check_reversible(g),
                None => Err(Reject::NothingToUndo),
            },
            BufferOp::Redo => match self.redo.last() {
                Some(g) => self.check_reversible(g),
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
        }
    }

    /// Checks that reversing `g` stays inside the text at every step, so an
    /// undo list that came from a bad snapshot is refused, not obeyed.
    fn check_reversible(&self, g: &Group) -> Result<()> {
        let mut len = self.len;
        for c in g.changes.iter().rev().filter(|c| c.q0 != RENAMED) {
            if let Some(spots) = &c.spots {
                // The runes the changes put in come out again: as the
                // places say, which must agree with the count kept.
                let back = spots.swapped();
                let put_back = c.removed.chars().count() as u64;
                back.check(len, put_back)?;
                let taken: u64 = spots.iter().map(|s| s.inserted).sum();
                if taken != c.inserted {
                    let why = format!("an undo record says {} runes went in, its places {taken}", c.inserted);
                    return Err(Reject::BadSpots { why });
                }
                len = len.saturating_sub(taken) + put_back;
                continue;
            }
            let end = c.q0.checked_add(c.inserted).filter(|e| *e <= len);
            match end {
                Some(_) => len = len - c.inserted + c.removed.chars().count() as u64,
                None => return Err(Reject::Range { q0: c.q0, q1: c.q0.saturating_add(c.inserted), len }),
            }
        }
        Ok(())
    }

    /// Sets what is derived, not encoded, after a snapshot is decoded.
    pub(crate) fn restore(&mut self) {
        self.len = self.text.len_chars() as u64;
        self.undo_bytes = self.undo.iter().chain(&self.redo).map(|g| g.cost()).sum();
    }

    /// Applies `op`. `Create` is the state's to handle and does nothing
    /// here. On error the buffer is unchanged.
    pub fn apply(&mut self, op: &BufferOp) -> Result<()> {
        self.check(op)?;
        self.apply_checked(op);
        self.bound_undo();
        Ok(())
    }

    fn apply_checked(&mut self, op: &BufferOp) {
        match op {
            BufferOp::Create { .. } => {}
            BufferOp::Splice { q0, q1, text, .. } => {
                let (removed, inserted) = self.splice(*q0, *q1, text);
                self.clear_redo();
                self.record(Change { q0: *q0, removed, inserted, spots: None });
                self.dirty = true;
            }
            BufferOp::Splices { spots, text, .. } => {
                let (removed, inserted) = self.splice_spots(spots, text);
                self.clear_redo();
                self.record(Change { q0: SPOTS, removed, inserted, spots: Some(spots.clone()) });
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
                let change = Change { q0: RENAMED, removed: old, inserted: 0, spots: None };
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
                let g = self.reverse(Arc::unwrap_or_clone(g));
                self.undo_bytes += g.cost();
                self.redo.push(Arc::new(g));
                self.dirty = self.clean_at != Some(self.top_serial());
            }
            BufferOp::Redo => {
                let g = self.redo.pop().expect("checked");
                self.undo_bytes -= g.cost();
                let g = self.reverse(Arc::unwrap_or_clone(g));
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

    /// Makes every change of `spots` (checked), moves every view as the
    /// changes made one at a time from the last would, and records one
    /// edit, from the first change's start to the last one's end, for
    /// rebasing; returns the removed runes, one after another, and how
    /// many runes went in.
    fn splice_spots(&mut self, spots: &Spots, text: &str) -> (String, u64) {
        let (removed, end) = self.text.splice_many(spots, text);
        let start = spots.iter().next().map_or(0, |s| s.q0);
        let inserted = text.chars().count() as u64;
        let deleted = removed.chars().count() as u64;
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
        (removed, inserted)
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
    /// reversals (which, reversed again, redoes them).
    fn reverse(&mut self, g: Group) -> Group {
        let mut back = Vec::with_capacity(g.changes.len());
        let mut spliced = 0;
        for c in g.changes.into_iter().rev() {
            if c.q0 == RENAMED {
                let now = std::mem::replace(&mut self.name, c.removed);
                back.push(Change { q0: RENAMED, removed: now, inserted: 0, spots: None });
                continue;
            }
            let change = match &c.spots {
                Some(spots) => {
                    let spots = spots.swapped();
                    let (removed, inserted) = self.splice_spots(&spots, &c.removed);
                    Change { q0: SPOTS, removed, inserted, spots: Some(spots) }
                }
                None => {
                    let (removed, inserted) = self.splice(c.q0, c.q0 + c.inserted, &c.removed);
                    Change { q0: c.q0, inserted, removed, spots: None }
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::id::GroupId;
    use crate::op::Origin;

    fn splice(b: &mut Buffer, q0: u64, q1: u64, text: &str) {
        b.apply(&BufferOp::Splice { q0, q1, text: text.into(), origin: Origin::Keyboard }).unwrap();
    }

    #[test]
    fn a_name_is_one_line_where_it_is_made() {
        let mut server = crate::Node::server();
        let before = server.state.hash();
        assert!(matches!(server.create_buffer_as("x\ny"), Err(Reject::BadName { .. })));
        assert_eq!(server.state.hash(), before, "no shard made for it");
        let b = server.create_buffer_as("/a").unwrap();
        let rename = |name: &str| crate::Op::Buffer(BufferOp::Rename { name: name.into() });
        let refused = server.append(crate::Shard::Buffer(b), rename("/a\nb"));
        assert!(matches!(refused, Err(Reject::BadName { .. })), "{refused:?}");
        // acme's ctl may set a tab in a name (then say it is bad).
        server.append(crate::Shard::Buffer(b), rename("/a\tb")).unwrap();
        // A log written before the rule replays: applying takes its names.
        let mut old = Buffer::new("/a".into());
        old.apply(&BufferOp::Rename { name: "/a\nb".into() }).unwrap();
        assert_eq!(old.name, "/a\nb");
    }

    #[test]
    fn a_rename_is_an_undo_step_of_its_own() {
        let mut b = Buffer::new(String::new());
        splice(&mut b, 0, 0, "abc");
        b.apply(&BufferOp::Clean).unwrap();
        assert!(!b.differs_from_file());
        b.apply(&BufferOp::Rename { name: "/a".into() }).unwrap();
        b.apply(&BufferOp::Rename { name: "/a".into() }).unwrap();
        b.apply(&BufferOp::Rename { name: "/b".into() }).unwrap();
        assert!(!b.dirty && b.differs_from_file(), "Put shows, the text is not dirty");
        b.apply(&BufferOp::Undo).unwrap();
        assert_eq!(b.name, "/a");
        b.apply(&BufferOp::Undo).unwrap();
        assert_eq!((b.name.as_str(), b.text.to_string().as_str()), ("", "abc"), "the same name twice is one step");
        assert!(!b.differs_from_file(), "back where it was clean");
        b.apply(&BufferOp::Undo).unwrap();
        assert_eq!(b.text.to_string(), "", "then the text");
        b.apply(&BufferOp::Redo).unwrap();
        let before = (b.version, b.text.to_string());
        b.apply(&BufferOp::Redo).unwrap();
        assert_eq!(b.name, "/a");
        assert_eq!((b.version, b.text.to_string()), (before.0 + 1, before.1), "an edit of nothing in the history");
        // Typing after a rename coalesces only with typing.
        b.apply(&BufferOp::Redo).unwrap();
        splice(&mut b, 3, 3, "d");
        b.apply(&BufferOp::Undo).unwrap();
        assert_eq!((b.name.as_str(), b.text.to_string().as_str()), ("/b", "abc"));
    }

    #[test]
    fn a_copy_shares_undo_groups_and_an_edit_after_copies_only_the_group_it_changes() {
        let mut b = Buffer::new("/tmp/x".into());
        let big = "x".repeat(1 << 20);
        splice(&mut b, 0, 0, &big);
        splice(&mut b, 0, 1 << 20, "");
        let copy = b.clone();
        assert_eq!(copy.undo.len(), b.undo.len());
        assert!(b.undo.iter().zip(&copy.undo).all(|(a, c)| Arc::ptr_eq(a, c)), "a copy shares every group");
        // An edit of the original changes its own top group only.
        splice(&mut b, 0, 0, "y");
        assert!(!Arc::ptr_eq(b.undo.last().unwrap(), copy.undo.last().unwrap()));
        assert_eq!(copy.undo.last().unwrap().changes.len(), 2, "the copy's group is as it was");
        assert_eq!(b.undo.last().unwrap().changes.len(), 3);
        // Each undoes to its own text.
        let (mut b, mut copy) = (b, copy);
        b.apply(&BufferOp::Undo).unwrap();
        copy.apply(&BufferOp::Undo).unwrap();
        assert_eq!((b.len(), copy.len()), (0, 0));
        b.apply(&BufferOp::Redo).unwrap();
        copy.apply(&BufferOp::Redo).unwrap();
        assert_eq!(b.text.to_string(), "y");
        assert_eq!(copy.len(), 0);
        assert_eq!(copy.redo.len(), 0);
    }

    /// What the undo and redo lists hold, counted afresh.
    fn recount(b: &Buffer) -> u64 {
        b.undo.iter().chain(&b.redo).map(|g| g.cost()).sum()
    }

    fn mark(b: &mut Buffer, n: u64) {
        b.apply(&BufferOp::Mark { group: GroupId(n) }).unwrap();
    }

    /// A many-change splice leaves the text and the views as the same
    /// changes made one at a time from the last do; Undo and Redo bring
    /// back the same texts; its undo record survives an encoding, and the
    /// undo count is a recount's.
    #[test]
    fn many_changes_at_once_are_the_changes_one_at_a_time() {
        use crate::spots::{Spot, Spots};
        let mut seed = 99u64;
        let mut next = |n: u64| {
            seed = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            (seed >> 33) % n
        };
        let view = ViewId::TopRow;
        for round in 0..400 {
            let text: String = (0..next(40)).map(|_| ['a', 'b', 'é', '\n', ' '][next(5) as usize]).collect();
            let mut one = Buffer::new("/x".into());
            splice(&mut one, 0, 0, &text);
            one.apply(&BufferOp::ViewAdd { view }).unwrap();
            let len = one.len();
            let q0 = next(len + 1);
            one.apply(&BufferOp::Select { view, q0, q1: q0 + next(len - q0 + 1) }).unwrap();
            one.apply(&BufferOp::SetOrigin { view, org: next(len + 1) }).unwrap();
            let mut many = one.clone();
            let mut changes = Vec::new();
            let mut at = 0;
            while changes.len() < 8 {
                let q0 = at + next(4);
                if q0 > len {
                    break;
                }
                let q1 = q0 + next(3).min(len - q0);
                let t = ["", "x", "ü€", "\n\n"][next(4) as usize];
                // A change of nothing is no change (the leader drops them).
                changes.push((q0, q1, if q0 == q1 && t.is_empty() { "x" } else { t }));
                at = q1;
            }
            if changes.is_empty() {
                continue;
            }
            mark(&mut one, 1);
            mark(&mut many, 1);
            let seen = (one.version, many.version);
            for (q0, q1, t) in changes.iter().rev() {
                splice(&mut one, *q0, *q1, t);
            }
            let spot = |(q0, q1, t): &(u64, u64, &str)| Spot { q0: *q0, q1: *q1, inserted: t.chars().count() as u64 };
            let spots = Spots::pack(changes.iter().map(spot)).unwrap();
            let inserted: String = changes.iter().map(|c| c.2).collect();
            many.apply(&BufferOp::Splices { spots, text: inserted, origin: Origin::OtherFile }).unwrap();
            assert_eq!(many.text.to_string(), one.text.to_string(), "round {round}: {changes:?}");
            assert_eq!((many.len(), many.views.clone()), (one.len(), one.views.clone()), "round {round}: {changes:?}");
            assert_eq!(many.undo_bytes(), recount(&many));
            for p in 0..=len {
                let (a, b) = (one.rebase(seen.0, p).unwrap(), many.rebase(seen.1, p).unwrap());
                assert_eq!(a, b, "round {round}: point {p} rebased through {changes:?}");
            }
            let mut decoded: Buffer = postcard::from_bytes(&postcard::to_allocvec(&many).unwrap()).unwrap();
            decoded.restore();
            assert_eq!(decoded, many, "round {round}: the undo record decodes as it was");
            let after = many.text.to_string();
            for b in [&mut one, &mut many, &mut decoded] {
                b.apply(&BufferOp::Undo).unwrap();
                assert_eq!(b.text.to_string(), text, "round {round}: Undo");
                b.apply(&BufferOp::Redo).unwrap();
                assert_eq!(b.text.to_string(), after, "round {round}: Redo");
                assert_eq!(b.undo_bytes(), recount(b));
            }
        }
    }

    #[test]
    fn a_many_change_splice_that_does_not_fit_changes_nothing() {
        use crate::spots::{Spot, Spots};
        let mut b = Buffer::new("/x".into());
        splice(&mut b, 0, 0, "hello");
        let before = b.clone();
        let spots = Spots::pack([Spot { q0: 1, q1: 2, inserted: 1 }, Spot { q0: 4, q1: 6, inserted: 0 }]).unwrap();
        let past_the_end = BufferOp::Splices { spots: spots.clone(), text: "x".into(), origin: Origin::OtherFile };
        assert!(matches!(b.apply(&past_the_end), Err(Reject::Range { .. })));
        let spots = Spots::pack([Spot { q0: 1, q1: 2, inserted: 1 }]).unwrap();
        let miscounted = BufferOp::Splices { spots, text: "xy".into(), origin: Origin::OtherFile };
        assert!(matches!(b.apply(&miscounted), Err(Reject::BadSpots { .. })));
        assert_eq!(b, before);
    }

    #[test]
    fn the_undo_count_follows_every_op_as_a_recount_would() {
        let mut b = Buffer::new("/x".into());
        // A small, fixed pseudo-random walk over the ops that change the
        // lists: the count kept along the way equals a recount each time.
        let mut seed = 12345u64;
        let mut next = |n: u64| {
            seed = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            (seed >> 33) % n
        };
        for i in 0..3000 {
            let len = b.len();
            let op = match next(10) {
                0..=3 => {
                    let q0 = next(len + 1);
                    let q1 = q0 + next(len - q0 + 1).min(20);
                    let text = ["", "a", "héllo", "\n", "xyz"][next(5) as usize];
                    BufferOp::Splice { q0, q1, text: text.into(), origin: Origin::Keyboard }
                }
                4 => BufferOp::Mark { group: GroupId(i) },
                5 | 6 => BufferOp::Undo,
                7 => BufferOp::Redo,
                8 => BufferOp::Rename { name: format!("/n{}", next(3)) },
                _ => BufferOp::UndoLimit { bytes: 200 + next(2000) },
            };
            let _ = b.apply(&op);
            assert_eq!(b.undo_bytes(), recount(&b), "after op {i}: {op:?}");
        }
        // What was kept still undoes, step by step, inside the text.
        while b.can_undo() {
            b.apply(&BufferOp::Undo).unwrap();
        }
        b.apply(&BufferOp::ForgetUndo).unwrap();
        assert_eq!(b.undo_bytes(), 0);
    }

    #[test]
    fn past_its_limit_a_buffer_drops_its_oldest_undo_groups_and_keeps_the_newest() {
        let mut b = Buffer::new("/x".into());
        b.apply(&BufferOp::UndoLimit { bytes: 10_000 }).unwrap();
        let block = "x".repeat(1000);
        for n in 1..=30 {
            // Truncate and write again, as the 300 rounds did.
            mark(&mut b, n);
            let len = b.len();
            splice(&mut b, 0, len, "");
            splice(&mut b, 0, 0, &block);
        }
        assert!(b.undo_bytes() <= 10_000, "{} bytes held", b.undo_bytes());
        assert!(b.undo_bytes() > 9_000, "as much kept as the limit allows: {}", b.undo_bytes());
        assert_eq!(b.undo_bytes(), recount(&b));
        // The newest rounds undo; then there is nothing more to undo.
        let mut undone = 0;
        while b.can_undo() {
            b.apply(&BufferOp::Undo).unwrap();
            undone += 1;
        }
        assert!((5..30).contains(&undone), "{undone} rounds undone");
        assert_eq!(b.text.to_string(), block, "each kept round undoes to the block before it");
        assert!(b.differs_from_file(), "the empty text it was clean at can no longer be reached");
        // The body's size raises the bound: four times a 100 KB body.
        let mut b = Buffer::new("/y".into());
        b.apply(&BufferOp::UndoLimit { bytes: 1000 }).unwrap();
        splice(&mut b, 0, 0, &"y".repeat(100_000));
        for n in 1..=3 {
            mark(&mut b, n);
            splice(&mut b, 0, 100_000, &"z".repeat(100_000));
        }
        assert!(b.undo_bytes() > 300_000 && b.undo_bytes() <= 400_000, "{}", b.undo_bytes());
    }

    #[test]
    fn the_newest_group_stays_however_large() {
        let mut b = Buffer::new("/x".into());
        splice(&mut b, 0, 0, &"ab".repeat(5000));
        b.apply(&BufferOp::Clean).unwrap();
        b.apply(&BufferOp::UndoLimit { bytes: 100 }).unwrap();
        mark(&mut b, 1);
        // One group of 5,000 substitutions, as one Edit makes.
        for q in (0..10_000).step_by(2) {
            splice(&mut b, q, q + 1, "c");
        }
        assert!(b.undo_bytes() > 5000 * CHANGE_COST, "{}", b.undo_bytes());
        b.apply(&BufferOp::Undo).unwrap();
        assert_eq!(b.text.to_string(), "ab".repeat(5000));
        assert!(!b.differs_from_file(), "undone to where it was clean");
        // Undone, it is the next redo, which stays too.
        b.apply(&BufferOp::Redo).unwrap();
        assert_eq!(b.text.to_string(), "cb".repeat(5000));
    }

    #[test]
    fn a_snapshot_before_format_3_decodes_with_the_default_limit() {
        let mut node = crate::Node::server();
        crate::make::init_session(&mut node).unwrap();
        let w = crate::make::new_window(&mut node, None, None, "/tmp/old").unwrap();
        node.append(
            crate::Shard::Buffer(w.body),
            crate::Op::Buffer(BufferOp::Splice { q0: 0, q1: 0, text: "hello".into(), origin: Origin::Keyboard }),
        )
        .unwrap();
        let old = crate::format::older::snapshot(&node.state, 2);
        let back = crate::State::from_snapshot(&old).expect("format 2 decodes");
        assert_eq!(back.hash(), node.state.hash());
        let body = back.buffer(w.body).unwrap();
        assert_eq!((body.undo_limit(), body.undo_bytes()), (UNDO_LIMIT, recount(body)));
        assert!(body.undo_bytes() > 0);
        // A limit set is kept by this format's snapshots.
        node.append(crate::Shard::Buffer(w.body), crate::Op::Buffer(BufferOp::UndoLimit { bytes: 77 })).unwrap();
        let back = crate::State::from_snapshot(&node.state.to_snapshot()).unwrap();
        assert_eq!(back.buffer(w.body).unwrap().undo_limit(), 77);
    }
}
