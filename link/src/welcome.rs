//! A large Welcome decoded while it is still arriving.
//!
//! A Welcome carries a whole session's snapshot, tens of megabytes when a
//! big file is open. Gathered whole and then decoded, its time is the
//! sum of moving it and decoding it; decoded on a thread of its own as its
//! frames arrive, the decoding keeps pace with the reads and little is
//! left to do when the last frame comes. Nothing is gathered in a frame
//! buffer either: each read's bytes go to the decoder, which lets them go
//! once decoded (they wait for it only while it is behind).
//!
//! Only a Welcome in pieces (over [`FRAME_MAX`]) is decoded so; a small
//! one, like every other message, is decoded whole where it lies.

use crate::wire::{FrameError, FRAME_MAX, MESSAGE_MAX, MORE};
use apex_core::{AttachmentId, Reject, State};
use serde::Deserialize;
use std::sync::mpsc;
use std::thread::JoinHandle;

/// What the decoder made of a Welcome: its attachment and token, and its
/// state or why the snapshot did not decode.
pub(crate) type Decoded = Result<(AttachmentId, u64, Result<State, Reject>), WelcomeError>;

/// Why a Welcome that came in pieces could not be read (its snapshot's
/// own fault is the `Reject` beside the rest).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum WelcomeError {
    #[error("welcome: {0}")]
    Head(postcard::Error),
    #[error("welcome: message {0} is not a Welcome")]
    NotWelcome(u32),
    #[error("the Welcome's decoder failed")]
    DecoderFailed,
    #[error("the Welcome was decoded already")]
    DecodedAlready,
}

/// A Welcome in pieces being decoded: its frames' bytes are fed to the
/// decoder as they are read, headers taken out.
pub(crate) struct Streaming {
    /// Where the message's bytes go; dropped at its end, or when the
    /// decoder stopped (the snapshot did not decode: what it said comes
    /// at the end).
    to_decoder: Option<mpsc::Sender<Vec<u8>>>,
    decoder: Option<JoinHandle<Decoded>>,
    /// A frame header cut between reads.
    header: Vec<u8>,
    /// The bytes left of the frame being read.
    in_frame: usize,
    /// Whether that frame is the message's last.
    last: bool,
    /// The message's bytes so far.
    total: usize,
}

/// Whether `buf`, the bytes of the next message so far, begin a Welcome
/// in pieces: its first frame says more follow, and its first byte is
/// `ServerMsg::Welcome`'s variant.
pub(crate) fn begins(buf: &[u8]) -> bool {
    match buf.get(..5) {
        Some(b) => u32::from_le_bytes(b[..4].try_into().expect("4 bytes")) & MORE != 0 && b[4] == 0,
        None => false,
    }
}

impl Streaming {
    /// Starts decoding a Welcome on a thread of its own; `None` if no
    /// thread can be had (the Welcome is then gathered and decoded whole).
    pub(crate) fn start() -> Option<Streaming> {
        let (tx, rx) = mpsc::channel();
        let decoder = std::thread::Builder::new().name("apex-welcome".into()).spawn(move || decode(rx)).ok()?;
        Some(Streaming {
            to_decoder: Some(tx),
            decoder: Some(decoder),
            header: Vec::new(),
            in_frame: 0,
            last: false,
            total: 0,
        })
    }

    /// Feeds `bytes` read from the stream: how many of them belong to the
    /// Welcome, and once its last frame is in, what the decoder made of it
    /// (waiting for the decoder to finish the little left).
    pub(crate) fn feed(&mut self, bytes: &[u8]) -> Result<(usize, Option<Decoded>), FrameError> {
        let mut used = 0;
        while used < bytes.len() {
            if self.in_frame == 0 {
                let k = (4 - self.header.len()).min(bytes.len() - used);
                self.header.extend_from_slice(&bytes[used..used + k]);
                used += k;
                if self.header.len() < 4 {
                    break;
                }
                let header = u32::from_le_bytes(self.header[..].try_into().expect("4 bytes"));
                self.header.clear();
                let n = (header & !MORE) as usize;
                if n > FRAME_MAX {
                    return Err(FrameError::TooLarge(n));
                }
                self.total += n;
                if self.total > MESSAGE_MAX {
                    return Err(FrameError::MessageTooLarge(MESSAGE_MAX));
                }
                (self.in_frame, self.last) = (n, header & MORE == 0);
                if n == 0 && self.last {
                    return Ok((used, Some(self.finish())));
                }
            } else {
                let k = self.in_frame.min(bytes.len() - used);
                if let Some(decoded) = self.feed_whole(bytes[used..used + k].to_vec()) {
                    return Ok((used + k, Some(decoded)));
                }
                used += k;
            }
        }
        Ok((used, None))
    }

