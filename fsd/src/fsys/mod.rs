//! The file system: fids, walks, stats, opens, and the dispatch of reads,
//! writes and clunks to the module of each family of files, which says
//! what its files mean (acme's `fsys.c` beside its `xfid.c`):
//!
//! - [`place`] names every file and its permissions; [`fid`] is what a
//!   fid holds, one variant per kind of open file.
//! - Each family's files are its own module's `files`, which this one
//!   calls: `registry::files` (`/`), `session::files` (`/NAME/` and
//!   `meta/`), `shards::files` (`shards/SHARD/`), `buffers::files`
//!   (`buffers/`), `acme::files` (the acme(4) tree at `NAME/acme/`) and
//!   `term::files` (`terms/`). They build on [`tree`] (the `Fsys` and the
//!   services they share), [`fid`], [`made`], [`place`] and [`stream`],
//!   never on this dispatch.
//! - [`stream`] serves the blocking streams; [`made`] makes a file's
//!   bytes after the lock, off the async workers when they are many.
//!
//! Every change wakes the blocked stream readers ([`Daemon::changed`]).
//! qid.path is a hash of the place, so a live file's never changes;
//! qid.vers is a body's buffer version and 0 elsewhere.

pub mod ctl;
pub mod error;
pub mod fid;
pub mod made;
pub mod place;
pub mod post;
pub mod stream;
pub mod tree;

pub use tree::Fsys;

use crate::access::Scope;
use crate::attach::protocol;
use crate::daemon::gone;
use crate::error::{Error, Result};
use crate::fsys::error::FsError;
use crate::session::Session;
use crate::shards::tables::MetaTable;
use apex_core::{BufferId, Shard, TermId};
use apex_ninep::codec::put_stat;
use apex_ninep::fcall::{Qid, Stat, DMAPPEND, DMDIR, OTRUNC, QTAPPEND, QTDIR, QTFILE};
use apex_ninep::srv::Serve;
use fid::{Content, Fid, Opened};
use made::{Made, Version};
use place::{
    lookup, AcmeFile, BufferFile, Place, RootFile, SessionDir, TermFile, WinFile, BUFFER, ROOT, SESSION, SESSION_DIRS,
    SHARD, TERM,
};
use stream::Fill;

/// Seconds since the epoch, for stat's times: the kernel's coarse clock,
/// which is read without asking the (virtual) hardware, is exact enough
/// for seconds, and a stat is answered on every getattr of a mount.
#[cfg(target_os = "linux")]
fn now() -> u32 {
    let mut t = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: clock_gettime writes the timespec it is given, and nothing
    // else; it fails only for a clock the kernel lacks.
    match unsafe { libc::clock_gettime(libc::CLOCK_REALTIME_COARSE, &mut t) } {
        0 => t.tv_sec as u32,
        _ => now_exactly(),
    }
}

#[cfg(not(target_os = "linux"))]
fn now() -> u32 {
    now_exactly()
}

fn now_exactly() -> u32 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs() as u32)
}

impl Fsys {
    /// Whether a stat of `place` reads its session's state: whether it
    /// exists, or its qid's version.
    fn stat_reads_state(place: Place) -> bool {
        Fsys::lives_in_state(place)
            || matches!(place, Place::Buffer1(_, _, BufferFile::Body) | Place::Plumb1(_, place::PlumbFile::Port(_)))
    }

    fn qid(s: Option<&Session>, place: Place) -> Qid {
        let path = place.qid_path();
        let vers = match (place, s) {
            (Place::Buffer1(_, b, BufferFile::Body), Some(s)) => {
                s.view().state.buffer(b).map_or(0, |b| b.version as u32)
            }
            _ => 0,
        };
        let ty = match place {
            _ if place.is_dir() => QTDIR,
            // Their writes append, wherever they are made, as acme's do.
            Place::Win1(_, _, WinFile::Body | WinFile::Tag) | Place::Buffer1(_, _, BufferFile::Body) => QTAPPEND,
            _ => QTFILE,
        };
        Qid { ty, vers, path }
    }

