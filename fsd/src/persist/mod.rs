//! Sessions that outlive the daemon: a state directory with the registry
//! and, per session, a write-ahead log and a snapshot.
//!
//! ```text
//! DIR/lock                     flock(2)ed by the apexd using DIR
//! DIR/registry                 the registry's state (names, numbers, uuids)
//! DIR/sessions/UUID/wal.N      the session's log segments (wal.rs)
//! DIR/sessions/UUID/snapshot   its state after every segment before the
//!                              one it names (snapshot.rs)
//! ```
//!
//! An entry is in its segment (write(2)) before anyone sees it or it is
//! acknowledged; `durable.rs` syncs by the `--sync` policy. When a
//! session's log has grown by `snapshot_bytes` since its last snapshot,
//! and the session pauses (or at once, once the log has grown by twice
//! that: a burst of entries, a thousand files opened, is not slowed by a
//! snapshot written beside it, and a restart replays little more than
//! twice `snapshot_bytes`), the next segment is started and a copy of the state
//! (ropes and undo groups shared) is written as the snapshot covering the
//! ones before, off the session's lock; then those segments are deleted.
//! A restart decodes the newest snapshot and replays the segments after
//! it.

pub mod check;
pub mod durable;
pub mod fault;
pub mod snapshot;
pub mod wal;

use apex_core::registry;
use apex_core::{Shard, State};
use durable::{Durable, SyncPolicy};
use std::io::Write;
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use wal::{Ending, Header, Wal};

/// Why the state directory could not be used; each names the file.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// (The error is said in the text, not chained: a user reads it once.)
    #[error("{path}: {error}")]
    Io { path: PathBuf, error: std::io::Error },
    #[error("{path} is in use by another apexd; stop it, or give this one --state DIR or --ephemeral")]
    Locked { path: PathBuf },
    /// An existing state directory others can read or write, or not the
    /// user's: left as it is.
    #[error(
        "state directory {path} (mode {mode:04o}, uid {owner}) is not a directory of yours closed to others \
         (uid {me}, mode 0700): sessions hold every text you edit; give --state a directory of its own \
         (it is made 0700 if missing), or chmod 700 it if it is yours alone"
    )]
    Exposed { path: PathBuf, mode: u32, owner: u32, me: u32 },
    #[error(
        "{path}: {why}; the session is not started (the log before it is gone): restore the file from a backup, \
         or delete the session's directory, and the session with it, at the next start"
    )]
    Snapshot { path: PathBuf, why: String },
    #[error("{path}: {why}")]
    Registry { path: PathBuf, why: String },
    /// A segment that does not read; `offset` is where, in bytes.
    #[error(
        "{path}: {why} at offset {offset}; the session is not started. `apexd --check` reports on it; \
         `apexd --salvage` starts it from the entries before that point and moves the rest aside"
    )]
    Damaged { path: PathBuf, offset: u64, why: String },
    #[error("{path}: {why}; the session is not started")]
    Segment { path: PathBuf, why: String },
    #[error(
        "{path} is missing, and segment {next} follows it: the entries it held are gone; the session is not \
         started: restore the file from a backup, or `apexd --salvage` starts it from the entries before it and \
         moves the later segments aside"
    )]
    Missing { path: PathBuf, next: u64 },
}

impl StoreError {
    pub fn io(path: &Path, error: std::io::Error) -> StoreError {
        StoreError::Io { path: path.to_path_buf(), error }
    }
}

/// Creates (or empties) `path`, readable by its owner only.
pub fn create_private(path: &Path) -> std::io::Result<std::fs::File> {
    std::fs::OpenOptions::new().create(true).write(true).truncate(true).mode(0o600).open(path)
}

/// Syncs directory `dir`, so names made or removed in it stay so.
pub fn sync_dir(dir: &Path) -> Result<(), StoreError> {
    std::fs::File::open(dir).and_then(|d| d.sync_all()).map_err(|e| StoreError::io(dir, e))
}

