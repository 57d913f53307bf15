//! Writing a frame whose bulk data lies apart from its header.
//!
//! `codec::encode_frame` leaves large Rread/Twrite data where it is; this
//! sends header and data with one writev, so the peer wakes once per frame
//! and the data is not copied into a frame buffer first; and a Unix
//! socket is given room for such a frame; and a socket's peer is heard
//! closing it.

use std::io::IoSlice;
use std::os::fd::{AsFd, OwnedFd, RawFd};
use tokio::io::unix::AsyncFd;
use tokio::io::{AsyncWrite, AsyncWriteExt, Interest};

/// Writes all of `head` then all of `data`, gathered (as few writes as the
/// stream takes).
pub async fn write_two(w: &mut (impl AsyncWrite + Unpin), mut head: &[u8], mut data: &[u8]) -> std::io::Result<()> {
    while !head.is_empty() || !data.is_empty() {
        let n = w.write_vectored(&[IoSlice::new(head), IoSlice::new(data)]).await?;
        if n == 0 {
            return Err(std::io::ErrorKind::WriteZero.into());
        }
        let from_head = n.min(head.len());
        head = &head[from_head..];
        data = &data[n - from_head..];
    }
    Ok(())
}

/// Asks for room for `bytes` in socket `fd`'s send buffer, so that a frame
/// of up to that size goes in at once instead of a default buffer's worth
/// (208 KiB on Linux) per wake-up of the reader: a 1 MiB Rread (a body, a
/// Welcome's part) then takes one pass of the scheduler, not five. The
/// kernel caps it at `net.core.wmem_max` (208 KiB on a stock kernel, which
/// then keeps 416 KiB: two passes); the room is a limit on what may wait
/// unread, not memory taken. A socket that refuses keeps its default.
pub fn room_for(fd: RawFd, bytes: u32) {
    let size = bytes.min(i32::MAX as u32) as libc::c_int;
    // SAFETY: setsockopt reads a c_int from a live local; `fd` is an open
    // socket its caller owns, and a bad one only makes the call fail.
    unsafe {
        libc::setsockopt(
            fd,
            libc::SOL_SOCKET,
            libc::SO_SNDBUF,
            (&size as *const libc::c_int).cast(),
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        );
    }
}

/// Hears a socket's peer close its end both ways (not only its writing
/// half, after which it may still read): a second registration of the
/// socket, whose readiness is cleared to wait for the next change without
/// holding up writes through the socket's own.
pub struct HangUp(AsyncFd<OwnedFd>);

impl HangUp {
    /// None where the descriptor cannot be duplicated or registered.
    pub fn watch(socket: &impl AsFd) -> Option<HangUp> {
        let fd = socket.as_fd().try_clone_to_owned().ok()?;
        // SAFETY: `fd` is a descriptor of the AsyncFd's own (a duplicate),
        // open and the same until the AsyncFd drops it.
        unsafe { AsyncFd::register_with_interest(fd, Interest::WRITABLE) }.ok().map(HangUp)
    }

    /// Returns once the peer has closed its end both ways.
    pub async fn heard(&self) {
        loop {
            let Ok(mut ready) = self.0.ready(Interest::WRITABLE).await else {
                return std::future::pending().await;
            };
            if ready.ready().is_write_closed() {
                return;
            }
            ready.clear_ready();
        }
    }
}

/// One sendmsg(2) of `parts`, gathered, with MSG_NOSIGNAL (a server gone is an EPIPE error, never a SIGPIPE).
pub(crate) fn send_gathered(fd: std::os::fd::RawFd, parts: &[IoSlice<'_>]) -> std::io::Result<usize> {
    // SAFETY: an all-zero msghdr is a valid empty one (no name, no control).
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    // IoSlice is laid out as iovec on Unix (std guarantees it).
    msg.msg_iov = parts.as_ptr() as *mut libc::iovec;
    msg.msg_iovlen = parts.len() as _;
    // SAFETY: `msg` points at iovecs over live slices, which sendmsg only
    // reads, for the length of the call.
    let sent = unsafe { libc::sendmsg(fd, &msg, libc::MSG_NOSIGNAL) };
    match sent {
        n if n >= 0 => Ok(n as usize),
        _ => Err(std::io::Error::last_os_error()),
    }
}

#[cfg(test)]
mod tests {
    use std::os::fd::AsRawFd;

    fn send_buffer(fd: std::os::fd::RawFd) -> i32 {
        let mut size: libc::c_int = 0;
        let mut len = std::mem::size_of::<libc::c_int>() as libc::socklen_t;
        // SAFETY: getsockopt writes at most `len` bytes into a live local.
        let rc = unsafe {
            libc::getsockopt(fd, libc::SOL_SOCKET, libc::SO_SNDBUF, (&mut size as *mut libc::c_int).cast(), &mut len)
        };
        assert_eq!(rc, 0);
        size
    }

    #[test]
    #[cfg(target_os = "linux")]
    fn a_socket_gets_room_for_a_frame_as_far_as_the_kernel_allows() {
        let (a, _b) = std::os::unix::net::UnixStream::pair().unwrap();
        super::room_for(a.as_raw_fd(), 1 << 20);
        let cap: i32 = std::fs::read_to_string("/proc/sys/net/core/wmem_max").unwrap().trim().parse().unwrap();
        // Linux keeps twice what it is asked for, for its own bookkeeping.
        assert_eq!(send_buffer(a.as_raw_fd()), 2 * (1 << 20).min(cap));
    }
}
