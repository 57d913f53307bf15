//! Host services through the tree: get and put a buffer from and to a
//! file, exec a command into `DIR/+Errors`, kill it.

use super::session::new_buffer;
use super::*;

/// The buffer named `name` in session main, if any.
async fn buffer_named(c: &Client, root: u32, name: &str) -> Option<String> {
    let dir = c.open_path(root, "main/buffers", OREAD).await.unwrap();
    let ids: Vec<String> =
        c.read_dir(&dir).await.unwrap().into_iter().map(|s| s.name.into_string()).filter(|n| n != "new").collect();
    c.clunk(dir.fid).await.unwrap();
    for id in ids {
        if let Ok(got) = read(c, root, &format!("main/buffers/{id}/name")).await {
            if text(got).trim_end() == name {
                return Some(id);
            }
        }
    }
    None
}

/// Waits until `f` holds, polling.
async fn eventually<F: std::future::Future<Output = bool>>(what: &str, mut f: impl FnMut() -> F) {
    let deadline = Instant::now() + Duration::from_secs(20);
    while !f().await {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn get_put_exec_and_kill() {
    let d = Daemon::start("host");
    let c = d.client().await;
    let root = c.attach("glenda", "").await.unwrap();
    let work = d.dir.join("work");
    std::fs::create_dir_all(&work).unwrap();
    let file = work.join("notes.txt");
    std::fs::write(&file, "from the disk\n").unwrap();
    let n = new_buffer(&c, root).await;
    let b = |f: &str| format!("main/buffers/{n}/{f}");

    // get: the file's text, its name, clean.
    write(&c, root, &b("ctl"), &format!("get {}", file.display())).await.unwrap();
    assert_eq!(text(read(&c, root, &b("body")).await.unwrap()), "from the disk\n");
    assert_eq!(text(read(&c, root, &b("name")).await.unwrap()).trim_end(), file.display().to_string());
    let ctl = text(read(&c, root, &b("ctl")).await.unwrap());
    assert!(ctl.contains("dirty 0\n"), "{ctl}");
    // A directory lists its entries as acme does, directories with a `/`.
    std::fs::create_dir_all(work.join("sub")).unwrap();
    let dirbuf = new_buffer(&c, root).await;
    let dctl = format!("main/buffers/{dirbuf}/ctl");
    write(&c, root, &dctl, &format!("get {}/", work.display())).await.unwrap();
    assert_eq!(text(read(&c, root, &format!("main/buffers/{dirbuf}/body")).await.unwrap()), "notes.txt\nsub/\n");
    // put: the buffer's text, then clean.
    write(&c, root, &b("body"), "and from apex\n").await.unwrap();
    assert!(text(read(&c, root, &b("ctl")).await.unwrap()).contains("dirty 1\n"));
    write(&c, root, &b("ctl"), "put\n").await.unwrap();
    assert_eq!(std::fs::read_to_string(&file).unwrap(), "from the disk\nand from apex\n");
    let ctl = text(read(&c, root, &b("ctl")).await.unwrap());
    assert!(ctl.contains("dirty 0\n"), "{ctl}");
    let version: u64 = ctl.lines().find_map(|l| l.strip_prefix("version ")).unwrap().parse().unwrap();
    let other = work.join("copy.txt");
    write(&c, root, &b("ctl"), &format!("put -v {version} {}", other.display())).await.unwrap();
    assert_eq!(std::fs::read_to_string(&other).unwrap(), "from the disk\nand from apex\n");
    // Refusals say why and change nothing.
    let before = text(read(&c, root, "main/hash").await.unwrap());
    let e = write(&c, root, &b("ctl"), &format!("put -v {} {}", version + 5, other.display())).await.unwrap_err();
    assert!(e.to_string().contains(&format!("is at version {version}, not {}", version + 5)), "{e}");
    let e = write(&c, root, &b("ctl"), "get relative.txt").await.unwrap_err();
    assert!(e.to_string().contains("not an absolute path"), "{e}");
    let e = write(&c, root, &b("ctl"), &format!("get {}", work.join("missing").display())).await.unwrap_err();
    assert!(e.to_string().contains("No such file"), "{e}");
    let e = write(&c, root, "main/ctl", "exec relative echo hi").await.unwrap_err();
    assert!(e.to_string().contains("not an absolute path"), "{e}");
    let e = write(&c, root, "main/ctl", "kill 999999").await.unwrap_err();
    assert!(e.to_string().contains("no process 999999"), "{e}");
    assert_eq!(text(read(&c, root, "main/hash").await.unwrap()), before);

    // A file that is not UTF-8 loads as acme loads it: each bad byte a
    // U+FFFD (a sequence cut short by the end too), NULs dropped, and
    // the directory's +Errors says so. Put warns once before it writes
    // U+FFFD's bytes over the file's; a Put again writes.
    let binary = work.join("binary");
    let bytes = [0xff, b'a', 0xfe, 0, b'\n', 0xe2, 0x82];
    std::fs::write(&binary, bytes).unwrap();
    let bin = new_buffer(&c, root).await;
    let bb = |f: &str| format!("main/buffers/{bin}/{f}");
    write(&c, root, &bb("ctl"), &format!("get {}", binary.display())).await.unwrap();
    assert_eq!(text(read(&c, root, &bb("body")).await.unwrap()), "\u{FFFD}a\u{FFFD}\n\u{FFFD}\u{FFFD}");
    let errors = format!("{}/+Errors", work.display());
    eventually("the load's warning", || async {
        let Some(eb) = buffer_named(&c, root, &errors).await else { return false };
        let said = text(read(&c, root, &format!("main/buffers/{eb}/body")).await.unwrap());
        said.contains(&format!("{}: 4 bytes that are not UTF-8 are shown as U+FFFD", binary.display()))
            && said.contains(&format!("{}: NUL bytes elided", binary.display()))
    })
    .await;
    let e = write(&c, root, &bb("ctl"), "put\n").await.unwrap_err();
    assert!(
        e.to_string().contains("holds bytes that are not UTF-8 (a file loaded from it shows each as U+FFFD)"),
        "{e}"
    );
    assert_eq!(std::fs::read(&binary).unwrap(), bytes, "the file is as it was");
    write(&c, root, &bb("ctl"), "put\n").await.unwrap();
    assert_eq!(std::fs::read_to_string(&binary).unwrap(), "\u{FFFD}a\u{FFFD}\n\u{FFFD}\u{FFFD}");
    // Written so, it is UTF-8: the next Put writes at once.
    write(&c, root, &bb("body"), "more").await.unwrap();
    write(&c, root, &bb("ctl"), "put\n").await.unwrap();
    assert!(std::fs::read_to_string(&binary).unwrap().ends_with("more"));

    // exec: output lands in DIR/+Errors; the process is in meta/processes
    // until it exits, and its exit is in the metalog.
    let dir = work.display().to_string();
    write(&c, root, "main/ctl", &format!("exec {dir} echo hello; echo oops >&2; exit 3")).await.unwrap();
    let errors = format!("{dir}/+Errors");
    eventually("the errors window", || async { buffer_named(&c, root, &errors).await.is_some() }).await;
    let eb = buffer_named(&c, root, &errors).await.unwrap();
    eventually("the output", || async {
        let body = text(read(&c, root, &format!("main/buffers/{eb}/body")).await.unwrap());
        body.contains("hello\n") && body.contains("oops\n")
    })
    .await;
    eventually("the exit", || async { text(read(&c, root, "main/meta/processes").await.unwrap()).is_empty() }).await;
    let meta = c.open_path(root, "main/shards/meta/entries", OREAD).await.unwrap();
    let info = text(read(&c, root, "main/shards/meta/info").await.unwrap());
    let last: usize = info.lines().find_map(|l| l.strip_prefix("last ")).unwrap().parse().unwrap();
    let mut off = 0;
    let log = super::session::read_lines(&c, &meta, &mut off, last).await;
    c.clunk(meta.fid).await.unwrap();
    assert!(log.contains("\"ProcessExit\"") && log.contains("\"status\":3"), "{log}");

    // acme's environment: $winid, $% and $samfile for the window the
    // command ran from, $font for the UI's font (a blank written %20);
    // without a window, none (not the daemon's own).
    let named = work.join("notes.txt").display().to_string();
    let window = write(&c, root, "main/ctl", &format!("window {named}")).await.map(|_| ());
    window.unwrap();
    let index = text(read(&c, root, "main/acme/index").await.unwrap());
    let number = index.lines().find(|l| l.contains(&named)).and_then(|l| l.split_whitespace().next()).unwrap();
    let shown = work.join("env.out");
    // sh passes no variable named % on to what it runs: the shell's own
    // environment is read.
    let env = format!(
        "tr '\\0' '\\n' < /proc/$$/environ | grep -E '^(winid|%|samfile|font)=' | LC_ALL=C sort > {}",
        shown.display()
    );
    write(&c, root, "main/ctl", &format!("exec -w {number} -f Go%20Regular%2011 {dir} {env}")).await.unwrap();
    let want = format!("%={named}\nfont=Go Regular 11\nsamfile={named}\nwinid={number}\n");
    eventually("the command's environment", || async { std::fs::read_to_string(&shown).is_ok_and(|s| s == want) })
        .await;
    std::fs::remove_file(&shown).unwrap();
    let env = env.replace("|font", "");
    write(&c, root, "main/ctl", &format!("exec {dir} {env}")).await.unwrap();
    eventually("no window's", || async { std::fs::read_to_string(&shown).is_ok_and(|s| s.is_empty()) }).await;
    // acme's |, < and >: on the window's selection, in the background;
    // what | and < print takes the selection's place and is selected.
    let piped = work.join("pipe.txt").display().to_string();
    write(&c, root, "main/ctl", &format!("window {piped}")).await.unwrap();
    let index = text(read(&c, root, "main/acme/index").await.unwrap());
    let number = index.lines().find(|l| l.contains(&piped)).and_then(|l| l.split_whitespace().next()).unwrap();
    let body = format!("main/acme/{number}/body");
    write(&c, root, &body, "keep sel keep").await.unwrap();
    let addr = c.open_path(root, &format!("main/acme/{number}/addr"), ORDWR).await.unwrap();
    c.write(addr.fid, 0, b"#5,#8").await.unwrap();
    write(&c, root, &format!("main/acme/{number}/ctl"), "dot=addr\n").await.unwrap();
    c.clunk(addr.fid).await.unwrap();
    write(&c, root, "main/ctl", &format!("exec -w {number} {dir} |tr a-z A-Z")).await.unwrap();
    eventually("| to replace the selection", || async {
        text(read(&c, root, &body).await.unwrap()) == "keep SEL keep"
    })
    .await;
    write(&c, root, "main/ctl", &format!("exec -w {number} {dir} <echo hi")).await.unwrap();
    eventually("< to replace the selection", || async {
        text(read(&c, root, &body).await.unwrap()) == "keep hi\n keep"
    })
    .await;
    let rdsel = text(read(&c, root, &format!("main/acme/{number}/rdsel")).await.unwrap());
    assert_eq!(rdsel, "hi\n", "what it printed is selected");
    write(&c, root, "main/ctl", &format!("exec -w {number} {dir} >wc -c")).await.unwrap();
    eventually(">'s output in +Errors", || async {
        let Some(eb) = buffer_named(&c, root, &errors).await else { return false };
        text(read(&c, root, &format!("main/buffers/{eb}/body")).await.unwrap()).lines().any(|l| l.trim() == "3")
    })
    .await;
    assert_eq!(text(read(&c, root, &body).await.unwrap()), "keep hi\n keep", "> changes nothing");
    let e = write(&c, root, "main/ctl", &format!("exec -w abc {dir} true")).await.unwrap_err();
    assert!(e.to_string().contains("-w N"), "{e}");
    let e = write(&c, root, "main/ctl", &format!("exec -w 9999 {dir} true")).await.unwrap_err();
    assert!(e.to_string().contains("no window 9999"), "{e}");
    let e = write(&c, root, "main/ctl", &format!("exec -f 50% {dir} true")).await.unwrap_err();
    assert!(e.to_string().contains("%20"), "{e}");

    // kill: a long command ends by SIGTERM.
    write(&c, root, "main/ctl", &format!("exec {dir} sleep 60")).await.unwrap();
    let procs = text(read(&c, root, "main/meta/processes").await.unwrap());
    assert!(procs.contains(" sleep 60"), "{procs}");
    // Its own line: a command run just before may still be listed first,
    // about to go.
    let line = procs.lines().find(|l| l.contains(" sleep 60")).unwrap();
    let pid = line.split_whitespace().next().unwrap_or_else(|| panic!("no process in {procs:?}")).to_string();
    write(&c, root, "main/ctl", &format!("kill {pid}")).await.unwrap();
    eventually("the killed process to go", || async {
        text(read(&c, root, "main/meta/processes").await.unwrap()).is_empty()
    })
    .await;
}

/// `get` reads regular files and directories only, and no file past
/// `--max-file`: `/dev/zero` (which never ends), a FIFO (which may never
/// answer) and a file over the limit are refused with why, the buffer as
/// it was, the daemon's memory untouched.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn get_refuses_what_never_ends_or_is_too_big() {
    let d = Daemon::start_with("host-limits", &["--max-file".into(), "1000".into()]);
    let c = d.client().await;
    let root = c.attach("glenda", "").await.unwrap();
    let n = new_buffer(&c, root).await;
    let b = |f: &str| format!("main/buffers/{n}/{f}");
    write(&c, root, &b("body"), "kept\n").await.unwrap();
    let fifo = d.dir.join("fifo");
    let path = std::ffi::CString::new(fifo.as_os_str().as_encoded_bytes()).unwrap();
    // SAFETY: mkfifo(3) on a path this test owns.
    assert_eq!(unsafe { libc::mkfifo(path.as_ptr(), 0o600) }, 0);
    let big = d.dir.join("big");
    std::fs::write(&big, "x".repeat(1001)).unwrap();
    let fits = d.dir.join("fits");
    std::fs::write(&fits, "y".repeat(1000)).unwrap();
    for (file, says) in [
        ("/dev/zero".to_string(), "is a character device, not a regular file"),
        (fifo.display().to_string(), "is a FIFO, not a regular file"),
        (big.display().to_string(), "over the 1000-byte limit on one file (apexd --max-file)"),
    ] {
        let e = write(&c, root, &b("ctl"), &format!("get {file}")).await.unwrap_err().to_string();
        assert!(e.contains(says), "get {file}: {e}");
        assert_eq!(text(read(&c, root, &b("body")).await.unwrap()), "kept\n", "get {file} changed nothing");
    }
    write(&c, root, &b("ctl"), &format!("get {}", fits.display())).await.unwrap();
    assert_eq!(text(read(&c, root, &b("body")).await.unwrap()).len(), 1000, "a file at the limit is read");
}

/// A command that prints for ever (`yes`) adds at most `--max-output`
/// bytes to `+Errors`: then it is killed and the cap said; `<` the same
/// leaves the selection as it was.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn output_that_never_ends_is_capped_and_its_command_killed() {
    let d = Daemon::start_with("host-flood", &["--max-output".into(), "100000".into()]);
    let c = d.client().await;
    let root = c.attach("glenda", "").await.unwrap();
    let work = d.dir.join("work");
    std::fs::create_dir_all(&work).unwrap();
    let dir = work.display().to_string();
    write(&c, root, "main/ctl", &format!("exec {dir} yes")).await.unwrap();
    let errors = format!("{dir}/+Errors");
    eventually("the errors window", || async { buffer_named(&c, root, &errors).await.is_some() }).await;
    let eb = buffer_named(&c, root, &errors).await.unwrap();
    eventually("the cap said", || async {
        let body = text(read(&c, root, &format!("main/buffers/{eb}/body")).await.unwrap());
        body.contains("yes: printed more than 100000 bytes, the most one command may add; it was killed")
    })
    .await;
    eventually("yes to end", || async { text(read(&c, root, "main/meta/processes").await.unwrap()).is_empty() }).await;
    let body = text(read(&c, root, &format!("main/buffers/{eb}/body")).await.unwrap());
    assert!(body.len() < 120_000, "{} bytes in +Errors", body.len());

    // `<yes` into a window's selection: killed, the selection as it was.
    let f = c.open_path(root, "main/acme/new/ctl", ORDWR).await.unwrap();
    let number = text(c.read(f.fid, 0, 64).await.unwrap()).split_whitespace().next().unwrap().to_string();
    c.write(f.fid, 0, format!("name {dir}/f\n").as_bytes()).await.unwrap();
    c.clunk(f.fid).await.unwrap();
    write(&c, root, &format!("main/acme/{number}/body"), "keep this").await.unwrap();
    write(&c, root, "main/ctl", &format!("exec -w {number} {dir} <yes")).await.unwrap();
    eventually("the cap said again", || async {
        let body = text(read(&c, root, &format!("main/buffers/{eb}/body")).await.unwrap());
        body.contains("the selection is as it was")
    })
    .await;
    assert_eq!(text(read(&c, root, &format!("main/acme/{number}/body")).await.unwrap()), "keep this");
}

