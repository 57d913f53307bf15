//! The attach protocol's benchmark, against a real `apexd`.
//!
//! `cargo bench -p apex-fsd --bench attach` prints, in one run: the local
//! keystroke apply at the leading UI (p50/p99, no round trip) beside the
//! same insert into a bare ropey rope; flush-to-ack latency (p50/p99)
//! beside a Tstat round trip on the same kind of connection; fan-out
//! throughput from one leader to 1 and to 16 followers (entries/s,
//! aggregate); and the time a Welcome takes for a session holding 10 MB
//! of text. Targets: keystroke p99 <= 50 us; >= 200k entries/s to 16
//! followers. It prints figures; nothing here asserts a time.

use apex_core::{make, AttachmentKind, BufferId, BufferOp, Op, Origin, Shard};
use apex_fsd::attach::conn::Attached;
use apex_ninep::fcall::{Fcall, OWRITE};
use apex_ninep::{dial, Client};
use std::time::{Duration, Instant};

/// The median time, of five, to encode a state holding `text` in one
/// buffer as a snapshot and decode it again.
fn snapshot_round_trip(text: &str) -> Duration {
    let mut node = apex_core::Node::server();
    let b = node.create_buffer_as("/tmp/big").expect("a buffer");
    let p = apex_core::Proposal::Insert { buffer: b, version: 0, q0: 0, text: text.into(), origin: Origin::OtherFile };
    apex_core::propose::apply(&mut node, &p).expect("the text goes in");
    let mut times: Vec<Duration> = (0..5)
        .map(|_| {
            let t = Instant::now();
            let bytes = node.state.to_snapshot();
            let state = apex_core::State::from_snapshot(&bytes).expect("decodes");
            let took = t.elapsed();
            drop((bytes, state));
            took
        })
        .collect();
    times.sort();
    times[times.len() / 2]
}

mod common;
use common::start_apexd;

const KEYSTROKES: usize = 20_000;
const ACKS: usize = 1_000;
const WAIT: Duration = Duration::from_secs(120);

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    sorted[((sorted.len() as f64 - 1.0) * p).round() as usize]
}

fn us(d: Duration) -> f64 {
    d.as_secs_f64() * 1e6
}

async fn connect(addr: &str) -> Client {
    dial(addr, 1 << 20).await.expect("dial apexd")
}

fn type_at_end(ui: &Attached, b: BufferId, text: &str) -> u64 {
    ui.with(|l| {
        let n = l.node_mut().expect("welcomed");
        let q = n.state.buffer(b).expect("buffer").len();
        let op = BufferOp::Splice { q0: q, q1: q, text: text.into(), origin: Origin::Keyboard };
        n.append(Shard::Buffer(b), Op::Buffer(op)).expect("the leader types").seq
    })
}

fn main() {
    // The clients here under the malloc policy of apex's programs (the
    // `apex` command, apex-mnt and the UI).
    apex_sys::malloc::keep_freed_memory();
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("a runtime")
        .block_on(measure());
}

async fn measure() {
    let base = std::env::temp_dir().join(format!("apex-bench-attach-{}", std::process::id()));
    let d = start_apexd(&base);
    let addr = format!("unix!{}", d.dir.join("apex").display());
    let c = connect(&addr).await;
    let ui = Attached::open(&c, "main", AttachmentKind::Ui, "bench").await.expect("attach");
    assert!(ui.wait_for(WAIT, |l| l.leads(Shard::Layout)).await);
    let root = c.attach("bench", "").await.unwrap();
    println!("attach protocol (apexd in a child process; figures, not assertions)");
    // `APEX_BENCH_ONLY=welcome` measures the Welcome alone (to profile it).
    if std::env::var("APEX_BENCH_ONLY").as_deref() != Ok("welcome") {
        entries(&addr, &c, root, &ui).await;
    }
    welcome(&addr, &c, root, &ui).await;
}

