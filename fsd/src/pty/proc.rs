//! A terminal's process: its pty (`portable-pty`), the program on it, and
//! the threads that move bytes. Input is not state: `cons` writes and the
//! emulator's answers go to the pty through one queue, in order, and are
//! never logged. Output goes to the `cons` readers ([`Output`]) and to the
//! terminal's driver as [`Event`]s.
//!
//! Threads, each blocking on one thing so no request waits on them: the
//! reader (the pty's output), the writer (the input queue), the waiter
//! (the program's exit).

use super::output::Output;
use super::{fdpass, keeper};
use std::io::{Read, Write};
use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::net::UnixStream;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// Input waiting for a program that does not read it, beyond which a
/// `cons` write is refused.
pub const INPUT_MAX: usize = 1 << 20;

/// How a terminal is made (`term [-d DIR] [-s COLSxROWS] [-l ROWS] [COMMAND]`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Spec {
    pub dir: String,
    pub cols: u16,
    pub rows: u16,
    pub scrollback: u32,
    /// Run with `sh -c`; none runs `$SHELL` (else `/bin/sh`).
    pub command: Option<String>,
}

impl Spec {
    /// The command line shown in `ctl` and `terms/index`.
    pub fn shown(&self) -> String {
        self.command.clone().unwrap_or_else(keeper::default_shell)
    }
}

/// What the driver hears from a terminal's threads.
pub enum Event {
    Output(Vec<u8>),
    /// The pty closed: no more output.
    Eof,
    /// The program exited with this status (a signal's: 128 + its number).
    Exited(i32),
    /// A resize: done once the new screen is in the shard.
    Resize(u16, u16, tokio::sync::oneshot::Sender<()>),
}

#[derive(Debug, thiserror::Error)]
pub enum ProcError {
    #[error("term: cannot open a pty: {0}")]
    Pty(String),
    #[error("term: its keeper: {0}")]
    Keeper(String),
    #[error("term: cannot run {command:?}: {why}")]
    Spawn { command: String, why: String },
    #[error("terminal {0} has exited; its screen stays until ctl close")]
    Exited(u64),
    #[error("terminal {term}'s program is not reading its input ({waiting} bytes wait); try again later")]
    InputFull { term: u64, waiting: usize },
    #[error("resize: {0}")]
    Resize(String),
    #[error("terminal {0} is too busy to resize (its output floods); try again")]
    Busy(u64),
    #[error("term: {0} terminals run in this session already; close one first")]
    TooMany(usize),
    #[error("term: the daemon has {open} of its {limit} descriptors open; close a terminal or a connection first, or raise its hard limit (ulimit -Hn)")]
    NoDescriptors { open: u64, limit: u64 },
    #[error("signal: {0}")]
    Signal(std::io::Error),
}

/// A running terminal, as its session holds it. Dropping it ends the
/// program (SIGHUP, then SIGKILL to its process group).
pub struct Running {
    pub pid: u32,
    master: OwnedFd,
    /// The keeper's socket: its hang-up on drop ends an ephemeral
    /// terminal's keeper.
    keeper: UnixStream,
    /// The directory the program last reported with OSC 7.
    reported_cwd: Arc<Mutex<Option<std::path::PathBuf>>>,
    input: mpsc::Sender<Vec<u8>>,
    waiting: Arc<AtomicUsize>,
    pub output: Arc<Output>,
    /// The program has been waited for: its pid may be another's now.
    reaped: Arc<AtomicBool>,
    /// The terminal is closing: its pty threads let go of the pty.
    closing: Arc<AtomicBool>,
    /// To the driver; none once it has ended.
    events: Mutex<Option<mpsc::SyncSender<Event>>>,
}

/// The driver's ends of a new terminal's threads.
pub struct Pipes {
    pub events: mpsc::Receiver<Event>,
    /// For the emulator's answers, queued behind typed input.
    pub answers: Answers,
}

/// Queues bytes for the pty, counting what waits.
#[derive(Clone)]
pub struct Answers {
    input: mpsc::Sender<Vec<u8>>,
    waiting: Arc<AtomicUsize>,
}

impl Answers {
    /// Queues the emulator's answers; dropped if the program has left
    /// [`INPUT_MAX`] unread (it is not reading what it asked for).
    pub fn send(&self, bytes: Vec<u8>) {
        if bytes.is_empty() || self.waiting.load(Ordering::SeqCst) > INPUT_MAX {
            return;
        }
        self.waiting.fetch_add(bytes.len(), Ordering::SeqCst);
        let _ = self.input.send(bytes);
    }
}

