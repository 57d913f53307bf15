//! End to end: a real `apexd`, mounted by a real `apex-mnt` under a
//! temporary directory, driven with plain shell tools. Every mount is
//! unmounted and every process killed when a test ends, pass or fail.

mod setup;

use setup::{fuse_available, mounted, sibling, Setup};
use std::io::{BufRead, BufReader, Read};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// `apex-mnt ssh!USER@localhost!PORT DIR` through a real sshd: the
/// remote's sessions imported (apex import, in the background) and
/// mounted; what the shell writes is the remote daemon's.
#[test]
fn a_mount_of_another_machine_over_ssh() {
    if !fuse_available() {
        return;
    }
    let apexd = sibling("apexd");
    sibling("apex");
    let sshd = apex_tests::sshd::Sshd::start("mnt", apexd.parent());
    let s = Setup::start_remote("ssh", &sshd);
    assert_eq!(s.ok("ls $M"), "ctl\nindex\nmachine\nmain\nnew\nregistry\nservices\n");
    let b = s.ok("cat $M/main/buffers/new").trim().to_string();
    s.ok(&format!("echo through ssh > $M/main/buffers/{b}/body"));
    let remote = Command::new(sibling("apex"))
        .args(["-a", &format!("unix!{}", sshd.remote_ns().join("apex").display())])
        .args(["read", &format!("main/buffers/{b}/body")])
        .output()
        .unwrap();
    assert_eq!(String::from_utf8_lossy(&remote.stdout), "through ssh\n");
    assert!(sshd.local_ns().join("apex.localhost").exists(), "the import stays up for others");
}

#[test]
fn shell_tools_read_and_write_through_the_mount() {
    if !fuse_available() {
        return;
    }
    let s = Setup::start("shell");
    assert_eq!(s.ok("ls $M"), "ctl\nindex\nmachine\nmain\nnew\nregistry\nservices\n");
    s.ok("echo new work > $M/ctl");
    assert!(s.ok("cat $M/index").lines().any(|l| l.starts_with("work ")));
    let b = s.ok("cat $M/work/buffers/new").trim().to_string();
    let body = format!("$M/work/buffers/{b}/body");
    s.ok(&format!("echo hello > {body}; echo world >> {body}; echo -n '!' >> {body}"));
    assert_eq!(s.ok(&format!("cat {body}")), "hello\nworld\n!");
    // `>` truncates (O_TRUNC arrives with the open).
    s.ok(&format!("printf 'one\\ntwo\\n' > {body}"));
    assert_eq!(s.ok(&format!("cat {body}")), "one\ntwo\n");
    s.ok(&format!("cp {body} $T/copy && cmp $T/copy {body}"));
    // truncate(1) is a SETATTR of size 0: an open with OTRUNC.
    s.ok(&format!("truncate -s 0 {body}"));
    assert_eq!(s.ok(&format!("cat {body}")), "");
    // `ls -l` of every directory, and stat of every file. acme/ is acme's
    // tree, where a walk through `new` makes a window and `draw` cannot be
    // opened (as in acme), so a recursive listing leaves it out.
    let listing = s.ok("ls -l $M/work && ls -lR $M/work/meta $M/work/shards $M/work/buffers");
    for name in ["body", "proposals", "entries", "leases", "hash"] {
        assert!(listing.contains(name), "{name} missing from\n{listing}");
    }
    assert!(s.ok("stat -c '%s %F' $M/work/hash").starts_with("0 regular"), "synthetic files have length 0");
    // acme's files through the mount, as acme.rc drives them with 9pfuse.
    let n = s.ok("cat $M/work/acme/new/ctl | awk '{print $1}'").trim().to_string();
    s.ok(&format!("echo name /tmp/through-the-mount > $M/work/acme/{n}/ctl && echo hi >> $M/work/acme/{n}/body"));
    let index = s.ok("cat $M/work/acme/index");
    assert!(index.contains("/tmp/through-the-mount Del Snarf"), "{index}");
    assert_eq!(s.ok(&format!("cat $M/work/acme/{n}/body")), "hi\n");
    // One write(2) is one Twrite: a proposal arrives whole.
    let v = s.ok(&format!("sed -n 's/^version //p' $M/work/buffers/{b}/ctl")).trim().to_string();
    s.ok(&format!("printf 'insert {b} {v} 0\\nfirst\\n' > $M/work/proposals"));
    assert_eq!(s.ok(&format!("cat {body}")), "first\n");
    // A refused write fails with a sensible errno; the log says why.
    // dash's own echo says "I/O error" for every failed write; coreutils' names the errno.
    let (ok, _, err) = s.sh("/bin/echo 'insrt 1 0 0' > $M/work/proposals");
    assert!(!ok && err.contains("Invalid argument"), "{err}");
    assert!(s.log().contains("unknown verb"), "{}", s.log());
    let (ok, _, err) = s.sh("cat $M/work/nosuch");
    assert!(!ok && err.contains("No such file"), "{err}");
    let (ok, _, err) = s.sh("echo x > $M/work/hash");
    assert!(!ok && err.contains("Permission denied"), "{err}");

    // A terminal from the shell: the ctl write's reply read back on the
    // same descriptor, typing into cons, its screen, its output streamed.
    let t = s.ok("exec 3<>$M/work/ctl; echo 'term -d / /bin/sh' >&3; read t <&3; echo $t").trim().to_string();
    assert!(t.parse::<u64>().is_ok(), "a terminal's number: {t:?}");
    let out = s.ok(&format!(
        "timeout 2 cat $M/work/terms/{t}/cons > $T/cons.out & sleep 0.3; \
         echo 'echo mounted-$((40+2))' > $M/work/terms/{t}/cons; \
         for i in $(seq 100); do grep -q '^mounted-42$' $M/work/terms/{t}/screen && break; sleep 0.05; done; \
         cat $M/work/terms/{t}/screen; wait; cat $T/cons.out"
    ));
    assert!(out.lines().filter(|l| l.trim_end() == "mounted-42").count() >= 2, "screen and cons: {out}");
}

