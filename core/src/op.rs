//! The ops: what an entry asks `apply` to do, one enum per shard kind.
//!
//! This file is a table of types, as acme's `dat.h` is: each op's meaning is
//! documented here and implemented beside the state it changes (`buf.rs`,
//! `win.rs`, `layout.rs`, `term.rs`, `meta.rs`). An op that does not belong
//! on a shard is refused by [`Op::fits`] before anything looks at it.

use crate::frac::Frac;
use crate::id::{AttachmentId, BufferId, ColumnId, Epoch, GroupId, RuleId, Seq, SessionUuid, TermId, WindowId};
use crate::shard::{Shard, ShardKind, ViewId};
use crate::spots::Spots;
use serde::{Deserialize, Serialize};

/// The longest buffer name, in bytes (Linux's PATH_MAX).
pub const NAME_MAX: usize = 4096;

/// A buffer's name is one line of `index`, of acme's `log` and of
/// `meta/windows`: no newline, and at most [`NAME_MAX`] bytes. (Other
/// control characters are the files' to refuse: acme's ctl sets such a
/// name, then says it is bad.)
pub fn check_name(name: &str) -> crate::Result<()> {
    if name.len() > NAME_MAX {
        return Err(crate::Reject::NameTooLong { len: name.len(), max: NAME_MAX });
    }
    match name.contains('\n') {
        true => Err(crate::Reject::BadName { name: name.to_string() }),
        false => Ok(()),
    }
}

/// One update of a terminal: what changed since the last, applied in
/// this order (size, rows, cursor, modes, title, bells, exit).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct TermUpdate {
    /// The new size, `(cols, rows)`: rows are cut or padded at the bottom.
    pub size: Option<(u16, u16)>,
    /// Rows scrolled off and rows redrawn.
    pub rows: crate::packed::Packed,
    pub cursor: Option<crate::grid::Cursor>,
    /// [`crate::grid::mode`] bits.
    pub modes: Option<u32>,
    pub title: Option<String>,
    /// Bells rung since the last update.
    pub bells: u32,
    /// The process exited with this status (a signal's is 128 + its number).
    pub exit: Option<i32>,
}

/// A command a session started (`meta/processes`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Process {
    pub owner: crate::id::AttachmentId,
    pub command: String,
    pub dir: String,
    pub window: Option<crate::id::WindowId>,
}

/// The tab width a window has when `Tab` never set one, in characters.
pub const DEFAULT_TAB: u32 = 4;

/// The widest tab `Tab` sets, in characters: wider than any window, and
/// far from where a width in pixels would overflow.
pub const MAX_TAB: u32 = 1000;

/// Any op, tagged with the kind of shard it belongs on.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Op {
    Buffer(BufferOp),
    Window(WindowOp),
    Layout(LayoutOp),
    Term(TermOp),
    Meta(MetaOp),
}

impl Op {
    /// The bytes of text it carries: a splice's, a snarf's.
    pub fn text_len(&self) -> usize {
        match self {
            Op::Buffer(BufferOp::Splice { text, .. } | BufferOp::Splices { text, .. })
            | Op::Layout(LayoutOp::Snarf { text } | LayoutOp::SnarfMore { text, .. }) => text.len(),
            _ => 0,
        }
    }

    /// What a new entry's op must hold beyond what applying it checks:
    /// limits set after logs without them were written, so they are held
    /// where an entry is made or admitted (`Node::append`, the authority's
    /// `accept`), and a replay or a follower still takes an old one. A
    /// buffer's name is one line (no newline); a window's tab is `Tab`'s
    /// range (a UI lays it out in pixels); a splice's text and a chord's
    /// argument are at most [`SPLICE_MAX`] bytes, so that no entry, and no
    /// message that carries entries, is large.
    pub fn admissible(&self) -> crate::Result<()> {
        match self {
            Op::Buffer(BufferOp::Create { name } | BufferOp::Rename { name } | BufferOp::Name { name }) => {
                check_name(name)
            }
            Op::Buffer(BufferOp::Splice { text, .. } | BufferOp::Splices { text, .. })
            | Op::Layout(LayoutOp::Snarf { text } | LayoutOp::SnarfMore { text, .. })
                if text.len() > SPLICE_MAX =>
            {
                Err(crate::Reject::SpliceTooLong { len: text.len(), max: SPLICE_MAX })
            }
            Op::Buffer(BufferOp::Splices { spots, .. }) if spots.len_bytes() > SPLICE_MAX => {
                Err(crate::Reject::SpliceTooLong { len: spots.len_bytes(), max: SPLICE_MAX })
            }
            Op::Buffer(BufferOp::ExecAt(a) | BufferOp::LookAt(a)) => match &a.arg {
                Some(arg) if arg.len() > SPLICE_MAX => {
                    Err(crate::Reject::ArgTooLong { len: arg.len(), max: SPLICE_MAX })
                }
                _ => Ok(()),
            },
            Op::Window(WindowOp::Flags(flags)) => {
                let max = MAX_TAB;
                match flags.tab {
                    Some(got) if !(1..=max).contains(&got) => Err(crate::Reject::TabWidth { got, max }),
                    _ => Ok(()),
                }
            }
            _ => Ok(()),
        }
    }

