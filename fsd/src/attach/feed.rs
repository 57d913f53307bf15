//! What a connection of `NAME/attach` reads: control messages and every
//! shard's new entries framed when the connection has read what was framed
//! before (so a slow reader holds back only itself), a Welcome's snapshot
//! encoded off its session's lock where it was framed (a snapshot grows with
//! the session's buffers), and the compaction of entries every connection
//! has had.
//!
//! In detail, what each connection reads (`read`, `read_deferred`): control messages
//! and every shard's new entries, framed once the connection has read what
//! was framed before; a Welcome's state is copied when it is queued and
//! framed as a hole in the connection's bytes, handed out
//! (`Readable::Welcome`) to be encoded with no lock held and put in place
//! (`welcomed`), or, when big, encoded on a blocking thread in parts of
//! `WELCOME_PART` that go into the hole as reads come to it (`in_parts`; a
//! read finding none yet waits; `None` ends them, and an encoder gone
//! without it leaves the hole `Broken`: every read of that connection
//! fails, since part of a Welcome was read; so does a small Welcome whose
//! encoding panicked, `unfinished`), so a client can decode the first while
//! the rest is encoded; once the hole is filled the read goes on to frame
//! what came meanwhile; a read that takes all there is gets it as it is,
//! not copied. So the order of what a connection reads is what it was
//! framed in: a Welcome, then errors (a refused resume's reaches the
//! replica that Welcome makes), then entries, then acks, answers and routed
//! proposals; compaction up to the lowest cursor of the live connections,
//! never a shard with an open `entries`/`event` reader. A live connection
//! that read nothing since the last compaction point, has no read waiting
//! (`Waiting`: a client blocked in a read is reading, however long the
//! writes that wake it hold the lock) and is behind is sent a fresh Welcome
//! there (`welcome_stalled`; `welcome` lives here): its cursors move to the
//! end, so a client that stopped reading holds back no entry.

use super::error::AttachError;
use super::hub::{Conn, ConnId, Filling, Hole, Taken, WelcomeJob};
use crate::session::Session;
use apex_core::{AttachmentId, Seq, Shard};
use apex_link::wire::ServerMsg;
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

/// What a read of `attach` gets.
#[derive(Debug)]
pub enum Readable {
    Bytes(Vec<u8>),
    /// Nothing yet: the read waits.
    Nothing,
    /// A Welcome to encode with no lock held, then hand back with
    /// [`welcomed`]: its frames are the connection's next bytes.
    Welcome(WelcomeJob),
}

/// Bytes per part of a Welcome encoded in parts: a part is what one read
/// at msize 1 MiB gets whole (its count is 1 MiB less the 9P header), so
/// it is handed over as it is; a read of less gets its bytes copied.
pub const WELCOME_PART: usize = (1 << 20) - (64 << 10);

/// Bytes for a read of up to `count`, or `None` when there is nothing yet
/// (the read waits). Entries are framed when the connection has read
/// everything framed before, so a slow reader holds back only itself.
pub fn read(s: &mut Session, conn: ConnId, count: u32) -> Result<Option<Vec<u8>>, AttachError> {
    loop {
        match read_deferred(s, conn, count)? {
            Readable::Bytes(b) => return Ok(Some(b)),
            Readable::Nothing => return Ok(None),
            Readable::Welcome(job) => welcomed(s, conn, job.frame()),
        }
    }
}

/// [`read`], but a Welcome comes out to be encoded by the caller with no
/// lock held (a snapshot grows with the session's buffers); the bytes
/// framed after it wait until [`welcomed`] puts its frames in place.
pub fn read_deferred(s: &mut Session, conn: ConnId, count: u32) -> Result<Readable, AttachError> {
    // Reading, however far behind: not to be sent a Welcome for stalling.
    s.hub_mut().conns.get_mut(&conn).ok_or(AttachError::ConnectionGone)?.read_lately = true;
    loop {
        let c = s.hub_mut().conns.get_mut(&conn).ok_or(AttachError::ConnectionGone)?;
        if c.taken.is_broken() {
            return Err(AttachError::StreamBroken);
        }
        if c.taken.is_held() {
            // After the read that holds bytes, whether it answers with
            // them or puts them back.
            return Ok(Readable::Nothing);
        }
        if c.out_read == c.out.len() && c.hole.is_none() {
            c.out.clear();
            c.out_read = 0;
            fill(s, conn);
            compact(s);
        }
        let c = s.hub_mut().conns.get_mut(&conn).expect("still there");
        if c.hole.as_ref().is_some_and(|h| h.at == c.out_read) {
            if let Some(waiting) = at_hole(c)? {
                return Ok(waiting);
            }
            if c.hole.is_none() && c.out_read == c.out.len() {
                // The Welcome is all read: what came meanwhile is framed now.
                continue;
            }
        }
        let end = match &c.hole {
            Some(h) => h.at,
            None => c.out.len(),
        };
        if c.out_read == end {
            return Ok(Readable::Nothing);
        }
        let end = (c.out_read + count as usize).min(end);
        if c.out_read == 0 && end == c.out.len() {
            // All there is: read as it is, not copied (a Welcome's part).
            if let Some(h) = &mut c.hole {
                h.at = 0;
            }
            return Ok(Readable::Bytes(std::mem::take(&mut c.out)));
        }
        let got = c.out[c.out_read..end].to_vec();
        c.out_read = end;
        return Ok(Readable::Bytes(got));
    }
}

