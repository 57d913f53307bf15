//! The daemon as core's [`exec::Host`]: acme's built-ins, B2 commands and
//! B3 looks that arrive through an acme window's event file run here,
//! headless, by the same rules a UI runs them by (`apex_core::exec`).
//!
//! A built-in runs on a blocking thread (Edit's pipes and file reads
//! block); each proposal it makes goes through `Daemon::propose` and waits
//! to be sequenced, so the next step sees its effect. The state is read
//! under its session's lock, held only while the built-in looks.

use crate::daemon::Daemon;
use crate::error::Error;
use crate::host;
use crate::registry::Shared;
use apex_core::ecmd::{EditFile, Pipes};
use apex_core::exec::{self, ExecError, Host};
use apex_core::propose::Applied;
use apex_core::{BufferId, Proposal, State, WindowId};
use std::ops::Deref;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

/// The daemon's side of one built-in's run, in session `n`.
pub struct DaemonHost {
    daemon: Daemon,
    n: u64,
    /// Session `n`, whose lock `state` takes.
    session: Shared,
    rt: tokio::runtime::Handle,
    /// The window the command came from, for the acme log's get/put.
    window: Option<WindowId>,
    /// The scope of the request that runs the command: it runs on a
    /// thread of its own, outside the request's task.
    scope: crate::access::Scope,
    /// Set by a kill of the job this command runs as (`Kill Edit`).
    stop: Option<Arc<AtomicBool>>,
    /// A file's read begun ahead, for the Get of that file.
    ahead: Option<host::ahead::Ahead>,
}

/// The session's state under the session's lock (other sessions go on).
pub struct StateGuard<'a>(crate::session::Locked<'a>);

impl Deref for StateGuard<'_> {
    type Target = State;
    fn deref(&self) -> &State {
        &self.0.view().state
    }
}

/// The first `most` bytes (whole runes) of `what`, formatting no
/// further: the description of an Edit's part names its first changes,
/// not all of its thousands.
fn capped(most: usize, what: std::fmt::Arguments<'_>) -> String {
    struct Capped(String, usize);
    impl std::fmt::Write for Capped {
        fn write_str(&mut self, s: &str) -> std::fmt::Result {
            for c in s.chars() {
                if self.0.len() + c.len_utf8() > self.1 {
                    return Err(std::fmt::Error);
                }
                self.0.push(c);
            }
            Ok(())
        }
    }
    let mut out = Capped(String::new(), most);
    let _ = std::fmt::write(&mut out, what);
    out.0
}

/// How long an Edit waits before each of its parts after the first, when
/// someone is waiting for the session's lock.
const LET_IN: std::time::Duration = std::time::Duration::from_micros(200);

/// How many puts of a Putall run at once.
const PUTS_AT_ONCE: usize = 8;

fn host_err(e: impl std::fmt::Display) -> ExecError {
    ExecError::Host(e.to_string())
}

impl DaemonHost {
    /// Runs `command` as a job of the session's (listed among its
    /// processes, stopped by a kill) when it is an Edit: the one built-in
    /// that may run long.
    pub fn as_job(&mut self, command: &str) -> Option<crate::host::Job> {
        if apex_core::look::split_command(command).0 != "Edit" {
            return None;
        }
        let (job, stop) = crate::host::Job::start(&self.daemon, self.n, self.window, command.trim());
        self.stop = Some(stop);
        Some(job)
    }

    /// The next Get of `ahead`'s file takes its text from it.
    pub fn read_ahead(&mut self, ahead: Option<host::ahead::Ahead>) {
        self.ahead = ahead;
    }

    fn block<T, E: std::fmt::Display>(
        &self,
        f: impl std::future::Future<Output = Result<T, E>>,
    ) -> Result<T, ExecError> {
        self.rt.block_on(crate::access::within(self.scope, f)).map_err(host_err)
    }

    /// Refuses what the request's scope does not allow.
    fn full(&self, what: &str) -> Result<(), ExecError> {
        crate::access::require_full_in(self.scope, what).map_err(host_err)
    }

    fn log(&self, buffer: BufferId, op: &'static str) {
        let Some(window) = self.window else { return };
        let _ = self.daemon.change(self.n, |s, _| {
            let number = s.view().state.layout.numbers.get(&window).map(|a| a.0);
            let shown = s.view().state.window(window).is_ok_and(|w| w.body == buffer);
            let name = s.view().state.buffer(buffer).map(|b| b.name.clone()).unwrap_or_default();
            if let (Some(number), true) = (number, shown) {
                s.acme_mut().log(number, op, name);
            }
        });
    }
}

