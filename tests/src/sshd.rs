//! A real sshd (Debian's openssh-server) on a free loopback port, with a
//! host key and a user key made for the test, for `apex import ssh!...`
//! to reach "another machine": its sessions get a namespace, state
//! directory and `$HOME` of the test's own (sshd's `SetEnv`), so the
//! remote daemon a relay starts is the test's, and gone with it.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// The sshd, its files, and every daemon started through it: all gone on
/// drop.
pub struct Sshd {
    pub dir: PathBuf,
    pub port: u16,
    child: Child,
    /// In a mount namespace of its own ([`Sshd::start_elsewhere`]).
    elsewhere: bool,
}

/// Where Debian puts sshd; the test command installs openssh-server.
const SSHD: &str = "/usr/sbin/sshd";

fn run(cmd: &mut Command) {
    let out = cmd.output().unwrap_or_else(|e| panic!("{cmd:?}: {e}"));
    assert!(out.status.success(), "{cmd:?}: {}", String::from_utf8_lossy(&out.stderr));
}

/// A free loopback port, picked by the kernel.
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").and_then(|l| l.local_addr()).expect("a free port").port()
}

/// The processes whose environment names `dir`, less this one: what a
/// relay started on the sshd's side (its daemon, the importer's ssh).
fn started_in(dir: &Path) -> Vec<i32> {
    let needle = dir.display().to_string();
    let me = std::process::id() as i32;
    let Ok(procs) = std::fs::read_dir("/proc") else { return Vec::new() };
    procs
        .filter_map(|p| p.ok()?.file_name().to_str()?.parse::<i32>().ok())
        .filter(|pid| *pid != me)
        .filter(|pid| {
            let env = std::fs::read(format!("/proc/{pid}/environ")).unwrap_or_default();
            String::from_utf8_lossy(&env).contains(&needle)
        })
        .collect()
}

/// sshd in the foreground on `dir`'s config; `elsewhere`, in a mount
/// namespace of its own (unshare execs it, so the child is sshd).
fn sshd_command(dir: &Path, elsewhere: bool) -> Command {
    let mut cmd = match elsewhere {
        true => {
            let mut c = Command::new("unshare");
            c.args(["--mount", SSHD]);
            c
        }
        false => Command::new(SSHD),
    };
    cmd.args(["-D", "-e", "-f"]).arg(dir.join("sshd_config")).stdout(Stdio::null());
    cmd
}

impl Sshd {
    /// Starts sshd for `name`, whose sessions find programs in `bin` (the
    /// directory of the apexd under test) before the system's; panics,
    /// saying what to install, if sshd is not there.
    pub fn start(name: &str, bin: Option<&Path>) -> Sshd {
        Sshd::start_in(name, bin, false)
    }

    /// As [`Sshd::start`], but as another machine would be: sshd and
    /// everything it runs in a mount namespace of their own (the files
    /// are the same; a daemon's `/machine` is not this machine's).
    pub fn start_elsewhere(name: &str, bin: Option<&Path>) -> Sshd {
        Sshd::start_in(name, bin, true)
    }

    fn start_in(name: &str, bin: Option<&Path>, elsewhere: bool) -> Sshd {
        assert!(
            Path::new(SSHD).exists(),
            "{SSHD} is missing: install openssh-server and openssh-client (scripts/test does)"
        );
        let dir = std::env::temp_dir().join(format!("apex-sshd-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        for sub in ["home", "remote-ns", "local-ns", "state"] {
            std::fs::create_dir_all(dir.join(sub)).unwrap();
        }
        // Namespace directories are the user's alone, as every client checks.
        for ns in ["remote-ns", "local-ns"] {
            std::fs::set_permissions(dir.join(ns), std::os::unix::fs::PermissionsExt::from_mode(0o700)).unwrap();
        }
        for key in ["host", "user"] {
            run(Command::new("ssh-keygen").args(["-q", "-t", "ed25519", "-N", "", "-f"]).arg(dir.join(key)));
        }
        std::fs::copy(dir.join("user.pub"), dir.join("authorized_keys")).unwrap();
        // Privilege separation's empty directory, which a package's
        // service would make.
        let _ = std::fs::create_dir_all("/run/sshd");
        let port = free_port();
        let d = dir.display();
        let path = match bin {
            Some(b) => format!("{}:/usr/local/bin:/usr/bin:/bin", b.display()),
            None => "/usr/local/bin:/usr/bin:/bin".to_string(),
        };
        let config = format!(
            "Port {port}\nListenAddress 127.0.0.1\nHostKey {d}/host\nAuthorizedKeysFile {d}/authorized_keys\n\
             PermitRootLogin yes\nPasswordAuthentication no\nKbdInteractiveAuthentication no\nUsePAM no\n\
             StrictModes no\nPidFile none\n\
             SetEnv NAMESPACE={d}/remote-ns XDG_STATE_HOME={d}/state HOME={d}/home PATH={path}\n"
        );
        std::fs::write(dir.join("sshd_config"), config).unwrap();
        let child = sshd_command(&dir, elsewhere)
            .stderr(std::fs::File::create(dir.join("sshd.log")).unwrap())
            .spawn()
            .expect("start sshd");
        let s = Sshd { dir, port, child, elsewhere };
        let deadline = Instant::now() + Duration::from_secs(10);
        while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(Instant::now() < deadline, "sshd did not listen: {}", s.log());
            std::thread::sleep(Duration::from_millis(20));
        }
        s
    }

