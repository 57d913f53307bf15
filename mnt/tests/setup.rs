//! The harness of the mount tests and benchmark: a real `apexd` on a
//! temporary namespace, mounted by a real `apex-mnt`; on drop, the mount is
//! unmounted and both processes are gone, pass or fail.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// A binary of the workspace beside this test's (`apexd`, `apex`),
/// built first if this run has not built it.
pub fn sibling(name: &str) -> PathBuf {
    apex_tests::sibling(Path::new(env!("CARGO_BIN_EXE_apex-mnt")), name)
}

/// Whether FUSE mounts can be made here; outside CI a test without them
/// says so and passes, in CI it fails.
pub fn fuse_available() -> bool {
    // SAFETY: geteuid cannot fail.
    let root = unsafe { libc::geteuid() } == 0;
    let ok = Path::new("/dev/fuse").exists()
        && (root || Command::new("fusermount3").arg("-V").output().is_ok_and(|o| o.status.success()));
    if !ok {
        let reason = "no FUSE here (/dev/fuse, and root or fusermount3: scripts/test installs fuse3)";
        assert!(std::env::var_os("CI").is_none(), "CI must run every test, but: {reason}");
        // Straight to stderr, past the test harness's capture.
        let _ = std::io::Write::write_all(&mut std::io::stderr(), format!("SKIPPED: {reason}\n").as_bytes());
    }
    ok
}

/// A temporary directory with an apexd posted in it and a mount of it.
pub struct Setup {
    pub dir: PathBuf,
    apexd: Option<Child>,
    mnt: Option<Child>,
    /// The one-file server, when it is the one mounted.
    pub one: Option<std::sync::Arc<OneFile>>,
}

pub fn mounted(dir: &Path) -> bool {
    let d = dir.join("m");
    std::fs::read_to_string("/proc/self/mounts")
        .is_ok_and(|m| m.lines().any(|l| l.split(' ').nth(1) == Some(&*d.to_string_lossy())))
}