    /// Whether `n` bytes read next are all of the frame being read.
    pub(crate) fn inside(&self, n: usize) -> bool {
        n > 0 && self.header.is_empty() && self.in_frame >= n
    }

    /// [`Streaming::feed`] of bytes that are all of the frame being read
    /// ([`Streaming::inside`]): handed to the decoder without a copy.
    pub(crate) fn feed_whole(&mut self, bytes: Vec<u8>) -> Option<Decoded> {
        self.in_frame -= bytes.len();
        if let Some(tx) = &self.to_decoder {
            if tx.send(bytes).is_err() {
                self.to_decoder = None;
            }
        }
        (self.in_frame == 0 && self.last).then(|| self.finish())
    }

    /// The decoder's outcome, the message being whole.
    fn finish(&mut self) -> Decoded {
        self.to_decoder = None;
        match self.decoder.take().map(JoinHandle::join) {
            Some(Ok(decoded)) => decoded,
            Some(Err(_)) => Err(WelcomeError::DecoderFailed),
            None => Err(WelcomeError::DecodedAlready),
        }
    }
}

/// Decodes the Welcome whose bytes come through `rx`, as
/// `ServerMsg::Welcome` is encoded: its variant, attachment, token, the
/// snapshot's length, then the snapshot (a format byte and the state).
fn decode(rx: mpsc::Receiver<Vec<u8>>) -> Decoded {
    let mut de = postcard::Deserializer::from_flavor(Parts { rx, part: Vec::new(), at: 0, joined: Vec::new() });
    let (variant, attachment, token, _len, format) =
        <(u32, AttachmentId, u64, u64, u8)>::deserialize(&mut de).map_err(WelcomeError::Head)?;
    if variant != 0 {
        return Err(WelcomeError::NotWelcome(variant));
    }
    let state = State::decode_snapshot(format, &mut de);
    Ok((attachment, token, state))
}

/// A postcard input read from parts as they come through a channel. What
/// is decoded is only ever lent for the call that asks for it (a text's
/// pieces are fed to its rope at once), so a part is let go once read.
struct Parts {
    rx: mpsc::Receiver<Vec<u8>>,
    part: Vec<u8>,
    /// Where in `part` the next byte is.
    at: usize,
    /// Bytes asked for at once that span parts, joined.
    joined: Vec<u8>,
}

impl Parts {
    /// Makes sure a byte is at hand, waiting for the next part if need be.
    fn more(&mut self) -> postcard::Result<()> {
        while self.at == self.part.len() {
            self.part = self.rx.recv().map_err(|_| postcard::Error::DeserializeUnexpectedEnd)?;
            self.at = 0;
        }
        Ok(())
    }
}

impl<'de> postcard::de_flavors::Flavor<'de> for Parts {
    type Remainder = ();
    type Source = ();

    fn pop(&mut self) -> postcard::Result<u8> {
        self.more()?;
        self.at += 1;
        Ok(self.part[self.at - 1])
    }

