//! The scale benchmark: whole-file commands on a big file through a real
//! `apexd` (its log and snapshots kept, as a user's are), beside the peers
//! a user would pick instead, run on the same text in the same run.
//!
//! `cargo bench -p apex-fsd --bench scale` prints, a line each, apex's
//! figure, each peer's and the ratio:
//!
//! - `Edit ,s/a/b/g` (a million substitutions and more), `,x/^\n/d` and
//!   `,y/\n/c/ /`, run from a window's tag through its event file as a
//!   person's B2 is, beside `vim -es`, `nvim -es` and `sed` (those three
//!   writing the file too), timed alone as the peers are, and the
//!   daemon's peak resident memory during it, against the text's size;
//!   then, once all were, each run again beside another client looking
//!   every millisecond: the longest that client's Tstat and read of the
//!   root's `index` took, against their usual time;
//! - `Undo` of the substitution and `Redo`, and the memory after Undo;
//! - open: a window's `get` of the file until its body reads, beside
//!   `vim -es` and `nvim -es` opening and quitting, and reading the file
//!   into a rope in process; the daemon's memory for it, and the peak of
//!   reading into a rope in process (the file and its rope held at once);
//!   the same for the
//!   text as one line, with bytes that are not UTF-8, and of 1 GB
//!   (`APEX_SCALE_GB`, 0 for none); each the better of two runs, each
//!   run after a `sync`;
//! - search: `addr` `/needle/` from the top to the file's last line,
//!   `Look needle` from the tag and a B3 on the word at the top (written
//!   back through the event file), each finding the word at the end,
//!   beside the `regex` crate on the flat text in process and `rg`,
//!   each the best of [`SEARCHES`] (and `addr`'s first apart: it makes
//!   the flat copy the others search);
//! - the state hash of the text (as `hash` and a snapshot's check make
//!   it, on threads, and as `State::hash` alone), beside blake3 of the
//!   flat text.
//!
//! - many files: a session of 1,000 windows of 100 KB each, in a daemon
//!   of its own: the windows opened one at a time through acme's
//!   new/ctl, and by `apex open` of them all in a daemon of its own,
//!   beside vim and nvim opening the files (`argdo`, each edited); the
//!   daemon's memory for them; a Welcome of the session
//!   beside its floor; `Putall` of them all, each changed, beside vim's
//!   and nvim's `:wa` and the files written in process.
//!
//! `APEX_SCALE_MB` sets the file's size (default 100);
//! `APEX_SCALE_ONLY=many` runs the many files alone, `=edit` the Edit
//! commands and Undo alone. A peer that is not
//! installed is said so and left out; nothing asserts a time.

use apex_ninep::fcall::{ORDWR, OREAD, OWRITE};
use apex_ninep::Client;
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

mod common;
use common::Apexd;

#[path = "scale/many.rs"]
mod many;
use many::many_files;

/// Ordinary text: lines of words, some of them empty, the same every run.
fn ordinary_text(size: usize) -> String {
    const WORDS: &[&str] = &[
        "the", "daemon", "serves", "each", "session", "as", "a", "file", "system", "and", "tools", "read", "write",
        "files", "window", "tag", "body", "plumb", "shard", "lease", "leader", "follows", "log", "entry", "apply",
        "state", "hash", "snapshot", "rope", "text", "search", "regexp", "change", "undo", "redo", "column",
    ];
    let mut seed = 0x2545_f491_4f6c_dd1du64;
    let mut next = move || {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed
    };
    let mut out = String::with_capacity(size + 128);
    while out.len() < size {
        let r = next();
        if r % 8 == 0 {
            out.push('\n');
            continue;
        }
        let words = 4 + (r >> 8) % 10;
        for i in 0..words {
            if i > 0 {
                out.push(' ');
            }
            out.push_str(WORDS[(next() % WORDS.len() as u64) as usize]);
        }
        out.push('\n');
    }
    out
}

/// Resident memory now and at its peak since the last reset, in MiB.
fn memory(pid: u32) -> (f64, f64) {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    let field = |name: &str| {
        status
            .lines()
            .find(|l| l.starts_with(name))
            .and_then(|l| l.split_whitespace().nth(1))
            .and_then(|kb| kb.parse::<f64>().ok())
            .map_or(0.0, |kb| kb / 1024.0)
    };
    (field("VmRSS:"), field("VmHWM:"))
}

/// Starts counting the peak resident memory again from now.
fn reset_peak(pid: u32) {
    let _ = std::fs::write(format!("/proc/{pid}/clear_refs"), "5");
}

