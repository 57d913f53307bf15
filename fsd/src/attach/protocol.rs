//! The frames a connection of `NAME/attach` writes, and time passing:
//! Hello (attach or resume), appends fenced by the authority log, shards
//! made and deleted, releases, proposals and their answers, bounded
//! leases, `Lead`; a clunk ends the attachment, a hang-up starts its grace,
//! `tick` acts on deadlines. Sans I/O, on one session under its lock.
//!
//! - A connection's first frame is Hello; the daemon answers Welcome with
//!   a snapshot and from then on sends every shard's new entries (the
//!   metalog first), except the connection's own appends, which its
//!   replica has (known by the Welcome generation each append carries).
//! - Appends are fenced by the authority log and applied whole or not at
//!   all; the leader hears `Acked`.
//! - A clunk ends the attachment (Detach, its leases reclaimed); a hang-up
//!   starts a grace period in which `Hello { resume }` continues it.

use super::error::AttachError;
use super::feed::welcome;
use super::hub::{Ask, Bounded, ChangeMarks, ConnId, Written};
use super::lease::{ask, ask_for_all, end, give_back, grant_asked, hand_over_from, mend_layout, reclaim};
use crate::attach::route::{self, answer, redispatch, submit};
use crate::session::Session;
use apex_core::{AttachmentId, AttachmentKind, MetaOp, Seq, Shard};
use apex_link::wire::{ClientMsg, Refusal, Resume, ServerMsg, MAX_LEASE_TTL_MS};

fn ui_or_tool(kind: AttachmentKind) -> &'static str {
    match kind {
        AttachmentKind::Ui => "ui",
        AttachmentKind::Tool => "tool",
    }
}

/// The most bytes of messages not yet whole the connections of a session
/// hold in all (each holds at most `CLIENT_MESSAGE_MAX`).
pub const UNFINISHED_MAX: usize = 64 << 20;

/// Messages a connection may leave unread (acks, answers, proposals)
/// before its proposals are refused.
const MAX_UNREAD: usize = 4096;

/// One Twrite's bytes. It may complete at most one frame; that frame's
/// outcome is the write's. A refused write leaves nothing behind.
pub fn write(s: &mut Session, conn: ConnId, bytes: &[u8], now: u64) -> Result<Written, AttachError> {
    s.hub_mut().now = now;
    let c = s.hub_mut().conns.get_mut(&conn).ok_or(AttachError::ConnectionGone)?;
    if c.grace_until.is_some() {
        // Only a broken stream's fid outlives its hang-up: it takes
        // nothing more (a Welcome for it would end its grace).
        return Err(AttachError::StreamBroken);
    }
    let before = c.frames.pending();
    c.frames.push(bytes);
    let whole = match c.frames.whole() {
        Ok(w) => w,
        Err(e) => {
            // Only this write's bytes go: the header it finished is bad.
            c.frames.truncate(before);
            return Err(e.into());
        }
    };
    let Some(n) = whole else {
        // Each connection holds at most a client's message unfinished;
        // the session's hold no more than UNFINISHED_MAX in all, however
        // many attach files are opened and left half-written.
        let held: usize = s.hub().conns.values().map(|c| c.frames.pending()).sum();
        if held > UNFINISHED_MAX {
            let c = s.hub_mut().conns.get_mut(&conn).expect("live");
            c.frames.truncate(before);
            return Err(AttachError::Unfinished { held: held - bytes.len(), max: UNFINISHED_MAX });
        }
        return Ok(Written::Done);
    };
    if c.frames.pending() > n {
        let extra = c.frames.pending() - n;
        c.frames.truncate(before);
        return Err(AttachError::TrailingBytes(extra));
    }
    let msg = c.frames.next_msg::<ClientMsg>()?.expect("whole frame");
    // A client applies its own appends, creations and deletions before
    // the daemon sees them: one refused means its replica has diverged, so
    // it is sent a fresh Welcome (its link recovers what was lost).
    let diverges =
        matches!(msg, ClientMsg::Append { .. } | ClientMsg::CreateShard { .. } | ClientMsg::DeleteShard { .. });
    let out = handle(s, conn, msg, now);
    if out.is_err() && diverges {
        if let Some(a) = s.hub().conns.get(&conn).and_then(|c| c.attachment) {
            welcome(s, conn, a);
        }
    }
    redispatch(s);
    out
}

