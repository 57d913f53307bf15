//! The UI as core's [`exec::Host`]: built-ins clicked in this UI run
//! against its own replica (it leads what the user edits, so proposals
//! apply at once and go out with the next flush), and what needs the
//! machine goes to the daemon through its files: `get` and `put` through
//! `buffers/N/ctl` (a put writes exactly the version this UI flushed and
//! the daemon acknowledged), commands through the session's `ctl`.

use crate::editjob::{EditJob, Ended, EDIT_JOB};
use apex_core::ecmd::{EditFile, PipeError, Pipes};
use apex_core::exec::{self, ExecError, Host, PreparedEdit};
use apex_core::propose::Applied;
use apex_core::{look, plumb, BufferId, Proposal, State, WindowId};
use apex_link::{Attached, Submitted};
use apex_ninep::fcall::OWRITE;
use std::ops::Deref;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// How many puts of a Putall this UI asks the daemon for at once.
const PUTS_AT_ONCE: usize = 8;

/// The plumber's largest message (plan9port's `messagesize`).
const PLUMB_MESSAGE: usize = apex_link::plumber::MESSAGE_SIZE;

/// How long a host request waits for the daemon before it says so.
pub const WAIT: Duration = Duration::from_secs(10);

/// How long a worker's thread waits after each proposal, so the UI's
/// thread gets the link between an Edit's parts.
const LET_IN: Duration = Duration::from_micros(200);

/// How many changes a worker's Edit proposes at a time (an entry holds
/// up to `op::SPOTS_MAX`, whose apply held the link for up to 15 ms).
const WORKER_PART: usize = 4096;

/// The UI's side of a built-in's run.
pub struct UiHost {
    pub att: Attached,
    /// The daemon's address (`unix!PATH` or `tcp!HOST!PORT`), dialled
    /// again when the connection goes.
    pub address: String,
    pub session: String,
    pub rt: tokio::runtime::Handle,
    /// Set by Exit and Abort: the window closes, the session goes on.
    pub exit: bool,
    /// The namespace directory a plumber is posted in.
    pub namespace: PathBuf,
    /// The link's events a wait for an answer took but did not want: the
    /// UI reports them (see `Ui::woke`).
    pub events: Vec<apex_link::Event>,
    /// The daemon is on this machine, seeing its files (`on_this_machine`,
    /// else a Unix socket is taken as local): Get reads
    /// the file here and the text goes to the daemon as this UI's own
    /// entries, once, instead of the daemon reading it and routing it
    /// here to be sequenced and sent back.
    pub local: bool,
    /// The daemon's directory and home, where it runs on another machine
    /// (its `/machine`): a relative file name is completed there, not
    /// with this UI's directory (`Host::cwd`, `Host::home`).
    pub far: Option<apex_sys::machine::Described>,
    /// Messages the plumber delivered to its `edit` port, for the UI to
    /// act on (`Ui::woke`); `wake` says one came.
    pub plumbed: Arc<Mutex<Vec<plumb::Message>>>,
    pub wake: Arc<tokio::sync::Notify>,
    /// The font the UI draws bodies with, as named by `-f` or `$font`:
    /// the commands it runs get it as `$font`, as acme's do.
    pub font: Option<String>,
    /// The last regular expression an Edit used, which `//` means.
    last_pattern: Option<String>,
    /// A task is dialling the daemon again.
    dialling: Arc<std::sync::atomic::AtomicBool>,
    /// What each window's body frame shows, as the UI last laid it out:
    /// a text a built-in finds is shown as acme's `textshow` shows it.
    pub frames: std::collections::HashMap<WindowId, apex_core::show::Shown>,
    /// Windows a built-in showed text in with no frame known (made by it):
    /// the UI shows them again once laid out (`Ui::show_new_windows`).
    pub unshown: Vec<WindowId>,
    /// What goes to the terminals the windows show.
    pub terms: crate::terms::Terminals,
    /// What a request not waited for said when it failed, for the UI to
    /// report when it next wakes.
    pub later: Arc<Mutex<Vec<apex_link::Event>>>,
    /// This UI's selections of the terminals' texts, in runes of each
    /// terminal's `text`, as they were when the built-in started.
    pub term_selections: std::collections::HashMap<WindowId, (u64, u64)>,
    /// What a built-in found in a terminal's text, for the UI to select
    /// and show (its views of terminals are its own).
    pub term_found: Option<(WindowId, u64, u64)>,
    /// The Edit running on its own thread, if one is.
    pub edit: Option<EditJob>,
    /// Edits run on a thread of their own (the UI's host); a worker's
    /// host runs them where it is.
    apart: bool,
    /// Set to end what this host runs (a worker's Edit: `Kill Edit`).
    pub stop: Arc<std::sync::atomic::AtomicBool>,
    /// The process group of the pipe an Edit here waits on, while it runs.
    pub pipe_group: Arc<Mutex<Option<u32>>>,
    /// A worker's: the replica (`Link::welcomed`) its Edit gathered from.
    replica: Option<u64>,
}

