//! The acme tree benchmark: a real `apexd --acme main`, driven over its
//! `acme` socket as acme's clients drive acme, beside a plain Unix-socket
//! echo measured in the same run.
//!
//! `cargo bench -p apex-fsd --bench acme` prints: 1,000 windows made
//! through `new/ctl`; 10,000 `addr` searches each followed by a `data`
//! read, on a 1 MB body; and a 100 MB body written through `acme/N/body`
//! (msize 1 MiB and plan9port's 8192) beside the same bytes through a
//! plain socket. It prints figures; nothing here asserts a time.

use apex_ninep::fcall::{ORDWR, OWRITE};
use apex_ninep::{dial, Client};
use std::io::{Read, Write};
use std::path::Path;
use std::time::{Duration, Instant};

mod common;
use common::{echo_round_trip, start_apexd_with};

const WINDOWS: usize = 1000;
const SEARCHES: usize = 10_000;
const BODY: usize = 1 << 20;
const BULK: usize = 100 << 20;

/// MB/s of `BULK` bytes written in `chunk`s through a plain socket to a
/// thread that reads them: the reference for the body write.
fn socket_write_mbps(dir: &Path, chunk: usize) -> f64 {
    let path = dir.join(format!("bulk{chunk}"));
    let listener = std::os::unix::net::UnixListener::bind(&path).expect("bind bulk");
    let reader = std::thread::spawn(move || {
        let (mut s, _) = listener.accept().unwrap();
        let mut buf = vec![0u8; 1 << 20];
        let mut got = 0;
        while got < BULK {
            got += s.read(&mut buf).unwrap();
        }
        s.write_all(b"k").unwrap();
    });
    let mut s = std::os::unix::net::UnixStream::connect(&path).unwrap();
    let data = vec![b'x'; chunk];
    let t = Instant::now();
    let mut left = BULK;
    while left > 0 {
        let n = left.min(chunk);
        s.write_all(&data[..n]).unwrap();
        left -= n;
    }
    let mut k = [0u8; 1];
    s.read_exact(&mut k).unwrap();
    reader.join().unwrap();
    BULK as f64 / 1e6 / t.elapsed().as_secs_f64()
}

async fn acme(dir: &Path, msize: u32) -> (Client, u32) {
    let c = dial(&format!("unix!{}", dir.join("acme").display()), msize).await.expect("dial acme");
    let root = c.attach("bench", "").await.expect("attach");
    (c, root)
}

/// Makes a window through new/ctl as win does; returns its id.
async fn new_window(c: &Client, root: u32) -> u32 {
    let f = c.open_path(root, "new/ctl", ORDWR).await.expect("new/ctl");
    let head = c.read(f.fid, 0, 12).await.expect("read ctl");
    c.clunk(f.fid).await.expect("clunk");
    String::from_utf8(head).unwrap().trim().parse().expect("id")
}

async fn body_write(c: &Client, root: u32, id: u32, chunk: usize, total: usize) -> f64 {
    let f = c.open_path(root, &format!("{id}/body"), OWRITE).await.expect("body");
    let line = "the quick brown fox jumps over the lazy dog 0123456789\n";
    let data: Vec<u8> = line.as_bytes().iter().copied().cycle().take(chunk).collect();
    let t = Instant::now();
    let mut left = total;
    while left > 0 {
        let n = left.min(chunk);
        c.write(f.fid, 0, &data[..n]).await.expect("body write");
        left -= n;
    }
    let took = t.elapsed();
    c.clunk(f.fid).await.expect("clunk");
    total as f64 / 1e6 / took.as_secs_f64()
}

fn per(took: Duration, n: usize) -> Duration {
    took / n as u32
}

#[tokio::main]
async fn main() {
    let dir = std::env::temp_dir().join(format!("apex-bench-acme-{}", std::process::id()));
    let d = start_apexd_with(&dir, &["--acme", "main"]);
    while !dir.join("acme").exists() {
        std::thread::sleep(Duration::from_millis(20));
    }
    let echo = echo_round_trip(&dir, 1);
    println!("reference: plain socket echo round trip (median) {:.1} us", echo.as_secs_f64() * 1e6);

    // 1,000 windows through new/ctl.
    let (c, root) = acme(&dir, 8192).await;
    let t = Instant::now();
    for _ in 0..WINDOWS {
        new_window(&c, root).await;
    }
    let took = t.elapsed();
    let each = per(took, WINDOWS);
    println!(
        "new windows: {WINDOWS} through new/ctl in {:.0} ms: {:.0} us each ({:.0}/s), {:.1}x the 4 echo round trips it takes (walk, open, read, clunk)",
        took.as_secs_f64() * 1e3,
        each.as_secs_f64() * 1e6,
        WINDOWS as f64 / took.as_secs_f64(),
        each.as_secs_f64() / (4.0 * echo.as_secs_f64())
    );

    // 10,000 addr searches and data reads on a 1 MB body.
    let id = new_window(&c, root).await;
    let (big, big_root) = acme(&dir, 1 << 20).await;
    let mut text = String::with_capacity(BODY + 64);
    let mut line = 0;
    while text.len() < BODY {
        text.push_str(&format!("line {line:06} of the body, with some words to skip over\n"));
        line += 1;
    }
    let f = big.open_path(big_root, &format!("{id}/body"), OWRITE).await.unwrap();
    big.write_all(&f, 0, text.as_bytes()).await.unwrap();
    big.clunk(f.fid).await.unwrap();
    let addr = c.open_path(root, &format!("{id}/addr"), ORDWR).await.unwrap();
    let data = c.open_path(root, &format!("{id}/data"), ORDWR).await.unwrap();
    let t = Instant::now();
    let mut read = 0;
    for i in 0..SEARCHES {
        // Targets spread over the body, found from the start each time.
        let target = (i * 7919) % line;
        c.write(addr.fid, 0, format!("#0/line {target:06}/").as_bytes()).await.expect("addr");
        read += c.read(data.fid, 0, 64).await.expect("data").len();
    }
    let took = t.elapsed();
    let each = per(took, SEARCHES);
    println!(
        "addr search + data read on a {:.1} MB body ({line} lines): {SEARCHES} in {:.0} ms: {:.0} us each, {:.1}x the 2 echo round trips ({read} bytes read)",
        text.len() as f64 / 1e6,
        took.as_secs_f64() * 1e3,
        each.as_secs_f64() * 1e6,
        each.as_secs_f64() / (2.0 * echo.as_secs_f64())
    );

    // A 100 MB body through acme/N/body.
    for (msize, label) in [(1u32 << 20, "msize 1 MiB"), (8192, "msize 8192 (9pserve's)")] {
        let id = new_window(&c, root).await;
        let (w, wroot) = acme(&dir, msize).await;
        let chunk = (w.msize() - 24) as usize;
        let apex = body_write(&w, wroot, id, chunk, BULK).await;
        let reference = socket_write_mbps(&dir, chunk);
        println!(
            "100 MB body write through acme/{id}/body, {label}: {apex:.0} MB/s; plain socket, same writes: {reference:.0} MB/s ({:.2}x)",
            apex / reference
        );
        // Let the daemon drop the text before the next run.
        let ctl = c.open_path(root, &format!("{id}/ctl"), OWRITE).await.unwrap();
        let _ = c.write(ctl.fid, 0, b"delete").await;
        c.clunk(ctl.fid).await.unwrap();
    }
    drop(d);
}
