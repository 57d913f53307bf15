//! A terminal's keeper: the small process (`apexd keep-term ...`) that
//! opens a terminal's pty, runs its program and waits for it, so the
//! terminal lives on when the daemon goes, as a tmux pane lives on when
//! its client goes. The daemon reads and writes the pty itself, through
//! the descriptor the keeper hands it ([`super::fdpass`]); the keeper only
//! holds the pty open and says how the program ended.
//!
//! It speaks lines on Unix sockets: to each daemon that connects, `pid
//! N` with the pty's descriptor; when the program ends, `exit STATUS`
//! (a signal's: 128 + its number). A daemon closing the terminal says
//! `close` first, and no status is kept for another. The daemon that
//! started it is on
//! descriptor 3. A keeper told to `--listen PATH` (a daemon that keeps
//! its sessions) waits there for the daemons that come after, writes
//! the status to `PATH.exit` for one that comes only after the program
//! ended, and ends the program if `PATH` is removed (the session's
//! directory deleted: nobody will come). Without `--listen` (an
//! ephemeral daemon) the terminal ends with the daemon that started it.

use super::fdpass;
use portable_pty::{CommandBuilder, PtySize};
use std::os::fd::{FromRawFd, RawFd};
use std::os::unix::fs::MetadataExt;
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// apexd's first argument that makes it a keeper.
pub const ARG: &str = "keep-term";
/// The descriptor the starting daemon's socket is on.
pub const DAEMON_FD: RawFd = 3;
/// What a daemon says before it ends a terminal it closes: the keeper
/// leaves no status for a next daemon.
pub const CLOSE: &str = "close";
/// `signal N`: what a daemon says to signal the program's own process
/// group, which only the keeper knows to be still the program's.
pub const SIGNAL: &str = "signal";
/// How often a listening keeper looks whether its socket is still named.
const LOOK_EVERY: Duration = Duration::from_secs(1);

/// Why a keeper could not keep a terminal: its text goes to the daemon
/// as `error TEXT`.
#[derive(Debug, thiserror::Error)]
pub enum KeeperError {
    #[error("usage: apexd keep-term [--listen PATH] COLS ROWS DIR [COMMAND]")]
    Usage,
    #[error("{0:?}: not a size (1 to 65535 cells)")]
    Size(String),
    #[error("cannot open a pty: {0}")]
    Pty(String),
    #[error("cannot run {command:?}: {why}")]
    Run { command: String, why: String },
    #[error("the program has no pid")]
    NoPid,
    #[error("cannot listen on {path}: {source}")]
    Listen { path: PathBuf, source: std::io::Error },
    #[error("cannot hand the pty over: {0}")]
    HandOver(std::io::Error),
}

/// What a keeper is told to run.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Orders {
    pub listen: Option<PathBuf>,
    pub cols: u16,
    pub rows: u16,
    pub dir: String,
    /// Run with `sh -c`; none runs the login shell.
    pub command: Option<String>,
}

impl Orders {
    /// The arguments after [`ARG`].
    pub fn args(&self) -> Vec<std::ffi::OsString> {
        let mut a: Vec<std::ffi::OsString> = Vec::new();
        if let Some(p) = &self.listen {
            a.push("--listen".into());
            a.push(p.into());
        }
        a.extend([self.cols.to_string().into(), self.rows.to_string().into(), self.dir.clone().into()]);
        a.extend(self.command.clone().map(Into::into));
        a
    }

    /// Parses the arguments after [`ARG`].
    pub fn parse(args: &[String]) -> Result<Orders, KeeperError> {
        let (listen, rest) = match args {
            [flag, path, rest @ ..] if flag == "--listen" => (Some(PathBuf::from(path)), rest),
            rest => (None, rest),
        };
        let [cols, rows, dir, command @ ..] = rest else { return Err(KeeperError::Usage) };
        let side = |s: &str| s.parse::<u16>().ok().filter(|n| *n > 0).ok_or_else(|| KeeperError::Size(s.into()));
        let command = match command {
            [] => None,
            [c] => Some(c.clone()),
            _ => return Err(KeeperError::Usage),
        };
        Ok(Orders { listen, cols: side(cols)?, rows: side(rows)?, dir: dir.clone(), command })
    }
}

/// The login shell: `$SHELL`, else `/bin/sh`.
pub fn default_shell() -> String {
    std::env::var("SHELL").ok().filter(|s| !s.is_empty()).unwrap_or_else(|| "/bin/sh".into())
}

