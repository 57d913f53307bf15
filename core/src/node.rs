//! `Node`: one replica of a session, leading some shards and following the
//! rest.
//!
//! A node is a `State` over a `Log` (the authority on the daemon, a mirror
//! on a client). It reads its leases from the log, not from the state: only
//! the log knows what this replica has sequenced but the daemon has not yet
//! seen. It can append only where it holds a lease, and the log fences again.
//! Entries it receives are checked by the log, applied, then stored, so the
//! state and the log never disagree about what was accepted.
//!
//! Ids come from a range of the node's own, `(attachment << 40) | counter`;
//! the counters start past the high-water marks in the state it starts from,
//! so a restored or resumed node never reissues an id.

use crate::changes::Changes;
use crate::entry::Entry;
use crate::error::{Reject, Result};
use crate::id::{AttachmentId, BufferId, Epoch, GroupId, Seq, COUNTER_MAX};
use crate::log::Log;
use crate::op::{BufferOp, LayoutOp, MetaOp, Op, Origin};
use crate::shard::Shard;
use crate::spots::{Spot, Spots};
use crate::state::State;
use std::collections::BTreeMap;

/// How much of a text given up ([`Node::append_splice_owned`]) is cut off
/// before its memory is given back: glibc shrinks a block this large in
/// place (it was mapped, and is remapped), so a shrink copies nothing;
/// this only spaces the calls.
const GIVE_BACK: usize = 64 << 20;

/// A replica: state, log, leases, id counters.
#[derive(Debug)]
pub struct Node {
    pub attachment: AttachmentId,
    /// Changed through the node's methods, which keep it in step with
    /// `log`.
    pub state: State,
    /// Changed through the node's methods too: the state takes an entry
    /// the log has checked without checking it again
    /// (`State::apply_admitted`), so the log's leases and last seqs must
    /// stay the state's. `Log`'s own lease calls (`grant`, `release`,
    /// ...) and `push` are for a log of its own (the registry's, a test's
    /// authority): made on a node's log, they leave its state behind.
    pub log: Log,
    /// The shards this node leads, with the epoch it leads them at.
    epochs: BTreeMap<Shard, Epoch>,
    next_id: u64,
    next_group: u64,
    /// While a proposal is applied: every entry this node sequenced, in
    /// order (`propose::apply` reports them).
    journal: Option<Vec<(Shard, Seq)>>,
    /// How the UI this node is draws its columns, for placing new windows
    /// as acme does (`cols::add`); none in the daemon. Local, never
    /// replicated: only the entries it leads to are.
    pub lines: Option<crate::cols::Lines>,
}

/// Changes `part` of a list, packed as one `Splices` entry's places, or
/// (`None`) one change whose text goes in `Splice` entries of its own.
pub struct PackedPart {
    part: std::ops::Range<usize>,
    spots: Option<Spots>,
}

impl Node {
    /// A node for `attachment` over `log`, starting from `state` (which
    /// must be the state the log was built from).
    pub fn new(attachment: AttachmentId, state: State, log: Log) -> Node {
        let mut node = Node {
            attachment,
            next_id: state.next_id_counter(attachment),
            next_group: state.next_group_counter(attachment),
            state,
            log,
            epochs: BTreeMap::new(),
            journal: None,
            lines: None,
        };
        node.refresh_leases();
        node
    }

    /// The daemon's node of a new session: SERVER over a new authority log.
    pub fn server() -> Node {
        Node::new(AttachmentId::SERVER, State::new(), Log::authority())
    }

    /// Starts recording the entries this node sequences (see `journal`).
    pub fn start_journal(&mut self) {
        self.journal = Some(Vec::new());
    }

    /// The entries sequenced since `start_journal`, in order; stops
    /// recording.
    pub fn take_journal(&mut self) -> Vec<(Shard, Seq)> {
        self.journal.take().unwrap_or_default()
    }

