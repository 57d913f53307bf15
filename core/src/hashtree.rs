//! The state hash as blake3's tree: the snapshot's bytes cut into 64 KiB
//! blocks, each a whole subtree of blake3's, whose values combine into
//! the same digest as blake3 of the bytes in one piece.
//!
//! Why blocks: blake3 is fastest fed whole, aligned runs of chunks, and a
//! rope's chunks are about 1 KB, cut wherever its edits left them. Each
//! byte is copied once, from the rope into a block, and each block is
//! hashed with all of blake3's lanes in use. A block's value does not
//! depend on any other, so a caller with threads to spare (the daemon,
//! `apex_sys::statehash`) hashes blocks side by side, each made from
//! [`crate::snap::SnapshotParts`], while [`crate::State::hash`] streams
//! the state into blocks and hashes them in turn. The digest is blake3
//! of the snapshot either way: snapshots already written check as they
//! did, and their format is unchanged.

use blake3::hazmat::{left_subtree_len, merge_subtrees_non_root, merge_subtrees_root, ChainingValue, HasherExt, Mode};

/// Bytes per block: 64 of blake3's 1 KiB chunks, a power of two, so
/// every block but the last is a whole subtree.
pub const BLOCK: usize = 64 * 1024;

/// The value of block `index` of a stream longer than one block.
pub fn block_value(index: usize, block: &[u8]) -> ChainingValue {
    let mut h = blake3::Hasher::new();
    h.set_input_offset((index * BLOCK) as u64);
    h.update(block);
    h.finalize_non_root()
}

/// The last block of a stream, which may be shorter than the others.
pub struct Tail {
    pub index: usize,
    pub block: Vec<u8>,
}

/// blake3 of a stream from the values of its blocks before `tail` (in
/// order, `tail.index` of them) and `tail` itself.
pub fn finish(mut values: Vec<ChainingValue>, tail: Tail) -> blake3::Hash {
    assert_eq!(values.len(), tail.index, "a value for every block before the last");
    if tail.index == 0 {
        return blake3::hash(&tail.block);
    }
    let len = tail.index * BLOCK + tail.block.len();
    values.push(block_value(tail.index, &tail.block));
    // blake3's tree: the left subtree holds the largest power of two of
    // chunks less than the whole, the right the rest, all the way down;
    // with more than one block, every left subtree is whole blocks.
    fn value(values: &[ChainingValue], at: usize, len: usize) -> ChainingValue {
        if len <= BLOCK {
            return values[at / BLOCK];
        }
        let left = left_subtree_len(len as u64) as usize;
        merge_subtrees_non_root(&value(values, at, left), &value(values, at + left, len - left), Mode::Hash)
    }
    let left = left_subtree_len(len as u64) as usize;
    merge_subtrees_root(&value(&values, 0, left), &value(&values, left, len - left), Mode::Hash)
}

/// A stream being cut into blocks, each hashed as it fills.
#[derive(Default)]
pub(crate) struct Blocks {
    block: Vec<u8>,
    index: usize,
    values: Vec<ChainingValue>,
}

impl Blocks {
    pub(crate) fn write(&mut self, mut bytes: &[u8]) {
        while !bytes.is_empty() {
            self.make_room();
            let take = (BLOCK - self.block.len()).min(bytes.len());
            self.block.extend_from_slice(&bytes[..take]);
            bytes = &bytes[take..];
        }
    }

    /// Hashes a full block, once more bytes follow it: only the last
    /// block may be the root, hashed differently.
    fn make_room(&mut self) {
        if self.block.len() < BLOCK {
            return;
        }
        self.values.push(block_value(self.index, &self.block));
        self.block.clear();
        self.index += 1;
    }

    /// Writes `text`'s encoding (`text::copy_encoded`) straight from its
    /// rope, a block's room at a time.
    pub(crate) fn write_text(&mut self, text: &crate::text::Text) {
        let size = crate::text::encoded_size(text);
        let mut at = 0;
        while at < size {
            self.make_room();
            let room = BLOCK - self.block.len();
            crate::text::copy_encoded(text, at, at + room, &mut self.block);
            at += room;
        }
    }

    /// The stream's hash.
    pub(crate) fn end(self) -> blake3::Hash {
        finish(self.values, Tail { index: self.index, block: self.block })
    }
}
