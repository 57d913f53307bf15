//! `Shared`: a session as the registry holds it, behind its own lock, with
//! its line of the root's `index` kept beside the lock, not under it.
//!
//! A session's lock is held while a proposal applies, and one proposal
//! may take a while (the Undo of a whole-file Edit rebuilds the text).
//! The root's `index`, which names every session, reads each line without
//! that lock, so no session's work holds up a look at the daemon. The
//! line is made again whenever a lock is let go of after the session's
//! metalog moved (its label, identity, attachments and shards are all
//! there), so it is never older than the last change made under the lock.
//!
//! It also counts who is waiting for the lock, so that a long command
//! taking it again and again (an Edit's parts) lets them in first, and
//! does not pause for nobody.

use crate::session::Session;
use std::ops::{Deref, DerefMut};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, LockResult, Mutex, MutexGuard, PoisonError};

/// A session, shared, behind a lock of its own.
#[derive(Clone)]
pub struct Shared(Arc<Inner>);

struct Inner {
    session: Mutex<Session>,
    /// The metalog's last seq when `index` was made, and the line.
    index: Mutex<(u64, String)>,
    /// Threads in [`Shared::lock`] that have not got the lock yet.
    waiting: AtomicUsize,
}

impl Shared {
    pub fn new(session: Session) -> Shared {
        let index = (session.meta_seq(), session.index_line());
        Shared(Arc::new(Inner { session: Mutex::new(session), index: Mutex::new(index), waiting: AtomicUsize::new(0) }))
    }

    /// The session, locked; its `index` line is brought up to date when
    /// the lock is let go of.
    pub fn lock(&self) -> LockResult<Locked<'_>> {
        let index = &self.0.index;
        let waiting = Waiting::on(&self.0.waiting);
        let locked = self.0.session.lock();
        drop(waiting);
        match locked {
            Ok(guard) => Ok(Locked { guard, index }),
            Err(poisoned) => Err(PoisonError::new(Locked { guard: poisoned.into_inner(), index })),
        }
    }

    /// Whether another thread is waiting for the lock now (one that has
    /// it, or has just let it go, is not counted).
    pub fn others_waiting(&self) -> bool {
        self.0.waiting.load(Ordering::SeqCst) > 0
    }

    /// The session's line of the root's `index`, as of the last lock let
    /// go of: waits for no one working on the session.
    pub fn index_line(&self) -> String {
        self.0.index.lock().unwrap_or_else(PoisonError::into_inner).1.clone()
    }
}

/// One thread counted as waiting for a session's lock until dropped
/// (unwinding too: the count is never left high).
struct Waiting<'a>(&'a AtomicUsize);

impl Waiting<'_> {
    fn on(count: &AtomicUsize) -> Waiting<'_> {
        count.fetch_add(1, Ordering::SeqCst);
        Waiting(count)
    }
}

impl Drop for Waiting<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

/// A session locked (see [`Shared::lock`]).
pub struct Locked<'a> {
    guard: MutexGuard<'a, Session>,
    index: &'a Mutex<(u64, String)>,
}

impl Deref for Locked<'_> {
    type Target = Session;
    fn deref(&self) -> &Session {
        &self.guard
    }
}

impl DerefMut for Locked<'_> {
    fn deref_mut(&mut self) -> &mut Session {
        &mut self.guard
    }
}

impl Drop for Locked<'_> {
    /// Still under the session's lock: the line is made from the session
    /// as it is let go of, and only when its metalog moved.
    fn drop(&mut self) {
        // Unwinding (the lock is poisoned): nothing more that might panic.
        if std::thread::panicking() {
            return;
        }
        let seq = self.guard.meta_seq();
        let mut index = self.index.lock().unwrap_or_else(PoisonError::into_inner);
        if index.0 != seq {
            *index = (seq, self.guard.index_line());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::{Duration, Instant};

    /// A thread blocked on the lock is counted until it has it; the one
    /// holding it is not.
    #[test]
    fn whoever_waits_for_the_lock_is_counted_until_it_has_it() {
        let shared = Shared::new(Session::new(1, "main", [7; 16]).unwrap());
        assert!(!shared.others_waiting(), "nobody waits");
        let held = shared.lock().unwrap();
        assert!(!shared.others_waiting(), "the holder is not counted");
        let other = shared.clone();
        let (got, has) = std::sync::mpsc::channel();
        let waiter = std::thread::spawn(move || {
            let _locked = other.lock().unwrap();
            got.send(()).unwrap();
        });
        let deadline = Instant::now() + Duration::from_secs(30);
        while !shared.others_waiting() {
            assert!(Instant::now() < deadline, "the blocked thread was never counted");
            std::thread::sleep(Duration::from_millis(1));
        }
        drop(held);
        has.recv().unwrap();
        waiter.join().unwrap();
        assert!(!shared.others_waiting(), "the thread that got the lock is no longer counted");
    }
}
