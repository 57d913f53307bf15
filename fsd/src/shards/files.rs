//! The files of `shards/SHARD/`: `entries` (the shard's log as text, a
//! stream that keeps the shard from compaction while open), `lease` (read
//! the lease; write "reclaim" to take it back) and `info`.

use crate::error::{Error, Result};
use crate::fsys::error::FsError;
use crate::fsys::fid::{utf8, Opened};
use crate::fsys::made::Made;
use crate::fsys::place::{Place, ShardFile};
use crate::fsys::stream::Source;
use crate::fsys::tree::Fsys;
use crate::session::Session;
use crate::shards::tables;
use apex_core::Shard;

/// A shard file's content now.
pub fn content(s: &Session, shard: Shard, file: ShardFile) -> Result<Made> {
    Ok(match file {
        ShardFile::Lease => format!("{}\n", tables::lease_fields(s.view().log.lease(shard)?)),
        ShardFile::Info => tables::shard_info(s, shard).map_err(Error::from)?,
        ShardFile::Entries => String::new(),
    }
    .into())
}

impl Fsys {
    pub(crate) async fn shard_open(&self, n: u64, shard: Shard, file: ShardFile) -> Result<Opened> {
        match file {
            ShardFile::Entries => self.open_reader(n, &[shard], Source::Entries(n, shard), None),
            file => {
                let made = self.made_in(Place::Shard1(n, shard, file), |s| content(s, shard, file))?;
                Ok(Opened::Content(crate::fsys::fid::Content::made(made.made().await)))
            }
        }
    }

    /// A write to `shards/SHARD/lease`.
    pub(crate) fn shard_write(&self, n: u64, shard: Shard, file: ShardFile, data: Vec<u8>) -> Result<()> {
        if file != ShardFile::Lease {
            return Err(crate::fsys::place::not_writable(Place::Shard1(n, shard, file)).into());
        }
        match utf8(data)?.trim() {
            // As the deadline reclaims a stuck holder's lease: the holder is
            // fenced, and what waited for it goes where it belongs now.
            "reclaim" => self
                .daemon
                .change(n, |s, now| crate::attach::route::reclaim_by_hand(s, shard, now))?
                .map_err(Error::from),
            other => Err(FsError::LeaseRequest(other.to_string()).into()),
        }
    }
}
