//! The TLS side of an import: TCP to `--listen tcp!HOST!PORT`, TLS 1.3
//! trusting the pinned certificate alone, and the 9P client over it.
//! The client reads and writes the TCP socket itself, with [`Sealing`] as
//! its record layer: no task and no second socket between it and the
//! network. rustls's unbuffered connection does the handshake; then its
//! keys are taken over (`crate::tls`), and a reply's records are read
//! straight into the frame that reply fills and opened there, as plain
//! TCP reads it: the bytes are copied by the kernel alone.

use super::ImportError;
use crate::tls::handshake::{handshake, Handshaken};
use crate::tls::records::{Opened, Opener, RecordError, Sealer, RECORD_MAX};
use apex_ninep::layer::{Layer, Wire};
use apex_ninep::Client;
use rustls::client::{ClientConnectionData, UnbufferedClientConnection};
use std::io::{self, Read, Write};
use std::sync::{Mutex, MutexGuard, PoisonError};
use std::time::Duration;

/// Room in the buffer records are staged in when they are not read
/// straight into a frame: the handshake's, and a reply's last records
/// with the next reply's head.
const STAGE: usize = 256 * 1024;
/// A frame with this much room left takes its records straight from the
/// socket; less, and they go through the stage (a frame ends inside a
/// record, whose rest belongs to the next).
const DIRECT_MIN: usize = 64 * 1024;
/// Where a read(2) lands: at an address that is a multiple of this. The
/// kernel copies to user space with `rep movsb`, which on AMD CPUs with
/// fast short `rep movsb` runs many times slower to a destination that is
/// not 64-byte aligned (`apex_sys::tunables` says more); a bulk read
/// through TLS spent a tenth of its time in that copy when its reads
/// landed anywhere.
const READ_ALIGN: usize = 64;

/// Connects, verifies the pin, and speaks Tversion (asking for `msize`).
pub async fn connect(host: &str, port: u16, pin: &str, msize: u32) -> Result<Client, ImportError> {
    let remote = format!("tcp!{host}!{port}");
    let refused = |why: String| ImportError::Tls { remote: remote.clone(), why };
    let config = crate::access::tls::client(pin).map_err(|e| refused(e.to_string()))?;
    let wait = super::CONNECT_WAIT;
    let mut tcp = tokio::time::timeout(wait, tokio::net::TcpStream::connect((host, port)))
        .await
        .map_err(|_| ImportError::Timeout { remote: remote.clone(), wait })?
        .map_err(|e| refused(e.to_string()))?;
    let _ = tcp.set_nodelay(true);
    keep_alive(std::os::fd::AsRawFd::as_raw_fd(&tcp));
    let conn = UnbufferedClientConnection::new(config, crate::access::tls::server_name())
        .map_err(|e| refused(e.to_string()))?;
    let stage = STAGE + RECORD_MAX + READ_ALIGN;
    let Handshaken { opener, sealer, stage: incoming, end, early } =
        tokio::time::timeout(wait, handshake(&mut tcp, conn, stage))
            .await
            .map_err(|_| ImportError::Timeout { remote: remote.clone(), wait })?
            .map_err(|e| refused(e.to_string()))?;
    let sealing = Sealing {
        reading: Mutex::new(Reading {
            opener,
            incoming,
            start: 0,
            end,
            opened: early,
            taken: 0,
            peer_closed: false,
            broken: None,
        }),
        writing: Mutex::new(Writing { sealer, outgoing: Vec::new(), sent: 0, closed: false }),
    };
    let handshake =
        tokio::time::timeout(Duration::from_secs(30), Client::handshake_through(tcp, Box::new(sealing), msize)).await;
    match handshake {
        Ok(Ok(client)) => Ok(client),
        Ok(Err(why)) => Err(ImportError::Protocol { remote, why }),
        Err(_) => Err(ImportError::Timeout { remote, wait: Duration::from_secs(30) }),
    }
}

fn invalid(e: impl ToString) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, e.to_string())
}

/// TLS as the 9P client's record layer. Its reader and its writers hold
/// a side each: a writer never waits for a reply being opened.
struct Sealing {
    reading: Mutex<Reading>,
    /// Taken by the reader too (after `reading`, never before), to follow
    /// a key update or say why it stopped.
    writing: Mutex<Writing>,
}

struct Reading {
    opener: Opener,
    /// Records read and not yet opened: `incoming[start..end]`.
    incoming: Box<[u8]>,
    start: usize,
    end: usize,
    /// A record's data past the frame that asked for it: `opened[taken..]`.
    opened: Vec<u8>,
    taken: usize,
    /// Whether the peer said the end.
    peer_closed: bool,
    /// Why the stream can be read no further (a record that did not
    /// open): said to every read, once what was opened before it is
    /// read.
    broken: Option<String>,
}

