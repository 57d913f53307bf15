//! Snapshots and the state hash: one canonical encoding of `State`.
//!
//! A snapshot is the postcard encoding of the whole state, `applied`
//! included, so it records exactly which prefix of each log it covers. Every
//! map in the state is ordered and texts encode independently of their rope
//! chunking (`text/encode.rs`), so equal states encode to equal bytes; the hash is
//! blake3 over those bytes, streamed without building the snapshot.

use crate::error::{Reject, Result};
use crate::state::State;
use crate::text::Text;
use postcard::ser_flavors::Flavor;

/// First byte of every snapshot; bumped when the encoding changes.
pub use crate::format::{reading_format, OLDEST_SNAPSHOT_FORMAT, SNAPSHOT_FORMAT};

/// Hashes what postcard writes, in large updates: postcard writes small
/// fields a byte at a time, and blake3 is fastest fed megabytes at once,
/// which it hashes on every core (`update`). The digest is blake3's
/// of the same bytes whichever way they are fed, so this changes speed,
/// never the hash.
struct HashFlavor {
    hasher: blake3::Hasher,
    buf: Vec<u8>,
}

const HASH_BUF: usize = 64 * 1024;

impl Flavor for HashFlavor {
    type Output = blake3::Hash;

    fn try_extend(&mut self, data: &[u8]) -> postcard::Result<()> {
        if self.buf.len() + data.len() > HASH_BUF {
            self.hasher.update(&self.buf);
            self.buf.clear();
            if data.len() >= HASH_BUF {
                self.hasher.update(data);
                return Ok(());
            }
        }
        self.buf.extend_from_slice(data);
        Ok(())
    }

    fn try_push(&mut self, data: u8) -> postcard::Result<()> {
        self.try_extend(&[data])
    }

    fn finalize(mut self) -> postcard::Result<blake3::Hash> {
        self.hasher.update(&self.buf);
        Ok(self.hasher.finalize())
    }
}

impl State {
    /// The state as snapshot bytes.
    pub fn to_snapshot(&self) -> Vec<u8> {
        // Sized up front: a 100 MB text would otherwise be copied again at
        // every doubling of the Vec. Capacity past what is written is never
        // touched, so a generous guess costs nothing.
        let mut out = Vec::with_capacity(self.encoded_size_bound());
        out.push(SNAPSHOT_FORMAT);
        // Writing to a Vec cannot fail, and every type here serializes.
        postcard::to_extend(self, out).expect("state always encodes")
    }

    /// The length of the state's encoding (a snapshot's, less its format
    /// byte), found without going through the texts, which are most of
    /// it: each is set aside while the rest is measured, and counted from
    /// its length. (Measured whole, a 10 MB text is read once more, only
    /// to be counted.)
    pub fn encoded_len(&mut self) -> usize {
        let texts: Vec<Text> = self.buffers.values_mut().map(|b| std::mem::take(&mut b.text)).collect();
        let rest = postcard::serialize_with_flavor(&*self, postcard::ser_flavors::Size::default())
            .expect("state always encodes");
        let empty = crate::text::encoded_size(&Text::new());
        let mut len = rest;
        for (b, text) in self.buffers.values_mut().zip(texts) {
            len += crate::text::encoded_size(&text) - empty;
            b.text = text;
        }
        len
    }

    /// The snapshot as its parts ([`SnapshotParts`]): everything but the
    /// buffers' texts encoded, and the texts kept as they are.
    pub fn into_snapshot_parts(mut self) -> SnapshotParts {
        let texts: Vec<Text> = self.buffers.values_mut().map(|b| std::mem::take(&mut b.text)).collect();
        // Where each text goes is where the encodings with every text empty
        // (one byte: no pieces) and with every text "x" (three: one piece,
        // one byte long, the byte) part ways: nothing else differs.
        let rest = self.to_snapshot();
        for b in self.buffers.values_mut() {
            b.text = Text::from("x");
        }
        let marked = self.to_snapshot();
        let (mut i, mut j) = (0, 0);
        let mut slots = Vec::with_capacity(texts.len());
        while i < rest.len() && j < marked.len() {
            if rest[i] == marked[j] {
                (i, j) = (i + 1, j + 1);
                continue;
            }
            if rest[i] != 0 || marked.get(j..j + 3) != Some(&[1, 1, b'x'][..]) {
                break;
            }
            slots.push(i);
            (i, j) = (i + 1, j + 3);
        }
        for (b, text) in self.buffers.values_mut().zip(texts) {
            b.text = text;
        }
        if (i, j) != (rest.len(), marked.len()) || slots.len() != self.buffers.len() {
            // Not what the encoding is known to be: the whole, made once,
            // is right whatever it is.
            let whole = self.to_snapshot();
            return SnapshotParts { len: whole.len(), rest: whole, texts: Vec::new() };
        }
        let texts: Vec<(usize, Text)> = slots.into_iter().zip(self.buffers.into_values().map(|b| b.text)).collect();
        let len = rest.len() + texts.iter().map(|(_, t)| crate::text::encoded_size(t) - 1).sum::<usize>();
        SnapshotParts { rest, texts, len }
    }

