//! The daemon's sessions: the registry log and the sessions it names.
//!
//! Every change to the set of sessions is an entry of the registry log
//! (`apex_core::registry`), sequenced here and streamed as `/registry`;
//! `/index` is derived from the same state. `/ctl` commands are checked as
//! a whole, against a copy of the registry's state, before any is applied,
//! so a bad line changes nothing.

pub mod files;

use crate::attach::hub::HubConfig;
use crate::error::Error;
use crate::fsys::ctl::{self, Arg, CtlError, Verb};
use crate::persist::{Store, StoreError};
use crate::session::Session;
use apex_core::registry::{self, RegistryEntry, RegistryOp};
use apex_core::{AttachmentId, MetaOp, Op, SessionUuid, TermOp};
use std::collections::BTreeMap;

pub use crate::session::Shared;

/// Every session of the daemon, and the log that made them.
pub struct Registry {
    /// The registry's replicated state.
    pub state: registry::Registry,
    log: Vec<RegistryEntry>,
    /// Each session behind a lock of its own: a request on one waits for
    /// no other session's.
    sessions: BTreeMap<u64, Shared>,
    /// Mints session identities (the daemon's randomness lives here).
    mint: Box<dyn FnMut() -> [u8; 16] + Send>,
    /// The attach protocol's deadlines for every session made from now.
    pub attach: HubConfig,
    /// Where sessions are kept, unless the daemon keeps nothing.
    store: Option<Store>,
    /// Sessions the store has but could not bring back: kept on disk and
    /// in the saved registry, their names taken, not served.
    held_back: BTreeMap<u64, registry::SessionInfo>,
    /// The seq the log in memory starts after (a restart's registry).
    base: u64,
}

/// What a restart brought back.
#[derive(Debug, Default)]
pub struct Restored {
    pub sessions: usize,
    pub entries: u64,
    pub held_back: usize,
}

/// A `/ctl` command.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Command {
    New(Option<String>),
    Del(String),
    Rename(String, String),
}

/// `/ctl`'s verbs.
const VERBS: &[Verb<Command>] = &[
    Verb { name: "new", args: &[Arg::Optional("NAME")], make: |v| Command::New(v[0].optional()) },
    Verb { name: "del", args: &[Arg::Word("NAME")], make: |v| Command::Del(v[0].word()) },
    Verb {
        name: "rename",
        args: &[Arg::Word("OLD"), Arg::Word("NEW")],
        make: |v| Command::Rename(v[0].word(), v[1].word()),
    },
];

/// Takes up a restored session's terminals from their keepers (which
/// outlive a daemon that keeps its sessions): a terminal whose keeper
/// answers runs on, its driver started with the daemon; one whose
/// program ended meanwhile gets the status its keeper left; one nobody
/// keeps (an ephemeral daemon's, a keeper gone) keeps its screen and
/// scrollback and says it ended with the daemon. What the keepers left
/// in the session's `pty` directory for terminals not running is swept.
fn take_up_terms(s: &mut Session) {
    let running: Vec<(apex_core::TermId, String)> =
        s.view().state.terms.iter().filter(|(_, t)| t.exit.is_none()).map(|(id, t)| (*id, t.title.clone())).collect();
    let keep = |id| s.persisted().map(|p| p.keeper_socket(id));
    let found: Vec<_> = running.into_iter().map(|(id, title)| (id, title, keep(id))).collect();
    let mut kept = Vec::new();
    for (id, title, socket) in found {
        let shard = apex_core::Shard::Term(id);
        let taken = socket.as_deref().map(crate::pty::proc::adopt);
        let update = match taken {
            Some(Ok(Ok((running, pipes)))) => {
                tracing::info!(term = %shard, "taken up from its keeper");
                s.take_up(id, running, pipes);
                kept.push(id);
                continue;
            }
            Some(Ok(Err(status))) => apex_core::term::TermUpdate { exit: Some(status), ..Default::default() },
            failed => {
                if let Some(Err(e)) = failed {
                    tracing::info!(term = %shard, error = %e, "no keeper: it ended with the daemon");
                }
                let title = match title.is_empty() {
                    true => "[ended with apexd]".to_string(),
                    false => format!("{title} [ended with apexd]"),
                };
                apex_core::term::TermUpdate {
                    title: Some(title),
                    exit: Some(apex_core::term::ENDED_WITH_DAEMON),
                    ..Default::default()
                }
            }
        };
        if let Err(e) = s.view_mut().append(shard, Op::Term(TermOp::Update(Box::new(update)))) {
            tracing::warn!(term = %shard, error = %e, "could not mark a terminal ended");
        }
        // Its window's tag says so (every tag is the daemon's at start).
        let _ = apex_core::make::settag_term(s.view_mut(), id);
    }
    if let Some(dir) = s.persisted().map(|p| p.dir().join("pty")) {
        sweep_keepers(&dir, &kept);
    }
}