    /// Whether `place` (in session `s`) still exists, with an error saying
    /// what is gone.
    fn check(s: Option<&Session>, place: Place) -> Result<()> {
        match place {
            Place::Plumb1(_, place::PlumbFile::Port(_)) => {
                match crate::plumb::files::exists(s.ok_or_else(gone)?, place) {
                    true => Ok(()),
                    false => Err(FsError::NoSuchFile("port".into()).into()),
                }
            }
            _ if !Fsys::lives_in_state(place) => Ok(()),
            _ if place.in_acme() => crate::acme::files::check(s.ok_or_else(gone)?, place),
            _ => Fsys::check_state(s, place),
        }
    }

    /// A session directory's stat needs its label, which a stat of the
    /// root's listing takes from each session in turn.
    fn stat_in(&self, s: Option<&Session>, place: Place) -> Result<Stat> {
        Fsys::check(s, place)?;
        // A session directory is named as the registry names it (its
        // session is not locked here: see `at`).
        let label = match (place, s) {
            (Place::Session(n), _) => {
                self.daemon.reg().state.sessions.get(&n).map(|i| i.name.clone()).unwrap_or_default()
            }
            (Place::Plumb1(_, place::PlumbFile::Port(h)), Some(s)) => {
                crate::plumb::files::port_name(s, h).unwrap_or_default()
            }
            _ => String::new(),
        };
        let (name, perm) = place.name_perm(&label);
        let now = now();
        let mode = match place {
            _ if place.is_dir() => DMDIR | perm,
            Place::Win1(_, _, WinFile::Body | WinFile::Tag) | Place::Buffer1(_, _, BufferFile::Body) => DMAPPEND | perm,
            _ => perm,
        };
        Ok(Stat {
            qid: Fsys::qid(s, place),
            mode,
            name,
            uid: self.user.clone(),
            gid: self.user.clone(),
            muid: self.user.clone(),
            // Synthetic files have no length, and are as new as the
            // moment they are looked at, as in acme.
            length: 0,
            atime: now,
            mtime: now,
            ..Stat::default()
        })
    }

    /// A stat of `place` now.
    /// A stat that needs nothing of the state (most files' names and
    /// modes are fixed) takes no session lock: many clients' stats of one
    /// session do not queue on it.
    fn stat_of(&self, place: Place) -> Result<Stat> {
        match place.session() {
            Some(n) if !Fsys::stat_reads_state(place) => self.unlocked(n, |s| self.stat_in(s, place)),
            _ => self.at(place, |s| self.stat_in(s, place)),
        }
    }

    fn children(s: &Session, place: Place) -> Result<Vec<Place>> {
        Fsys::check(Some(s), place)?;
        if place.in_acme() {
            return crate::acme::files::children(s, place);
        }
        Ok(match place {
            Place::Session(n) => {
                let mut v: Vec<Place> = SESSION.iter().map(|(_, f, _)| Place::Session1(n, *f)).collect();
                v.extend(SESSION_DIRS.iter().map(|(_, d, _)| Place::Dir(n, *d)));
                v
            }
            Place::Dir(n, SessionDir::Meta) => MetaTable::ALL.iter().map(|(_, t)| Place::Meta1(n, *t)).collect(),
            Place::Dir(n, SessionDir::Shards) => {
                s.view().log.shards().map(|(shard, _)| Place::Shard(n, *shard)).collect()
            }
            Place::Dir(n, SessionDir::Buffers) => {
                let mut v = vec![Place::BuffersNew(n)];
                v.extend(s.view().state.buffers.keys().map(|b| Place::Buffer(n, *b)));
                v
            }
            Place::Shard(n, shard) => SHARD.iter().map(|(_, f, _)| Place::Shard1(n, shard, *f)).collect(),
            Place::Buffer(n, b) => BUFFER.iter().map(|(_, f, _)| Place::Buffer1(n, b, *f)).collect(),
            Place::Dir(n, SessionDir::Terms) => {
                let mut v = vec![Place::TermsIndex(n)];
                v.extend(s.view().state.terms.keys().map(|t| Place::Term(n, *t)));
                v
            }
            Place::Term(n, t) => TERM.iter().map(|(_, f, _)| Place::Term1(n, t, *f)).collect(),
            Place::Dir(n, SessionDir::Plumb) => crate::plumb::files::children(s, n),
            _ => return Err(FsError::NotADirectory.into()),
        })
    }