    /// At least the size of the encoding of the buffers' texts, plus room
    /// for everything else in a state of ordinary size.
    fn encoded_size_bound(&self) -> usize {
        let texts: usize = self.buffers.values().map(|b| crate::text::encoded_size_bound(&b.text) + 64).sum();
        texts + 64 * 1024
    }

    /// A state from snapshot bytes; a clear error for anything else.
    pub fn from_snapshot(bytes: &[u8]) -> Result<State> {
        match bytes.split_first() {
            Some((&format, rest)) => State::decode_snapshot(format, &mut postcard::Deserializer::from_bytes(rest)),
            None => Err(Reject::Snapshot("empty".into())),
        }
    }

    /// A state from a snapshot's format byte and a deserializer of the
    /// rest: from one slice, or from parts as they arrive (a large
    /// Welcome, decoded while it is read).
    pub fn decode_snapshot<'de, D>(format: u8, d: D) -> Result<State>
    where
        D: serde::Deserializer<'de>,
    {
        if !(OLDEST_SNAPSHOT_FORMAT..=SNAPSHOT_FORMAT).contains(&format) {
            return Err(Reject::Snapshot(format!(
                "format {format}, this build reads formats {OLDEST_SNAPSHOT_FORMAT} to {SNAPSHOT_FORMAT}"
            )));
        }
        let state = crate::format::reading(format, || {
            <State as serde::Deserialize>::deserialize(d).map_err(|e| Reject::Snapshot(e.to_string()))
        });
        let mut state = state?;
        for b in state.buffers.values_mut() {
            b.restore();
        }
        Ok(state)
    }

    /// blake3 over the snapshot bytes, streamed: equal states, equal hashes.
    pub fn hash(&self) -> blake3::Hash {
        // Small states (most of them) need no big buffer.
        let mut buf = Vec::with_capacity(4096);
        buf.push(SNAPSHOT_FORMAT);
        let flavor = HashFlavor { hasher: blake3::Hasher::new(), buf };
        postcard::serialize_with_flavor(self, flavor).expect("state always encodes")
    }
}

/// A snapshot held as its parts: the state's encoding with every buffer's
/// text left empty (small), and the texts themselves, shared with the
/// state they came from (ropes share their nodes). Any range of the
/// snapshot is made from them when it is read, so serving a 100 MB
/// buffer's snapshot never holds a second 100 MB.
pub struct SnapshotParts {
    /// The snapshot with each buffer's text encoded empty: one byte.
    rest: Vec<u8>,
    /// Each text, after the byte of `rest` that stands for it, in order.
    texts: Vec<(usize, Text)>,
    len: usize,
}

impl SnapshotParts {
    /// The snapshot's length in bytes.
    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The bytes the parts hold of their own: the encoding of all but the
    /// texts, which are shared with the state they came from.
    pub fn held(&self) -> usize {
        self.rest.len()
    }

    /// How many texts are kept as they are, not encoded (every buffer's,
    /// unless the encoding surprised `into_snapshot_parts`).
    pub fn texts_kept(&self) -> usize {
        self.texts.len()
    }

    /// Bytes `start..end` of the snapshot (fewer past its end), as
    /// [`State::to_snapshot`] would have made them.
    pub fn range(&self, start: usize, end: usize) -> Vec<u8> {
        let end = end.min(self.len);
        let mut out = Vec::with_capacity(end.saturating_sub(start));
        // `at` is where the part in hand starts in the snapshot; `from`,
        // in `rest`.
        let (mut at, mut from) = (0, 0);
        let plain = |bytes: &[u8], at: usize, out: &mut Vec<u8>| {
            let (s, e) = (start.max(at), end.min(at + bytes.len()));
            if s < e {
                out.extend_from_slice(&bytes[s - at..e - at]);
            }
        };
        for (slot, text) in &self.texts {
            if at >= end {
                return out;
            }
            plain(&self.rest[from..*slot], at, &mut out);
            at += slot - from;
            let n = crate::text::encoded_size(text);
            if start < at + n && at < end {
                crate::text::copy_encoded(text, start.saturating_sub(at), end - at, &mut out);
            }
            at += n;
            from = slot + 1;
        }
        plain(&self.rest[from..], at, &mut out);
        out
    }
}