/// A body is read ahead (the next pieces asked for while `cat` takes
/// one): what comes out is the body whole and in order, and a read at any
/// offset is what is there.
#[test]
fn a_body_read_ahead_is_whole_and_in_order() {
    if !fuse_available() {
        return;
    }
    let s = Setup::start("ahead");
    let b = s.ok("cat $M/main/buffers/new").trim().to_string();
    let body = format!("$M/main/buffers/{b}/body");
    // About 3.9 MB: pieces of an iounit each, the last one short.
    s.ok(&format!("seq 1 500000 > $T/numbers && cat $T/numbers > {body} && cmp $T/numbers {body}"));
    // Reads at offsets out of order: each piece read ahead is for
    // another place and thrown away.
    for skip in [700, 3, 500, 501, 0, 950] {
        let want = s.ok(&format!("dd if=$T/numbers bs=4096 skip={skip} count=2 status=none"));
        let got = s.ok(&format!("dd if={body} bs=4096 skip={skip} count=2 status=none"));
        assert_eq!(got, want, "8 KiB at block {skip}");
    }
}

/// The numbers 1 to 30,000 a line as the one file of a plain server at
/// an msize of 8192, stat'd as a synthetic file is (length 0), its qid
/// append-only unless it is to look like a `stream`; and the numbers.
fn synthetic_numbers(name: &str, stream: bool) -> (Setup, String) {
    let numbers: String = (1..=30000).map(|n| format!("{n}\n")).collect();
    let s = Setup::start_on_one_file(name, numbers.clone().into_bytes(), &["--msize", "8192"]);
    let one = s.one.as_ref().unwrap();
    one.synthetic.store(true, std::sync::atomic::Ordering::SeqCst);
    one.stream.store(stream, std::sync::atomic::Ordering::SeqCst);
    (s, numbers)
}

