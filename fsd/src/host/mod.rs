//! Host services: what the daemon does on its own machine, where the files
//! and programs are. `get` and `put` move a buffer's text from and to a
//! file; `exec` runs a command in a directory, recorded as a process in the
//! metalog, with its output proposed into the window `DIR/+Errors` as
//! acme does, and `kill` ends it.
//!
//! File and process work happens outside any lock; only the
//! proposals that record it take their session's lock, briefly.

pub mod ahead;
pub mod headless;

use crate::daemon::Daemon;
use crate::error::Error;
use crate::fsys::ctl::Unfit;
use apex_core::meta::Process;
use apex_core::{exec, look};
use apex_core::{AcmeNumber, AttachmentId, BufferId, MetaOp, Origin, Proposal, WindowId};
use std::path::Path;
use std::process::Stdio;
use std::sync::{Arc, PoisonError};
use tokio::io::AsyncReadExt;

/// Where a Get reads its file.
pub enum Reading {
    /// On a blocking thread of its own: the Get runs in a task.
    Apart,
    /// On the calling thread, which is a blocking one already (a
    /// command's host): no hand-over to another thread and back.
    Here,
    /// Read ahead already if the Get is of the file this read is of and
    /// it is unchanged since (else here: on a blocking thread, as `Here`).
    Ahead(ahead::Ahead),
}

/// Replaces buffer `b`'s text with `file`'s (the buffer's name if none;
/// a directory lists its entries), names it so if a file was given, and
/// marks it clean.
pub async fn get(
    daemon: &Daemon,
    session: u64,
    b: BufferId,
    file: Option<String>,
    reading: Reading,
) -> Result<(), Error> {
    crate::access::require_full("get (reading the daemon's files)")?;
    let name = daemon.read(session, |s| Ok::<_, Error>(s.view().state.buffer(b)?.name.clone()))??;
    let named = file.is_some();
    let file = exec::file_or_name("get", file, &name)?;
    let path = file.clone();
    let read = move || apex_sys::files::read_utf8("get", &path);
    let (pieces, said) = match reading {
        Reading::Apart => {
            tokio::task::spawn_blocking(read).await.map_err(|source| Error::Task { what: "get", source })??
        }
        Reading::Ahead(a) if a.path == file => match a.taken().await {
            Some(done) => done,
            None => read()?,
        },
        Reading::Here | Reading::Ahead(_) => read()?,
    };
    // The log makes room for the file's text first: a full disk refuses
    // the Get unchanged.
    daemon.reserve(session, pieces.iter().map(|p| p.len() as u64).sum())?;
    // A copy taken under the lock (ropes share their nodes); the text
    // compared and the places counted after it, holding up no one.
    let (buf, last) = daemon.read(session, |s| {
        let view = s.view();
        Ok::<_, Error>((view.state.buffer(b)?.clone(), view.log.last(apex_core::Shard::Buffer(b))))
    })??;
    let proposals = exec::get_proposals(&buf, b, &file, named, pieces);
    let request = format!("get {} {file}", b.0);
    let mut as_read = true;
    for p in proposals {
        // Where a window's selection and origin go back to is a nicety:
        // an edit that came between (rebased past the text) must not
        // make the Get fail after its text is in, nor put them wrong.
        let place = exec::keeps_place(&p);
        if place && !as_read {
            continue;
        }
        let replaces = exec::replaces_text(&p);
        match daemon.propose(session, &request, p).await {
            Err(_) if place => {}
            Ok(applied) if replaces => as_read = exec::replaced_as_read(&applied, b, last),
            r => r.map(|_| ())?,
        }
    }
    // The text is not the file's bytes: said where acme says so.
    if let Some(warning) = apex_sys::files::load_warning(&file, said) {
        warn_beside(daemon, session, &file, &warning).await;
    }
    Ok(())
}

/// Says `text` in the `+Errors` of `file`'s directory, where acme users
/// look, and in the daemon's log.
async fn warn_beside(daemon: &Daemon, session: u64, file: &str, text: &str) {
    tracing::warn!("{}", text.trim_end());
    let dir = Path::new(file).parent().map(|d| d.display().to_string()).unwrap_or_default();
    if let Ok((_, body)) = errors_window(daemon, session, &look::errors_name(&dir)).await {
        append_output(daemon, session, body, text).await;
    }
}

