//! Leadership moves in one session: a lease asked for is granted at once
//! when free or its holder's connection is gone, and requested from its
//! holder otherwise (granted when the holder releases it, or reclaimed at
//! the deadline); the server takes a
//! lease back (epoch + 1) when its holder ends or is stuck; a tool's
//! bounded lease goes back to the UI that led the shard before.

use super::error::AttachError;
use super::hub::{Ask, Bounded};
use crate::session::Session;
use apex_core::{AttachmentId, AttachmentKind, MetaOp, Shard};

/// A UI asks for every shard a UI leads (the layout, windows, buffers):
/// at attach, and again with `Lead`.
/// A tool's bounded lease, held or asked for, is left to it: the shard
/// comes to this UI when it ends.
pub(crate) fn ask_for_all(s: &mut Session, a: AttachmentId, now: u64) -> Result<(), AttachError> {
    s.hub_mut().leading_ui = Some(a);
    let shards: Vec<Shard> =
        s.view().log.shards().map(|(sh, _)| *sh).filter(|sh| !sh.is_pinned() && *sh != Shard::Meta).collect();
    for shard in shards {
        if let Some(b) = s.hub_mut().bounded.get_mut(&shard) {
            b.return_to = a;
            continue;
        }
        if let Some(k) = s.hub_mut().asks.get_mut(&shard).filter(|k| k.ttl_ms.is_some() && k.by != a) {
            k.return_to = Some(a);
            continue;
        }
        ask(s, shard, a, None, now)?;
    }
    Ok(())
}

/// Asks for `shard` on behalf of `by`: granted at once when free,
/// requested from the holder otherwise.
pub(crate) fn ask(
    s: &mut Session,
    shard: Shard,
    by: AttachmentId,
    ttl_ms: Option<u64>,
    now: u64,
) -> Result<(), AttachError> {
    let lease = *s.view().log.lease(shard)?;
    if lease.holder == by && lease.released.is_none() {
        return Ok(());
    }
    let deadline = now + s.hub().config.deadline_ms;
    s.hub_mut().asks.insert(shard, Ask { by, deadline, ttl_ms, return_to: None });
    // A holder whose connection dropped (in its grace, a UI killed or cut
    // off) cannot hand the lease over: it is taken back now, not at the
    // deadline, so a UI started again after a crash leads at once. Should
    // the holder resume, it is fenced, and what it had not sent is
    // recovered as a holder's reclaimed at the deadline is.
    if lease.is_free() || away(s, lease.holder) {
        grant_asked(s, shard, now);
        return Ok(());
    }
    s.view_mut().push_meta(MetaOp::LeaseRequest { shard, by })?;
    s.hub_mut().wakeups.push(deadline);
    Ok(())
}

/// Whether attachment `a`'s connection is gone (it hung up, or was
/// restored with its session and has not come back), so it cannot hand
/// over a lease asked of it.
pub(crate) fn away(s: &Session, a: AttachmentId) -> bool {
    s.hub().conn_of(a).is_some_and(|c| s.hub().conns[&c].hung_up)
}

/// `a`'s connection dropped: what others asked it for, which it can no
/// longer hand over, is taken back and granted now (as [`ask`] does for a
/// holder already gone when asked).
pub(crate) fn hand_over_from(s: &mut Session, a: AttachmentId, now: u64) {
    let held: Vec<Shard> = s
        .hub()
        .asks
        .iter()
        .filter(|(shard, ask)| {
            ask.by != a && s.view().log.lease(**shard).is_ok_and(|l| l.holder == a && l.released.is_none())
        })
        .map(|(shard, _)| *shard)
        .collect();
    for shard in held {
        grant_asked(s, shard, now);
    }
}

/// Grants `shard` to whoever asked for it, if that one is still here; the
/// lease is free (released or the server's) or taken back here from a
/// holder that is stuck or gone.
pub(crate) fn grant_asked(s: &mut Session, shard: Shard, now: u64) {
    let Some(ask) = s.hub_mut().asks.remove(&shard) else { return };
    if !s.view().state.meta.attachments.contains_key(&ask.by) {
        // It went meanwhile: the server leads rather than nobody.
        reclaim(s, shard);
        return;
    }
    let Ok(lease) = s.view().log.lease(shard).copied() else { return };
    if !lease.is_free() {
        reclaim(s, shard);
    }
    let Ok(op) = s.view().log.grant_op(shard, ask.by) else { return };
    if s.view_mut().push_meta(op).is_err() {
        return;
    }
    if let Some(ttl) = ask.ttl_ms {
        // Back to whoever released it to this one; a lease taken back
        // from its holder (gone) goes back to the server.
        let before = match lease.holder == ask.by || !lease.is_free() {
            true => AttachmentId::SERVER,
            false => lease.holder,
        };
        let return_to = ask.return_to.unwrap_or(before);
        s.hub_mut().bounded.insert(shard, Bounded { holder: ask.by, expires: now + ttl, return_to });
        s.hub_mut().wakeups.push(now + ttl);
    }
}