    fn listing(&self, place: Place) -> Result<Vec<u8>> {
        let mut out = Vec::new();
        if place == Place::Root {
            // The root's files, then each session, its lock taken in turn.
            for (_, f, _) in ROOT {
                put_stat(&mut out, &self.stat_in(None, Place::Root1(*f))?);
            }
            let numbers: Vec<u64> = self.daemon.reg().state.sessions.keys().copied().collect();
            for n in numbers {
                let st = self.stat_in(None, Place::Session(n))?;
                // Deleted meanwhile: not listed.
                if !st.name.is_empty() {
                    put_stat(&mut out, &st);
                }
            }
            return Ok(out);
        }
        let n = place.session().ok_or(FsError::NotADirectory)?;
        self.daemon.read(n, |s| {
            for p in Fsys::children(s, place)? {
                put_stat(&mut out, &self.stat_in(Some(s), p)?);
            }
            Ok(out)
        })?
    }

    /// One walk step from directory `place` (in session `s`).
    fn step(&self, s: Option<&Session>, place: Place, name: &str) -> Option<Place> {
        if name == ".." {
            return Some(place.parent());
        }
        if place.in_acme() {
            return crate::acme::files::step(s?, place, name);
        }
        let next = match place {
            Place::Root => {
                // Into a session: its lock is taken by the next step.
                let by_name = || self.daemon.reg().by_name(name).map(Place::Session);
                return lookup(ROOT, name).map(Place::Root1).or_else(by_name);
            }
            Place::Session(n) => lookup(SESSION, name)
                .map(|f| Place::Session1(n, f))
                .or_else(|| lookup(SESSION_DIRS, name).map(|d| Place::Dir(n, d))),
            Place::Dir(n, SessionDir::Meta) => {
                MetaTable::ALL.iter().find(|(m, _)| *m == name).map(|(_, t)| Place::Meta1(n, *t))
            }
            Place::Dir(n, SessionDir::Shards) => name.parse::<Shard>().ok().map(|s| Place::Shard(n, s)),
            Place::Dir(n, SessionDir::Buffers) if name == "new" => Some(Place::BuffersNew(n)),
            Place::Dir(n, SessionDir::Buffers) => place::number(name).map(|b| Place::Buffer(n, BufferId(b))),
            Place::Shard(n, shard) => lookup(SHARD, name).map(|f| Place::Shard1(n, shard, f)),
            Place::Buffer(n, b) => lookup(BUFFER, name).map(|f| Place::Buffer1(n, b, f)),
            Place::Dir(n, SessionDir::Terms) if name == "index" => Some(Place::TermsIndex(n)),
            Place::Dir(n, SessionDir::Terms) => place::number(name).map(|t| Place::Term(n, TermId(t))),
            Place::Term(n, t) => lookup(TERM, name).map(|f| Place::Term1(n, t, f)),
            Place::Dir(n, SessionDir::Plumb) => crate::plumb::files::step(s?, n, name),
            _ => None,
        }?;
        Fsys::check(s, next).ok().map(|_| next)
    }

    /// A plain file's content now, as a fid keeps it (a text as its
    /// rope's copy).
    async fn version(&self, place: Place) -> Result<Version> {
        if let Place::Session1(n, place::SessionFile::Snapshot) = place {
            return self.snapshot_version(n, || self.content_made(place)).await;
        }
        let made = self.content_made(place)?;
        Ok(made.version().await)
    }

