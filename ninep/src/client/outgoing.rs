//! A request's frame going out (the write lock, what is left of a large
//! one, a request dropped half-written), `Sent`, a request waiting for
//! its reply, and its `TagGuard`: a request dropped before its reply is
//! flushed.

use super::incoming::Shared;
use super::{Client, ClientError, Result};
use crate::codec::{encode_frame, LARGE};
use crate::fcall::{Fcall, Msg, NOTAG};
use crate::socket;
use std::sync::Arc;
use std::task::Waker;

/// A frame on its way out, holding the turn to write. Once a byte of it
/// is on the wire the rest must follow, or the server would read the
/// frames after it as part of it: a request given up part-way through
/// (its future dropped: a timeout, apex-mnt's interrupt) leaves a task
/// to finish the frame, still holding the turn, and its Tflush follows.
pub(super) struct Outgoing {
    pub(super) shared: Arc<Shared>,
    /// The turn to write, and the frame (its head, for bulk data); gone
    /// once the frame is all written.
    pub(super) out: Option<tokio::sync::OwnedMutexGuard<Vec<u8>>>,
    pub(super) msg: Msg,
    /// Whether the message's data goes after `out` (`encode_frame` left it).
    pub(super) bulk: bool,
    /// Bytes written so far, of `out` and then of the data.
    pub(super) written: usize,
    /// The task finishing a frame given up: if it is dropped too (the
    /// runtime is going away), the connection's framing is lost.
    pub(super) finishing: bool,
    /// Set once a byte of the frame is written: the request's `TagGuard`
    /// flushes only a request the server may have seen.
    pub(super) on_wire: Arc<std::sync::atomic::AtomicBool>,
}

impl Outgoing {
    /// Encodes `msg` into the buffer the turn to write holds.
    pub(super) fn new(
        shared: Arc<Shared>,
        mut out: tokio::sync::OwnedMutexGuard<Vec<u8>>,
        msg: Msg,
        on_wire: Arc<std::sync::atomic::AtomicBool>,
    ) -> Outgoing {
        out.clear();
        let bulk = encode_frame(&msg, &mut out, LARGE).is_some();
        Outgoing { shared, out: Some(out), msg, bulk, written: 0, finishing: false, on_wire }
    }

    /// Counts `n` more bytes written.
    fn wrote(&mut self, n: usize) {
        if n > 0 {
            self.written += n;
            self.on_wire.store(true, std::sync::atomic::Ordering::Release);
        }
    }

