//! Where a proposal goes, for every writer: a tool's write to a file of
//! the tree, or a `Propose` frame of an attached client. The view node
//! applies it when the server leads the shard it touches; otherwise it is
//! sent to the shard's holder, whose `Answer` (or loss of the lease)
//! settles it. Proposals to one shard reach its holder in the order they
//! came; a holder that does not answer by the lease deadline is stuck and
//! loses the lease; a writer that gives up (Tflush) withdraws its
//! proposal where no client may be applying it. Sans I/O, on one session
//! under its lock; [`crate::daemon::Daemon::propose`] waits for the
//! outcome.

use crate::attach::error::AttachError;
use crate::attach::hub::{Pending, Reply, Settling, Written};
use crate::attach::lease::{fenced, pass_on, reclaim};
use crate::session::Session;
use apex_core::{AttachmentId, Epoch, Proposal, Seq, Shard};
use apex_link::wire::{Outcome, Refusal, ServerMsg};
use std::collections::BTreeMap;
use tokio::sync::oneshot;

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
    s.hub_mut().now = now;
    let (tx, rx) = oneshot::channel();
    let id = s.hub().next_pending;
    s.hub_mut().next_pending += 1;
    let deadline = now + s.hub().config.deadline_ms;
    let request = request.to_string();
    let pending = Pending {
        request,
        proposal,
        sent_to: None,
        last_sent_to: None,
        sent_epoch: 0,
        reply: Some(tx),
        from,
        deadline,
        flushed: false,
        paused: None,
    };
    s.hub_mut().pending.insert(id, pending);
    route(s, id);
    if s.hub().pending.get(&id).is_some_and(|p| p.sent_to.is_none()) {
        // Waiting for a holder in its grace, or for a grant: due then too.
        s.hub_mut().wakeups.push(deadline);
    }
    Written::Wait(id, rx)
}

/// The writer of proposal `id` gave up on it (a Tflush): if no client
/// may be applying it, it is dropped now and answered so; if one was sent
/// it, its outcome is awaited (it may have applied it already), and it is
/// dropped if that one loses the lease first.
pub fn withdraw(s: &mut Session, id: u64, now: u64) {
    s.hub_mut().now = now;
    let Some(p) = s.hub_mut().pending.get_mut(&id) else { return };
    p.flushed = true;
    if p.sent_to.is_none() {
        route(s, id);
    }
}

/// Proposals past their deadline whose shard a client still holds: the
/// holder is stuck (stopped, or not reading), so the server takes the
/// lease back (the holder is fenced, its unsent typing recovered when it
/// wakes) and the view node applies them on the next `redispatch`.
pub(crate) fn reclaim_stuck(s: &mut Session, now: u64) {
    let late: Vec<(Shard, Option<(AttachmentId, Epoch)>)> = s
        .hub()
        .pending
        .values()
        .filter(|p| p.deadline <= now)
        .map(|p| (p.proposal.target(), p.sent_to.map(|a| (a, p.sent_epoch))))
        .collect();
    for (shard, sent) in late {
        let Ok(lease) = s.view().log.lease(shard).copied() else { continue };
        if lease.holder == AttachmentId::SERVER || lease.released.is_some() {
            continue;
        }
        // Sent to a holder that is connected, still has the lease it was
        // sent at, and did not answer. A holder whose connection went is
        // waited for until its resume grace ends (which reclaims then).
        let live = s.hub().live_conn_of(lease.holder).is_some();
        let stuck = live && sent == Some((lease.holder, lease.epoch));
        if !stuck {
            continue;
        }
        tracing::info!(
            session = %s.label(), %shard, holder = %lease.holder,
            "a proposal was not answered by the lease deadline; lease reclaimed"
        );
        reclaim(s, shard);
        pass_on(s, shard, now);
    }
}

/// A `reclaim` written to `shards/SHARD/lease`: the server takes the lease
/// back as the deadline does for a stuck holder (the holder is fenced),
/// and what waited for the shard goes where it belongs now.
pub(crate) fn reclaim_by_hand(s: &mut Session, shard: Shard, now: u64) -> Result<(), apex_core::Reject> {
    // The hub's clock, which a proposal routed again takes its deadline
    // from.
    s.hub_mut().now = now;
    let holder = s.view().log.lease(shard)?.holder;
    let op = s.view().log.reclaim_op(shard)?;
    s.view_mut().push_meta(op)?;
    fenced(s, holder);
    pass_on(s, shard, now);
    redispatch(s);
    Ok(())
}