    /// The kind of shard this op belongs on.
    pub fn kind(&self) -> ShardKind {
        match self {
            Op::Buffer(_) => ShardKind::Buffer,
            Op::Window(_) => ShardKind::Window,
            Op::Layout(_) => ShardKind::Layout,
            Op::Term(_) => ShardKind::Term,
            Op::Meta(_) => ShardKind::Meta,
        }
    }

    /// Whether this op may be appended to `shard`.
    pub fn fits(&self, shard: &Shard) -> bool {
        self.kind() == shard.kind()
    }
}

/// Where a text change came from, as acme's events report it (`c1`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum Origin {
    /// Typed at the keyboard (`K`).
    Keyboard,
    /// Made with the mouse: cut, paste, snarf, execute (`M`).
    Mouse,
    /// A write to the window's own body or tag file (`E`).
    FileWrite,
    /// Any other file, such as `ctl` or `data` (`F`).
    OtherFile,
}

impl Origin {
    /// acme's event origin character.
    pub fn acme_char(self) -> char {
        match self {
            Origin::Keyboard => 'K',
            Origin::Mouse => 'M',
            Origin::FileWrite => 'E',
            Origin::OtherFile => 'F',
        }
    }
}

/// A B2 (execute) or B3 (look) action, sequenced in the buffer it names so
/// that every reader sees it against the same text.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct Action {
    /// The view the user acted in, if it was one (acme's tag or body).
    pub view: Option<ViewId>,
    /// The buffer version the positions refer to.
    pub version: u64,
    /// The range the user swept, in runes.
    pub q0: u64,
    pub q1: u64,
    /// The expanded range acme would act on, when it differs (`flag & 2`).
    pub expansion: Option<(u64, u64)>,
    /// The chord argument (B2 then B1), if any.
    pub arg: Option<String>,
    /// acme's event flag bits (1 built-in, 2 expanded, 8 has argument...),
    /// and apex's [`Action::LIMITED`].
    pub flags: u32,
    /// Where the action came from (keyboard or mouse).
    pub origin: Origin,
}

impl Action {
    /// A flag bit acme does not use: proposed by a client short of a full
    /// token, so a reader's write-back of it runs only a built-in, with
    /// that client's scope. Never shown in an event message.
    pub const LIMITED: u32 = 16;
}

/// The most bytes of text one `Splice` entry carries (and a chord's
/// argument): a longer text goes in several, one undo group all the same
/// ([`crate::Node::append_splice`]).
pub const SPLICE_MAX: usize = 1 << 20;

/// The most changes one `Splices` entry carries: three varints of at most
/// ten bytes each, so that its packing is at most [`SPLICE_MAX`] bytes
/// too.
pub const SPOTS_MAX: usize = SPLICE_MAX / 30;

/// `count` changes cut into parts of an entry each, in order: at most
/// [`SPOTS_MAX`] changes and [`SPLICE_MAX`] bytes of text (`bytes(r)` is
/// the bytes of changes `r`'s), a change with more alone.
pub fn entry_parts(count: usize, bytes: impl Fn(std::ops::Range<usize>) -> usize) -> Vec<std::ops::Range<usize>> {
    parts_of_at_most(count, SPOTS_MAX, 1, |r| bytes(r) <= SPLICE_MAX)
}

