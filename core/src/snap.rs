//! Snapshots and the state hash: one canonical encoding of `State`.
//!
//! A snapshot is the postcard encoding of the whole state, `applied`
//! included, so it records exactly which prefix of each log it covers. Every
//! map in the state is ordered and texts encode independently of their rope
//! chunking (`text/encode.rs`), so equal states encode to equal bytes; the hash is
//! blake3 over those bytes, streamed without building the snapshot
//! (`hashtree`).

use crate::error::{Reject, Result};
use crate::hashtree;
use crate::state::State;
use crate::text::{bytes_apart, encode_apart, Apart, Text};
use postcard::ser_flavors::Flavor;

/// First byte of every snapshot; bumped when the encoding changes.
pub use crate::format::{reading_format, OLDEST_SNAPSHOT_FORMAT, SNAPSHOT_FORMAT};

/// The hash's sink: the encoding streamed into blocks.
impl Apart for hashtree::Blocks {
    fn bytes(&mut self, bytes: &[u8]) {
        self.write(bytes);
    }

    fn text(&mut self, text: &Text) {
        self.write_text(text);
    }

    fn into_any(self: Box<Self>) -> Box<dyn std::any::Any> {
        self
    }
}

/// The encoding with each text left out (a one-byte slot in `rest`), and
/// each text kept, shared, with where it goes.
#[derive(Default)]
struct Parts {
    rest: Vec<u8>,
    texts: Vec<(usize, Text)>,
}

impl Apart for Parts {
    fn bytes(&mut self, bytes: &[u8]) {
        self.rest.extend_from_slice(bytes);
    }

    fn text(&mut self, text: &Text) {
        self.texts.push((self.rest.len(), text.clone()));
        self.rest.push(0);
    }

    fn into_any(self: Box<Self>) -> Box<dyn std::any::Any> {
        self
    }
}

/// The encoding's length, each text counted from its own.
#[derive(Default)]
struct Length(usize);

impl Apart for Length {
    fn bytes(&mut self, bytes: &[u8]) {
        self.0 += bytes.len();
    }

    fn text(&mut self, text: &Text) {
        self.0 += crate::text::encoded_size(text);
    }

    fn into_any(self: Box<Self>) -> Box<dyn std::any::Any> {
        self
    }
}

/// Passes what postcard writes to this thread's sink, where the texts
/// join it in order.
struct ApartFlavor;

impl Flavor for ApartFlavor {
    type Output = ();

    fn try_extend(&mut self, data: &[u8]) -> postcard::Result<()> {
        bytes_apart(data);
        Ok(())
    }

    fn try_push(&mut self, data: u8) -> postcard::Result<()> {
        self.try_extend(&[data])
    }

    fn finalize(self) -> postcard::Result<()> {
        Ok(())
    }
}

impl State {
    /// Encodes the state, its format byte first, into `sink`.
    fn encode_into<A: Apart>(&self, sink: A) -> A {
        encode_apart(sink, || {
            bytes_apart(&[SNAPSHOT_FORMAT]);
            postcard::serialize_with_flavor(self, ApartFlavor).expect("state always encodes");
        })
    }

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
    /// it: each is counted from its length.
    pub fn encoded_len(&self) -> usize {
        self.encode_into(Length::default()).0 - 1
    }

    /// The snapshot as its parts ([`SnapshotParts`]): everything but the
    /// buffers' texts encoded, and the texts kept as they are (shared,
    /// not copied).
    pub fn snapshot_parts(&self) -> SnapshotParts {
        let Parts { rest, texts } = self.encode_into(Parts::default());
        // Where each text's encoding ends in the snapshot, counted once:
        // a range is found by a search, not by sizing every text before it.
        let mut at = 0;
        let mut from = 0;
        let texts: Vec<Kept> = texts
            .into_iter()
            .map(|(slot, text)| {
                let size = crate::text::encoded_size(&text);
                at += slot - from + size;
                from = slot + 1;
                Kept { slot, end: at, size, text }
            })
            .collect();
        let len = at + rest.len() - from;
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

    /// blake3 over the snapshot bytes, streamed in blocks and hashed one
    /// after another (`hashtree`): equal states, equal hashes.
    pub fn hash(&self) -> blake3::Hash {
        self.encode_into(hashtree::Blocks::default()).end()
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
    texts: Vec<Kept>,
    len: usize,
}

/// A text kept in [`SnapshotParts`], with where it goes.
struct Kept {
    /// The byte of `rest` that stands for it.
    slot: usize,
    /// Where its encoding ends in the snapshot.
    end: usize,
    /// Its encoding's size.
    size: usize,
    text: Text,
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

    /// How many texts are kept as they are, not encoded.
    pub fn texts_kept(&self) -> usize {
        self.texts.len()
    }

    /// Bytes `start..end` of the snapshot (fewer past its end), as
    /// [`State::to_snapshot`] would have made them.
    pub fn range(&self, start: usize, end: usize) -> Vec<u8> {
        let mut out = Vec::with_capacity(end.min(self.len).saturating_sub(start));
        self.range_into(start, end, &mut out);
        out
    }

    /// Appends bytes `start..end` of the snapshot to `out`, as
    /// [`SnapshotParts::range`] makes them.
    pub fn range_into(&self, start: usize, end: usize, out: &mut Vec<u8>) {
        let end = end.min(self.len);
        // The first text that ends past `start`; what comes before it is
        // not in range. `at` is where the part in hand starts in the
        // snapshot; `from`, in `rest`.
        let first = self.texts.partition_point(|k| k.end <= start);
        let (mut at, mut from) = match first.checked_sub(1) {
            Some(before) => (self.texts[before].end, self.texts[before].slot + 1),
            None => (0, 0),
        };
        let plain = |bytes: &[u8], at: usize, out: &mut Vec<u8>| {
            let (s, e) = (start.max(at), end.min(at + bytes.len()));
            if s < e {
                out.extend_from_slice(&bytes[s - at..e - at]);
            }
        };
        for kept in &self.texts[first..] {
            if at >= end {
                return;
            }
            plain(&self.rest[from..kept.slot], at, out);
            at += kept.slot - from;
            if start < at + kept.size && at < end {
                crate::text::copy_encoded(&kept.text, start.saturating_sub(at), end - at, out);
            }
            at += kept.size;
            from = kept.slot + 1;
        }
        plain(&self.rest[from..], at, out);
    }
}
