//! The file tree: what each file of `/` and `/NAME/` means, served through
//! `ninep::srv`.
//!
//! Like acme's `dirtab[]`, each directory is a static table of
//! `(name, qid type, perm)`. A file's content is computed at open and
//! again by every read at offset 0; reads at later offsets take that
//! version by offset, so a reader sees one consistent version however many
//! reads it takes. Directory reads return whole stat entries from the
//! listing made at open. qid.path is `seq << 8 | file`,
//! with session seqs never reused, so a path is never reused either.
//!
//! Built so far: `/index`, `/ctl`, `/new`, and a session's `id`, `label`,
//! `hash` and `snapshot`. The rest of apex(4) (meta/, shards/, proposals,
//! buffers/, attach, terms/, acme/) is the fsd issue's remaining work.

use crate::registry::{parse_ctl, Registry};
use apex_ninep::codec::put_stat;
use apex_ninep::fcall::{Qid, Stat, DMDIR, QTDIR, QTFILE};
use apex_ninep::srv::{self, Serve};
use std::sync::{Arc, Mutex};

/// A file of the root directory.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RootFile {
    Index,
    Ctl,
    New,
}

/// A file of a session directory.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SessionFile {
    Id,
    Label,
    Hash,
    Snapshot,
}

const ROOT: &[(&str, RootFile, u32)] =
    &[("index", RootFile::Index, 0o444), ("ctl", RootFile::Ctl, 0o222), ("new", RootFile::New, 0o444)];
const SESSION: &[(&str, SessionFile, u32)] = &[
    ("id", SessionFile::Id, 0o444),
    ("label", SessionFile::Label, 0o666),
    ("hash", SessionFile::Hash, 0o444),
    ("snapshot", SessionFile::Snapshot, 0o444),
];

/// Where a fid points.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Place {
    Root,
    Root1(RootFile),
    Session(u64),
    Session1(u64, SessionFile),
}

/// A fid: its place and, once open, the content it reads.
#[derive(Clone, Debug)]
pub struct Fid {
    pub place: Place,
    content: Arc<Mutex<Vec<u8>>>,
}

impl Fid {
    fn at(place: Place) -> Fid {
        Fid { place, content: Arc::new(Mutex::new(Vec::new())) }
    }
}

/// The daemon's tree over its sessions.
pub struct Tree {
    pub registry: Arc<Mutex<Registry>>,
    pub user: String,
}

fn qid(place: Place) -> Qid {
    let (ty, path) = match place {
        Place::Root => (QTDIR, 0),
        Place::Root1(f) => (QTFILE, 1 + ROOT.iter().position(|(_, g, _)| *g == f).unwrap_or(0) as u64),
        Place::Session(seq) => (QTDIR, seq << 8),
        Place::Session1(seq, f) => {
            (QTFILE, seq << 8 | (1 + SESSION.iter().position(|(_, g, _)| *g == f).unwrap_or(0) as u64))
        }
    };
    Qid { ty, vers: 0, path }
}

impl Tree {
    fn reg(&self) -> std::sync::MutexGuard<'_, Registry> {
        self.registry.lock().expect("registry lock")
    }

    fn name(&self, place: Place) -> srv::Result<String> {
        Ok(match place {
            Place::Root => "/".into(),
            Place::Root1(f) => ROOT.iter().find(|(_, g, _)| *g == f).map(|(n, _, _)| n.to_string()).unwrap_or_default(),
            Place::Session(seq) => self.reg().get(seq).ok_or_else(gone)?.label().to_string(),
            Place::Session1(_, f) => {
                SESSION.iter().find(|(_, g, _)| *g == f).map(|(n, _, _)| n.to_string()).unwrap_or_default()
            }
        })
    }

    fn stat_of(&self, place: Place) -> srv::Result<Stat> {
        let perm = match place {
            Place::Root | Place::Session(_) => DMDIR | 0o555,
            Place::Root1(f) => ROOT.iter().find(|(_, g, _)| *g == f).map_or(0, |(_, _, p)| *p),
            Place::Session1(seq, f) => {
                self.reg().get(seq).ok_or_else(gone)?;
                SESSION.iter().find(|(_, g, _)| *g == f).map_or(0, |(_, _, p)| *p)
            }
        };
        Ok(Stat {
            qid: qid(place),
            mode: perm,
            name: self.name(place)?,
            uid: self.user.clone(),
            gid: self.user.clone(),
            muid: self.user.clone(),
            // Synthetic files have no length, as in acme.
            length: 0,
            ..Stat::default()
        })
    }

    fn listing(&self, place: Place) -> srv::Result<Vec<u8>> {
        let places: Vec<Place> = match place {
            Place::Root => {
                let mut v: Vec<Place> = ROOT.iter().map(|(_, f, _)| Place::Root1(*f)).collect();
                v.extend(self.reg().sessions().map(|s| Place::Session(s.seq)));
                v
            }
            Place::Session(seq) => SESSION.iter().map(|(_, f, _)| Place::Session1(seq, *f)).collect(),
            _ => return Err("not a directory".into()),
        };
        let mut out = Vec::new();
        for p in places {
            put_stat(&mut out, &self.stat_of(p)?);
        }
        Ok(out)
    }

    fn content(&self, place: Place) -> srv::Result<Vec<u8>> {
        let reg = self.reg();
        let session = |seq| reg.get(seq).ok_or_else(gone);
        Ok(match place {
            Place::Root1(RootFile::Index) => reg.sessions().map(|s| s.index_line()).collect::<String>().into_bytes(),
            Place::Root1(RootFile::Ctl) => Vec::new(),
            Place::Root1(RootFile::New) => Vec::new(),
            Place::Session1(seq, SessionFile::Id) => format!("{}\n", session(seq)?.uuid()).into_bytes(),
            Place::Session1(seq, SessionFile::Label) => format!("{}\n", session(seq)?.label()).into_bytes(),
            Place::Session1(seq, SessionFile::Hash) => {
                format!("{}\n", session(seq)?.view.state.hash().to_hex()).into_bytes()
            }
            Place::Session1(seq, SessionFile::Snapshot) => session(seq)?.view.state.to_snapshot(),
            Place::Root | Place::Session(_) => return Err("is a directory".into()),
        })
    }
}

