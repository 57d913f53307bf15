//! `apexd --stdio`, as ssh runs it: 9P on standard input and output,
//! relayed to the user's daemon, which it starts detached when none
//! runs; the session outlives the relay, and a daemon that cannot start
//! is said, never replaced by an empty one.

use crate::{read, text, write};
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

/// A temporary home: namespace, state and `$HOME`, all below it.
struct Home(PathBuf);

impl Drop for Home {
    fn drop(&mut self) {
        // The daemon a relay started, found by its namespace.
        for pid in daemons_started_in(&self.0) {
            // SAFETY: kill(2) with plain integers.
            unsafe { libc::kill(pid, libc::SIGKILL) };
        }
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// The `apexd`s (not relays) whose environment names `dir`.
fn daemons_started_in(dir: &Path) -> Vec<i32> {
    let needle = dir.display().to_string();
    let Ok(procs) = std::fs::read_dir("/proc") else { return Vec::new() };
    procs
        .filter_map(|p| p.ok()?.file_name().to_str()?.parse::<i32>().ok())
        .filter(|pid| {
            let cmd = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
            let env = std::fs::read(format!("/proc/{pid}/environ")).unwrap_or_default();
            let cmd = String::from_utf8_lossy(&cmd);
            cmd.contains("apexd") && !cmd.contains("--stdio") && String::from_utf8_lossy(&env).contains(&needle)
        })
        .collect()
}

fn relay(home: &Path) -> Child {
    Command::new(env!("CARGO_BIN_EXE_apexd"))
        .arg("--stdio")
        .env("NAMESPACE", home.join("ns"))
        .env("HOME", home)
        .env("XDG_STATE_HOME", home.join("state"))
        .env_remove("PLAN9")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

/// A socket at `path` whose one connection is the relay's standard input
/// and output: how the test's 9P client reaches it.
fn bridge(child: &mut Child, path: &Path) {
    let listener = std::os::unix::net::UnixListener::bind(path).unwrap();
    let (mut stdin, mut stdout) = (child.stdin.take().unwrap(), child.stdout.take().unwrap());
    std::thread::spawn(move || {
        let Ok((conn, _)) = listener.accept() else { return };
        let mut up = conn.try_clone().unwrap();
        std::thread::spawn(move || {
            let mut buf = [0u8; 65536];
            while let Ok(n @ 1..) = up.read(&mut buf) {
                if stdin.write_all(&buf[..n]).and_then(|_| stdin.flush()).is_err() {
                    return;
                }
            }
        });
        let mut down = conn;
        let mut buf = [0u8; 65536];
        while let Ok(n @ 1..) = stdout.read(&mut buf) {
            if down.write_all(&buf[..n]).is_err() {
                return;
            }
        }
    });
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_relay_starts_the_daemon_and_the_session_outlives_it() {
    let home = Home(std::env::temp_dir().join(format!("apex-e2e-stdio-{}", std::process::id())));
    let _ = std::fs::remove_dir_all(&home.0);
    std::fs::create_dir_all(&home.0).unwrap();
    assert!(!home.0.join("ns/apex").exists(), "no daemon before");

    let mut first = relay(&home.0);
    bridge(&mut first, &home.0.join("one"));
    let c = apex_ninep::dial(&format!("unix!{}", home.0.join("one").display()), 8192).await.unwrap();
    let root = c.attach("glenda", "").await.unwrap();
    assert!(text(read(&c, root, "index").await.unwrap()).starts_with("main "));
    let b = text(read(&c, root, "main/buffers/new").await.unwrap());
    write(&c, root, &format!("main/buffers/{}/body", b.trim()), "kept\n").await.unwrap();
    assert!(home.0.join("ns/apex").exists(), "the relay started the daemon, posted where it runs");

    // ssh drops: the relay ends, the daemon and its session go on.
    let _ = first.kill();
    let _ = first.wait();
    drop(c);
    assert!(std::os::unix::net::UnixStream::connect(home.0.join("ns/apex")).is_ok());
    let mut second = relay(&home.0);
    bridge(&mut second, &home.0.join("two"));
    let c = apex_ninep::dial(&format!("unix!{}", home.0.join("two").display()), 8192).await.unwrap();
    let root = c.attach("glenda", "").await.unwrap();
    let body = text(read(&c, root, &format!("main/buffers/{}/body", b.trim())).await.unwrap());
    assert_eq!(body, "kept\n", "the same daemon, not a fresh one");
    // Its standard input ends (the client went): the relay ends too, by
    // itself, and well.
    drop(c);
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    let status = loop {
        if let Some(status) = second.try_wait().unwrap() {
            break status;
        }
        assert!(std::time::Instant::now() < deadline, "the relay outlived its standard input");
        std::thread::sleep(std::time::Duration::from_millis(20));
    };
    assert!(status.success(), "{status}");
    assert_eq!(daemons_started_in(&home.0).len(), 1, "one daemon, started once");
}

#[test]
fn a_daemon_that_cannot_start_is_said_not_replaced() {
    let home = Home(std::env::temp_dir().join(format!("apex-e2e-stdio-bad-{}", std::process::id())));
    let _ = std::fs::remove_dir_all(&home.0);
    std::fs::create_dir_all(&home.0).unwrap();
    // The state directory's place holds a file: the daemon cannot keep
    // sessions there, and must not serve an empty one instead.
    std::fs::write(home.0.join("state"), "not a directory").unwrap();
    let out = relay(&home.0).wait_with_output().unwrap();
    assert!(!out.status.success());
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(said.contains("apexd --stdio:") && said.contains("before it answered"), "{said}");
    assert!(!home.0.join("ns/apex").exists(), "nothing serves");
}