/// The server takes `shard` back (epoch + 1): the view node leads it.
pub(crate) fn reclaim(s: &mut Session, shard: Shard) {
    let Ok(lease) = s.view().log.lease(shard).copied() else { return };
    if lease.holder == AttachmentId::SERVER && lease.released.is_none() {
        return;
    }
    if let Ok(op) = s.view().log.reclaim_op(shard) {
        if s.view_mut().push_meta(op).is_ok() {
            fenced(s, lease.holder);
            mend_layout(s);
        }
    }
}

/// Places the windows the layout does not place that the server now
/// leads with the layout (`make::mend_layout`, which also drops the place
/// of a window that is gone): a leader that lost the layout before
/// placing a window it made leaves it so. Where a UI leads the layout,
/// such a window the server leads is granted to it, and its replica
/// places it.
pub(crate) fn mend_layout(s: &mut Session) {
    let Ok(layout) = s.view().log.lease(Shard::Layout).copied() else { return };
    if layout.holder != AttachmentId::SERVER {
        if layout.released.is_some() {
            return;
        }
        let lost: Vec<Shard> = apex_core::make::unplaced(&s.view().state)
            .into_iter()
            .map(Shard::Window)
            .filter(|w| s.view().leads(*w))
            .collect();
        for shard in lost {
            if let Ok(op) = s.view().log.grant_op(shard, layout.holder) {
                let _ = s.view_mut().push_meta(op);
            }
        }
        return;
    }
    match apex_core::make::mend_layout(s.view_mut()) {
        Ok((0, 0)) => {}
        Ok((placed, dropped)) => {
            tracing::info!(session = %s.label(), placed, dropped, "mended the layout a fenced leader left");
        }
        Err(e) => tracing::warn!(session = %s.label(), error = %e, "could not place a window nothing placed"),
    }
}

/// After the server took `shard` back from a holder that would not let
/// go: a bounded lease goes back to whoever lent it, an ask waiting for
/// it is granted.
pub(crate) fn pass_on(s: &mut Session, shard: Shard, now: u64) {
    if let Some(b) = s.hub_mut().bounded.remove(&shard) {
        give_back(s, shard, b.return_to);
    } else if s.hub().asks.contains_key(&shard) {
        grant_asked(s, shard, now);
    }
}

/// `holder` lost a lease to the server: in its resume grace, it may no
/// longer resume (its replica leads what it does not).
pub(crate) fn fenced(s: &mut Session, holder: AttachmentId) {
    if let Some(id) = s.hub().conn_of(holder) {
        let c = s.hub_mut().conns.get_mut(&id).expect("found");
        if c.grace_until.is_some() {
            c.lost_lease = true;
        }
    }
}

/// After a bounded lease: back to the UI that had it, if it is still
/// attached; otherwise the server keeps it.
pub(crate) fn give_back(s: &mut Session, shard: Shard, to: AttachmentId) {
    if to == AttachmentId::SERVER || !s.view().state.meta.attachments.contains_key(&to) {
        return;
    }
    if let Ok(op) = s.view().log.grant_op(shard, to) {
        let _ = s.view_mut().push_meta(op);
    }
}

/// The leading UI went: the UI attached most recently of those still
/// connected (the one that watched it, most likely) leads again, as if
/// it had said `Lead`; with none, the server keeps the shards.
fn lead_passes_on(s: &mut Session) {
    let hub = s.hub();
    let next = s
        .view()
        .state
        .meta
        .attachments
        .iter()
        .filter(|(id, at)| at.kind == AttachmentKind::Ui && hub.live_conn_of(**id).is_some())
        .map(|(id, _)| *id)
        .next_back();
    if let Some(ui) = next {
        let now = s.hub().now;
        if ask_for_all(s, ui, now).is_ok() {
            tracing::info!(session = %s.label(), attachment = %ui, "leads again: the leading UI went");
        }
    }
}

/// Ends attachment `a`: Detach, then its leases go back to the server,
/// and if it was the leading UI, to the UI that is left.
pub(crate) fn end(s: &mut Session, a: AttachmentId) {
    if s.view_mut().push_meta(MetaOp::Detach { attachment: a }).is_err() {
        return;
    }
    let held: Vec<Shard> = s.view().log.held_by(a).into_keys().filter(|sh| *sh != Shard::Meta).collect();
    for shard in held {
        reclaim(s, shard);
        let b = s.hub_mut().bounded.remove(&shard);
        if let Some(b) = b.filter(|b| b.holder == a) {
            give_back(s, shard, b.return_to);
        }
    }
    mend_layout(s);
    s.hub_mut().asks.retain(|_, k| k.by != a);
    s.hub_mut().taken_from.retain(|(_, h)| *h != a);
    for p in s.hub_mut().pending.values_mut() {
        if p.last_sent_to == Some(a) {
            p.last_sent_to = None;
        }
    }
    if s.hub().leading_ui == Some(a) {
        s.hub_mut().leading_ui = None;
        lead_passes_on(s);
    }
    for p in s.hub_mut().pending.values_mut() {
        if p.sent_to == Some(a) {
            p.sent_to = None;
        }
    }
    tracing::info!(session = %s.label(), attachment = %a, "detached");
}
