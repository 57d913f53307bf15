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
use portable_pty::{CommandBuilder, MasterPty, PtySize};
use std::io::{Read, Write};
use std::os::fd::{AsRawFd, BorrowedFd};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};

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
        self.command.clone().unwrap_or_else(default_shell)
    }
}

fn default_shell() -> String {
    std::env::var("SHELL").ok().filter(|s| !s.is_empty()).unwrap_or_else(|| "/bin/sh".into())
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
    #[error("signal: {0}")]
    Signal(std::io::Error),
}

/// A running terminal, as its session holds it. Dropping it ends the
/// program (SIGHUP, then SIGKILL to its process group).
pub struct Running {
    pub pid: u32,
    master: Mutex<Box<dyn MasterPty + Send>>,
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

/// Waits until `fd` is ready for `events` or [`LOOK_AGAIN`] ms pass;
/// whether it is (ready, hung up or in error).
fn ready(fd: &impl AsRawFd, events: i16) -> bool {
    let mut p = libc::pollfd { fd: fd.as_raw_fd(), events, revents: 0 };
    // SAFETY: one pollfd, valid for the call.
    let n = unsafe { libc::poll(&mut p, 1, LOOK_AGAIN) };
    n > 0 && p.revents != 0
}

/// The program ends (SIGKILL, then reaped) unless `disarm`ed: a spawn
/// that fails halfway leaves nothing running.
struct Started(Option<u32>);

impl Started {
    fn disarm(&mut self) -> u32 {
        self.0.take().unwrap_or(0)
    }
}

impl Drop for Started {
    fn drop(&mut self) {
        if let Some(pid) = self.0 {
            // SAFETY: kill(2) with plain integers.
            unsafe { libc::kill(pid as i32, libc::SIGKILL) };
            std::thread::spawn(move || wait(pid));
        }
    }
}

/// Opens a pty and runs the spec's program on it.
pub fn spawn(spec: Spec) -> Result<(Running, Pipes), ProcError> {
    let size = PtySize { rows: spec.rows, cols: spec.cols, pixel_width: 0, pixel_height: 0 };
    let pair = portable_pty::native_pty_system().openpty(size).map_err(|e| ProcError::Pty(e.to_string()))?;
    let mut cmd = match &spec.command {
        Some(c) => {
            let mut cmd = CommandBuilder::new("/bin/sh");
            cmd.args(["-c", c]);
            cmd
        }
        None => CommandBuilder::new(default_shell()),
    };
    cmd.cwd(&spec.dir);
    cmd.env("TERM", "xterm-256color");
    cmd.env("COLORTERM", "truecolor");
    let child =
        pair.slave.spawn_command(cmd).map_err(|e| ProcError::Spawn { command: spec.shown(), why: e.to_string() })?;
    // Only the program holds the pty's other end: its exit closes it.
    drop(pair.slave);
    let mut started = Started(child.process_id());
    // Waited for with waitpid, which keeps the signal's number.
    drop(child);
    let pty_error = |e: std::io::Error| ProcError::Pty(e.to_string());
    let master_fd = pair.master.as_raw_fd().ok_or_else(|| ProcError::Pty("the pty has no descriptor".into()))?;
    // SAFETY: the master's descriptor is open for as long as `pair.master`.
    let borrowed = unsafe { BorrowedFd::borrow_raw(master_fd) };
    let (read_fd, write_fd) =
        (borrowed.try_clone_to_owned().map_err(pty_error)?, borrowed.try_clone_to_owned().map_err(pty_error)?);
    let (events_tx, events) = mpsc::sync_channel(64);
    let (input, input_rx) = mpsc::channel::<Vec<u8>>();
    let waiting = Arc::new(AtomicUsize::new(0));
    let output = Arc::new(Output::default());
    let closing = Arc::new(AtomicBool::new(false));
    let pid = started.0.unwrap_or(0);
    let spawn_error = |e: std::io::Error| ProcError::Pty(e.to_string());

    let (tx, out, shut) = (events_tx.clone(), output.clone(), closing.clone());
    std::thread::Builder::new()
        .name(format!("term-read-{pid}"))
        .spawn(move || {
            let mut buf = vec![0u8; 64 << 10];
            let mut pty = std::fs::File::from(read_fd);
            while !shut.load(Ordering::SeqCst) {
                if !ready(&pty, libc::POLLIN) {
                    continue;
                }
                match pty.read(&mut buf) {
                    Ok(0) | Err(_) => break,
                    Ok(n) => {
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
    std::thread::Builder::new()
        .name(format!("term-wait-{pid}"))
        .spawn(move || {
            let status = wait(pid);
            r.store(true, Ordering::SeqCst);
            let _ = tx.send(Event::Exited(status));
        })
        .map_err(spawn_error)?;
    // From here the waiter reaps it.
    let pid = started.disarm();
    let answers = Answers { input: input.clone(), waiting: waiting.clone() };
    let running = Running {
        pid,
        master: Mutex::new(pair.master),
        input,
        waiting,
        output,
        reaped,
        closing,
        events: Mutex::new(Some(events_tx)),
    };
    Ok((running, Pipes { events, answers }))
}

/// Waits for process `pid` and says how it ended.
fn wait(pid: u32) -> i32 {
    let mut status = 0;
    loop {
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
        let size = PtySize { rows, cols, pixel_width: 0, pixel_height: 0 };
        self.master.lock().expect("term master").resize(size).map_err(|e| ProcError::Resize(e.to_string()))?;
        let (done, rx) = tokio::sync::oneshot::channel();
        match events.try_send(Event::Resize(cols, rows, done)) {
            Ok(()) => Ok(Some(rx)),
            Err(mpsc::TrySendError::Full(_)) => Ok(None),
            Err(mpsc::TrySendError::Disconnected(_)) => Err(ProcError::Exited(term)),
        }
    }

    /// The driver has ended: resizes are refused from now on.
    pub fn driver_ended(&self) {
        self.events.lock().expect("term events").take();
    }

    /// The current directory of what runs in the terminal's foreground
    /// (the interactive shell, when it waits for a command): where a
    /// relative name in its output is. Linux's `/proc`; none elsewhere
    /// or once the program is gone.
    pub fn cwd(&self) -> Option<std::path::PathBuf> {
        if self.reaped.load(Ordering::SeqCst) {
            return None;
        }
        let group = self.master.lock().expect("term master").process_group_leader().unwrap_or(self.pid as i32);
        std::fs::read_link(format!("/proc/{group}/cwd")).ok()
    }

    /// Sends `signal` to the foreground process group of the terminal
    /// (the program's own group if the pty names none).
    pub fn signal(&self, term: u64, signal: i32) -> Result<(), ProcError> {
        if self.reaped.load(Ordering::SeqCst) {
            return Err(ProcError::Exited(term));
        }
        let group = self.master.lock().expect("term master").process_group_leader().unwrap_or(self.pid as i32);
        match unsafe { libc::kill(-group, signal) } {
            0 => Ok(()),
            _ => Err(ProcError::Signal(std::io::Error::last_os_error())),
        }
    }

    /// Ends the program and whatever runs in the foreground (SIGKILL).
    pub fn kill(&self, term: u64) -> Result<(), ProcError> {
        self.signal(term, libc::SIGKILL)?;
        if !self.reaped.load(Ordering::SeqCst) {
            // SAFETY: kill(2) with plain integers.
            unsafe { libc::kill(-(self.pid as i32), libc::SIGKILL) };
        }
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
        let _ = self.kill(0);
        self.closing.store(true, Ordering::SeqCst);
        self.output.end();
    }
}
