//! Places: every file and directory of the tree, as a value.
//!
//! Like acme's `dirtab[]`, each directory is a static table of
//! `(name, file, perm)`; a [`Place`] is where a fid points, and it carries
//! the numbers (session, shard, buffer) that pick its instance. Whether a
//! place still exists is the state's business (`Fsys::check`); this file
//! is only names, kinds and permissions.

use crate::shards::tables::MetaTable;
use apex_core::{BufferId, Shard, TermId};
use apex_ninep::Name;
use compact_str::ToCompactString;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum RootFile {
    Index,
    Ctl,
    New,
    Registry,
    /// Which machine the daemon runs on (`apex_sys::machine`).
    Machine,
    Services,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum SessionFile {
    Id,
    Label,
    Ctl,
    Hash,
    Snapshot,
    Proposals,
    Attach,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum SessionDir {
    Meta,
    Shards,
    Buffers,
    /// The acme(4) tree's root.
    Acme,
    Terms,
    /// The session's plumber (plumber(4)'s tree).
    Plumb,
}

/// A file at the top of the acme tree (acme's `dirtab`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum AcmeFile {
    /// `acme/`: an empty directory that numbers and root names walk through.
    Acme,
    Cons,
    Consctl,
    Draw,
    Editout,
    Index,
    Label,
    Log,
    New,
}

/// A file of an acme window directory (acme's `dirtabw`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum WinFile {
    Addr,
    Body,
    Ctl,
    Data,
    Editout,
    Errors,
    Event,
    Rdsel,
    Tag,
    Wrsel,
    Xdata,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ShardFile {
    Entries,
    Lease,
    Info,
}

/// A file of a terminal's directory, `terms/N/`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum TermFile {
    Cons,
    Screen,
    Scrollback,
    Text,
    Ctl,
}

/// A file of the session's plumber, `plumb/`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum PlumbFile {
    Send,
    Rules,
    /// A port, by its name's hash (`plumb::files::port_hash`): ports are
    /// named by the rules, and a place is a small value.
    Port(u64),
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum BufferFile {
    Body,
    Name,
    Ctl,
    Addr,
    Data,
    Event,
}

/// A directory's table: name, file, permission bits.
pub type Table<T> = &'static [(&'static str, T, u32)];

pub const ROOT: Table<RootFile> = &[
    ("index", RootFile::Index, 0o444),
    ("ctl", RootFile::Ctl, 0o222),
    ("new", RootFile::New, 0o444),
    ("registry", RootFile::Registry, 0o444),
    ("machine", RootFile::Machine, 0o444),
    ("services", RootFile::Services, 0o444),
];
pub const SESSION: Table<SessionFile> = &[
    ("id", SessionFile::Id, 0o444),
    ("label", SessionFile::Label, 0o666),
    ("ctl", SessionFile::Ctl, 0o666),
    ("hash", SessionFile::Hash, 0o444),
    ("snapshot", SessionFile::Snapshot, 0o444),
    ("proposals", SessionFile::Proposals, 0o666),
    ("attach", SessionFile::Attach, 0o666),
];
pub const SESSION_DIRS: Table<SessionDir> = &[
    ("meta", SessionDir::Meta, 0o555),
    ("shards", SessionDir::Shards, 0o555),
    ("buffers", SessionDir::Buffers, 0o555),
    ("acme", SessionDir::Acme, 0o500),
    ("terms", SessionDir::Terms, 0o555),
    ("plumb", SessionDir::Plumb, 0o555),
];
/// The plumber's own files; its ports follow them, read-only.
pub const PLUMB: Table<PlumbFile> = &[("rules", PlumbFile::Rules, 0o666), ("send", PlumbFile::Send, 0o222)];
/// acme's root: directories (`acme`, `draw`, `new`) are marked by
/// `AcmeFile::is_dir`. Permissions are acme's own.
pub const ACME: Table<AcmeFile> = &[
    ("acme", AcmeFile::Acme, 0o500),
    ("cons", AcmeFile::Cons, 0o600),
    ("consctl", AcmeFile::Consctl, 0o000),
    ("draw", AcmeFile::Draw, 0o000),
    ("editout", AcmeFile::Editout, 0o200),
    ("index", AcmeFile::Index, 0o400),
    ("label", AcmeFile::Label, 0o600),
    ("log", AcmeFile::Log, 0o400),
    ("new", AcmeFile::New, 0o500),
];
pub const WINDOW: Table<WinFile> = &[
    ("addr", WinFile::Addr, 0o600),
    ("body", WinFile::Body, 0o600),
    ("ctl", WinFile::Ctl, 0o600),
    ("data", WinFile::Data, 0o600),
    ("editout", WinFile::Editout, 0o200),
    ("errors", WinFile::Errors, 0o200),
    ("event", WinFile::Event, 0o600),
    ("rdsel", WinFile::Rdsel, 0o400),
    ("tag", WinFile::Tag, 0o600),
    ("wrsel", WinFile::Wrsel, 0o200),
    ("xdata", WinFile::Xdata, 0o600),
];

