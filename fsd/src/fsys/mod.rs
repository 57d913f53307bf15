//! The file tree: what each file of `/` and `/NAME/` means, served through
//! `ninep::srv`.
//!
//! [`place`] names every file; this file resolves walks, makes stats and
//! listings, and dispatches opens, reads and writes to the modules that
//! give files their meaning (`buffers`, `proposals`, `tables`, `host`,
//! [`stream`]). A plain file's content is computed at open and again by
//! every read at offset 0; later offsets read that version, so a reader
//! sees one consistent version however many reads it takes. Directory
//! reads return whole stat entries from the listing made at open or by
//! the last read at offset 0, and continue only where the last one ended. Every
//! change wakes the blocked stream readers (`changed`).
//!
//! qid.path is interned per place and never reused; qid.vers is a body's
//! buffer version and 0 elsewhere.

use apex_core::error::acme::EPERM;
pub mod acme;
pub mod made;
pub mod place;
pub mod stream;

use crate::attach::feed::{self, Readable};
use crate::attach::hub::{ConnId, Written};
use crate::attach::protocol;
use crate::buffers::{self, BufferCtl};
use crate::ctlmsg::SessionCtl;
use crate::daemon::{gone, Daemon};
use crate::host;
use crate::registry::{parse_ctl, Registry};
use crate::tables::{self, MetaTable};
use apex_core::{BufferId, Proposal, Shard};
use apex_ninep::codec::put_stat;
use apex_ninep::fcall::{Qid, Stat, DMAPPEND, DMDIR, OTRUNC, QTAPPEND, QTDIR, QTFILE};
use apex_ninep::srv::{self, Serve};
use made::Made;
use place::{
    lookup, AcmeFile, BufferFile, Place, RootFile, SessionDir, SessionFile, ShardFile, WinFile, BUFFER, ROOT, SESSION,
    SESSION_DIRS, SHARD,
};
use std::sync::{Arc, Mutex, MutexGuard};
use stream::{Cursor, Fill, Source};

/// What an open fid holds.
#[derive(Debug, Default)]
struct Opened {
    /// The content a plain file or directory read at open (or offset 0).
    content: Vec<u8>,
    stream: Option<Cursor>,
    /// An incomplete UTF-8 sequence from the last body write.
    tail: Vec<u8>,
    /// The change count when the open made `content`, until a read uses
    /// it: a first read at offset 0 with nothing changed since need not
    /// make it again.
    fresh: Option<u64>,
    /// Where the last directory read ended: the only offset but 0 the next
    /// may have.
    dir_end: u64,
    /// Whether this fid counts as an open of its buffer's addr.
    addr_open: bool,
    /// The attach connection this fid is.
    attach: Option<ConnId>,
    /// The shards this fid reads entries or events of (kept uncompacted).
    reading: Vec<Shard>,
    /// acme's `log`: the index of the next line this fid reads.
    log_next: Option<u64>,
    /// acme's `wrsel`: where the next write inserts, at that version.
    wrsel: Option<(u64, u64)>,
    /// The window whose acme `event` file this is.
    event_of: Option<apex_core::WindowId>,
    /// The body whose acme `data`, `xdata` or `wrsel` this is (a clunk
    /// ends nomark).
    data_of: Option<BufferId>,
    /// The window whose `rdsel` this fid holds.
    rdsel: Option<apex_core::WindowId>,
}

/// A fid: its place and, once open, what it holds.
#[derive(Clone, Debug)]
pub struct Fid {
    pub place: Place,
    opened: Arc<Mutex<Opened>>,
}

impl Fid {
    fn at(place: Place) -> Fid {
        Fid { place, opened: Arc::new(Mutex::new(Opened::default())) }
    }

    fn lock(&self) -> MutexGuard<'_, Opened> {
        self.opened.lock().expect("fid lock")
    }

    /// The text of a write, whole runes only: an incomplete UTF-8 sequence
    /// at its end waits for this fid's next write (acme's body, cons and
    /// errors files do this).
    fn whole_runes(&self, data: Vec<u8>, file: &str) -> srv::Result<String> {
        let mut opened = self.lock();
        let mut bytes = match opened.tail.is_empty() {
            true => data,
            false => {
                let mut joined = std::mem::take(&mut opened.tail);
                joined.extend_from_slice(&data);
                joined
            }
        };
        let cut = match std::str::from_utf8(&bytes) {
            Ok(_) => bytes.len(),
            Err(e) if e.error_len().is_none() => e.valid_up_to(),
            Err(_) => return Err(format!("{file}: write is not UTF-8 text")),
        };
        opened.tail = bytes.split_off(cut);
        Ok(String::from_utf8(bytes).expect("checked"))
    }
}