struct Writing {
    sealer: Sealer<ClientConnectionData>,
    /// Records sealed and not yet written: `outgoing[sent..]`.
    outgoing: Vec<u8>,
    sent: usize,
    /// Whether the end was said (once is enough).
    closed: bool,
}

/// Takes a lock; a panic elsewhere while it was held left its state as
/// it was.
fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

impl Reading {
    /// Opens the whole records staged, where they lie: their data onto
    /// `into`, `room` bytes at most (the rest of a record kept for the
    /// next read). Ok(false) when no record is whole.
    fn open_staged(
        &mut self,
        writing: &Mutex<Writing>,
        into: &mut Vec<u8>,
        mut room: usize,
    ) -> Result<bool, RecordError> {
        let mut any = false;
        while room > 0 && !self.peer_closed {
            let from = self.start;
            let Some((opened, length)) = self.opener.open_whole(&mut self.incoming[..self.end], from, from)? else {
                break;
            };
            self.start += length;
            any = true;
            match opened {
                Opened::Data(n) => {
                    let take = n.min(room);
                    into.extend_from_slice(&self.incoming[from..from + take]);
                    room -= take;
                    self.opened.clear();
                    self.taken = 0;
                    self.opened.extend_from_slice(&self.incoming[from + take..from + n]);
                }
                Opened::Handshake(n) => take_handshake(writing, &self.incoming[from..from + n], &mut self.opener)?,
                Opened::Closed => self.peer_closed = true,
            }
        }
        Ok(any)
    }

    /// One read(2) straight into `into`'s spare room (after the part of a
    /// record staged, so that it lands aligned), its whole records opened
    /// there down over their heads, the start of the next staged again.
    /// The records read must not hold more than `room` bytes of data:
    /// they take at most `room` bytes on the wire. Ok(0) at the end of
    /// the stream.
    fn read_direct(
        &mut self,
        socket: &mut Wire<'_>,
        writing: &Mutex<Writing>,
        into: &mut Vec<u8>,
        room: usize,
    ) -> io::Result<usize> {
        let kept = self.end - self.start;
        let spare = into.spare_capacity_mut();
        let pad = (READ_ALIGN - (spare.as_ptr() as usize + kept) % READ_ALIGN) % READ_ALIGN;
        let limit = room.min(spare.len().saturating_sub(pad));
        if limit <= kept {
            return self.read_staged(socket, room);
        }
        for byte in &mut spare[..pad] {
            byte.write(0);
        }
        // SAFETY: `spare[pad..pad + kept]` is room the Vec owns, `kept`
        // bytes long (kept < limit <= spare.len() - pad), and the stage
        // is another allocation.
        unsafe {
            std::ptr::copy_nonoverlapping(
                self.incoming[self.start..].as_ptr(),
                spare[pad..].as_mut_ptr().cast::<u8>(),
                kept,
            )
        };
        let n = socket.read_spare(&mut spare[pad + kept..pad + limit])?;
        if n == 0 {
            return Ok(0);
        }
        let filled = pad + kept + n;
        // SAFETY: the first `filled` bytes of the spare room were written:
        // the padding, the part staged, and what read(2) says it read.
        let buf = unsafe { std::slice::from_raw_parts_mut(spare.as_mut_ptr().cast::<u8>(), filled) };
        let (mut to, mut from) = (0, pad);
        let mut failed = None;
        loop {
            match self.opener.open_whole(buf, to, from) {
                Ok(None) => break,
                Ok(Some((Opened::Data(k), length))) => {
                    to += k;
                    from += length;
                }
                Ok(Some((Opened::Handshake(k), length))) => {
                    from += length;
                    if let Err(e) = take_handshake(writing, &buf[to..to + k], &mut self.opener) {
                        failed = Some(e);
                        break;
                    }
                }
                Ok(Some((Opened::Closed, _))) => {
                    self.peer_closed = true;
                    break;
                }
                Err(e) => {
                    failed = Some(e);
                    break;
                }
            }
        }
        // The start of a record, staged for the next read (nothing more
        // is read past an end or an error).
        let rest = match self.peer_closed || failed.is_some() {
            true => &[][..],
            false => &buf[from..filled],
        };
        let at = self.aligned_start(rest.len());
        self.incoming[at..at + rest.len()].copy_from_slice(rest);
        (self.start, self.end) = (at, at + rest.len());
        // SAFETY: `to <= filled` bytes from the start of the spare room
        // hold the data opened.
        unsafe { into.set_len(into.len() + to) };
        if let Some(e) = failed {
            self.fail(e, writing, socket);
        }
        Ok(n)
    }