/// How long a pty thread waits before looking whether its terminal closed.
const LOOK_AGAIN: i32 = 200;
/// [`LOOK_AGAIN`], as a time.
pub const LOOK_AGAIN_TIME: Duration = Duration::from_millis(LOOK_AGAIN as u64);

/// Waits until `fd` is ready for `events` or [`LOOK_AGAIN`] ms pass;
/// whether it is (ready, hung up or in error).
fn ready(fd: &impl AsRawFd, events: i16) -> bool {
    let mut p = libc::pollfd { fd: fd.as_raw_fd(), events, revents: 0 };
    // SAFETY: one pollfd, valid for the call.
    let n = unsafe { libc::poll(&mut p, 1, LOOK_AGAIN) };
    n > 0 && p.revents != 0
}

/// The running binary, by the kernel's name for it.
const SELF_EXE: &str = "/proc/self/exe";

/// How long a keeper that kept a terminal may take to hand its pty over
/// to a daemon starting (one after another: a stuck keeper holds up the
/// start only this long).
const ADOPT_WAIT: Duration = Duration::from_secs(2);

/// How long a keeper may take to start its program and hand its pty over.
const KEEPER_WAIT: Duration = Duration::from_secs(10);

/// Opens a pty and runs the spec's program on it, through a keeper
/// ([`super::keeper`]) that outlives this daemon when `keep` names where
/// it waits for the next one.
pub fn spawn(spec: Spec, keep: Option<&Path>) -> Result<(Running, Pipes), ProcError> {
    let orders = keeper::Orders {
        listen: keep.map(Path::to_path_buf),
        cols: spec.cols,
        rows: spec.rows,
        dir: spec.dir.clone(),
        command: spec.command.clone(),
    };
    let keeper_error = |e: std::io::Error| ProcError::Keeper(e.to_string());
    // This very binary, even when a rebuild replaced the file it ran from
    // (the keeper speaks its daemon's protocol).
    let exe = match Path::new(SELF_EXE).exists() {
        true => std::path::PathBuf::from(SELF_EXE),
        false => std::env::current_exe().map_err(keeper_error)?,
    };
    let (ours, theirs) = UnixStream::pair().map_err(keeper_error)?;
    let theirs_fd = theirs.as_raw_fd();
    let mut cmd = std::process::Command::new(exe);
    // Named as what it is in ps; it outlives the daemon's standard error
    // (a pipe to a log a user waits on), so it has none.
    cmd.arg0("apexd").arg(keeper::ARG).args(orders.args());
    cmd.stdin(Stdio::null()).stdout(Stdio::null()).stderr(Stdio::null());
    // SAFETY: setrlimit(2), dup2(2) and fcntl(2) only, which are
    // async-signal-safe, between fork and exec: the socket on DAEMON_FD,
    // open across exec.
    unsafe {
        cmd.pre_exec(move || {
            // The limit the daemon had before it raised its own.
            apex_sys::fds::restore_original()?;
            let r = match theirs_fd == keeper::DAEMON_FD {
                true => libc::fcntl(theirs_fd, libc::F_SETFD, 0),
                false => libc::dup2(theirs_fd, keeper::DAEMON_FD),
            };
            match r {
                -1 => Err(std::io::Error::last_os_error()),
                _ => Ok(()),
            }
        });
    }
    let mut child = cmd.spawn().map_err(keeper_error)?;
    drop(theirs);
    let keeper_pid = child.id();
    // The keeper is this daemon's child until it ends: reaped here.
    std::thread::Builder::new()
        .name("term-keeper".into())
        .spawn(move || {
            let _ = child.wait();
        })
        .map_err(keeper_error)?;
    // A keeper that started but is not taken up leaves nothing running:
    // killed, it lets go of the pty, and the program is hung up on.
    let abandon = |e: ProcError| {
        // SAFETY: kill(2) with plain integers; the keeper is this
        // daemon's unreaped child or being reaped by the thread above.
        unsafe { libc::kill(keeper_pid as i32, libc::SIGKILL) };
        e
    };
    ours.set_read_timeout(Some(KEEPER_WAIT)).map_err(keeper_error).map_err(abandon)?;
    let (line, fd) = fdpass::recv(&ours).map_err(keeper_error).map_err(abandon)?;
    ours.set_read_timeout(None).map_err(keeper_error).map_err(abandon)?;
    let (pid, master) = match (line.split_once(' '), fd) {
        (Some(("pid", pid)), Some(fd)) => (pid.parse().map_err(|_| abandon(ProcError::Keeper(line.clone())))?, fd),
        (Some(("error", why)), _) if why.starts_with("cannot run") => {
            return Err(ProcError::Spawn { command: spec.shown(), why: why.to_string() })
        }
        (Some(("error", why)), _) => return Err(ProcError::Pty(why.to_string())),
        _ => return Err(abandon(ProcError::Keeper(format!("it said {line:?}")))),
    };
    run(pid, master, ours, keep.map(keeper::exit_path)).map_err(abandon)
}

