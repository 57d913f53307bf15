//! A terminal under a flood, beside tmux in the same run:
//!
//! - `cat` of 100 MB of mixed text (plain lines, SGR colours in the 16,
//!   256 and truecolor forms, wide characters, full-screen redraws) made
//!   by a seeded generator, in a terminal of a real apexd until its shell
//!   prints the line after it; the same in a detached tmux pane (Debian's
//!   tmux, its own server);
//! - the term shard's bytes in the log per byte of output;
//! - every row that scrolled off is in the log, in order (each plain line
//!   carries its number);
//! - a follower's apply throughput of those entries (decoded from the
//!   log, applied as a replica applies them).
//!
//! Figures, not assertions: `cargo bench -p apex-fsd --bench term`
//! (`APEX_BENCH_TERM_MB` changes the size).

mod common;

use apex_core::term::Term;
use apex_core::{Op, Shard, TermOp};
use apex_fsd::persist::wal::{self, Header};
use apex_ninep::fcall::{ORDWR, OREAD, OWRITE};
use apex_ninep::Client;
use common::{log_bytes, Apexd};
use std::io::Write;
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

const WAIT: Duration = Duration::from_secs(600);
/// The line the shell prints after `cat`: typed as `DO""NE` so the echo
/// of the command line does not match.
const DONE: &str = "DONE";

/// A seeded generator (splitmix64): the same text on every machine.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

/// Writes about `bytes` of mixed terminal output to `path`; returns how
/// many numbered plain lines it holds.
fn generate(path: &Path, bytes: usize, seed: u64) -> u64 {
    let mut rng = Rng(seed);
    let words: Vec<String> = (0..4000)
        .map(|_| {
            let len = 2 + rng.below(9) as usize;
            (0..len).map(|_| (b'a' + rng.below(26) as u8) as char).collect()
        })
        .collect();
    let mut out = String::with_capacity(bytes + 4096);
    let mut numbered = 0;
    let line = |rng: &mut Rng, out: &mut String, max: usize| {
        let mut n = 0;
        let want = 10 + rng.below(max as u64 - 10) as usize;
        while n < want {
            let w = &words[rng.below(words.len() as u64) as usize];
            out.push_str(w);
            out.push(' ');
            n += w.len() + 1;
        }
    };
    while out.len() < bytes {
        match rng.below(100) {
            // Plain lines, numbered, some longer than a row.
            0..55 => {
                out.push_str(&format!("L{numbered:08} "));
                numbered += 1;
                line(&mut rng, &mut out, 120);
                out.push('\n');
            }
            // Words in colour: the 16, 256 and truecolor forms, bold.
            55..80 => {
                for _ in 0..(3 + rng.below(8)) {
                    match rng.below(5) {
                        0 => out.push_str(&format!("\x1b[{}m", 30 + rng.below(8))),
                        1 => out.push_str(&format!("\x1b[{}m", 90 + rng.below(8))),
                        2 => out.push_str(&format!("\x1b[38;5;{}m", rng.below(256))),
                        3 => out.push_str(&format!(
                            "\x1b[38;2;{};{};{}m",
                            rng.below(256),
                            rng.below(256),
                            rng.below(256)
                        )),
                        _ => out.push_str("\x1b[1m"),
                    }
                    out.push_str(&words[rng.below(words.len() as u64) as usize]);
                    out.push_str("\x1b[0m ");
                }
                out.push('\n');
            }
            // Wide characters among words.
            80..97 => {
                for _ in 0..(5 + rng.below(20)) {
                    match rng.below(2) {
                        0 => out.push(char::from_u32(0x4e00 + rng.below(2000) as u32).unwrap_or('x')),
                        _ => out.push_str(&words[rng.below(words.len() as u64) as usize]),
                    }
                }
                out.push('\n');
            }
            // A full-screen redraw, as a pager or top makes it.
            _ => {
                out.push_str("\x1b[H\x1b[2J");
                for row in 1..=24 {
                    out.push_str(&format!("\x1b[{row};1H\x1b[7m{row:2}\x1b[0m "));
                    line(&mut rng, &mut out, 70);
                }
                out.push_str("\x1b[24;1H\n");
            }
        }
    }
    std::fs::write(path, &out).unwrap();
    numbered
}