/// `count` changes cut into parts, in order, from the end: each of at
/// most `most` changes (and never more than an entry's) that `fits`
/// says fit together (a change alone always goes), each part but the
/// first of `align` changes or more beginning at a multiple of `align` (a
/// list held in blocks is split there without a copy of each change).
/// `fits` of a range must hold of every range within it.
pub fn parts_of_at_most(
    count: usize,
    most: usize,
    align: usize,
    fits: impl Fn(std::ops::Range<usize>) -> bool,
) -> Vec<std::ops::Range<usize>> {
    let most = most.clamp(1, SPOTS_MAX);
    let mut out = Vec::new();
    let mut end = count;
    while end > 0 {
        let mut start = end.saturating_sub(most);
        if !fits(start..end) {
            // The most that fit, found by halves: `low` fits (one change
            // always goes), `high` does not.
            let (mut low, mut high) = (end - 1, start);
            while low - high > 1 {
                let mid = high + (low - high) / 2;
                match fits(mid..end) {
                    true => low = mid,
                    false => high = mid,
                }
            }
            start = low;
        }
        if start > 0 && end - start >= align.max(1) {
            start = start.next_multiple_of(align.max(1));
        }
        out.push(start..end);
        end = start;
    }
    out.reverse();
    out
}

/// `text` cut into pieces of at most [`SPLICE_MAX`] bytes, each whole
/// runes; one empty piece for an empty text.
pub fn pieces(text: &str) -> Vec<&str> {
    let mut out = Vec::with_capacity(text.len() / SPLICE_MAX + 1);
    let mut rest = text;
    loop {
        let mut cut = rest.len().min(SPLICE_MAX);
        while !rest.is_char_boundary(cut) {
            cut -= 1;
        }
        let (piece, after) = rest.split_at(cut);
        out.push(piece);
        if after.is_empty() {
            return out;
        }
        rest = after;
    }
}

/// `pieces` of a text, in order, as the entries they become: each piece
/// joined to the one before where together they fit in [`SPLICE_MAX`]
/// bytes, empty ones dropped. However a text was cut, its entries number
/// at most about twice its size in entries' worth, so a proposal of many
/// tiny pieces cannot make an entry of each. A file read in full pieces
/// goes on as it is (at most its short last piece joins the one before).
/// Packed pieces pack to themselves.
pub fn packed(pieces: Vec<String>) -> Vec<String> {
    let mut out: Vec<String> = Vec::with_capacity(pieces.len());
    for piece in pieces.into_iter().filter(|p| !p.is_empty()) {
        match out.last_mut() {
            Some(last) if last.len() + piece.len() <= SPLICE_MAX => last.push_str(&piece),
            _ => out.push(piece),
        }
    }
    out
}

/// Ops on a buffer shard: one text with its views, history and undo.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum BufferOp {
    /// First entry of every buffer shard: the buffer exists, empty.
    Create { name: String },
    /// Replace runes `q0..q1` with `text`; every view moves.
    Splice { q0: u64, q1: u64, text: String, origin: Origin },
    /// A text starts showing this buffer (selection 0,0, origin 0).
    ViewAdd { view: ViewId },
    /// A text stops showing this buffer.
    ViewDel { view: ViewId },
    /// Set a view's selection (acme's dot).
    Select { view: ViewId, q0: u64, q1: u64 },
    /// Set a view's scroll origin.
    SetOrigin { view: ViewId, org: u64 },
    /// Set the file name (logs before renames were undoable: no undo step).
    Name { name: String },
    /// Mark the buffer modified.
    Dirty,
    /// Mark the buffer unmodified as it is now (after Put or Get).
    Clean,
    /// Start a new undo group: the edits until the next mark undo together.
    Mark { group: GroupId },
    /// Undo the most recent undo group.
    Undo,
    /// Forget the undo and redo history (acme's ctl `clean`).
    ForgetUndo,
    /// Redo the most recently undone group.
    Redo,
    /// A B2 action on this buffer's text.
    ExecAt(Box<Action>),
    /// A B3 action on this buffer's text.
    LookAt(Box<Action>),
    /// Set the file name as an undo step of its own, as acme's ctl `name`
    /// does. After the ops before it, so logs written before it decode
    /// as they were.
    Rename { name: String },
    /// Keep at most `bytes` of undo and redo history (or four times the
    /// body's size, if more). Last, for the same reason.
    UndoLimit { bytes: u64 },
    /// Many splices made at once, one version and one undo record (a
    /// whole-file Edit's): `spots` in the text before any of them, their
    /// inserted texts one after another in `text`. Last, for the same
    /// reason.
    Splices { spots: Spots, text: String, origin: Origin },
}

