//! End to end: a real `apexd` on a temporary namespace directory, driven
//! over its posted socket with the project's 9P client, with the `apex`
//! command, with raw 9P frames, and with PyPI's p9fs.

mod acme;
mod attach;
mod bounded;
mod builtins;
mod chaos;
mod events;
mod fidelity;
mod host;
mod import;
mod keepers;
mod limits;
mod locks;
mod newcomer;
mod persist;
mod plumbing;
mod protocol;
mod rollback;
mod session;
mod stdio;
mod stuck;
mod terms;
mod tls;
mod welcome;

use apex_ninep::fcall::*;
use apex_ninep::{dial, Client, ClientError, File};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// A running apexd and its namespace directory, both gone on drop.
pub struct Daemon {
    child: Child,
    pub dir: PathBuf,
}

impl Daemon {
    pub fn start(name: &str) -> Daemon {
        Daemon::start_with(name, &[])
    }

    pub fn start_with(name: &str, extra: &[String]) -> Daemon {
        let dir = std::env::temp_dir().join(format!("apex-e2e-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        // Nothing is kept unless a test names a state directory.
        let keep = extra.iter().any(|a| a == "--state");
        let child = Command::new(env!("CARGO_BIN_EXE_apexd"))
            .arg("--namespace")
            .arg(&dir)
            .args((!keep).then_some("--ephemeral"))
            .args(extra)
            // The terminals it runs start the user's shell: with a home of
            // the test's own it reads none of the user's start-up files,
            // which may be slow or stuck (a stale lock of a tool they run).
            .env("HOME", &dir)
            // apex's own basic plumbing rules, whatever plan9port is here.
            .env_remove("PLAN9")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start apexd");
        let d = Daemon { child, dir };
        let deadline = Instant::now() + Duration::from_secs(20);
        while !d.socket().exists() {
            assert!(Instant::now() < deadline, "apexd did not post its socket");
            std::thread::sleep(Duration::from_millis(20));
        }
        d
    }

    pub fn socket(&self) -> PathBuf {
        self.dir.join("apex")
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    pub async fn client(&self) -> Client {
        dial(&format!("unix!{}", self.socket().display()), 1 << 20).await.unwrap()
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

pub async fn read(c: &Client, root: u32, path: &str) -> Result<Vec<u8>, ClientError> {
    let f = c.open_path(root, path, OREAD).await?;
    let data = c.read_all(&f).await;
    c.clunk(f.fid).await?;
    data
}

pub async fn write(c: &Client, root: u32, path: &str, text: &str) -> Result<(), ClientError> {
    let f = c.open_path(root, path, OWRITE).await?;
    let r = c.write(f.fid, 0, text.as_bytes()).await;
    c.clunk(f.fid).await?;
    r.map(|_| ())
}

pub fn text(b: Vec<u8>) -> String {
    String::from_utf8(b).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sessions_through_the_root_tree() {
    let d = Daemon::start("root");
    let c = d.client().await;
    let root = c.attach("glenda", "").await.unwrap();
    let index = text(read(&c, root, "index").await.unwrap());
    assert!(index.starts_with("main "), "{index:?}");
    let fields: Vec<&str> = index.split_whitespace().collect();
    assert_eq!(fields.len(), 4, "name uuid attachments shards: {index:?}");
    assert_eq!(fields[1].len(), 36, "a uuid");
    // As acme's, a synthetic file has length 0 and the times of the stat.
    let (fid, _) = c.walk(root, &["index"]).await.unwrap();
    let st = c.stat(fid).await.unwrap();
    c.clunk(fid).await.unwrap();
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_secs();
    assert_eq!(st.length, 0);
    assert!(st.mtime as u64 + 3600 > now && st.atime == st.mtime, "mtime {} atime {} now {now}", st.mtime, st.atime);

    // ctl: commands apply together or not at all.
    write(&c, root, "ctl", "new work\nrename work play\n").await.unwrap();
    let err = write(&c, root, "ctl", "new other\ndel nosuch\n").await.unwrap_err();
    assert_eq!(err.to_string(), "no session \"nosuch\" (see /index)");
    let err = write(&c, root, "ctl", "nwe x").await.unwrap_err();
    assert!(err.to_string().contains("unknown message; expected new [NAME], del NAME or rename OLD NEW"), "{err}");
    let names: Vec<String> = text(read(&c, root, "index").await.unwrap())
        .lines()
        .map(|l| l.split(' ').next().unwrap().to_string())
        .collect();
    assert_eq!(names, ["main", "play"]);

    // Opening new makes a session and reads its name, then EOF.
    let made = text(read(&c, root, "new").await.unwrap());
    assert_eq!(made, "1\n");
    let dir = c.open_path(root, "", OREAD).await.unwrap();
    let listing: Vec<String> = c.read_dir(&dir).await.unwrap().into_iter().map(|s| s.name.into_string()).collect();
    assert_eq!(listing, ["index", "ctl", "new", "registry", "machine", "services", "main", "play", "1"]);
    // Which machine: this one, seeing these files.
    let machine = text(read(&c, root, "machine").await.unwrap());
    assert!(machine.starts_with(&format!("{}\n", apex_sys::machine::id())), "{machine}");
    // And where the daemon is (a UI on another machine completes relative
    // names there): the directory it was started in, as this test's.
    let said = apex_sys::machine::Described::parse(&machine);
    assert_eq!(said.cwd, Some(apex_sys::machine::cwd()), "{machine}");
    // What is posted beside apex, for whom: acme, for main (the default).
    assert_eq!(text(read(&c, root, "services").await.unwrap()), "acme main\n");

    // A session's files: the hash is the view state's, as any replica
    // computes it from the snapshot.
    let snap = read(&c, root, "main/snapshot").await.unwrap();
    let state = apex_core::State::from_snapshot(&snap).unwrap();
    let hash = text(read(&c, root, "main/hash").await.unwrap());
    assert_eq!(hash.trim(), state.hash().to_hex().as_str());
    assert_eq!(state.layout.columns.len(), 2, "laid out as acme starts");
    let id = text(read(&c, root, "main/id").await.unwrap());
    assert_eq!(id.trim(), fields[1]);
    write(&c, root, "play/label", "games\n").await.unwrap();
    assert_eq!(text(read(&c, root, "games/label").await.unwrap()), "games\n");
    let err = write(&c, root, "games/label", "main").await.unwrap_err();
    assert_eq!(err.to_string(), "session \"main\" exists already");
    let err = write(&c, root, "main/hash", "x").await.unwrap_err();
    assert_eq!(err.to_string(), "permission denied: hash is read-only");
    assert_eq!(c.walk(root, &["nope"]).await.unwrap_err().to_string(), "file does not exist: nope");

    // The attach name selects a session's directory.
    let s = c.attach("glenda", "games").await.unwrap();
    assert_eq!(text(read(&c, s, "label").await.unwrap()), "games\n");
    assert!(c.attach("glenda", "nosuch").await.unwrap_err().to_string().contains("no session"));
    // NAME/acme is the session's acme tree.
    let acme = c.attach("glenda", "games/acme").await.unwrap();
    assert_eq!(text(read(&c, acme, "index").await.unwrap()), "");
    assert!(c.attach("glenda", "nosuch/acme").await.unwrap_err().to_string().contains("no session"));
    assert!(c.attach("glenda", "games/x/y").await.unwrap_err().to_string().contains("a session name"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_second_daemon_on_the_same_namespace_is_refused() {
    let d = Daemon::start("twice");
    let out =
        Command::new(env!("CARGO_BIN_EXE_apexd")).arg("--namespace").arg(&d.dir).arg("--ephemeral").output().unwrap();
    assert!(!out.status.success());
    let msg = String::from_utf8_lossy(&out.stderr);
    assert!(msg.contains("served by a running daemon"), "{msg}");
    // The first still serves.
    let c = d.client().await;
    let root = c.attach("u", "").await.unwrap();
    assert!(text(read(&c, root, "index").await.unwrap()).starts_with("main "));
}

/// The Python of the venv `.ci/run` makes for an independent 9P client
/// (`target/py/VENV`), or `$VAR`; `None` (with the reason printed) where
/// neither exists outside CI, a failure in CI.
fn client_python(venv: &str, var: &str) -> Option<PathBuf> {
    if let Some(p) = std::env::var_os(var) {
        return Some(PathBuf::from(p));
    }
    let p = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../target/py").join(venv).join("bin/python");
    if p.exists() {
        return Some(p);
    }
    skipped(&format!("no {venv} venv at target/py/{venv} (scripts/test makes it, or set {var})"));
    None
}

/// Says a test cannot run, where `cargo test` shows it whether the test
/// passes or not (straight to stderr, past the test harness's capture);
/// under CI it fails instead.
pub fn skipped(reason: &str) {
    assert!(std::env::var_os("CI").is_none(), "CI must run every test, but: {reason}");
    let _ = writeln!(std::io::stderr(), "SKIPPED: {reason}");
}

/// Runs one of `tests/py`'s scripts and returns its standard output.
fn run_script(python: &Path, script: &str, args: &[&str]) -> String {
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/py").join(script);
    let mut child =
        Command::new(python).arg(&script).args(args).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap();
    // A script that hangs must not hang the suite.
    let deadline = Instant::now() + Duration::from_secs(60);
    while child.try_wait().unwrap().is_none() {
        if Instant::now() > deadline {
            let _ = child.kill();
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let out = child.wait_with_output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout).to_string();
    assert!(out.status.success(), "{script:?} failed:\n{stdout}\n{}", String::from_utf8_lossy(&out.stderr));
    stdout
}

/// The same flows through a 9P client this project did not write: p9fs,
/// with its own codec, in 9P2000 mode, over TCP.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_independent_client_p9fs_agrees() {
    let Some(python) = client_python("p9fs", "APEX_P9FS_PYTHON") else { return };
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let d = Daemon::start_with("p9fs", &["--listen".into(), format!("tcp!127.0.0.1!{port}"), "--insecure".into()]);
    let deadline = Instant::now() + Duration::from_secs(20);
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(Instant::now() < deadline, "apexd did not listen on tcp");
        std::thread::sleep(Duration::from_millis(20));
    }
    let stdout = run_script(&python, "p9fs_session.py", &["127.0.0.1", &port.to_string()]);
    assert!(stdout.contains("p9fs: ok"), "{stdout}");
    // What p9fs did is visible to our client too, and the hash it read is
    // the one every replica computes from the snapshot.
    let c = d.client().await;
    let root = c.attach("u", "").await.unwrap();
    let names: Vec<String> = text(read(&c, root, "index").await.unwrap())
        .lines()
        .map(|l| l.split(' ').next().unwrap().to_string())
        .collect();
    assert_eq!(names, ["main", "renamed"]);
    let b = stdout.split_whitespace().nth(2).unwrap();
    assert_eq!(text(read(&c, root, &format!("main/buffers/{b}/body")).await.unwrap()), "said: from p9fs\n");
    let snap = read(&c, root, "main/snapshot").await.unwrap();
    let hash = text(read(&c, root, "main/hash").await.unwrap());
    assert_eq!(hash.trim(), apex_core::State::from_snapshot(&snap).unwrap().hash().to_hex().as_str());
}

/// A second independent client, python-9p (plan9port's own C codec), over
/// the posted Unix socket: buffers, body, proposals, a blocked `entries`
/// read woken by a proposal on the same connection, Tflush of a blocked
/// read, addr and data, and refused writes that change nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_independent_client_python_9p_agrees() {
    let Some(python) = client_python("python-9p", "APEX_PYTHON9P_PYTHON") else { return };
    let d = Daemon::start("python9p");
    let socket = d.socket().display().to_string();
    let stdout = run_script(&python, "python9p_session.py", &[&socket]);
    let b = stdout.strip_prefix("python-9p: ok ").unwrap_or_else(|| panic!("{stdout}")).trim().to_string();
    // What it wrote is what our client reads, and the connection it used
    // (with a flushed read) left the daemon serving.
    let c = d.client().await;
    let root = c.attach("u", "").await.unwrap();
    assert_eq!(text(read(&c, root, &format!("main/buffers/{b}/body")).await.unwrap()), "HELLO\nworld\n");
    let outcomes = text(read(&c, root, "main/proposals").await.unwrap());
    assert!(
        outcomes.lines().any(|l| l.contains(" refused insrt 1 0 0 -> ") && l.contains("unknown verb")),
        "{outcomes}"
    );
}

/// Runs the `apex` command against `d` with `input` on its stdin.
fn apex(d: &Daemon, args: &[&str], input: &str) -> (bool, String, String) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_apex"))
        .arg("-a")
        .arg(format!("unix!{}", d.socket().display()))
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child.stdin.take().unwrap().write_all(input.as_bytes()).unwrap();
    let out = child.wait_with_output().unwrap();
    (out.status.success(), String::from_utf8_lossy(&out.stdout).into(), String::from_utf8_lossy(&out.stderr).into())
}

#[test]
fn the_apex_command_speaks_like_9p() {
    let d = Daemon::start("cmd");
    let (ok, out, _) = apex(&d, &["sessions"], "");
    assert!(ok && out.starts_with("main "), "{out}");
    let (ok, out, _) = apex(&d, &["new", "work"], "");
    assert!(ok, "{out}");
    assert_eq!(out, "work\n");
    let (ok, out, _) = apex(&d, &["new"], "");
    assert!(ok);
    assert_eq!(out, "1\n");
    let (ok, out, _) = apex(&d, &["ls"], "");
    assert!(ok);
    assert_eq!(out, "1\nctl\nindex\nmachine\nmain\nnew\nregistry\nservices\nwork\n");
    let (ok, out, _) = apex(&d, &["ls", "-l", "main"], "");
    assert!(ok);
    assert!(out.lines().any(|l| l.starts_with("--rw-rw-rw- M 0 ") && l.ends_with(" label")), "{out}");
    let (ok, _, _) = apex(&d, &["write", "ctl"], "rename work play\n");
    assert!(ok);
    let (ok, out, _) = apex(&d, &["read", "play/label"], "");
    assert!(ok);
    assert_eq!(out, "play\n");
    let (ok, out, _) = apex(&d, &["stat", "main/hash"], "");
    assert!(ok);
    assert!(out.starts_with("'hash' '") && out.contains(" m 0o444 "), "{out}");
    let (ok, out, _) = apex(&d, &["rdwr", "play/label"], "games\n");
    assert!(ok);
    // As 9p's rdwr: each read is printed with a newline after it.
    assert_eq!(out, "play\n\ngames\n\n", "read, write a line, read again");
    // Errors: a message and exit status 1, as 9p's.
    let (ok, _, err) = apex(&d, &["read", "nosuch/label"], "");
    assert!(!ok);
    assert_eq!(err, "apex: open nosuch/label: file does not exist: nosuch\n");
    let (ok, _, err) = apex(&d, &["write", "ctl"], "bogus\n");
    assert!(!ok);
    assert!(err.starts_with("apex: write ctl: ctl line 1 (\"bogus\"): unknown message; expected new [NAME]"), "{err}");
    let (ok, out, _) = apex(&d, &["-A", "games", "read", "id"], "");
    assert!(ok && out.trim().len() == 36, "{out}");
}

/// `apex write` fills each Twrite to the iounit while input keeps coming:
/// 3 MiB through a pipe (whose reads come 64 KiB at a time) is a handful
/// of writes, not 48; each write to a body is one change of its version.
/// `apex read` of the body, several reads in flight, gives it back.
#[test]
fn apex_write_fills_each_write_to_the_iounit() {
    let d = Daemon::start("cmd-fill");
    let (ok, n, _) = apex(&d, &["read", "main/buffers/new"], "");
    assert!(ok);
    let n = n.trim().to_string();
    let version = || {
        let (_, ctl, _) = apex(&d, &["read", &format!("main/buffers/{n}/ctl")], "");
        ctl.lines().find_map(|l| l.strip_prefix("version ")).unwrap().trim().parse::<u64>().unwrap()
    };
    let before = version();
    // Runes of two bytes, so reads and writes end inside them.
    let text = "0123456789abcdé".repeat(3 << 16);
    let (ok, _, err) = apex(&d, &["write", &format!("main/buffers/{n}/body")], &text);
    assert!(ok, "{err}");
    let (_, body, _) = apex(&d, &["read", &format!("main/buffers/{n}/body")], "");
    // Read back with reads sent ahead, each ending inside a rune.
    assert!(body == text, "the text went whole, and came back whole");
    let writes = version() - before;
    // 48 at 64 KiB; a handful at the iounit, a few more should the
    // feeding thread be slow to refill the pipe now and then.
    assert!(writes <= 12, "3 MiB went in {writes} writes");
}