/// How long `command` took, or `None` with why when it could not run.
fn time_peer(command: &mut Command) -> Result<Duration, String> {
    let t = Instant::now();
    let status = command.status().map_err(|e| format!("{:?}: {e}", command.get_program()))?;
    let took = t.elapsed();
    match status.success() {
        true => Ok(took),
        false => Err(format!("{:?} failed: {status}", command.get_program())),
    }
}

/// `vim` or `nvim` in silent Ex mode running `ex` on `file`, writing it.
fn ex(program: &str, ex: &str, file: &Path) -> Command {
    let mut c = Command::new(program);
    c.args(["-u", "NONE", "-i", "NONE", "-n", "-es", "-c", ex, "-c", "wq"]).arg(file);
    c
}

/// `sed SCRIPT FILE > OUT`.
fn sed(script: &str, file: &Path, out: &Path) -> Command {
    let mut c = Command::new("sed");
    c.arg(script).arg(file).stdout(std::fs::File::create(out).unwrap());
    c
}

struct Window<'a> {
    c: &'a Client,
    root: u32,
    number: String,
}

impl Window<'_> {
    fn path(&self, file: &str) -> String {
        format!("main/acme/{}/{file}", self.number)
    }

    async fn read(&self, file: &str) -> Vec<u8> {
        let f = self.c.open_path(self.root, &self.path(file), OREAD).await.unwrap();
        let data = self.c.read_all(&f).await.unwrap();
        self.c.clunk(f.fid).await.unwrap();
        data
    }

    /// Replaces the whole body with `text` (through `addr` and `data`:
    /// a write to `body` appends).
    async fn replace_body(&self, text: &[u8]) {
        let addr = self.c.open_path(self.root, &self.path("addr"), ORDWR).await.unwrap();
        self.c.write(addr.fid, 0, b",").await.unwrap();
        self.write("data", text).await;
        self.c.clunk(addr.fid).await.unwrap();
    }

    /// The window's dot, in runes, through `addr`.
    async fn dot(&self) -> (usize, usize) {
        let addr = self.c.open_path(self.root, &self.path("addr"), ORDWR).await.unwrap();
        self.write("ctl", b"addr=dot\n").await;
        let said = String::from_utf8(self.c.read(addr.fid, 0, 64).await.unwrap()).unwrap();
        self.c.clunk(addr.fid).await.unwrap();
        let mut n = said.split_whitespace().map(|n| n.parse().unwrap());
        (n.next().unwrap(), n.next().unwrap())
    }

    /// Sets the window's dot to `at`, through `addr`.
    async fn set_dot(&self, at: usize) {
        let addr = self.c.open_path(self.root, &self.path("addr"), ORDWR).await.unwrap();
        self.c.write(addr.fid, 0, format!("#{at}").as_bytes()).await.unwrap();
        self.write("ctl", b"dot=addr\n").await;
        self.c.clunk(addr.fid).await.unwrap();
    }

    /// A B3 on runes `q0..q1` of the body as a UI sends it, written back
    /// through the event file as acme's clients do: the time until the
    /// write returns, which it does once the look is done.
    async fn b3(&self, q0: usize, q1: usize) -> Duration {
        let ev = self.c.open_path(self.root, &self.path("event"), ORDWR).await.unwrap();
        let t = Instant::now();
        self.c.write(ev.fid, 0, format!("ML{q0} {q1}\n").as_bytes()).await.unwrap();
        let took = t.elapsed();
        self.c.clunk(ev.fid).await.unwrap();
        took
    }

    async fn write(&self, file: &str, data: &[u8]) {
        let f = self.c.open_path(self.root, &self.path(file), OWRITE).await.unwrap();
        self.c.write_all(&f, 0, data).await.unwrap();
        self.c.clunk(f.fid).await.unwrap();
    }

    /// Runs `command` as a B2 on it in the tag does, through the event
    /// file (open while it runs, as a tool's is): the time until the
    /// write returns, which it does once the command is done.
    async fn run(&self, command: &str) -> Duration {
        self.write("tag", format!(" {command}").as_bytes()).await;
        // Opened first: an event reader takes the file menu off the tag.
        let ev = self.c.open_path(self.root, &self.path("event"), ORDWR).await.unwrap();
        let tag = String::from_utf8(self.read("tag").await).unwrap();
        let q0 = tag[..tag.rfind(command).unwrap()].chars().count();
        let q1 = q0 + command.chars().count();
        let t = Instant::now();
        self.c.write(ev.fid, 0, format!("Mx{q0} {q1}\n").as_bytes()).await.unwrap();
        let took = t.elapsed();
        self.c.clunk(ev.fid).await.unwrap();
        took
    }
}

