//! A new user's first hour: what `apexd` says when it starts, the `apex`
//! command as plan9port's 9p behaves (posted services first, rdwr, ls -l,
//! write -l, a failed dial explained), an address kept between opens,
//! names that reach the acme tree, the window map, and ctl writes of
//! several lines checked whole.

use crate::Daemon;
use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// Runs `apex ARGS` against the daemon's namespace with `input` on its
/// standard input; returns (status ok, stdout, stderr).
fn apex(d: &Daemon, args: &[&str], input: &str) -> (bool, String, String) {
    apex_in(&d.dir, args, input)
}

fn apex_in(ns: &std::path::Path, args: &[&str], input: &str) -> (bool, String, String) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_apex"))
        .args(args)
        .env("NAMESPACE", ns)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run apex");
    child.stdin.take().unwrap().write_all(input.as_bytes()).unwrap();
    let out = child.wait_with_output().unwrap();
    let text = |b: Vec<u8>| String::from_utf8_lossy(&b).to_string();
    (out.status.success(), text(out.stdout), text(out.stderr))
}

fn ok(d: &Daemon, args: &[&str], input: &str) -> String {
    let (good, out, err) = apex(d, args, input);
    assert!(good, "apex {args:?} failed: {err}");
    out
}

#[test]
fn apexd_says_where_it_is_and_what_to_try_without_colour() {
    let dir = std::env::temp_dir().join(format!("apex-e2e-greeting-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let mut child = Command::new(env!("CARGO_BIN_EXE_apexd"))
        .args(["--namespace".as_ref(), dir.as_os_str(), "--acme".as_ref(), "main".as_ref(), "--ephemeral".as_ref()])
        .env("RUST_LOG", "info")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut said = String::new();
    let mut lines = BufReader::new(child.stderr.take().unwrap());
    let deadline = Instant::now() + Duration::from_secs(20);
    while !said.contains("Ctrl-C") && Instant::now() < deadline {
        let mut line = String::new();
        if lines.read_line(&mut line).unwrap() == 0 {
            break;
        }
        said += &line;
    }
    let _ = child.kill();
    let _ = child.wait();
    let _ = std::fs::remove_dir_all(&dir);
    assert!(said.contains(&format!("posted unix!{}", dir.join("apex").display())), "{said}");
    assert!(said.contains(&format!("posted unix!{}", dir.join("acme").display())), "{said}");
    assert!(said.contains("apex read main/acme/index") && said.contains("apex read acme/index"), "{said}");
    assert!(said.contains("serving"), "RUST_LOG=info logs: {said}");
    assert!(!said.contains('\u{1b}'), "no colour codes off a terminal: {said:?}");
}

#[test]
fn apexd_serves_plain_tcp_on_loopback_only_with_insecure_and_tls_otherwise() {
    let dir = std::env::temp_dir().join(format!("apex-e2e-listen-{}", std::process::id()));
    for addr in ["tcp!0.0.0.0!5640", "tcp!192.168.1.1!5640", "tcp!example.com!5640"] {
        let out = Command::new(env!("CARGO_BIN_EXE_apexd"))
            .args(["--namespace".as_ref(), dir.as_os_str(), "--listen".as_ref(), addr.as_ref(), "--ephemeral".as_ref()])
            .arg("--insecure")
            .stdout(Stdio::null())
            .output()
            .unwrap();
        let said = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{addr}: {said}");
        assert!(said.contains(addr) && (said.contains("loopback") || said.contains("localhost")), "{said}");
    }
    // Without --insecure it is TLS, whose certificate and tokens need a
    // state directory: with --ephemeral, refused, and nothing is posted.
    // (Waited for with a deadline: one that served would never end.)
    let mut refused = Command::new(env!("CARGO_BIN_EXE_apexd"))
        .args(["--namespace".as_ref(), dir.as_os_str(), "--listen".as_ref(), "tcp!127.0.0.1!5640".as_ref()])
        .arg("--ephemeral")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    while refused.try_wait().unwrap().is_none() {
        if std::time::Instant::now() > deadline {
            let _ = refused.kill();
            panic!("apexd served TCP without --insecure and without a state directory");
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let out = refused.wait_with_output().unwrap();
    let said = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{said}");
    assert!(said.contains("serves TLS") && said.contains("--ephemeral") && said.contains("--insecure"), "{said}");
    assert!(!dir.join("apex").exists(), "nothing served");
    // A loopback listener is served, and what it gives away is said at
    // start, -q or not.
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let addr = format!("tcp!127.0.0.1!{port}");
    let mut child = Command::new(env!("CARGO_BIN_EXE_apexd"))
        .args(["--namespace".as_ref(), dir.as_os_str(), "--listen".as_ref(), addr.as_ref(), "--ephemeral".as_ref()])
        .args(["-q", "--insecure"])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(child.stderr.take().unwrap()).read_line(&mut line).unwrap();
    let _ = child.kill();
    let _ = child.wait();
    assert!(line.contains(&format!("WARNING: {addr} has no authentication")), "{line}");
    assert!(line.contains("every user of this machine") && line.contains("exec, term"), "{line}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn apex_reads_posted_services_first_then_the_apex_service() {
    let d = crate::acme::acme_daemon("newcomer-paths");
    let via_service = ok(&d, &["read", "acme/index"], "");
    let via_session = ok(&d, &["read", "main/acme/index"], "");
    assert_eq!(via_service, via_session);
    assert_eq!(ok(&d, &["read", "main/hash"], "").trim().len(), 64);
    // -a names the server; paths start at its root.
    assert_eq!(ok(&d, &["-a", "acme", "read", "index"], ""), via_service);
    // A dial that fails says what to do.
    let nowhere = d.dir.join("nowhere");
    let (good, _, err) = apex_in(&nowhere, &["read", "main/hash"], "");
    assert!(!good && err.contains("no socket at") && err.contains("apexd"), "{err}");
    std::fs::create_dir_all(&nowhere).unwrap();
    std::fs::set_permissions(&nowhere, std::os::unix::fs::PermissionsExt::from_mode(0o700)).unwrap();
    drop(std::os::unix::net::UnixListener::bind(nowhere.join("apex")).unwrap());
    let (good, _, err) = apex_in(&nowhere, &["read", "main/hash"], "");
    assert!(!good && err.contains("stale"), "{err}");
}

/// A client dials into no namespace directory another could have posted
/// in, as plan9port's `getns` refuses it: one open to others, or one that
/// is another user's, is refused with what is wrong and how to fix it.
#[test]
fn apex_refuses_a_namespace_directory_another_could_have_posted_in() {
    use std::os::unix::fs::PermissionsExt;
    let d = crate::acme::acme_daemon("newcomer-ns-rules");
    ok(&d, &["read", "main/hash"], "");
    std::fs::set_permissions(&d.dir, std::fs::Permissions::from_mode(0o777)).unwrap();
    let (good, _, err) = apex(&d, &["read", "main/hash"], "");
    std::fs::set_permissions(&d.dir, std::fs::Permissions::from_mode(0o700)).unwrap();
    assert!(!good && err.contains("mode 777; it must be 0700") && err.contains("chmod 700"), "{err}");
    // Another user's (root can make it so; others cannot, and need not).
    let path = std::ffi::CString::new(d.dir.as_os_str().as_encoded_bytes()).unwrap();
    // SAFETY: chown(2) on a directory this test made; 65534 is nobody.
    if unsafe { libc::chown(path.as_ptr(), 65534, 65534) } == 0 {
        let (good, _, err) = apex(&d, &["-a", "apex", "read", "main/hash"], "");
        // SAFETY: as above, back to this user.
        unsafe { libc::chown(path.as_ptr(), libc::getuid(), libc::getgid()) };
        assert!(!good && err.contains("belongs to") && err.contains("not you"), "{err}");
    }
    ok(&d, &["read", "main/hash"], "");
}

#[test]
fn ls_l_rdwr_and_write_l_behave_as_9p_does() {
    let d = Daemon::start("newcomer-cli");
    let long = ok(&d, &["ls", "-l", "main"], "");
    let line = long.lines().find(|l| l.ends_with(" hash")).expect("hash is listed");
    let fields: Vec<&str> = line.split_whitespace().collect();
    assert_eq!(fields[0].len(), 11, "{line}");
    assert_eq!((fields[1], fields[2]), ("M", "0"), "{line}");
    // The time as 9p prints a recent one: `Dec  3 16:19`.
    let (month, day, clock) = (fields[fields.len() - 4], fields[fields.len() - 3], fields[fields.len() - 2]);
    assert!(["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"].contains(&month));
    assert!(day.parse::<u32>().is_ok_and(|d| (1..=31).contains(&d)), "{line}");
    assert!(clock.len() == 5 && clock.as_bytes()[2] == b':', "{line}");
    // Month, the day right-aligned in two, the time: `Dec  3 16:19`.
    let at = line.find(month).unwrap();
    assert_eq!(&line[at..at + 12], format!("{month} {day:>2} {clock}"), "{line}");

    // write -l: one write per line, each a ctl message of its own.
    ok(&d, &["write", "-l", "main/ctl"], "buffer /tmp/one\nbuffer /tmp/two\n");
    let map = ok(&d, &["ls", "main/buffers"], "");
    assert!(map.lines().count() >= 2, "{map}");

    // rdwr: each read printed with a newline, each line written without
    // its own, a refusal reported and the loop going on.
    let b = ok(&d, &["read", "main/buffers/new"], "").trim().to_string();
    let (good, out, err) = apex(&d, &["rdwr", &format!("main/buffers/{b}/ctl")], "dirty\nbogus\nclean\n");
    assert!(good, "{err}");
    assert_eq!(out.matches("buffer ").count(), 4, "a read before each line and one at the end: {out}");
    assert!(out.contains("dirty 1\n"), "{out}");
    assert!(out.ends_with("\n\n"), "each read ends with the newline rdwr adds: {out:?}");
    assert!(err.contains("unknown message"), "{err}");
}

/// As 9p does, `apex read` into a reader that stops early (`| sed 1q`)
/// ends quietly, by SIGPIPE, with nothing said; a daemon that goes away
/// mid-read is still an error, said.
#[test]
fn a_reader_that_stops_early_ends_apex_read_quietly() {
    use std::io::Read;
    use std::os::unix::process::ExitStatusExt;
    let d = Daemon::start("newcomer-pipe");
    let b = ok(&d, &["read", "main/buffers/new"], "").trim().to_string();
    let body = format!("main/buffers/{b}/body");
    ok(&d, &["write", &body], &"a line of the body\n".repeat(100_000));
    let mut reader = Command::new(env!("CARGO_BIN_EXE_apex"))
        .args(["read", &body])
        .env("NAMESPACE", &d.dir)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run apex");
    let mut first = [0u8; 19];
    reader.stdout.take().unwrap().read_exact(&mut first).unwrap();
    assert_eq!(&first, b"a line of the body\n");
    // The pipe's reader is gone (dropped above): the next write ends it.
    let out = reader.wait_with_output().unwrap();
    assert_eq!(out.status.signal(), Some(libc::SIGPIPE), "{:?}", out.status);
    assert!(out.stderr.is_empty(), "nothing said: {}", String::from_utf8_lossy(&out.stderr));

    // The daemon gone while `apex write` waits for more input: the write
    // after fails, said, as 9p's "write error", and apex is not killed by
    // a SIGPIPE.
    let mut writer = Command::new(env!("CARGO_BIN_EXE_apex"))
        .args(["write", &body])
        .env("NAMESPACE", &d.dir)
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run apex");
    let mut lines = writer.stdin.take().unwrap();
    lines.write_all(b"one more\n").unwrap();
    let deadline = Instant::now() + Duration::from_secs(20);
    while !ok(&d, &["read", &body], "").ends_with("one more\n") {
        assert!(Instant::now() < deadline, "the first line never reached the body");
        std::thread::sleep(Duration::from_millis(20));
    }
    // SAFETY: a signal to the daemon this test started.
    unsafe { libc::kill(d.pid() as i32, libc::SIGKILL) };
    while std::os::unix::net::UnixStream::connect(d.socket()).is_ok() {
        assert!(Instant::now() < deadline, "the daemon did not go");
        std::thread::sleep(Duration::from_millis(20));
    }
    lines.write_all(b"and another\n").unwrap();
    drop(lines);
    let out = writer.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!((out.status.code(), out.status.signal()), (Some(1), None), "an error, not a signal: {err}");
    assert!(err.contains("connection closed"), "{err}");
}

#[test]
fn the_address_stays_between_opens_and_names_reach_the_acme_tree() {
    let d = Daemon::start("newcomer-addr");
    let b = ok(&d, &["read", "main/buffers/new"], "").trim().to_string();
    ok(&d, &["write", &format!("main/buffers/{b}/body")], "one two three");
    ok(&d, &["write", &format!("main/buffers/{b}/addr")], "/two/");
    ok(&d, &["write", &format!("main/buffers/{b}/data")], "2");
    assert_eq!(ok(&d, &["read", &format!("main/buffers/{b}/body")], ""), "one 2 three");

    // A buffer shown in a window, renamed through buffers/N/: the acme
    // tree's index and the tag carry the name.
    ok(&d, &["write", "main/ctl"], "window\n");
    let windows = ok(&d, &["read", "main/meta/windows"], "");
    let row: Vec<&str> = windows.lines().last().unwrap().split_whitespace().collect();
    let (number, body) = (row[0], row[1]);
    ok(&d, &["write", &format!("main/buffers/{body}/name")], "/tmp/renamed.txt");
    let index = ok(&d, &["read", "main/acme/index"], "");
    assert!(index.lines().any(|l| l.contains(" /tmp/renamed.txt ")), "{index}");
    let tag = ok(&d, &["read", &format!("main/acme/{number}/tag")], "");
    assert!(tag.starts_with("/tmp/renamed.txt "), "{tag}");
    ok(&d, &["write", &format!("main/buffers/{body}/ctl")], "name /tmp/again.txt\n");
    assert!(ok(&d, &["read", &format!("main/acme/{number}/tag")], "").starts_with("/tmp/again.txt "));
    // One map both ways: meta/windows and the winid line.
    let ctl = ok(&d, &["read", &format!("main/buffers/{body}/ctl")], "");
    assert!(ctl.lines().any(|l| l == format!("winid {number}")), "{ctl}");
    let windows = ok(&d, &["read", "main/meta/windows"], "");
    assert!(windows.lines().any(|l| l.starts_with(&format!("{number} {body} ")) && l.ends_with(" /tmp/again.txt")));
}

#[test]
fn ctl_writes_of_several_lines_are_checked_whole() {
    let d = Daemon::start("newcomer-ctl");
    let sessions = ok(&d, &["read", "index"], "");
    let (good, _, err) = apex(&d, &["write", "ctl"], "new s1\nbogus\n");
    assert!(!good && err.contains("ctl line 2"), "{err}");
    assert_eq!(ok(&d, &["read", "index"], ""), sessions, "nothing applied");
    ok(&d, &["write", "ctl"], "new s1\nnew s2\n");
    assert!(ok(&d, &["read", "index"], "").contains("s2 "));

    let windows = ok(&d, &["read", "main/meta/windows"], "");
    let (good, _, err) = apex(&d, &["write", "main/ctl"], "window /tmp/w1\ndelwindow 999\n");
    assert!(!good && err.contains("ctl line 2") && err.contains("no window 999"), "{err}");
    assert_eq!(ok(&d, &["read", "main/meta/windows"], ""), windows, "nothing applied");
    ok(&d, &["write", "main/ctl"], "window /tmp/w1\nwindow /tmp/w2\n");
    assert_eq!(ok(&d, &["read", "main/meta/windows"], "").lines().count(), windows.lines().count() + 2);

    let b = ok(&d, &["read", "main/buffers/new"], "").trim().to_string();
    let ctl = format!("main/buffers/{b}/ctl");
    let (good, _, err) = apex(&d, &["write", &ctl], "dirty\nget relative/path\n");
    assert!(!good && err.contains("ctl line 2") && err.contains("absolute"), "{err}");
    assert!(ok(&d, &["read", &ctl], "").contains("dirty 0\n"), "the first line was not applied");
    ok(&d, &["write", &ctl], "name /tmp/n\ndirty\n");
    let now = ok(&d, &["read", &ctl], "");
    assert!(now.contains("dirty 1\n") && now.contains("name /tmp/n\n"), "{now}");
}

/// The README's shell examples that talk to a daemon, as a reader
/// pastes them (`9p` read as `apex`, its twin; `/tmp/` a scratch
/// directory; a stream the README says Ctrl-C ends is ended after a
/// moment): each block runs in bash, `-e`, against a fresh daemon. The
/// mount's block needs FUSE and is the mount tests'; building and PATH
/// are the README's first lines.
#[test]
fn the_readme_s_examples_work_as_pasted() {
    let readme = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../README.md")).unwrap();
    let blocks = sh_blocks(&readme);
    let talking: Vec<&String> =
        blocks.iter().filter(|b| (b.contains("apex ") || b.contains("9p ")) && !b.contains("apex-mnt")).collect();
    assert!(talking.len() >= 4, "the README's examples were found: {blocks:#?}");
    let bin = std::path::Path::new(env!("CARGO_BIN_EXE_apex")).parent().unwrap().to_path_buf();
    let path = format!("{}:{}", bin.display(), std::env::var("PATH").unwrap_or_default());
    for block in talking {
        let d = Daemon::start("readme");
        let scratch = d.dir.join("scratch");
        std::fs::create_dir_all(&scratch).unwrap();
        let script: String = block
            .lines()
            .map(|l| {
                let l = l.trim().replace("9p ", "apex ").replace("/tmp", &scratch.display().to_string());
                match l.split_once(" # ") {
                    Some((command, comment)) if comment.contains("Ctrl-C ends it") => {
                        format!("timeout 1 {command} || [ $? = 124 ]\n")
                    }
                    _ => format!("{l}\n"),
                }
            })
            .collect();
        let mut child = Command::new("bash")
            .args(["-e", "-c", &script])
            .env("PATH", &path)
            .env("NAMESPACE", &d.dir)
            .current_dir(&scratch)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("run bash");
        let deadline = Instant::now() + Duration::from_secs(30);
        while child.try_wait().unwrap().is_none() {
            if Instant::now() > deadline {
                let _ = child.kill();
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let out = child.wait_with_output().unwrap();
        assert!(
            out.status.success(),
            "this README example failed as pasted:\n{script}\nstdout: {}\nstderr: {}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

/// The text of each ```sh block.
fn sh_blocks(md: &str) -> Vec<String> {
    let mut blocks = Vec::new();
    let mut current: Option<String> = None;
    for line in md.lines() {
        match (&mut current, line.trim_start()) {
            (None, l) if l.starts_with("```sh") => current = Some(String::new()),
            (Some(_), l) if l.starts_with("```") => blocks.extend(current.take()),
            (Some(b), _) => {
                b.push_str(line);
                b.push('\n');
            }
            (None, _) => {}
        }
    }
    blocks
}

/// `apex open FILE:ADDR` shows the file in its window at the address (and
/// names the window); `apex edit` does the same and returns once the
/// window is closed, so it serves as git's editor: the message typed into
/// the window and Put is the commit's.
#[test]
fn apex_open_shows_a_file_at_its_address_and_apex_edit_serves_as_git_s_editor() {
    let d = Daemon::start("open");
    let work = d.dir.join("work");
    std::fs::create_dir_all(&work).unwrap();
    std::fs::write(work.join("notes.txt"), "one\ntwo\nthree\n").unwrap();
    let in_work = |args: &[&str]| {
        let out = Command::new(env!("CARGO_BIN_EXE_apex"))
            .args(args)
            .env("NAMESPACE", &d.dir)
            .current_dir(&work)
            .output()
            .unwrap();
        (
            out.status.success(),
            String::from_utf8_lossy(&out.stdout).to_string(),
            String::from_utf8_lossy(&out.stderr).to_string(),
        )
    };
    let (ok, number, err) = in_work(&["open", "notes.txt:2"]);
    assert!(ok, "{err}");
    let number = number.trim().to_string();
    assert_eq!(apex(&d, &["read", &format!("main/acme/{number}/rdsel")], "").1, "two\n", "at its address");
    let tag = apex(&d, &["read", &format!("main/acme/{number}/tag")], "").1;
    assert!(tag.starts_with(&format!("{}/notes.txt ", work.display())), "named in full: {tag}");
    let (_, again, _) = in_work(&["open", "notes.txt:/three/"]);
    assert_eq!(again.trim(), number, "the same window");
    assert_eq!(apex(&d, &["read", &format!("main/acme/{number}/rdsel")], "").1, "three");
    // A relative name through the ctl itself is refused, saying why.
    let (ok, _, err) = apex(&d, &["write", "main/ctl"], "open notes.txt\n");
    assert!(!ok && err.contains("not an absolute path"), "{err}");
    // Many files at once (as B takes them): a number a file, windows made
    // in the order given, a file named twice in the same window, each
    // window loaded.
    let many: Vec<String> = (0..150).map(|i| format!("many{i}.txt")).collect();
    for (i, f) in many.iter().enumerate() {
        std::fs::write(work.join(f), format!("file {i}\n")).unwrap();
    }
    let mut args: Vec<&str> = vec!["open"];
    args.extend(many.iter().map(String::as_str));
    args.extend(["notes.txt", "many3.txt"]);
    let (ok, numbers, err) = in_work(&args);
    assert!(ok, "{err}");
    let numbers: Vec<&str> = numbers.lines().collect();
    assert_eq!(numbers.len(), many.len() + 2, "a line a file: {numbers:?}");
    assert_eq!(numbers[many.len()], number, "notes.txt's window again");
    assert_eq!(numbers[many.len() + 1], numbers[3], "a file named twice, one window");
    // acme numbers windows as it makes them.
    let made: Vec<u32> = numbers[..many.len()].iter().map(|n| n.parse().unwrap()).collect();
    assert!(made.windows(2).all(|w| w[0] < w[1]), "windows made in the order given: {made:?}");
    for (i, n) in numbers[..many.len()].iter().enumerate() {
        let tag = apex(&d, &["read", &format!("main/acme/{n}/tag")], "").1;
        assert!(tag.starts_with(&format!("{}/many{i}.txt ", work.display())), "window {n}: {tag}");
        assert_eq!(apex(&d, &["read", &format!("main/acme/{n}/body")], "").1, format!("file {i}\n"));
    }
    // One that cannot be read (a FIFO, which may never end) among them:
    // said by name, the others still opened, and the command fails.
    let fifo = work.join("a.fifo");
    let made = std::process::Command::new("mkfifo").arg(&fifo).status().unwrap();
    assert!(made.success());
    std::fs::write(work.join("after.txt"), "after\n").unwrap();
    let (ok, out, err) = in_work(&["open", "notes.txt", "a.fifo", "after.txt"]);
    assert!(!ok, "{out}");
    assert!(err.contains("a.fifo") && err.contains("1 of 3 files not opened"), "{err}");
    let out: Vec<&str> = out.lines().collect();
    assert_eq!(out.len(), 3, "{out:?}");
    assert_eq!(out[0], number);
    assert_eq!(apex(&d, &["read", &format!("main/acme/{}/body", out[2])], "").1, "after\n");
    // A session that is not there: said, and the command fails.
    let (ok, out, err) = in_work(&["open", "-s", "nosuch", "notes.txt", "many1.txt"]);
    assert!(!ok && out.is_empty() && err.contains("nosuch"), "{out} {err}");

    // git's editor.
    let git = |args: &[&str]| {
        let out = Command::new("git").args(args).current_dir(&work).output().expect("run git");
        assert!(out.status.success(), "git {args:?}: {}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8_lossy(&out.stdout).to_string()
    };
    git(&["init", "-q"]);
    git(&["add", "notes.txt"]);
    let mut commit = Command::new("git")
        .args(["-c", "user.name=apex", "-c", "user.email=apex@example.org", "commit", "-q"])
        .env("GIT_EDITOR", format!("{} edit", env!("CARGO_BIN_EXE_apex")))
        .env("NAMESPACE", &d.dir)
        .current_dir(&work)
        .stdin(Stdio::null())
        .spawn()
        .expect("run git commit");
    let message = work.join(".git/COMMIT_EDITMSG").display().to_string();
    let deadline = Instant::now() + Duration::from_secs(20);
    let number = loop {
        let index = apex(&d, &["read", "main/acme/index"], "").1;
        if let Some(l) = index.lines().find(|l| l.split_whitespace().nth(5) == Some(message.as_str())) {
            break l.split_whitespace().next().unwrap().to_string();
        }
        assert!(Instant::now() < deadline, "the commit message's window: {index}");
        std::thread::sleep(Duration::from_millis(50));
    };
    assert!(commit.try_wait().unwrap().is_none(), "git waits while the window is open");
    for (file, text) in [("addr", ","), ("data", "typed in apex\n"), ("ctl", "put\n"), ("ctl", "del\n")] {
        let (ok, _, err) = apex(&d, &["write", &format!("main/acme/{number}/{file}")], text);
        assert!(ok, "{file} {text:?}: {err}");
    }
    let deadline = Instant::now() + Duration::from_secs(20);
    while commit.try_wait().unwrap().is_none() {
        assert!(Instant::now() < deadline, "git commit to return once the window is closed");
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(commit.wait().unwrap().success());
    assert_eq!(git(&["log", "-1", "--format=%s"]).trim(), "typed in apex");
}
