//! The files of a session's directory `/NAME/`: `id`, `label` (renames
//! it), `ctl` (windows, buffers, commands, kills), `hash` and `snapshot`
//! (made off the lock), `proposals` (write one, read the recent
//! outcomes), `attach` (the attach protocol), and the tables of `meta/`.
//!
//! Reading `attach` keeps the stream's bytes in the order they were
//! taken. A Welcome is taken and handed to its encoder with no await
//! between, so a flushed read does not lose it; a big one is encoded in
//! parts on a blocking thread, each part waking the readers, its sender
//! dropped before the last wake-up however the encoder ends, so no reader
//! waits for a part that never comes. Bytes a read took and could not
//! return (flushed while it waited for the log to settle, or the settling
//! failed) are put back (`feed::unread`), and until the read answers or
//! puts them back the connection's next read waits (`Taken`); replies of
//! two reads outstanding at once may still cross (apex(4) asks for one
//! at a time). A read that panicked holding bytes breaks the stream
//! (`Taken::break_off`) rather than lock a session its panic may have
//! poisoned; a read that finds it broken takes the connection as hung up
//! (`protocol::broken`: its grace, for the resume the error asks for).
//! A flush that comes after the Rread was queued loses that reply, as
//! flush(5) allows.

use crate::attach::error::AttachError;
use crate::attach::feed::{self, Readable, WELCOME_PART};
use crate::attach::hub::{ConnId, Written};
use crate::attach::protocol;
use crate::error::{Error, Result};
use crate::fsys::error::FsError;
use crate::fsys::fid::{utf8, Fid, Opened};
use crate::fsys::made::Made;
use crate::fsys::place::{Place, SessionFile};
use crate::fsys::tree::Fsys;
use crate::host;
use crate::session::ctl::SessionCtl;
use crate::session::Session;
use crate::shards::tables::{self, MetaTable};
use apex_core::{AcmeNumber, Proposal};

/// A session file's content now.
pub fn content(s: &Session, file: SessionFile) -> Made {
    match file {
        SessionFile::Id => format!("{}\n", s.uuid()).into(),
        SessionFile::Label => format!("{}\n", s.label()).into(),
        SessionFile::Hash => Made::Hash(Box::new(s.view().state.clone())),
        SessionFile::Snapshot => Made::Snapshot(Box::new(s.view().state.clone())),
        SessionFile::Proposals => tables::outcomes(s).into(),
        SessionFile::Ctl | SessionFile::Attach => Made::Bytes(Vec::new()),
    }
}

/// A table of `meta/` now.
pub fn meta_content(s: &Session, table: MetaTable) -> Made {
    tables::meta_table(&s.view().state, table).into()
}

impl Fsys {
    pub(crate) async fn session_open(&self, n: u64, file: SessionFile, mode: u8) -> Result<Opened> {
        if file == SessionFile::Attach {
            if mode & 3 != 2 {
                return Err(FsError::AttachMode.into());
            }
            return Ok(Opened::Attach(self.daemon.change(n, |s, _| s.hub_mut().open())?));
        }
        // As a fid keeps it: a snapshot in parts, its texts not copied
        // and its parts shared.
        let made = || self.made_in(Place::Session1(n, file), |s| Ok(content(s, file)));
        let version = match file {
            SessionFile::Snapshot => self.snapshot_version(n, made).await?,
            _ => made()?.version().await,
        };
        Ok(Opened::Content(crate::fsys::fid::Content::of(version)))
    }

    pub(crate) async fn session_write(&self, fid: &Fid, n: u64, file: SessionFile, data: Vec<u8>) -> Result<()> {
        if file == SessionFile::Attach {
            let Opened::Attach(conn) = *fid.lock() else { return Err(FsError::Unopened("attach").into()) };
            match self.daemon.change(n, |s, now| protocol::write(s, conn, &data, now))?? {
                Written::Done => {}
                Written::Wait(id, rx) => {
                    self.daemon.outcome(n, id, rx).await?;
                }
            }
            return Ok(());
        }
        let text = utf8(data)?;
        match file {
            SessionFile::Label => {
                let old = self.daemon.read(n, |s| s.label().to_string())?;
                // Said whatever the outcome, as for /ctl's commands.
                let renamed = self.daemon.reg().rename(&old, text.trim_end_matches('\n'));
                self.daemon.changed();
                Ok(renamed?)
            }
            SessionFile::Ctl => {
                let reply = self.session_ctl(n, &text).await?;
                if let Some(c) = fid.lock().content() {
                    c.bytes = crate::fsys::made::Version::Plain(reply.into_bytes());
                }
                Ok(())
            }
            SessionFile::Proposals => {
                let request = text.lines().next().unwrap_or("").to_string();
                let p = self.daemon.change(n, |s, _| {
                    crate::session::proposals::parse(&text, &s.view().state).map_err(|why| s.refuse(&request, why))
                })??;
                // (`propose` limits it to this request's scope.)
                self.daemon.propose(n, &request, p).await?;
                Ok(())
            }
            _ => Err(crate::fsys::place::not_writable(Place::Session1(n, file)).into()),
        }
    }