impl Pipes for DaemonHost {
    fn run(
        &mut self,
        command: &str,
        input: Option<&str>,
        file: &EditFile,
    ) -> Result<String, apex_core::ecmd::PipeError> {
        crate::access::require_full_in(self.scope, "an Edit pipe (running a command)")
            .map_err(|e| apex_core::ecmd::PipeError::System(e.to_string()))?;
        host::edit_pipe(&self.daemon, self.n, self.window, command, input, file)
    }

    fn load(&mut self, path: &str) -> Result<Vec<u8>, apex_core::ecmd::PipeError> {
        crate::access::require_full_in(self.scope, "Edit's e and r (reading the daemon's files)")
            .map_err(|e| apex_core::ecmd::PipeError::System(e.to_string()))?;
        apex_sys::files::read_for_edit(path)
    }

    fn save(&mut self, path: &str, bytes: &[u8]) -> Result<(), apex_core::ecmd::PipeError> {
        crate::access::require_full_in(self.scope, "Edit's w (writing the daemon's files)")
            .map_err(|e| apex_core::ecmd::PipeError::System(e.to_string()))?;
        apex_sys::files::write_for_edit(path, bytes)
    }

    fn interrupted(&mut self) -> bool {
        self.stop.as_ref().is_some_and(|s| s.load(Ordering::Relaxed))
    }
}

impl Host for DaemonHost {
    fn state(&self) -> Result<impl Deref<Target = State> + '_, ExecError> {
        // Still in the registry: a deleted session's state is not shown.
        self.daemon.session(self.n).map_err(host_err)?;
        Ok(StateGuard(self.session.lock().expect("session lock")))
    }

    fn propose(&mut self, proposal: Proposal) -> Result<Applied, ExecError> {
        if matches!(proposal, Proposal::SplicesMore { .. }) && self.session.others_waiting() {
            // An Edit's parts come back to back, each under the session's
            // lock, which is not fair: other clients' requests waiting on
            // it are let in between them (and with no one waiting, the
            // next part goes at once: a whole-file Edit has hundreds).
            std::thread::sleep(LET_IN);
        }
        let request = capped(120, format_args!("acme exec {proposal:?}"));
        self.block(self.daemon.propose(self.n, &request, proposal))
    }

    fn get(&mut self, buffer: BufferId, file: Option<&str>) -> Result<(), ExecError> {
        let file = file.map(str::to_string);
        let reading = self.ahead.take().map_or(host::Reading::Here, host::Reading::Ahead);
        self.block(host::acme_get(&self.daemon, self.n, buffer, file, reading))?;
        self.log(buffer, "get");
        Ok(())
    }

    fn put(&mut self, buffer: BufferId, file: Option<&str>) -> Result<(), ExecError> {
        self.block(host::put(&self.daemon, self.n, buffer, None, file.map(str::to_string)))?;
        self.log(buffer, "put");
        Ok(())
    }

    /// Side by side, [`PUTS_AT_ONCE`] at a time: each put's durable
    /// write waits on the disk (its file's sync, the directory's), and
    /// the waits of many overlap where one after another they add up.
    /// Buffers that name one file are put in turn, in their order, so
    /// the last one's text is the file's, as one after another.
    fn put_each(&mut self, buffers: &[BufferId]) -> Vec<Result<(), ExecError>> {
        let names: Vec<String> = match self.state() {
            Ok(st) => buffers.iter().map(|b| st.buffer(*b).map(|b| b.name.clone()).unwrap_or_default()).collect(),
            Err(e) => return buffers.iter().map(|_| Err(e.clone())).collect(),
        };
        let round_of = exec::put_rounds(&names);
        let (daemon, n, scope) = (self.daemon.clone(), self.n, self.scope);
        let mut out: Vec<Option<Result<(), ExecError>>> = buffers.iter().map(|_| None).collect();
        for round in 0..=round_of.iter().copied().max().unwrap_or(0) {
            let mut next = buffers.iter().copied().enumerate().filter(|(i, _)| round_of[*i] == round);
            self.rt.block_on(async {
                let mut puts = tokio::task::JoinSet::new();
                loop {
                    while puts.len() < PUTS_AT_ONCE {
                        let Some((i, b)) = next.next() else { break };
                        let daemon = daemon.clone();
                        let put = async move { host::put(&daemon, n, b, None, None).await.map_err(host_err) };
                        puts.spawn(crate::access::within(scope, async move { (i, put.await) }));
                    }
                    match puts.join_next().await {
                        Some(Ok((i, done))) => out[i] = Some(done),
                        // Its outcome stays none, said below.
                        Some(Err(e)) => tracing::error!("a put panicked: {e}"),
                        None => break,
                    }
                }
            });
        }
        let out: Vec<_> = buffers
            .iter()
            .zip(out)
            .map(|(b, done)| {
                done.unwrap_or_else(|| Err(host_err(format!("put of buffer {} failed inside apexd", b.0))))
            })
            .collect();
        for (&b, done) in buffers.iter().zip(&out) {
            if done.is_ok() {
                self.log(b, "put");
            }
        }
        out
    }

    fn start(&mut self, dir: Option<&str>, command: &str, window: Option<WindowId>) -> Result<(), ExecError> {
        let dir = host::run_dir(dir);
        let window = window.and_then(|w| self.state().ok()?.layout.numbers.get(&w).copied());
        let env = host::CommandEnv { window, font: None };
        self.block(host::exec(&self.daemon, self.n, &dir, command, &env)).map(|_| ())
    }

    fn kill(&mut self, pid: u64) -> Result<(), ExecError> {
        self.full("Kill")?;
        host::kill(&self.daemon, self.n, pid).map_err(host_err)
    }

    fn close_term(&mut self, term: apex_core::TermId) -> Result<(), ExecError> {
        self.full("a terminal")?;
        crate::term::drive::close(&self.daemon, self.n, term).map_err(host_err)
    }

    fn start_term(&mut self, dir: Option<&str>, command: Option<&str>) -> Result<(), ExecError> {
        let spec = crate::session::ctl::term_spec(dir, command);
        self.block(crate::term::drive::start_shown(&self.daemon, self.n, spec)).map(|_| ())
    }

    fn find_text(&self, text: &apex_core::text::Text, needle: &str, from: u64) -> Option<(u64, u64)> {
        apex_sys::search::find_next(text, needle, from)
    }

    fn exists(&mut self, path: &str) -> bool {
        // A scope that may not read the daemon's files learns nothing of
        // them either: B3 on a name searches for it rather than make a
        // window the file is then refused to.
        self.scope == crate::access::Scope::Full && Path::new(path).exists()
    }

    fn read_file(&mut self, path: &str) -> Result<Vec<u8>, ExecError> {
        self.full("Load (reading the daemon's files)")?;
        apex_sys::files::read_file(path).map_err(|e| host_err(format!("can't open load file {path}: {e}")))
    }

    fn write_file(&mut self, path: &str, bytes: &[u8]) -> Result<(), ExecError> {
        self.full("Dump (writing the daemon's files)")?;
        use std::os::unix::fs::OpenOptionsExt;
        let write = || -> std::io::Result<()> {
            let mut f = std::fs::OpenOptions::new().write(true).create(true).truncate(true).mode(0o600).open(path)?;
            std::io::Write::write_all(&mut f, bytes)
        };
        write().map_err(|e| host_err(format!("can't open {path}: {e}")))
    }

    fn home(&self) -> Option<String> {
        apex_sys::machine::home()
    }

    fn cwd(&self) -> String {
        apex_sys::machine::cwd()
    }

    fn exit(&mut self, abort: bool) -> Result<(), ExecError> {
        let word = if abort { "Abort" } else { "Exit" };
        let note =
            format!("{word}: apexd has no window to close; the session goes on (a UI's {word} closes that UI)\n");
        exec::warn(self, self.window, &note)
    }

    fn last_pattern(&self) -> Option<String> {
        self.session.lock().expect("session lock").last_regex().map(str::to_string)
    }

    fn set_last_pattern(&mut self, pattern: Option<String>) {
        self.session.lock().expect("session lock").set_last_regex(pattern);
    }
}

