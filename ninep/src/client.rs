//! An async 9P2000 client: many requests in flight on one connection.
//!
//! `Client` is cheap to clone and may be used from many tasks at once: each
//! request takes a free tag, registers for its reply and writes its frame.
//! Replies are read by the requests waiting for them, with no task in
//! between: whichever finds the socket readable reads what has come, hands
//! every whole reply to whoever owns its tag, in whatever order the server
//! answers, and keeps its own. So a lone request is answered by the
//! read(2) of the task that sent it, as a plain socket client would be.
//! Dropping a request's future before its reply sends a Tflush
//! (flush(5)), and the tag is reused only after the Rflush, so a late
//! reply can never be taken for another request's.
//!
//! The transport is a stream socket: `dial` opens `unix!PATH` or
//! `tcp!HOST!PORT` as plan9port spells them.

use crate::codec::{encode, encode_frame, parse_stats, LARGE};
use crate::fcall::{Fcall, Msg, Qid, Stat, MAXWELEM, NOFID, NOTAG};
use crate::socket::{self, Filled, Incoming, Io, Socket};
use crate::version::{iounit, MIN_MSIZE, VERSION};
use std::sync::atomic::{AtomicU32, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, TryLockError};
use std::task::Waker;
use tokio::io::unix::AsyncFdReadyGuard;

/// What a 9P call can fail with.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ClientError {
    /// The server answered Rerror.
    #[error("{0}")]
    Server(String),
    #[error("connection closed")]
    Hangup,
    #[error("i/o: {0}")]
    Io(String),
    #[error("protocol: {0}")]
    Protocol(String),
    /// Every tag is taken: 65535 requests are in flight on the connection.
    #[error("no free tags: 65535 requests in flight; wait for some to be answered")]
    NoFreeTags,
    #[error("bad address {0:?}: want unix!PATH or tcp!HOST!PORT")]
    BadAddress(String),
}

impl From<std::io::Error> for ClientError {
    fn from(e: std::io::Error) -> ClientError {
        ClientError::Io(e.to_string())
    }
}

type Result<T> = std::result::Result<T, ClientError>;

struct Shared {
    io: Io,
    /// Held while a frame is written, so frames go out whole; the buffer
    /// each is encoded in. (Owned guards: a frame given up part-way is
    /// finished by a task that holds it.)
    writing: Arc<tokio::sync::Mutex<Vec<u8>>>,
    /// What has been read and not yet handed out. Taken only between
    /// awaits, by whichever waiting request found the socket readable.
    reading: Mutex<Incoming>,
    /// Said when `reading` is let go, to the requests that found it taken
    /// (counted in `waiting`): they wait for that rather than block their
    /// worker thread while a large reply is copied.
    released: tokio::sync::Notify,
    waiting: AtomicUsize,
    /// The tags in use and who waits for each one's reply.
    tags: Mutex<Tags>,
    free_fids: Mutex<Vec<u32>>,
    next_fid: AtomicU32,
    msize: u32,
    /// Becomes true when the connection has ended: the server hung up,
    /// or its framing broke and nothing more is read.
    gone: tokio::sync::watch::Sender<bool>,
}

/// A connection to a 9P2000 server.
#[derive(Clone)]
pub struct Client {
    shared: Arc<Shared>,
}

/// An open file: its fid and how much one read or write may carry.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct File {
    pub fid: u32,
    pub qid: Qid,
    pub iounit: u32,
}

/// Opens a plan9port-style address: `unix!PATH` or `tcp!HOST!PORT`.
pub async fn dial(addr: &str, msize: u32) -> Result<Client> {
    let bad = || ClientError::BadAddress(addr.to_string());
    let parts: Vec<&str> = addr.split('!').collect();
    match parts.as_slice() {
        ["unix", path] => {
            let stream = tokio::net::UnixStream::connect(path).await?;
            crate::io::room_for(std::os::fd::AsRawFd::as_raw_fd(&stream), msize);
            Client::handshake(stream, msize).await
        }
        ["tcp", host, port] => {
            let port: u16 = port.parse().map_err(|_| bad())?;
            Client::handshake(tokio::net::TcpStream::connect((*host, port)).await?, msize).await
        }
        _ => Err(bad()),
    }
}