/// What another client saw while a command ran: its usual look at the
/// daemon (a Tstat of the root and a read of the root's `index`, which
/// names every session), the longest one made while the command ran, and
/// when in the command that one began.
struct Bystander {
    usual: Duration,
    longest: Duration,
    at: Duration,
}

/// One look at the daemon from another client.
async fn look(c: &Client, root: u32) -> Duration {
    let t = Instant::now();
    c.stat(root).await.unwrap();
    let index = c.open_path(root, "index", OREAD).await.unwrap();
    c.read_all(&index).await.unwrap();
    c.clunk(index.fid).await.unwrap();
    t.elapsed()
}

/// Looks at the daemon from another connection until `done`, each look
/// with when it began.
async fn watch(c: Client, root: u32, done: Arc<AtomicBool>) -> (Duration, Vec<(Instant, Duration)>) {
    let mut usual = Vec::new();
    for _ in 0..100 {
        usual.push(look(&c, root).await);
    }
    usual.sort();
    let mut looks = Vec::new();
    while !done.load(Ordering::Relaxed) {
        let began = Instant::now();
        looks.push((began, look(&c, root).await));
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    (usual[usual.len() / 2], looks)
}

impl Bystander {
    /// What the looks that overlapped `from..to` saw.
    fn between(usual: Duration, looks: &[(Instant, Duration)], from: Instant, to: Instant) -> Bystander {
        let during = looks.iter().filter(|(began, took)| *began < to && *began + *took > from);
        let (at, longest) = during.max_by_key(|(_, took)| *took).map_or((from, Duration::ZERO), |l| *l);
        Bystander { usual, longest, at: at.saturating_duration_since(from) }
    }
}

fn secs(d: Duration) -> String {
    match d < Duration::from_secs(1) {
        true => format!("{:.2} ms", d.as_secs_f64() * 1e3),
        false => format!("{:.3} s", d.as_secs_f64()),
    }
}

/// One line: apex's time, each peer's and the ratio of the fastest to
/// apex's (above 1: apex is faster).
fn row(name: &str, apex: Duration, peers: &[(&str, Result<Duration, String>)]) {
    let mut line = format!("{name:<26} apex {:>10}", secs(apex));
    let mut fastest: Option<Duration> = None;
    for (peer, took) in peers {
        match took {
            Ok(d) => {
                line += &format!("  {peer} {:>10}", secs(*d));
                fastest = Some(fastest.map_or(*d, |f| f.min(*d)));
            }
            Err(why) => line += &format!("  {peer}: not measured ({why})"),
        }
    }
    if let Some(f) = fastest {
        line += &format!("  fastest/apex {:.2}x", f.as_secs_f64() / apex.as_secs_f64());
    }
    println!("{line}");
}

/// The state hash of a state holding `text`, as the daemon makes it (its
/// snapshot's blocks hashed on threads, for `hash` and a snapshot's
/// check) and as `State::hash` does alone, beside blake3 of the flat text.
fn state_hash_row(text: &str) {
    use apex_core::*;
    let mut s = State::new();
    let b = BufferId(1);
    let entry = |seq, op| Entry { seq, attachment: AttachmentId::SERVER, epoch: 0, op };
    let new = MetaOp::ShardNew { shard: Shard::Buffer(b), creator: AttachmentId::SERVER };
    s.apply(Shard::Meta, &entry(1, Op::Meta(new))).unwrap();
    s.apply(Shard::Buffer(b), &entry(1, Op::Buffer(BufferOp::Create { name: "big".into() }))).unwrap();
    let fill = BufferOp::Splice { q0: 0, q1: 0, text: text.to_string(), origin: Origin::FileWrite };
    s.apply(Shard::Buffer(b), &entry(2, Op::Buffer(fill))).unwrap();
    let best = |f: &dyn Fn() -> blake3::Hash| {
        (0..5)
            .map(|_| {
                let t = Instant::now();
                std::hint::black_box(f());
                t.elapsed()
            })
            .min()
            .unwrap()
    };
    let threads = best(&|| apex_sys::statehash::state_hash(&s));
    let alone = best(&|| s.hash());
    let flat = best(&|| blake3::hash(text.as_bytes()));
    assert_eq!(apex_sys::statehash::state_hash(&s), blake3::hash(&s.to_snapshot()));
    row("state hash (daemon)", threads, &[("State::hash alone", Ok(alone)), ("blake3 of the flat text", Ok(flat))]);
}

/// How long the daemon is left at least after a big write (a body
/// replaced) before what follows is timed: its snapshot, put off until
/// the session pauses, is written meanwhile.
const SETTLE: Duration = Duration::from_millis(1500);

/// The daemon's CPU time so far, in clock ticks.
fn cpu_ticks(pid: u32) -> u64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    // After the command's name, in parentheses: utime and stime are the
    // 12th and 13th fields.
    let after = stat.rsplit_once(')').map_or("", |(_, rest)| rest);
    after.split_whitespace().skip(11).take(2).filter_map(|t| t.parse::<u64>().ok()).sum()
}