    /// Session `n`'s snapshot as a fid keeps it, shared with every fid
    /// that opened it with nothing changed since; `made` makes it anew.
    pub(crate) async fn snapshot_version(&self, n: u64, made: impl FnOnce() -> Result<Made>) -> Result<Version> {
        // The session's count of changes, read under its lock: a change is
        // counted before the lock is let go, so before its writer hears it
        // was made, and the state made after is never older than it says.
        let (changes, shared) = self.daemon.read(n, |s| (s.changes(), self.snapshots.get(n, s.changes())))?;
        if let Some(parts) = shared {
            return Ok(Version::Snapshot(parts));
        }
        let version = made()?.version().await;
        if let Version::Snapshot(parts) = &version {
            self.snapshots.put(n, changes, parts)?;
        }
        Ok(version)
    }

    fn content_made(&self, place: Place) -> Result<Made> {
        if let Place::Root1(file) = place {
            return Ok(crate::registry::files::content(&self.daemon, file));
        }
        self.at(place, |s| {
            Fsys::check(s, place)?;
            let s = s.ok_or_else(gone)?;
            match place {
                _ if place.in_acme() => crate::acme::files::content(s, place),
                Place::Session1(_, file) => Ok(crate::session::files::content(s, file)),
                Place::Meta1(_, table) => Ok(crate::session::files::meta_content(s, table)),
                Place::Shard1(_, shard, file) => crate::shards::files::content(s, shard, file),
                Place::Buffer1(_, b, file) => crate::buffers::files::content(s, b, file),
                Place::TermsIndex(_) => Ok(crate::term::files::index(s).into()),
                Place::Term1(_, t, file) => crate::term::files::content(s, t, file),
                _ => Ok(Made::Bytes(Vec::new())),
            }
        })
    }

    /// Reads a stream, waiting at its end for more.
    async fn read_stream(&self, fid: &Fid, offset: u64, count: u32) -> Result<Vec<u8>> {
        loop {
            // Subscribe before looking, so a change in between still wakes
            // us: to the fid's session, or (the registry's) to all.
            let mut wake = match fid.place.session() {
                Some(n) => self.daemon.subscribe_to(n),
                None => self.daemon.subscribe(),
            };
            let again = {
                let mut opened = fid.lock();
                let Opened::Stream { cursor, .. } = &mut *opened else {
                    return Err(FsError::Unopened("stream").into());
                };
                if let Some(bytes) = cursor.take(offset, count)? {
                    return Ok(bytes);
                }
                match cursor.fill(&self.daemon)? {
                    Fill::Data => continue,
                    Fill::Again => true,
                    Fill::End => return Ok(Vec::new()),
                    Fill::Wait => false,
                }
            };
            if again {
                // Far behind in entries that make nothing to read: a batch
                // at a time, letting the worker's other tasks run between.
                tokio::task::yield_now().await;
                continue;
            }
            if wake.changed().await.is_err() {
                return Ok(Vec::new());
            }
        }
    }

    /// A read of a plain file or a directory. At offset 0 it sees the
    /// file as it is now (so rdwr and re-reads work, as on acme's
    /// synthetic files); later offsets go on reading the version that read
    /// made. The two `new` files and `rdsel` keep what their open made.
    async fn read_content(&self, fid: &Fid, offset: u64, count: u32) -> Result<Vec<u8>> {
        let place = fid.place;
        let fixed =
            matches!(place, Place::Root1(RootFile::New) | Place::BuffersNew(_) | Place::Win1(_, _, WinFile::Rdsel));
        let made_at = fid.lock().content().and_then(|c| c.fresh.take());
        let fresh = made_at == Some(self.daemon.generation());
        if offset == 0 && !fixed && !fresh {
            let now = match place.is_dir() {
                true => Version::Plain(self.listing(place)?),
                false => self.version(place).await?,
            };
            if let Some(c) = fid.lock().content() {
                c.bytes = now;
            }
        }
        let mut opened = fid.lock();
        let content = opened.content().ok_or(FsError::NotOpen)?;
        content.read(offset, count, place.is_dir())
    }

