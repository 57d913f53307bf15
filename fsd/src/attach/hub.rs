//! One session's attach state, as data: the connections of `NAME/attach`
//! (what each has been sent, its resume token, its grace), the proposals
//! waiting for an outcome, the leases asked for and the tools' bounded
//! leases. What acts on it is above it: [`super::protocol`] (the frames a
//! connection writes), [`super::lease`] (leadership moves),
//! [`super::feed`] (what a connection reads) and [`crate::attach::route`] (where
//! a proposal goes). Sans I/O: time arrives as milliseconds from the
//! caller (the daemon owns the clock), and the times the hub wants to be
//! woken at are collected in `wakeups`.

use apex_core::{AttachmentId, AttachmentKind, Epoch, Proposal, Seq, Shard, State};
use apex_link::wire::{Frames, Outcome, Refusal, ServerMsg};
use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::sync::Arc;
use tokio::sync::oneshot;

/// An open fid of `NAME/attach`.
pub type ConnId = u64;

/// Times, in milliseconds of the daemon's clock.
#[derive(Clone, Copy, Debug)]
pub struct HubConfig {
    /// How long a holder has to release a requested lease.
    pub deadline_ms: u64,
    /// How long a dropped connection's attachment waits for a resume.
    pub grace_ms: u64,
}

impl Default for HubConfig {
    fn default() -> HubConfig {
        HubConfig { deadline_ms: 3_000, grace_ms: 10_000 }
    }
}

/// Where the outcome of a proposal goes.
pub type Reply = oneshot::Sender<Outcome>;

/// What a write did: finished, or waits for a routed proposal's outcome.
#[derive(Debug)]
pub enum Written {
    Done,
    /// Proposal `id`'s outcome will come on the receiver.
    Wait(u64, oneshot::Receiver<Outcome>),
}

#[derive(Debug)]
pub(crate) struct Conn {
    pub(crate) attachment: Option<AttachmentId>,
    pub(crate) kind: AttachmentKind,
    pub(crate) token: u64,
    pub(crate) frames: Frames,
    /// Bytes framed for reading, and how much of them was read.
    pub(crate) out: Vec<u8>,
    pub(crate) out_read: usize,
    pub(crate) control: VecDeque<ServerMsg>,
    /// Per shard, the last seq sent (or known to the client).
    pub(crate) sent: BTreeMap<Shard, Seq>,
    /// Welcomes sent: an append made at this generation comes from a
    /// replica that has everything sent so far.
    pub(crate) generation: u64,
    /// Set when the fid went with its connection: the end of the grace.
    pub(crate) grace_until: Option<u64>,
    /// Its connection is gone (hung up, or never there: an attachment
    /// restored with its session), not only its stream broken by a fault
    /// its client resumes from at once: what it holds is taken back as
    /// soon as another asks for it ([`super::lease::away`]).
    pub(crate) hung_up: bool,
    /// A lease of this attachment was reclaimed during the grace.
    pub(crate) lost_lease: bool,
    /// It read since the last compaction point: one that did not, and is
    /// behind, is sent a Welcome there rather than hold entries back.
    pub(crate) read_lately: bool,
    /// Its reads waiting for something to read ([`super::feed::Waiting`]):
    /// a client blocked in a read is reading, however long the writes
    /// that wake it hold the lock, and is never taken to have stopped.
    pub(crate) waiting: Arc<std::sync::atomic::AtomicUsize>,
    /// The states of the Welcomes queued in `control`, in order.
    pub(crate) welcomes: VecDeque<Box<State>>,
    /// A Welcome framed at `out[at]` whose snapshot is encoded off the
    /// lock when it is read (`read_deferred`, `welcomed`); what was framed
    /// after it waits in `out` past that point.
    pub(crate) hole: Option<Hole>,
    /// A Welcome read in parts has had its last part put in place since
    /// this was last taken (`feed::take_parts_read`): the memory its parts
    /// held, freed as they were read, can go back to the system.
    pub(crate) parts_read: bool,
    /// A read holds bytes it took and has not answered with yet (it waits
    /// for the log to settle): the next read waits for it, so bytes go
    /// out in the order they were taken, even when they are put back.
    pub(crate) taken: Arc<Taken>,
}

