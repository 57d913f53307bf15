//! 9P's own authentication, for a connection that must prove who it is
//! (apexd over TLS): Tauth makes an auth fid, whose reads and writes are
//! a conversation the server's [`Authenticate`] holds (a challenge read,
//! a proof written); Tattach is accepted only with an auth fid whose
//! conversation proved itself for the same uname and aname, and what it
//! proved (a grant) goes to [`super::Serve::attach_granted`]. Until an
//! attach is accepted, nothing but Tversion, Tauth, Tflush, Tattach and
//! the auth fids' reads, writes and clunks is answered.

/// How a server proves its clients: a conversation per Tauth.
pub trait Authenticate: Send + Sync + 'static {
    /// The conversation of a Tauth by `uname` for `aname`.
    fn begin(&self, uname: &str, aname: &str) -> Box<dyn Conversation>;
}

/// Why a conversation refused a read or a write: its words, the Rerror's
/// text.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct Refused(pub String);

/// One auth fid's conversation.
pub trait Conversation: Send {
    /// What a read of the auth fid gives (the challenge).
    fn read(&mut self, count: u32) -> std::result::Result<Vec<u8>, Refused>;
    /// A write to the auth fid (the proof): refused if it proves nothing.
    fn write(&mut self, data: &[u8]) -> std::result::Result<u32, Refused>;
    /// What the conversation proved, once it has: the grant an attach
    /// with this auth fid gets. Asked at every attach that names the auth
    /// fid (one fid may serve many), so what was proven may be revoked.
    fn proven(&self) -> Option<String>;
}

/// An auth fid: whom it is for, and its conversation.
pub(super) struct AuthFid {
    pub(super) uname: String,
    pub(super) aname: String,
    pub(super) conversation: Box<dyn Conversation>,
}
