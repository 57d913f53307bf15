//! The connection's reading and writing: frames in (a large Twrite's
//! data straight into its buffer), replies out together in one write.

use super::conn::{dispatch, Conn, Ready};
use super::{Config, Serve};
use crate::codec::{check, data_head, encode_frame_mut, parse, with_data, LARGE};
use crate::error::FrameError;
use crate::fcall::{Fcall, Msg};
use crate::io::write_two;
use std::future::Future;
use std::io::IoSlice;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::sync::mpsc;

/// Bytes asked of the socket per read while a message is coming.
pub(super) const READ_CHUNK: usize = 256 * 1024;

/// Room for the read between messages, and the most a buffer keeps while
/// the connection is quiet: an idle connection holds a few kilobytes, not
/// the room its largest message needed (500 that had each sent a 200 KB
/// write held 130 MB).
pub(super) const IDLE_ROOM: usize = 8 * 1024;

pub(super) async fn io_loop<S: Serve>(
    conn: &Arc<Conn<S>>,
    r: &mut (impl AsyncRead + Unpin),
    w: &mut impl ReplyWrite,
    rx: &mut mpsc::UnboundedReceiver<Msg>,
    config: &Config,
) -> std::result::Result<(), FrameError> {
    let mut buf: Vec<u8> = Vec::new();
    let mut start = 0;
    let mut large: Option<Large> = None;
    let mut out = Vec::new();
    let mut ready = Vec::new();
    let mut unflushed = false;
    loop {
        if let Some(l) = large.take_if(|l| l.data.len() == l.count) {
            let parsed = with_data(&l.head, l.data);
            if !received(conn, parsed, config, &mut Ready { list: &mut ready, rx, queued: &conn.queued }).await {
                return Ok(());
            }
        }
        // Every complete frame read so far, as long as the replies made
        // for them fit in OUT_MAX: a client that does not read its replies
        // holds back its own requests, not the daemon's memory.
        // (Requests read but not yet answered because the replies ready
        // fill OUT_MAX wait until those are written.)
        let (mut held_back, mut counted, mut bytes) = (false, 0, 0);
        while large.is_none() {
            bytes += ready_bytes(&ready[counted..]);
            counted = ready.len();
            if bytes > OUT_MAX {
                held_back = true;
                break;
            }
            // Before Tversion, frames may be as large as we would ever allow.
            let limit = match conn.msize.load(std::sync::atomic::Ordering::Relaxed) {
                0 => config.msize,
                m => m,
            };
            let Some(n) = check(&buf[start..], limit)? else {
                // A large Twrite begun (its size checked): the rest of its
                // data is read into a buffer of its own, which becomes the
                // request's, rather than into this one and copied out. (A
                // large Rread, which no client sends, goes so too, to be
                // refused whole as it always was.)
                if let Some((head, count)) = data_head(&buf[start..], LARGE / 4) {
                    let mut data = Vec::with_capacity((2 * (buf.len() - start - head)).min(count));
                    data.extend_from_slice(&buf[start + head..]);
                    large = Some(Large { head: buf[start..start + head].to_vec(), data, count });
                    start = buf.len();
                }
                break;
            };
            let parsed = parse(&buf[start..start + n]);
            start += n;
            if !received(conn, parsed, config, &mut Ready { list: &mut ready, rx, queued: &conn.queued }).await {
                return Ok(());
            }
        }
        buf.drain(..start);
        start = 0;
        if buf.is_empty() && buf.capacity() > IDLE_ROOM {
            buf = Vec::new();
        }
        // The replies that are ready, in as few writes as may be.
        Ready { list: &mut ready, rx, queued: &conn.queued }.take_queued();
        if send_passing(conn, w, &mut out, &mut ready).await.is_err() {
            return Ok(());
        }
        unflushed |= !ready.is_empty();
        ready.clear();
        if out.capacity() > 8 * IDLE_ROOM {
            out = Vec::new();
        }
        if held_back {
            // Written: the requests held back are answered next.
            continue;
        }
        // Polled in order, with no random draw each pass: replies that
        // came meanwhile go out on the next pass either way (`try_recv`).
        tokio::select! {
            biased;
            // A writer that seals what it is given (TLS) keeps back what
            // the socket had no room for, and only a flush or the next
            // write sends it: flushed while nothing else comes (a peer
            // on a slow link would wait for the end of a reply for ever),
            // and a reply that comes meanwhile is sealed while the socket
            // drains, not after. Polled first, so that requests that keep
            // coming cannot hold it back.
            flushed = w.flush(), if unflushed => {
                if flushed.is_err() {
                    return Ok(());
                }
                unflushed = false;
            }
            got = read_more(r, &mut buf, large.as_mut()) => {
                if !got {
                    return Ok(());
                }
            }
            // A reply from a request that had to wait: written on the
            // next pass, with whatever else is ready then.
            Some(msg) = rx.recv() => {
                conn.queued.fetch_sub(1, std::sync::atomic::Ordering::SeqCst);
                ready.push(msg);
            }
        }
    }
}

/// The most reply bytes made ready before they are written: past it, no
/// more requests are answered until they are.
pub(super) const OUT_MAX: usize = 4 << 20;

/// About how many bytes `replies` take to write.
fn ready_bytes(replies: &[Msg]) -> usize {
    replies
        .iter()
        .map(|m| match &m.body {
            Fcall::Rread { data } => data.len() + 16,
            _ => 64,
        })
        .sum()
}

