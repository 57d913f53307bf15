//! 9P stat records as FUSE attributes, and how long the kernel may keep
//! them.
//!
//! Synthetic files (length 0, as acme's and apexd's are) change behind the
//! kernel's back, so neither their attributes nor their names are cached:
//! every `stat` asks the server. Directories and files with a real length
//! are cached for a second, which makes repeated `ls -l` cheap without
//! showing state older than that.

use apex_ninep::fcall::{Stat, DMDIR};
use fuse3::raw::reply::FileAttr;
use fuse3::{FileType, Timestamp};
use std::time::Duration;

/// How long cacheable attributes and names stay valid.
pub const CACHE_TTL: Duration = Duration::from_secs(1);

/// Whether `stat` names a synthetic file: a plain file of length 0.
pub fn synthetic(stat: &Stat) -> bool {
    stat.mode & DMDIR == 0 && stat.length == 0
}

/// The TTL for attributes and directory entries of `stat`.
pub fn ttl(stat: &Stat) -> Duration {
    match synthetic(stat) {
        true => Duration::ZERO,
        false => CACHE_TTL,
    }
}

/// `stat` as the attributes of inode `ino`, owned by the mounting user
/// (9P names its owners with strings that need not exist here).
/// `blksize` is what tools like `cat` size their reads by.
pub fn file_attr(ino: u64, stat: &Stat, uid: u32, gid: u32, blksize: u32) -> FileAttr {
    let dir = stat.mode & DMDIR != 0;
    let time = |t: u32| Timestamp::new(t as i64, 0);
    FileAttr {
        ino,
        // The kernel refuses a size past i64::MAX (and poisons the inode).
        size: stat.length.min(i64::MAX as u64),
        blocks: stat.length.min(i64::MAX as u64).div_ceil(512),
        atime: time(stat.atime),
        mtime: time(stat.mtime),
        ctime: time(stat.mtime),
        kind: if dir { FileType::Directory } else { FileType::RegularFile },
        perm: (stat.mode & 0o777) as u16,
        nlink: if dir { 2 } else { 1 },
        uid,
        gid,
        rdev: 0,
        blksize,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn synthetic_files_are_never_cached() {
        let file = Stat { mode: 0o644, length: 0, ..Stat::default() };
        let real = Stat { mode: 0o644, length: 12, ..Stat::default() };
        let dir = Stat { mode: DMDIR | 0o755, ..Stat::default() };
        assert_eq!(ttl(&file), Duration::ZERO);
        assert_eq!(ttl(&real), CACHE_TTL);
        assert_eq!(ttl(&dir), CACHE_TTL);
        let a = file_attr(5, &dir, 1, 2, 8192);
        assert_eq!((a.kind, a.perm, a.nlink, a.uid), (FileType::Directory, 0o755, 2, 1));
        assert_eq!(file_attr(6, &real, 0, 0, 8192).blocks, 1);
    }
}
