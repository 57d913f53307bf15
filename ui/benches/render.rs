//! `cargo bench -p apex-ui`: the headless renderer's figures, each beside
//! a reference measured in the same run (a plain fill of the same frame,
//! as fast as pixels can be written). Nothing here asserts a time.
//!
//! - a full 1920×1080 frame of two columns and four windows over a
//!   10,000-line file, drawn whole;
//!
//! and against a real `apexd` (built beside this benchmark if missing),
//! through apex-link and the same `Ui` the window drives:
//!
//! - keystroke to pixels: one rune typed into the led replica, the parts
//!   it changed drawn again, the flush handed to the link; p50 and p99;
//! - opening a 100 MB file as `apex-ui FILE` does, to its first frame, and
//!   this process's resident memory against the file's size;
//! - paging through it with Page Down, each page drawn;
//! - a keystroke in a leading UI to pixels in a second, watching UI,
//!   beside the daemon's flush-to-acknowledgement in the same run;
//! - keystroke to pixels through a link 100 ms away each way (a relay
//!   holding every byte back), beside the ack's round trip; a tool's
//!   write routed to that far UI; then that link stalled 30 s while
//!   typing goes on;
//! - `apex-ui FILE` on a virtual display (Xvfb), from its start to its
//!   first frame shown, beside attaching, opening and painting in
//!   process;
//! - `apex-ui FILE` on a file of 1 GB (`APEX_UI_GB`, 0 for none;
//!   `APEX_BENCH_ONLY=gb` alone), to its first frame shown, beside vim
//!   opening it, with apex-ui's and the daemon's memory against its size;
//! - a terminal window: `seq 1 2000000` from the command typed to the
//!   prompt after it drawn, beside xterm and xterm running tmux under Xvfb
//!   (at the same size, in the same run); a keystroke in it to its echo
//!   drawn, p50 and p99.

use apex_core::propose::{self, Created, Proposal};
use apex_core::*;
use apex_link::Attached;
use apex_ui::app::Ui;
use apex_ui::font::Fonts;
use apex_ui::geom::{Metrics, Screen};
use apex_ui::host::{UiHost, WAIT};
use apex_ui::input::{Event, Key};
use apex_ui::render::{draw, Canvas};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

mod slowlink;

const W: i32 = 1920;
const H: i32 = 1080;

fn window(node: &mut Node, column: usize, name: &str, body: Option<BufferId>) -> make::NewWindow {
    let column = Some(node.state.layout.columns[column].id);
    let p = Proposal::CreateWindow { body, column, name: name.into(), near: None };
    match propose::apply(node, &p).unwrap().created {
        Created::Window(w) => w,
        other => panic!("{other:?}"),
    }
}

fn text_of_lines(n: usize) -> String {
    (0..n)
        .map(|i| format!("{i:5}\tfn line_{i}(x: u64) -> u64 {{ x * {i} + 1 }} // some text to fill the width\n"))
        .collect()
}

fn insert(node: &mut Node, b: BufferId, q: u64, text: &str) {
    let op = BufferOp::Splice { q0: q, q1: q, text: text.into(), origin: Origin::Keyboard };
    node.append(Shard::Buffer(b), Op::Buffer(op)).unwrap();
}

fn best_of(runs: usize, mut f: impl FnMut() -> Duration) -> Duration {
    (0..runs).map(|_| f()).min().unwrap_or_default()
}

