//! Proposals: how a party that does not lead a shard asks for a change.
//!
//! Tools and the `apex` command never lead; they send a `Proposal`, the
//! daemon routes it to the shard's holder, and `apply` there turns it into
//! the leader's own entries. A proposal names the buffer version it was
//! made at; its positions are rebased through every edit since, moving the
//! way views move, or it is refused with a clear error when those edits are
//! no longer retained (each buffer keeps its last `HISTORY_LIMIT`). Because
//! the retained edits are in the state, every leader rebases identically.

use crate::error::{Reject, Result};
use crate::frac::Frac;
use crate::id::{AttachmentId, BufferId, ColumnId, GroupId, Seq, TermId, WindowId};
use crate::make::{self, NewWindow};
use crate::node::Node;
use crate::op::{Action, BufferOp, LayoutOp, Op, Origin, WindowFlags, WindowOp};
use crate::shard::{Shard, ViewId};
use serde::{Deserialize, Serialize};

/// A change a non-leader asks for.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Proposal {
    /// Insert `text` at `q0` as of `version`.
    Insert {
        buffer: BufferId,
        version: u64,
        q0: u64,
        text: String,
        origin: Origin,
    },
    /// Delete `q0..q1` as of `version`.
    Delete {
        buffer: BufferId,
        version: u64,
        q0: u64,
        q1: u64,
        origin: Origin,
    },
    /// Replace `q0..q1` with `text` as of `version`.
    Replace {
        buffer: BufferId,
        version: u64,
        q0: u64,
        q1: u64,
        text: String,
        origin: Origin,
    },
    /// Several changes of one text as of `version`, in order and not
    /// overlapping, made as one undo group (what an Edit command does).
    Splices {
        buffer: BufferId,
        version: u64,
        changes: crate::changes::Changes,
        origin: Origin,
    },
    /// Set a view's selection, as of `version`.
    Select {
        buffer: BufferId,
        view: ViewId,
        version: u64,
        q0: u64,
        q1: u64,
    },
    /// Set a view's origin, as of `version`.
    SetOrigin {
        buffer: BufferId,
        view: ViewId,
        version: u64,
        org: u64,
    },
    Name {
        buffer: BufferId,
        name: String,
    },
    Clean {
        buffer: BufferId,
    },
    Dirty {
        buffer: BufferId,
    },
    Undo {
        buffer: BufferId,
    },
    Redo {
        buffer: BufferId,
    },
    /// Start a new undo group now (acme's ctl `mark`).
    Mark {
        buffer: BufferId,
    },
    /// Forget the undo history (acme's ctl `clean` does, with `Clean`).
    ForgetUndo {
        buffer: BufferId,
    },
    /// Replace a window's flags (acme's ctl `nomark`, `menu`, `dump`...).
    Flags {
        window: WindowId,
        flags: WindowFlags,
    },
    /// A tool opened (`Some`) or closed (`None`) the window's event file;
    /// with it a file window's tag menu goes off, and comes back (its dump
    /// settings dropped) at the close, as acme's do.
    EventReader {
        window: WindowId,
        reader: Option<AttachmentId>,
    },
    /// A new buffer (no window) holding `text`.
    CreateBuffer {
        name: String,
        text: String,
    },
    /// A new window on `body` (or a new buffer named `name`) in `column`.
    /// `near`: the window whose text asked for it (a file opened by
    /// button 3, acme's `makenewwindow(t)`): in its column it goes into
    /// the largest empty space, else splits that window or the biggest.
    CreateWindow {
        body: Option<BufferId>,
        column: Option<ColumnId>,
        name: String,
        near: Option<WindowId>,
    },
    DeleteWindow {
        window: WindowId,
    },
    /// A new window showing terminal `term` (named `DIR/-term.N`, as win
    /// names its windows) in `column`, else where `CreateWindow` puts one.
    TermWindow {
        term: TermId,
        column: Option<ColumnId>,
    },
    /// Move a window to `y` in `column`; the window below its old place
    /// takes the room it leaves.
    MoveWindow {
        window: WindowId,
        column: ColumnId,
        y: Frac,
    },
    /// Give a column's windows these tops, top to bottom (Sort, a grown
    /// window): every window of the column once, tops strictly rising
    /// from 0.
    Arrange {
        column: ColumnId,
        tops: Vec<(WindowId, Frac)>,
    },
    /// A new column at `x` (where acme's `rowadd` puts one if `None`).
    CreateColumn {
        x: Option<Frac>,
    },
    /// Remove a column and its windows.
    DeleteColumn {
        column: ColumnId,
    },
    /// Set the session's snarf buffer.
    Snarf {
        text: String,
    },
    /// Give a window the focus (acme's `focus` log event).
    Focus {
        window: WindowId,
    },
    /// A B2 action on a buffer's text.
    Exec {
        buffer: BufferId,
        action: Action,
    },
    /// A B3 action on a buffer's text.
    Look {
        buffer: BufferId,
        action: Action,
    },
    /// Move a column's left edge to `x` (a dragged column box); the
    /// columns stay ordered by their edges.
    MoveColumn {
        column: ColumnId,
        x: Frac,
    },
    /// Bound the buffer's undo history at `bytes` (`buffers/N/ctl`'s
    /// `undolimit`).
    UndoLimit {
        buffer: BufferId,
        bytes: u64,
    },
    /// Append to the session's snarf buffer: a client sends a snarf of
    /// over [`crate::op::SPLICE_MAX`] bytes as `Snarf` and these.
    SnarfMore {
        at: u64,
        text: String,
    },
    /// More changes of the `Splices` before it, in the undo group it
    /// started: a whole-file Edit proposes its changes a part at a time,
    /// the last part first, so that no one proposal holds the session
    /// for long. Each part's changes come before the parts proposed
    /// earlier, so the version the Edit saw places them still.
    SplicesMore {
        buffer: BufferId,
        version: u64,
        changes: crate::changes::Changes,
        origin: Origin,
        /// The group the `Splices` began (`Created::Group`): joined while
        /// it is still the newest, else these changes begin their own
        /// (another client's change or undo came between).
        group: Option<GroupId>,
    },
    /// Replace `q0..q1` with the text of `pieces`, in order, as of
    /// `version`: a Get whose text was read in more than one piece. Each
    /// piece is at most [`crate::op::SPLICE_MAX`] bytes, and the pieces
    /// become entries as they are (small neighbours joined,
    /// [`crate::op::packed`]), so a 1 GB file's text is not copied again
    /// on its way into the log.
    ReplacePieces {
        buffer: BufferId,
        version: u64,
        q0: u64,
        q1: u64,
        pieces: Vec<String>,
        origin: Origin,
    },
}

