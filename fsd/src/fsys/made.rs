//! A file's content as taken under its session's lock: small contents
//! whole, and what grows with a buffer's size (a body, a snapshot, a
//! hash) as a cheap copy of the state it comes from (ropes share their
//! nodes), made into bytes after the lock is let go, so one big buffer
//! does not hold up every other request. A text is never made whole for
//! a fid: its version is the rope's copy, and each read copies out only
//! the range it returns ([`Version`]).

use super::error::FsError;
use apex_core::grid::Row;
use apex_core::snap::SnapshotParts;
use apex_core::term::Term;
use apex_core::text::Text;
use apex_core::State;
use std::sync::Arc;

pub enum Made {
    Bytes(Vec<u8>),
    /// A text's runes as UTF-8.
    Text(Text),
    /// A session's snapshot encoding.
    Snapshot(Box<State>),
    /// A session's state hash, in hex, on a line.
    Hash(Box<State>),
    /// A terminal's text (its scrollback rows shared, not copied).
    Term(Box<Term>, TermText),
}

/// Which text of a terminal.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TermText {
    Screen,
    Scrollback,
    /// Both: the `text` file and its acme window's body.
    All,
}

/// Past this many bytes of text, making the bytes is moved off the
/// async workers: a worker busy for tens of milliseconds would hold up
/// the connections whose tasks wait on it.
const BIG: usize = 1 << 20;

impl Made {
    /// The bytes, made on a blocking thread when they are many: call it
    /// with no lock held.
    pub async fn made(self) -> Vec<u8> {
        off_the_workers(self.is_big(), move || self.bytes()).await
    }

    fn is_big(&self) -> bool {
        // Terminals' rows count too (a snapshot writes every one).
        let rows = |st: &State| st.terms.values().map(|t| t.scrollback.len() * 100).sum::<usize>();
        let text = |st: &State| st.buffers.values().map(|b| b.text.len_bytes()).sum::<usize>() + rows(st);
        match self {
            Made::Bytes(_) => false,
            Made::Text(t) => t.len_bytes() > BIG,
            Made::Snapshot(st) | Made::Hash(st) => text(st) > BIG,
            Made::Term(t, _) => t.scrollback.len() > BIG / 100,
        }
    }

    /// The bytes: call it with no lock held.
    pub fn bytes(self) -> Vec<u8> {
        match self {
            Made::Bytes(b) => b,
            Made::Text(t) => t.to_string().into_bytes(),
            Made::Snapshot(st) => st.to_snapshot(),
            Made::Hash(st) => format!("{}\n", apex_sys::statehash::state_hash(&st).to_hex()).into_bytes(),
            Made::Term(t, TermText::Screen) => t.screen().into_bytes(),
            Made::Term(t, TermText::Scrollback) => t.scrollback_text().into_bytes(),
            Made::Term(t, TermText::All) => t.text().into_bytes(),
        }
    }
}

/// `make`'s result, made on a blocking thread when it is `big`.
async fn off_the_workers<T: Send + 'static>(big: bool, make: impl FnOnce() -> T + Send + 'static) -> T {
    if !big {
        return make();
    }
    match tokio::task::spawn_blocking(make).await {
        Ok(made) => made,
        Err(e) => std::panic::resume_unwind(e.into_panic()),
    }
}

/// One version of a file's bytes, as a fid keeps it between reads: most
/// made whole; a text as a copy of its rope (nodes shared), so reading a
/// 100 MB body copies each byte once, from the rope into a reply, and
/// holds no second copy of it; a snapshot as its parts, its texts shared
/// the same way; a terminal's text as its rows, shared the same way.
pub enum Version {
    Plain(Vec<u8>),
    Text(Text),
    /// Shared by every fid that opened the session's snapshot at the same
    /// count of changes ([`SharedSnapshots`]).
    Snapshot(Arc<SnapshotParts>),
    Rows(Rows),
}

/// Each session's snapshot parts as last made, kept only while a fid
/// holds them: fids that open `snapshot` with nothing changed in between
/// share one, so 20,000 opens hold one encoding of the state, not 20,000.
/// Snapshots of different moments are not shared: those held at once may
/// hold [`SNAPSHOTS_HELD_MAX`] bytes of their own in all, past which
/// another is refused (one always may be).
#[derive(Clone)]
pub struct SharedSnapshots {
    inner: Arc<std::sync::Mutex<Held>>,
    max: usize,
}

impl Default for SharedSnapshots {
    fn default() -> SharedSnapshots {
        SharedSnapshots::at_most(SNAPSHOTS_HELD_MAX)
    }
}

