//! The daemon's side of the attach protocol, per session: connections,
//! their cursors into the log, leadership moves, routed proposals.
//!
//! Sans I/O: the tree hands it the bytes of each Twrite and asks it for
//! bytes to read; time arrives as milliseconds from the caller (the daemon
//! owns the clock), and the times it wants to be woken at are collected in
//! `wakeups`. Everything here runs under the registry lock.
//!
//! - A connection is an open fid of `NAME/attach`. Its first frame is
//!   Hello; the daemon answers Welcome with a snapshot and from then on
//!   sends every shard's new entries (the metalog first), except the
//!   connection's own appends, which its replica has (known by the
//!   Welcome generation each append carries).
//! - Appends are fenced by the authority log and applied whole or not at
//!   all; the leader hears `Acked`.
//! - A new UI asks for every leasable shard: free ones are granted at
//!   once, held ones get `LeaseRequest`; the holder releases after its
//!   last entry and the grant follows, or at the deadline the server
//!   reclaims and grants.
//! - A clunk ends the attachment (Detach, its leases reclaimed); a hang-up
//!   starts a grace period in which `Hello { resume }` continues it.
//! - Proposals go to the holder of the shard they touch, or are applied by
//!   the view node when the server holds it; their writers wait for the
//!   outcome, and pending proposals follow the lease when it moves.

use crate::session::Session;
use apex_core::{AttachmentId, AttachmentKind, Epoch, MetaOp, Proposal, Seq, Shard, State};
use apex_link::wire::{ClientMsg, Frames, Outcome, Refusal, Resume, ServerMsg};

use super::feed::Hole;
pub use super::feed::{read, read_deferred, welcomed, Readable, WelcomeJob};
use std::collections::{BTreeMap, VecDeque};
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
pub(super) struct Conn {
    pub(super) attachment: Option<AttachmentId>,
    pub(super) kind: AttachmentKind,
    pub(super) token: u64,
    pub(super) frames: Frames,
    /// Bytes framed for reading, and how much of them was read.
    pub(super) out: Vec<u8>,
    pub(super) out_read: usize,
    pub(super) control: VecDeque<ServerMsg>,
    /// Per shard, the last seq sent (or known to the client).
    pub(super) sent: BTreeMap<Shard, Seq>,
    /// Welcomes sent: an append made at this generation comes from a
    /// replica that has everything sent so far.
    pub(super) generation: u64,
    /// Set when the fid went with its connection: the end of the grace.
    pub(super) grace_until: Option<u64>,
    /// A lease of this attachment was reclaimed during the grace.
    pub(super) lost_lease: bool,
    /// The states of the Welcomes queued in `control`, in order.
    pub(super) welcomes: VecDeque<Box<State>>,
    /// A Welcome framed at `out[at]` whose snapshot is encoded off the
    /// lock when it is read (`read_deferred`, `welcomed`); what was framed
    /// after it waits in `out` past that point.
    pub(super) hole: Option<Hole>,
}

#[derive(Debug)]
struct Pending {
    request: String,
    proposal: Proposal,
    /// The attachment it was sent to, if it went to one, and the epoch of
    /// that attachment's lease then.
    sent_to: Option<AttachmentId>,
    sent_epoch: Epoch,
    reply: Option<Reply>,
    /// The proposing attachment and its id, for `Answer`.
    from: Option<(AttachmentId, u64)>,
    /// When the holder of its shard must have answered it by; past it,
    /// the holder is taken to be stuck: its lease is reclaimed and the
    /// view node applies the proposal.
    deadline: u64,
    /// Its writer flushed it: it is applied only by the client it was
    /// sent to already, if that one answers.
    flushed: bool,
}

/// A lease asked for and not yet granted.
#[derive(Debug, Clone, Copy)]
struct Ask {
    by: AttachmentId,
    deadline: u64,
    /// For a tool's bounded lease: how long it may keep it.
    ttl_ms: Option<u64>,
    /// For a bounded lease: who has the shard when it ends, if not the
    /// one leading it when it is granted (a UI asked meanwhile).
    return_to: Option<AttachmentId>,
}

/// A tool's bounded lease.
#[derive(Debug, Clone, Copy)]
struct Bounded {
    holder: AttachmentId,
    expires: u64,
    /// Who led the shard before, to have it back.
    return_to: AttachmentId,
}

