//! The daemon apart from its files: the registry of sessions, the clock
//! the attach protocol's deadlines run on, the wake-ups it asks for,
//! change notification for blocked readers, and waiting for a routed
//! proposal's outcome. The file tree ([`crate::fsys`]), the host
//! ([`crate::host`], [`crate::host::headless`]) and the binary act through it.
//!
//! A session is reached through two verbs: [`Daemon::read`] looks at it
//! and [`Daemon::change`] changes it, with the clock. Invariant: every
//! change goes through `change`, which wakes blocked readers after it; a
//! deadline the hub sets (`Hub::wakeups`) arms the session's one timer,
//! which ticks the hub then (and the tick arms it for the next deadline
//! left). What a reader keeps for itself (where it is, what it holds
//! from compaction) is kept through [`Daemon::tend`], which wakes nobody.
//!
//! Change notification: `changed_in(n)` after a change in session `n`
//! wakes the readers subscribed to it (`subscribe_to(n)`) and to the
//! registry (`subscribe`), but no other session's; `changed`, a change to
//! the registry such as a session ended, wakes them all. A session's
//! channel is made at its first subscriber and let go when nobody waits
//! on it. Invariant: a reader subscribes to the channel of the session
//! whose state it waits on, or to the registry's, which every change
//! moves, as it does the generation a read's content counts.
//!
//! Memory: after every locked change a persisted session may be due a
//! snapshot, which lets the entries it covers go; and every session lets
//! go of the entries no connection or `entries` reader needs each time
//! its log has taken in `LOG_KEPT_BYTES` (8 MiB: the texts its entries
//! held are then reused by the next writes rather than fresh pages
//! faulted in), so memory does not grow with all that was written. `table_sizes` and `log_bytes` let the tests check it.

use crate::attach::hub::Written;
use crate::attach::protocol;
use crate::attach::route;
use crate::error::Error;
use crate::persist::durable::Durable;
use crate::persist::{Pace, PutOff, SnapshotJob};
use crate::registry::{Registry, Shared};
use crate::session::Session;
use apex_core::propose::Applied;
use apex_core::Proposal;
use apex_link::wire::Outcome;
use apex_ninep::srv;
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use tokio::sync::watch;

/// A buffer of a session, and a file a Put of it would write.
pub type PutWarned = (u64, apex_core::BufferId, String);

/// A handle on the daemon. Clones share everything.
#[derive(Clone)]
pub struct Daemon {
    pub registry: Arc<Mutex<Registry>>,
    /// Moved on by every change anywhere: the registry's readers wait on
    /// it, and a read's content counts its generation.
    changes: Arc<watch::Sender<u64>>,
    /// Each session's own, for the stream readers waiting in it (made at
    /// their first subscriber), so a change in one session wakes no reader
    /// of another.
    session_changes: Arc<Mutex<HashMap<u64, Arc<watch::Sender<u64>>>>>,
    /// The daemon's clock for the attach protocol's deadlines.
    epoch: std::time::Instant,
    /// The services posted beside `apex` (`acme`, `plumb`) and the session
    /// each serves: `/services`, for a client reaching the daemon from
    /// elsewhere (an import over ssh) to serve them in turn.
    pub services: Arc<Mutex<Vec<(String, String)>>>,
    /// The long built-ins running in the daemon (an Edit), each listed
    /// among its session's processes under a number no pid reaches, and
    /// the flag `kill` of that number sets (`host::Job`).
    pub jobs: Arc<Mutex<HashMap<u64, Arc<std::sync::atomic::AtomicBool>>>>,
    /// Each buffer (by session) and file a Put was refused for, once, as
    /// it would write U+FFFD over the file's bytes that are not UTF-8,
    /// and the version it was: a Put again of that version writes.
    pub put_warned: Arc<Mutex<HashMap<PutWarned, u64>>>,
    /// Held while an `+Errors` window is looked for and made, so that
    /// output arriving at once (puts side by side, commands ending
    /// together) finds one window, not one each.
    pub making_errors_window: Arc<tokio::sync::Mutex<()>>,
}

/// What a session's log is due: a snapshot (its state copied under the
/// lock), after which the entries it covers leave memory (they are on
/// disk); or only their leaving, every `LOG_KEPT_BYTES` taken in, as far
/// as no connection or `entries` reader still needs them: otherwise every
/// text written would stay in memory beside the buffers, until the next
/// snapshot or for ever (`--ephemeral`).
enum Due {
    Snapshot(SnapshotJob),
    Compacted,
}