/// What a proposal made, beyond its entries.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum Created {
    Nothing,
    Buffer(BufferId),
    Window(NewWindow),
    Column(ColumnId),
    /// The undo group a `Splices` began, which its `SplicesMore` carry on.
    /// Last: older peers decode the variants before it as they were.
    Group(GroupId),
}

/// The outcome of an applied proposal.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Applied {
    /// Every entry the leader appended for it, in order, metalog entries
    /// (on the authority) included, as runs of one shard's consecutive
    /// seqs: an Edit of a million changes is one run, and its outcome
    /// small. The entries themselves are in the log.
    pub entries: Vec<Run>,
    pub created: Created,
}

/// Entries `first..=last` of one shard.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Run {
    pub shard: Shard,
    pub first: Seq,
    pub last: Seq,
}

impl Run {
    /// Each (shard, seq) of the run.
    pub fn each(self) -> impl Iterator<Item = (Shard, Seq)> {
        (self.first..=self.last).map(move |seq| (self.shard, seq))
    }
}

impl std::fmt::Display for Run {
    /// `shard:seq`, or `shard:first-last` for more than one.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.first == self.last {
            true => write!(f, "{}:{}", self.shard, self.first),
            false => write!(f, "{}:{}-{}", self.shard, self.first, self.last),
        }
    }
}