/// The file tree over the daemon's sessions: what each file means, for
/// `ninep::srv`. Clones share everything.
#[derive(Clone)]
pub struct Fsys {
    pub daemon: Daemon,
    pub user: String,
    /// On the `acme` service (`apexd --acme NAME`): the session whose acme
    /// tree an attach with aname "" reaches.
    pub acme_service: Option<String>,
}

/// Seconds since the epoch, for stat's times.
fn now() -> u32 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs() as u32)
}

fn utf8(data: Vec<u8>) -> srv::Result<String> {
    String::from_utf8(data).map_err(|_| "write is not UTF-8 text".to_string())
}

impl Fsys {
    pub fn new(registry: Registry, user: String) -> Fsys {
        Fsys { daemon: Daemon::new(registry), user, acme_service: None }
    }

    /// This tree as the `acme` service of session `name`: attaches with
    /// aname "" reach its acme tree.
    pub fn acme_service(&self, name: &str) -> Fsys {
        Fsys { acme_service: Some(name.to_string()), ..self.clone() }
    }

    fn qid(&self, reg: &Registry, place: Place) -> Qid {
        let path = place.qid_path();
        let vers = match place {
            Place::Buffer1(s, b, BufferFile::Body) => {
                reg.get(s).and_then(|s| s.view.state.buffer(b).ok()).map_or(0, |b| b.version as u32)
            }
            _ => 0,
        };
        let ty = match place {
            _ if place.is_dir() => QTDIR,
            Place::Win1(_, _, WinFile::Body | WinFile::Tag) => QTAPPEND,
            _ => QTFILE,
        };
        Qid { ty, vers, path }
    }

    /// Whether `place` still exists, with an error saying what is gone.
    fn check(reg: &Registry, place: Place) -> srv::Result<()> {
        let Some(number) = place.session() else { return Ok(()) };
        let s = reg.get(number).ok_or_else(gone)?;
        match place {
            Place::Shard(_, shard) | Place::Shard1(_, shard, _) => {
                s.view.log.shard(shard).map(|_| ()).map_err(|_| format!("shard {shard} was deleted"))
            }
            Place::Buffer(_, b) | Place::Buffer1(_, b, _) => {
                s.view.state.buffer(b).map(|_| ()).map_err(|_| format!("buffer {} was deleted", b.0))
            }
            _ if place.in_acme() => acme::check(reg, place),
            _ => Ok(()),
        }
    }

    fn stat_in(&self, reg: &Registry, place: Place) -> srv::Result<Stat> {
        Fsys::check(reg, place)?;
        let label = match place {
            Place::Session(n) => reg.get(n).map(|s| s.label().to_string()).unwrap_or_default(),
            _ => String::new(),
        };
        let (name, perm) = place.name_perm(&label);
        let mode = match place {
            _ if place.is_dir() => DMDIR | perm,
            Place::Win1(_, _, WinFile::Body | WinFile::Tag) => DMAPPEND | perm,
            _ => perm,
        };
        Ok(Stat {
            qid: self.qid(reg, place),
            mode,
            name,
            uid: self.user.clone(),
            gid: self.user.clone(),
            muid: self.user.clone(),
            // Synthetic files have no length, and are as new as the
            // moment they are looked at, as in acme.
            length: 0,
            atime: now(),
            mtime: now(),
            ..Stat::default()
        })
    }

    fn children(reg: &Registry, place: Place) -> srv::Result<Vec<Place>> {
        Fsys::check(reg, place)?;
        if place.in_acme() {
            return acme::children(reg, place);
        }
        Ok(match place {
            Place::Root => {
                let mut v: Vec<Place> = ROOT.iter().map(|(_, f, _)| Place::Root1(*f)).collect();
                v.extend(reg.sessions().map(|s| Place::Session(s.number)));
                v
            }
            Place::Session(n) => {
                let mut v: Vec<Place> = SESSION.iter().map(|(_, f, _)| Place::Session1(n, *f)).collect();
                v.extend(SESSION_DIRS.iter().map(|(_, d, _)| Place::Dir(n, *d)));
                v
            }
            Place::Dir(n, SessionDir::Meta) => MetaTable::ALL.iter().map(|(_, t)| Place::Meta1(n, *t)).collect(),
            Place::Dir(n, SessionDir::Shards) => {
                let s = reg.get(n).ok_or_else(gone)?;
                s.view.log.shards().map(|(shard, _)| Place::Shard(n, *shard)).collect()
            }
            Place::Dir(n, SessionDir::Buffers) => {
                let s = reg.get(n).ok_or_else(gone)?;
                let mut v = vec![Place::BuffersNew(n)];
                v.extend(s.view.state.buffers.keys().map(|b| Place::Buffer(n, *b)));
                v
            }
            Place::Shard(n, shard) => SHARD.iter().map(|(_, f, _)| Place::Shard1(n, shard, *f)).collect(),
            Place::Buffer(n, b) => BUFFER.iter().map(|(_, f, _)| Place::Buffer1(n, b, *f)).collect(),
            _ => return Err("not a directory".into()),
        })
    }