/// An append-only file whose reads are of what it holds at the moment (a
/// plain server's, stat'd as synthetic: length 0) is read ahead; a write
/// through the mount between two reads is seen by the second, never a
/// piece read ahead before it.
#[test]
fn a_write_between_two_reads_is_seen_by_the_second() {
    if !fuse_available() {
        return;
    }
    let (s, numbers) = synthetic_numbers("ahead-write", false);
    let one = s.one.as_ref().unwrap();
    s.ok("seq 1 30000 > $T/numbers && cmp $T/numbers $M/numbers");
    one.reads.lock().unwrap().clear();
    let mut file = std::fs::File::open(s.m().join("numbers")).unwrap();
    let mut first = vec![0u8; 1 << 16];
    let n = file.read(&mut first).unwrap();
    assert_eq!(&first[..n], &numbers.as_bytes()[..n]);
    assert!(n < 8192, "one read is one Tread of an iounit: {n} bytes");
    // The next piece is read ahead, before the program asks for it.
    let read_ahead = || {
        let mut reads = one.reads.lock().unwrap().clone();
        reads.sort();
        reads == [0, n as u64, 2 * n as u64]
    };
    let deadline = Instant::now() + Duration::from_secs(10);
    while !read_ahead() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(5));
    }
    assert!(read_ahead(), "the next two pieces read ahead: {:?}", one.reads.lock().unwrap());
    // Ten bytes of that piece changed through the mount.
    let mut writer = std::fs::OpenOptions::new().write(true).open(s.m().join("numbers")).unwrap();
    std::io::Seek::seek(&mut writer, std::io::SeekFrom::Start(n as u64 + 10)).unwrap();
    std::io::Write::write_all(&mut writer, b"XXXXXXXXXX").unwrap();
    drop(writer);
    let mut second = vec![0u8; 1 << 16];
    let m = file.read(&mut second).unwrap();
    assert_eq!(m, n);
    let mut want = numbers.as_bytes()[n..n + m].to_vec();
    want[10..20].copy_from_slice(b"XXXXXXXXXX");
    let start = |b: &[u8]| String::from_utf8_lossy(&b[..40]).into_owned();
    assert!(second[..m] == want[..], "read {:?}, want {:?}", start(&second), start(&want));
}

/// A synthetic file that is not append-only may be a stream whose reads
/// use up what they return (`event`, `/proc/N/wait`): never read ahead.
#[test]
fn a_stream_is_never_read_ahead() {
    if !fuse_available() {
        return;
    }
    let (s, _) = synthetic_numbers("no-ahead", true);
    let one = s.one.as_ref().unwrap();
    let mut file = std::fs::File::open(s.m().join("numbers")).unwrap();
    let mut piece = vec![0u8; 1 << 16];
    for _ in 0..3 {
        assert!(file.read(&mut piece).unwrap() > 0);
    }
    std::thread::sleep(Duration::from_millis(300));
    let n = 8192 - 24;
    assert_eq!(*one.reads.lock().unwrap(), [0, n, 2 * n], "only what was asked for is read");
}

#[test]
fn a_plain_servers_file_lists_reads_and_writes_whole_at_a_small_msize() {
    // A file with a real length (apexd's all have 0) is read through the
    // page cache, whose reads are larger than an 8168-byte Tread: each
    // must be filled, as a short one is the end of the file to the cache;
    // and the server takes at most 1,000 bytes of a write: the writer goes
    // on from where it stopped.
    if !fuse_available() {
        return;
    }
    let numbers: String = (1..=30000).map(|n| format!("{n}\n")).collect();
    let s = Setup::start_on_one_file("msize", numbers.clone().into_bytes(), &["--msize", "8192"]);
    s.ok("seq 1 30000 > $T/numbers");
    // Its directory lists it, and none of the names the server gives that
    // no file name can be (the kernel would refuse the whole listing).
    assert_eq!(s.ok("ls -a $M"), ".\n..\nnumbers\n");
    // Renamed when only `ls -l` has seen it (an inode not walked to yet):
    // it opens by its new name.
    s.ok("ls -l $M > /dev/null && mv $M/numbers $M/renamed && cmp $T/numbers $M/renamed");
    s.ok("mv $M/renamed $M/numbers");
    assert_eq!(s.ok("stat -c %s $M/numbers").trim(), numbers.len().to_string());
    s.ok("cmp $T/numbers $M/numbers");
    s.ok("seq 30000 -1 1 > $T/backwards && cat $T/backwards > $M/numbers");
    s.ok("cmp $T/backwards $M/numbers");
    // chmod changes the permissions and keeps the rest (append-only here);
    // a time 9P cannot hold is the nearest it can.
    s.ok("chmod 600 $M/numbers");
    assert_eq!(s.ok("stat -c %a $M/numbers").trim(), "600");
    s.ok("touch -m -d @-100000 $M/numbers");
    assert_eq!(s.ok("stat -c %Y $M/numbers").trim(), "0");
}

