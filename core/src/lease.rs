//! Leases and fencing: who may append to a shard, and the one rule every
//! log and every replica uses to check it.
//!
//! A lease is `(holder, epoch)` per shard. Every grant and every reclaim
//! bumps the epoch, and both record the shard's last seq at that moment
//! (`base`), so an entry is admitted only if it is after the base and comes
//! from the holder at the current epoch (and not after a release), or it is
//! at or before the base and belongs to an earlier epoch. A leader that has
//! lost its lease therefore cannot get an entry past any log or replica.
//!
//! The same table, `Leases`, is kept by `Meta` (replicated through the
//! metalog) and by `Log` (the fencing authority, or a mirror's copy), and
//! both change it only through `Leases::apply` on metalog ops.

use crate::entry::Entry;
use crate::error::{Reject, Result};
use crate::id::{AttachmentId, Epoch, Seq};
use crate::op::MetaOp;
use crate::shard::Shard;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// The lease of one shard.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Lease {
    pub holder: AttachmentId,
    /// Bumped on every grant or reclaim; never decreases.
    pub epoch: Epoch,
    /// The shard's last seq before this epoch began.
    pub base: Seq,
    /// Who has asked for the lease, if anyone.
    pub requested: Option<AttachmentId>,
    /// The holder's last seq, once it has released.
    pub released: Option<Seq>,
}

impl Lease {
    /// The lease a fresh shard starts with: a creator other than SERVER
    /// holds it at epoch 1, so a client leads what it makes at once.
    pub fn initial(creator: AttachmentId) -> Lease {
        let epoch = if creator == AttachmentId::SERVER { 0 } else { 1 };
        Lease { holder: creator, epoch, base: 0, requested: None, released: None }
    }

    /// Whether `entry` may stand at its seq in `shard` under this lease.
    pub fn admit(&self, shard: Shard, entry: &Entry) -> Result<()> {
        if shard == Shard::Meta {
            return match entry.attachment == AttachmentId::SERVER && entry.epoch == 0 {
                true => Ok(()),
                false => Err(Reject::ServerOnly { shard }),
            };
        }
        if entry.seq <= self.base {
            return match entry.epoch < self.epoch {
                true => Ok(()),
                false => Err(self.fenced(shard, entry.attachment, entry.epoch)),
            };
        }
        if let Some(seq) = self.released {
            if entry.seq > seq {
                return Err(Reject::Released { shard, epoch: self.epoch, seq });
            }
        }
        match entry.attachment == self.holder && entry.epoch == self.epoch {
            true => Ok(()),
            false => Err(self.fenced(shard, entry.attachment, entry.epoch)),
        }
    }

    /// Whether `who` may append a new entry now, at `epoch`: the check an
    /// authority makes, where every append lands after every base.
    pub fn admits_now(&self, shard: Shard, who: AttachmentId, epoch: Epoch) -> Result<()> {
        if shard == Shard::Meta {
            return match who == AttachmentId::SERVER && epoch == 0 {
                true => Ok(()),
                false => Err(Reject::ServerOnly { shard }),
            };
        }
        if let Some(seq) = self.released {
            return Err(Reject::Released { shard, epoch: self.epoch, seq });
        }
        match who == self.holder && epoch == self.epoch {
            true => Ok(()),
            false => Err(self.fenced(shard, who, epoch)),
        }
    }

    /// Whether the lease may be granted: the server holds it or it was
    /// released.
    pub fn is_free(&self) -> bool {
        self.holder == AttachmentId::SERVER || self.released.is_some()
    }

    fn fenced(&self, shard: Shard, attachment: AttachmentId, got: Epoch) -> Reject {
        Reject::Fenced { shard, epoch: self.epoch, holder: self.holder, attachment, got }
    }
}

/// Every shard's lease.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Leases(pub BTreeMap<Shard, Lease>);

impl Default for Leases {
    /// Only the metalog, led by the server.
    fn default() -> Leases {
        Leases(BTreeMap::from([(Shard::Meta, Lease::initial(AttachmentId::SERVER))]))
    }
}

impl Leases {
    pub fn get(&self, shard: Shard) -> Result<&Lease> {
        self.0.get(&shard).ok_or(Reject::UnknownShard { shard })
    }

    /// The shards `who` holds and has not released, with their epochs.
    pub fn held_by(&self, who: AttachmentId) -> BTreeMap<Shard, Epoch> {
        self.0.iter().filter(|(_, l)| l.holder == who && l.released.is_none()).map(|(s, l)| (*s, l.epoch)).collect()
    }