    /// What a fid going away ends: its attach connection (a clunk ends the
    /// attachment, a hang-up starts its grace), its hold on shards, and
    /// what its family holds (an addr open, acme's event reader, nomark,
    /// rdsel's claim).
    async fn let_go(&self, place: Place, opened: Opened, hangup: bool) {
        let Some(n) = place.session() else { return };
        match opened {
            Opened::Attach(conn) => {
                let _ = self.daemon.change(n, |s, now| match hangup {
                    true => protocol::hangup(s, conn, now),
                    false => protocol::clunk(s, conn, now),
                });
            }
            Opened::Stream { reading, event_of, .. } => {
                self.stop_reading(n, &reading);
                if event_of.is_some() {
                    self.acme_clunk(n, event_of, None, None).await;
                }
            }
            Opened::Addr { body, .. } => {
                let _ = self.daemon.tend(n, |s| crate::buffers::addr_close(s, body));
            }
            Opened::Data { body, ends_nomark: true } => self.acme_clunk(n, None, Some(body), None).await,
            Opened::Wrsel { window, body, at, from } => {
                self.wrsel_close(n, window, body, from, at).await;
                self.acme_clunk(n, None, Some(body), None).await
            }
            Opened::Rdsel { window, .. } => self.acme_clunk(n, None, None, Some(window)).await,
            opened @ (Opened::PlumbPort { .. } | Opened::PlumbRules { .. } | Opened::PlumbSend { .. }) => {
                self.plumb_clunk(n, opened)
            }
            _ => {}
        }
    }

    /// Whether `place` is the root of the `acme` service, where `..` stays.
    fn is_service_root(&self, place: Place) -> bool {
        let (n, service) = match place {
            Place::Dir(n, SessionDir::Acme) => (n, self.acme_service.as_deref()),
            Place::Dir(n, SessionDir::Plumb) => (n, self.plumb_service.as_deref()),
            _ => return false,
        };
        service.is_some_and(|name| self.daemon.reg().by_name(name) == Some(n))
    }
}

/// The server boxes every request's future, sized for the largest of
/// these: the calls that route proposals, make windows or let go of an
/// attachment are boxed on their own (`Box::pin(..).await`), so a stat or a
/// small read, most requests, costs a small allocation and copy.
impl Serve for Fsys {
    type Fid = Fid;
    type Error = Error;

    async fn attach(&self, _uname: &str, aname: &str) -> Result<(Qid, Fid)> {
        let reg = self.daemon.reg();
        let session = |name: &str| reg.by_name(name).ok_or_else(|| FsError::NoSession(name.to_string()));
        let place = match aname.trim_matches('/') {
            // The `plumb` service: every attach reaches the plumber, as
            // plan9port's (which ignores the aname).
            _ if self.plumb_service.is_some() => {
                Place::Dir(session(self.plumb_service.as_deref().unwrap_or_default())?, SessionDir::Plumb)
            }
            // acme's own children attach with a numeric directory context,
            // which means nothing here: they get the acme tree too.
            a if self.acme_service.is_some() && (a.is_empty() || a.bytes().all(|c| c.is_ascii_digit())) => {
                let name = self.acme_service.as_deref().unwrap_or_default();
                Place::Dir(session(name)?, SessionDir::Acme)
            }
            "" => Place::Root,
            name if name.ends_with("/acme") => Place::Dir(session(&name[..name.len() - 5])?, SessionDir::Acme),
            name if name.contains('/') => return Err(FsError::BadAttachName(aname.to_string()).into()),
            name => Place::Session(reg.by_name(name).ok_or_else(|| FsError::NoSession(name.to_string()))?),
        };
        drop(reg);
        let qid = self.at(place, |s| Ok(Fsys::qid(s, place)))?;
        let top = (place != Place::Root).then_some(place);
        Ok((qid, Fid::at(place).below(top)))
    }

    /// An attach over TLS: what the token proved is the scope of every
    /// fid walked from this one.
    async fn attach_granted(&self, uname: &str, aname: &str, grant: &str) -> Result<(Qid, Fid)> {
        let scope = crate::access::Scope::parse(grant)?;
        let (qid, fid) = self.attach(uname, aname).await?;
        Ok((qid, fid.with_scope(scope)))
    }

