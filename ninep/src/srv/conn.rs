//! One connection's state: its fid table, the requests in flight and
//! their replies, a reset (Tversion, hang-up), and the dispatch of each
//! request to the `Serve` implementation.

use super::flush::{InFlight, RaiseOnDrop, Signal, FLUSHED};
use super::{Config, Result, Serve};
use crate::fcall::{Fcall, Msg, NOTAG, OEXEC, OREAD, OWRITE};
use crate::version::{iounit, negotiate, Negotiated, VERSION};
use std::collections::HashMap;
use std::future::Future;
use std::os::fd::{OwnedFd, RawFd};
use std::sync::{Arc, Mutex};
use tokio::sync::mpsc;

/// The most fids one connection may hold (each holds what its file
/// made, a snapshot's copy say): past it a new one is refused.
pub const MAX_FIDS: usize = 1 << 16;

/// A fid's state and, once opened, the mode it was opened with.
pub(super) type Slot<F> = (F, Option<u8>);

/// A connection's table of the fids or tags its client picks: seeded per
/// process, as SipHash is, at a fraction of its cost per lookup.
pub(super) type Table<K, V> = HashMap<K, V, foldhash::fast::RandomState>;

/// An open under way: however it ends (an error, its task aborted, a
/// panic in `Serve::open`), the fid is no longer marked when this goes.
/// After the open was settled (`end_open`, `take_opening`) the mark is
/// no longer this open's, and dropping it does nothing: numbers are
/// never used twice.
pub(super) struct Opening<'a, S: Serve> {
    pub(super) conn: &'a Conn<S>,
    pub(super) fid: u32,
    pub(super) number: u64,
}

impl<S: Serve> Drop for Opening<'_, S> {
    fn drop(&mut self) {
        let _ = self.conn.end_open(self.fid, self.number, None);
    }
}

pub(super) struct Conn<S: Serve> {
    pub(super) serve: Arc<S>,
    pub(super) fids: Mutex<Table<u32, Slot<S::Fid>>>,
    /// Fids an open, create or openfd is under way on, each with that
    /// open's number: one that ends finds out whether its fid is still
    /// the one it opened (not clunked, perhaps walked to anew, meanwhile).
    /// Locked after `fids`, never before.
    pub(super) opening: Mutex<Table<u32, u64>>,
    pub(super) next_open: std::sync::atomic::AtomicU64,
    /// Requests in flight: their task, whether a Tflush may cancel it,
    /// and how one that is let finish hears it was flushed.
    pub(super) tasks: Mutex<Table<u16, InFlight>>,
    /// Resets so far (Tversions, and the hang-up): a reply made for a
    /// request of an earlier one is dropped, its tag being free again.
    pub(super) generation: std::sync::atomic::AtomicU64,
    pub(super) out: mpsc::UnboundedSender<Msg>,
    /// Replies sent through `out` and not yet taken out: while there are
    /// none, the io loop need not look in the channel before a reply it
    /// makes itself.
    pub(super) queued: std::sync::atomic::AtomicUsize,
    pub(super) msize: std::sync::atomic::AtomicU32,
    /// The Unix socket, when the connection is one: `Topenfd` passes
    /// descriptors over it.
    pub(super) socket: Option<RawFd>,
    /// Descriptors to pass right after the `Ropenfd` of their tag.
    pub(super) passing: Mutex<Table<u16, OwnedFd>>,
    /// How clients prove themselves, where they must (`auth.rs`).
    pub(super) auth: Option<Arc<dyn super::auth::Authenticate>>,
    pub(super) afids: Mutex<Table<u32, super::auth::AuthFid>>,
    /// An attach was accepted: the connection may do more than prove
    /// itself.
    pub(super) attached: std::sync::atomic::AtomicBool,
}

impl<S: Serve> Conn<S> {
    pub(super) fn reply(&self, tag: u16, body: Fcall) {
        // The writer is gone only when the connection is: nothing to do.
        // Counted before it is sent, both under the task lock when a task
        // replies: whoever takes that lock next sees it counted.
        self.queued.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        let _ = self.out.send(Msg { tag, body });
    }