/// One session's attach state.
#[derive(Debug, Default)]
pub struct Hub {
    pub config: HubConfig,
    pub(super) conns: BTreeMap<ConnId, Conn>,
    next_conn: ConnId,
    pending: BTreeMap<u64, Pending>,
    next_pending: u64,
    asks: BTreeMap<Shard, Ask>,
    bounded: BTreeMap<Shard, Bounded>,
    /// The UI that asked for every shard last (at its Hello or with
    /// `Lead`): shards other UIs make from then on are asked for on its
    /// behalf, so a UI that attaches while another is making windows
    /// ends up leading those too.
    leading_ui: Option<AttachmentId>,
    /// Open `entries` readers per shard: such a shard is not compacted.
    pub(super) entry_readers: BTreeMap<Shard, usize>,
    /// Times the daemon should call `tick` at.
    pub wakeups: Vec<u64>,
    /// Resume tokens come from here (the daemon seeds it randomly).
    pub token_seed: u64,
    /// The daemon's clock at the last call in (every entry point takes
    /// it): when a proposal sent to a holder is due.
    now: u64,
}

fn ui_or_tool(kind: AttachmentKind) -> &'static str {
    match kind {
        AttachmentKind::Ui => "ui",
        AttachmentKind::Tool => "tool",
    }
}

impl Hub {
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

    /// How many connections, pending proposals, asks, bounded leases and
    /// read shards the hub holds: bounded by what is live, whatever went before (for
    /// tests).
    pub fn sizes(&self) -> [usize; 5] {
        [self.conns.len(), self.pending.len(), self.asks.len(), self.bounded.len(), self.entry_readers.len()]
    }