/// Waits [`SETTLE`], then until the daemon has been still for a quarter
/// of a second (a snapshot of a big session can take longer than
/// `SETTLE` on a busy machine, and one written while a command is timed
/// takes a core from it and its memory shows as the command's), for at
/// most 15 seconds.
async fn settle(pid: u32) {
    tokio::time::sleep(SETTLE).await;
    let deadline = Instant::now() + Duration::from_secs(15);
    let mut seen = cpu_ticks(pid);
    while Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(250)).await;
        let now = cpu_ticks(pid);
        if now.saturating_sub(seen) <= 1 {
            return;
        }
        seen = now;
    }
}

/// How long after a long command the memory it leaves is looked at: the
/// daemon gives back what it freed once it has been still a moment
/// (250 ms), and writes the snapshot it made due before that.
const GIVEN_BACK: Duration = Duration::from_secs(2);

/// A window's ctl `get` of `file` until its body reads, then the window
/// deleted: how long, and the daemon's memory after it, at its peak, and
/// once its log's snapshot is written and the entries' memory given back
/// (two seconds on, or as long as that takes, up to 30 s: the time is
/// the last figure), beyond what it held before (MiB).
async fn open(c: &Client, root: u32, pid: u32, file: &Path) -> (Duration, f64, f64, f64, Duration) {
    let new = c.open_path(root, "main/acme/new/ctl", ORDWR).await.unwrap();
    let number = String::from_utf8(c.read(new.fid, 0, 64).await.unwrap()).unwrap();
    let number = number.split_whitespace().next().unwrap().to_string();
    let (before, _) = memory(pid);
    reset_peak(pid);
    let t = Instant::now();
    c.write(new.fid, 0, format!("name {}\nget\n", file.display()).as_bytes()).await.unwrap();
    let o = Window { c, root, number };
    let first = o.c.open_path(root, &o.path("body"), OREAD).await.unwrap();
    assert!(!o.c.read(first.fid, 0, 64).await.unwrap().is_empty());
    let took = t.elapsed();
    let (after, peak) = memory(pid);
    // Two seconds on, or, for a file whose snapshot takes longer to
    // write (a 1 GB one), once the memory is within the goal or 30 s.
    let size = std::fs::metadata(file).unwrap().len() as f64 / (1 << 20) as f64;
    let mut on = Duration::from_secs(2);
    tokio::time::sleep(on).await;
    while memory(pid).0 - before > 1.3 * size && on < Duration::from_secs(30) {
        tokio::time::sleep(Duration::from_millis(500)).await;
        on += Duration::from_millis(500);
    }
    let (settled, _) = memory(pid);
    c.clunk(first.fid).await.unwrap();
    c.write(new.fid, 0, b"delete\n").await.unwrap();
    c.clunk(new.fid).await.unwrap();
    (took, after - before, peak - before, settled - before, on)
}