/// A long Edit the daemon runs is one of the session's processes while
/// it runs: `Kill Edit`, run from the tag as a person would, ends it, and
/// the text is as it was; +Errors says so; another client is answered
/// meanwhile.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kill_edit_ends_a_long_edit_with_the_text_as_it_was() {
    let d = Daemon::start("kill-edit");
    let c = std::sync::Arc::new(d.client().await);
    let root = c.attach("glenda", "").await.unwrap();
    let f = c.open_path(root, "main/acme/new/ctl", ORDWR).await.unwrap();
    let number = text(c.read(f.fid, 0, 64).await.unwrap()).split_whitespace().next().unwrap().to_string();
    c.write(f.fid, 0, format!("name {}/long\n", d.dir.display()).as_bytes()).await.unwrap();
    c.clunk(f.fid).await.unwrap();
    let w = |file: &str| format!("main/acme/{number}/{file}");
    // Long enough that the Edit runs on for minutes unless stopped.
    let body = "every rune of this is changed, one at a time\n".repeat(100_000);
    let b = c.open_path(root, &w("body"), OWRITE).await.unwrap();
    c.write_all(&b, 0, body.as_bytes()).await.unwrap();
    c.clunk(b.fid).await.unwrap();
    let (edit, kill) = ("Edit ,x/./c/y/", "Kill Edit");
    write(&c, root, &w("tag"), &format!(" {edit} {kill}")).await.unwrap();
    // Opened first: an event reader takes the file menu off the tag.
    let ev = c.open_path(root, &w("event"), ORDWR).await.unwrap();
    let tag = text(read(&c, root, &w("tag")).await.unwrap());
    let at = |word: &str| {
        let q0 = tag[..tag.find(word).expect("the word in the tag")].chars().count();
        (q0, q0 + word.chars().count())
    };
    let running = {
        let (c, (q0, q1)) = (c.clone(), at(edit));
        tokio::spawn(async move { c.write(ev.fid, 0, format!("Mx{q0} {q1}\n").as_bytes()).await })
    };
    eventually("the Edit among the processes", || async {
        text(read(&c, root, "main/meta/processes").await.unwrap()).contains(edit)
    })
    .await;
    // Served meanwhile: another window's worth of reads.
    assert!(text(read(&c, root, "index").await.unwrap()).contains("main"));
    let ev2 = c.open_path(root, &w("event"), ORDWR).await.unwrap();
    let (q0, q1) = at(kill);
    c.write(ev2.fid, 0, format!("Mx{q0} {q1}\n").as_bytes()).await.unwrap();
    let done = tokio::time::timeout(Duration::from_secs(60), running).await.expect("the Edit's request returns");
    done.unwrap().unwrap();
    eventually("the Edit gone from the processes", || async {
        !text(read(&c, root, "main/meta/processes").await.unwrap()).contains(edit)
    })
    .await;
    assert!(text(read(&c, root, &w("body")).await.unwrap()) == body, "the Edit changed nothing");
    let errors = buffer_named(&c, root, &format!("{}/+Errors", d.dir.display())).await.expect("+Errors");
    let said = text(read(&c, root, &format!("main/buffers/{errors}/body")).await.unwrap());
    assert!(said.contains("Edit: killed"), "the end is said: {said}");
}