    /// Queues `body` unless the connection was reset since `generation`
    /// (checked under the task lock, which the reset takes to move on).
    pub(super) fn reply_since(&self, generation: u64, tag: u16, body: Fcall) {
        let _tasks = self.tasks.lock().expect("task lock");
        if self.generation.load(std::sync::atomic::Ordering::Relaxed) == generation {
            self.reply(tag, body);
        }
    }

    pub(super) fn fid(&self, fid: u32) -> Result<S::Fid> {
        self.slot(fid).map(|(f, _)| f)
    }

    pub(super) fn slot(&self, fid: u32) -> Result<Slot<S::Fid>> {
        self.fids.lock().expect("fid lock").get(&fid).cloned().ok_or_else(|| format!("unknown fid {fid}"))
    }

    /// A fid not yet opened (walk and open need one).
    pub(super) fn unopened(&self, fid: u32, what: &str) -> Result<S::Fid> {
        let slot = self.slot(fid)?;
        if self.opening.lock().expect("opening lock").contains_key(&fid) {
            return Err(format!("{what} of fid {fid}, which is being opened"));
        }
        match slot {
            (f, None) => Ok(f),
            (_, Some(_)) => Err(format!("{what} of open fid {fid}")),
        }
    }

    /// An unopened fid, marked as being opened by the open numbered as
    /// returned (no other open or walk may use it meanwhile).
    pub(super) fn begin_open(&self, fid: u32, what: &str) -> Result<(S::Fid, u64)> {
        let fids = self.fids.lock().expect("fid lock");
        let mut opening = self.opening.lock().expect("opening lock");
        match fids.get(&fid) {
            _ if opening.contains_key(&fid) => Err(format!("{what} of fid {fid}, which is being opened")),
            Some((f, None)) => {
                let number = self.next_open.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                opening.insert(fid, number);
                Ok((f.clone(), number))
            }
            Some((_, Some(_))) => Err(format!("{what} of open fid {fid}")),
            None => Err(format!("unknown fid {fid}")),
        }
    }

    /// Open `number` of `fid` ended with `opened` (`None`: it failed, or
    /// was given up). Returns what it made when the fid is no longer the
    /// one it opened (clunked meanwhile, perhaps walked to anew): the
    /// caller lets go of it.
    pub(super) fn end_open(&self, fid: u32, number: u64, opened: Option<(S::Fid, u8)>) -> Option<S::Fid> {
        let mut fids = self.fids.lock().expect("fid lock");
        let mut opening = self.opening.lock().expect("opening lock");
        if opening.get(&fid) != Some(&number) {
            return opened.map(|(state, _)| state);
        }
        opening.remove(&fid);
        if let Some((state, mode)) = opened {
            fids.insert(fid, (state, Some(mode)));
        }
        None
    }

    /// Takes `fid` out of the table if open `number` of it is still under
    /// way (an openfd's fid moves over to its pump); false if it was
    /// clunked meanwhile.
    pub(super) fn take_opening(&self, fid: u32, number: u64) -> bool {
        let mut fids = self.fids.lock().expect("fid lock");
        let mut opening = self.opening.lock().expect("opening lock");
        if opening.get(&fid) != Some(&number) {
            return false;
        }
        opening.remove(&fid);
        fids.remove(&fid);
        true
    }

    /// An opened fid whose mode allows reading (`write` false) or writing.
    pub(super) fn opened(&self, fid: u32, write: bool) -> Result<S::Fid> {
        let (f, mode) = self.slot(fid)?;
        let Some(mode) = mode else { return Err(format!("fid {fid} is not open: open it first")) };
        let (reads, writes) = match mode & 3 {
            OREAD | OEXEC => (true, false),
            OWRITE => (false, true),
            _ => (true, true),
        };
        match (write, reads, writes) {
            (false, false, _) => Err(format!("fid {fid} is open for writing only")),
            (true, _, false) => Err(format!("fid {fid} is open for reading only")),
            _ => Ok(f),
        }
    }