fn snapshot_due(s: &mut Session, pace: Pace) -> Option<Due> {
    let Some(persisted) = s.persisted() else {
        if s.ephemeral_log_due() {
            crate::attach::feed::compact_covered(s);
            return Some(Due::Compacted);
        }
        return None;
    };
    if let Some(job) = persisted.snapshot_due(&s.view().state, pace) {
        crate::attach::feed::compact_covered(s);
        return Some(Due::Snapshot(job));
    }
    // Between snapshots too: the entries are in the log's file, and a
    // client attaching is welcomed with the state, so a session of many
    // files opened does not hold their texts twice until its snapshot.
    if persisted.entries_due(crate::session::LOG_KEPT_BYTES) {
        crate::attach::feed::compact_sent(s);
        return Some(Due::Compacted);
    }
    None
}

/// Writes a due snapshot on a blocking thread, no lock held, then gives
/// back to the system what the entries that left memory held (malloc
/// would keep it resident). The trim holds malloc's arena while it walks
/// the heap: 9 ms after a 100 MB file's Get, no more than an Edit's part
/// holds the session. Entries let go between snapshots (every 8 MiB of
/// log) are given back once the daemon is quiet ([`give_back_when_quiet`]).
fn write_snapshot(due: Option<Due>) {
    match due {
        Some(Due::Snapshot(job)) => {
            tokio::task::spawn_blocking(move || {
                job.run();
                apex_sys::malloc::give_back();
            });
        }
        Some(Due::Compacted) => give_back_when_quiet(),
        None => {}
    }
}

/// How long a session must take no entries for a snapshot put off while
/// they came in to be written.
const SNAPSHOT_PAUSE: std::time::Duration = std::time::Duration::from_millis(200);

/// How long no entries must be let go before what they held is given
/// back, and no session change after a long command before what it freed
/// is ([`Daemon::give_back_when_still`]).
const QUIET: std::time::Duration = std::time::Duration::from_millis(250);

/// Gives the free heap back once no entries have been let go for
/// [`QUIET`]: while many files are opened, the memory one's entries held
/// is taken by the next files' texts, not given back and faulted in again
/// after every 8 MiB (7% of the time of opening a thousand files); once
/// they are open, it goes back in one trim.
fn give_back_when_quiet() {
    static LET_GO: AtomicU64 = AtomicU64::new(0);
    after_quiet(&LET_GO, QUIET, apex_sys::malloc::give_back);
}

/// The longest a give-back after a long command waits for the daemon to
/// be still ([`Daemon::give_back_when_still`]).
const STILL_AT_MOST: std::time::Duration = std::time::Duration::from_secs(5);

/// Returns once `changes` has not moved for `quiet`, or at its first move
/// after `at_most` (or when nothing can move it any more).
async fn until_still(mut changes: watch::Receiver<u64>, quiet: std::time::Duration, at_most: std::time::Duration) {
    let latest = tokio::time::Instant::now() + at_most;
    while let Ok(Ok(())) = tokio::time::timeout(quiet, changes.changed()).await {
        if tokio::time::Instant::now() >= latest {
            return;
        }
    }
}

/// Runs `then` on a blocking thread once `quiet` has passed with no other
/// call counted by `calls`: a burst of calls runs it once, at its end.
fn after_quiet(calls: &'static AtomicU64, quiet: std::time::Duration, then: fn()) {
    let mine = calls.fetch_add(1, Ordering::Relaxed) + 1;
    tokio::spawn(async move {
        tokio::time::sleep(quiet).await;
        if calls.load(Ordering::Relaxed) == mine {
            tokio::task::spawn_blocking(then);
        }
    });
}

/// `p` as the running request's scope lets it be proposed
/// ([`crate::access::limit_proposal`]), whatever path made it: a command
/// an edit token's B2 runs through a reader's write-back (`Send`) types as
/// a write, never as typing win would run.
fn limited(s: &Session, p: Proposal) -> Result<Proposal, Error> {
    Ok(crate::access::limit_proposal(p, |b| crate::access::events_read(&s.view().state, b))?)
}

/// The error for a session deleted under a request.
pub fn gone() -> Error {
    Error::SessionGone
}

impl Daemon {
    pub fn new(registry: Registry) -> Daemon {
        Daemon {
            registry: Arc::new(Mutex::new(registry)),
            changes: Arc::new(watch::Sender::new(0)),
            session_changes: Arc::default(),
            epoch: std::time::Instant::now(),
            services: Arc::default(),
            jobs: Arc::default(),
            put_warned: Arc::default(),
            making_errors_window: Arc::default(),
        }
    }