/// [`open`]'s row for `file`, beside vim, nvim and a rope built in
/// process, with the daemon's memory for it: each the better of two
/// runs, as memory touched for the first time in a while costs several
/// times more on the virtual machines we measure on (2 GiB took 1.6 to
/// 2.4 s to fault in) and the first of a series paid it.
async fn open_row(c: &Client, root: u32, pid: u32, name: &str, file: &Path) {
    let size = std::fs::metadata(file).unwrap().len() as f64;
    // Each from a disk with nothing left to write (the file just made,
    // the daemon's log of it): a 1 GB write-back under way halved
    // whoever ran during it.
    let settled = || assert!(Command::new("sync").status().unwrap().success());
    // The memory as the first run found it: the second reuses what the
    // first's entries left free.
    settled();
    let mut opened = open(c, root, pid, file).await;
    settled();
    opened.0 = opened.0.min(open(c, root, pid, file).await.0);
    let in_process = (0..2)
        .map(|_| {
            settled();
            let t = Instant::now();
            read_into_rope(file);
            t.elapsed()
        })
        .min()
        .unwrap();
    // Its peak memory too, in a process of its own (this one's heap holds
    // memory freed before, which a rope would reuse unseen): the file's
    // bytes and the rope built from them are held at once, the floor of
    // reading a file whole and then building its rope, as `get` does.
    let in_process_peak = {
        let out = Command::new(std::env::current_exe().unwrap()).env(READ_ROPE, file).output().unwrap();
        let said = String::from_utf8_lossy(&out.stdout);
        said.trim().parse::<f64>().unwrap_or_else(|_| panic!("{READ_ROPE} said {said:?}"))
    };
    let open_peers = ["vim", "nvim"].map(|p| {
        let mut runs = (0..2).map(|_| {
            settled();
            let mut c = Command::new(p);
            c.args(["-u", "NONE", "-i", "NONE", "-n", "-es", "-c", "q"]).arg(file);
            time_peer(&mut c)
        });
        let (first, second) = (runs.next().unwrap(), runs.next().unwrap());
        (
            p,
            match (first, second) {
                (Ok(a), Ok(b)) => Ok(a.min(b)),
                (Err(e), _) | (_, Err(e)) => Err(e),
            },
        )
    });
    let [(vim, vim_took), (nvim, nvim_took)] = open_peers;
    let name = format!("{name} {:.0} MB", size / 1e6);
    row(&name, opened.0, &[(vim, vim_took), (nvim, nvim_took), ("read+rope in process", Ok(in_process))]);
    let mb = size / (1 << 20) as f64;
    println!(
        "{:<26} daemon memory: {:.0} MiB more ({:.2}x the file), peak {:.0} MiB more ({:.2}x), {:.0} MiB ({:.2}x) {:.1} s on (goal 1.3x); read+rope in process peaks at {:.2}x",
        "",
        opened.1,
        opened.1 / mb,
        opened.2,
        opened.2 / mb,
        opened.3,
        opened.3 / mb,
        opened.4.as_secs_f64(),
        in_process_peak / mb
    );
}

/// The file read whole and made a rope, as the in-process reference of
/// an open does.
fn read_into_rope(file: &Path) {
    let bytes = std::fs::read(file).unwrap();
    let rope = ropey::Rope::from_str(&String::from_utf8_lossy(&bytes));
    assert!(rope.len_bytes() >= bytes.len());
}

/// How many times each search row runs (its best is printed, as is the
/// reference's over as many): a search is a few milliseconds, which the
/// rest of this shared machine's load moves by half as much again.
const SEARCHES: usize = 7;

/// Set to a file's path, this program only reads it into a rope and
/// prints how many MiB its resident memory grew by at the peak.
const READ_ROPE: &str = "APEX_SCALE_READ_ROPE";