    /// Whether `fid` may be made: unused, and the connection under
    /// [`MAX_FIDS`].
    pub(super) fn fid_free(&self, fid: u32) -> Result<()> {
        let fids = self.fids.lock().expect("fid lock");
        if fids.contains_key(&fid) || self.is_afid(fid) {
            return Err(format!("fid {fid} in use"));
        }
        if fids.len() >= MAX_FIDS {
            return Err(format!("{MAX_FIDS} fids are in use on this connection, the most there may be: clunk some"));
        }
        Ok(())
    }

    pub(super) fn set_fid(&self, fid: u32, state: S::Fid, mode: Option<u8>) {
        self.fids.lock().expect("fid lock").insert(fid, (state, mode));
    }

    pub(super) fn take_fid(&self, fid: u32) -> Result<S::Fid> {
        let mut fids = self.fids.lock().expect("fid lock");
        // An open under way on it finds, when it ends, that it is gone.
        self.opening.lock().expect("opening lock").remove(&fid);
        fids.remove(&fid).map(|(f, _)| f).ok_or_else(|| format!("unknown fid {fid}"))
    }

    /// Aborts every request and clunks every fid (or, when the
    /// connection went, tells the server each fid was left behind). The
    /// aborted tasks are waited for, so whatever reply one queued before it
    /// stopped is in the channel when this returns (and goes out before
    /// the Rversion); none comes after.
    pub(super) async fn reset(&self, hangup: bool) {
        let tasks: Vec<_> = {
            let mut tasks = self.tasks.lock().expect("task lock");
            self.generation.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            tasks.drain().collect()
        };
        for (_, f) in &tasks {
            f.task.abort();
        }
        for (_, f) in tasks {
            let _ = f.task.await;
        }
        self.afids.lock().expect("afid lock").clear();
        self.attached.store(false, std::sync::atomic::Ordering::Release);
        let fids: Vec<S::Fid> = {
            let mut fids = self.fids.lock().expect("fid lock");
            self.opening.lock().expect("opening lock").clear();
            fids.drain().map(|(_, (f, _))| f).collect()
        };
        for f in fids {
            match hangup {
                true => self.serve.hangup(f).await,
                false => self.serve.clunk(f).await,
            }
        }
    }

    /// Settles an open's or create's outcome with the fid table: its qid
    /// if it stands; its error if it failed (the fid is unopened again);
    /// an error if the fid was clunked meanwhile, when what the open made
    /// is clunked in turn, not left.
    async fn ended_open(
        &self,
        guard: Opening<'_, S>,
        mode: u8,
        outcome: std::result::Result<(crate::fcall::Qid, S::Fid), S::Error>,
    ) -> Result<crate::fcall::Qid> {
        let fid = guard.fid;
        // Failed, the guard unmarks the fid as it goes.
        let (qid, state) = outcome.map_err(ename)?;
        match self.end_open(fid, guard.number, Some((state, mode))) {
            None => Ok(qid),
            Some(orphan) => {
                self.serve.clunk(orphan).await;
                Err(format!("fid {fid} was clunked while it was being opened"))
            }
        }
    }