    /// One read(2) onto the records staged, at most the records that end
    /// a frame with `room` bytes left (and the next reply's head): what
    /// is read past the frame is copied once more.
    fn read_staged(&mut self, socket: &mut Wire<'_>, room: usize) -> io::Result<usize> {
        let kept = self.end - self.start;
        let at = self.aligned_start(kept);
        if self.start != at {
            self.incoming.copy_within(self.start..self.end, at);
        }
        (self.start, self.end) = (at, at + kept);
        let want = (room + RECORD_MAX).saturating_sub(kept).max(RECORD_MAX);
        let limit = (self.end + want).min(self.incoming.len());
        let n = socket.read(&mut self.incoming[self.end..limit])?;
        self.end += n;
        Ok(n)
    }

    /// Where `kept` bytes go in the stage so that a read(2) after them
    /// lands aligned.
    fn aligned_start(&self, kept: usize) -> usize {
        let base = self.incoming.as_ptr().align_offset(READ_ALIGN);
        base + (READ_ALIGN - kept % READ_ALIGN) % READ_ALIGN
    }

    /// Reads no further: the reason kept for every read, and the alert
    /// that says it sent as far as the socket takes it.
    fn fail(&mut self, e: RecordError, writing: &Mutex<Writing>, socket: &mut Wire<'_>) {
        let mut writing = lock(writing);
        let Writing { sealer, outgoing, .. } = &mut *writing;
        sealer.alert(Some(&e), outgoing);
        let _ = flush_outgoing(&mut writing, socket);
        self.broken = Some(e.to_string());
    }
}

/// A handshake record's content to the connection's state.
fn take_handshake(writing: &Mutex<Writing>, content: &[u8], opener: &mut Opener) -> Result<(), RecordError> {
    lock(writing).sealer.take_handshake(content, opener)
}

impl Layer for Sealing {
    fn read(&self, socket: &mut Wire<'_>, into: &mut Vec<u8>, most: usize) -> io::Result<usize> {
        let start = into.len();
        let mut state = lock(&self.reading);
        loop {
            let got = into.len() - start;
            if got == most {
                return Ok(got);
            }
            if state.taken < state.opened.len() {
                let Reading { opened, taken, .. } = &mut *state;
                let n = (opened.len() - *taken).min(most - got);
                into.extend_from_slice(&opened[*taken..*taken + n]);
                *taken += n;
                continue;
            }
            if state.peer_closed {
                return Ok(got);
            }
            if let Some(why) = &state.broken {
                return if got > 0 { Ok(got) } else { Err(invalid(why)) };
            }
            match state.open_staged(&self.writing, into, most - got) {
                Ok(true) => continue,
                Ok(false) => {}
                Err(e) => {
                    state.fail(e, &self.writing, socket);
                    continue;
                }
            }
            let room = most - got;
            let read = match room >= DIRECT_MIN && into.capacity() - into.len() >= room {
                true => state.read_direct(socket, &self.writing, into, room),
                false => state.read_staged(socket, room),
            };
            match read {
                // The stream ended without the peer saying so: an end all
                // the same, once what came before it is read.
                Ok(0) => return Ok(into.len() - start),
                Ok(_) => {}
                // What is opened goes first; the error comes again.
                Err(_) if into.len() > start => return Ok(into.len() - start),
                Err(e) => return Err(e),
            }
        }
    }

    fn seal(&self, parts: &[&[u8]]) -> io::Result<()> {
        let mut writing = lock(&self.writing);
        let Writing { sealer, outgoing, sent, .. } = &mut *writing;
        if *sent == outgoing.len() {
            outgoing.clear();
            *sent = 0;
        }
        // Parts that fit one record go in one.
        let total: usize = parts.iter().map(|p| p.len()).sum();
        let sealed = match parts.len() > 1 && total <= 1 << 14 {
            true => sealer.seal(&parts.concat(), outgoing),
            false => parts.iter().try_for_each(|part| sealer.seal(part, outgoing)),
        };
        sealed.map_err(invalid)
    }

    fn flush(&self, socket: &mut Wire<'_>) -> io::Result<()> {
        flush_outgoing(&mut lock(&self.writing), socket)
    }

    fn queued(&self) -> bool {
        let writing = lock(&self.writing);
        writing.sent < writing.outgoing.len()
    }

    fn close(&self, socket: &mut Wire<'_>) {
        let mut writing = lock(&self.writing);
        if std::mem::replace(&mut writing.closed, true) {
            return;
        }
        let Writing { sealer, outgoing, .. } = &mut *writing;
        sealer.alert(None, outgoing);
        let _ = flush_outgoing(&mut writing, socket);
    }
}

