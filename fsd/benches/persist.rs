//! The write-ahead log's cost and a restart's time, with references
//! measured in the same run on the same disk:
//!
//! - acknowledged entries per second from a leading UI (the default sync
//!   policy), beside a plain write(2) loop of the same bytes, one write
//!   per entry as the log makes them;
//! - `--sync=always` with 1, 8 and 64 tools writing concurrently, beside
//!   the same loop and a write-and-fdatasync-per-entry loop;
//! - the restart of a session holding a 100 MB buffer and a million log
//!   entries.
//!
//! Figures, not assertions: `cargo bench -p apex-fsd --bench persist`.

use apex_core::{make, AttachmentKind, BufferId, BufferOp, Op, Origin, Shard};
use apex_fsd::attach::conn::Attached;
use apex_ninep::fcall::{OREAD, OWRITE};
use apex_ninep::Client;
use std::io::Write;
use std::path::Path;
use std::time::{Duration, Instant};

mod common;
use common::{log_bytes, Apexd};

const WAIT: Duration = Duration::from_secs(300);
/// Entries the leading UI types for the default-policy figure.
const TYPED: u64 = 200_000;
/// How long each `--sync=always` figure writes.
const WINDOW: Duration = Duration::from_secs(2);
/// The restart figure's session: entries and text.
const RESTART_ENTRIES: u64 = 1_000_000;
const RESTART_TEXT: usize = 100 << 20;

/// Entries per second of a plain loop writing `count` records of `size`
/// bytes to a file in `dir`, one write(2) each, `fdatasync` after each if
/// asked.
fn write_loop(dir: &Path, count: u64, size: usize, sync: bool) -> f64 {
    let path = dir.join("reference");
    let mut f = std::fs::OpenOptions::new().create(true).truncate(true).write(true).open(&path).unwrap();
    let record = vec![b'x'; size.max(1)];
    let t = Instant::now();
    for _ in 0..count {
        f.write_all(&record).unwrap();
        if sync {
            f.sync_data().unwrap();
        }
    }
    let rate = count as f64 / t.elapsed().as_secs_f64();
    drop(f);
    let _ = std::fs::remove_file(&path);
    rate
}

/// A leading UI's new window's body.
async fn leading_ui(c: &Client) -> (Attached, BufferId) {
    let ui = Attached::open(c, "main", AttachmentKind::Ui, "bench").await.expect("attach");
    assert!(ui.wait_for(WAIT, |l| l.leads(Shard::Layout)).await, "the layout lease");
    let body = ui.with(|l| make::new_window(l.node_mut().unwrap(), None, None, "/tmp/bench").unwrap().body);
    ui.flush().await.unwrap();
    (ui, body)
}

/// Types `count` one-rune entries at the end of `body`, flushing every
/// `batch`, and waits until the daemon acknowledged them all.
async fn type_entries(ui: &Attached, body: BufferId, count: u64, batch: u64) {
    let mut last = 0;
    for i in 0..count {
        last = ui.with(|l| {
            let n = l.node_mut().expect("welcomed");
            let q = n.state.buffer(body).expect("buffer").len();
            let text = if i % 60 == 59 { "\n" } else { "x" };
            let op = BufferOp::Splice { q0: q, q1: q, text: text.into(), origin: Origin::Keyboard };
            n.append(Shard::Buffer(body), Op::Buffer(op)).expect("the leader types").seq
        });
        if i % batch == batch - 1 {
            ui.flush().await.unwrap();
        }
    }
    ui.flush().await.unwrap();
    assert!(ui.wait_for(WAIT, |l| l.acked(Shard::Buffer(body)) >= last).await, "every entry acknowledged");
}