    /// Re-reads what this node leads after metalog op `op`: the one shard
    /// a shard or lease op names (a session has thousands of shards, and
    /// this runs per metalog entry), everything for any other op.
    fn refresh_after(&mut self, op: &Op) {
        let shard = match op {
            Op::Meta(
                MetaOp::ShardNew { shard, .. }
                | MetaOp::ShardDel { shard }
                | MetaOp::LeaseGrant { shard, .. }
                | MetaOp::LeaseRequest { shard, .. }
                | MetaOp::LeaseRelease { shard, .. }
                | MetaOp::LeaseReclaim { shard, .. },
            ) => *shard,
            Op::Meta(
                MetaOp::Identity { .. } | MetaOp::Label { .. } | MetaOp::Notify { .. } | MetaOp::NotifyDel { .. },
            ) => return,
            _ => return self.refresh_leases(),
        };
        if shard == Shard::Meta {
            return self.refresh_leases();
        }
        match self.log.lease(shard) {
            Ok(l) if l.holder == self.attachment && l.released.is_none() => {
                self.epochs.insert(shard, l.epoch);
            }
            _ => {
                self.epochs.remove(&shard);
            }
        }
    }

    /// Re-reads which shards this node leads from the log.
    pub fn refresh_leases(&mut self) {
        self.epochs = self.log.held_by(self.attachment);
        // The metalog is the authority's to write, never a lease.
        if !self.log.is_authority() {
            self.epochs.remove(&Shard::Meta);
        }
    }

    /// Whether this node leads `shard` now.
    pub fn leads(&self, shard: Shard) -> bool {
        self.epochs.contains_key(&shard) && shard != Shard::Meta
    }

    /// The shards this node leads, with their epochs.
    pub fn led(&self) -> &BTreeMap<Shard, Epoch> {
        &self.epochs
    }

    /// Sequences `op` on `shard` as this node's own entry and applies it.
    /// Fails with `NotLeader` without a lease; the log fences again.
    /// Returns the entry as stored in the log.
    pub fn append(&mut self, shard: Shard, op: Op) -> Result<&Entry> {
        let epoch = match self.epochs.get(&shard) {
            Some(e) if shard != Shard::Meta => *e,
            _ => return Err(Reject::NotLeader { shard }),
        };
        op.admissible()?;
        let state = &mut self.state;
        let entry = self.log.append_applied(shard, self.attachment, epoch, op, |e| state.apply_admitted(shard, e))?;
        if let Some(j) = &mut self.journal {
            j.push((shard, entry.seq));
        }
        Ok(entry)
    }

    /// Appends the splice of `q0..q1` of `buffer` with `text` as entries
    /// of at most [`crate::op::SPLICE_MAX`] bytes each: the first replaces
    /// the range, the rest insert after it. They undo as one (no mark
    /// comes between them).
    pub fn append_splice(&mut self, buffer: BufferId, q0: u64, q1: u64, text: &str, origin: Origin) -> Result<()> {
        self.append_pieces(buffer, q0, q1, crate::op::pieces(text).into_iter().map(str::to_string), origin)
    }

    /// The entries of [`Node::append_splice`], from its pieces in order
    /// (each at most [`crate::op::SPLICE_MAX`] bytes).
    pub(crate) fn append_pieces(
        &mut self,
        buffer: BufferId,
        q0: u64,
        q1: u64,
        pieces: impl Iterator<Item = String>,
        origin: Origin,
    ) -> Result<()> {
        let shard = Shard::Buffer(buffer);
        let (mut q0, mut q1) = (q0, q1);
        for piece in pieces {
            let runes = piece.chars().count() as u64;
            self.append(shard, Op::Buffer(BufferOp::Splice { q0, q1, text: piece, origin }))?;
            q0 += runes;
            q1 = q0;
        }
        Ok(())
    }