fn gone() -> String {
    "session was deleted".into()
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

impl Serve for Tree {
    type Fid = Fid;

    async fn attach(&self, _uname: &str, aname: &str) -> srv::Result<(Qid, Fid)> {
        let place = match aname {
            "" | "/" => Place::Root,
            name => {
                Place::Session(self.reg().by_name(name).ok_or_else(|| format!("no session {name:?} (see /index)"))?)
            }
        };
        Ok((qid(place), Fid::at(place)))
    }

    async fn walk(&self, fid: &Fid, names: &[String]) -> srv::Result<(Vec<Qid>, Option<Fid>)> {
        let mut place = fid.place;
        let mut qids = Vec::new();
        for (i, name) in names.iter().enumerate() {
            let next = match (place, name.as_str()) {
                (Place::Root, "..") => Some(Place::Root),
                (Place::Session(_), "..") => Some(Place::Root),
                (Place::Root, n) => match ROOT.iter().find(|(m, _, _)| *m == n) {
                    Some((_, f, _)) => Some(Place::Root1(*f)),
                    None => self.reg().by_name(n).map(Place::Session),
                },
                (Place::Session(seq), n) => {
                    SESSION.iter().find(|(m, _, _)| *m == n).map(|(_, f, _)| Place::Session1(seq, *f))
                }
                _ => None,
            };
            match next {
                Some(p) => {
                    place = p;
                    qids.push(qid(p));
                }
                None if i == 0 => return Err(format!("{name}: file does not exist")),
                None => return Ok((qids, None)),
            }
        }
        Ok((qids, Some(Fid::at(place))))
    }

    async fn open(&self, fid: &Fid, _mode: u8) -> srv::Result<(Qid, Fid)> {
        let place = fid.place;
        let content = match place {
            Place::Root | Place::Session(_) => self.listing(place)?,
            Place::Root1(RootFile::New) => {
                let name = {
                    let mut reg = self.reg();
                    let seq = reg.create(None)?;
                    let name = reg.get(seq).expect("just made").label().to_string();
                    tracing::info!(session = %name, "session created through /new");
                    name
                };
                format!("{name}\n").into_bytes()
            }
            _ => self.content(place)?,
        };
        let opened = Fid { place, content: Arc::new(Mutex::new(content)) };
        Ok((qid(place), opened))
    }

    async fn create(&self, _: &Fid, name: &str, _: u32, _: u8) -> srv::Result<(Qid, Fid)> {
        Err(format!("cannot create {name:?}: to make a session write \"new NAME\" to /ctl"))
    }

    async fn read(&self, fid: &Fid, offset: u64, count: u32) -> srv::Result<Vec<u8>> {
        let dir = matches!(fid.place, Place::Root | Place::Session(_));
        if fid.place == Place::Root1(RootFile::Ctl) {
            return Err("ctl is write-only".into());
        }
        // A read at offset 0 of a file sees it as it is now (so rdwr and
        // re-reads work, as on acme's synthetic files); later offsets go on
        // reading the version that read made. A directory keeps the listing
        // made at open; /new keeps the name of the session it made.
        if offset == 0 && !dir && fid.place != Place::Root1(RootFile::New) {
            let fresh = self.content(fid.place)?;
            *fid.content.lock().expect("content lock") = fresh;
        }
        let content = fid.content.lock().expect("content lock");
        slice(&content, offset, count, dir)
    }

    async fn write(&self, fid: &Fid, _offset: u64, data: Vec<u8>) -> srv::Result<u32> {
        let text = String::from_utf8(data).map_err(|_| "write is not UTF-8 text".to_string())?;
        match fid.place {
            Place::Root1(RootFile::Ctl) => {
                let cmds = parse_ctl(&text)?;
                self.reg().run(&cmds)?;
                tracing::info!(?cmds, "ctl");
            }
            Place::Session1(seq, SessionFile::Label) => {
                let old = self.reg().get(seq).ok_or_else(gone)?.label().to_string();
                let new = text.trim_end_matches('\n');
                self.reg().rename(&old, new)?;
                tracing::info!(from = %old, to = %new, "session renamed");
            }
            place => return Err(format!("{} is not writable", self.name(place)?)),
        }
        Ok(text.len() as u32)
    }

    async fn clunk(&self, _: Fid) {}

    async fn remove(&self, fid: Fid) -> srv::Result<()> {
        Err(format!("cannot remove {}: to end a session write \"del NAME\" to /ctl", self.name(fid.place)?))
    }

    async fn stat(&self, fid: &Fid) -> srv::Result<Stat> {
        self.stat_of(fid.place)
    }

    async fn wstat(&self, fid: &Fid, stat: Stat) -> srv::Result<()> {
        // Editors and shells truncate with wstat(length 0); accept a wstat
        // that changes nothing else, as plan9port's file servers do.
        let keep = Stat::dont_touch();
        if stat.name.is_empty() && stat.mode == keep.mode && stat.mtime == keep.mtime {
            return Ok(());
        }
        Err(format!("{}: wstat can change nothing here but the length", self.name(fid.place)?))
    }
}