/// Puts `bytes`, the last a read took, back in front of what is left to
/// read: the read was flushed before it could answer, and a flushed read
/// never happened (flush(5)).
pub fn unread(s: &mut Session, conn: ConnId, bytes: Vec<u8>) {
    let Some(c) = s.hub_mut().conns.get_mut(&conn) else { return };
    let n = bytes.len();
    if c.out_read == c.out.len() {
        // All there was (a Welcome's part, say): back as it is, before
        // the hole if there is one (a read never passes it).
        c.out = bytes;
        c.out_read = 0;
        if let Some(h) = &mut c.hole {
            h.at = n;
        }
    } else {
        c.out.splice(c.out_read..c.out_read, bytes);
        if let Some(h) = &mut c.hole {
            h.at += n;
        }
    }
}

/// Marks `conn`'s bytes just read as held by a read that has yet to
/// answer with them: later reads wait until it lets go ([`Taken::release`]).
pub fn hold(s: &mut Session, conn: ConnId) -> Option<std::sync::Arc<Taken>> {
    let c = s.hub_mut().conns.get_mut(&conn)?;
    c.taken.hold();
    Some(c.taken.clone())
}

/// A read that has come to the hole: the Welcome to encode, the next of
/// its parts put in place (`None`: read on), or nothing yet. An encoder
/// that stopped before its end leaves the connection's stream broken.
fn at_hole(c: &mut Conn) -> Result<Option<Readable>, AttachError> {
    let h = c.hole.as_mut().expect("at the hole");
    let parts = match std::mem::replace(&mut h.filling, Filling::Whole) {
        Filling::Job(job) => return Ok(Some(Readable::Welcome(job))),
        Filling::Whole => return Ok(Some(Readable::Nothing)),
        Filling::Broken => {
            h.filling = Filling::Broken;
            return Err(AttachError::WelcomeUnfinished);
        }
        Filling::Parts(parts) => parts,
    };
    match parts.try_recv() {
        Ok(Some(part)) => {
            h.filling = Filling::Parts(parts);
            // What was read goes first, so a part that is all there is to
            // read is read as it is.
            c.out.drain(..c.out_read);
            c.out_read = 0;
            if c.out.is_empty() {
                c.out = part;
                h.at = c.out.len();
            } else {
                let n = part.len();
                c.out.splice(0..0, part);
                h.at = n;
            }
            Ok(None)
        }
        // Every part is in place.
        Ok(None) => {
            c.hole = None;
            c.parts_read = true;
            Ok(None)
        }
        Err(std::sync::mpsc::TryRecvError::Empty) => {
            h.filling = Filling::Parts(parts);
            Ok(Some(Readable::Nothing))
        }
        Err(std::sync::mpsc::TryRecvError::Disconnected) => {
            tracing::warn!("a Welcome's encoder stopped before its end; its connection's stream is broken");
            h.filling = Filling::Broken;
            Err(AttachError::WelcomeUnfinished)
        }
    }
}

/// Whether a Welcome `conn` read in parts has had its last part put in
/// place since this was last asked (then the megabytes its parts held are
/// free in malloc's heap, which keeps them: `apex_sys::malloc`).
pub fn take_parts_read(s: &mut Session, conn: ConnId) -> bool {
    s.hub_mut().conns.get_mut(&conn).is_some_and(|c| std::mem::take(&mut c.parts_read))
}

/// The Welcome [`read_deferred`] gave out is being encoded in parts, sent
/// through `parts` as they are made, and then `None`, its end.
pub fn in_parts(s: &mut Session, conn: ConnId, parts: std::sync::mpsc::Receiver<Option<Vec<u8>>>) {
    if let Some(h) = s.hub_mut().conns.get_mut(&conn).and_then(|c| c.hole.as_mut()) {
        h.filling = Filling::Parts(parts);
    }
}

/// The Welcome [`read_deferred`] gave out could not be encoded: every read
/// of the connection fails from here (its readers are to be woken).
pub fn unfinished(s: &mut Session, conn: ConnId) {
    if let Some(h) = s.hub_mut().conns.get_mut(&conn).and_then(|c| c.hole.as_mut()) {
        h.filling = Filling::Broken;
    }
}