    /// [`Node::append_splice`] of a text given up: the same entries, in
    /// the same order, each taking its piece as it is. A text of one
    /// piece goes in with no copy. A longer one is cut into its pieces
    /// first, from its end, the text's memory given back as it shrinks
    /// (glibc shrinks a block this large in place), so that a Get of a
    /// 1 GB file holds the file's text and the rope at about twice its
    /// size at most, not the text, its entries' copy and the rope.
    pub fn append_splice_owned(
        &mut self,
        buffer: BufferId,
        q0: u64,
        q1: u64,
        mut text: String,
        origin: Origin,
    ) -> Result<()> {
        if text.len() <= crate::op::SPLICE_MAX {
            return self.append_pieces(buffer, q0, q1, std::iter::once(text), origin);
        }
        // Where each piece after the first starts.
        let mut starts: Vec<usize> = crate::op::pieces(&text).iter().map(|p| p.len()).collect();
        starts.pop();
        let mut at = 0;
        for start in &mut starts {
            at += *start;
            *start = at;
        }
        let mut pieces = Vec::with_capacity(starts.len() + 1);
        let mut held = text.len();
        for start in starts.into_iter().rev() {
            pieces.push(text.split_off(start));
            if held - text.len() >= GIVE_BACK {
                text.shrink_to_fit();
                held = text.len();
            }
        }
        text.shrink_to_fit();
        pieces.push(text);
        self.append_pieces(buffer, q0, q1, pieces.into_iter().rev(), origin)
    }

    /// Checks `changes` against a text of `len` runes (each in order and
    /// apart, the last ending within it, none a change of nothing, which
    /// the caller leaves out first) and packs them for
    /// [`Node::append_spots`], in the one pass over them that packing
    /// makes: a list refused appends nothing. Each part is an entry's
    /// worth ([`crate::op::entry_parts`]); a change whose text is longer
    /// than an entry carries goes alone (no packing), as
    /// [`Node::append_splice`] makes it.
    pub fn pack_spots(changes: &Changes, len: u64) -> Result<Vec<PackedPart>> {
        let mut end = 0;
        let mut refused = None;
        let mut parts = Vec::new();
        for part in crate::op::entry_parts(changes.len(), |r| changes.text_of(r).len()) {
            if part.len() == 1 {
                let (q0, q1, text) = changes.get(part.start);
                if text.len() > crate::op::SPLICE_MAX {
                    if q0 < end || q1 < q0 || q1 > len {
                        return Err(Reject::Range { q0, q1, len });
                    }
                    end = q1;
                    parts.push(PackedPart { part, spots: None });
                    continue;
                }
            }
            let spots = Spots::pack(changes.iter_range(part.clone()).map(|(q0, q1, text)| {
                if refused.is_none() && (q0 < end || q1 < q0 || q1 > len || (q0 == q1 && text.is_empty())) {
                    refused = Some((q0, q1));
                }
                end = q1;
                // Most are a rune or a few of ASCII (a substitution's `b`).
                let inserted = if text.is_ascii() { text.len() } else { text.chars().count() };
                Spot { q0, q1, inserted: inserted as u64 }
            }));
            if let Some((q0, q1)) = refused {
                return Err(Reject::Range { q0, q1, len });
            }
            parts.push(PackedPart { part, spots: Some(spots?) });
        }
        Ok(parts)
    }

    /// Makes `changes` as the `Splices` entries [`Node::pack_spots`]
    /// packed them in, the last changes first so that each entry's places
    /// hold when it is made.
    pub fn append_spots(
        &mut self,
        buffer: BufferId,
        changes: &Changes,
        parts: Vec<PackedPart>,
        origin: Origin,
    ) -> Result<()> {
        let shard = Shard::Buffer(buffer);
        for PackedPart { part, spots } in parts.into_iter().rev() {
            let Some(spots) = spots else {
                let (q0, q1, text) = changes.get(part.start);
                self.append_splice(buffer, q0, q1, text, origin)?;
                continue;
            };
            // The part's texts lie one after another in the list's string.
            let text = changes.text_of(part).to_string();
            self.append(shard, Op::Buffer(BufferOp::Splices { spots, text, origin }))?;
        }
        Ok(())
    }

    /// Sets the session's snarf buffer to `text`, in entries of at most
    /// [`crate::op::SPLICE_MAX`] bytes (`Snarf`, then `SnarfMore`).
    pub fn append_snarf(&mut self, text: &str) -> Result<()> {
        let mut at = 0;
        for (i, piece) in crate::op::pieces(text).into_iter().enumerate() {
            let text = piece.to_string();
            let op = if i == 0 { LayoutOp::Snarf { text } } else { LayoutOp::SnarfMore { at, text } };
            self.append(Shard::Layout, Op::Layout(op))?;
            at += piece.len() as u64;
        }
        Ok(())
    }

