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
    // Started again with its tunables (where the CPU needs them), it keeps
    // its name: pgrep and pkill find it.
    let comm = std::fs::read_to_string(format!("/proc/{}/comm", d.child.id())).unwrap();
    assert_eq!(comm.trim(), "apexd", "the daemon's process name");
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

/// The value of `key` in a `key value` ctl read.
fn ctl_value(ctl: &str, key: &str) -> u64 {
    let line =
        ctl.lines().find_map(|l| l.strip_prefix(&format!("{key} "))).unwrap_or_else(|| panic!("no {key}: {ctl}"));
    line.trim().parse().unwrap()
}

/// Undo history is bounded by bytes: rounds of emptying a body and
/// writing a megabyte into it keep no more history than the buffer's
/// limit, in memory and in the snapshot, across a restart; the newest
/// rounds still undo, and a bad limit is refused with what is expected.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn undo_history_is_bounded_in_memory_and_in_snapshots() {
    use apex_ninep::fcall::{OTRUNC, OWRITE};
    let mut k = crate::persist::Kept::new("undo-bound");
    k.start(&[], &["--snapshot-bytes", "2000000"]);
    let (c, root) = k.client().await;
    let n = crate::session::new_buffer(&c, root).await;
    let (ctl, body) = (format!("main/buffers/{n}/ctl"), format!("main/buffers/{n}/body"));
    let state = text(read(&c, root, &ctl).await.unwrap());
    assert_eq!((ctl_value(&state, "undolimit"), ctl_value(&state, "undo")), (256 << 20, 0), "{state}");
    for bad in ["undolimit", "undolimit 4M", "undolimit -1"] {
        let e = write(&c, root, &ctl, bad).await.expect_err(bad).to_string();
        assert!(e.contains("BYTES"), "{bad}: {e}");
    }
    write(&c, root, &ctl, "undolimit 4194304").await.unwrap();
    let block = "0123456789abcdef".repeat(1 << 16);
    for round in 0..24 {
        let f = c.open_path(root, &body, OWRITE | OTRUNC).await.unwrap();
        let mine = format!("round {round}\n{}", &block[10..]);
        for piece in mine.as_bytes().chunks(256 << 10) {
            c.write(f.fid, 0, piece).await.unwrap();
        }
        c.clunk(f.fid).await.unwrap();
    }
    // Unbounded, 24 rounds would hold 24 MiB.
    let held = ctl_value(&text(read(&c, root, &ctl).await.unwrap()), "undo");
    assert!((3 << 20..=4 << 20).contains(&held), "{held} bytes of history held");
    drop(c);
    k.stop();
    let snapshot = k.session_dir("main").join(apex_fsd::persist::snapshot::FILE);
    let size = std::fs::metadata(&snapshot).map(|m| m.len()).unwrap_or_else(|e| panic!("a snapshot: {e}"));
    assert!(size < 6 << 20, "the snapshot holds {size} bytes for a 1 MiB body and 4 MiB of history");

    // After a restart the limit and the history are as they were.
    k.start(&[], &[]);
    let (c, root) = k.client().await;
    let state = text(read(&c, root, &ctl).await.unwrap());
    assert_eq!((ctl_value(&state, "undolimit"), ctl_value(&state, "undo")), (4 << 20, held), "{state}");
    // Each undo takes back one write: the newest rounds come back whole.
    let mut undone = 0;
    while write(&c, root, &ctl, "undo").await.is_ok() {
        undone += 1;
        let now = text(read(&c, root, &body).await.unwrap());
        // A round is five writes: the truncation and four pieces.
        if undone % 5 == 0 {
            let round = 23 - undone / 5;
            let want = format!("round {round}\n{}", &block[10..]);
            assert!(
                now == want,
                "after {undone} undos the body is not round {round}'s: {:?}",
                &now[..now.len().min(20)]
            );
        }
    }
    assert!((10..24 * 5).contains(&undone), "{undone} writes undone before the history ran out");
    println!("undo bound 4 MiB, 24 rounds of 1 MiB: {held} bytes held, snapshot {size} bytes, {undone} writes undone");
}