/// The state directory when none is given: `$XDG_STATE_HOME/apex`, else
/// `~/.local/state/apex`.
pub fn default_dir() -> Option<PathBuf> {
    let nonempty = |v: &str| std::env::var_os(v).filter(|s| !s.is_empty()).map(PathBuf::from);
    nonempty("XDG_STATE_HOME").map(|d| d.join("apex")).or_else(|| nonempty("HOME").map(|h| h.join(".local/state/apex")))
}

/// How the store runs.
#[derive(Clone, Copy, Debug)]
pub struct Options {
    pub sync: SyncPolicy,
    /// Log bytes after which a session's snapshot is written.
    pub snapshot_bytes: u64,
    /// Start a damaged session from its valid prefix, the rest moved
    /// aside.
    pub salvage: bool,
}

impl Default for Options {
    fn default() -> Options {
        Options {
            sync: SyncPolicy::Interval(std::time::Duration::from_secs(1)),
            snapshot_bytes: 64 << 20,
            salvage: false,
        }
    }
}

/// An open state directory.
pub struct Store {
    root: PathBuf,
    pub options: Options,
    /// Held for the daemon's life: one apexd per directory.
    _lock: std::fs::File,
}

const REGISTRY: &str = "registry";
const REGISTRY_MAGIC: &[u8; 8] = b"APEXREG\0";
const REGISTRY_VERSION: u32 = 1;

impl Store {
    /// Opens (making it, mode 0700) the state directory `root`, refusing
    /// one another apexd uses.
    pub fn open(root: &Path, options: Options) -> Result<Store, StoreError> {
        match std::fs::metadata(root) {
            // Made 0700 (its parents too, when missing).
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                std::fs::DirBuilder::new()
                    .recursive(true)
                    .mode(0o700)
                    .create(root)
                    .map_err(|e| StoreError::io(root, e))?;
                // The umask may have cut the mode; set it exactly.
                std::fs::set_permissions(root, std::fs::Permissions::from_mode(0o700))
                    .map_err(|e| StoreError::io(root, e))?;
            }
            Err(e) => return Err(StoreError::io(root, e)),
            // One that exists is left as it is, and must be closed to
            // others: sessions hold every text edited.
            Ok(meta) => check_private(root, &meta)?,
        }
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(root.join("sessions"))
            .map_err(|e| StoreError::io(root, e))?;
        let path = root.join("lock");
        let lock = std::fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .mode(0o600)
            .open(&path)
            .map_err(|e| StoreError::io(&path, e))?;
        // SAFETY: flock(2) on a descriptor we own; it touches no memory.
        if unsafe { libc::flock(std::os::fd::AsRawFd::as_raw_fd(&lock), libc::LOCK_EX | libc::LOCK_NB) } != 0 {
            return Err(StoreError::Locked { path: root.to_path_buf() });
        }
        Ok(Store { root: root.to_path_buf(), options, _lock: lock })
    }

    /// Session `uuid`'s directory.
    pub fn session_dir(&self, uuid: [u8; 16]) -> PathBuf {
        session_dir(&self.root, uuid)
    }

    /// A new session's directory and log, its first segment started.
    pub fn create_session(&self, uuid: [u8; 16]) -> Result<Persisted, StoreError> {
        let dir = self.session_dir(uuid);
        std::fs::DirBuilder::new().mode(0o700).create(&dir).map_err(|e| StoreError::io(&dir, e))?;
        sync_dir(&self.root.join("sessions"))?;
        Persisted::start(&dir, uuid, 0, self.options)
    }

    /// Session directories whose uuid is not in `known`.
    pub fn orphans(&self, known: &[[u8; 16]]) -> Vec<PathBuf> {
        let named: Vec<PathBuf> = known.iter().map(|u| self.session_dir(*u)).collect();
        std::fs::read_dir(self.root.join("sessions"))
            .into_iter()
            .flatten()
            .flatten()
            .map(|e| e.path())
            .filter(|p| p.is_dir() && !named.contains(p))
            .collect()
    }

    /// Removes a deleted session's directory.
    pub fn remove_session(&self, uuid: [u8; 16]) {
        let dir = self.session_dir(uuid);
        if let Err(e) = std::fs::remove_dir_all(&dir) {
            tracing::warn!(dir = %dir.display(), error = %e, "could not remove a deleted session's directory");
        }
        let _ = sync_dir(&self.root.join("sessions"));
    }

    /// Writes the registry's state, atomically.
    pub fn save_registry(&self, state: &registry::Registry) -> Result<(), StoreError> {
        let body = postcard::to_allocvec(state).expect("the registry always encodes");
        let mut bytes = Vec::with_capacity(body.len() + 20);
        bytes.extend_from_slice(REGISTRY_MAGIC);
        bytes.extend_from_slice(&REGISTRY_VERSION.to_le_bytes());
        bytes.extend_from_slice(&(body.len() as u32).to_le_bytes());
        bytes.extend_from_slice(&crc32c::crc32c(&body).to_le_bytes());
        bytes.extend_from_slice(&body);
        let temp = self.root.join("registry.tmp");
        let write = || -> std::io::Result<()> {
            let mut f = create_private(&temp)?;
            f.write_all(&bytes)?;
            f.sync_all()
        };
        write().map_err(|e| StoreError::io(&temp, e))?;
        let path = self.root.join(REGISTRY);
        std::fs::rename(&temp, &path).map_err(|e| StoreError::io(&path, e))?;
        sync_dir(&self.root)
    }

    /// The registry's state as last saved, if there is one.
    pub fn load_registry(&self) -> Result<Option<registry::Registry>, StoreError> {
        load_registry(&self.root)
    }

    /// Brings session `uuid` back: its snapshot, then its segments; a torn
    /// frame at the end of the last is cut off. Starts a new segment for
    /// what comes next.
    pub fn load_session(&self, uuid: [u8; 16]) -> Result<(State, Persisted, Restored), StoreError> {
        let dir = self.session_dir(uuid);
        let (state, restored) = replay(&dir, uuid, Repair::Fix { salvage: self.options.salvage })?;
        // Past every segment read and every one the snapshot covers.
        let next = restored.last_segment.map_or(0, |n| n + 1).max(restored.from_segment);
        let persisted = Persisted::start(&dir, uuid, next, self.options)?;
        // The log since the snapshot counts across restarts: a daemon
        // restarted often still snapshots.
        persisted.wal.lock().expect("wal lock").since_snapshot = restored.tail_bytes;
        Ok((state, persisted, restored))
    }
}

