//! One session as the daemon holds it: the authoritative log under the
//! view node, which follows every shard and leads the leasable ones while
//! no UI does, plus what the daemon keeps per session for tools (recent
//! proposal outcomes, each buffer's addr).
//!
//! A new session is laid out as acme starts (`make::init_session`), so
//! tools can work in a session nobody is looking at.
//!
//! Its fields are its own: others look through accessors and change it
//! through [`crate::daemon::Daemon::change`]. Architecture invariant:
//! only the orchestration (`attach`, its `route`, `registry`, `host`'s
//! process records, `term::drive`, `plumb::rules`) takes [`Session::view_mut`], the one
//! way to append to its log; the file layer proposes (tidy's
//! `files_never_append`).

pub mod ctl;
pub mod files;
pub mod proposals;
mod rollback;
pub mod shared;

pub use shared::{Locked, Shared};

use crate::acme::Acme;
use crate::attach::hub::{Hub, HubConfig};
use crate::error::Error;
use crate::persist::Persisted;
use apex_core::addr::Range;
use apex_core::propose;
use apex_core::regx::Haystack;
use apex_core::{make, AttachmentId, BufferId, Log, MetaOp, Node, Proposal, Reject, SessionUuid, State};
use apex_link::wire::{self, Refusal};
use std::collections::{BTreeMap, VecDeque};

/// Bytes of entries a session takes in before those no connection or
/// `entries` reader needs leave memory (a persisted session's log has
/// them in its file; a snapshot lets them go too). Small, so a bulk
/// write's texts, which its entries hold, leave memory that the next
/// texts reuse, rather than have every write fault in fresh pages for its
/// entry beside its rope; and a session of many files opened holds their
/// texts once, not once more until its snapshot.
pub const LOG_KEPT_BYTES: u64 = 8 << 20;

/// Counts the bytes of the entries an ephemeral session's log stores (as
/// encoded: the size is counted, nothing is copied).
struct Weigh(std::sync::Arc<std::sync::atomic::AtomicU64>);

impl apex_core::log::Sink for Weigh {
    fn stored(&mut self, _: apex_core::Shard, entry: &apex_core::Entry) {
        self.0.fetch_add(encoded_size(entry), std::sync::atomic::Ordering::Relaxed);
    }
}

/// An entry's size as encoded, counted without encoding it anywhere.
fn encoded_size(entry: &apex_core::Entry) -> u64 {
    postcard::serialize_with_flavor(entry, postcard::ser_flavors::Size::default()).unwrap_or(0) as u64
}

/// Proposal outcomes `proposals` keeps for reading.
pub const OUTCOMES_KEPT: usize = 64;

/// What became of one proposal.
#[derive(Clone, Debug)]
pub struct Outcome {
    pub id: u64,
    /// The proposal's first line, as written.
    pub request: String,
    pub verdict: Verdict,
}

/// How a proposal ended, as `proposals` shows it.
#[derive(Clone, Debug)]
pub enum Verdict {
    /// The entries it made, `shard:seq` each.
    Made(String),
    /// Why it was refused.
    Refused(String),
}

/// A buffer's address for tools (`buffers/N/addr`, `data`), as acme keeps
/// one per window: shared by every fid, and remembering the buffer version
/// it was set at so that data writes propose at that version.
#[derive(Clone, Debug, Default)]
pub struct Addr {
    pub range: Range,
    pub version: u64,
    /// Open fids of the addr file; the first open resets the address.
    pub opened: u32,
    /// acme's `limit=addr`, at the version it was set (cleared by the
    /// first open of addr).
    pub limit: Option<(Range, u64)>,
}

/// One buffer's text made ready for searches, kept while the buffer stays
/// at that version (making it per search would copy the whole text each
/// time).
#[derive(Debug)]
pub struct FlatText {
    pub buffer: Option<(BufferId, u64)>,
    /// Shared with a search running off the lock.
    pub text: std::sync::Arc<Haystack>,
}

impl Default for FlatText {
    fn default() -> FlatText {
        FlatText { buffer: None, text: std::sync::Arc::new(Haystack::of_str("")) }
    }
}