/// 20,000 fids open on `snapshot` share one version of the session
/// (nothing changed between their opens), and what they held is freed
/// when their client hangs up: a second client doing the same grows the
/// daemon no further.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn open_fids_share_their_snapshot_and_a_hang_up_frees_them() {
    use apex_ninep::fcall::OREAD;
    let mut d = Limited::start_capped("fids", (1024, 1024), None, Some(4 << 30));
    let before = {
        let c = dial(&socket(&d.dir), 1 << 20).await.unwrap();
        let root = c.attach("glenda", "").await.unwrap();
        // Some history, so that the snapshot is 20 KB: its text, gone
        // from the body, kept for undo.
        let n = crate::session::new_buffer(&c, root).await;
        let body = format!("main/buffers/{n}/body");
        write(&c, root, &body, &"some history\n".repeat(1500)).await.unwrap();
        let f = c.open_path(root, &body, apex_ninep::fcall::OWRITE | apex_ninep::fcall::OTRUNC).await.unwrap();
        c.clunk(f.fid).await.unwrap();
        let size = read(&c, root, "main/snapshot").await.unwrap().len();
        assert!(size > 19_000, "a snapshot of {size} bytes");
        rss(d.child.id())
    };
    let mut figures = Vec::new();
    for round in 0..2 {
        let c = std::sync::Arc::new(dial(&socket(&d.dir), 1 << 20).await.unwrap());
        let root = c.attach("glenda", "").await.unwrap();
        for _ in 0..20 {
            let mut batch = tokio::task::JoinSet::new();
            for _ in 0..1000 {
                let c = c.clone();
                batch.spawn(async move { c.open_path(root, "main/snapshot", OREAD).await.map(|_| ()) });
            }
            while let Some(r) = batch.join_next().await {
                r.unwrap().unwrap();
            }
        }
        let open = rss(d.child.id());
        assert!(d.alive(), "{}", d.said());
        drop(c);
        // The hang-up is seen, and the fids let go, in a moment: a fresh
        // connection's walk is served after it.
        tokio::time::sleep(Duration::from_millis(500)).await;
        let c = dial(&socket(&d.dir), 1 << 20).await.unwrap();
        c.attach("glenda", "").await.unwrap();
        figures.push((round, open, rss(d.child.id())));
    }
    for (round, open, after) in &figures {
        println!(
            "round {round}: 20,000 snapshot fids: {} KB before, {} KB open ({} bytes a fid), {} KB after the hang-up",
            before >> 10,
            open >> 10,
            open.saturating_sub(before) / 20_000,
            after >> 10
        );
    }
    let (_, first_open, _) = figures[0];
    assert!(first_open < before + (32 << 20), "20,000 fids took {} MB", (first_open - before) >> 20);
    let (_, _, first_after) = figures[0];
    let (_, _, second_after) = figures[1];
    assert!(
        second_after < first_after + (4 << 20),
        "the first client's fids were not freed: {} MB more",
        (second_after - first_after) >> 20
    );
    assert!(d.alive());
}

/// Snapshots of different moments are not shared: open at once, what
/// they hold of their own is bounded (here by the hidden
/// `--snapshots-held` at 1 MiB), past which another open is refused with
/// a message; closing one makes room.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn snapshots_of_different_moments_held_at_once_are_bounded() {
    use apex_ninep::fcall::{OREAD, OTRUNC, OWRITE};
    let mut k = crate::persist::Kept::new("snapshots-held");
    k.start(&[], &["--snapshots-held", "1048576"]);
    let (c, root) = k.client().await;
    let n = crate::session::new_buffer(&c, root).await;
    let body = format!("main/buffers/{n}/body");
    // 400 KB of history in every snapshot: written, then emptied.
    write(&c, root, &body, &"history\n".repeat(50_000)).await.unwrap();
    let f = c.open_path(root, &body, OWRITE | OTRUNC).await.unwrap();
    c.clunk(f.fid).await.unwrap();
    let mut open = Vec::new();
    let refused = loop {
        // A change between opens: each is a snapshot of its own moment.
        write(&c, root, &body, "x").await.unwrap();
        match c.open_path(root, "main/snapshot", OREAD).await {
            Ok(f) => open.push(f),
            Err(e) => break e.to_string(),
        }
        assert!(open.len() < 10, "ten snapshots of 400 KB held under a bound of 1 MiB");
    };
    assert_eq!(open.len(), 2, "{refused}");
    assert!(refused.contains("close some"), "{refused}");
    // One closed makes room for another, which reads whole.
    c.clunk(open.remove(0).fid).await.unwrap();
    let again = c.open_path(root, "main/snapshot", OREAD).await.unwrap();
    let snapshot = c.read_all(&again).await.unwrap();
    assert!(apex_core::State::from_snapshot(&snapshot).is_ok_and(|s| s.buffers.len() > 1));
    c.clunk(again.fid).await.unwrap();
}

/// An idle connection costs the daemon a few kilobytes, whether it has
/// only attached or has sent a large write before going quiet: 500 of
/// each, held open at once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_idle_connection_costs_a_few_kilobytes() {
    let d = Limited::start_capped("idle", (4096, 4096), None, Some(4 << 30));
    let warm = dial(&socket(&d.dir), 1 << 20).await.unwrap();
    let root = warm.attach("glenda", "").await.unwrap();
    let n = crate::session::new_buffer(&warm, root).await;
    let body = format!("main/buffers/{n}/body");
    let piece = "x".repeat(200 << 10);
    let mut figures = Vec::new();
    let mut idle = Vec::new();
    for busy in [false, true] {
        let before = rss(d.child.id());
        for _ in 0..500 {
            let c = dial(&socket(&d.dir), 1 << 20).await.unwrap();
            let root = c.attach("glenda", "").await.unwrap();
            if busy {
                write(&c, root, &body, &piece).await.unwrap();
            }
            idle.push(c);
        }
        let after = rss(d.child.id());
        let each = after.saturating_sub(before) / 500;
        let what = if busy { "after a 200 KB write" } else { "only attached" };
        println!(
            "500 idle connections, {what}: {} KB before, {} KB after: {each} bytes each",
            before >> 10,
            after >> 10
        );
        figures.push(each);
    }
    // The busy ones' text is in the buffer: 100 MB, which is not theirs.
    let text = 500 * (200 << 10) as u64;
    assert!(figures[0] < 64 << 10, "an idle connection costs {} bytes", figures[0]);
    assert!(figures[1] < text / 500 + (128 << 10), "an idle connection that wrote costs {} bytes", figures[1]);
    drop(idle);
}