    async fn walk(&self, fid: &Fid, names: &[String]) -> Result<(Vec<Qid>, Option<Fid>)> {
        self.at(fid.place, |s| Fsys::check(s, fid.place))?;
        let mut place = fid.place;
        let mut qids = Vec::new();
        for (i, name) in names.iter().enumerate() {
            let next = if let Some(n) = crate::acme::files::walks_into_new(place, name) {
                // Any walk through acme's `new` makes a window.
                crate::access::require_change(fid.scope, "a walk through new makes a window")?;
                Some(Box::pin(self.acme_new(n)).await?)
            } else if name == ".." && (self.is_service_root(place) || fid.top == Some(place)) {
                Some(place)
            } else if place.is_dir() {
                self.at(place, |s| Ok(self.step(s, place, name))).ok().flatten()
            } else {
                None
            };
            match next {
                Some(p) => {
                    place = p;
                    qids.push(self.at(p, |s| Ok(Fsys::qid(s, p)))?);
                }
                None if i == 0 && !place.is_dir() => return Err(FsError::WalkFromFile(name.clone()).into()),
                None if i == 0 => return Err(FsError::NoSuchFile(name.clone()).into()),
                None => return Ok((qids, None)),
            }
        }
        Ok((qids, Some(Fid::at(place).with_scope(fid.scope).below(fid.top))))
    }

    async fn open(&self, fid: &Fid, mode: u8) -> Result<(Qid, Fid)> {
        let place = fid.place;
        self.at(place, |s| Fsys::check(s, place))?;
        let (name, perm) = place.name_perm("");
        // acme ignores OTRUNC (`9p write` and shells send it).
        let truncates = mode & OTRUNC != 0 && !place.in_acme();
        let wants_write = matches!(mode & 3, 1 | 2) || truncates;
        let wants_read = matches!(mode & 3, 0 | 2);
        if place.is_dir() && wants_write {
            return Err(FsError::IsADirectory(name.to_string()).into());
        }
        if perm == 0 {
            return Err(FsError::CannotOpen(name.to_string()).into());
        }
        if wants_write && perm & 0o222 == 0 {
            return Err(FsError::ReadOnly(name.to_string()).into());
        }
        if wants_read && perm & 0o444 == 0 {
            return Err(FsError::WriteOnly(name.to_string()).into());
        }
        may_open(fid.scope, place, wants_write)?;
        // Counted before the content is made, so a change racing the open
        // makes the first read look again.
        let generation = self.daemon.generation();
        let made = crate::access::within(fid.scope, self.open_as(place, mode));
        let mut opened = Box::pin(made).await?;
        if let Some(content) = opened.content() {
            content.fresh = Some(generation);
        }
        let qid = self.at(place, |s| Ok(Fsys::qid(s, place)))?;
        Ok((qid, Fid::opened(place, opened).with_scope(fid.scope)))
    }

    async fn create(&self, fid: &Fid, name: &str, _: u32, _: u8) -> Result<(Qid, Fid)> {
        if fid.place.in_acme() {
            return Err(FsError::CreateInAcme(name.to_string()).into());
        }
        Err(FsError::Create(name.to_string()).into())
    }

    async fn read(&self, fid: &Fid, offset: u64, count: u32) -> Result<Vec<u8>> {
        crate::access::within(fid.scope, self.read_as(fid, offset, count)).await
    }

    async fn write(&self, fid: &Fid, offset: u64, data: Vec<u8>) -> Result<u32> {
        crate::access::within(fid.scope, self.write_as(fid, offset, data)).await
    }

    async fn clunk(&self, fid: Fid) {
        let scope = fid.scope;
        crate::access::within(scope, async move {
            self.ctl_unlock_on_clunk(fid.place, fid.token());
            Box::pin(self.let_go(fid.place, fid.take(), false)).await;
        })
        .await
    }

