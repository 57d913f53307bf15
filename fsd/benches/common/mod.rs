//! What the benchmarks share: a real `apexd` in a child process.

// Each benchmark uses some of these.
#![allow(dead_code)]

use apex_ninep::{dial, Client};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// A running apexd and its namespace directory, both gone on drop.
pub struct Daemon {
    child: Child,
    pub dir: PathBuf,
}

impl Daemon {
    /// The daemon's process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// Median round trip of a `size`-byte echo through a plain Unix socket
/// served by another thread: what one request and reply cost with no
/// server.
pub fn echo_round_trip(dir: &Path, size: usize) -> Duration {
    use std::io::{Read, Write};
    let path = dir.join("echo");
    let listener = std::os::unix::net::UnixListener::bind(&path).expect("bind echo");
    std::thread::spawn(move || {
        if let Ok((mut s, _)) = listener.accept() {
            let mut b = [0u8; 4096];
            while let Ok(n @ 1..) = s.read(&mut b) {
                if s.write_all(&b[..n]).is_err() {
                    break;
                }
            }
        }
    });
    let mut s = std::os::unix::net::UnixStream::connect(&path).expect("echo");
    let (out, mut back) = (vec![b'x'; size], vec![0u8; size]);
    let mut times = Vec::new();
    for _ in 0..20_000 {
        let t = Instant::now();
        s.write_all(&out).unwrap();
        s.read_exact(&mut back).unwrap();
        times.push(t.elapsed());
    }
    times.sort();
    times[times.len() / 2]
}

/// Starts apexd on namespace `dir` with `args`, once its socket is posted.
pub fn start_apexd_with(dir: &Path, args: &[&str]) -> Daemon {
    let _ = std::fs::remove_dir_all(dir);
    let child = Command::new(env!("CARGO_BIN_EXE_apexd"))
        .arg("--namespace")
        .arg(dir)
        .arg("--ephemeral")
        .args(args)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("start apexd");
    let d = Daemon { child, dir: dir.to_path_buf() };
    let deadline = Instant::now() + Duration::from_secs(30);
    while !dir.join("apex").exists() {
        assert!(Instant::now() < deadline, "apexd did not post its socket");
        std::thread::sleep(Duration::from_millis(20));
    }
    d
}

/// Starts apexd on namespace `dir`.
pub fn start_apexd(dir: &Path) -> Daemon {
    start_apexd_with(dir, &[])
}

/// apexd on `base/ns`, keeping its sessions in `base/state`, its log in
/// `base/apexd.log`; killed on drop.
pub struct Apexd {
    child: Child,
    base: PathBuf,
}

impl Apexd {
    pub fn start(base: &Path, args: &[&str]) -> Apexd {
        let log = std::fs::OpenOptions::new().create(true).append(true).open(base.join("apexd.log")).unwrap();
        let child = Command::new(env!("CARGO_BIN_EXE_apexd"))
            .arg("--namespace")
            .arg(base.join("ns"))
            .arg("--state")
            .arg(base.join("state"))
            .arg("-q")
            .args(args)
            .env("RUST_LOG", "info")
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .expect("start apexd");
        let d = Apexd { child, base: base.to_path_buf() };
        let deadline = Instant::now() + Duration::from_secs(300);
        while std::os::unix::net::UnixStream::connect(d.socket()).is_err() {
            assert!(Instant::now() < deadline, "apexd did not answer");
            std::thread::sleep(Duration::from_millis(5));
        }
        d
    }

    pub fn socket(&self) -> PathBuf {
        self.base.join("ns").join("apex")
    }

    /// The daemon's process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    pub async fn client(&self) -> (Client, u32) {
        let c = dial(&format!("unix!{}", self.socket().display()), 1 << 20).await.expect("dial apexd");
        let root = c.attach("bench", "").await.expect("attach");
        (c, root)
    }

    /// SIGTERM: the log synced, then the exit.
    pub fn stop(mut self) {
        // SAFETY: kill(2) with plain integers.
        unsafe { libc::kill(self.child.id() as i32, libc::SIGTERM) };
        let _ = self.child.wait();
    }
}

impl Drop for Apexd {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Bytes of every log segment under `state`.
pub fn log_bytes(state: &Path) -> u64 {
    let mut n = 0;
    for s in std::fs::read_dir(state.join("sessions")).into_iter().flatten().flatten() {
        for f in std::fs::read_dir(s.path()).into_iter().flatten().flatten() {
            if f.file_name().to_string_lossy().starts_with("wal.") {
                n += f.metadata().map_or(0, |m| m.len());
            }
        }
    }
    n
}