/// The replica's state under the link's lock.
pub struct StateGuard<'a>(std::sync::MutexGuard<'a, apex_link::Link>);

impl Deref for StateGuard<'_> {
    type Target = State;
    fn deref(&self) -> &State {
        &self.0.node().expect("attached: the state checked it").state
    }
}

fn host(e: impl std::fmt::Display) -> ExecError {
    ExecError::Host(e.to_string())
}

impl UiHost {
    /// The host of a UI attached as `att` to `session` at `address`.
    pub fn new(att: Attached, address: &str, session: &str, rt: tokio::runtime::Handle, namespace: PathBuf) -> UiHost {
        UiHost {
            att,
            address: address.to_string(),
            session: session.to_string(),
            rt,
            exit: false,
            namespace,
            events: Vec::new(),
            local: address.starts_with("unix!"),
            far: None,
            plumbed: Arc::default(),
            wake: Arc::default(),
            dialling: Arc::default(),
            last_pattern: None,
            font: None,
            frames: Default::default(),
            unshown: Vec::new(),
            terms: Default::default(),
            later: Arc::default(),
            term_selections: Default::default(),
            term_found: None,
            edit: None,
            apart: true,
            stop: Arc::default(),
            pipe_group: Arc::default(),
            replica: None,
        }
    }

    /// Learns from the daemon's `/machine` whether it sees this UI's
    /// files (the same boot and mount namespace), and where it is when it
    /// does not: `local` and `far`. A daemon reached through a socket ssh
    /// forwards from elsewhere is far; one that does not say (older) is
    /// taken as local when reached through a Unix socket.
    pub fn find_the_daemons_machine(&mut self) {
        match self.daemons_machine() {
            Some(m) if m.is_here() => (self.local, self.far) = (true, None),
            Some(m) => (self.local, self.far) = (false, Some(m)),
            None => (self.local, self.far) = (self.address.starts_with("unix!"), None),
        }
    }

    /// Whether the daemon sees this UI's files ([`Self::find_the_daemons_machine`]).
    pub fn on_this_machine(&self) -> bool {
        match self.daemons_machine() {
            Some(m) => m.is_here(),
            None => self.address.starts_with("unix!"),
        }
    }

    /// The daemon's `/machine`, read back; none from one that does not say.
    fn daemons_machine(&self) -> Option<apex_sys::machine::Described> {
        let c = self.att.client();
        let said = self.rt.block_on(async move {
            let root = c.attach(&apex_ninep::ns::user_name(), "").await.ok()?;
            let f = c.open_path(root, "machine", apex_ninep::fcall::OREAD).await;
            let _ = c.clunk(root).await;
            let f = f.ok()?;
            let bytes = c.read_all(&f).await;
            let _ = c.clunk(f.fid).await;
            bytes.ok()
        });
        said.map(|bytes| apex_sys::machine::Described::parse(&String::from_utf8_lossy(&bytes)))
    }