/// Refuses a state directory that is not a directory of this user's
/// closed to others.
fn check_private(root: &Path, meta: &std::fs::Metadata) -> Result<(), StoreError> {
    use std::os::unix::fs::MetadataExt;
    // SAFETY: getuid has no preconditions.
    let me = unsafe { libc::getuid() };
    let (mode, owner) = (meta.mode() & 0o7777, meta.uid());
    if !meta.is_dir() || owner != me || mode & 0o077 != 0 {
        return Err(StoreError::Exposed { path: root.to_path_buf(), mode, owner, me });
    }
    Ok(())
}

pub fn session_dir(root: &Path, uuid: [u8; 16]) -> PathBuf {
    root.join("sessions").join(uuid::Uuid::from_bytes(uuid).to_string())
}

pub fn load_registry(root: &Path) -> Result<Option<registry::Registry>, StoreError> {
    let path = root.join(REGISTRY);
    let bytes = match std::fs::read(&path) {
        Ok(b) => b,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(StoreError::io(&path, e)),
    };
    let bad = |why: &str| StoreError::Registry { path: path.clone(), why: why.to_string() };
    if bytes.len() < 20 || &bytes[..8] != REGISTRY_MAGIC {
        return Err(bad("not an apex registry (bad magic or too short)"));
    }
    let u32_at = |i: usize| u32::from_le_bytes(bytes[i..i + 4].try_into().expect("4 bytes"));
    if u32_at(8) != REGISTRY_VERSION {
        return Err(bad("written by another version of apexd"));
    }
    let body = &bytes[20..];
    if body.len() != u32_at(12) as usize || crc32c::crc32c(body) != u32_at(16) {
        return Err(bad("its checksum does not match (damaged or truncated)"));
    }
    postcard::from_bytes(body).map(Some).map_err(|e| bad(&format!("does not decode: {e}")))
}