impl AcmeFile {
    pub fn is_dir(self) -> bool {
        matches!(self, AcmeFile::Acme | AcmeFile::Draw | AcmeFile::New)
    }
}
pub const SHARD: Table<ShardFile> =
    &[("entries", ShardFile::Entries, 0o444), ("lease", ShardFile::Lease, 0o666), ("info", ShardFile::Info, 0o444)];
pub const BUFFER: Table<BufferFile> = &[
    ("body", BufferFile::Body, 0o666),
    ("name", BufferFile::Name, 0o666),
    ("ctl", BufferFile::Ctl, 0o666),
    ("addr", BufferFile::Addr, 0o666),
    ("data", BufferFile::Data, 0o666),
    ("event", BufferFile::Event, 0o666),
];

pub const TERM: Table<TermFile> = &[
    ("cons", TermFile::Cons, 0o666),
    ("screen", TermFile::Screen, 0o444),
    ("scrollback", TermFile::Scrollback, 0o444),
    ("text", TermFile::Text, 0o444),
    ("ctl", TermFile::Ctl, 0o666),
];

/// A directory named by a number (`buffers/N`, `terms/N`, an acme
/// window): digits only, so `+1` or ` 1` name nothing.
pub fn number(name: &str) -> Option<u64> {
    name.bytes().all(|c| c.is_ascii_digit()).then(|| name.parse().ok()).flatten()
}

/// The file named `name` in `table`.
pub fn lookup<T: Copy>(table: Table<T>, name: &str) -> Option<T> {
    table.iter().find(|(n, _, _)| *n == name).map(|(_, f, _)| *f)
}

/// The name and permission of `file` in `table`.
pub fn entry<T: Copy + PartialEq>(table: Table<T>, file: T) -> (&'static str, u32) {
    table.iter().find(|(_, f, _)| *f == file).map_or(("", 0), |(n, _, p)| (*n, *p))
}

/// Where a fid points. Numbers are the session's registry number, a
/// shard, a buffer id.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Place {
    Root,
    Root1(RootFile),
    Session(u64),
    Session1(u64, SessionFile),
    Dir(u64, SessionDir),
    Meta1(u64, MetaTable),
    Shard(u64, Shard),
    Shard1(u64, Shard, ShardFile),
    /// `buffers/new`: opening it makes a buffer in a new window.
    BuffersNew(u64),
    Buffer(u64, BufferId),
    Buffer1(u64, BufferId, BufferFile),
    /// A file at the top of the acme tree (`Dir(n, SessionDir::Acme)`).
    Acme1(u64, AcmeFile),
    /// An acme window's directory, by acme number.
    Win(u64, u32),
    Win1(u64, u32, WinFile),
    /// `terms/index`.
    TermsIndex(u64),
    Term(u64, TermId),
    Term1(u64, TermId, TermFile),
    /// A file of `plumb/`.
    Plumb1(u64, PlumbFile),
}

/// The seed of `Place::qid_path`'s hash.
const QID_SEED: u64 = u64::from_le_bytes(*b"apex qid");

impl Place {
    /// The qid path of the file here: a hash of the place, so it never
    /// changes while the file lives (apex-mnt makes it the inode number)
    /// and no table grows with the files ever walked to. The root is 0.
    pub fn qid_path(self) -> u64 {
        use std::hash::BuildHasher;
        if self == Place::Root {
            return 0;
        }
        // A fixed seed: the same path for the same place in every run of
        // this build. (The numbers in a place are the daemon's, not picked
        // by a client, so no seed needs keeping secret.)
        foldhash::quality::FixedState::with_seed(QID_SEED).hash_one(self).max(1)
    }

    pub fn is_dir(self) -> bool {
        match self {
            Place::Acme1(_, f) => f.is_dir(),
            _ => matches!(
                self,
                Place::Root
                    | Place::Session(_)
                    | Place::Dir(..)
                    | Place::Shard(..)
                    | Place::Buffer(..)
                    | Place::Win(..)
                    | Place::Term(..)
            ),
        }
    }

    /// Whether this place is in a session's acme tree.
    pub fn in_acme(self) -> bool {
        matches!(self, Place::Dir(_, SessionDir::Acme) | Place::Acme1(..) | Place::Win(..) | Place::Win1(..))
    }

    /// The session this place is in.
    pub fn session(self) -> Option<u64> {
        match self {
            Place::Root | Place::Root1(_) => None,
            Place::Session(s)
            | Place::Session1(s, _)
            | Place::Dir(s, _)
            | Place::Meta1(s, _)
            | Place::Shard(s, _)
            | Place::Shard1(s, _, _)
            | Place::BuffersNew(s)
            | Place::Buffer(s, _)
            | Place::Buffer1(s, _, _)
            | Place::Acme1(s, _)
            | Place::Win(s, _)
            | Place::Win1(s, _, _)
            | Place::TermsIndex(s)
            | Place::Term(s, _)
            | Place::Term1(s, _, _)
            | Place::Plumb1(s, _) => Some(s),
        }
    }