    /// Reads the `edit` ports, as acme reads its plumber's: the session's
    /// plumber's (`NAME/plumb/edit`), and that of a plumber another
    /// program posts as `plumb` in the namespace, unless that is the
    /// session's own. Each message is queued in `plumbed` and the UI
    /// woken. A port that ends or cannot be opened (no plumber yet, the
    /// daemon dialled again, no rule names `edit`) is tried again every
    /// [`PLUMB_RETRY`] (acme's `startplumbing` every 2 s).
    pub fn listen_to_plumber(&self) {
        let socket = self.namespace.join("plumb");
        let (queue, wake) = (self.plumbed.clone(), self.wake.clone());
        let (att, session) = (self.att.clone(), self.session.clone());
        self.rt.spawn(async move {
            loop {
                let c = att.client();
                if let Ok(root) = c.attach(&apex_ninep::ns::user_name(), "").await {
                    let port = format!("{session}/plumb/edit");
                    apex_link::plumber::read_port(&c, root, &port, |m| queued(&queue, &wake, m)).await;
                    let _ = c.clunk(root).await;
                }
                tokio::time::sleep(PLUMB_RETRY).await;
            }
        });
        let (queue, wake) = (self.plumbed.clone(), self.wake.clone());
        let (att, session) = (self.att.clone(), self.session.clone());
        self.rt.spawn(async move {
            loop {
                let address = format!("unix!{}", socket.display());
                let theirs =
                    socket.exists() && !apex_link::plumber::is_session_plumber(&att.client(), &session, &address).await;
                if theirs {
                    read_edit_port(&address, &queue, &wake).await;
                }
                tokio::time::sleep(PLUMB_RETRY).await;
            }
        });
    }

    /// Dials the daemon again until it answers, then resumes the
    /// attachment on the new connection (or is attached anew, with what
    /// the daemon never acknowledged recovered). Runs until it has.
    /// One such task at a time.
    pub fn reconnect(&self) {
        use std::sync::atomic::Ordering;
        if self.dialling.swap(true, Ordering::SeqCst) {
            return;
        }
        let (att, address, session) = (self.att.clone(), self.address.clone(), self.session.clone());
        let dialling = self.dialling.clone();
        self.rt.spawn(async move {
            let mut pause = Duration::from_millis(50);
            loop {
                tokio::time::sleep(pause).await;
                pause = (pause * 2).min(Duration::from_secs(1));
                let Ok(client) = apex_ninep::dial(&address, 1 << 20).await else { continue };
                if att.reconnect(&client, &session).await.is_ok() {
                    dialling.store(false, Ordering::SeqCst);
                    return;
                }
            }
        });
    }

    /// A request that needs the daemon, refused at once while the
    /// connection is gone (rather than waiting for it).
    fn connected(&self) -> Result<(), ExecError> {
        match self.att.is_closed() {
            true => Err(host("apexd is not connected (apex-ui is dialling it again)")),
            false => Ok(()),
        }
    }
    /// The current directory of the program in terminal `term` (its
    /// `ctl`'s `cwd`), where a relative name in its output is.
    pub fn term_cwd(&self, term: apex_core::TermId) -> Option<String> {
        let (c, path) = (self.att.client(), format!("{}/terms/{}/ctl", self.session, term.0));
        let text = self.rt.block_on(async move {
            let f = crate::terms::open_file(&c, &path, apex_ninep::fcall::OREAD).await.ok()?;
            let bytes = c.read_all(&f).await;
            let _ = c.clunk(f.fid).await;
            bytes.ok()
        })?;
        String::from_utf8_lossy(&text).lines().find_map(|l| l.strip_prefix("cwd ").map(str::to_string))
    }

    /// Writes `text` to the session's file `path` (one message); the
    /// daemon's refusal as it worded it.
    fn write(&self, path: &str, text: &str) -> Result<(), ExecError> {
        let (c, session) = (self.att.client(), self.session.clone());
        let path = format!("{session}/{path}");
        let text = text.to_string();
        self.rt.block_on(async move {
            let f = crate::terms::open_file(&c, &path, OWRITE).await.map_err(|e| host(format!("{path}: {e}")))?;
            let r = c.write(f.fid, 0, text.as_bytes()).await;
            let _ = c.clunk(f.fid).await;
            r.map(|_| ()).map_err(host)
        })
    }

