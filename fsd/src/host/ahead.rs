//! Files read ahead of the Gets that will want them. `apex open` of many
//! files asks for them in one ctl write; each is put into the session in
//! turn (its window made, its text proposed), and the next file's read,
//! which waits on the kernel rather than the session, is done meanwhile
//! on a blocking thread of its own.
//!
//! A file is read ahead only if it is a regular file of at most
//! [`AHEAD_MOST`] bytes, so what is held waiting is bounded
//! ([`READS_AHEAD`] of them); anything else, any read that failed, and a
//! file changed since it was read ahead (its inode, size, modification or
//! change time not as they were before the read) is read by its Get as it
//! would have been, so what the Get loads and says is as of then: a Put
//! never writes back a text older than the file's.

use apex_core::text::Decoded;
use std::collections::VecDeque;
use tokio::task::JoinHandle;

/// How many files are read ahead at once.
const READS_AHEAD: usize = 2;

/// The largest file read ahead: a bigger one is read by its Get, so what
/// waits to be taken is at most [`READS_AHEAD`] times this.
const AHEAD_MOST: u64 = 8 << 20;

/// A file's text as a Get reads it.
pub type Read = (Vec<String>, Decoded);

/// What says a file is as it was: its device and inode, size, and
/// modification and change times, to the nanosecond.
#[derive(Debug, PartialEq, Eq)]
struct Stamp([i64; 7]);

impl Stamp {
    fn of(meta: &std::fs::Metadata) -> Stamp {
        use std::os::unix::fs::MetadataExt;
        let (dev, ino, len) = (meta.dev() as i64, meta.ino() as i64, meta.len() as i64);
        Stamp([dev, ino, len, meta.mtime(), meta.mtime_nsec(), meta.ctime(), meta.ctime_nsec()])
    }
}

/// One file's read, begun.
pub struct Ahead {
    pub path: String,
    read: JoinHandle<Option<(Stamp, Read)>>,
}

impl Ahead {
    /// The file's text if it was read ahead, the read succeeded and the
    /// file is as it was before it was read. Waits for the read (a stat
    /// after it): call it on a blocking thread or in a task.
    pub async fn taken(self) -> Option<Read> {
        let (stamp, read) = self.read.await.ok().flatten()?;
        let now = std::fs::metadata(&self.path).ok()?;
        (Stamp::of(&now) == stamp).then_some(read)
    }
}

/// The reads of a list of files, in its order, [`READS_AHEAD`] begun at
/// a time.
pub struct ReadAhead {
    waiting: VecDeque<String>,
    begun: VecDeque<Ahead>,
}

impl ReadAhead {
    /// Begins reading the first of `paths`. Must be called within the
    /// runtime.
    pub fn new(paths: impl IntoIterator<Item = String>) -> Self {
        let mut ahead = ReadAhead { waiting: paths.into_iter().collect(), begun: VecDeque::new() };
        ahead.begin_more();
        ahead
    }

    /// The read of `path` if it is the next in the list, and the read of
    /// the file after the last begun starts. `None` for a path out of
    /// the list's order (its Get reads it).
    pub fn take(&mut self, path: &str) -> Option<Ahead> {
        let next = self.begun.front().is_some_and(|a| a.path == path);
        let taken = next.then(|| self.begun.pop_front()).flatten();
        self.begin_more();
        taken
    }

    fn begin_more(&mut self) {
        while self.begun.len() < READS_AHEAD {
            let Some(path) = self.waiting.pop_front() else { break };
            let p = path.clone();
            let read = tokio::task::spawn_blocking(move || read_small(&p));
            self.begun.push_back(Ahead { path, read });
        }
    }
}

impl Drop for ReadAhead {
    /// Reads no one will take are not waited for; their results are
    /// dropped when they end.
    fn drop(&mut self) {
        for a in &self.begun {
            a.read.abort();
        }
    }
}

/// `path`'s text as [`apex_sys::files::read_utf8`] reads it, if it is a
/// regular file small enough to read ahead and could be read, with the
/// file's stamp from before the read (a change during it shows as one
/// after).
fn read_small(path: &str) -> Option<(Stamp, Read)> {
    let meta = std::fs::metadata(path).ok()?;
    if !meta.is_file() || meta.len() > AHEAD_MOST {
        return None;
    }
    Some((Stamp::of(&meta), apex_sys::files::read_utf8("get", path).ok()?))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn files_are_read_ahead_in_order_and_only_small_regular_ones() {
        let dir = std::env::temp_dir().join(format!("apex-read-ahead-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let path = |name: &str| dir.join(name).display().to_string();
        std::fs::write(path("one"), "one\n").unwrap();
        std::fs::write(path("two"), b"two \xff\n").unwrap();
        // Sparse: its size alone says it is too big to read ahead.
        std::fs::File::create(path("big")).unwrap().set_len(AHEAD_MOST + 1).unwrap();
        std::fs::write(path("changed"), "as read ahead\n").unwrap();
        std::fs::write(path("last"), "last\n").unwrap();
        let names = ["one", "two", "big", "gone", "", "changed", "last"];
        let mut ahead = ReadAhead::new(names.iter().map(|n| path(n)));

        let one = ahead.take(&path("one")).expect("the first file's read");
        assert_eq!(one.path, path("one"));
        assert_eq!(one.taken().await.expect("read").0.concat(), "one\n");
        // Read as a Get reads it: a byte that is not UTF-8 is U+FFFD, and
        // counted for the Get's warning.
        let (pieces, said) = ahead.take(&path("two")).unwrap().taken().await.expect("read");
        assert_eq!((pieces.concat().as_str(), said.replaced), ("two \u{fffd}\n", 1));
        // Too big, missing, a directory: its Get reads it.
        for name in ["big", "gone", ""] {
            assert!(ahead.take(&path(name)).unwrap().taken().await.is_none(), "{name:?} was read ahead");
        }
        // A file changed after it was read ahead: its Get reads it anew,
        // never loading what it no longer holds.
        let changed = ahead.take(&path("changed")).unwrap();
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        std::fs::write(path("changed"), "as it is now\n").unwrap();
        let taken = changed.taken().await.map(|(pieces, _)| pieces.concat());
        assert!(taken.as_deref() != Some("as read ahead\n"), "the text of before the change was taken");
        // A path out of the list's order is not the next read's.
        assert!(ahead.take(&path("one")).is_none());
        let last = ahead.take(&path("last")).unwrap().taken().await.expect("read");
        assert_eq!(last.0.concat(), "last\n");
        assert!(ahead.take(&path("last")).is_none(), "nothing is left to read");
        drop(ahead);
        let _ = std::fs::remove_dir_all(&dir);
    }
}