/// Whether some of the entries `applied` made on `shard` were taken from
/// `a` (in an earlier append of the same flush).
fn partly_taken(s: &Session, a: AttachmentId, shard: Shard, applied: &apex_core::propose::Applied) -> bool {
    applied.entries.iter().filter(|run| run.shard == shard).any(|run| {
        s.view().log.shard(run.shard).is_ok_and(|l| match l.get(run.first) {
            Some(e) => e.attachment == a,
            // Already let go of (every connection was sent it): it was
            // in the log, and is taken as made, so as not to make it twice.
            None => run.first <= l.base,
        })
    })
}

/// The fid was clunked: the attachment ends now, unless its stream broke
/// (it is in its grace already, waiting for the resume its client was
/// told to make, which closing the broken fid first must not spoil).
pub fn clunk(s: &mut Session, conn: ConnId, now: u64) {
    s.hub_mut().now = now;
    if s.hub().conns.get(&conn).is_some_and(|c| c.grace_until.is_some()) {
        return;
    }
    if let Some(c) = s.hub_mut().conns.remove(&conn) {
        if let Some(a) = c.attachment {
            end(s, a);
        }
    }
    redispatch(s);
}

/// The connection went without a clunk: the attachment waits out its
/// grace for a resume, and what others asked it for, which it can no
/// longer hand over, goes to them now.
pub fn hangup(s: &mut Session, conn: ConnId, now: u64) {
    start_grace(s, conn, now);
    // (Its stream may have broken before: the grace runs from then, but
    // it is gone only now.)
    let Some(c) = s.hub_mut().conns.get_mut(&conn) else { return };
    let Some(a) = c.attachment else { return };
    c.hung_up = true;
    hand_over_from(s, a, now);
    redispatch(s);
}

/// Starts the grace of the attachment on `conn`, unless it has begun.
fn start_grace(s: &mut Session, conn: ConnId, now: u64) {
    s.hub_mut().now = now;
    let grace = s.hub().config.grace_ms;
    let hub = s.hub_mut();
    let Some(c) = hub.conns.get_mut(&conn) else { return };
    if c.attachment.is_none() {
        hub.conns.remove(&conn);
        return;
    }
    if c.grace_until.is_some() {
        // Its stream broke before: the grace runs from then.
        return;
    }
    c.grace_until = Some(now + grace);
    c.frames.clear();
    hub.wakeups.push(now + grace);
    // The clocks of the proposals it was sent stop while it is away.
    if let Some(a) = c.attachment {
        for p in s.hub_mut().pending.values_mut().filter(|p| p.sent_to == Some(a)) {
            p.pause(a, now);
        }
    }
}

/// The connection's stream broke (its Welcome could not be encoded, or a
/// read lost bytes to a fault): it is taken as hung up, once, so its
/// attachment waits out its grace, holding back no compaction, and its
/// client can attach again and resume it, as the error it reads says.
/// Nothing is taken from it here: its client resumes at once, and a
/// change being undone appends nothing.
pub fn broken(s: &mut Session, conn: ConnId, now: u64) {
    if s.hub().conns.get(&conn).is_some_and(|c| c.attachment.is_some() && c.grace_until.is_none()) {
        start_grace(s, conn, now);
    }
}