/// Whether a connection's read holds bytes it took ([`Conn::taken`]).
#[derive(Debug, Default)]
pub struct Taken(std::sync::atomic::AtomicU8);

impl Taken {
    const FREE: u8 = 0;
    const HELD: u8 = 1;
    /// Held, and another read found it so and waits.
    const WAITED_FOR: u8 = 2;
    /// The read that held bytes failed without answering with them or
    /// putting them back: the stream has a gap, for good.
    const BROKEN: u8 = 3;

    pub(crate) fn hold(&self) {
        self.0.store(Taken::HELD, std::sync::atomic::Ordering::Release);
    }

    /// Whether a read holds bytes; if so, notes that another waits.
    pub(crate) fn is_held(&self) -> bool {
        use std::sync::atomic::Ordering::AcqRel;
        let _ = self.0.compare_exchange(Taken::HELD, Taken::WAITED_FOR, AcqRel, std::sync::atomic::Ordering::Acquire);
        self.0.load(std::sync::atomic::Ordering::Acquire) != Taken::FREE
    }

    /// The bytes are answered with or put back: whether a read waits.
    pub fn release(&self) -> bool {
        self.0.swap(Taken::FREE, std::sync::atomic::Ordering::AcqRel) == Taken::WAITED_FOR
    }

    /// The bytes held are lost (their read panicked): every later read of
    /// the connection fails (wake its readers after).
    pub fn break_off(&self) {
        self.0.store(Taken::BROKEN, std::sync::atomic::Ordering::Release);
    }

    pub(crate) fn is_broken(&self) -> bool {
        self.0.load(std::sync::atomic::Ordering::Acquire) == Taken::BROKEN
    }
}

#[derive(Debug)]
pub(crate) struct Pending {
    pub(crate) request: String,
    pub(crate) proposal: Proposal,
    /// The attachment it was sent to, if it went to one, and the epoch of
    /// that attachment's lease then.
    pub(crate) sent_to: Option<AttachmentId>,
    /// The holder it was last sent to, kept when it is taken back: if it
    /// goes elsewhere, that holder may have applied it (`taken_from`).
    pub(crate) last_sent_to: Option<AttachmentId>,
    pub(crate) sent_epoch: Epoch,
    pub(crate) reply: Option<Reply>,
    /// The proposing attachment and its id, for `Answer`.
    pub(crate) from: Option<(AttachmentId, u64)>,
    /// When the holder of its shard must have answered it by; past it,
    /// the holder is taken to be stuck: its lease is reclaimed and the
    /// view node applies the proposal.
    pub(crate) deadline: u64,
    /// Its writer flushed it: it is applied only by the client it was
    /// sent to already, if that one answers.
    pub(crate) flushed: bool,
    /// The holder it was sent to hung up with this many ms of the
    /// deadline left: sent to it again when it resumes (at the same
    /// epoch), it has those, not a whole deadline, so a holder that keeps
    /// reconnecting without answering still loses the lease, and one that
    /// was away a while is not held to time that ran while it was.
    pub(crate) paused: Option<(AttachmentId, u64)>,
}

impl Pending {
    /// Its holder `holder` stops answering for now (hung up, or its
    /// entries refused): the deadline's clock stops, at what is left.
    pub(crate) fn pause(&mut self, holder: AttachmentId, now: u64) {
        self.paused = Some((holder, self.deadline.saturating_sub(now)));
    }
}