/// The `q` quantile of `v`, in milliseconds (`v` sorted first).
fn percentile(v: &mut [Duration], q: f64) -> f64 {
    v.sort();
    ms(v[((v.len() as f64 * q) as usize).min(v.len() - 1)])
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

fn resident_bytes() -> u64 {
    let statm = std::fs::read_to_string("/proc/self/statm").unwrap_or_default();
    let pages: u64 = statm.split_whitespace().nth(1).and_then(|p| p.parse().ok()).unwrap_or(0);
    pages * 4096
}

fn main() {
    // `APEX_BENCH_ONLY=many` measures the session of many windows alone.
    if std::env::var("APEX_BENCH_ONLY").as_deref() == Ok("many") {
        many_windows();
        return;
    }
    // `APEX_BENCH_ONLY=gb` measures `apex-ui` on a file of GBs alone.
    if std::env::var("APEX_BENCH_ONLY").as_deref() == Ok("gb") {
        open_gigabytes();
        return;
    }
    println!("apex-ui render benchmark ({W}x{H}; ratios are to a plain fill of the same frame in this run)");
    let mut fonts = Fonts::new(1.0);
    let m = Metrics::new(fonts.line_height(), 1.0);
    let mut canvas = Canvas::new(W, H);
    let fill = best_of(50, || {
        let t = Instant::now();
        canvas.fill(canvas.bounds(), 0x123456);
        std::hint::black_box(&canvas.pixels);
        t.elapsed()
    });
    println!("reference: fill of the frame {:.3} ms", ms(fill));

    // Two columns, four windows, a 10,000-line file in each.
    let mut node = Node::server();
    make::init_session(&mut node).unwrap();
    let a = window(&mut node, 0, "/tmp/a.rs", None);
    insert(&mut node, a.body, 0, &text_of_lines(10_000));
    window(&mut node, 0, "/tmp/b.rs", Some(a.body));
    let c = window(&mut node, 1, "/tmp/c.rs", None);
    insert(&mut node, c.body, 0, &text_of_lines(10_000));
    window(&mut node, 1, "/tmp/d.rs", Some(c.body));
    let screen = Screen::new(&node.state, W, H, &m, &mut fonts, &Default::default());
    draw(&mut canvas, &node.state, &screen, &mut fonts, &m, &Default::default()); // warm the glyph cache
    let frame = best_of(20, || {
        let t = Instant::now();
        draw(&mut canvas, &node.state, &screen, &mut fonts, &m, &Default::default());
        t.elapsed()
    });
    println!("full frame: {:.3} ms ({:.1}x the fill; target <= 4 ms)", ms(frame), ms(frame) / ms(fill));

    // Through a real daemon and the link, as apex-ui runs.
    let d = Daemon::start();
    let mut ui = d.ui();
    let dir = d.ns.join("files");
    std::fs::create_dir(&dir).unwrap();

    // Keystroke to pixels: the rune applied to the led replica, the
    // changed parts drawn, the flush handed to the link; and, apart, how
    // long the daemon takes to acknowledge it (nothing waits for that).
    let small = dir.join("a.rs");
    std::fs::write(&small, text_of_lines(10_000)).unwrap();
    let (w, body) = open(&mut ui, &small);
    click_in(&mut ui, w);
    ui.paint();
    let (mut times, mut acks) = (Vec::new(), Vec::new());
    for _ in 0..300 {
        let t = Instant::now();
        ui.handle(Event::Text("x".into()));
        let damage = ui.paint();
        times.push(t.elapsed());
        assert!(!damage.is_empty(), "the keystroke changed pixels");
        let t = Instant::now();
        ui.settle().unwrap();
        acks.push(t.elapsed());
    }
    let p = percentile;
    println!(
        "keystroke to pixels through the link: p50 {:.3} ms, p99 {:.3} ms (target p99 <= 8 ms); the daemon's ack after {:.3} ms (p50)",
        p(&mut times, 0.5),
        p(&mut times, 0.99),
        p(&mut acks, 0.5)
    );
    // Keystroke in the leading UI to pixels in a watching one: a second
    // UI attaches and takes the leases; the first follows it.
    let mut leader = d.ui();
    let led = leader.host.att.clone();
    let leads = d.rt.block_on(led.wait_for(WAIT, |l| l.leads(Shard::Buffer(body))));
    assert!(leads, "the second UI leads the buffer");
    click_in(&mut leader, w);
    leader.paint();
    ui.paint();
    let mut follow = Vec::new();
    for _ in 0..300 {
        let t = Instant::now();
        leader.handle(Event::Text("y".into()));
        leader.paint();
        let version = leader.host.att.lock().node().unwrap().state.buffer(body).unwrap().version;
        let seen = d.rt.block_on(ui.host.att.wait_for(WAIT, |l| {
            l.node().and_then(|n| n.state.buffer(body).ok()).is_some_and(|b| b.version >= version)
        }));
        assert!(seen, "the watching UI follows");
        let damage = ui.paint();
        follow.push(t.elapsed());
        assert!(!damage.is_empty(), "the watching UI drew the keystroke");
    }
    let mut acks = Vec::new();
    for _ in 0..100 {
        leader.handle(Event::Text("z".into()));
        leader.paint();
        let t = Instant::now();
        leader.settle().unwrap();
        acks.push(t.elapsed());
    }
    println!(
        "keystroke in the leading UI to pixels in a watching one: p50 {:.3} ms, p99 {:.3} ms; the daemon's flush to ack {:.3} ms (p50), {:.3} ms (p99)",
        p(&mut follow, 0.5),
        p(&mut follow, 0.99),
        p(&mut acks, 0.5),
        p(&mut acks, 0.99)
    );
    // The first UI takes the leases back for what follows.
    ui.lead();
    ui.paint();
    let lead_back = ui.host.att.clone();
    assert!(d.rt.block_on(lead_back.wait_for(WAIT, |l| l.leads(Shard::Layout))));
    drop(leader);

    far_away(&d, &dir, &mut ui);

    terminal(&d, &mut ui);

    // A 100 MB file: opened as `apex-ui FILE` opens it (the daemon reads
    // it, the text comes to the UI's replica over the link), its first
    // frame drawn; the UI's resident memory against the file's size; then
    // paged through with Page Down.
    let line = "the quick brown fox jumps over the lazy dog; 0123456789 abcdefghijklmnopqrstuvwxyz\n";
    let big = dir.join("big.txt");
    std::fs::write(&big, line.repeat(100 * 1024 * 1024 / line.len())).unwrap();
    let size = std::fs::metadata(&big).unwrap().len();
    // Resident figures count what is kept, not what glibc holds on to.
    apex_sys::malloc::give_back();
    let before = resident_bytes();
    let t = Instant::now();
    let (w, body) = open(&mut ui, &big);
    let len = ui.host.att.lock().node().unwrap().state.buffer(body).unwrap().len();
    assert_eq!(len, size, "the whole file is in the replica");
    ui.paint();
    let open_time = t.elapsed();
    ui.settle().unwrap();
    apex_sys::malloc::give_back();
    let grew = resident_bytes().saturating_sub(before);
    println!(
        "open 100 MB through the daemon: {:.1} ms to the first frame (target <= 1 s); resident memory grew {:.1} MB, {:.2}x the file (target <= 2x)",
        ms(open_time),
        grew as f64 / 1e6,
        grew as f64 / size as f64
    );
    click_in(&mut ui, w);
    ui.paint();
    let pages = 200;
    let t = Instant::now();
    for _ in 0..pages {
        ui.handle(Event::Key(Key::PageDown));
        ui.paint();
    }
    let per_page = t.elapsed() / pages;
    let org = ui.host.att.lock().node().unwrap().state.buffer(body).unwrap().views[&ViewId::WindowBody(w)].org;
    assert!(org > 0, "it scrolled");
    println!("scroll 100 MB by a page (Page Down, frame drawn): {:.3} ms per page (target <= 4 ms)", ms(per_page));
    edit_in_ui(&mut ui, &dir, &big, w, body);
    drop(ui);
    drop(d);
    let file = std::env::temp_dir().join(format!("apex-ui-bench-start-{}.rs", std::process::id()));
    std::fs::write(&file, text_of_lines(10_000)).unwrap();
    start_to_first_frame(&file);
    let _ = std::fs::remove_file(&file);
    many_windows();
    open_gigabytes();
}

/// `apex-ui FILE` on a file of `$APEX_UI_GB` GB (default 1, 0 for none):
/// from its start to its first frame shown on a virtual display (it
/// opens the file before its first frame), beside `vim -es` opening the file
/// and quitting; the resident memory of apex-ui and of the daemon then,
/// against the file's size.
fn open_gigabytes() {
    let gb: usize = std::env::var("APEX_UI_GB").ok().and_then(|v| v.parse().ok()).unwrap_or(1);
    if gb == 0 {
        return;
    }
    let Some((mut xvfb, display)) = xvfb() else {
        println!("open {gb} GB in apex-ui: not measured (no Xvfb here)");
        return;
    };
    let d = Daemon::start();
    let file = d.ns.join("gigabytes.txt");
    {
        let line = "the quick brown fox jumps over the lazy dog; 0123456789 abcdefghijklmnopqrstuvwxyz\n";
        let block = line.repeat((1 << 20) / line.len());
        let mut f = std::io::BufWriter::new(std::fs::File::create(&file).unwrap());
        for _ in 0..(gb << 30).div_ceil(block.len()) {
            std::io::Write::write_all(&mut f, block.as_bytes()).unwrap();
        }
    }
    let mib = std::fs::metadata(&file).unwrap().len() as f64 / (1 << 20) as f64;
    let (mut ui, shown) = apex_ui_shown(&display, &d.ns, Some(&file));
    let ((ui_now, ui_peak), (daemon_now, daemon_peak)) = (memory_of(ui.id()), memory_of(d.child.id()));
    // The text goes on to the daemon after the first frame; what each
    // holds once it has (the UI's entries acknowledged, the daemon's
    // snapshot written).
    std::thread::sleep(Duration::from_secs(10));
    let ((ui_later, _), (daemon_later, _)) = (memory_of(ui.id()), memory_of(d.child.id()));
    let _ = ui.kill();
    let _ = ui.wait();
    let vim = which("vim").then(|| {
        let t = Instant::now();
        let ok = std::process::Command::new("vim")
            .args(["-u", "NONE", "-i", "NONE", "-n", "-es", "-c", "q"])
            .arg(&file)
            .status()
            .is_ok_and(|s| s.success());
        ok.then(|| t.elapsed())
    });
    let vim = match vim.flatten() {
        Some(v) => format!("vim -es {:.0} ms (vim/apex {:.2}x)", ms(v), ms(v) / shown),
        None => "vim: not measured (not installed here)".to_string(),
    };
    println!("open {mib:.0} MiB as apex-ui FILE, to its first frame shown: {shown:.0} ms; {vim}");
    println!(
        "  resident then: apex-ui {ui_now:.0} MiB ({:.2}x the file; peak {:.2}x), apexd {daemon_now:.0} MiB ({:.2}x; peak {:.2}x)",
        ui_now / mib,
        ui_peak / mib,
        daemon_now / mib,
        daemon_peak / mib
    );
    println!(
        "  resident 10 s on: apex-ui {ui_later:.0} MiB ({:.2}x), apexd {daemon_later:.0} MiB ({:.2}x) (goal 1.3x each)",
        ui_later / mib,
        daemon_later / mib
    );
    let _ = std::fs::remove_file(&file);
    drop(d);
    // SAFETY: kill(2) with plain integers.
    unsafe { libc::kill(xvfb.id() as i32, libc::SIGTERM) };
    let _ = xvfb.wait();
}

/// `apex-ui` (on `file`, if given) started on `display` with the daemon
/// of namespace `ns`, and when it said its first frame was shown (ms
/// from its start, under `$APEX_UI_TIMING`).
fn apex_ui_shown(display: &str, ns: &Path, file: Option<&Path>) -> (std::process::Child, f64) {
    let mut ui = std::process::Command::new(env!("CARGO_BIN_EXE_apex-ui"))
        .args(file)
        .env("DISPLAY", display)
        .env("NAMESPACE", ns)
        .env("APEX_UI_TIMING", "1")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("start apex-ui");
    let err = std::io::BufReader::new(ui.stderr.take().unwrap());
    let shown = std::io::BufRead::lines(err).map_while(|l| l.ok()).find_map(|l| {
        let ms = l.strip_prefix("apex-ui: first frame shown ")?.split(' ').next()?;
        ms.parse::<f64>().ok()
    });
    (ui, shown.expect("apex-ui said when its first frame was shown"))
}

/// Resident memory of process `pid` now and at its peak, in MiB.
fn memory_of(pid: u32) -> (f64, f64) {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    let field = |name: &str| {
        let line = status.lines().find(|l| l.starts_with(name));
        line.and_then(|l| l.split_whitespace().nth(1))
            .and_then(|kb| kb.parse::<f64>().ok())
            .map_or(0.0, |kb| kb / 1024.0)
    };
    (field("VmRSS:"), field("VmHWM:"))
}

/// A session of 1,000 windows of 100 KB each (opened by a UI in this
/// process, which then goes): `apex-ui` attaching to it on a virtual
/// display, from its start to its first frame shown (three times, each
/// after the one before was killed, as after a crash), beside attaching
/// and painting in this process; the memory of apex-ui and of the daemon
/// against the text's size, whole and beyond what each held with the
/// session empty.
fn many_windows() {
    const MANY: usize = 1000;
    let Some((mut xvfb, display)) = xvfb() else {
        println!("{MANY} windows: not measured (no Xvfb here)");
        return;
    };
    let d = Daemon::start();
    // What each program holds with the session empty: its own baseline
    // (code, fonts, the frame), which the text's share is counted beyond.
    let daemon_empty = memory_of(d.child.id()).0;
    // And how long it takes to its first frame with nothing to show: the
    // start the windows' cost is counted beyond.
    let (ui_empty, first_empty) = {
        let (mut ui, first) = apex_ui_shown(&display, &d.ns, None);
        std::thread::sleep(Duration::from_secs(2));
        let held = memory_of(ui.id()).0;
        let _ = ui.kill();
        let _ = ui.wait();
        (held, first)
    };
    let dir = d.ns.join("many");
    std::fs::create_dir_all(&dir).unwrap();
    let text = text_of_lines(1_300);
    let mut size = 0;
    {
        let mut home = d.ui();
        for i in 0..MANY {
            let path = dir.join(format!("f{i:04}.rs"));
            std::fs::write(&path, &text).unwrap();
            size += text.len();
            open(&mut home, &path);
        }
        assert_eq!(home.host.att.lock().node().unwrap().state.windows.len(), MANY);
        // It leaves as apex-ui does: its leases go back at once.
        let att = home.host.att.clone();
        d.rt.block_on(async {
            let _ = att.flush().await;
            att.close().await;
        });
    }
    let mib = size as f64 / (1 << 20) as f64;
    // The daemon settles first: the leases the UI held come back, and
    // its log is compacted.
    std::thread::sleep(Duration::from_secs(3));
    let mut firsts = Vec::new();
    let mut memory = None;
    for _ in 0..3 {
        let (mut ui, first) = apex_ui_shown(&display, &d.ns, None);
        firsts.push(first);
        if memory.is_none() {
            std::thread::sleep(Duration::from_secs(2));
            memory = Some((memory_of(ui.id()), memory_of(d.child.id())));
        }
        let _ = ui.kill();
        let _ = ui.wait();
        std::thread::sleep(Duration::from_secs(1));
    }
    let first = firsts.iter().copied().fold(f64::INFINITY, f64::min);
    let runs: Vec<String> = firsts.iter().map(|f| format!("{f:.0}")).collect();
    let ((ui_now, ui_peak), (daemon_now, daemon_peak)) = memory.unwrap();
    let reference = (0..2)
        .map(|_| {
            let t = Instant::now();
            let mut ui = d.ui();
            ui.resize(1024, 768);
            ui.paint();
            t.elapsed()
        })
        .min()
        .unwrap();
    println!(
        "{MANY} windows of {} KB ({mib:.0} MiB): apex-ui start to first frame {first:.1} ms (runs {} ms, each after the last was killed; {first_empty:.1} ms with the session empty); in-process attach and first paint {:.1} ms ({:.1}x)",
        text.len() >> 10,
        runs.join(", "),
        ms(reference),
        first / ms(reference)
    );
    println!(
        "  memory: apex-ui {ui_now:.0} MiB ({:.2}x the text; peak {ui_peak:.0}), apexd {daemon_now:.0} MiB ({:.2}x; peak {daemon_peak:.0}); goal 1.3x each",
        ui_now / mib,
        daemon_now / mib
    );
    println!(
        "  beyond each one's memory with the session empty (apex-ui {ui_empty:.0} MiB, apexd {daemon_empty:.0} MiB): apex-ui {:.0} MiB ({:.2}x the text), apexd {:.0} MiB ({:.2}x)",
        ui_now - ui_empty,
        (ui_now - ui_empty) / mib,
        daemon_now - daemon_empty,
        (daemon_now - daemon_empty) / mib
    );
    // SAFETY: kill(2) with plain integers.
    unsafe { libc::kill(xvfb.id() as i32, libc::SIGTERM) };
    let _ = xvfb.wait();
}

/// `apex-ui FILE` on a virtual display, from its start to its first frame
/// shown (it says when, under `$APEX_UI_TIMING`), beside the in-process
/// reference: attaching, opening the file and painting the first frame
/// in this process, to a fresh daemon each time as the program has.
fn start_to_first_frame(file: &Path) {
    let Some((mut xvfb, display)) = xvfb() else {
        println!("start to first frame: not measured (no Xvfb here)");
        return;
    };
    let runs = 5;
    let mut program = Vec::new();
    for _ in 0..runs {
        let d = Daemon::start();
        let (mut ui, said) = apex_ui_shown(&display, &d.ns, Some(file));
        let _ = ui.kill();
        let _ = ui.wait();
        program.push(said);
    }
    let mut reference = Vec::new();
    for _ in 0..runs {
        let d = Daemon::start();
        let t = Instant::now();
        let mut ui = d.ui();
        ui.resize(1024, 768);
        open(&mut ui, file);
        ui.paint();
        reference.push(ms(t.elapsed()));
    }
    let best = |v: &[f64]| v.iter().copied().fold(f64::INFINITY, f64::min);
    let (p, r) = (best(&program), best(&reference));
    println!(
        "start to first frame: apex-ui {p:.1} ms (best of {runs}); in-process attach, open and first paint {r:.1} ms ({:.1}x)",
        p / r
    );
    // SAFETY: kill(2) with plain integers.
    unsafe { libc::kill(xvfb.id() as i32, libc::SIGTERM) };
    let _ = xvfb.wait();
}

/// The rows of terminal `term` in the UI's replica: scrollback, screen.
fn term_rows(ui: &Ui, term: TermId) -> Vec<String> {
    let link = ui.host.att.lock();
    let Some(t) = link.node().and_then(|n| n.state.terms.get(&term)) else { return Vec::new() };
    t.scrollback.iter().map(|r| r.text.clone()).chain(t.grid.iter().map(|r| r.text.clone())).collect()
}

/// Whether the terminal's last line with anything on it is a shell's
/// prompt (`$` or `#`), holding `typed` after it.
fn at_prompt(rows: &[String], typed: &str) -> bool {
    rows.iter().rev().find(|r| !r.trim().is_empty()).is_some_and(|r| {
        let r = r.trim_end();
        r.ends_with(&format!("${typed}"))
            || r.ends_with(&format!("#{typed}"))
            || r.ends_with(&format!("$ {typed}"))
            || r.ends_with(&format!("# {typed}"))
    })
}

/// Paints `ui` until `done` holds of terminal `term`'s rows; how long.
fn paint_until(ui: &mut Ui, term: TermId, what: &str, done: impl Fn(&[String]) -> bool) -> Duration {
    let t = Instant::now();
    loop {
        ui.woke();
        ui.paint();
        if done(&term_rows(ui, term)) {
            return t.elapsed();
        }
        if t.elapsed() > Duration::from_secs(120) {
            let rows = term_rows(ui, term);
            panic!("the terminal never got to {what}; its last rows: {:?}", &rows[rows.len().saturating_sub(5)..]);
        }
        std::thread::sleep(Duration::from_micros(200));
    }
}

/// A terminal window's figures (see the module doc).
fn terminal(d: &Daemon, ui: &mut Ui) {
    let dir = d.ns.display().to_string();
    exec::Host::start_term(&mut ui.host, Some(&dir), Some("sh")).expect("a terminal");
    let (w, term) = {
        let deadline = Instant::now() + WAIT;
        loop {
            ui.woke();
            let found = {
                let link = ui.host.att.lock();
                let st = &link.node().unwrap().state;
                st.windows.iter().find_map(|(id, w)| Some((*id, w.term?)))
            };
            if let Some(f) = found {
                break f;
            }
            assert!(Instant::now() < deadline, "the terminal's window");
            std::thread::sleep(Duration::from_millis(5));
        }
    };
    ui.paint();
    let body = ui.screen().unwrap().window(w).unwrap().body;
    ui.handle(Event::Motion { x: body.x0 + 5, y: body.y0 + 5 });
    paint_until(ui, term, "its first prompt", |rows| at_prompt(rows, ""));
    let size = {
        let link = ui.host.att.lock();
        let t = &link.node().unwrap().state.terms[&term];
        (t.cols, t.rows)
    };
    ui.handle(Event::Text("seq 1 2000000; echo seq-done\n".into()));
    let apex = paint_until(ui, term, "the prompt after seq", |rows| {
        rows.iter().any(|r| r == "seq-done") && at_prompt(rows, "")
    });
    // A rune typed, then erased: each keystroke's echo drawn. Keys come
    // 30 ms apart, as fast typing does: the daemon sends a terminal's
    // updates at most one a frame (16 ms), so keys sent back to back
    // would measure that flood limit instead.
    let mut echo = Vec::new();
    for _ in 0..100 {
        std::thread::sleep(Duration::from_millis(30));
        let t = Instant::now();
        ui.handle(Event::Text("x".into()));
        paint_until(ui, term, "the echo", |rows| at_prompt(rows, "x"));
        echo.push(t.elapsed());
        std::thread::sleep(Duration::from_millis(30));
        let t = Instant::now();
        ui.handle(Event::Key(Key::Backspace));
        paint_until(ui, term, "the erase", |rows| at_prompt(rows, ""));
        echo.push(t.elapsed());
    }
    echo.sort();
    let q = |p: f64| ms(echo[((echo.len() as f64 * p) as usize).min(echo.len() - 1)]);
    let (cols, rows) = size;
    let (xterm, tmux) = match (xvfb(), which("xterm")) {
        (Some((mut x, display)), true) => {
            let run = |args: &[&str]| {
                let t = Instant::now();
                let ok = std::process::Command::new("xterm")
                    .args(["-display", &display, "-geometry", &format!("{cols}x{rows}"), "-e"])
                    .args(args)
                    .status()
                    .is_ok_and(|s| s.success());
                ok.then(|| t.elapsed())
            };
            let xterm = run(&["sh", "-c", "seq 1 2000000"]);
            let socket = format!("apex-bench-{}", std::process::id());
            let tmux = which("tmux")
                .then(|| run(&["tmux", "-L", &socket, "-f", "/dev/null", "new-session", "seq 1 2000000"]))
                .flatten();
            // SAFETY: kill(2) with plain integers.
            unsafe { libc::kill(x.id() as i32, libc::SIGTERM) };
            let _ = x.wait();
            (xterm, tmux)
        }
        _ => (None, None),
    };
    let beside = |name: &str, r: Option<Duration>| match r {
        Some(r) => format!("{name} {:.0} ms ({:.2}x apex's time)", ms(r), ms(r) / ms(apex)),
        None => format!("{name}: not measured (not installed here)"),
    };
    println!(
        "terminal window ({cols}x{rows}), seq 1 2000000 to the prompt drawn: apex {:.0} ms; {}; {} (goal: at least xterm's speed)",
        ms(apex),
        beside("xterm", xterm),
        beside("xterm running tmux", tmux)
    );
    println!(
        "terminal window, keystroke to its echo drawn: p50 {:.3} ms, p99 {:.3} ms (goal p99 <= 8 ms)",
        q(0.5),
        q(0.99)
    );
}

/// `Edit ,s/a/b/g` over the 100 MB file in the UI that leads it, run on
/// the UI's Edit thread, while a key is typed into another window every
/// few milliseconds (each handled and its frame drawn, timed); beside
/// `sed` and `vim -es` doing the same to a copy of the file, in this run.
fn edit_in_ui(ui: &mut Ui, dir: &Path, big: &Path, w: WindowId, body: BufferId) {
    let small = dir.join("typed.txt");
    std::fs::write(&small, "").unwrap();
    let (typed_in, _) = open(ui, &small);
    ui.paint();
    click_in(ui, typed_in);
    let edit = exec::lookup("Edit").unwrap();
    let call = exec::Call { window: Some(w), column: None, arg: ",s/a/b/g".into() };
    let t = Instant::now();
    exec::run(&mut ui.host, edit, &call).expect("the Edit starts");
    let mut keys = Vec::new();
    while ui.host.edit.is_some() {
        std::thread::sleep(Duration::from_millis(3));
        ui.woke();
        let k = Instant::now();
        ui.handle(Event::Text("k".into()));
        ui.paint();
        keys.push(k.elapsed());
    }
    let made = t.elapsed();
    ui.settle().unwrap();
    let acked = t.elapsed();
    let first = ui.host.att.lock().node().unwrap().state.buffer(body).unwrap().text.rope().slice(..45).to_string();
    assert_eq!(first, "the quick brown fox jumps over the lbzy dog; ", "the Edit was made");
    keys.sort();
    let q = |p: f64| ms(keys[((keys.len() as f64 * p) as usize).min(keys.len() - 1)]);
    let peer = |program: &str, args: &[&str]| -> Option<Duration> {
        let copy = dir.join("peer.txt");
        std::fs::copy(big, &copy).ok()?;
        let t = Instant::now();
        let ok = std::process::Command::new(program)
            .args(args)
            .arg(&copy)
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .status()
            .is_ok_and(|s| s.success());
        let took = t.elapsed();
        let _ = std::fs::remove_file(&copy);
        ok.then_some(took)
    };
    let sed = peer("sed", &["-i", "s/a/b/g"]);
    let vim = which("vim").then(|| peer("vim", &["-es", "-u", "NONE", "-c", "%s/a/b/g", "-c", "wq"])).flatten();
    let beside = |name: &str, r: Option<Duration>| match r {
        Some(r) => format!("{name} {:.0} ms (apex/{name} {:.2}x)", ms(r), ms(made) / ms(r)),
        None => format!("{name}: not measured (not installed here)"),
    };
    println!(
        "Edit ,s/a/b/g over 100 MB in the UI: made in {:.0} ms, the daemon's ack {:.0} ms; {}; {} (both writing the file)",
        ms(made),
        ms(acked),
        beside("sed -i", sed),
        beside("vim -es", vim)
    );
    println!(
        "typing in another window while it ran: {} keys, each drawn: p50 {:.3} ms, p99 {:.3} ms, longest {:.3} ms (goal p99 <= 8 ms)",
        keys.len(),
        q(0.5),
        q(0.99),
        ms(*keys.last().unwrap())
    );
}

/// Whether `program` is on the PATH.
fn which(program: &str) -> bool {
    std::env::var_os("PATH").is_some_and(|p| std::env::split_paths(&p).any(|d| d.join(program).is_file()))
}

/// A virtual display of its own (Xvfb picks a free one), if Xvfb is here.
fn xvfb() -> Option<(std::process::Child, String)> {
    let mut xvfb = std::process::Command::new("Xvfb")
        .args(["-displayfd", "1", "-screen", "0", "1024x768x24", "-nolisten", "tcp", "-noreset"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .ok()?;
    let mut line = String::new();
    std::io::BufRead::read_line(&mut std::io::BufReader::new(xvfb.stdout.take()?), &mut line).ok()?;
    Some((xvfb, format!(":{}", line.trim())))
}

/// Typing through a link 100 ms away each way (a relay that holds every
/// byte back), as over ssh to another continent: keystroke to pixels
/// beside the same UI's locally, the ack's round trip, every keystroke
/// drawn before any reply and the text never drawn differently after;
/// then the link stalled 30 s while typing goes on, and everything
/// typed acknowledged once it returns. The local UI (`home`) takes the
/// leases back after.
fn far_away(d: &Daemon, dir: &Path, home: &mut Ui) {
    const DELAY: Duration = Duration::from_millis(100);
    let link = slowlink::SlowLink::start(&d.rt, &d.ns.join("far"), &d.ns.join("apex"), DELAY);
    let mut ui = d.ui_at(&link.address());
    let file = dir.join("far.rs");
    std::fs::write(&file, text_of_lines(1_000)).unwrap();
    let (w, body) = open(&mut ui, &file);
    ui.settle().unwrap();
    click_in(&mut ui, w);
    ui.paint();
    let text = |ui: &Ui| ui.host.att.lock().node().unwrap().state.buffer(body).unwrap().text.to_string();
    let original = text(&ui);
    let mut prefix = String::new();
    let (mut times, mut redrawn) = (Vec::new(), 0);
    for i in 0..300 {
        let rune = char::from(b'a' + (i % 26) as u8);
        let t = Instant::now();
        ui.handle(Event::Text(rune.to_string()));
        let damage = ui.paint();
        times.push(t.elapsed());
        assert!(!damage.is_empty(), "drawn at once, before any reply");
        prefix.push(rune);
        // What the replies bring never changes what was drawn.
        if text(&ui) != format!("{prefix}{original}") {
            redrawn += 1;
        }
    }
    let mut acks = Vec::new();
    for _ in 0..10 {
        ui.handle(Event::Text("z".into()));
        ui.paint();
        let t = Instant::now();
        ui.settle().unwrap();
        acks.push(t.elapsed());
    }
    let p = percentile;
    println!(
        "through a link 100 ms away each way: keystroke to pixels p50 {:.3} ms, p99 {:.3} ms (target p99 <= 8 ms, as locally); \
         {} of 300 drawn before any reply, {redrawn} drawn differently after; the ack after {:.1} ms (p50; the round trip is 200 ms)",
        p(&mut times, 0.5),
        p(&mut times, 0.99),
        times.len(),
        p(&mut acks, 0.5)
    );
    // A tool's write to the text the far UI leads: routed to the UI, which
    // applies it and answers across the link (the UI flushing as its loop
    // does), then acknowledged to the tool.
    let socket = format!("unix!{}", d.ns.join("apex").display());
    let path = format!("main/buffers/{}/body", body.0);
    let t = Instant::now();
    let write = d.rt.spawn(async move {
        let c = apex_ninep::dial(&socket, 1 << 20).await.unwrap();
        let root = c.attach("tool", "").await.unwrap();
        let f = c.open_path(root, &path, apex_ninep::fcall::OWRITE).await.unwrap();
        c.write(f.fid, 0, b"from a tool\n").await.map(|_| ())
    });
    while !write.is_finished() {
        assert!(t.elapsed() < Duration::from_secs(20), "the tool's write routed to the far UI never completed");
        ui.woke();
        ui.paint();
        let _ = ui.settle();
    }
    let tool = t.elapsed();
    let written = d.rt.block_on(write).unwrap();
    println!(
        "a tool's write routed to the far UI's text: {} after {:.1} ms (the round trip to the UI is 200 ms)",
        if written.is_ok() { "done" } else { "refused" },
        ms(tool)
    );
    // Stalled 30 s: typing goes on, drawn at once; when the link returns
    // every rune is acknowledged, and the daemon has what the UI shows.
    link.stall(Duration::from_secs(30));
    let returns = Instant::now() + Duration::from_secs(30);
    let mut stalled = Vec::new();
    for _ in 0..100 {
        let t = Instant::now();
        ui.handle(Event::Text("s".into()));
        ui.paint();
        stalled.push(t.elapsed());
        std::thread::sleep(Duration::from_millis(50));
    }
    std::thread::sleep(returns.saturating_duration_since(Instant::now()));
    let t = Instant::now();
    ui.settle().unwrap();
    let back = t.elapsed();
    let shown = text(&ui);
    let stored = d.rt.block_on(async {
        let c = apex_ninep::dial(&format!("unix!{}", d.ns.join("apex").display()), 1 << 20).await.unwrap();
        let root = c.attach("bench", "").await.unwrap();
        let f = c.open_path(root, &format!("main/buffers/{}/body", body.0), apex_ninep::fcall::OREAD).await.unwrap();
        String::from_utf8(c.read_all(&f).await.unwrap()).unwrap()
    });
    println!(
        "the link stalled 30 s: keystroke to pixels meanwhile p99 {:.3} ms; all acknowledged {:.1} ms after it returned; \
         the daemon has what the UI shows: {}",
        p(&mut stalled, 0.99),
        ms(back),
        stored == shown
    );
    drop(ui);
    home.lead();
    home.paint();
    let att = home.host.att.clone();
    assert!(d.rt.block_on(att.wait_for(WAIT, |l| l.leads(Shard::Layout))));
}

/// Opens `path` in the UI; its window and body.
fn open(ui: &mut Ui, path: &Path) -> (WindowId, BufferId) {
    let name = path.display().to_string();
    exec::open(&mut ui.host, &name, None).expect("open");
    let link = ui.host.att.lock();
    look::window_named(&link.node().unwrap().state, &name).expect("its window")
}

/// A click at the top left of `w`'s body: the focus, for typing.
fn click_in(ui: &mut Ui, w: WindowId) {
    let screen = ui.screen().unwrap();
    let body = screen.window(w).unwrap().body;
    let (x, y) = (body.x0, body.y0 + 2);
    ui.handle(Event::Press { button: 1, x, y });
    ui.handle(Event::Release { button: 1, x, y });
}

/// A real `apexd` on a namespace of its own, stopped on drop.
struct Daemon {
    ns: PathBuf,
    child: std::process::Child,
    rt: tokio::runtime::Runtime,
}

impl Daemon {
    fn start() -> Daemon {
        let ns = std::env::temp_dir().join(format!("apex-ui-bench-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&ns);
        std::fs::create_dir_all(&ns).unwrap();
        std::fs::set_permissions(&ns, std::os::unix::fs::PermissionsExt::from_mode(0o700)).unwrap();
        let child = std::process::Command::new(apexd())
            .arg("--namespace")
            .arg(&ns)
            .args(["-q", "--ephemeral"])
            .spawn()
            .expect("start apexd");
        let socket = ns.join("apex");
        let deadline = Instant::now() + Duration::from_secs(20);
        while std::os::unix::net::UnixStream::connect(&socket).is_err() {
            assert!(Instant::now() < deadline, "apexd did not answer");
            std::thread::sleep(Duration::from_millis(20));
        }
        Daemon { ns, child, rt: tokio::runtime::Runtime::new().unwrap() }
    }

    /// A UI attached to `main`, leading it, 1920x1080.
    fn ui(&self) -> Ui {
        self.ui_at(&format!("unix!{}", self.ns.join("apex").display()))
    }

    /// A UI attached to `main` through `address`, leading it.
    fn ui_at(&self, address: &str) -> Ui {
        let address = address.to_string();
        let att = self.rt.block_on(async {
            let client = apex_ninep::dial(&address, 1 << 20).await.expect("dial");
            let att = Attached::open(&client, "main", AttachmentKind::Ui, "apex-ui-bench").await.expect("attach");
            assert!(att.wait_for(WAIT, |l| l.leads(Shard::Layout)).await);
            att
        });
        let host = UiHost::new(att, &address, "main", self.rt.handle().clone(), self.ns.clone());
        Ui::new(host, W, H, 1.0)
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.ns);
    }
}

/// `apexd` from this build (release when benchmarking), built first:
/// cargo builds it only when the sources changed, and a daemon from an
/// older build would measure the wrong thing.
fn apexd() -> PathBuf {
    let exe = std::env::current_exe().unwrap();
    let dir = exe.parent().and_then(Path::parent).unwrap().to_path_buf();
    let path = dir.join("apexd");
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let mut build = std::process::Command::new(cargo);
    build.args(["build", "-p", "apex-fsd", "--bins"]);
    if dir.ends_with("release") {
        build.arg("--release");
    }
    assert!(build.status().unwrap().success(), "cargo build -p apex-fsd failed");
    path
}