/// The frames of the Welcome [`read_deferred`] gave out, put where it was
/// framed. When they are all that is left to read, they become what is
/// read, as they are (a snapshot's frames are not copied again).
pub fn welcomed(s: &mut Session, conn: ConnId, frames: Vec<u8>) {
    let Some(c) = s.hub_mut().conns.get_mut(&conn) else { return };
    if let Some(h) = c.hole.take() {
        if h.at == c.out_read && h.at == c.out.len() {
            c.out = frames;
            c.out_read = 0;
        } else {
            c.out.splice(h.at..h.at, frames);
        }
    }
}

/// Entries per frame at most, so one frame stays a reasonable size.
const ENTRIES_PER_FRAME: usize = 4096;

/// Frames what the connection has not had: control messages first, then
/// entries, the metalog first.
fn fill(s: &mut Session, conn: ConnId) {
    let (hub, view) = s.hub_and_view();
    let c = hub.conns.get_mut(&conn).expect("live");
    if c.attachment.is_none() {
        return;
    }
    if c.grace_until.is_some() {
        return;
    }
    // Welcome, then errors, before entries, which follow its snapshot;
    // acks, answers and routed proposals after them, so a proposal arrives
    // after the grant that makes its receiver the leader. An error after
    // the Welcome it came with ("resume refused; attached anew") reaches
    // the replica that Welcome makes, which shows it, not the one it
    // replaces.
    let (welcomes, rest): (Vec<ServerMsg>, Vec<ServerMsg>) =
        c.control.drain(..).partition(|m| matches!(m, ServerMsg::Welcome { .. }));
    let (errors, after): (Vec<ServerMsg>, Vec<ServerMsg>) =
        rest.into_iter().partition(|m| matches!(m, ServerMsg::Error { .. }));
    for m in welcomes.into_iter().chain(errors) {
        let ServerMsg::Welcome { attachment, token, .. } = m else {
            c.out.extend_from_slice(&apex_link::wire::frame(&m));
            continue;
        };
        let job = WelcomeJob { attachment, token, state: c.welcomes.pop_front().expect("a state per Welcome") };
        // The first is left to encode off the lock; a second in one fill
        // (rare: a Resync right after a Hello) is encoded here.
        match c.hole {
            None => c.hole = Some(Hole { at: c.out.len(), filling: Filling::Job(job) }),
            Some(_) => c.out.extend_from_slice(&job.frame()),
        }
    }
    for (shard, log) in view.log.shards() {
        let from = c.sent.get(shard).copied().unwrap_or(0);
        if log.last() <= from {
            continue;
        }
        let Ok(after) = view.log.entries_after(*shard, from) else {
            // Compacted past this connection: cannot happen, the compaction
            // point is the lowest cursor; start it again from a snapshot.
            c.control.push_back(ServerMsg::Error { text: format!("{shard}: entries after {from} were compacted") });
            continue;
        };
        let mut batch = Vec::new();
        for e in after {
            batch.push(e.clone());
            if batch.len() == ENTRIES_PER_FRAME {
                let entries = std::mem::take(&mut batch);
                c.out.extend_from_slice(&apex_link::wire::frame(&ServerMsg::Entries { shard: *shard, entries }));
            }
        }
        if !batch.is_empty() {
            c.out.extend_from_slice(&apex_link::wire::frame(&ServerMsg::Entries { shard: *shard, entries: batch }));
        }
        c.sent.insert(*shard, log.last());
    }
    for m in &after {
        c.out.extend_from_slice(&apex_link::wire::frame(m));
    }
    // Deleted shards need no cursor.
    let log = &view.log;
    c.sent.retain(|sh, _| log.shard(*sh).is_ok());
}

/// Queues Welcome with a snapshot; the connection's cursors start at its
/// marks.
pub(crate) fn welcome(s: &mut Session, conn: ConnId, a: AttachmentId) {
    // A copy (ropes share their nodes), encoded when read, off the lock.
    let state = Box::new(s.view().state.clone());
    let sent: BTreeMap<Shard, Seq> = s.view().log.shards().map(|(sh, l)| (*sh, l.last())).collect();
    let c = s.hub_mut().conns.get_mut(&conn).expect("live");
    c.sent = sent;
    c.grace_until = None;
    c.hung_up = false;
    if let Some(queued) = c.welcomes.back_mut() {
        // One is queued unread: this state replaces its, as the client
        // would replace that one's replica with this (it reads one
        // Welcome, and counts one).
        *queued = state;
        return;
    }
    c.generation += 1;
    c.welcomes.push_back(state);
    c.control.push_back(ServerMsg::Welcome { attachment: a, token: c.token, snapshot: Vec::new() });
}