    fn mint(&mut self) -> u64 {
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

    fn conn_of(&self, a: AttachmentId) -> Option<ConnId> {
        self.conns.iter().find(|(_, c)| c.attachment == Some(a)).map(|(id, _)| *id)
    }

    fn live_conn_of(&self, a: AttachmentId) -> Option<ConnId> {
        self.conn_of(a).filter(|id| self.conns[id].grace_until.is_none())
    }
}

/// A new connection (an open of `attach`).
pub fn open(s: &mut Session) -> ConnId {
    let hub = &mut s.hub;
    let id = hub.next_conn;
    hub.next_conn += 1;
    hub.conns.insert(
        id,
        Conn {
            attachment: None,
            kind: AttachmentKind::Tool,
            token: 0,
            frames: Frames::default(),
            out: Vec::new(),
            out_read: 0,
            control: VecDeque::new(),
            sent: BTreeMap::new(),
            generation: 0,
            grace_until: None,
            lost_lease: false,
            welcomes: VecDeque::new(),
            hole: None,
        },
    );
    id
}

/// One Twrite's bytes. It may complete at most one frame; that frame's
/// outcome is the write's. A refused write leaves nothing behind.
pub fn write(s: &mut Session, conn: ConnId, bytes: &[u8], now: u64) -> Result<Written, String> {
    s.hub.now = now;
    let c = s.hub.conns.get_mut(&conn).ok_or("attach: connection is gone")?;
    let before = c.frames.pending();
    c.frames.push(bytes);
    let whole = match c.frames.whole() {
        Ok(w) => w,
        Err(e) => {
            // Only this write's bytes go: the header it finished is bad.
            c.frames.truncate(before);
            return Err(e.to_string());
        }
    };
    let Some(n) = whole else { return Ok(Written::Done) };
    if c.frames.pending() > n {
        let extra = c.frames.pending() - n;
        c.frames.truncate(before);
        return Err(format!(
            "attach: a write may complete at most one frame; {extra} bytes follow the end of this one. \
             Write each frame (u32 length + postcard message) in writes of its own"
        ));
    }
    let msg = c.frames.next_msg::<ClientMsg>().map_err(|e| e.to_string())?.expect("whole frame");
    // A client applies its own appends, creations and deletions before
    // the daemon sees them: one refused means its replica has diverged, so
    // it is sent a fresh Welcome (its link recovers what was lost).
    let diverges =
        matches!(msg, ClientMsg::Append { .. } | ClientMsg::CreateShard { .. } | ClientMsg::DeleteShard { .. });
    let out = handle(s, conn, msg, now);
    if out.is_err() && diverges {
        if let Some(a) = s.hub.conns.get(&conn).and_then(|c| c.attachment) {
            welcome(s, conn, a);
        }
    }
    redispatch(s);
    out
}

/// The fid was clunked: the attachment ends now.
pub fn clunk(s: &mut Session, conn: ConnId, now: u64) {
    s.hub.now = now;
    if let Some(c) = s.hub.conns.remove(&conn) {
        if let Some(a) = c.attachment {
            end(s, a);
        }
    }
    redispatch(s);
}

/// The connection went without a clunk: the attachment waits out its
/// grace for a resume.
pub fn hangup(s: &mut Session, conn: ConnId, now: u64) {
    s.hub.now = now;
    let grace = s.hub.config.grace_ms;
    let Some(c) = s.hub.conns.get_mut(&conn) else { return };
    if c.attachment.is_none() {
        s.hub.conns.remove(&conn);
        return;
    }
    c.grace_until = Some(now + grace);
    c.frames.clear();
    s.hub.wakeups.push(now + grace);
}

/// Acts on whatever is due at `now`: requested leases past their
/// deadline are reclaimed and granted, graces that ran out end their
/// attachments, bounded leases that expired go back.
pub fn tick(s: &mut Session, now: u64) {
    s.hub.now = now;
    let late: Vec<(Shard, Ask)> = s.hub.asks.iter().filter(|(_, a)| a.deadline <= now).map(|(k, v)| (*k, *v)).collect();
    for (shard, ask) in late {
        let Ok(lease) = s.view.log.lease(shard) else {
            s.hub.asks.remove(&shard);
            continue;
        };
        if lease.holder == ask.by && lease.released.is_none() {
            s.hub.asks.remove(&shard);
            continue;
        }
        tracing::info!(session = %s.label(), %shard, holder = %lease.holder, "lease not released by the deadline; reclaimed");
        reclaim(s, shard);
        grant_asked(s, shard, now);
    }
    let ended: Vec<(ConnId, AttachmentId)> = s
        .hub
        .conns
        .iter()
        .filter(|(_, c)| c.grace_until.is_some_and(|t| t <= now))
        .filter_map(|(id, c)| c.attachment.map(|a| (*id, a)))
        .collect();
    for (id, a) in ended {
        tracing::info!(session = %s.label(), attachment = %a, "resume grace ran out; detached");
        s.hub.conns.remove(&id);
        end(s, a);
    }
    let expired: Vec<(Shard, Bounded)> =
        s.hub.bounded.iter().filter(|(_, b)| b.expires <= now).map(|(k, v)| (*k, *v)).collect();
    for (shard, b) in expired {
        s.hub.bounded.remove(&shard);
        if s.view.log.lease(shard).is_ok_and(|l| l.holder == b.holder) {
            reclaim(s, shard);
            give_back(s, shard, b.return_to);
            if let Some(id) = s.hub.live_conn_of(b.holder) {
                let text = format!("lease of {shard} expired; later appends are fenced");
                s.hub.conns.get_mut(&id).expect("found").control.push_back(ServerMsg::Error { text });
            }
        }
    }
    reclaim_stuck(s, now);
    redispatch(s);
}

/// A proposal from a file of the tree (or a Propose frame): applied now
/// when the server leads its shard, otherwise routed to the holder.
/// A holder that does not answer by the lease deadline loses the lease.
pub fn submit(
    s: &mut Session,
    request: &str,
    proposal: Proposal,
    from: Option<(AttachmentId, u64)>,
    now: u64,
) -> Written {
    s.hub.now = now;
    let (tx, rx) = oneshot::channel();
    let id = s.hub.next_pending;
    s.hub.next_pending += 1;
    let deadline = now + s.hub.config.deadline_ms;
    let request = request.to_string();
    let pending =
        Pending { request, proposal, sent_to: None, sent_epoch: 0, reply: Some(tx), from, deadline, flushed: false };
    s.hub.pending.insert(id, pending);
    route(s, id);
    if s.hub.pending.get(&id).is_some_and(|p| p.sent_to.is_none()) {
        // Waiting for a holder in its grace, or for a grant: due then too.
        s.hub.wakeups.push(deadline);
    }
    Written::Wait(id, rx)
}

/// The writer of proposal `id` gave up on it (a Tflush): if no client
/// may be applying it, it is dropped now and answered so; if one was sent
/// it, its outcome is awaited (it may have applied it already), and it is
/// dropped if that one loses the lease first.
pub fn withdraw(s: &mut Session, id: u64, now: u64) {
    s.hub.now = now;
    let Some(p) = s.hub.pending.get_mut(&id) else { return };
    p.flushed = true;
    if p.sent_to.is_none() {
        route(s, id);
    }
}

/// Proposals past their deadline whose shard a client still holds: the
/// holder is stuck (stopped, or not reading), so the server takes the
/// lease back (the holder is fenced, its unsent typing recovered when it
/// wakes) and the view node applies them on the next `redispatch`.
fn reclaim_stuck(s: &mut Session, now: u64) {
    let late: Vec<(Shard, Option<(AttachmentId, Epoch)>)> = s
        .hub
        .pending
        .values()
        .filter(|p| p.deadline <= now)
        .map(|p| (p.proposal.target(), p.sent_to.map(|a| (a, p.sent_epoch))))
        .collect();
    for (shard, sent) in late {
        let Ok(lease) = s.view.log.lease(shard).copied() else { continue };
        if lease.holder == AttachmentId::SERVER || lease.released.is_some() {
            continue;
        }
        // Sent to a holder that is connected, still has the lease it was
        // sent at, and did not answer. A holder whose connection went is
        // waited for until its resume grace ends (which reclaims then).
        let live = s.hub.live_conn_of(lease.holder).is_some();
        let stuck = live && sent == Some((lease.holder, lease.epoch));
        if !stuck {
            continue;
        }
        tracing::info!(
            session = %s.label(), %shard, holder = %lease.holder,
            "a proposal was not answered by the lease deadline; lease reclaimed"
        );
        reclaim(s, shard);
        if let Some(b) = s.hub.bounded.remove(&shard) {
            give_back(s, shard, b.return_to);
        } else if s.hub.asks.contains_key(&shard) {
            grant_asked(s, shard, now);
        }
    }
}

fn handle(s: &mut Session, conn: ConnId, msg: ClientMsg, now: u64) -> Result<Written, String> {
    let c = &s.hub.conns[&conn];
    let Some(a) = c.attachment else {
        return match msg {
            ClientMsg::Hello { kind, name, resume } => hello(s, conn, kind, &name, resume, now).map(|_| Written::Done),
            _ => Err("attach: the first frame must be Hello { kind, name, resume }".into()),
        };
    };
    let kind = c.kind;
    match msg {
        ClientMsg::Hello { .. } => Err(format!("attach: already attached as {a}; Hello comes once")),
        ClientMsg::Append { shard, entries, generation, answers } => {
            let ids: Vec<u64> = answers.iter().map(|(id, _)| *id).collect();
            if let Err(e) = append(s, conn, a, shard, entries, generation) {
                // Its proposals' entries were not taken: whoever holds the
                // shard now acts on them again.
                for id in ids {
                    if let Some(p) = s.hub.pending.get_mut(&id).filter(|p| p.sent_to == Some(a)) {
                        p.sent_to = None;
                    }
                }
                return Err(e);
            }
            for (id, result) in answers {
                // Stale answers (the proposal was answered or moved on)
                // change nothing; the entries stand on their own.
                let _ = answer(s, a, id, result);
            }
            Ok(Written::Done)
        }
        ClientMsg::CreateShard { shard } => {
            if shard.is_pinned() || shard == Shard::Layout || shard_issuer(shard) != Some(a) {
                return Err(format!(
                    "attach: cannot create {shard}: a client creates buffer and window shards with ids of its own range"
                ));
            }
            s.view.create_shard_for(shard, a).map_err(|e| e.to_string())?;
            s.hub.conns.get_mut(&conn).expect("live").sent.insert(shard, 0);
            match s.hub.leading_ui.filter(|l| *l != a && kind == AttachmentKind::Ui) {
                Some(leader) => ask(s, shard, leader, None, now).map(|_| Written::Done),
                None => Ok(Written::Done),
            }
        }
        ClientMsg::DeleteShard { shard } => {
            let lease = s.view.log.lease(shard).map_err(|e| e.to_string())?;
            if lease.holder != a || lease.released.is_some() {
                return Err(format!("attach: cannot delete {shard}: only its leader may (lease: {})", lease.holder));
            }
            s.view.delete_shard(shard).map_err(|e| e.to_string())?;
            s.hub.asks.remove(&shard);
            s.hub.bounded.remove(&shard);
            Ok(Written::Done)
        }
        ClientMsg::Release { shard, seq } => {
            let op = s.view.log.release_op(shard, a, seq).map_err(|e| e.to_string())?;
            s.view.push_meta(op).map_err(|e| e.to_string())?;
            let bounded = s.hub.bounded.remove(&shard).filter(|b| b.holder == a);
            if s.hub.asks.contains_key(&shard) {
                grant_asked(s, shard, now);
            } else {
                reclaim(s, shard);
                if let Some(b) = bounded {
                    give_back(s, shard, b.return_to);
                }
            }
            Ok(Written::Done)
        }
        ClientMsg::Propose { id, proposal } => {
            Ok(submit(s, &format!("propose from {a} #{id}"), proposal, Some((a, id)), now))
        }
        ClientMsg::Answer { id, result } => answer(s, a, id, result).map(|_| Written::Done),
        ClientMsg::Lease { shard, ttl_ms } => {
            if kind != AttachmentKind::Tool || !matches!(shard, Shard::Buffer(_)) {
                return Err(format!("attach: bounded leases are for tools, on one buffer; not {shard}"));
            }
            if s.hub.bounded.values().any(|b| b.holder == a) || s.hub.asks.values().any(|k| k.by == a) {
                return Err("attach: a tool holds or asks for one bounded lease at a time; release it first".into());
            }
            if ttl_ms == 0 {
                return Err("attach: a bounded lease needs a ttl above 0 ms".into());
            }
            ask(s, shard, a, Some(ttl_ms), now).map(|_| Written::Done)
        }
        ClientMsg::Notify { text } => {
            s.view.push_meta(MetaOp::Notify { from: a, text }).map_err(|e| e.to_string())?;
            Ok(Written::Done)
        }
        ClientMsg::Resync => {
            welcome(s, conn, a);
            Ok(Written::Done)
        }
        ClientMsg::Lead => {
            if kind != AttachmentKind::Ui {
                return Err("attach: Lead is for UIs; a tool asks for one buffer's lease with Lease".into());
            }
            ask_for_all(s, a, now).map(|_| Written::Done)
        }
    }
}

/// The holder's outcome of routed proposal `id`.
fn answer(s: &mut Session, a: AttachmentId, id: u64, result: Outcome) -> Result<(), String> {
    let ours = s.hub.pending.get(&id).is_some_and(|p| p.sent_to == Some(a));
    if !ours {
        return Err(format!("attach: no proposal {id} is waiting for {a}"));
    }
    let target = s.hub.pending[&id].proposal.target();
    let still_leads = s.view.log.lease(target).is_ok_and(|l| l.holder == a && l.released.is_none());
    if result.is_err() && !still_leads {
        // It lost the lease before it could act: the next holder will.
        s.hub.pending.get_mut(&id).expect("found").sent_to = None;
        return Ok(());
    }
    let p = s.hub.pending.remove(&id).expect("found");
    finish(s, p, result);
    Ok(())
}

/// The attachment whose id range a created shard's id is in.
fn shard_issuer(shard: Shard) -> Option<AttachmentId> {
    match shard {
        Shard::Buffer(b) => Some(b.issuer()),
        Shard::Window(w) => Some(apex_core::BufferId(w.0).issuer()),
        Shard::Term(t) => Some(apex_core::BufferId(t.0).issuer()),
        Shard::Layout | Shard::Meta => None,
    }
}

fn hello(
    s: &mut Session,
    conn: ConnId,
    kind: AttachmentKind,
    name: &str,
    resume: Option<Resume>,
    now: u64,
) -> Result<(), String> {
    if let Some(r) = resume {
        match resumable(s, r) {
            Ok(old) => {
                let token = s.hub.mint();
                let was = s.hub.conns.remove(&old).expect("found");
                let c = s.hub.conns.get_mut(&conn).expect("live");
                c.attachment = Some(r.attachment);
                c.kind = was.kind;
                c.token = token;
                // Answers to its proposals that came meanwhile.
                let answers = was.control.into_iter().filter(|m| matches!(m, ServerMsg::Answer { .. }));
                c.control.extend(answers);
                welcome(s, conn, r.attachment);
                // Proposals it had not answered go to it again.
                for p in s.hub.pending.values_mut() {
                    if p.sent_to == Some(r.attachment) {
                        p.sent_to = None;
                    }
                }
                tracing::info!(session = %s.label(), attachment = %r.attachment, "resumed");
                return Ok(());
            }
            Err(why) => {
                let text = format!("resume of {} refused: {why}; attached anew", r.attachment);
                s.hub.conns.get_mut(&conn).expect("live").control.push_back(ServerMsg::Error { text });
            }
        }
    }
    let a = s.view.log.next_attachment().map_err(|e| e.to_string())?;
    s.view.push_meta(MetaOp::Attach { attachment: a, kind, name: name.to_string() }).map_err(|e| e.to_string())?;
    let token = s.hub.mint();
    let c = s.hub.conns.get_mut(&conn).expect("live");
    c.attachment = Some(a);
    c.kind = kind;
    c.token = token;
    tracing::info!(session = %s.label(), attachment = %a, kind = ui_or_tool(kind), name, "attached");
    if kind == AttachmentKind::Ui {
        ask_for_all(s, a, now)?;
    }
    welcome(s, conn, a);
    Ok(())
}

/// A UI asks for every shard a UI leads (the layout, windows, buffers):
/// at attach, and again with `Lead`.
/// A tool's bounded lease, held or asked for, is left to it: the shard
/// comes to this UI when it ends.
fn ask_for_all(s: &mut Session, a: AttachmentId, now: u64) -> Result<(), String> {
    s.hub.leading_ui = Some(a);
    let shards: Vec<Shard> =
        s.view.log.shards().map(|(sh, _)| *sh).filter(|sh| !sh.is_pinned() && *sh != Shard::Meta).collect();
    for shard in shards {
        if let Some(b) = s.hub.bounded.get_mut(&shard) {
            b.return_to = a;
            continue;
        }
        if let Some(k) = s.hub.asks.get_mut(&shard).filter(|k| k.ttl_ms.is_some() && k.by != a) {
            k.return_to = Some(a);
            continue;
        }
        ask(s, shard, a, None, now)?;
    }
    Ok(())
}

/// The connection in its grace that `r` names, if it may resume.
fn resumable(s: &Session, r: Resume) -> Result<ConnId, &'static str> {
    let id = s.hub.conn_of(r.attachment).ok_or("no such attachment is waiting (its grace ran out, or it never was)")?;
    let c = &s.hub.conns[&id];
    if c.token != r.token {
        return Err("the resume token is wrong");
    }
    if c.grace_until.is_none() {
        return Err("that attachment is still connected");
    }
    if c.lost_lease {
        return Err("a lease it held was reclaimed meanwhile");
    }
    Ok(id)
}

