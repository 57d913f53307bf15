//! Streams: files whose reads block at the end until there is more.
//!
//! `/registry`, `shards/SHARD/entries` and `buffers/N/event` are byte
//! streams of lines made from log entries. A fid's [`Cursor`] remembers the
//! last entry it formatted and the bytes not yet read, so a read may cut a
//! line or carry several, and following a stream costs only what is new.
//! Reads continue at the offset the last one ended; a read at offset 0
//! starts `registry` and `entries` over from the first retained entry.

use crate::acme::event::{follow, Origins, Version};
use crate::daemon::Daemon;
use crate::error::Error;
use crate::registry::Registry;
use crate::session::Session;
use crate::shards::entrytext::{format_entry, format_registry};
use apex_core::{BufferId, Entry, Reject, Seq, Shard, WindowId};

/// What a stream is made from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Source {
    Registry,
    Entries(u64, Shard),
    /// Events of one buffer, from the moment the file was opened.
    Event(u64, BufferId),
    /// Events of an acme window: its tag's (lower case) and its body's.
    Window(u64, WindowId),
}

/// Bytes formatted per fill, so a long log is streamed, not built whole.
const FILL: usize = 64 * 1024;
/// Entries looked at per fill of an event stream.
const BATCH: usize = 4096;

/// A reader's place in a stream.
#[derive(Debug)]
pub struct Cursor {
    pub source: Source,
    /// The last seq formatted into `pending`.
    next: Seq,
    /// For a window's events, the last of its tag's.
    next_tag: Seq,
    /// Buffer versions after the last formatted event (body, tag).
    versions: [Version; 2],
    /// The seq a read at offset 0 starts after.
    start: Seq,
    /// Bytes returned so far: the offset the next read must have.
    offset: u64,
    pending: Vec<u8>,
    pos: usize,
}

