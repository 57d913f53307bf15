//! The 9P benchmark: a real `apexd` against a plain Unix-socket echo
//! server measured in the same run.
//!
//! `cargo bench -p apex-fsd --bench ninep` prints round trips per second
//! for Tstat and a small Tread (one client, and eight at once), and MB/s
//! for writing then reading a 100 MB body at msize 64 KiB and 1 MiB, each
//! beside the reference: the same round trips, or the same bytes, through
//! a socket whose server (another process, as apexd is) does nothing but
//! echo or send; with eight clients, the CPU each side spent per round
//! trip; and another session's Tstat latency, idle and while a client
//! reads a 100 MB buffer.
//! It prints figures; nothing here asserts a time.

use apex_ninep::fcall::{OREAD, OWRITE};
use apex_ninep::{dial, Client};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

mod common;
use common::start_apexd;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{UnixListener, UnixStream};

/// How long each round-trip figure is measured for.
const WINDOW: Duration = Duration::from_millis(1500);
/// Rounds of each round-trip rate, and the time each round takes.
const ROUNDS: usize = 5;
const ROUND: Duration = Duration::from_millis(400);
/// Size of the bulk body.
const BULK: usize = 100 << 20;
/// Rounds of each bulk transfer.
const BULK_ROUNDS: usize = 5;

/// Round trips per second of `clients` loops of `once` for `ROUND`.
async fn rate<F, Fut>(clients: usize, once: F) -> f64
where
    F: Fn(usize) -> Fut + Clone + Send + 'static,
    Fut: std::future::Future<Output = ()> + Send,
{
    let start = Instant::now();
    let mut tasks = Vec::new();
    for i in 0..clients {
        let once = once.clone();
        tasks.push(tokio::spawn(async move {
            let mut n = 0u64;
            while start.elapsed() < ROUND {
                once(i).await;
                n += 1;
            }
            n
        }));
    }
    let mut total = 0;
    for t in tasks {
        total += t.await.expect("bench task");
    }
    total as f64 / start.elapsed().as_secs_f64()
}

/// A plain echo server on a Unix socket: the reference for round trips.
async fn echo_server(path: &Path) {
    let listener = UnixListener::bind(path).expect("bind echo");
    tokio::spawn(async move {
        while let Ok((mut s, _)) = listener.accept().await {
            tokio::spawn(async move {
                let mut buf = vec![0u8; 64 * 1024];
                while let Ok(n) = s.read(&mut buf).await {
                    if n == 0 || s.write_all(&buf[..n]).await.is_err() {
                        break;
                    }
                }
            });
        }
    });
}

/// A plain server that sends `BULK` bytes in `chunk`-sized writes, or
/// swallows what it is sent: the reference for bulk transfer.
async fn bulk_server(path: &Path, chunk: usize) {
    let listener = UnixListener::bind(path).expect("bind bulk");
    tokio::spawn(async move {
        while let Ok((mut s, _)) = listener.accept().await {
            tokio::spawn(async move {
                let mut mode = [0u8; 1];
                if s.read_exact(&mut mode).await.is_err() {
                    return;
                }
                let mut buf = vec![b'x'; chunk];
                if mode[0] == b'r' {
                    let mut left = BULK;
                    while left > 0 {
                        let n = left.min(chunk);
                        if s.write_all(&buf[..n]).await.is_err() {
                            return;
                        }
                        left -= n;
                    }
                } else if mode[0] == b't' {
                    // The floor of keeping text: each chunk checked as UTF-8
                    // and inserted at the end of a rope, as a body write's
                    // text must be at least (the chunks are whole runes).
                    let mut text = ropey::Rope::new();
                    let mut got = 0;
                    while got < BULK {
                        match s.read_exact(&mut buf[..chunk.min(BULK - got)]).await {
                            Ok(0) | Err(_) => return,
                            Ok(n) => {
                                let Ok(t) = std::str::from_utf8(&buf[..n]) else { return };
                                text.insert(text.len_chars(), t);
                                got += n;
                            }
                        }
                    }
                    let _ = s.write_all(b"k").await;
                    drop(text);
                } else {
                    let mut got = 0;
                    while got < BULK {
                        match s.read(&mut buf).await {
                            Ok(0) | Err(_) => return,
                            Ok(n) => got += n,
                        }
                    }
                    let _ = s.write_all(b"k").await;
                }
            });
        }
    });
}