/// Queues Welcome with a snapshot; the connection's cursors start at its
/// marks.
fn welcome(s: &mut Session, conn: ConnId, a: AttachmentId) {
    // A copy (ropes share their nodes), encoded when read, off the lock.
    let state = Box::new(s.view.state.clone());
    let sent: BTreeMap<Shard, Seq> = s.view.log.shards().map(|(sh, l)| (*sh, l.last())).collect();
    let c = s.hub.conns.get_mut(&conn).expect("live");
    c.sent = sent;
    c.generation += 1;
    c.grace_until = None;
    c.welcomes.push_back(state);
    c.control.push_back(ServerMsg::Welcome { attachment: a, token: c.token, snapshot: Vec::new() });
}

/// Asks for `shard` on behalf of `by`: granted at once when free,
/// requested from the holder otherwise.
fn ask(s: &mut Session, shard: Shard, by: AttachmentId, ttl_ms: Option<u64>, now: u64) -> Result<(), String> {
    let lease = *s.view.log.lease(shard).map_err(|e| e.to_string())?;
    if lease.holder == by && lease.released.is_none() {
        return Ok(());
    }
    let deadline = now + s.hub.config.deadline_ms;
    s.hub.asks.insert(shard, Ask { by, deadline, ttl_ms, return_to: None });
    if lease.is_free() {
        grant_asked(s, shard, now);
        return Ok(());
    }
    s.view.push_meta(MetaOp::LeaseRequest { shard, by }).map_err(|e| e.to_string())?;
    s.hub.wakeups.push(deadline);
    Ok(())
}