/// A command that ran this long may have freed much: the heap is looked
/// at after it ([`Daemon::give_back_when_still`]).
const LONG_COMMAND: std::time::Duration = std::time::Duration::from_millis(50);

impl Daemon {
    /// Runs `f` with the daemon as the host, off the async threads.
    pub async fn with_host<R: Send + 'static>(
        &self,
        n: u64,
        window: Option<WindowId>,
        f: impl FnOnce(&mut DaemonHost) -> Result<R, ExecError> + Send + 'static,
    ) -> Result<R, Error> {
        let session = self.session(n)?;
        let rt = tokio::runtime::Handle::current();
        let scope = crate::access::current();
        let mut h = DaemonHost { daemon: self.clone(), n, session, rt, window, scope, stop: None, ahead: None };
        let done = tokio::task::spawn_blocking(move || {
            let started = std::time::Instant::now();
            let done = f(&mut h);
            // What a long command freed (a whole-file Edit's changes, its
            // Undo) is not kept resident for the next one; looked at once
            // the daemon is still, and not after every short one (it
            // counts malloc's free chunks under its lock). Here, not after
            // the await: a client gone meanwhile drops that.
            if started.elapsed() >= LONG_COMMAND {
                h.daemon.give_back_when_still();
            }
            drop(h);
            done
        })
        .await;
        Ok(done.map_err(|source| Error::Task { what: "exec", source })??)
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_capped_description_stops_at_its_bytes_on_a_rune() {
        assert_eq!(super::capped(5, format_args!("ab{}", "céé")), "abcé");
        assert_eq!(super::capped(64, format_args!("{:?}", [1, 2])), "[1, 2]");
    }
}