/// Takes up terminal whose keeper waits at `socket` (a daemon before
/// this one started it): `Ok(None)` when its program has ended since
/// (its status, from what the keeper left), `Err` when nobody keeps it.
pub fn adopt(socket: &Path) -> Result<Result<(Running, Pipes), i32>, ProcError> {
    let keeper_error = |e: std::io::Error| ProcError::Keeper(e.to_string());
    let exit_file = keeper::exit_path(socket);
    let dialled = fdpass::short_name(socket).and_then(|(name, _dir)| UnixStream::connect(name));
    let conn = match dialled {
        Ok(c) => c,
        Err(e) => return left_status(&exit_file).map(Err).ok_or_else(|| keeper_error(e)),
    };
    conn.set_read_timeout(Some(ADOPT_WAIT)).map_err(keeper_error)?;
    let (line, fd) = fdpass::recv(&conn).map_err(keeper_error)?;
    conn.set_read_timeout(None).map_err(keeper_error)?;
    match (line.split_once(' '), fd) {
        (Some(("pid", pid)), Some(fd)) => {
            let pid = pid.parse().map_err(|_| ProcError::Keeper(line.clone()))?;
            run(pid, fd, conn, Some(exit_file)).map(Ok)
        }
        // It ended as this daemon asked.
        (Some(("exit", status)), _) => status.parse().map(Err).map_err(|_| ProcError::Keeper(line.clone())),
        _ => Err(ProcError::Keeper(format!("it said {line:?}"))),
    }
}

/// The status a keeper left in `exit_file`, if it did.
fn left_status(exit_file: &Path) -> Option<i32> {
    std::fs::read_to_string(exit_file).ok()?.trim().parse().ok()
}