    fn leasable(&self, shard: Shard) -> Result<&Lease> {
        let l = self.get(shard)?;
        match shard.is_pinned() {
            true => Err(Reject::Pinned { shard }),
            false => Ok(l),
        }
    }

    /// Checks a metalog op's effect on leases without changing anything.
    ///
    /// A lease op on a shard this table does not know is a no-op, not an
    /// error: a mirror that deleted a shard drops it at once, and metalog
    /// entries about it sequenced before the daemon heard of the deletion
    /// still arrive; the daemon's `ShardDel` that follows makes every
    /// replica agree again. The authority never issues such an op: its log
    /// looks the lease up first.
    pub fn check(&self, op: &MetaOp) -> Result<()> {
        if let Some(shard) = lease_op_shard(op) {
            if !self.0.contains_key(&shard) {
                return Ok(());
            }
        }
        match op {
            MetaOp::ShardNew { shard, creator } => {
                if *shard == Shard::Meta || shard.is_pinned() && *creator != AttachmentId::SERVER {
                    return Err(Reject::Pinned { shard: *shard });
                }
                match self.0.get(shard) {
                    // A mirror has assumed the creator's grant already.
                    Some(l) if *l == Lease::initial(*creator) => Ok(()),
                    Some(_) => Err(Reject::ShardExists { shard: *shard }),
                    None => Ok(()),
                }
            }
            MetaOp::ShardDel { shard: Shard::Meta } => Err(Reject::Pinned { shard: Shard::Meta }),
            MetaOp::LeaseGrant { shard, epoch, .. } | MetaOp::LeaseReclaim { shard, epoch, .. } => {
                let l = self.leasable(*shard)?;
                match *epoch == l.epoch + 1 {
                    true => Ok(()),
                    false => Err(Reject::Epoch { shard: *shard, want: l.epoch + 1, got: *epoch }),
                }
            }
            MetaOp::LeaseRequest { shard, .. } => self.leasable(*shard).map(|_| ()),
            MetaOp::LeaseRelease { shard, seq } => {
                let l = self.leasable(*shard)?;
                match l.released {
                    Some(r) if r == *seq => Ok(()), // a mirror released already
                    Some(r) => Err(Reject::Released { shard: *shard, epoch: l.epoch, seq: r }),
                    None if *seq < l.base => Err(Reject::ReleaseSeq { shard: *shard, want: l.base, got: *seq }),
                    None => Ok(()),
                }
            }
            _ => Ok(()),
        }
    }

    /// Applies a metalog op's effect on leases; other ops change nothing.
    pub fn apply(&mut self, op: &MetaOp) -> Result<()> {
        self.check(op)?;
        if let Some(shard) = lease_op_shard(op) {
            if !self.0.contains_key(&shard) {
                return Ok(());
            }
        }
        match op {
            MetaOp::ShardNew { shard, creator } => {
                self.0.insert(*shard, Lease::initial(*creator));
            }
            MetaOp::ShardDel { shard } => {
                self.0.remove(shard);
            }
            MetaOp::LeaseGrant { shard, to, epoch, base } => {
                self.0
                    .insert(*shard, Lease { holder: *to, epoch: *epoch, base: *base, requested: None, released: None });
            }
            MetaOp::LeaseReclaim { shard, epoch, base } => {
                self.0.insert(
                    *shard,
                    Lease { holder: AttachmentId::SERVER, epoch: *epoch, base: *base, requested: None, released: None },
                );
            }
            MetaOp::LeaseRequest { shard, by } => {
                self.0.get_mut(shard).expect("checked").requested = Some(*by);
            }
            MetaOp::LeaseRelease { shard, seq } => {
                self.0.get_mut(shard).expect("checked").released = Some(*seq);
            }
            MetaOp::Detach { attachment } => {
                for l in self.0.values_mut() {
                    if l.requested == Some(*attachment) {
                        l.requested = None;
                    }
                }
            }
            _ => {}
        }
        Ok(())
    }
}

/// The shard a lease op (grant, reclaim, request, release) is about.
fn lease_op_shard(op: &MetaOp) -> Option<Shard> {
    match op {
        MetaOp::LeaseGrant { shard, .. }
        | MetaOp::LeaseReclaim { shard, .. }
        | MetaOp::LeaseRequest { shard, .. }
        | MetaOp::LeaseRelease { shard, .. } => Some(*shard),
        _ => None,
    }
}