/// Grants `shard` to whoever asked for it, if that one is still here; the
/// lease must be free (released or the server's).
fn grant_asked(s: &mut Session, shard: Shard, now: u64) {
    let Some(ask) = s.hub.asks.remove(&shard) else { return };
    if !s.view.state.meta.attachments.contains_key(&ask.by) {
        // It went meanwhile: the server leads rather than nobody.
        reclaim(s, shard);
        return;
    }
    let Ok(lease) = s.view.log.lease(shard).copied() else { return };
    if !lease.is_free() {
        reclaim(s, shard);
    }
    let Ok(op) = s.view.log.grant_op(shard, ask.by) else { return };
    if s.view.push_meta(op).is_err() {
        return;
    }
    if let Some(ttl) = ask.ttl_ms {
        let before = if lease.holder == ask.by { AttachmentId::SERVER } else { lease.holder };
        let return_to = ask.return_to.unwrap_or(before);
        s.hub.bounded.insert(shard, Bounded { holder: ask.by, expires: now + ttl, return_to });
        s.hub.wakeups.push(now + ttl);
    }
}

/// The server takes `shard` back (epoch + 1): the view node leads it.
fn reclaim(s: &mut Session, shard: Shard) {
    let Ok(lease) = s.view.log.lease(shard).copied() else { return };
    if lease.holder == AttachmentId::SERVER && lease.released.is_none() {
        return;
    }
    let holder = lease.holder;
    if let Ok(op) = s.view.log.reclaim_op(shard) {
        if s.view.push_meta(op).is_ok() {
            if let Some(id) = s.hub.conn_of(holder) {
                let c = s.hub.conns.get_mut(&id).expect("found");
                if c.grace_until.is_some() {
                    c.lost_lease = true;
                }
            }
        }
    }
}

