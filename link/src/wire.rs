//! The attach protocol's messages and framing, in both directions: the
//! postcard encoding of one message in frames of at most [`FRAME_MAX`]
//! bytes, each a little-endian u32 header and its bytes. The header's top
//! bit ([`MORE`]) says the message goes on in the next frame, so a large
//! message (a Welcome with a 100 MB buffer, a long paste) goes in pieces
//! and no frame is large.
//!
//! 9P reads and writes may cut the byte stream anywhere; [`Frames`]
//! reassembles it. The daemon additionally requires that one Twrite
//! complete at most one message, so each write's Rwrite is one message's
//! outcome.

use apex_core::error::Reject;
use apex_core::op::SPLICE_MAX;
use apex_core::propose::Applied;
use apex_core::{AttachmentId, AttachmentKind, Entry, Epoch, Proposal, Seq, Shard, State};
use serde::{Deserialize, Serialize};

/// The largest frame either side sends or accepts; larger messages go in
/// pieces.
pub const FRAME_MAX: usize = 4 << 20;

/// The header bit saying the message goes on in the next frame.
pub const MORE: u32 = 1 << 31;

/// The largest message reassembled from pieces: a Welcome carries a whole
/// snapshot.
pub const MESSAGE_MAX: usize = 1 << 30;

/// The largest message a client sends the daemon, which holds no more of
/// one unfinished: no entry carries more than [`apex_core::op::SPLICE_MAX`]
/// bytes of text, and a link sends a long run of entries as several
/// appends (see [`append_frames`]).
pub const CLIENT_MESSAGE_MAX: usize = FRAME_MAX;

/// Why a proposal was not applied, as it crosses the wire: core's
/// refusal, by variant, or what a holder or the daemon said. Its text is
/// the same either way (it becomes a Rerror's).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, thiserror::Error)]
pub enum Refusal {
    #[error("{0}")]
    Rejected(Reject),
    #[error("{0}")]
    Said(String),
}

impl From<Reject> for Refusal {
    fn from(r: Reject) -> Refusal {
        Refusal::Rejected(r)
    }
}

impl From<String> for Refusal {
    fn from(s: String) -> Refusal {
        Refusal::Said(s)
    }
}

/// A proposal's outcome.
pub type Outcome = Result<Applied, Refusal>;

/// What a client sends to come back after its connection dropped.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Resume {
    pub attachment: AttachmentId,
    pub token: u64,
}

/// The longest bounded lease a tool may ask for: a day.
pub const MAX_LEASE_TTL_MS: u64 = 24 * 60 * 60 * 1000;

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
    Append { shard: Shard, entries: Vec<Entry>, generation: u64, answers: Vec<(u64, Outcome)> },
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
    Answer { id: u64, result: Outcome },
    /// Asks for one buffer's lease for `ttl_ms` milliseconds (tools), from
    /// 1 to [`MAX_LEASE_TTL_MS`].
    Lease { shard: Shard, ttl_ms: u64 },
    /// A message for the user, appended to the metalog as `Notify`.
    Notify { text: String },
    /// Asks for a fresh Welcome: the client's replica has diverged (its
    /// tail was fenced) and it starts again from a snapshot.
    Resync,
    /// A UI asks for every shard a UI leads, as it did when it attached
    /// (`Lead` in a watching UI's tag); holders hand them over.
    Lead,
    /// This attachment's plumbing rules (plumb(7)), in place of those it
    /// had (empty: none): matched before the session's own, gone when it
    /// detaches. Refused whole, with the line and reason, if one is wrong.
    Rules { text: String },
}

/// Daemon to client.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum ServerMsg {
    /// The answer to Hello (or Resync): the attachment, the token that
    /// resumes it, and the session's snapshot; entries after its marks
    /// follow.
    Welcome {
        attachment: AttachmentId,
        token: u64,
        #[serde(with = "apex_core::bytes")]
        snapshot: Vec<u8>,
    },
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
    Answer { id: u64, result: Outcome },
    /// Something the client should know that no write of its failed for
    /// (a refused resume, a lease that expired).
    Error { text: String },
}

