//! A slow link for the benchmark: a Unix-socket relay to the daemon that
//! holds every byte back a fixed delay each way, in order, and can stall
//! (pass nothing) for a while, as a network far away or gone does.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

pub struct SlowLink {
    path: PathBuf,
    stalled_until: Arc<Mutex<Option<Instant>>>,
    accept: tokio::task::JoinHandle<()>,
}

impl SlowLink {
    /// Listens at `path`, relaying each connection to `to` with `delay`
    /// each way.
    pub fn start(rt: &tokio::runtime::Runtime, path: &Path, to: &Path, delay: Duration) -> SlowLink {
        let listener = rt.block_on(async { tokio::net::UnixListener::bind(path) }).expect("bind the slow link");
        let stalled_until: Arc<Mutex<Option<Instant>>> = Arc::default();
        let (to, stall) = (to.to_path_buf(), stalled_until.clone());
        let accept = rt.spawn(async move {
            while let Ok((near, _)) = listener.accept().await {
                let Ok(far) = tokio::net::UnixStream::connect(&to).await else { continue };
                let (nr, nw) = near.into_split();
                let (fr, fw) = far.into_split();
                tokio::spawn(one_way(nr, fw, delay, stall.clone()));
                tokio::spawn(one_way(fr, nw, delay, stall.clone()));
            }
        });
        SlowLink { path: path.to_path_buf(), stalled_until, accept }
    }

    pub fn address(&self) -> String {
        format!("unix!{}", self.path.display())
    }

    /// Passes nothing either way for `d` (what was sent waits).
    pub fn stall(&self, d: Duration) {
        *self.stalled_until.lock().unwrap() = Some(Instant::now() + d);
    }
}

impl Drop for SlowLink {
    fn drop(&mut self) {
        self.accept.abort();
    }
}

/// Reads `from` and writes each piece to `to` once `delay` has passed since
/// it was read, and no stall holds it.
async fn one_way(
    mut from: tokio::net::unix::OwnedReadHalf,
    mut to: tokio::net::unix::OwnedWriteHalf,
    delay: Duration,
    stall: Arc<Mutex<Option<Instant>>>,
) {
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<(tokio::time::Instant, Vec<u8>)>();
    let writer = tokio::spawn(async move {
        while let Some((due, bytes)) = rx.recv().await {
            tokio::time::sleep_until(due).await;
            loop {
                let until = *stall.lock().unwrap();
                match until {
                    Some(t) if t > Instant::now() => tokio::time::sleep(t - Instant::now()).await,
                    _ => break,
                }
            }
            if to.write_all(&bytes).await.is_err() {
                return;
            }
        }
    });
    let mut buf = vec![0u8; 1 << 16];
    loop {
        match from.read(&mut buf).await {
            Ok(0) | Err(_) => break,
            Ok(n) => {
                if tx.send((tokio::time::Instant::now() + delay, buf[..n].to_vec())).is_err() {
                    break;
                }
            }
        }
    }
    drop(tx);
    let _ = writer.await;
}