/// The most bytes snapshot versions held at once may hold of their own
/// (their texts are shared with the sessions').
pub const SNAPSHOTS_HELD_MAX: usize = 1 << 30;

#[derive(Default)]
struct Held {
    /// Each session's parts as last made, and its count of changes then
    /// ([`crate::session::Session::changes`]).
    by_session: std::collections::BTreeMap<u64, (u64, std::sync::Weak<SnapshotParts>)>,
    /// Every version a fid may still hold, and what it holds.
    live: Vec<(std::sync::Weak<SnapshotParts>, usize)>,
}

impl SharedSnapshots {
    /// Versions that hold at most `max` bytes of their own at once.
    pub fn at_most(max: usize) -> SharedSnapshots {
        SharedSnapshots { inner: Arc::default(), max }
    }

    /// Session `n`'s parts made after `changes` changes, if a fid still
    /// holds them.
    pub fn get(&self, n: u64, changes: u64) -> Option<Arc<SnapshotParts>> {
        let held = self.inner.lock().expect("snapshot lock");
        held.by_session.get(&n).filter(|(c, _)| *c == changes).and_then(|(_, parts)| parts.upgrade())
    }

    /// Remembers `parts`, made of session `n` after `changes` changes (or
    /// more: the count is read before the state is taken, so the parts
    /// are never older than it says); refused if the versions held
    /// already hold too much.
    pub fn put(&self, n: u64, changes: u64, parts: &Arc<SnapshotParts>) -> Result<(), FsError> {
        let mut held = self.inner.lock().expect("snapshot lock");
        held.live.retain(|(parts, _)| parts.strong_count() > 0);
        let (now, more) = (held.live.iter().map(|(_, n)| n).sum::<usize>(), parts.held());
        if !held.live.is_empty() && now + more > self.max {
            return Err(FsError::SnapshotsHeld { held: now, max: self.max });
        }
        held.live.push((Arc::downgrade(parts), more));
        held.by_session.insert(n, (changes, Arc::downgrade(parts)));
        Ok(())
    }
}

/// A terminal's text as lines, a newline after each row, kept as the
/// rows themselves (the scrollback's shared with the terminal, not
/// copied): a fid open on a long scrollback holds a pointer per row, not
/// a second copy of its text.
pub struct Rows {
    rows: Vec<Arc<Row>>,
    /// Where every [`MARK_EVERY`]th row starts, so a read finds its first
    /// row without counting from the top.
    marks: Vec<usize>,
    len: usize,
}

const MARK_EVERY: usize = 64;

impl Rows {
    /// A terminal's scrollback, or its scrollback then its screen.
    fn of(t: Term, which: TermText) -> Rows {
        let mut rows: Vec<Arc<Row>> = t.scrollback.into();
        if which != TermText::Scrollback {
            rows.extend(t.grid.into_iter().map(Arc::new));
        }
        Rows::new(rows)
    }

    fn new(rows: Vec<Arc<Row>>) -> Rows {
        let mut marks = Vec::with_capacity(rows.len() / MARK_EVERY + 1);
        let mut len = 0;
        for (i, row) in rows.iter().enumerate() {
            if i % MARK_EVERY == 0 {
                marks.push(len);
            }
            len += row.text.len() + 1;
        }
        Rows { rows, marks, len }
    }

    /// The bytes from `offset` to `end` (`offset < end <= len`).
    fn copy(&self, offset: usize, end: usize) -> Vec<u8> {
        let mark = self.marks.partition_point(|&m| m <= offset) - 1;
        let (mut i, mut at) = (mark * MARK_EVERY, self.marks[mark]);
        let mut out = Vec::with_capacity(end - offset);
        while at < end {
            let text = self.rows[i].text.as_bytes();
            let next = at + text.len() + 1;
            if next > offset {
                // The row's part inside the range, and its newline if that is.
                let from = offset.saturating_sub(at);
                let to = (end - at).min(text.len());
                if from < to {
                    out.extend_from_slice(&text[from..to]);
                }
                if end >= next {
                    out.push(b'\n');
                }
            }
            (i, at) = (i + 1, next);
        }
        out
    }
}

impl std::fmt::Debug for Version {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Version::Plain(b) => write!(f, "Plain({} bytes)", b.len()),
            Version::Text(t) => write!(f, "{t:?}"),
            Version::Snapshot(s) => write!(f, "Snapshot({} bytes)", s.len()),
            Version::Rows(r) => write!(f, "Rows({} rows, {} bytes)", r.rows.len(), r.len),
        }
    }
}