    fn listing(&self, place: Place) -> srv::Result<Vec<u8>> {
        let reg = self.daemon.reg();
        let mut out = Vec::new();
        for p in Fsys::children(&reg, place)? {
            put_stat(&mut out, &self.stat_in(&reg, p)?);
        }
        Ok(out)
    }

    /// One walk step from directory `place`.
    fn step(reg: &Registry, place: Place, name: &str) -> Option<Place> {
        if name == ".." {
            return Some(place.parent());
        }
        if place.in_acme() {
            return acme::step(reg, place, name);
        }
        let next = match place {
            Place::Root => lookup(ROOT, name).map(Place::Root1).or_else(|| reg.by_name(name).map(Place::Session)),
            Place::Session(n) => lookup(SESSION, name)
                .map(|f| Place::Session1(n, f))
                .or_else(|| lookup(SESSION_DIRS, name).map(|d| Place::Dir(n, d))),
            Place::Dir(n, SessionDir::Meta) => {
                MetaTable::ALL.iter().find(|(m, _)| *m == name).map(|(_, t)| Place::Meta1(n, *t))
            }
            Place::Dir(n, SessionDir::Shards) => name.parse::<Shard>().ok().map(|s| Place::Shard(n, s)),
            Place::Dir(n, SessionDir::Buffers) if name == "new" => Some(Place::BuffersNew(n)),
            Place::Dir(n, SessionDir::Buffers) => name
                .bytes()
                .all(|c| c.is_ascii_digit())
                .then(|| name.parse().ok())
                .flatten()
                .map(|b| Place::Buffer(n, BufferId(b))),
            Place::Shard(n, shard) => lookup(SHARD, name).map(|f| Place::Shard1(n, shard, f)),
            Place::Buffer(n, b) => lookup(BUFFER, name).map(|f| Place::Buffer1(n, b, f)),
            _ => None,
        }?;
        Fsys::check(reg, next).ok().map(|_| next)
    }

    /// A plain file's content now: taken under the lock, made into bytes
    /// after it (`Made`).
    async fn content(&self, place: Place) -> srv::Result<Vec<u8>> {
        let made = self.content_made(place)?;
        Ok(made.made().await)
    }

    fn content_made(&self, place: Place) -> srv::Result<Made> {
        let reg = self.daemon.reg();
        Fsys::check(&reg, place)?;
        if place.in_acme() {
            return acme::content(&reg, place);
        }
        if let Place::Root1(RootFile::Index) = place {
            return Ok(reg.sessions().map(|s| s.index_line()).collect::<String>().into());
        }
        let Some(n) = place.session() else { return Ok(Made::Bytes(Vec::new())) };
        let s = reg.get(n).ok_or_else(gone)?;
        let text = match place {
            Place::Session1(_, SessionFile::Id) => format!("{}\n", s.uuid()),
            Place::Session1(_, SessionFile::Label) => format!("{}\n", s.label()),
            Place::Session1(_, SessionFile::Hash) => return Ok(Made::Hash(Box::new(s.view.state.clone()))),
            Place::Session1(_, SessionFile::Snapshot) => return Ok(Made::Snapshot(Box::new(s.view.state.clone()))),
            Place::Session1(_, SessionFile::Proposals) => tables::outcomes(s),
            Place::Meta1(_, t) => tables::meta_table(&s.view.state, t),
            Place::Shard1(_, shard, ShardFile::Lease) => {
                format!("{}\n", tables::lease_fields(s.view.log.lease(shard).map_err(|e| e.to_string())?))
            }
            Place::Shard1(_, shard, ShardFile::Info) => tables::shard_info(s, shard)?,
            Place::Buffer1(_, b, BufferFile::Body) => {
                return Ok(Made::Text(s.view.state.buffer(b).map_err(|e| e.to_string())?.text.clone()));
            }
            Place::Buffer1(_, b, BufferFile::Name) => {
                format!("{}\n", s.view.state.buffer(b).map_err(|e| e.to_string())?.name)
            }
            Place::Buffer1(_, b, BufferFile::Ctl) => buffers::ctl_read(s, b)?,
            Place::Buffer1(_, b, BufferFile::Addr) => buffers::addr_read(s, b)?,
            _ => String::new(),
        };
        Ok(text.into())
    }