/// The threads of a terminal whose program `pid` runs on the pty whose
/// master is `master`, its keeper on `keeper`.
fn run(
    pid: u32,
    master: OwnedFd,
    keeper: UnixStream,
    exit_file: Option<PathBuf>,
) -> Result<(Running, Pipes), ProcError> {
    let pty_error = |e: std::io::Error| ProcError::Pty(e.to_string());
    let (read_fd, write_fd) = (master.try_clone().map_err(pty_error)?, master.try_clone().map_err(pty_error)?);
    let (events_tx, events) = mpsc::sync_channel(64);
    let (input, input_rx) = mpsc::channel::<Vec<u8>>();
    let waiting = Arc::new(AtomicUsize::new(0));
    let output = Arc::new(Output::default());
    let closing = Arc::new(AtomicBool::new(false));
    let spawn_error = |e: std::io::Error| ProcError::Pty(e.to_string());

    let reported_cwd = Arc::new(Mutex::new(None));
    let (tx, out, shut, cwd) = (events_tx.clone(), output.clone(), closing.clone(), reported_cwd.clone());
    std::thread::Builder::new()
        .name(format!("term-read-{pid}"))
        .spawn(move || {
            let mut buf = vec![0u8; 64 << 10];
            let mut pty = std::fs::File::from(read_fd);
            let mut osc7 = super::cwd::Osc7::default();
            while !shut.load(Ordering::SeqCst) {
                if !ready(&pty, libc::POLLIN) {
                    continue;
                }
                match pty.read(&mut buf) {
                    Ok(0) | Err(_) => break,
                    Ok(n) => {
                        if let Some(dir) = osc7.scan(&buf[..n]) {
                            *cwd.lock().expect("reported cwd") = Some(dir);
                        }
                        out.push(&buf[..n]);
                        if tx.send(Event::Output(buf[..n].to_vec())).is_err() {
                            break;
                        }
                    }
                }
            }
            out.end();
            let _ = tx.send(Event::Eof);
        })
        .map_err(spawn_error)?;
    let (w, shut) = (waiting.clone(), closing.clone());
    std::thread::Builder::new()
        .name(format!("term-write-{pid}"))
        .spawn(move || {
            let mut pty = std::fs::File::from(write_fd);
            'input: while !shut.load(Ordering::SeqCst) {
                let bytes = match input_rx.recv_timeout(std::time::Duration::from_millis(LOOK_AGAIN as u64)) {
                    Ok(b) => b,
                    Err(mpsc::RecvTimeoutError::Timeout) => continue,
                    Err(mpsc::RecvTimeoutError::Disconnected) => break,
                };
                // A piece at a time, each when the pty has room, so a
                // program that stops reading never holds this thread past
                // its terminal's close.
                for piece in bytes.chunks(512) {
                    while !ready(&pty, libc::POLLOUT) {
                        if shut.load(Ordering::SeqCst) {
                            break 'input;
                        }
                    }
                    if pty.write_all(piece).is_err() {
                        break 'input;
                    }
                }
                w.fetch_sub(bytes.len(), Ordering::SeqCst);
            }
        })
        .map_err(spawn_error)?;
    let (tx, reaped) = (events_tx.clone(), Arc::new(AtomicBool::new(false)));
    let r = reaped.clone();
    let hang_up = keeper.try_clone().map_err(spawn_error)?;
    std::thread::Builder::new()
        .name(format!("term-wait-{pid}"))
        .spawn(move || {
            // The keeper says how the program ended; a keeper gone without
            // a word may have left the status in its file, else nothing
            // says how the program ends (its keeper was killed).
            let status = loop {
                match fdpass::recv(&keeper) {
                    Ok((line, _)) => match line.strip_prefix("exit ").and_then(|s| s.parse().ok()) {
                        Some(status) => break status,
                        None => continue,
                    },
                    Err(_) => {
                        break exit_file.as_deref().and_then(left_status).unwrap_or(apex_core::term::ENDED_WITH_DAEMON)
                    }
                }
            };
            r.store(true, Ordering::SeqCst);
            let _ = tx.send(Event::Exited(status));
        })
        .map_err(spawn_error)?;
    let answers = Answers { input: input.clone(), waiting: waiting.clone() };
    let running = Running {
        pid,
        master,
        keeper: hang_up,
        reported_cwd,
        input,
        waiting,
        output,
        reaped,
        closing,
        events: Mutex::new(Some(events_tx)),
    };
    Ok((running, Pipes { events, answers }))
}

impl Running {
    /// Types `bytes` into the terminal. `term` names it in errors.
    pub fn input(&self, term: u64, bytes: Vec<u8>) -> Result<(), ProcError> {
        let waiting = self.waiting.load(Ordering::SeqCst);
        if waiting + bytes.len() > INPUT_MAX && waiting > 0 {
            return Err(ProcError::InputFull { term, waiting });
        }
        self.waiting.fetch_add(bytes.len(), Ordering::SeqCst);
        self.input.send(bytes).map_err(|_| ProcError::Exited(term))
    }

    /// Resizes the pty (the program gets SIGWINCH) and tells the driver;
    /// the returned receiver answers once the driver has put the new
    /// screen in the shard. `Ok(None)`: the driver's queue is full (a
    /// flood); try again shortly (never blocks the caller).
    pub fn resize(
        &self,
        term: u64,
        cols: u16,
        rows: u16,
    ) -> Result<Option<tokio::sync::oneshot::Receiver<()>>, ProcError> {
        let events = self.events.lock().expect("term events").clone().ok_or(ProcError::Exited(term))?;
        let size = libc::winsize { ws_row: rows, ws_col: cols, ws_xpixel: 0, ws_ypixel: 0 };
        // SAFETY: TIOCSWINSZ with a winsize that lives for the call.
        if unsafe { libc::ioctl(self.master.as_raw_fd(), libc::TIOCSWINSZ, &size) } != 0 {
            return Err(ProcError::Resize(std::io::Error::last_os_error().to_string()));
        }
        let (done, rx) = tokio::sync::oneshot::channel();
        match events.try_send(Event::Resize(cols, rows, done)) {
            Ok(()) => Ok(Some(rx)),
            Err(mpsc::TrySendError::Full(_)) => Ok(None),
            Err(mpsc::TrySendError::Disconnected(_)) => Err(ProcError::Exited(term)),
        }
    }

    /// The terminal's foreground process group (the program's own if the
    /// pty names none).
    fn foreground(&self) -> Option<i32> {
        // SAFETY: tcgetpgrp(3) on a descriptor this holds.
        match unsafe { libc::tcgetpgrp(self.master.as_raw_fd()) } {
            group if group > 0 => Some(group),
            _ => None,
        }
    }