async fn echo_rate(path: &Path, clients: usize, size: usize) -> f64 {
    let mut conns = Vec::new();
    for _ in 0..clients {
        conns.push(std::sync::Arc::new(tokio::sync::Mutex::new(UnixStream::connect(path).await.expect("echo"))));
    }
    rate(clients, move |i| {
        let c = conns[i].clone();
        async move {
            let mut s = c.lock().await;
            let msg = vec![7u8; size];
            s.write_all(&msg).await.expect("echo write");
            let mut back = vec![0u8; size];
            s.read_exact(&mut back).await.expect("echo read");
        }
    })
    .await
}

/// The reference figures: bytes written to a plain server that drops
/// them, bytes it sends back, and bytes written to one that keeps them in a
/// rope (MB/s each).
async fn bulk_reference(path: &Path, chunk: usize) -> (f64, f64, f64) {
    let data: Vec<u8> = b"the quick brown fox jumps over the lazy dog, again and again and again\n"
        .iter()
        .copied()
        .cycle()
        .take(chunk)
        .collect();
    let write_to = |mode: &'static [u8]| {
        let data = data.clone();
        async move {
            let mut s = UnixStream::connect(path).await.expect("bulk");
            let t = Instant::now();
            s.write_all(mode).await.expect("bulk mode");
            let mut left = BULK;
            while left > 0 {
                let n = left.min(chunk);
                s.write_all(&data[..n]).await.expect("bulk write");
                left -= n;
            }
            let mut k = [0u8; 1];
            s.read_exact(&mut k).await.expect("bulk ack");
            mbps(BULK, t.elapsed())
        }
    };
    let write = write_to(b"w").await;
    let kept = write_to(b"t").await;
    let mut s = UnixStream::connect(path).await.expect("bulk");
    let t = Instant::now();
    s.write_all(b"r").await.expect("bulk mode");
    let mut buf = vec![0u8; chunk];
    let mut got = 0;
    while got < BULK {
        got += s.read(&mut buf).await.expect("bulk read");
    }
    (write, mbps(BULK, t.elapsed()), kept)
}

fn mbps(bytes: usize, took: Duration) -> f64 {
    bytes as f64 / 1e6 / took.as_secs_f64()
}

async fn clients(addr: &str, n: usize, msize: u32) -> Vec<(Client, u32)> {
    let mut out = Vec::new();
    for _ in 0..n {
        let c = dial(addr, msize).await.expect("dial apexd");
        let root = c.attach("bench", "").await.expect("attach");
        out.push((c, root));
    }
    out
}

async fn stat_rate(addr: &str, n: usize) -> f64 {
    let cs = clients(addr, n, 1 << 20).await;
    let mut fids = Vec::new();
    for (c, root) in &cs {
        fids.push((c.clone(), c.walk(*root, &["main", "label"]).await.expect("walk").0));
    }
    rate(n, move |i| {
        let (c, fid) = fids[i].clone();
        async move {
            c.stat(fid).await.expect("stat");
        }
    })
    .await
}

async fn read_rate(addr: &str, n: usize) -> f64 {
    let cs = clients(addr, n, 1 << 20).await;
    let mut files = Vec::new();
    for (c, root) in &cs {
        files.push((c.clone(), c.open_path(*root, "main/id", OREAD).await.expect("open id")));
    }
    rate(n, move |i| {
        let (c, f) = files[i].clone();
        async move {
            // A small read at an offset past 0 reads the open version.
            c.read(f.fid, 8, 16).await.expect("read");
        }
    })
    .await
}