    /// Reads a stream, waiting at its end for more.
    async fn read_stream(&self, fid: &Fid, offset: u64, count: u32) -> srv::Result<Vec<u8>> {
        loop {
            // Subscribe before looking, so a change in between still wakes us.
            let mut wake = self.daemon.subscribe();
            {
                let reg = self.daemon.reg();
                let mut opened = fid.lock();
                let cursor = opened.stream.as_mut().ok_or("stream is not open")?;
                if let Some(bytes) = cursor.take(offset, count)? {
                    return Ok(bytes);
                }
                match cursor.fill(&reg)? {
                    Fill::Data => continue,
                    Fill::End => return Ok(Vec::new()),
                    Fill::Wait => {}
                }
            }
            if wake.changed().await.is_err() {
                return Ok(Vec::new());
            }
        }
    }

    /// A write to the session's `ctl`.
    async fn session_ctl(&self, n: u64, text: &str) -> srv::Result<()> {
        let msgs = self.daemon.with_session(n, |s| crate::ctlmsg::parse_session(text, &s.view.state))?;
        for msg in msgs {
            let request = format!("ctl {msg:?}");
            let propose = |p: Proposal| async { self.daemon.propose(n, &request, p).await.map(|_| ()) };
            match msg {
                SessionCtl::Window(name) => {
                    propose(Proposal::CreateWindow { body: None, column: None, name: name.unwrap_or_default() }).await?
                }
                SessionCtl::Buffer(name) => {
                    propose(Proposal::CreateBuffer { name: name.unwrap_or_default(), text: String::new() }).await?
                }
                SessionCtl::DelWindow(num) => {
                    let window = self
                        .daemon
                        .reg()
                        .get(n)
                        .ok_or_else(gone)?
                        .view
                        .state
                        .layout
                        .window_numbered(apex_core::AcmeNumber(num))
                        .ok_or_else(|| format!("ctl: no window {num}"))?;
                    propose(Proposal::DeleteWindow { window }).await?
                }
                SessionCtl::Exec { dir, command } => host::exec(&self.daemon, n, &dir, &command).await.map(|_| ())?,
                SessionCtl::Kill(pid) => host::kill(&self.daemon, n, pid)?,
            }
        }
        Ok(())
    }

    /// The acme tree's record of window names after a buffer was renamed.
    fn note_buffer_name(&self, n: u64, b: BufferId) -> srv::Result<()> {
        self.daemon.with_session(n, |s| {
            s.acme.note_buffer_name(&s.view.state, b);
            Ok(())
        })
    }

    /// A write to `buffers/N/ctl`.
    async fn buffer_ctl(&self, n: u64, b: BufferId, text: &str) -> srv::Result<()> {
        let msgs = self.daemon.with_session(n, |s| buffers::parse_ctl(text, s, b))?;
        for msg in msgs {
            match msg {
                BufferCtl::Get(file) => host::get(&self.daemon, n, b, file).await?,
                BufferCtl::Put { version, file } => host::put(&self.daemon, n, b, version, file).await?,
                msg => {
                    let p = self.daemon.with_session(n, |s| buffers::ctl_proposal(s, b, &msg))?;
                    self.daemon.propose(n, &format!("ctl {} {msg:?}", b.0), p).await?;
                }
            }
        }
        Ok(())
    }

    /// A write to `shards/SHARD/lease`.
    fn lease_write(&self, n: u64, shard: Shard, text: &str) -> srv::Result<()> {
        match text.trim() {
            "reclaim" => self.daemon.with_session(n, |s| {
                let op = s.view.log.reclaim_op(shard).map_err(|e| e.to_string())?;
                s.view.push_meta(op).map(|_| ()).map_err(|e| e.to_string())
            }),
            other => Err(format!(
                "lease: unknown request {other:?}; expected \"reclaim\" (the server takes the lease back). \
                 Leases are asked for and given up through the attach protocol (NAME/attach)"
            )),
        }
    }
}

impl Fsys {
    /// A cursor on a shard's entries or events; the shard is not compacted
    /// while it is open.
    fn open_reader(&self, n: u64, shard: Shard, source: Source) -> srv::Result<Cursor> {
        let mut reg = self.daemon.reg();
        let cursor = Cursor::open(source, &reg)?;
        if let Some(s) = reg.get_mut(n) {
            s.hub.start_reading(shard);
        }
        Ok(cursor)
    }