/// The change that began at `marks` was undone (the log's file did not
/// take it; `Session::roll_back` put the state back): what it told the
/// connections is taken back, the proposals it routed are refused to
/// their writers (`why`), and every attached connection's stream is
/// broken, so its client resumes and is welcomed with the state as it is
/// now, its own entries since its last acknowledgement sent again.
pub fn undone(s: &mut Session, marks: &ChangeMarks, why: &str) {
    let now = marks.now.max(s.hub().now);
    s.hub_mut().now = now;
    let hub = s.hub_mut();
    // The leadership moves the change began are taken back with it, and
    // with a reclaim undone, its holder may resume again.
    hub.asks.clone_from(&marks.asks);
    hub.bounded.clone_from(&marks.bounded);
    hub.leading_ui = marks.leading_ui;
    for (id, c) in hub.conns.iter_mut() {
        c.lost_lease = marks.lost_lease.contains(id);
    }
    let made: Vec<u64> = hub.pending.range(marks.pending..).map(|(id, _)| *id).collect();
    for id in made {
        if let Some(reply) = hub.pending.remove(&id).and_then(|p| p.reply) {
            let _ = reply.send(Err(Refusal::Said(why.to_string())));
        }
    }
    for (id, c) in hub.conns.iter_mut() {
        c.control.truncate(marks.control.get(id).copied().unwrap_or(0));
    }
    let attached: Vec<ConnId> = hub
        .conns
        .iter()
        .filter(|(_, c)| c.attachment.is_some() && c.grace_until.is_none())
        .map(|(id, _)| *id)
        .collect();
    for conn in attached {
        s.hub().conns[&conn].taken.break_off();
        broken(s, conn, now);
    }
    // An attachment whose connection the change ended (a clunk, a grace
    // run out, a resume's old one) is attached again in the state: it
    // waits out a grace with no connection, and ends as graces end.
    let grace = s.hub().config.grace_ms;
    let orphans: Vec<(AttachmentId, AttachmentKind)> = s
        .view()
        .state
        .meta
        .attachments
        .iter()
        .filter(|(a, _)| **a != AttachmentId::SERVER && s.hub().conn_of(**a).is_none())
        .map(|(a, info)| (*a, info.kind))
        .collect();
    for (a, kind) in orphans {
        let token = s.hub_mut().mint();
        let hub = s.hub_mut();
        let id = hub.open();
        let c = hub.conns.get_mut(&id).expect("just opened");
        (c.attachment, c.kind, c.token, c.grace_until) = (Some(a), kind, token, Some(now + grace));
        c.hung_up = true;
        hub.wakeups.push(now + grace);
    }
}

/// Acts on whatever is due at `now`: requested leases past their
/// deadline are reclaimed and granted, graces that ran out end their
/// attachments, bounded leases that expired go back.
pub fn tick(s: &mut Session, now: u64) {
    s.hub_mut().now = now;
    let late: Vec<(Shard, Ask)> =
        s.hub().asks.iter().filter(|(_, a)| a.deadline <= now).map(|(k, v)| (*k, *v)).collect();
    for (shard, ask) in late {
        let Ok(lease) = s.view().log.lease(shard) else {
            s.hub_mut().asks.remove(&shard);
            continue;
        };
        if lease.holder == ask.by && lease.released.is_none() {
            s.hub_mut().asks.remove(&shard);
            continue;
        }
        tracing::info!(session = %s.label(), %shard, holder = %lease.holder, "lease not released by the deadline; reclaimed");
        reclaim(s, shard);
        grant_asked(s, shard, now);
    }
    let ended: Vec<(ConnId, AttachmentId)> = s
        .hub()
        .conns
        .iter()
        .filter(|(_, c)| c.grace_until.is_some_and(|t| t <= now))
        .filter_map(|(id, c)| c.attachment.map(|a| (*id, a)))
        .collect();
    for (id, a) in ended {
        tracing::info!(session = %s.label(), attachment = %a, "resume grace ran out; detached");
        s.hub_mut().conns.remove(&id);
        end(s, a);
    }
    let expired: Vec<(Shard, Bounded)> =
        s.hub().bounded.iter().filter(|(_, b)| b.expires <= now).map(|(k, v)| (*k, *v)).collect();
    for (shard, b) in expired {
        s.hub_mut().bounded.remove(&shard);
        if s.view().log.lease(shard).is_ok_and(|l| l.holder == b.holder) {
            reclaim(s, shard);
            give_back(s, shard, b.return_to);
            if let Some(id) = s.hub().live_conn_of(b.holder) {
                let text = format!("lease of {shard} expired; later appends are fenced");
                s.hub_mut().conns.get_mut(&id).expect("found").control.push_back(ServerMsg::Error { text });
            }
        }
    }
    route::reclaim_stuck(s, now);
    redispatch(s);
    if let Some(at) = next_deadline(s, now) {
        s.hub_mut().wakeups.push(at);
    }
}

/// The soonest deadline after `now` that a tick acts on: an ask's, a
/// resume grace's, a bounded lease's, a routed proposal's. (One already
/// past was acted on, or waits for something else: it arms nothing.)
fn next_deadline(s: &Session, now: u64) -> Option<u64> {
    let asks = s.hub().asks.values().map(|a| a.deadline);
    let graces = s.hub().conns.values().filter_map(|c| c.grace_until);
    let bounded = s.hub().bounded.values().map(|b| b.expires);
    let routed = s.hub().pending.values().map(|p| p.deadline);
    asks.chain(graces).chain(bounded).chain(routed).filter(|at| *at > now).min()
}

