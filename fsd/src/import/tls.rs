//! The TLS side of an import: TCP to `--listen tcp!HOST!PORT`, TLS 1.3
//! trusting the pinned certificate alone, and the 9P client over it.
//! The client reads and writes the TCP socket itself, with [`Sealing`] as
//! its record layer: no task and no second socket between it and the
//! network. rustls's unbuffered connection opens records where they were
//! read, in a buffer of ours (its buffered one copies them in 4 KiB at a
//! time first), and seals them into another of ours, written as it is.

use super::ImportError;
use apex_ninep::layer::{Layer, Wire};
use apex_ninep::Client;
use rustls::client::{ClientConnectionData, UnbufferedClientConnection};
use rustls::unbuffered::{ConnectionState, EncodeError, EncryptError, UnbufferedStatus, WriteTraffic};
use std::io::{self, Read, Write};
use std::sync::{Mutex, MutexGuard, PoisonError};
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// Bytes read from the socket at once: a 1 MiB reply in four read(2)s.
const STAGE: usize = 256 * 1024;
/// The most a TLS 1.3 record takes on the wire: its head, 16 KiB of
/// plaintext, its content type and padding, and the tag (RFC 8446 5.2).
const RECORD_MAX: usize = 5 + (1 << 14) + 256;
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
    let mut conn = UnbufferedClientConnection::new(config, crate::access::tls::server_name())
        .map_err(|e| refused(e.to_string()))?;
    let (incoming, start, end) = tokio::time::timeout(wait, handshake(&mut tcp, &mut conn))
        .await
        .map_err(|_| ImportError::Timeout { remote: remote.clone(), wait })?
        .map_err(|e| refused(e.to_string()))?;
    let sealing = Sealing(Mutex::new(Sealed {
        conn,
        incoming,
        start,
        end,
        opened: Vec::new(),
        taken: 0,
        outgoing: Vec::new(),
        sent: 0,
        peer_closed: false,
        closed: false,
        broken: None,
    }));
    let handshake =
        tokio::time::timeout(Duration::from_secs(30), Client::handshake_through(tcp, Box::new(sealing), msize)).await;
    match handshake {
        Ok(Ok(client)) => Ok(client),
        Ok(Err(why)) => Err(ImportError::Protocol { remote, why }),
        Err(_) => Err(ImportError::Timeout { remote, wait: Duration::from_secs(30) }),
    }
}

/// What the handshake does next, once its state is let go of.
enum Step {
    Read,
    Again,
    Done,
}

/// TLS's handshake over `tcp`; returns the buffer records are read into,
/// with what came after the handshake at `[start..end]`.
async fn handshake(
    tcp: &mut tokio::net::TcpStream,
    conn: &mut UnbufferedClientConnection,
) -> io::Result<(Box<[u8]>, usize, usize)> {
    let mut incoming = vec![0; STAGE + RECORD_MAX + READ_ALIGN].into_boxed_slice();
    let mut filled = 0;
    let mut outgoing = Vec::new();
    loop {
        let UnbufferedStatus { discard, state } = conn.process_tls_records(&mut incoming[..filled]);
        let step = match state.map_err(invalid)? {
            ConnectionState::EncodeTlsData(mut data) => {
                encode(&mut outgoing, HANDSHAKE_ROOM, |out| data.encode(out))?;
                Step::Again
            }
            ConnectionState::TransmitTlsData(data) => {
                tcp.write_all(&outgoing).await?;
                outgoing.clear();
                data.done();
                Step::Again
            }
            ConnectionState::BlockedHandshake => Step::Read,
            // Done; records that came with its end are opened by the
            // first read.
            ConnectionState::WriteTraffic(_) | ConnectionState::ReadTraffic(_) => Step::Done,
            ConnectionState::PeerClosed | ConnectionState::Closed => {
                return Err(io::Error::new(io::ErrorKind::UnexpectedEof, "the daemon closed the connection"))
            }
            other => return Err(invalid(format!("unexpected TLS state in the handshake: {other:?}"))),
        };
        incoming.copy_within(discard..filled, 0);
        filled -= discard;
        match step {
            Step::Again => {}
            Step::Done => {
                // What rustls encoded and has not yet asked to be sent
                // (its Finished, when the server's data came with its
                // own): sent now; rustls's asking is answered later.
                tcp.write_all(&outgoing).await?;
                return Ok((incoming, 0, filled));
            }
            Step::Read => match tcp.read(&mut incoming[filled..]).await? {
                0 => return Err(io::Error::new(io::ErrorKind::UnexpectedEof, "the daemon closed the connection")),
                n => filled += n,
            },
        }
    }
}