    /// Accepts an entry sequenced elsewhere: checked by the log, applied,
    /// stored. Metalog entries may change this node's leases.
    pub fn accept(&mut self, shard: Shard, entry: Entry) -> Result<()> {
        if shard == Shard::Meta && self.log.is_authority() {
            return Err(Reject::ServerOnly { shard });
        }
        if shard != Shard::Meta {
            // The shard's log looked up once: most entries a node takes
            // are a leader's keystrokes.
            let (authority, state) = (self.log.is_authority(), &mut self.state);
            return self.log.accept_applied(shard, entry, |e| {
                if authority {
                    e.op.admissible()?;
                }
                state.apply_admitted(shard, e)
            });
        }
        self.log.check_entry(shard, &entry)?;
        if self.log.is_authority() {
            entry.op.admissible()?;
        }
        self.state.apply(shard, &entry)?;
        let meta = shard == Shard::Meta;
        let made = match &entry.op {
            Op::Meta(MetaOp::ShardNew { creator, .. }) => *creator == self.attachment,
            _ => false,
        };
        let op = meta.then(|| entry.op.clone());
        self.log.push(shard, entry);
        if let Some(op) = op {
            self.refresh_after(&op);
        }
        if made {
            // A shard of ours that an earlier node of this attachment made
            // (before a resume): never issue its id again.
            self.next_id = self.next_id.max(self.state.next_id_counter(self.attachment));
        }
        Ok(())
    }

    /// Moves the id and undo-group counters past everything in the state,
    /// after entries of this attachment's earlier node were taken over.
    pub fn refresh_counters(&mut self) {
        self.next_id = self.next_id.max(self.state.next_id_counter(self.attachment));
        self.next_group = self.next_group.max(self.state.next_group_counter(self.attachment));
    }

    /// Accepts a run of entries for one shard, all or nothing: the log
    /// checks every fence and seq, the state applies them (putting the
    /// shard back if one is refused), and only then are they stored.
    /// The error names the index of the refused entry. Metalog runs go
    /// entry by entry through `accept` (each may change leases).
    pub fn accept_all(&mut self, shard: Shard, entries: Vec<Entry>) -> std::result::Result<(), (usize, Reject)> {
        if shard == Shard::Meta {
            for (i, entry) in entries.into_iter().enumerate() {
                self.accept(shard, entry).map_err(|e| (i, e))?;
            }
            return Ok(());
        }
        self.log.check_run(shard, &entries)?;
        if self.log.is_authority() {
            let refused = entries.iter().enumerate().find_map(|(i, e)| e.op.admissible().err().map(|r| (i, r)));
            if let Some(refused) = refused {
                return Err(refused);
            }
        }
        self.state.apply_all(shard, &entries)?;
        for entry in entries {
            self.log.push(shard, entry);
        }
        Ok(())
    }

    /// Sequences a metalog entry (authority only) and applies it.
    pub fn push_meta(&mut self, op: MetaOp) -> Result<Entry> {
        self.state.meta.check(&op)?;
        let entry = self.log.prepare_meta(op)?;
        self.state.apply(Shard::Meta, &entry)?;
        if let Some(j) = &mut self.journal {
            j.push((Shard::Meta, entry.seq));
        }
        self.log.push(Shard::Meta, entry.clone());
        self.refresh_after(&entry.op);
        Ok(entry)
    }

    /// Creates `shard` with this node as its leader. On the authority that
    /// is a `ShardNew` entry; on a mirror the shard exists here at once and
    /// the daemon hears of it through the hook.
    pub fn create_shard(&mut self, shard: Shard) -> Result<Option<Entry>> {
        if self.log.is_authority() {
            return self.create_shard_for(shard, self.attachment).map(Some);
        }
        let op = MetaOp::ShardNew { shard, creator: self.attachment };
        self.state.meta.check(&op)?;
        self.log.create_shard(shard, self.attachment)?;
        self.state.apply_unsequenced(&op)?;
        self.refresh_leases();
        Ok(None)
    }