/// One message as frames: one, or for a message over [`FRAME_MAX`]
/// bytes, pieces of that size whose headers but the last have [`MORE`].
pub fn frame<M: Serialize>(msg: &M) -> Vec<u8> {
    // Sized first, then encoded once into place, each frame's header
    // written as the frame begins: a 100 MB snapshot is copied once, into
    // a buffer that never grows.
    frame_sized(msg, size_of(msg))
}

/// The frames of `ClientMsg::Append`s of `shard`'s `entries`, in order,
/// each under [`CLIENT_MESSAGE_MAX`] (unless one entry alone is not);
/// `answers` ride with the last, so they stand or fall with all of it.
/// Encoded from the entries where they lie (the log's own): framing them
/// costs what a copy of them did, and no copy is left to frame after.
pub fn append_frames(shard: Shard, entries: &[&Entry], generation: u64, answers: &[(u64, Outcome)]) -> Vec<Vec<u8>> {
    // Room for the message's own fields and the answers (which name runs
    // of entries, so are small; a half of the message at the least).
    let room = CLIENT_MESSAGE_MAX.saturating_sub(64 * 1024 + size_of(answers)).max(CLIENT_MESSAGE_MAX / 2);
    let mut runs: Vec<&[&Entry]> = Vec::new();
    let (mut start, mut bytes) = (0, 0);
    for (i, e) in entries.iter().enumerate() {
        let n = size_of(e);
        if i > start && bytes + n > room {
            runs.push(&entries[start..i]);
            (start, bytes) = (i, 0);
        }
        bytes += n;
    }
    runs.push(&entries[start..]);
    let last = runs.len() - 1;
    runs.into_iter()
        .enumerate()
        .map(|(i, run)| {
            let answers = if i == last { answers } else { &[] };
            frame(&AppendRef::Append { shard, entries: run, generation, answers })
        })
        .collect()
}

/// `ClientMsg::Append` borrowing what it carries: encoded as that variant
/// is (postcard writes a variant's index, then its fields in order).
#[derive(Serialize)]
enum AppendRef<'a> {
    /// `ClientMsg::Hello`'s place, never written.
    #[allow(dead_code)]
    Hello,
    Append {
        shard: Shard,
        entries: &'a [&'a Entry],
        generation: u64,
        answers: &'a [(u64, Outcome)],
    },
}

/// The bytes of the frames of a message whose encoding is `n` bytes: a
/// header per [`FRAME_MAX`] bytes (one for an empty message).
pub fn framed_len(n: usize) -> usize {
    n + 4 * n.div_ceil(FRAME_MAX).max(1)
}

/// The size of `msg`'s postcard encoding.
pub fn size_of<M: Serialize + ?Sized>(msg: &M) -> usize {
    postcard::serialize_with_flavor(msg, postcard::ser_flavors::Size::default()).expect("postcard sizes any message")
}

/// [`frame`] of a message whose encoding is `n` bytes.
fn frame_sized<M: Serialize>(msg: &M, n: usize) -> Vec<u8> {
    let mut whole = Vec::new();
    let flavor = Pieces::new(n, usize::MAX, |part| {
        whole = part;
        true
    });
    postcard::serialize_with_flavor(msg, flavor).expect("postcard encodes a sized message to a Vec without failing");
    whole
}

/// The frames of `ServerMsg::Welcome { attachment, token, snapshot }` with
/// `state`'s snapshot, byte for byte, the snapshot encoded straight into
/// them: no snapshot is made apart and copied (it is a whole session's
/// text).
pub fn frame_welcome(attachment: AttachmentId, token: u64, state: &State) -> Vec<u8> {
    let (msg, n) = welcome_out(attachment, token, state, size_of(state));
    frame_sized(&msg, n)
}

