//! Reading a file's next piece while the program takes in the last one.
//!
//! A synthetic file is opened direct-io (its length is 0), so the kernel
//! hands the mount one read(2) at a time: `cat` of a 100 MB body is a
//! FUSE request, then a Tread, then the next FUSE request, in turn. For a
//! file whose reads are positional (a read at an offset has no effect, so
//! reading ahead and throwing the piece away harms nothing), the mount
//! asks for the piece that follows a full read as soon as it answers, and
//! the next read at that offset takes it: the FUSE round trip and the
//! Tread overlap.
//!
//! Which files: those the server marks as content rather than a stream,
//! a qid of type QTAPPEND (acme's `body` and `tag`) or with a version
//! (apexd's `buffers/N/body`, a file server's files). A stream (`event`,
//! `data`, whose read moves `addr`) has neither, and is never read ahead:
//! a piece read ahead and not taken would be lost.
//!
//! A piece read ahead is taken only if no write through this mount began
//! or ended while it was being read ([`Writes`]), so a program reading
//! after its own write (or another's through the mount) sees it. A change
//! made by another client of the server is seen as a read made a moment
//! earlier would have seen it.

use apex_ninep::fcall::{Qid, QTAPPEND};
use apex_ninep::{Client, ClientError};
use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use tokio::task::JoinHandle;

/// Whether reads of a file with `qid` are positional, so may be read ahead.
pub fn positional(qid: &Qid) -> bool {
    qid.ty & QTAPPEND != 0 || qid.vers != 0
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

/// How many pieces are read ahead of the program.
const DEPTH: usize = 2;

/// The pieces being read ahead for one open file, in order.
#[derive(Default)]
pub struct ReadAhead {
    next: Mutex<VecDeque<Ahead>>,
}

struct Ahead {
    offset: u64,
    count: u32,
    /// [`Writes`] when it was asked for.
    writes: u64,
    read: JoinHandle<Result<Vec<u8>, ClientError>>,
}

impl ReadAhead {
    /// The piece at `offset` of `count` bytes if it was read ahead with no
    /// write through the mount since; `None` to read it now. A piece read
    /// ahead for another place is dropped (its Tread flushed).
    pub async fn take(&self, offset: u64, count: u32, writes: &Writes) -> Option<Vec<u8>> {
        let ahead = {
            let mut next = self.next.lock().expect("read-ahead lock");
            match next.front() {
                Some(a) if (a.offset, a.count) == (offset, count) => next.pop_front()?,
                _ => {
                    next.drain(..).for_each(|a| a.read.abort());
                    return None;
                }
            }
        };
        let data = ahead.read.await.ok()?.ok()?;
        // Compared after the read ended: a write that began while it ran
        // moved the count.
        (writes.now() == ahead.writes).then_some(data)
    }

    /// Reads the [`DEPTH`] pieces of `count` bytes from `offset` of `fid`
    /// in the background (those not already being read), for the next
    /// [`ReadAhead::take`]s.
    pub fn ask(&self, client: &Client, fid: u32, offset: u64, count: u32, writes: &Writes) {
        let mut next = self.next.lock().expect("read-ahead lock");
        let mut at = next.back().map_or(offset, |a| a.offset + u64::from(a.count));
        while next.len() < DEPTH {
            let client = client.clone();
            let read = tokio::spawn(async move { client.read(fid, at, count).await });
            next.push_back(Ahead { offset: at, count, writes: writes.now(), read });
            at += u64::from(count);
        }
    }

    /// Drops the pieces being read ahead, their Treads flushed: the file
    /// is being closed.
    pub fn stop(&self) {
        self.next.lock().expect("read-ahead lock").drain(..).for_each(|a| a.read.abort());
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
        assert!(positional(&qid(QTFILE, 7)), "a buffer's body, a file server's file");
        assert!(!positional(&qid(QTFILE, 0)), "event, data, a stream");
    }
}