/// tmux: a detached pane of its own server running `cat`, until the
/// pane shows the line after it. Seconds.
fn tmux_cat(file: &Path, socket: &str) -> Option<f64> {
    let tmux = |args: &[&str]| Command::new("tmux").args(["-L", socket, "-f", "/dev/null"]).args(args).output();
    if tmux(&["-V"]).is_err() {
        println!("tmux is not installed (apt-get install tmux): no reference");
        return None;
    }
    let _ = tmux(&["kill-server"]);
    tmux(&["new-session", "-d", "-x", "80", "-y", "24", "/bin/sh"]).ok()?;
    // The shell's prompt first.
    std::thread::sleep(Duration::from_millis(300));
    let t = Instant::now();
    let cmd = format!("cat {}; echo DO\"\"NE", file.display());
    tmux(&["send-keys", &cmd, "Enter"]).ok()?;
    let deadline = Instant::now() + WAIT;
    loop {
        let pane = tmux(&["capture-pane", "-p"]).ok()?;
        if String::from_utf8_lossy(&pane.stdout).lines().any(|l| l.trim_end() == DONE) {
            break;
        }
        assert!(Instant::now() < deadline, "tmux never finished");
        std::thread::sleep(Duration::from_millis(20));
    }
    let took = t.elapsed().as_secs_f64();
    let _ = tmux(&["kill-server"]);
    Some(took)
}

async fn read(c: &Client, root: u32, path: &str) -> Vec<u8> {
    let f = c.open_path(root, path, OREAD).await.unwrap();
    let b = c.read_all(&f).await.unwrap();
    c.clunk(f.fid).await.unwrap();
    b
}

