//! The state hash on threads: a state's snapshot blocks
//! (`apex_core::hashtree`), made from its parts (the texts copied out of
//! their ropes by each thread), hashed side by side; a snapshot's bytes
//! likewise. The digest
//! is the one `State::hash` makes alone: blake3 of the snapshot.

use apex_core::hashtree::{block_value, finish, Tail, BLOCK};
use apex_core::snap::SnapshotParts;
use apex_core::State;
use blake3::hazmat::ChainingValue;

/// Threads that hash blocks.
const THREADS: usize = 2;

/// Below this much text, threads cost more than they save.
const ALONE_BELOW: usize = 4 << 20;

/// blake3 of `state`'s snapshot, as `State::hash`, its blocks made from
/// the snapshot's parts and hashed on threads of their own.
pub fn state_hash(state: &State) -> blake3::Hash {
    let texts: usize = state.buffers.values().map(|b| b.text.len_bytes()).sum();
    if texts < ALONE_BELOW {
        return state.hash();
    }
    parts_hash(&state.snapshot_parts())
}

/// blake3 of the snapshot `parts` make, as [`state_hash`] hashes them,
/// at any size: a snapshot written from its parts is hashed with no copy
/// of it all in memory.
pub fn parts_hash(parts: &SnapshotParts) -> blake3::Hash {
    if parts.len() < ALONE_BELOW {
        return blake3::hash(&parts.range(0, parts.len()));
    }
    let last = (parts.len() - 1) / BLOCK;
    let values = on_threads(last, |i, block| {
        block.clear();
        parts.range_into(i * BLOCK, (i + 1) * BLOCK, block);
        block_value(i, block)
    });
    finish(values, Tail { index: last, block: parts.range(last * BLOCK, parts.len()) })
}

/// blake3 of `bytes` (a snapshot's), hashed on threads as
/// [`state_hash`] hashes a state's: the same digest as `blake3::hash`.
pub fn bytes_hash(bytes: &[u8]) -> blake3::Hash {
    if bytes.len() < ALONE_BELOW {
        return blake3::hash(bytes);
    }
    let last = (bytes.len() - 1) / BLOCK;
    let values = on_threads(last, |i, _| block_value(i, &bytes[i * BLOCK..(i + 1) * BLOCK]));
    finish(values, Tail { index: last, block: bytes[last * BLOCK..].to_vec() })
}

/// The values of blocks `0..count`, each thread taking every
/// `THREADS`th with a block's room of its own to make it in.
fn on_threads(count: usize, value: impl Fn(usize, &mut Vec<u8>) -> ChainingValue + Sync) -> Vec<ChainingValue> {
    let value = &value;
    std::thread::scope(|s| {
        let threads: Vec<_> = (0..THREADS)
            .map(|t| {
                s.spawn(move || {
                    let mut block = Vec::with_capacity(BLOCK);
                    (t..count).step_by(THREADS).map(|i| value(i, &mut block)).collect::<Vec<_>>()
                })
            })
            .collect();
        let mut values = vec![[0; 32]; count];
        for (t, thread) in threads.into_iter().enumerate() {
            let made = thread.join().expect("hashing a block cannot panic");
            for (i, v) in (t..count).step_by(THREADS).zip(made) {
                values[i] = v;
            }
        }
        values
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bytes_hash_as_blake3_does_at_every_kind_of_length() {
        let bytes: Vec<u8> = (0..(ALONE_BELOW + 5 * BLOCK + 17)).map(|i| (i * 7 % 251) as u8).collect();
        for len in [0, 1, BLOCK, ALONE_BELOW, ALONE_BELOW + 1, ALONE_BELOW + 2 * BLOCK, bytes.len()] {
            assert_eq!(bytes_hash(&bytes[..len]), blake3::hash(&bytes[..len]), "{len} bytes");
        }
    }

    #[test]
    fn a_state_hashes_on_threads_as_it_does_alone() {
        use apex_core::{BufferOp, Op, Origin, Shard};
        let mut n = apex_core::Node::server();
        for (name, size) in [("big", ALONE_BELOW + 3 * BLOCK + 5), ("small", 999), ("second", 2 * BLOCK)] {
            let b = n.create_buffer_as(name).unwrap();
            // In splices of at most 1 MiB, as a client must send them.
            for at in (0..size).step_by(500_000) {
                let text: String = "ab\u{e9}\n".chars().cycle().take((size - at).min(500_000)).collect();
                let q = at as u64;
                n.append(
                    Shard::Buffer(b),
                    Op::Buffer(BufferOp::Splice { q0: q, q1: q, text, origin: Origin::OtherFile }),
                )
                .unwrap();
            }
        }
        let alone = n.state.hash();
        assert_eq!(alone, blake3::hash(&n.state.to_snapshot()));
        assert_eq!(state_hash(&n.state), alone);
        assert_eq!(bytes_hash(&n.state.to_snapshot()), alone);
        assert_eq!(parts_hash(&n.state.snapshot_parts()), alone);
        let small = apex_core::State::new();
        assert_eq!(parts_hash(&small.snapshot_parts()), small.hash(), "a state under the threshold");
    }
}
