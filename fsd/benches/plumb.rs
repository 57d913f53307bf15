//! The session's plumber benchmark: messages per second through a real
//! `apexd --plumb main`'s posted `plumb/send` to a reader of the port the
//! rule names, beside a plain Unix-socket echo measured in the same run.
//!
//! `cargo bench -p apex-fsd --bench plumb` prints: 20,000 messages sent
//! on one open `send` (as plumb(3)'s `plumbsend` does) and read on the
//! port by another connection, for a rule that matches by pattern alone,
//! and for apex's basic file rule (an `isfile` per message).
//!
//! `APEX_BENCH_PLUMBER=unix!PATH` sends the same messages, with the same
//! client, to another plumber posted there instead (plan9port's plumber,
//! started by hand with the rules in `RULES` plus its basic set), so the
//! two are measured alike. It prints figures; nothing asserts a time.

use apex_ninep::fcall::{OREAD, OWRITE};
use apex_ninep::{dial, Client};
use std::sync::atomic::Ordering::Relaxed;
use std::time::{Duration, Instant};

mod common;
use common::{echo_round_trip, start_apexd_with};

const MESSAGES: usize = 20_000;
/// The most messages sent and not yet read (apexd keeps 256 per reader).
const AHEAD: usize = 128;

/// The rule the first figure goes through.
const RULES: &str = "type is text\ndata matches 'msg [0-9]+'\nplumb to bench\n";

async fn plumber(address: &str) -> (Client, u32) {
    let c = dial(address, 8192).await.expect("dial the plumber");
    let root = c.attach("bench", "").await.unwrap();
    (c, root)
}

/// Sends `MESSAGES` messages made by `message` to the plumber at
/// `address`, while another connection reads `port`: the time from the
/// first send to the last message read.
async fn through(address: &str, port: &str, message: impl Fn(usize) -> String) -> Duration {
    let (r, rroot) = plumber(address).await;
    let port = r.open_path(rroot, port, OREAD).await.expect("open the port");
    // Read so far: the sender keeps within `AHEAD` of it, as a reader
    // that falls further behind than the plumber keeps loses messages.
    let read = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let reader = tokio::spawn({
        let read = read.clone();
        async move {
            let mut bytes = Vec::new();
            while read.load(Relaxed) < MESSAGES {
                bytes.extend(r.read(port.fid, 0, 8192).await.unwrap());
                while let Ok(Some((_, used))) = apex_core::plumb::Message::parse(&bytes) {
                    bytes.drain(..used);
                    read.fetch_add(1, Relaxed);
                }
            }
        }
    });
    let (c, root) = plumber(address).await;
    let send = c.open_path(root, "send", OWRITE).await.unwrap();
    let t = Instant::now();
    for i in 0..MESSAGES {
        while i >= read.load(Relaxed) + AHEAD {
            tokio::task::yield_now().await;
        }
        c.write(send.fid, 0, message(i).as_bytes()).await.expect("the plumber took the message");
    }
    reader.await.unwrap();
    t.elapsed()
}

fn report(what: &str, took: Duration, echo: Duration) {
    let each = took / MESSAGES as u32;
    println!(
        "{what}: {MESSAGES} messages in {:.0} ms: {:.0}/s, {:.1} us each, {:.1}x the 2 echo round trips it takes (a send, a port read)",
        took.as_secs_f64() * 1e3,
        MESSAGES as f64 / took.as_secs_f64(),
        each.as_secs_f64() * 1e6,
        each.as_secs_f64() / (2.0 * echo.as_secs_f64())
    );
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let dir = std::env::temp_dir().join(format!("apex-bench-plumb-{}", std::process::id()));
    let external = std::env::var("APEX_BENCH_PLUMBER").ok();
    let d = match &external {
        Some(_) => None,
        None => Some(start_apexd_with(&dir, &["--plumb", "main"])),
    };
    if d.is_none() {
        std::fs::create_dir_all(&dir).unwrap();
    }
    let echo = echo_round_trip(&dir, 64);
    println!("reference: plain socket echo round trip (median) {:.1} us", echo.as_secs_f64() * 1e6);
    let address = external.clone().unwrap_or_else(|| format!("unix!{}", dir.join("plumb").display()));
    if external.is_none() {
        // The session's own rules: the bench's, then the basic set.
        let (c, root) = plumber(&address).await;
        let f = c.open_path(root, "rules", OWRITE | apex_ninep::fcall::OTRUNC).await.unwrap();
        c.write(f.fid, 0, format!("{RULES}\ninclude basic\n").as_bytes()).await.unwrap();
        c.clunk(f.fid).await.unwrap();
    }
    let who = if external.is_some() { "the plumber at APEX_BENCH_PLUMBER" } else { "apexd's session plumber" };

    let took =
        through(&address, "bench", |i| format!("bench\n\n/\ntext\n\n{}\nmsg {i}", 4 + i.to_string().len())).await;
    report(&format!("{who}, a pattern rule"), took, echo);

    let files = dir.join("files");
    std::fs::create_dir_all(&files).unwrap();
    std::fs::write(files.join("FILE"), "x\n").unwrap();
    let wdir = files.display().to_string();
    let took = through(&address, "edit", |i| {
        let data = format!("FILE:{}", i % 100 + 1);
        format!("bench\n\n{wdir}\ntext\n\n{}\n{data}", data.len())
    })
    .await;
    report(&format!("{who}, the basic file rule (isfile)"), took, echo);
    drop(d);
    let _ = std::fs::remove_dir_all(&dir);
}
