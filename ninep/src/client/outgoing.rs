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
}

impl Outgoing {
    /// Encodes `msg` into the buffer the turn to write holds.
    pub(super) fn new(shared: Arc<Shared>, mut out: tokio::sync::OwnedMutexGuard<Vec<u8>>, msg: Msg) -> Outgoing {
        out.clear();
        let bulk = encode_frame(&msg, &mut out, LARGE).is_some();
        Outgoing { shared, out: Some(out), msg, bulk, written: 0, finishing: false }
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
            self.shared.end(&mut self.shared.reading.lock().expect("reading lock"));
        }
        written
    }

    pub(super) async fn write_rest(&mut self) -> std::io::Result<()> {
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
    pub(super) async fn wait_to_write(&mut self) -> std::io::Result<()> {
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

/// A request on the wire, waiting for its reply.
pub struct Sent {
    pub(super) guard: TagGuard,
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

/// Frees a tag when its request ends; if the request ends without a reply
/// (its future was dropped), flushes it first.
pub(super) struct TagGuard {
    pub(super) shared: Arc<Shared>,
    pub(super) tag: u16,
    pub(super) answered: bool,
    /// Whether the request is a Tflush, which is never flushed itself.
    pub(super) is_flush: bool,
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
