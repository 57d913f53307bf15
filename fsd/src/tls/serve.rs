//! The daemon's side of TLS: the handshake, then the halves its 9P
//! server reads requests from ([`Reader`]) and writes replies to
//! ([`Writer`]). A large reply's data is sealed where it lies and written
//! with its records' heads and tags around it, so the daemon copies it no
//! more over TLS than over plain TCP; anything else is sealed into a
//! buffer and written from there.

use super::handshake::{handshake, Handshaken};
use super::records::{Opened, Opener, Part, RecordError, Sealer, RECORD_MAX};
use apex_ninep::srv::ReplyWrite;
use rustls::server::{ServerConnectionData, UnbufferedServerConnection};
use std::future::poll_fn;
use std::io::{self, IoSlice};
use std::pin::Pin;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::task::{ready, Context, Poll};
use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt, ReadBuf};
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::TcpStream;

/// Room records are read into while a connection is quiet: two records.
const STAGE_IDLE: usize = 2 * RECORD_MAX;
/// The most room records are read into: a large Twrite's, a read(2) at a
/// time, when reads keep filling the room there is.
const STAGE_MOST: usize = 256 * 1024;
/// A writer's buffers are let go of past this, once written: a quiet
/// connection holds a few kilobytes (as the 9P server's own buffers do).
const KEPT_ROOM: usize = 64 * 1024;
/// How long the end of a connection waits for the client to take its
/// last records (an alert, close_notify).
const END_WAIT: std::time::Duration = std::time::Duration::from_secs(1);

/// The handshake with a client on `tcp`, then its halves.
pub async fn accept(mut tcp: TcpStream, config: Arc<rustls::ServerConfig>) -> io::Result<(Reader, Writer)> {
    let conn = UnbufferedServerConnection::new(config).map_err(invalid)?;
    let Handshaken { opener, sealer, stage, end, early } = handshake(&mut tcp, conn, STAGE_IDLE).await?;
    let (read, write) = tcp.into_split();
    let writing = Arc::new(Mutex::new(Writing { sealer, queued: Vec::new() }));
    let reader = Reader {
        tcp: read,
        opener,
        stage: stage.into_vec(),
        start: 0,
        end,
        opened: early,
        taken: 0,
        closed: false,
        broken: None,
        writing: writing.clone(),
    };
    let writer =
        Writer { tcp: write, writing, pending: Vec::new(), sent: 0, meta: Vec::new(), parts: Vec::new(), shut: false };
    Ok((reader, writer))
}

/// What both halves seal with.
struct Writing {
    sealer: Sealer<ServerConnectionData>,
    /// An alert the reader sealed: written before anything sealed after
    /// it, if anything is written.
    queued: Vec<u8>,
}

fn lock(writing: &Mutex<Writing>) -> MutexGuard<'_, Writing> {
    // A panic elsewhere while it was held left it as it was.
    writing.lock().unwrap_or_else(PoisonError::into_inner)
}

/// The requests' side: records read, opened where they were read, and
/// their data given to the 9P server.
pub struct Reader {
    tcp: OwnedReadHalf,
    opener: Opener,
    /// Records read and not yet opened: `stage[start..end]`. Its room
    /// grows while reads fill it, and goes back to two records' when
    /// nothing is held.
    stage: Vec<u8>,
    start: usize,
    end: usize,
    /// A record's data that did not fit the read that opened it:
    /// `opened[taken..]`.
    opened: Vec<u8>,
    taken: usize,
    /// Whether the client said the end.
    closed: bool,
    /// Why nothing more is read.
    broken: Option<String>,
    writing: Arc<Mutex<Writing>>,
}