/// Puts what `write` writes onto the end of `out`: `room` bytes are made
/// for it, or as many as it says it needs.
fn encode<E: Into<Sizing>>(
    out: &mut Vec<u8>,
    mut room: usize,
    mut write: impl FnMut(&mut [u8]) -> Result<usize, E>,
) -> io::Result<()> {
    let len = out.len();
    loop {
        out.resize(len + room, 0);
        match write(&mut out[len..]).map_err(Into::into) {
            Ok(n) => {
                out.truncate(len + n);
                return Ok(());
            }
            Err(Sizing::Needs(size)) if size > room => room = size,
            Err(Sizing::Needs(size)) => {
                out.truncate(len);
                return Err(invalid(format!("rustls asked for {size} bytes to seal into, and had them")));
            }
            Err(Sizing::Failed(why)) => {
                out.truncate(len);
                return Err(invalid(why));
            }
        }
    }
}

/// Why rustls did not seal: too little room (it says how much), or
/// anything else.
enum Sizing {
    Needs(usize),
    Failed(String),
}

impl From<EncodeError> for Sizing {
    fn from(e: EncodeError) -> Sizing {
        match e {
            EncodeError::InsufficientSize(s) => Sizing::Needs(s.required_size),
            e => Sizing::Failed(e.to_string()),
        }
    }
}

impl From<EncryptError> for Sizing {
    fn from(e: EncryptError) -> Sizing {
        match e {
            EncryptError::InsufficientSize(s) => Sizing::Needs(s.required_size),
            e => Sizing::Failed(e.to_string()),
        }
    }
}

/// Room first made for a handshake message or an alert.
const HANDSHAKE_ROOM: usize = 1024;

/// Bytes `plaintext` bytes take sealed: each record's head, content type
/// and tag (rustls pads nothing).
fn sealed_size(plaintext: usize) -> usize {
    plaintext + plaintext.div_ceil(1 << 14).max(1) * (5 + 1 + 16)
}

fn invalid(e: impl ToString) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, e.to_string())
}

/// TLS as the 9P client's record layer. Readers and writers take turns
/// with the connection's state, each for a step (a record, a read(2)).
struct Sealing(Mutex<Sealed>);

struct Sealed {
    conn: UnbufferedClientConnection,
    /// Records read from the socket and not yet opened:
    /// `incoming[start..end]`.
    incoming: Box<[u8]>,
    start: usize,
    end: usize,
    /// A record's plaintext that did not fit the read that opened it:
    /// `opened[taken..]`.
    opened: Vec<u8>,
    taken: usize,
    /// Records sealed and not yet written: `outgoing[sent..]`.
    outgoing: Vec<u8>,
    sent: usize,
    /// Whether the peer said the end.
    peer_closed: bool,
    /// Whether the end was said (once is enough).
    closed: bool,
    /// Why the stream can be read no further (a record that did not
    /// open): said to every read, once what was opened before it is
    /// read, and to every seal.
    broken: Option<String>,
}