    /// A write to the session's `ctl`; returns what a read of the fid
    /// then gives: a line naming each terminal it made and each window a
    /// file was opened in.
    async fn session_ctl(&self, n: u64, text: &str) -> Result<String> {
        let mut reply = String::new();
        let msgs = self
            .daemon
            .read(n, |s| crate::session::ctl::parse_session(text, &s.view().state).map_err(Error::from))??;
        // The files opened, read ahead of their windows' Gets (each read
        // while the file before it goes into the session); not for a
        // scope that may not read the daemon's files.
        let opened = msgs.iter().filter_map(|m| match m {
            SessionCtl::Open { file, .. } => Some(file.clone()),
            _ => None,
        });
        let full = crate::access::current() == crate::access::Scope::Full;
        let mut ahead = host::ahead::ReadAhead::new(opened.filter(|_| full));
        for msg in msgs {
            let request = format!("ctl {msg:?}");
            let propose = |p: Proposal| async { self.daemon.propose(n, &request, p).await.map(|_| ()) };
            match msg {
                SessionCtl::Window(name) => {
                    propose(Proposal::CreateWindow {
                        body: None,
                        column: None,
                        name: name.unwrap_or_default(),
                        near: None,
                    })
                    .await?
                }
                SessionCtl::Buffer(name) => {
                    propose(Proposal::CreateBuffer { name: name.unwrap_or_default(), text: String::new() }).await?
                }
                SessionCtl::DelWindow(num) => {
                    let numbered = |s: &Session| {
                        let k = u32::try_from(num).ok()?;
                        s.view().state.layout.window_numbered(apex_core::AcmeNumber(k))
                    };
                    let window = self.daemon.read(n, numbered)?.ok_or(FsError::NoWindow(num))?;
                    propose(Proposal::DeleteWindow { window }).await?
                }
                SessionCtl::Exec { dir, command, window, font } => {
                    let font = font.and_then(|f| apex_core::ctlword::decode(&f));
                    let window = window.and_then(|w| u32::try_from(w).ok()).map(AcmeNumber);
                    let env = host::CommandEnv { window, font };
                    host::exec(&self.daemon, n, &dir, &command, &env).await.map(|_| ())?
                }
                SessionCtl::Kill(pid) => host::kill(&self.daemon, n, pid)?,
                SessionCtl::Term(spec) => {
                    let id = crate::term::drive::start_shown(&self.daemon, n, spec).await?;
                    reply += &format!("{}\n", id.0);
                }
                SessionCtl::Open { file, address } => {
                    let read = ahead.take(&file);
                    let number = host::open(&self.daemon, n, &file, address.as_deref(), read).await?;
                    reply += &format!("{number}\n");
                }
            }
        }
        Ok(reply)
    }

    /// Reads the attach stream, waiting until there is something. A big
    /// Welcome is read in parts of [`WELCOME_PART`] bytes.
    pub(crate) async fn read_attach(&self, n: u64, fid: &Fid, count: u32) -> Result<Vec<u8>> {
        let Opened::Attach(conn) = *fid.lock() else { return Err(FsError::Unopened("attach").into()) };
        loop {
            let mut wake = self.daemon.subscribe_to(n);
            let read = |s: &mut crate::session::Session| {
                let got = feed::read_deferred(s, conn, count)?;
                let held = matches!(got, Readable::Bytes(_)).then(|| feed::hold(s, conn)).flatten();
                // A read that waits is reading (until it is woken).
                let waiting = matches!(got, Readable::Nothing).then(|| feed::waiting(s, conn)).flatten();
                if feed::take_parts_read(s, conn) {
                    // A big Welcome's parts, read and freed: given back,
                    // or the daemon would hold a session's size more for
                    // each UI that attached (off the lock; it holds
                    // malloc's while it walks the heap).
                    tokio::task::spawn_blocking(apex_sys::malloc::give_back);
                }
                Ok::<_, AttachError>((got, held, waiting))
            };
            let got = match self.daemon.tend(n, read)? {
                Err(e) if e.breaks_stream() => return Err(self.stream_broke(n, conn, e)),
                got => got?,
            };
            let waiting = match got {
                (Readable::Bytes(bytes), held, _) => {
                    // Acks and entries go out once the log has them as the
                    // sync policy says. A read flushed (or failed) while it
                    // waits never happened: its bytes are read again, and
                    // the connection's next read waits until then.
                    let taken = Unread { daemon: self.daemon.clone(), n, conn, bytes: Some(bytes), held };
                    self.daemon.settle(self.daemon.durable(n)).await?;
                    return Ok(taken.keep());
                }
                (Readable::Nothing, _, waiting) => waiting,
                (Readable::Welcome(job), _, _) if job.is_big() => {
                    // Encoded on a thread in parts that are read as they
                    // are made, so the client decodes the first while the
                    // rest is encoded.
                    let (tx, parts) = std::sync::mpsc::channel();
                    self.daemon.tend(n, |s| feed::in_parts(s, conn, parts))?;
                    let parts = Parts { tx: Some(tx), daemon: self.daemon.clone(), n };
                    tokio::task::spawn_blocking(move || {
                        let whole = job.frame_in_parts(WELCOME_PART, |part| parts.send(Some(part)));
                        // Said only when it is: a reader that finds the
                        // sender gone without it knows the stream broke.
                        if whole {
                            parts.send(None);
                        }
                    });
                    continue;
                }
                (Readable::Welcome(job), _, _) => {
                    // Encoded with no lock held; the read then goes on. A
                    // panic must not leave this connection's other reads
                    // waiting for frames that never come.
                    let frames = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| job.frame()));
                    let Ok(frames) = frames else {
                        tracing::error!("a Welcome could not be encoded; its connection's stream is broken");
                        self.daemon.tend(n, |s| feed::unfinished(s, conn))?;
                        return Err(self.stream_broke(n, conn, AttachError::WelcomeUnfinished));
                    };
                    self.daemon.tend(n, |s| feed::welcomed(s, conn, frames))?;
                    // Another read of this fid may be waiting for it.
                    self.daemon.changed_in(n);
                    continue;
                }
            };
            if wake.changed().await.is_err() {
                return Ok(Vec::new());
            }
            drop(waiting);
        }
    }
}