/// `journal` (each entry made, in order) as runs.
fn runs(journal: Vec<(Shard, Seq)>) -> Vec<Run> {
    let mut out: Vec<Run> = Vec::new();
    for (shard, seq) in journal {
        match out.last_mut() {
            Some(r) if r.shard == shard && r.last.checked_add(1) == Some(seq) => r.last = seq,
            _ => out.push(Run { shard, first: seq, last: seq }),
        }
    }
    out
}

impl Proposal {
    /// The proposal that replaces `q0..q1` of `buffer` at `version` with
    /// `text`: an insert, a delete or a replace.
    pub fn splice(buffer: BufferId, version: u64, q0: u64, q1: u64, text: String, origin: Origin) -> Proposal {
        match (q0 == q1, text.is_empty()) {
            (true, _) => Proposal::Insert { buffer, version, q0, text, origin },
            (false, true) => Proposal::Delete { buffer, version, q0, q1, origin },
            (false, false) => Proposal::Replace { buffer, version, q0, q1, text, origin },
        }
    }

    /// The buffer a buffer proposal changes.
    /// Whose change a tag rewrite after this proposal is reported as
    /// (acme's window owner): its own origin if it has one, a file's open
    /// or close for the event reader ('E', as xfidopen locks), else a file
    /// ('F').
    pub fn tag_origin(&self) -> Origin {
        match self {
            Proposal::Insert { origin, .. }
            | Proposal::Delete { origin, .. }
            | Proposal::Replace { origin, .. }
            | Proposal::ReplacePieces { origin, .. }
            | Proposal::Splices { origin, .. }
            | Proposal::SplicesMore { origin, .. } => *origin,
            Proposal::EventReader { .. } => Origin::FileWrite,
            _ => Origin::OtherFile,
        }
    }

    pub fn buffer(&self) -> Option<BufferId> {
        match self {
            Proposal::Insert { buffer, .. }
            | Proposal::Delete { buffer, .. }
            | Proposal::Replace { buffer, .. }
            | Proposal::ReplacePieces { buffer, .. }
            | Proposal::Splices { buffer, .. }
            | Proposal::SplicesMore { buffer, .. }
            | Proposal::Select { buffer, .. }
            | Proposal::SetOrigin { buffer, .. }
            | Proposal::Name { buffer, .. }
            | Proposal::Clean { buffer }
            | Proposal::Dirty { buffer }
            | Proposal::Undo { buffer }
            | Proposal::Redo { buffer }
            | Proposal::Mark { buffer }
            | Proposal::ForgetUndo { buffer }
            | Proposal::UndoLimit { buffer, .. }
            | Proposal::Exec { buffer, .. }
            | Proposal::Look { buffer, .. } => Some(*buffer),
            _ => None,
        }
    }

    /// The shard whose holder should receive this proposal.
    pub fn target(&self) -> Shard {
        match self {
            Proposal::CreateBuffer { .. } | Proposal::CreateWindow { .. } | Proposal::TermWindow { .. } => {
                Shard::Layout
            }
            Proposal::DeleteWindow { .. } | Proposal::MoveWindow { .. } => Shard::Layout,
            Proposal::CreateColumn { .. }
            | Proposal::DeleteColumn { .. }
            | Proposal::Snarf { .. }
            | Proposal::SnarfMore { .. } => Shard::Layout,
            Proposal::Focus { .. } | Proposal::Arrange { .. } | Proposal::MoveColumn { .. } => Shard::Layout,
            Proposal::Flags { window, .. } | Proposal::EventReader { window, .. } => Shard::Window(*window),
            p => Shard::Buffer(p.buffer().expect("every other proposal names a buffer")),
        }
    }
}

