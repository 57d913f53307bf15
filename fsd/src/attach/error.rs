//! Why the daemon refused a frame of the attach protocol: each refusal a
//! variant, so callers and tests match on what happened; the text (a
//! 9P Rerror's) says what was wrong and what to do instead.

use apex_core::{AttachmentId, Reject, Seq, Shard};
use apex_link::wire::{FrameError, MAX_LEASE_TTL_MS};

#[derive(Debug, PartialEq, thiserror::Error)]
pub enum AttachError {
    #[error("attach: connection is gone")]
    ConnectionGone,
    /// The attachment's token does not allow it.
    #[error(transparent)]
    Access(#[from] crate::access::AccessError),
    #[error(transparent)]
    Frame(#[from] FrameError),
    /// Plumbing rules the session's plumber refused.
    #[error(transparent)]
    Plumb(#[from] crate::plumb::error::PlumbFsError),
    #[error(
        "attach: a write may complete at most one frame; {0} bytes follow the end of this one. \
         Write each frame (u32 length + postcard message) in writes of its own"
    )]
    TrailingBytes(usize),
    #[error(
        "attach: this connection's Welcome could not be encoded whole, so its stream is broken; \
         open attach again and say Hello (with resume to go on as the same attachment)"
    )]
    WelcomeUnfinished,
    #[error(
        "attach: this connection's stream is broken (a read failed holding bytes it had taken, or its \
         Welcome could not be encoded), so it takes nothing more; open attach again and say Hello \
         (with resume to go on as the same attachment)"
    )]
    StreamBroken,
    #[error("attach: the first frame must be Hello {{ kind, name, resume }}")]
    NotHello,
    #[error(
        "attach: the session's connections hold {held} bytes of messages not yet whole, at most {max} in all; \
         finish a message before starting another, or close the attach files left half-written"
    )]
    Unfinished { held: usize, max: usize },
    #[error("attach: already attached as {0}; Hello comes once")]
    AlreadyAttached(AttachmentId),
    #[error("attach: cannot create {0}: a client creates buffer and window shards with ids of its own range")]
    NotItsShard(Shard),
    #[error("attach: cannot delete {shard}: only its leader may (lease: {holder})")]
    NotTheLeader { shard: Shard, holder: AttachmentId },
    #[error("attach: bounded leases are for tools, on one buffer; not {0}")]
    BoundedLeaseNotHere(Shard),
    #[error("attach: a tool holds or asks for one bounded lease at a time; release it first")]
    OneBoundedLease,
    #[error("attach: a bounded lease needs a ttl from 1 to {} ms (a day); ask again for longer", MAX_LEASE_TTL_MS)]
    Ttl,
    #[error("attach: {0} messages wait unread; read the file before writing more")]
    Unread(usize),
    #[error("attach: Lead is for UIs; a tool asks for one buffer's lease with Lease")]
    LeadIsForUis,
    #[error("attach: no proposal {id} is waiting for {attachment}")]
    NoSuchProposal { id: u64, attachment: AttachmentId },
    #[error("attach: the metalog is the daemon's to write")]
    MetalogIsTheDaemons,
    #[error("attach: entry {seq} of {shard} claims attachment {claims}; this is {attachment}")]
    ForeignEntry { seq: Seq, shard: Shard, claims: AttachmentId, attachment: AttachmentId },
    /// One of several entries of an append was refused; none applied.
    #[error("{reject} (entry {at} of {of}; none of them applied)")]
    EntryRefused { reject: Reject, at: usize, of: usize },
    /// The authority log refused (a fenced append says `fenced: ...`).
    #[error(transparent)]
    Rejected(#[from] Reject),
}

impl AttachError {
    /// Whether the connection's stream is broken for good: the client is
    /// to attach again.
    pub fn breaks_stream(&self) -> bool {
        matches!(self, AttachError::WelcomeUnfinished | AttachError::StreamBroken)
    }
}
