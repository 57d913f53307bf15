//! What a fid is: its place, and once open what it holds, one variant
//! per kind of open file (acme's `Xfid` and the `Fid`'s open state).
//!
//! A plain file's or a directory's bytes are made at open and again by
//! every read at offset 0; later offsets read that version, so a reader
//! sees one consistent version however many reads it takes. Directory
//! reads return whole stat entries and continue only where the last one
//! ended (read(5)).

use super::made::Version;
use super::place::Place;
use super::stream::Cursor;
use crate::access::Scope;
use crate::attach::hub::ConnId;
use crate::error::Result;
use crate::fsys::error::FsError;
use apex_core::{BufferId, Shard, WindowId};
use std::sync::{Arc, Mutex, MutexGuard};

/// A file's bytes as one read sees them.
#[derive(Debug, Default)]
pub struct Content {
    pub bytes: Version,
    /// The change count when `bytes` were made, until a read uses it: a
    /// first read at offset 0 with nothing changed since need not make
    /// them again.
    pub fresh: Option<u64>,
    /// Where the last directory read ended: the only offset but 0 the next
    /// may have.
    pub dir_end: u64,
}

impl Content {
    pub fn made(bytes: Vec<u8>) -> Content {
        Content::of(Version::Plain(bytes))
    }

    pub fn of(bytes: Version) -> Content {
        Content { bytes, ..Content::default() }
    }

    /// Reads `count` bytes at `offset`; for a directory, whole stat
    /// entries only, from 0 or where the last read ended.
    pub fn read(&mut self, offset: u64, count: u32, dir: bool) -> Result<Vec<u8>> {
        let bytes = match &self.bytes {
            _ if !dir => return Ok(self.bytes.range(offset.try_into().unwrap_or(usize::MAX), count as usize)),
            Version::Plain(bytes) => bytes,
            Version::Text(_) | Version::Snapshot(_) | Version::Rows(_) => return Err(FsError::ListingNotWhole.into()),
        };
        if offset != 0 && offset != self.dir_end {
            return Err(FsError::DirectoryOffset { offset, end: self.dir_end }.into());
        }
        let from = (offset as usize).min(bytes.len());
        let want = (count as usize).min(bytes.len() - from);
        let mut end = from;
        while end + 2 <= bytes.len() {
            let n = u16::from_le_bytes([bytes[end], bytes[end + 1]]) as usize + 2;
            if end + n - from > want {
                break;
            }
            end += n;
        }
        if end == from && from < bytes.len() {
            return Err(FsError::DirectoryCount(count).into());
        }
        self.dir_end = end as u64;
        Ok(bytes[from..end].to_vec())
    }
}

/// What an open fid holds.
#[derive(Debug, Default)]
pub enum Opened {
    /// Walked to, not open.
    #[default]
    Walked,
    /// A plain file or a directory: its bytes (`Content`).
    Content(Content),
    /// A text file written in pieces (a body, acme's `cons` and
    /// `errors`): its bytes, and an incomplete UTF-8 sequence at the end
    /// of the last write, which waits for the next.
    Text { content: Content, tail: Vec<u8> },
    /// An addr file: counts as an open of its buffer's addr until clunked.
    Addr { content: Content, body: BufferId },
    /// A blocking stream of entries, events or registry lines; the shards
    /// it keeps from compaction; for acme's `event`, its window.
    Stream { cursor: Cursor, reading: Vec<Shard>, event_of: Option<WindowId> },
    /// `NAME/attach`: the connection this fid is.
    Attach(ConnId),
    /// A `data` file (`buffers/N/data`, acme's `data` and `xdata`); acme's
    /// end nomark when clunked.
    Data { body: BufferId, ends_nomark: bool },
    /// acme's `wrsel`: where the next write inserts, at that version, and
    /// where the first did (selected when the fid is clunked).
    Wrsel { window: WindowId, body: BufferId, at: (u64, u64), from: (u64, u64) },
    /// acme's `rdsel`: the selection at open, and the claim on it.
    Rdsel { content: Content, window: WindowId },
    /// acme's `log`: the index of the next line to read.
    Log { next: u64 },
    /// A terminal's `cons`: the output offset the next read starts at.
    Cons { at: u64 },
    /// The plumber's `send`: a message written in parts so far.
    PlumbSend { partial: Vec<u8> },
    /// The plumber's `rules` open for writing: the rules it adds to (none
    /// when opened with OTRUNC), what was written (taken at the clunk),
    /// whether a write was refused (then nothing is), and its turn as the
    /// one writer.
    PlumbRules { content: Content, base: Option<String>, written: Vec<u8>, refused: bool, writer: u64 },
    /// A plumb port: the plumber's reader this fid is.
    PlumbPort { reader: u64 },
}

