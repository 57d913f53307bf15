//! The daemon's errors, typed: what went wrong as a variant, so code
//! below the 9P edge matches on it; at the edge (`fsys`, the binaries)
//! an error becomes its text, a Rerror that says what was wrong and how
//! to do it right.

use crate::attach::error::AttachError;
use crate::fsys::ctl::CtlError;
use apex_core::addr::AddrError;
use apex_core::error::acme::{EADDR, EDEL, ESHUTDOWN};
use apex_core::exec::ExecError;
use apex_core::Reject;
use apex_link::wire::Refusal;

/// An outcome of the daemon's, by default refused with an [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A file of the tree does not do what was asked of it.
    #[error(transparent)]
    Fs(#[from] crate::fsys::error::FsError),
    /// The request's token does not allow it.
    #[error(transparent)]
    Access(#[from] crate::access::AccessError),
    /// Core refused: a proposal applied by the view node, a log operation.
    #[error(transparent)]
    Rejected(#[from] Reject),
    /// A routed proposal's refusal, as its leader gave it (core's, or a
    /// withdrawal's words).
    #[error(transparent)]
    Refused(#[from] Refusal),
    /// The attach protocol refused a frame.
    #[error(transparent)]
    Attach(#[from] AttachError),
    /// The registry refused (a name taken, no such session).
    #[error(transparent)]
    Registry(#[from] apex_core::registry::RegistryError),
    /// A ctl file refused a message.
    #[error(transparent)]
    Ctl(#[from] CtlError),
    /// A message that parsed does not fit the state (a host service checks
    /// again when it runs).
    #[error(transparent)]
    Unfit(#[from] crate::fsys::ctl::Unfit),
    /// A built-in or host service refused (acme's words).
    #[error(transparent)]
    Exec(#[from] ExecError),
    /// An address (an `addr` write) did not evaluate. acme answers a bad
    /// regexp there as it answers no match (`xfidwrite`'s Eaddr), so the
    /// text starts with its words.
    #[error("{}", addr_words(.0))]
    Addr(#[from] AddrError),
    /// A `proposals` write that is not a proposal.
    #[error(transparent)]
    Proposal(#[from] crate::session::proposals::ProposalError),
    /// A write to acme's `event` that is not an event.
    #[error(transparent)]
    Event(#[from] crate::acme::event::EventError),
    /// The state directory refused (a registry or log file).
    #[error(transparent)]
    Store(#[from] crate::persist::StoreError),
    /// A session's log refused to go on: nothing more is acknowledged.
    #[error(transparent)]
    Log(#[from] crate::persist::durable::LogError),
    #[error("session {0:?} is kept on disk but could not be brought back (see apexd's log); choose another name")]
    HeldBack(String),
    #[error("session was deleted")]
    SessionGone,
    #[error("buffer {0} was deleted")]
    BufferGone(u64),
    /// acme's: the window a file belongs to was deleted.
    #[error("{EDEL}")]
    WindowDeleted,
    /// acme's: a pending event read of a window deleted meanwhile.
    #[error("{ESHUTDOWN}: the window was deleted")]
    WindowShutDown,
    /// A stream read at an offset other than where the last one ended.
    #[error("read at offset {offset}, but this stream is at {at}: streams read in order")]
    OutOfOrder { offset: u64, at: u64 },
    /// A `data` read from an address past the end.
    #[error("{EADDR}: #{q0} is past the end ({len} runes)")]
    PastEnd { q0: u64, len: u64 },
    #[error("ctl: get and put are host services, not proposals")]
    HostService,
    /// A file a host service reads.
    #[error(transparent)]
    File(#[from] apex_sys::files::FileError),
    /// A file or process a host service uses.
    #[error("{what}: {source}")]
    Io { what: String, source: std::io::Error },
    /// A host service's blocking work stopped before it answered.
    #[error("{what}: {source}")]
    Task { what: &'static str, source: tokio::task::JoinError },
    #[error("kill: bad pid {0}")]
    BadPid(u64),
    #[error("put: wrote version {at} to {file}, but the buffer has changed since (version {now}); it stays dirty")]
    PutRaced { at: u64, file: String, now: u64 },
    /// Put over a file that is not all UTF-8: warned once, as acme warns
    /// of a modified file.
    #[error(
        "put: {0} holds bytes that are not UTF-8 (a file loaded from it shows each as U+FFFD), and Put would \
         write the text's UTF-8 in their place; Put again to write it so"
    )]
    PutNotUtf8(String),
    #[error("exec: could not make the errors window")]
    NoErrorsWindow,
    /// `open`: the file's window went before it could be named.
    #[error("open {0}: no window shows it (it was deleted meanwhile); open it again")]
    NotShown(String),
    #[error("exec: the command exited before it could be recorded")]
    ExitedAtOnce,
    #[error("proposal lost: its session was deleted")]
    ProposalLost,
    /// A terminal's pty or program refused.
    #[error(transparent)]
    Term(#[from] crate::pty::proc::ProcError),
    #[error("no terminal {0} in this session (see terms/index)")]
    NoTerm(u64),
    /// The session's plumber refused a message or rules.
    #[error(transparent)]
    Plumb(#[from] crate::plumb::error::PlumbFsError),
}

fn addr_words(e: &AddrError) -> String {
    match e {
        AddrError::Regexp(_) => format!("address out of range: {e}"),
        e => e.to_string(),
    }
}
