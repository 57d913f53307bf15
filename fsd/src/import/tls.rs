//! The TLS side of an import: TCP to `--listen tcp!HOST!PORT`, TLS 1.3
//! trusting the pinned certificate alone, and the 9P client over it,
//! which reads and writes a socket of its own: a task moves the bytes
//! between that socket and the TLS stream.

use super::ImportError;
use apex_ninep::Client;
use std::time::Duration;

/// The bridge's buffer each way.
const BRIDGE: usize = 1 << 20;

/// Connects, verifies the pin, and speaks Tversion (asking for `msize`).
pub async fn connect(
    host: &str,
    port: u16,
    pin: &str,
    msize: u32,
) -> Result<(Client, tokio::task::JoinHandle<()>), ImportError> {
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
    let mut tls = tokio::time::timeout(wait, connector.connect(crate::access::tls::server_name(), tcp))
        .await
        .map_err(|_| ImportError::Timeout { remote: remote.clone(), wait })?
        .map_err(|e| ImportError::Tls { remote: remote.clone(), why: e.to_string() })?;
    tls.get_mut().1.set_buffer_limit(None);
    let (ours, theirs) = tokio::net::UnixStream::pair()?;
    // Room for a whole reply each way, as a dialled socket gets.
    for end in [std::os::fd::AsRawFd::as_raw_fd(&ours), std::os::fd::AsRawFd::as_raw_fd(&theirs)] {
        room(end, msize);
    }
    let task = tokio::spawn(async move {
        let (mut tls, mut theirs) = (tls, theirs);
        // Buffers the size of a whole large message: a 1 MiB reply is
        // moved in a few copies, not a hundred and twenty-eight.
        let _ = tokio::io::copy_bidirectional_with_sizes(&mut tls, &mut theirs, BRIDGE, BRIDGE).await;
    });
    let handshake = tokio::time::timeout(Duration::from_secs(30), Client::handshake(ours, msize)).await;
    match handshake {
        Ok(Ok(client)) => Ok((client, task)),
        Ok(Err(why)) => {
            task.abort();
            Err(ImportError::Protocol { remote, why })
        }
        Err(_) => {
            task.abort();
            Err(ImportError::Timeout { remote, wait: Duration::from_secs(30) })
        }
    }
}

/// Lets `bytes` wait unread in the socket `fd`'s buffer (the kernel may
/// cap it).
fn room(fd: std::os::fd::RawFd, bytes: u32) {
    let size = bytes.min(i32::MAX as u32) as libc::c_int;
    set_int(fd, libc::SOL_SOCKET, libc::SO_SNDBUF, size);
    set_int(fd, libc::SOL_SOCKET, libc::SO_RCVBUF, size);
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

/// TCP keepalive probes from 15 s of silence, every 5 s, 3 unanswered
/// ending the connection: a link gone without a reset is noticed, and the
/// import reconnects.
fn keep_alive(fd: std::os::fd::RawFd) {
    set_int(fd, libc::SOL_SOCKET, libc::SO_KEEPALIVE, 1);
    set_int(fd, libc::IPPROTO_TCP, libc::TCP_KEEPIDLE, 15);
    set_int(fd, libc::IPPROTO_TCP, libc::TCP_KEEPINTVL, 5);
    set_int(fd, libc::IPPROTO_TCP, libc::TCP_KEEPCNT, 3);
}