impl Fsys {
    /// `conn`'s stream broke: the error to answer with, the connection
    /// taken as hung up.
    fn stream_broke(&self, n: u64, conn: ConnId, e: AttachError) -> Error {
        hung_up(&self.daemon, n, conn);
        e.into()
    }
}

/// Takes `conn`, whose stream broke, as hung up: its attachment waits out
/// its grace for a resume and holds nothing back, and its readers are
/// woken to say so too.
fn hung_up(daemon: &crate::daemon::Daemon, n: u64, conn: ConnId) {
    let _ = daemon.change(n, |s, now| protocol::broken(s, conn, now));
}

/// Where a big Welcome's encoder sends its parts, waking the readers with
/// each. However the encoder ends (a panic too), the sender goes before
/// the readers are woken, so a reader woken then finds it gone (and the
/// stream broken, unless its end came), never just nothing yet.
struct Parts {
    tx: Option<std::sync::mpsc::Sender<Option<Vec<u8>>>>,
    daemon: crate::daemon::Daemon,
    /// The session whose reader waits for the parts.
    n: u64,
}

impl Parts {
    /// Sends a part (`None`: the end); false if the reader went.
    fn send(&self, part: Option<Vec<u8>>) -> bool {
        let sent = self.tx.as_ref().is_some_and(|tx| tx.send(part).is_ok());
        self.daemon.changed_in(self.n);
        sent
    }
}

impl Drop for Parts {
    fn drop(&mut self) {
        self.tx.take();
        self.daemon.changed_in(self.n);
    }
}

/// Bytes a read of `attach` took: put back in front of what is left to
/// read unless the read returns them; either way the connection's next
/// read may go on.
struct Unread {
    daemon: crate::daemon::Daemon,
    n: u64,
    conn: ConnId,
    bytes: Option<Vec<u8>>,
    held: Option<std::sync::Arc<crate::attach::hub::Taken>>,
}

impl Unread {
    fn keep(mut self) -> Vec<u8> {
        if self.held.take().is_some_and(|h| h.release()) {
            self.daemon.changed_in(self.n);
        }
        self.bytes.take().expect("kept once")
    }
}

impl Drop for Unread {
    fn drop(&mut self) {
        if let Some(bytes) = self.bytes.take() {
            // The session's lock is not held here: the read's future is
            // dropped by its task's cancellation or by `?` after `settle`.
            // A read that panicked cannot put its bytes back (the panic
            // may have poisoned the lock, and a second panic while
            // unwinding would abort the daemon): the stream is marked
            // broken instead, so the connection's reads fail from here
            // rather than go on past a gap.
            if std::thread::panicking() {
                if let Some(h) = self.held.take() {
                    h.break_off();
                }
                // This read's Rerror may be the last its client reads (the
                // link stops at an error): the connection is taken as hung
                // up now, not at a next read, so the resume it is told to
                // make is not refused as still connected. From a task:
                // the lock may be poisoned, and a panic here would abort.
                let (daemon, n, conn) = (self.daemon.clone(), self.n, self.conn);
                if let Ok(rt) = tokio::runtime::Handle::try_current() {
                    rt.spawn(async move { hung_up(&daemon, n, conn) });
                }
            } else {
                let _ = self.daemon.tend(self.n, |s| feed::unread(s, self.conn, bytes));
                if let Some(h) = self.held.take() {
                    h.release();
                }
            }
            self.daemon.changed_in(self.n);
        }
    }
}
