//! `Reject`: every way core refuses something, in one place.
//!
//! Core never panics on input: `apply`, the log, the node and proposals
//! return a `Reject` and leave everything as it was. Its `Display` is the
//! text a 9P Rerror carries to the user, so it says what was wrong and, where
//! it can, what to do instead. Fencing errors start with `fenced:`.

use crate::id::{AttachmentId, ColumnId, Epoch, RuleId, Seq, TermId, WindowId};
use crate::shard::{Shard, ShardKind, ViewId};

/// Why core refused an entry, an append, a lease change or a proposal.
/// It crosses the attach protocol as it is, so a client tells a fenced
/// refusal by its variant.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error, serde::Serialize, serde::Deserialize)]
pub enum Reject {
    #[error("a {op} op does not belong on shard {shard}")]
    WrongShard { op: ShardKind, shard: Shard },
    #[error("out of sequence on {shard}: got seq {got}, want {want}")]
    Sequence { shard: Shard, got: Seq, want: Seq },
    #[error("no shard {shard} in this session")]
    UnknownShard { shard: Shard },
    #[error("shard {shard} exists already")]
    ShardExists { shard: Shard },
    #[error("fenced: lease of {shard} is epoch {epoch} held by attachment {holder}; entry has attachment {attachment} epoch {got}")]
    Fenced { shard: Shard, epoch: Epoch, holder: AttachmentId, attachment: AttachmentId, got: Epoch },
    #[error("fenced: lease of {shard} (epoch {epoch}) was released at seq {seq}; ask for it again")]
    Released { shard: Shard, epoch: Epoch, seq: Seq },
    #[error("not leader of {shard}: propose the change instead, or ask for the lease")]
    NotLeader { shard: Shard },
    #[error("only the server appends to {shard}")]
    ServerOnly { shard: Shard },
    #[error("{shard} is pinned: the server always leads it")]
    Pinned { shard: Shard },
    #[error("lease epoch for {shard} must be {want}, got {got}")]
    Epoch { shard: Shard, want: Epoch, got: Epoch },
    #[error("{shard}: attachment {by} does not hold the lease (holder is {holder})")]
    NotHolder { shard: Shard, by: AttachmentId, holder: AttachmentId },
    #[error("{shard}: release must be at the last seq {want}, got {got}; flush first")]
    ReleaseSeq { shard: Shard, want: Seq, got: Seq },
    #[error("{shard} is compacted up to seq {base}: take a snapshot instead")]
    Compacted { shard: Shard, base: Seq },
    #[error("{shard}: cannot compact to seq {upto}, last is {last}")]
    CompactBeyond { shard: Shard, upto: Seq, last: Seq },
    #[error("{shard} has not been created yet (its first entry must be Create)")]
    NotCreated { shard: Shard },
    #[error("{shard} was created already")]
    Created { shard: Shard },
    #[error("{column}: an arrangement must list each of the column's windows once, tops rising from 0")]
    Arrangement { column: ColumnId },
    #[error("address out of range: {q0},{q1} in a text of {len} runes")]
    Range { q0: u64, q1: u64, len: u64 },
    #[error("no view {view} on this buffer")]
    NoView { view: ViewId },
    #[error("view {view} is on this buffer already")]
    ViewExists { view: ViewId },
    #[error("nothing to undo")]
    NothingToUndo,
    #[error("nothing to redo")]
    NothingToRedo,
    #[error("no window {window}")]
    NoWindow { window: WindowId },
    #[error("window {window} is placed already")]
    WindowPlaced { window: WindowId },
    #[error("no column {column}")]
    NoColumn { column: ColumnId },
    #[error("column {column} exists already")]
    ColumnExists { column: ColumnId },
    #[error("column {column} still has windows")]
    ColumnNotEmpty { column: ColumnId },
    #[error("fraction {0} is more than 1 (1000000)")]
    Fraction(u32),
    #[error("no term {term}")]
    NoTerm { term: TermId },
    #[error("term rows {top}..{end} are outside its {rows} rows")]
    TermRows { top: u32, end: u32, rows: u16 },
    #[error("term size {cols}x{rows} is not allowed (1..=4096 each)")]
    TermSize { cols: u16, rows: u16 },
    #[error("a scrollback of {limit} rows is over the limit of {max}")]
    TermScrollback { limit: u32, max: u32 },
    #[error("term rows do not unpack: {why}")]
    TermPacked { why: String },
    #[error("the session's identity is set already")]
    IdentitySet,
    #[error("attachment {0} exists already")]
    AttachmentExists(AttachmentId),
    #[error("no attachment {0}")]
    NoAttachment(AttachmentId),
    #[error("no rule {0}")]
    NoRule(RuleId),
    #[error("rule {0} exists already")]
    RuleExists(RuleId),
    #[error("no notification {0}")]
    NoNotification(u64),
    #[error("no process {0}")]
    NoProcess(u64),
    #[error("process {0} exists already")]
    ProcessExists(u64),
    #[error("version {got} is newer than the buffer's {current}")]
    FutureVersion { got: u64, current: u64 },
    #[error("version {got} is too old: edits since version {oldest} are all that is kept; read the buffer again")]
    StaleVersion { got: u64, oldest: u64 },
    #[error("id space of attachment {0} is used up")]
    IdsExhausted(AttachmentId),
    #[error("this is a mirror: only the authoritative log can {0}")]
    MirrorCannot(String),
    #[error("empty proposal: nothing to do")]
    Empty,
    #[error("bad snapshot: {0}")]
    Snapshot(String),
    #[error("{shard} lasts as long as its session: delete its windows instead")]
    Lasting { shard: Shard },
    #[error("tab width {got} is out of range: from 1 to {max} characters")]
    TabWidth { got: u32, max: u32 },
    #[error("bad character in file name {name:?}: a name is one line, with no newline")]
    BadName { name: String },
    #[error("a file name of {len} bytes is too long: at most {max}")]
    NameTooLong { len: usize, max: usize },
    #[error("one entry's text of {len} bytes is too long: at most {max}; a longer text goes in several entries (op::pieces)")]
    SpliceTooLong { len: usize, max: usize },
    #[error("a chord argument of {len} bytes is too long: at most {max}")]
    ArgTooLong { len: usize, max: usize },
    #[error("the rest of a snarf was to follow its first {at} bytes, but the snarf buffer holds {len}: another snarf came between")]
    SnarfMoved { at: u64, len: u64 },
    /// Last: it crosses the attach protocol, and older peers decode the
    /// variants before it as they were.
    #[error("bad changes of a many-change splice: {why}")]
    BadSpots { why: String },
}

/// Core's result type.
pub type Result<T> = std::result::Result<T, Reject>;

/// acme's error strings (plan9port's `xfid.c` and `fsys.c`), which acme's
/// clients match on. Every refusal in the acme tree starts with one of
/// these, then says what was wrong and how to do it right.
pub mod acme {
    pub const EPERM: &str = "permission denied";
    pub const EBADCTL: &str = "ill-formed control message";
    pub const EADDR: &str = "address out of range";
    pub const EBADADDR: &str = "bad address syntax";
    pub const EINUSE: &str = "already in use";
    pub const EBADEVENT: &str = "bad event syntax";
    pub const EDEL: &str = "deleted window";
    pub const ESHUTDOWN: &str = "window shut down";
    pub const EDIRTY: &str = "file dirty";
}