/// acme's `get` (the Get built-in and an acme ctl `get`): as [`get`], but
/// a window without a name is "no file name", and a file that cannot be
/// read leaves the window empty and clean, as acme's textload does after
/// its textreset, and says "can't open FILE: why".
pub async fn acme_get(
    daemon: &Daemon,
    session: u64,
    b: BufferId,
    file: Option<String>,
    reading: Reading,
) -> Result<(), Error> {
    match get(daemon, session, b, file.clone(), reading).await {
        Err(Error::Exec(exec::ExecError::Unnamed(_))) => Err(Error::Exec(exec::ExecError::NoFileName)),
        Err(Error::File(apex_sys::files::FileError::Read { path, source, .. })) => {
            let emptied = daemon.read(session, |s| {
                let buf = s.view().state.buffer(b)?;
                Ok::<_, Error>(exec::get_proposals(buf, b, &path, file.is_some(), Vec::new()))
            })??;
            for p in emptied {
                daemon.propose(session, &format!("get {} {path} (unreadable)", b.0), p).await?;
            }
            let why = apex_sys::files::os_words(&source);
            Err(Error::Exec(exec::ExecError::CantOpen { file: path, why }))
        }
        done => done,
    }
}

/// Writes buffer `b`'s text as of `version` (the current one if none) to
/// `file` (the buffer's name if none), then marks the buffer clean at that
/// version; if it changed meanwhile it stays dirty and the error says so.
pub async fn put(
    daemon: &Daemon,
    session: u64,
    b: BufferId,
    version: Option<u64>,
    file: Option<String>,
) -> Result<(), Error> {
    crate::access::require_full("put (writing the daemon's files)")?;
    let (text, at, name) = daemon.read(session, |s| {
        let buf = s.view().state.buffer(b)?;
        if let Some(asked) = version.filter(|v| *v != buf.version) {
            return Err(Error::from(Unfit::StaleVersion { buffer: b.0, at: buf.version, asked }));
        }
        Ok((buf.text.rope().clone(), buf.version, buf.name.clone()))
    })??;
    let file = exec::file_or_name("put", file, &name)?;
    let path = file.clone();
    // A file whose bytes are not all UTF-8 was loaded with U+FFFD in
    // their place: writing it back changes them, so the first Put of a
    // version says so, and the next writes.
    let not_utf8 = tokio::task::spawn_blocking(move || apex_sys::files::holds_bytes_not_utf8(&path))
        .await
        .map_err(|source| Error::Task { what: "put", source })?;
    if not_utf8 {
        let mut warned = daemon.put_warned.lock().unwrap_or_else(PoisonError::into_inner);
        if warned.insert((session, b, file.clone()), at) != Some(at) {
            return Err(Error::PutNotUtf8(file));
        }
    }
    let path = file.clone();
    // Whole or not at all: beside the file, then renamed over it.
    let written = tokio::task::spawn_blocking(move || {
        apex_sys::files::write_replacing(Path::new(&path), &|f| {
            for chunk in text.chunks() {
                f.write_all(chunk.as_bytes())?;
            }
            Ok(())
        })
    })
    .await
    .map_err(|source| Error::Task { what: "put", source })?
    .map_err(|source| Error::Io { what: format!("put: {file}"), source })?;
    daemon.put_warned.lock().unwrap_or_else(PoisonError::into_inner).remove(&(session, b, file.clone()));
    if let apex_sys::files::Written::InPlace(why) = written {
        let warning = format!(
            "put: {file}: written in place, as {why}: a failure midway (a full disk) would have left it part old, \
             part new\n"
        );
        warn_beside(daemon, session, &file, &warning).await;
    }
    daemon.read(session, |s| {
        let now = s.view().state.buffer(b)?.version;
        match now == at {
            true => Ok(()),
            false => Err(Error::PutRaced { at, file: file.clone(), now }),
        }
    })??;
    // The leader marks it clean; a change that raced this stays dirty
    // (Clean applies to the version the leader has, as acme's put does).
    daemon.propose(session, &format!("put {} {file}", b.0), Proposal::Clean { buffer: b }).await?;
    Ok(())
}