/// Tstat round trips per second from a bare client: one blocking socket
/// that writes a frame and reads the reply, so the figure is the daemon's
/// (the async client adds its own task hand-offs).
fn raw_stat_rate(socket: &Path) -> f64 {
    use apex_ninep::fcall::{Fcall, Msg, NOFID, NOTAG};
    use apex_ninep::{check, parse, to_bytes};
    use std::io::{Read, Write};
    let mut s = std::os::unix::net::UnixStream::connect(socket).expect("connect");
    let mut buf = Vec::new();
    let mut rpc = |s: &mut std::os::unix::net::UnixStream, msg: &Msg| -> Msg {
        s.write_all(&to_bytes(msg)).expect("write");
        loop {
            if let Some(n) = check(&buf, 1 << 20).expect("frame") {
                let m = parse(&buf[..n]).expect("reply");
                buf.drain(..n);
                return m;
            }
            let mut chunk = [0u8; 4096];
            let k = s.read(&mut chunk).expect("read");
            assert!(k > 0, "hang-up");
            buf.extend_from_slice(&chunk[..k]);
        }
    };
    rpc(&mut s, &Msg { tag: NOTAG, body: Fcall::Tversion { msize: 1 << 20, version: "9P2000".into() } });
    rpc(&mut s, &Msg { tag: 1, body: Fcall::Tattach { fid: 0, afid: NOFID, uname: "bench".into(), aname: "".into() } });
    let stat = Msg { tag: 1, body: Fcall::Tstat { fid: 0 } };
    let start = Instant::now();
    let mut n = 0u64;
    while start.elapsed() < ROUND {
        rpc(&mut s, &stat);
        n += 1;
    }
    n as f64 / start.elapsed().as_secs_f64()
}

/// Writes a `BULK` body at `msize`, then reads it back; MB/s each way,
/// and the body's path.
async fn bulk_9p(addr: &str, msize: u32) -> (f64, f64, String) {
    let cs = clients(addr, 1, msize).await;
    let (c, root) = &cs[0];
    let id =
        String::from_utf8(c.read_all(&c.open_path(*root, "main/buffers/new", OREAD).await.unwrap()).await.unwrap())
            .unwrap()
            .trim()
            .to_string();
    let body = format!("main/buffers/{id}/body");
    // Numbered lines: a piece read back at the wrong place shows.
    let mut text = Vec::with_capacity(BULK + 80);
    for n in 0.. {
        if text.len() >= BULK {
            break;
        }
        use std::io::Write;
        writeln!(text, "{n:09} the quick brown fox jumps over the lazy dog, again and again").unwrap();
    }
    text.truncate(BULK);
    let f = c.open_path(*root, &body, OWRITE).await.unwrap();
    let t = Instant::now();
    c.write_all(&f, 0, &text).await.expect("bulk write");
    let write = mbps(BULK, t.elapsed());
    c.clunk(f.fid).await.unwrap();
    // Read as the reference reads: chunk by chunk, nothing gathered. Each
    // chunk is checked against what was written at its ends, its middle,
    // and where the client's first read of it ends (a whole compare would
    // cost a fifth of the time measured, which the reference does not
    // spend; the tests check bodies byte for byte).
    let f = c.open_path(*root, &body, OREAD).await.unwrap();
    let t = Instant::now();
    let mut got = 0;
    loop {
        let chunk = c.read(f.fid, got as u64, f.iounit).await.expect("bulk read");
        if chunk.is_empty() {
            break;
        }
        let n = chunk.len();
        assert!(got + n <= text.len(), "the body reads back longer than written");
        for at in [0, (64 << 10) - 11 - 32, n / 2, n.saturating_sub(64)] {
            let at = at.min(n.saturating_sub(64));
            let end = (at + 64).min(n);
            assert!(chunk[at..end] == text[got + at..got + end], "the body reads back as written at {}", got + at);
        }
        got += n;
    }
    let read = mbps(got, t.elapsed());
    assert_eq!(got, BULK, "the body reads back whole");
    c.clunk(f.fid).await.unwrap();
    (write, read, body)
}

/// Tstat round-trip times (µs, sorted) on another session's file for
/// `WINDOW`, while `busy` clients read `main`'s snapshot and `body` (a
/// 100 MB buffer) over and over, or with none.
async fn stat_latencies(addr: &str, body: &str, busy: usize) -> Vec<f64> {
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let mut readers = Vec::new();
    for (c, root) in clients(addr, busy, 1 << 20).await {
        let (stop, body) = (stop.clone(), body.to_string());
        readers.push(tokio::spawn(async move {
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                for path in ["main/snapshot", body.as_str()] {
                    let f = c.open_path(root, path, OREAD).await.expect("open");
                    let _ = c.read_all(&f).await.expect("read");
                    c.clunk(f.fid).await.expect("clunk");
                }
            }
        }));
    }
    // The other client on a thread and runtime of its own, as another
    // process would be: what it waits for is the daemon, not the busy
    // readers' turns on this process's workers.
    let addr = addr.to_string();
    let mut times = tokio::task::spawn_blocking(move || {
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("tokio runtime");
        rt.block_on(async {
            let (c, root) = clients(&addr, 1, 1 << 20).await.remove(0);
            let fid = c.walk(root, &["other", "label"]).await.expect("walk").0;
            let mut times = Vec::new();
            let start = Instant::now();
            while start.elapsed() < WINDOW {
                let t = Instant::now();
                c.stat(fid).await.expect("stat");
                times.push(t.elapsed().as_secs_f64() * 1e6);
            }
            times
        })
    })
    .await
    .expect("the other client");
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    for r in readers {
        let _ = r.await;
    }
    times.sort_by(f64::total_cmp);
    times
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    sorted[((sorted.len() - 1) as f64 * p) as usize]
}