/// The holder's outcome of routed proposal `id`.
pub(crate) fn answer(s: &mut Session, a: AttachmentId, id: u64, result: Outcome) -> Result<(), AttachError> {
    let ours = s.hub().pending.get(&id).is_some_and(|p| p.sent_to == Some(a));
    if !ours {
        if answered_late(s, a, id, &result) {
            return Ok(());
        }
        return Err(AttachError::NoSuchProposal { id, attachment: a });
    }
    let target = s.hub().pending[&id].proposal.target();
    let still_leads = s.view().log.lease(target).is_ok_and(|l| l.holder == a && l.released.is_none());
    if result.is_err() && !still_leads {
        // It lost the lease before it could act: the next holder will
        // (and it made nothing for it to discard).
        let p = s.hub_mut().pending.get_mut(&id).expect("found");
        (p.sent_to, p.last_sent_to) = (None, None);
        return Ok(());
    }
    let mut p = s.hub_mut().pending.remove(&id).expect("found");
    // Its writer hears once the change is in the log; if the change is
    // undone, the proposal is pending again, for the holder's resumed
    // replica to answer again (it sends again what it made).
    let reply = p.reply.take();
    let told = Waiter { request: p.request.clone(), sent_to: p.sent_to, reply: None, from: p.from };
    finish(s, told, result.clone());
    if reply.is_some() {
        p.reply = reply;
        s.reply_when_settled(Settling::Answered(id, Box::new(p)), result);
    }
    Ok(())
}

/// The answer of `a` to proposal `id`, which was taken from it and acted
/// on elsewhere: whatever shards it made for it (sent before the answer,
/// and taken, since they were its own) are discarded, so a stalled holder
/// that wakes leaves no window in no layout, no column tag nothing shows
/// and no second buffer of the name. False if `id` was not taken from `a`.
pub(crate) fn answered_late(s: &mut Session, a: AttachmentId, id: u64, result: &Outcome) -> bool {
    if !s.hub_mut().taken_from.remove(&(id, a)) {
        return false;
    }
    if let Ok(applied) = result {
        discard_made(s, a, applied);
    }
    true
}

/// Deletes the shards `a` made for a proposal (`applied`): those its
/// entries began (from seq 1), if nothing was appended to any of them
/// since; a window only if the layout does not place it, a buffer only
/// if no window or column shows it.
fn discard_made(s: &mut Session, a: AttachmentId, applied: &apex_core::propose::Applied) {
    // Per shard: begun by it, and how far its entries went.
    let mut runs: BTreeMap<Shard, (bool, Seq)> = BTreeMap::new();
    for run in &applied.entries {
        let (begun, last) = runs.entry(run.shard).or_insert((false, 0));
        *begun |= run.first == 1;
        *last = (*last).max(run.last);
    }
    let made: Vec<(Shard, Seq)> = runs
        .into_iter()
        .filter(|(shard, (begun, _))| *begun && matches!(shard, Shard::Buffer(_) | Shard::Window(_)))
        .filter(|(shard, _)| shard.issuer() == Some(a) && s.view().log.shard(*shard).is_ok())
        .map(|(shard, (_, last))| (shard, last))
        .collect();
    // All or nothing: if it wrote more to any of them since (typed into
    // the new window, say), all stay, and the layout's leader places the
    // window (`make::mend_layout`), its text shown.
    if made.iter().any(|(shard, last)| s.view().log.last(*shard) != *last) {
        return;
    }
    let made: Vec<Shard> = made.into_iter().map(|(shard, _)| shard).collect();
    // Windows first: a buffer is discarded only if no window shows it.
    let (windows, buffers): (Vec<Shard>, Vec<Shard>) = made.into_iter().partition(|s| matches!(s, Shard::Window(_)));
    for shard in windows {
        let Shard::Window(w) = shard else { continue };
        if s.view().state.layout.find(w).is_none() {
            let _ = s.view_mut().delete_shard(shard);
        }
    }
    for shard in buffers {
        let Shard::Buffer(b) = shard else { continue };
        let state = &s.view().state;
        let shown = state.windows.values().any(|w| w.tag == b || w.body == b)
            || state.layout.columns.iter().any(|c| c.tag == b)
            || state.layout.row_tag == Some(b);
        if !shown {
            let _ = s.view_mut().delete_shard(shard);
        }
    }
    tracing::info!(session = %s.label(), attachment = %a, "discarded what a holder made for a proposal taken from it");
}