/// Shows `file` in its window in session `session`, made and loaded if
/// there is none, at `address` if given (core's `exec::open`, as B3 on
/// `file:addr` opens it), and returns the window's acme number. A
/// directory's window is named with its slash, as acme names it.
///
/// `ahead` is the file's read if it was begun ahead ([`ahead::ReadAhead`]).
pub async fn open(
    daemon: &Daemon,
    session: u64,
    file: &str,
    address: Option<&str>,
    ahead: Option<ahead::Ahead>,
) -> Result<u32, Error> {
    crate::access::require_full("opening a file of the daemon's")?;
    let mut name = file.to_string();
    if Path::new(&name).is_dir() && !name.ends_with('/') {
        name.push('/');
    }
    let address = address.map(str::to_string);
    let window = daemon
        .with_host(session, None, move |h| {
            h.read_ahead(ahead);
            exec::open(h, &name, address.as_deref())
        })
        .await?;
    // Gone again only if something deleted it meanwhile.
    daemon
        .read(session, |s| s.view().state.layout.numbers.get(&window).map(|n| n.0))?
        .ok_or(Error::NotShown(file.to_string()))
}

/// The directory commands run in for a window named `name`: its own if it
/// exists, else the daemon's.
pub fn command_dir(name: &str) -> String {
    run_dir(look::window_dir(name).as_deref())
}

/// `dir` if it is a directory here, else the daemon's own.
pub fn run_dir(dir: Option<&str>) -> String {
    dir.filter(|d| Path::new(d).is_dir())
        .map(str::to_string)
        .or_else(|| std::env::current_dir().ok().map(|d| d.display().to_string()))
        .unwrap_or_else(|| "/".into())
}

/// Finds the buffer named `name` shown in a window, or makes that window.
pub async fn errors_window(daemon: &Daemon, session: u64, name: &str) -> Result<(WindowId, BufferId), Error> {
    let _one_at_a_time = daemon.making_errors_window.lock().await;
    let found = daemon.read(session, |s| Ok::<_, Error>(look::window_named(&s.view().state, name)))??;
    if let Some(f) = found {
        return Ok(f);
    }
    let p = Proposal::CreateWindow { body: None, column: None, name: name.to_string(), near: None };
    match daemon.propose(session, &format!("window {name}"), p).await?.created {
        apex_core::propose::Created::Window(w) => Ok((w.window, w.body)),
        _ => Err(Error::NoErrorsWindow),
    }
}

/// Appends command output to the errors buffer, keeping it clean.
pub async fn append_output(daemon: &Daemon, session: u64, b: BufferId, text: &str) {
    let Ok(Ok(Some(p))) = daemon.read(session, |s| crate::buffers::append(s, b, text, Origin::OtherFile)) else {
        return;
    };
    if daemon.propose(session, "exec output", p).await.is_ok() {
        let _ = daemon.propose(session, "exec output", Proposal::Clean { buffer: b }).await;
    }
}

/// What acme puts in a command's environment: the window it was executed
/// in (`$winid`, and its file's name as `$%` and `$samfile`) and the font
/// of the UI that ran it (`$font`).
#[derive(Clone, Debug, Default)]
pub struct CommandEnv {
    pub window: Option<AcmeNumber>,
    pub font: Option<String>,
}

impl CommandEnv {
    /// Sets (or, with no window, unsets, as acme's `run` does, so none
    /// comes from the daemon's own environment) each variable.
    fn apply(&self, daemon: &Daemon, session: u64, cmd: &mut tokio::process::Command) {
        let named = self.window.and_then(|n| {
            daemon
                .read(session, |s| -> Result<Option<String>, Error> {
                    let st = &s.view().state;
                    let Some(w) = st.layout.window_numbered(n) else { return Ok(None) };
                    Ok(Some(st.buffer(st.window(w)?.body)?.name.clone()))
                })
                .ok()
                .and_then(Result::ok)
                .flatten()
        });
        match self.window {
            Some(n) => cmd.env("winid", n.0.to_string()),
            None => cmd.env_remove("winid"),
        };
        for var in ["%", "samfile"] {
            match named.as_deref().filter(|n| !n.is_empty()) {
                Some(name) => cmd.env(var, name),
                None => cmd.env_remove(var),
            };
        }
        cmd.env_remove("acmeaddr");
        if let Some(font) = &self.font {
            cmd.env("font", font);
        }
    }
}