    /// Sends a B3 click's text to a plumber, as acme's `look3` does: the
    /// session's first (`NAME/plumb/send`), then one another program
    /// posts as `plumb` in the namespace. True if one took it; false if
    /// none did (no rule matched, no one reads the port), so the caller
    /// looks the text up itself.
    pub fn plumb(&self, window: WindowId, plumb: &plumb::Plumb) -> Result<bool, ExecError> {
        let socket = self.namespace.join("plumb");
        // acme does not plumb what would not fit a plumber's message.
        if plumb.data.len() >= PLUMB_MESSAGE - 1024 {
            return Ok(false);
        }
        let wdir = {
            let st = self.state()?;
            let name = st.window(window).ok().and_then(|w| st.buffer(w.body).ok()).map(|b| b.name.clone());
            name.and_then(|n| look::window_dir(&n)).unwrap_or_else(|| self.cwd())
        };
        let message = plumb.message(&wdir);
        let address = format!("unix!{}", socket.display());
        let (c, session) = (self.att.client(), self.session.clone());
        let send = format!("{session}/plumb/send");
        self.rt.block_on(async move {
            let ours = tokio::time::timeout(WAIT, async {
                let root = c.attach(&apex_ninep::ns::user_name(), "").await?;
                let sent = apex_link::plumber::send_on(&c, root, &send, &message).await;
                let _ = c.clunk(root).await;
                sent
            })
            .await;
            if matches!(ours, Ok(Ok(()))) {
                return Ok(true);
            }
            // Another program's plumber, not the session's own posted
            // (which just refused it).
            let theirs = socket.exists() && !apex_link::plumber::is_session_plumber(&c, &session, &address).await;
            Ok(theirs && apex_link::plumber::send_to(&address, &message).await.is_ok())
        })
    }

    /// Flushes and waits until the daemon has acknowledged everything.
    /// Edit's `e`, `r` and `w` name files of apexd's machine; a UI that
    /// reaches apexd over the network has no way to them.
    fn on_daemons_machine(&self) -> Result<(), PipeError> {
        match self.local {
            true => Ok(()),
            false => Err(PipeError::Elsewhere(
                "apexd runs on another machine and Edit's e, r and w use its files: \
                          use Get and Put, or run the Edit through apexd's acme tree there",
            )),
        }
    }

    /// A host for a thread of the UI's own (an Edit's): the same link,
    /// daemon and machine, the frames as they are now; Edits run where it
    /// is, and `stop` says when to end one.
    pub fn worker(&self, stop: Arc<std::sync::atomic::AtomicBool>) -> UiHost {
        let mut worker =
            UiHost::new(self.att.clone(), &self.address, &self.session, self.rt.clone(), self.namespace.clone());
        worker.local = self.local;
        worker.far.clone_from(&self.far);
        worker.font.clone_from(&self.font);
        worker.last_pattern.clone_from(&self.last_pattern);
        worker.frames.clone_from(&self.frames);
        worker.later = self.later.clone();
        worker.apart = false;
        worker.stop = stop;
        worker.replica = Some(self.att.with(|l| l.welcomed()));
        worker
    }

    pub fn settle(&self) -> Result<(), ExecError> {
        self.connected()?;
        let att = self.att.clone();
        self.rt.block_on(async move {
            att.flush().await.map_err(host)?;
            match att.wait_for(WAIT, |l| l.quiet()).await {
                true => Ok(()),
                false => Err(host("the daemon did not acknowledge this UI's changes in time")),
            }
        })
    }
}

impl Pipes for UiHost {
    fn run(&mut self, command: &str, input: Option<&str>, file: &EditFile) -> Result<String, PipeError> {
        let dir = apex_core::look::window_dir(&file.name).filter(|d| std::path::Path::new(d).is_dir());
        // The command's process group is kept while it runs, so `Kill
        // Edit` can end it; one that starts after the kill ends at once.
        let (group, stop) = (self.pipe_group.clone(), self.stop.clone());
        let ran = apex_sys::shell::pipe(command, input, dir.as_deref().map(std::path::Path::new), |pid| {
            *group.lock().unwrap_or_else(std::sync::PoisonError::into_inner) = Some(pid);
            if stop.load(std::sync::atomic::Ordering::Relaxed) {
                crate::editjob::kill_group(pid);
            }
        });
        *self.pipe_group.lock().unwrap_or_else(std::sync::PoisonError::into_inner) = None;
        ran
    }

