//! The file tree's own state and the services every family of files
//! shares, below them all: the session a place is in, locked (`at`);
//! whether a place of the state still exists (`check_state`); a stream
//! reader that holds shards from compaction (`open_reader`,
//! `stop_reading`); a file's content made under its session's lock
//! (`made_in`). The dispatch of each request to a family is `fsys`'s.

use super::fid::Opened;
use super::made::Made;
use super::place::Place;
use super::stream::{Cursor, Source};
use crate::daemon::{gone, Daemon};
use crate::error::{Error, Result};
use crate::fsys::error::FsError;
use crate::registry::Registry;
use crate::session::Session;
use apex_core::{Shard, WindowId};
use apex_ninep::fcall::Name;

/// The file tree over the daemon's sessions: what each file means, for
/// `ninep::srv`. Clones share everything.
#[derive(Clone)]
pub struct Fsys {
    pub daemon: Daemon,
    pub user: Name,
    /// On the `acme` service (`apexd --acme NAME`): the session whose acme
    /// tree an attach with aname "" reaches.
    pub acme_service: Option<String>,
    /// On the `plumb` service (`apexd --plumb NAME`): the session whose
    /// plumber every attach reaches.
    pub plumb_service: Option<String>,
    /// A plumber another program posted (`NAMESPACE/plumb`), which B3
    /// written back through an acme event file tries after the session's;
    /// none where this daemon posts `plumb` itself.
    pub system_plumber: Option<std::path::PathBuf>,
    /// Snapshot versions shared by fids that opened them unchanged.
    pub snapshots: super::made::SharedSnapshots,
}

impl Fsys {
    pub fn new(registry: Registry, user: &str) -> Fsys {
        Fsys {
            daemon: Daemon::new(registry),
            user: Name::from(user),
            acme_service: None,
            plumb_service: None,
            system_plumber: None,
            snapshots: Default::default(),
        }
    }

    /// This tree as the `acme` service of session `name`: attaches with
    /// aname "" reach its acme tree.
    pub fn acme_service(&self, name: &str) -> Fsys {
        Fsys { acme_service: Some(name.to_string()), ..self.clone() }
    }

    /// This tree as the `plumb` service of session `name`.
    pub fn plumb_service(&self, name: &str) -> Fsys {
        Fsys { plumb_service: Some(name.to_string()), acme_service: None, ..self.clone() }
    }

    /// Runs `f` with the session `place` is in locked: a request on one
    /// session waits for no other. The root's files and a session's own
    /// directory need none (the registry has the sessions and their
    /// names), so `f` gets none for them; it never locks the registry
    /// while it holds a session.
    pub(crate) fn at<R>(&self, place: Place, f: impl FnOnce(Option<&Session>) -> Result<R>) -> Result<R> {
        match place {
            Place::Session(n) => self.unlocked(n, f),
            _ => match place.session() {
                None => f(None),
                Some(n) => self.daemon.read(n, |s| f(Some(s)))?,
            },
        }
    }

    /// Runs `f` with no session if session `n` exists (the registry is let
    /// go before `f` runs).
    pub(crate) fn unlocked<R>(&self, n: u64, f: impl FnOnce(Option<&Session>) -> Result<R>) -> Result<R> {
        let exists = self.daemon.reg().has(n);
        match exists {
            true => f(None),
            false => Err(gone()),
        }
    }

    /// Whether `place` is a shard, buffer or window of the state, which
    /// may be deleted while its session lives.
    pub(crate) fn lives_in_state(place: Place) -> bool {
        matches!(
            place,
            Place::Shard(..)
                | Place::Shard1(..)
                | Place::Buffer(..)
                | Place::Buffer1(..)
                | Place::Win(..)
                | Place::Win1(..)
                | Place::Term(..)
                | Place::Term1(..)
        )
    }

    /// A stream of entries or events that keeps `shards` from compaction
    /// while it is open.
    pub(crate) fn open_reader(
        &self,
        n: u64,
        shards: &[Shard],
        source: Source,
        event_of: Option<WindowId>,
    ) -> Result<Opened> {
        // Opened and counted under one lock: no entry comes in between.
        let cursor = self.daemon.tend(n, |s| {
            let cursor = Cursor::open_in(source, s)?;
            for shard in shards {
                s.hub_mut().start_reading(*shard);
            }
            Ok::<_, Error>(cursor)
        })??;
        Ok(Opened::Stream { cursor, reading: shards.to_vec(), event_of })
    }

    /// Whether `place` (in session `s`) still exists, with an error saying
    /// what is gone: shards, buffers and terminals (the acme tree's
    /// windows are `acme::files::check`'s).
    pub(crate) fn check_state(s: Option<&Session>, place: Place) -> Result<()> {
        if !Fsys::lives_in_state(place) {
            return Ok(());
        }
        let s = s.ok_or_else(gone)?;
        match place {
            Place::Shard(_, shard) | Place::Shard1(_, shard, _) => {
                s.view().log.shard(shard).map(|_| ()).map_err(|_| FsError::ShardGone(shard).into())
            }
            Place::Buffer(_, b) | Place::Buffer1(_, b, _) => {
                s.view().state.buffer(b).map(|_| ()).map_err(|_| Error::BufferGone(b.0))
            }
            Place::Term(_, t) | Place::Term1(_, t, _) => match s.view().state.terms.contains_key(&t) {
                true => Ok(()),
                false => Err(FsError::TermClosed(t.0).into()),
            },
            _ => Ok(()),
        }
    }

    /// Stops holding `shards` from compaction for a reader that goes.
    pub(crate) fn stop_reading(&self, n: u64, shards: &[Shard]) {
        let _ = self.daemon.tend(n, |s| {
            for shard in shards {
                s.hub_mut().stop_reading(*shard);
            }
        });
    }

    /// The content of `place` as `f` makes it from its session, under
    /// the session's lock, once the place is known to exist.
    pub(crate) fn made_in(&self, place: Place, f: impl FnOnce(&Session) -> Result<Made>) -> Result<Made> {
        self.at(place, |s| {
            Fsys::check_state(s, place)?;
            f(s.ok_or_else(gone)?)
        })
    }
}
