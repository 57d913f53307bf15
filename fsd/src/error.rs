//! The daemon's errors, typed: what went wrong as a variant, so code
//! below the 9P edge matches on it; at the edge (`fsys`, the binaries)
//! an error becomes its text, a Rerror that says what was wrong and how
//! to do it right.

use crate::attach::error::AttachError;
use crate::ctl::CtlError;
use apex_core::Reject;
use apex_link::wire::Refusal;

#[derive(Debug, PartialEq, thiserror::Error)]
pub enum Error {
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
    #[error("session was deleted")]
    SessionGone,
    #[error("proposal lost: its session was deleted")]
    ProposalLost,
}

impl From<Error> for String {
    fn from(e: Error) -> String {
        e.to_string()
    }
}
