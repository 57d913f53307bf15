//! An Edit the UI runs on a thread of its own (core's
//! `Host::run_apart`), so that the UI goes on drawing and typing while
//! it runs. Its commands go over the texts as they were when it was
//! executed; what they did is proposed from the same thread, a part at a
//! time, through a host of its own on the UI's link (`UiHost::worker`),
//! moved by whatever was typed meanwhile, each part holding the link only
//! while it applies. The row tag says what runs; `Kill Edit`, `Kill`, or
//! B2 on the row tag's `Kill` ends it with the text as it was (acme has
//! no way to interrupt an Edit).

use apex_core::exec::ExecError;
use apex_core::WindowId;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

/// The number a running Edit is listed by among the UI's jobs: above
/// any pid, and above the daemon's own jobs' numbers, which count up
/// from 2^32.
pub const EDIT_JOB: u64 = u64::MAX;

/// How much of a running Edit's command the row tag shows.
const SHOWN: usize = 40;

/// The label's last word, which B2 kills the running Edit with.
pub const KILL: &str = "Kill";

/// How an Edit ended, for the UI's thread to carry on from.
pub struct Ended {
    /// What it said went wrong (killed, refused), for `+Errors`.
    pub result: Result<(), ExecError>,
    /// The last pattern it leaves (`//` in the next Edit).
    pub last_pattern: Option<String>,
    /// Windows it showed text in that are not laid out yet (`B`).
    pub unshown: Vec<WindowId>,
    /// The link's events its waits took but did not want.
    pub events: Vec<apex_link::Event>,
}

/// An Edit running on its thread.
pub struct EditJob {
    command: String,
    stop: Arc<AtomicBool>,
    /// The process group of the pipe the Edit waits on, while it runs.
    pipe_group: Arc<std::sync::Mutex<Option<u32>>>,
    /// How it ended, put here before the UI is woken.
    done: Arc<std::sync::Mutex<Option<Ended>>>,
}

/// Puts how an Edit ended where the UI looks, then wakes the UI; an Edit
/// that panicked is said to have failed.
struct Finish {
    done: Arc<std::sync::Mutex<Option<Ended>>>,
    wake: Arc<tokio::sync::Notify>,
}

impl Finish {
    fn put(&self, ended: Ended) {
        *self.done.lock().unwrap_or_else(std::sync::PoisonError::into_inner) = Some(ended);
    }
}

impl Drop for Finish {
    fn drop(&mut self) {
        if std::thread::panicking() {
            self.put(Ended {
                result: Err(ExecError::Host(
                    "Edit: it stopped on an internal error (a bug); Undo takes back any part it made".into(),
                )),
                last_pattern: None,
                unshown: Vec::new(),
                events: Vec::new(),
            });
        }
        self.wake.notify_one();
    }
}

impl EditJob {
    /// Starts `work` (an Edit's commands run and its changes proposed,
    /// through a worker host whose `stop` and `pipe_group` these are) on
    /// a thread of its own; `wake` is told when it ends.
    pub fn start(
        command: String,
        stop: Arc<AtomicBool>,
        pipe_group: Arc<std::sync::Mutex<Option<u32>>>,
        wake: Arc<tokio::sync::Notify>,
        work: impl FnOnce() -> Ended + Send + 'static,
    ) -> std::io::Result<EditJob> {
        let done: Arc<std::sync::Mutex<Option<Ended>>> = Arc::default();
        let finish = Finish { done: done.clone(), wake };
        std::thread::Builder::new().name("apex-ui Edit".into()).spawn(move || finish.put(work()))?;
        Ok(EditJob { command, stop, pipe_group, done })
    }

    /// The command it runs, as given.
    pub fn command(&self) -> &str {
        &self.command
    }

    /// Tells it to stop: its commands end at their next look, a pipe it
    /// waits on is killed, and what parts of changes it made are taken
    /// back.
    pub fn kill(&self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(pid) = *self.pipe_group.lock().unwrap_or_else(std::sync::PoisonError::into_inner) {
            kill_group(pid);
        }
    }

    /// How it ended, once it has; None while it runs.
    pub fn ended(&mut self) -> Option<Ended> {
        self.done.lock().unwrap_or_else(std::sync::PoisonError::into_inner).take()
    }

    /// What the row tag says at its right while it runs: the command,
    /// cut short, and `Kill`, which B2 ends it with.
    pub fn label(&self) -> String {
        let mut shown: String = self.command.chars().take(SHOWN).collect();
        if shown.len() < self.command.len() {
            shown.push('…');
        }
        format!(" Edit {} {KILL} ", shown.replace(['\n', '\t'], " "))
    }
}

/// Ends the process group `pid` leads (an Edit's pipe and what it
/// started).
pub fn kill_group(pid: u32) {
    // SAFETY: kill(2) with plain integers.
    unsafe { libc::kill(-(pid as i32), libc::SIGKILL) };
}
