//! Passing a file descriptor over a Unix socket (SCM_RIGHTS), for
//! plan9port's `Topenfd`: after the `Ropenfd` reply the server sends one
//! byte carrying the descriptor, and the client receives it with
//! [`recv_fd`].

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};

/// Sends `fd` over the Unix socket `socket` as one byte with SCM_RIGHTS.
/// The socket may be non-blocking: a full socket buffer is waited out.
pub async fn send_fd(socket: RawFd, fd: &OwnedFd) -> io::Result<()> {
    for _ in 0..10_000 {
        match send_once(socket, fd.as_raw_fd()) {
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                tokio::time::sleep(std::time::Duration::from_millis(1)).await
            }
            other => return other,
        }
    }
    Err(io::Error::new(io::ErrorKind::TimedOut, "the client did not drain its socket"))
}

/// Room for one descriptor's control message, 8-aligned.
const CMSG_SPACE: usize = 64;

#[repr(C, align(8))]
struct Control([u8; CMSG_SPACE]);

fn send_once(socket: RawFd, fd: RawFd) -> io::Result<()> {
    let mut byte = [0u8; 1];
    let mut iov = libc::iovec { iov_base: byte.as_mut_ptr().cast(), iov_len: 1 };
    let mut control = Control([0; CMSG_SPACE]);
    // SAFETY: msghdr is plain data; every pointer set below points at a
    // local that outlives the sendmsg call, and the control buffer is
    // large enough (CMSG_SPACE of one int is at most 24 bytes).
    unsafe {
        let space = libc::CMSG_SPACE(std::mem::size_of::<RawFd>() as u32) as usize;
        let mut msg: libc::msghdr = std::mem::zeroed();
        msg.msg_iov = &mut iov;
        msg.msg_iovlen = 1;
        msg.msg_control = control.0.as_mut_ptr().cast();
        msg.msg_controllen = space as _;
        let cmsg = libc::CMSG_FIRSTHDR(&msg);
        (*cmsg).cmsg_level = libc::SOL_SOCKET;
        (*cmsg).cmsg_type = libc::SCM_RIGHTS;
        (*cmsg).cmsg_len = libc::CMSG_LEN(std::mem::size_of::<RawFd>() as u32) as _;
        std::ptr::write_unaligned(libc::CMSG_DATA(cmsg).cast::<RawFd>(), fd);
        match libc::sendmsg(socket, &msg, libc::MSG_NOSIGNAL) {
            1 => Ok(()),
            -1 => Err(io::Error::last_os_error()),
            _ => Err(io::Error::new(io::ErrorKind::WriteZero, "sendmsg sent nothing")),
        }
    }
}

/// Receives the one byte carrying a descriptor from the blocking Unix
/// socket `socket` (a client's side of `Topenfd`).
pub fn recv_fd(socket: RawFd) -> io::Result<OwnedFd> {
    let mut byte = [0u8; 1];
    let mut iov = libc::iovec { iov_base: byte.as_mut_ptr().cast(), iov_len: 1 };
    let mut control = Control([0; CMSG_SPACE]);
    // SAFETY: as in `send_once`; the descriptor read out of the control
    // message is new to this process and owned from here on.
    unsafe {
        let mut msg: libc::msghdr = std::mem::zeroed();
        msg.msg_iov = &mut iov;
        msg.msg_iovlen = 1;
        msg.msg_control = control.0.as_mut_ptr().cast();
        msg.msg_controllen = CMSG_SPACE as _;
        let n = libc::recvmsg(socket, &mut msg, 0);
        if n < 0 {
            return Err(io::Error::last_os_error());
        }
        let cmsg = libc::CMSG_FIRSTHDR(&msg);
        if n == 0 || cmsg.is_null() || (*cmsg).cmsg_type != libc::SCM_RIGHTS {
            return Err(io::Error::new(io::ErrorKind::InvalidData, "no descriptor came with the byte"));
        }
        let fd = std::ptr::read_unaligned(libc::CMSG_DATA(cmsg).cast::<RawFd>());
        Ok(OwnedFd::from_raw_fd(fd))
    }
}