    /// After a long command, which may have freed much (a whole-file
    /// Edit's changes, its Undo): the heap is looked at, and what it holds
    /// free given back ([`apex_sys::malloc::give_back_after_work`]), once
    /// no session has changed for [`QUIET`] (at the first change after
    /// [`STILL_AT_MOST`], if they do not stop). The give-back holds
    /// malloc's lock while it walks the heap (13 ms after a 100 MB
    /// `Edit ,y`), which every other thread's malloc waits on: not beside
    /// the command's reply, nor while sessions are changing. One waits at
    /// a time: commands in a row are looked after once.
    pub fn give_back_when_still(&self) {
        static WAITING: AtomicBool = AtomicBool::new(false);
        /// Lets the next one wait, however the waiting ends (a runtime
        /// shut down under it too).
        struct Waiting;
        impl Drop for Waiting {
            fn drop(&mut self) {
                WAITING.store(false, Ordering::Release);
            }
        }
        if WAITING.swap(true, Ordering::AcqRel) {
            return;
        }
        let changes = self.subscribe();
        tokio::spawn(async move {
            let waiting = Waiting;
            until_still(changes, QUIET, STILL_AT_MOST).await;
            drop(waiting);
            tokio::task::spawn_blocking(apex_sys::malloc::give_back_after_work);
        });
    }

    /// A receiver that wakes at the next change anywhere (subscribe before
    /// looking, so a change in between still wakes).
    pub fn subscribe(&self) -> watch::Receiver<u64> {
        self.changes.subscribe()
    }

    /// A receiver that wakes at the next change in session `n`, or to the
    /// registry (a session ended is one): for a reader waiting on what
    /// session `n` holds. (Subscribe before looking, as above.)
    pub fn subscribe_to(&self, n: u64) -> watch::Receiver<u64> {
        let mut channels = self.session_changes.lock().expect("changes lock");
        channels.entry(n).or_insert_with(|| Arc::new(watch::Sender::new(0))).subscribe()
    }

    /// The count of changes so far.
    pub fn generation(&self) -> u64 {
        *self.changes.borrow()
    }

    /// Milliseconds on the daemon's clock.
    pub fn now_ms(&self) -> u64 {
        self.epoch.elapsed().as_millis() as u64
    }

    /// Writes the snapshots restored sessions are due (a log grown past
    /// the size over restarts that never got to snapshot it).
    pub fn snapshot_restored(&self) {
        for shared in self.all() {
            let job = snapshot_due(&mut shared.lock().expect("session lock"), Pace::Quiet);
            write_snapshot(job);
        }
    }

    /// The one way to change session `number`: runs `f` on it under its
    /// lock with the daemon's clock, then keeps what follows every change
    /// (acme's tree synced, the log flushed, a due snapshot written), wakes
    /// the readers waiting on it and arms a timer for every deadline `f`
    /// set. What appends to the log is the orchestration's (`route`,
    /// `attach`, `registry`): the file layer proposes. A change the log's
    /// file did not take is undone, and the error says why.
    pub fn change<R>(&self, number: u64, f: impl FnOnce(&mut Session, u64) -> R) -> Result<R, Error> {
        let now = self.now_ms();
        let shared = self.session(number)?;
        let (r, timer, snapshot, put_off) = {
            let mut s = shared.lock().expect("session lock");
            let s = &mut *s;
            s.begin_change(now);
            let r = f(s, now);
            // A change the log did not take was undone: its writer hears why.
            let r = s.settle_change().map(|()| r).map_err(Error::Log);
            let snapshot = snapshot_due(s, Pace::Busy);
            let put_off = s.persisted().and_then(|p| Some((p.put_off.clone(), p.snapshot_put_off()?)));
            (r, s.hub_mut().arm_timer(), snapshot, put_off)
        };
        self.changed_in(number);
        write_snapshot(snapshot);
        if let Some((put_off, since)) = put_off {
            self.snapshot_at_pause(number, put_off, since);
        }
        if let Some(armed) = timer {
            tokio::spawn(self.clone().run_timer(number, armed));
        }
        r
    }