/// Runs `command` with `sh -c` in `dir`, with `env` as acme sets it;
/// returns its pid. Output goes to `DIR/+Errors` as it comes; the exit is
/// recorded in the metalog.
pub async fn exec(daemon: &Daemon, session: u64, dir: &str, command: &str, env: &CommandEnv) -> Result<u32, Error> {
    crate::access::require_full("running a command")?;
    exec::absolute("exec", dir)?;
    if !Path::new(dir).is_dir() {
        return Err(Unfit::NotADirectory(dir.to_string()).into());
    }
    // acme's `|cmd`, `<cmd` and `>cmd`: on the selection of the window it
    // ran from (without one, the command alone).
    let (pipe, run) = match command.trim_start().strip_prefix(['|', '<', '>']) {
        Some(rest) => (command.trim_start().chars().next(), rest.trim_start()),
        None => (None, command),
    };
    let on = match (pipe, env.window) {
        (Some(c), Some(n)) => Some((c, selection(daemon, session, n)?)),
        _ => None,
    };
    let reads = on.as_ref().is_some_and(|(c, _)| *c != '<');
    let mut cmd = tokio::process::Command::new("sh");
    env.apply(daemon, session, &mut cmd);
    // SAFETY: one async-signal-safe call between fork and exec: the
    // descriptor limit the daemon had before it raised its own.
    unsafe { cmd.pre_exec(|| apex_sys::fds::restore_original()) };
    let mut child = cmd
        .arg("-c")
        .arg(run)
        .current_dir(dir)
        .stdin(if reads { Stdio::piped() } else { Stdio::null() })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0)
        .spawn()
        .map_err(|source| Error::Io { what: "exec: sh".into(), source })?;
    let pid = child.id().ok_or(Error::ExitedAtOnce)?;
    if let (Some(mut stdin), Some((_, sel))) = (child.stdin.take(), &on) {
        let text = sel.text.clone();
        tokio::spawn(async move {
            // A command that reads none of it is not waited for.
            let _ = tokio::io::AsyncWriteExt::write_all(&mut stdin, text.as_bytes()).await;
        });
    }
    // `|` and `<` replace the selection with what the command prints.
    let replaces = on.filter(|(c, _)| *c != '>').map(|(_, sel)| sel);
    let errors = look::errors_name(dir);
    let made = errors_window(daemon, session, &errors).await;
    let body = made.and_then(|(window, body)| {
        daemon
            .change(session, |s, _| {
                let process = Process {
                    owner: AttachmentId::SERVER,
                    command: command.to_string(),
                    dir: dir.to_string(),
                    window: Some(window),
                };
                let op = MetaOp::ProcessStart { pid: pid.into(), process: Box::new(process) };
                s.view_mut().push_meta(op)?;
                Ok(body)
            })
            .and_then(|pushed| pushed)
    });
    let body = match body {
        Ok(b) => b,
        Err(e) => {
            let _ = child.start_kill();
            return Err(e);
        }
    };
    tracing::info!(session, pid, dir, command, "exec");
    let (tx, mut rx) = tokio::sync::mpsc::channel::<Vec<u8>>(16);
    let max = apex_sys::shell::output_max();
    // Past the most a command may add, its process group is killed (not
    // yet reaped: the group is still its) and the cap said.
    let stop = move || {
        // SAFETY: kill(2) with plain integers; the child is reaped only
        // after its output is read to its end.
        unsafe { libc::kill(-(pid as i32), libc::SIGKILL) };
    };
    let printed = match replaces.is_some() {
        true => child.stdout.take().map(|out| {
            tokio::spawn(async move {
                let mut all = Vec::new();
                let _ = tokio::io::AsyncReadExt::take(out, max + 1).read_to_end(&mut all).await;
                let flooded = all.len() as u64 > max;
                if flooded {
                    stop();
                }
                (all, flooded)
            })
        }),
        false => None,
    };
    for mut out in [child.stdout.take().map(Either::Out), child.stderr.take().map(Either::Err)].into_iter().flatten() {
        let tx = tx.clone();
        tokio::spawn(async move {
            let mut buf = vec![0u8; 8192];
            loop {
                let n = match out.read(&mut buf).await {
                    Ok(0) | Err(_) => break,
                    Ok(n) => n,
                };
                if tx.send(buf[..n].to_vec()).await.is_err() {
                    break;
                }
            }
        });
    }
    drop(tx);
    let daemon = daemon.clone();
    let command = command.to_string();
    tokio::spawn(async move {
        let mut tail = Vec::new();
        let mut added = 0u64;
        while let Some(bytes) = rx.recv().await {
            added += bytes.len() as u64;
            if added > max {
                stop();
                let said = format!(
                    "\n{command}: printed more than {max} bytes, the most one command may add; it was killed\n"
                );
                append_output(&daemon, session, body, &said).await;
                break;
            }
            tail.extend_from_slice(&bytes);
            // Keep an incomplete rune for the next chunk.
            let cut = match std::str::from_utf8(&tail) {
                Ok(_) => tail.len(),
                Err(e) if e.error_len().is_none() => e.valid_up_to(),
                Err(_) => tail.len(),
            };
            let text = String::from_utf8_lossy(&tail[..cut]).into_owned();
            tail.drain(..cut);
            append_output(&daemon, session, body, &text).await;
        }
        if !tail.is_empty() {
            append_output(&daemon, session, body, &String::from_utf8_lossy(&tail)).await;
        }
        // What `|` and `<` printed, read to its end before the command is
        // reaped: its reader may kill the group, which must still be its.
        let printed = match printed {
            Some(task) => Some(task.await.unwrap_or_default()),
            None => None,
        };
        let status = match child.wait().await {
            Ok(st) => {
                st.code().unwrap_or_else(|| 128 + std::os::unix::process::ExitStatusExt::signal(&st).unwrap_or(0))
            }
            Err(_) => -1,
        };
        tracing::info!(session, pid, status, "exit");
        // What `|` and `<` printed replaces the selection, whatever the
        // exit status (acme's wrsel), as of the text it was read from.
        if let (Some(sel), Some((printed, flooded))) = (replaces, printed) {
            if flooded {
                let said = format!("\n{command}: printed more than {max} bytes, the most one command may add; it was killed; the selection is as it was\n");
                append_output(&daemon, session, body, &said).await;
                let _ = daemon
                    .change(session, |s, _| s.view_mut().push_meta(MetaOp::ProcessExit { pid: pid.into(), status }));
                return;
            }
            let text = String::from_utf8_lossy(&printed).into_owned();
            let n = text.chars().count() as u64;
            let p = Proposal::splice(sel.body, sel.version, sel.q0, sel.q1, text, Origin::OtherFile);
            if daemon.propose(session, "pipe output", p).await.is_ok() {
                let version = daemon
                    .read(session, |s| s.view().state.buffer(sel.body).map(|b| b.version))
                    .ok()
                    .and_then(Result::ok);
                if let Some(version) = version {
                    let view = apex_core::ViewId::WindowBody(sel.window);
                    let (q0, q1) = (sel.q0, sel.q0 + n);
                    let select = Proposal::Select { buffer: sel.body, view, version, q0, q1 };
                    let _ = daemon.propose(session, "pipe output", select).await;
                }
            }
        }
        let _ = daemon.change(session, |s, _| s.view_mut().push_meta(MetaOp::ProcessExit { pid: pid.into(), status }));
    });
    Ok(pid)
}