fn main() {
    // The clients measured in process (a Welcome's decoder, the 9P client)
    // run in apex-ui and apex under their malloc policy: so here, where
    // the in-process references run under it too.
    apex_sys::malloc::keep_freed_memory();
    if let Some(file) = std::env::var_os(READ_ROPE) {
        let (before, _) = memory(std::process::id());
        read_into_rope(Path::new(&file));
        println!("{:.1}", memory(std::process::id()).1 - before);
        return;
    }
    apex_sys::tunables::copy_without_slow_rep_movsb();
    let mb: usize = std::env::var("APEX_SCALE_MB").ok().and_then(|v| v.parse().ok()).unwrap_or(100);
    let base = std::env::temp_dir().join(format!("apex-bench-scale-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&base);
    std::fs::create_dir_all(&base).unwrap();
    // `APEX_SCALE_ONLY=many` runs the many files alone.
    if std::env::var("APEX_SCALE_ONLY").as_deref() == Ok("many") {
        let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
        rt.block_on(many_files(&base));
        let _ = std::fs::remove_dir_all(&base);
        return;
    }
    // A word found only at the end, for the searches.
    let text = ordinary_text(mb << 20) + "needle\n";
    let letters = text.bytes().filter(|&b| b == b'a').count();
    let original = base.join("original");
    std::fs::write(&original, &text).unwrap();
    println!(
        "scale: a {:.1} MB file of ordinary lines ({letters} letters a, {} empty lines)",
        text.len() as f64 / 1e6,
        text.lines().filter(|l| l.is_empty()).count()
    );

    let edit_only = std::env::var("APEX_SCALE_ONLY").as_deref() == Ok("edit");
    if !edit_only {
        state_hash_row(&text);
    }

    let apexd = Apexd::start(&base, &[]);
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    rt.block_on(async {
        let (c, root) = apexd.client().await;
        let new = c.open_path(root, "main/acme/new/ctl", ORDWR).await.unwrap();
        let number = String::from_utf8(c.read(new.fid, 0, 64).await.unwrap()).unwrap();
        let number = number.split_whitespace().next().unwrap().to_string();
        c.write(new.fid, 0, format!("name {}\n", base.join("file").display()).as_bytes()).await.unwrap();
        c.clunk(new.fid).await.unwrap();
        let w = Window { c: &c, root, number };

        // `APEX_SCALE_ONLY=edit` goes straight to the Edit commands.
        if !edit_only {
            // Open: a window's ctl `get` of the file (its text through the
            // daemon's log, synced as by default) until the body reads; the
            // same text as one line; the same text with a byte that is not
            // UTF-8 in every thousand or so (loaded as U+FFFD each); and,
            // last (its memory would hide the rows after it), unless
            // APEX_SCALE_GB is 0, a file of that many GB.
            let one_line = base.join("one-line");
            std::fs::write(&one_line, text.replace('\n', " ")).unwrap();
            let not_utf8 = base.join("not-utf8");
            let mut latin1 = text.clone().into_bytes();
            for b in latin1.iter_mut().step_by(997) {
                if b.is_ascii_alphabetic() {
                    *b = 0xe9;
                }
            }
            std::fs::write(&not_utf8, latin1).unwrap();
            let files = [("open (ctl get)", &original), ("open one line", &one_line), ("open not UTF-8", &not_utf8)];
            for (name, file) in files {
                open_row(&c, root, apexd.pid(), name, file).await;
            }

            // Search: an address from the top to the word at the end, through
            // `addr`, beside the same regexp's engine on the flat text.
            w.replace_body(text.as_bytes()).await;
            let addr = c.open_path(root, &w.path("addr"), ORDWR).await.unwrap();
            // The first search of a text also makes the flat copy of it
            // the ones after search while it is unchanged: timed apart.
            let (mut first, mut searched) = (None, Duration::MAX);
            for _ in 0..SEARCHES {
                c.write(addr.fid, 0, b"0").await.unwrap();
                let t = Instant::now();
                c.write(addr.fid, 0, b"/needle/").await.unwrap();
                first.get_or_insert(t.elapsed());
                searched = searched.min(t.elapsed());
            }
            let found = String::from_utf8(c.read(addr.fid, 0, 64).await.unwrap()).unwrap();
            let at = text.chars().count() - "needle\n".len();
            assert_eq!(found.split_whitespace().next(), Some(at.to_string().as_str()), "addr found the word");
            c.clunk(addr.fid).await.unwrap();
            let engine = {
                let re = regex::Regex::new("needle").unwrap();
                let mut best = Duration::MAX;
                for _ in 0..SEARCHES {
                    let t = Instant::now();
                    assert!(re.find(&text).is_some());
                    best = best.min(t.elapsed());
                }
                best
            };
            let mut rg = Command::new("rg");
            rg.args(["-c", "needle"]).arg(&original).stdout(std::process::Stdio::null());
            let rg = time_peer(&mut rg);
            let peers = [("regex crate in process", Ok(engine)), ("rg", rg)];
            row("search /needle/ (addr)", searched, &peers);
            println!(
                "{:<26} the first of them, which makes the flat copy: {} ({:.2}x the regex crate's)",
                "",
                secs(first.expect("searched")),
                first.expect("searched").as_secs_f64() / engine.as_secs_f64()
            );

            // `Look needle` from the tag, the dot at the top: acme's Look
            // searches the body from the end of dot.
            let mut looked = Duration::MAX;
            for _ in 0..SEARCHES {
                w.set_dot(0).await;
                looked = looked.min(w.run("Look needle").await);
                assert_eq!(w.dot().await, (at, at + 6), "Look found the word at the end");
            }
            row("search Look needle", looked, &peers);

            // A B3 on the word at the top, which looks for it on from there:
            // the same text with the word first too.
            w.replace_body(format!("needle\n{text}").as_bytes()).await;
            let mut clicked = Duration::MAX;
            for _ in 0..SEARCHES {
                clicked = clicked.min(w.b3(0, 6).await);
                assert_eq!(w.dot().await, (at + 7, at + 13), "B3 found the word at the end");
                w.set_dot(0).await;
            }
            row("search B3 on needle", clicked, &peers);
            // Look on this body too, from the same place: whether B3 and
            // Look differ, or the two bodies do (how a rope's leaves lie
            // in memory moves a search of it, below).
            let mut looked_here = Duration::MAX;
            for _ in 0..SEARCHES {
                w.set_dot(6).await;
                looked_here = looked_here.min(w.run("Look needle").await);
                assert_eq!(w.dot().await, (at + 7, at + 13), "Look found the word at the end");
            }
            println!(
                "{:<26} Look on this body from the same place: {} (B3 at {:.2}x of it)",
                "",
                secs(looked_here),
                clicked.as_secs_f64() / looked_here.as_secs_f64()
            );
            // The floor of a search of a rope as Look and B3 search it in
            // one thread: its chunks (about 1 KB each, not one run of
            // bytes) searched one after another in process, with nothing
            // else done; in the rope as apex builds it (its leaves
            // together, `leaves.rs`) and as ropey's own builder lays it
            // out. (The daemon searches a body this big in two halves on
            // two threads, `apex_sys::search`.)
            let finder = memchr::memmem::Finder::new("needle");
            let chunked = |rope: &ropey::Rope| {
                let mut best = Duration::MAX;
                for _ in 0..5 {
                    let t = Instant::now();
                    let found = rope.chunks().filter(|c| finder.find(c.as_bytes()).is_some()).count();
                    best = best.min(t.elapsed());
                    assert!(found >= 1);
                }
                best
            };
            let rope = apex_core::text::rope_of(&text);
            let (ours, theirs) = (chunked(&rope), chunked(&ropey::Rope::from_str(&text)));
            println!(
                "{:<26} floor in one thread: memmem over each of the rope's {} chunks in process {} (the daemon's Look, on two threads, at {:.2}x of it, B3 at {:.2}x; the regex crate over the flat text {:.2}x of it); over ropey's from_str layout {}",
                "",
                rope.chunks().count(),
                secs(ours),
                looked.as_secs_f64() / ours.as_secs_f64(),
                clicked.as_secs_f64() / ours.as_secs_f64(),
                engine.as_secs_f64() / ours.as_secs_f64(),
                secs(theirs),
            );
            // What a look costs apart from the search: the same on two lines.
            w.replace_body(b"needle\nneedle\n").await;
            let (mut small_b3, mut small_look) = (Duration::MAX, Duration::MAX);
            for _ in 0..5 {
                small_b3 = small_b3.min(w.b3(0, 6).await);
                w.set_dot(0).await;
                small_look = small_look.min(w.run("Look needle").await);
            }
            println!(
                "{:<26} on a body of two lines (what is not search): Look {}, B3 {}",
                "",
                secs(small_look),
                secs(small_b3)
            );

        }

        /// A whole-file command, as apex, vim and sed say it; what sam
        /// adds to sed's text; and the regex crate's way, its
        /// `replace_all` over the flat text in process: the floor of any
        /// substitution by regex.
        struct WholeFile {
            apex: &'static str,
            vim: &'static str,
            sed: &'static str,
            sam_more: &'static str,
            regex: (&'static str, &'static str),
        }
        let commands = [
            WholeFile { apex: "Edit ,s/a/b/g", vim: "%s/a/b/g", sed: "s/a/b/g", sam_more: "", regex: ("a", "b") },
            WholeFile { apex: "Edit ,x/^\\n/d", vim: "g/^$/d", sed: "/^$/d", sam_more: "", regex: ("(?m)^\\n", "") },
            // sam's y takes the empty text after the last newline too (as
            // the regex crate's empty match there).
            WholeFile {
                apex: "Edit ,y/\\n/c/ /",
                vim: "%s/.*/ /",
                sed: "s/.*/ /",
                sam_more: " ",
                regex: ("[^\\n]*", " "),
            },
        ];
        // What each command made (sed's text), for its second run below.
        let mut made = Vec::new();
        for (i, WholeFile { apex: command, vim: vim_ex, sed: sed_script, sam_more, regex: (re, with) }) in
            commands.iter().enumerate()
        {
            w.replace_body(text.as_bytes()).await;
            // The snapshot the replacement made due, put off until the
            // session pauses, written before the command is timed.
            settle(apexd.pid()).await;
            reset_peak(apexd.pid());
            let (before, _) = memory(apexd.pid());
            let took = w.run(command).await;
            let (_, peak) = memory(apexd.pid());
            tokio::time::sleep(GIVEN_BACK).await;
            let (after, _) = memory(apexd.pid());

            let peers = ["vim", "nvim"].map(|p| {
                let copy = base.join(format!("{p}.txt"));
                std::fs::copy(&original, &copy).unwrap();
                (p, time_peer(&mut ex(p, vim_ex, &copy)))
            });
            let sed_took = time_peer(&mut sed(sed_script, &original, &base.join("sed.txt")));
            let mut sed_out = std::fs::read(base.join("sed.txt")).unwrap_or_default();
            sed_out.extend_from_slice(sam_more.as_bytes());
            let body = w.read("body").await;
            if body != sed_out {
                let at = body.iter().zip(&sed_out).position(|(a, b)| a != b).unwrap_or(body.len().min(sed_out.len()));
                panic!(
                    "{command}: apex's text ({} bytes) and sed's ({} bytes) differ from byte {at}: {:?} against {:?}",
                    body.len(),
                    sed_out.len(),
                    String::from_utf8_lossy(&body[at.saturating_sub(40)..(at + 40).min(body.len())]),
                    String::from_utf8_lossy(&sed_out[at.saturating_sub(40)..(at + 40).min(sed_out.len())])
                );
            }
            let [(vim, vim_took), (nvim, nvim_took)] = peers;
            row(command, took, &[(vim, vim_took), (nvim, nvim_took), ("sed", sed_took)]);
            let re = regex::Regex::new(re).unwrap();
            let floor = (0..3)
                .map(|_| {
                    let started = Instant::now();
                    let out = re.replace_all(&text, *with);
                    let took = started.elapsed();
                    assert!(out.as_bytes() == sed_out, "{command}: the regex crate's text is not sed's");
                    took
                })
                .min()
                .unwrap();
            println!(
                "{:<26} floor: the regex crate's replace_all over the flat text in process {} (apex at {:.2}x of it)",
                "",
                secs(floor),
                took.as_secs_f64() / floor.as_secs_f64()
            );
            println!(
                "{:<26} daemon memory: {before:.0} MiB before, peak {peak:.0} MiB ({:.2}x the text), {after:.0} MiB after",
                "",
                (peak - before) / (text.len() as f64 / (1 << 20) as f64)
            );
            if i == 0 {
                let undo = w.run("Undo").await;
                tokio::time::sleep(GIVEN_BACK).await;
                let (after_undo, _) = memory(apexd.pid());
                assert!(w.read("body").await == text.as_bytes(), "Undo brings the text back");
                let redo = w.run("Redo").await;
                assert!(w.read("body").await == sed_out, "Redo does it again");
                println!(
                    "{:<26} Undo {}, Redo {}; daemon memory after Undo {after_undo:.0} MiB",
                    "",
                    secs(undo),
                    secs(redo)
                );
            }
            made.push(sed_out);
        }
        // Each command again, beside another client looking at the
        // daemon every millisecond, once all were timed and measured
        // alone: on two cores its looks take time from the command, and
        // the peers run with nothing beside them.
        // The first command's Undo too: one entry, applied whole.
        for (i, (WholeFile { apex: command, .. }, want)) in commands.iter().zip(&made).enumerate() {
            w.replace_body(text.as_bytes()).await;
            let done = Arc::new(AtomicBool::new(false));
            let (other, other_root) = apexd.client().await;
            let watcher = tokio::spawn(watch(other, other_root, done.clone()));
            settle(apexd.pid()).await;
            let started = Instant::now();
            let beside = w.run(command).await;
            let ended = Instant::now();
            assert!(w.read("body").await == *want, "{command} beside another client: not sed's text");
            let undone = match i {
                0 => {
                    let started = Instant::now();
                    let took = w.run("Undo").await;
                    Some((started, took))
                }
                _ => None,
            };
            done.store(true, Ordering::Relaxed);
            let (usual, looks) = watcher.await.unwrap();
            let mut saw = vec![(command.to_string(), Bystander::between(usual, &looks, started, ended), beside)];
            if let Some((started, took)) = undone {
                saw.push(("its Undo".to_string(), Bystander::between(usual, &looks, started, started + took), took));
            }
            for (what, seen, took) in saw {
                println!(
                    "{:<26} {what}: another client's Tstat and root index read: usual {:.0} us, longest {:.1} ms while it ran ({}), begun {} into it",
                    "",
                    seen.usual.as_secs_f64() * 1e6,
                    seen.longest.as_secs_f64() * 1e3,
                    secs(took),
                    secs(seen.at)
                );
            }
        }
        let gb: usize = std::env::var("APEX_SCALE_GB").ok().and_then(|v| v.parse().ok()).unwrap_or(1);
        if gb > 0 && !edit_only {
            let big = base.join("big");
            let mut f = std::io::BufWriter::new(std::fs::File::create(&big).unwrap());
            for _ in 0..(gb << 30).div_ceil(text.len()) {
                std::io::Write::write_all(&mut f, text.as_bytes()).unwrap();
            }
            f.into_inner().unwrap().sync_all().unwrap();
            open_row(&c, root, apexd.pid(), &format!("open {gb} GB-ish"), &big).await;
        }
    });
    apexd.stop();
    if !edit_only {
        rt.block_on(many_files(&base));
    }
    let _ = std::fs::remove_dir_all(&base);
}