    /// Runs one request (not Tversion or Tflush) to its outcome. (Its
    /// future is boxed per request: one level, holding the request once.)
    pub(super) async fn handle(self: Arc<Self>, tag: u16, body: Fcall) -> Result<Fcall> {
        let io = iounit(self.msize.load(std::sync::atomic::Ordering::Relaxed));
        let s = &self.serve;
        self.may_before_attach(&body)?;
        if let Some(outcome) = self.auth_io(&body) {
            return outcome;
        }
        Ok(match body {
            Fcall::Tauth { afid, uname, aname } => self.auth(afid, &uname, &aname)?,
            Fcall::Tattach { fid, afid, uname, aname } => {
                self.fid_free(fid)?;
                let (qid, state) = match self.grant(afid, &uname, &aname)? {
                    Some(grant) => s.attach_granted(&uname, &aname, &grant).await,
                    None => s.attach(&uname, &aname).await,
                }
                .map_err(ename)?;
                self.set_fid(fid, state, None);
                self.attached.store(true, std::sync::atomic::Ordering::Release);
                Fcall::Rattach { qid }
            }
            Fcall::Twalk { fid, newfid, wnames } => {
                let from = self.unopened(fid, "walk")?;
                if newfid != fid {
                    self.fid_free(newfid)?;
                }
                let (wqids, state) = s.walk(&from, &wnames).await.map_err(ename)?;
                if wqids.len() == wnames.len() {
                    let state = state.ok_or("walk finished without a fid")?;
                    self.set_fid(newfid, state, None);
                }
                Fcall::Rwalk { wqids }
            }
            Fcall::Topen { fid, mode } => {
                let (from, number) = self.begin_open(fid, "open")?;
                let guard = Opening { conn: &self, fid, number };
                let qid = self.ended_open(guard, mode, s.open(&from, mode).await).await?;
                Fcall::Ropen { qid, iounit: io }
            }
            Fcall::Tcreate { fid, name, perm, mode } => {
                let (from, number) = self.begin_open(fid, "create")?;
                let guard = Opening { conn: &self, fid, number };
                let qid = self.ended_open(guard, mode, s.create(&from, &name, perm, mode).await).await?;
                Fcall::Rcreate { qid, iounit: io }
            }
            Fcall::Tread { fid, offset, count } => {
                let mut data = s.read(&self.opened(fid, false)?, offset, count.min(io)).await.map_err(ename)?;
                data.truncate(count.min(io) as usize);
                Fcall::Rread { data }
            }
            Fcall::Twrite { fid, offset, data } => {
                Fcall::Rwrite { count: s.write(&self.opened(fid, true)?, offset, data).await.map_err(ename)? }
            }
            Fcall::Tclunk { fid } => {
                s.clunk(self.take_fid(fid)?).await;
                Fcall::Rclunk
            }
            Fcall::Tremove { fid } => {
                s.remove(self.take_fid(fid)?).await.map_err(ename)?;
                Fcall::Rremove
            }
            Fcall::Tstat { fid } => Fcall::Rstat { stat: Box::new(s.stat(&self.fid(fid)?).await.map_err(ename)?) },
            Fcall::Twstat { fid, stat } => {
                s.wstat(&self.fid(fid)?, *stat).await.map_err(ename)?;
                Fcall::Rwstat
            }
            Fcall::Topenfd { fid, mode } => self.openfd(tag, fid, mode).await?,
            other => return Err(format!("unexpected 9P message type {}: send T-messages", other.ty())),
        })
    }
}

/// A `Serve` error's words, the Rerror's text.
pub(super) fn ename(e: impl std::fmt::Display) -> String {
    e.to_string()
}

/// Polls a request, a panic caught and made its outcome (an Rerror), so
/// the request is answered and its tag freed as any other. (It is not
/// polled again after.)
pub(super) fn caught<F: Future<Output = Result<Fcall>> + ?Sized>(
    request: std::pin::Pin<&mut F>,
    cx: &mut std::task::Context<'_>,
) -> std::task::Poll<Result<Fcall>> {
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| request.poll(cx))).unwrap_or_else(|panic| {
        let what = match (panic.downcast_ref::<&str>(), panic.downcast_ref::<String>()) {
            (Some(s), _) => s.to_string(),
            (_, Some(s)) => s.clone(),
            _ => "a panic".to_string(),
        };
        tracing::error!(panic = %what, "a request panicked");
        std::task::Poll::Ready(Err(format!(
            "the server failed on this request ({what}): a bug, worth reporting; other requests go on"
        )))
    })
}