    fn try_take_n(&mut self, _ct: usize) -> postcard::Result<&'de [u8]> {
        // Nothing read from a part outlives it; the state's types ask for
        // `string` and `byte_buf`, never to borrow (a test decodes every
        // kind of shard this way).
        Err(postcard::Error::DeserializeBadEncoding)
    }

    fn try_take_n_temp<'a>(&'a mut self, ct: usize) -> postcard::Result<&'a [u8]>
    where
        'de: 'a,
    {
        if ct == 0 {
            return Ok(&[]);
        }
        self.more()?;
        if self.part.len() - self.at >= ct {
            self.at += ct;
            return Ok(&self.part[self.at - ct..self.at]);
        }
        self.joined.clear();
        while self.joined.len() < ct {
            self.more()?;
            let k = (ct - self.joined.len()).min(self.part.len() - self.at);
            self.joined.extend_from_slice(&self.part[self.at..self.at + k]);
            self.at += k;
        }
        Ok(&self.joined)
    }

    fn finalize(self) -> postcard::Result<()> {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use crate::link::{Event, Link};
    use crate::wire::{frame, frame_welcome, ServerMsg, FRAME_MAX};
    use apex_core::grid::Row;
    use apex_core::packed::{Packed, RowChanges};
    use apex_core::term::TermUpdate;
    use apex_core::*;

    /// A session with a bit of everything a snapshot holds: the layout, a
    /// window over a buffer of more than a frame of text whose runes
    /// straddle every cut, an undo history, and a terminal with rows in its
    /// scrollback (packed bytes).
    fn a_session_of_every_kind() -> State {
        let mut node = Node::server();
        make::init_session(&mut node).unwrap();
        let w = make::new_window(&mut node, None, None, "/tmp/big").unwrap();
        let text = "aé€😀 MARK\n".repeat(FRAME_MAX / 15);
        let splice = |q0, text: &str, origin| Op::Buffer(BufferOp::Splice { q0, q1: q0, text: text.into(), origin });
        node.append_splice(w.body, 0, 0, &text, Origin::FileWrite).unwrap();
        node.append(Shard::Buffer(w.body), splice(3, "typed", Origin::Keyboard)).unwrap();
        let t = TermId(node.alloc().unwrap());
        node.create_shard(Shard::Term(t)).unwrap();
        let create = TermOp::Create { cols: 10, rows: 3, scrollback: 5, command: "rc".into(), dir: "/".into() };
        node.append(Shard::Term(t), Op::Term(create)).unwrap();
        let rows = RowChanges {
            scrolled: ["% ls", "a b", "c"].iter().map(|t| Row::plain(t)).collect(),
            lines: vec![(0, Row::plain("% "))],
        };
        let update = TermUpdate { rows: Packed::pack(&rows), title: Some("rc".into()), ..Default::default() };
        node.append(Shard::Term(t), Op::Term(TermOp::Update(Box::new(update)))).unwrap();
        node.state
    }

    /// A link fed `bytes` `cut` bytes at a time, as reads would give them.
    fn fed(bytes: &[u8], cut: usize) -> Link {
        let mut link = Link::new(AttachmentKind::Tool, "t");
        for read in bytes.chunks(cut) {
            link.receive(read.to_vec()).expect("frames");
        }
        link
    }

    #[test]
    fn a_welcome_in_pieces_is_decoded_as_it_comes_from_any_cut() {
        let state = a_session_of_every_kind();
        let mut bytes = frame_welcome(AttachmentId(7), 99, &state);
        assert!(bytes.len() > FRAME_MAX + 4, "the Welcome is in pieces");
        // What follows it in the same reads is applied after it.
        bytes.extend(frame(&ServerMsg::Acked { shard: Shard::Layout, seq: 1000 }));
        // Midway, it is being decoded, and nothing is gathered.
        let mut link = fed(&bytes[..FRAME_MAX + 100], 1 << 20);
        assert!(link.streaming.is_some() && link.node().is_none());
        assert_eq!(link.frames.pending(), 0, "bytes gathered");
        link.receive(bytes[FRAME_MAX + 100..].to_vec()).unwrap();
        assert!(link.node().is_some());
        for cut in [(1 << 20) - 24, 777_777, 4099, FRAME_MAX + 6, FRAME_MAX - 2, bytes.len()] {
            let mut link = fed(&bytes, cut);
            assert!(link.streaming.is_none(), "cut {cut}");
            if link.node().is_none() {
                panic!("cut {cut}: no replica: {:?}", link.events());
            }
            let node = link.node().expect("welcomed");
            assert_eq!(node.state.hash(), state.hash(), "cut {cut}");
            assert_eq!(node.attachment, AttachmentId(7));
            assert_eq!(link.acked(Shard::Layout), 1000, "cut {cut}");
        }
    }

    #[test]
    fn a_welcome_in_pieces_that_does_not_decode_is_said_and_what_follows_is_read() {
        let state = a_session_of_every_kind();
        let mut bytes = frame_welcome(AttachmentId(7), 99, &state);
        let mark = bytes.windows(4).position(|w| w == b"MARK").unwrap();
        bytes[mark] = 0xff;
        bytes.extend(frame(&ServerMsg::Acked { shard: Shard::Layout, seq: 1000 }));
        for cut in [(1 << 20) - 24, 4099] {
            let mut link = fed(&bytes, cut);
            assert!(link.node().is_none(), "cut {cut}");
            let said = link.events();
            assert!(
                said.iter().any(|e| matches!(e, Event::Error(t) if t.contains("welcome snapshot does not decode"))),
                "cut {cut}: {said:?}"
            );
            assert_eq!(link.acked(Shard::Layout), 1000, "cut {cut}");
        }
    }
}
