//! Who may do what over TCP: the scope a token grants (`read`, `edit`,
//! `full`), carried by every fid attached with it and, while a request of
//! such a fid runs, by the request itself, so the places that run programs
//! or touch the daemon's files refuse it whatever path reached them;
//! `tokens` (the tokens, kept in the state directory, and 9P's Tauth
//! conversation that proves one) and `tls` (the daemon's certificate and
//! the client's pin).
//!
//! The Unix socket and an `--insecure` TCP listener grant `full`, as they
//! always have: a client there is the user already.

pub mod tls;
pub mod tokens;

use apex_core::Action;
use std::future::Future;

/// What a token lets a client do.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Scope {
    /// Reads only.
    Read,
    /// Change text and layout; nothing that runs a program or touches the
    /// daemon's files.
    Edit,
    /// Everything the user can.
    Full,
}

impl Scope {
    pub fn parse(s: &str) -> Result<Scope, AccessError> {
        match s {
            "read" => Ok(Scope::Read),
            "edit" => Ok(Scope::Edit),
            "full" => Ok(Scope::Full),
            other => Err(AccessError::BadScope(other.to_string())),
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Scope::Read => "read",
            Scope::Edit => "edit",
            Scope::Full => "full",
        }
    }
}

#[derive(Debug, PartialEq, Eq, thiserror::Error)]
pub enum AccessError {
    #[error("bad scope {0:?}: want read, edit or full")]
    BadScope(String),
    /// What the request's scope does not allow.
    #[error("permission denied: {what} needs a full token; this connection's token is {}", scope.name())]
    Denied { scope: Scope, what: String },
    #[error("permission denied: a read token reads only ({what})")]
    ReadOnly { what: String },
    /// An event written back names a B2 a client short of a full token
    /// made, on text that is no built-in.
    #[error("permission denied: {command:?} was executed (B2) by a client with an edit token, which runs built-ins only; a client with a full token may run it")]
    NotBuiltin { command: String },
}

tokio::task_local! {
    /// The scope of the request running: absent for the daemon's own work
    /// and for connections that need no token.
    static SCOPE: Scope;
}

/// Runs `f` as a request of `scope`.
pub async fn within<F: Future>(scope: Scope, f: F) -> F::Output {
    SCOPE.scope(scope, f).await
}

/// Runs `f` (on a thread of its own, off the request's task) as a
/// request of `scope`.
pub fn within_blocking<R>(scope: Scope, f: impl FnOnce() -> R) -> R {
    SCOPE.sync_scope(scope, f)
}

/// The running request's scope (`full` outside any).
pub fn current() -> Scope {
    SCOPE.try_with(|s| *s).unwrap_or(Scope::Full)
}

/// Refuses `what` (running a program, reading or writing the daemon's
/// files, a terminal) unless the running request may do everything.
pub fn require_full(what: &str) -> Result<(), AccessError> {
    require_full_in(current(), what)
}

/// As [`require_full`], for a request whose scope is `scope`.
pub fn require_full_in(scope: Scope, what: &str) -> Result<(), AccessError> {
    match scope {
        Scope::Full => Ok(()),
        scope => Err(AccessError::Denied { scope, what: what.to_string() }),
    }
}

/// A proposal as a client short of `full` may make it, whatever path it
/// comes by (the attach protocol, the session's `proposals` file):
/// - a B2 or B3 it reports to an acme event file's reader (win, a tool)
///   is noted as its ([`Action::LIMITED`]): written back, it runs with
///   this scope, a B2 only if it is a built-in. A B2 not flagged as a
///   built-in is refused: win sends that text to its shell;
/// - the text it changes reaches event readers as a write (`E`), never as
///   typing (`K`, `M`): win sends what is typed after its prompt to its
///   shell;
/// - no undo or redo where a tool reads the buffer's events (`watched`):
///   the leader letters those events. A client leading the buffer itself
///   undoes as it likes, its entries said as writes (`Hub::limited`).
pub fn limit_proposal(
    mut proposal: apex_core::Proposal,
    watched: impl Fn(apex_core::BufferId) -> bool,
) -> Result<apex_core::Proposal, AccessError> {
    use apex_core::{Origin, Proposal};
    if current() == Scope::Full {
        return Ok(proposal);
    }
    match &mut proposal {
        Proposal::Exec { action, .. } => {
            if action.flags & BUILT_IN == 0 {
                require_full(NOT_BUILT_IN)?;
            }
            note_limited(action);
        }
        Proposal::Look { action, .. } => note_limited(action),
        Proposal::Insert { origin, .. }
        | Proposal::Delete { origin, .. }
        | Proposal::Replace { origin, .. }
        | Proposal::ReplacePieces { origin, .. }
        | Proposal::Splices { origin, .. }
        | Proposal::SplicesMore { origin, .. } => {
            if matches!(origin, Origin::Keyboard | Origin::Mouse) {
                *origin = Origin::FileWrite;
            }
        }
        Proposal::Undo { buffer } | Proposal::Redo { buffer } if watched(*buffer) => {
            require_full("undo or redo proposed in a window a tool reads the events of (lead it to undo there)")?;
        }
        _ => {}
    }
    Ok(proposal)
}

/// Whether a window showing `buffer` has its events read by a tool.
pub fn events_read(state: &apex_core::State, buffer: apex_core::BufferId) -> bool {
    state.windows.values().any(|w| (w.body == buffer || w.tag == buffer) && w.event_reader.is_some())
}

/// As [`limit_proposal`]'s first rule, for the entries of an attachment
/// short of a full token that leads the buffer: a B2 it reports must be
/// flagged a built-in (win sends any other to its shell). Its entries
/// need no note: `Hub::limited` says whose they are.
pub fn limit_entries(entries: &[apex_core::Entry]) -> Result<(), AccessError> {
    use apex_core::op::{BufferOp, Op};
    let runs = entries.iter().any(|e| matches!(&e.op, Op::Buffer(BufferOp::ExecAt(a)) if a.flags & BUILT_IN == 0));
    match runs {
        true => require_full(NOT_BUILT_IN),
        false => Ok(()),
    }
}

/// Notes a limited client's action so, and drops the expansion it says:
/// a reader may write that range back (the Go acme package does), and
/// it would name runes of the client's choosing. Without one the reader
/// writes back the click, which the daemon expands then.
fn note_limited(action: &mut Action) {
    action.flags = (action.flags & !EXPANDED) | Action::LIMITED;
    action.expansion = None;
}

/// acme's event flag for an action whose range was expanded.
const EXPANDED: u32 = 2;

/// acme's event flag for a B2 on a built-in.
const BUILT_IN: u32 = 1;

/// What a B2 not flagged a built-in needs, where a tool reads the events.
const NOT_BUILT_IN: &str =
    "B2 on text that is not a built-in, in a window a tool reads the events of (win runs it in its shell),";

/// Refuses a change of any kind to a read token.
pub fn require_change(scope: Scope, what: &str) -> Result<(), AccessError> {
    match scope {
        Scope::Read => Err(AccessError::ReadOnly { what: what.to_string() }),
        _ => Ok(()),
    }
}