/// After a bounded lease: back to the UI that had it, if it is still
/// attached; otherwise the server keeps it.
fn give_back(s: &mut Session, shard: Shard, to: AttachmentId) {
    if to == AttachmentId::SERVER || !s.view.state.meta.attachments.contains_key(&to) {
        return;
    }
    if let Ok(op) = s.view.log.grant_op(shard, to) {
        let _ = s.view.push_meta(op);
    }
}

/// Ends attachment `a`: Detach, then its leases go back to the server.
fn end(s: &mut Session, a: AttachmentId) {
    if s.view.push_meta(MetaOp::Detach { attachment: a }).is_err() {
        return;
    }
    let held: Vec<Shard> = s.view.log.held_by(a).into_keys().filter(|sh| *sh != Shard::Meta).collect();
    for shard in held {
        reclaim(s, shard);
        let b = s.hub.bounded.remove(&shard);
        if let Some(b) = b.filter(|b| b.holder == a) {
            give_back(s, shard, b.return_to);
        }
    }
    s.hub.asks.retain(|_, k| k.by != a);
    if s.hub.leading_ui == Some(a) {
        s.hub.leading_ui = None;
    }
    for p in s.hub.pending.values_mut() {
        if p.sent_to == Some(a) {
            p.sent_to = None;
        }
    }
    tracing::info!(session = %s.label(), attachment = %a, "detached");
}

