//! Reading a file's next pieces while the program takes in the last one.
//!
//! A synthetic file is opened direct-io (its length is 0), so the kernel
//! hands the mount one read(2) at a time: `cat` of a 100 MB body is a
//! FUSE request, then a Tread, then the next FUSE request, in turn. For a
//! file whose reads are positional (a read at an offset has no effect, so
//! reading ahead and throwing the piece away harms nothing), the mount
//! asks for the pieces that follow a full read as soon as it answers, and
//! the next reads at those offsets take them: the FUSE round trip and the
//! Tread overlap.
//!
//! Which files: an append-only one (its qid QTAPPEND): acme's `body` and
//! `tag`, apexd's `buffers/N/body`, a Plan 9 log file. A stream (`event`,
//! `data`, whose read moves `addr`, `/proc/N/wait`) is not append-only,
//! and is never read ahead: a piece read ahead and not taken would be
//! lost. A piece is never at offset 0, where apexd makes a body's
//! content again.
//!
//! A piece is taken only by the read at its offset and count, only if no
//! write through this mount began or ended between its being asked for and
//! its being taken ([`Writes`]), so a program reading after its own write
//! (or another's through the mount) sees it, and only within [`FRESH`] of
//! its being asked for, so a reader that pauses (`less`) reads what is
//! there now. A change made by another client of the server is seen as a
//! read made that moment earlier would have seen it. While writes go on
//! through the mount between reads (`cat a/body > b/body`), nothing is
//! read ahead: each piece would be thrown away.

use apex_ninep::fcall::{Qid, QTAPPEND};
use apex_ninep::{Client, ClientError};
use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};
use tokio::task::JoinHandle;

/// How many pieces are read ahead of the program.
const DEPTH: usize = 2;

/// How long a piece read ahead may be taken after it was asked for: as
/// long as the mount keeps a real file's attributes.
pub const FRESH: Duration = crate::attr::CACHE_TTL;

/// Whether reads of a file with `qid` are positional, so may be read ahead.
pub fn positional(qid: &Qid) -> bool {
    qid.ty & QTAPPEND != 0
}

/// Counts the writes through the mount, once as each begins and once as
/// it ends: a piece read ahead while the count moved may predate one.
#[derive(Default)]
pub struct Writes(AtomicU64);

impl Writes {
    /// Marks a write as begun until the guard is dropped, however the
    /// request ends.
    pub fn during(&self) -> Writing<'_> {
        self.0.fetch_add(1, Ordering::SeqCst);
        Writing(self)
    }

    fn now(&self) -> u64 {
        self.0.load(Ordering::SeqCst)
    }
}

/// A write through the mount under way ([`Writes::during`]).
pub struct Writing<'a>(&'a Writes);

impl Drop for Writing<'_> {
    fn drop(&mut self) {
        self.0 .0.fetch_add(1, Ordering::SeqCst);
    }
}

/// The pieces being read ahead for one open file, in order.
pub struct ReadAhead {
    next: Mutex<Pieces>,
}

struct Pieces {
    ahead: VecDeque<Ahead>,
    /// [`Writes`] when the last read ended.
    seen: u64,
}

struct Ahead {
    offset: u64,
    count: u32,
    /// [`Writes`] when it was asked for.
    writes: u64,
    asked: Instant,
    read: Reading,
}

/// A Tread in the background, flushed if it is dropped unfinished.
struct Reading(JoinHandle<Result<Vec<u8>, ClientError>>);

impl Drop for Reading {
    fn drop(&mut self) {
        self.0.abort();
    }
}

impl ReadAhead {
    /// For a file opened now.
    pub fn new(writes: &Writes) -> ReadAhead {
        ReadAhead { next: Mutex::new(Pieces { ahead: VecDeque::new(), seen: writes.now() }) }
    }

    /// The piece at `offset` of `count` bytes if it was read ahead and may
    /// be taken; `None` to read it now. Pieces read ahead for another
    /// place, or that may be stale, are dropped (their Treads flushed).
    pub async fn take(&self, offset: u64, count: u32, writes: &Writes) -> Option<Vec<u8>> {
        let mut ahead = {
            let mut next = self.next.lock().expect("read-ahead lock");
            let front = next.ahead.front()?;
            let wanted = (front.offset, front.count) == (offset, count);
            match wanted && front.writes == writes.now() && front.asked.elapsed() < FRESH {
                true => next.ahead.pop_front()?,
                false => {
                    next.ahead.clear();
                    return None;
                }
            }
        };
        let data = (&mut ahead.read.0).await.ok()?.ok()?;
        // Looked at again after the read ended: a write that began while
        // it ran moved the count.
        (writes.now() == ahead.writes).then_some(data)
    }

    /// After a read at `offset` that returned all the `count` bytes it
    /// asked for: reads the [`DEPTH`] pieces of `count` bytes from the
    /// end of it (those not already being read) in the background, for
    /// the next [`ReadAhead::take`]s, unless a write through the mount
    /// came since the read before.
    pub fn ask(&self, client: &Client, fid: u32, offset: u64, count: u32, writes: &Writes) {
        let now = writes.now();
        let mut next = self.next.lock().expect("read-ahead lock");
        if std::mem::replace(&mut next.seen, now) != now {
            return;
        }
        let mut at = next.ahead.back().map_or(offset + u64::from(count), |a| a.offset + u64::from(a.count));
        while next.ahead.len() < DEPTH {
            let client = client.clone();
            let read = Reading(tokio::spawn(async move { client.read(fid, at, count).await }));
            next.ahead.push_back(Ahead { offset: at, count, writes: now, asked: Instant::now(), read });
            at += u64::from(count);
        }
    }

    /// After a read that returned less than it asked for (the end) or
    /// failed: nothing is read ahead, but the writes are seen.
    pub fn saw(&self, writes: &Writes) {
        self.next.lock().expect("read-ahead lock").seen = writes.now();
    }

    /// Drops the pieces being read ahead, their Treads flushed: the file
    /// is being closed.
    pub fn stop(&self) {
        self.next.lock().expect("read-ahead lock").ahead.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use apex_ninep::fcall::QTFILE;

    #[test]
    fn only_content_is_read_ahead() {
        let qid = |ty, vers| Qid { ty, vers, path: 1 };
        assert!(positional(&qid(QTAPPEND, 0)), "acme's body and tag");
        assert!(positional(&qid(QTAPPEND, 7)), "apexd's buffer body");
        assert!(!positional(&qid(QTFILE, 0)), "event, data, a stream");
        assert!(!positional(&qid(QTFILE, 3)), "/proc/N/wait: a version is no promise");
    }
}