/// Turns `proposal` into `node`'s own entries. The node must lead what it
/// touches; nothing is appended if a check fails.
pub fn apply(node: &mut Node, proposal: &Proposal) -> Result<Applied> {
    apply_with(node, proposal, None)
}

/// [`apply`], taking the proposal: its text goes into the entry as it is,
/// not copied (a tool's bulk write is one such text).
pub fn apply_owned(node: &mut Node, mut proposal: Proposal) -> Result<Applied> {
    let text = match &mut proposal {
        Proposal::Insert { text, .. } | Proposal::Replace { text, .. } => Some(Taken::Text(std::mem::take(text))),
        Proposal::ReplacePieces { pieces, .. } => Some(Taken::Pieces(std::mem::take(pieces))),
        _ => None,
    };
    apply_with(node, &proposal, text)
}

/// The text of an Insert, Replace or ReplacePieces taken out of it
/// ([`apply_owned`]), to become its entries without a copy.
enum Taken {
    Text(String),
    Pieces(Vec<String>),
}

/// Applies `proposal`; `text`, if given, is its Insert's, Replace's or
/// ReplacePieces' text, taken out of it.
fn apply_with(node: &mut Node, proposal: &Proposal, text: Option<Taken>) -> Result<Applied> {
    // The node records what it sequences meanwhile: the metalog (on the
    // authority) and every shard it leads, in order.
    node.start_journal();
    let created = apply_inner(node, proposal, text);
    if created.is_ok() {
        // A change of text, name, dirtiness or undo history shows in the
        // tags of the windows on the buffer; a window's flags (the menu)
        // in its own tag.
        let buffer = match (proposal, &created) {
            (_, Ok(Created::Window(w))) => Some(w.body),
            (Proposal::Flags { window, .. } | Proposal::EventReader { window, .. }, _) => {
                node.state.window(*window).ok().map(|w| w.body)
            }
            (p, _) => p.buffer(),
        };
        if let Some(b) = buffer {
            // The change stands whatever happens to the tag, which only
            // shows it (a tag led elsewhere is its leader's to update).
            let _ = make::settag(node, b, proposal.tag_origin());
        }
    }
    let entries = runs(node.take_journal());
    Ok(Applied { entries, created: created? })
}

fn buffer_op(node: &mut Node, buffer: BufferId, op: BufferOp) -> Result<()> {
    node.append(Shard::Buffer(buffer), Op::Buffer(op)).map(|_| ())
}

fn window_op(node: &mut Node, window: WindowId, op: WindowOp) -> Result<()> {
    node.state.window(window)?;
    if !node.leads(Shard::Window(window)) {
        return Err(Reject::NotLeader { shard: Shard::Window(window) });
    }
    node.append(Shard::Window(window), Op::Window(op)).map(|_| ())
}

/// Rebases `q0..q1` from `version` and checks it against the text.
fn rebase_range(node: &Node, buffer: BufferId, version: u64, q0: u64, q1: u64) -> Result<(u64, u64)> {
    let b = node.state.buffer(buffer)?;
    if q0 > q1 {
        return Err(Reject::Range { q0, q1, len: b.len() });
    }
    // Check against the text as the proposer saw it, then move.
    let (r0, r1) = (b.rebase(version, q0)?, b.rebase(version, q1)?);
    b.check_range(r0, r1)?;
    Ok((r0, r1))
}

/// Whether edits of `buffer` each start an undo group: not while a window
/// showing it has `nomark` set (acme's ctl), so a tool's run of data
/// writes undoes as one.
fn marks_edits(node: &Node, buffer: BufferId) -> bool {
    !node.state.windows.values().any(|w| w.body == buffer && !w.flags.mark)
}

/// An Insert's or Replace's text, taken out of it if it was.
fn owned_text(owned: Option<Taken>, text: &str) -> String {
    match owned {
        Some(Taken::Text(text)) => text,
        _ => text.to_string(),
    }
}