/// Runs a keeper; the process ends with it. Errors before the program
/// runs go to the daemon as `error WHY`.
pub fn main(args: &[String]) -> ! {
    // SAFETY: plain libc calls on this process, before any thread.
    unsafe {
        libc::setsid();
        libc::signal(libc::SIGHUP, libc::SIG_IGN);
        libc::signal(libc::SIGPIPE, libc::SIG_IGN);
    }
    // Holding no directory of the daemon's (the program gets its own).
    let _ = std::env::set_current_dir("/");
    // SAFETY: the daemon starts a keeper with its socket on DAEMON_FD.
    let daemon = unsafe { UnixStream::from_raw_fd(DAEMON_FD) };
    let orders = match Orders::parse(args) {
        Ok(o) => o,
        Err(why) => {
            let _ = fdpass::send(&daemon, &format!("error {why}"), None);
            std::process::exit(2);
        }
    };
    match keep(&orders, daemon.try_clone()) {
        Ok(never) => match never {},
        Err(why) => {
            let _ = fdpass::send(&daemon, &format!("error {why}"), None);
            std::process::exit(1);
        }
    }
}

enum Never {}

fn keep(orders: &Orders, daemon: std::io::Result<UnixStream>) -> Result<Never, KeeperError> {
    let daemon = daemon.map_err(KeeperError::HandOver)?;
    let size = PtySize { rows: orders.rows, cols: orders.cols, pixel_width: 0, pixel_height: 0 };
    let pair = portable_pty::native_pty_system().openpty(size).map_err(|e| KeeperError::Pty(e.to_string()))?;
    let mut cmd = match &orders.command {
        Some(c) => {
            let mut cmd = CommandBuilder::new("/bin/sh");
            cmd.args(["-c", c]);
            cmd
        }
        None => CommandBuilder::new(default_shell()),
    };
    cmd.cwd(&orders.dir);
    cmd.env("TERM", "xterm-256color");
    cmd.env("COLORTERM", "truecolor");
    let shown = orders.command.clone().unwrap_or_else(default_shell);
    let child = pair.slave.spawn_command(cmd).map_err(|e| KeeperError::Run { command: shown, why: e.to_string() })?;
    // Only the program holds the pty's other end: its exit closes it.
    drop(pair.slave);
    let pid = child.process_id().ok_or(KeeperError::NoPid)?;
    // Waited for with waitpid, which keeps the signal's number.
    drop(child);
    let master = pair.master.as_raw_fd().ok_or_else(|| KeeperError::Pty("the pty has no descriptor".into()))?;
    let keeper = Keeper { pid, master, state: Arc::new(Mutex::new(Program::default())) };
    let listener = match &orders.listen {
        Some(path) => Some(bind(path).map_err(|source| {
            keeper.end_program();
            KeeperError::Listen { path: path.clone(), source }
        })?),
        None => None,
    };
    keeper.hand_over(&daemon, orders.listen.is_none()).map_err(|e| {
        keeper.end_program();
        KeeperError::HandOver(e)
    })?;
    if let Some((listener, inode)) = listener {
        let k = keeper.clone();
        std::thread::spawn(move || {
            for conn in listener.incoming().flatten() {
                let _ = k.hand_over(&conn, false);
            }
        });
        let (k, path) = (keeper.clone(), orders.listen.clone().expect("listening"));
        std::thread::spawn(move || {
            // Gone twice running (not a passing error of the file system).
            let mut gone = 0;
            loop {
                std::thread::sleep(LOOK_EVERY);
                gone = match std::fs::symlink_metadata(&path) {
                    Ok(m) if m.ino() != inode => gone + 1,
                    Err(e) if e.kind() == std::io::ErrorKind::NotFound => gone + 1,
                    _ => 0,
                };
                if gone >= 2 {
                    k.end_program();
                }
            }
        });
    }
    // Waited for without reaping, so its pid is no other's while anything
    // here may still signal it; then, under the lock, marked ended and
    // reaped, and the exit said to every daemon handed the pty.
    wait_exited(pid);
    let mut program = keeper.state.lock().expect("keeper state");
    let status = reap(pid);
    program.exit = Some(status);
    if let Some(path) = orders.listen.as_ref().filter(|_| !program.closed) {
        let exit = exit_path(path);
        let tmp = exit.with_extension("exit.new");
        if std::fs::write(&tmp, status.to_string()).is_ok() {
            let _ = std::fs::rename(&tmp, &exit);
        }
    }
    if let Some(path) = &orders.listen {
        let _ = std::fs::remove_file(path);
    }
    for conn in &program.connected {
        let _ = fdpass::send(conn, &format!("exit {status}"), None);
    }
    drop(program);
    drop(pair.master);
    std::process::exit(0);
}

