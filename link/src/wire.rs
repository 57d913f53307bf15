//! The attach protocol's messages and framing: a little-endian u32 length,
//! then the postcard encoding of one message, in both directions.
//!
//! 9P reads and writes may cut the byte stream anywhere; [`Frames`]
//! reassembles it. The daemon additionally requires that one Twrite
//! complete at most one frame, so each write's Rwrite is one frame's
//! outcome.

use apex_core::propose::Applied;
use apex_core::{AttachmentId, AttachmentKind, Entry, Epoch, Proposal, Seq, Shard};
use serde::{Deserialize, Serialize};

/// The largest frame either side accepts: a Welcome carries a whole
/// snapshot.
pub const FRAME_MAX: usize = 1 << 30;

/// What a client sends to come back after its connection dropped.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Resume {
    pub attachment: AttachmentId,
    pub token: u64,
}

/// Client to daemon.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum ClientMsg {
    /// The first message: who this is. `resume` asks to continue a dropped
    /// attachment.
    Hello { kind: AttachmentKind, name: String, resume: Option<Resume> },
    /// Entries this attachment sequenced as the shard's leader;
    /// `generation` counts the Welcomes its replica was built from.
    /// `answers` are the outcomes of routed proposals for this shard whose
    /// entries these are: they stand or fall with them.
    Append { shard: Shard, entries: Vec<Entry>, generation: u64, answers: Vec<(u64, Result<Applied, String>)> },
    /// A shard the client's node made (it leads it at epoch 1).
    CreateShard { shard: Shard },
    /// A shard the client's node deleted.
    DeleteShard { shard: Shard },
    /// Gives the lease of `shard` up after `seq`, its last entry.
    Release { shard: Shard, seq: Seq },
    /// A change for the shard's leader; the write returns once it is
    /// sequenced, or fails with the reason it was refused, and the
    /// outcome also comes back as `Answer { id }`.
    Propose { id: u64, proposal: Proposal },
    /// The leader's outcome of a routed proposal, sent after the entries
    /// it made.
    Answer { id: u64, result: Result<Applied, String> },
    /// Asks for one buffer's lease for `ttl_ms` milliseconds (tools).
    Lease { shard: Shard, ttl_ms: u64 },
    /// A message for the user, appended to the metalog as `Notify`.
    Notify { text: String },
    /// Asks for a fresh Welcome: the client's replica has diverged (its
    /// tail was fenced) and it starts again from a snapshot.
    Resync,
    /// A UI asks for every shard a UI leads, as it did when it attached
    /// (`Lead` in a watching UI's tag); holders hand them over.
    Lead,
}

/// Daemon to client.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum ServerMsg {
    /// The answer to Hello (or Resync): the attachment, the token that
    /// resumes it, and the session's snapshot; entries after its marks
    /// follow.
    Welcome { attachment: AttachmentId, token: u64, snapshot: Vec<u8> },
    /// Entries of one shard, in order, after the ones sent before.
    Entries { shard: Shard, entries: Vec<Entry> },
    /// The leader's entries of `shard` up to `seq` are stored.
    Acked { shard: Shard, seq: Seq },
    /// A proposal for a shard this attachment leads at `epoch`; answer
    /// with `Answer`. A copy that reaches a replica leading at another
    /// epoch is stale (control messages may follow later entries in a
    /// read) and is dropped: the daemon sends it again to the holder now.
    Proposal { id: u64, epoch: Epoch, proposal: Proposal },
    /// The outcome of this client's `Propose { id }`.
    Answer { id: u64, result: Result<Applied, String> },
    /// Something the client should know that no write of its failed for
    /// (a refused resume, a lease that expired).
    Error { text: String },
}

/// One message as a frame.
pub fn frame<M: Serialize>(msg: &M) -> Vec<u8> {
    // The length is patched in once the body is encoded in place.
    let mut out = postcard::to_extend(msg, vec![0u8; 4]).expect("postcard encodes to a Vec without failing");
    let n = (out.len() - 4) as u32;
    out[..4].copy_from_slice(&n.to_le_bytes());
    out
}

/// Why a byte stream is not a frame stream.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum FrameError {
    #[error("attach: frame of {0} bytes is over the limit of {FRAME_MAX}")]
    TooLarge(usize),
    #[error("attach: bad frame: {0}")]
    Decode(String),
}