    /// The directory holding this place.
    pub fn parent(self) -> Place {
        match self {
            Place::Root | Place::Root1(_) | Place::Session(_) => Place::Root,
            Place::Session1(s, _) | Place::Dir(s, _) => Place::Session(s),
            Place::Meta1(s, _) => Place::Dir(s, SessionDir::Meta),
            Place::Shard(s, _) => Place::Dir(s, SessionDir::Shards),
            Place::Shard1(s, shard, _) => Place::Shard(s, shard),
            Place::BuffersNew(s) | Place::Buffer(s, _) => Place::Dir(s, SessionDir::Buffers),
            Place::Buffer1(s, b, _) => Place::Buffer(s, b),
            Place::TermsIndex(s) | Place::Term(s, _) => Place::Dir(s, SessionDir::Terms),
            Place::Term1(s, t, _) => Place::Term(s, t),
            Place::Plumb1(s, _) => Place::Dir(s, SessionDir::Plumb),
            // In acme's tree `..` goes to its root from anywhere.
            Place::Acme1(s, _) | Place::Win(s, _) | Place::Win1(s, _, _) => Place::Dir(s, SessionDir::Acme),
        }
    }

    /// A streaming file: reads block at the end until there is more.
    pub fn is_stream(self) -> bool {
        matches!(
            self,
            Place::Root1(RootFile::Registry)
                | Place::Shard1(_, _, ShardFile::Entries)
                | Place::Buffer1(_, _, BufferFile::Event)
                | Place::Win1(_, _, WinFile::Event)
        )
    }

    /// Its name and permission bits (directories without `DMDIR`); a
    /// session's name is its label, and a port's its name, which the
    /// caller supplies.
    pub fn name_perm(self, label: &str) -> (Name, u32) {
        let (name, perm) = match self {
            Place::Root => ("/", 0o555),
            Place::Root1(f) => entry(ROOT, f),
            Place::Session(_) => (label, 0o555),
            Place::Session1(_, f) => entry(SESSION, f),
            Place::Dir(_, d) => entry(SESSION_DIRS, d),
            Place::Meta1(_, t) => (t.name(), 0o444),
            Place::Shard(_, shard) => return (shard.to_compact_string(), 0o555),
            Place::Shard1(_, _, f) => entry(SHARD, f),
            Place::BuffersNew(_) => ("new", 0o444),
            Place::Buffer(_, b) => return (b.0.to_compact_string(), 0o555),
            Place::Buffer1(_, _, f) => entry(BUFFER, f),
            Place::Acme1(_, f) => entry(ACME, f),
            Place::Win(_, n) => return (n.to_compact_string(), 0o700),
            Place::Win1(_, _, f) => entry(WINDOW, f),
            Place::TermsIndex(_) => ("index", 0o444),
            Place::Term(_, t) => return (t.0.to_compact_string(), 0o555),
            Place::Term1(_, _, f) => entry(TERM, f),
            Place::Plumb1(_, PlumbFile::Port(_)) => (label, 0o444),
            Place::Plumb1(_, f) => entry(PLUMB, f),
        };
        (Name::from(name), perm)
    }
}

/// The error for a write to a file that takes none.
pub fn not_writable(place: Place) -> super::error::FsError {
    let (name, _) = place.name_perm("");
    super::error::FsError::NotWritable(name.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::session::proposals::VERBS;

    /// apex(4) documents every file of the tree and every proposal verb:
    /// a file added here without its paragraph there fails this test.
    #[test]
    fn the_manual_names_every_file_and_verb() {
        let page = include_str!("../../../man/apex.4");
        let documented = |name: &str| {
            page.lines().any(|l| {
                l.strip_prefix(".B ").or_else(|| l.strip_prefix(".BI ")).or_else(|| l.strip_prefix(".BR ")).is_some_and(
                    |rest| rest.split([' ', '/', '"']).any(|w| w == name) || rest.contains(&format!("/{name}")),
                )
            })
        };
        let names = ROOT
            .iter()
            .map(|(n, _, _)| *n)
            .chain(SESSION.iter().map(|(n, _, _)| *n))
            .chain(SESSION_DIRS.iter().map(|(n, _, _)| *n))
            .chain(SHARD.iter().map(|(n, _, _)| *n))
            .chain(BUFFER.iter().map(|(n, _, _)| *n))
            .chain(ACME.iter().map(|(n, _, _)| *n))
            .chain(WINDOW.iter().map(|(n, _, _)| *n))
            .chain(TERM.iter().map(|(n, _, _)| *n))
            .chain(PLUMB.iter().map(|(n, _, _)| *n))
            .chain(MetaTable::ALL.iter().map(|(n, _)| *n))
            .chain(VERBS.split('|'));
        let missing: Vec<&str> = names.filter(|n| !documented(n)).collect();
        assert!(missing.is_empty(), "man/apex.4 does not document {missing:?}");
    }
}
