//! `Log`: the in-memory store of one session's shard logs, and the fencing
//! authority.
//!
//! The same type plays two roles.
//!
//! - **Authority** (the daemon): it sequences the metalog itself
//!   (`push_meta`, always as SERVER at epoch 0), accepts other leaders'
//!   entries through `append_entry` only at the next seq and only from the
//!   current `(holder, epoch)`, and changes leases by appending metalog
//!   entries: `grant`, `reclaim` (each bumps the epoch), `request`,
//!   `release`.
//! - **Mirror** (a client): built from a welcome snapshot, it sequences
//!   ahead with the numbers the authority will assign, so a UI leads without
//!   waiting. It never writes metalog entries; `create_shard` assumes the
//!   creator's grant and tells the daemon through the [`MirrorHook`], and
//!   metalog entries arriving from the daemon keep its lease table in step
//!   (`note_meta`).
//!
//! Either way a shard's log is `ShardLog { entries, base }`: entries
//! `base+1..=last`, everything up to `base` compacted away (a snapshot
//! covers it).

use crate::entries::Entries;
use crate::entry::Entry;
use crate::error::{Reject, Result};
use crate::id::{AttachmentId, Epoch, RuleId, Seq};
use crate::lease::{Lease, Leases};
use crate::op::{MetaOp, Op};
use crate::shard::Shard;
use crate::state::State;
use std::collections::BTreeMap;

/// One shard's retained entries.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ShardLog {
    /// Entries `base+1..=base+len`, in order.
    pub entries: Entries,
    /// The last compacted seq.
    pub base: Seq,
}

impl ShardLog {
    fn from_base(base: Seq) -> ShardLog {
        ShardLog { entries: Entries::default(), base }
    }

    /// The last seq in this log.
    pub fn last(&self) -> Seq {
        self.base + self.entries.len() as Seq
    }

    /// Entry `seq`, if it is retained.
    pub fn get(&self, seq: Seq) -> Option<&Entry> {
        let i = seq.checked_sub(self.base + 1)?;
        self.entries.get(usize::try_from(i).ok()?)
    }
}

/// What a mirror tells the daemon about shards its node makes or drops, on
/// the same stream and before any entry that depends on it.
pub trait MirrorHook: Send {
    fn create_shard(&mut self, shard: Shard);
    fn delete_shard(&mut self, shard: Shard);
}

/// A hook that records what it was told, for tests and tools that send
/// nothing.
#[derive(Debug, Default, Clone)]
pub struct RecordingHook {
    pub sent: Vec<(bool, Shard)>,
}

impl MirrorHook for RecordingHook {
    fn create_shard(&mut self, shard: Shard) {
        self.sent.push((true, shard));
    }
    fn delete_shard(&mut self, shard: Shard) {
        self.sent.push((false, shard));
    }
}

/// Where an authority's entries go as it stores them (the daemon's
/// write-ahead log): every entry, in the order stored, before anyone can
/// read it from the log.
pub trait Sink: Send {
    fn stored(&mut self, shard: Shard, entry: &Entry);
}

enum Role {
    Authority,
    Mirror(Box<dyn MirrorHook>),
}

impl Role {
    /// Whether `lease` lets `entry` into `shard`: the authority only ever
    /// appends at the end, after every base, so it wants the current
    /// lease; a mirror may replay entries of earlier epochs after it has
    /// seen a later lease (metalog first).
    fn admits(&self, lease: &Lease, shard: Shard, entry: &Entry) -> Result<()> {
        match self {
            Role::Authority => lease.admits_now(shard, entry.attachment, entry.epoch),
            Role::Mirror(_) => lease.admit(shard, entry),
        }
    }
}