/// An Edit whose pipe never ends (nor prints) holds only the request that
/// ran it: its command is one of the session's processes while it runs,
/// so `Kill` (here the root's `kill PID`) ends it, and then the Edit fails, changing nothing, and the
/// request returns.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_edit_pipe_that_never_ends_is_a_process_kill_ends() {
    let d = Daemon::start("edit-pipe");
    let c = d.client().await;
    let root = c.attach("glenda", "").await.unwrap();
    let f = c.open_path(root, "main/acme/new/ctl", ORDWR).await.unwrap();
    let number = text(c.read(f.fid, 0, 64).await.unwrap()).split_whitespace().next().unwrap().to_string();
    c.write(f.fid, 0, format!("name {}/f\n", d.dir.display()).as_bytes()).await.unwrap();
    c.clunk(f.fid).await.unwrap();
    let w = |file: &str| format!("main/acme/{number}/{file}");
    write(&c, root, &w("body"), "keep this\n").await.unwrap();
    // Run from the tag as a person would, by a B2 the event file reports
    // and the reader writes back.
    let word = "Edit ,|sleep 600";
    write(&c, root, &w("tag"), &format!(" {word}")).await.unwrap();
    let c = std::sync::Arc::new(c);
    // Opened first: an event reader takes the file menu off the tag.
    let ev = c.open_path(root, &w("event"), ORDWR).await.unwrap();
    let tag = text(read(&c, root, &w("tag")).await.unwrap());
    let q0 = tag[..tag.find(word).expect("the word in the tag")].chars().count();
    let q1 = q0 + word.chars().count();
    let running = {
        let c = c.clone();
        tokio::spawn(async move {
            let done = c.write(ev.fid, 0, format!("Mx{q0} {q1}\n").as_bytes()).await;
            c.clunk(ev.fid).await.unwrap();
            done
        })
    };
    // The pipe's own line (the Edit is listed too, as a job whose
    // command holds the pipe's).
    let pipe = |l: &&str| l.ends_with(" sleep 600") && !l.contains("Edit");
    eventually("the pipe among the processes", || async {
        text(read(&c, root, "main/meta/processes").await.unwrap()).lines().any(|l| pipe(&l))
    })
    .await;
    // The daemon serves on meanwhile.
    assert_eq!(text(read(&c, root, &w("body")).await.unwrap()), "keep this\n");
    let procs = text(read(&c, root, "main/meta/processes").await.unwrap());
    let pid = procs.lines().find(pipe).and_then(|l| l.split_whitespace().next()).unwrap();
    write(&c, root, "main/ctl", &format!("kill {pid}")).await.unwrap();
    let done = tokio::time::timeout(Duration::from_secs(20), running).await.expect("the Edit's request returns");
    done.unwrap().unwrap();
    eventually("the pipe gone from the processes", || async {
        !text(read(&c, root, "main/meta/processes").await.unwrap()).contains("sleep 600")
    })
    .await;
    assert_eq!(text(read(&c, root, &w("body")).await.unwrap()), "keep this\n", "the Edit changed nothing");
    let errors = buffer_named(&c, root, &format!("{}/+Errors", d.dir.display())).await.expect("+Errors");
    let said = text(read(&c, root, &format!("main/buffers/{errors}/body")).await.unwrap());
    assert!(said.contains("sleep 600"), "the failure is said: {said}");
}