#[test]
fn a_write_the_server_takes_part_of_stops_there() {
    // At an msize of 2048 a page is three Twrites; the server takes 1,000
    // bytes of the first. The mount stops there (what it sends after would
    // land at the wrong place), and the writer goes on from there.
    if !fuse_available() {
        return;
    }
    let s = Setup::start_on_one_file("short", Vec::new(), &["--msize", "2048"]);
    s.ok("seq 1 20000 > $T/numbers && cat $T/numbers > $M/numbers");
    s.ok("cmp $T/numbers $M/numbers");
}

#[test]
fn an_open_given_up_leaves_no_fid_on_the_server() {
    // The server is slow to open: the caller is interrupted, the mount
    // gives the open up after its second of grace; when the server opens
    // after all, the fid the mount walked for it is clunked, not left.
    if !fuse_available() {
        return;
    }
    let s = Setup::start_on_one_file("given-up", b"some text\n".to_vec(), &[]);
    let one = s.one.clone().expect("the one-file server");
    s.ok("cat $M/numbers > /dev/null");
    let settle = |what: &str| {
        let deadline = Instant::now() + Duration::from_secs(10);
        let mut last = one.fids();
        loop {
            std::thread::sleep(Duration::from_millis(200));
            let now = one.fids();
            if now == last {
                return now;
            }
            assert!(Instant::now() < deadline, "{what}: the server's fids never settled");
            last = now;
        }
    };
    let before = settle("before");
    one.stall.store(true, std::sync::atomic::Ordering::SeqCst);
    let (ok, _, _) = s.sh("timeout -s INT 1 cat $M/numbers");
    assert!(!ok, "the cat was interrupted");
    std::thread::sleep(Duration::from_millis(1500));
    one.release();
    let after = settle("after");
    assert!(after <= before, "{} fids left on the server ({before} before)", after - before);
    s.ok("cat $M/numbers > /dev/null");
}

#[test]
fn a_blocked_stream_reader_follows_and_ctrl_c_ends_it() {
    if !fuse_available() {
        return;
    }
    let s = Setup::start("stream");
    let b = s.ok("cat $M/main/buffers/new").trim().to_string();
    let entries = s.m().join(format!("main/shards/buffer.{b}/entries"));
    let mut cat = Command::new("cat").arg(&entries).stdout(Stdio::piped()).spawn().unwrap();
    let mut lines = BufReader::new(cat.stdout.take().unwrap()).lines();
    let first = lines.next().unwrap().unwrap();
    assert!(first.starts_with("1 0 0 {"), "{first}");
    // While cat blocks in read(2), the mount serves everyone else.
    std::thread::sleep(Duration::from_millis(200));
    assert!(cat.try_wait().unwrap().is_none(), "cat blocks at the end of the stream");
    assert!(s.ok("ls $M/main").contains("buffers"));
    s.ok(&format!("echo followed >> $M/main/buffers/{b}/body"));
    let seen = lines.by_ref().map(|l| l.unwrap()).find(|l| l.contains("followed")).expect("the new entry");
    assert!(seen.contains("\"Splice\""), "{seen}");
    // `tail -n +1 -f` follows a stream too (plain `tail -f` waits for an
    // end to find the last lines, and a stream has none).
    let mut tail = Command::new("stdbuf")
        .args(["-o0", "tail", "-n", "+1", "-f"])
        .arg(&entries)
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut tail_lines = BufReader::new(tail.stdout.take().unwrap()).lines();
    s.ok(&format!("echo tailed >> $M/main/buffers/{b}/body"));
    assert!(tail_lines.any(|l| l.unwrap().contains("tailed")));
    // SAFETY: kill(2) on our own children.
    unsafe { libc::kill(tail.id() as i32, libc::SIGINT) };
    let _ = tail.wait();
    // Ctrl-C: FUSE_INTERRUPT becomes a Tflush and read(2) returns EINTR.
    // SAFETY: as above.
    unsafe { libc::kill(cat.id() as i32, libc::SIGINT) };
    let signalled = Instant::now();
    loop {
        if cat.try_wait().unwrap().is_some() {
            break;
        }
        let waited = signalled.elapsed();
        assert!(waited < Duration::from_secs(1), "cat was not reaped within a second of SIGINT ({waited:?})");
        std::thread::sleep(Duration::from_millis(10));
    }
    // The connection is still good: the flushed read disturbed nothing.
    assert!(s.ok("cat $M/main/label").starts_with("main"));
}