/// A lease asked for and not yet granted.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Ask {
    pub(crate) by: AttachmentId,
    pub(crate) deadline: u64,
    /// For a tool's bounded lease: how long it may keep it.
    pub(crate) ttl_ms: Option<u64>,
    /// For a bounded lease: who has the shard when it ends, if not the
    /// one leading it when it is granted (a UI asked meanwhile).
    pub(crate) return_to: Option<AttachmentId>,
}

/// A tool's bounded lease.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Bounded {
    pub(crate) holder: AttachmentId,
    pub(crate) expires: u64,
    /// Who led the shard before, to have it back.
    pub(crate) return_to: AttachmentId,
}

/// One session's attach state.
#[derive(Debug, Default)]
pub struct Hub {
    pub config: HubConfig,
    pub(crate) conns: BTreeMap<ConnId, Conn>,
    pub(crate) next_conn: ConnId,
    pub(crate) pending: BTreeMap<u64, Pending>,
    /// Proposals taken from the holder they were sent to (its lease
    /// reclaimed, or the writer flushed them) and acted on elsewhere: if
    /// that holder applied one and answers late, the shards it made for
    /// it are discarded (`route::discard_made`). Cleared when it answers
    /// or its attachment ends.
    pub(crate) taken_from: std::collections::BTreeSet<(u64, AttachmentId)>,
    pub(crate) next_pending: u64,
    pub(crate) asks: BTreeMap<Shard, Ask>,
    pub(crate) bounded: BTreeMap<Shard, Bounded>,
    /// The UI that asked for every shard last (at its Hello or with
    /// `Lead`): shards other UIs make from then on are asked for on its
    /// behalf, so a UI that attaches while another is making windows
    /// ends up leading those too.
    pub(crate) leading_ui: Option<AttachmentId>,
    /// Attachments made with less than a full token (`read`, `edit`):
    /// their entries reach event readers as writes (`E`), never as typing
    /// (`K`, `M`), which win would send to its shell.
    pub(crate) limited: std::collections::BTreeSet<AttachmentId>,
    /// Open `entries` readers per shard: such a shard is not compacted.
    pub(crate) entry_readers: BTreeMap<Shard, usize>,
    /// Times the daemon should call `tick` at.
    pub wakeups: Vec<u64>,
    /// The session's one timer, armed for the earliest of them.
    pub timer: Timer,
    /// Resume tokens come from here (the daemon seeds it randomly).
    pub token_seed: u64,
    /// The daemon's clock at the last call in (every entry point takes
    /// it): when a proposal sent to a holder is due.
    pub(crate) now: u64,
}

/// A writer's outcome held until the change that decided it settles.
pub(crate) enum Settling {
    /// Told the outcome, or that the change was undone.
    Decided(Reply),
    /// A routed proposal its holder answered: told the outcome, or, if
    /// the change is undone, pending again.
    Answered(u64, Box<Pending>),
}

impl Settling {
    /// The change is in the log: the writer hears `outcome`.
    pub(crate) fn settled(self, outcome: Outcome) {
        let reply = match self {
            Settling::Decided(reply) => Some(reply),
            Settling::Answered(_, mut p) => p.reply.take(),
        };
        if let Some(reply) = reply {
            let _ = reply.send(outcome);
        }
    }

    /// The change was undone (`why`): the writer hears so, or its
    /// proposal, answered by a change that was undone, waits again.
    pub(crate) fn undone(self, hub: &mut Hub, why: &str) {
        match self {
            Settling::Answered(id, p) => {
                hub.pending.insert(id, *p);
            }
            Settling::Decided(reply) => {
                let _ = reply.send(Err(Refusal::Said(why.to_string())));
            }
        }
    }
}