/// Whether `entry` may be appended to `shard` (whose log is `log`, if it
/// exists) now: the op fits, the shard exists, the lease admits it (the
/// fence first: a stale leader's entry is `fenced:` whatever its seq, so
/// it knows to stop leading), and the seq is next.
fn check_against(role: &Role, leases: &Leases, shard: Shard, log: Option<&ShardLog>, entry: &Entry) -> Result<()> {
    if !entry.op.fits(&shard) {
        return Err(Reject::WrongShard { op: entry.op.kind(), shard });
    }
    let log = log.ok_or(Reject::UnknownShard { shard })?;
    role.admits(leases.get(shard)?, shard, entry)?;
    let want = log.last() + 1;
    if entry.seq != want {
        return Err(Reject::Sequence { shard, got: entry.seq, want });
    }
    Ok(())
}

/// One session's logs and lease table.
pub struct Log {
    role: Role,
    /// Told of every entry stored, if set.
    sink: Option<Box<dyn Sink>>,
    shards: BTreeMap<Shard, ShardLog>,
    leases: Leases,
    next_attachment: u64,
    next_rule: u64,
}

impl std::fmt::Debug for Log {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Log")
            .field("authority", &self.is_authority())
            .field("shards", &self.shards)
            .field("leases", &self.leases)
            .finish()
    }
}

impl Log {
    /// A new session's authoritative log: only the empty metalog.
    pub fn authority() -> Log {
        Log::from_state(Role::Authority, &State::new())
    }

    /// The authoritative log of a session restored from `state`: every
    /// shard starts compacted up to what the state has applied.
    pub fn authority_from(state: &State) -> Log {
        Log::from_state(Role::Authority, state)
    }

    /// A client's mirror of the session whose snapshot is `state`.
    pub fn mirror(state: &State, hook: Box<dyn MirrorHook>) -> Log {
        Log::from_state(Role::Mirror(hook), state)
    }

    fn from_state(role: Role, state: &State) -> Log {
        Log {
            role,
            sink: None,
            shards: state.meta.shards().map(|s| (s, ShardLog::from_base(state.applied(s)))).collect(),
            leases: state.meta.leases.clone(),
            next_attachment: state.meta.next_attachment,
            next_rule: state.meta.next_rule,
        }
    }

    /// Takes over from `old` the entries this log's state has (those up to
    /// each shard's applied seq), so readers behind find them still: the
    /// log of a session put back to an earlier state (a change undone),
    /// whose later entries are dropped. A shard `old` kept no further
    /// back than the state keeps none.
    pub fn keep_entries_of(&mut self, old: Log) {
        for (shard, mut kept) in old.shards {
            let Some(now) = self.shards.get_mut(&shard) else { continue };
            let upto = now.base;
            if kept.base > upto || kept.last() < upto {
                continue;
            }
            kept.entries.truncate((upto - kept.base) as usize);
            *now = kept;
        }
    }

    /// Tells `sink` of every entry stored from now on.
    pub fn set_sink(&mut self, sink: Box<dyn Sink>) {
        self.sink = Some(sink);
    }

    pub fn is_authority(&self) -> bool {
        matches!(self.role, Role::Authority)
    }

    fn authority_only(&self, what: &'static str) -> Result<()> {
        match self.role {
            Role::Authority => Ok(()),
            Role::Mirror(_) => Err(Reject::MirrorCannot(what.to_string())),
        }
    }

    /// The shard's log, or an error naming it.
    pub fn shard(&self, shard: Shard) -> Result<&ShardLog> {
        self.shards.get(&shard).ok_or(Reject::UnknownShard { shard })
    }

    /// Every shard, the metalog first.
    pub fn shards(&self) -> impl Iterator<Item = (&Shard, &ShardLog)> {
        self.shards.iter()
    }

    /// The last seq of `shard` (0 if unknown).
    pub fn last(&self, shard: Shard) -> Seq {
        self.shards.get(&shard).map_or(0, ShardLog::last)
    }

    /// The lease of `shard` as this log knows it.
    pub fn lease(&self, shard: Shard) -> Result<&Lease> {
        self.leases.get(shard)
    }

    /// The shards `who` holds and has not released.
    pub fn held_by(&self, who: AttachmentId) -> BTreeMap<Shard, Epoch> {
        self.leases.held_by(who)
    }