/// A session: its view node (SERVER over the authority log).
pub struct Session {
    /// The registry's number for it: never reused in the daemon's life.
    number: u64,
    view: Node,
    outcomes: VecDeque<Outcome>,
    next_proposal: u64,
    addrs: BTreeMap<BufferId, Addr>,
    /// The attach protocol's connections and leadership moves.
    hub: Hub,
    /// The acme tree's state: its log and per-window counts.
    acme: Acme,
    flat: FlatText,
    /// The last regexp an address used, which `//` reuses: one for the
    /// session, as acme keeps one for the whole program (`rxcompile`).
    last_regex: Option<String>,
    /// Its write-ahead log, unless the daemon keeps nothing.
    persisted: Option<Persisted>,
    /// Without one, the bytes of entries stored since its log was last
    /// compacted.
    taken_in: Option<std::sync::Arc<std::sync::atomic::AtomicU64>>,
    /// Its running terminals (a restored or exited one has none): dropping
    /// one ends its program.
    terms: BTreeMap<apex_core::TermId, std::sync::Arc<crate::pty::proc::Running>>,
    /// Terminals a restore took up from their keepers, whose drivers the
    /// daemon has yet to start (`term::drive::start_taken_up`).
    taken_up: Vec<(apex_core::TermId, crate::pty::proc::Pipes)>,
    /// Changes settled so far: read under the lock with the state, it
    /// names the state exactly (a snapshot made of it is shared by it).
    changes: u64,
    /// Outcomes for writers waiting on routed proposals, told once the
    /// change that decided them is in the log (or that it was undone).
    replies: Vec<(crate::attach::hub::Settling, wire::Outcome)>,
    /// The hub where the change under way began, for undoing it.
    began: crate::attach::hub::ChangeMarks,
    /// Its plumber's readers and held messages, and its rules as read.
    plumber: crate::plumb::ports::Plumber,
}

impl Session {
    /// The session's view node: its state and authority log. Only the
    /// orchestration appends to it ([`Session::view_mut`]).
    pub fn view(&self) -> &Node {
        &self.view
    }

    /// The view node to change: for what sequences entries (`route`,
    /// `attach`, `registry`, `host`'s process records). The file layer
    /// never takes it (tidy checks): its changes are proposals.
    pub(crate) fn view_mut(&mut self) -> &mut Node {
        &mut self.view
    }

    /// The registry's number for it.
    pub fn number(&self) -> u64 {
        self.number
    }

    pub fn hub(&self) -> &Hub {
        &self.hub
    }

    pub fn hub_mut(&mut self) -> &mut Hub {
        &mut self.hub
    }

    /// The hub to change beside the view to read: the attach protocol's
    /// connections follow the log they send.
    pub fn hub_and_view(&mut self) -> (&mut Hub, &Node) {
        (&mut self.hub, &self.view)
    }

    /// acme's tree to change beside the view to read.
    pub fn acme_and_view(&mut self) -> (&mut Acme, &Node) {
        (&mut self.acme, &self.view)
    }

    pub fn acme(&self) -> &Acme {
        &self.acme
    }

    pub fn acme_mut(&mut self) -> &mut Acme {
        &mut self.acme
    }

    /// Its plumber.
    pub fn plumber(&self) -> &crate::plumb::ports::Plumber {
        &self.plumber
    }

    pub fn plumber_mut(&mut self) -> &mut crate::plumb::ports::Plumber {
        &mut self.plumber
    }

    /// The `addr` files' state, by body.
    pub fn addrs(&self) -> &BTreeMap<BufferId, Addr> {
        &self.addrs
    }

    pub fn addrs_mut(&mut self) -> &mut BTreeMap<BufferId, Addr> {
        &mut self.addrs
    }

    /// The body last flattened for a search, kept for the next.
    pub fn flat(&self) -> &FlatText {
        &self.flat
    }

    pub fn set_flat(&mut self, flat: FlatText) {
        self.flat = flat;
    }

    /// The last regexp an address used (`//` reuses it).
    pub fn last_regex(&self) -> Option<&str> {
        self.last_regex.as_deref()
    }

    pub fn set_last_regex(&mut self, re: Option<String>) {
        self.last_regex = re;
    }

    /// Its write-ahead log, unless the daemon keeps nothing.
    pub fn persisted(&self) -> Option<&Persisted> {
        self.persisted.as_ref()
    }

    /// Its running terminals.
    pub fn terms(&self) -> &BTreeMap<apex_core::TermId, std::sync::Arc<crate::pty::proc::Running>> {
        &self.terms
    }

    pub fn terms_mut(&mut self) -> &mut BTreeMap<apex_core::TermId, std::sync::Arc<crate::pty::proc::Running>> {
        &mut self.terms
    }

    /// Keeps a terminal taken up from its keeper until its driver starts.
    pub fn take_up(
        &mut self,
        id: apex_core::TermId,
        running: crate::pty::proc::Running,
        pipes: crate::pty::proc::Pipes,
    ) {
        self.terms.insert(id, std::sync::Arc::new(running));
        self.taken_up.push((id, pipes));
    }