/// Removes what keepers left in `dir` for terminals other than `kept`:
/// sockets of keepers gone, statuses read.
fn sweep_keepers(dir: &std::path::Path, kept: &[apex_core::TermId]) {
    let Ok(entries) = std::fs::read_dir(dir) else { return };
    for e in entries.flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        let id = name.split('.').next().and_then(|n| n.parse::<u64>().ok());
        if id.is_none_or(|id| !kept.contains(&apex_core::TermId(id)) || name.contains('.')) {
            let _ = std::fs::remove_file(e.path());
        }
    }
}

/// Ends the processes a restored session lists: the daemon that started
/// them is gone, and with it their handles and any exit to wait for. They
/// may still run (they have process groups of their own), but nothing
/// here follows them, and their pids may since belong to other programs,
/// which `kill` must never reach.
fn end_processes(s: &mut Session) {
    let listed: Vec<u64> = s.view().state.meta.processes.keys().copied().collect();
    for pid in listed {
        let exit = MetaOp::ProcessExit { pid, status: apex_core::term::ENDED_WITH_DAEMON };
        if let Err(e) = s.view_mut().push_meta(exit) {
            tracing::warn!(pid, error = %e, "could not mark a process ended");
        }
    }
}

/// Parses `/ctl` text: one command per line.
pub fn parse_ctl(text: &str) -> Result<Vec<Command>, CtlError> {
    ctl::parse_lines(text, VERBS, Ok)
}

impl Registry {
    pub fn new(mint: Box<dyn FnMut() -> [u8; 16] + Send>) -> Registry {
        let attach = HubConfig::default();
        Registry {
            state: registry::Registry::new(),
            log: Vec::new(),
            sessions: BTreeMap::new(),
            mint,
            attach,
            store: None,
            held_back: BTreeMap::new(),
            base: 0,
        }
    }

    /// Keeps sessions in `store` from now on, first bringing back every
    /// session it has: its snapshot and log replayed, its attachments
    /// ended (clients attach anew) and every lease back at the server. A
    /// session that cannot be brought back is said in the log and held
    /// back; the others start.
    pub fn restore(&mut self, store: Store) -> Result<Restored, StoreError> {
        let mut restored = Restored::default();
        if let Some(mut state) = store.load_registry()? {
            let mut forgotten = false;
            for (number, info) in state.sessions.clone() {
                // A session whose directory was deleted by hand is gone.
                if !store.session_dir(info.uuid.0).is_dir() {
                    tracing::warn!(session = %info.name, "its directory is gone: the session is dropped");
                    eprintln!("apexd: session {:?} dropped: its directory is gone", info.name);
                    state.sessions.remove(&number);
                    forgotten = true;
                    continue;
                }
                match store.load_session(info.uuid.0) {
                    Ok((st, persisted, r)) => {
                        // Every cut and salvage is said where the user
                        // sees it, whatever the log level.
                        for said in &r.repairs {
                            tracing::warn!(session = %info.name, "{said}");
                            eprintln!("apexd: session {:?}: {said}", info.name);
                        }
                        let mut s = Session::restore(number, st, persisted);
                        s.hub_mut().config = self.attach;
                        let attached: Vec<AttachmentId> = s
                            .view()
                            .state
                            .meta
                            .attachments
                            .keys()
                            .copied()
                            .filter(|a| *a != AttachmentId::SERVER)
                            .collect();
                        for a in attached {
                            crate::attach::lease::end(&mut s, a);
                        }
                        take_up_terms(&mut s);
                        end_processes(&mut s);
                        // A session from before sessions had plumbing.
                        if let Err(e) = crate::plumb::rules::give_starting_rules(&mut s) {
                            tracing::warn!(session = %info.name, "no starting plumbing rules: {e}");
                        }
                        if let Err(e) = s.settle_log() {
                            tracing::error!(session = %info.name, "not restored: {e}");
                            eprintln!("apexd: session {:?} not restored: {e}", info.name);
                            restored.held_back += 1;
                            state.sessions.remove(&number);
                            self.held_back.insert(number, info);
                            continue;
                        }
                        restored.sessions += 1;
                        restored.entries += r.entries;
                        self.sessions.insert(number, Shared::new(s));
                    }
                    Err(e) => {
                        tracing::error!(session = %info.name, "not restored: {e}");
                        eprintln!("apexd: session {:?} not restored: {e}", info.name);
                        restored.held_back += 1;
                        state.sessions.remove(&number);
                        self.held_back.insert(number, info);
                    }
                }
            }
            self.base = state.applied;
            self.state = state;
            if forgotten {
                store.save_registry(&self.saved(&self.state))?;
            }
            // Directories of sessions the registry does not name: a crash
            // between making or deleting a session and saving the registry.
            let known: Vec<[u8; 16]> =
                self.state.sessions.values().chain(self.held_back.values()).map(|i| i.uuid.0).collect();
            for dir in store.orphans(&known) {
                tracing::warn!(dir = %dir.display(), "removing the directory of a session the registry does not name");
                let _ = std::fs::remove_dir_all(&dir);
            }
        }
        self.store = Some(store);
        Ok(restored)
    }

