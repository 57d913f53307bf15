//! A client's socket: whole frames written, replies read and cut into
//! messages by whichever request is waiting (`client::Client`), with no
//! task of its own in between.
//!
//! The socket is a non-blocking descriptor registered with tokio
//! (`AsyncFd`), so that every request waiting for a reply may wait for it
//! to become readable at once, and the one that reads can say when it has
//! drained it (a short read) without a second read(2) to find out.

use crate::codec::{check, data_head, parse, with_data};
use crate::fcall::Msg;
use crate::layer::{Layer, Wire};
use std::io::IoSlice;
use std::os::fd::{AsRawFd, OwnedFd};
use tokio::io::unix::{AsyncFd, AsyncFdReadyGuard};

/// The socket as the client holds it: its descriptor, registered for
/// readiness, and the record layer over it, if any (TLS).
pub struct Io {
    fd: AsyncFd<std::fs::File>,
    layer: Option<Box<dyn Layer>>,
}

/// The socket found readable or writable ([`Io::readable`], [`Io::writable`]).
pub type Ready<'a> = AsyncFdReadyGuard<'a, std::fs::File>;

impl Io {
    /// Waits for the socket to be readable.
    pub async fn readable(&self) -> std::io::Result<Ready<'_>> {
        self.fd.readable().await
    }

    /// Waits for the socket to have room.
    pub async fn writable(&self) -> std::io::Result<Ready<'_>> {
        self.fd.writable().await
    }

    /// Whether sealed records wait to be written.
    pub fn queued(&self) -> bool {
        self.layer.as_ref().is_some_and(|l| l.queued())
    }
}

/// A connected stream socket a client can run on: its descriptor, made
/// non-blocking. Sealed: the client reads and writes the descriptor as a
/// stream socket, so only the kinds here are one.
///
/// ```compile_fail
/// struct Mine;
/// impl apex_ninep::Socket for Mine {
///     fn into_fd(self) -> std::io::Result<std::os::fd::OwnedFd> {
///         unreachable!()
///     }
/// }
/// ```
pub trait Socket: sealed::Sealed {
    fn into_fd(self) -> std::io::Result<OwnedFd>;
}

mod sealed {
    /// Implemented only here: no other type can be a [`super::Socket`].
    pub trait Sealed {}
    impl Sealed for std::os::unix::net::UnixStream {}
    impl Sealed for std::net::TcpStream {}
    impl Sealed for tokio::net::UnixStream {}
    impl Sealed for tokio::net::TcpStream {}
}

impl Socket for std::os::unix::net::UnixStream {
    fn into_fd(self) -> std::io::Result<OwnedFd> {
        self.set_nonblocking(true)?;
        Ok(self.into())
    }
}

impl Socket for std::net::TcpStream {
    fn into_fd(self) -> std::io::Result<OwnedFd> {
        self.set_nonblocking(true)?;
        Ok(self.into())
    }
}

impl Socket for tokio::net::UnixStream {
    fn into_fd(self) -> std::io::Result<OwnedFd> {
        self.into_std()?.into_fd()
    }
}

impl Socket for tokio::net::TcpStream {
    fn into_fd(self) -> std::io::Result<OwnedFd> {
        self.into_std()?.into_fd()
    }
}

impl Drop for Io {
    /// A layer says the end before the socket closes (TLS's close_notify:
    /// the server sees a clean end, not a truncated stream).
    fn drop(&mut self) {
        if let Some(layer) = &self.layer {
            layer.close(&mut Wire::new(self.fd.get_ref()));
        }
    }
}

/// Registers `socket` with tokio's reactor (for reading and writing),
/// with `layer` over it.
pub fn register(socket: impl Socket, layer: Option<Box<dyn Layer>>) -> std::io::Result<Io> {
    let file = std::fs::File::from(socket.into_fd()?);
    // SAFETY: the File owns its descriptor, which stays open and the same
    // for as long as the AsyncFd owns the File (it is never taken out).
    let fd = unsafe { AsyncFd::register(file) }?;
    Ok(Io { fd, layer })
}

/// Writes all of `head` then all of `data`, gathered (as few writes as
/// the socket takes), waiting for room when it has none.
pub async fn write_two(io: &Io, mut head: &[u8], mut data: &[u8]) -> std::io::Result<()> {
    while !head.is_empty() || !data.is_empty() || io.queued() {
        let mut room = io.writable().await?;
        let n = write_some(io, &mut room, head, data)?;
        let from_head = n.min(head.len());
        head = &head[from_head..];
        data = &data[n - from_head..];
    }
    Ok(())
}

