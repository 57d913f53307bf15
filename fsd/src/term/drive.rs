//! A terminal's driver: the thread that feeds its output to the emulator
//! and appends the updates to its term shard, as the daemon (term shards
//! are pinned to it), and [`start`], the `term` ctl verb's work.
//!
//! An update is appended at most once per batch of pty reads (what the
//! reader has queued when the driver looks) and at most about once per
//! [`FRAME`] under a flood, so a flood logs each scrolled row once and
//! the screen once a frame. A resize is appended at once, and its ctl
//! write answered after. The exit status goes in once the pty closed,
//! or [`EXIT_GRACE`] after the program exited if something else holds
//! the pty open.

use crate::daemon::Daemon;
use crate::error::Error;
use crate::pty::emulator::Emulator;
use crate::pty::proc::{self, Event, Pipes, Running, Spec};
use apex_core::term::TermUpdate;
use apex_core::{Op, Shard, TermId, TermOp};
use std::os::unix::fs::DirBuilderExt;
use std::sync::mpsc::RecvTimeoutError;
use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};

/// The shortest time between two updates of a terminal under a flood.
pub const FRAME: Duration = Duration::from_millis(16);
/// How long an exited program's last output may take to arrive.
pub const EXIT_GRACE: Duration = Duration::from_millis(200);

/// Terminals running at once in one session.
pub const MAX_RUNNING: usize = 256;
/// Descriptors left free for connections and files: a terminal is
/// refused when fewer would be (it takes about eight).
pub const FDS_KEPT: u64 = 48;

/// Closes terminal `id` of session `n` ([`close`]) and the windows that
/// showed it, as closing win's window ends win.
pub async fn close_shown(daemon: &Daemon, n: u64, id: TermId) -> Result<(), Error> {
    crate::access::require_full("a terminal")?;
    close(daemon, n, id)?;
    let windows: Vec<apex_core::WindowId> = daemon
        .read(n, |s| s.view().state.windows.iter().filter(|(_, w)| w.term == Some(id)).map(|(w, _)| *w).collect())?;
    for window in windows {
        let _ = daemon.propose(n, &format!("term {} closed", id.0), apex_core::Proposal::DeleteWindow { window }).await;
    }
    Ok(())
}

/// Runs a new terminal in session `n` ([`start`]) and shows it in a new
/// window of its own (`DIR/-term.N`), as win's are shown.
pub async fn start_shown(daemon: &Daemon, n: u64, spec: Spec) -> Result<TermId, Error> {
    crate::access::require_full("a terminal")?;
    // Starting a keeper forks, execs and waits for its answer: off the
    // runtime's threads.
    let starter = daemon.clone();
    let started = tokio::task::spawn_blocking(move || start(&starter, n, spec)).await;
    let id = started.map_err(|e| Error::Io { what: "term: its start".into(), source: std::io::Error::other(e) })??;
    let p = apex_core::Proposal::TermWindow { term: id, column: None };
    daemon.propose(n, &format!("term window {}", id.0), p).await?;
    Ok(id)
}

/// Closes terminal `id` of session `n`: its shard deleted and its
/// program ended (as its `Running` goes, off the session's lock).
pub fn close(daemon: &Daemon, n: u64, id: TermId) -> Result<(), Error> {
    crate::access::require_full("a terminal")?;
    let running = daemon.change(n, |s, _| {
        if !s.view().state.terms.contains_key(&id) {
            return Err(Error::NoTerm(id.0));
        }
        s.view_mut().delete_shard(Shard::Term(id))?;
        Ok(s.terms_mut().remove(&id))
    })??;
    drop(running);
    Ok(())
}