    /// The registry as saved: the served sessions and the held back.
    fn saved(&self, state: &registry::Registry) -> registry::Registry {
        let mut all = state.clone();
        all.sessions.extend(self.held_back.iter().map(|(n, i)| (*n, i.clone())));
        all
    }

    /// The sessions, in number order. The registry is never locked while
    /// a session is (so the two cannot deadlock), and a session is locked
    /// after letting go of the registry (`Daemon::session`), so a busy
    /// session holds up no other; only a rename locks one under it.
    pub fn sessions(&self) -> impl Iterator<Item = &Shared> {
        self.sessions.values()
    }

    pub fn get(&self, number: u64) -> Option<Shared> {
        self.sessions.get(&number).cloned()
    }

    /// Whether session `number` exists (no handle taken).
    pub fn has(&self, number: u64) -> bool {
        self.sessions.contains_key(&number)
    }

    /// Whether session `name` is kept on disk but could not be brought
    /// back.
    pub fn is_held_back(&self, name: &str) -> bool {
        self.held_back.values().any(|i| i.name == name)
    }

    pub fn by_name(&self, name: &str) -> Option<u64> {
        self.state.by_name(name)
    }

    /// The registry entries after `seq`.
    pub fn entries_after(&self, seq: u64) -> &[RegistryEntry] {
        &self.log[(seq.saturating_sub(self.base) as usize).min(self.log.len())..]
    }

    /// Turns commands into registry ops, checking each against the state
    /// the earlier ones leave; nothing is applied.
    fn plan(&mut self, cmds: &[Command]) -> Result<Vec<RegistryOp>, Error> {
        let mut sim = self.state.clone();
        let mut ops = Vec::new();
        for c in cmds {
            let number = |name: &str, sim: &registry::Registry| {
                sim.by_name(name).ok_or_else(|| registry::RegistryError::NoSuchName(name.to_string()))
            };
            if let Command::New(Some(name)) | Command::Rename(_, name) = c {
                if self.is_held_back(name) {
                    return Err(Error::HeldBack(name.clone()));
                }
            }
            // A fresh name is none a served or held-back session has.
            let fresh =
                || (1..).map(|n: u64| n.to_string()).find(|n| sim.by_name(n).is_none() && !self.is_held_back(n));
            let fresh = fresh().expect("names are endless");
            let op = match c {
                Command::New(name) => RegistryOp::SessionNew {
                    session: sim.next_session,
                    name: name.clone().unwrap_or(fresh),
                    uuid: SessionUuid((self.mint)()),
                },
                Command::Del(name) => RegistryOp::SessionDel { session: number(name, &sim)? },
                Command::Rename(old, new) => {
                    RegistryOp::SessionRename { session: number(old, &sim)?, name: new.clone() }
                }
            };
            let entry = RegistryEntry { seq: sim.applied + 1, op };
            sim.apply(&entry)?;
            ops.push(entry.op);
        }
        Ok(ops)
    }