/// One gathered write of `head` then `data`, with the socket found
/// writable (`room`): how many bytes went. None (no room after all) is
/// not an error: wait for room again. Through a layer, all of them are
/// taken at once, and its records go as the socket has room; `io.queued()`
/// says whether some still wait.
pub fn write_some(io: &Io, room: &mut Ready<'_>, head: &[u8], data: &[u8]) -> std::io::Result<usize> {
    if let Some(layer) = &io.layer {
        let sealed = head.len() + data.len();
        layer.seal(&[head, data])?;
        return match room.try_io(|f| layer.flush(&mut Wire::new(f.get_ref()))) {
            // What was sealed counts as written, the flush failing or not:
            // its frame is on its way (and a failed flush fails again on
            // the next, which then says so).
            Ok(Err(e)) if sealed == 0 => Err(e),
            Ok(_) | Err(_) => Ok(sealed),
        };
    }
    let n = match room.try_io(|f| send_two(f.as_raw_fd(), head, data)) {
        Ok(written) => written?,
        Err(_would_block) => return Ok(0),
    };
    if n == 0 && !(head.is_empty() && data.is_empty()) {
        return Err(std::io::ErrorKind::WriteZero.into());
    }
    Ok(n)
}

/// One gathered write of `head` then `data` without waiting for room:
/// how many bytes went, 0 when the socket had none (its readiness is
/// left as it was, so a wait for room after finds out for itself).
/// Through a layer, as [`write_some`].
pub fn try_write(io: &Io, head: &[u8], data: &[u8]) -> std::io::Result<usize> {
    if let Some(layer) = &io.layer {
        let sealed = head.len() + data.len();
        layer.seal(&[head, data])?;
        // As in `write_some`: what was sealed counts as written.
        return match layer.flush(&mut Wire::new(io.fd.get_ref())) {
            Err(e) if sealed == 0 && e.kind() != std::io::ErrorKind::WouldBlock => Err(e),
            _ => Ok(sealed),
        };
    }
    match send_two(io.fd.as_raw_fd(), head, data) {
        Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => Ok(0),
        Ok(0) if !(head.is_empty() && data.is_empty()) => Err(std::io::ErrorKind::WriteZero.into()),
        written => written,
    }
}

/// One sendmsg(2) of `head` then `data`, gathered, with MSG_NOSIGNAL: a
/// server gone is an EPIPE error here, never a SIGPIPE, which would kill
/// a program that has not ignored it (Rust's own programs ignore it; one
/// that embeds this client, or restores it for a pipeline's sake, may
/// not). writev(2) would raise it.
fn send_two(fd: std::os::fd::RawFd, head: &[u8], data: &[u8]) -> std::io::Result<usize> {
    crate::io::send_gathered(fd, &[IoSlice::new(head), IoSlice::new(data)])
}

/// Writes no more to the socket: the peer reads the end of the stream,
/// and a write still waiting for room fails at once.
pub fn shut_writes(io: &Io) {
    if let Some(layer) = &io.layer {
        layer.close(&mut Wire::new(io.fd.get_ref()));
    }
    // SAFETY: shutdown(2) on the descriptor `io` owns; a failure (it is
    // already shut) changes nothing.
    unsafe {
        libc::shutdown(io.fd.as_raw_fd(), libc::SHUT_WR);
    }
}

/// What one read(2) did.
pub enum Filled {
    /// Some bytes, and whether that drained the socket (fewer came than
    /// there was room for), so it can be taken as not readable until it
    /// says so again.
    Got { drained: bool },
    /// The peer hung up.
    End,
}

/// Bytes read and not yet made into messages.
#[derive(Default)]
pub struct Incoming {
    buf: Vec<u8>,
    /// A large Rread being read into a buffer of its own, so its data
    /// becomes the reply's rather than being copied out of `buf`: its
    /// head, the data so far, and the data's count.
    large: Option<(Vec<u8>, Vec<u8>, usize)>,
}