    /// What a fid going away ends: its attach connection (a clunk ends the
    /// attachment, a hang-up starts its grace) and its hold on a shard.
    fn let_go(&self, fid: &Fid, hangup: bool) {
        let Some(n) = fid.place.session() else { return };
        let (attach, reading) = {
            let mut o = fid.lock();
            (o.attach.take(), std::mem::take(&mut o.reading))
        };
        if let Some(conn) = attach {
            let _ = self.daemon.with_hub(n, |s, now| match hangup {
                true => protocol::hangup(s, conn, now),
                false => protocol::clunk(s, conn, now),
            });
        }
        for shard in reading {
            if let Some(s) = self.daemon.reg().get_mut(n) {
                s.hub.stop_reading(shard);
            }
        }
    }

    /// Reads the attach stream, waiting until there is something.
    async fn read_attach(&self, n: u64, fid: &Fid, count: u32) -> srv::Result<Vec<u8>> {
        let conn = fid.lock().attach.ok_or("attach: not open")?;
        loop {
            let mut wake = self.daemon.subscribe();
            match self.daemon.with_hub_quiet(n, |s| feed::read_deferred(s, conn, count))?? {
                Readable::Bytes(bytes) => return Ok(bytes),
                Readable::Nothing => {}
                Readable::Welcome(job) => {
                    // Encoded with no lock held, in a task of its own so a
                    // flushed read does not lose it; the read then goes on.
                    let tree = self.clone();
                    let encoded = tokio::spawn(async move {
                        let frames = match job.is_big() {
                            true => tokio::task::spawn_blocking(move || job.frame()).await.unwrap_or_default(),
                            false => job.frame(),
                        };
                        let _ = tree.daemon.with_hub_quiet(n, |s| feed::welcomed(s, conn, frames));
                        // Another read of this fid may be waiting for it.
                        tree.daemon.changed();
                    });
                    let _ = encoded.await;
                    continue;
                }
            }
            if wake.changed().await.is_err() {
                return Ok(Vec::new());
            }
        }
    }

    /// Empties a body (open with OTRUNC, wstat length 0).
    async fn truncate(&self, n: u64, b: BufferId) -> srv::Result<()> {
        match self.daemon.with_session(n, |s| buffers::truncate(s, b))? {
            Some(p) => self.daemon.propose(n, &format!("body truncate {}", b.0), p).await.map(|_| ()),
            None => Ok(()),
        }
    }

    /// A body write: appended at the end; a rune cut by the write boundary
    /// waits for the fid's next write.
    async fn body_write(&self, fid: &Fid, n: u64, b: BufferId, data: Vec<u8>) -> srv::Result<()> {
        let text = fid.whole_runes(data, "body")?;
        let p = self.daemon.with_session(n, |s| buffers::body_append(s, b, &text))?;
        if let Some(p) = p {
            self.daemon.propose(n, &format!("body write {} ({} bytes)", b.0, text.len()), p).await?;
        }
        Ok(())
    }

    /// Whether `place` is the root of the `acme` service, where `..` stays.
    fn is_service_root(&self, place: Place) -> bool {
        let Place::Dir(n, SessionDir::Acme) = place else { return false };
        let Some(name) = self.acme_service.as_deref() else { return false };
        self.daemon.reg().by_name(name) == Some(n)
    }

    /// A `data` write: the proposal at the address's version, then the
    /// address follows the new text.
    async fn data_write(&self, n: u64, b: BufferId, text: &str) -> srv::Result<()> {
        let Some((p, at)) = self.daemon.with_session(n, |s| buffers::data_write(s, b, text))? else { return Ok(()) };
        let request = format!("data write {} ({} bytes)", b.0, text.len());
        self.daemon.propose(n, &request, p).await?;
        let moves = self.daemon.with_session(n, |s| buffers::selections_past(s, b, at, text))?;
        for p in moves {
            // Best effort: the user may have moved the selection meanwhile.
            let _ = self.daemon.propose(n, "data write (selection)", p).await;
        }
        self.daemon.with_session(n, |s| buffers::data_written(s, b, at, text))
    }
}

impl Serve for Fsys {
    type Fid = Fid;

    async fn attach(&self, _uname: &str, aname: &str) -> srv::Result<(Qid, Fid)> {
        let reg = self.daemon.reg();
        let session = |name: &str| reg.by_name(name).ok_or_else(|| format!("no session {name:?} (see /index)"));
        let place = match aname.trim_matches('/') {
            // acme's own children attach with a numeric directory context,
            // which means nothing here: they get the acme tree too.
            a if self.acme_service.is_some() && (a.is_empty() || a.bytes().all(|c| c.is_ascii_digit())) => {
                let name = self.acme_service.as_deref().unwrap_or_default();
                Place::Dir(session(name)?, SessionDir::Acme)
            }
            "" => Place::Root,
            name if name.ends_with("/acme") => Place::Dir(session(&name[..name.len() - 5])?, SessionDir::Acme),
            name if name.contains('/') => {
                return Err(format!("attach {aname:?}: an attach name is \"\" (the root) or a session name"))
            }
            name => Place::Session(reg.by_name(name).ok_or_else(|| format!("no session {name:?} (see /index)"))?),
        };
        Ok((self.qid(&reg, place), Fid::at(place)))
    }