    /// Sequences a checked op, and makes, relabels or drops its session;
    /// with a store, the registry is saved (and a new session's log
    /// started) before anything changes here, so a failure changes
    /// nothing.
    fn append(&mut self, op: RegistryOp) -> Result<(), Error> {
        self.state.check(&op)?;
        let entry = RegistryEntry { seq: self.state.applied + 1, op };
        let mut next = self.state.clone();
        next.apply(&entry)?;
        match &entry.op {
            RegistryOp::SessionNew { session, name, uuid } => {
                let persisted = self.store.as_ref().map(|st| st.create_session(uuid.0)).transpose()?;
                let mut s = Session::start(*session, name, uuid.0, persisted)?;
                s.hub_mut().config = self.attach;
                crate::plumb::rules::give_starting_rules(&mut s)?;
                if let Err(e) = s.settle_log() {
                    self.forget_dir(uuid.0);
                    return Err(e.into());
                }
                if let Err(e) = self.save(&next) {
                    self.forget_dir(uuid.0);
                    return Err(e);
                }
                self.sessions.insert(*session, Shared::new(s));
            }
            RegistryOp::SessionDel { session } => {
                self.save(&next)?;
                if let Some(gone) = self.sessions.remove(session) {
                    // Whoever still holds it (a built-in running on it)
                    // waits for no proposal of it: their writers hear it
                    // was lost, now.
                    gone.lock().expect("session lock").hub_mut().pending.clear();
                }
                if let Some(info) = self.state.sessions.get(session) {
                    self.forget_dir(info.uuid.0);
                }
            }
            RegistryOp::SessionRename { session, name } => {
                self.save(&next)?;
                if let Some(s) = self.sessions.get(session) {
                    let mut s = s.lock().expect("session lock");
                    // The registry has no clock: the hub's last is the
                    // best there is, should the label's write be undone.
                    let now = s.hub().now();
                    s.begin_change(now);
                    s.relabel(name)?;
                    // The registry, saved, has the name: a label the
                    // session's log did not take is only said.
                    if let Err(e) = s.settle_change() {
                        tracing::warn!(session = %name, error = %e, "the session's own label was not changed");
                    }
                }
            }
        }
        self.state = next;
        tracing::info!(seq = entry.seq, op = ?entry.op, "registry");
        self.log.push(entry);
        Ok(())
    }

    /// Saves `state` as the registry, with a store.
    fn save(&self, state: &registry::Registry) -> Result<(), Error> {
        match &self.store {
            Some(store) => Ok(store.save_registry(&self.saved(state))?),
            None => Ok(()),
        }
    }

    fn forget_dir(&self, uuid: [u8; 16]) {
        if let Some(store) = &self.store {
            store.remove_session(uuid);
        }
    }

    /// Runs `/ctl` commands: all are checked before any is applied.
    pub fn run(&mut self, cmds: &[Command]) -> Result<(), Error> {
        for op in self.plan(cmds)? {
            self.append(op)?;
        }
        Ok(())
    }

    /// Creates a session; `None` picks a fresh name. Returns its number.
    pub fn create(&mut self, name: Option<&str>) -> Result<u64, Error> {
        let number = self.state.next_session;
        self.run(&[Command::New(name.map(str::to_string))])?;
        Ok(number)
    }