impl Incoming {
    /// The next whole message read so far, if there is one; an error when
    /// the stream's framing broke (nothing after it can be trusted).
    pub fn next(&mut self, msize: u32) -> Result<Option<Msg>, crate::error::StreamError> {
        if let Some((_, data, count)) = &self.large {
            if data.len() < *count {
                return Ok(None);
            }
            let (head, data, _) = self.large.take().expect("checked above");
            return Ok(Some(with_data(&head, data)?));
        }
        if let Some(n) = check(&self.buf, msize)? {
            let msg = parse(&self.buf[..n]);
            self.buf.drain(..n);
            return Ok(Some(msg?));
        }
        // As soon as its head is in: the server is trusted with the room
        // (`fill` makes room for the whole frame once its size is known).
        if let Some((head, count)) = data_head(&self.buf, 0) {
            let mut data = Vec::with_capacity(count);
            data.extend_from_slice(&self.buf[head..]);
            let head = self.buf.drain(..).take(head).collect();
            self.large = Some((head, data, count));
        }
        Ok(None)
    }

    /// One read(2) of the socket: into the large Rread's own buffer, never past
    /// its frame, or onto the stream's buffer, with room for the whole
    /// frame once its size is known (a frame under the large size is then
    /// read in one go, not copied as it grows).
    pub fn fill(&mut self, io: &Io, msize: u32) -> std::io::Result<Filled> {
        let (buf, room) = match &mut self.large {
            Some((_, data, count)) => {
                let room = *count - data.len();
                (data, room)
            }
            None => {
                let want = match self.buf.get(..4) {
                    Some(size) => (u32::from_le_bytes(size.try_into().expect("4 bytes")) as usize).min(msize as usize),
                    None => 0,
                };
                let room = want.saturating_sub(self.buf.len()).max(64 * 1024);
                (&mut self.buf, room)
            }
        };
        buf.reserve(room);
        if let Some(layer) = &io.layer {
            // Plaintext comes from the layer, which reads the socket; a
            // short read says nothing of what is left there, so the
            // socket is read until it would block.
            return Ok(match layer.read(&mut Wire::new(io.fd.get_ref()), buf, room)? {
                0 => Filled::End,
                _ => Filled::Got { drained: false },
            });
        }
        let spare = buf.spare_capacity_mut();
        let asked = room.min(spare.len());
        // SAFETY: read(2) writes at most `asked` bytes into `spare`, memory
        // the Vec owns and has not initialized; `set_len` below counts only
        // the bytes it says it wrote.
        let got = unsafe { libc::read(io.fd.as_raw_fd(), spare.as_mut_ptr().cast(), asked) };
        if got < 0 {
            return Err(std::io::Error::last_os_error());
        }
        let got = got as usize;
        // SAFETY: the first `got` bytes of the spare room were written.
        unsafe { buf.set_len(buf.len() + got) };
        Ok(match got {
            0 => Filled::End,
            _ => Filled::Got { drained: got < asked },
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fcall::Fcall;
    use std::io::Write;

    /// A large Rread's data goes to a buffer of its own as soon as its
    /// head is in (the first read, 64 KiB, holds it and some data), so
    /// no more than that is ever copied out of the stream's buffer; the
    /// reply comes whole.
    #[tokio::test]
    async fn a_large_rreads_data_goes_to_its_own_buffer_from_the_first_read() {
        let (ours, mut theirs) = std::os::unix::net::UnixStream::pair().unwrap();
        let io = register(ours, None).unwrap();
        let data: Vec<u8> = (0..1_000_000u32).map(|i| (i % 253) as u8).collect();
        let frame = crate::codec::to_bytes(&Msg { tag: 3, body: Fcall::Rread { data: data.clone() } });
        theirs.write_all(&frame[..100_000]).unwrap();
        let mut incoming = Incoming::default();
        let msize = 1 << 20;
        io.readable().await.unwrap().retain_ready();
        assert!(matches!(incoming.fill(&io, msize), Ok(Filled::Got { .. })));
        assert_eq!(incoming.next(msize), Ok(None));
        assert!(incoming.large.is_some(), "the data's own buffer taken after the first read");
        assert!(incoming.buf.is_empty(), "nothing left in the stream's buffer");
        // The rest, in the data's own buffer, read by read.
        let writer = std::thread::spawn(move || theirs.write_all(&frame[100_000..]).unwrap());
        let reply = loop {
            if let Some(msg) = incoming.next(msize).unwrap() {
                break msg;
            }
            let mut ready = io.readable().await.unwrap();
            match incoming.fill(&io, msize) {
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => ready.clear_ready(),
                got => assert!(matches!(got, Ok(Filled::Got { .. }))),
            }
        };
        writer.join().unwrap();
        assert!(reply == Msg { tag: 3, body: Fcall::Rread { data } }, "the reply whole");
    }
}