/// The hub where a change began, at `now`: the next proposal id, how many
/// control messages each connection had queued (a change adds them, or
/// edits the last; reads, which take them, are changes of their own),
/// and the leadership moves under way (few: copied).
#[derive(Debug, Default)]
pub struct ChangeMarks {
    pub(crate) now: u64,
    pub(crate) pending: u64,
    pub(crate) control: BTreeMap<ConnId, usize>,
    pub(crate) asks: BTreeMap<Shard, Ask>,
    pub(crate) bounded: BTreeMap<Shard, Bounded>,
    pub(crate) leading_ui: Option<AttachmentId>,
    /// The connections whose attachments had lost a lease in their grace
    /// ([`Conn::lost_lease`]): a reclaim the change made is undone with it.
    pub(crate) lost_lease: BTreeSet<ConnId>,
}

/// A session's one timer: the time its task sleeps until (`u64::MAX`
/// when nothing is due). Every deadline arms it, an earlier one first;
/// each tick arms it for the next deadline left (`protocol::tick`), so a
/// session has one sleeping task however many deadlines it has set.
#[derive(Debug, Default)]
pub struct Timer(Option<tokio::sync::watch::Sender<u64>>);

impl Timer {
    /// Arms the timer for `at`, unless it is armed for sooner: the
    /// receiver for a new task to run it, when no task runs it.
    pub fn arm(&mut self, at: u64) -> Option<tokio::sync::watch::Receiver<u64>> {
        if let Some(armed) = self.0.as_ref().filter(|tx| !tx.is_closed()) {
            armed.send_if_modified(|when| {
                let sooner = at < *when;
                if sooner {
                    *when = at;
                }
                sooner
            });
            return None;
        }
        let (tx, rx) = tokio::sync::watch::channel(at);
        self.0 = Some(tx);
        Some(rx)
    }

    /// Its time came: nothing is due until it is armed again.
    pub fn fired(&mut self) {
        if let Some(armed) = &self.0 {
            armed.send_replace(u64::MAX);
        }
    }
}

impl Hub {
    /// Arms the session's timer for the earliest deadline set since the
    /// last call: the receiver for a new task to run it, if one is due.
    pub fn arm_timer(&mut self) -> Option<tokio::sync::watch::Receiver<u64>> {
        let earliest = std::mem::take(&mut self.wakeups).into_iter().min()?;
        self.timer.arm(earliest)
    }

    /// The daemon's clock at the last call in.
    pub fn now(&self) -> u64 {
        self.now
    }

    /// Where a change begins: what [`crate::attach::protocol::undone`]
    /// takes back if the change is undone.
    pub fn marks(&self, now: u64) -> ChangeMarks {
        ChangeMarks {
            now,
            pending: self.next_pending,
            control: self.conns.iter().map(|(id, c)| (*id, c.control.len())).collect(),
            asks: self.asks.clone(),
            bounded: self.bounded.clone(),
            leading_ui: self.leading_ui,
            lost_lease: self.conns.iter().filter(|(_, c)| c.lost_lease).map(|(id, _)| *id).collect(),
        }
    }

    pub fn new(config: HubConfig, token_seed: u64) -> Hub {
        Hub { config, token_seed, next_conn: 1, next_pending: 1, ..Hub::default() }
    }

    /// A reader of `shard`'s entries or events opened: the shard is not
    /// compacted while one is open.
    pub fn start_reading(&mut self, shard: Shard) {
        *self.entry_readers.entry(shard).or_insert(0) += 1;
    }

    /// A reader of `shard` went; a shard with none is forgotten here.
    pub fn stop_reading(&mut self, shard: Shard) {
        if let Some(k) = self.entry_readers.get_mut(&shard) {
            *k = k.saturating_sub(1);
            if *k == 0 {
                self.entry_readers.remove(&shard);
            }
        }
    }

    /// How many connections, pending proposals, asks, bounded leases,
    /// read shards and messages queued unread the hub holds: bounded by
    /// what is live, whatever went before (for tests).
    pub fn sizes(&self) -> [usize; 6] {
        let unread = self.conns.values().map(|c| c.control.len()).sum();
        [
            self.conns.len(),
            self.pending.len() + self.taken_from.len(),
            self.asks.len(),
            self.bounded.len(),
            self.entry_readers.len(),
            unread,
        ]
    }