/// A request's reply from its outcome: an error becomes an Rerror, and a
/// refused change is worth a line; a refused walk or read is routine
/// (shells probe for files), so it is only traced.
pub(super) fn reply_of(ty: u8, changes: bool, outcome: Result<Fcall>) -> Fcall {
    match outcome {
        Ok(r) => r,
        Err(ename) => {
            if changes {
                tracing::info!(ty, error = %ename, "request refused");
            } else {
                tracing::debug!(ty, error = %ename, "request refused");
            }
            Fcall::Rerror { ename }
        }
    }
}

/// The replies the io loop writes on its next pass.
pub(super) struct Ready<'a> {
    pub(super) list: &'a mut Vec<Msg>,
    /// Where the tasks of requests that had to wait send their replies.
    pub(super) rx: &'a mut mpsc::UnboundedReceiver<Msg>,
    /// The connection's count of replies in `rx`.
    pub(super) queued: &'a std::sync::atomic::AtomicUsize,
}

impl Ready<'_> {
    /// Queues a reply made here, after every reply a task queued before
    /// now: a task queues its reply and gives up its tag under the task
    /// lock, so a Tflush that found the tag free answers after that reply,
    /// as flush(5) wants, and a Tversion after what the aborted requests
    /// said.
    pub(super) fn push(&mut self, tag: u16, body: Fcall) {
        self.take_queued();
        self.list.push(Msg { tag, body });
    }

    /// Moves the replies the tasks queued onto the list (none to look for
    /// while the count says so: most requests are answered here).
    pub(super) fn take_queued(&mut self) {
        use std::sync::atomic::Ordering::SeqCst;
        while self.queued.load(SeqCst) > 0 {
            match self.rx.try_recv() {
                Ok(msg) => {
                    self.queued.fetch_sub(1, SeqCst);
                    self.list.push(msg);
                }
                // Counted, not yet in the channel: the sender is between
                // the two, and the loop's next pass takes it.
                Err(_) => break,
            }
        }
    }
}

/// The most the reads waiting on one connection may ask for in all (each
/// counted as what its reply may hold, at most the iounit).
pub(super) const WAITING_READS_MAX: usize = 64 << 20;

fn too_many_waiting(waiting: usize) -> String {
    format!(
        "{waiting} bytes of reads wait on this connection already, and reads that wait ask for at most \
         {WAITING_READS_MAX} in all: flush some, or read with a smaller count"
    )
}

