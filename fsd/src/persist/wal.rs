//! A session's write-ahead log: numbered segment files of frames.
//!
//! A segment is a header, then frames, every integer little-endian:
//!
//! ```text
//! header  "APEXWAL\0" | version u32 | session uuid [16] | segment u64 | salt u64 | crc32c u32
//! frame   length u32 | crc32c(salt ‖ length ‖ payload) u32 | payload: postcard (Shard, Entry)
//! ```
//!
//! The salt is random per segment, so a frame only checks in the segment
//! it was written to: a stale or renamed file never passes for a fresh
//! one, and the header names the session, so another session's file is
//! refused by name.
//!
//! The frames of the entries one locked change stores are written with
//! one write(2) (a megabyte at a time, a long text's from its entry with
//! one writev) before the session's lock is let go, so no reader of the
//! log, follower or tool sees an entry before it is in the file, and a
//! process crash keeps everything acknowledged. A crash mid-write leaves
//! at most a torn frame at the end of the last segment, which a restart
//! cuts off. A write that fails cuts the file back to where the change
//! began (`settled`), so the file holds whole changes only, and says so
//! when the change ends (`flush`): the session then goes back to what
//! the file holds and serves on. Only a file that cannot be cut back
//! stops the log for good (`Wal::broken`).

use super::durable::{Durable, LogError};
use super::fault;
use super::StoreError;
use apex_core::{BufferOp, Entry, Op, Shard, Sink};
use std::fs::File;
use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

pub const MAGIC: &[u8; 8] = b"APEXWAL\0";
pub const VERSION: u32 = 1;
pub const HEADER_LEN: usize = 8 + 4 + 16 + 8 + 8 + 4;
const FRAME_HEAD: usize = 8;
/// Frames held before they are written at once.
const FLUSH_AT: usize = 1 << 20;
/// Room kept past a request's own for the entries the daemon adds.
const HEADROOM: u64 = 1 << 20;
/// The least room set aside past a request's own, on a disk that has no
/// more.
const SMALLEST_ROOM: u64 = 16 << 10;

/// A segment's header.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Header {
    pub uuid: [u8; 16],
    pub segment: u64,
    pub salt: u64,
}

/// Why a segment's first bytes are not a segment header.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum HeaderError {
    #[error("{0} bytes, shorter than a segment header ({HEADER_LEN})")]
    Short(usize),
    #[error("not an apex write-ahead log segment (bad magic)")]
    Magic,
    #[error("format version {0}, but this apexd reads version {VERSION}")]
    Version(u32),
    #[error("the header's checksum does not match")]
    Checksum,
}

impl Header {
    pub fn encode(&self) -> [u8; HEADER_LEN] {
        let mut h = [0u8; HEADER_LEN];
        h[..8].copy_from_slice(MAGIC);
        h[8..12].copy_from_slice(&VERSION.to_le_bytes());
        h[12..28].copy_from_slice(&self.uuid);
        h[28..36].copy_from_slice(&self.segment.to_le_bytes());
        h[36..44].copy_from_slice(&self.salt.to_le_bytes());
        let crc = crc32c::crc32c(&h[..44]);
        h[44..48].copy_from_slice(&crc.to_le_bytes());
        h
    }

    /// The header of `bytes` (a segment's start), or why it is not one.
    pub fn decode(bytes: &[u8]) -> Result<Header, HeaderError> {
        if bytes.len() < HEADER_LEN {
            return Err(HeaderError::Short(bytes.len()));
        }
        if &bytes[..8] != MAGIC {
            return Err(HeaderError::Magic);
        }
        let version = u32::from_le_bytes(bytes[8..12].try_into().expect("4 bytes"));
        if version != VERSION {
            return Err(HeaderError::Version(version));
        }
        let crc = u32::from_le_bytes(bytes[44..48].try_into().expect("4 bytes"));
        if crc32c::crc32c(&bytes[..44]) != crc {
            return Err(HeaderError::Checksum);
        }
        Ok(Header {
            uuid: bytes[12..28].try_into().expect("16 bytes"),
            segment: u64::from_le_bytes(bytes[28..36].try_into().expect("8 bytes")),
            salt: u64::from_le_bytes(bytes[36..44].try_into().expect("8 bytes")),
        })
    }
}