    /// Renames a session.
    pub fn rename(&mut self, old: &str, new: &str) -> Result<(), Error> {
        self.run(&[Command::Rename(old.to_string(), new.to_string())])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn registry() -> Registry {
        let mut n = 0u8;
        Registry::new(Box::new(move || {
            n += 1;
            [n; 16]
        }))
    }

    #[test]
    fn a_restored_terminal_keeps_its_screen_and_says_it_ended_with_the_daemon() {
        use apex_core::{Shard, TermId};
        let dir = std::env::temp_dir().join(format!("apex-registry-terms-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let open = || crate::persist::Store::open(&dir, crate::persist::Options::default()).unwrap();
        let mut r = registry();
        r.restore(open()).unwrap();
        let n = r.create(Some("main")).unwrap();
        let id = {
            let s = r.get(n).unwrap();
            let mut s = s.lock().unwrap();
            let id = TermId(s.view_mut().alloc().unwrap());
            let shard = Shard::Term(id);
            s.view_mut().create_shard(shard).unwrap();
            let create = TermOp::Create { cols: 20, rows: 2, scrollback: 10, command: "rc".into(), dir: "/".into() };
            s.view_mut().append(shard, Op::Term(create)).unwrap();
            let rows = apex_core::packed::RowChanges {
                scrolled: vec![apex_core::grid::Row::plain("% date")],
                lines: vec![(0, apex_core::grid::Row::plain("% echo hi"))],
            };
            let update =
                apex_core::term::TermUpdate { rows: apex_core::packed::Packed::pack(&rows), ..Default::default() };
            s.view_mut().append(shard, Op::Term(TermOp::Update(Box::new(update)))).unwrap();
            s.settle_log().unwrap();
            id
        };
        // The daemon ends (its store let go) and starts again.
        drop(r);
        let mut r = registry();
        let restored = r.restore(open()).unwrap();
        assert_eq!(restored.sessions, 1);
        let s = r.get(n).unwrap();
        let s = s.lock().unwrap();
        let t = &s.view().state.terms[&id];
        assert_eq!(t.scrollback_text(), "% date\n");
        assert_eq!(t.exit, Some(apex_core::term::ENDED_WITH_DAEMON));
        assert!(t.title.contains("ended with apexd"), "{:?}", t.title);
        drop(s);
        drop(r);
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// The root's `index` reads a session's line without its lock: a
    /// session held (a long proposal applying) holds up no look at the
    /// daemon; and the line is the session's as of the lock let go of.
    #[test]
    fn a_session_s_index_line_is_read_without_its_lock_and_made_when_it_is_let_go() {
        let mut r = registry();
        let n = r.create(Some("main")).unwrap();
        let shared = r.get(n).unwrap();
        let before = shared.index_line();
        assert!(before.starts_with("main "), "{before}");
        assert_eq!(before, shared.lock().unwrap().index_line(), "made with the session");
        let mut held = shared.lock().unwrap();
        held.relabel("work").unwrap();
        let (tx, rx) = std::sync::mpsc::channel();
        let reader = shared.clone();
        std::thread::spawn(move || tx.send(reader.index_line()).unwrap());
        let seen = rx.recv_timeout(std::time::Duration::from_secs(10)).expect("read while the session is held");
        assert_eq!(seen, before, "the line as of the last lock let go of");
        drop(held);
        let after = shared.index_line();
        assert!(after.starts_with("work "), "{after}");
        assert_eq!(after, shared.lock().unwrap().index_line());
    }

    #[test]
    fn ctl_is_all_or_nothing_and_logged() {
        let mut r = registry();
        r.run(&parse_ctl("new main\nnew\n").unwrap()).unwrap();
        let labels: Vec<String> = r.sessions().map(|s| s.lock().unwrap().label().to_string()).collect();
        assert_eq!(labels, ["main", "1"]);
        let before = r.entries_after(0).len();
        let bad = parse_ctl("rename main work\ndel nosuch\n").unwrap();
        let e = r.run(&bad).unwrap_err();
        assert!(matches!(&e, Error::Registry(registry::RegistryError::NoSuchName(n)) if n == "nosuch"), "{e}");
        assert!(e.to_string().contains("nosuch"), "{e}");
        assert_eq!(r.entries_after(0).len(), before);
        assert_eq!(r.by_name("main"), Some(1));
        r.run(&parse_ctl("rename main work\ndel 1\nnew 1").unwrap()).unwrap();
        assert_eq!(r.by_name("work"), Some(1));
        assert_eq!(r.by_name("1"), Some(3), "numbers are never reused");
        assert_eq!(r.get(1).unwrap().lock().unwrap().view().state.meta.label, "work");
        // Replaying the log gives the same state.
        let mut replay = registry::Registry::new();
        for e in r.entries_after(0) {
            replay.apply(e).unwrap();
        }
        assert_eq!(replay, r.state);
    }
}