/// Runs a new terminal in session `n`: its pty and program, its term
/// shard (created and led by the daemon), and its driver thread.
pub fn start(daemon: &Daemon, n: u64, spec: Spec) -> Result<TermId, Error> {
    crate::access::require_full("a terminal")?;
    let running_now = daemon.read(n, |s| s.terms().values().filter(|r| !r.exited()).count())?;
    if running_now >= MAX_RUNNING {
        return Err(Error::Term(proc::ProcError::TooMany(MAX_RUNNING)));
    }
    // A terminal takes a few descriptors; connections and files keep
    // the room they need.
    if let Some((open, limit)) = apex_sys::fds::usage().filter(|(open, limit)| open + FDS_KEPT > *limit) {
        tracing::error!(session = n, open, limit, "a new terminal refused: descriptors run short");
        return Err(Error::Term(proc::ProcError::NoDescriptors { open, limit }));
    }
    // The id first: a kept session's terminal is kept under it.
    let id = daemon.change(n, |s, _| s.view_mut().alloc().map(TermId))??;
    let keep = daemon.read(n, |s| s.persisted().map(|p| p.keeper_socket(id)))?;
    if let Some(dir) = keep.as_deref().and_then(std::path::Path::parent) {
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(dir)
            .map_err(|e| Error::Io { what: format!("term: {}", dir.display()), source: e })?;
    }
    let (running, pipes) = proc::spawn(spec.clone(), keep.as_deref())?;
    let running = Arc::new(running);
    let create = TermOp::Create {
        cols: spec.cols,
        rows: spec.rows,
        scrollback: spec.scrollback,
        command: spec.shown(),
        dir: spec.dir.clone(),
    };
    let held = running.clone();
    daemon.change(n, move |s, _| -> Result<(), apex_core::Reject> {
        let shard = Shard::Term(id);
        s.view_mut().create_shard(shard)?;
        s.view_mut().append(shard, Op::Term(create))?;
        s.terms_mut().insert(id, held);
        Ok(())
    })??;
    let spawned = spawn_driver(daemon, n, id, Emulator::new(spec.cols, spec.rows), pipes, Arc::downgrade(&running));
    if let Err(e) = spawned {
        // Nothing would read its pty: the terminal goes (its program with it).
        tracing::warn!(session = n, term = id.0, error = %e, "no thread for a terminal's driver");
        let _ = close(daemon, n, id);
        return Err(Error::Io { what: "term: a thread for its driver".into(), source: e });
    }
    Ok(id)
}

/// Starts terminal `id`'s driver thread.
fn spawn_driver(
    daemon: &Daemon,
    n: u64,
    id: TermId,
    emu: Emulator,
    pipes: Pipes,
    running: Weak<Running>,
) -> std::io::Result<()> {
    let driver = daemon.clone();
    let runtime = tokio::runtime::Handle::current();
    std::thread::Builder::new().name(format!("term-{}", id.0)).spawn(move || {
        let _inside = runtime.enter();
        drive_guarded(&driver, n, id, emu, pipes, running);
    })?;
    Ok(())
}

/// Starts the drivers of the terminals a restore took up from their
/// keepers (`registry`'s `take_up_terms`): each goes on from the screen
/// its shard has, and its program is asked to draw again (what the
/// daemon before read last may not have reached the log).
pub fn start_taken_up(daemon: &Daemon) {
    give_windows(daemon);
    for shared in daemon.all() {
        let (n, taken) = {
            let mut s = shared.lock().expect("session lock");
            let taken = s.drain_taken_up();
            let taken: Vec<_> = taken
                .into_iter()
                .filter_map(|(id, pipes)| {
                    let t = s.view().state.terms.get(&id)?;
                    let (emu, size) = (Emulator::resume(t), (t.cols, t.rows));
                    let running = s.terms().get(&id)?.clone();
                    Some((id, emu, size, pipes, running))
                })
                .collect();
            (s.number(), taken)
        };
        for (id, emu, (cols, rows), pipes, running) in taken {
            match spawn_driver(daemon, n, id, emu, pipes, Arc::downgrade(&running)) {
                Ok(()) => running.redraw(cols, rows),
                Err(e) => {
                    tracing::warn!(session = n, term = id.0, error = %e, "no thread for a terminal's driver");
                    let _ = close(daemon, n, id);
                }
            }
        }
    }
}