/// Sends a pending proposal where it belongs now.
fn route(s: &mut Session, id: u64) {
    let Some(p) = s.hub().pending.get(&id) else { return };
    let target = p.proposal.target();
    let (holder, epoch) = match s.view().log.lease(target) {
        Ok(l) if l.released.is_some() => (None, 0), // between holders: wait for the grant
        Ok(l) => (Some(l.holder), l.epoch),
        Err(_) => (Some(AttachmentId::SERVER), 0), // the view node says what is wrong
    };
    // The holder it went to hung up and resumes, still leading at that
    // epoch: it may have applied it, and sends what it made now.
    let may_have_applied = matches!(p.paused, Some((h, _)) if Some(h) == holder && p.sent_epoch == epoch);
    // Where it went before, if it goes elsewhere now (or nowhere, flushed):
    // that holder may have applied it too.
    let was = p.last_sent_to;
    let taken = |s: &mut Session, to: Option<AttachmentId>| {
        if let Some(h) = was.filter(|h| Some(*h) != to) {
            if s.view().state.meta.attachments.contains_key(&h) {
                s.hub_mut().taken_from.insert((id, h));
            }
        }
    };
    if p.flushed && !may_have_applied {
        taken(s, None);
        let mut p = s.hub_mut().pending.remove(&id).expect("found");
        // Not with anyone who may apply it: as if it never was.
        p.sent_to = None;
        let why = "write flushed before it was applied: nothing changed";
        finish(s, p, Err(Refusal::Said(why.to_string())));
        return;
    }
    // (A flushed one it may have applied goes to it again: it answers
    // from what it did, or does it now, and the reply precedes the
    // Rflush either way.)
    // Proposals to one shard reach its holder in the order they came (a
    // watching UI's keystrokes are a run of them): one waits while an
    // earlier one to the same shard is still waiting to be sent.
    let earlier_waits =
        s.hub().pending.range(..id).any(|(_, q)| q.sent_to.is_none() && !q.flushed && q.proposal.target() == target);
    if earlier_waits {
        return;
    }
    match holder {
        Some(AttachmentId::SERVER) => {
            taken(s, holder);
            let p = s.hub_mut().pending.remove(&id).expect("found");
            // Applied here: its text goes into the entry as it is (no copy
            // of a bulk write).
            let Pending { request, proposal, sent_to, reply, from, .. } = p;
            let result = s.propose_owned(&request, proposal);
            finish(s, Waiter { request, sent_to, reply, from }, result);
        }
        Some(holder) => {
            let Some(cid) = s.hub().live_conn_of(holder) else { return }; // in its grace: wait
            taken(s, Some(holder));
            let Some(p) = s.hub().pending.get(&id) else { return };
            let proposal = p.proposal.clone();
            let hub = s.hub_mut();
            let (now, due) = (hub.now, hub.now + hub.config.deadline_ms);
            let p = hub.pending.get_mut(&id).expect("found");
            // Each holder it is sent to has the whole deadline to answer,
            // once: sent again after a resume, it has what was left.
            p.deadline = match p.paused.take() {
                Some((h, left)) if h == holder && p.sent_epoch == epoch => now + left,
                _ => due,
            };
            p.sent_to = Some(holder);
            p.last_sent_to = Some(holder);
            p.sent_epoch = epoch;
            hub.wakeups.push(p.deadline);
            hub.conns.get_mut(&cid).expect("found").control.push_back(ServerMsg::Proposal { id, epoch, proposal });
        }
        None => {}
    }
}

/// Routes again every pending proposal not with the current holder at
/// its current epoch (a holder that lost the lease and got it back drops
/// the copy sent at the old epoch).
pub(crate) fn redispatch(s: &mut Session) {
    let ids: Vec<u64> = s
        .hub()
        .pending
        .iter()
        .filter(|(_, p)| match p.sent_to {
            None => true,
            Some(a) => !s
                .view()
                .log
                .lease(p.proposal.target())
                .is_ok_and(|l| l.holder == a && l.released.is_none() && l.epoch == p.sent_epoch),
        })
        .map(|(id, _)| *id)
        .collect();
    for id in ids {
        if let Some(p) = s.hub_mut().pending.get_mut(&id) {
            p.sent_to = None;
        }
        route(s, id);
    }
}

/// Who waits for a proposal's outcome, and where it went.
struct Waiter {
    request: String,
    sent_to: Option<AttachmentId>,
    reply: Option<Reply>,
    from: Option<(AttachmentId, u64)>,
}

impl From<Pending> for Waiter {
    fn from(p: Pending) -> Waiter {
        Waiter { request: p.request, sent_to: p.sent_to, reply: p.reply, from: p.from }
    }
}

fn finish(s: &mut Session, p: impl Into<Waiter>, result: Outcome) {
    let mut p: Waiter = p.into();
    if p.sent_to.is_some() {
        s.note_outcome(&p.request, &result);
    }
    if let Some((a, id)) = p.from {
        // To its connection, or the one waiting out its grace (a resume
        // takes the answer over).
        if let Some(conn) = s.hub().conn_of(a) {
            let c = s.hub_mut().conns.get_mut(&conn).expect("found");
            c.control.push_back(ServerMsg::Answer { id, result: result.clone() });
        }
    }
    if let Some(reply) = p.reply.take() {
        // The waiting request acknowledges as soon as it hears: the
        // entries are in the log first.
        s.reply_when_settled(Settling::Decided(reply), result);
    }
}
