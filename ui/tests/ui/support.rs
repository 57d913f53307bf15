//! What the tests that start real processes share: the daemon's programs
//! beside `apex-ui`, and waiting for a condition with a deadline.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

/// `apexd` or `apex` beside `apex-ui`, built if this test run has not
/// built them.
pub fn sibling(name: &str) -> PathBuf {
    apex_tests::sibling(Path::new(env!("CARGO_BIN_EXE_apex-ui")), name)
}

/// Polls `probe` until it gives a value; fails the test after 20 s.
pub fn wait_for<T>(what: &str, mut probe: impl FnMut() -> Option<T>) -> T {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        if let Some(t) = probe() {
            return t;
        }
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// A namespace directory of the test's own: ours and 0700, as apexd
/// wants it.
pub fn namespace(name: &str) -> PathBuf {
    let ns = std::env::temp_dir().join(format!("apex-ui-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&ns);
    std::fs::create_dir_all(&ns).unwrap();
    std::fs::set_permissions(&ns, std::os::unix::fs::PermissionsExt::from_mode(0o700)).unwrap();
    ns
}

/// Writes `text` to `path` with `apex write` against the namespace `ns`.
pub fn apex_write(ns: &Path, path: &str, text: &str) {
    let mut w = Command::new(sibling("apex"))
        .args(["write", path])
        .env("NAMESPACE", ns)
        .stdin(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    std::io::Write::write_all(&mut w.stdin.take().unwrap(), text.as_bytes()).unwrap();
    assert!(w.wait().unwrap().success(), "apex write {path}");
}

/// Runs `apex` against the namespace `ns`; its output.
pub fn apex(ns: &Path, args: &[&str]) -> String {
    let out = Command::new(sibling("apex")).args(args).env("NAMESPACE", ns).output().expect("run apex");
    assert!(out.status.success(), "apex {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8_lossy(&out.stdout).to_string()
}

/// Stops the daemons an `apex-ui` started with namespace `ns`: each runs
/// in a session of its own, found by the namespace in its environment.
pub fn stop_daemons_started_in(ns: &Path) {
    let mark = format!("NAMESPACE={}", ns.display());
    for entry in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<i32>() else { continue };
        let env = std::fs::read(entry.path().join("environ")).unwrap_or_default();
        let cmd = std::fs::read(entry.path().join("cmdline")).unwrap_or_default();
        let ours = env.split(|b| *b == 0).any(|v| v == mark.as_bytes());
        if ours && String::from_utf8_lossy(&cmd).contains("apexd") {
            // SAFETY: kill(2) with plain integers.
            unsafe { libc::kill(pid, libc::SIGTERM) };
        }
    }
}