    async fn hangup(&self, fid: Fid) {
        let scope = fid.scope;
        crate::access::within(scope, async move {
            self.ctl_unlock_on_clunk(fid.place, fid.token());
            // An attachment outlives its connection for a grace period.
            Box::pin(self.let_go(fid.place, fid.take(), true)).await;
        })
        .await
    }

    async fn remove(&self, fid: Fid) -> Result<()> {
        let (name, _) = fid.place.name_perm("");
        let acme = fid.place.in_acme();
        self.clunk(fid).await;
        if acme {
            return Err(FsError::RemoveInAcme(name.to_string()).into());
        }
        Err(FsError::Remove(name.to_string()).into())
    }

    async fn stat(&self, fid: &Fid) -> Result<Stat> {
        self.stat_of(fid.place)
    }

    async fn wstat(&self, fid: &Fid, stat: Stat) -> Result<()> {
        crate::access::require_change(fid.scope, "wstat")?;
        crate::access::within(fid.scope, self.wstat_as(fid, stat)).await
    }
}

impl Fsys {
    /// What an open makes, as the fid's scope allows.
    async fn open_as(&self, place: Place, mode: u8) -> Result<Opened> {
        Ok(match place {
            _ if place.is_dir() => Opened::Content(Content::made(self.listing(place)?)),
            _ if place.in_acme() => Box::pin(self.acme_open(place, mode)).await?,
            Place::Root1(file) => Box::pin(self.root_open(file)).await?,
            Place::Session1(n, file) => Box::pin(self.session_open(n, file, mode)).await?,
            Place::Shard1(n, shard, file) => Box::pin(self.shard_open(n, shard, file)).await?,
            Place::BuffersNew(n) => Box::pin(self.buffers_new(n)).await?,
            Place::Buffer1(n, b, file) => Box::pin(self.buffer_open(n, b, file, mode)).await?,
            Place::Term1(n, t, file) => Box::pin(self.term_open(n, t, file)).await?,
            Place::Plumb1(n, file) => Box::pin(self.plumb_open(n, file, mode)).await?,
            _ => Opened::Content(Content::of(Box::pin(self.version(place)).await?)),
        })
    }

    async fn read_as(&self, fid: &Fid, offset: u64, count: u32) -> Result<Vec<u8>> {
        let place = fid.place;
        let n = place.session().unwrap_or(0);
        // What the fid holds says how it reads.
        let data_of = match &*fid.lock() {
            Opened::Walked => return Err(FsError::NotOpen.into()),
            Opened::Data { body, .. } => Some(*body),
            _ => None,
        };
        match place {
            Place::Session1(n, place::SessionFile::Attach) => Box::pin(self.read_attach(n, fid, count)).await,
            Place::Term1(n, t, TermFile::Cons) => Box::pin(self.term_read_cons(n, t, fid, count)).await,
            Place::Plumb1(n, place::PlumbFile::Port(_)) => Box::pin(self.plumb_read(fid, n, count)).await,
            // The reply to this fid's last write, read once from wherever
            // the reader is: a shell's `read <&3` after `echo >&3` on a
            // mount reads past what it wrote.
            Place::Session1(_, place::SessionFile::Ctl) => {
                let mut opened = fid.lock();
                let c = opened.content().ok_or(FsError::NotOpen)?;
                let Version::Plain(reply) = &mut c.bytes else { return Ok(Vec::new()) };
                let n = (count as usize).min(reply.len());
                Ok(reply.drain(..n).collect())
            }
            _ if place.is_stream() => self.read_stream(fid, offset, count).await,
            Place::Acme1(n, AcmeFile::Log) => self.read_log(n, fid, count).await,
            _ => match (data_of, place) {
                // acme's data and xdata read the window's body while the
                // window lives, as acme does.
                (Some(_), Place::Win1(n, number, file)) => {
                    let w = self.daemon.read(n, |s| crate::acme::files::window(s, number))??;
                    self.data_read(n, w.body, count, file == WinFile::Xdata)
                }
                (Some(b), _) => self.data_read(n, b, count, false),
                (None, _) => self.read_content(fid, offset, count).await,
            },
        }
    }

