//! Terminals through a real `apexd`: real programs (a shell, printf, vi,
//! less, seq, stty) on real ptys, checked through `terms/N/screen`,
//! `scrollback`, `text`, `ctl`, `cons`, and the term shard as followers
//! replay it.

use crate::attach::{converge, eventually, until};
use crate::{read, text, write, Daemon};
use apex_core::grid::{mode, style, Color, Style};
use apex_core::term::Term;
use apex_core::{AttachmentKind, State, TermId};
use apex_fsd::attach::conn::Attached;
use apex_ninep::fcall::{ORDWR, OREAD, OWRITE};
use apex_ninep::Client;

/// Starts a terminal with `ctl` message `msg` (`term ...`); its number,
/// as the write's reply names it.
async fn start(c: &Client, root: u32, msg: &str) -> u64 {
    let f = c.open_path(root, "main/ctl", ORDWR).await.unwrap();
    c.write(f.fid, 0, msg.as_bytes()).await.unwrap();
    let reply = text(c.read(f.fid, 0, 100).await.unwrap());
    c.clunk(f.fid).await.unwrap();
    reply.trim().parse().unwrap_or_else(|_| panic!("a terminal's number, not {reply:?}"))
}

/// Types `s` into terminal `n`.
async fn type_in(c: &Client, root: u32, n: u64, s: &str) {
    write(c, root, &format!("main/terms/{n}/cons"), s).await.unwrap();
}

/// The terminal's state as the daemon's snapshot has it.
async fn shard(c: &Client, root: u32, n: u64) -> Term {
    let st = State::from_snapshot(&read(c, root, "main/snapshot").await.unwrap()).unwrap();
    st.terms[&TermId(n)].clone()
}