    async fn walk(&self, fid: &Fid, names: &[String]) -> srv::Result<(Vec<Qid>, Option<Fid>)> {
        Fsys::check(&self.daemon.reg(), fid.place)?;
        let mut place = fid.place;
        let mut qids = Vec::new();
        for (i, name) in names.iter().enumerate() {
            let next = if let Some(n) = acme::walks_into_new(place, name) {
                // Any walk through acme's `new` makes a window.
                Some(self.acme_new(n).await?)
            } else if name == ".." && self.is_service_root(place) {
                Some(place)
            } else if place.is_dir() {
                Fsys::step(&self.daemon.reg(), place, name)
            } else {
                None
            };
            match next {
                Some(p) => {
                    place = p;
                    qids.push(self.qid(&self.daemon.reg(), p));
                }
                None if i == 0 && !place.is_dir() => return Err(format!("walk in non-directory {name:?}")),
                None if i == 0 => return Err(format!("{name}: file does not exist")),
                None => return Ok((qids, None)),
            }
        }
        Ok((qids, Some(Fid::at(place))))
    }

    async fn open(&self, fid: &Fid, mode: u8) -> srv::Result<(Qid, Fid)> {
        let place = fid.place;
        let (name, perm) = {
            let reg = self.daemon.reg();
            Fsys::check(&reg, place)?;
            place.name_perm("")
        };
        // acme ignores OTRUNC (`9p write` and shells send it).
        let truncates = mode & OTRUNC != 0 && !place.in_acme();
        let wants_write = matches!(mode & 3, 1 | 2) || truncates;
        let wants_read = matches!(mode & 3, 0 | 2);
        if place.is_dir() && wants_write {
            return Err(format!("{EPERM}: {name} is a directory"));
        }
        if perm == 0 {
            return Err(format!("{EPERM}: {name} cannot be opened"));
        }
        if wants_write && perm & 0o222 == 0 {
            return Err(format!("{EPERM}: {name} is read-only"));
        }
        if wants_read && perm & 0o444 == 0 {
            return Err(format!("{EPERM}: {name} is write-only; open it with OWRITE"));
        }
        // Counted before the content is made, so a change racing the open
        // makes the first read look again.
        let generation = self.daemon.generation();
        let mut opened = Opened::default();
        match place {
            _ if place.is_dir() => opened.content = self.listing(place)?,
            _ if place.in_acme() => self.acme_open(place, mode, &mut opened).await?,
            Place::Root1(RootFile::New) => {
                let name = {
                    let mut reg = self.daemon.reg();
                    let number = reg.create(None)?;
                    reg.get(number).map(|s| s.label().to_string()).unwrap_or_default()
                };
                self.daemon.changed();
                tracing::info!(session = %name, "session created through /new");
                opened.content = format!("{name}\n").into_bytes();
            }
            Place::BuffersNew(n) => {
                let p = Proposal::CreateWindow { body: None, column: None, name: String::new() };
                let made = self.daemon.propose(n, "buffers/new", p).await?;
                let body = match made.created {
                    apex_core::propose::Created::Window(w) => w.body,
                    _ => return Err("buffers/new: no window was made".into()),
                };
                opened.content = format!("{}\n", body.0).into_bytes();
            }
            Place::Root1(RootFile::Registry) => {
                opened.stream = Some(Cursor::open(Source::Registry, &self.daemon.reg())?)
            }
            Place::Shard1(n, shard, ShardFile::Entries) => {
                opened.stream = Some(self.open_reader(n, shard, Source::Entries(n, shard))?);
                opened.reading = vec![shard];
            }
            Place::Buffer1(n, b, BufferFile::Event) => {
                opened.stream = Some(self.open_reader(n, Shard::Buffer(b), Source::Event(n, b))?);
                opened.reading = vec![Shard::Buffer(b)];
            }
            Place::Session1(n, SessionFile::Attach) => {
                if mode & 3 != 2 {
                    return Err("attach: open it read-write (ORDWR): the protocol goes both ways".into());
                }
                opened.attach = Some(self.daemon.with_hub(n, |s, _| s.hub.open())?);
            }
            Place::Buffer1(n, b, file) => {
                if mode & OTRUNC != 0 && file == BufferFile::Body {
                    self.truncate(n, b).await?;
                }
                if file == BufferFile::Addr {
                    self.daemon.with_session(n, |s| buffers::addr_open(s, b))?;
                    opened.addr_open = true;
                }
                if file != BufferFile::Data {
                    opened.content = self.content(place).await?;
                }
            }
            _ => opened.content = self.content(place).await?,
        }
        opened.fresh = Some(generation);
        let qid = self.qid(&self.daemon.reg(), place);
        Ok((qid, Fid { place, opened: Arc::new(Mutex::new(opened)) }))
    }