impl Default for Version {
    fn default() -> Version {
        Version::Plain(Vec::new())
    }
}

impl Version {
    fn len(&self) -> usize {
        match self {
            Version::Plain(b) => b.len(),
            Version::Text(t) => t.len_bytes(),
            Version::Snapshot(s) => s.len(),
            Version::Rows(r) => r.len,
        }
    }

    /// Up to `count` bytes from `offset` (as with any file, a read may
    /// end inside a rune; the next begins where it ended).
    pub fn range(&self, offset: usize, count: usize) -> Vec<u8> {
        let end = offset.saturating_add(count).min(self.len());
        if offset >= end {
            return Vec::new();
        }
        match self {
            Version::Plain(b) => b[offset..end].to_vec(),
            Version::Text(t) => {
                let mut out = Vec::with_capacity(end - offset);
                t.copy_bytes(offset, end, &mut out);
                out
            }
            Version::Snapshot(s) => s.range(offset, end),
            Version::Rows(r) => r.copy(offset, end),
        }
    }
}

impl Made {
    /// The version a fid keeps: a text as it is (nothing to make), a
    /// snapshot as its parts, a terminal's scrollback and text as their
    /// rows, the rest made into bytes as [`Made::made`] makes them.
    pub async fn version(self) -> Version {
        let big = self.is_big();
        match self {
            Made::Text(t) => Version::Text(t),
            Made::Term(t, which @ (TermText::Scrollback | TermText::All)) => {
                Version::Rows(off_the_workers(big, move || Rows::of(*t, which)).await)
            }
            // Its terminals' rows are encoded with the rest: many take a while.
            Made::Snapshot(st) => Version::Snapshot(Arc::new(off_the_workers(big, move || st.snapshot_parts()).await)),
            made => Version::Plain(made.made().await),
        }
    }
}

impl From<String> for Made {
    fn from(s: String) -> Made {
        Made::Bytes(s.into_bytes())
    }
}

#[cfg(test)]
mod tests {
    use super::{Made, TermText, Version};
    use apex_core::grid::Row;
    use apex_core::term::Term;
    use apex_core::text::Text;
    use std::sync::Arc;

    #[tokio::test]
    async fn a_terminals_text_version_reads_as_its_text_would_at_any_offset_and_shares_its_rows() {
        // Rows empty, short, long, with runes of one to four bytes, and more
        // of them than marks are kept for, so reads start and end in rows,
        // on newlines, in runes and across marks.
        let mut t = Term::new(12, 3, 1000, "sh".into(), "/".into()).unwrap();
        let texts =
            ["", "$ ls", "naïve — 文字 𝄞", "a long row, longer than the screen is wide, as a wrapped one keeps"];
        t.scrollback = (0..300).map(|i| Arc::new(Row::plain(texts[i % texts.len()]))).collect();
        t.grid = vec![Row::plain("top"), Row::plain(""), Row::plain("$ ")];
        for (which, whole) in [(TermText::All, t.text()), (TermText::Scrollback, t.scrollback_text())] {
            let version = Made::Term(Box::new(t.clone()), which).version().await;
            let Version::Rows(rows) = &version else { panic!("{which:?} made whole: {version:?}") };
            assert!(Arc::ptr_eq(&rows.rows[1], &t.scrollback[1]), "the scrollback's rows are shared, not copied");
            let plain = Version::Plain(whole.into_bytes());
            assert_eq!(version.len(), plain.len());
            for offset in (0..plain.len() + 10).step_by(7) {
                for count in [0, 1, 2, 5, 64, 1000, usize::MAX] {
                    assert!(version.range(offset, count) == plain.range(offset, count), "{which:?} {offset}+{count}");
                }
            }
        }
    }

    #[test]
    fn a_text_version_reads_as_its_bytes_would_at_any_offset() {
        // Many rope chunks, runes of one to four bytes, so ranges start
        // and end inside chunks, across them, and inside runes.
        let s: String = "plain, naïve — 文字 𝄞 line\n".repeat(900);
        let text = Version::Text(Text::from(s.as_str()));
        let plain = Version::Plain(s.clone().into_bytes());
        assert_eq!(text.len(), s.len());
        for offset in (0..s.len() + 10).step_by(97) {
            for count in [0, 1, 3, 1000, 4096, 25_000, usize::MAX] {
                let want = plain.range(offset, count);
                assert!(text.range(offset, count) == want, "{offset}+{count}");
                assert_eq!(want.len(), count.min(s.len().saturating_sub(offset)));
            }
        }
    }
}