/// An edit proposal: its own undo group (unless `nomark`), then the
/// splice of `q0..q1` with the text of `pieces` in order (one piece, of
/// any length, for an Insert or a Replace: cut into entries as it goes
/// in; none for a Delete).
fn edit(
    node: &mut Node,
    buffer: BufferId,
    version: u64,
    q0: u64,
    q1: u64,
    pieces: Vec<String>,
    origin: Origin,
) -> Result<()> {
    if q0 == q1 && pieces.iter().all(String::is_empty) {
        return Err(Reject::Empty);
    }
    // Pieces become entries as they are: checked before any is made.
    if pieces.len() > 1 {
        if let Some(p) = pieces.iter().find(|p| p.len() > crate::op::SPLICE_MAX) {
            return Err(Reject::SpliceTooLong { len: p.len(), max: crate::op::SPLICE_MAX });
        }
    }
    let (q0, q1) = rebase_range(node, buffer, version, q0, q1)?;
    if !node.leads(Shard::Buffer(buffer)) {
        return Err(Reject::NotLeader { shard: Shard::Buffer(buffer) });
    }
    if marks_edits(node, buffer) {
        let group = node.new_group()?;
        buffer_op(node, buffer, BufferOp::Mark { group })?;
    }
    let mut pieces = crate::op::packed(pieces);
    match pieces.len() {
        0 | 1 => node.append_splice_owned(buffer, q0, q1, pieces.pop().unwrap_or_default(), origin),
        _ => node.append_pieces(buffer, q0, q1, pieces.into_iter(), origin),
    }
}

/// From this many changes on, one `Splices` proposal is made as
/// many-change entries (one version and one undo record each, three
/// bytes or so a change) rather than an entry a change: a whole-file
/// Edit's million substitutions. Fewer stay a `Splice` each, whose
/// history a proposal made meanwhile is rebased through change by change.
const MANY: usize = 16;

/// Several edits as one undo group: every range rebased and checked
/// before anything is appended, then applied from the last, so the earlier
/// positions still hold. The group is begun here (and returned), or, for
/// more of the same (`joins`), carried on while it is the newest.
fn splices(
    node: &mut Node,
    buffer: BufferId,
    version: u64,
    changes: &crate::changes::Changes,
    origin: Origin,
    joins: Option<Option<GroupId>>,
) -> Result<Option<GroupId>> {
    // The list is in order and apart or refused, so its last change ends
    // last.
    let last = changes.iter().next_back().map_or(0, |(_, q1, _)| q1);
    let b = node.state.buffer(buffer)?;
    // Every edit since `version` at or after the last change (an Edit's
    // parts proposed before this one): no point moves, the list is
    // checked as it is, and the walk of the history per change is skipped.
    let unmoved = b.edits_since(version).is_some_and(|mut edits| edits.all(|e| e.q0 >= last));
    let rebased = match unmoved {
        true => {
            // Checked here when the list is short or holds changes of
            // nothing (left out, once checked); a long one is checked as it
            // is packed, below, before anything is appended.
            let (len, mut empty) = (b.len(), false);
            if changes.len() < MANY || changes.may_hold_empty() {
                let mut end = 0;
                for (q0, q1, text) in changes.iter() {
                    if q0 > q1 || q1 > len || q0 < end {
                        return Err(Reject::Range { q0, q1, len });
                    }
                    end = q1;
                    empty |= q0 == q1 && text.is_empty();
                }
            }
            let mut kept = std::borrow::Cow::Borrowed(changes);
            if empty {
                kept.to_mut().drop_empty();
            }
            kept
        }
        false => {
            let mut rebased = crate::changes::Changes::new();
            let mut end = 0;
            for (q0, q1, text) in changes.iter() {
                let (r0, r1) = rebase_range(node, buffer, version, q0, q1)?;
                if r0 < end {
                    let len = node.state.buffer(buffer)?.len();
                    return Err(Reject::Range { q0: r0, q1: r1, len });
                }
                end = r1;
                if r0 != r1 || !text.is_empty() {
                    rebased.push(r0, r1, text);
                }
            }
            std::borrow::Cow::Owned(rebased)
        }
    };
    if rebased.is_empty() {
        return Err(Reject::Empty);
    }
    let packed = match rebased.len() >= MANY {
        true => Some(Node::pack_spots(&rebased, node.state.buffer(buffer)?.len())?),
        false => None,
    };
    let mut began = None;
    let newest = node.state.buffer(buffer)?.newest_group();
    let joined = matches!(joins, Some(Some(g)) if newest == Some(g));
    if !joined && marks_edits(node, buffer) {
        let group = node.new_group()?;
        buffer_op(node, buffer, BufferOp::Mark { group })?;
        began = Some(group);
    }
    if let Some(packed) = packed {
        node.append_spots(buffer, &rebased, packed, origin)?;
    } else {
        for (q0, q1, text) in rebased.iter().rev() {
            node.append_splice(buffer, q0, q1, text, origin)?;
        }
    }
    Ok(began)
}