    /// The entries of `shard` after `seq`; refused if some were compacted.
    pub fn entries_after(&self, shard: Shard, seq: Seq) -> Result<impl Iterator<Item = &Entry>> {
        let log = self.shard(shard)?;
        if seq < log.base {
            return Err(Reject::Compacted { shard, base: log.base });
        }
        Ok(log.entries.iter_from((seq - log.base) as usize))
    }

    /// Checks that `entry` may be appended to `shard` now: the shard
    /// exists, the op fits, the seq is next, and the lease admits it.
    pub fn check_entry(&self, shard: Shard, entry: &Entry) -> Result<()> {
        check_against(&self.role, &self.leases, shard, self.shards.get(&shard), entry)
    }

    /// Checks a run of entries for `shard` as `check_entry` would, each
    /// against the log as the ones before it would leave it. Returns the
    /// index of the first refused entry with the reason.
    pub fn check_run(&self, shard: Shard, entries: &[Entry]) -> std::result::Result<(), (usize, Reject)> {
        let Some(first) = entries.first() else { return Ok(()) };
        self.check_entry(shard, first).map_err(|e| (0, e))?;
        if shard == Shard::Meta && entries.len() > 1 {
            return Err((1, Reject::ServerOnly { shard }));
        }
        let lease = self.leases.get(shard).map_err(|e| (0, e))?;
        for (i, entry) in entries.iter().enumerate().skip(1) {
            if !entry.op.fits(&shard) {
                return Err((i, Reject::WrongShard { op: entry.op.kind(), shard }));
            }
            self.role.admits(lease, shard, entry).map_err(|e| (i, e))?;
            let want = first.seq + i as Seq;
            if entry.seq != want {
                return Err((i, Reject::Sequence { shard, got: entry.seq, want }));
            }
        }
        Ok(())
    }

    /// Stores an entry `check_entry` passed. Metalog entries update the
    /// lease table (on a mirror, that is `note_meta`).
    ///
    /// Returns the stored entry. A `ShardDel` in the metalog removes its
    /// shard's log, never the metalog's own, so the entry always lands.
    pub fn push(&mut self, shard: Shard, entry: Entry) -> &Entry {
        if let Some(sink) = &mut self.sink {
            sink.stored(shard, &entry);
        }
        if let Op::Meta(op) = &entry.op {
            self.note_meta(op);
        }
        self.shards.entry(shard).or_default().entries.push_back(entry)
    }

    /// Checks and stores an entry sequenced elsewhere: a remote leader's
    /// (authority) or anything arriving from the daemon (mirror).
    pub fn append_entry(&mut self, shard: Shard, entry: Entry) -> Result<()> {
        if shard == Shard::Meta {
            self.authority_only_meta()?;
        }
        self.check_entry(shard, &entry)?;
        self.push(shard, entry);
        Ok(())
    }

    /// The metalog is the authority's to write: it takes remote metalog
    /// entries only as a mirror.
    fn authority_only_meta(&self) -> Result<()> {
        match self.role {
            Role::Authority => Err(Reject::ServerOnly { shard: Shard::Meta }),
            Role::Mirror(_) => Ok(()),
        }
    }

    /// Sequences an entry of `attachment` at `epoch` for `shard`, hands it
    /// to `apply` (a node's state), and stores it if that took it, with
    /// the shard's log looked up once (a keystroke's entry goes through
    /// here). Not for the metalog, whose entries `push` notes.
    pub fn append_applied(
        &mut self,
        shard: Shard,
        attachment: AttachmentId,
        epoch: Epoch,
        op: Op,
        apply: impl FnOnce(&Entry) -> Result<()>,
    ) -> Result<&Entry> {
        self.store_applied(shard, |last| Entry { seq: last + 1, attachment, epoch, op }, apply)
    }