    /// The terminals taken up whose drivers are to start.
    pub fn drain_taken_up(&mut self) -> Vec<(apex_core::TermId, crate::pty::proc::Pipes)> {
        std::mem::take(&mut self.taken_up)
    }

    /// A fresh session labelled `label` with identity `uuid`.
    pub fn new(number: u64, label: &str, uuid: [u8; 16]) -> Result<Session, Reject> {
        Session::start(number, label, uuid, None)
    }

    /// A fresh session whose entries go to `persisted`'s log, if given,
    /// from the first.
    pub fn start(number: u64, label: &str, uuid: [u8; 16], persisted: Option<Persisted>) -> Result<Session, Reject> {
        let mut view = Node::server();
        let taken_in = match &persisted {
            Some(p) => {
                view.log.set_sink(p.sink());
                None
            }
            None => {
                let count = std::sync::Arc::new(std::sync::atomic::AtomicU64::new(0));
                view.log.set_sink(Box::new(Weigh(count.clone())));
                Some(count)
            }
        };
        view.push_meta(MetaOp::Identity { uuid: SessionUuid(uuid) })?;
        view.push_meta(MetaOp::Label { label: label.to_string() })?;
        make::init_session(&mut view)?;
        let mut s = Session::around(number, view, uuid, persisted);
        s.taken_in = taken_in;
        Ok(s)
    }

    /// A session brought back from `state` (its log's snapshot and
    /// replay), writing on to `persisted`. Its attachments are still in
    /// the state: the caller ends them.
    pub fn restore(number: u64, state: State, persisted: Persisted) -> Session {
        let log = Log::authority_from(&state);
        let mut view = Node::new(AttachmentId::SERVER, state, log);
        view.log.set_sink(persisted.sink());
        let uuid = view.state.meta.uuid.map_or(persisted.uuid, |u| u.0);
        Session::around(number, view, uuid, Some(persisted))
    }

    fn around(number: u64, view: Node, uuid: [u8; 16], persisted: Option<Persisted>) -> Session {
        // The uuid is random: its bits seed the resume tokens.
        let seed = u64::from_le_bytes(uuid[..8].try_into().expect("8 bytes"));
        Session {
            number,
            view,
            outcomes: VecDeque::new(),
            next_proposal: 1,
            addrs: BTreeMap::new(),
            hub: Hub::new(HubConfig::default(), seed),
            acme: Acme::default(),
            flat: FlatText::default(),
            last_regex: None,
            persisted,
            taken_in: None,
            terms: BTreeMap::new(),
            taken_up: Vec::new(),
            changes: 0,
            replies: Vec::new(),
            began: Default::default(),
            plumber: Default::default(),
        }
    }

    /// Whether a session kept nowhere has stored `LOG_KEPT_BYTES`
    /// of entries since the last time this said so.
    pub fn ephemeral_log_due(&self) -> bool {
        use std::sync::atomic::Ordering;
        self.taken_in.as_ref().is_some_and(|n| {
            n.load(Ordering::Relaxed) >= LOG_KEPT_BYTES && {
                n.store(0, Ordering::Relaxed);
                true
            }
        })
    }

    /// The bytes of entries its log holds now, as encoded (for tests: what
    /// an ephemeral session keeps does not grow with what was written).
    pub fn log_bytes(&self) -> u64 {
        self.view
            .log
            .shards()
            .map(|(shard, log)| {
                self.view.log.entries_after(*shard, log.base).map_or(0, |es| es.map(encoded_size).sum::<u64>())
            })
            .sum()
    }

    /// Marks where a change begins, at `now` on the daemon's clock, so
    /// that it can be undone.
    pub fn begin_change(&mut self, now: u64) {
        self.began = self.hub.marks(now);
    }

    /// What follows every change: acme's tree follows the state, and what
    /// the change stored goes to the log's file before the session's lock
    /// is let go, so no one sees an entry that is not in the file. A
    /// change the file did not take is undone ([`Session::roll_back`]):
    /// the error says so.
    pub fn settle_change(&mut self) -> Result<(), crate::persist::durable::LogError> {
        let settled = self.settle_log();
        self.changes += 1;
        // A change the file did not take is undone; one a stopped log did
        // not frame stays, unacknowledged, as the daemon's last state.
        if let Err(e @ crate::persist::durable::LogError::Failed(_)) = &settled {
            self.roll_back(e);
        }
        // After the log: acme's tree never follows an undone entry.
        self.acme.sync(&self.view);
        // The text kept flat for the next address search is of no use
        // once its buffer changed or went: let go now, not held (a whole
        // text's worth) until another search replaces it.
        if let Some((b, version)) = self.flat.buffer {
            if self.view.state.buffer(b).map_or(true, |buf| buf.version != version) {
                let stale = std::mem::take(&mut self.flat);
                // Unmapping a big text takes milliseconds (7-10 for 100
                // MB): done on a thread of its own, not under the lock
                // (where no thread is to be had, here after all).
                if stale.text.len() >= 1 << 20 {
                    let _ = std::thread::Builder::new().name("let-go".into()).spawn(move || drop(stale));
                }
            }
        }
        settled
    }