/// What bringing a session back found.
#[derive(Debug, Default)]
pub struct Restored {
    pub entries: u64,
    pub segments: u64,
    /// The snapshot's stored hash, if there was one (a check verified it).
    pub snapshot: Option<[u8; 32]>,
    /// The highest segment read.
    pub last_segment: Option<u64>,
    /// The first segment the snapshot does not cover (0 without one).
    pub from_segment: u64,
    /// What was cut off or moved aside, said for the log.
    pub repairs: Vec<String>,
    /// Frame bytes in the segments replayed past the snapshot: the log
    /// since it, which the next snapshot counts from.
    pub tail_bytes: u64,
}

/// What a replay may change: a restart cuts a torn tail (and, salvaging,
/// moves damage aside); `--check` changes nothing.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Repair {
    Fix { salvage: bool },
    Nothing,
}

/// The state of the session in `dir`: its snapshot, if any, then every
/// segment from there, in order.
pub fn replay(dir: &Path, uuid: [u8; 16], repair: Repair) -> Result<(State, Restored), StoreError> {
    let mut restored = Restored::default();
    if repair != Repair::Nothing {
        // A snapshot a crash left unfinished: the old one stands.
        let _ = std::fs::remove_file(dir.join(snapshot::TEMP));
    }
    let snap = dir.join(snapshot::FILE);
    let (mut state, from) = match snap.exists() {
        true => {
            let s = snapshot::read(&snap, uuid, repair == Repair::Nothing)?;
            restored.snapshot = Some(s.hash);
            (s.state, s.from_segment)
        }
        false => (State::new(), 0),
    };
    restored.from_segment = from;
    let segments = wal::segments(dir)?;
    let last = segments.last().map(|(n, _)| *n);
    // The segments from the snapshot's on follow one another: a missing
    // one is acknowledged entries gone.
    let mut next = from;
    for (i, (n, path)) in segments.iter().enumerate() {
        if *n < from {
            // Covered by the snapshot; a crash mid-compaction left it.
            if repair != Repair::Nothing {
                let _ = std::fs::remove_file(path);
            }
            continue;
        }
        if *n != next {
            let missing = dir.join(wal::segment_name(next));
            match repair {
                Repair::Fix { salvage: true } => {
                    let moved = set_aside_segments(dir, &segments[i..])?;
                    restored.repairs.push(format!(
                        "{}: salvaged: segment {next} is missing; kept the entries before it, moved segment {n} \
                         and the later ones to {}",
                        missing.display(),
                        moved.display()
                    ));
                    break;
                }
                _ => return Err(StoreError::Missing { path: missing, next: *n }),
            }
        }
        next = n + 1;
        let bytes = std::fs::read(path).map_err(|e| StoreError::io(path, e))?;
        let is_last = Some(*n) == last;
        // A crash while a segment was being started leaves less than its
        // header: nothing was ever written to it.
        if is_last && bytes.len() < wal::HEADER_LEN {
            let said = format!("{}: removed a segment cut short in its header ({} bytes)", path.display(), bytes.len());
            if let Repair::Fix { .. } = repair {
                let _ = std::fs::remove_file(path);
            }
            restored.repairs.push(said);
            break;
        }
        let header =
            Header::decode(&bytes).map_err(|why| StoreError::Segment { path: path.clone(), why: why.to_string() })?;
        if header.uuid != uuid {
            let why = "it belongs to another session (its header's uuid differs)".to_string();
            return Err(StoreError::Segment { path: path.clone(), why });
        }
        if header.segment != *n {
            let why = format!("its header says segment {}, its name {n} (renamed?)", header.segment);
            return Err(StoreError::Segment { path: path.clone(), why });
        }
        let (ending, whole) = wal::scan(&bytes, &header, |shard: Shard, entry, _| {
            // An entry the state already has is one a snapshot covers.
            if entry.seq <= state.applied(shard) {
                return Ok::<_, wal::Unapplied>(());
            }
            state.apply(shard, &entry).map_err(|reject| wal::Unapplied { shard, seq: entry.seq, reject })?;
            restored.entries += 1;
            Ok(())
        });
        restored.segments += 1;
        restored.last_segment = Some(*n);
        restored.tail_bytes += whole.saturating_sub(wal::HEADER_LEN as u64);
        if repair != Repair::Nothing {
            // A closed segment keeps no room set aside past its frames
            // (a daemon killed while it was the current one left some).
            wal::release_reservation(path, bytes.len() as u64);
        }
        match ending {
            Ending::Clean => {}
            Ending::Torn { offset, why } if is_last => {
                let said = format!("{}: cut a torn frame at offset {offset} ({why})", path.display());
                if let Repair::Fix { .. } = repair {
                    cut(path, whole)?;
                }
                restored.repairs.push(said);
            }
            Ending::Torn { offset, why } | Ending::Bad { offset, why } => match repair {
                Repair::Fix { salvage: true } => {
                    let moved = set_aside(dir, path, whole, &segments[i + 1..])?;
                    restored.repairs.push(format!(
                        "{}: salvaged: kept the entries before offset {offset} ({why}); moved the rest to {}",
                        path.display(),
                        moved.display()
                    ));
                    break;
                }
                _ => return Err(StoreError::Damaged { path: path.clone(), offset, why }),
            },
        }
    }
    Ok((state, restored))
}