    /// Writes session `number`'s snapshot, due but put off while its log
    /// grew (to `since` bytes since the last), once it has grown no more
    /// for [`SNAPSHOT_PAUSE`]: one timer a burst, pushed on by each change
    /// that adds to the log. A snapshot still being written when the pause
    /// comes is waited for, and this one written after it.
    fn snapshot_at_pause(&self, number: u64, put_off: Arc<PutOff>, since: u64) {
        if put_off.seen.swap(since, Ordering::Relaxed) != since {
            put_off.grew_ms.store(self.now_ms(), Ordering::Relaxed);
        }
        if put_off.waiting.swap(true, Ordering::AcqRel) {
            return;
        }
        let daemon = self.clone();
        tokio::spawn(async move {
            let pause = SNAPSHOT_PAUSE.as_millis() as u64;
            loop {
                loop {
                    let quiet = daemon.now_ms().saturating_sub(put_off.grew_ms.load(Ordering::Relaxed));
                    if quiet >= pause {
                        break;
                    }
                    tokio::time::sleep(std::time::Duration::from_millis(pause - quiet)).await;
                }
                // A change from here on starts a timer of its own.
                put_off.waiting.store(false, Ordering::Release);
                // (A session deleted meanwhile has nothing to write.)
                let Ok(shared) = daemon.session(number) else { return };
                let (job, after_the_one_written) = {
                    let mut s = shared.lock().expect("session lock");
                    let job = snapshot_due(&mut s, Pace::Quiet);
                    let waits = |p: &crate::persist::Persisted| p.snapshot_put_off().is_some() && p.writing_snapshot();
                    let after = !matches!(job, Some(Due::Snapshot(_))) && s.persisted().is_some_and(waits);
                    (job, after)
                };
                write_snapshot(job);
                // Waited for again, unless a change's timer waits already.
                if !after_the_one_written || put_off.waiting.swap(true, Ordering::AcqRel) {
                    return;
                }
                put_off.grew_ms.store(daemon.now_ms(), Ordering::Relaxed);
            }
        });
    }

    /// Keeps what one reader holds for itself in session `number` (where
    /// its stream is, the shards it holds from compaction, an open addr, a
    /// window's ctl lock), waking nobody: a read that woke the others would
    /// wake itself again through them, without end. Nothing it changes is
    /// the session's state or anything another client reads.
    /// It never panics on a lock a panic left poisoned (it runs in drop
    /// guards, perhaps while one unwinds): the session is taken as it is.
    pub fn tend<R>(&self, number: u64, f: impl FnOnce(&mut Session) -> R) -> Result<R, Error> {
        let shared = self.session(number)?;
        let mut s = shared.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        s.begin_change(self.now_ms());
        let r = f(&mut s);
        s.settle_quietly();
        Ok(r)
    }

    /// The one way to look at session `number`: runs `f` on it under its
    /// lock, changing nothing.
    pub fn read<R>(&self, number: u64, f: impl FnOnce(&Session) -> R) -> Result<R, Error> {
        let shared = self.session(number)?;
        let s = shared.lock().expect("session lock");
        Ok(f(&s))
    }

    /// Session `number`'s timer task: ticks the hub at the time it is
    /// armed for, then sleeps until the next; ends with the session.
    async fn run_timer(self, number: u64, mut armed: tokio::sync::watch::Receiver<u64>) {
        loop {
            let at = *armed.borrow_and_update();
            let due = async {
                match at {
                    u64::MAX => std::future::pending().await,
                    at => tokio::time::sleep(std::time::Duration::from_millis(at.saturating_sub(self.now_ms()))).await,
                }
            };
            // The session gone ends it: its hub refuses the tick, or its
            // timer's sender is dropped with it.
            let going_on = tokio::select! {
                // (A tick the log's file did not take was undone: the timer
                // goes on, armed again for what it did not do.)
                () = due => !matches!(self.change(number, |s, now| {
                    s.hub_mut().timer.fired();
                    protocol::tick(s, now)
                }), Err(Error::SessionGone)),
                rearmed = armed.changed() => rearmed.is_ok(),
            };
            if !going_on {
                return;
            }
        }
    }

    /// Proposes `p` in session `n`: applied by the view node when the
    /// server leads the shard it touches, otherwise sent to the holder;
    /// returns once it is sequenced or refused.
    pub async fn propose(&self, n: u64, request: &str, p: Proposal) -> Result<Applied, Error> {
        let submitted =
            self.change(n, |s, now| Ok::<_, Error>(route::submit(s, request, limited(s, p)?, None, now)))??;
        match submitted {
            Written::Wait(id, rx) => self.outcome(n, id, rx).await,
            Written::Done => unreachable!("submit always answers through its channel"),
        }
    }