fn handle(s: &mut Session, conn: ConnId, msg: ClientMsg, now: u64) -> Result<Written, AttachError> {
    let c = &s.hub().conns[&conn];
    let Some(a) = c.attachment else {
        return match msg {
            ClientMsg::Hello { kind, name, resume } => hello(s, conn, kind, &name, resume, now).map(|_| Written::Done),
            _ => Err(AttachError::NotHello),
        };
    };
    let kind = c.kind;
    match msg {
        ClientMsg::Hello { .. } => Err(AttachError::AlreadyAttached(a)),
        ClientMsg::Propose { .. } | ClientMsg::Lease { .. } | ClientMsg::CreateShard { .. }
            if s.hub().conns[&conn].control.len() >= MAX_UNREAD =>
        {
            // Each may add a message that waits for the client to read it
            // (an answer, a lease's expiry, an ack): one that never reads
            // may not make more. (Only such frames are refused, never an
            // append or an answer, which the session needs whatever the
            // client reads.)
            Err(AttachError::Unread(s.hub().conns[&conn].control.len()))
        }
        ClientMsg::Append { shard, entries, generation, answers } => {
            crate::access::limit_entries(&entries)?;
            if let Err(e) = append(s, conn, a, shard, entries, generation) {
                for (id, result) in answers {
                    // Taken from it and acted on elsewhere meanwhile: what
                    // it made for it goes.
                    if route::answered_late(s, a, id, &result) {
                        continue;
                    }
                    // A long change comes in several appends, its answers
                    // with the last: if an earlier one was taken, part of
                    // it stands, and acting on it again would make that
                    // part twice. It is refused, saying so (the rest comes
                    // back to its leader as a fenced tail, recovered).
                    if let Ok(applied) = &result {
                        if partly_taken(s, a, shard, applied) {
                            let why = "the change was cut short: its leader lost the lease while sending it, \
                                       and only its first part was taken; the rest is in that leader's +Recovered window";
                            let _ = answer(s, a, id, Err(why.to_string().into()));
                            continue;
                        }
                    }
                    // Its proposals' entries were not taken: whoever holds
                    // the shard now acts on them again.
                    // (If that is this one again, at the same epoch, with
                    // what was left of its deadline, not a new one: a
                    // holder that keeps sending bad appends is stuck all
                    // the same.)
                    if let Some(p) = s.hub_mut().pending.get_mut(&id).filter(|p| p.sent_to == Some(a)) {
                        p.pause(a, now);
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
            if shard.is_pinned() || shard == Shard::Layout || shard.issuer() != Some(a) {
                return Err(AttachError::NotItsShard(shard));
            }
            s.view_mut().create_shard_for(shard, a)?;
            s.hub_mut().conns.get_mut(&conn).expect("live").sent.insert(shard, 0);
            match s.hub().leading_ui.filter(|l| *l != a && kind == AttachmentKind::Ui) {
                Some(leader) => ask(s, shard, leader, None, now).map(|_| Written::Done),
                None => Ok(Written::Done),
            }
        }
        ClientMsg::DeleteShard { shard } => {
            let lease = s.view().log.lease(shard)?;
            if lease.holder != a || lease.released.is_some() {
                return Err(AttachError::NotTheLeader { shard, holder: lease.holder });
            }
            s.view_mut().delete_shard(shard)?;
            s.hub_mut().asks.remove(&shard);
            s.hub_mut().bounded.remove(&shard);
            // An unread ack of a shard gone says nothing any more.
            let c = s.hub_mut().conns.get_mut(&conn).expect("live");
            c.control.retain(|m| !matches!(m, ServerMsg::Acked { shard: acked, .. } if *acked == shard));
            // A window deleted by one that no longer leads the layout (its
            // unplacing fenced): the layout's leader drops its place.
            if matches!(shard, Shard::Window(_)) {
                mend_layout(s);
            }
            Ok(Written::Done)
        }
        ClientMsg::Release { shard, seq } => {
            let op = s.view().log.release_op(shard, a, seq)?;
            s.view_mut().push_meta(op)?;
            let bounded = s.hub_mut().bounded.remove(&shard).filter(|b| b.holder == a);
            if s.hub().asks.contains_key(&shard) {
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
            let proposal = crate::access::limit_proposal(proposal, |b| crate::access::events_read(&s.view().state, b))?;
            Ok(submit(s, &format!("propose from {a} #{id}"), proposal, Some((a, id)), now))
        }
        ClientMsg::Answer { id, result } => answer(s, a, id, result).map(|_| Written::Done),
        ClientMsg::Lease { shard, ttl_ms } => {
            if kind != AttachmentKind::Tool || !matches!(shard, Shard::Buffer(_)) {
                return Err(AttachError::BoundedLeaseNotHere(shard));
            }
            if s.hub().bounded.values().any(|b| b.holder == a) || s.hub().asks.values().any(|k| k.by == a) {
                return Err(AttachError::OneBoundedLease);
            }
            if !(1..=MAX_LEASE_TTL_MS).contains(&ttl_ms) {
                return Err(AttachError::Ttl);
            }
            ask(s, shard, a, Some(ttl_ms), now).map(|_| Written::Done)
        }
        ClientMsg::Notify { text } => {
            s.view_mut().push_meta(MetaOp::Notify { from: a, text })?;
            Ok(Written::Done)
        }
        // A tool's claim on text: its rules, in place of those it had,
        // until it detaches.
        ClientMsg::Rules { text } => {
            crate::plumb::rules::replace_rules(s, a, &text)?;
            Ok(Written::Done)
        }
        ClientMsg::Resync => {
            welcome(s, conn, a);
            Ok(Written::Done)
        }
        ClientMsg::Lead => {
            if kind != AttachmentKind::Ui {
                return Err(AttachError::LeadIsForUis);
            }
            ask_for_all(s, a, now).map(|_| Written::Done)
        }
    }
}

fn hello(
    s: &mut Session,
    conn: ConnId,
    kind: AttachmentKind,
    name: &str,
    resume: Option<Resume>,
    now: u64,
) -> Result<(), AttachError> {
    if let Some(r) = resume {
        match resumable(s, r) {
            Ok(old) => {
                let token = s.hub_mut().mint();
                let was = s.hub_mut().conns.remove(&old).expect("found");
                let c = s.hub_mut().conns.get_mut(&conn).expect("live");
                c.attachment = Some(r.attachment);
                c.kind = was.kind;
                c.token = token;
                // Answers to its proposals that came meanwhile.
                let answers = was.control.into_iter().filter(|m| matches!(m, ServerMsg::Answer { .. }));
                c.control.extend(answers);
                limit(s, r.attachment);
                welcome(s, conn, r.attachment);
                // Proposals it had not answered go to it again.
                for p in s.hub_mut().pending.values_mut() {
                    if p.sent_to == Some(r.attachment) {
                        p.sent_to = None;
                    }
                }
                tracing::info!(session = %s.label(), attachment = %r.attachment, "resumed");
                return Ok(());
            }
            Err(why) => {
                let text = format!("resume of {} refused: {why}; attached anew", r.attachment);
                s.hub_mut().conns.get_mut(&conn).expect("live").control.push_back(ServerMsg::Error { text });
            }
        }
    }
    let a = s.view_mut().log.next_attachment()?;
    s.view_mut().push_meta(MetaOp::Attach { attachment: a, kind, name: name.to_string() })?;
    let token = s.hub_mut().mint();
    let c = s.hub_mut().conns.get_mut(&conn).expect("live");
    c.attachment = Some(a);
    c.kind = kind;
    c.token = token;
    limit(s, a);
    tracing::info!(session = %s.label(), attachment = %a, kind = ui_or_tool(kind), name, "attached");
    if kind == AttachmentKind::Ui {
        ask_for_all(s, a, now)?;
    }
    welcome(s, conn, a);
    Ok(())
}

/// Notes attachment `a` as made with less than a full token, if it is
/// (`Hub::limited`).
fn limit(s: &mut Session, a: AttachmentId) {
    if crate::access::current() != crate::access::Scope::Full {
        s.hub_mut().limited.insert(a);
    }
}

/// Why a resume was refused (the client is attached anew instead).
#[derive(Debug, thiserror::Error)]
enum NoResume {
    #[error("no such attachment is waiting (its grace ran out, or it never was)")]
    NotWaiting,
    #[error("the resume token is wrong")]
    WrongToken,
    #[error("that attachment is still connected")]
    StillConnected,
    #[error("a lease it held was reclaimed meanwhile")]
    LeaseReclaimed,
}

/// The connection in its grace that `r` names, if it may resume.
fn resumable(s: &Session, r: Resume) -> Result<ConnId, NoResume> {
    let id = s.hub().conn_of(r.attachment).ok_or(NoResume::NotWaiting)?;
    let c = &s.hub().conns[&id];
    if c.token != r.token {
        return Err(NoResume::WrongToken);
    }
    if c.grace_until.is_none() {
        return Err(NoResume::StillConnected);
    }
    if c.lost_lease {
        return Err(NoResume::LeaseReclaimed);
    }
    Ok(id)
}

fn append(
    s: &mut Session,
    conn: ConnId,
    a: AttachmentId,
    shard: Shard,
    entries: Vec<apex_core::Entry>,
    generation: u64,
) -> Result<(), AttachError> {
    if shard == Shard::Meta {
        return Err(AttachError::MetalogIsTheDaemons);
    }
    if let Some(e) = entries.iter().find(|e| e.attachment != a) {
        return Err(AttachError::ForeignEntry { seq: e.seq, shard, claims: e.attachment, attachment: a });
    }
    let n = entries.len();
    if n == 0 {
        return Ok(());
    }
    s.view_mut().accept_all(shard, entries).map_err(|(i, reject)| match n {
        1 => AttachError::Rejected(reject),
        _ => AttachError::EntryRefused { reject, at: i + 1, of: n },
    })?;
    let last = s.view().log.last(shard);
    let c = s.hub_mut().conns.get_mut(&conn).expect("live");
    // The replica has these if it made them after our last Welcome and
    // has had everything before them; otherwise they are sent to it.
    let first = last + 1 - n as Seq;
    if generation == c.generation && c.sent.get(&shard).copied().unwrap_or(0) + 1 == first {
        c.sent.insert(shard, last);
    }
    // An ack says how far: a later one of the shard's, unread, says it.
    match c.control.iter_mut().find(|m| matches!(m, ServerMsg::Acked { shard: acked, .. } if *acked == shard)) {
        Some(ServerMsg::Acked { seq, .. }) => *seq = last,
        _ => c.control.push_back(ServerMsg::Acked { shard, seq: last }),
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use apex_core::propose::{Applied, Created, Run};

    /// A run of a change that is still in the log was taken from `a` only
    /// if `a` appended it; once let go of (every connection was sent it),
    /// it is taken as made, so that acting on its proposal again cannot
    /// make it twice.
    #[test]
    fn a_run_let_go_of_counts_as_taken() {
        let mut s = Session::new(1, "t", [1; 16]).unwrap();
        let other = AttachmentId(7);
        let last = s.view().log.shard(Shard::Meta).unwrap().last();
        assert!(last >= 1, "the session's making left entries");
        let applied = Applied { entries: vec![Run { shard: Shard::Meta, first: 1, last }], created: Created::Nothing };
        assert!(!partly_taken(&s, other, Shard::Meta, &applied), "in the log, made by the server, not by it");
        assert!(partly_taken(&s, AttachmentId::SERVER, Shard::Meta, &applied), "in the log, made by the server");
        s.view_mut().log.compact(Shard::Meta, last).unwrap();
        assert!(partly_taken(&s, other, Shard::Meta, &applied), "let go of: taken as made");
        let later = Applied { entries: vec![Run { shard: Shard::Meta, first: last + 1, last: last + 1 }], ..applied };
        assert!(!partly_taken(&s, other, Shard::Meta, &later), "never made");
    }

    /// A change that took a lease back from an attachment in its grace
    /// (a hang-up handing over what was asked of it), undone because the
    /// log's file did not take it: the lease is the attachment's again in
    /// the state rolled back, so its resume is no longer refused.
    #[test]
    fn a_reclaim_undone_with_its_change_lets_its_holder_resume() {
        let mut s = Session::new(1, "t", [1; 16]).unwrap();
        let (gone, a) = (s.hub_mut().open(), AttachmentId(7));
        s.hub_mut().conns.get_mut(&gone).unwrap().attachment = Some(a);
        let marks = s.hub().marks(10);
        hangup(&mut s, gone, 10);
        super::super::lease::fenced(&mut s, a);
        assert!(s.hub().conns[&gone].lost_lease, "fenced in its grace");
        undone(&mut s, &marks, "the disk is full");
        let c = &s.hub().conns[&gone];
        assert!(!c.lost_lease && c.grace_until.is_some(), "in its grace, free to resume");
    }
}