/// Cuts segment `path` to its first `len` bytes, synced.
fn cut(path: &Path, len: u64) -> Result<(), StoreError> {
    let f = std::fs::OpenOptions::new().write(true).open(path).map_err(|e| StoreError::io(path, e))?;
    f.set_len(len).and_then(|_| f.sync_all()).map_err(|e| StoreError::io(path, e))
}

/// A fresh `salvaged.N` directory beside a session's segments.
fn salvage_dir(dir: &Path) -> Result<PathBuf, StoreError> {
    let mut n = 0;
    let aside = loop {
        let d = dir.join(format!("salvaged.{n}"));
        if !d.exists() {
            break d;
        }
        n += 1;
    };
    std::fs::DirBuilder::new().mode(0o700).create(&aside).map_err(|e| StoreError::io(&aside, e))?;
    Ok(aside)
}

/// Moves `segments` whole to a directory of their own beside them;
/// returns it.
fn set_aside_segments(dir: &Path, segments: &[(u64, PathBuf)]) -> Result<PathBuf, StoreError> {
    let aside = salvage_dir(dir)?;
    move_into(dir, &aside, segments)?;
    Ok(aside)
}

/// Moves `segments` from `dir` into `aside`, the moves synced.
fn move_into(dir: &Path, aside: &Path, segments: &[(u64, PathBuf)]) -> Result<(), StoreError> {
    for (_, p) in segments {
        let to = aside.join(p.file_name().expect("a segment has a name"));
        std::fs::rename(p, &to).map_err(|e| StoreError::io(p, e))?;
    }
    sync_dir(dir)
}

/// Moves what follows byte `len` of `path`, and every later segment, to
/// a directory of its own beside them; returns it.
fn set_aside(dir: &Path, path: &Path, len: u64, later: &[(u64, PathBuf)]) -> Result<PathBuf, StoreError> {
    let aside = salvage_dir(dir)?;
    let name = path.file_name().expect("a segment has a name");
    std::fs::copy(path, aside.join(name)).map_err(|e| StoreError::io(path, e))?;
    cut(path, len)?;
    move_into(dir, &aside, later)?;
    Ok(aside)
}

/// A session's side of the store: its log, whether a snapshot is being
/// written, and whether one that fell due waits for the session to pause.
pub struct Persisted {
    pub wal: Arc<Mutex<Wal>>,
    pub uuid: [u8; 16],
    pub snapshot_bytes: u64,
    pub snapshotting: Arc<std::sync::atomic::AtomicBool>,
    pub put_off: Arc<PutOff>,
}