/// Acknowledged tool writes per second from `writers` concurrent clients,
/// each writing a line to a body of its own, for `WINDOW`.
async fn tool_writes(d: &Apexd, writers: usize) -> f64 {
    let mut tasks = Vec::new();
    let start = Instant::now() + Duration::from_millis(200);
    for _ in 0..writers {
        let (c, root) = d.client().await;
        let id = {
            let f = c.open_path(root, "main/buffers/new", OREAD).await.unwrap();
            let id = String::from_utf8(c.read_all(&f).await.unwrap()).unwrap().trim().to_string();
            c.clunk(f.fid).await.unwrap();
            id
        };
        let f = c.open_path(root, &format!("main/buffers/{id}/body"), OWRITE).await.unwrap();
        tasks.push(tokio::spawn(async move {
            tokio::time::sleep_until(start.into()).await;
            let mut n = 0u64;
            while start.elapsed() < WINDOW {
                c.write(f.fid, 0, b"an acknowledged line\n").await.expect("write");
                n += 1;
            }
            n
        }));
    }
    let mut total = 0;
    for t in tasks {
        total += t.await.unwrap();
    }
    total as f64 / WINDOW.as_secs_f64()
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let base = std::env::temp_dir().join(format!("apex-bench-persist-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&base);
    std::fs::create_dir_all(&base).unwrap();
    println!("write-ahead log (apexd in a child process, state in {}; figures, not assertions)", base.display());

    // The default policy: a leading UI's entries, acknowledged.
    let run = base.join("default");
    std::fs::create_dir_all(&run).unwrap();
    let d = Apexd::start(&run, &[]);
    let (c, _) = d.client().await;
    let (ui, body) = leading_ui(&c).await;
    let before = log_bytes(&run.join("state"));
    let t = Instant::now();
    type_entries(&ui, body, TYPED, 1000).await;
    let rate = TYPED as f64 / t.elapsed().as_secs_f64();
    let per_entry = ((log_bytes(&run.join("state")) - before) / TYPED) as usize;
    let plain = write_loop(&run, TYPED, per_entry, false);
    println!();
    println!("acknowledged entries/s, default sync (a UI's typing, flushed every 1000)");
    println!(
        "{:<36} {:>12.0} /s   plain write(2) loop of the same {per_entry}-byte records {:>10.0} /s   ratio {:.2}",
        "apexd",
        rate,
        plain,
        rate / plain
    );
    ui.close().await;
    drop(c);
    d.stop();

    // --sync=always: tools' writes, each acknowledged after a sync that
    // everyone waiting at that moment shares.
    let run = base.join("always");
    std::fs::create_dir_all(&run).unwrap();
    let d = Apexd::start(&run, &["--sync", "always"]);
    println!();
    println!("acknowledged tool writes/s, --sync=always");
    let record = 64;
    let plain = write_loop(&run, 200_000, record, false);
    let synced = write_loop(&run, 2_000, record, true);
    for writers in [1, 8, 64] {
        let rate = tool_writes(&d, writers).await;
        println!(
            "{:<36} {:>12.0} /s   vs write(2) loop {:>10.0} /s ({:.3}x)   vs write+fdatasync each {:>8.0} /s ({:.2}x)",
            format!("{writers} writer(s)"),
            rate,
            plain,
            rate / plain,
            synced,
            rate / synced
        );
    }
    drop(d);

    // Restart: a 100 MB buffer and a million entries, as snapshots leave
    // the log by default, and with every entry in the log to replay.
    println!();
    println!(
        "restart of a session with a 100 MB buffer and {RESTART_ENTRIES} entries typed after it (goal: under 1000 ms)"
    );
    restart(&base.join("restart"), "snapshots as by default", &[]).await;
    restart(&base.join("replay"), "no snapshot: all replayed", &["--snapshot-bytes", "100000000000"]).await;
    let _ = std::fs::remove_dir_all(&base);
}

/// Builds the restart figure's session in `run` with `args`, stops the
/// daemon, starts it again, and prints how long that took.
async fn restart(run: &Path, what: &str, args: &[&str]) {
    std::fs::create_dir_all(run).unwrap();
    let d = Apexd::start(run, args);
    let (c, root) = d.client().await;
    let id = {
        let f = c.open_path(root, "main/buffers/new", OREAD).await.unwrap();
        let id = String::from_utf8(c.read_all(&f).await.unwrap()).unwrap().trim().to_string();
        c.clunk(f.fid).await.unwrap();
        id
    };
    let line = b"the quick brown fox jumps over the lazy dog, again and again and again\n";
    let text: Vec<u8> = line.iter().copied().cycle().take(RESTART_TEXT).collect();
    let f = c.open_path(root, &format!("main/buffers/{id}/body"), OWRITE).await.unwrap();
    c.write_all(&f, 0, &text).await.expect("the big body");
    c.clunk(f.fid).await.unwrap();
    drop(text);
    let (ui, body) = leading_ui(&c).await;
    type_entries(&ui, body, RESTART_ENTRIES, 10_000).await;
    // The UI gone (its attachment ended), the state as a restart finds it.
    ui.close().await;
    tokio::time::sleep(Duration::from_millis(200)).await;
    let hash = {
        let f = c.open_path(root, "main/hash", OREAD).await.unwrap();
        let h = c.read_all(&f).await.unwrap();
        c.clunk(f.fid).await.unwrap();
        h
    };
    drop(c);
    d.stop();
    let state = run.join("state");
    let snapshot: u64 = std::fs::read_dir(state.join("sessions"))
        .into_iter()
        .flatten()
        .flatten()
        .map(|s| std::fs::metadata(s.path().join("snapshot")).map_or(0, |m| m.len()))
        .sum();
    let t = Instant::now();
    let d = Apexd::start(run, args);
    let (c, root) = d.client().await;
    let f = c.open_path(root, "main/hash", OREAD).await.unwrap();
    let again = c.read_all(&f).await.unwrap();
    // The socket is posted first; a request is answered once restored.
    let answered = t.elapsed();
    drop(c);
    drop(d);
    let said = std::fs::read_to_string(run.join("apexd.log")).unwrap_or_default();
    let took = said
        .lines()
        .rev()
        .find(|l| l.contains("restored"))
        .and_then(|l| l.split("took_ms=").nth(1))
        .and_then(|v| v.split_whitespace().next())
        .unwrap_or("?")
        .to_string();
    println!(
        "{what:<36} restored in {took} ms; first answer {:.0} ms after exec; snapshot {:.1} MB, log {:.1} MB; state {}",
        answered.as_secs_f64() * 1e3,
        snapshot as f64 / 1e6,
        log_bytes(&state) as f64 / 1e6,
        if again == hash { "the same (hash)" } else { "DIFFERENT" }
    );
}
