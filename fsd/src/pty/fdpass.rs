//! A line and a descriptor over a Unix socket (`SCM_RIGHTS`): how a
//! terminal's keeper hands its pty to a daemon, and the short names its
//! socket is reached by.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};

/// The longest line a keeper sends.
const LINE_MAX: usize = 256;

/// Sends `line` (a newline is added) and, with it, `fd`.
pub fn send(stream: &UnixStream, line: &str, fd: Option<RawFd>) -> io::Result<()> {
    let bytes = format!("{line}\n");
    let mut iov = libc::iovec { iov_base: bytes.as_ptr() as *mut libc::c_void, iov_len: bytes.len() };
    // Room for one descriptor, aligned as cmsghdr wants.
    let mut control = [0u64; 4];
    // SAFETY: msghdr is plain data; every pointer in it outlives the call.
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    msg.msg_iov = &mut iov;
    msg.msg_iovlen = 1;
    if let Some(fd) = fd {
        // SAFETY: CMSG_SPACE is a size computation.
        let space = unsafe { libc::CMSG_SPACE(std::mem::size_of::<RawFd>() as u32) } as usize;
        msg.msg_control = control.as_mut_ptr() as *mut libc::c_void;
        msg.msg_controllen = space;
        // SAFETY: the control buffer holds one header and one descriptor
        // (`space` bytes, within `control`).
        unsafe {
            let cmsg = libc::CMSG_FIRSTHDR(&msg);
            (*cmsg).cmsg_level = libc::SOL_SOCKET;
            (*cmsg).cmsg_type = libc::SCM_RIGHTS;
            (*cmsg).cmsg_len = libc::CMSG_LEN(std::mem::size_of::<RawFd>() as u32) as usize;
            std::ptr::write_unaligned(libc::CMSG_DATA(cmsg) as *mut RawFd, fd);
        }
    }
    // SAFETY: a valid socket and a msghdr filled above.
    let n = unsafe { libc::sendmsg(stream.as_raw_fd(), &msg, libc::MSG_NOSIGNAL) };
    match n {
        n if n == bytes.len() as isize => Ok(()),
        n if n < 0 => Err(io::Error::last_os_error()),
        _ => Err(io::Error::new(io::ErrorKind::WriteZero, "a keeper's line went out in part")),
    }
}

/// Receives one line (without its newline) and the descriptor sent with
/// it, if any. End of file is `UnexpectedEof`.
pub fn recv(stream: &UnixStream) -> io::Result<(String, Option<OwnedFd>)> {
    let mut line = Vec::new();
    let mut fd = None;
    loop {
        let mut byte = [0u8; 1];
        let mut iov = libc::iovec { iov_base: byte.as_mut_ptr() as *mut libc::c_void, iov_len: 1 };
        let mut control = [0u64; 4];
        // SAFETY: plain data, pointers valid for the call.
        let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
        msg.msg_iov = &mut iov;
        msg.msg_iovlen = 1;
        msg.msg_control = control.as_mut_ptr() as *mut libc::c_void;
        msg.msg_controllen = std::mem::size_of_val(&control);
        // SAFETY: as above; the kernel writes within the buffers given.
        let n = unsafe { libc::recvmsg(stream.as_raw_fd(), &mut msg, libc::MSG_CMSG_CLOEXEC) };
        if n < 0 {
            let e = io::Error::last_os_error();
            if e.kind() == io::ErrorKind::Interrupted {
                continue;
            }
            return Err(e);
        }
        // SAFETY: the headers the kernel filled in, walked as cmsg(3) says.
        unsafe {
            let mut cmsg = libc::CMSG_FIRSTHDR(&msg);
            while !cmsg.is_null() {
                if (*cmsg).cmsg_level == libc::SOL_SOCKET && (*cmsg).cmsg_type == libc::SCM_RIGHTS {
                    // Every descriptor sent is this process's now: the
                    // first kept, any more closed (owned, then dropped).
                    let data = (*cmsg).cmsg_len as usize - libc::CMSG_LEN(0) as usize;
                    for i in 0..data / std::mem::size_of::<RawFd>() {
                        let at = (libc::CMSG_DATA(cmsg) as *const RawFd).add(i);
                        let got = OwnedFd::from_raw_fd(std::ptr::read_unaligned(at));
                        fd.get_or_insert(got);
                    }
                }
                cmsg = libc::CMSG_NXTHDR(&msg, cmsg);
            }
        }
        if n == 0 {
            return Err(io::Error::new(io::ErrorKind::UnexpectedEof, "the keeper hung up"));
        }
        match byte[0] {
            b'\n' => return Ok((String::from_utf8_lossy(&line).into_owned(), fd)),
            b => line.push(b),
        }
        if line.len() > LINE_MAX {
            return Err(io::Error::new(io::ErrorKind::InvalidData, "a keeper's line is too long"));
        }
    }
}

/// A name `path` can be bound or dialled by: itself when it fits a
/// socket address, else through `/proc/self/fd` and its directory held
/// open (Linux), which the second value keeps.
pub fn short_name(path: &Path) -> io::Result<(PathBuf, Option<OwnedFd>)> {
    // sun_path's 108 bytes, with room for the terminating NUL.
    if path.as_os_str().len() < 100 {
        return Ok((path.to_path_buf(), None));
    }
    let (Some(dir), Some(name)) = (path.parent(), path.file_name()) else {
        return Err(io::Error::new(io::ErrorKind::InvalidInput, "a socket path needs a directory and a name"));
    };
    let dir = std::fs::File::open(dir)?;
    let short = PathBuf::from(format!("/proc/self/fd/{}", dir.as_raw_fd())).join(name);
    if short.as_os_str().len() >= 100 {
        return Err(io::Error::new(io::ErrorKind::InvalidInput, "a socket's name is too long"));
    }
    Ok((short, Some(OwnedFd::from(dir))))
}