async fn screen_has(c: &Client, root: u32, n: u64, want: &str) -> String {
    let path = format!("main/terms/{n}/screen");
    let deadline = tokio::time::Instant::now() + crate::attach::WAIT;
    loop {
        let screen = text(read(c, root, &path).await.unwrap());
        if screen.contains(want) {
            return screen;
        }
        assert!(tokio::time::Instant::now() < deadline, "no {want:?} on the screen of terminal {n}:\n{screen}");
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
}

async fn exited(c: &Client, root: u32, n: u64) -> String {
    eventually(c, root, &format!("main/terms/{n}/ctl"), |s| s.contains("\nexit ")).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_shell_runs_what_is_typed_and_the_files_say_so() {
    let d = Daemon::start("term-shell");
    let c = d.client().await;
    let root = c.attach("u", "").await.unwrap();
    let dir = d.dir.display().to_string();
    let n = start(&c, root, &format!("term -d {dir}\n")).await;
    // A prompt: the shell's last line ends in $ or #.
    let screen = eventually(&c, root, &format!("main/terms/{n}/screen"), |s| {
        s.lines().rev().find(|l| !l.is_empty()).is_some_and(|l| l.trim_end().ends_with(['$', '#']))
    })
    .await;
    assert_eq!(screen.lines().count(), 24, "{screen:?}");
    let index = text(read(&c, root, "main/terms/index").await.unwrap());
    let fields: Vec<&str> = index.split_whitespace().collect();
    assert_eq!(fields[0], n.to_string());
    assert!(fields[1].parse::<u32>().is_ok(), "a pid: {index}");
    assert_eq!(&fields[2..5], ["80x24", "running", dir.as_str()], "{index}");
    let ctl = text(read(&c, root, &format!("main/terms/{n}/ctl")).await.unwrap());
    assert!(ctl.contains(&format!("dir {dir}\nsize 80x24\npid {}\n", fields[1])), "{ctl}");

    // Two readers of cons each get the raw output from their open on.
    let readers = [
        c.open_path(root, &format!("main/terms/{n}/cons"), OREAD).await.unwrap(),
        c.open_path(root, &format!("main/terms/{n}/cons"), OREAD).await.unwrap(),
    ];
    type_in(&c, root, n, "pwd; echo made-$((6*7))\n").await;
    screen_has(&c, root, n, "made-42").await;
    for f in &readers {
        let got = std::cell::RefCell::new(Vec::new());
        until(
            || format!("cons output, got {:?}", String::from_utf8_lossy(&got.borrow())),
            async || {
                let more = c.read(f.fid, 0, 4096).await.unwrap();
                got.borrow_mut().extend(more);
                String::from_utf8_lossy(&got.borrow()).contains("made-42").then_some(())
            },
        )
        .await;
        c.clunk(f.fid).await.unwrap();
    }
    // A read waiting for output ends with a flush (our client sends one
    // when it gives up), and the connection goes on. The shell's next
    // prompt comes first, so nothing is on its way when the read starts.
    eventually(&c, root, &format!("main/terms/{n}/screen"), |s| {
        let lines: Vec<&str> = s.lines().filter(|l| !l.is_empty()).collect();
        let made = lines.iter().position(|l| l.contains("made-42"));
        let prompt = lines.iter().rposition(|l| l.trim_end().ends_with(['$', '#']));
        matches!((made, prompt), (Some(m), Some(p)) if p > m)
    })
    .await;
    let f = c.open_path(root, &format!("main/terms/{n}/cons"), OREAD).await.unwrap();
    let waited = tokio::time::timeout(std::time::Duration::from_millis(300), c.read(f.fid, 0, 100)).await;
    assert!(waited.is_err(), "nothing to read yet: {waited:?}");
    assert!(text(read(&c, root, "main/terms/index").await.unwrap()).starts_with(&format!("{n} ")));
    c.clunk(f.fid).await.unwrap();
    let screen = text(read(&c, root, &format!("main/terms/{n}/screen")).await.unwrap());
    assert!(screen.lines().any(|l| l == dir), "pwd ran in {dir}: {screen}");
    let text_file = text(read(&c, root, &format!("main/terms/{n}/text")).await.unwrap());
    assert!(text_file.ends_with(&screen), "text ends with the screen");

    // It is shown in a window of the layout named DIR/-term.N (every UI
    // draws it there), listed once in the acme tree, whose body is its
    // text, read-only.
    let index = text(read(&c, root, "main/acme/index").await.unwrap());
    let name = format!("{dir}/-term.{n}");
    let line = index.lines().find(|l| l.contains(&name)).unwrap_or_else(|| panic!("{name} in {index}"));
    let number: u32 = line.split_whitespace().next().unwrap().parse().unwrap();
    let body = text(read(&c, root, &format!("main/acme/{number}/body")).await.unwrap());
    assert!(body.contains("made-42") && body.ends_with(&screen), "{body}");
    let tag = text(read(&c, root, &format!("main/acme/{number}/tag")).await.unwrap());
    assert_eq!(tag, format!("{name} Del Snarf | Look "));
    let ctl = text(read(&c, root, &format!("main/acme/{number}/ctl")).await.unwrap());
    assert!(ctl.starts_with(&format!("{number:11} ")), "{ctl}");
    let e = write(&c, root, &format!("main/acme/{number}/body"), "x").await.unwrap_err().to_string();
    assert!(e.contains(&format!("read-only; type into terms/{n}/cons")), "{e}");
    assert_eq!(index.matches(&name).count(), 1, "listed once: {index}");
    let windows = text(read(&c, root, "main/meta/windows").await.unwrap());
    assert!(windows.lines().any(|l| l.starts_with(&format!("{number} "))), "a window of the layout: {windows}");

    // Where the shell is: /proc's word while it runs (a shell's OSC 7
    // report aside), the last OSC 7 once it is gone.
    type_in(&c, root, n, "cd /; printf '\\033]7;file://localhost/osc%%207\\007'\n").await;
    eventually(&c, root, &format!("main/terms/{n}/ctl"), |s| s.contains("\ncwd /\n")).await;

    // A program's exit status is reported; the screen stays.
    type_in(&c, root, n, "exit 7\n").await;
    let ctl = exited(&c, root, n).await;
    assert!(ctl.ends_with("exit 7\n"), "{ctl}");
    assert!(ctl.contains("\ncwd /osc 7\n"), "the reported directory: {ctl}");
    assert!(text(read(&c, root, "main/terms/index").await.unwrap()).contains(" exit:7 "));
    assert!(text(read(&c, root, &format!("main/terms/{n}/screen")).await.unwrap()).contains("made-42"));
    // Now the terminal refuses input, signals and resizes, changing nothing.
    let hash = text(read(&c, root, "main/hash").await.unwrap());
    let e = write(&c, root, &format!("main/terms/{n}/cons"), "ls\n").await.unwrap_err().to_string();
    assert_eq!(e, format!("terminal {n} has exited; its screen stays until ctl close"));
    for msg in ["signal INT", "resize 100 30", "kill"] {
        let e = write(&c, root, &format!("main/terms/{n}/ctl"), msg).await.unwrap_err().to_string();
        assert!(e.contains("has exited"), "{msg}: {e}");
    }
    assert_eq!(text(read(&c, root, "main/hash").await.unwrap()), hash);
    // close removes it, and the window that showed it.
    write(&c, root, &format!("main/terms/{n}/ctl"), "close\n").await.unwrap();
    assert_eq!(text(read(&c, root, "main/terms/index").await.unwrap()), "");
    assert!(read(&c, root, &format!("main/terms/{n}/screen")).await.is_err());
    let index = text(read(&c, root, "main/acme/index").await.unwrap());
    assert!(!index.contains(&name), "its window went with it: {index}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_messages_are_refused_and_change_nothing() {
    let d = Daemon::start("term-bad");
    let c = d.client().await;
    let root = c.attach("u", "").await.unwrap();
    let n = start(&c, root, "term -s 40x10 -d / sleep 30\n").await;
    let hash = text(read(&c, root, "main/hash").await.unwrap());
    let refused: &[(&str, &str, &str)] = &[
        ("ctl", "term -s 0x24", "2 to 4096 columns"),
        ("ctl", "term -s 1x5", "2 to 4096 columns"),
        ("ctl", "term -s 80x4097", "2 to 4096 columns"),
        ("ctl", "term -s 4096x4096", "at most 1048576 cells"),
        ("ctl", "term -d relative", "not an absolute path"),
        ("ctl", "term -l 5000000", "over the limit"),
        ("terms/N/ctl", "frob", "unknown message; expected resize COLS ROWS, signal NAME, kill or close"),
        ("terms/N/ctl", "resize 0 10", "2 to 4096 columns"),
        ("terms/N/ctl", "resize 1 10", "2 to 4096 columns"),
        ("terms/N/ctl", "resize 80 5000", "2 to 4096 columns"),
        ("terms/N/ctl", "close\nresize 80 24", "nothing may follow close"),
        ("terms/N/ctl", "signal FOO", "no signal \"FOO\""),
        ("terms/N/ctl", "signal INT\nsignal BAR", "line 2"),
        ("terms/N/screen", "x", "read-only"),
    ];
    for (file, msg, says) in refused {
        let path = format!("main/{}", file.replace('N', &n.to_string()));
        let e = match c.open_path(root, &path, OWRITE).await {
            Err(e) => e.to_string(),
            Ok(f) => {
                let r = c.write(f.fid, 0, msg.as_bytes()).await;
                c.clunk(f.fid).await.unwrap();
                r.unwrap_err().to_string()
            }
        };
        assert!(e.contains(says), "{path} {msg:?}: {e}");
    }
    assert_eq!(text(read(&c, root, "main/hash").await.unwrap()), hash, "nothing changed");
    let index = text(read(&c, root, "main/terms/index").await.unwrap());
    assert_eq!(index.lines().count(), 1, "{index}");
    assert!(read(&c, root, "main/terms/99/screen").await.is_err());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn colours_wide_characters_and_a_cursor_report_answered_once() {
    let d = Daemon::start("term-sgr");
    let c = d.client().await;
    let root = c.attach("u", "").await.unwrap();
    let printf = r"printf '\033[31mred\033[0m \033[1;38;5;208mo\033[0m \033[48;2;1;2;3mtc\033[0m \346\274\242x\n'";
    let n = start(&c, root, &format!("term -d / {printf}\n")).await;
    exited(&c, root, n).await;
    let t = shard(&c, root, n).await;
    let row = &t.grid[0];
    assert_eq!(row.text, "red o tc 漢x");
    let d0 = Style::default();
    let red = Style { fg: Color::Indexed(1), ..d0 };
    let orange = Style { fg: Color::Indexed(208), flags: style::BOLD, ..d0 };
    let truecolor = Style { bg: Color::Rgb(1, 2, 3), ..d0 };
    let wide = Style { flags: style::WIDE, ..d0 };
    let runs: Vec<(u32, Style)> = row.runs.iter().map(|r| (r.len, r.style)).collect();
    assert_eq!(runs, [(3, red), (1, d0), (1, orange), (1, d0), (2, truecolor), (1, d0), (1, wide)]);

    // A program asking where the cursor is gets one answer, from the
    // daemon (its emulator), however many clients watch.
    let ask = r"stty raw -echo; printf 'ab\033[6n'; sleep 1; got=$(dd bs=64 count=1 2>/dev/null | od -An -c | tr -d ' \n'); stty sane; echo; echo got:$got:";
    let _watcher = Attached::open(&c, "main", AttachmentKind::Tool, "watcher").await.unwrap();
    let n = start(&c, root, &format!("term -d / {ask}\n")).await;
    exited(&c, root, n).await;
    let screen = text(read(&c, root, &format!("main/terms/{n}/screen")).await.unwrap());
    assert!(screen.contains("got:033[1;3R:"), "one answer, at row 1 column 3: {screen}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn vi_takes_the_alternate_screen_and_gives_the_old_one_back_and_less_pages() {
    let d = Daemon::start("term-vi");
    let c = d.client().await;
    let root = c.attach("u", "").await.unwrap();
    let file = d.dir.join("long.txt");
    std::fs::create_dir_all(&d.dir).unwrap();
    std::fs::write(&file, (1..=1000).map(|i| format!("line {i}\n")).collect::<String>()).unwrap();
    let n = start(&c, root, "term -d / /bin/sh\n").await;
    type_in(&c, root, n, "echo before-vi\n").await;
    screen_has(&c, root, n, "before-vi").await;
    type_in(&c, root, n, &format!("vi {}\n", file.display())).await;
    screen_has(&c, root, n, "line 20").await;
    let t = shard(&c, root, n).await;
    assert_eq!(t.modes & mode::ALT_SCREEN, mode::ALT_SCREEN, "vi is on the alternate screen");
    assert!(!t.screen().contains("before-vi"));
    type_in(&c, root, n, "\x1b:q!\r").await;
    until(
        || "vi to leave the alternate screen".into(),
        async || (shard(&c, root, n).await.modes & mode::ALT_SCREEN == 0).then_some(()),
    )
    .await;
    screen_has(&c, root, n, "before-vi").await;

    // less pages: a space shows the next screenful.
    type_in(&c, root, n, &format!("less {}\n", file.display())).await;
    let first = screen_has(&c, root, n, "line 23").await;
    assert!(first.starts_with("line 1\n"), "{first}");
    type_in(&c, root, n, " ").await;
    let next = screen_has(&c, root, n, "line 46").await;
    assert!(next.starts_with("line 24\n"), "{next}");
    type_in(&c, root, n, "q").await;
    screen_has(&c, root, n, "before-vi").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn seq_keeps_exactly_the_last_rows_in_scrollback_and_followers_agree() {
    let d = Daemon::start("term-seq");
    let c = d.client().await;
    let root = c.attach("u", "").await.unwrap();
    let a = Attached::open(&c, "main", AttachmentKind::Tool, "a").await.unwrap();
    let b = Attached::open(&c, "main", AttachmentKind::Tool, "b").await.unwrap();
    let n = start(&c, root, "term -d / -l 1000 seq 1 50000\n").await;
    exited(&c, root, n).await;
    let screen = text(read(&c, root, &format!("main/terms/{n}/screen")).await.unwrap());
    let first_on_screen: u64 = screen.lines().next().unwrap().parse().unwrap();
    assert!(screen.contains("\n50000\n"), "{screen}");
    let scrollback = text(read(&c, root, &format!("main/terms/{n}/scrollback")).await.unwrap());
    let rows: Vec<u64> = scrollback.lines().map(|l| l.parse().unwrap()).collect();
    assert_eq!(rows.len(), 1000);
    let want: Vec<u64> = (first_on_screen - 1000..first_on_screen).collect();
    assert_eq!(rows, want, "the last 1000 rows before the screen, none missing");
    let t = shard(&c, root, n).await;
    assert_eq!(t.scrolled, first_on_screen - 1, "every row that scrolled off was logged");
    assert_eq!(t.exit, Some(0));
    // Two followers replayed the same grid, and agree with the daemon.
    converge(&c, root, &[&a, &b]).await;
    let grid = |l: &Attached| l.with(|l| l.node().unwrap().state.terms[&TermId(n)].clone());
    assert_eq!(grid(&a), grid(&b));
    assert_eq!(grid(&a), t);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_resize_reaches_the_program_and_signals_its_foreground() {
    let d = Daemon::start("term-resize");
    let c = d.client().await;
    let root = c.attach("u", "").await.unwrap();
    let n = start(&c, root, "term -d / -s 60x20 /bin/sh\n").await;
    type_in(&c, root, n, "trap 'echo got-winch' WINCH; stty size\n").await;
    screen_has(&c, root, n, "20 60").await;
    write(&c, root, &format!("main/terms/{n}/ctl"), "resize 100 30\n").await.unwrap();
    // The new size is in the shard when the write is answered.
    let t = shard(&c, root, n).await;
    assert_eq!((t.cols, t.rows, t.grid.len()), (100, 30, 30));
    // SIGWINCH reaches the shell at its next prompt.
    type_in(&c, root, n, "stty size\n").await;
    let screen = screen_has(&c, root, n, "30 100").await;
    assert!(screen.contains("got-winch"), "{screen}");
    assert_eq!(screen.lines().count(), 30);
    // signal INT interrupts the foreground program; the shell lives on.
    type_in(&c, root, n, "sleep 100\n").await;
    until(
        || "sleep to start".into(),
        async || {
            text(read(&c, root, &format!("main/terms/{n}/screen")).await.unwrap()).contains("sleep 100").then_some(())
        },
    )
    .await;
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    write(&c, root, &format!("main/terms/{n}/ctl"), "signal INT\n").await.unwrap();
    type_in(&c, root, n, "echo sleep-ended-$?\n").await;
    screen_has(&c, root, n, "sleep-ended-130").await;
    // kill ends it, with the status of SIGKILL.
    write(&c, root, &format!("main/terms/{n}/ctl"), "kill\n").await.unwrap();
    let ctl = exited(&c, root, n).await;
    assert!(ctl.ends_with("exit 137\n"), "{ctl}");
}

/// The descriptors apexd has open.
fn fds(d: &Daemon) -> usize {
    std::fs::read_dir(format!("/proc/{}/fd", d.pid())).map_or(0, |r| r.count())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn closing_lets_go_of_the_pty_though_a_background_job_holds_it_and_readers_end() {
    let d = Daemon::start("term-close");
    let c = d.client().await;
    let root = c.attach("u", "").await.unwrap();
    let before = fds(&d);
    let pidfile = d.dir.join("job.pid");
    let n = start(&c, root, "term -d / /bin/sh\n").await;
    // The shell leaves a job that keeps the pty's other end open.
    type_in(&c, root, n, &format!("sleep 1000 & echo $! > {}; exit\n", pidfile.display())).await;
    exited(&c, root, n).await;
    let reader = c.open_path(root, &format!("main/terms/{n}/cons"), OREAD).await.unwrap();
    let c2 = c.clone();
    let waiting = tokio::spawn(async move { c2.read(reader.fid, 0, 100).await });
    write(&c, root, &format!("main/terms/{n}/ctl"), "close\n").await.unwrap();
    // The reader gets end of file; the pty and its threads are let go.
    let got = tokio::time::timeout(crate::attach::WAIT, waiting).await.expect("the cons reader ended");
    assert_eq!(got.unwrap().unwrap(), Vec::<u8>::new());
    until(
        || format!("apexd's descriptors back to {before}, at {}", fds(&d)),
        async || (fds(&d) <= before).then_some(()),
    )
    .await;
    if let Ok(pid) = std::fs::read_to_string(&pidfile) {
        // SAFETY: kill(2) with plain integers.
        unsafe { libc::kill(pid.trim().parse().unwrap_or(0), libc::SIGKILL) };
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn combining_marks_written_forever_stay_a_few_per_cell() {
    let d = Daemon::start("term-marks");
    let c = d.client().await;
    let root = c.attach("u", "").await.unwrap();
    let marks = r"printf a; i=0; while [ $i -lt 3000 ]; do printf '\314\201\314\201\314\201\314\201'; i=$((i+1)); done; echo; echo end";
    let n = start(&c, root, &format!("term -d / -s 20x5 {marks}\n")).await;
    exited(&c, root, n).await;
    let screen = text(read(&c, root, &format!("main/terms/{n}/screen")).await.unwrap());
    let first = screen.lines().next().unwrap();
    assert_eq!(first, format!("a{}", "\u{301}".repeat(16)), "at most 16 marks on a cell");
    assert!(screen.contains("\nend\n"), "{screen}");
}