    /// [`Log::append_applied`] of an entry sequenced elsewhere: checked as
    /// [`Log::append_entry`] checks it, then applied, then stored.
    pub fn accept_applied(
        &mut self,
        shard: Shard,
        entry: Entry,
        apply: impl FnOnce(&Entry) -> Result<()>,
    ) -> Result<()> {
        self.store_applied(shard, |_| entry, apply).map(|_| ())
    }

    /// The entry `make` makes from the shard's last seq, checked as
    /// [`Log::check_entry`] checks (the fence before the seq), applied,
    /// and stored.
    fn store_applied(
        &mut self,
        shard: Shard,
        make: impl FnOnce(Seq) -> Entry,
        apply: impl FnOnce(&Entry) -> Result<()>,
    ) -> Result<&Entry> {
        if shard == Shard::Meta {
            return Err(Reject::ServerOnly { shard });
        }
        let log = self.shards.get_mut(&shard);
        let entry = make(log.as_ref().map_or(0, |l| l.last()));
        check_against(&self.role, &self.leases, shard, log.as_deref(), &entry)?;
        let log = log.expect("checked: the shard exists");
        apply(&entry)?;
        if let Some(sink) = &mut self.sink {
            sink.stored(shard, &entry);
        }
        Ok(log.entries.push_back(entry))
    }

    /// Keeps the lease table and shard set in step with a metalog op.
    pub fn note_meta(&mut self, op: &MetaOp) {
        // An op the table refuses changes nothing there; `apply` reports it.
        let _ = self.leases.apply(op);
        match op {
            MetaOp::ShardNew { shard, .. } => {
                self.shards.entry(*shard).or_default();
            }
            MetaOp::ShardDel { shard } => {
                self.shards.remove(shard);
            }
            MetaOp::Attach { attachment, .. } => {
                self.next_attachment = self.next_attachment.max(attachment.0.saturating_add(1));
            }
            MetaOp::RuleAdd { rule, .. } => self.next_rule = self.next_rule.max(rule.0.saturating_add(1)),
            _ => {}
        }
    }

    /// The metalog entry `push_meta(op)` would store, checked against the
    /// lease table but not stored.
    pub fn prepare_meta(&self, op: MetaOp) -> Result<Entry> {
        self.authority_only("write the metalog")?;
        self.leases.check(&op)?;
        Ok(Entry { seq: self.last(Shard::Meta) + 1, attachment: AttachmentId::SERVER, epoch: 0, op: Op::Meta(op) })
    }

    /// Sequences a metalog entry as SERVER at epoch 0 (authority only).
    pub fn push_meta(&mut self, op: MetaOp) -> Result<Entry> {
        let entry = self.prepare_meta(op)?;
        Ok(self.push(Shard::Meta, entry).clone())
    }

    /// The metalog op that grants `shard` to `to`: the lease must be free
    /// (held by the server, or released).
    pub fn grant_op(&self, shard: Shard, to: AttachmentId) -> Result<MetaOp> {
        let l = self.leases.get(shard)?;
        if !l.is_free() {
            return Err(Reject::NotHolder { shard, by: AttachmentId::SERVER, holder: l.holder });
        }
        Ok(MetaOp::LeaseGrant { shard, to, epoch: l.epoch + 1, base: self.last(shard) })
    }

    /// The metalog op that takes `shard` back for the server: whatever the
    /// holder has not yet appended is fenced from now on.
    pub fn reclaim_op(&self, shard: Shard) -> Result<MetaOp> {
        let l = self.leases.get(shard)?;
        Ok(MetaOp::LeaseReclaim { shard, epoch: l.epoch + 1, base: self.last(shard) })
    }

    /// The metalog op by which `by`, the holder, gives `shard` up at `seq`,
    /// which must be the last seq stored (the holder flushes first).
    pub fn release_op(&self, shard: Shard, by: AttachmentId, seq: Seq) -> Result<MetaOp> {
        let l = self.leases.get(shard)?;
        if l.holder != by {
            return Err(Reject::NotHolder { shard, by, holder: l.holder });
        }
        let last = self.last(shard);
        if seq != last {
            return Err(Reject::ReleaseSeq { shard, want: last, got: seq });
        }
        Ok(MetaOp::LeaseRelease { shard, seq })
    }