/// Per-window switches set by `ctl` messages and the UI.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct WindowFlags {
    /// Follow output at the end of the body (`scroll`/`noscroll`).
    pub scroll: bool,
    /// Show the standard tag menu (`menu`/`nomenu`).
    pub menu: bool,
    /// Each change starts a new undo group (`mark`/`nomark`).
    pub mark: bool,
    /// Command and directory to restore the window from a Dump.
    pub dump: Option<String>,
    pub dumpdir: Option<String>,
    /// Font name, if not the default.
    pub font: Option<String>,
    /// Tab stops every this many characters, if not the default (`Tab`).
    pub tab: Option<u32>,
    /// New lines take the previous line's indent (`Indent`).
    pub autoindent: bool,
    /// Directories searched for `<file>` names looked up in this window
    /// (`Incl`).
    pub incl: Vec<String>,
    /// The body's version when `Del` or `Get` last warned that it was
    /// modified: the same command at that version goes ahead (acme's
    /// `w->dirty` reset by `winclean`).
    pub warned: Option<u64>,
}

impl Default for WindowFlags {
    fn default() -> WindowFlags {
        WindowFlags {
            scroll: true,
            menu: true,
            mark: true,
            dump: None,
            dumpdir: None,
            font: None,
            tab: None,
            autoindent: false,
            incl: Vec::new(),
            warned: None,
        }
    }
}

/// Ops on a window shard.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum WindowOp {
    /// First entry: the window shows `body` under `tag`.
    Create { tag: BufferId, body: BufferId },
    /// Use another tag buffer.
    Tag { tag: BufferId },
    /// Show another body buffer.
    Body { body: BufferId },
    /// Replace the window's flags.
    Flags(Box<WindowFlags>),
    /// A tool opened the window's event file: the UI sends B2/B3 actions on
    /// this window as `ExecAt`/`LookAt` instead of acting on them.
    EventOpen { reader: AttachmentId },
    /// The event file was closed.
    EventClose,
    /// The window shows terminal `term` in its body's place (`None`: its
    /// body again). Last, so logs written before it decode as they were.
    Term { term: Option<TermId> },
}

/// Ops on the layout shard: the top row, its columns and window placement.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum LayoutOp {
    /// The top row's tag buffer.
    RowTag { tag: BufferId },
    /// A new column whose left edge is at `x` (fraction of the width).
    ColumnAdd { column: ColumnId, tag: BufferId, x: Frac },
    /// Remove an empty column.
    ColumnDel { column: ColumnId },
    /// Move a column's left edge.
    ColumnMove { column: ColumnId, x: Frac },
    /// Place a new window in `column` with its top at `y`; assigns its acme
    /// number.
    WindowAdd { window: WindowId, column: ColumnId, y: Frac },
    /// Move a window (to another column, or within its own to resize).
    WindowMove { window: WindowId, column: ColumnId, y: Frac },
    /// Take a window out of the layout; its number is never reused.
    WindowDel { window: WindowId },
    /// Which window has the focus (acme's `focus` log event).
    Focus { window: Option<WindowId> },
    /// The session's snarf buffer (Snarf, Cut; what Paste inserts).
    Snarf { text: String },
    /// More of it: a snarf over [`SPLICE_MAX`] bytes goes in pieces, each
    /// to follow the `at` bytes before it (or refused: another snarf came
    /// between).
    SnarfMore { at: u64, text: String },
}

/// Ops on a term shard: the grid a daemon-side emulator produced.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum TermOp {
    /// First entry: a grid of `rows` by `cols` running `command` in `dir`,
    /// keeping `scrollback` rows that scroll off.
    Create { cols: u16, rows: u16, scrollback: u32, command: String, dir: String },
    /// What changed since the last update (boxed: entries stay small).
    Update(Box<TermUpdate>),
}

/// What kind of party an attachment is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum AttachmentKind {
    /// A UI: leads the shards the user edits.
    Ui,
    /// A tool or the `apex` command: follows and proposes.
    Tool,
}

