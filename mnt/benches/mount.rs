//! `cargo bench -p apex-mnt`: what a mount costs, in one run against one
//! apexd. Prints `cat` of a 100 MB body through the mount and through the
//! `apex` command (the reference: the same 9P reads without FUSE, four in
//! flight), beside one Tread at a time in process (a body is read direct,
//! and without the mount's read-ahead each read(2) was one Tread in turn)
//! and beside `cat` of as many bytes from a FUSE file system that answers
//! each read at once from memory (the floor of any mount: FUSE hands a
//! direct-io file's reads over one at a time, so no mount reads faster
//! than this), and
//! `ls -l` of a directory of 3,000 entries, cold and warm, beside the
//! same over 9P alone and, the floor of any mount, beside `ls -l` of as
//! many entries of a local directory. Asserts no time.

#[path = "../tests/setup.rs"]
mod setup;

use setup::{fuse_available, sibling, Setup};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const BULK: usize = 100 * 1000 * 1000;

/// How many times each `cat` runs, the best taken: one takes 30-70 ms,
/// and on two shared cores any one of them can lose its core to another.
const TRIES: usize = 9;

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
    // Taken in turn, so that a stretch of a busy machine falls on both.
    let (mut mount, mut command) = (Duration::MAX, Duration::MAX);
    for _ in 0..TRIES {
        mount = mount.min(time("cat", &[through_mount.to_str().unwrap()], &[]));
        command = command.min(time(apex, &["-a", &addr, "read", &path], &[]));
    }
    println!("cat of a 100 MB body (best of {TRIES})");
    println!("  through the mount     {:>8.0} MB/s", mbps(mount));
    println!("  through apex read     {:>8.0} MB/s", mbps(command));
    println!("  mount / apex          {:>8.2}x the time", mount.as_secs_f64() / command.as_secs_f64());
    // A floor of a mount's: a body's length is 0 (acme's way, so that
    // tools read to its end), so it is read direct, each read(2) one
    // Tread; here the same Treads in turn, in process, no FUSE.
    let mut in_turn = Duration::MAX;
    for _ in 0..TRIES {
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
        "  one Tread at a time, in process  {:>8.0} MB/s (the mount at {:.2}x its time)",
        mbps(in_turn),
        mount.as_secs_f64() / in_turn.as_secs_f64()
    );
    let floor = memory::cat_time(&s.dir.join("floor"));
    println!(
        "  a FUSE file answered from memory (the floor)  {:>8.0} MB/s (the mount at {:.2}x its time, apex read at {:.2}x)",
        mbps(floor),
        mount.as_secs_f64() / floor.as_secs_f64(),
        command.as_secs_f64() / floor.as_secs_f64()
    );
    // Without read-ahead a read(2) through the mount was a FUSE request
    // and then a Tread, in turn: the two floors one after the other. The
    // mount under this reads ahead.
    let in_series = in_turn + floor;
    println!(
        "  the two one after the other  {:>8.0} MB/s (the mount at {:.2}x its time)",
        mbps(in_series),
        mount.as_secs_f64() / in_series.as_secs_f64()
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

/// The floor of a mount's reads: a FUSE file system of one file, `body`,
/// direct-io and of length 0 as apexd's bodies are, whose reads are
/// answered at once from memory, with no copy and no server behind.
mod memory {
    use super::{best, time, BULK, TRIES};
    use bytes::Bytes;
    use fuse3::raw::prelude::*;
    use fuse3::{Inode, MountOptions, Result, Timestamp};
    use std::ffi::OsStr;
    use std::num::NonZeroU32;
    use std::path::Path;
    use std::time::Duration;

    struct Memory {
        text: Bytes,
    }

    fn attr(ino: Inode) -> FileAttr {
        let (dir, t) = (ino == 1, Timestamp::new(0, 0));
        FileAttr {
            ino,
            size: 0,
            blocks: 0,
            atime: t,
            mtime: t,
            ctime: t,
            kind: if dir { FileType::Directory } else { FileType::RegularFile },
            perm: if dir { 0o755 } else { 0o644 },
            nlink: 1,
            uid: 0,
            gid: 0,
            rdev: 0,
            // As the mount's: one read(2) a MiB.
            blksize: 1 << 20,
        }
    }

    impl Filesystem for Memory {
        async fn init(&self, _req: Request) -> Result<ReplyInit> {
            Ok(ReplyInit::new(NonZeroU32::new(1 << 20).expect("not 0")))
        }
        async fn destroy(&self, _req: Request) {}
        async fn lookup(&self, _req: Request, _parent: Inode, name: &OsStr) -> Result<ReplyEntry> {
            match name == "body" {
                true => Ok(ReplyEntry { ttl: Duration::from_secs(1), attr: attr(2), generation: 0 }),
                false => Err(libc::ENOENT.into()),
            }
        }
        async fn getattr(&self, _req: Request, inode: Inode, _fh: Option<u64>, _flags: u32) -> Result<ReplyAttr> {
            Ok(ReplyAttr { ttl: Duration::from_secs(1), attr: attr(inode) })
        }
        async fn open(&self, _req: Request, _inode: Inode, _flags: u32) -> Result<ReplyOpen> {
            // FOPEN_DIRECT_IO, as the mount opens a body.
            Ok(ReplyOpen { fh: 1, flags: 1 })
        }
        async fn read(&self, _req: Request, _inode: Inode, _fh: u64, offset: u64, size: u32) -> Result<ReplyData> {
            let start = (offset as usize).min(self.text.len());
            let end = (start + size as usize).min(self.text.len());
            Ok(ReplyData { data: self.text.slice(start..end) })
        }
    }

    /// The best of [`TRIES`] `cat`s of the file's [`BULK`] bytes, mounted on
    /// `at` (made) by a runtime of its own while they run.
    pub fn cat_time(at: &Path) -> Duration {
        std::fs::create_dir_all(at).expect("mount point");
        let (mounted, is_mounted) = std::sync::mpsc::channel();
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let point = at.to_path_buf();
        let server = std::thread::spawn(move || {
            let rt = tokio::runtime::Runtime::new().expect("runtime");
            rt.block_on(async {
                let text =
                    Bytes::from(b"the quick brown fox jumps over the lazy dog\n".repeat(BULK / 44 + 1)).slice(..BULK);
                let mut handle =
                    Session::new(MountOptions::default()).mount(Memory { text }, &point).await.expect("mount");
                mounted.send(()).expect("bench waits");
                tokio::select! {
                    _ = &mut handle => {}
                    _ = stopped => { let _ = handle.unmount().await; }
                }
            })
        });
        is_mounted.recv().expect("mounted");
        let file = at.join("body");
        let took = best(TRIES, || time("cat", &[file.to_str().expect("UTF-8 path")], &[]));
        let _ = stop.send(());
        server.join().expect("server thread");
        took
    }
}