/// Writes the records that wait: Ok once none does.
fn flush_outgoing(writing: &mut Writing, socket: &mut Wire<'_>) -> io::Result<()> {
    while writing.sent < writing.outgoing.len() {
        match socket.write(&writing.outgoing[writing.sent..])? {
            0 => return Err(io::ErrorKind::WriteZero.into()),
            n => writing.sent += n,
        }
    }
    writing.outgoing.clear();
    writing.sent = 0;
    Ok(())
}

/// TCP keepalive probes from 15 s of silence, every 5 s, 3 unanswered
/// ending the connection: a link gone without a reset is noticed, and the
/// import reconnects.
fn keep_alive(fd: std::os::fd::RawFd) {
    set_int(fd, libc::SOL_SOCKET, libc::SO_KEEPALIVE, 1);
    set_int(fd, libc::IPPROTO_TCP, libc::TCP_KEEPIDLE, 15);
    set_int(fd, libc::IPPROTO_TCP, libc::TCP_KEEPINTVL, 5);
    set_int(fd, libc::IPPROTO_TCP, libc::TCP_KEEPCNT, 3);
}

/// Sets an integer socket option; a socket that refuses keeps its own.
fn set_int(fd: std::os::fd::RawFd, level: libc::c_int, option: libc::c_int, value: libc::c_int) {
    // SAFETY: setsockopt reads a c_int from a live local; `fd` is an open
    // socket of ours, and a bad one only makes the call fail.
    unsafe {
        libc::setsockopt(
            fd,
            level,
            option,
            (&value as *const libc::c_int).cast(),
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use apex_ninep::{Fcall, Msg};
    use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};

    /// One 9P frame from `r`.
    async fn frame(r: &mut (impl AsyncRead + Unpin)) -> Msg {
        let mut size = [0; 4];
        r.read_exact(&mut size).await.unwrap();
        let mut frame = size.to_vec();
        frame.resize(u32::from_le_bytes(size) as usize, 0);
        r.read_exact(&mut frame[4..]).await.unwrap();
        apex_ninep::parse(&frame).unwrap()
    }

    async fn reply(w: &mut (impl AsyncWrite + Unpin), tag: u16, body: Fcall) {
        w.write_all(&apex_ninep::to_bytes(&Msg { tag, body })).await.unwrap();
        w.flush().await.unwrap();
    }

    /// A server that updates its keys (as rustls does before a key has
    /// sealed too much, and at a peer's request) between replies of
    /// many records, its messages cut into records of 100 bytes: the
    /// client opens what comes after under the new keys, and answers the
    /// update, so that what it seals next still opens.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_key_update_between_replies_is_followed_both_ways() {
        let dir = std::env::temp_dir().join(format!("apex-tls-keyupdate-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let (config, pin) = crate::access::tls::server(&dir).unwrap();
        // Records of at most 100 bytes: every message, the session
        // tickets sent after the handshake among them, split across many.
        let mut config = (*config).clone();
        config.max_fragment_size = Some(100);
        // Session tickets, which the daemon does not send, are taken.
        config.send_tls13_tickets = 2;
        let config = std::sync::Arc::new(config);
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let data: Vec<u8> = (0..300_000u32).map(|i| (i % 251) as u8).collect();
        let sent = data.clone();
        let server = tokio::spawn(async move {
            let (tcp, _) = listener.accept().await.unwrap();
            let mut tls = tokio_rustls::TlsAcceptor::from(config).accept(tcp).await.unwrap();
            loop {
                let msg = frame(&mut tls).await;
                let body = match msg.body {
                    Fcall::Tversion { msize, .. } => Fcall::Rversion { msize, version: "9P2000".into() },
                    Fcall::Tread { offset, count, .. } => {
                        let from = (offset as usize).min(sent.len());
                        Fcall::Rread { data: sent[from..(from + count as usize).min(sent.len())].to_vec() }
                    }
                    Fcall::Tclunk { .. } => {
                        reply(&mut tls, msg.tag, Fcall::Rclunk).await;
                        return;
                    }
                    other => panic!("unexpected {other:?}"),
                };
                reply(&mut tls, msg.tag, body).await;
                // The next reply goes under new keys, and the client is
                // asked to change its own.
                tls.get_mut().1.refresh_traffic_keys().unwrap();
            }
        });
        let c = connect("127.0.0.1", port, &pin, 1 << 20).await.unwrap();
        for offset in [0u64, 100_000, 200_000] {
            match c.rpc(Fcall::Tread { fid: 7, offset, count: 100_000 }).await.unwrap() {
                Fcall::Rread { data: got } => {
                    assert!(got == data[offset as usize..offset as usize + 100_000], "the read at {offset}")
                }
                other => panic!("{other:?}"),
            }
        }
        assert!(matches!(c.rpc(Fcall::Tclunk { fid: 7 }).await.unwrap(), Fcall::Rclunk));
        server.await.unwrap();
        let _ = std::fs::remove_dir_all(&dir);
    }
}
