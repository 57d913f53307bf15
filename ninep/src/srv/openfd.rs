//! plan9port's `Topenfd`: a fid opened and handed over as a descriptor,
//! the bytes pumped between the socket pair's other end and the fid.

use super::conn::Conn;
use super::{Result, Serve};
use crate::fcall::{Fcall, OEXEC, ORDWR, OREAD, OWRITE};
use crate::io::HangUp;
use crate::version::iounit;
use std::os::fd::{AsRawFd, OwnedFd};
use std::sync::Arc;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

impl<S: Serve> Conn<S> {
    /// plan9port's `Topenfd`: opens the fid, answers `Ropenfd` followed by
    /// a descriptor (one end of a socket pair), and pumps the other end
    /// with reads and writes on the fid, which moves over to the pump. (A
    /// request like the others: flushed and aborted as they are.)
    pub(super) async fn openfd(self: &Arc<Self>, tag: u16, fid: u32, mode: u8) -> Result<Fcall> {
        if self.socket.is_none() {
            return Err("openfd passes a file descriptor, which needs a Unix socket connection: use open".into());
        }
        let io = iounit(self.msize.load(std::sync::atomic::Ordering::Relaxed));
        let (from, number) = self.begin_open(fid, "openfd")?;
        let guard = super::conn::Opening { conn: &**self, fid, number };
        // Failed, the guard unmarks the fid as it goes.
        let (qid, state) = self.serve.open(&from, mode).await.map_err(super::conn::ename)?;
        // The fid moves over to the pump, unless it was clunked meanwhile:
        // then what the open made is clunked in turn. Either way it is no
        // longer marked.
        let taken = self.take_opening(fid, number);
        drop(guard);
        if !taken {
            self.serve.clunk(state).await;
            return Err(format!("fid {fid} was clunked while it was being opened"));
        }
        let pair = std::os::unix::net::UnixStream::pair().map_err(|e| format!("openfd: socketpair: {e}")).and_then(
            |(ours, theirs)| {
                ours.set_nonblocking(true).map_err(|e| format!("openfd: {e}"))?;
                let ours = tokio::net::UnixStream::from_std(ours).map_err(|e| format!("openfd: {e}"))?;
                Ok((ours, theirs))
            },
        );
        let (ours, theirs) = match pair {
            Ok(pair) => pair,
            Err(e) => {
                // The fid left the table for the pump: it is let go here.
                self.serve.clunk(state).await;
                return Err(e);
            }
        };
        let unixfd = theirs.as_raw_fd() as u32;
        self.passing.lock().expect("passing lock").insert(tag, OwnedFd::from(theirs));
        tokio::spawn(pump(self.serve.clone(), state, mode, ours, io));
        Ok(Fcall::Ropenfd { qid, iounit: io, unixfd })
    }
}

/// Moves bytes between an openfd descriptor's other end and its fid: reads
/// of the fid (growing offsets, to EOF or an error) are written to the
/// socket; what the client writes becomes writes of the fid. Then the fid
/// is clunked, as soon as the client closes its end, not when a read that
/// may wait for long (an event file's) returns at last.
pub(super) async fn pump<S: Serve>(serve: Arc<S>, fid: S::Fid, mode: u8, stream: tokio::net::UnixStream, io: u32) {
    // (OEXEC reads, as an open for it does.)
    let reads = matches!(mode & 3, OREAD | ORDWR | OEXEC);
    let writes = matches!(mode & 3, OWRITE | ORDWR);
    // A reader may stop writing and read on (a half-close): reads go on
    // until it has closed its end both ways.
    let hang_up = reads.then(|| HangUp::watch(&stream)).flatten();
    let (mut r, mut w) = stream.into_split();
    {
        let to_client = async {
            let mut offset = 0u64;
            while let Ok(data) = serve.read(&fid, offset, io).await {
                if data.is_empty() || w.write_all(&data).await.is_err() {
                    break;
                }
                offset += data.len() as u64;
            }
            drop(w);
        };
        let from_client = async |r: &mut tokio::net::unix::OwnedReadHalf| {
            let mut buf = vec![0u8; io as usize];
            let mut offset = 0u64;
            while let Ok(n @ 1..) = r.read(&mut buf).await {
                if serve.write(&fid, offset, buf[..n].to_vec()).await.is_err() {
                    break;
                }
                offset += n as u64;
            }
        };
        // Where the socket cannot be watched, what a read-only client
        // sends is taken for its end of the stream (or bytes it should not
        // send): either way it is done.
        let closed = async |r: &mut tokio::net::unix::OwnedReadHalf| match &hang_up {
            Some(hang_up) => hang_up.heard().await,
            None => {
                let mut byte = [0u8; 1];
                let _ = r.read(&mut byte).await;
            }
        };
        match (reads, writes) {
            (true, true) => {
                let (wrote_all, written) = tokio::sync::oneshot::channel::<()>();
                let reading = async {
                    tokio::select! {
                        _ = to_client => {}
                        _ = async {
                            let _ = written.await;
                            match &hang_up {
                                Some(hang_up) => hang_up.heard().await,
                                None => std::future::pending().await,
                            }
                        } => {}
                    }
                };
                let writing = async {
                    from_client(&mut r).await;
                    let _ = wrote_all.send(());
                };
                tokio::join!(reading, writing);
            }
            (true, false) => {
                tokio::select! {
                    _ = to_client => {}
                    _ = closed(&mut r) => {}
                }
            }
            _ => from_client(&mut r).await,
        }
    }
    serve.clunk(fid).await;
}