    async fn create(&self, fid: &Fid, name: &str, _: u32, _: u8) -> srv::Result<(Qid, Fid)> {
        if fid.place.in_acme() {
            return Err(format!("{EPERM}: cannot create {name:?}; windows are made by walking to new"));
        }
        Err(format!(
            "cannot create {name:?}: sessions are made by writing \"new NAME\" to /ctl, buffers by opening buffers/new"
        ))
    }

    async fn read(&self, fid: &Fid, offset: u64, count: u32) -> srv::Result<Vec<u8>> {
        let place = fid.place;
        if let Place::Session1(n, SessionFile::Attach) = place {
            return self.read_attach(n, fid, count).await;
        }
        if place.is_stream() {
            return self.read_stream(fid, offset, count).await;
        }
        if let Place::Buffer1(n, b, BufferFile::Data) = place {
            return self.daemon.with_session(n, |s| buffers::data_read(s, b, count, false));
        }
        if let Place::Win1(n, number, file @ (WinFile::Data | WinFile::Xdata)) = place {
            let w = acme::window(&self.daemon.reg(), n, number)?;
            return self.daemon.with_session(n, |s| buffers::data_read(s, w.body, count, file == WinFile::Xdata));
        }
        if let Place::Acme1(n, AcmeFile::Log) = place {
            return self.read_log(n, fid, count).await;
        }
        // A read at offset 0 of a file sees it as it is now (so rdwr and
        // re-reads work, as on acme's synthetic files); later offsets go on
        // reading the version that read made. A directory keeps the listing
        // made at open; the two `new` files keep what they made.
        let fixed =
            matches!(place, Place::Root1(RootFile::New) | Place::BuffersNew(_) | Place::Win1(_, _, WinFile::Rdsel));
        let made_at = fid.lock().fresh.take();
        let fresh = made_at.is_some_and(|n| n == self.daemon.generation());
        if offset == 0 && !fixed && !fresh {
            let now = if place.is_dir() { self.listing(place)? } else { self.content(place).await? };
            fid.lock().content = now;
        }
        let mut opened = fid.lock();
        if place.is_dir() {
            // read(5): a directory is read from 0 or from where the last
            // read ended, never from an arbitrary offset.
            if offset != 0 && offset != opened.dir_end {
                return Err(format!(
                    "directory read at offset {offset}; continue at {} or start again at 0",
                    opened.dir_end
                ));
            }
            let got = slice(&opened.content, offset, count, true)?;
            opened.dir_end = offset + got.len() as u64;
            return Ok(got);
        }
        slice(&opened.content, offset, count, false)
    }

    async fn write(&self, fid: &Fid, _offset: u64, data: Vec<u8>) -> srv::Result<u32> {
        let count = data.len() as u32;
        let place = fid.place;
        if let Place::Buffer1(n, b, BufferFile::Body) = place {
            self.body_write(fid, n, b, data).await?;
            return Ok(count);
        }
        if place.in_acme() {
            self.acme_write(fid, data).await?;
            return Ok(count);
        }
        if let Place::Session1(n, SessionFile::Attach) = place {
            let conn = fid.lock().attach.ok_or("attach: not open")?;
            match self.daemon.with_hub(n, |s, now| protocol::write(s, conn, &data, now))?? {
                Written::Done => {}
                Written::Wait(id, rx) => {
                    self.daemon.outcome(n, id, rx).await?;
                }
            }
            return Ok(count);
        }
        let text = utf8(data)?;
        match place {
            Place::Root1(RootFile::Ctl) => {
                let cmds = parse_ctl(&text)?;
                self.daemon.reg().run(&cmds)?;
                self.daemon.changed();
            }
            Place::Session1(n, SessionFile::Label) => {
                let old = self.daemon.reg().get(n).ok_or_else(gone)?.label().to_string();
                self.daemon.reg().rename(&old, text.trim_end_matches('\n'))?;
                self.daemon.changed();
            }
            Place::Session1(n, SessionFile::Ctl) => self.session_ctl(n, &text).await?,
            Place::Session1(n, SessionFile::Proposals) => {
                let request = text.lines().next().unwrap_or("").to_string();
                let p = self.daemon.with_session(n, |s| {
                    crate::proposals::parse(&text, &s.view.state).map_err(|why| s.refuse(&request, why))
                })?;
                self.daemon.propose(n, &request, p).await?;
            }
            Place::Shard1(n, shard, ShardFile::Lease) => self.lease_write(n, shard, &text)?,
            Place::Buffer1(n, b, file) => match file {
                BufferFile::Name => {
                    let p = Proposal::Name { buffer: b, name: text.trim_end_matches('\n').to_string() };
                    self.daemon.propose(n, "name write", p).await?;
                    self.note_buffer_name(n, b)?;
                }
                BufferFile::Ctl => {
                    self.buffer_ctl(n, b, &text).await?;
                    self.note_buffer_name(n, b)?;
                }
                BufferFile::Addr => self.daemon.with_session(n, |s| buffers::addr_write(s, b, &text))?,
                BufferFile::Data => self.data_write(n, b, &text).await?,
                BufferFile::Event => {
                    return Err("event: writing events back is done through the acme tree (NAME/acme/N/event)".into())
                }
                BufferFile::Body => unreachable!("handled above"),
            },
            place => {
                let (name, _) = place.name_perm("");
                return Err(format!("{EPERM}: {name} is not writable"));
            }
        }
        Ok(count)
    }