/// A due snapshot put off while entries still come in: the log's size
/// since the last snapshot as last seen, when it last grew (on the
/// daemon's clock), and whether a timer waits for the pause. A change
/// that adds nothing to the log (a read of `data`, an event file opened)
/// does not hold the snapshot off.
#[derive(Default)]
pub struct PutOff {
    pub seen: std::sync::atomic::AtomicU64,
    pub grew_ms: std::sync::atomic::AtomicU64,
    pub waiting: std::sync::atomic::AtomicBool,
}

/// Whether a due snapshot is taken now, or put off unless the log has
/// grown by twice the size a snapshot is due at.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Pace {
    /// Entries are coming in (a change was just made).
    Busy,
    /// The session paused (or was just restored).
    Quiet,
}

impl Persisted {
    fn start(dir: &Path, uuid: [u8; 16], segment: u64, options: Options) -> Result<Persisted, StoreError> {
        let durable = Durable::new(options.sync);
        let salts = Box::new(|| u64::from_le_bytes(uuid::Uuid::new_v4().as_bytes()[..8].try_into().expect("8 bytes")));
        let wal = Wal::create(dir, uuid, segment, durable, salts)?;
        Ok(Persisted {
            wal: Arc::new(Mutex::new(wal)),
            uuid,
            snapshot_bytes: options.snapshot_bytes,
            snapshotting: Arc::new(std::sync::atomic::AtomicBool::new(false)),
            put_off: Arc::new(PutOff::default()),
        })
    }

    /// The sink core's log writes through.
    pub fn sink(&self) -> Box<dyn apex_core::Sink> {
        Box::new(wal::WalSink(self.wal.clone()))
    }

    /// Ends a change: writes what the entries it stored made, or says why
    /// they are not in the file (then none of the change is).
    pub fn flush(&self) -> Result<(), durable::LogError> {
        self.wal.lock().expect("wal lock").flush()
    }

    /// Stops the log for good: nothing more is taken or acknowledged until
    /// the daemon restarts (and replays what the files hold).
    pub fn stop(&self, why: String) {
        tracing::error!(error = %why, "the session's log stops");
        let mut wal = self.wal.lock().expect("wal lock");
        wal.durable.fail(why.clone());
        wal.broken = Some(why);
    }

    /// The state the files hold now: the snapshot and every segment since,
    /// the one being written included. A snapshot being put in place may
    /// delete segments under the reading; the reading is then made again.
    pub fn state_on_disk(&self) -> Result<State, StoreError> {
        let dir = self.dir();
        let mut tries = 0;
        loop {
            match replay(&dir, self.uuid, Repair::Nothing) {
                Ok((state, _)) => return Ok(state),
                Err(_) if tries < 3 => {
                    tries += 1;
                    std::thread::sleep(std::time::Duration::from_millis(20));
                }
                Err(e) => return Err(e),
            }
        }
    }

    /// The session's directory.
    pub fn dir(&self) -> PathBuf {
        self.wal.lock().expect("wal lock").dir().to_path_buf()
    }

    /// Where terminal `id`'s keeper waits for a daemon after this one
    /// (`pty/ID` in the session's directory).
    pub fn keeper_socket(&self, id: apex_core::TermId) -> PathBuf {
        self.dir().join("pty").join(id.0.to_string())
    }

    pub fn durable(&self) -> Arc<Durable> {
        self.wal.lock().expect("wal lock").durable.clone()
    }

    /// Makes room in the log for a request of `bytes` before it is
    /// applied; refuses (changing nothing) when the disk has none.
    pub fn reserve(&self, bytes: u64) -> Result<(), durable::LogError> {
        self.wal.lock().expect("wal lock").reserve(bytes)
    }

    /// Whether the log has taken in `bytes` since this last said so: the
    /// entries in memory may then go (they are in the log's file), as far
    /// as no connection or `entries` reader still needs them.
    pub fn entries_due(&self, bytes: u64) -> bool {
        let mut wal = self.wal.lock().expect("wal lock");
        wal.since_let_go >= bytes && {
            wal.since_let_go = 0;
            true
        }
    }