/// Another session's Tstat while `main`'s 100 MB buffer is read whole
/// (snapshot and body) by a client, beside an idle daemon's.
async fn contention(addr: &str, body: &str) {
    let cs = clients(addr, 1, 1 << 20).await;
    let (c, root) = &cs[0];
    let ctl = c.open_path(*root, "ctl", OWRITE).await.expect("open ctl");
    c.write(ctl.fid, 0, b"new other\n").await.expect("new session");
    c.clunk(ctl.fid).await.unwrap();
    let idle = stat_latencies(addr, body, 0).await;
    let busy = stat_latencies(addr, body, 1).await;
    println!();
    println!("another session's Tstat while a client reads a 100 MB buffer's snapshot and body (µs)");
    println!("{:<28} {:>12} {:>12} {:>12} {:>12}", "", "p50", "p99", "max", "round trips");
    for (what, t) in [("idle daemon", &idle), ("while reading 100 MB", &busy)] {
        let (p50, p99, max) = (percentile(t, 0.5), percentile(t, 0.99), percentile(t, 1.0));
        println!("{what:<28} {p50:>12.0} {p99:>12.0} {max:>12.0} {:>12}", t.len());
    }
    println!(
        "{:<28} {:>11.2}x {:>11.2}x",
        "busy/idle",
        percentile(&busy, 0.5) / percentile(&idle, 0.5),
        percentile(&busy, 0.99) / percentile(&idle, 0.99)
    );
}

/// The reference servers run in a process of their own, as apexd does, so
/// both pay the same cross-process wake-ups: this binary again, told by
/// `APEX_BENCH_SERVE=DIR` to serve `DIR/echo` and `DIR/bulk*`.
async fn serve_references(dir: &Path) {
    echo_server(&dir.join("echo")).await;
    for msize in MSIZES {
        bulk_server(&dir.join(format!("bulk{msize}")), (msize - 24) as usize).await;
    }
    std::fs::write(dir.join("ready"), b"").expect("ready");
    std::future::pending::<()>().await;
}

const MSIZES: [u32; 2] = [64 << 10, 1 << 20];

struct References(Child);