    /// Grants `shard` to `to` (authority).
    pub fn grant(&mut self, shard: Shard, to: AttachmentId) -> Result<Entry> {
        let op = self.grant_op(shard, to)?;
        self.push_meta(op)
    }

    /// Takes `shard` back for the server (authority).
    pub fn reclaim(&mut self, shard: Shard) -> Result<Entry> {
        let op = self.reclaim_op(shard)?;
        self.push_meta(op)
    }

    /// Records that `by` asks for `shard` (authority).
    pub fn request(&mut self, shard: Shard, by: AttachmentId) -> Result<Entry> {
        self.push_meta(MetaOp::LeaseRequest { shard, by })
    }

    /// Records that the holder `by` gave `shard` up at `seq` (authority).
    pub fn release(&mut self, shard: Shard, by: AttachmentId, seq: Seq) -> Result<Entry> {
        let op = self.release_op(shard, by, seq)?;
        self.push_meta(op)
    }

    /// Makes `shard` with `creator` as its first leader. The authority
    /// appends `ShardNew` and returns it; a mirror assumes the grant the
    /// daemon will make, tells the daemon through its hook, and returns
    /// `None`.
    pub fn create_shard(&mut self, shard: Shard, creator: AttachmentId) -> Result<Option<Entry>> {
        let op = MetaOp::ShardNew { shard, creator };
        if self.shards.contains_key(&shard) {
            return Err(Reject::ShardExists { shard });
        }
        match &mut self.role {
            Role::Authority => self.push_meta(op).map(Some),
            Role::Mirror(hook) => {
                hook.create_shard(shard);
                self.note_meta(&op);
                Ok(None)
            }
        }
    }

    /// Deletes `shard`: the authority appends `ShardDel`; a mirror drops it
    /// at once and tells the daemon.
    pub fn delete_shard(&mut self, shard: Shard) -> Result<Option<Entry>> {
        self.shard(shard)?;
        let op = MetaOp::ShardDel { shard };
        match &mut self.role {
            Role::Authority => self.push_meta(op).map(Some),
            Role::Mirror(hook) => {
                hook.delete_shard(shard);
                self.note_meta(&op);
                Ok(None)
            }
        }
    }

    /// A mirror's own release: it stops leading at once; the daemon's
    /// `LeaseRelease` confirms it later.
    pub fn release_mirror(&mut self, shard: Shard, by: AttachmentId) -> Result<Seq> {
        let seq = self.last(shard);
        let op = self.release_op(shard, by, seq)?;
        self.note_meta(&op);
        Ok(seq)
    }

    /// Drops the entries of `shard` up to `upto`; the bytes of text they
    /// carried (what a caller may give back to the system).
    pub fn compact(&mut self, shard: Shard, upto: Seq) -> Result<usize> {
        let log = self.shards.get_mut(&shard).ok_or(Reject::UnknownShard { shard })?;
        if upto > log.last() {
            return Err(Reject::CompactBeyond { shard, upto, last: log.last() });
        }
        let mut dropped = 0;
        if upto > log.base {
            for _ in log.base..upto {
                dropped += log.entries.pop_front().map_or(0, |e| e.op.text_len());
            }
            log.base = upto;
        }
        Ok(dropped)
    }

    /// Issues the next attachment id (authority).
    pub fn next_attachment(&mut self) -> Result<AttachmentId> {
        self.authority_only("issue attachment ids")?;
        let a = AttachmentId(self.next_attachment);
        self.next_attachment += 1;
        Ok(a)
    }

    /// Issues the next rule id. A mirror's counter starts past every rule
    /// in its snapshot.
    pub fn next_rule(&mut self) -> RuleId {
        let r = RuleId(self.next_rule);
        self.next_rule += 1;
        r
    }
}