fn append(
    s: &mut Session,
    conn: ConnId,
    a: AttachmentId,
    shard: Shard,
    entries: Vec<apex_core::Entry>,
    generation: u64,
) -> Result<(), String> {
    if shard == Shard::Meta {
        return Err("attach: the metalog is the daemon's to write".into());
    }
    if let Some(e) = entries.iter().find(|e| e.attachment != a) {
        return Err(format!("attach: entry {} of {shard} claims attachment {}; this is {a}", e.seq, e.attachment));
    }
    let n = entries.len();
    if n == 0 {
        return Ok(());
    }
    s.view.accept_all(shard, entries).map_err(|(i, e)| match n {
        1 => e.to_string(),
        _ => format!("{e} (entry {} of {n}; none of them applied)", i + 1),
    })?;
    let last = s.view.log.last(shard);
    let c = s.hub.conns.get_mut(&conn).expect("live");
    // The replica has these if it made them after our last Welcome and
    // has had everything before them; otherwise they are sent to it.
    let first = last + 1 - n as Seq;
    if generation == c.generation && c.sent.get(&shard).copied().unwrap_or(0) + 1 == first {
        c.sent.insert(shard, last);
    }
    c.control.push_back(ServerMsg::Acked { shard, seq: last });
    Ok(())
}

