//! A big rope built with its leaves one after another in memory.
//!
//! ropey's builder allocates a leaf (about 1 KB of text) for every piece
//! and, each time a level of the tree fills, an internal node between two
//! leaves: one every dozen. Reading the text through its chunks (Look, B3,
//! the hash, a snapshot, a Put, the flat copy an Edit searches) then runs
//! at half the speed of reading the same chunks laid out without those
//! gaps (measured on 100 MB: `memchr` over every chunk 9.6 ms against
//! 4.1-5.3 ms; the flat text 4.0 ms), whatever the CPU prefetches.
//!
//! [`Leaves`] keeps the builder's leaves together without reaching into
//! ropey: before each piece of one leaf's size is handed to the builder,
//! one block of a leaf's allocation size, taken earlier with others in a
//! batch, is freed. The allocator hands the block freed last to the next
//! allocation of its size, which is that piece's leaf; the internal nodes
//! the builder makes after it find no such block and go elsewhere. Under
//! another allocator the rope is the same and only its layout differs.
//! What it costs, 10-35% of the build: a malloc and a free per leaf, and
//! a second copy of each byte (the builder keeps back the end of every
//! piece and makes the next leaf in its own buffer).

use ropey::{Rope, RopeBuilder};
use std::mem::MaybeUninit;
use std::sync::OnceLock;

/// Bytes ropey allocates for a node, leaf or internal (its
/// `TARGET_TOTAL_SIZE`, its reference counts included).
const NODE_ALLOCATION: usize = 1024;

/// Blocks taken at once: the leaves of a batch lie together, and the
/// internal nodes made meanwhile follow them.
const BATCH: usize = 256;

/// Below this many bytes a text is built as ropey builds it: a few gaps
/// cost nothing, and a batch of blocks (256 KiB while it lasts) would
/// outweigh the text.
pub(crate) const SMALL: usize = 64 * 1024;

type Block = Box<MaybeUninit<[u8; NODE_ALLOCATION]>>;

/// The bytes ropey's builder puts in a full leaf, learnt once from the
/// builder itself so that a new ropey cannot make each piece two leaves.
fn leaf_bytes() -> usize {
    static LEAF: OnceLock<usize> = OnceLock::new();
    *LEAF.get_or_init(|| {
        let probe = "x".repeat(8 * NODE_ALLOCATION);
        Rope::from_str(&probe).chunks().next().map_or(NODE_ALLOCATION, str::len)
    })
}

/// Builds a rope from texts appended in any pieces, its leaves past the
/// first [`SMALL`] bytes one after another.
pub(crate) struct Leaves {
    out: RopeBuilder,
    /// The text not yet handed over: less than a leaf.
    pending: String,
    /// Blocks to free, the next one last.
    pool: Vec<Block>,
    /// Bytes handed over so far.
    taken: usize,
    /// Bytes expected in all (`usize::MAX`: not known): the last batch
    /// takes no more blocks than the leaves left need.
    expected: usize,
    leaf: usize,
}

impl Leaves {
    pub(crate) fn new() -> Leaves {
        Leaves::expecting(usize::MAX)
    }

    /// For a text of `bytes` bytes: a 100 KB file's rope took a batch of
    /// 256 blocks for its last 36 leaves, a third of its build.
    pub(crate) fn expecting(bytes: usize) -> Leaves {
        let (out, pending, pool) = (RopeBuilder::new(), String::new(), Vec::new());
        Leaves { out, pending, pool, taken: 0, expected: bytes, leaf: leaf_bytes() }
    }

    /// Appends `text`: a piece that leaves the pending leaf short of full
    /// (most of a whole-file Edit's, a few bytes each) is put on it here,
    /// inline, the rest by [`Leaves::fill`].
    #[inline]
    pub(crate) fn append(&mut self, text: &str) {
        if self.pending.len() + text.len() < self.leaf {
            super::utf8::push_piece(&mut self.pending, text);
            return;
        }
        self.fill(text);
    }

    fn fill(&mut self, mut text: &str) {
        if !self.pending.is_empty() {
            let cut = ceil_boundary(text, self.leaf.saturating_sub(self.pending.len()));
            self.pending.push_str(&text[..cut]);
            text = &text[cut..];
            if self.pending.len() < self.leaf {
                return;
            }
            let piece = std::mem::take(&mut self.pending);
            self.hand_over(&piece);
            self.pending = piece;
            self.pending.clear();
        }
        // A piece of at least a leaf's bytes makes one leaf: the builder
        // keeps back at least a byte of what it is given, and the next
        // piece fills that leaf. Where runes of several bytes or CRLFs
        // move its cuts, what it keeps back grows until a piece makes
        // two leaves, now and then, and one of them lies apart.
        while text.len() >= self.leaf {
            let (piece, rest) = text.split_at(ceil_boundary(text, self.leaf));
            self.hand_over(piece);
            text = rest;
        }
        self.pending.push_str(text);
    }