/// Appends the frame of `(shard, entry)` to `out`.
pub fn frame(salt: u64, shard: Shard, entry: &Entry, out: &mut Vec<u8>) {
    let start = out.len();
    out.extend_from_slice(&[0u8; FRAME_HEAD]);
    // Writing to a Vec cannot fail, and entries always encode.
    let taken = std::mem::take(out);
    *out = postcard::to_extend(&(shard, entry), taken).expect("entries always encode");
    let len = (out.len() - start - FRAME_HEAD) as u32;
    out[start..start + 4].copy_from_slice(&len.to_le_bytes());
    let crc = frame_crc(salt, len, &out[start + FRAME_HEAD..]);
    out[start + 4..start + 8].copy_from_slice(&crc.to_le_bytes());
}

/// A splice's text at least this long is written from the entry itself
/// ([`frame_apart`]), not copied into the frames held first: a 100 MB
/// file's Get is copied once less, and its copy's pages never faulted in.
const TEXT_APART: usize = 64 << 10;

/// The frame of `(shard, entry)` as [`frame`] makes it, in three parts
/// when the entry is a splice with a text of [`TEXT_APART`] bytes or more:
/// the frame's head and the encoding up to the text, the text (the
/// entry's own, not copied), and the encoding after it. `None` for any
/// other entry.
pub fn frame_apart(salt: u64, shard: Shard, entry: &Entry) -> Option<(Vec<u8>, &[u8], Vec<u8>)> {
    let Op::Buffer(BufferOp::Splice { q0, q1, text, origin }) = &entry.op else { return None };
    if text.len() < TEXT_APART {
        return None;
    }
    // The encoding with the text empty is the encoding with the text cut
    // out, its length (one byte, 0) written as the text's: postcard
    // writes a string as a varint length and its bytes, and nothing
    // after the text but its origin.
    let empty = Op::Buffer(BufferOp::Splice { q0: *q0, q1: *q1, text: String::new(), origin: *origin });
    let without = Entry { seq: entry.seq, attachment: entry.attachment, epoch: entry.epoch, op: empty };
    let encoded = postcard::to_allocvec(&(shard, &without)).expect("entries always encode");
    let after = postcard::to_allocvec(origin).expect("origins always encode").len();
    let at = encoded.len() - after - 1;
    debug_assert_eq!(encoded[at], 0, "an empty text's length");
    let mut head = Vec::with_capacity(FRAME_HEAD + at + 10);
    head.extend_from_slice(&[0; FRAME_HEAD]);
    head.extend_from_slice(&encoded[..at]);
    let mut head = postcard::to_extend(&text.len(), head).expect("lengths always encode");
    let tail = encoded[at + 1..].to_vec();
    let len = (head.len() - FRAME_HEAD + text.len() + tail.len()) as u32;
    let crc = crc32c::crc32c(&salt.to_le_bytes());
    let crc = crc32c::crc32c_append(crc, &len.to_le_bytes());
    let crc = crc32c::crc32c_append(crc, &head[FRAME_HEAD..]);
    let crc = crc32c::crc32c_append(crc, text.as_bytes());
    let crc = crc32c::crc32c_append(crc, &tail);
    head[..4].copy_from_slice(&len.to_le_bytes());
    head[4..8].copy_from_slice(&crc.to_le_bytes());
    Some((head, text.as_bytes(), tail))
}

fn frame_crc(salt: u64, len: u32, payload: &[u8]) -> u32 {
    let crc = crc32c::crc32c(&salt.to_le_bytes());
    let crc = crc32c::crc32c_append(crc, &len.to_le_bytes());
    crc32c::crc32c_append(crc, payload)
}