/// Sends a pending proposal where it belongs now.
fn route(s: &mut Session, id: u64) {
    let Some(p) = s.hub.pending.get(&id) else { return };
    if p.flushed {
        let mut p = s.hub.pending.remove(&id).expect("found");
        // Not with anyone who may apply it: as if it never was.
        p.sent_to = None;
        let why = "write flushed before it was applied: nothing changed";
        finish(s, p, Err(Refusal::Said(why.to_string())));
        return;
    }
    let target = p.proposal.target();
    // Proposals to one shard reach its holder in the order they came (a
    // watching UI's keystrokes are a run of them): one waits while an
    // earlier one to the same shard is still waiting to be sent.
    let earlier_waits =
        s.hub.pending.range(..id).any(|(_, q)| q.sent_to.is_none() && !q.flushed && q.proposal.target() == target);
    if earlier_waits {
        return;
    }
    let (holder, epoch) = match s.view.log.lease(target) {
        Ok(l) if l.released.is_some() => (None, 0), // between holders: wait for the grant
        Ok(l) => (Some(l.holder), l.epoch),
        Err(_) => (Some(AttachmentId::SERVER), 0), // the view node says what is wrong
    };
    match holder {
        Some(AttachmentId::SERVER) => {
            let p = s.hub.pending.remove(&id).expect("found");
            let result = s.propose(&p.request, &p.proposal);
            finish(s, p, result);
        }
        Some(holder) => {
            let Some(cid) = s.hub.live_conn_of(holder) else { return }; // in its grace: wait
            let proposal = p.proposal.clone();
            let due = s.hub.now + s.hub.config.deadline_ms;
            let p = s.hub.pending.get_mut(&id).expect("found");
            p.sent_to = Some(holder);
            p.sent_epoch = epoch;
            // Each holder it is sent to has the whole deadline to answer.
            p.deadline = due;
            s.hub.wakeups.push(due);
            s.hub.conns.get_mut(&cid).expect("found").control.push_back(ServerMsg::Proposal { id, epoch, proposal });
        }
        None => {}
    }
}

/// Routes again every pending proposal not with the current holder at
/// its current epoch (a holder that lost the lease and got it back drops
/// the copy sent at the old epoch).
fn redispatch(s: &mut Session) {
    let ids: Vec<u64> = s
        .hub
        .pending
        .iter()
        .filter(|(_, p)| match p.sent_to {
            None => true,
            Some(a) => !s
                .view
                .log
                .lease(p.proposal.target())
                .is_ok_and(|l| l.holder == a && l.released.is_none() && l.epoch == p.sent_epoch),
        })
        .map(|(id, _)| *id)
        .collect();
    for id in ids {
        if let Some(p) = s.hub.pending.get_mut(&id) {
            p.sent_to = None;
        }
        route(s, id);
    }
}

fn finish(s: &mut Session, mut p: Pending, result: Outcome) {
    if p.sent_to.is_some() {
        s.note_outcome(&p.request, &result);
    }
    if let Some((a, id)) = p.from {
        // To its connection, or the one waiting out its grace (a resume
        // takes the answer over).
        if let Some(conn) = s.hub.conn_of(a) {
            let c = s.hub.conns.get_mut(&conn).expect("found");
            c.control.push_back(ServerMsg::Answer { id, result: result.clone() });
        }
    }
    if let Some(reply) = p.reply.take() {
        let _ = reply.send(result);
    }
}