    fn hand_over(&mut self, piece: &str) {
        self.taken += piece.len();
        if self.taken > SMALL {
            if self.pool.is_empty() {
                // This piece's leaf, those left, and one for what the
                // builder keeps back.
                let left = self.expected.saturating_sub(self.taken) / self.leaf + 2;
                self.pool.extend((0..BATCH.min(left)).map(|_| Box::new_uninit()));
                // Freed from the lowest address up (the first few may
                // come from blocks freed before, anywhere).
                self.pool.sort_unstable_by_key(|block| std::cmp::Reverse(block.as_ptr() as usize));
            }
            drop(self.pool.pop());
        }
        self.out.append(piece);
    }

    pub(crate) fn finish(mut self) -> Rope {
        self.out.append(&self.pending);
        self.out.finish()
    }
}

/// The first rune boundary of `text` at or after byte `at` (its end if
/// `at` is past it).
fn ceil_boundary(text: &str, at: usize) -> usize {
    let mut at = at.min(text.len());
    while !text.is_char_boundary(at) {
        at += 1;
    }
    at
}

/// `text` as a rope: as ropey builds it if it is [`SMALL`], else with its
/// leaves one after another.
pub fn rope_of(text: &str) -> Rope {
    if text.len() < SMALL {
        return Rope::from_str(text);
    }
    let mut leaves = Leaves::expecting(text.len());
    leaves.append(text);
    leaves.finish()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn texts() -> Vec<String> {
        let leaf = leaf_bytes();
        let mixed: String = "aé€😀\r\n".chars().cycle().take(3 * SMALL).collect();
        vec![
            String::new(),
            "x".into(),
            "x".repeat(leaf - 1),
            "x".repeat(leaf),
            "x".repeat(leaf + 1),
            "\r\n".repeat(SMALL),
            "x\r\n".repeat(SMALL),
            format!("{}\r\n{}", "x".repeat(SMALL + leaf - 1), "y".repeat(leaf)),
            mixed,
            "line of text\n".repeat(40_000),
        ]
    }

    #[test]
    fn a_rope_built_leaves_first_is_its_text_in_any_pieces() {
        let leaf = leaf_bytes();
        for (i, text) in texts().iter().enumerate() {
            let whole = rope_of(text);
            assert!(whole == text.as_str(), "text {i} whole");
            whole.assert_integrity();
            whole.assert_invariants();
            for size in [1, 7, leaf - 1, leaf, leaf + 3, 2 * leaf + 1, PIECE_LIKE] {
                let mut leaves = Leaves::new();
                let mut at = 0;
                while at < text.len() {
                    let end = ceil_boundary(text, at + size);
                    leaves.append(&text[at..end]);
                    at = end;
                }
                let built = leaves.finish();
                assert!(built == text.as_str(), "text {i} in pieces of {size}");
                built.assert_integrity();
                built.assert_invariants();
            }
        }
    }

    const PIECE_LIKE: usize = 64 * 1024 + 5;

    /// A text of known size takes no more blocks than its leaves use: the
    /// blocks left over when it is built are at most the two spare.
    #[test]
    fn a_text_of_known_size_takes_the_blocks_its_leaves_need() {
        for size in [SMALL + 1, 100_000, 300_000, 2_000_000] {
            let text = "line of text\n".repeat(size / 13 + 1);
            let mut leaves = Leaves::expecting(text.len());
            leaves.append(&text);
            assert!(leaves.pool.len() <= 2, "{} bytes: {} blocks left over", text.len(), leaves.pool.len());
            assert!(leaves.finish() == text.as_str());
        }
    }

    #[test]
    fn a_big_text_put_between_a_cr_and_an_lf_keeps_the_rope_whole() {
        let big = format!("\n{}\r", "x\r\n".repeat(SMALL));
        for (before, q0, q1) in [("ab\r\ncd", 3, 3), ("ab\r\ncd", 2, 4), ("", 0, 0), ("ab\r", 3, 3)] {
            let mut text = super::super::Text::from(before);
            text.splice(q0, q1, &big);
            let mut want: Vec<char> = before.chars().collect();
            want.splice(q0..q1, big.chars());
            assert!(text.rope() == want.iter().collect::<String>().as_str(), "{before:?} {q0}..{q1}");
            text.rope().assert_integrity();
            text.rope().assert_invariants();
        }
    }

    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    /// The share of neighbouring chunks that lie the most common distance
    /// apart in memory.
    fn together(rope: &Rope) -> f64 {
        let starts: Vec<usize> = rope.chunks().map(|c| c.as_ptr() as usize).collect();
        let mut gaps = std::collections::BTreeMap::new();
        for w in starts.windows(2) {
            *gaps.entry(w[1].wrapping_sub(w[0])).or_insert(0usize) += 1;
        }
        *gaps.values().max().unwrap_or(&0) as f64 / (starts.len() - 1) as f64
    }

    /// glibc's malloc hands a block freed to the next allocation of its
    /// size; under another allocator only the layout would differ.
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    #[test]
    fn its_leaves_lie_one_after_another() {
        let text = "the quick brown fox jumps over the lazy dog\n".repeat(100_000);
        let ours = rope_of(&text);
        let theirs = Rope::from_str(&text);
        // ropey's own build puts an internal node after every dozen
        // leaves or so: the measure tells the two apart.
        assert!(together(&theirs) < 0.95, "ropey's build: {}", together(&theirs));
        assert!(together(&ours) > 0.98, "leaves first: {}", together(&ours));
    }
}