/// A window's selection as a command piped it: its text, and where it
/// was in which version of the body.
struct Selection {
    window: WindowId,
    body: BufferId,
    version: u64,
    q0: u64,
    q1: u64,
    text: String,
}

/// The selection of the window numbered `n`.
fn selection(daemon: &Daemon, session: u64, n: AcmeNumber) -> Result<Selection, Error> {
    daemon.read(session, |s| {
        let st = &s.view().state;
        let window = st.layout.window_numbered(n).ok_or(Unfit::NoWindow(u64::from(n.0)))?;
        let body = st.window(window)?.body;
        let b = st.buffer(body)?;
        let v = b.views.get(&apex_core::ViewId::WindowBody(window)).copied().unwrap_or_default();
        let (q0, q1) = (v.q0.min(b.len()), v.q1.min(b.len()));
        let text = b.slice(q0, q1).unwrap_or_default();
        Ok::<_, Error>(Selection { window, body, version: b.version, q0, q1, text })
    })?
}

/// One of a child's two output pipes.
enum Either {
    Out(tokio::process::ChildStdout),
    Err(tokio::process::ChildStderr),
}

impl Either {
    async fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        match self {
            Either::Out(o) => o.read(buf).await,
            Either::Err(e) => e.read(buf).await,
        }
    }
}