/// A clean stop: every terminal's output is read no further (what its
/// program writes waits in the pty for the next daemon) and what was
/// read is logged, so nothing read is lost between two daemons.
pub fn stop_reading(daemon: &Daemon) {
    let running: Vec<Arc<Running>> = daemon
        .all()
        .iter()
        .flat_map(|s| s.lock().expect("session lock").terms().values().cloned().collect::<Vec<_>>())
        .collect();
    for r in &running {
        r.stop_reading();
    }
    // A reader sees the flag within a poll; its driver logs what it read
    // within a frame after.
    std::thread::sleep(proc::LOOK_AGAIN_TIME + 4 * FRAME);
}

/// Gives every terminal of every session that no window shows a window
/// of its own (one made before terminals had windows, or whose window a
/// tool deleted), as at start every lease is the daemon's: every term
/// shard is drawn in a window.
fn give_windows(daemon: &Daemon) {
    for shared in daemon.all() {
        let n = shared.lock().expect("session lock").number();
        let made = daemon.change(n, |s, _| {
            let state = &s.view().state;
            let shown: std::collections::BTreeSet<TermId> = state.windows.values().filter_map(|w| w.term).collect();
            let bare: Vec<TermId> = state.terms.keys().filter(|t| !shown.contains(t)).copied().collect();
            for term in bare {
                let p = apex_core::Proposal::TermWindow { term, column: None };
                if let Err(e) = apex_core::propose::apply(s.view_mut(), &p) {
                    tracing::warn!(session = n, term = term.0, error = %e, "no window for a terminal");
                }
            }
        });
        if let Err(e) = made {
            tracing::warn!(session = n, error = %e, "no windows for its terminals");
        }
    }
}

/// What became of an update.
enum Appended {
    Done,
    /// The log refused it (a bug, or a damaged update): replicas were not
    /// sent it.
    Refused,
    /// The terminal was closed or its session deleted: stop.
    Gone,
}

fn append(daemon: &Daemon, n: u64, id: TermId, u: TermUpdate) -> Appended {
    let shard = Shard::Term(id);
    let done = daemon.change(n, |s, _| {
        if !s.view().state.terms.contains_key(&id) {
            return Appended::Gone;
        }
        let shows_in_tag = u.title.is_some() || u.exit.is_some();
        let appended = match s.view_mut().append(shard, Op::Term(TermOp::Update(Box::new(u)))) {
            Ok(_) => {
                // The title and the exit show in the window's tag, where
                // the daemon leads it (else its leader does).
                if shows_in_tag {
                    let _ = apex_core::make::settag_term(s.view_mut(), id);
                }
                Appended::Done
            }
            Err(e) => {
                tracing::warn!(term = %shard, error = %e, "a terminal update was refused; sending the screen again");
                Appended::Refused
            }
        };
        // Entries nobody needs any more leave memory: a terminal running
        // for a week keeps its log no longer than its readers need it
        // (the state, snapshots and the log on disk have it).
        crate::attach::feed::compact_shard(s, shard);
        appended
    });
    match done {
        Ok(appended) => appended,
        // The log's file did not take it and the change was undone: the
        // screen is sent whole again, as for a refusal.
        Err(crate::error::Error::Log(e)) => {
            tracing::warn!(term = %shard, error = %e, "a terminal update was undone; sending the screen again");
            Appended::Refused
        }
        Err(_) => Appended::Gone,
    }
}