/// Ops on the metalog, which only the daemon appends (as SERVER, epoch 0).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum MetaOp {
    /// The session's UUID; recorded once, never changes.
    Identity {
        uuid: SessionUuid,
    },
    /// The session's human label.
    Label {
        label: String,
    },
    /// A shard exists. A creator other than SERVER holds its lease at epoch
    /// 1 from the start, so a client can lead a shard it made without a
    /// round trip; otherwise the server holds it at epoch 0.
    ShardNew {
        shard: Shard,
        creator: AttachmentId,
    },
    /// A shard and its state are gone.
    ShardDel {
        shard: Shard,
    },
    /// A UI or tool attached.
    Attach {
        attachment: AttachmentId,
        kind: AttachmentKind,
        name: String,
    },
    /// It detached: its rules, settings and (for tools) notifications go.
    Detach {
        attachment: AttachmentId,
    },
    /// `to` leads `shard` from seq `base + 1` at `epoch` (the old epoch + 1).
    LeaseGrant {
        shard: Shard,
        to: AttachmentId,
        epoch: Epoch,
        base: Seq,
    },
    /// `by` asks the holder to hand the lease over.
    LeaseRequest {
        shard: Shard,
        by: AttachmentId,
    },
    /// The holder gave the lease up after its entry `seq`.
    LeaseRelease {
        shard: Shard,
        seq: Seq,
    },
    /// The server took the lease back at `epoch` (the old epoch + 1); the
    /// holder's entries after `base` are fenced.
    LeaseReclaim {
        shard: Shard,
        epoch: Epoch,
        base: Seq,
    },
    /// A plumbing rule.
    RuleAdd {
        rule: RuleId,
        owner: AttachmentId,
        text: String,
    },
    RuleDel {
        rule: RuleId,
    },
    /// A message for the user; numbered by apply.
    Notify {
        from: AttachmentId,
        text: String,
    },
    NotifyDel {
        id: u64,
    },
    /// A process the daemon started.
    ProcessStart {
        pid: u64,
        /// Boxed: entries are as large as their largest op.
        process: Box<Process>,
    },
    ProcessExit {
        pid: u64,
        status: i32,
    },
    /// Set (or, with `None`, clear) a setting.
    Setting {
        owner: AttachmentId,
        key: String,
        value: Option<String>,
    },
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parts_are_cut_from_the_end_by_count_and_bytes() {
        let all = |_: std::ops::Range<usize>| true;
        assert_eq!(parts_of_at_most(10, 4, 1, all), [0..2, 2..6, 6..10]);
        assert_eq!(parts_of_at_most(3, 0, 1, all), [0..1, 1..2, 2..3], "at least one a part");
        // Aligned: each part but the first starts at a multiple of 4, and
        // a part too small to move keeps its start.
        assert_eq!(parts_of_at_most(11, 5, 4, all), [0..4, 4..8, 8..11]);
        assert_eq!(parts_of_at_most(11, 2, 4, all), [0..1, 1..3, 3..5, 5..7, 7..9, 9..11]);
        // As many as fit, found whatever the count: three at a time here.
        assert_eq!(parts_of_at_most(10, 100, 1, |r| r.len() <= 3), [0..1, 1..4, 4..7, 7..10]);
        assert_eq!(parts_of_at_most(3, 100, 1, |_| false), [0..1, 1..2, 2..3], "one alone goes");
        assert_eq!(entry_parts(SPOTS_MAX + 1, |_| 0), [0..1, 1..SPOTS_MAX + 1]);
        // A change with more text than an entry holds goes alone.
        let big = |r: std::ops::Range<usize>| r.map(|i| if i == 1 { SPLICE_MAX + 1 } else { 1 }).sum();
        assert_eq!(entry_parts(3, big), [0..1, 1..2, 2..3]);
        // Texts that fit one entry only a few at a time.
        let half = |r: std::ops::Range<usize>| r.len() * (SPLICE_MAX / 2);
        assert_eq!(entry_parts(5, half), [0..1, 1..3, 3..5]);
        assert!(entry_parts(0, |r| r.len()).is_empty());
    }

    #[test]
    fn packed_pieces_join_the_small_and_keep_the_full_as_they_are() {
        // A thousand one-byte pieces (and empty ones): one entry.
        let tiny: Vec<String> = (0..1000).map(|i| if i % 7 == 0 { String::new() } else { "x".to_string() }).collect();
        let text = tiny.concat();
        assert_eq!(packed(tiny), [text]);
        // Full pieces go on as they are; a small one joins the one before
        // where both fit.
        let full = "a".repeat(SPLICE_MAX - 3);
        let pieces = vec![full.clone(), "bcd".to_string(), "e".repeat(SPLICE_MAX), "f".to_string(), "g".to_string()];
        let whole = pieces.concat();
        let p = packed(pieces);
        assert_eq!(p.iter().map(String::len).collect::<Vec<_>>(), [SPLICE_MAX, SPLICE_MAX, 2]);
        assert_eq!(p.concat(), whole);
        // No two neighbours fit together, so packing again changes nothing.
        assert!(p.windows(2).all(|w| w[0].len() + w[1].len() > SPLICE_MAX));
        assert_eq!(packed(p.clone()), p);
    }
}