impl Sealing {
    fn state(&self) -> MutexGuard<'_, Sealed> {
        // A panic elsewhere while it was held left it as it was.
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl Sealed {
    /// One step of opening: a record's plaintext onto `into` (at most
    /// `room` bytes, the rest kept), a handshake message handled, or
    /// `Ok(false)` when more must be read first.
    fn open_one(&mut self, into: &mut Vec<u8>, room: usize) -> io::Result<bool> {
        let UnbufferedStatus { discard, state } =
            self.conn.process_tls_records(&mut self.incoming[self.start..self.end]);
        let more = match state {
            Ok(ConnectionState::ReadTraffic(mut traffic)) => {
                let mut room = room;
                let mut extra = 0;
                while let Some(record) = traffic.next_record() {
                    let record = record.map_err(invalid)?;
                    extra += record.discard;
                    let n = record.payload.len().min(room);
                    into.extend_from_slice(&record.payload[..n]);
                    room -= n;
                    if self.taken == self.opened.len() {
                        self.opened.clear();
                        self.taken = 0;
                    }
                    self.opened.extend_from_slice(&record.payload[n..]);
                }
                self.start += extra;
                true
            }
            // Something of the handshake's to send back (a key update's
            // answer): written with the records, in order.
            Ok(ConnectionState::EncodeTlsData(mut data)) => {
                encode(&mut self.outgoing, HANDSHAKE_ROOM, |out| data.encode(out))?;
                true
            }
            Ok(ConnectionState::TransmitTlsData(data)) => {
                data.done();
                true
            }
            Ok(ConnectionState::PeerClosed) | Ok(ConnectionState::Closed) => {
                self.peer_closed = true;
                true
            }
            Ok(ConnectionState::WriteTraffic(_)) | Ok(ConnectionState::BlockedHandshake) => false,
            Ok(other) => return Err(invalid(format!("unexpected TLS state: {other:?}"))),
            Err(e) => {
                self.start += discard;
                self.broken = Some(e.to_string());
                self.alert();
                return Err(invalid(e));
            }
        };
        self.start += discard;
        Ok(more)
    }

    /// Queues the alert rustls has for an error, if it has one.
    fn alert(&mut self) {
        let status = self.conn.process_tls_records(&mut self.incoming[self.start..self.end]);
        if let Ok(ConnectionState::EncodeTlsData(mut data)) = status.state {
            let _ = encode(&mut self.outgoing, HANDSHAKE_ROOM, |out| data.encode(out));
        }
        self.start += status.discard;
    }

    /// Room for a read(2) at an aligned address: what is not yet opened (a
    /// part of a record) moved to end where the read begins.
    fn make_room(&mut self) -> usize {
        let base = self.incoming.as_ptr().align_offset(READ_ALIGN);
        let kept = self.end - self.start;
        let to = base + (READ_ALIGN - kept % READ_ALIGN) % READ_ALIGN;
        if self.start != to {
            self.incoming.copy_within(self.start..self.end, to);
        }
        (self.start, self.end) = (to, to + kept);
        self.end
    }

    /// Seals `plaintext` into records that wait to be written.
    fn seal(&mut self, plaintext: &[u8]) -> io::Result<()> {
        self.writing(sealed_size(plaintext.len()), |traffic, out| traffic.encrypt(plaintext, out))
    }

    /// Puts what `write` seals (once rustls may seal) onto the records
    /// that wait, `room` bytes made for it first. What rustls has to deal
    /// with first is dealt with: records read and not yet opened (their
    /// plaintext kept for the next read), handshake messages to send back.
    /// The records read are passed to rustls each time, never nothing: it
    /// may hold a part of a handshake message among them.
    fn writing<E: Into<Sizing>>(
        &mut self,
        room: usize,
        mut write: impl FnMut(&mut WriteTraffic<'_, ClientConnectionData>, &mut [u8]) -> Result<usize, E>,
    ) -> io::Result<()> {
        if let Some(why) = &self.broken {
            return Err(invalid(why));
        }
        if self.sent == self.outgoing.len() {
            self.outgoing.clear();
            self.sent = 0;
        }
        loop {
            let Sealed { conn, incoming, start, end, opened, taken, outgoing, peer_closed, .. } = self;
            let UnbufferedStatus { discard, state } = conn.process_tls_records(&mut incoming[*start..*end]);
            let step = match state {
                Ok(ConnectionState::WriteTraffic(mut traffic)) => {
                    let sealed = encode(outgoing, room, |out| write(&mut traffic, out));
                    *start += discard;
                    return sealed;
                }
                Ok(ConnectionState::EncodeTlsData(mut data)) => {
                    encode(outgoing, HANDSHAKE_ROOM, |out| data.encode(out))
                }
                Ok(ConnectionState::TransmitTlsData(data)) => {
                    data.done();
                    Ok(())
                }
                // Records read and not yet opened: their plaintext kept
                // for the next read.
                Ok(ConnectionState::ReadTraffic(mut traffic)) => {
                    let mut extra = 0;
                    let mut kept = Ok(());
                    while let Some(record) = traffic.next_record() {
                        match record {
                            Ok(record) => {
                                extra += record.discard;
                                if *taken == opened.len() {
                                    opened.clear();
                                    *taken = 0;
                                }
                                opened.extend_from_slice(record.payload);
                            }
                            Err(e) => {
                                kept = Err(invalid(e));
                                break;
                            }
                        }
                    }
                    *start += extra;
                    kept
                }
                Ok(ConnectionState::PeerClosed) => {
                    *peer_closed = true;
                    Ok(())
                }
                Ok(ConnectionState::Closed) => {
                    Err(io::Error::new(io::ErrorKind::BrokenPipe, "the TLS connection is closed"))
                }
                Ok(other) => Err(invalid(format!("unexpected TLS state: {other:?}"))),
                Err(e) => Err(invalid(e)),
            };
            *start += discard;
            step?;
        }
    }
}

impl Layer for Sealing {
    fn read(&self, socket: &mut Wire<'_>, into: &mut Vec<u8>, most: usize) -> io::Result<usize> {
        let start = into.len();
        loop {
            // A step at a time: a writer of this connection waits for one
            // record, not a whole reply.
            let mut state = self.state();
            let got = into.len() - start;
            if got == most {
                return Ok(got);
            }
            if state.taken < state.opened.len() {
                let Sealed { opened, taken, .. } = &mut *state;
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
            match state.open_one(into, most - got) {
                Ok(true) => continue,
                Ok(false) => {}
                Err(e) => {
                    // Its alert, as far as the socket takes it.
                    let _ = flush_outgoing(&mut state, socket);
                    return if got > 0 { Ok(got) } else { Err(e) };
                }
            }
            let at = state.make_room();
            match socket.read(&mut state.incoming[at..]) {
                // The stream ended without the peer saying so: an end all
                // the same, once what came before it is read.
                Ok(0) => return Ok(got),
                Ok(n) => state.end += n,
                // What is opened goes first; the error comes again.
                Err(_) if got > 0 => return Ok(got),
                Err(e) => return Err(e),
            }
        }
    }

    fn seal(&self, parts: &[&[u8]]) -> io::Result<()> {
        let mut state = self.state();
        // Parts that fit one record go in one.
        let total: usize = parts.iter().map(|p| p.len()).sum();
        if parts.len() > 1 && total <= 1 << 14 {
            return state.seal(&parts.concat());
        }
        for part in parts {
            state.seal(part)?;
        }
        Ok(())
    }

    fn flush(&self, socket: &mut Wire<'_>) -> io::Result<()> {
        flush_outgoing(&mut self.state(), socket)
    }

    fn queued(&self) -> bool {
        let state = self.state();
        state.sent < state.outgoing.len()
    }

    fn close(&self, socket: &mut Wire<'_>) {
        let mut state = self.state();
        if std::mem::replace(&mut state.closed, true) {
            return;
        }
        let _ = state.writing(HANDSHAKE_ROOM, |traffic, out| traffic.queue_close_notify(out));
        let _ = flush_outgoing(&mut state, socket);
    }
}

/// Writes the records that wait: Ok once none does.
fn flush_outgoing(state: &mut Sealed, socket: &mut Wire<'_>) -> io::Result<()> {
    while state.sent < state.outgoing.len() {
        match socket.write(&state.outgoing[state.sent..])? {
            0 => return Err(io::ErrorKind::WriteZero.into()),
            n => state.sent += n,
        }
    }
    state.outgoing.clear();
    state.sent = 0;
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
    use tokio::io::{AsyncRead, AsyncWrite};

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
