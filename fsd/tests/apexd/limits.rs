//! What the machine runs short of does not end the daemon. Descriptors:
//! the daemon raises its soft limit to the hard one (its programs get the
//! old one back), serves on when `accept` fails for want of them, says
//! so, and refuses a new terminal with a message when they run short.
//! Room on disk: a put that cannot finish leaves the file as it was.

use crate::{read, text, write};
use apex_ninep::dial;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// An apexd started with descriptor limits `soft` and `hard`; killed
/// and its directory removed on drop.
struct Limited {
    child: Child,
    dir: PathBuf,
    log: PathBuf,
}

impl Limited {
    /// With descriptor limits `soft` and `hard`, and files no larger
    /// than `fsize` bytes (a write past it fails, as on a full disk).
    fn start(name: &str, (soft, hard): (u64, u64), fsize: Option<u64>) -> Limited {
        let dir = std::env::temp_dir().join(format!("apex-limits-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::set_permissions(&dir, std::os::unix::fs::PermissionsExt::from_mode(0o700)).unwrap();
        let log = dir.with_extension("log");
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_apexd"));
        cmd.arg("--namespace").arg(&dir).args(["--ephemeral", "-q"]).env("HOME", &dir);
        cmd.stdout(Stdio::null()).stderr(std::fs::File::create(&log).unwrap());
        // SAFETY: setrlimit(2) only, between fork and exec.
        unsafe {
            cmd.pre_exec(move || {
                let lim = libc::rlimit { rlim_cur: soft, rlim_max: hard };
                if libc::setrlimit(libc::RLIMIT_NOFILE, &lim) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
                if let Some(bytes) = fsize {
                    // A write past it fails (EFBIG) instead of a signal.
                    libc::signal(libc::SIGXFSZ, libc::SIG_IGN);
                    let lim = libc::rlimit { rlim_cur: bytes, rlim_max: bytes };
                    if libc::setrlimit(libc::RLIMIT_FSIZE, &lim) != 0 {
                        return Err(std::io::Error::last_os_error());
                    }
                }
                Ok(())
            });
        }
        let child = cmd.spawn().expect("start apexd");
        let l = Limited { child, dir, log };
        let deadline = Instant::now() + Duration::from_secs(20);
        while std::os::unix::net::UnixStream::connect(l.dir.join("apex")).is_err() {
            assert!(Instant::now() < deadline, "apexd did not answer: {}", l.said());
            std::thread::sleep(Duration::from_millis(10));
        }
        l
    }

    fn said(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    fn alive(&mut self) -> bool {
        self.child.try_wait().unwrap().is_none()
    }
}

impl Drop for Limited {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
        let _ = std::fs::remove_file(&self.log);
    }
}

/// Process `pid`'s soft limit on open files.
fn soft_limit(pid: &str) -> u64 {
    let limits = std::fs::read_to_string(format!("/proc/{pid}/limits")).unwrap();
    let line = limits.lines().find(|l| l.starts_with("Max open files")).unwrap();
    line.split_whitespace().nth(3).unwrap().parse().unwrap()
}

fn socket(dir: &Path) -> String {
    format!("unix!{}", dir.join("apex").display())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn running_out_of_descriptors_is_said_and_survived() {
    let mut d = Limited::start("fds", (40, 200), None);
    assert_eq!(soft_limit(&d.child.id().to_string()), 200, "raised to the hard limit");
    let c = dial(&socket(&d.dir), 1 << 20).await.unwrap();
    let root = c.attach("glenda", "").await.unwrap();

    // A terminal's program gets the limit the daemon had.
    let f = c.open_path(root, "main/ctl", apex_ninep::fcall::ORDWR).await.unwrap();
    c.write(f.fid, 0, b"term -d / sh\n").await.unwrap();
    let n = text(c.read(f.fid, 0, 64).await.unwrap()).trim().to_string();
    c.clunk(f.fid).await.unwrap();
    let ctl = text(read(&c, root, &format!("main/terms/{n}/ctl")).await.unwrap());
    let pid = ctl.lines().find_map(|l| l.strip_prefix("pid ")).unwrap().to_string();
    assert_eq!(soft_limit(&pid), 40, "the program's limit is the one the daemon was given");

    // Connections past the limit: accept fails for a while; the daemon
    // says so and serves on.
    let held: Vec<_> =
        (0..260).filter_map(|_| std::os::unix::net::UnixStream::connect(d.dir.join("apex")).ok()).collect();
    let deadline = Instant::now() + Duration::from_secs(10);
    while !d.said().contains("cannot accept a connection") {
        assert!(Instant::now() < deadline, "nothing said of the refused connections: {}", d.said());
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(d.alive(), "the daemon lives: {}", d.said());
    drop(held);
    let deadline = Instant::now() + Duration::from_secs(10);
    let again = loop {
        if let Ok(c) = dial(&socket(&d.dir), 1 << 20).await {
            break c;
        }
        assert!(Instant::now() < deadline, "no connection after the others went: {}", d.said());
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    let r = again.attach("glenda", "").await.unwrap();
    assert!(text(read(&again, r, "index").await.unwrap()).starts_with("main "));
    assert!(d.said().contains("out_of_descriptors=true"), "{}", d.said());

    // Terminals until descriptors run short: the next is refused with a
    // message, and what runs goes on.
    let mut started = Vec::new();
    let refused = loop {
        let f = again.open_path(r, "main/ctl", apex_ninep::fcall::ORDWR).await.unwrap();
        let w = again.write(f.fid, 0, b"term -d / sh\n").await;
        let reply = again.read(f.fid, 0, 64).await;
        again.clunk(f.fid).await.unwrap();
        match w {
            Ok(_) => started.push(text(reply.unwrap()).trim().to_string()),
            Err(e) => break e.to_string(),
        }
        assert!(started.len() < 100, "no terminal refused");
    };
    assert!(refused.contains("descriptors open") && refused.contains("close a terminal"), "{refused}");
    assert!(!started.is_empty(), "some ran first");
    for n in started.iter().chain([&n]) {
        write(&again, r, &format!("main/terms/{n}/ctl"), "close\n").await.unwrap();
    }
    assert!(d.alive());
}

/// `put` writes beside the file and renames: a write that fails midway
/// (here a file-size limit, as a full disk fails it) leaves the old text
/// whole; where a rename cannot keep what the file is (another hard link
/// to it), it is written in place and `+Errors` says so.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_put_that_cannot_finish_leaves_the_file_as_it_was() {
    let d = Limited::start("put", (1024, 1024), Some(20_000));
    let c = dial(&socket(&d.dir), 1 << 20).await.unwrap();
    let root = c.attach("glenda", "").await.unwrap();
    let file = d.dir.join("notes.txt");
    let old: String = (0..100).map(|i| format!("old line {i}\n")).collect();
    std::fs::write(&file, &old).unwrap();
    let n = crate::session::new_buffer(&c, root).await;
    let ctl = format!("main/buffers/{n}/ctl");
    write(&c, root, &ctl, &format!("get {}", file.display())).await.unwrap();
    write(&c, root, &format!("main/buffers/{n}/body"), &"new text, longer than the disk has room for\n".repeat(1000))
        .await
        .unwrap();
    let e = write(&c, root, &ctl, "put").await.unwrap_err().to_string();
    assert!(e.contains("put") && e.contains("too large"), "{e}");
    assert_eq!(std::fs::read_to_string(&file).unwrap(), old, "the old text, whole");
    let beside: Vec<_> = std::fs::read_dir(&d.dir).unwrap().flatten().map(|e| e.file_name()).collect();
    assert!(!beside.iter().any(|n| n.to_string_lossy().contains(".put.")), "nothing left beside it: {beside:?}");

    // Another name for the file: written in place, and said.
    std::fs::hard_link(&file, d.dir.join("also.txt")).unwrap();
    let body = format!("main/buffers/{n}/body");
    let f = c.open_path(root, &body, apex_ninep::fcall::OWRITE | apex_ninep::fcall::OTRUNC).await.unwrap();
    c.write(f.fid, 0, b"short\n").await.unwrap();
    c.clunk(f.fid).await.unwrap();
    write(&c, root, &ctl, "put").await.unwrap();
    assert_eq!(std::fs::read_to_string(d.dir.join("also.txt")).unwrap(), "short\n", "both names see it");
    let errors = format!("{}/+Errors", d.dir.display());
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let index = text(read(&c, root, "main/acme/index").await.unwrap());
        let number = index.lines().find(|l| l.contains(&errors)).and_then(|l| l.split_whitespace().next());
        let said = match number {
            Some(w) => text(read(&c, root, &format!("main/acme/{w}/body")).await.unwrap()),
            None => String::new(),
        };
        if said.contains("written in place, as it has other hard links") {
            break;
        }
        assert!(Instant::now() < deadline, "nothing said in {errors}: {index}{said}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}
