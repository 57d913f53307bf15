//! The TLS side of an import: TCP to `--listen tcp!HOST!PORT`, TLS 1.3
//! trusting the pinned certificate alone, and the 9P client over it.
//! Once the handshake is done the client reads and writes the TCP socket
//! itself, with [`Sealing`] as its record layer: no task and no second
//! socket between it and the network.

use super::ImportError;
use apex_ninep::layer::{Layer, Wire};
use apex_ninep::Client;
use std::io::{self, BufRead, Read, Write};
use std::sync::{Mutex, MutexGuard, PoisonError};
use std::time::Duration;

/// Bytes read from the socket at once: rustls asks for 4 KiB at a time,
/// which would be two hundred and fifty read(2)s for a 1 MiB reply.
const STAGE: usize = 256 * 1024;

/// Connects, verifies the pin, and speaks Tversion (asking for `msize`).
pub async fn connect(host: &str, port: u16, pin: &str, msize: u32) -> Result<Client, ImportError> {
    let remote = format!("tcp!{host}!{port}");
    let config =
        crate::access::tls::client(pin).map_err(|e| ImportError::Tls { remote: remote.clone(), why: e.to_string() })?;
    let wait = super::CONNECT_WAIT;
    let tcp = tokio::time::timeout(wait, tokio::net::TcpStream::connect((host, port)))
        .await
        .map_err(|_| ImportError::Timeout { remote: remote.clone(), wait })?
        .map_err(|e| ImportError::Tls { remote: remote.clone(), why: e.to_string() })?;
    let _ = tcp.set_nodelay(true);
    keep_alive(std::os::fd::AsRawFd::as_raw_fd(&tcp));
    let connector = tokio_rustls::TlsConnector::from(config);
    let tls = tokio::time::timeout(wait, connector.connect(crate::access::tls::server_name(), tcp))
        .await
        .map_err(|_| ImportError::Timeout { remote: remote.clone(), wait })?
        .map_err(|e| ImportError::Tls { remote: remote.clone(), why: e.to_string() })?;
    let (tcp, mut conn) = tls.into_inner();
    // A whole request is sealed at once, not 64 KiB of it.
    conn.set_buffer_limit(None);
    let sealing = Sealing(Mutex::new(Sealed {
        conn,
        staged: vec![0; STAGE].into_boxed_slice(),
        filled: 0,
        at: 0,
        closed: false,
    }));
    let handshake =
        tokio::time::timeout(Duration::from_secs(30), Client::handshake_through(tcp, Box::new(sealing), msize)).await;
    match handshake {
        Ok(Ok(client)) => Ok(client),
        Ok(Err(why)) => Err(ImportError::Protocol { remote, why }),
        Err(_) => Err(ImportError::Timeout { remote, wait: Duration::from_secs(30) }),
    }
}

/// TLS as the 9P client's record layer. Readers and writers take turns
/// with the connection's state, each for a few non-blocking calls.
struct Sealing(Mutex<Sealed>);

struct Sealed {
    conn: rustls::ClientConnection,
    /// Read from the socket and not yet given to rustls:
    /// `staged[at..filled]`.
    staged: Box<[u8]>,
    filled: usize,
    at: usize,
    /// Whether the end was said (once is enough).
    closed: bool,
}

impl Sealing {
    fn state(&self) -> MutexGuard<'_, Sealed> {
        // A panic elsewhere while it was held left it as it was.
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl Layer for Sealing {
    fn read(&self, socket: &mut Wire<'_>, into: &mut Vec<u8>, most: usize) -> io::Result<usize> {
        let start = into.len();
        loop {
            // Taken a step (a record, a socket read) at a time: a writer
            // of this connection waits for one record, not a whole reply.
            let mut state = self.state();
            let Sealed { conn, staged, filled, at, .. } = &mut *state;
            let got = into.len() - start;
            if got == most {
                return Ok(got);
            }
            match conn.reader().into_first_chunk() {
                Ok([]) => return Ok(got), // the peer said the end
                Ok(chunk) => {
                    let n = chunk.len().min(most - got);
                    into.extend_from_slice(&chunk[..n]);
                    conn.reader().consume(n);
                    continue;
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                // The stream ended without the peer saying so: an end all
                // the same, once what came before it is read.
                Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => return Ok(got),
                Err(e) => return if got > 0 { Ok(got) } else { Err(e) },
            }
            if *at == *filled {
                (*at, *filled) = match socket.read(staged) {
                    Ok(n) => (0, n),
                    // What is opened goes first; the error comes again.
                    Err(_) if got > 0 => return Ok(got),
                    Err(e) => return Err(e),
                };
                if *filled == 0 {
                    // The end of the stream, told to rustls.
                    conn.read_tls(&mut io::empty())?;
                    continue;
                }
            }
            *at += conn.read_tls(&mut &staged[*at..*filled])?;
            if let Err(e) = conn.process_new_packets() {
                // Its alert, as far as the socket takes it.
                let _ = conn.write_tls(socket);
                return Err(io::Error::new(io::ErrorKind::InvalidData, e));
            }
        }
    }

    fn seal(&self, parts: &[&[u8]]) -> io::Result<()> {
        let mut state = self.state();
        for part in parts {
            state.conn.writer().write_all(part)?;
        }
        Ok(())
    }

    fn flush(&self, socket: &mut Wire<'_>) -> io::Result<()> {
        let mut state = self.state();
        while state.conn.wants_write() {
            state.conn.write_tls(socket)?;
        }
        Ok(())
    }

    fn queued(&self) -> bool {
        self.state().conn.wants_write()
    }

    fn close(&self, socket: &mut Wire<'_>) {
        let mut state = self.state();
        if std::mem::replace(&mut state.closed, true) {
            return;
        }
        state.conn.send_close_notify();
        while state.conn.wants_write() {
            if state.conn.write_tls(socket).is_err() {
                break;
            }
        }
    }
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