/// A Get of a buffer a UI leads: its text goes to the leader, and the
/// name, clean mark and forgotten undo that follow it, in order. A Get of
/// one nobody leads, by the daemon alone, alike.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_get_of_a_led_buffer_goes_through_its_leader_in_order() {
    use apex_core::{AttachmentKind, Shard};
    use apex_fsd::attach::conn::Attached;
    let d = Daemon::start("get-led");
    let c = d.client().await;
    let root = c.attach("glenda", "").await.unwrap();
    let ui = Attached::open(&c, "main", AttachmentKind::Ui, "leader").await.unwrap();
    let wait = Duration::from_secs(20);
    assert!(ui.wait_for(wait, |l| l.leads(Shard::Layout)).await);
    let b = ui.with(|l| l.node_mut().unwrap().create_buffer_as("").unwrap());
    ui.with(|l| super::attach::type_at(l, b, 0, "typed"));
    ui.flush().await.unwrap();
    assert!(ui.wait_for(wait, |l| l.leads(Shard::Buffer(b))).await, "the UI leads its buffer");
    let file = d.dir.join("from-disk.txt");
    std::fs::write(&file, "from disk\n").unwrap();
    let ctl = format!("main/buffers/{}/ctl", b.0);
    let got = tokio::time::timeout(wait, write(&c, root, &ctl, &format!("get {}\n", file.display()))).await;
    got.expect("the get hung").expect("the get was applied");
    let at_leader = |l: &apex_link::Link| {
        let buf = l.node().unwrap().state.buffer(b).unwrap();
        (buf.text.to_string(), buf.name.clone(), buf.differs_from_file(), buf.can_undo())
    };
    let want = ("from disk\n".to_string(), file.display().to_string(), false, false);
    assert!(ui.wait_for(wait, |l| at_leader(l) == want).await, "the leader has {:?}", ui.with(|l| at_leader(l)));
    assert_eq!(text(read(&c, root, &format!("main/buffers/{}/body", b.0)).await.unwrap()), "from disk\n");
    assert_eq!(text(read(&c, root, &format!("main/buffers/{}/name", b.0)).await.unwrap()).trim_end(), want.1);

    // Nobody leads it any more: the same Get, by the daemon alone.
    ui.close().await;
    std::fs::write(&file, "changed on disk\n").unwrap();
    write(&c, root, &ctl, "get\n").await.unwrap();
    assert_eq!(text(read(&c, root, &format!("main/buffers/{}/body", b.0)).await.unwrap()), "changed on disk\n");
}
