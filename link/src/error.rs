//! Why an attachment could not be made or its frames not written: each
//! carries the 9P error or the frame's fault, and says where.

use apex_ninep::ClientError;

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LinkError {
    #[error("attach {session:?}: {source}")]
    Attach { session: String, source: ClientError },
    #[error("open {session}/attach: {source}")]
    Open { session: String, source: ClientError },
    #[error("attach: write: {0}")]
    Write(ClientError),
    /// The daemon refused a frame (a fenced append says `fenced: ...`).
    #[error("{0}")]
    Refused(ClientError),
    /// A frame that arrived could not be taken (for tests that hold them).
    #[error("{0}")]
    Frame(String),
}