impl Reader {
    /// Opens the record at the start of the stage, if it is whole: its
    /// data onto `buf` (the rest kept). Ok(None) when more must be read.
    fn open_one(&mut self, buf: &mut ReadBuf<'_>) -> Result<Option<()>, RecordError> {
        let from = self.start;
        let Some((opened, length)) = self.opener.open_whole(&mut self.stage[..self.end], from, from)? else {
            return Ok(None);
        };
        self.start += length;
        match opened {
            Opened::Data(n) => {
                let give = n.min(buf.remaining());
                buf.put_slice(&self.stage[from..from + give]);
                self.opened.clear();
                self.taken = 0;
                self.opened.extend_from_slice(&self.stage[from + give..from + n]);
            }
            Opened::Handshake(n) => {
                lock(&self.writing).sealer.take_handshake(&self.stage[from..from + n], &mut self.opener)?;
            }
            Opened::Closed => self.closed = true,
        }
        Ok(Some(()))
    }
}

impl AsyncRead for Reader {
    fn poll_read(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        let me = self.get_mut();
        let before = buf.filled().len();
        loop {
            if buf.filled().len() > before || buf.remaining() == 0 {
                return Poll::Ready(Ok(()));
            }
            if me.taken < me.opened.len() {
                let n = (me.opened.len() - me.taken).min(buf.remaining());
                buf.put_slice(&me.opened[me.taken..me.taken + n]);
                me.taken += n;
                continue;
            }
            if me.closed {
                return Poll::Ready(Ok(()));
            }
            if let Some(why) = &me.broken {
                return Poll::Ready(Err(invalid(why)));
            }
            match me.open_one(buf) {
                Ok(Some(())) => continue,
                Ok(None) => {}
                Err(e) => {
                    // Said to the client if the writer writes again; the
                    // 9P server ends the connection on the error.
                    let mut writing = lock(&me.writing);
                    let Writing { sealer, queued } = &mut *writing;
                    sealer.alert(Some(&e), queued);
                    me.broken = Some(e.to_string());
                    continue;
                }
            }
            // More is read after the part of a record held.
            me.stage.copy_within(me.start..me.end, 0);
            (me.start, me.end) = (0, me.end - me.start);
            let mut room = ReadBuf::new(&mut me.stage[me.end..]);
            let polled = Pin::new(&mut me.tcp).poll_read(cx, &mut room);
            let (n, full) = (room.filled().len(), room.remaining() == 0);
            if polled.is_pending() {
                // Quiet: the room grown for a large message is let go of.
                if me.end == 0 && me.stage.len() > STAGE_IDLE {
                    me.stage = vec![0; STAGE_IDLE];
                }
                return Poll::Pending;
            }
            ready!(polled)?;
            match n {
                0 if me.start == me.end => return Poll::Ready(Ok(())),
                0 => {
                    me.broken = Some("the connection ended inside a TLS record".into());
                    continue;
                }
                n => me.end += n,
            }
            // A read that filled the room: more is coming, in larger reads.
            if full && me.stage.len() < STAGE_MOST {
                let more = (me.stage.len() * 2).min(STAGE_MOST);
                me.stage.resize(more, 0);
            }
        }
    }
}

/// The replies' side.
pub struct Writer {
    tcp: OwnedWriteHalf,
    writing: Arc<Mutex<Writing>>,
    /// Records sealed and not yet written: `pending[sent..]`.
    pending: Vec<u8>,
    sent: usize,
    /// A reply sealed where it lies: its records' heads and tags, and
    /// what to write in order.
    meta: Vec<u8>,
    parts: Vec<Part>,
    /// Whether close_notify was sealed.
    shut: bool,
}

impl Writer {
    /// Seals `plaintext` after what waits (the reader's records first).
    fn seal(&mut self, plaintext: &[u8]) -> io::Result<()> {
        let mut writing = lock(&self.writing);
        let Writing { sealer, queued } = &mut *writing;
        self.pending.append(queued);
        sealer.seal(plaintext, &mut self.pending).map_err(invalid)
    }