/// Waits until process `pid` has ended, leaving it to be reaped.
fn wait_exited(pid: u32) {
    loop {
        // SAFETY: waitid(2) fills the siginfo it is given.
        let r = unsafe {
            let mut info: libc::siginfo_t = std::mem::zeroed();
            libc::waitid(libc::P_PID, pid as libc::id_t, &mut info, libc::WEXITED | libc::WNOWAIT)
        };
        if r == 0 || std::io::Error::last_os_error().raw_os_error() != Some(libc::EINTR) {
            return;
        }
    }
}

/// Reaps process `pid` and says how it ended (a signal's: 128 + its
/// number).
fn reap(pid: u32) -> i32 {
    let mut status = 0;
    loop {
        // SAFETY: waitpid(2) writes the status it is given.
        let r = unsafe { libc::waitpid(pid as i32, &mut status, 0) };
        if r == pid as i32 {
            break;
        }
        if r < 0 && std::io::Error::last_os_error().raw_os_error() != Some(libc::EINTR) {
            return 255;
        }
    }
    match libc::WIFSIGNALED(status) {
        true => 128 + libc::WTERMSIG(status),
        false => libc::WEXITSTATUS(status),
    }
}

/// Where a listening keeper leaves its program's status.
pub fn exit_path(socket: &std::path::Path) -> PathBuf {
    let mut name = socket.as_os_str().to_owned();
    name.push(".exit");
    PathBuf::from(name)
}

/// Binds `path` (a stale socket there is replaced), and its inode.
fn bind(path: &std::path::Path) -> std::io::Result<(UnixListener, u64)> {
    let _ = std::fs::remove_file(path);
    let (name, _dir) = fdpass::short_name(path)?;
    let listener = UnixListener::bind(&name)?;
    let inode = std::fs::symlink_metadata(path)?.ino();
    Ok((listener, inode))
}

/// The program as the keeper's threads share it, under one lock.
#[derive(Default)]
struct Program {
    /// Reaped, with this status: its pid may be another's now.
    exit: Option<i32>,
    /// The daemons handed the pty, to say the exit to.
    connected: Vec<UnixStream>,
    /// A daemon closed the terminal: no status is left for another.
    closed: bool,
}

/// What every thread of the keeper needs.
#[derive(Clone)]
struct Keeper {
    pid: u32,
    master: RawFd,
    state: Arc<Mutex<Program>>,
}

impl Keeper {
    /// Sends `conn` the pid and the pty (or, once the program ended, its
    /// status), and keeps it to say the exit on; a thread reads what the
    /// daemon says ([`CLOSE`], [`SIGNAL`]) until it hangs up, which ends
    /// the program when `ends_with_it` (the daemon that started an
    /// ephemeral terminal).
    fn hand_over(&self, conn: &UnixStream, ends_with_it: bool) -> std::io::Result<()> {
        let mut program = self.state.lock().expect("keeper state");
        if let Some(status) = program.exit {
            return fdpass::send(conn, &format!("exit {status}"), None);
        }
        fdpass::send(conn, &format!("pid {}", self.pid), Some(self.master))?;
        let said = conn.try_clone()?;
        program.connected.push(conn.try_clone()?);
        drop(program);
        let keeper = self.clone();
        std::thread::spawn(move || {
            while let Ok((line, _)) = fdpass::recv(&said) {
                match line.split_once(' ') {
                    _ if line == CLOSE => keeper.state.lock().expect("keeper state").closed = true,
                    Some((SIGNAL, n)) => {
                        if let Ok(n) = n.parse() {
                            keeper.signal(n);
                        }
                    }
                    _ => {}
                }
            }
            if ends_with_it {
                keeper.end_program();
            }
        });
        Ok(())
    }

    /// Sends `signal` to the program's process group unless it was
    /// reaped (when its pid may name another's).
    fn signal(&self, signal: i32) {
        let program = self.state.lock().expect("keeper state");
        if program.exit.is_none() {
            // SAFETY: kill(2) with plain integers; the group's leader is
            // this process's unreaped child.
            unsafe { libc::kill(-(self.pid as i32), signal) };
        }
    }

    /// Hangs up on the program's process group, as a closing terminal
    /// does, then kills what is left of it.
    fn end_program(&self) {
        self.signal(libc::SIGHUP);
        std::thread::sleep(Duration::from_millis(200));
        self.signal(libc::SIGKILL);
    }
}
