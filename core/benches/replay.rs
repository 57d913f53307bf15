//! `cargo bench -p apex-core`: replay the editing traces and measure the
//! state machine against raw ropey, measured in the same run.
//!
//! Prints, per trace: raw ropey applying the patches; a leader
//! `Node::append` of every edit as an entry; a follower applying those
//! entries (`State::apply`, and `Node::accept`, which also stores them);
//! the ratios to raw ropey. Then snapshot + restore and `hash` of a 100 MB
//! buffer in MB/s (`State::hash` on one thread; the daemon's, on two, is a
//! row of `cargo bench -p apex-fsd --bench scale`) beside their floors
//! (the rope's chunks copied out, and ropey building a rope again; the
//! chunks copied into runs blake3 hashes whole), and the memory a 100 MB
//! buffer's state takes, counted by
//! a global allocator. Each timing is the best of several runs. Nothing
//! here asserts a time: these machines are shared and noisy.
//!
//! malloc runs under apexd's policy (`apex_sys::malloc`: freed memory is
//! kept for reuse, not given back to the kernel and faulted in again);
//! `--glibc-malloc` measures under glibc's defaults instead.

#[path = "../tests/core/trace.rs"]
mod trace;

use apex_core::*;
use ropey::Rope;
use std::alloc::{GlobalAlloc, Layout, System};
use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

/// Counts live heap bytes, to measure a state's memory.
struct Counting;