    /// If the log has grown enough (by twice as much while `pace` is
    /// busy): starts the next segment and takes a copy of `state` (under
    /// the session's lock, cheap), for a snapshot written after the lock
    /// is let go. A snapshot due but put off is said by
    /// [`Persisted::snapshot_put_off`].
    pub fn snapshot_due(&self, state: &State, pace: Pace) -> Option<SnapshotJob> {
        use std::sync::atomic::Ordering;
        let mut wal = self.wal.lock().expect("wal lock");
        let due = match pace {
            Pace::Busy => self.snapshot_bytes.saturating_mul(2),
            Pace::Quiet => self.snapshot_bytes,
        };
        if wal.since_snapshot < due || wal.broken.is_some() {
            return None;
        }
        if self.snapshotting.swap(true, Ordering::AcqRel) {
            return None;
        }
        match wal.rotate() {
            Ok(from_segment) => Some(SnapshotJob {
                dir: wal.dir().to_path_buf(),
                uuid: self.uuid,
                from_segment,
                state: Box::new(state.clone()),
                snapshotting: self.snapshotting.clone(),
            }),
            Err(e) => {
                tracing::error!(error = %e, "could not start a segment for a snapshot");
                self.snapshotting.store(false, Ordering::Release);
                None
            }
        }
    }

    /// The log's size since the last snapshot if a snapshot is due but
    /// was put off (or waits for the one being written): the log has
    /// grown by the size one is due at.
    pub fn snapshot_put_off(&self) -> Option<u64> {
        let wal = self.wal.lock().expect("wal lock");
        (wal.since_snapshot >= self.snapshot_bytes && wal.broken.is_none()).then_some(wal.since_snapshot)
    }

    /// Whether a snapshot is being written.
    pub fn writing_snapshot(&self) -> bool {
        self.snapshotting.load(std::sync::atomic::Ordering::Acquire)
    }
}

/// A snapshot to write, off the session's lock.
pub struct SnapshotJob {
    dir: PathBuf,
    uuid: [u8; 16],
    from_segment: u64,
    state: Box<State>,
    snapshotting: Arc<std::sync::atomic::AtomicBool>,
}

impl SnapshotJob {
    /// Writes the snapshot, then deletes the segments it covers.
    pub fn run(self) {
        let started = std::time::Instant::now();
        fault::slow_snapshot();
        match snapshot::write(&self.dir, self.uuid, self.from_segment, &self.state) {
            Ok(()) => {
                let mut deleted = 0;
                for (n, path) in wal::segments(&self.dir).unwrap_or_default() {
                    if n >= self.from_segment {
                        continue;
                    }
                    if deleted == 1 && fault::crash_at(fault::MID_COMPACTION) {
                        fault::crash();
                    }
                    if std::fs::remove_file(&path).is_ok() {
                        deleted += 1;
                    }
                }
                let _ = sync_dir(&self.dir);
                tracing::info!(dir = %self.dir.display(), segments = deleted, took_ms = started.elapsed().as_millis() as u64, "snapshot written");
            }
            Err(e) => tracing::error!(error = %e, "snapshot not written; the log is kept whole"),
        }
        self.snapshotting.store(false, std::sync::atomic::Ordering::Release);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_restart_writes_past_every_segment_its_snapshot_covers() {
        let root = std::env::temp_dir().join(format!("apex-persist-numbering-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&root);
        let store = Store::open(&root, Options::default()).unwrap();
        let uuid = [5; 16];
        let dir = store.session_dir(uuid);
        std::fs::create_dir_all(&dir).unwrap();
        // A snapshot covering segments 0..5, and no segment after it (the
        // crash came as segment 5 was started).
        snapshot::write(&dir, uuid, 5, &State::new()).unwrap();
        let (_, persisted, restored) = store.load_session(uuid).unwrap();
        assert_eq!(restored.from_segment, 5);
        let segment = persisted.wal.lock().unwrap().segment();
        assert!(segment >= 5, "segment {segment} would be taken for covered, and deleted, at the next restart");
        drop(persisted);
        let _ = std::fs::remove_dir_all(&root);
    }
}
