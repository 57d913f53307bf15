//! Terminals across daemons: a keeper holds a terminal's program and pty
//! while no daemon runs, the next daemon takes it up; an ephemeral
//! daemon's end with it; every terminal has a window at start.

use super::persist::Kept;
use super::{read, text, write};
use apex_core::State;
use apex_ninep::Client;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// Waits until terminal `n`'s screen has `want`; the screen.
async fn term_screen_has(k: &Kept, c: &Client, root: u32, n: &str, want: &str) -> String {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let s = text(read(c, root, &format!("main/terms/{n}/screen")).await.unwrap());
        if s.contains(want) {
            return s;
        }
        assert!(Instant::now() < deadline, "no {want:?} on terminal {n}'s screen: {s}\n{}", k.said());
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Starts a terminal running `/bin/sh` in `/`, 30x5; its number.
async fn start_term(c: &Client, root: u32) -> String {
    let f = c.open_path(root, "main/ctl", apex_ninep::fcall::ORDWR).await.unwrap();
    c.write(f.fid, 0, b"term -d / -s 30x5 /bin/sh\n").await.unwrap();
    let n = text(c.read(f.fid, 0, 64).await.unwrap()).trim().to_string();
    c.clunk(f.fid).await.unwrap();
    n
}

/// The pid of terminal `n`'s program, as its `ctl` says it.
async fn program_of(c: &Client, root: u32, n: &str) -> String {
    let ctl = text(read(c, root, &format!("main/terms/{n}/ctl")).await.unwrap());
    ctl.lines().find_map(|l| l.strip_prefix("pid ")).expect("a pid").to_string()
}

/// Waits until process `pid` is gone; `why` if it is not within 10 s.
fn wait_gone(pid: &str, why: &str) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while Path::new(&format!("/proc/{pid}")).exists() {
        assert!(Instant::now() < deadline, "{why}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Types `line` into the terminal whose `cons` is named, kills the daemon
/// at once (SIGKILL), lets the program go on with no daemon for a while,
/// and starts the next; a client of it.
async fn typed_then_killed(k: &mut Kept, (c, root): (Client, u32), n: &str, line: &str) -> (Client, u32) {
    write(&c, root, &format!("main/terms/{n}/cons"), line).await.unwrap();
    // Typed input is queued for the pty (a write to cons does not wait on
    // the program): killed before it is written, it would be lost. The
    // shell's echo says it got there.
    term_screen_has(k, &c, root, n, line.trim_end()).await;
    drop(c);
    k.kill9();
    std::thread::sleep(Duration::from_millis(1500));
    k.start(&[], &[]);
    k.client().await
}

/// A terminal outlives its daemon, as a tmux pane outlives its client:
/// its keeper holds the program and the pty while no daemon runs, and the
/// next daemon takes it up. After a clean stop the shell is the same
/// process with the same variables, its screen and scrollback as they
/// were; what it printed while no daemon ran shows after a SIGKILL; an
/// exit meanwhile is reported with its status; and a keeper whose
/// session directory is removed ends its program.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_terminal_outlives_its_daemon_and_the_next_takes_it_up() {
    let mut k = Kept::new("term");
    k.start(&[], &[]);
    let (c, root) = k.client().await;
    let n = start_term(&c, root).await;
    let cons = format!("main/terms/{n}/cons");
    write(&c, root, &cons, "X=kept; seq 1 20; echo $X-$((1+1))\n").await.unwrap();
    let screen = term_screen_has(&k, &c, root, &n, "\nkept-2\n").await;
    let scrollback = text(read(&c, root, &format!("main/terms/{n}/scrollback")).await.unwrap());
    assert!(scrollback.contains("1\n2\n3\n"), "{scrollback}");
    let pid = program_of(&c, root, &n).await;
    drop(c);

    // A clean stop, and a start: the same shell, untouched.
    k.stop();
    k.start(&[], &[]);
    let (c, root) = k.client().await;
    assert_eq!(text(read(&c, root, &format!("main/terms/{n}/screen")).await.unwrap()), screen);
    assert_eq!(text(read(&c, root, &format!("main/terms/{n}/scrollback")).await.unwrap()), scrollback);
    let ctl = text(read(&c, root, &format!("main/terms/{n}/ctl")).await.unwrap());
    assert!(ctl.contains(&format!("pid {pid}\n")) && !ctl.contains("exit"), "the same program runs: {ctl}");
    write(&c, root, &cons, "echo $X-again\n").await.unwrap();
    term_screen_has(&k, &c, root, &n, "kept-again").await;

    // SIGKILL while the program is about to print: what it printed with
    // no daemon running is on the screen of the next.
    let (c, root) = typed_then_killed(&mut k, (c, root), &n, "sleep 1; echo while-away\n").await;
    term_screen_has(&k, &c, root, &n, "while-away\n").await;

    // The program ends while no daemon runs: the next says how.
    let (c, root) = typed_then_killed(&mut k, (c, root), &n, "sleep 1; exit 7\n").await;
    let ctl = text(read(&c, root, &format!("main/terms/{n}/ctl")).await.unwrap());
    assert!(ctl.ends_with("exit 7\n"), "{ctl}");
    // Its window's tag says so, as the daemon has it before any UI.
    let st = State::from_snapshot(&read(&c, root, "main/snapshot").await.unwrap()).unwrap();
    let term = apex_core::TermId(n.parse().unwrap());
    let (window, _) = st.windows.iter().find(|(_, w)| w.term == Some(term)).expect("its window");
    let number = st.layout.numbers[window].0;
    let tag = text(read(&c, root, &format!("main/acme/{number}/tag")).await.unwrap());
    assert!(tag.contains(&format!("/-term.{n} Del Snarf exit 7 |")), "{tag}");
    let e = write(&c, root, &cons, "ls\n").await.unwrap_err().to_string();
    assert!(e.contains("has exited"), "{e}");
    write(&c, root, &format!("main/terms/{n}/ctl"), "close\n").await.unwrap();
    assert_eq!(text(read(&c, root, "main/terms/index").await.unwrap()), "");

    // Nobody will come for a terminal whose session directory is gone:
    // its keeper ends it.
    let m = start_term(&c, root).await;
    let pid = program_of(&c, root, &m).await;
    drop(c);
    k.kill9();
    let sessions = k.state.join("sessions");
    assert!(Path::new(&format!("/proc/{pid}")).exists(), "it runs with no daemon");
    std::fs::remove_dir_all(&sessions).unwrap();
    wait_gone(&pid, &format!("terminal {m}'s program {pid} outlived its session's directory"));
}

/// An ephemeral daemon's terminals end with it: their keepers end them
/// when it hangs up.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_ephemeral_daemon_s_terminals_end_with_it() {
    let mut k = Kept::new("term-ephemeral");
    let ns = k.ns.clone();
    let log = std::fs::File::create(&k.log).unwrap();
    let child = Command::new(env!("CARGO_BIN_EXE_apexd"))
        .arg("--namespace")
        .arg(&ns)
        .args(["--ephemeral", "-q"])
        .stdout(Stdio::null())
        .stderr(log)
        .spawn()
        .unwrap();
    k.daemon = Some(child);
    let deadline = Instant::now() + Duration::from_secs(30);
    while std::os::unix::net::UnixStream::connect(ns.join("apex")).is_err() {
        assert!(Instant::now() < deadline, "apexd did not answer: {}", k.said());
        std::thread::sleep(Duration::from_millis(10));
    }
    let (c, root) = k.client().await;
    let n = start_term(&c, root).await;
    let pid = program_of(&c, root, &n).await;
    drop(c);
    assert!(Path::new(&format!("/proc/{pid}")).exists(), "it runs");
    k.kill9();
    wait_gone(&pid, &format!("the program {pid} outlived its ephemeral daemon"));
}

/// Every terminal is shown in a window: one whose window a tool deleted
/// gets a window of its own again when a daemon starts.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_terminal_no_window_shows_gets_one_at_start() {
    let mut k = Kept::new("term-window");
    k.start(&[], &[]);
    let (c, root) = k.client().await;
    let n: u64 = start_term(&c, root).await.parse().unwrap();
    let term = apex_core::TermId(n);
    let state = |bytes: Vec<u8>| State::from_snapshot(&bytes).unwrap();
    let st = state(read(&c, root, "main/snapshot").await.unwrap());
    let (window, _) = st.windows.iter().find(|(_, w)| w.term == Some(term)).expect("its window");
    let number = st.layout.numbers[window].0;
    write(&c, root, "main/ctl", &format!("delwindow {number}\n")).await.unwrap();
    let st = state(read(&c, root, "main/snapshot").await.unwrap());
    assert!(!st.windows.values().any(|w| w.term == Some(term)), "no window shows it");
    drop(c);
    k.stop();
    k.start(&[], &[]);
    let (c, root) = k.client().await;
    let st = state(read(&c, root, "main/snapshot").await.unwrap());
    assert_eq!(st.windows.values().filter(|w| w.term == Some(term)).count(), 1, "a window again");
    let index = text(read(&c, root, "main/acme/index").await.unwrap());
    assert!(index.contains(&format!("/-term.{n} ")), "{index}");
    // Closed, its keeper goes and leaves nothing behind.
    write(&c, root, &format!("main/terms/{n}/ctl"), "close\n").await.unwrap();
    let sessions = k.state.join("sessions");
    let session = std::fs::read_dir(&sessions).unwrap().next().unwrap().unwrap().path();
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let left: Vec<_> = std::fs::read_dir(session.join("pty")).unwrap().flatten().map(|e| e.file_name()).collect();
        if left.is_empty() {
            break;
        }
        assert!(Instant::now() < deadline, "its keeper left {left:?}");
        std::thread::sleep(Duration::from_millis(20));
    }
}
