//! An Edit the UI runs on a thread of its own (core's
//! `Host::run_apart`), so that the UI goes on drawing and typing while
//! it runs. Its commands go over the texts as they were when it was
//! executed; what they did is proposed from the same thread, a part at a
//! time, through a host of its own on the UI's link ([`UiHost::worker`]),
//! moved by whatever was typed meanwhile, each part holding the link only
//! while it applies. The row tag says what runs; `Kill Edit`, `Kill`, or
//! B2 on the row tag's `Kill` ends it with the text as it was (acme has
//! no way to interrupt an Edit).

use crate::host::UiHost;
use apex_core::exec::{ExecError, PreparedEdit};
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
    thread: Option<std::thread::JoinHandle<Ended>>,
}

impl EditJob {
    /// Starts `edit` on a thread of its own, through `host` (a worker
    /// host whose `stop` is the job's); `wake` is told when it ends.
    pub fn start(edit: PreparedEdit, mut host: UiHost, wake: Arc<tokio::sync::Notify>) -> std::io::Result<EditJob> {
        let command = edit.command().to_string();
        let stop = host.stop.clone();
        // Woken whether the Edit ends or panics.
        struct WakeOnEnd(Arc<tokio::sync::Notify>);
        impl Drop for WakeOnEnd {
            fn drop(&mut self) {
                self.0.notify_one();
            }
        }
        let thread = std::thread::Builder::new().name("apex-ui Edit".into()).spawn(move || {
            let _wake = WakeOnEnd(wake);
            let last = apex_core::exec::Host::last_pattern(&host);
            let ran = edit.run(&mut host, last);
            let result = apex_core::exec::finish_edit(&mut host, ran);
            Ended {
                result,
                last_pattern: apex_core::exec::Host::last_pattern(&host),
                unshown: std::mem::take(&mut host.unshown),
                events: std::mem::take(&mut host.events),
            }
        })?;
        Ok(EditJob { command, stop, thread: Some(thread) })
    }

    /// The command it runs, as given.
    pub fn command(&self) -> &str {
        &self.command
    }

    /// Tells it to stop: its commands end at their next look, and what
    /// parts of changes it made are taken back.
    pub fn kill(&self) {
        self.stop.store(true, Ordering::Relaxed);
    }

    /// How it ended, once it has; None while it runs.
    pub fn ended(&mut self) -> Option<Ended> {
        if !self.thread.as_ref().is_some_and(|t| t.is_finished()) {
            return None;
        }
        Some(self.thread.take()?.join().unwrap_or_else(|_| Ended {
            result: Err(ExecError::Host("Edit: it failed as it ran; Undo takes back what it made".into())),
            last_pattern: None,
            unshown: Vec::new(),
            events: Vec::new(),
        }))
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