    /// Builds a proposal from session `n` and submits it under the one
    /// lock, so nothing comes between what it was made from and its
    /// place in the queue; waits for its outcome after. `None` when
    /// `build` finds nothing to do.
    pub async fn propose_from(
        &self,
        n: u64,
        request: &str,
        build: impl FnOnce(&Session) -> Result<Option<Proposal>, Error>,
    ) -> Result<Option<Applied>, Error> {
        let submitted = self.change(n, |s, now| match build(s)? {
            Some(p) => Ok(Some(route::submit(s, request, limited(s, p)?, None, now))),
            None => Ok::<_, Error>(None),
        })??;
        match submitted {
            Some(Written::Wait(id, rx)) => self.outcome(n, id, rx).await.map(Some),
            Some(Written::Done) => unreachable!("submit always answers through its channel"),
            None => Ok(None),
        }
    }

    /// Waits for proposal `id`'s outcome. If the request waiting is
    /// flushed meanwhile, the proposal is withdrawn where it can still be
    /// (flush(5): the write then fails, having changed nothing), and its
    /// outcome is awaited where it cannot; the wait is bounded either way
    /// by the lease deadline, past which a holder that has not answered
    /// loses the lease.
    pub async fn outcome(
        &self,
        n: u64,
        id: u64,
        mut rx: tokio::sync::oneshot::Receiver<Outcome>,
    ) -> Result<Applied, Error> {
        let said = |got: Result<Outcome, _>| match got {
            Ok(outcome) => outcome.map_err(Error::Refused),
            Err(_) => Err(Error::ProposalLost),
        };
        tokio::select! {
            got = &mut rx => return said(got),
            () = srv::flushed() => {}
        }
        self.change(n, |s, now| route::withdraw(s, id, now))?;
        said(rx.await)
    }

    /// Makes room in session `n`'s log for a write of `bytes` before it is
    /// handled: a full disk refuses it, changing nothing. Returns the
    /// log's sync state, to settle the write's acknowledgement with.
    pub fn reserve(&self, n: u64, bytes: u64) -> Result<Option<Arc<Durable>>, Error> {
        let shared = self.session(n)?;
        let s = shared.lock().expect("session lock");
        let Some(p) = &s.persisted() else { return Ok(None) };
        p.reserve(bytes).map_err(Error::Log)?;
        Ok(Some(p.durable()))
    }

    /// Before an acknowledgement: refuses if the log failed to take what
    /// was written, and waits (by the sync policy) until it is on disk.
    pub async fn settle(&self, durable: Option<Arc<Durable>>) -> Result<(), Error> {
        let Some(d) = durable else { return Ok(()) };
        if let Some(why) = d.failed() {
            return Err(crate::persist::durable::LogError::Failed(why).into());
        }
        d.settled(d.written()).await.map_err(Error::Log)
    }

    /// Session `n`'s log's sync state, if it is kept.
    pub fn durable(&self, n: u64) -> Option<Arc<Durable>> {
        let shared = self.session(n).ok()?;
        let s = shared.lock().expect("session lock");
        s.persisted().as_ref().map(|p| p.durable())
    }

    /// Every session's attach tables' sizes ([`crate::attach::hub::Hub::sizes`]): what
    /// a test checks does not grow with the fids and proposals that came
    /// and went.
    pub fn table_sizes(&self) -> Vec<[usize; 6]> {
        self.all().iter().map(|s| s.lock().expect("session lock").hub().sizes()).collect()
    }

    /// Every session's log's bytes ([`Session::log_bytes`]), for tests.
    pub fn log_bytes(&self) -> Vec<u64> {
        self.all().iter().map(|s| s.lock().expect("session lock").log_bytes()).collect()
    }