impl Opened {
    /// The bytes a read at an offset gives, for the files that have them.
    pub fn content(&mut self) -> Option<&mut Content> {
        match self {
            Opened::Content(c) | Opened::Text { content: c, .. } | Opened::Addr { content: c, .. } => Some(c),
            Opened::Rdsel { content: c, .. } | Opened::PlumbRules { content: c, .. } => Some(c),
            _ => None,
        }
    }
}

/// A fid: its place and, once open, what it holds.
#[derive(Clone, Debug)]
pub struct Fid {
    pub place: Place,
    opened: Arc<Mutex<Opened>>,
    /// What the token it was attached with allows (`full` where none was
    /// asked for); a walk or open keeps it.
    pub scope: Scope,
    /// Where it was attached, when that was not the root (`SESSION/acme`,
    /// as an import attaches `acme.HOST`): `..` there stays there, as at
    /// a root, so nothing above it is reached; a walk keeps it.
    pub top: Option<Place>,
}

impl Fid {
    pub fn at(place: Place) -> Fid {
        Fid { place, opened: Arc::new(Mutex::new(Opened::Walked)), scope: Scope::Full, top: None }
    }

    pub fn opened(place: Place, opened: Opened) -> Fid {
        Fid { place, opened: Arc::new(Mutex::new(opened)), scope: Scope::Full, top: None }
    }

    /// This fid as one walked below `top` ([`Fid::top`]).
    pub fn below(self, top: Option<Place>) -> Fid {
        Fid { top, ..self }
    }

    /// This fid as one of `scope`.
    pub fn with_scope(self, scope: Scope) -> Fid {
        Fid { scope, ..self }
    }

    /// What tells this fid from every other fid alive now (acme's
    /// `ctlfid`).
    pub fn token(&self) -> usize {
        Arc::as_ptr(&self.opened) as usize
    }

    pub fn lock(&self) -> MutexGuard<'_, Opened> {
        self.opened.lock().expect("fid lock")
    }

    /// The fid's state, leaving it walked (what a clunk lets go of).
    pub fn take(&self) -> Opened {
        std::mem::take(&mut *self.lock())
    }

    /// The text of a write to an acme file, as acme takes it: whole runes
    /// made as [`acme_runes`] makes them, never refused; an incomplete
    /// sequence at the end waits for this fid's next write where the fid
    /// keeps one (body, cons, errors), and is a U+FFFD per byte elsewhere.
    pub fn acme_text(&self, data: Vec<u8>) -> String {
        let mut opened = self.lock();
        let Opened::Text { tail, .. } = &mut *opened else {
            let (mut text, cut) = acme_runes(&data);
            text.extend(cut.iter().map(|_| char::REPLACEMENT_CHARACTER));
            return text;
        };
        let mut bytes = std::mem::take(tail);
        bytes.extend_from_slice(&data);
        let (text, cut) = acme_runes(&bytes);
        *tail = cut.to_vec();
        text
    }

    /// The text of a write, whole runes only: an incomplete UTF-8 sequence
    /// at its end waits for this fid's next write (the body of
    /// `buffers/N/` does this). With it, the bytes that waited before,
    /// for `put_back` should the write be refused after all; a write that
    /// is not UTF-8 leaves them waiting.
    pub fn whole_runes(&self, data: Vec<u8>, file: &'static str) -> Result<(String, Vec<u8>)> {
        let mut opened = self.lock();
        let Opened::Text { tail, .. } = &mut *opened else {
            return utf8(data).map(|t| (t, Vec::new())).map_err(|_| FsError::NotUtf8(Some(file)).into());
        };
        let before = tail.clone();
        let bytes = match tail.is_empty() {
            true => data,
            false => {
                let mut joined = std::mem::take(tail);
                joined.extend_from_slice(&data);
                joined
            }
        };
        // One validation: a rune cut by the write's end waits for the next.
        let Some((text, cut)) = text_and_cut(bytes) else {
            *tail = before;
            return Err(FsError::NotUtf8(Some(file)).into());
        };
        *tail = cut;
        Ok((text, before))
    }

    /// Puts back the bytes `whole_runes` found waiting, its write refused.
    pub fn put_back(&self, waited: Vec<u8>) {
        if let Opened::Text { tail, .. } = &mut *self.lock() {
            *tail = waited;
        }
    }
}

