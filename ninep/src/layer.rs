//! A record layer between a client and its socket, such as TLS: the
//! client hands it plaintext to seal and asks it for plaintext opened,
//! and the layer reads and writes its records on the socket itself,
//! never waiting. So the client keeps waiting on the socket's own
//! readiness, with no task and no second socket between it and the
//! network (a bridge through a socketpair copied every byte twice more
//! and woke another thread for each).

use std::io::{self, IoSlice};
use std::mem::MaybeUninit;
use std::os::fd::AsRawFd;

/// Plaintext over a socket's records. Every call is made with the
/// socket non-blocking: a call that would wait says `WouldBlock`.
pub trait Layer: Send + Sync + 'static {
    /// Plaintext onto the end of `into`, at most `most` bytes: what is
    /// held, or what records read from `socket` now give. Ok(0) is the
    /// end of the stream. `WouldBlock` only when no plaintext is held and
    /// the socket has nothing more: the client then waits for the socket
    /// to be readable, and would not for plaintext held.
    fn read(&self, socket: &mut Wire<'_>, into: &mut Vec<u8>, most: usize) -> io::Result<usize>;

    /// Takes all of `parts` to send, in order, sealed into records that
    /// wait to be written (`flush`).
    fn seal(&self, parts: &[&[u8]]) -> io::Result<()>;

    /// Writes the records that wait: Ok once none does, `WouldBlock`
    /// when the socket has no room for the rest.
    fn flush(&self, socket: &mut Wire<'_>) -> io::Result<()>;

    /// Whether records wait to be written.
    fn queued(&self) -> bool;

    /// Says the end to the peer, as far as the socket takes it now.
    fn close(&self, socket: &mut Wire<'_>);
}

/// The socket as a layer reads and writes it: read(2), and sendmsg(2)
/// gathered and with MSG_NOSIGNAL (a server gone is an error, never a
/// SIGPIPE).
pub struct Wire<'a> {
    socket: &'a std::fs::File,
}

impl<'a> Wire<'a> {
    pub(crate) fn new(socket: &'a std::fs::File) -> Wire<'a> {
        Wire { socket }
    }

    /// read(2) into room not yet written (a Vec's spare capacity, where
    /// a frame's bytes are to go): the first bytes it says it read are
    /// written then.
    pub fn read_spare(&mut self, buf: &mut [MaybeUninit<u8>]) -> io::Result<usize> {
        // SAFETY: read(2) writes at most `buf.len()` bytes into `buf`,
        // memory we hold mutably; it needs none of it written before.
        let got = unsafe { libc::read(self.socket.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len()) };
        match got {
            0.. => Ok(got as usize),
            _ => Err(io::Error::last_os_error()),
        }
    }
}

impl io::Read for Wire<'_> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        io::Read::read(&mut &*self.socket, buf)
    }
}

impl io::Write for Wire<'_> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        crate::io::send_gathered(self.socket.as_raw_fd(), &[IoSlice::new(buf)])
    }

    fn write_vectored(&mut self, bufs: &[IoSlice<'_>]) -> io::Result<usize> {
        // At most IOV_MAX parts a call; the rest go on the next.
        crate::io::send_gathered(self.socket.as_raw_fd(), &bufs[..bufs.len().min(1024)])
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}
