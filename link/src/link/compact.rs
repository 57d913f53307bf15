//! What a link's replica keeps of its log: entries no longer needed are
//! dropped, and the text they carried is counted for the caller, who may
//! give that memory back to the system (after a big file's entries are
//! acknowledged, malloc would otherwise keep it resident).

use super::Link;
use apex_core::{Node, Seq, Shard};

impl Link {
    /// Drops entries no longer needed: followed shards up to what is
    /// applied, led shards up to what is acknowledged.
    pub(super) fn compact(&mut self) {
        let Some(node) = &self.node else { return };
        if self.resyncing {
            return;
        }
        let points: Vec<(Shard, Seq)> = node
            .log
            .shards()
            .map(|(s, l)| {
                let upto = match node.led().contains_key(s) && *s != Shard::Meta {
                    true => self.settled(node, *s).min(l.last()),
                    false => l.last(),
                };
                (*s, upto)
            })
            .filter(|(s, upto)| node.log.shard(*s).is_ok_and(|l| *upto > l.base))
            .collect();
        let node: &mut Node = self.node.as_mut().expect("checked");
        for (s, upto) in points {
            self.compacted += node.log.compact(s, upto).unwrap_or(0);
        }
    }

    /// The bytes of text the entries dropped since the last call carried.
    pub fn take_compacted(&mut self) -> usize {
        std::mem::take(&mut self.compacted)
    }
}
