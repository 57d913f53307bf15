//! Open files and directories: what a FUSE file handle stands for.
//!
//! A file handle is a 9P fid opened with the caller's mode; a directory
//! handle is the whole listing read at opendir, so readdir offsets index
//! one snapshot however many calls it takes (plan9port's 9pfuse lost
//! entries past one buffer). "." and ".." come first, at offsets 1 and 2.

use crate::readahead::ReadAhead;
use apex_ninep::fcall::Stat;
use std::collections::HashMap;
use std::sync::Mutex;

/// What a file handle holds.
pub enum Handle {
    /// `cached`: read through the kernel's page cache, which takes a
    /// short read for the end of the file. `ahead`: a direct-io file
    /// whose reads are positional, read ahead ([`ReadAhead`]).
    File {
        fid: u32,
        iounit: u32,
        cached: bool,
        ahead: Option<ReadAhead>,
    },
    Dir {
        entries: Vec<Stat>,
    },
}

/// Every open handle, by number.
#[derive(Default)]
pub struct Handles {
    open: Mutex<HashMap<u64, std::sync::Arc<Handle>>>,
    next: std::sync::atomic::AtomicU64,
}

impl Handles {
    /// Stores `h`; returns its number (never 0, which FUSE reads as none).
    pub fn add(&self, h: Handle) -> u64 {
        let fh = self.next.fetch_add(1, std::sync::atomic::Ordering::Relaxed) + 1;
        self.open.lock().expect("handles lock").insert(fh, std::sync::Arc::new(h));
        fh
    }

    pub fn get(&self, fh: u64) -> Option<std::sync::Arc<Handle>> {
        self.open.lock().expect("handles lock").get(&fh).cloned()
    }

    pub fn remove(&self, fh: u64) -> Option<std::sync::Arc<Handle>> {
        self.open.lock().expect("handles lock").remove(&fh)
    }
}