/// [`frame_welcome`]'s bytes handed to `part` as they are encoded, in
/// parts of `part_size` bytes (the last may be shorter), so that they can
/// be sent while the rest is encoded. `part` returns false when nobody
/// wants more: the encoding stops there, and so does this, with false.
/// The state is measured first, its texts counted from their lengths
/// ([`State::encoded_len`]), so the first part is not held up by a pass
/// over every text only to count it.
pub fn frame_welcome_in_parts(
    attachment: AttachmentId,
    token: u64,
    state: &State,
    part_size: usize,
    part: impl FnMut(Vec<u8>) -> bool,
) -> bool {
    let state_len = state.encoded_len();
    let (msg, n) = welcome_out(attachment, token, state, state_len);
    postcard::serialize_with_flavor(&msg, Pieces::new(n, part_size.max(1), part)).is_ok()
}

/// The Welcome as it is serialized, and the size of its encoding, for a
/// state whose encoding is `state_len` bytes.
fn welcome_out(attachment: AttachmentId, token: u64, state: &State, state_len: usize) -> (WelcomeOut<'_>, usize) {
    let len = 1 + state_len;
    let empty = size_of(&ServerMsg::Welcome { attachment, token, snapshot: Vec::new() });
    // The empty snapshot's length took one byte; this one's takes more.
    let n = empty - 1 + size_of(&len) + len;
    (WelcomeOut { attachment, token, len, state }, n)
}

/// Serializes as `ServerMsg::Welcome` does: postcard writes a byte string
/// as its length and then its bytes, and a tuple as its fields one after
/// another, so (length, format, state) is the snapshot as a byte string.
struct WelcomeOut<'a> {
    attachment: AttachmentId,
    token: u64,
    /// The snapshot's length: its format byte and the state's encoding.
    len: usize,
    state: &'a State,
}

impl Serialize for WelcomeOut<'_> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeStructVariant;
        let mut v = s.serialize_struct_variant("ServerMsg", 0, "Welcome", 3)?;
        v.serialize_field("attachment", &self.attachment)?;
        v.serialize_field("token", &self.token)?;
        v.serialize_field("snapshot", &(self.len, apex_core::snap::SNAPSHOT_FORMAT, self.state))?;
        v.end()
    }
}

/// A postcard flavor that writes a message of a known size as frames: a
/// header before every [`FRAME_MAX`] bytes of it, written when its frame
/// begins (the size says which frame is the last), and the bytes handed
/// on in parts of a given size as they are written.
struct Pieces<F: FnMut(Vec<u8>) -> bool> {
    out: Vec<u8>,
    /// Message bytes not yet written.
    left: usize,
    /// Of them, those that belong to the frame being written.
    in_frame: usize,
    /// Whether a frame has been begun (a message of no bytes still has one).
    begun: bool,
    part_size: usize,
    part: F,
}

impl<F: FnMut(Vec<u8>) -> bool> Pieces<F> {
    fn new(n: usize, part_size: usize, part: F) -> Pieces<F> {
        let frames = n.div_ceil(FRAME_MAX).max(1);
        let out = Vec::with_capacity(part_size.min(n + 4 * frames));
        Pieces { out, left: n, in_frame: 0, begun: false, part_size, part }
    }

    /// Begins a frame, its header saying how long it is and whether
    /// another follows.
    fn begin_frame(&mut self) -> postcard::Result<()> {
        let len = self.left.min(FRAME_MAX);
        let more = if self.left > FRAME_MAX { MORE } else { 0 };
        self.begun = true;
        self.in_frame = len;
        self.put(&(len as u32 | more).to_le_bytes())
    }

    /// Appends `b`, handing on each part as it fills.
    fn put(&mut self, mut b: &[u8]) -> postcard::Result<()> {
        while !b.is_empty() {
            let k = (self.part_size - self.out.len()).min(b.len());
            self.out.extend_from_slice(&b[..k]);
            b = &b[k..];
            if self.out.len() == self.part_size {
                self.hand_on()?;
            }
        }
        Ok(())
    }

    fn hand_on(&mut self) -> postcard::Result<()> {
        let next = Vec::with_capacity(self.part_size.min(self.left + 4 * self.left.div_ceil(FRAME_MAX)));
        match (self.part)(std::mem::replace(&mut self.out, next)) {
            true => Ok(()),
            false => Err(postcard::Error::SerializeBufferFull),
        }
    }
}