    /// What is left to write: of the head, and of the data.
    pub(super) fn left(&self) -> (&[u8], &[u8]) {
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
    pub(super) async fn write(&mut self) -> std::io::Result<()> {
        let written = self.write_rest().await;
        if written.is_err() && self.written > 0 {
            // Part of a frame went and the rest cannot: nothing after it
            // would be read as a frame, nor would it be answered as one.
            self.out = None;
            self.shared.end(&mut self.shared.reading.lock().unwrap_or_else(std::sync::PoisonError::into_inner));
        }
        written
    }

    pub(super) async fn write_rest(&mut self) -> std::io::Result<()> {
        // Most frames go in one write at once, with room in the socket:
        // nothing to wait for, or to watch while waiting.
        let (head, data) = self.left();
        let nothing_left = head.is_empty() && data.is_empty();
        if !nothing_left && !*self.shared.gone.borrow() {
            let n = socket::try_write(&self.shared.io, head, data)?;
            self.wrote(n);
        }
        let (head, data) = self.left();
        if !(head.is_empty() && data.is_empty()) || self.shared.io.queued() {
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
    pub(super) async fn wait_to_write(&mut self) -> std::io::Result<()> {
        let shared = self.shared.clone();
        let mut gone = shared.gone.subscribe();
        loop {
            if *gone.borrow_and_update() {
                // Ended meanwhile (by a reader, or a frame before this one).
                return Err(std::io::ErrorKind::BrokenPipe.into());
            }
            let (head, data) = self.left();
            if head.is_empty() && data.is_empty() && !shared.io.queued() {
                break;
            }
            let mut room = tokio::select! {
                biased;
                room = shared.io.writable() => room?,
                _ = gone.changed() => continue,
                _ = shared.read_for(None) => continue,
            };
            let n = socket::write_some(&shared.io, &mut room, head, data)?;
            self.wrote(n);
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
                shared.end(&mut shared.reading.lock().unwrap_or_else(std::sync::PoisonError::into_inner));
                return;
            }
        };
        let msg = std::mem::replace(&mut self.msg, Msg { tag: NOTAG, body: Fcall::Rclunk });
        let on_wire = self.on_wire.clone();
        let mut rest = Outgoing {
            shared,
            out: self.out.take(),
            msg,
            bulk: self.bulk,
            written: self.written,
            finishing: true,
            on_wire,
        };
        // Should it fail, `rest` is dropped part-written and, finishing,
        // ends the connection.
        finish.spawn(async move {
            let _ = rest.write().await;
        });
    }
}

/// A request on the wire, waiting for its reply.
pub struct Sent {
    pub(super) guard: TagGuard,
}

impl Sent {
    /// The request's tag: what a Tflush of it names.
    pub fn tag(&self) -> u16 {
        self.guard.tag
    }

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
                got = std::future::poll_fn(|cx| shared.tags_anyway().poll_reply(tag, cx)) => break got,
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

/// Frees a tag when its request ends; if the request ends without a reply
/// (its future was dropped), flushes it first.
pub(super) struct TagGuard {
    pub(super) shared: Arc<Shared>,
    pub(super) tag: u16,
    pub(super) answered: bool,
    /// Whether the request is a Tflush, which is never flushed itself.
    pub(super) is_flush: bool,
    /// Whether a byte of the request went out: one dropped before that
    /// never reached the server, and is not flushed.
    pub(super) on_wire: Arc<std::sync::atomic::AtomicBool>,
    /// A fid the request may make on the server (a Twalk's newfid): given
    /// up, the request is flushed and then the fid clunked, so a walk the
    /// server answered late leaves nothing behind (and the fid is used
    /// again only after).
    pub(super) clunk_after: Option<u32>,
}

impl TagGuard {
    /// Clunks `clunk_after`, if any, on a task: the request it came from
    /// is over.
    fn clunk_made(&mut self) {
        let Some(fid) = self.clunk_after.take() else { return };
        let Ok(rt) = tokio::runtime::Handle::try_current() else { return };
        let client = Client { shared: self.shared.clone() };
        rt.spawn(async move {
            let _ = client.clunk(fid).await;
        });
    }
}

impl Drop for TagGuard {
    fn drop(&mut self) {
        let shared = self.shared.clone();
        let tag = self.tag;
        if self.answered {
            shared.tags_anyway().free(tag);
            return;
        }
        {
            let mut tags = shared.tags_anyway();
            if !self.on_wire.load(std::sync::atomic::Ordering::Acquire) {
                // Never sent: nothing to flush, and no reply can come.
                tags.free(tag);
                drop(tags);
                self.clunk_made();
                return;
            }
            if tags.forget(tag) {
                // Its reply came (another request read it): nothing to flush.
                tags.free(tag);
                drop(tags);
                self.clunk_made();
                return;
            }
            if self.is_flush {
                // A Tflush given up (its task dropped) is not flushed in
                // turn, which would go on without end; its tag stays
                // taken, as its Rflush may come, and that frees it (under
                // this same lock, so a reply read meanwhile is not missed).
                tags.abandon(tag);
                return;
            }
        }
        // The reply may still come: keep the tag taken until the Rflush.
        let Ok(rt) = tokio::runtime::Handle::try_current() else { return };
        let client = Client { shared };
        let made = self.clunk_after.take();
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
            client.shared.tags_anyway().free(tag);
            // The request is over (answered before the Rflush, or never
            // done): what it may have made goes.
            if let Some(fid) = made {
                let _ = client.clunk(fid).await;
            }
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

#[cfg(test)]
mod tests {
    use crate::codec::{check, parse, to_bytes};
    use crate::fcall::{Fcall, Msg};
    use crate::Client;
    use std::io::{Read, Write};

    const MSIZE: u32 = 8 << 20;

    /// Serves `theirs` on a thread: Tversion is answered (and then, with
    /// `hold`, nothing more is read until it says go); every other message
    /// read is noted and given to `answer`, whose replies (tag, body) are
    /// written. Ends when the client hangs up, with what was noted.
    fn serve(
        mut theirs: std::os::unix::net::UnixStream,
        hold: Option<std::sync::mpsc::Receiver<()>>,
        mut answer: impl FnMut(&Msg) -> Vec<(u16, Fcall)> + Send + 'static,
    ) -> std::thread::JoinHandle<Vec<Fcall>> {
        std::thread::spawn(move || {
            let (mut got, mut buf, mut seen) = (Vec::new(), vec![0u8; 1 << 16], Vec::new());
            while let Ok(n) = theirs.read(&mut buf) {
                if n == 0 {
                    break;
                }
                got.extend_from_slice(&buf[..n]);
                while let Some(k) = check(&got, MSIZE).unwrap() {
                    let msg = parse(&got[..k]).unwrap();
                    got.drain(..k);
                    let replies = match &msg.body {
                        Fcall::Tversion { .. } => {
                            vec![(msg.tag, Fcall::Rversion { msize: MSIZE, version: "9P2000".into() })]
                        }
                        _ => {
                            seen.push(msg.body.clone());
                            answer(&msg)
                        }
                    };
                    for (tag, body) in replies {
                        theirs.write_all(&to_bytes(&Msg { tag, body })).unwrap();
                    }
                    if let (Fcall::Tversion { .. }, Some(go)) = (&msg.body, &hold) {
                        let _ = go.recv();
                    }
                }
            }
            seen
        })
    }

    /// Answers writes and flushes.
    fn writes_and_flushes(msg: &Msg) -> Vec<(u16, Fcall)> {
        let reply = match &msg.body {
            Fcall::Tflush { .. } => Fcall::Rflush,
            Fcall::Twrite { data, .. } => Fcall::Rwrite { count: data.len() as u32 },
            _ => Fcall::Rerror { ename: "no".into() },
        };
        vec![(msg.tag, reply)]
    }

    /// A request given up while it waited for its turn to write (another
    /// frame was going out) never reached the server: no Tflush goes for
    /// it, and its tag is free at once.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_request_given_up_before_any_byte_went_out_is_not_flushed() {
        let (ours, theirs) = std::os::unix::net::UnixStream::pair().unwrap();
        let (go, wait) = std::sync::mpsc::channel();
        let server = serve(theirs, Some(wait), writes_and_flushes);
        let client = std::sync::Arc::new(Client::handshake(ours, MSIZE).await.unwrap());
        // A write larger than the socket holds: it keeps the turn while
        // the server does not read.
        let big = {
            let client = client.clone();
            tokio::spawn(
                async move { client.rpc(Fcall::Twrite { fid: 1, offset: 0, data: vec![b'x'; 6 << 20] }).await },
            )
        };
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
        let given_up =
            tokio::time::timeout(std::time::Duration::from_millis(50), client.send(Fcall::Tclunk { fid: 9 })).await;
        assert!(given_up.is_err(), "it waited for the turn");
        go.send(()).unwrap();
        assert!(matches!(big.await.unwrap(), Ok(Fcall::Rwrite { count }) if count == 6 << 20));
        drop(client);
        let seen = server.join().unwrap();
        let kinds: Vec<u8> = seen.iter().map(|m| m.ty()).collect();
        assert!(!seen.iter().any(|m| matches!(m, Fcall::Tflush { .. } | Fcall::Tclunk { .. })), "{kinds:?}");
    }

    /// A request dropped after a panic poisoned the tag table's lock (in
    /// another thread) frees its tag and flushes; its drop does not
    /// panic in turn.
    #[tokio::test]
    async fn a_request_dropped_after_a_panic_held_the_tag_lock_does_not_panic() {
        let (ours, theirs) = std::os::unix::net::UnixStream::pair().unwrap();
        let server = serve(theirs, None, |msg| match msg.body {
            Fcall::Tflush { .. } => vec![(msg.tag, Fcall::Rflush)],
            _ => Vec::new(),
        });
        let client = Client::handshake(ours, MSIZE).await.unwrap();
        let sent = client.send(Fcall::Tclunk { fid: 7 }).await.unwrap();
        let shared = client.shared.clone();
        let poisoned = std::thread::spawn(move || {
            let _held = shared.tags.lock().unwrap();
            panic!("a panic while the tag table is held");
        })
        .join();
        assert!(poisoned.is_err() && client.shared.tags.is_poisoned());
        drop(sent);
        // The Tflush went and its Rflush came: the tag is free again.
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        let in_use = || {
            let tags = client.shared.tags_anyway();
            tags.slots.iter().filter(|s| !matches!(s, crate::client::tags::Slot::Free)).count()
        };
        while in_use() > 0 {
            assert!(std::time::Instant::now() < deadline, "the dropped request's tag was never freed");
            tokio::time::sleep(std::time::Duration::from_millis(5)).await;
        }
        drop(client);
        let seen = server.join().unwrap();
        assert!(seen.iter().any(|m| matches!(m, Fcall::Tflush { .. })), "{seen:?}");
    }

    /// A Tflush given up before its Rflush came keeps its tag only until
    /// that Rflush is read: then the tag is free again.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_flush_given_up_frees_its_tag_when_its_rflush_comes() {
        let (ours, theirs) = std::os::unix::net::UnixStream::pair().unwrap();
        let (go, wait) = std::sync::mpsc::channel::<()>();
        let server = serve(theirs, None, move |msg| match msg.body {
            // Answered only once the client gave it up.
            Fcall::Tflush { .. } => {
                let _ = wait.recv();
                vec![(msg.tag, Fcall::Rflush)]
            }
            _ => vec![(msg.tag, Fcall::Rerror { ename: "no".into() })],
        });
        let client = Client::handshake(ours, MSIZE).await.unwrap();
        let flush = client.send(Fcall::Tflush { oldtag: 77 }).await.unwrap();
        drop(flush);
        go.send(()).unwrap();
        // Another request's read takes the Rflush in passing.
        assert!(client.rpc(Fcall::Tclunk { fid: 1 }).await.is_err());
        let in_use =
            client.shared.tags_anyway().slots.iter().filter(|s| !matches!(s, super::super::tags::Slot::Free)).count();
        assert_eq!(in_use, 0, "the given-up Tflush's tag is free");
        drop(client);
        server.join().unwrap();
    }

    /// A walk given up while the server takes its time: the Twalk is
    /// flushed, and when the server answers it after all (its Rwalk before
    /// the Rflush), the new fid it made is clunked, not left on the server.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_walk_given_up_and_answered_late_leaves_no_fid_behind() {
        let (ours, theirs) = std::os::unix::net::UnixStream::pair().unwrap();
        let (go, wait) = std::sync::mpsc::channel::<()>();
        let mut walk_tag = None;
        let server = serve(theirs, None, move |msg| match msg.body {
            // Held until the client has given the walk up.
            Fcall::Twalk { .. } => {
                walk_tag = Some(msg.tag);
                Vec::new()
            }
            Fcall::Tflush { oldtag } => {
                let _ = wait.recv();
                // The walk was done meanwhile: its Rwalk first.
                assert_eq!(Some(oldtag), walk_tag);
                vec![(oldtag, Fcall::Rwalk { wqids: vec![Default::default()] }), (msg.tag, Fcall::Rflush)]
            }
            Fcall::Tclunk { .. } => vec![(msg.tag, Fcall::Rclunk)],
            _ => vec![(msg.tag, Fcall::Rerror { ename: "no".into() })],
        });
        let client = Client::handshake(ours, MSIZE).await.unwrap();
        let walk = tokio::time::timeout(std::time::Duration::from_millis(100), client.walk(0, &["slow"])).await;
        assert!(walk.is_err(), "the walk was given up");
        go.send(()).unwrap();
        // The clunk follows the Rflush; another request's read takes the
        // replies in passing, and a round trip after it sees it done.
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        loop {
            let _ = client.rpc(Fcall::Tstat { fid: 99 }).await;
            let idle = client.shared.tags_anyway().slots.iter().all(|s| matches!(s, super::super::tags::Slot::Free));
            if idle {
                break;
            }
            assert!(std::time::Instant::now() < deadline, "the walk's clean-up never ended");
            tokio::time::sleep(std::time::Duration::from_millis(5)).await;
        }
        drop(client);
        let seen = server.join().unwrap();
        let newfid = seen.iter().find_map(|m| match m {
            Fcall::Twalk { newfid, .. } => Some(*newfid),
            _ => None,
        });
        let flushed = seen.iter().position(|m| matches!(m, Fcall::Tflush { .. })).expect("the walk was flushed");
        let clunked = seen.iter().position(|m| matches!(m, Fcall::Tclunk { fid } if Some(*fid) == newfid));
        assert!(clunked.is_some_and(|c| c > flushed), "the late walk's fid is clunked after the flush: {seen:?}");
    }
}