    /// Creates `shard` on behalf of `creator` (authority only): what the
    /// daemon does when a client's mirror hook says `CreateShard`.
    pub fn create_shard_for(&mut self, shard: Shard, creator: AttachmentId) -> Result<Entry> {
        if self.log.shard(shard).is_ok() {
            return Err(Reject::ShardExists { shard });
        }
        self.push_meta(MetaOp::ShardNew { shard, creator })
    }

    /// Deletes `shard`. A mirror drops its state at once (unsequenced); the
    /// daemon's `ShardDel` follows.
    pub fn delete_shard(&mut self, shard: Shard) -> Result<Option<Entry>> {
        if shard == Shard::Layout {
            // Made with its session and never again: gone, it would be
            // gone for good, and every window with it. (Refused where a
            // deletion is made, not where one is applied: a log written
            // before this rule still replays.)
            return Err(Reject::Lasting { shard });
        }
        let op = MetaOp::ShardDel { shard };
        self.state.meta.check(&op)?;
        self.log.shard(shard)?;
        if self.log.is_authority() {
            return self.push_meta(op).map(Some);
        }
        self.log.delete_shard(shard)?;
        self.state.apply_unsequenced(&op)?;
        self.refresh_leases();
        Ok(None)
    }

    /// Allocates an id from this node's range.
    pub fn alloc(&mut self) -> Result<u64> {
        if self.next_id > COUNTER_MAX {
            return Err(Reject::IdsExhausted(self.attachment));
        }
        let id = self.attachment.pack(self.next_id);
        self.next_id += 1;
        Ok(id)
    }

    /// Allocates an undo-group id.
    pub fn new_group(&mut self) -> Result<GroupId> {
        if self.next_group > COUNTER_MAX {
            return Err(Reject::IdsExhausted(self.attachment));
        }
        let id = GroupId(self.attachment.pack(self.next_group));
        self.next_group += 1;
        Ok(id)
    }

    /// Makes a new, empty buffer named `name`, led by this node.
    pub fn create_buffer_as(&mut self, name: &str) -> Result<BufferId> {
        // Checked before the shard is made: a refused name leaves nothing.
        crate::buf::check_name(name)?;
        let id = BufferId(self.alloc()?);
        let shard = Shard::Buffer(id);
        self.create_shard(shard)?;
        self.append(shard, Op::Buffer(BufferOp::Create { name: name.to_string() }))?;
        Ok(id)
    }

    /// Takes the lease of `shard` for this node (authority only: grants it
    /// to ourselves; the lease must be free).
    pub fn take_lease(&mut self, shard: Shard) -> Result<Entry> {
        let op = self.log.grant_op(shard, self.attachment)?;
        self.push_meta(op)
    }

    /// Gives up the lease of `shard` after this node's last entry. The
    /// authority appends `LeaseRelease`; a mirror stops leading at once and
    /// returns `None`: its link sends `Release { shard, seq }`.
    pub fn release_lease(&mut self, shard: Shard) -> Result<Option<Entry>> {
        if !self.leads(shard) {
            return Err(Reject::NotLeader { shard });
        }
        if self.log.is_authority() {
            let op = self.log.release_op(shard, self.attachment, self.log.last(shard))?;
            return self.push_meta(op).map(Some);
        }
        self.log.release_mirror(shard, self.attachment)?;
        self.refresh_leases();
        Ok(None)
    }

    /// Replays everything `source` has that this node has not applied,
    /// the metalog first (so a shard's `ShardNew` precedes its entries).
    /// Returns how many entries it applied.
    pub fn catch_up(&mut self, source: &Log) -> Result<usize> {
        let mut n = self.catch_up_shard(source, Shard::Meta)?;
        let shards: Vec<Shard> = source.shards().map(|(s, _)| *s).filter(|s| *s != Shard::Meta).collect();
        for shard in shards {
            if self.state.meta.has_shard(shard) {
                n += self.catch_up_shard(source, shard)?;
            }
        }
        Ok(n)
    }

    fn catch_up_shard(&mut self, source: &Log, shard: Shard) -> Result<usize> {
        let from = self.state.applied(shard);
        let pending: Vec<Entry> = source.entries_after(shard, from)?.cloned().collect();
        let n = pending.len();
        for entry in pending {
            self.accept(shard, entry)?;
        }
        Ok(n)
    }
}