impl<F: FnMut(Vec<u8>) -> bool> postcard::ser_flavors::Flavor for Pieces<F> {
    type Output = ();

    fn try_push(&mut self, b: u8) -> postcard::Result<()> {
        self.try_extend(&[b])
    }

    fn try_extend(&mut self, mut b: &[u8]) -> postcard::Result<()> {
        while !b.is_empty() {
            if self.in_frame == 0 {
                if self.left == 0 {
                    // More than was sized: the size was wrong.
                    return Err(postcard::Error::SerializeBufferFull);
                }
                self.begin_frame()?;
            }
            let k = self.in_frame.min(b.len());
            self.put(&b[..k])?;
            (self.in_frame, self.left) = (self.in_frame - k, self.left - k);
            b = &b[k..];
        }
        Ok(())
    }

    fn finalize(mut self) -> postcard::Result<()> {
        if self.left != 0 {
            return Err(postcard::Error::SerializeBufferFull);
        }
        // No piece is begun for nothing: a message of exactly the limit is
        // one frame, and one of no bytes is an empty frame.
        if !self.begun {
            self.begin_frame()?;
        }
        if !self.out.is_empty() {
            self.hand_on()?;
        }
        Ok(())
    }
}

/// Why a byte stream is not a frame stream.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum FrameError {
    #[error("attach: frame of {0} bytes is over the limit of {FRAME_MAX}: send a larger message in pieces (u32 header with bit 31 set on every piece but the last)")]
    TooLarge(usize),
    #[error("attach: a message of more than {0} bytes is refused: a client's messages are at most {CLIENT_MESSAGE_MAX} bytes (a text goes in entries of at most {SPLICE_MAX} bytes, many entries in several appends), the daemon's at most {MESSAGE_MAX}")]
    MessageTooLarge(usize),
    #[error("attach: bad frame: {0}")]
    Decode(String),
}

/// Room a frame buffer keeps between messages: a few 9P writes' worth.
const KEEP_ROOM: usize = 4 << 20;

/// The most room kept once every frame is read: small frames' room is
/// reused, a large one's given back.
const IDLE_ROOM: usize = 64 << 10;

/// Reassembles frames from bytes that arrive in arbitrary pieces.
#[derive(Debug)]
pub struct Frames {
    buf: Vec<u8>,
    /// The largest message taken: a message declared longer is refused
    /// as its headers arrive, so no more than this is ever held for one.
    limit: usize,
}

impl Default for Frames {
    /// Frames of the daemon's messages (a Welcome may be large).
    fn default() -> Frames {
        Frames { buf: Vec::new(), limit: MESSAGE_MAX }
    }
}

impl Frames {
    /// Frames of a client's messages, as the daemon takes them: at most
    /// [`CLIENT_MESSAGE_MAX`] bytes each.
    pub fn from_a_client() -> Frames {
        Frames { buf: Vec::new(), limit: CLIENT_MESSAGE_MAX }
    }

    pub fn push(&mut self, bytes: &[u8]) {
        self.buf.extend_from_slice(bytes);
    }

    /// Bytes held that do not yet make a frame.
    pub fn pending(&self) -> usize {
        self.buf.len()
    }

    /// Those bytes.
    pub fn held(&self) -> &[u8] {
        &self.buf
    }

    /// Forgets every byte after the first `n` (a refused write's).
    pub fn truncate(&mut self, n: usize) {
        self.buf.truncate(n);
    }

    /// Forgets a partial frame.
    pub fn clear(&mut self) {
        self.buf.clear();
    }

    /// The bytes of the first message's frames (headers included) once
    /// all of them are here.
    pub fn whole(&self) -> Result<Option<usize>, FrameError> {
        let (mut at, mut total) = (0, 0);
        loop {
            let Some(header) = self.buf.get(at..at + 4) else { return Ok(None) };
            let header = u32::from_le_bytes(header.try_into().expect("4 bytes"));
            let n = (header & !MORE) as usize;
            if n > FRAME_MAX {
                return Err(FrameError::TooLarge(n));
            }
            total += n;
            if total > self.limit {
                return Err(FrameError::MessageTooLarge(self.limit));
            }
            if self.buf.len() < at + 4 + n {
                return Ok(None);
            }
            at += 4 + n;
            if header & MORE == 0 {
                return Ok(Some(at));
            }
        }
    }