/// Room a frame buffer keeps between messages: a few 9P writes' worth.
const KEEP_ROOM: usize = 4 << 20;

/// Reassembles frames from bytes that arrive in arbitrary pieces.
#[derive(Debug, Default)]
pub struct Frames {
    buf: Vec<u8>,
}

impl Frames {
    pub fn push(&mut self, bytes: &[u8]) {
        self.buf.extend_from_slice(bytes);
    }

    /// Bytes held that do not yet make a frame.
    pub fn pending(&self) -> usize {
        self.buf.len()
    }

    /// Forgets every byte after the first `n` (a refused write's).
    pub fn truncate(&mut self, n: usize) {
        self.buf.truncate(n);
    }

    /// Forgets a partial frame.
    pub fn clear(&mut self) {
        self.buf.clear();
    }

    /// The length of the first frame (header included) once it is whole.
    pub fn whole(&self) -> Result<Option<usize>, FrameError> {
        if self.buf.len() < 4 {
            return Ok(None);
        }
        let n = u32::from_le_bytes(self.buf[..4].try_into().expect("4 bytes")) as usize;
        if n > FRAME_MAX {
            return Err(FrameError::TooLarge(n));
        }
        Ok((self.buf.len() >= 4 + n).then_some(4 + n))
    }

    /// The next whole message, if there is one. A frame that does not
    /// decode is consumed and reported.
    pub fn next_msg<M: for<'de> Deserialize<'de>>(&mut self) -> Result<Option<M>, FrameError> {
        let Some(n) = self.whole()? else { return Ok(None) };
        let msg = postcard::from_bytes(&self.buf[4..n]).map_err(|e| FrameError::Decode(e.to_string()));
        self.buf.drain(..n);
        // A big frame's room is given back once it is read, so that one
        // 100 MB message does not stay resident for the connection's life.
        if self.buf.capacity() > KEEP_ROOM && self.buf.len() < self.buf.capacity() / 4 {
            self.buf.shrink_to(self.buf.len().max(KEEP_ROOM));
        }
        msg.map(Some)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames_reassemble_from_any_cut() {
        let msgs = vec![
            ClientMsg::Hello { kind: AttachmentKind::Ui, name: "ui".into(), resume: None },
            ClientMsg::Release { shard: Shard::Layout, seq: 7 },
            ClientMsg::Resync,
        ];
        let bytes: Vec<u8> = msgs.iter().flat_map(frame).collect();
        for cut in 1..bytes.len() {
            let mut f = Frames::default();
            let mut got = Vec::new();
            for piece in bytes.chunks(cut) {
                f.push(piece);
                while let Some(m) = f.next_msg::<ClientMsg>().unwrap() {
                    got.push(m);
                }
            }
            assert_eq!(got, msgs, "cut every {cut} bytes");
            assert_eq!(f.pending(), 0);
        }
    }

    #[test]
    fn bad_frames_are_errors_not_panics() {
        let mut f = Frames::default();
        f.push(&[3, 0, 0, 0, 0xff, 0xff, 0xff]);
        assert!(matches!(f.next_msg::<ClientMsg>(), Err(FrameError::Decode(_))));
        assert_eq!(f.pending(), 0, "the bad frame is consumed");
        f.push(&u32::MAX.to_le_bytes());
        assert_eq!(f.next_msg::<ClientMsg>().unwrap_err(), FrameError::TooLarge(u32::MAX as usize));
    }

    #[test]
    fn a_big_frame_s_room_is_given_back_once_read() {
        let big = ClientMsg::Hello { kind: AttachmentKind::Ui, name: "x".repeat(40 << 20), resume: None };
        let bytes = frame(&big);
        let mut f = Frames::default();
        for piece in bytes.chunks(1 << 20) {
            f.push(piece);
        }
        assert!(f.buf.capacity() >= 40 << 20);
        assert_eq!(f.next_msg::<ClientMsg>().unwrap(), Some(big));
        assert!(f.buf.capacity() <= KEEP_ROOM, "{} bytes kept", f.buf.capacity());
        // Small frames keep their room: no shrinking on every message.
        let small = frame(&ClientMsg::Resync);
        f.push(&small);
        f.push(&small);
        let room = f.buf.capacity();
        assert_eq!(f.next_msg::<ClientMsg>().unwrap(), Some(ClientMsg::Resync));
        assert_eq!(f.buf.capacity(), room);
    }
}