    /// Writes what waits: Ready once nothing does.
    fn poll_pending(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        while self.sent < self.pending.len() {
            match ready!(Pin::new(&mut self.tcp).poll_write(cx, &self.pending[self.sent..]))? {
                0 => return Poll::Ready(Err(io::ErrorKind::WriteZero.into())),
                n => self.sent += n,
            }
        }
        self.pending.clear();
        self.sent = 0;
        if self.pending.capacity() > KEPT_ROOM {
            self.pending = Vec::new();
        }
        Poll::Ready(Ok(()))
    }

    /// What the reader sealed, onto what waits to be written.
    fn take_queued(&mut self) {
        self.pending.append(&mut lock(&self.writing).queued);
    }

    /// Seals `head` and then `data` where it lies into `meta` and `parts`.
    fn seal_reply(&mut self, head: &[u8], data: &mut [u8]) -> io::Result<()> {
        self.meta.clear();
        self.parts.clear();
        let sealer = &mut lock(&self.writing).sealer;
        sealer.seal_meta(head, &mut self.meta, &mut self.parts).map_err(invalid)?;
        sealer.seal_in_place(data, &mut self.meta, &mut self.parts).map_err(invalid)
    }
}

impl ReplyWrite for Writer {
    async fn write_reply(&mut self, head: &[u8], data: &mut [u8]) -> io::Result<()> {
        // What was sealed before goes first.
        self.take_queued();
        poll_fn(|cx| self.poll_pending(cx)).await?;
        self.seal_reply(head, data)?;
        let Writer { tcp, meta, parts, .. } = self;
        write_parts(tcp, meta, data, parts).await?;
        if meta.capacity() > KEPT_ROOM {
            (*meta, *parts) = (Vec::new(), Vec::new());
        }
        Ok(())
    }

    /// The reader's alert, or close_notify, and what waits.
    async fn end(&mut self) {
        let _ = tokio::time::timeout(END_WAIT, self.shutdown()).await;
    }
}

/// Writes `parts` of `meta` and `data`, in order, gathered.
async fn write_parts(tcp: &mut OwnedWriteHalf, meta: &[u8], data: &[u8], parts: &[Part]) -> io::Result<()> {
    let bytes = |part: &Part| match part {
        Part::Meta(r) => &meta[r.clone()],
        Part::Data(r) => &data[r.clone()],
    };
    // The piece being written, and how much of it is.
    let (mut at, mut done) = (0, 0);
    while at < parts.len() {
        let slices: Vec<IoSlice<'_>> = parts[at..]
            .iter()
            .take(1024)
            .enumerate()
            .map(|(i, part)| IoSlice::new(&bytes(part)[if i == 0 { done } else { 0 }..]))
            .collect();
        let mut n = tcp.write_vectored(&slices).await?;
        if n == 0 {
            return Err(io::ErrorKind::WriteZero.into());
        }
        while n > 0 {
            let left = bytes(&parts[at]).len() - done;
            if n < left {
                done += n;
                break;
            }
            n -= left;
            (at, done) = (at + 1, 0);
        }
    }
    Ok(())
}

impl AsyncWrite for Writer {
    fn poll_write(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        let me = self.get_mut();
        // What waits goes first: a write's worth is held at most.
        ready!(me.poll_pending(cx))?;
        me.seal(buf)?;
        // As far as the socket takes it now; the rest with the next write
        // or a flush (a socket that is full wakes this task then).
        if let Poll::Ready(Err(e)) = me.poll_pending(cx) {
            return Poll::Ready(Err(e));
        }
        Poll::Ready(Ok(buf.len()))
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let me = self.get_mut();
        ready!(me.poll_pending(cx))?;
        Pin::new(&mut me.tcp).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let me = self.get_mut();
        if !std::mem::replace(&mut me.shut, true) {
            // The reader's alert, if it sealed one; else close_notify.
            let mut writing = lock(&me.writing);
            let Writing { sealer, queued } = &mut *writing;
            me.pending.append(queued);
            sealer.alert(None, &mut me.pending);
        }
        ready!(me.poll_pending(cx))?;
        Pin::new(&mut me.tcp).poll_shutdown(cx)
    }
}

fn invalid(e: impl ToString) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, e.to_string())
}