    async fn write_as(&self, fid: &Fid, _offset: u64, data: Vec<u8>) -> Result<u32> {
        let count = data.len() as u32;
        // The session's log makes room first: a full disk refuses the
        // write before it changes anything.
        let durable = match fid.place.session() {
            Some(n) => self.daemon.reserve(n, count as u64)?,
            None => None,
        };
        match fid.place {
            place if place.in_acme() => Box::pin(self.acme_write(fid, data)).await?,
            Place::Root1(file) => self.root_write(file, data)?,
            Place::Session1(n, file) => Box::pin(self.session_write(fid, n, file, data)).await?,
            Place::Shard1(n, shard, file) => self.shard_write(n, shard, file, data)?,
            Place::Buffer1(n, b, file) => Box::pin(self.buffer_write(fid, n, b, file, data)).await?,
            Place::Term1(n, t, file) => Box::pin(self.term_write(n, t, file, data)).await?,
            Place::Plumb1(n, file) => Box::pin(self.plumb_write(fid, n, file, data)).await?,
            place => return Err(place::not_writable(place).into()),
        }
        // Acknowledged once written, and synced where the policy says.
        self.daemon.settle(durable).await?;
        Ok(count)
    }

    async fn wstat_as(&self, fid: &Fid, stat: Stat) -> Result<()> {
        // Editors and shells truncate with wstat(length 0); outside acme's
        // tree accept a wstat that changes nothing but the length, as
        // plan9port's file servers do, and for a body let length 0 empty it.
        let keep = Stat::dont_touch();
        let only_length = stat.name.is_empty() && stat.mode == keep.mode && stat.mtime == keep.mtime;
        if fid.place.in_acme() {
            // acme refuses every wstat (acme-fs.md §1).
            return Err(FsError::WstatInAcme.into());
        }
        if !only_length {
            let (name, _) = fid.place.name_perm("");
            return Err(FsError::WstatChanges(name.to_string()).into());
        }
        if let Place::Buffer1(n, b, BufferFile::Body) = fid.place {
            match stat.length {
                0 => Box::pin(self.truncate(n, b)).await?,
                u64::MAX => {}
                _ => return Err(FsError::WstatLength.into()),
            }
        }
        Ok(())
    }
}

/// Whether a fid of `scope` may open `place` (for writing, when
/// `writes`): a read token opens nothing for writing and nothing that
/// makes something when opened; an edit token no terminal's `cons` and
/// nothing of a terminal for writing.
fn may_open(scope: Scope, place: Place, writes: bool) -> Result<(), crate::access::AccessError> {
    use crate::access::{require_change, require_full_in};
    let (name, _) = place.name_perm("");
    match scope {
        Scope::Full => Ok(()),
        Scope::Read if writes => require_change(scope, &format!("{name} opened for writing")),
        Scope::Read => match place {
            Place::Root1(place::RootFile::New) | Place::BuffersNew(_) => {
                require_change(scope, &format!("opening {name} makes one"))
            }
            // Opening these changes what others see: an event reader takes
            // the window's B2 and B3, addr and rdsel hold state of their
            // own, a plumb port takes its messages.
            Place::Win1(_, _, f) if !matches!(f, place::WinFile::Body | place::WinFile::Tag) => {
                require_change(scope, &format!("opening {name} changes the window"))
            }
            Place::Buffer1(_, _, place::BufferFile::Event | place::BufferFile::Addr | place::BufferFile::Data) => {
                require_change(scope, &format!("opening {name} changes the buffer"))
            }
            Place::Plumb1(..) => require_change(scope, &format!("opening {name} takes the plumber's messages")),
            _ => Ok(()),
        },
        Scope::Edit => match place {
            Place::Term1(_, _, place::TermFile::Cons) => require_full_in(scope, "a terminal's cons"),
            Place::Term1(..) if writes => require_full_in(scope, "a terminal's ctl"),
            _ => Ok(()),
        },
    }
}