/// The driver, and what ends it: a panic in the emulator ends the
/// program and says so in the terminal's title, instead of leaving a
/// terminal that says it runs with nobody reading its pty.
fn drive_guarded(daemon: &Daemon, n: u64, id: TermId, emu: Emulator, pipes: Pipes, running: Weak<Running>) {
    let ran = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| drive(daemon, n, id, emu, &pipes)));
    if let Err(panic) = ran {
        let why =
            panic.downcast_ref::<&str>().map(|s| s.to_string()).or_else(|| panic.downcast_ref::<String>().cloned());
        tracing::error!(session = n, term = id.0, why = ?why, "a terminal's emulator failed; ending its program");
        if let Some(r) = running.upgrade() {
            let _ = r.kill(id.0);
        }
        // Its status, once reaped.
        let deadline = Instant::now() + Duration::from_secs(5);
        let status = loop {
            match pipes.events.recv_timeout(deadline.saturating_duration_since(Instant::now())) {
                Ok(Event::Exited(status)) => break status,
                Ok(_) => continue,
                Err(_) => break apex_core::term::ENDED_WITH_DAEMON,
            }
        };
        let title = Some("[the terminal failed; see apexd's log]".to_string());
        append(daemon, n, id, TermUpdate { title, exit: Some(status), ..TermUpdate::default() });
    }
    if let Some(r) = running.upgrade() {
        r.driver_ended();
    }
}

fn drive(daemon: &Daemon, n: u64, id: TermId, mut emu: Emulator, pipes: &Pipes) {
    let mut last = Instant::now() - FRAME;
    let mut dirty = false;
    let mut eof = false;
    let mut exited: Option<(i32, Instant)> = None;
    let mut exit_sent = false;
    let mut refused = 0;
    let mut resized = Vec::new();
    loop {
        let wait = match (dirty, exited) {
            (true, _) => Some((last + FRAME).saturating_duration_since(Instant::now())),
            (false, Some((_, at))) if !exit_sent => Some((at + EXIT_GRACE).saturating_duration_since(Instant::now())),
            _ => None,
        };
        let first = match wait {
            Some(d) => pipes.events.recv_timeout(d),
            None => pipes.events.recv().map_err(|_| RecvTimeoutError::Disconnected),
        };
        let mut event = match first {
            Ok(e) => Some(e),
            Err(RecvTimeoutError::Timeout) => None,
            Err(RecvTimeoutError::Disconnected) => break,
        };
        // The batch: whatever is queued now, until a frame is due.
        while let Some(e) = event {
            match e {
                Event::Output(bytes) => {
                    pipes.answers.send(emu.feed(&bytes));
                    dirty = true;
                }
                Event::Eof => {
                    eof = true;
                    dirty = true;
                }
                Event::Exited(status) => exited = Some((status, Instant::now())),
                Event::Resize(cols, rows, done) => {
                    emu.resize(cols, rows);
                    resized.push(done);
                    dirty = true;
                }
            }
            if last.elapsed() >= FRAME && dirty || !resized.is_empty() {
                break;
            }
            event = pipes.events.try_recv().ok();
        }
        let exit_due = exited.filter(|(_, at)| !exit_sent && (eof || at.elapsed() >= EXIT_GRACE));
        let frame_due = dirty && (last.elapsed() >= FRAME || !resized.is_empty());
        if frame_due || exit_due.is_some() {
            let mut updates = emu.updates();
            if let Some((status, _)) = exit_due {
                if updates.is_empty() {
                    updates.push(TermUpdate::default());
                }
                updates.last_mut().expect("one at least").exit = Some(status);
            }
            dirty = false;
            last = Instant::now();
            let mut all_done = true;
            for u in updates {
                match append(daemon, n, id, u) {
                    Appended::Done => {}
                    Appended::Gone => return,
                    Appended::Refused => {
                        all_done = false;
                        break;
                    }
                }
            }
            match all_done {
                true => {
                    refused = 0;
                    exit_sent |= exit_due.is_some();
                }
                // Sent whole again next time (the exit with it), once:
                // a refusal that repeats is given up on.
                false if refused == 0 => {
                    refused += 1;
                    emu.resync();
                    dirty = true;
                }
                false => exit_sent |= exit_due.is_some(),
            }
            for done in resized.drain(..) {
                let _ = done.send(());
            }
        }
        if eof && exit_sent {
            break;
        }
    }
}
