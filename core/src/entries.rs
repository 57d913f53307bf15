//! `Entries`: a shard's retained entries, in order, held in chunks.
//!
//! One growing buffer (a `VecDeque`) doubled as the log grew: the
//! keystroke that crossed a power of two copied every entry held (88 MB
//! at a million entries) into freshly mapped memory, and a leader typing
//! spent a third of its time in that growth and its page faults. Chunks
//! of [`CHUNK`] entries never move once written, each is small enough to
//! come from the heap, and a chunk compaction lets go is there for the
//! next entries.

use crate::entry::Entry;
use std::collections::VecDeque;

/// Entries a chunk holds: 88 KiB, well under the size glibc maps apart.
pub const CHUNK: usize = 1024;

/// The entries, in order. Every chunk but the first and the last is full;
/// the first loses entries at its front as they are let go, the last
/// gains them at its back.
#[derive(Default)]
pub struct Entries {
    chunks: VecDeque<VecDeque<Entry>>,
    len: usize,
}

impl Entries {
    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The `i`th entry held.
    pub fn get(&self, i: usize) -> Option<&Entry> {
        let first = self.chunks.front()?;
        if i < first.len() {
            return first.get(i);
        }
        let i = i - first.len();
        self.chunks.get(1 + i / CHUNK)?.get(i % CHUNK)
    }

    pub fn back(&self) -> Option<&Entry> {
        self.chunks.back()?.back()
    }

    /// Adds `entry` at the end; returns it where it is kept.
    pub fn push_back(&mut self, entry: Entry) -> &Entry {
        if self.chunks.back().is_none_or(|c| c.len() == CHUNK) {
            self.chunks.push_back(VecDeque::with_capacity(CHUNK));
        }
        let last = self.chunks.back_mut().expect("a chunk with room");
        last.push_back(entry);
        self.len += 1;
        last.back().expect("just pushed")
    }

    /// Takes the first entry out.
    pub fn pop_front(&mut self) -> Option<Entry> {
        let first = self.chunks.front_mut()?;
        let entry = first.pop_front();
        if first.is_empty() {
            self.chunks.pop_front();
        }
        self.len -= usize::from(entry.is_some());
        entry
    }

    /// Keeps the first `n` entries, dropping the rest.
    pub fn truncate(&mut self, n: usize) {
        while self.len > n {
            let extra = self.len - n;
            let last = self.chunks.back_mut().expect("entries in chunks");
            let drop = extra.min(last.len());
            last.truncate(last.len() - drop);
            if last.is_empty() {
                self.chunks.pop_back();
            }
            self.len -= drop;
        }
    }

    /// The entries in order (and backwards).
    pub fn iter(&self) -> impl DoubleEndedIterator<Item = &Entry> + '_ {
        self.chunks.iter().flatten()
    }

    /// The entries from the `i`th on, found without walking those before.
    pub fn iter_from(&self, i: usize) -> impl Iterator<Item = &Entry> + '_ {
        let first = self.chunks.front().map_or(0, VecDeque::len);
        let (chunk, within) = match i < first {
            true => (0, i),
            false => (1 + (i - first) / CHUNK, (i - first) % CHUNK),
        };
        self.chunks
            .iter()
            .skip(chunk)
            .enumerate()
            .flat_map(move |(n, c)| c.iter().skip(if n == 0 { within } else { 0 }))
    }
}

/// Chunked afresh, each chunk with its full room, so that the copy too
/// grows without moving what it holds.
impl Clone for Entries {
    fn clone(&self) -> Entries {
        let mut copy = Entries::default();
        for e in self.iter() {
            copy.push_back(e.clone());
        }
        copy
    }
}

impl<'a> IntoIterator for &'a Entries {
    type Item = &'a Entry;
    type IntoIter = std::iter::Flatten<std::collections::vec_deque::Iter<'a, VecDeque<Entry>>>;
    fn into_iter(self) -> Self::IntoIter {
        self.chunks.iter().flatten()
    }
}

/// Equal when they hold the same entries, however they are chunked.
impl PartialEq for Entries {
    fn eq(&self, other: &Entries) -> bool {
        self.len == other.len && self.iter().eq(other.iter())
    }
}

impl Eq for Entries {}

impl std::fmt::Debug for Entries {
    fn fmt(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.debug_list().entries(self.iter()).finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::id::AttachmentId;
    use crate::op::{BufferOp, Op, Origin};
    use proptest::prelude::*;

    fn entry(seq: u64) -> Entry {
        let op = Op::Buffer(BufferOp::Splice { q0: seq, q1: seq, text: seq.to_string(), origin: Origin::Keyboard });
        Entry { seq, attachment: AttachmentId(1), epoch: 1, op }
    }

    #[derive(Clone, Debug)]
    enum Step {
        Push(usize),
        Pop(usize),
        Truncate(usize),
    }

    fn step() -> impl Strategy<Value = Step> {
        prop_oneof![
            (1..3000usize).prop_map(Step::Push),
            (1..3000usize).prop_map(Step::Pop),
            (0..4000usize).prop_map(Step::Truncate),
        ]
    }

    proptest! {
        /// Pushed, let go at the front and cut at the back in any order
        /// and across chunks, they are what one deque would hold: each
        /// found by its place, from any place on, and in order.
        #[test]
        fn chunked_entries_are_the_entries_of_one_deque(steps in proptest::collection::vec(step(), 1..12)) {
            let (mut chunked, mut model, mut next) = (Entries::default(), VecDeque::new(), 0u64);
            for s in steps {
                match s {
                    Step::Push(n) => for _ in 0..n {
                        next += 1;
                        prop_assert_eq!(chunked.push_back(entry(next)), &entry(next));
                        model.push_back(entry(next));
                    },
                    Step::Pop(n) => for _ in 0..n {
                        prop_assert_eq!(chunked.pop_front(), model.pop_front());
                    },
                    Step::Truncate(n) => {
                        chunked.truncate(n);
                        model.truncate(n);
                    }
                }
                prop_assert_eq!(chunked.len(), model.len());
                prop_assert_eq!(chunked.back(), model.back());
                prop_assert!(chunked.iter().eq(model.iter()));
                prop_assert!(chunked.iter().rev().eq(model.iter().rev()));
                // Around the first chunk's end, where the places of the
                // rest are counted from.
                let first = chunked.chunks.front().map_or(0, VecDeque::len);
                let places = [0, 1, CHUNK - 1, CHUNK, CHUNK + 1, model.len().saturating_sub(1), model.len(), model.len() / 2];
                let near_first = [first.saturating_sub(1), first, first + 1, first + CHUNK - 1, first + CHUNK, first + CHUNK + 1];
                for i in places.into_iter().chain(near_first) {
                    prop_assert_eq!(chunked.get(i), model.get(i), "get({})", i);
                    prop_assert!(chunked.iter_from(i).eq(model.iter().skip(i)), "iter_from({})", i);
                }
            }
            let mut rechunked = Entries::default();
            for e in &model {
                rechunked.push_back(e.clone());
            }
            prop_assert_eq!(&rechunked, &chunked);
            prop_assert_eq!(&chunked.clone(), &chunked);
        }
    }
}