#[test]
fn any_call_waiting_on_a_stopped_server_is_interrupted() {
    // A server that answers nothing (stopped): a lookup, a stat, an open,
    // a create waits; a signal must end each (the kernel sends an
    // interrupt, the 9P request is flushed), not leave a process that
    // not even SIGKILL ends.
    if !fuse_available() {
        return;
    }
    let s = Setup::start("stopped");
    s.ok("cat $M/main/id > /dev/null");
    s.signal_apexd(libc::SIGSTOP);
    let calls = ["stat $M/main/nosuch", "cat $M/main/label", "touch $M/main/made", "ls $M/main/buffers"];
    let mut running: Vec<(&str, Child)> = calls
        .iter()
        .map(|c| {
            let child = Command::new("sh")
                .arg("-c")
                .arg(format!("exec timeout -s INT 1 {c}"))
                .env("M", s.m())
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .unwrap();
            (*c, child)
        })
        .collect();
    let deadline = Instant::now() + Duration::from_secs(30);
    while Instant::now() < deadline && running.iter_mut().any(|(_, c)| c.try_wait().unwrap().is_none()) {
        std::thread::sleep(Duration::from_millis(50));
    }
    let mut stuck = Vec::new();
    for (name, c) in running.iter_mut() {
        if c.try_wait().unwrap().is_none() {
            stuck.push(*name);
        }
    }
    s.signal_apexd(libc::SIGCONT);
    for (_, mut c) in running {
        let _ = c.wait();
    }
    assert!(stuck.is_empty(), "still waiting 30 s after their signal: {stuck:?}");
}

#[test]
fn many_processes_write_through_one_mount_at_once() {
    if !fuse_available() {
        return;
    }
    let s = Setup::start("many");
    let b = s.ok("cat $M/main/buffers/new").trim().to_string();
    let writers: Vec<Child> = (0..8)
        .map(|w| {
            Command::new("sh")
                .arg("-c")
                .arg(format!("for i in $(seq 1 25); do echo w{w}-$i >> $M/main/buffers/{b}/body; cat $M/main/hash > /dev/null; done"))
                .env("M", s.m())
                .spawn()
                .unwrap()
        })
        .collect();
    for mut w in writers {
        assert!(w.wait().unwrap().success());
    }
    let body = s.ok(&format!("cat $M/main/buffers/{b}/body"));
    assert_eq!(body.lines().count(), 200, "{body}");
    for w in 0..8 {
        assert!(body.lines().any(|l| l == format!("w{w}-25")));
    }
}

