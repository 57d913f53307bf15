//! The file tree's refusals: what a walk, open, read, write, create,
//! remove or wstat asked of a file that it does not do. Each is a variant
//! whose text is the Rerror a client reads (acme's words first where acme
//! has them), so it says what was wrong and how to do it right.

use apex_core::error::acme::{EBADCTL, EDIRTY, EINUSE, EPERM};

#[derive(Debug, thiserror::Error)]
pub enum FsError {
    #[error("not a directory")]
    NotADirectory,
    #[error("not a directory: cannot walk to {0:?}")]
    WalkFromFile(String),
    #[error("file does not exist: {0}")]
    NoSuchFile(String),
    #[error("no session {0:?} (see /index)")]
    NoSession(String),
    #[error("attach {0:?}: an attach name is \"\" (the root) or a session name")]
    BadAttachName(String),
    #[error("{EPERM}: {0} is a directory")]
    IsADirectory(String),
    #[error("{EPERM}: {0} cannot be opened")]
    CannotOpen(String),
    #[error("{EPERM}: {0} is read-only")]
    ReadOnly(String),
    #[error("{EPERM}: {0} is write-only; open it with OWRITE")]
    WriteOnly(String),
    /// A write to a file that takes none (`this file` where no name is
    /// at hand).
    #[error("{EPERM}: {0} is not writable")]
    NotWritable(String),
    #[error("{EPERM}: acme's files open for reading or writing only (no OEXEC, no ORCLOSE)")]
    AcmeOpenMode,
    #[error("{EPERM}: a terminal's window is read-only; type into terms/{0}/cons")]
    TermWindowReadOnly(u32),
    #[error("{EPERM}: editout is open only while an Edit pipe command runs")]
    EditoutClosed,
    #[error("attach: open it read-write (ORDWR): the protocol goes both ways")]
    AttachMode,
    #[error("{EPERM}: cannot create {0:?}; windows are made by walking to new")]
    CreateInAcme(String),
    #[error("cannot create {0:?}: sessions are made by writing \"new NAME\" to /ctl, buffers by opening buffers/new")]
    Create(String),
    #[error("{EPERM}: cannot remove {0}; delete a window with ctl \"delete\"")]
    RemoveInAcme(String),
    #[error(
        "cannot remove {0}: end a session with \"del NAME\" in /ctl, a window with \"delwindow N\" in its session's ctl"
    )]
    Remove(String),
    #[error("{EPERM}: acme's files take no wstat; open with OTRUNC, which acme ignores")]
    WstatInAcme,
    #[error("{0}: wstat can change nothing here but the length")]
    WstatChanges(String),
    #[error("body: wstat sets no length but 0, which empties it; write to add text")]
    WstatLength,
    /// A read of a fid the connection let through unopened, or opened as
    /// something else: the file's own bookkeeping, named.
    #[error("read of a fid that is not open; open it first")]
    NotOpen,
    #[error("{0} is not open")]
    Unopened(&'static str),
    #[error("a directory's listing is made whole")]
    ListingNotWhole,
    #[error("snapshot: open snapshots of other moments hold {held} bytes already, at most {max}: close some and open it again")]
    SnapshotsHeld { held: usize, max: usize },
    #[error("directory read at offset {offset}; continue at {end} or start again at 0")]
    DirectoryOffset { offset: u64, end: u64 },
    #[error("read of {0} bytes is too small for a directory entry")]
    DirectoryCount(u32),
    /// A write that is not UTF-8, to the file named (if any).
    #[error("{}write is not UTF-8 text", .0.map(|f| format!("{f}: ")).unwrap_or_default())]
    NotUtf8(Option<&'static str>),
    #[error("shard {0} was deleted")]
    ShardGone(apex_core::Shard),
    #[error("terminal {0} was closed")]
    TermClosed(u64),
    /// `acme/new` or `buffers/new` proposed a window and none was made.
    #[error("{0}: no window was made")]
    NoWindowMade(&'static str),
    #[error("event: writing events back is done through the acme tree (NAME/acme/N/event)")]
    EventWriteBack,
    #[error("{EINUSE}: rdsel is open")]
    RdselInUse,
    #[error("{EINUSE}: the window's ctl is locked by another fid")]
    CtlLocked,
    #[error("{EBADCTL}: unlock without lock")]
    UnlockWithoutLock,
    #[error("address out of range: addr is #{q0},#{q1}, backwards; set addr in order before dot=addr")]
    AddrBackwards { q0: u64, q1: u64 },
    /// acme's winclean for ctl's `del`: the warning, and how to go on.
    #[error("{EDIRTY}: {0}; del again to discard the changes, or put")]
    Dirty(apex_core::exec::ExecError),
    #[error("ctl: no window {0}")]
    NoWindow(u64),
    #[error(
        "lease: unknown request {0:?}; expected \"reclaim\" (the server takes the lease back). \
         Leases are asked for and given up through the attach protocol (NAME/attach)"
    )]
    LeaseRequest(String),
}