/// What a fill found.
/// What a cursor reads from while filling.
enum Scope<'a> {
    Registry(&'a Registry),
    Session(&'a Session),
    /// The session was deleted.
    Gone,
}

pub enum Fill {
    Data,
    /// A batch of entries read past that made nothing to send (undo
    /// marks, selections): look again, the lock let go in between, for
    /// what may follow them.
    Again,
    /// Nothing new yet: wait for a change.
    Wait,
    /// The stream is over (its shard or session is gone): EOF.
    End,
}

impl Cursor {
    /// A cursor at the start (`registry`, `entries`) or, for events, at the
    /// end of what exists now.
    /// A cursor on the registry log, from its start.
    pub fn registry() -> Cursor {
        Cursor::starting(Source::Registry, 0, 0, [None, None])
    }

    /// A cursor on one of session `s`'s streams.
    pub fn open_in(source: Source, s: &Session) -> Result<Cursor, Error> {
        let mut next_tag = 0;
        let mut versions = [None, None];
        let version_of = |s: &Session, b| s.view().state.buffer(b).ok().map(|b| b.version);
        let start = match source {
            Source::Registry => 0,
            Source::Entries(_, shard) => s.view().log.shard(shard).map_or(0, |l| l.base),
            Source::Event(_, b) => {
                versions[0] = version_of(s, b);
                s.view().log.last(Shard::Buffer(b))
            }
            Source::Window(_, w) => {
                let win = s.view().state.window(w).map_err(|_| Error::WindowDeleted)?;
                next_tag = s.view().log.last(Shard::Buffer(win.tag));
                versions = [version_of(s, win.body), version_of(s, win.tag)];
                s.view().log.last(Shard::Buffer(win.body))
            }
        };
        Ok(Cursor::starting(source, start, next_tag, versions))
    }

    fn starting(source: Source, start: Seq, next_tag: Seq, versions: [Version; 2]) -> Cursor {
        Cursor { source, next: start, next_tag, versions, start, offset: 0, pending: Vec::new(), pos: 0 }
    }

    /// Takes up to `count` bytes already formatted, if any; checks the
    /// offset first.
    pub fn take(&mut self, offset: u64, count: u32) -> Result<Option<Vec<u8>>, Error> {
        // acme ignores the offset of event reads; clients send any.
        if offset != self.offset && !matches!(self.source, Source::Window(..)) {
            if offset != 0 || matches!(self.source, Source::Event(..)) {
                return Err(Error::OutOfOrder { offset, at: self.offset });
            }
            *self =
                Cursor { next: self.start, next_tag: self.next_tag, offset: 0, pending: Vec::new(), pos: 0, ..*self };
        }
        if self.pos == self.pending.len() {
            return Ok(None);
        }
        let n = (count as usize).min(self.pending.len() - self.pos);
        let out = self.pending[self.pos..self.pos + n].to_vec();
        self.pos += n;
        self.offset += n as u64;
        if self.pos == self.pending.len() {
            self.pending.clear();
            self.pos = 0;
        }
        Ok(Some(out))
    }

    /// Formats what is new since the last fill.
    pub fn fill(&mut self, daemon: &Daemon) -> Result<Fill, Error> {
        let session = match self.source {
            Source::Registry => None,
            Source::Entries(n, _) | Source::Event(n, _) | Source::Window(n, _) => Some(n),
        };
        match session {
            // The registry's lines under its lock; a session's entries and
            // events under the session's alone.
            None => self.fill_in(Scope::Registry(&daemon.reg())),
            Some(n) => match daemon.read(n, |s| self.fill_in(Scope::Session(s))) {
                Ok(filled) => filled,
                Err(_) if matches!(self.source, Source::Entries(..)) => Ok(Fill::End),
                Err(_) => self.fill_in(Scope::Gone),
            },
        }
    }

    fn fill_in(&mut self, scope: Scope) -> Result<Fill, Error> {
        // Whether a buffer's batch of entries was all read past: more may
        // follow it.
        let mut more = false;
        match (self.source, scope) {
            (Source::Registry, Scope::Registry(reg)) => {
                for e in reg.entries_after(self.next) {
                    self.pending.extend_from_slice(format_registry(e).as_bytes());
                    self.next = e.seq;
                    if self.pending.len() >= FILL {
                        break;
                    }
                }
            }
            (Source::Entries(_, shard), Scope::Session(session)) => {
                let entries = match session.view().log.entries_after(shard, self.next) {
                    Ok(it) => it,
                    Err(Reject::UnknownShard { .. }) => return Ok(Fill::End),
                    Err(e) => return Err(e.into()),
                };
                for e in entries {
                    self.pending.extend_from_slice(format_entry(e).as_bytes());
                    self.next = e.seq;
                    if self.pending.len() >= FILL {
                        break;
                    }
                }
            }
            (Source::Event(_, b), scope) => {
                let gone = || Error::BufferGone(b.0);
                let Scope::Session(session) = scope else { return Err(gone()) };
                let (next, version) = (&mut self.next, &mut self.versions[0]);
                more = follow_buffer(session, b, next, version, false, &mut self.pending).ok_or_else(gone)??;
            }
            (Source::Window(_, w), scope) => {
                // A pending read of a deleted window fails, as in acme.
                let gone = || Error::WindowShutDown;
                let Scope::Session(session) = scope else { return Err(gone()) };
                let win = session.view().state.window(w).map_err(|_| gone())?;
                let [body_version, tag_version] = &mut self.versions;
                let shards =
                    [(win.tag, &mut self.next_tag, tag_version, true), (win.body, &mut self.next, body_version, false)];
                for (b, next, version, tag) in shards {
                    more |= follow_buffer(session, b, next, version, tag, &mut self.pending).ok_or_else(gone)??;
                }
            }
            // An entries cursor whose session went ends.
            (_, _) => return Ok(Fill::End),
        }
        Ok(match (self.pending.is_empty(), more) {
            (false, _) => Fill::Data,
            (true, true) => Fill::Again,
            (true, false) => Fill::Wait,
        })
    }
}

/// Formats buffer `b`'s event messages after entry `next` onto `out` and
/// moves `next` past them: whether that read past a whole batch of
/// entries (there may be more); `None` if the buffer is gone.
fn follow_buffer(
    session: &Session,
    b: BufferId,
    next: &mut Seq,
    version: &mut Version,
    tag: bool,
    out: &mut Vec<u8>,
) -> Option<Result<bool, Error>> {
    let buffer = session.view().state.buffer(b).ok()?;
    let entries = match session.view().log.entries_after(Shard::Buffer(b), *next) {
        Ok(it) => it.take(BATCH).collect::<Vec<&Entry>>(),
        Err(e) => return Some(Err(e.into())),
    };
    let origins =
        Origins { noted: &|seq| session.acme().origin(b, seq), limited: &|a| session.hub().limited.contains(&a) };
    let n = follow(buffer, &entries, version, tag, &origins, out, FILL);
    if let Some(e) = n.checked_sub(1).map(|i| entries[i]) {
        *next = e.seq;
    }
    if version.is_none() && *next >= session.view().log.last(Shard::Buffer(b)) {
        // A reader that fell further behind than the edits kept lost
        // track of the buffer's version; caught up, it is the buffer's,
        // and later undos are reported again.
        *version = Some(buffer.version);
    }
    Some(Ok(n == BATCH))
}