/// Ends process `pid` of the session (SIGTERM to its process group).
pub fn kill(daemon: &Daemon, session: u64, pid: u64) -> Result<(), Error> {
    crate::access::require_full("ending a process")?;
    daemon.read(session, |s| match s.view().state.meta.processes.contains_key(&pid) {
        true => Ok(()),
        false => Err(Error::from(Unfit::NoProcess(pid))),
    })??;
    // A built-in the daemon runs: told to stop, it stops at its next look
    // (one that ended meanwhile has nothing left to stop).
    if pid >= FIRST_JOB {
        if let Some(stop) = daemon.jobs.lock().unwrap_or_else(PoisonError::into_inner).get(&pid) {
            stop.store(true, std::sync::atomic::Ordering::Relaxed);
        }
        return Ok(());
    }
    let pgid = i32::try_from(pid).map_err(|_| Error::BadPid(pid))?;
    // SAFETY: kill(2) takes plain integers and touches no memory of ours.
    if unsafe { libc::kill(-pgid, libc::SIGTERM) } != 0 {
        return Err(Error::Io { what: format!("kill: {pid}"), source: std::io::Error::last_os_error() });
    }
    Ok(())
}

/// The first number a job is listed under among a session's processes:
/// past any pid (Linux's are below 2^22), so `kill` never signals one.
const FIRST_JOB: u64 = 1 << 32;

/// A long built-in the daemon runs (an Edit), listed among its session's
/// processes while it runs, so `Kill Edit` (or the root's `kill N`) can
/// stop it; gone from the list when dropped.
pub struct Job {
    daemon: Daemon,
    session: u64,
    id: u64,
}

impl Job {
    /// Lists `command` (run from `window`) and returns it with the flag a
    /// kill sets.
    pub fn start(
        daemon: &Daemon,
        session: u64,
        window: Option<WindowId>,
        command: &str,
    ) -> (Job, Arc<std::sync::atomic::AtomicBool>) {
        static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(FIRST_JOB);
        let id = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
        daemon.jobs.lock().unwrap_or_else(PoisonError::into_inner).insert(id, stop.clone());
        let dir = apex_sys::machine::cwd();
        let process = Process { owner: AttachmentId::SERVER, command: command.to_string(), dir, window };
        let op = MetaOp::ProcessStart { pid: id, process: Box::new(process) };
        let _ = daemon.change(session, |s, _| s.view_mut().push_meta(op));
        (Job { daemon: daemon.clone(), session, id }, stop)
    }
}

/// A job's exit status when a kill ended it (as a shell says SIGTERM).
const KILLED: i32 = 128 + libc::SIGTERM;

impl Drop for Job {
    fn drop(&mut self) {
        let stop = self.daemon.jobs.lock().unwrap_or_else(PoisonError::into_inner).remove(&self.id);
        let killed = stop.is_some_and(|s| s.load(std::sync::atomic::Ordering::Relaxed));
        let exit = MetaOp::ProcessExit { pid: self.id, status: if killed { KILLED } else { 0 } };
        // Perhaps while the Edit unwinds, the session's lock poisoned:
        // tended, not changed, so a second panic does not end the daemon.
        let _ = self.daemon.tend(self.session, |s| s.view_mut().push_meta(exit));
        self.daemon.changed_in(self.session);
    }
}

/// Tells every job the daemon runs to stop (the daemon is stopping).
pub fn stop_jobs(daemon: &Daemon) {
    for stop in daemon.jobs.lock().unwrap_or_else(PoisonError::into_inner).values() {
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
    }
}

/// Runs an Edit command's pipe (`<`, `>`, `|`): `sh -c` in the window's
/// directory (the daemon's own for a window without one), the text on its
/// standard input, its standard output back; a command that fails is an
/// error, and the Edit changes nothing. While it runs it is one of the
/// session's processes, in `window`, as acme's Edit pipes are its
/// commands: `Kill` (or the root's `kill PID`) ends one that never does.
pub fn edit_pipe(
    daemon: &Daemon,
    session: u64,
    window: Option<WindowId>,
    command: &str,
    input: Option<&str>,
    file: &apex_core::ecmd::EditFile,
) -> Result<String, apex_core::ecmd::PipeError> {
    let dir = command_dir(&file.name);
    let mut running = None;
    let out = apex_sys::shell::pipe(command, input, Some(Path::new(&dir)), |pid| {
        let process = Process { owner: AttachmentId::SERVER, command: command.to_string(), dir: dir.clone(), window };
        let op = MetaOp::ProcessStart { pid: pid.into(), process: Box::new(process) };
        if matches!(daemon.change(session, |s, _| s.view_mut().push_meta(op)), Ok(Ok(_))) {
            running = Some(pid);
        }
    });
    if let Some(pid) = running {
        let status = i32::from(out.is_err());
        let _ = daemon.change(session, |s, _| s.view_mut().push_meta(MetaOp::ProcessExit { pid: pid.into(), status }));
    }
    out
}