fn wait_for(what: &str, mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(20);
    while !done() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

impl Setup {
    pub fn start(name: &str) -> Setup {
        Setup::start_logging(name, Some("info"))
    }

    /// Starts with `RUST_LOG` set to `log`, or unset (the default level).
    pub fn start_logging(name: &str, log_level: Option<&str>) -> Setup {
        Setup::start_with(name, log_level, &[])
    }

    /// Starts with `args` before apex-mnt's address and mount point.
    pub fn start_with(name: &str, log_level: Option<&str>, args: &[&str]) -> Setup {
        let dir = std::env::temp_dir().join(format!("apex-mnt-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(dir.join("m")).unwrap();
        let apexd = Command::new(sibling("apexd"))
            .arg("--namespace")
            .arg(dir.join("ns"))
            .arg("--ephemeral")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start apexd");
        let mut s = Setup { dir, apexd: Some(apexd), mnt: None, one: None };
        wait_for("apexd's socket", || s.dir.join("ns/apex").exists());
        let socket = s.dir.join("ns/apex");
        s.mount(&socket, log_level, args);
        s
    }

    /// Mounts another machine's sessions: `apex-mnt ssh!...` through
    /// `sshd`, which imports them first (apex import) in the sshd's local
    /// namespace.
    pub fn start_remote(name: &str, sshd: &apex_tests::sshd::Sshd) -> Setup {
        let dir = std::env::temp_dir().join(format!("apex-mnt-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(dir.join("m")).unwrap();
        let mut s = Setup { dir, apexd: None, mnt: None, one: None };
        let log = std::fs::File::create(s.dir.join("mnt.log")).unwrap();
        let mut mnt = Command::new(env!("CARGO_BIN_EXE_apex-mnt"));
        mnt.arg(sshd.address()).arg(s.m()).stderr(log);
        mnt.env("NAMESPACE", sshd.local_ns()).env("APEX_SSH", sshd.ssh_command()).env("RUST_LOG", "info");
        s.mnt = Some(mnt.spawn().expect("start apex-mnt"));
        wait_for("the mount", || mounted(&s.dir));
        s
    }

    /// Mounts `content` as the one file `numbers` of a plain 9P server (see
    /// [`serve_one_file`]), with `args` before the address.
    pub fn start_on_one_file(name: &str, content: Vec<u8>, args: &[&str]) -> Setup {
        let dir = std::env::temp_dir().join(format!("apex-mnt-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(dir.join("m")).unwrap();
        let socket = dir.join("one-file");
        let one = serve_one_file(&socket, content);
        let mut s = Setup { dir, apexd: None, mnt: None, one: Some(one) };
        s.mount(&socket, Some("info"), args);
        s
    }

    fn mount(&mut self, socket: &Path, log_level: Option<&str>, args: &[&str]) {
        let log = std::fs::File::create(self.dir.join("mnt.log")).unwrap();
        let mut mnt = Command::new(env!("CARGO_BIN_EXE_apex-mnt"));
        mnt.args(args).arg(format!("unix!{}", socket.display())).arg(self.dir.join("m")).stderr(log);
        match log_level {
            Some(level) => mnt.env("RUST_LOG", level),
            None => mnt.env_remove("RUST_LOG"),
        };
        self.mnt = Some(mnt.spawn().expect("start apex-mnt"));
        wait_for("the mount", || mounted(&self.dir));
    }

    /// The mount point.
    pub fn m(&self) -> PathBuf {
        self.dir.join("m")
    }

    /// Runs `script` with `sh -c`, `$M` the mount point and `$T` a scratch
    /// directory; returns success, stdout and stderr.
    pub fn sh(&self, script: &str) -> (bool, String, String) {
        let out =
            Command::new("sh").arg("-c").arg(script).env("M", self.m()).env("T", &self.dir).output().expect("run sh");
        (out.status.success(), String::from_utf8_lossy(&out.stdout).into(), String::from_utf8_lossy(&out.stderr).into())
    }

    /// Like `sh`, but the script must succeed.
    pub fn ok(&self, script: &str) -> String {
        let (ok, out, err) = self.sh(script);
        assert!(ok, "{script}\nstdout: {out}\nstderr: {err}\nmount log: {}", self.log());
        out
    }

    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.join("mnt.log")).unwrap_or_default()
    }

    /// Stops the daemon (the mount should then go by itself).
    pub fn stop_apexd(&mut self) {
        if let Some(mut c) = self.apexd.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    /// Sends `signal` to apexd (SIGSTOP: a server that answers nothing).
    pub fn signal_apexd(&self, signal: i32) {
        let pid = self.apexd.as_ref().expect("apexd running").id() as i32;
        // SAFETY: kill(2) on our own child's pid.
        unsafe { libc::kill(pid, signal) };
    }

    /// Sends `signal` to apex-mnt.
    pub fn signal_mnt(&self, signal: i32) {
        let pid = self.mnt.as_ref().expect("mnt running").id() as i32;
        // SAFETY: kill(2) on our own child's pid.
        unsafe { libc::kill(pid, signal) };
    }

    /// Waits for apex-mnt to exit; its status.
    pub fn wait_mnt(&mut self) -> std::process::ExitStatus {
        let c = self.mnt.as_mut().expect("mnt running");
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            if let Some(st) = c.try_wait().unwrap() {
                self.mnt = None;
                return st;
            }
            assert!(Instant::now() < deadline, "apex-mnt did not exit; log:\n{}", self.log());
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for Setup {
    fn drop(&mut self) {
        if let Some(mut c) = self.mnt.take() {
            // SIGTERM first, so it unmounts itself.
            // SAFETY: kill(2) on our own child's pid.
            unsafe { libc::kill(c.id() as i32, libc::SIGTERM) };
            let deadline = Instant::now() + Duration::from_secs(5);
            while c.try_wait().ok().flatten().is_none() && Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(20));
            }
            let _ = c.kill();
            let _ = c.wait();
        }
        if mounted(&self.dir) {
            let m = std::ffi::CString::new(self.m().as_os_str().as_encoded_bytes()).unwrap();
            // SAFETY: umount2 reads a path we own.
            unsafe { libc::umount2(m.as_ptr(), libc::MNT_DETACH) };
        }
        self.stop_apexd();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// Serves, from a thread of its own for as long as the test process runs,
/// a 9P tree of one directory holding one file, `numbers`, whose stat
/// gives its real length, as a disk's files do (apexd's files all have
/// length 0): the path through the kernel's page cache.
pub fn serve_one_file(socket: &Path, content: Vec<u8>) -> std::sync::Arc<OneFile> {
    let listener = std::os::unix::net::UnixListener::bind(socket).expect("bind the one-file server");
    listener.set_nonblocking(true).unwrap();
    let file = OneFile {
        kept: std::sync::Mutex::new(Kept { name: "numbers".into(), data: content, mode: 0o644, mtime: 0 }),
        live: std::sync::Arc::default(),
        stall: std::sync::atomic::AtomicBool::new(false),
        synthetic: std::sync::atomic::AtomicBool::new(false),
        stream: std::sync::atomic::AtomicBool::new(false),
        reads: std::sync::Mutex::default(),
        released: tokio::sync::Notify::new(),
    };
    let file = std::sync::Arc::new(file);
    let served = file.clone();
    std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        rt.block_on(async move {
            let listener = tokio::net::UnixListener::from_std(listener).unwrap();
            while let Ok((stream, _)) = listener.accept().await {
                let file = file.clone();
                tokio::spawn(apex_ninep::srv::serve_unix(file, stream, apex_ninep::srv::Config::default()));
            }
        });
    });
    served
}

/// The one file.
pub struct OneFile {
    kept: std::sync::Mutex<Kept>,
    /// Fids the server holds (a fid's value counts itself while it lives).
    pub live: std::sync::Arc<std::sync::atomic::AtomicI64>,
    /// Opens of the file wait while this is set, until `release`.
    pub stall: std::sync::atomic::AtomicBool,
    /// Set, the file is stat'd as a synthetic file is: of length 0 (so
    /// read direct), its reads still of what it holds at the moment.
    pub synthetic: std::sync::atomic::AtomicBool,
    /// Set, its qid is a plain file's, as a stream's is; else QTAPPEND,
    /// as its mode says (DMAPPEND).
    pub stream: std::sync::atomic::AtomicBool,
    /// The offset of every read of the file, in the order answered.
    pub reads: std::sync::Mutex<Vec<u64>>,
    released: tokio::sync::Notify,
}

impl OneFile {
    /// Lets the stalled opens go on.
    pub fn release(&self) {
        self.stall.store(false, std::sync::atomic::Ordering::SeqCst);
        self.released.notify_waiters();
    }

    /// Fids held now.
    pub fn fids(&self) -> i64 {
        self.live.load(std::sync::atomic::Ordering::SeqCst)
    }
}

/// Counts itself in its server's `live` while it exists.
pub struct Live(std::sync::Arc<std::sync::atomic::AtomicI64>);

impl Live {
    fn new(count: &std::sync::Arc<std::sync::atomic::AtomicI64>) -> Live {
        count.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        Live(count.clone())
    }
}

impl Clone for Live {
    fn clone(&self) -> Live {
        Live::new(&self.0)
    }
}

impl Drop for Live {
    fn drop(&mut self) {
        self.0.fetch_sub(1, std::sync::atomic::Ordering::SeqCst);
    }
}

/// The most of one write the one-file server takes: less than the
/// iounit of a 2048 msize, so a page written through such a mount is
/// three Twrites of which the first is short.
const TAKES: usize = 1000;

/// What a wstat changes of the one file, and its bytes. It is
/// append-only (DMAPPEND), as a log file on a Plan 9 server is, and will
/// not have that bit cleared.
struct Kept {
    name: String,
    data: Vec<u8>,
    mode: u32,
    mtime: u32,
}

/// A fid of the one-file tree: its root, or the file.
#[derive(Clone)]
pub struct OneFid {
    kind: Kind,
    _live: Live,
}

#[derive(Clone, Copy, PartialEq)]
pub enum Kind {
    Root,
    File,
}

impl OneFile {
    fn qid(&self, kind: Kind) -> apex_ninep::fcall::Qid {
        use apex_ninep::fcall::{Qid, QTAPPEND, QTDIR, QTFILE};
        let ty = match self.stream.load(std::sync::atomic::Ordering::SeqCst) {
            true => QTFILE,
            false => QTAPPEND,
        };
        match kind {
            Kind::Root => Qid { ty: QTDIR, vers: 0, path: 1 },
            Kind::File => Qid { ty, vers: 0, path: 2 },
        }
    }

    fn fid(&self, kind: Kind) -> OneFid {
        OneFid { kind, _live: Live::new(&self.live) }
    }
}

impl apex_ninep::srv::Serve for OneFile {
    type Fid = OneFid;
    type Error = String;

    async fn attach(&self, _: &str, _: &str) -> apex_ninep::srv::Result<(apex_ninep::fcall::Qid, OneFid)> {
        Ok((self.qid(Kind::Root), self.fid(Kind::Root)))
    }

    async fn walk(
        &self,
        fid: &OneFid,
        names: &[String],
    ) -> apex_ninep::srv::Result<(Vec<apex_ninep::fcall::Qid>, Option<OneFid>)> {
        match (fid.kind, names) {
            (_, []) => Ok((Vec::new(), Some(fid.clone()))),
            (Kind::Root, [name]) if *name == self.kept.lock().unwrap().name => {
                Ok((vec![self.qid(Kind::File)], Some(self.fid(Kind::File))))
            }
            _ => Err("file does not exist".into()),
        }
    }

    async fn open(&self, fid: &OneFid, mode: u8) -> apex_ninep::srv::Result<(apex_ninep::fcall::Qid, OneFid)> {
        if fid.kind == Kind::File {
            // Held while the test says, as a server slow to open would.
            let released = self.released.notified();
            tokio::pin!(released);
            // Enabled before the flag is looked at: a release in between
            // is not missed.
            released.as_mut().enable();
            if self.stall.load(std::sync::atomic::Ordering::SeqCst) {
                released.await;
            }
        }
        if fid.kind == Kind::File && mode & apex_ninep::fcall::OTRUNC != 0 {
            self.kept.lock().unwrap().data.clear();
        }
        Ok((self.qid(fid.kind), fid.clone()))
    }

    async fn create(
        &self,
        _: &OneFid,
        _: &str,
        _: u32,
        _: u8,
    ) -> apex_ninep::srv::Result<(apex_ninep::fcall::Qid, OneFid)> {
        Err("permission denied".into())
    }

    async fn read(&self, fid: &OneFid, offset: u64, count: u32) -> apex_ninep::srv::Result<Vec<u8>> {
        if fid.kind == Kind::Root {
            // The file, and entries no file name can be (a server's own
            // idea of names), which the mount leaves out.
            let mut listing = Vec::new();
            if offset == 0 {
                let mut entry = self.stat(&self.fid(Kind::File)).await?;
                apex_ninep::codec::put_stat(&mut listing, &entry);
                for name in ["", ".", "..", "a/b", "nul\0in it"] {
                    entry.name = name.into();
                    entry.qid.path += 1;
                    apex_ninep::codec::put_stat(&mut listing, &entry);
                }
            }
            return Ok(listing);
        }
        let data = &self.kept.lock().unwrap().data;
        let from = (offset as usize).min(data.len());
        let read = data[from..(from + count as usize).min(data.len())].to_vec();
        self.reads.lock().unwrap().push(offset);
        Ok(read)
    }

    async fn write(&self, fid: &OneFid, offset: u64, bytes: Vec<u8>) -> apex_ninep::srv::Result<u32> {
        if fid.kind == Kind::Root {
            return Err("is a directory".into());
        }
        let data = &mut self.kept.lock().unwrap().data;
        // It takes at most TAKES bytes of a write, as a 9P server may: the
        // mount must stop there and the writer go on from where it did.
        let bytes = &bytes[..bytes.len().min(TAKES)];
        let end = offset as usize + bytes.len();
        if data.len() < end {
            data.resize(end, 0);
        }
        data[offset as usize..end].copy_from_slice(bytes);
        Ok(bytes.len() as u32)
    }

    async fn clunk(&self, _: OneFid) {}

    async fn remove(&self, _: OneFid) -> apex_ninep::srv::Result<()> {
        Err("permission denied".into())
    }

    async fn stat(&self, fid: &OneFid) -> apex_ninep::srv::Result<apex_ninep::fcall::Stat> {
        use apex_ninep::fcall::{Stat, DMDIR};
        let (name, mode, length, mtime) = match fid.kind {
            Kind::Root => ("/".to_string(), DMDIR | 0o755, 0, 0),
            Kind::File => {
                let file = self.kept.lock().unwrap();
                let length = match self.synthetic.load(std::sync::atomic::Ordering::SeqCst) {
                    true => 0,
                    false => file.data.len() as u64,
                };
                (file.name.clone(), apex_ninep::fcall::DMAPPEND | file.mode, length, file.mtime)
            }
        };
        let who = "glenda";
        Ok(Stat {
            qid: self.qid(fid.kind),
            mode,
            length,
            mtime,
            name: name.as_str().into(),
            uid: who.into(),
            gid: who.into(),
            muid: who.into(),
            ..Stat::default()
        })
    }

    async fn wstat(&self, fid: &OneFid, stat: apex_ninep::fcall::Stat) -> apex_ninep::srv::Result<()> {
        let mut file = self.kept.lock().unwrap();
        if fid.kind == Kind::File {
            if stat.mode != u32::MAX && stat.mode & apex_ninep::fcall::DMAPPEND == 0 {
                return Err("numbers is append-only; its mode keeps DMAPPEND".into());
            }
            if stat.length != u64::MAX {
                file.data.resize(stat.length as usize, 0);
            }
            if !stat.name.is_empty() {
                file.name = stat.name.to_string();
            }
            if stat.mode != u32::MAX {
                file.mode = stat.mode & 0o777;
            }
            if stat.mtime != u32::MAX {
                file.mtime = stat.mtime;
            }
        }
        Ok(())
    }
}