    /// The next whole message, if there is one. A message that does not
    /// decode is consumed and reported.
    pub fn next_msg<M: for<'de> Deserialize<'de>>(&mut self) -> Result<Option<M>, FrameError> {
        self.next_with(|bytes| postcard::from_bytes(bytes).map_err(|e| FrameError::Decode(e.to_string())))?.transpose()
    }

    /// Runs `f` on the next whole message's bytes, if there is one, and
    /// consumes them. A message in pieces is joined where it lies (no copy
    /// of a large snapshot is made), so `f` may decode borrowing from it.
    pub fn next_with<R>(&mut self, f: impl FnOnce(&[u8]) -> R) -> Result<Option<R>, FrameError> {
        let Some(n) = self.whole()? else { return Ok(None) };
        let (mut at, mut end) = (0, 0);
        while at < n {
            let len = (u32::from_le_bytes(self.buf[at..at + 4].try_into().expect("4 bytes")) & !MORE) as usize;
            self.buf.copy_within(at + 4..at + 4 + len, end);
            end += len;
            at += 4 + len;
        }
        let got = f(&self.buf[..end]);
        self.buf.drain(..n);
        // A big frame's room is given back once it is read, so that one
        // 100 MB message does not stay resident for the connection's life,
        // nor a few megabytes for a connection that goes quiet.
        if self.buf.is_empty() && self.buf.capacity() > IDLE_ROOM {
            self.buf = Vec::new();
        } else if self.buf.capacity() > KEEP_ROOM && self.buf.len() < self.buf.capacity() / 4 {
            self.buf.shrink_to(self.buf.len().max(KEEP_ROOM));
        }
        Ok(Some(got))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_snapshot_goes_as_bytes_encoded_as_a_sequence_would_be() {
        // The Welcome's bytes are what the sequence of u8 encoded to, so
        // either end may be older than the other.
        #[derive(Serialize, Deserialize)]
        enum Old {
            Welcome { attachment: AttachmentId, token: u64, snapshot: Vec<u8> },
        }
        let snapshot: Vec<u8> = (0..=255u8).cycle().take(70_000).collect();
        let new = ServerMsg::Welcome { attachment: AttachmentId(3), token: 9, snapshot: snapshot.clone() };
        let old = Old::Welcome { attachment: AttachmentId(3), token: 9, snapshot };
        let bytes = postcard::to_allocvec(&new).unwrap();
        assert_eq!(bytes, postcard::to_allocvec(&old).unwrap());
        assert_eq!(postcard::from_bytes::<ServerMsg>(&bytes).unwrap(), new);
    }

    #[test]
    fn frames_reassemble_from_any_cut() {
        let msgs = vec![
            ClientMsg::Hello { kind: AttachmentKind::Ui, name: "ui".into(), resume: None },
            ClientMsg::Release { shard: Shard::Layout, seq: 7 },
            ClientMsg::Resync,
        ];
        let bytes: Vec<u8> = msgs.iter().flat_map(frame).collect();
        for cut in 1..bytes.len() {
            assert_eq!(reassembled(&bytes, cut), msgs, "cut every {cut} bytes");
        }
    }

    /// The messages `bytes` make when they come `cut` bytes at a time;
    /// nothing may be left over.
    fn reassembled(bytes: &[u8], cut: usize) -> Vec<ClientMsg> {
        let mut f = Frames::default();
        let mut got = Vec::new();
        for piece in bytes.chunks(cut) {
            f.push(piece);
            while let Some(m) = f.next_msg::<ClientMsg>().unwrap() {
                got.push(m);
            }
        }
        assert_eq!(f.pending(), 0);
        got
    }

    #[test]
    fn a_large_message_goes_in_pieces_none_over_the_limit() {
        let big = ClientMsg::Hello { kind: AttachmentKind::Ui, name: "y".repeat(FRAME_MAX * 2 + 17), resume: None };
        let bytes = frame(&big);
        let mut at = 0;
        let mut sizes = Vec::new();
        while at < bytes.len() {
            let header = u32::from_le_bytes(bytes[at..at + 4].try_into().unwrap());
            let n = (header & !MORE) as usize;
            assert!(n <= FRAME_MAX);
            sizes.push((n, header & MORE != 0));
            at += 4 + n;
        }
        assert_eq!(sizes.len(), 3, "{sizes:?}");
        assert!(sizes[..2].iter().all(|(_, more)| *more) && !sizes[2].1);
        // Any cut of the pieces reassembles to the message, and nothing
        // is whole before the last piece is.
        for cut in [1, 3, 4096, FRAME_MAX - 1, FRAME_MAX + 4, 3 << 20] {
            assert_eq!(reassembled(&bytes, cut), std::slice::from_ref(&big), "cut every {cut} bytes");
        }
        let mut f = Frames::default();
        f.push(&bytes[..bytes.len() - 1]);
        assert_eq!(f.whole(), Ok(None));
    }

    #[test]
    fn a_welcome_framed_from_its_state_is_the_welcome_of_its_snapshot() {
        let mut node = apex_core::Node::server();
        apex_core::make::init_session(&mut node).unwrap();
        let b = node.create_buffer_as("/tmp/big").unwrap();
        // Past one frame, so the snapshot's bytes cross a piece's edge.
        let text = "the snapshot crosses frames\n".repeat((FRAME_MAX + 1000) / 28);
        node.append_splice(b, 0, 0, &text, apex_core::Origin::FileWrite).unwrap();
        for state in [apex_core::State::new(), node.state.clone()] {
            let msg = ServerMsg::Welcome { attachment: AttachmentId(5), token: 1 << 40, snapshot: state.to_snapshot() };
            let streamed = frame_welcome(AttachmentId(5), 1 << 40, &state);
            assert_eq!(streamed, frame(&msg));
            assert_eq!(streamed.capacity(), streamed.len(), "sized exactly");
            // In parts of any size, the same bytes, every part full but
            // the last.
            for size in [1000, 4099, 1 << 20, FRAME_MAX + 4, usize::MAX] {
                let mut parts = Vec::new();
                assert!(frame_welcome_in_parts(AttachmentId(5), 1 << 40, &state.clone(), size, |p| {
                    parts.push(p);
                    true
                }));
                assert_eq!(parts.concat(), streamed, "parts of {size}");
                let (last, full) = parts.split_last().unwrap();
                assert!(full.iter().all(|p| p.len() == size) && last.len() <= size, "parts of {size}");
            }
        }
        // A reader that wants no more stops the encoding.
        let mut parts = 0;
        let done = frame_welcome_in_parts(AttachmentId(5), 1, &node.state, 4096, |_| {
            parts += 1;
            parts < 3
        });
        assert!(!done);
        assert_eq!(parts, 3);
    }

    #[test]
    fn a_message_of_exactly_the_limit_is_one_frame_and_one_more_byte_is_two() {
        let hello = |len: usize| ClientMsg::Hello { kind: AttachmentKind::Tool, name: "z".repeat(len), resume: None };
        let size = |m: &ClientMsg| postcard::to_allocvec(m).unwrap().len();
        for (target, pieces) in [(FRAME_MAX, 1), (FRAME_MAX + 1, 2), (2 * FRAME_MAX, 2), (2 * FRAME_MAX + 1, 3)] {
            // The name's length prefix is 4 bytes long at these sizes.
            let msg = hello(target - (size(&hello(FRAME_MAX)) - FRAME_MAX));
            assert_eq!(size(&msg), target);
            let bytes = frame(&msg);
            assert_eq!(bytes.len(), target + 4 * pieces, "{target}: {pieces} headers");
            assert_eq!(bytes.capacity(), bytes.len(), "{target}: encoded into place, never grown");
            let mut at = 0;
            for i in 0..pieces {
                let header = u32::from_le_bytes(bytes[at..at + 4].try_into().unwrap());
                assert_eq!(header & MORE != 0, i + 1 < pieces, "{target}: piece {i}");
                at += 4 + (header & !MORE) as usize;
            }
            assert_eq!(at, bytes.len());
            assert_eq!(reassembled(&bytes, 1 << 20), [msg]);
        }
    }

    #[test]
    fn many_entries_go_in_appends_under_the_client_limit_the_answers_with_the_last() {
        let shard = Shard::Buffer(apex_core::BufferId(3));
        let text = "e".repeat(apex_core::op::SPLICE_MAX);
        let entries: Vec<Entry> = (1..=9)
            .map(|seq| Entry {
                seq,
                attachment: AttachmentId(1),
                epoch: 1,
                op: apex_core::Op::Buffer(apex_core::BufferOp::Splice {
                    q0: 0,
                    q1: 0,
                    text: text.clone(),
                    origin: apex_core::Origin::Keyboard,
                }),
            })
            .collect();
        let answers = vec![(5, Err(Refusal::Said("no".into())))];
        let refs: Vec<&Entry> = entries.iter().collect();
        let frames = append_frames(shard, &refs, 2, &answers);
        let msgs: Vec<ClientMsg> = frames
            .iter()
            .map(|f| {
                let mut fr = Frames::from_a_client();
                fr.push(f);
                fr.next_msg::<ClientMsg>().unwrap().expect("one whole message a frame")
            })
            .collect();
        assert!(msgs.len() >= 3, "{} appends", msgs.len());
        for (f, m) in frames.iter().zip(&msgs) {
            assert!(*f == frame(m), "encoded as ClientMsg::Append is");
        }
        let mut again = Vec::new();
        for (i, m) in msgs.iter().enumerate() {
            assert!(size_of(m) <= CLIENT_MESSAGE_MAX, "append {i} is {} bytes", size_of(m));
            let ClientMsg::Append { entries, answers: a, generation, .. } = m else { panic!() };
            assert_eq!(*generation, 2);
            assert_eq!(a.is_empty(), i + 1 < msgs.len(), "answers only with the last");
            again.extend(entries.iter().cloned());
        }
        assert!(again == entries, "every entry, in order");
        // The daemon's frames take each; one over the limit is refused.
        let mut f = Frames::from_a_client();
        f.push(&frame(&msgs[0]));
        assert!(f.next_msg::<ClientMsg>().unwrap().is_some());
        let over = frame(&ClientMsg::Notify { text: "n".repeat(CLIENT_MESSAGE_MAX) });
        f.push(&over[..4 + FRAME_MAX]);
        assert_eq!(f.whole(), Ok(None), "a first piece of at most the limit waits for more");
        f.push(&over[4 + FRAME_MAX..4 + FRAME_MAX + 4]);
        assert_eq!(f.whole(), Err(FrameError::MessageTooLarge(CLIENT_MESSAGE_MAX)));
    }

    #[test]
    fn bad_frames_are_errors_not_panics() {
        let mut f = Frames::default();
        f.push(&[3, 0, 0, 0, 0xff, 0xff, 0xff]);
        assert!(matches!(f.next_msg::<ClientMsg>(), Err(FrameError::Decode(_))));
        assert_eq!(f.pending(), 0, "the bad frame is consumed");
        f.push(&u32::MAX.to_le_bytes());
        assert_eq!(f.next_msg::<ClientMsg>().unwrap_err(), FrameError::TooLarge(!MORE as usize));
        let mut f = Frames::default();
        f.push(&((FRAME_MAX + 1) as u32).to_le_bytes());
        assert_eq!(f.whole(), Err(FrameError::TooLarge(FRAME_MAX + 1)), "one frame over 4 MiB");
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
        assert!(f.buf.capacity() <= IDLE_ROOM, "{} bytes kept by a quiet connection", f.buf.capacity());
        // Small frames keep their room: no shrinking on every message.
        let small = frame(&ClientMsg::Resync);
        f.push(&small);
        f.push(&small);
        let room = f.buf.capacity();
        assert_eq!(f.next_msg::<ClientMsg>().unwrap(), Some(ClientMsg::Resync));
        assert_eq!(f.buf.capacity(), room);
    }
}
