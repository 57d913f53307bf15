//! What the machine runs short of does not end the daemon. Descriptors:
//! the daemon raises its soft limit to the hard one (its programs get the
//! old one back), serves on when `accept` fails for want of them, says
//! so, and refuses a new terminal with a message when they run short.
//! Room on disk: a put that cannot finish leaves the file as it was.
//! Memory: a client that sends requests and never reads the replies
//! holds back its own requests, not the daemon's memory.

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
    fn start(name: &str, nofile: (u64, u64), fsize: Option<u64>) -> Limited {
        Limited::start_capped(name, nofile, fsize, None)
    }

    /// [`Limited::start`], its address space capped at `space` bytes: a
    /// daemon that grew without bound fails inside itself, not the
    /// machine's OOM killer on another process.
    fn start_capped(name: &str, (soft, hard): (u64, u64), fsize: Option<u64>, space: Option<u64>) -> Limited {
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
                if let Some(bytes) = space {
                    let lim = libc::rlimit { rlim_cur: bytes, rlim_max: bytes };
                    if libc::setrlimit(libc::RLIMIT_AS, &lim) != 0 {
                        return Err(std::io::Error::last_os_error());
                    }
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

/// The daemon's resident memory, in bytes.
fn rss(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let kb: u64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .unwrap()
        .trim()
        .trim_end_matches(" kB")
        .trim()
        .parse()
        .unwrap();
    kb * 1024
}

/// Pipelined reads of half a megabyte each, never read back: the daemon
/// answers a few megabytes' worth, then reads no more requests until the
/// client reads (backpressure); it stays small, serves others meanwhile,
/// and lets go when the client hangs up.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_that_never_reads_its_replies_cannot_grow_the_daemon() {
    use apex_ninep::codec::to_bytes;
    use apex_ninep::fcall::{Fcall, Msg, OREAD};
    use tokio::io::AsyncWriteExt;
    // Under a cap of 2 GiB: unbounded, 5,000 replies of half a megabyte
    // would end it.
    let mut d = Limited::start_capped("replies", (1024, 1024), None, Some(2 << 30));
    let c = dial(&socket(&d.dir), 1 << 20).await.unwrap();
    let root = c.attach("glenda", "").await.unwrap();
    let n = crate::session::new_buffer(&c, root).await;
    let body = format!("main/buffers/{n}/body");
    // Half a megabyte, written in pieces a message holds.
    let half = "0123456789abcdef".repeat(1 << 15);
    for piece in half.as_bytes().chunks(64 << 10) {
        write(&c, root, &body, std::str::from_utf8(piece).unwrap()).await.unwrap();
    }
    let before = rss(d.child.id());

    let mut s = tokio::net::UnixStream::connect(d.dir.join("apex")).await.unwrap();
    let msize = 1u32 << 20;
    let mut setup = to_bytes(&Msg { tag: 0xffff, body: Fcall::Tversion { msize, version: "9P2000".into() } });
    setup.extend(to_bytes(&Msg {
        tag: 1,
        body: Fcall::Tattach { fid: 1, afid: u32::MAX, uname: "glenda".into(), aname: String::new() },
    }));
    let names: Vec<String> = body.split('/').map(str::to_string).collect();
    setup.extend(to_bytes(&Msg { tag: 2, body: Fcall::Twalk { fid: 1, newfid: 2, wnames: names } }));
    setup.extend(to_bytes(&Msg { tag: 3, body: Fcall::Topen { fid: 2, mode: OREAD } }));
    s.write_all(&setup).await.unwrap();
    // Its four replies: the fid is open for reading.
    let mut got = Vec::new();
    let mut replies = Vec::new();
    while replies.len() < 4 {
        let mut chunk = [0u8; 4096];
        let k = tokio::io::AsyncReadExt::read(&mut s, &mut chunk).await.unwrap();
        assert!(k > 0, "the daemon hung up: {}", d.said());
        got.extend_from_slice(&chunk[..k]);
        while let Some(n) = apex_ninep::codec::check(&got, msize).unwrap() {
            replies.push(apex_ninep::codec::parse(&got[..n]).unwrap());
            got.drain(..n);
        }
    }
    let iounit = match &replies[3].body {
        Fcall::Ropen { iounit, .. } => *iounit,
        other => panic!("{other:?}"),
    };
    let count = match &replies[0].body {
        Fcall::Rversion { msize, .. } => iounit.min(msize - 24).max(1),
        other => panic!("{other:?}"),
    };
    // One read answered first: the file's text is made, and a reply is
    // half a megabyte.
    s.write_all(&to_bytes(&Msg { tag: 9, body: Fcall::Tread { fid: 2, offset: 0, count } })).await.unwrap();
    loop {
        let mut chunk = vec![0u8; 1 << 16];
        let k = tokio::io::AsyncReadExt::read(&mut s, &mut chunk).await.unwrap();
        got.extend_from_slice(&chunk[..k]);
        if let Some(n) = apex_ninep::codec::check(&got, msize).unwrap() {
            let m = apex_ninep::codec::parse(&got[..n]).unwrap();
            assert!(matches!(&m.body, Fcall::Rread { data } if data.len() == 1 << 19), "{m:?}");
            got.drain(..n);
            break;
        }
    }
    // 5,000 reads of a megabyte each, written from a task (the daemon
    // stops reading them once its replies wait), never a reply read.
    let (_, mut w) = s.into_split();
    let writer = tokio::spawn(async move {
        for i in 0..5000u32 {
            let tag = 10 + (i % 60000) as u16;
            let read = to_bytes(&Msg { tag, body: Fcall::Tread { fid: 2, offset: 0, count } });
            if w.write_all(&read).await.is_err() {
                break;
            }
        }
        w
    });
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert!(d.alive(), "the daemon lives: {}", d.said());
    let grown = rss(d.child.id()).saturating_sub(before);
    assert!(grown < 64 << 20, "the daemon grew by {} MB for one client's unread replies", grown >> 20);
    // Others are served meanwhile.
    let hash = text(read(&c, root, "main/hash").await.unwrap());
    assert_eq!(hash.trim().len(), 64);
    writer.abort();
    assert!(d.alive());
}