/// After a snapshot of the session's state went to its log's directory
/// (or a session kept nowhere took in `LOG_KEPT_BYTES`): a connection
/// that stopped reading is sent a Welcome, so it holds nothing back, and
/// the entries go as [`compact_sent`] lets them.
pub fn compact_covered(s: &mut Session) {
    if s.hub().conns.values().any(|c| c.attachment.is_some() && c.grace_until.is_none()) {
        welcome_stalled(s);
    }
    compact_sent(s);
}

/// Drops the entries every connection has been sent, or, with none
/// attached, every entry (the log on disk has them; a client attaching
/// is welcomed with the state). A shard someone reads the `entries` of
/// keeps its own. Unlike [`compact_covered`], a connection that stopped
/// reading is not sent a Welcome here: this runs every few megabytes,
/// and a reader between two reads must not be taken for one that
/// stopped; it holds entries back until the next snapshot's point.
pub fn compact_sent(s: &mut Session) {
    if s.hub().conns.values().any(|c| c.attachment.is_some() && c.grace_until.is_none()) {
        return compact(s);
    }
    let points: Vec<_> = s
        .view()
        .log
        .shards()
        .filter(|(shard, log)| s.hub().entry_readers.get(shard).is_none_or(|n| *n == 0) && log.last() > log.base)
        .map(|(shard, log)| (*shard, log.last()))
        .collect();
    for (shard, upto) in points {
        let _ = s.view_mut().log.compact(shard, upto);
    }
}

/// A read of a connection waiting for something to read, counted while it
/// waits (until it is dropped: woken, flushed or failed).
pub struct Waiting(Arc<AtomicUsize>);

impl Drop for Waiting {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
    }
}

/// A read of `conn` is about to wait (it found nothing to read).
pub fn waiting(s: &Session, conn: ConnId) -> Option<Waiting> {
    let count = s.hub().conns.get(&conn)?.waiting.clone();
    count.fetch_add(1, Ordering::AcqRel);
    Some(Waiting(count))
}

/// Connections that read nothing since the last compaction point, have
/// no read waiting, and are behind: each is sent a fresh Welcome (its cursors move to the end), so
/// a client that stopped reading (a stopped UI, a tool that never reads)
/// holds back no entry, and catches up from that Welcome if it reads
/// again. Every connection is then counted as not having read.
fn welcome_stalled(s: &mut Session) {
    let (hub, view) = s.hub_and_view();
    let log = &view.log;
    let stalled: Vec<(ConnId, AttachmentId)> = hub
        .conns
        .iter_mut()
        .filter_map(|(id, c)| {
            let read = std::mem::take(&mut c.read_lately) || c.waiting.load(Ordering::Acquire) > 0;
            let a = c.attachment?;
            let behind = log.shards().any(|(shard, l)| c.sent.get(shard).copied().unwrap_or(0) < l.last());
            (!read && c.grace_until.is_none() && behind).then_some((*id, a))
        })
        .collect();
    for (id, a) in stalled {
        tracing::info!(session = %s.label(), attachment = %a, "stopped reading while entries came; sent a Welcome");
        welcome(s, id, a);
    }
}

/// Drops `shard`'s entries that every attached connection has been sent
/// (all of them with none attached), unless someone reads its `entries`.
pub fn compact_shard(s: &mut Session, shard: Shard) {
    if s.hub().entry_readers.get(&shard).is_some_and(|n| *n > 0) {
        return;
    }
    let Ok(log) = s.view().log.shard(shard) else { return };
    let conns = s.hub().conns.values().filter(|c| c.attachment.is_some() && c.grace_until.is_none());
    let low = conns.map(|c| c.sent.get(&shard).copied().unwrap_or(0)).min().unwrap_or(log.last());
    if low > log.base {
        let _ = s.view_mut().log.compact(shard, low);
    }
}

/// Drops entries every connection has been sent.
fn compact(s: &mut Session) {
    // A connection in its grace resumes from a snapshot: it holds nothing back.
    let conns: Vec<&Conn> =
        s.hub().conns.values().filter(|c| c.attachment.is_some() && c.grace_until.is_none()).collect();
    if conns.is_empty() {
        return;
    }
    let mut points = Vec::new();
    for (shard, log) in s.view().log.shards() {
        if s.hub().entry_readers.get(shard).is_some_and(|n| *n > 0) {
            continue;
        }
        let low = conns.iter().map(|c| c.sent.get(shard).copied().unwrap_or(0)).min().unwrap_or(0);
        if low > log.base {
            points.push((*shard, low));
        }
    }
    for (shard, upto) in points {
        let _ = s.view_mut().log.compact(shard, upto);
    }
}