fn apply_inner(node: &mut Node, p: &Proposal, owned: Option<Taken>) -> Result<Created> {
    if let Some(b) = p.buffer() {
        node.state.buffer(b)?;
        if !node.leads(Shard::Buffer(b)) {
            return Err(Reject::NotLeader { shard: Shard::Buffer(b) });
        }
    }
    match p {
        Proposal::Insert { buffer, version, q0, text, origin } => {
            let text = owned_text(owned, text);
            edit(node, *buffer, *version, *q0, *q0, vec![text], *origin)?
        }
        Proposal::Delete { buffer, version, q0, q1, origin } => {
            edit(node, *buffer, *version, *q0, *q1, Vec::new(), *origin)?
        }
        Proposal::Replace { buffer, version, q0, q1, text, origin } => {
            let text = owned_text(owned, text);
            edit(node, *buffer, *version, *q0, *q1, vec![text], *origin)?
        }
        Proposal::ReplacePieces { buffer, version, q0, q1, pieces, origin } => {
            let pieces = match owned {
                Some(Taken::Pieces(pieces)) => pieces,
                _ => pieces.clone(),
            };
            edit(node, *buffer, *version, *q0, *q1, pieces, *origin)?
        }
        Proposal::Splices { buffer, version, changes, origin } => {
            if let Some(group) = splices(node, *buffer, *version, changes, *origin, None)? {
                return Ok(Created::Group(group));
            }
        }
        Proposal::SplicesMore { buffer, version, changes, origin, group } => {
            splices(node, *buffer, *version, changes, *origin, Some(*group))?;
        }
        Proposal::Select { buffer, view, version, q0, q1 } => {
            let (q0, q1) = rebase_range(node, *buffer, *version, *q0, *q1)?;
            buffer_op(node, *buffer, BufferOp::Select { view: *view, q0, q1 })?
        }
        Proposal::SetOrigin { buffer, view, version, org } => {
            let (org, _) = rebase_range(node, *buffer, *version, *org, *org)?;
            buffer_op(node, *buffer, BufferOp::SetOrigin { view: *view, org })?
        }
        Proposal::Name { buffer, name } => buffer_op(node, *buffer, BufferOp::Rename { name: name.clone() })?,
        Proposal::Clean { buffer } => buffer_op(node, *buffer, BufferOp::Clean)?,
        Proposal::Dirty { buffer } => buffer_op(node, *buffer, BufferOp::Dirty)?,
        Proposal::Undo { buffer } => buffer_op(node, *buffer, BufferOp::Undo)?,
        Proposal::Redo { buffer } => buffer_op(node, *buffer, BufferOp::Redo)?,
        Proposal::Mark { buffer } => {
            let group = node.new_group()?;
            buffer_op(node, *buffer, BufferOp::Mark { group })?
        }
        Proposal::ForgetUndo { buffer } => buffer_op(node, *buffer, BufferOp::ForgetUndo)?,
        Proposal::UndoLimit { buffer, bytes } => buffer_op(node, *buffer, BufferOp::UndoLimit { bytes: *bytes })?,
        Proposal::Flags { window, flags } => window_op(node, *window, WindowOp::Flags(Box::new(flags.clone())))?,
        Proposal::EventReader { window, reader } => {
            let op = match reader {
                Some(reader) => WindowOp::EventOpen { reader: *reader },
                None => WindowOp::EventClose,
            };
            window_op(node, *window, op)?;
            // acme's xfidopen and xfidclose: while a tool reads a file
            // window's events its tag menu is off (the tool decides what
            // Put and Undo mean); when it stops, the menu is back and the
            // dump settings it gave are dropped.
            let w = node.state.window(*window)?;
            let is_dir = node.state.buffer(w.body).is_ok_and(|b| crate::look::is_dir(&b.name));
            let mut flags = w.flags.clone();
            match reader {
                Some(_) => flags.menu = flags.menu && is_dir,
                None => {
                    flags.menu = flags.menu || !is_dir;
                    flags.dump = None;
                    flags.dumpdir = None;
                }
            }
            if flags != w.flags {
                window_op(node, *window, WindowOp::Flags(Box::new(flags)))?;
            }
        }
        Proposal::Exec { buffer, action } => buffer_op(node, *buffer, BufferOp::ExecAt(Box::new(action.clone())))?,
        Proposal::Look { buffer, action } => buffer_op(node, *buffer, BufferOp::LookAt(Box::new(action.clone())))?,
        Proposal::CreateBuffer { name, text } => {
            let id = node.create_buffer_as(name)?;
            if !text.is_empty() {
                node.append_splice(id, 0, 0, text, Origin::OtherFile)?;
                buffer_op(node, id, BufferOp::Clean)?;
            }
            return Ok(Created::Buffer(id));
        }
        Proposal::CreateWindow { body, column, name, near } => {
            return make::new_window_near(node, *body, *column, name, *near).map(Created::Window);
        }
        Proposal::DeleteWindow { window } => make::delete_window(node, *window)?,
        Proposal::TermWindow { term, column } => {
            return make::new_term_window(node, *term, *column).map(Created::Window);
        }
        Proposal::MoveWindow { window, column, y } => make::move_window(node, *window, *column, *y)?,
        Proposal::CreateColumn { x } => {
            let x = x.unwrap_or_else(|| crate::cols::new_column_x(&node.state.layout));
            return make::add_column(node, x).map(Created::Column);
        }
        Proposal::DeleteColumn { column } => make::delete_column(node, *column)?,
        Proposal::Snarf { text } => {
            if !node.leads(Shard::Layout) {
                return Err(Reject::NotLeader { shard: Shard::Layout });
            }
            node.append_snarf(text)?;
        }
        Proposal::SnarfMore { at, text } => {
            if !node.leads(Shard::Layout) {
                return Err(Reject::NotLeader { shard: Shard::Layout });
            }
            let mut at = *at;
            for piece in crate::op::pieces(text) {
                node.append(Shard::Layout, Op::Layout(LayoutOp::SnarfMore { at, text: piece.to_string() }))?;
                at += piece.len() as u64;
            }
        }
        Proposal::Arrange { column, tops } => make::arrange(node, *column, tops)?,
        Proposal::MoveColumn { column, x } => {
            if !node.leads(Shard::Layout) {
                return Err(Reject::NotLeader { shard: Shard::Layout });
            }
            node.append(Shard::Layout, Op::Layout(LayoutOp::ColumnMove { column: *column, x: *x }))?;
        }
        Proposal::Focus { window } => {
            if !node.leads(Shard::Layout) {
                return Err(Reject::NotLeader { shard: Shard::Layout });
            }
            node.append(Shard::Layout, Op::Layout(LayoutOp::Focus { window: Some(*window) }))?;
        }
    }
    Ok(Created::Nothing)
}