    /// Reads of every connection waiting for something to read (for tests).
    pub fn waiting_reads(&self) -> usize {
        self.conns.values().map(|c| c.waiting.load(std::sync::atomic::Ordering::Acquire)).sum()
    }

    pub(crate) fn mint(&mut self) -> u64 {
        // splitmix64: distinct tokens from one random seed.
        self.token_seed = self.token_seed.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.token_seed;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// The attachments with a connection (live or in its grace).
    pub fn attachments(&self) -> impl Iterator<Item = (AttachmentId, AttachmentKind, bool)> + '_ {
        self.conns.values().filter_map(|c| c.attachment.map(|a| (a, c.kind, c.grace_until.is_none())))
    }

    pub(crate) fn conn_of(&self, a: AttachmentId) -> Option<ConnId> {
        self.conns.iter().find(|(_, c)| c.attachment == Some(a)).map(|(id, _)| *id)
    }

    pub(crate) fn live_conn_of(&self, a: AttachmentId) -> Option<ConnId> {
        self.conn_of(a).filter(|id| self.conns[id].grace_until.is_none())
    }

    /// A new connection (an open of `attach`).
    pub fn open(&mut self) -> ConnId {
        let id = self.next_conn;
        self.next_conn += 1;
        self.conns.insert(
            id,
            Conn {
                attachment: None,
                kind: AttachmentKind::Tool,
                token: 0,
                frames: Frames::from_a_client(),
                out: Vec::new(),
                out_read: 0,
                control: VecDeque::new(),
                sent: BTreeMap::new(),
                generation: 0,
                grace_until: None,
                hung_up: false,
                lost_lease: false,
                read_lately: false,
                waiting: Arc::default(),
                welcomes: VecDeque::new(),
                hole: None,
                parts_read: false,
                taken: Arc::default(),
            },
        );
        id
    }
}

/// A Welcome framed at `out[at]` whose snapshot is encoded when read.
#[derive(Debug)]
pub(crate) struct Hole {
    pub(crate) at: usize,
    pub(crate) filling: Filling,
}

/// Where a hole's bytes are.
#[derive(Debug)]
pub(crate) enum Filling {
    /// Not read up to yet: encoded when it is.
    Job(WelcomeJob),
    /// Being encoded whole elsewhere ([`super::feed::welcomed`] puts its
    /// frames in place).
    Whole,
    /// Being encoded on a thread: its parts, in order, as they are made,
    /// then `None`: the hole is filled.
    Parts(std::sync::mpsc::Receiver<Option<Vec<u8>>>),
    /// Its encoder stopped before the end: what was read of it cannot be
    /// taken back, so every read of the connection fails from here.
    Broken,
}

/// A Welcome whose snapshot is yet to be encoded.
#[derive(Debug)]
pub struct WelcomeJob {
    pub(crate) attachment: AttachmentId,
    pub(crate) token: u64,
    pub(crate) state: Box<State>,
}

impl WelcomeJob {
    /// The Welcome's frames: the snapshot encoded once, straight into
    /// them.
    pub fn frame(self) -> Vec<u8> {
        apex_link::wire::frame_welcome(self.attachment, self.token, &self.state)
    }

    /// The Welcome's frames handed to `part` in parts of `part_size`
    /// bytes as they are encoded, so they can be read meanwhile; false if
    /// `part` wanted no more (the reader went).
    pub fn frame_in_parts(self, part_size: usize, part: impl FnMut(Vec<u8>) -> bool) -> bool {
        apex_link::wire::frame_welcome_in_parts(self.attachment, self.token, &self.state, part_size, part)
    }

    /// Whether encoding it is worth a thread of its own.
    pub fn is_big(&self) -> bool {
        self.state.buffers.values().map(|b| b.text.len_bytes()).sum::<usize>() > 1 << 20
    }
}
