//! The connection every clone of a `Client` shares, and the reading of
//! replies: whichever request finds the socket readable reads what has
//! come and hands each reply to the owner of its tag.

use super::tags::Tags;
use crate::fcall::Fcall;
use crate::socket;
use crate::socket::{Filled, Incoming, Io};
use std::sync::atomic::{AtomicU32, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, TryLockError};

impl Shared {
    /// The tag table, even if a panic elsewhere poisoned its lock: a
    /// request dropped while that one unwinds frees its tag rather than
    /// panic in its drop (which would abort the process).
    pub(super) fn tags_anyway(&self) -> std::sync::MutexGuard<'_, super::tags::Tags> {
        self.tags.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

pub(super) struct Shared {
    pub(super) io: Io,
    /// Held while a frame is written, so frames go out whole; the buffer
    /// each is encoded in. (Owned guards: a frame given up part-way is
    /// finished by a task that holds it.)
    pub(super) writing: Arc<tokio::sync::Mutex<Vec<u8>>>,
    /// What has been read and not yet handed out. Taken only between
    /// awaits, by whichever waiting request found the socket readable.
    pub(super) reading: Mutex<Incoming>,
    /// Said when `reading` is let go, to the requests that found it taken
    /// (counted in `waiting`): they wait for that rather than block their
    /// worker thread while a large reply is copied.
    pub(super) released: tokio::sync::Notify,
    pub(super) waiting: AtomicUsize,
    /// The tags in use and who waits for each one's reply.
    pub(super) tags: Mutex<Tags>,
    pub(super) free_fids: Mutex<Vec<u32>>,
    /// Auth fids proven for a uname and an aname, kept for their next
    /// attaches (`Client::attach_proving`).
    pub(super) proven: Mutex<std::collections::HashMap<(String, String), u32>>,
    pub(super) next_fid: AtomicU32,
    pub(super) msize: u32,
    /// Becomes true when the connection has ended: the server hung up,
    /// or its framing broke and nothing more is read.
    pub(super) gone: tokio::sync::watch::Sender<bool>,
}

impl Shared {
    /// Reads what has come, for everyone: each whole reply goes to whoever
    /// waits for its tag, and `mine`'s is returned when it is among them.
    /// Called with the socket found readable (`ready`); takes it as not
    /// readable once a read drains it. The end of the stream, or framing
    /// that broke, ends the connection.
    pub(super) fn pump(
        &self,
        reading: &mut Incoming,
        ready: &mut socket::Ready<'_>,
        mine: Option<u16>,
    ) -> Option<Fcall> {
        let mut drained = false;
        let mut own = None;
        loop {
            if *self.gone.borrow() {
                return own;
            }
            // Every reply read so far is handed out before the lock is let
            // go: none is left where no one would look for it.
            loop {
                match reading.next(self.msize) {
                    Ok(Some(msg)) => {
                        if let Some(body) = self.tags_anyway().hand_over(msg, mine) {
                            own = Some(body);
                        }
                    }
                    Ok(None) => break,
                    Err(e) => {
                        tracing::debug!(error = %e, "9P reply framing broke");
                        self.end(reading);
                        return own;
                    }
                }
            }
            if own.is_some() || drained {
                return own;
            }
            match reading.fill(&self.io, self.msize) {
                Ok(Filled::Got { drained: true }) => {
                    ready.clear_ready();
                    drained = true;
                }
                Ok(Filled::Got { drained: false }) => {}
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                    ready.clear_ready();
                    return own;
                }
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Ok(Filled::End) | Err(_) => {
                    self.end(reading);
                    return own;
                }
            }
        }
    }

    /// The connection has ended: said first, then every request waiting
    /// for a reply is woken to find none will come (Hangup); a request
    /// that takes its tag after that sees the end said (`send`), so none
    /// waits for a reply forever.
    /// Called holding the reading lock (its state is asked for to prove
    /// it), so no `pump` reads on past the end.
    pub(super) fn end(&self, _reading: &mut Incoming) {
        // Nothing written after this could be read as a frame.
        socket::shut_writes(&self.io);
        self.gone.send_replace(true);
        self.tags_anyway().forget_all();
        // Whoever waits for the reading lock looks again, and finds it over.
        self.released.notify_waiters();
    }

    /// Waits for the socket to be readable and reads what came (`pump`),
    /// unless another request is reading: then waits for it to let go.
    pub(super) async fn read_for(&self, mine: Option<u16>) -> Option<Fcall> {
        let mut ready = match self.io.readable().await {
            Ok(ready) => ready,
            Err(e) => {
                tracing::debug!(error = %e, "9P socket failed");
                self.end(&mut self.reading.lock().unwrap_or_else(std::sync::PoisonError::into_inner));
                return None;
            }
        };
        if let Some(got) = self.try_pump(&mut ready, mine) {
            return got;
        }
        // Another request is reading. Listening, and counted, before
        // looking again: a reader that lets go after this look sees the
        // count and says so.
        let released = self.released.notified();
        tokio::pin!(released);
        released.as_mut().enable();
        let counted = Counted::new(&self.waiting);
        // The count is seen before the lock is looked at again, as the
        // holder lets go before it reads the count: one of the two sees
        // the other.
        std::sync::atomic::fence(Ordering::SeqCst);
        if let Some(got) = self.try_pump(&mut ready, mine) {
            return got;
        }
        drop(ready);
        released.await;
        drop(counted);
        None
    }

    /// `pump`, unless another request holds the reading lock (`None`);
    /// says when it lets the lock go to those that wait for that.
    pub(super) fn try_pump(&self, ready: &mut socket::Ready<'_>, mine: Option<u16>) -> Option<Option<Fcall>> {
        let mut reading = match self.reading.try_lock() {
            Ok(reading) => reading,
            Err(TryLockError::WouldBlock) => return None,
            // A panic while reading left it: what was read is as it was.
            Err(TryLockError::Poisoned(p)) => p.into_inner(),
        };
        let got = self.pump(&mut reading, ready, mine);
        drop(reading);
        std::sync::atomic::fence(Ordering::SeqCst);
        if self.waiting.load(Ordering::SeqCst) > 0 {
            self.released.notify_waiters();
        }
        Some(got)
    }
}

/// One in a count for as long as it lives (a future dropped while it
/// waits is uncounted too).
pub(super) struct Counted<'a>(&'a AtomicUsize);

impl<'a> Counted<'a> {
    pub(super) fn new(count: &'a AtomicUsize) -> Counted<'a> {
        count.fetch_add(1, Ordering::SeqCst);
        Counted(count)
    }
}

impl Drop for Counted<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}