/// Bytes as acme makes them runes (core's `acme_runes`), and an
/// incomplete sequence at the end apart, to wait for more bytes.
pub fn acme_runes(bytes: &[u8]) -> (String, &[u8]) {
    let (text, cut, _) = apex_core::text::acme_runes(bytes);
    (text, cut)
}

/// A write's bytes as text.
pub fn utf8(data: Vec<u8>) -> Result<String> {
    match text_and_cut(data) {
        Some((text, cut)) if cut.is_empty() => Ok(text),
        _ => Err(FsError::NotUtf8(None).into()),
    }
}

/// `bytes` as text but for a rune cut at their end, split off and given
/// apart (a writer carries it to its next write); `None` when they are
/// not UTF-8 (a bad byte, not a cut). Core's check, kept in the bytes
/// the write brought: no copy.
fn text_and_cut(mut bytes: Vec<u8>) -> Option<(String, Vec<u8>)> {
    let (text, cut) = apex_core::text::text_and_cut(&bytes)?;
    let (whole, cut) = (text.len(), cut.to_vec());
    bytes.truncate(whole);
    // SAFETY: core found these bytes, all before the cut, UTF-8.
    Some((unsafe { String::from_utf8_unchecked(bytes) }, cut))
}

#[cfg(test)]
mod tests {
    use super::text_and_cut;
    use proptest::prelude::*;

    /// What `std` says of the same bytes: text, text and a rune cut at
    /// its end, or not UTF-8.
    fn by_std(bytes: Vec<u8>) -> Option<(String, Vec<u8>)> {
        match String::from_utf8(bytes) {
            Ok(text) => Some((text, Vec::new())),
            Err(e) if e.utf8_error().error_len().is_none() => {
                let at = e.utf8_error().valid_up_to();
                let mut bytes = e.into_bytes();
                let cut = bytes.split_off(at);
                Some((String::from_utf8(bytes).expect("valid up to there"), cut))
            }
            Err(_) => None,
        }
    }

    proptest! {
        /// The fast check says what `std` says, for text, text cut inside
        /// a rune, and bytes that are not UTF-8 at all.
        #[test]
        fn a_write_is_text_and_a_cut_exactly_as_std_says(
            text in "[a-z\u{e9}\u{20ac}\u{1f600}\n]{0,200}",
            cut in any::<prop::sample::Index>(),
            noise in prop::collection::vec(any::<u8>(), 0..40),
        ) {
            let bytes = text.as_bytes().to_vec();
            let cut = bytes[..cut.index(bytes.len() + 1)].to_vec();
            let mut noisy = bytes.clone();
            noisy.extend_from_slice(&noise);
            for b in [bytes, cut, noisy, noise] {
                prop_assert_eq!(text_and_cut(b.clone()), by_std(b));
            }
        }
    }
}