/// Keystrokes at the leader, flush to ack, and fan-out to followers.
async fn entries(addr: &str, c: &Client, root: u32, ui: &Attached) {
    let body = ui.with(|l| make::new_window(l.node_mut().unwrap(), None, None, "/tmp/bench").unwrap().body);
    ui.flush().await.unwrap();

    // Keystrokes: the leader's local apply, flushed every 64 (untimed).
    let mut times = Vec::with_capacity(KEYSTROKES);
    for i in 0..KEYSTROKES {
        let t = Instant::now();
        type_at_end(ui, body, "x");
        times.push(t.elapsed());
        if i % 64 == 63 {
            ui.flush().await.unwrap();
        }
    }
    times.sort();
    let mut rope = ropey::Rope::new();
    let mut bare = Vec::with_capacity(KEYSTROKES);
    for _ in 0..KEYSTROKES {
        let t = Instant::now();
        let n = rope.len_chars();
        rope.insert(n, "x");
        bare.push(t.elapsed());
    }
    bare.sort();
    println!(
        "keystroke apply at the leader  p50 {:>8.2} us  p99 {:>8.2} us   (bare ropey insert p50 {:.2} us, p99 {:.2} us)",
        us(percentile(&times, 0.5)),
        us(percentile(&times, 0.99)),
        us(percentile(&bare, 0.5)),
        us(percentile(&bare, 0.99))
    );

    // Flush to ack, one keystroke at a time, beside a Tstat round trip.
    ui.flush().await.unwrap();
    assert!(ui.wait_for(WAIT, |l| l.quiet()).await);
    let mut acks = Vec::with_capacity(ACKS);
    for _ in 0..ACKS {
        let seq = type_at_end(ui, body, "y");
        let t = Instant::now();
        ui.flush().await.unwrap();
        assert!(ui.wait_for(WAIT, |l| l.acked(Shard::Buffer(body)) >= seq).await);
        acks.push(t.elapsed());
    }
    acks.sort();
    let mut stats = Vec::with_capacity(ACKS);
    for _ in 0..ACKS {
        let t = Instant::now();
        c.rpc(Fcall::Tstat { fid: root }).await.unwrap();
        stats.push(t.elapsed());
    }
    stats.sort();
    println!(
        "flush -> ack                   p50 {:>8.1} us  p99 {:>8.1} us   (Tstat round trip p50 {:.1} us, p99 {:.1} us; ratio p50 {:.2})",
        us(percentile(&acks, 0.5)),
        us(percentile(&acks, 0.99)),
        us(percentile(&stats, 0.5)),
        us(percentile(&stats, 0.99)),
        us(percentile(&acks, 0.5)) / us(percentile(&stats, 0.5))
    );

    // Fan-out: followers on connections of their own.
    for followers in [1usize, 16] {
        let total = if followers == 1 { 100_000 } else { 40_000 };
        let mut tools = Vec::new();
        for i in 0..followers {
            let fc = connect(addr).await;
            let t = Attached::open(&fc, "main", AttachmentKind::Tool, &format!("follower{i}")).await.unwrap();
            assert!(t.wait_for(WAIT, |l| l.node().is_some()).await);
            tools.push((fc, t));
        }
        ui.flush().await.unwrap();
        let start_seq = ui.with(|l| l.node().unwrap().log.last(Shard::Buffer(body)));
        let last = start_seq + total as u64;
        let t = Instant::now();
        for i in 0..total {
            type_at_end(ui, body, "z");
            if i % 500 == 499 {
                ui.flush().await.unwrap();
            }
        }
        ui.flush().await.unwrap();
        for (_, tool) in &tools {
            let got =
                tool.wait_for(WAIT, |l| l.node().is_some_and(|n| n.state.applied(Shard::Buffer(body)) >= last)).await;
            assert!(got, "a follower applied every entry");
        }
        let secs = t.elapsed().as_secs_f64();
        println!(
            "fan-out to {followers:>2} follower(s)         {:>10.0} entries/s aggregate ({total} entries each in {:.2} s)",
            (total * followers) as f64 / secs,
            secs
        );
        for (_, tool) in tools {
            tool.close().await;
        }
    }
}

/// The Welcome of a session holding 10 MB of text (written as a file
/// would be, through a buffer's body), beside its in-process floor.
async fn welcome(addr: &str, c: &Client, root: u32, ui: &Attached) {
    let big = ui.with(|l| make::new_window(l.node_mut().unwrap(), None, None, "/tmp/big").unwrap().body);
    ui.flush().await.unwrap();
    ui.close().await;
    let line = "the quick brown fox jumps over the lazy dog, and again and again\n";
    let text = line.repeat((10 << 20) / line.len());
    let f = c.open_path(root, &format!("main/buffers/{}/body", big.0), OWRITE).await.unwrap();
    c.write_all(&f, 0, text.as_bytes()).await.unwrap();
    c.clunk(f.fid).await.unwrap();
    let mut welcomes = Vec::new();
    for i in 0..5 {
        let wc = connect(addr).await;
        let t = Instant::now();
        let w = Attached::open(&wc, "main", AttachmentKind::Tool, &format!("welcome{i}")).await.unwrap();
        assert!(w.wait_for(WAIT, |l| l.node().is_some()).await);
        welcomes.push(t.elapsed());
        w.close().await;
    }
    welcomes.sort();
    let mb = text.len() as f64 / 1e6;
    let median = welcomes[welcomes.len() / 2];
    println!(
        "welcome, {:.1} MB of text        median {:>8.1} ms ({:.0} MB/s; best {:.1} ms)",
        mb,
        median.as_secs_f64() * 1e3,
        mb / median.as_secs_f64(),
        welcomes[0].as_secs_f64() * 1e3
    );
    // The floor of any Welcome, in this process: the same text's state
    // encoded as a snapshot and decoded into a rope again, no I/O.
    let floor = snapshot_round_trip(&text);
    println!(
        "  its floor: snapshot encode+decode in-process median {:>8.1} ms ({:.0} MB/s); welcome/floor {:.2}",
        floor.as_secs_f64() * 1e3,
        mb / floor.as_secs_f64(),
        median.as_secs_f64() / floor.as_secs_f64()
    );
}