    /// Makes full-screen programs draw their whole screen again, as tmux
    /// does when a client attaches: the pty a row shorter and back (two
    /// SIGWINCHes with a real change of size), after a daemon took up a
    /// terminal whose last output the one before it may not have logged.
    pub fn redraw(&self, cols: u16, rows: u16) {
        if self.reaped.load(Ordering::SeqCst) || rows < 2 {
            return;
        }
        for rows in [rows - 1, rows] {
            let size = libc::winsize { ws_row: rows, ws_col: cols, ws_xpixel: 0, ws_ypixel: 0 };
            // SAFETY: TIOCSWINSZ with a winsize that lives for the call.
            unsafe { libc::ioctl(self.master.as_raw_fd(), libc::TIOCSWINSZ, &size) };
        }
    }

    /// Reads no more of the program's output (what it writes waits in the
    /// pty for the next daemon): a clean stop, before the last updates
    /// are logged.
    pub fn stop_reading(&self) {
        self.closing.store(true, Ordering::SeqCst);
    }

    /// The driver has ended: resizes are refused from now on.
    pub fn driver_ended(&self) {
        self.events.lock().expect("term events").take();
    }

    /// The current directory of what runs in the terminal's foreground
    /// (the interactive shell, when it waits for a command): where a
    /// relative name in its output is. Linux's `/proc`; where that cannot
    /// be read (another user's program, no `/proc`, the program gone),
    /// the last directory the program reported with OSC 7.
    pub fn cwd(&self) -> Option<std::path::PathBuf> {
        let reported = || self.reported_cwd.lock().expect("reported cwd").clone();
        if self.reaped.load(Ordering::SeqCst) {
            return reported();
        }
        let group = self.foreground().unwrap_or(self.pid as i32);
        std::fs::read_link(format!("/proc/{group}/cwd")).ok().or_else(reported)
    }

    /// Sends `signal` to the foreground process group of the terminal
    /// (the program's own group if the pty names none).
    pub fn signal(&self, term: u64, signal: i32) -> Result<(), ProcError> {
        if self.reaped.load(Ordering::SeqCst) {
            return Err(ProcError::Exited(term));
        }
        let Some(group) = self.foreground() else {
            // Only the keeper knows the program's own group is still its.
            return fdpass::send(&self.keeper, &format!("{} {signal}", keeper::SIGNAL), None)
                .map_err(ProcError::Signal);
        };
        // SAFETY: kill(2) with plain integers; the pty names the group now.
        match unsafe { libc::kill(-group, signal) } {
            0 => Ok(()),
            _ => Err(ProcError::Signal(std::io::Error::last_os_error())),
        }
    }

    /// Ends the program and whatever runs in the foreground (SIGKILL).
    pub fn kill(&self, term: u64) -> Result<(), ProcError> {
        self.signal(term, libc::SIGKILL)?;
        let _ = fdpass::send(&self.keeper, &format!("{} {}", keeper::SIGNAL, libc::SIGKILL), None);
        Ok(())
    }

    /// Whether the program has exited (and been reaped).
    pub fn exited(&self) -> bool {
        self.reaped.load(Ordering::SeqCst)
    }
}

/// Closing a terminal: its program and foreground group get SIGKILL (as
/// tmux's kill-pane ends a pane), its pty threads let go of the pty, and
/// `cons` readers get end of file. A background job the program left
/// keeps running, as it would after any terminal closed.
impl Drop for Running {
    fn drop(&mut self) {
        // Nobody will ask the keeper how the program ended. The keeper
        // ends the program's own group, told after `close` on the same
        // socket, so it reads `close` before that exit and leaves no
        // status behind; a foreground job of another group is ended from
        // here.
        let _ = fdpass::send(&self.keeper, keeper::CLOSE, None);
        let _ = fdpass::send(&self.keeper, &format!("{} {}", keeper::SIGNAL, libc::SIGKILL), None);
        if let Some(group) = self.foreground().filter(|g| *g != self.pid as i32) {
            if !self.reaped.load(Ordering::SeqCst) {
                // SAFETY: kill(2) with plain integers; the pty names the group now.
                unsafe { libc::kill(-group, libc::SIGKILL) };
            }
        }
        // An ephemeral terminal's keeper ends when its daemon hangs up.
        let _ = self.keeper.shutdown(std::net::Shutdown::Both);
        self.closing.store(true, Ordering::SeqCst);
        self.output.end();
    }
}