    async fn clunk(&self, fid: Fid) {
        self.let_go(&fid, false);
        if let (true, Some(n)) = (fid.place.in_acme(), fid.place.session()) {
            let (event_of, data_of, rdsel) = {
                let mut o = fid.lock();
                (o.event_of.take(), o.data_of.take(), o.rdsel.take())
            };
            self.acme_clunk(n, event_of, data_of, rdsel).await;
        }
        if let Place::Win1(n, number, WinFile::Addr) = fid.place {
            if fid.lock().addr_open {
                let w = acme::window(&self.daemon.reg(), n, number);
                if let (Some(s), Ok(w)) = (self.daemon.reg().get_mut(n), w) {
                    buffers::addr_close(s, w.body);
                }
            }
        }
        if let Place::Buffer1(n, b, BufferFile::Addr) = fid.place {
            if fid.lock().addr_open {
                if let Some(s) = self.daemon.reg().get_mut(n) {
                    buffers::addr_close(s, b);
                }
            }
        }
    }

    async fn hangup(&self, fid: Fid) {
        // An attachment outlives its connection for a grace period.
        self.let_go(&fid, true);
        self.clunk(fid).await;
    }

    async fn remove(&self, fid: Fid) -> srv::Result<()> {
        let (name, _) = fid.place.name_perm("");
        let acme = fid.place.in_acme();
        self.clunk(fid).await;
        if acme {
            return Err(format!("{EPERM}: cannot remove {name}; delete a window with ctl \"delete\""));
        }
        Err(format!(
            "cannot remove {name}: end a session with \"del NAME\" in /ctl, a window with \"delwindow N\" in its session's ctl"
        ))
    }

    async fn stat(&self, fid: &Fid) -> srv::Result<Stat> {
        let reg = self.daemon.reg();
        self.stat_in(&reg, fid.place)
    }

    async fn wstat(&self, fid: &Fid, stat: Stat) -> srv::Result<()> {
        // Editors and shells truncate with wstat(length 0); accept a wstat
        // that changes nothing but the length, as plan9port's file servers
        // do, and for a body let length 0 empty it.
        let keep = Stat::dont_touch();
        let only_length = stat.name.is_empty() && stat.mode == keep.mode && stat.mtime == keep.mtime;
        if fid.place.in_acme() {
            // A truncation is taken as acme takes OTRUNC: it changes nothing.
            return match only_length {
                true => Ok(()),
                false => Err(format!("{EPERM}: acme's files take no wstat")),
            };
        }
        if !only_length {
            let (name, _) = fid.place.name_perm("");
            return Err(format!("{name}: wstat can change nothing here but the length"));
        }
        if let (Place::Buffer1(n, b, BufferFile::Body), 0) = (fid.place, stat.length) {
            self.truncate(n, b).await?;
        }
        Ok(())
    }
}

/// Reads `count` bytes of `content` at `offset`; for directories, whole
/// stat entries only.
fn slice(content: &[u8], offset: u64, count: u32, dir: bool) -> srv::Result<Vec<u8>> {
    let from = (offset as usize).min(content.len());
    let want = (count as usize).min(content.len() - from);
    if !dir {
        return Ok(content[from..from + want].to_vec());
    }
    let mut end = from;
    while end + 2 <= content.len() {
        let n = u16::from_le_bytes([content[end], content[end + 1]]) as usize + 2;
        if end + n - from > want {
            break;
        }
        end += n;
    }
    if end == from && from < content.len() {
        return Err(format!("read of {count} bytes is too small for a directory entry"));
    }
    Ok(content[from..end].to_vec())
}