impl Drop for References {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn main() {
    let rt = || tokio::runtime::Builder::new_multi_thread().enable_all().build().expect("tokio runtime");
    if let Some(dir) = std::env::var_os("APEX_BENCH_SERVE") {
        // The reference servers run as they always did: glibc's defaults.
        return rt().block_on(serve_references(Path::new(&dir)));
    }
    // apex's 9P client here, under the daemon's malloc policy (as the
    // `apex` command and apex-mnt run).
    apex_sys::malloc::keep_freed_memory();
    rt().block_on(measure());
}

async fn measure() {
    let base = std::env::temp_dir().join(format!("apex-bench-9p-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&base);
    std::fs::create_dir_all(&base).unwrap();
    let refs = References(
        Command::new(std::env::current_exe().expect("own path"))
            .env("APEX_BENCH_SERVE", &base)
            .stdout(Stdio::null())
            .spawn()
            .expect("start the reference servers"),
    );
    let deadline = Instant::now() + Duration::from_secs(30);
    while !base.join("ready").exists() {
        assert!(Instant::now() < deadline, "the reference servers did not start");
        std::thread::sleep(Duration::from_millis(20));
    }
    let echo = base.join("echo");
    // `APEX_BENCH_ONLY=rt` or `=bulk` measures that part alone (to profile it).
    let only = std::env::var("APEX_BENCH_ONLY").ok();
    if only.as_deref() != Some("bulk") {
        round_trips(&base, &echo, refs.0.id()).await;
    }
    if only.as_deref() != Some("rt") {
        bulk(&base).await;
    }
    drop(refs);
    let _ = std::fs::remove_dir_all(&base);
}

/// Small-message rates, apexd beside the echo reference (served by
/// process `echo_pid`).
async fn round_trips(base: &Path, echo: &Path, echo_pid: u32) {
    println!("9P round trips (apexd vs a plain Unix-socket echo of the same size;");
    println!("{ROUNDS} alternating rounds of each, medians: the machine's noise hits both)");
    println!("{:<28} {:>14} {:>14} {:>11}", "", "apexd rt/s", "echo rt/s", "apexd/echo");
    let d = start_apexd(&base.join("ns"));
    let addr = format!("unix!{}", d.dir.join("apex").display());
    let socket = d.dir.join("apex");
    let mut rounds = Rounds::default();
    for _ in 0..ROUNDS {
        let socket = socket.clone();
        let raw = tokio::task::spawn_blocking(move || raw_stat_rate(&socket)).await.expect("raw client");
        rounds.push(raw, echo_rate(echo, 1, 40).await);
    }
    rounds.print("Tstat, bare blocking client");
    // What each side spends per round trip with 8 clients, in the rows
    // below: where the time goes, not only how much there is.
    let mut costs: Vec<(String, Cost, Cost)> = Vec::new();
    for clients in [1, 8] {
        // Tstat is 11 bytes out, ~70 back; a small Tread 23 out, ~27 back.
        let mut stat = Rounds::default();
        let mut read = Rounds::default();
        let (mut ours, mut theirs) = ([Cost::default(), Cost::default()], [Cost::default(), Cost::default()]);
        for _ in 0..ROUNDS {
            stat.push(
                ours[0].of(d.pid(), stat_rate(&addr, clients)).await,
                theirs[0].of(echo_pid, echo_rate(echo, clients, 40)).await,
            );
            read.push(
                ours[1].of(d.pid(), read_rate(&addr, clients)).await,
                theirs[1].of(echo_pid, echo_rate(echo, clients, 25)).await,
            );
        }
        stat.print(&format!("Tstat, {clients} client(s)"));
        read.print(&format!("Tread 16 B, {clients} client(s)"));
        if clients == 8 {
            let [os, or] = ours;
            let [ts, tr] = theirs;
            costs.push(("Tstat, 8 clients".into(), os, ts));
            costs.push(("Tread 16 B, 8 clients".into(), or, tr));
        }
    }
    // The same with clients as thin as the echo's (a socket each, a frame
    // written, the reply read): what is left is the servers' difference.
    for (what, size, file) in [("Tstat", 40, None), ("Tread 16 B", 25, Some("id"))] {
        let mut r = Rounds::default();
        let (mut ours, mut theirs) = (Cost::default(), Cost::default());
        for _ in 0..ROUNDS {
            r.push(
                ours.of(d.pid(), bare_rate(&socket, 8, file)).await,
                theirs.of(echo_pid, echo_rate(echo, 8, size)).await,
            );
        }
        r.print(&format!("{what}, 8 bare clients"));
        costs.push((format!("{what}, 8 bare clients"), ours, theirs));
    }
    drop(d);
    println!();
    println!("CPU per round trip, user + system (µs), over all rounds: the server, and this process (its clients)");
    println!("{:<28} {:>16} {:>16} {:>16} {:>16}", "", "apexd", "apex clients", "echo", "echo clients");
    for (what, ours, theirs) in costs {
        let [a, b] = ours.per_trip();
        let [c, e] = theirs.per_trip();
        println!("{what:<28} {a:>16} {b:>16} {c:>16} {e:>16}");
    }
}

/// The CPU a server process and this one (the clients) spent over some
/// rounds, and the round trips made in them.
#[derive(Default)]
struct Cost {
    /// User and system seconds, the server's then this process's.
    cpu: [[f64; 2]; 2],
    trips: f64,
}

impl Cost {
    /// Runs `rounds` (a rate in round trips a second), counting the CPU
    /// that `server` and this process spend meanwhile.
    async fn of(&mut self, server: u32, rounds: impl std::future::Future<Output = f64>) -> f64 {
        let before = [cpu_of(server), cpu_of(std::process::id())];
        let start = Instant::now();
        let rate = rounds.await;
        self.trips += rate * start.elapsed().as_secs_f64();
        let after = [cpu_of(server), cpu_of(std::process::id())];
        for (side, (a, b)) in after.iter().zip(before).enumerate() {
            for mode in 0..2 {
                self.cpu[side][mode] += a[mode] - b[mode];
            }
        }
        rate
    }

    /// "USER + SYSTEM" per round trip in µs, the server's and the clients'.
    fn per_trip(&self) -> [String; 2] {
        self.cpu.map(|[user, system]| format!("{:.2} + {:.2}", user * 1e6 / self.trips, system * 1e6 / self.trips))
    }
}

/// The user and system CPU seconds process `pid` has used, from Linux's
/// `/proc/PID/stat` (zero where it cannot be read).
fn cpu_of(pid: u32) -> [f64; 2] {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    // The fields after the command, which is in parentheses and may hold
    // spaces: utime and stime are the 12th and 13th of them, in ticks.
    let fields: Vec<&str> = stat.rsplit_once(')').map_or("", |(_, rest)| rest).split_whitespace().collect();
    // SAFETY: sysconf reads a constant of the system; it has no
    // preconditions.
    let tick = unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1) as f64;
    let ticks = |i: usize| fields.get(i).and_then(|f| f.parse::<f64>().ok()).unwrap_or(0.0);
    [ticks(11) / tick, ticks(12) / tick]
}

/// Round trips per second of `clients` bare async clients, each on its own
/// socket: a Tstat of `main/label`, or a 16-byte Tread of `main/FILE`.
async fn bare_rate(socket: &Path, clients: usize, file: Option<&'static str>) -> f64 {
    use apex_ninep::fcall::{Fcall, Msg, NOFID, NOTAG};
    let mut conns = Vec::new();
    for _ in 0..clients {
        let mut s = UnixStream::connect(socket).await.expect("connect");
        bare_rpc(&mut s, &Msg { tag: NOTAG, body: Fcall::Tversion { msize: 1 << 20, version: "9P2000".into() } }).await;
        let attach = Fcall::Tattach { fid: 0, afid: NOFID, uname: "bench".into(), aname: "".into() };
        bare_rpc(&mut s, &Msg { tag: 1, body: attach }).await;
        let wnames = vec!["main".to_string(), file.unwrap_or("label").to_string()];
        bare_rpc(&mut s, &Msg { tag: 1, body: Fcall::Twalk { fid: 0, newfid: 1, wnames } }).await;
        let request = match file {
            Some(_) => {
                bare_rpc(&mut s, &Msg { tag: 1, body: Fcall::Topen { fid: 1, mode: OREAD } }).await;
                Fcall::Tread { fid: 1, offset: 8, count: 16 }
            }
            None => Fcall::Tstat { fid: 1 },
        };
        conns.push(std::sync::Arc::new(tokio::sync::Mutex::new((
            s,
            apex_ninep::to_bytes(&Msg { tag: 1, body: request }),
        ))));
    }
    rate(clients, move |i| {
        let c = conns[i].clone();
        async move {
            let mut c = c.lock().await;
            let (s, frame) = &mut *c;
            s.write_all(frame).await.expect("bare write");
            bare_reply(s).await;
        }
    })
    .await
}

/// Sends `msg` and reads its reply, which must not be an Rerror.
async fn bare_rpc(s: &mut UnixStream, msg: &apex_ninep::fcall::Msg) {
    s.write_all(&apex_ninep::to_bytes(msg)).await.expect("bare write");
    let reply = bare_reply(s).await;
    let m = apex_ninep::parse(&reply).expect("a 9P reply");
    assert!(!matches!(m.body, apex_ninep::fcall::Fcall::Rerror { .. }), "bare client refused: {m:?}");
}

/// Reads one reply frame whole.
async fn bare_reply(s: &mut UnixStream) -> Vec<u8> {
    let mut size = [0u8; 4];
    s.read_exact(&mut size).await.expect("bare read");
    let mut frame = vec![0u8; u32::from_le_bytes(size) as usize];
    frame[..4].copy_from_slice(&size);
    s.read_exact(&mut frame[4..]).await.expect("bare read");
    frame
}

/// Rounds of a measurement beside its reference, taken in turn.
#[derive(Default)]
struct Rounds {
    ours: Vec<f64>,
    reference: Vec<f64>,
    ratios: Vec<f64>,
}

impl Rounds {
    fn push(&mut self, ours: f64, reference: f64) {
        self.ours.push(ours);
        self.reference.push(reference);
        self.ratios.push(ours / reference);
    }

    /// The medians of ours, the reference and their ratio, and the
    /// ratio's lowest and highest round.
    fn summary(&mut self) -> (f64, f64, f64, f64, f64) {
        let median = |v: &mut Vec<f64>| {
            v.sort_by(f64::total_cmp);
            v[v.len() / 2]
        };
        let (lo, hi) =
            (self.ratios.iter().copied().fold(f64::MAX, f64::min), self.ratios.iter().copied().fold(0.0, f64::max));
        (median(&mut self.ours), median(&mut self.reference), median(&mut self.ratios), lo, hi)
    }

    fn print(&mut self, what: &str) {
        let (ours, reference, ratio, lo, hi) = self.summary();
        println!("{what:<28} {ours:>14.0} {reference:>14.0} {ratio:>10.2}x  (rounds {lo:.2}-{hi:.2}x)");
    }
}

/// 100 MB written and read through a body, beside the bulk reference,
/// in alternating rounds: one transfer is at the mercy of the machine's
/// noise (a reference write ranged over 0.9-5.6 GB/s from run to run).
async fn bulk(base: &Path) {
    println!();
    println!("bulk body transfer, 100 MB (apexd vs plain socket, same chunk size; \"ref+rope\" keeps");
    println!("the bytes as a body must: checked as UTF-8 and inserted into a rope, nothing else);");
    println!("medians of {BULK_ROUNDS} alternating rounds, each against a fresh daemon, and the ratios' range");
    println!("(the reference process lives through the run: ref+rope may reuse memory a round before freed)");
    println!(
        "{:<16} {:>11} {:>11} {:>11} {:>7} {:>7} {:>11} {:>11} {:>7}",
        "", "9P write", "ref write", "ref+rope", "/ref", "/rope", "9P read", "ref read", "/ref"
    );
    let mut busy = None;
    let mut ranges = Vec::new();
    for msize in MSIZES {
        let (mut write, mut kept, mut read) = (Rounds::default(), Rounds::default(), Rounds::default());
        for round in 0..BULK_ROUNDS {
            // A fresh daemon each round, so each starts from an empty
            // session, with no memory freed by the one before to reuse (the
            // reference servers live through the run: ref+rope may reuse
            // what its last round freed), and none beside it.
            drop(busy.take());
            let d = start_apexd(&base.join(format!("ns{msize}-{round}")));
            let addr = format!("unix!{}", d.dir.join("apex").display());
            let (w, r, body) = bulk_9p(&addr, msize).await;
            let sock = base.join(format!("bulk{msize}"));
            let (rw, rr, rk) = bulk_reference(&sock, (msize - 24) as usize).await;
            write.push(w, rw);
            kept.push(w, rk);
            read.push(r, rr);
            // The last daemon, with its 100 MB body, serves the contention
            // measure below.
            busy = Some((d, addr, body));
        }
        let (w, rw, w_ref, w_lo, w_hi) = write.summary();
        let (_, rk, w_rope, k_lo, k_hi) = kept.summary();
        let (r, rr, r_ref, r_lo, r_hi) = read.summary();
        println!(
            "{:<16} {w:>6.0} MB/s {rw:>6.0} MB/s {rk:>6.0} MB/s {w_ref:>6.2}x {w_rope:>6.2}x {r:>6.0} MB/s {rr:>6.0} MB/s {r_ref:>6.2}x",
            format!("msize {} KiB", msize >> 10),
        );
        ranges.push(format!(
            "  msize {} KiB rounds: write/ref {w_lo:.2}-{w_hi:.2}x, write/rope {k_lo:.2}-{k_hi:.2}x, read/ref {r_lo:.2}-{r_hi:.2}x",
            msize >> 10
        ));
    }
    for line in ranges {
        println!("{line}");
    }
    if let Some((d, addr, body)) = busy {
        contention(&addr, &body).await;
        drop(d);
    }
}