impl Shared {
    /// Reads what has come, for everyone: each whole reply goes to whoever
    /// waits for its tag, and `mine`'s is returned when it is among them.
    /// Called with the socket found readable (`ready`); takes it as not
    /// readable once a read drains it. The end of the stream, or framing
    /// that broke, ends the connection.
    fn pump(
        &self,
        reading: &mut Incoming,
        ready: &mut AsyncFdReadyGuard<'_, std::fs::File>,
        mine: Option<u16>,
    ) -> Option<Fcall> {
        let mut drained = false;
        loop {
            if *self.gone.borrow() {
                return None;
            }
            // Every reply read so far is handed out before the lock is let
            // go: none is left where no one would look for it.
            let mut own = None;
            loop {
                match reading.next(self.msize) {
                    Ok(Some(msg)) => {
                        if let Some(body) = self.tags.lock().expect("tag lock").hand_over(msg, mine) {
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
                    return None;
                }
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Ok(Filled::End) | Err(_) => {
                    self.end(reading);
                    return None;
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
    fn end(&self, _reading: &mut Incoming) {
        // Nothing written after this could be read as a frame.
        socket::shut_writes(&self.io);
        self.gone.send_replace(true);
        self.tags.lock().expect("tag lock").forget_all();
        // Whoever waits for the reading lock looks again, and finds it over.
        self.released.notify_waiters();
    }

    /// Waits for the socket to be readable and reads what came (`pump`),
    /// unless another request is reading: then waits for it to let go.
    async fn read_for(&self, mine: Option<u16>) -> Option<Fcall> {
        let mut ready = match self.io.readable().await {
            Ok(ready) => ready,
            Err(e) => {
                tracing::debug!(error = %e, "9P socket failed");
                self.end(&mut self.reading.lock().expect("reading lock"));
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
    fn try_pump(&self, ready: &mut AsyncFdReadyGuard<'_, std::fs::File>, mine: Option<u16>) -> Option<Option<Fcall>> {
        let mut reading = match self.reading.try_lock() {
            Ok(reading) => reading,
            Err(TryLockError::WouldBlock) => return None,
            Err(TryLockError::Poisoned(_)) => panic!("reading lock poisoned"),
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

/// A frame on its way out, holding the turn to write. Once a byte of it
/// is on the wire the rest must follow, or the server would read the
/// frames after it as part of it: a request given up part-way through
/// (its future dropped: a timeout, apex-mnt's interrupt) leaves a task
/// to finish the frame, still holding the turn, and its Tflush follows.
struct Outgoing {
    shared: Arc<Shared>,
    /// The turn to write, and the frame (its head, for bulk data); gone
    /// once the frame is all written.
    out: Option<tokio::sync::OwnedMutexGuard<Vec<u8>>>,
    msg: Msg,
    /// Whether the message's data goes after `out` (`encode_frame` left it).
    bulk: bool,
    /// Bytes written so far, of `out` and then of the data.
    written: usize,
    /// The task finishing a frame given up: if it is dropped too (the
    /// runtime is going away), the connection's framing is lost.
    finishing: bool,
}

impl Outgoing {
    /// Encodes `msg` into the buffer the turn to write holds.
    fn new(shared: Arc<Shared>, mut out: tokio::sync::OwnedMutexGuard<Vec<u8>>, msg: Msg) -> Outgoing {
        out.clear();
        let bulk = encode_frame(&msg, &mut out, LARGE).is_some();
        Outgoing { shared, out: Some(out), msg, bulk, written: 0, finishing: false }
    }

    /// What is left to write: of the head, and of the data.
    fn left(&self) -> (&[u8], &[u8]) {
        let Some(out) = &self.out else { return (&[], &[]) };
        let data = match &self.msg.body {
            Fcall::Twrite { data, .. } | Fcall::Rread { data } if self.bulk => &data[..],
            _ => &[],
        };
        let from_head = self.written.min(out.len());
        (&out[from_head..], &data[self.written - from_head..])
    }

    /// Writes the rest of the frame, gathered, then gives up the turn.
    /// While the socket has no room it reads for everyone: a server
    /// blocked writing replies reads no requests, so a client that sends
    /// many before it waits for any would wait for room forever.
    async fn write(&mut self) -> std::io::Result<()> {
        let written = self.write_rest().await;
        if written.is_err() && self.written > 0 {
            // Part of a frame went and the rest cannot: nothing after it
            // would be read as a frame, nor would it be answered as one.
            self.out = None;
            self.shared.end(&mut self.shared.reading.lock().expect("reading lock"));
        }
        written
    }

    async fn write_rest(&mut self) -> std::io::Result<()> {
        // Most frames go in one write at once, with room in the socket:
        // nothing to wait for, or to watch while waiting.
        let (head, data) = self.left();
        let nothing_left = head.is_empty() && data.is_empty();
        if !nothing_left && !*self.shared.gone.borrow() {
            self.written += socket::try_write(&self.shared.io, head, data)?;
        }
        let (head, data) = self.left();
        if !(head.is_empty() && data.is_empty()) {
            self.wait_to_write().await?;
        }
        if let Some(mut out) = self.out.take() {
            // A frame of up to the large size was encoded here: keep no
            // more than a small one's room between frames.
            if out.capacity() > 64 * 1024 {
                *out = Vec::new();
            }
        }
        Ok(())
    }

    /// Writes the rest as the socket has room, reading meanwhile.
    async fn wait_to_write(&mut self) -> std::io::Result<()> {
        let shared = self.shared.clone();
        let mut gone = shared.gone.subscribe();
        loop {
            if *gone.borrow_and_update() {
                // Ended meanwhile (by a reader, or a frame before this one).
                return Err(std::io::ErrorKind::BrokenPipe.into());
            }
            let (head, data) = self.left();
            if head.is_empty() && data.is_empty() {
                break;
            }
            let mut room = tokio::select! {
                biased;
                room = shared.io.writable() => room?,
                _ = gone.changed() => continue,
                _ = shared.read_for(None) => continue,
            };
            self.written += socket::write_some(&mut room, head, data)?;
        }
        Ok(())
    }
}

impl Drop for Outgoing {
    fn drop(&mut self) {
        if self.out.is_none() || self.written == 0 {
            // All written, or none: the stream is whole.
            return;
        }
        let shared = self.shared.clone();
        let finish = match tokio::runtime::Handle::try_current() {
            Ok(rt) if !self.finishing => rt,
            _ => {
                shared.end(&mut shared.reading.lock().expect("reading lock"));
                return;
            }
        };
        let msg = std::mem::replace(&mut self.msg, Msg { tag: NOTAG, body: Fcall::Rclunk });
        let mut rest =
            Outgoing { shared, out: self.out.take(), msg, bulk: self.bulk, written: self.written, finishing: true };
        // Should it fail, `rest` is dropped part-written and, finishing,
        // ends the connection.
        finish.spawn(async move {
            let _ = rest.write().await;
        });
    }
}

/// One in a count for as long as it lives (a future dropped while it
/// waits is uncounted too).
struct Counted<'a>(&'a AtomicUsize);

impl<'a> Counted<'a> {
    fn new(count: &'a AtomicUsize) -> Counted<'a> {
        count.fetch_add(1, Ordering::SeqCst);
        Counted(count)
    }
}

impl Drop for Counted<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

/// A request on the wire, waiting for its reply.
pub struct Sent {
    guard: TagGuard,
}

impl Sent {
    /// The reply; Rerror becomes `ClientError::Server`. While it waits, it
    /// reads for every request on the connection.
    pub async fn reply(mut self) -> Result<Fcall> {
        let shared = self.guard.shared.clone();
        let tag = self.guard.tag;
        // Waiting on the socket's readiness spends none of the task's
        // budget (a socket's read would): a task whose replies are always
        // there by the time it looks (a bulk read) would otherwise never
        // let the other tasks of its worker run.
        tokio::task::consume_budget().await;
        let reply = loop {
            // Once the stream has ended the socket stays readable, so
            // `read_for` returns at once: the loop ends because the ended
            // connection has let go of every waiter (and `select!` checks
            // the task's budget before polling either, so this never spins
            // unheard).
            tokio::select! {
                biased;
                // Handed over by whoever read it, or the connection ended.
                got = std::future::poll_fn(|cx| shared.tags.lock().expect("tag lock").poll_reply(tag, cx)) => break got,
                got = shared.read_for(Some(tag)) => {
                    if got.is_some() {
                        break got;
                    }
                }
            }
        };
        self.guard.answered = true;
        match reply {
            Some(Fcall::Rerror { ename }) => Err(ClientError::Server(ename)),
            Some(r) => Ok(r),
            None => Err(ClientError::Hangup),
        }
    }
}

/// The tags in use: a slot each, and the free ones on a stack. A tag
/// freed is the next one taken, so the table is as large as the most
/// requests ever in flight at once, and a tag is found and answered by
/// indexing, with no search or hashing.
#[derive(Default)]
struct Tags {
    slots: Vec<Slot>,
    free: Vec<u16>,
}

enum Slot {
    Free,
    /// Its request waits for the reply; who to wake when another request
    /// reads it.
    Waiting(Option<Waker>),
    /// The reply, read by another request, for its own to take.
    Answered(Fcall),
    /// Answered and taken, given up (flushed, its Rflush awaited), failed,
    /// or left when the connection ended: in use until freed, so a late
    /// reply is never taken for another request's.
    Taken,
}

impl Tags {
    /// A free tag, for a request that will wait for its reply.
    fn take(&mut self) -> Result<u16> {
        let tag = match self.free.pop() {
            Some(tag) => tag,
            None if self.slots.len() < NOTAG as usize => {
                self.slots.push(Slot::Free);
                (self.slots.len() - 1) as u16
            }
            None => return Err(ClientError::NoFreeTags),
        };
        self.slots[tag as usize] = Slot::Waiting(None);
        Ok(tag)
    }

    /// A reply read: returned when it is `mine` (the reader's own), else
    /// kept for its request, which is woken; dropped when nobody waits
    /// for it (flushed, or never asked for). Its tag stays in use.
    fn hand_over(&mut self, reply: Msg, mine: Option<u16>) -> Option<Fcall> {
        let slot = self.slots.get_mut(reply.tag as usize)?;
        let Slot::Waiting(waker) = slot else { return None };
        if Some(reply.tag) == mine {
            *slot = Slot::Taken;
            return Some(reply.body);
        }
        let waker = waker.take();
        *slot = Slot::Answered(reply.body);
        if let Some(w) = waker {
            w.wake();
        }
        None
    }

    /// `tag`'s reply if another request read it; `None` once none can
    /// come (the connection ended); else pending, to be woken when it
    /// comes.
    fn poll_reply(&mut self, tag: u16, cx: &mut std::task::Context<'_>) -> std::task::Poll<Option<Fcall>> {
        use std::task::Poll;
        let Some(slot) = self.slots.get_mut(tag as usize) else { return Poll::Ready(None) };
        match slot {
            Slot::Waiting(Some(w)) if w.will_wake(cx.waker()) => Poll::Pending,
            Slot::Waiting(w) => {
                *w = Some(cx.waker().clone());
                Poll::Pending
            }
            Slot::Answered(_) => match std::mem::replace(slot, Slot::Taken) {
                Slot::Answered(body) => Poll::Ready(Some(body)),
                _ => unreachable!("just matched"),
            },
            Slot::Free | Slot::Taken => Poll::Ready(None),
        }
    }

    /// `tag`'s reply is no longer awaited (a reply kept for it is
    /// dropped); the tag stays in use. Whether its reply had come: then
    /// none can come after, and the tag may be freed at once.
    fn forget(&mut self, tag: u16) -> bool {
        let Some(slot) = self.slots.get_mut(tag as usize) else { return false };
        let answered = matches!(slot, Slot::Answered(_));
        if answered || matches!(slot, Slot::Waiting(_)) {
            *slot = Slot::Taken;
        }
        answered
    }

    /// The connection has ended: no more replies come, and every request
    /// still waiting is woken to find that out.
    fn forget_all(&mut self) {
        for slot in &mut self.slots {
            if let Slot::Waiting(waker) = slot {
                let waker = waker.take();
                *slot = Slot::Taken;
                if let Some(w) = waker {
                    w.wake();
                }
            }
        }
    }

    fn free(&mut self, tag: u16) {
        if let Some(slot) = self.slots.get_mut(tag as usize) {
            if !matches!(slot, Slot::Free) {
                *slot = Slot::Free;
                self.free.push(tag);
            }
        }
    }
}

/// Frees a tag when its request ends; if the request ends without a reply
/// (its future was dropped), flushes it first.
struct TagGuard {
    shared: Arc<Shared>,
    tag: u16,
    answered: bool,
    /// Whether the request is a Tflush, which is never flushed itself.
    is_flush: bool,
}

impl Drop for TagGuard {
    fn drop(&mut self) {
        let shared = self.shared.clone();
        let tag = self.tag;
        if self.answered {
            shared.tags.lock().expect("tag lock").free(tag);
            return;
        }
        {
            let mut tags = shared.tags.lock().expect("tag lock");
            if tags.forget(tag) {
                // Its reply came (another request read it): nothing to flush.
                tags.free(tag);
                return;
            }
        }
        if self.is_flush {
            // A Tflush given up (only when its task is dropped: the runtime
            // is going away) is not flushed in turn, which would go on
            // without end; its tag stays taken, as its Rflush may come.
            return;
        }
        // The reply may still come: keep the tag taken until the Rflush.
        let Ok(rt) = tokio::runtime::Handle::try_current() else { return };
        let client = Client { shared };
        let mut flush = Box::pin(async move {
            // Freed only once the Rflush came (or the connection ended): a
            // Tflush waits its turn for a tag, first leaving the dropper's
            // thread (it is polled there once, below: no timer is made
            // there, so a runtime without one panics only this task).
            let mut first = true;
            while client.rpc(Fcall::Tflush { oldtag: tag }).await == Err(ClientError::NoFreeTags) {
                if std::mem::take(&mut first) {
                    tokio::task::yield_now().await;
                } else {
                    tokio::time::sleep(std::time::Duration::from_millis(1)).await;
                }
            }
            client.shared.tags.lock().expect("tag lock").free(tag);
        });
        // Polled once here, so the Tflush is written before whatever the
        // dropper does next (it goes at once unless another frame is going
        // out or the socket is full): a request sent after the drop reaches
        // the server after the flush. Waiting for the Rflush is a task's.
        let mut cx = std::task::Context::from_waker(Waker::noop());
        if std::future::Future::poll(flush.as_mut(), &mut cx).is_pending() {
            rt.spawn(flush);
        }
    }
}

impl Client {
    /// Speaks Tversion on `stream`, a connected Unix or TCP socket.
    pub async fn handshake(stream: impl Socket, msize: u32) -> Result<Client> {
        let io = socket::register(stream)?;
        let mut out = Vec::new();
        encode(&Msg { tag: NOTAG, body: Fcall::Tversion { msize, version: VERSION.into() } }, &mut out);
        socket::write_two(&io, &out, &[]).await?;
        let mut incoming = Incoming::default();
        let reply = loop {
            if let Some(msg) = incoming.next(msize).map_err(ClientError::Protocol)? {
                break msg;
            }
            let mut ready = io.readable().await?;
            match incoming.fill(&io, msize) {
                Ok(Filled::Got { drained }) if drained => ready.clear_ready(),
                Ok(Filled::Got { .. }) => {}
                Ok(Filled::End) => return Err(ClientError::Hangup),
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => ready.clear_ready(),
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e.into()),
            }
        };
        let msize = match reply {
            Msg { body: Fcall::Rversion { msize: m, version }, .. } if version == VERSION && m > msize => {
                return Err(ClientError::Protocol(format!("server agreed to msize {m}, over the {msize} asked for")))
            }
            Msg { body: Fcall::Rversion { msize: m, version }, .. } if version == VERSION && m < MIN_MSIZE => {
                // Too small to carry a message's header and any data.
                return Err(ClientError::Protocol(format!("server agreed to msize {m}, under the least, {MIN_MSIZE}")));
            }
            Msg { body: Fcall::Rversion { msize: m, version }, .. } if version == VERSION => m,
            Msg { body: Fcall::Rversion { version, .. }, .. } => {
                return Err(ClientError::Protocol(format!("server speaks {version:?}, not 9P2000")))
            }
            Msg { body: Fcall::Rerror { ename }, .. } => return Err(ClientError::Server(ename)),
            other => return Err(ClientError::Protocol(format!("unexpected reply to Tversion: {other:?}"))),
        };
        let shared = Arc::new(Shared {
            io,
            writing: Arc::new(tokio::sync::Mutex::new(Vec::new())),
            reading: Mutex::new(incoming),
            released: tokio::sync::Notify::new(),
            waiting: AtomicUsize::new(0),
            tags: Mutex::new(Tags::default()),
            free_fids: Mutex::new(Vec::new()),
            next_fid: AtomicU32::new(0),
            msize,
            gone: tokio::sync::watch::Sender::new(false),
        });
        Ok(Client { shared })
    }

    /// Resolves when the connection has ended (the server hung up or the
    /// stream broke); at once if it already has. While it waits, it reads
    /// for every request on the connection, so the end is seen even when
    /// none is in flight.
    pub async fn closed(&self) {
        let mut gone = self.shared.gone.subscribe();
        while !*gone.borrow_and_update() {
            tokio::select! {
                biased;
                _ = gone.changed() => {}
                _ = self.shared.read_for(None) => {}
            }
        }
    }

    /// The negotiated msize.
    pub fn msize(&self) -> u32 {
        self.shared.msize
    }

    /// Sends one request and waits for its reply; Rerror becomes
    /// `ClientError::Server`.
    pub async fn rpc(&self, body: Fcall) -> Result<Fcall> {
        self.send(body).await?.reply().await
    }

    /// Sends one request and returns once it is written, so requests sent
    /// one after another reach the server in that order while their
    /// replies are awaited apart. Dropping the `Sent` unanswered flushes it.
    pub async fn send(&self, body: Fcall) -> Result<Sent> {
        let tag = self.shared.tags.lock().expect("tag lock").take()?;
        let is_flush = matches!(body, Fcall::Tflush { .. });
        let mut guard = TagGuard { shared: self.shared.clone(), tag, answered: false, is_flush };
        if *self.shared.gone.borrow() {
            // Nothing more is read (the server hung up, or its framing
            // broke while the stream stays open): no reply can come.
            guard.answered = true;
            self.shared.tags.lock().expect("tag lock").forget(tag);
            return Err(ClientError::Hangup);
        }
        let msg = Msg { tag, body };
        let sent = async {
            // Most often no other frame is going out: the turn is taken
            // without a wait's machinery.
            let turn = match self.shared.writing.clone().try_lock_owned() {
                Ok(turn) => turn,
                Err(_) => self.shared.writing.clone().lock_owned().await,
            };
            Outgoing::new(self.shared.clone(), turn, msg).write().await
        };
        if let Err(e) = sent.await {
            guard.answered = true;
            self.shared.tags.lock().expect("tag lock").forget(tag);
            use std::io::ErrorKind::{BrokenPipe, ConnectionReset};
            if matches!(e.kind(), BrokenPipe | ConnectionReset) {
                // The server hung up while nothing was being read.
                self.shared.end(&mut self.shared.reading.lock().expect("reading lock"));
                return Err(ClientError::Hangup);
            }
            return Err(e.into());
        }
        Ok(Sent { guard })
    }

    fn new_fid(&self) -> u32 {
        match self.shared.free_fids.lock().expect("fid lock").pop() {
            Some(f) => f,
            None => self.shared.next_fid.fetch_add(1, Ordering::Relaxed),
        }
    }

    fn unexpected<T>(what: &str, r: Fcall) -> Result<T> {
        Err(ClientError::Protocol(format!("unexpected reply to {what}: {r:?}")))
    }

    /// Attaches to `aname` as `uname`; returns the root fid.
    pub async fn attach(&self, uname: &str, aname: &str) -> Result<u32> {
        let fid = self.new_fid();
        let t = Fcall::Tattach { fid, afid: NOFID, uname: uname.into(), aname: aname.into() };
        match self.rpc(t).await? {
            Fcall::Rattach { .. } => Ok(fid),
            r => Self::unexpected("Tattach", r),
        }
    }

    /// Walks from `fid` through `names` (any number: walks of at most 16
    /// names each) to a new fid.
    pub async fn walk(&self, fid: u32, names: &[&str]) -> Result<(u32, Vec<Qid>)> {
        let newfid = self.new_fid();
        let mut qids = Vec::new();
        let mut from = fid;
        let chunks: Vec<&[&str]> = if names.is_empty() { vec![&[][..]] } else { names.chunks(MAXWELEM).collect() };
        for chunk in chunks {
            let wnames = chunk.iter().map(|s| s.to_string()).collect();
            let r = self.rpc(Fcall::Twalk { fid: from, newfid, wnames }).await;
            match r {
                Ok(Fcall::Rwalk { wqids }) if wqids.len() == chunk.len() => qids.extend(wqids),
                Ok(Fcall::Rwalk { wqids }) if wqids.len() < chunk.len() => {
                    self.abandon_walk(from, newfid).await;
                    let at = qids.len() + wqids.len();
                    return Err(ClientError::Server(format!("file does not exist: {}", names[..=at].join("/"))));
                }
                // More qids than names, or no Rwalk: the server is broken,
                // and may have made newfid; it is clunked, never left.
                Ok(r) => {
                    let _ = self.clunk(newfid).await;
                    return Self::unexpected("Twalk", r);
                }
                Err(e) => {
                    self.abandon_walk(from, newfid).await;
                    return Err(e);
                }
            }
            from = newfid;
        }
        Ok((newfid, qids))
    }

    /// After a failed walk step: a newfid that already exists (a later
    /// step walked it onto itself) is clunked; one never made is freed.
    async fn abandon_walk(&self, from: u32, newfid: u32) {
        if from == newfid {
            let _ = self.clunk(newfid).await;
        } else {
            self.shared.free_fids.lock().expect("fid lock").push(newfid);
        }
    }

    /// Opens `fid` with `mode` (OREAD, OWRITE, ORDWR, | OTRUNC).
    pub async fn open(&self, fid: u32, mode: u8) -> Result<File> {
        match self.rpc(Fcall::Topen { fid, mode }).await? {
            Fcall::Ropen { qid, iounit: n } => Ok(File { fid, qid, iounit: self.io(n) }),
            r => Self::unexpected("Topen", r),
        }
    }

    /// Creates `name` in the directory `fid`, which becomes the new file.
    pub async fn create(&self, fid: u32, name: &str, perm: u32, mode: u8) -> Result<File> {
        match self.rpc(Fcall::Tcreate { fid, name: name.into(), perm, mode }).await? {
            Fcall::Rcreate { qid, iounit: n } => Ok(File { fid, qid, iounit: self.io(n) }),
            r => Self::unexpected("Tcreate", r),
        }
    }

    /// The iounit to use: the server's, or msize - 24 when it says 0.
    fn io(&self, n: u32) -> u32 {
        match n {
            0 => iounit(self.shared.msize),
            n => n.min(iounit(self.shared.msize)),
        }
    }

    /// One Tread.
    pub async fn read(&self, fid: u32, offset: u64, count: u32) -> Result<Vec<u8>> {
        let count = count.min(iounit(self.shared.msize));
        match self.rpc(Fcall::Tread { fid, offset, count }).await? {
            Fcall::Rread { data } => Ok(data),
            r => Self::unexpected("Tread", r),
        }
    }

    /// One Twrite; returns the count the server took.
    pub async fn write(&self, fid: u32, offset: u64, data: &[u8]) -> Result<u32> {
        match self.rpc(Fcall::Twrite { fid, offset, data: data.to_vec() }).await? {
            Fcall::Rwrite { count } => Ok(count),
            r => Self::unexpected("Twrite", r),
        }
    }

    /// Reads `file` from offset 0 until a 0-byte read, as `9p read` does.
    pub async fn read_all(&self, file: &File) -> Result<Vec<u8>> {
        let mut out = Vec::new();
        loop {
            let chunk = self.read(file.fid, out.len() as u64, file.iounit).await?;
            if chunk.is_empty() {
                return Ok(out);
            }
            out.extend_from_slice(&chunk);
        }
    }

    /// Writes all of `data` from `offset`, one Twrite per iounit.
    pub async fn write_all(&self, file: &File, mut offset: u64, data: &[u8]) -> Result<()> {
        for chunk in data.chunks(file.iounit.max(1) as usize) {
            let n = self.write(file.fid, offset, chunk).await?;
            if n as usize != chunk.len() {
                return Err(ClientError::Protocol(format!("short write: {n} of {} bytes", chunk.len())));
            }
            offset += n as u64;
        }
        Ok(())
    }

    /// The directory entries of an open directory, read to the end.
    pub async fn read_dir(&self, file: &File) -> Result<Vec<Stat>> {
        let mut out = Vec::new();
        let mut offset = 0u64;
        loop {
            let chunk = self.read(file.fid, offset, file.iounit).await?;
            if chunk.is_empty() {
                return Ok(out);
            }
            offset += chunk.len() as u64;
            out.extend(parse_stats(&chunk).map_err(|e| ClientError::Protocol(e.to_string()))?);
        }
    }

    pub async fn stat(&self, fid: u32) -> Result<Stat> {
        match self.rpc(Fcall::Tstat { fid }).await? {
            Fcall::Rstat { stat } => Ok(*stat),
            r => Self::unexpected("Tstat", r),
        }
    }

    pub async fn wstat(&self, fid: u32, stat: Stat) -> Result<()> {
        match self.rpc(Fcall::Twstat { fid, stat: Box::new(stat) }).await? {
            Fcall::Rwstat => Ok(()),
            r => Self::unexpected("Twstat", r),
        }
    }

    /// Forgets `fid`; it may be reused afterwards.
    pub async fn clunk(&self, fid: u32) -> Result<()> {
        let r = self.rpc(Fcall::Tclunk { fid }).await;
        // Clunk frees the fid whatever the reply (clunk(5)).
        self.shared.free_fids.lock().expect("fid lock").push(fid);
        match r? {
            Fcall::Rclunk => Ok(()),
            r => Self::unexpected("Tclunk", r),
        }
    }

    pub async fn remove(&self, fid: u32) -> Result<()> {
        let r = self.rpc(Fcall::Tremove { fid }).await;
        self.shared.free_fids.lock().expect("fid lock").push(fid);
        match r? {
            Fcall::Rremove => Ok(()),
            r => Self::unexpected("Tremove", r),
        }
    }

    /// Walks from `root` to `path` (slash-separated) and opens it.
    pub async fn open_path(&self, root: u32, path: &str, mode: u8) -> Result<File> {
        let names: Vec<&str> = path.split('/').filter(|s| !s.is_empty()).collect();
        let (fid, _) = self.walk(root, &names).await?;
        match self.open(fid, mode).await {
            Ok(f) => Ok(f),
            Err(e) => {
                let _ = self.clunk(fid).await;
                Err(e)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::task::{Context, Poll};

    fn reply(tag: u16) -> Msg {
        Msg { tag, body: Fcall::Rclunk }
    }

    /// Counts its wake-ups.
    struct Count(AtomicUsize);

    impl std::task::Wake for Count {
        fn wake(self: Arc<Self>) {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }

    /// A tag is in use from its taking to its freeing, whatever replies
    /// come meanwhile; a freed tag is the next taken; a reply nobody asked
    /// for takes no tag.
    #[test]
    fn tags_are_held_until_freed_and_reused_first() {
        let mut tags = Tags::default();
        let (a, b) = (tags.take().unwrap(), tags.take().unwrap());
        assert_eq!((a, b), (0, 1));
        assert_eq!(tags.hand_over(reply(a), Some(a)), Some(Fcall::Rclunk), "the reader's own");
        assert_eq!(tags.hand_over(reply(a), Some(a)), None, "a second reply finds nobody");
        assert_eq!(tags.take().unwrap(), 2, "answered is not free");
        tags.free(a);
        // A stray reply for the free tag takes it from nobody, so freeing
        // it again is still a no-op (were it taken, `a` would be on the
        // free stack twice, and handed to two requests).
        assert!(tags.hand_over(reply(a), None).is_none() && tags.hand_over(reply(900), None).is_none());
        tags.free(a);
        assert_eq!(tags.take().unwrap(), a, "freed once, taken first");
        assert_eq!(tags.take().unwrap(), 3, "and once only");
    }

    /// A reply read by another request waits for its own, which is woken;
    /// one given up is dropped and its tag kept (until its Rflush); the
    /// connection's end wakes every request still waiting, to find no
    /// reply will come.
    #[test]
    fn replies_wait_for_their_request_and_the_end_wakes_every_waiter() {
        let mut tags = Tags::default();
        let count = Arc::new(Count(AtomicUsize::new(0)));
        let waker = Waker::from(count.clone());
        let mut cx = Context::from_waker(&waker);
        let t = tags.take().unwrap();
        assert!(tags.poll_reply(t, &mut cx).is_pending());
        // Polled again from elsewhere (join!, a select): the last waker
        // is the one woken.
        let other = Arc::new(Count(AtomicUsize::new(0)));
        let other_waker = Waker::from(other.clone());
        assert!(tags.poll_reply(t, &mut Context::from_waker(&other_waker)).is_pending());
        assert_eq!(tags.hand_over(reply(t), Some(99)), None, "not the reader's own");
        assert_eq!((count.0.load(Ordering::SeqCst), other.0.load(Ordering::SeqCst)), (0, 1), "its request is woken");
        assert_eq!(tags.poll_reply(t, &mut cx), Poll::Ready(Some(Fcall::Rclunk)));
        let u = tags.take().unwrap();
        assert!(!tags.forget(u), "no reply had come: one may yet");
        assert_eq!(tags.hand_over(reply(u), None), None);
        assert_eq!(tags.poll_reply(u, &mut cx), Poll::Ready(None), "given up: the reply is dropped");
        let w = tags.take().unwrap();
        assert_eq!(tags.hand_over(reply(w), None), None);
        assert!(tags.forget(w), "its reply had come: nothing to flush");
        assert_eq!(tags.poll_reply(w, &mut cx), Poll::Ready(None));
        assert!(![t, u, w].contains(&tags.take().unwrap()), "all held until freed");
        let v = tags.take().unwrap();
        assert!(tags.poll_reply(v, &mut cx).is_pending());
        tags.forget_all();
        assert_eq!(count.0.load(Ordering::SeqCst), 1, "the end wakes it");
        assert_eq!(tags.poll_reply(v, &mut cx), Poll::Ready(None));
    }

    /// NOTAG is never handed out: 65535 requests in flight take every
    /// other tag, and one more is refused until one is freed.
    #[test]
    fn no_more_than_65535_tags() {
        let mut tags = Tags::default();
        for want in 0..NOTAG {
            assert_eq!(tags.take().unwrap(), want);
        }
        assert!(matches!(tags.take(), Err(ClientError::NoFreeTags)));
        tags.free(77);
        assert_eq!(tags.take().unwrap(), 77);
    }
}
