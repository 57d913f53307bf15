//! `cargo bench -p apex-mnt`: what a mount costs, in one run against one
//! apexd. Prints `cat` of a 100 MB body through the mount and through the
//! `apex` command (the reference: the same 9P reads without FUSE, four in
//! flight) and beside one Tread at a time in process (the floor: a body
//! is read direct, each read(2) one Tread in turn), and
//! `ls -l` of a directory of 3,000 entries, cold and warm, beside the
//! same over 9P alone and, the floor of any mount, beside `ls -l` of as
//! many entries of a local directory. Asserts no time.

#[path = "../tests/setup.rs"]
mod setup;

use setup::{fuse_available, sibling, Setup};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const BULK: usize = 100 * 1000 * 1000;

/// Runs `program args` with output discarded; how long it took.
fn time(program: &str, args: &[&str], env: &[(&str, &std::path::Path)]) -> Duration {
    let mut c = Command::new(program);
    c.args(args).stdout(Stdio::null());
    for (k, v) in env {
        c.env(k, v);
    }
    let t = Instant::now();
    let st = c.status().expect("run");
    assert!(st.success(), "{program} {args:?} failed");
    t.elapsed()
}

fn mbps(d: Duration) -> f64 {
    BULK as f64 / 1e6 / d.as_secs_f64()
}

fn best(n: usize, mut f: impl FnMut() -> Duration) -> Duration {
    (0..n).map(|_| f()).min().expect("n > 0")
}

#[tokio::main(flavor = "current_thread")]
async fn main() {
    if !fuse_available() {
        return;
    }
    let s = Setup::start("bench");
    let addr = format!("unix!{}", s.dir.join("ns/apex").display());
    // A 100 MB body, written over 9P.
    let c = apex_ninep::dial(&addr, 1 << 20).await.expect("dial");
    let root = c.attach("bench", "").await.expect("attach");
    let new = c.open_path(root, "main/buffers/new", apex_ninep::fcall::OREAD).await.unwrap();
    let b = String::from_utf8(c.read_all(&new).await.unwrap()).unwrap().trim().to_string();
    let line = b"the quick brown fox jumps over the lazy dog, again and again and again\n";
    let text: Vec<u8> = line.iter().copied().cycle().take(BULK).collect();
    let body = c.open_path(root, &format!("main/buffers/{b}/body"), apex_ninep::fcall::OWRITE).await.unwrap();
    c.write_all(&body, 0, &text).await.unwrap();
    drop(text);

    let path = format!("main/buffers/{b}/body");
    let through_mount = s.m().join(&path);
    let apex = sibling("apex");
    let apex = apex.to_str().unwrap();
    let mount = best(3, || time("cat", &[through_mount.to_str().unwrap()], &[]));
    let command = best(3, || time(apex, &["-a", &addr, "read", &path], &[]));
    println!("cat of a 100 MB body (best of 3)");
    println!("  through the mount     {:>8.0} MB/s", mbps(mount));
    println!("  through apex read     {:>8.0} MB/s", mbps(command));
    println!("  mount / apex          {:>8.2}x the time", mount.as_secs_f64() / command.as_secs_f64());
    // The floor of a mount's: a body's length is 0 (acme's way, so that
    // tools read to its end), so it is read direct, each read(2) one
    // Tread in turn; here the same Treads in turn, in process, no FUSE.
    let mut in_turn = Duration::MAX;
    for _ in 0..3 {
        let t = Instant::now();
        let f = c.open_path(root, &path, apex_ninep::fcall::OREAD).await.unwrap();
        let mut at = 0u64;
        loop {
            let n = c.read(f.fid, at, f.iounit).await.unwrap().len();
            if n == 0 {
                break;
            }
            at += n as u64;
        }
        assert_eq!(at as usize, BULK);
        c.clunk(f.fid).await.unwrap();
        in_turn = in_turn.min(t.elapsed());
    }
    println!(
        "  one Tread at a time, in process (the floor)  {:>8.0} MB/s (the mount at {:.2}x its time)",
        mbps(in_turn),
        mount.as_secs_f64() / in_turn.as_secs_f64()
    );

    // 1000 windows make buffers/ 2000+ entries and shards/ 3000+.
    for _ in 0..1000 {
        let f = c.open_path(root, "main/buffers/new", apex_ninep::fcall::OREAD).await.unwrap();
        c.clunk(f.fid).await.unwrap();
    }
    let dir = s.m().join("main/shards");
    let dir = dir.to_str().unwrap();
    let cold = time("ls", &["-l", dir], &[]);
    let warm = time("ls", &["-l", dir], &[]);
    let entries = String::from_utf8(Command::new("ls").arg(dir).output().unwrap().stdout).unwrap().lines().count();
    println!("ls -l of a {entries}-entry directory");
    println!("  cold                  {:>8.1} ms", cold.as_secs_f64() * 1e3);
    println!("  warm                  {:>8.1} ms", warm.as_secs_f64() * 1e3);
    let via_9p = best(3, || time(apex, &["-a", &addr, "ls", "-l", "main/shards"], &[]));
    println!("  apex ls -l (9P only)  {:>8.1} ms", via_9p.as_secs_f64() * 1e3);
    // The floor of any mount's: ls's own system calls (a statx and two
    // getxattrs an entry) on as many entries of a local directory, its
    // inodes in the kernel's cache.
    let local = s.dir.join("local-listing");
    std::fs::create_dir_all(&local).unwrap();
    for i in 0..entries {
        std::fs::create_dir(local.join(format!("entry.{i}"))).unwrap();
    }
    let local = local.to_str().unwrap();
    let on_disk = best(3, || time("ls", &["-l", local], &[]));
    println!(
        "  ls -l of as many entries of a local directory (the floor)  {:>8.1} ms (the mount's warm at {:.2}x of it)",
        on_disk.as_secs_f64() * 1e3,
        warm.as_secs_f64() / on_disk.as_secs_f64()
    );
}