/// Answers `msg`: a reply ready at once goes onto `ready` (written by the
/// io loop with the others, with no wake-up through the channel); one that
/// has to wait comes through the channel from its task. (A Tversion's
/// reset is done before: this never waits.)
pub(super) fn dispatch<S: Serve>(conn: &Arc<Conn<S>>, msg: Msg, config: &Config, ready: &mut Ready<'_>) {
    let tag = msg.tag;
    let mut reply = |body: Fcall| ready.push(tag, body);
    match msg.body {
        Fcall::Tversion { msize, version } => {
            let body = match negotiate(msize, &version, config.msize) {
                Ok(Negotiated::Speak { msize }) => {
                    conn.msize.store(msize, std::sync::atomic::Ordering::Relaxed);
                    // Room for a whole reply of the size agreed on.
                    if let Some(fd) = conn.socket {
                        crate::io::room_for(fd, msize);
                    }
                    Fcall::Rversion { msize, version: VERSION.into() }
                }
                Ok(Negotiated::Unknown) => {
                    Fcall::Rversion { msize: msize.min(config.msize), version: "unknown".into() }
                }
                Err(e) => Fcall::Rerror { ename: e.to_string() },
            };
            reply(body);
        }
        _ if conn.msize.load(std::sync::atomic::Ordering::Relaxed) == 0 => {
            reply(Fcall::Rerror { ename: "send Tversion first".into() })
        }
        Fcall::Tauth { .. } if conn.auth.is_none() => reply(Fcall::Rerror { ename: config.no_auth.clone() }),
        Fcall::Tflush { oldtag } => {
            let mut tasks = conn.tasks.lock().expect("task lock");
            let Some(f) = tasks.get(&oldtag) else {
                drop(tasks);
                reply(Fcall::Rflush);
                return;
            };
            // Answered later, unless a Tversion comes first.
            let generation = conn.generation.load(std::sync::atomic::Ordering::Relaxed);
            if f.cancelable {
                // A read never happened, as far as the client can tell.
                let f = tasks.remove(&oldtag).expect("found");
                drop(tasks);
                f.task.abort();
                // It may have been replying: that reply goes first.
                let conn = conn.clone();
                tokio::spawn(async move {
                    let _ = f.task.await;
                    conn.reply_since(generation, tag, Fcall::Rflush);
                });
                return;
            }
            // A request that is let finish (a write waiting to be
            // sequenced) keeps its tag until its reply is sent, so a second
            // Tflush of it waits too; the Rflush follows that reply, waited
            // for apart: the connection's other requests are answered
            // meanwhile.
            if let Some(flushed) = &f.flushed {
                flushed.raise();
            }
            let done = f.done.clone();
            drop(tasks);
            let conn = conn.clone();
            tokio::spawn(async move {
                done.wait().await;
                conn.reply_since(generation, tag, Fcall::Rflush);
            });
        }
        body if body.is_request() && tag != NOTAG => {
            if conn.tasks.lock().expect("task lock").contains_key(&tag) {
                reply(Fcall::Rerror { ename: format!("tag {tag} in use") });
                return;
            }
            let cancelable = matches!(body, Fcall::Tread { .. }) && !conn.serve.finishes_flushed_reads();
            let read_bytes = match &body {
                Fcall::Tread { count, .. } => {
                    let io = iounit(conn.msize.load(std::sync::atomic::Ordering::Relaxed));
                    (*count).min(io) as usize
                }
                _ => 0,
            };
            let (ty, changes) = (body.ty(), body.changes());
            let lets_finish = match body {
                Fcall::Tread { .. } => !cancelable,
                Fcall::Tstat { .. } => false,
                _ => true,
            };
            let flushed = lets_finish.then(|| Arc::new(Signal::default()));
            let handle = conn.clone().handle(tag, body);
            let mut request: std::pin::Pin<Box<dyn Future<Output = Result<Fcall>> + Send>> = match &flushed {
                Some(f) => Box::pin(FLUSHED.scope(f.clone(), handle)),
                None => Box::pin(handle),
            };
            // Most requests finish without waiting: answer those here.
            // One that waits keeps its place (the next poll, in its own
            // task, registers the real waker).
            let mut cx = std::task::Context::from_waker(std::task::Waker::noop());
            if let std::task::Poll::Ready(outcome) = caught(request.as_mut(), &mut cx) {
                reply(reply_of(ty, changes, outcome));
                return;
            }
            let c = conn.clone();
            // The task registers itself under the lock, so it cannot finish
            // and unregister before it is registered.
            let mut tasks = conn.tasks.lock().expect("task lock");
            // Reads that wait (on a stream) may all be answered at once,
            // each with as much as it asked: past a bound, a read that
            // would wait is refused instead (it never happened, as with a
            // flush), so a client cannot grow the daemon by its replies.
            let waiting: usize = tasks.values().map(|f| f.read_bytes).sum();
            if read_bytes > 0 && waiting + read_bytes > WAITING_READS_MAX {
                drop(tasks);
                drop(request);
                reply(Fcall::Rerror { ename: too_many_waiting(waiting) });
                return;
            }
            let done = Arc::new(Signal::default());
            let replied = RaiseOnDrop(done.clone());
            let task = tokio::spawn(async move {
                let reply = reply_of(ty, changes, std::future::poll_fn(|cx| caught(request.as_mut(), cx)).await);
                // Reply and unregister without an await between, so a Tflush
                // sees either a running request or a queued reply.
                let mut tasks = c.tasks.lock().expect("task lock");
                tasks.remove(&tag);
                c.reply(tag, reply);
                drop(replied);
            });
            tasks.insert(tag, InFlight { task, cancelable, flushed, done, read_bytes });
        }
        body => reply(Fcall::Rerror { ename: format!("unexpected 9P message type {} with tag {tag}", body.ty()) }),
    }
}
