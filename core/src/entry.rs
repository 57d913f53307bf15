//! `Entry`: one op with its sequence number and provenance.
//!
//! Entries are the only thing that changes state. A shard's entries are
//! numbered densely from 1; an entry also records who sequenced it and under
//! which fence epoch, so every replica can check the fence as the log does.

use crate::id::{AttachmentId, Epoch, Seq};
use crate::op::Op;
use serde::{Deserialize, Serialize};

/// One entry of one shard's log.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Entry {
    /// 1-based, dense per shard.
    pub seq: Seq,
    /// Who sequenced it.
    pub attachment: AttachmentId,
    /// Under which fence epoch.
    pub epoch: Epoch,
    pub op: Op,
}