    /// The registry, locked: for the set of sessions and their names.
    /// Never lock it while holding a session's lock.
    pub fn reg(&self) -> MutexGuard<'_, Registry> {
        self.registry.lock().expect("registry lock")
    }

    /// Session `number`, to lock on its own (the registry is let go first).
    pub fn session(&self, number: u64) -> Result<Shared, Error> {
        self.reg().get(number).ok_or(Error::SessionGone)
    }

    /// Every session, to lock one by one.
    pub fn all(&self) -> Vec<Shared> {
        self.reg().sessions().cloned().collect()
    }

    /// The registry changed (a session made, renamed or ended): wakes
    /// every blocked stream read, in every session, to look again.
    pub fn changed(&self) {
        let channels: Vec<_> = {
            let mut channels = self.session_changes.lock().expect("changes lock");
            // A channel nobody waits on is made again when one does.
            channels.retain(|_, c| c.receiver_count() > 0);
            channels.values().cloned().collect()
        };
        for c in channels {
            c.send_modify(|g| *g = g.wrapping_add(1));
        }
        self.changes.send_modify(|g| *g = g.wrapping_add(1));
    }

    /// Session `n` changed: wakes its blocked stream reads, and the
    /// registry's, to look again; no other session's.
    pub fn changed_in(&self, n: u64) {
        let channel = self.session_changes.lock().expect("changes lock").get(&n).cloned();
        if let Some(c) = channel {
            c.send_modify(|g| *g = g.wrapping_add(1));
        }
        self.changes.send_modify(|g| *g = g.wrapping_add(1));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A change in a session wakes the readers waiting in it and the
    /// registry's, and no other session's; a change to the registry (a
    /// session made or ended) wakes them all; a session's channel that
    /// nobody waits on is let go.
    #[test]
    fn a_change_in_one_session_wakes_its_readers_and_no_other_sessions() {
        let d = Daemon::new(Registry::new(Box::new(|| [7; 16])));
        let (mut one, two, mut all) = (d.subscribe_to(1), d.subscribe_to(2), d.subscribe());
        d.changed_in(1);
        assert!(one.has_changed().unwrap() && all.has_changed().unwrap());
        assert!(!two.has_changed().unwrap(), "another session's reader sleeps on");
        one.mark_unchanged();
        all.mark_unchanged();
        d.changed();
        for (what, rx) in [("one", &one), ("two", &two), ("all", &all)] {
            assert!(rx.has_changed().unwrap(), "the registry's change wakes {what}");
        }
        let generation = d.generation();
        d.changed_in(2);
        assert_eq!(d.generation(), generation + 1, "a session's change moves the generation content counts");
        drop((one, two, all));
        d.changed();
        assert!(d.session_changes.lock().unwrap().is_empty(), "no channel kept for nobody");
    }

    /// A burst of calls runs the work once, when it has been quiet; calls
    /// apart run it each.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn work_after_quiet_runs_once_a_burst_at_its_end() {
        static CALLS: AtomicU64 = AtomicU64::new(0);
        static RAN: AtomicU64 = AtomicU64::new(0);
        fn count() {
            RAN.fetch_add(1, Ordering::SeqCst);
        }
        let quiet = std::time::Duration::from_millis(100);
        let ran = || RAN.load(Ordering::SeqCst);
        for _ in 0..5 {
            after_quiet(&CALLS, quiet, count);
        }
        assert_eq!(ran(), 0, "not before it is quiet");
        tokio::time::sleep(quiet * 5).await;
        assert_eq!(ran(), 1, "a burst runs it once");
        after_quiet(&CALLS, quiet, count);
        tokio::time::sleep(quiet * 5).await;
        after_quiet(&CALLS, quiet, count);
        tokio::time::sleep(quiet * 5).await;
        assert_eq!(ran(), 3, "calls apart run it each");
    }

    /// The wait before a give-back after a long command: over while
    /// sessions change, over once they have not for a while, and over at
    /// the latest a while on even if they never stop.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_wait_for_stillness_lasts_while_changes_come_and_no_longer_than_its_bound() {
        let d = Daemon::new(Registry::new(Box::new(|| [7; 16])));
        let quiet = std::time::Duration::from_millis(500);
        let waiting = |at_most| {
            let done = Arc::new(AtomicBool::new(false));
            let over = done.clone();
            let changes = d.subscribe();
            tokio::spawn(async move {
                until_still(changes, quiet, at_most).await;
                over.store(true, Ordering::SeqCst);
            });
            done
        };
        let still = waiting(std::time::Duration::from_secs(600));
        for _ in 0..10 {
            d.changed();
            tokio::time::sleep(quiet / 25).await;
            assert!(!still.load(Ordering::SeqCst), "not over while changes come");
        }
        let waited = std::time::Instant::now();
        while !still.load(Ordering::SeqCst) && waited.elapsed() < std::time::Duration::from_secs(10) {
            tokio::time::sleep(quiet / 25).await;
        }
        assert!(still.load(Ordering::SeqCst), "over once they stopped");
        let bounded = waiting(quiet / 2);
        let changing = std::time::Instant::now();
        while !bounded.load(Ordering::SeqCst) && changing.elapsed() < std::time::Duration::from_secs(10) {
            d.changed();
            tokio::time::sleep(quiet / 25).await;
        }
        assert!(bounded.load(Ordering::SeqCst), "over at its bound though changes go on");
    }
}