    // Files are the daemon's, as Get's and Put's are: on its machine the
    // UI reads and writes them itself; from elsewhere it cannot.
    fn load(&mut self, path: &str) -> Result<Vec<u8>, PipeError> {
        self.on_daemons_machine()?;
        apex_sys::files::read_for_edit(path)
    }

    fn save(&mut self, path: &str, bytes: &[u8]) -> Result<(), PipeError> {
        self.on_daemons_machine()?;
        apex_sys::files::write_for_edit(path, bytes)
    }

    fn interrupted(&mut self) -> bool {
        self.stop.load(std::sync::atomic::Ordering::Relaxed)
    }
}

impl Host for UiHost {
    fn state(&self) -> Result<impl Deref<Target = State> + '_, ExecError> {
        let guard = self.att.lock();
        match guard.node() {
            Some(_) => Ok(StateGuard(guard)),
            None => Err(host("not attached yet")),
        }
    }

    fn propose(&mut self, proposal: Proposal) -> Result<Applied, ExecError> {
        if !self.apart {
            // A worker's proposals come back to back (an Edit's parts):
            // the link's lock is not fair, so the UI's thread, waiting
            // to draw, is let in before each (not after: what a proposal
            // did is looked at right after it).
            std::thread::sleep(LET_IN);
        }
        // A worker's Edit was gathered from the replica it began with: one
        // made anew since (the connection made again) has its own versions.
        let replica = self.replica;
        let submitted = self.att.with(|l| match replica.is_some_and(|r| r != l.welcomed()) {
            true => None,
            false => Some(l.submit_awaited(proposal)),
        });
        let Some(submitted) = submitted else {
            return Err(host(
                "Edit: the connection to apexd was made again while it ran, and the text it read may have \
                 changed: it proposes nothing more; run it again",
            ));
        };
        match submitted {
            Submitted::Applied(r) => r.map_err(host),
            Submitted::Sent(id) => {
                // Not leading it: the holder answers; wait for that. The
                // answer is kept for this wait alone (another thread may
                // be reading the link's events meanwhile).
                let connected = self.connected();
                let att = self.att.clone();
                let waited = connected.and_then(|()| {
                    self.rt.block_on(async move {
                        let mut changes = att.changes();
                        att.flush().await.map_err(host)?;
                        let deadline = tokio::time::Instant::now() + WAIT;
                        loop {
                            if let Some(result) = att.with(|l| l.take_answer(id)) {
                                return Ok(result);
                            }
                            match tokio::time::timeout_at(deadline, changes.changed()).await {
                                Ok(Ok(())) => {}
                                _ => return Err(host("no answer from the shard's holder in time")),
                            }
                        }
                    })
                });
                if waited.is_err() {
                    self.att.with(|l| l.forget_answer(id));
                }
                waited?.map_err(host)
            }
        }
    }

    fn get(&mut self, buffer: BufferId, file: Option<&str>) -> Result<(), ExecError> {
        if self.local {
            let name = self.state()?.buffer(buffer)?.name.clone();
            let named = file.is_some();
            // As acme's get, and the daemon's (`host::acme_get`): no name
            // is "no file name"; a file that cannot be read leaves the
            // window empty and clean, and says so.
            let file = exec::file_or_name("get", file.map(str::to_string), &name).map_err(|e| match e {
                ExecError::Unnamed(_) => ExecError::NoFileName,
                e => e,
            })?;
            let (pieces, said, unreadable) = match apex_sys::files::read_utf8("get", &file) {
                Ok((pieces, said)) => (pieces, said, None),
                Err(apex_sys::files::FileError::Read { source, .. }) => {
                    (Vec::new(), Default::default(), Some(apex_sys::files::os_words(&source)))
                }
            };
            // A copy (ropes share their nodes), so the link's lock is not
            // held while the text is compared and the places counted.
            let (buf, last) = {
                let link = self.att.lock();
                let node = link.node().ok_or_else(|| host("not attached yet"))?;
                (node.state.buffer(buffer)?.clone(), node.log.last(apex_core::Shard::Buffer(buffer)))
            };
            let proposals = exec::get_proposals(&buf, buffer, &file, named, pieces);
            let mut as_read = true;
            for p in proposals {
                // A window's place put back is a nicety (see `keeps_place`),
                // and only where nothing came between (`replaced_as_read`).
                let place = exec::keeps_place(&p);
                if place && !as_read {
                    continue;
                }
                let replaces = exec::replaces_text(&p);
                match self.propose(p) {
                    Err(_) if place => {}
                    Ok(applied) if replaces => as_read = exec::replaced_as_read(&applied, buffer, last),
                    r => r.map(|_| ())?,
                }
            }
            if let Some(why) = unreadable {
                return Err(ExecError::CantOpen { file, why });
            }
            // The text is not the file's bytes: said beside the file.
            if let Some(warning) = apex_sys::files::load_warning(&file, said) {
                let window = self.state()?.windows.iter().find(|(_, w)| w.body == buffer).map(|(id, _)| *id);
                exec::warn(self, window, &warning)?;
            }
            return Ok(());
        }
        self.settle()?;
        let msg = match file {
            Some(f) => format!("get {f}\n"),
            None => "get\n".into(),
        };
        self.write(&format!("buffers/{}/ctl", buffer.0), &msg)
    }

    fn put(&mut self, buffer: BufferId, file: Option<&str>) -> Result<(), ExecError> {
        self.settle()?;
        let version = self.state()?.buffer(buffer)?.version;
        let msg = match file {
            Some(f) => format!("put -v {version} {f}\n"),
            None => format!("put -v {version}\n"),
        };
        self.write(&format!("buffers/{}/ctl", buffer.0), &msg)
    }

    /// The daemon puts each file, a durable write that waits on its
    /// disk: the writes to the buffers' ctl files go side by side,
    /// [`PUTS_AT_ONCE`] at a time (files named twice in turn, by
    /// `exec::put_rounds`), so a Putall of many files holds this UI a
    /// fraction as long as one after another.
    fn put_each(&mut self, buffers: &[BufferId]) -> Vec<Result<(), ExecError>> {
        if let Err(e) = self.settle() {
            return buffers.iter().map(|_| Err(e.clone())).collect();
        }
        // Each buffer's name and version, settled with the daemon; one
        // that is gone fails alone, as its own put would.
        let found: Vec<Result<(String, u64), ExecError>> = match self.state() {
            Ok(st) => buffers
                .iter()
                .map(|b| st.buffer(*b).map(|b| (b.name.clone(), b.version)).map_err(ExecError::from))
                .collect(),
            Err(e) => buffers.iter().map(|_| Err(e.clone())).collect(),
        };
        let names: Vec<&str> = found.iter().map(|f| f.as_ref().map_or("", |(name, _)| name.as_str())).collect();
        let round_of = exec::put_rounds(&names);
        let mut out: Vec<Result<(), ExecError>> =
            found.iter().map(|f| f.as_ref().map(|_| ()).map_err(Clone::clone)).collect();
        let at_once = Arc::new(tokio::sync::Semaphore::new(PUTS_AT_ONCE));
        for round in 0..=round_of.iter().copied().max().unwrap_or(0) {
            let writes: Vec<_> = (0..buffers.len())
                .filter(|i| round_of[*i] == round && out[*i].is_ok())
                .map(|i| {
                    let (c, at_once) = (self.att.client(), at_once.clone());
                    let path = format!("{}/buffers/{}/ctl", self.session, buffers[i].0);
                    let version = found[i].as_ref().map_or(0, |(_, v)| *v);
                    let msg = format!("put -v {version}\n");
                    let write = self.rt.spawn(async move {
                        let _turn = at_once.acquire_owned().await;
                        let f = crate::terms::open_file(&c, &path, OWRITE)
                            .await
                            .map_err(|e| host(format!("{path}: {e}")))?;
                        let r = c.write(f.fid, 0, msg.as_bytes()).await;
                        let _ = c.clunk(f.fid).await;
                        r.map(|_| ()).map_err(host)
                    });
                    (i, write)
                })
                .collect();
            for (i, write) in writes {
                out[i] = self.rt.block_on(write).unwrap_or_else(|e| Err(host(format!("put: {e}"))));
            }
        }
        out
    }

    fn start(&mut self, dir: Option<&str>, command: &str, window: Option<WindowId>) -> Result<(), ExecError> {
        let dir = dir.filter(|d| std::path::Path::new(d).is_dir()).map(str::to_string).unwrap_or_else(|| self.cwd());
        let number = window.and_then(|w| self.state().ok()?.layout.numbers.get(&w).map(|n| n.0));
        let mut flags = String::new();
        if let Some(n) = number {
            flags += &format!("-w {n} ");
        }
        if let Some(font) = &self.font {
            flags += &format!("-f {} ", apex_core::ctlword::encode(font));
        }
        // What this UI did is the daemon's first (a `|cmd` pipes the
        // selection this UI just made): the flush's write is answered
        // once the daemon has applied it.
        let att = self.att.clone();
        self.rt.block_on(async move { att.flush().await }).map_err(host)?;
        self.write("ctl", &format!("exec {flags}{dir} {command}\n")).map_err(|e| host(format!("{command}: {e}")))
    }

    fn kill(&mut self, pid: u64) -> Result<(), ExecError> {
        if let Some(job) = self.edit.as_ref().filter(|_| pid == EDIT_JOB) {
            job.kill();
            return Ok(());
        }
        self.write("ctl", &format!("kill {pid}\n")).map_err(|e| host(format!("kill {pid}: {e}")))
    }

    // An Edit runs on a thread of its own, so that this UI goes on
    // drawing and typing: one at a time.
    fn run_apart(&mut self, edit: PreparedEdit) -> Result<Option<PreparedEdit>, ExecError> {
        if !self.apart {
            return Ok(Some(edit));
        }
        if let Some(running) = &self.edit {
            return Err(ExecError::EditRunning(running.command().to_string()));
        }
        let mut worker = self.worker(Arc::default());
        let (stop, group, command) = (worker.stop.clone(), worker.pipe_group.clone(), edit.command().to_string());
        let work = move || {
            let last = worker.last_pattern.clone();
            let ran = edit.run(&mut worker, last);
            let result = exec::finish_edit(&mut worker, ran);
            Ended {
                result,
                last_pattern: worker.last_pattern.take(),
                unshown: std::mem::take(&mut worker.unshown),
                events: std::mem::take(&mut worker.events),
            }
        };
        let job = EditJob::start(command, stop, group, self.wake.clone(), work)
            .map_err(|e| host(format!("Edit: no thread: {e}")))?;
        self.edit = Some(job);
        Ok(None)
    }

    // A worker's Edit applies its parts in this UI's replica, each under
    // the link's lock the drawing thread waits on: small parts keep a
    // keystroke's wait within a frame.
    fn part_changes(&self) -> usize {
        match self.apart {
            true => apex_core::op::SPOTS_MAX,
            false => WORKER_PART,
        }
    }

    fn jobs(&self) -> Vec<(u64, String)> {
        self.edit.iter().map(|job| (EDIT_JOB, format!("Edit {}", job.command()))).collect()
    }

    fn close_term(&mut self, term: apex_core::TermId) -> Result<(), ExecError> {
        self.write(&format!("terms/{}/ctl", term.0), "close\n").map_err(|e| host(format!("Del: {e}")))
    }

    // The daemon runs the terminal and shows it in a new window, which
    // this UI, leading the layout, makes.
    fn start_term(&mut self, dir: Option<&str>, command: Option<&str>) -> Result<(), ExecError> {
        let mut msg = "term".to_string();
        if let Some(d) = dir {
            msg += &format!(" -d {}", apex_core::ctlword::encode(d));
        }
        if let Some(c) = command {
            msg += &format!(" {c}");
        }
        // Not waited for: the daemon answers once the terminal's window
        // is made, which this UI (leading the layout) makes when it next
        // wakes. A refusal is said then, in +Errors.
        self.connected()?;
        let (c, path, later, wake) =
            (self.att.client(), format!("{}/ctl", self.session), self.later.clone(), self.wake.clone());
        self.rt.spawn(async move {
            if let Err(e) = crate::terms::write_file(&c, &path, format!("{msg}\n").as_bytes()).await {
                later.lock().expect("later lock").push(apex_link::Event::Error(format!("Win: {e}")));
                wake.notify_one();
            }
        });
        Ok(())
    }

    fn exists(&mut self, path: &str) -> bool {
        std::path::Path::new(path).exists()
    }

    fn read_file(&mut self, path: &str) -> Result<Vec<u8>, ExecError> {
        apex_sys::files::read_file(path).map_err(|e| host(format!("can't open load file {path}: {e}")))
    }

    fn write_file(&mut self, path: &str, bytes: &[u8]) -> Result<(), ExecError> {
        std::fs::write(path, bytes).map_err(|e| host(format!("can't open {path}: {e}")))
    }

    /// The daemon's user's home where it runs on another machine.
    fn home(&self) -> Option<String> {
        match &self.far {
            Some(far) => far.home.clone(),
            None => apex_sys::machine::home(),
        }
    }

    /// The daemon's directory where it runs on another machine: a
    /// relative name there is one of its files.
    fn cwd(&self) -> String {
        match self.far.as_ref().and_then(|far| far.cwd.clone()) {
            Some(dir) => dir,
            None => apex_sys::machine::cwd(),
        }
    }

    fn exit(&mut self, _abort: bool) -> Result<(), ExecError> {
        self.exit = true;
        Ok(())
    }

    fn shown(&mut self, window: WindowId) -> Option<apex_core::show::Shown> {
        let frame = self.frames.get(&window).copied();
        if frame.is_none() && !self.unshown.contains(&window) {
            self.unshown.push(window);
        }
        frame
    }

    fn term_selection(&mut self, window: WindowId) -> Option<(u64, u64)> {
        self.term_selections.get(&window).copied()
    }

    fn show_term_text(&mut self, window: WindowId, q0: u64, q1: u64) -> Result<(), ExecError> {
        self.term_found = Some((window, q0, q1));
        self.term_selections.insert(window, (q0, q1));
        Ok(())
    }

    fn last_pattern(&self) -> Option<String> {
        self.last_pattern.clone()
    }

    fn set_last_pattern(&mut self, pattern: Option<String>) {
        self.last_pattern = pattern;
    }
}

/// Whether a daemon's `/machine` names this machine.
pub fn same_machine(said: &str) -> bool {
    apex_sys::machine::Described::parse(said).is_here()
}

/// How often a UI looks for a plumber while it has none.
pub const PLUMB_RETRY: Duration = Duration::from_secs(2);

/// Reads the `edit` port of the plumber at `address` until it goes away,
/// each whole message queued and the UI woken.
async fn read_edit_port(address: &str, queue: &Arc<Mutex<Vec<plumb::Message>>>, wake: &Arc<tokio::sync::Notify>) {
    let Ok(c) = apex_ninep::dial(address, (PLUMB_MESSAGE + 24) as u32).await else { return };
    let Ok(root) = c.attach(&apex_ninep::ns::user_name(), "").await else { return };
    apex_link::plumber::read_port(&c, root, "edit", |m| queued(queue, wake, m)).await;
}

/// A message from an `edit` port, for the UI to act on.
fn queued(queue: &Arc<Mutex<Vec<plumb::Message>>>, wake: &Arc<tokio::sync::Notify>, m: plumb::Message) {
    queue.lock().expect("plumbed lock").push(m);
    wake.notify_one();
}