    /// Changes settled so far (see [`Session::settle_change`]).
    pub fn changes(&self) -> u64 {
        self.changes
    }

    /// Writes what was stored since the last time, then tells the writers
    /// whose proposals it decided; if the file did not take it, they hear
    /// that instead (or a proposal a holder answered waits again), and the
    /// caller undoes the change.
    pub fn settle_log(&mut self) -> Result<(), crate::persist::durable::LogError> {
        let flushed = self.persisted.as_ref().map_or(Ok(()), |p| p.flush());
        for (waiting, outcome) in std::mem::take(&mut self.replies) {
            match &flushed {
                Ok(()) => waiting.settled(outcome),
                Err(e @ crate::persist::durable::LogError::Failed(_)) => waiting.undone(&mut self.hub, &e.to_string()),
                // Not in the file, nor undone: the writer hears so.
                Err(e) => waiting.settled(Err(Refusal::Said(e.to_string()))),
            }
        }
        flushed
    }

    /// Tells a writer its routed proposal's outcome once the change that
    /// decided it is in the log (`settle_log`).
    pub(crate) fn reply_when_settled(&mut self, waiting: crate::attach::hub::Settling, outcome: wire::Outcome) {
        self.replies.push((waiting, outcome));
    }

    pub fn label(&self) -> &str {
        &self.view.state.meta.label
    }

    pub fn uuid(&self) -> String {
        self.view.state.meta.uuid.map(|u| u.to_string()).unwrap_or_default()
    }

    /// Renames the session (a new `Label` entry in the metalog).
    pub fn relabel(&mut self, label: &str) -> Result<(), Reject> {
        self.view.push_meta(MetaOp::Label { label: label.to_string() }).map(|_| ())
    }

    /// The metalog's last seq: the session's `index` line changes only
    /// with it.
    pub fn meta_seq(&self) -> u64 {
        self.view.state.applied(apex_core::Shard::Meta)
    }

    /// Its `index` line: name, uuid, attachments, shards.
    pub fn index_line(&self) -> String {
        let m = &self.view.state.meta;
        format!("{} {} {} {}\n", self.label(), self.uuid(), m.attachments.len(), m.shards().count())
    }

    /// Applies a proposal on the view node (for a shard the server leads)
    /// and records its outcome under `request`. Tools' proposals come
    /// through `route::submit`, which routes them to the holder.
    pub fn propose(&mut self, request: &str, p: &Proposal) -> wire::Outcome {
        let result = propose::apply(&mut self.view, p).map_err(Refusal::from);
        self.note_outcome(request, &result);
        result
    }

    /// [`Session::propose`], taking the proposal (its text is not copied).
    pub fn propose_owned(&mut self, request: &str, p: Proposal) -> wire::Outcome {
        let result = propose::apply_owned(&mut self.view, p).map_err(Refusal::from);
        self.note_outcome(request, &result);
        result
    }

    /// Records the outcome of a proposal under `request`.
    pub fn note_outcome(&mut self, request: &str, result: &wire::Outcome) {
        let verdict = match result {
            Ok(a) => Verdict::Made(a.entries.iter().map(|r| r.to_string()).collect::<Vec<_>>().join(" ")),
            Err(e) => Verdict::Refused(e.to_string()),
        };
        self.record(request, verdict);
    }

    /// Records a proposal refused before it reached the leader (it did
    /// not parse); returns the reason for the caller's Rerror.
    pub fn refuse(&mut self, request: &str, why: impl Into<Error>) -> Error {
        let why = why.into();
        self.record(request, Verdict::Refused(why.to_string()));
        why
    }

    fn record(&mut self, request: &str, verdict: Verdict) {
        if let Verdict::Refused(why) = &verdict {
            tracing::info!(session = %self.label(), request, why, "proposal refused");
        }
        let id = self.next_proposal;
        self.next_proposal += 1;
        self.outcomes.push_back(Outcome { id, request: request.to_string(), verdict });
        while self.outcomes.len() > OUTCOMES_KEPT {
            self.outcomes.pop_front();
        }
    }

    /// The recent outcomes, oldest first.
    pub fn outcomes(&self) -> impl Iterator<Item = &Outcome> {
        self.outcomes.iter()
    }
}