static LIVE: AtomicUsize = AtomicUsize::new(0);

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        LIVE.fetch_add(l.size(), Ordering::Relaxed);
        unsafe { System.alloc(l) }
    }
    unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
        LIVE.fetch_sub(l.size(), Ordering::Relaxed);
        unsafe { System.dealloc(p, l) }
    }
    unsafe fn realloc(&self, p: *mut u8, l: Layout, new: usize) -> *mut u8 {
        LIVE.fetch_add(new, Ordering::Relaxed);
        LIVE.fetch_sub(l.size(), Ordering::Relaxed);
        unsafe { System.realloc(p, l, new) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

const RUNS: usize = 7;

/// Wall time of one run of `f` on fresh input from `setup`.
fn once<I, O>(setup: &mut impl FnMut() -> I, f: &mut impl FnMut(I) -> O) -> Duration {
    let input = setup();
    let t = Instant::now();
    let out = f(input);
    let d = t.elapsed();
    drop(std::hint::black_box(out));
    d
}

/// Best wall time of `RUNS` runs of `f`, each on fresh input from `setup`.
fn best<I, O>(mut setup: impl FnMut() -> I, mut f: impl FnMut(I) -> O) -> Duration {
    (0..RUNS).map(|_| once(&mut setup, &mut f)).min().unwrap()
}

fn splice_op(pos: u64, del: u64, text: &str) -> Op {
    Op::Buffer(BufferOp::Splice { q0: pos, q1: pos + del, text: text.to_string(), origin: Origin::Keyboard })
}

fn follower() -> Node {
    Node::new(AttachmentId(1), State::new(), Log::mirror(&State::new(), Box::new(RecordingHook::default())))
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

/// Where trace `name` is: the repository's `tests/data`, else
/// `$APEX_TRACES`, else the traces folder beside the repository.
fn trace_path(name: &str) -> PathBuf {
    let here = trace::vendored(name);
    if here.exists() {
        return here;
    }
    let dir = match std::env::var_os("APEX_TRACES") {
        Some(d) => PathBuf::from(d),
        None => PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../shared/traces"),
    };
    dir.join(format!("{name}.json.gz"))
}

fn replay(name: &str) {
    let path = trace_path(name);
    if !path.exists() {
        println!("{name}: no trace at {}; set APEX_TRACES to the folder of editing traces", path.display());
        return;
    }
    let t = trace::load(&path);
    let patches: Vec<(u64, u64, String)> = t.patches().cloned().collect();

    let mut raw_setup = || Rope::from_str(&t.start);
    let mut raw_run = |mut rope: Rope| {
        for (pos, del, text) in &patches {
            let (pos, del) = (*pos as usize, *del as usize);
            if del > 0 {
                rope.remove(pos..pos + del);
            }
            if !text.is_empty() {
                rope.insert(pos, text);
            }
        }
        assert_eq!(rope.len_chars(), t.end.chars().count());
        rope
    };
    assert!(raw_run(raw_setup()) == t.end.as_str(), "{name}: the patches do not give endContent");

    // The leader: the buffer exists and holds startContent; then every
    // patch is one `Node::append`, ops built as a UI would build them.
    let fresh_leader = || {
        let mut n = Node::server();
        let b = n.create_buffer_as(name).unwrap();
        if !t.start.is_empty() {
            n.append(Shard::Buffer(b), splice_op(0, 0, &t.start)).unwrap();
        }
        (n, b)
    };
    let mut leader_setup = fresh_leader;
    let mut leader_run = |(mut n, b): (Node, BufferId)| {
        let shard = Shard::Buffer(b);
        for (pos, del, text) in &patches {
            n.append(shard, splice_op(*pos, *del, text)).unwrap();
        }
        n
    };

    // The entries a follower receives.
    let (mut n, b) = fresh_leader();
    for (pos, del, text) in &patches {
        n.append(Shard::Buffer(b), splice_op(*pos, *del, text)).unwrap();
    }
    assert!(n.state.buffer(b).unwrap().text.to_string() == t.end, "{name}: wrong end content");
    let log: Vec<(Shard, Entry)> = std::iter::once(Shard::Meta)
        .chain(std::iter::once(Shard::Buffer(b)))
        .flat_map(|s| n.log.entries_after(s, 0).unwrap().cloned().map(move |e| (s, e)).collect::<Vec<_>>())
        .collect();
    // The metalog's ShardNew, the Create and startContent come first.
    let head = log.len() - patches.len();
    let prefix = |upto: usize| {
        let mut s = State::new();
        for (shard, e) in &log[..upto] {
            s.apply(*shard, e).unwrap();
        }
        s
    };
    // Time only the per-edit entries, starting from the state after the
    // metalog, the Create and startContent (as the leader's timing does).
    let mut follow_setup = || prefix(head);
    let mut follow_run = |mut s: State| {
        for (shard, e) in &log[head..] {
            s.apply(*shard, e).unwrap();
        }
        s
    };
    let mut accept_setup = || {
        let mut f = follower();
        for (shard, e) in &log[..head] {
            f.accept(*shard, e.clone()).unwrap();
        }
        (f, log[head..].to_vec())
    };
    let mut accept_run = |(mut f, entries): (Node, Vec<(Shard, Entry)>)| {
        for (shard, e) in entries {
            f.accept(shard, e).unwrap();
        }
        f
    };
    // Interleaved, so that whatever else the machine does slows all four
    // alike; the best of each is reported.
    let (mut raw, mut leader, mut follow, mut accept) = (Duration::MAX, Duration::MAX, Duration::MAX, Duration::MAX);
    for _ in 0..RUNS {
        raw = raw.min(once(&mut raw_setup, &mut raw_run));
        leader = leader.min(once(&mut leader_setup, &mut leader_run));
        follow = follow.min(once(&mut follow_setup, &mut follow_run));
        accept = accept.min(once(&mut accept_setup, &mut accept_run));
    }
    let per = |d: Duration| d.as_secs_f64() * 1e9 / patches.len() as f64;
    println!(
        "{name:16} {:>7} patches  ropey {:7.1} ms ({:5.0} ns/edit)  leader {:7.1} ms ({:4.2}x)  follower apply {:7.1} ms ({:4.2}x)  follower accept {:7.1} ms ({:4.2}x)",
        patches.len(),
        ms(raw),
        per(raw),
        ms(leader),
        leader.as_secs_f64() / raw.as_secs_f64(),
        ms(follow),
        follow.as_secs_f64() / raw.as_secs_f64(),
        ms(accept),
        accept.as_secs_f64() / raw.as_secs_f64(),
    );
}

/// About 100 MB of text: lines of mixed ASCII and some multi-byte runes.
fn big_text() -> String {
    let line = "fn main() { println!(\"hello, wörld — ✓\"); } // the quick brown fox jumps\n";
    line.repeat(100_000_000 / line.len())
}

fn big_buffer() {
    let before = LIVE.load(Ordering::Relaxed);
    let text = big_text();
    let mb = text.len() as f64 / 1e6;
    let mut s = State::new();
    let b = BufferId(1);
    let meta = |seq, op| Entry { seq, attachment: AttachmentId::SERVER, epoch: 0, op: Op::Meta(op) };
    let e = |seq, op| Entry { seq, attachment: AttachmentId::SERVER, epoch: 0, op: Op::Buffer(op) };
    s.apply(Shard::Meta, &meta(1, MetaOp::ShardNew { shard: Shard::Buffer(b), creator: AttachmentId::SERVER }))
        .unwrap();
    s.apply(Shard::Buffer(b), &e(1, BufferOp::Create { name: "big".into() })).unwrap();
    let op = BufferOp::Splice { q0: 0, q1: 0, text, origin: Origin::FileWrite };
    s.apply(Shard::Buffer(b), &e(2, op)).unwrap();
    // The op (and its copy of the text) is gone: what is live is the state.
    let used = LIVE.load(Ordering::Relaxed) - before;

    let snap_restore = best(|| (), |_| State::from_snapshot(&s.to_snapshot()).unwrap());
    let snap = best(|| (), |_| s.to_snapshot());
    let bytes = s.to_snapshot();
    let restore = best(|| (), |_| State::from_snapshot(&bytes).unwrap());
    let hash = best(|| (), |_| s.hash());
    let flat = s.buffer(b).unwrap().text.to_string();
    let rope_build = best(|| (), |_| Rope::from_str(&flat));
    let raw_hash = best(|| (), |_| blake3::hash(flat.as_bytes()));
    // The floors, from the rope as it is: a snapshot of it into bytes and
    // a restore into a rope copy its text out of the rope's chunks (about
    // 1 KB each, wherever edits cut them) and build a rope again (ropey's
    // from_str at best); a hash of it copies those chunks into runs
    // blake3 hashes whole (its 1 KiB chunks are not the rope's).
    let rope = &s.buffer(b).unwrap().text;
    let copy_out = best(
        || Vec::with_capacity(flat.len()),
        |mut bytes: Vec<u8>| {
            for chunk in rope.chunks() {
                bytes.extend_from_slice(chunk.as_bytes());
            }
            bytes
        },
    );
    let copied_hash = best(
        || Vec::with_capacity(64 << 10),
        |mut block: Vec<u8>| {
            let mut values = Vec::new();
            for chunk in rope.chunks() {
                let mut bytes = chunk.as_bytes();
                while !bytes.is_empty() {
                    let take = (block.capacity() - block.len()).min(bytes.len());
                    block.extend_from_slice(&bytes[..take]);
                    bytes = &bytes[take..];
                    if block.len() == block.capacity() {
                        values.push(apex_core::hashtree::block_value(values.len(), &block));
                        block.clear();
                    }
                }
            }
            values
        },
    );
    let rate = |d: Duration| mb / d.as_secs_f64();
    println!(
        "100 MB buffer ({mb:.1} MB): snapshot+restore {:7.0} MB/s (snapshot {:6.0} MB/s, restore {:6.0} MB/s)  hash {:6.0} MB/s  [references: ropey from_str {:6.0} MB/s, blake3 of the flat text {:6.0} MB/s]",
        rate(snap_restore),
        rate(snap),
        rate(restore),
        rate(hash),
        rate(rope_build),
        rate(raw_hash),
    );
    let floor = copy_out + rope_build;
    println!(
        "100 MB buffer floors: the rope's chunks copied out {:6.0} MB/s, then from_str: {:6.0} MB/s (snapshot+restore at {:.2}x of it; {:.2}x of from_str alone, goal 0.8x); the rope's chunks copied into 64 KiB runs and hashed {:6.0} MB/s (hash at {:.2}x of it; {:.2}x of blake3 of the flat text, goal 0.9x)",
        rate(copy_out),
        rate(floor),
        floor.as_secs_f64() / snap_restore.as_secs_f64(),
        rope_build.as_secs_f64() / snap_restore.as_secs_f64(),
        rate(copied_hash),
        copied_hash.as_secs_f64() / hash.as_secs_f64(),
        raw_hash.as_secs_f64() / hash.as_secs_f64(),
    );
    println!(
        "100 MB buffer memory: {:.1} MB live for {mb:.1} MB of text ({:.3}x)",
        used as f64 / 1e6,
        used as f64 / 1e6 / mb
    );
}

/// apexd's malloc policy (`apex_sys::malloc`, which this crate cannot
/// depend on): keep 256 MiB of freed heap, one arena, blocks under 8 MiB
/// from the heap. The figures are for
/// the state machine as the daemon runs it.
fn daemon_malloc_policy() {
    // SAFETY: mallopt only sets malloc's parameters, before any thread.
    unsafe {
        libc::mallopt(libc::M_TRIM_THRESHOLD, 256 << 20);
        libc::mallopt(libc::M_ARENA_MAX, 1);
        libc::mallopt(libc::M_MMAP_THRESHOLD, 8 << 20);
    }
}

fn main() {
    // `cargo bench` passes `--bench`; a filter argument picks traces.
    let args: Vec<String> = std::env::args().skip(1).collect();
    let glibc = args.iter().any(|a| a == "--glibc-malloc");
    if !glibc {
        daemon_malloc_policy();
    }
    let filter: Vec<String> = args.into_iter().filter(|a| !a.starts_with("--")).collect();
    println!("apex-core replay benchmark (best of {RUNS} runs; ratios are to raw ropey in this run)");
    println!(
        "malloc: {}",
        match glibc {
            true => "glibc's defaults (--glibc-malloc)",
            false => "apexd's policy, freed memory kept (apex_sys::malloc; --glibc-malloc for glibc's defaults)",
        }
    );
    for name in trace::NAMES {
        if filter.is_empty() || filter.iter().any(|f| name.contains(f.as_str())) {
            replay(name);
        }
    }
    if filter.is_empty() || filter.iter().any(|f| f == "big") {
        big_buffer();
    }
}
