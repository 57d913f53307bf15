//! What the benchmarks share: a real `apexd` in a child process.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// A running apexd and its namespace directory, both gone on drop.
pub struct Daemon {
    child: Child,
    pub dir: PathBuf,
}

impl Drop for Daemon {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
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
#[allow(dead_code)] // not every benchmark needs the default flags
pub fn start_apexd(dir: &Path) -> Daemon {
    start_apexd_with(dir, &[])
}