/// Writes `parts` one after another, with as few writes as the file
/// takes.
fn write_all_parts(file: &mut File, parts: [&[u8]; 3]) -> std::io::Result<()> {
    let mut slices = parts.map(std::io::IoSlice::new);
    let mut left: &mut [std::io::IoSlice] = &mut slices;
    while !left.is_empty() {
        match file.write_vectored(left) {
            Ok(0) => return Err(std::io::Error::from(std::io::ErrorKind::WriteZero)),
            Ok(n) => std::io::IoSlice::advance_slices(&mut left, n),
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// The file name of segment `n`.
pub fn segment_name(n: u64) -> String {
    format!("wal.{n:016}")
}

/// The segment number a file name stands for, if it is a segment's.
pub fn segment_number(name: &str) -> Option<u64> {
    name.strip_prefix("wal.").filter(|n| n.len() == 16).and_then(|n| n.parse().ok())
}

/// The segments in `dir`, by number.
pub fn segments(dir: &Path) -> Result<Vec<(u64, PathBuf)>, StoreError> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).map_err(|e| StoreError::io(dir, e))? {
        let e = e.map_err(|e| StoreError::io(dir, e))?;
        if let Some(n) = e.file_name().to_str().and_then(segment_number) {
            out.push((n, e.path()));
        }
    }
    out.sort();
    Ok(out)
}

/// How a segment's frames ended.
#[derive(Debug, PartialEq, Eq)]
pub enum Ending {
    /// Every byte is a whole frame.
    Clean,
    /// A frame at `offset` is cut short or does not check, and nothing
    /// follows it: a write the crash interrupted.
    Torn { offset: u64, why: String },
    /// A frame at `offset` does not check, and more follows: damage.
    Bad { offset: u64, why: String },
}

/// A whole frame whose entry the state refuses: damage all the same.
#[derive(Debug, thiserror::Error)]
#[error("entry {shard}:{seq} does not apply: {reject}")]
pub struct Unapplied {
    pub shard: Shard,
    pub seq: u64,
    pub reject: apex_core::Reject,
}

/// Reads segment `bytes` (the whole file), giving each frame's entry to
/// `each` in order; a frame that does not decode is damage. Stops at the
/// first frame that does not check and says how the segment ended and
/// how many bytes were whole frames.
pub fn scan<E: std::fmt::Display>(
    bytes: &[u8],
    header: &Header,
    mut each: impl FnMut(Shard, Entry, u64) -> Result<(), E>,
) -> (Ending, u64) {
    let mut at = HEADER_LEN;
    // A frame that does not check is a torn write only if no whole frames
    // follow it (two in a row, so a checksum that matches by chance over
    // megabytes of garbage decides nothing); else it is damage.
    let ended = |offset: u64, why: String| match frames_follow(bytes, header, offset as usize + 1) {
        Follows::Frames(next) => {
            (Ending::Bad { offset, why: format!("{why}; whole frames follow at offset {next}") }, offset)
        }
        Follows::Unknown => {
            let why = format!("{why}; what follows is too much to tell a torn write from damage");
            (Ending::Bad { offset, why }, offset)
        }
        Follows::Nothing => (Ending::Torn { offset, why }, offset),
    };
    while at < bytes.len() {
        let offset = at as u64;
        let rest = &bytes[at..];
        if rest.len() < FRAME_HEAD {
            return ended(offset, format!("{} bytes of a frame's head", rest.len()));
        }
        let Some((len, payload)) = frame_at(rest) else {
            let len = u32::from_le_bytes(rest[..4].try_into().expect("4 bytes"));
            return ended(offset, format!("a frame of {len} bytes with {} there", rest.len() - FRAME_HEAD));
        };
        let crc = u32::from_le_bytes(rest[4..8].try_into().expect("4 bytes"));
        let end = FRAME_HEAD + len as usize;
        if frame_crc(header.salt, len, payload) != crc {
            return ended(offset, "checksum mismatch".to_string());
        }
        let why = match postcard::from_bytes::<(Shard, Entry)>(payload) {
            Err(e) => Some(format!("does not decode: {e}")),
            Ok((shard, entry)) => each(shard, entry, offset).err().map(|e| e.to_string()),
        };
        if let Some(why) = why {
            return (Ending::Bad { offset, why }, offset);
        }
        at += end;
    }
    (Ending::Clean, at as u64)
}

/// The frame at the start of `rest`: its length and payload, if `rest`
/// holds all of it (checked or not).
fn frame_at(rest: &[u8]) -> Option<(u32, &[u8])> {
    let len = u32::from_le_bytes(rest.get(..4)?.try_into().ok()?);
    let end = FRAME_HEAD.checked_add(len as usize)?;
    Some((len, rest.get(FRAME_HEAD..end)?))
}

/// Whether the frame at `rest`'s start checks out; its length in all.
fn checks(rest: &[u8], header: &Header) -> Option<usize> {
    let (len, payload) = frame_at(rest)?;
    let crc = u32::from_le_bytes(rest.get(4..8)?.try_into().ok()?);
    (frame_crc(header.salt, len, payload) == crc).then_some(FRAME_HEAD + len as usize)
}

/// What follows a frame that does not check.
enum Follows {
    /// Two whole frames in a row (or one that ends the segment), here.
    Frames(u64),
    /// No whole frame: a torn write's tail.
    Nothing,
    /// More checksums than the segment twice over were tried: damage is
    /// assumed (held back, never cut).
    Unknown,
}

/// Looks past `from` for two whole frames in a row (or one that ends the
/// segment exactly).
fn frames_follow(bytes: &[u8], header: &Header, from: usize) -> Follows {
    // Text full of NULs makes a plausible length at every other byte; the
    // checksums tried are bounded, so a start never takes hours.
    let mut budget = 2 * bytes.len() as u64 + (1 << 20);
    for p in from..bytes.len().saturating_sub(FRAME_HEAD - 1) {
        // Both frames' extents first, cheap and rarely plausible at
        // random; only then their checksums.
        let Some((len, _)) = frame_at(&bytes[p..]) else { continue };
        let after = p + FRAME_HEAD + len as usize;
        let at_end = after == bytes.len() && len > 0;
        if !at_end && frame_at(&bytes[after..]).is_none() {
            continue;
        }
        budget = match budget.checked_sub(u64::from(len)) {
            Some(b) => b,
            None => return Follows::Unknown,
        };
        if checks(&bytes[p..], header).is_some() && (at_end || checks(&bytes[after..], header).is_some()) {
            return Follows::Frames(p as u64);
        }
    }
    Follows::Nothing
}

/// The log a session writes: its current segment, appended to as entries
/// are stored.
pub struct Wal {
    dir: PathBuf,
    uuid: [u8; 16],
    file: File,
    header: Header,
    /// Bytes of whole frames in the current segment, header included.
    len: u64,
    /// `len` when the change being stored began: what a failed write
    /// cuts the segment back to (a big change is written in parts).
    settled: u64,
    /// The segment's space allocated up to here (past its end), so a
    /// write there cannot find the disk full.
    reserved: u64,
    /// Frame bytes written since the last snapshot began.
    pub since_snapshot: u64,
    /// Frame bytes written since the entries in memory were last let go
    /// of (`Persisted::entries_due`).
    pub since_let_go: u64,
    buf: Vec<u8>,
    /// Why a write of the change being stored failed: nothing more of it
    /// is framed, and its end (`flush`) says so.
    failed: Option<String>,
    /// Why the log takes nothing more: a failed write whose part could not
    /// be cut off the file, so what follows would not be read back.
    pub broken: Option<String>,
    /// Entries stored since the last flush that a stopped log did not
    /// frame: the change's end says they are not in the file.
    unlogged: bool,
    /// Whether the change being stored has appended an entry (whether or
    /// not its frame is written yet).
    appended: bool,
    pub durable: Arc<Durable>,
    /// Fresh salts (the daemon's randomness).
    salts: Box<dyn FnMut() -> u64 + Send>,
}

impl Wal {
    /// Starts segment `segment` in `dir` (which must exist).
    pub fn create(
        dir: &Path,
        uuid: [u8; 16],
        segment: u64,
        durable: Arc<Durable>,
        mut salts: Box<dyn FnMut() -> u64 + Send>,
    ) -> Result<Wal, StoreError> {
        let header = Header { uuid, segment, salt: salts() };
        let file = start_segment(dir, &header)?;
        durable.switch(file.try_clone().map_err(|e| StoreError::io(dir, e))?);
        Ok(Wal {
            dir: dir.to_path_buf(),
            uuid,
            file,
            header,
            len: HEADER_LEN as u64,
            settled: HEADER_LEN as u64,
            reserved: HEADER_LEN as u64,
            since_snapshot: 0,
            since_let_go: 0,
            buf: Vec::new(),
            failed: None,
            broken: None,
            unlogged: false,
            appended: false,
            durable,
            salts,
        })
    }

    pub fn segment(&self) -> u64 {
        self.header.segment
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Frames one stored entry, to be written with the others the same
    /// locked change stored (`flush`); a megabyte of them is written at
    /// once.
    pub fn append(&mut self, shard: Shard, entry: &Entry) {
        if self.failed.is_some() || self.broken.is_some() {
            self.unlogged = true;
            return;
        }
        self.appended = true;
        if let Some((head, text, tail)) = frame_apart(self.header.salt, shard, entry) {
            // A frame that fills what is held past FLUSH_AT is written at
            // once as it would be if it were copied in: what was held
            // first, then it from its parts. (So writes happen where they
            // always did, and a crash tears a change where it always could.)
            if self.buf.len() + head.len() + text.len() + tail.len() >= FLUSH_AT {
                self.buf.extend_from_slice(&head);
                self.write_out_with(text, &tail);
                return;
            }
        }
        frame(self.header.salt, shard, entry, &mut self.buf);
        if self.buf.len() >= FLUSH_AT {
            self.write_out();
        }
    }

    /// Ends the change being stored: writes the frames appended since the
    /// last write with one write(2). Called before the session's lock is
    /// let go: no one sees an entry, and nothing is acknowledged, before
    /// it is in the file. A write of it that failed is said here, the
    /// file cut back to where the change began; the next change starts
    /// afresh.
    pub fn flush(&mut self) -> Result<(), LogError> {
        // Whether the change stored anything, written already or not: a
        // change whose frames went out before its end is refused too when
        // the log stopped.
        let stored = std::mem::take(&mut self.appended) || std::mem::take(&mut self.unlogged);
        self.write_out();
        if let Some(why) = self.failed.take() {
            return Err(LogError::Failed(why));
        }
        if let Some(why) = self.broken.clone() {
            // A change that stored nothing (a read's) is not refused.
            return match stored {
                true => Err(LogError::Stopped(why)),
                false => Ok(()),
            };
        }
        self.settled = self.len;
        Ok(())
    }

    /// Writes the frames appended so far.
    fn write_out(&mut self) {
        self.write_out_with(&[], &[]);
    }

    /// Writes the frames appended so far and then `text` and `tail`, the
    /// rest of the last frame ([`frame_apart`]), with one writev.
    fn write_out_with(&mut self, text: &[u8], tail: &[u8]) {
        if self.buf.is_empty() || self.failed.is_some() || self.broken.is_some() {
            self.buf.clear();
            return;
        }
        let n = (self.buf.len() + text.len() + tail.len()) as u64;
        if fault::crash_at(fault::MID_FRAME) {
            let _ = self.file.write_all(&self.buf[..self.buf.len() / 2 + 1]);
            fault::crash();
        }
        let written = match fault::write_fails() {
            true => {
                // As a disk that fails mid-write leaves it: part written.
                let _ = self.file.write_all(&self.buf[..self.buf.len() / 2 + 1]);
                Err(std::io::Error::from_raw_os_error(libc::EIO))
            }
            false => write_all_parts(&mut self.file, [&self.buf[..], text, tail]),
        };
        match written {
            Ok(()) => {
                self.len += n;
                self.since_snapshot += n;
                self.since_let_go += n;
                self.durable.wrote(n);
            }
            Err(e) => {
                let path = self.dir.join(segment_name(self.header.segment));
                tracing::error!(path = %path.display(), error = %e, "write-ahead log write failed; the change is undone");
                // The change's part already written goes too, so the file
                // ends with the last whole change. A file that cannot be
                // cut keeps a torn frame at its end, which a restart cuts;
                // nothing may follow it, so the log stops.
                match self.file.set_len(self.settled) {
                    Ok(()) => {
                        self.since_snapshot = self.since_snapshot.saturating_sub(self.len - self.settled);
                        self.since_let_go = self.since_let_go.saturating_sub(self.len - self.settled);
                        self.len = self.settled;
                        // The cut gave back the room set aside past it.
                        self.reserved = self.len;
                        self.failed = Some(describe_write_error(&path, &e));
                    }
                    Err(cut) => {
                        let why = format!(
                            "the write-ahead log {} could not be written ({e}) nor cut back ({cut}); \
                             nothing more is accepted until apexd restarts",
                            path.display()
                        );
                        self.durable.fail(why.clone());
                        self.broken = Some(why);
                    }
                }
            }
        }
        self.buf.clear();
        // A big entry's buffer is not kept.
        if self.buf.capacity() > 2 * FLUSH_AT {
            self.buf = Vec::new();
        }
    }

    /// Ends the current segment (synced) and starts the next; returns the
    /// new segment's number: every segment before it is covered by a
    /// snapshot of the state now.
    pub fn rotate(&mut self) -> Result<u64, StoreError> {
        debug_assert!(self.buf.is_empty(), "a segment ends between changes");
        let path = self.dir.join(segment_name(self.header.segment));
        self.file.sync_data().map_err(|e| StoreError::io(&path, e))?;
        // Its room set aside past the frames goes back to the disk.
        release_reservation(&path, self.len);
        let header = Header { uuid: self.uuid, segment: self.header.segment + 1, salt: (self.salts)() };
        let file = start_segment(&self.dir, &header)?;
        self.durable.switch(file.try_clone().map_err(|e| StoreError::io(&self.dir, e))?);
        self.file = file;
        self.header = header;
        self.len = HEADER_LEN as u64;
        self.settled = self.len;
        self.reserved = HEADER_LEN as u64;
        self.since_snapshot = 0;
        // The snapshot lets the entries go too.
        self.since_let_go = 0;
        // The room the writes already accepted may still need; a full disk
        // is found by the next request's reservation.
        let _ = self.reserve(0);
        Ok(header.segment)
    }

    /// Gives back the room set aside past the frames: the daemon stops.
    pub fn release_room(&mut self) {
        let _ = self.flush();
        release_reservation(&self.dir.join(segment_name(self.header.segment)), self.len);
        self.reserved = self.len;
    }

    /// Allocates room for the entries a request of `bytes` may make
    /// (twice its size, and some for the entries the daemon adds), so
    /// their writes find space; refuses, changing nothing, when the disk
    /// has none.
    pub fn reserve(&mut self, bytes: u64) -> Result<(), LogError> {
        if let Some(why) = self.broken.clone().or_else(|| self.durable.failed()) {
            return Err(LogError::Failed(why));
        }
        let need = self.len + 2 * bytes + HEADROOM;
        if need <= self.reserved {
            return Ok(());
        }
        // Room to spare first; on a disk without it, as much as the
        // request itself needs, then refused.
        let path = self.dir.join(segment_name(self.header.segment));
        let mut last = None;
        for upto in [need + HEADROOM, self.len + 2 * bytes + SMALLEST_ROOM] {
            if upto <= self.reserved {
                return Ok(());
            }
            match self.allocate(upto) {
                Ok(()) => return Ok(()),
                Err(e) => last = Some(e),
            }
        }
        let e = last.expect("tried");
        Err(LogError::Failed(describe_write_error(&path, &e)))
    }

    /// Sets the segment's space aside up to `upto` bytes.
    fn allocate(&mut self, upto: u64) -> std::io::Result<()> {
        if !fault::room_for(upto - self.reserved) {
            return Err(std::io::Error::from_raw_os_error(libc::ENOSPC));
        }
        let fd = std::os::fd::AsRawFd::as_raw_fd(&self.file);
        // SAFETY: fallocate(2) on a descriptor we own; it touches no memory
        // of ours. KEEP_SIZE: the file's length stays that of its frames.
        let r = unsafe {
            libc::fallocate(
                fd,
                libc::FALLOC_FL_KEEP_SIZE,
                self.reserved as libc::off_t,
                (upto - self.reserved) as libc::off_t,
            )
        };
        if r != 0 {
            let e = std::io::Error::last_os_error();
            // A file system without fallocate: writes find out themselves.
            if e.raw_os_error() != Some(libc::EOPNOTSUPP) {
                return Err(e);
            }
        }
        self.reserved = upto;
        Ok(())
    }
}

/// Gives back a segment's space set aside past its first `len` bytes
/// (`fallocate`'s KEEP_SIZE room): a closed segment keeps none. A
/// truncation to its length frees blocks past it (a punched hole past
/// the end does not, on ext4).
pub fn release_reservation(path: &Path, len: u64) {
    use std::os::unix::fs::MetadataExt;
    let Ok(file) = std::fs::OpenOptions::new().write(true).open(path) else { return };
    let Ok(meta) = file.metadata() else { return };
    if meta.len() != len || meta.blocks() * 512 <= len.next_multiple_of(meta.blksize().max(512)) {
        return;
    }
    let _ = file.set_len(len);
}

impl Drop for Wal {
    /// Frames stored but not yet written (a change cut short) go too.
    fn drop(&mut self) {
        let _ = self.flush();
    }
}

/// What a refused write says: disk full first, in words a user acts on.
fn describe_write_error(path: &Path, e: &std::io::Error) -> String {
    match e.raw_os_error() {
        Some(libc::ENOSPC) | Some(libc::EDQUOT) => format!(
            "no space: the write-ahead log {} could not be written ({e}); nothing was changed: free some space and try again",
            path.display()
        ),
        _ => format!(
            "the write-ahead log {} could not be written ({e}); the change was undone: the session is as the log holds it",
            path.display()
        ),
    }
}

/// Creates segment `header.segment` in `dir`, its header written and the
/// directory synced, so the file is there after a crash.
fn start_segment(dir: &Path, header: &Header) -> Result<File, StoreError> {
    let path = dir.join(segment_name(header.segment));
    let mut file = std::fs::OpenOptions::new()
        .create_new(true)
        .append(true)
        .mode(0o600)
        .open(&path)
        .map_err(|e| StoreError::io(&path, e))?;
    let started = file.write_all(&header.encode()).and_then(|_| file.sync_data());
    if let Err(e) = started {
        // No half-made segment is left to stop a restart.
        let _ = std::fs::remove_file(&path);
        return Err(StoreError::io(&path, e));
    }
    super::sync_dir(dir)?;
    Ok(file)
}

/// The log's side of core's [`Sink`]: the session's lock is held when an
/// entry is stored, so this lock is never waited for.
pub struct WalSink(pub Arc<Mutex<Wal>>);

impl Sink for WalSink {
    fn stored(&mut self, shard: Shard, entry: &Entry) {
        self.0.lock().expect("wal lock").append(shard, entry);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use apex_core::{AttachmentId, BufferOp, Op, Origin};

    fn entry(seq: u64, text: &str) -> Entry {
        let op = Op::Buffer(BufferOp::Splice { q0: 0, q1: 0, text: text.into(), origin: Origin::Keyboard });
        Entry { seq, attachment: AttachmentId::SERVER, epoch: 0, op }
    }

    #[test]
    fn a_long_text_s_frame_in_parts_is_its_frame() {
        let shard = Shard::Buffer(apex_core::BufferId(9));
        let long = "naïve 文字\n".repeat(TEXT_APART / 10);
        for origin in [Origin::Keyboard, Origin::Mouse, Origin::FileWrite, Origin::OtherFile] {
            for (q0, q1) in [(0, 0), (300, 70_000), (u64::MAX >> 1, u64::MAX >> 1)] {
                let op = Op::Buffer(BufferOp::Splice { q0, q1, text: long.clone(), origin });
                let e = Entry { seq: 1 << 40, attachment: AttachmentId(77), epoch: 3, op };
                let mut whole = Vec::new();
                frame(0xfeed, shard, &e, &mut whole);
                let (head, text, tail) = frame_apart(0xfeed, shard, &e).expect("long enough");
                assert!([head, text.to_vec(), tail].concat() == whole, "{origin:?} {q0} {q1}");
            }
        }
        assert!(frame_apart(0xfeed, shard, &entry(1, &"x".repeat(TEXT_APART - 1))).is_none(), "short: framed whole");
        let rename = Op::Buffer(BufferOp::Rename { name: "x".repeat(TEXT_APART) });
        let e = Entry { seq: 1, attachment: AttachmentId::SERVER, epoch: 0, op: rename };
        assert!(frame_apart(0xfeed, shard, &e).is_none(), "not a splice: framed whole");
    }

    #[test]
    fn frames_read_back_and_a_cut_or_changed_frame_is_found() {
        let header = Header { uuid: [7; 16], segment: 3, salt: 0x1234_5678_9abc_def0 };
        assert_eq!(Header::decode(&header.encode()), Ok(header));
        let shard = Shard::Buffer(apex_core::BufferId(9));
        let mut bytes = header.encode().to_vec();
        for i in 1..=3 {
            frame(header.salt, shard, &entry(i, &format!("text {i}")), &mut bytes);
        }
        let read = |bytes: &[u8]| {
            let mut got = Vec::new();
            let end = scan(bytes, &header, |s, e, _| {
                got.push((s, e.seq));
                Ok::<_, Unapplied>(())
            });
            (got, end)
        };
        let (got, (ending, len)) = read(&bytes);
        assert_eq!(got, vec![(shard, 1), (shard, 2), (shard, 3)]);
        assert_eq!((ending, len), (Ending::Clean, bytes.len() as u64));
        // Cut in the last frame: torn, the first two kept.
        let (got, (ending, _)) = read(&bytes[..bytes.len() - 3]);
        assert_eq!(got.len(), 2);
        assert!(matches!(ending, Ending::Torn { .. }), "{ending:?}");
        // A byte changed in the middle frame: damage, with its offset.
        let mut bad = bytes.clone();
        let second = HEADER_LEN + (bytes.len() - HEADER_LEN) / 3 + 10;
        bad[second] ^= 1;
        let (got, (ending, _)) = read(&bad);
        assert_eq!(got.len(), 1);
        assert!(matches!(ending, Ending::Bad { .. }), "{ending:?}");
        // A bit flipped in the first frame's length: it seems to run past
        // the end, as a torn write would, but whole frames follow: damage.
        let mut long = bytes.clone();
        long[HEADER_LEN + 2] ^= 0x10;
        let (got, (ending, _)) = read(&long);
        assert_eq!(got.len(), 0);
        assert!(
            matches!(&ending, Ending::Bad { offset, why } if *offset == HEADER_LEN as u64 && why.contains("whole frames follow")),
            "{ending:?}"
        );
        // Garbage after the last whole frame, with no whole frame in it: torn.
        let mut garbage = bytes.clone();
        garbage.extend_from_slice(&[0xff; 40]);
        let (got, (ending, _)) = read(&garbage);
        assert_eq!(got.len(), 3);
        assert!(matches!(ending, Ending::Torn { .. }), "{ending:?}");
        // Another salt (a stale segment's frames under a new header): no
        // frame is this segment's, so none is whole: all of it is a tail a
        // crash left, not damage to what was acknowledged.
        let other = Header { salt: 99, ..header };
        let mut stale = other.encode().to_vec();
        stale.extend_from_slice(&bytes[HEADER_LEN..]);
        let mut n = 0;
        let (ending, _) = scan(&stale, &other, |_, _, _| {
            n += 1;
            Ok::<_, Unapplied>(())
        });
        assert_eq!(n, 0);
        assert!(matches!(ending, Ending::Torn { offset, .. } if offset == HEADER_LEN as u64), "{ending:?}");
        assert!(Header::decode(b"APEXWAL\0short").is_err());
        let mut magic = header.encode();
        magic[0] = b'X';
        assert_eq!(Header::decode(&magic), Err(HeaderError::Magic));
    }

    /// A change written in parts (past `FLUSH_AT`, or a long text's frame
    /// written from its entry) whose later part fails: the file is cut
    /// back to where the change began, the change's end says why, and the
    /// next change is written after the last whole one.
    #[test]
    fn a_change_whose_later_part_fails_leaves_the_file_as_before_it() {
        // Entries held until a megabyte of them is written, then texts
        // each written from its entry.
        for (size, each_part) in [(FLUSH_AT / 20, 20), (FLUSH_AT, 1)] {
            a_change_whose_later_part_fails(size, each_part);
        }
    }

    fn a_change_whose_later_part_fails(size: usize, each_part: u64) {
        let dir = std::env::temp_dir().join(format!("apex-wal-cut-{}-{size}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let durable = Durable::new(super::super::durable::SyncPolicy::Always);
        let mut wal = Wal::create(&dir, [3; 16], 0, durable, Box::new(|| 42)).unwrap();
        let shard = Shard::Buffer(apex_core::BufferId(1));
        wal.append(shard, &entry(1, "kept"));
        wal.flush().unwrap();
        let path = dir.join(segment_name(0));
        let before = std::fs::metadata(&path).unwrap().len();
        // Two parts of entries: the first is written as it comes, the
        // second write fails.
        fault::fail_writes_on_this_thread_after(Some(1));
        let big = "x".repeat(size);
        for seq in 2..2 + each_part {
            wal.append(shard, &entry(seq, &big));
        }
        assert!(std::fs::metadata(&path).unwrap().len() > before, "part of the change was written ({size})");
        for seq in 2 + each_part..2 + 2 * each_part {
            wal.append(shard, &entry(seq, &big));
        }
        let why = wal.flush().expect_err("its second part failed").to_string();
        fault::fail_writes_on_this_thread_after(None);
        assert!(why.contains("could not be written") && why.contains("undone"), "{why}");
        assert_eq!(std::fs::metadata(&path).unwrap().len(), before, "cut back to the change's start ({size})");
        // The log goes on: the next change lands after the last whole one.
        wal.append(shard, &entry(2, "next"));
        wal.flush().unwrap();
        let bytes = std::fs::read(&path).unwrap();
        let mut seqs = Vec::new();
        let (ending, _) = scan(&bytes, &wal.header, |_, e, _| {
            seqs.push(e.seq);
            Ok::<_, Unapplied>(())
        });
        assert_eq!((ending, seqs), (Ending::Clean, vec![1, 2]));
        assert!(wal.broken.is_none() && wal.reserve(10).is_ok());
        drop(wal);
        let _ = std::fs::remove_dir_all(&dir);
    }
}