/// A large Twrite being read: its head, and its data so far, read into a
/// buffer of its own ([`data_head`]). The buffer grows with what comes,
/// to twice that at most, never past the count: a peer that declares a
/// write of msize bytes and stalls holds no more than twice what it sent
/// (the data is copied once more in all as it doubles).
pub(super) struct Large {
    pub(super) head: Vec<u8>,
    pub(super) data: Vec<u8>,
    pub(super) count: usize,
}

impl Large {
    /// Room for the next read: as much again as has come, up to the count.
    fn room(&mut self) -> usize {
        let len = self.data.len();
        if self.data.capacity() == len {
            let to = (2 * len).max(LARGE / 4).min(self.count);
            self.data.reserve_exact(to - len);
        }
        (self.data.capacity() - len).min(self.count - len)
    }
}

/// Answers a message read (`dispatch`), or with an Rerror one that did
/// not parse; false when that has no tag to answer on: the stream can no
/// longer be trusted, and the connection ends.
pub(super) async fn received<S: Serve>(
    conn: &Arc<Conn<S>>,
    parsed: std::result::Result<Msg, crate::error::DecodeError>,
    config: &Config,
    ready: &mut Ready<'_>,
) -> bool {
    match parsed {
        Ok(msg) => {
            if let Fcall::Tversion { .. } = msg.body {
                // Every request before it is aborted, every fid clunked,
                // before it is answered (version(5)).
                conn.reset(false).await;
            }
            dispatch(conn, msg, config, ready);
            true
        }
        Err(e) => {
            tracing::info!(error = %e, "malformed 9P message");
            let Some(tag) = e.tag() else { return false };
            ready.push(tag, Fcall::Rerror { ename: e.to_string() });
            true
        }
    }
}

/// Where the server writes its replies: a stream, or one that writes a
/// large reply's data its own way.
pub trait ReplyWrite: AsyncWrite + Unpin + Send {
    /// Writes all of `head` and then all of `data`, which it may change
    /// as it does (TLS seals it where it lies): the reply is not used
    /// again.
    fn write_reply<'a>(
        &'a mut self,
        head: &'a [u8],
        data: &'a mut [u8],
    ) -> impl Future<Output = std::io::Result<()>> + Send + 'a;

    /// Once the connection is over: what the writer still has to say (TLS
    /// its alert or close_notify, and what waits), as far as the peer
    /// takes it within a second. A plain stream says nothing.
    fn end(&mut self) -> impl Future<Output = ()> + Send {
        std::future::ready(())
    }
}

/// A stream whose replies' data is written as it lies, in one writev
/// with its head.
pub struct Plain<W>(pub W);

impl<W: AsyncWrite + Unpin + Send> ReplyWrite for Plain<W> {
    fn write_reply<'a>(
        &'a mut self,
        head: &'a [u8],
        data: &'a mut [u8],
    ) -> impl Future<Output = std::io::Result<()>> + Send + 'a {
        write_two(&mut self.0, head, data)
    }
}

impl<W: AsyncWrite + Unpin> AsyncWrite for Plain<W> {
    fn poll_write(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<std::io::Result<usize>> {
        Pin::new(&mut self.get_mut().0).poll_write(cx, buf)
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[IoSlice<'_>],
    ) -> Poll<std::io::Result<usize>> {
        Pin::new(&mut self.get_mut().0).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.0.is_write_vectored()
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.get_mut().0).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.get_mut().0).poll_shutdown(cx)
    }
}

/// Writes `replies`: small ones gathered into one write, the data of a
/// large Rread written from its own buffer rather than copied.
pub(super) async fn send(w: &mut impl ReplyWrite, out: &mut Vec<u8>, replies: &mut [Msg]) -> std::io::Result<()> {
    out.clear();
    for msg in replies {
        if let Some(data) = encode_frame_mut(msg, out, LARGE) {
            w.write_reply(out, data).await?;
            out.clear();
        }
    }
    if !out.is_empty() {
        w.write_all(out).await?;
    }
    Ok(())
}

/// Reads more of the stream: onto `buf`, or into the data of the large
/// Twrite being read, never past it; false at the end.
pub(super) async fn read_more(r: &mut (impl AsyncRead + Unpin), buf: &mut Vec<u8>, large: Option<&mut Large>) -> bool {
    let got = match large {
        Some(l) => {
            let room = l.room();
            (&mut *r).take(room as u64).read_buf(&mut l.data).await
        }
        None => {
            // Between messages a little; in one, enough for bulk.
            buf.reserve(if buf.is_empty() { IDLE_ROOM } else { READ_CHUNK });
            r.read_buf(buf).await
        }
    };
    matches!(got, Ok(k) if k > 0)
}

/// Writes `replies`, each `Ropenfd` followed at once by its descriptor.
pub(super) async fn send_passing<S: Serve>(
    conn: &Conn<S>,
    w: &mut impl ReplyWrite,
    out: &mut Vec<u8>,
    replies: &mut [Msg],
) -> std::io::Result<()> {
    let mut from = 0;
    for i in 0..replies.len() {
        if !matches!(replies[i].body, Fcall::Ropenfd { .. }) {
            continue;
        }
        send(w, out, &mut replies[from..=i]).await?;
        w.flush().await?;
        from = i + 1;
        let fd = conn.passing.lock().expect("passing lock").remove(&replies[i].tag);
        if let (Some(socket), Some(fd)) = (conn.socket, fd) {
            crate::fdpass::send_fd(socket, &fd).await?;
        }
    }
    send(w, out, &mut replies[from..]).await
}