#[test]
fn a_directory_of_thousands_lists_completely() {
    if !fuse_available() {
        return;
    }
    let s = Setup::start("big");
    // 1000 windows: each a window and two buffers, so `shards` holds 3000+.
    s.ok("for i in $(seq 1 1000); do cat $M/main/buffers/new; done > $T/made");
    let made = std::fs::read_to_string(s.dir.join("made")).unwrap();
    assert_eq!(made.lines().count(), 1000);
    let buffers = s.ok("ls $M/main/buffers | wc -l").trim().parse::<usize>().unwrap();
    let shards = s.ok("ls -l $M/main/shards | grep -c '^d'").trim().parse::<usize>().unwrap();
    // Each window's body and tag, plus the session's row and column tags.
    assert!(buffers >= 2001, "buffers lists {buffers}");
    for b in made.lines() {
        assert!(s.m().join(format!("main/buffers/{}", b.trim())).exists());
    }
    let want = s.ok("ls $M/main/buffers | wc -l").trim().parse::<usize>().unwrap();
    assert_eq!(buffers, want, "a second listing agrees");
    assert!(shards >= 3000, "shards lists {shards}");
    // The listing matches the server's own.
    let mut via_9p = String::new();
    Command::new(sibling("apex"))
        .args(["-a", &format!("unix!{}", s.dir.join("ns/apex").display()), "ls", "main/shards"])
        .stdout(Stdio::piped())
        .spawn()
        .unwrap()
        .stdout
        .take()
        .unwrap()
        .read_to_string(&mut via_9p)
        .unwrap();
    let mut via_mount: Vec<String> = s.ok("ls $M/main/shards").lines().map(String::from).collect();
    let mut via_9p: Vec<String> = via_9p.lines().map(String::from).collect();
    via_mount.sort();
    via_9p.sort();
    assert_eq!(via_mount, via_9p);
}

#[test]
fn the_mount_goes_when_the_server_does() {
    if !fuse_available() {
        return;
    }
    let mut s = Setup::start("gone");
    assert!(s.ok("cat $M/main/label").starts_with("main"));
    s.stop_apexd();
    let st = s.wait_mnt();
    assert!(st.success(), "apex-mnt exits cleanly: {st:?}\n{}", s.log());
    assert!(!mounted(&s.dir), "unmounted");
    // The mount point is an ordinary, usable directory again.
    assert_eq!(s.ok("ls -a $M"), ".\n..\n");
}

#[test]
fn an_unmount_from_outside_ends_it() {
    if !fuse_available() {
        return;
    }
    let mut s = Setup::start("umount");
    s.ok("umount $M");
    let st = s.wait_mnt();
    assert!(st.success(), "{st:?}\n{}", s.log());
    assert!(!mounted(&s.dir));
}

#[test]
fn sigint_and_sigterm_unmount_cleanly() {
    if !fuse_available() {
        return;
    }
    for (name, signal) in [("sigint", libc::SIGINT), ("sigterm", libc::SIGTERM)] {
        let mut s = Setup::start(name);
        // Even while a reader holds a file open.
        let mut reader = Command::new("cat").arg(s.m().join("registry")).stdout(Stdio::null()).spawn().unwrap();
        std::thread::sleep(Duration::from_millis(100));
        s.signal_mnt(signal);
        let st = s.wait_mnt();
        assert!(st.success(), "{name}: {st:?}\n{}", s.log());
        assert!(!mounted(&s.dir), "{name}: still mounted");
        let _ = reader.kill();
        let _ = reader.wait();
    }
}

#[test]
fn refusals_are_logged_in_the_servers_words_at_the_default_level() {
    if !fuse_available() {
        return;
    }
    let s = Setup::start_logging("refusals", None);
    // The README's examples, as written.
    assert!(s.ok("cat $M/index").starts_with("main "));
    assert!(s.ok("cat $M/main/acme/index").is_empty(), "a fresh session has no windows");
    let (good, _, err) = s.sh("echo bogus > $M/main/ctl");
    assert!(!good, "the write is refused: {err}");
    let deadline = Instant::now() + Duration::from_secs(10);
    while !s.log().contains("unknown message") && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    let log = s.log();
    assert!(log.contains("ctl line 1") && log.contains("unknown message"), "the server's words: {log}");
    assert!(!log.contains('\u{1b}'), "no colour codes in a file: {log:?}");
}