    /// What sshd said.
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.join("sshd.log")).unwrap_or_default()
    }

    /// `ssh!USER@localhost!PORT`.
    pub fn address(&self) -> String {
        let user = String::from_utf8(Command::new("id").arg("-un").output().unwrap().stdout).unwrap();
        format!("ssh!{}@localhost!{}", user.trim(), self.port)
    }

    /// `$APEX_SSH`: ssh with the test's key, no config or known hosts of
    /// the user's.
    pub fn ssh_command(&self) -> String {
        format!(
            "ssh -F /dev/null -i {} -o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null -o LogLevel=ERROR",
            self.dir.join("user").display()
        )
    }

    /// The local namespace directory, where the import posts.
    pub fn local_ns(&self) -> PathBuf {
        self.dir.join("local-ns")
    }

    /// The remote's, where its daemon posts.
    pub fn remote_ns(&self) -> PathBuf {
        self.dir.join("remote-ns")
    }

    /// `apex` (`program`) with the environment of a local user of the
    /// import: its namespace directory and ssh command.
    pub fn apex(&self, program: &Path) -> Command {
        let mut cmd = Command::new(program);
        cmd.env("NAMESPACE", self.local_ns()).env("APEX_SSH", self.ssh_command()).env_remove("PLAN9");
        cmd
    }

    /// `program` as the remote's sessions run it (its namespace, state
    /// and home), without ssh: a daemon started there by hand.
    pub fn remote(&self, program: &Path) -> Command {
        let mut cmd = Command::new(program);
        cmd.env("NAMESPACE", self.remote_ns())
            .env("XDG_STATE_HOME", self.dir.join("state"))
            .env("HOME", self.dir.join("home"))
            .env_remove("PLAN9");
        cmd
    }

    /// Ends the remote's daemons (not its relays or terminals' keepers):
    /// a remote machine's daemon gone. Returns once they are.
    pub fn kill_daemons(&self) {
        let mut killed = Vec::new();
        for pid in started_in(&self.dir) {
            let cmd = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
            let words: Vec<String> = cmd.split(|b| *b == 0).map(|w| String::from_utf8_lossy(w).into_owned()).collect();
            let daemon = words.first().is_some_and(|w| w.ends_with("apexd"))
                && !words.iter().any(|w| w == "--stdio" || w == "keep-term");
            if daemon {
                // SAFETY: kill(2) with plain integers.
                unsafe { libc::kill(pid, libc::SIGKILL) };
                killed.push(pid);
            }
        }
        // Gone (reaped by whoever started them, or left a zombie, which
        // holds nothing), so a daemon started next finds the state free.
        let deadline = Instant::now() + Duration::from_secs(10);
        let alive = |pid: &i32| {
            let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
            !status.is_empty() && !status.lines().any(|l| l.starts_with("State:") && l.contains("Z"))
        };
        while killed.iter().any(alive) {
            assert!(Instant::now() < deadline, "the remote's daemons did not end");
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Stops sshd (ssh connections through it stay until killed), and
    /// starts it again on the same port: the network going and coming.
    pub fn stop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    pub fn restart(&mut self) {
        self.stop();
        self.child = sshd_command(&self.dir, self.elsewhere)
            .stderr(std::fs::File::options().append(true).open(self.dir.join("sshd.log")).unwrap())
            .spawn()
            .expect("start sshd");
        let deadline = Instant::now() + Duration::from_secs(10);
        while std::net::TcpStream::connect(("127.0.0.1", self.port)).is_err() {
            assert!(Instant::now() < deadline, "sshd did not listen again");
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// The sshd's session processes (`sshd: USER@notty`) and what they
    /// run: killing them drops every ssh connection as a network would.
    pub fn drop_connections(&self) {
        for pid in started_in(&self.dir) {
            let cmd = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
            if String::from_utf8_lossy(&cmd).contains("--stdio") {
                // SAFETY: kill(2) with plain integers.
                unsafe { libc::kill(pid, libc::SIGKILL) };
            }
        }
    }
}

impl Drop for Sshd {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        // The remote daemons and relays, and any importer the test left.
        for pid in started_in(&self.dir) {
            // SAFETY: kill(2) with plain integers.
            unsafe { libc::kill(pid, libc::SIGKILL) };
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}