/// apexd: a terminal running a shell, `cat` typed into it, until its
/// screen shows the line after. Seconds, and the terminal's number.
async fn apexd_cat(c: &Client, root: u32, file: &Path) -> (f64, u64) {
    let f = c.open_path(root, "main/ctl", ORDWR).await.unwrap();
    c.write(f.fid, 0, b"term -d / -s 80x24 -l 1000 /bin/sh\n").await.unwrap();
    let n: u64 = String::from_utf8(c.read(f.fid, 0, 64).await.unwrap()).unwrap().trim().parse().unwrap();
    c.clunk(f.fid).await.unwrap();
    let screen = format!("main/terms/{n}/screen");
    let deadline = Instant::now() + WAIT;
    while String::from_utf8_lossy(&read(c, root, &screen).await).trim().is_empty() {
        assert!(Instant::now() < deadline, "no prompt");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let t = Instant::now();
    let cons = c.open_path(root, &format!("main/terms/{n}/cons"), OWRITE).await.unwrap();
    let cmd = format!("cat {}; echo DO\"\"NE\n", file.display());
    c.write(cons.fid, 0, cmd.as_bytes()).await.unwrap();
    c.clunk(cons.fid).await.unwrap();
    loop {
        if String::from_utf8_lossy(&read(c, root, &screen).await).lines().any(|l| l == DONE) {
            break;
        }
        assert!(Instant::now() < deadline, "apexd never finished");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    (t.elapsed().as_secs_f64(), n)
}

/// The term shard's entries, from the session's log segments.
fn logged_updates(state: &Path, n: u64) -> (Vec<apex_core::Entry>, u64) {
    let mut entries = Vec::new();
    let mut bytes = 0;
    for s in std::fs::read_dir(state.join("sessions")).unwrap().flatten() {
        let mut segments: Vec<_> = std::fs::read_dir(s.path())
            .unwrap()
            .flatten()
            .filter_map(|f| wal::segment_number(&f.file_name().to_string_lossy()).map(|k| (k, f.path())))
            .collect();
        segments.sort();
        for (_, path) in segments {
            let data = std::fs::read(&path).unwrap();
            let header = Header::decode(&data).unwrap();
            wal::scan(&data, &header, |shard, entry, _| {
                if shard == Shard::Term(apex_core::TermId(n)) {
                    bytes += postcard::to_allocvec(&(shard, &entry)).unwrap().len() as u64 + 8;
                    entries.push(entry);
                }
                Ok::<_, wal::Unapplied>(())
            });
        }
    }
    (entries, bytes)
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let mb: usize = std::env::var("APEX_BENCH_TERM_MB").ok().and_then(|v| v.parse().ok()).unwrap_or(100);
    let run = std::env::temp_dir().join(format!("apex-bench-term-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&run);
    std::fs::create_dir_all(&run).unwrap();
    let file = run.join("flood.txt");
    let numbered = generate(&file, mb << 20, 0x5eed);
    let size = std::fs::metadata(&file).unwrap().len();
    println!("output: {:.1} MB of mixed text, {numbered} numbered plain lines", size as f64 / 1e6);

    let tmux = tmux_cat(&file, &format!("apex-bench-{}", std::process::id()));

    // A snapshot would drop the segments this reads back: none is taken.
    let d = Apexd::start(&run, &["--snapshot-bytes", "1000000000000"]);
    let (c, root) = d.client().await;
    let before = log_bytes(&run.join("state"));
    let (apex, n) = apexd_cat(&c, root, &file).await;
    drop(c);
    d.stop();
    let logged = log_bytes(&run.join("state")) - before;

    let mbs = |secs: f64| size as f64 / 1e6 / secs;
    match tmux {
        Some(t) => println!(
            "cat to the prompt: apexd {apex:.2} s ({:.0} MB/s), tmux {t:.2} s ({:.0} MB/s): apexd {:.2}x tmux's speed (goal >= 1)",
            mbs(apex),
            mbs(t),
            t / apex
        ),
        None => println!("cat to the prompt: apexd {apex:.2} s ({:.0} MB/s)", mbs(apex)),
    }

    let (entries, term_bytes) = logged_updates(&run.join("state"), n);
    println!(
        "log: {:.1} MB for the session ({:.1} MB of it the term shard, {} entries) = {:.2} bytes per byte of output (goal <= 0.60)",
        logged as f64 / 1e6,
        term_bytes as f64 / 1e6,
        entries.len(),
        term_bytes as f64 / size as f64
    );

    // A follower applies the entries; every scrolled plain line is there.
    let ops: Vec<TermOp> = entries
        .into_iter()
        .filter_map(|e| match e.op {
            Op::Term(op) => Some(op),
            _ => None,
        })
        .collect();
    let TermOp::Create { cols, rows, scrollback, command, dir } = &ops[0] else { panic!("Create first") };
    let mut term = Term::new(*cols, *rows, *scrollback, command.clone(), dir.clone()).unwrap();
    let t = Instant::now();
    for op in &ops[1..] {
        term.apply(op).unwrap();
    }
    let apply = t.elapsed().as_secs_f64();
    println!(
        "follower apply: {} entries in {:.3} s = {:.0} MB/s of output ({:.0}x apexd's cat)",
        ops.len(),
        apply,
        mbs(apply),
        apex / apply
    );
    if let Ok(dump) = std::env::var("APEX_BENCH_TERM_DUMP") {
        let mut raw = Vec::new();
        for op in &ops[1..] {
            if let TermOp::Update(u) = op {
                raw.extend(postcard::to_allocvec(&u.rows.unpack().unwrap()).unwrap());
            }
        }
        std::fs::write(dump, &raw).unwrap();
        println!("raw rows: {:.1} MB", raw.len() as f64 / 1e6);
    }
    let mut seen = 0u64;
    let mut missing = 0u64;
    for op in &ops[1..] {
        let TermOp::Update(u) = op else { continue };
        for row in u.rows.unpack().unwrap().scrolled {
            if let Some(num) = row.text.strip_prefix('L').and_then(|r| r.get(..8)).and_then(|d| d.parse::<u64>().ok()) {
                if num == seen {
                    seen += 1;
                } else if num > seen {
                    missing += num - seen;
                    seen = num + 1;
                }
            }
        }
    }
    let on_screen = term.text().lines().filter(|l| l.starts_with('L')).count() as u64;
    println!(
        "scrolled rows: {seen} numbered lines logged in order, {missing} missing, {} on the last screen (of {numbered})",
        numbered.saturating_sub(seen).min(on_screen)
    );
    let _ = std::fs::remove_dir_all(&run);
    let _ = std::io::stdout().flush();
}
