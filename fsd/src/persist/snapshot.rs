//! A session's snapshot file: the state after every segment before
//! `from_segment`, so a restart decodes it and replays only the segments
//! from there.
//!
//! ```text
//! "APEXSNP\0" | version u32 | session uuid [16] | from_segment u64 | state hash [32]
//!   | body length u64 | crc32c(body) u32 | crc32c(header) u32 | body: State::to_snapshot
//! ```
//!
//! It is written to `snapshot.tmp`, synced, renamed over `snapshot` and
//! the directory synced, so a crash leaves the old snapshot or the new,
//! never half of one.

use super::fault;
use super::StoreError;
use apex_core::State;
use std::io::Write;
use std::os::unix::fs::FileExt;
use std::path::Path;

pub const FILE: &str = "snapshot";
pub const TEMP: &str = "snapshot.tmp";
const MAGIC: &[u8; 8] = b"APEXSNP\0";
const VERSION: u32 = 1;
const HEADER_LEN: usize = 8 + 4 + 16 + 8 + 32 + 8 + 4 + 4;
/// How much of the body is made and written at once.
const PIECE: usize = 4 << 20;

/// A snapshot read back.
pub struct Snapshot {
    pub from_segment: u64,
    /// The state's hash when it was written.
    pub hash: [u8; 32],
    pub state: State,
}

/// Writes `state` as the snapshot covering every segment before
/// `from_segment`, atomically. The body goes to the file a piece at a
/// time from the state's parts (its texts copied out of their ropes as
/// they are written), and the header, which holds the body's hash and
/// checksum, over the room left for it: a snapshot of a 1 GB text costs
/// a few MiB of memory, not a second copy of the text.
pub fn write(dir: &Path, uuid: [u8; 16], from_segment: u64, state: &State) -> Result<(), StoreError> {
    let parts = state.snapshot_parts();
    let temp = dir.join(TEMP);
    let io = |e| StoreError::io(&temp, e);
    let mut f = super::create_private(&temp).map_err(io)?;
    f.write_all(&[0; HEADER_LEN]).map_err(io)?;
    let (mut crc, mut piece) = (0, Vec::with_capacity(PIECE));
    for start in (0..parts.len()).step_by(PIECE) {
        piece.clear();
        parts.range_into(start, start + PIECE, &mut piece);
        crc = crc32c::crc32c_append(crc, &piece);
        f.write_all(&piece).map_err(io)?;
    }
    let hash = *apex_sys::statehash::parts_hash(&parts).as_bytes();
    let mut h = Vec::with_capacity(HEADER_LEN);
    h.extend_from_slice(MAGIC);
    h.extend_from_slice(&VERSION.to_le_bytes());
    h.extend_from_slice(&uuid);
    h.extend_from_slice(&from_segment.to_le_bytes());
    h.extend_from_slice(&hash);
    h.extend_from_slice(&(parts.len() as u64).to_le_bytes());
    h.extend_from_slice(&crc.to_le_bytes());
    let header_crc = crc32c::crc32c(&h);
    h.extend_from_slice(&header_crc.to_le_bytes());
    f.write_all_at(&h, 0).and_then(|_| f.sync_all()).map_err(io)?;
    drop(f);
    if fault::crash_at(fault::SNAPSHOT_BEFORE_RENAME) {
        fault::crash();
    }
    let path = dir.join(FILE);
    std::fs::rename(&temp, &path).map_err(|e| StoreError::io(&path, e))?;
    super::sync_dir(dir)
}

/// Reads the snapshot at `path`, which must be session `uuid`'s; checks
/// its checksums (and, with `verify`, that the decoded state hashes as
/// it did).
pub fn read(path: &Path, uuid: [u8; 16], verify: bool) -> Result<Snapshot, StoreError> {
    let bytes = std::fs::read(path).map_err(|e| StoreError::io(path, e))?;
    let bad = |why: String| StoreError::Snapshot { path: path.to_path_buf(), why };
    if bytes.len() < HEADER_LEN || &bytes[..8] != MAGIC {
        return Err(bad("not an apex snapshot (bad magic or too short)".into()));
    }
    let u32_at = |i: usize| u32::from_le_bytes(bytes[i..i + 4].try_into().expect("4 bytes"));
    let u64_at = |i: usize| u64::from_le_bytes(bytes[i..i + 8].try_into().expect("8 bytes"));
    if u32_at(8) != VERSION {
        return Err(bad(format!("format version {}, but this apexd reads version {VERSION}", u32_at(8))));
    }
    if crc32c::crc32c(&bytes[..HEADER_LEN - 4]) != u32_at(HEADER_LEN - 4) {
        return Err(bad("the header's checksum does not match".into()));
    }
    if bytes[12..28] != uuid {
        return Err(bad("it belongs to another session (its uuid differs)".into()));
    }
    let from_segment = u64_at(28);
    let hash: [u8; 32] = bytes[36..68].try_into().expect("32 bytes");
    let len = u64_at(68) as usize;
    let body = &bytes[HEADER_LEN..];
    if body.len() != len {
        return Err(bad(format!("the body is {} bytes, its header says {len} (truncated?)", body.len())));
    }
    if crc32c::crc32c(body) != u32_at(76) {
        return Err(bad("the body's checksum does not match".into()));
    }
    let state = State::from_snapshot(body).map_err(|e| bad(format!("the state does not decode: {e}")))?;
    // A snapshot of an older format hashed as that format encodes: the
    // decoding is its check.
    let current = body.first() == Some(&apex_core::snap::SNAPSHOT_FORMAT);
    if verify && current && *apex_sys::statehash::state_hash(&state).as_bytes() != hash {
        return Err(bad("the decoded state does not hash as it did when written".into()));
    }
    Ok(Snapshot { from_segment, hash, state })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A snapshot written a piece at a time from the state's parts is the
    /// header and `to_snapshot`'s bytes, and reads back, verified, as the
    /// state it was: several pieces, texts across their edges.
    #[test]
    fn a_snapshot_written_in_pieces_is_the_state_encoded_whole() {
        let dir = std::env::temp_dir().join(format!("apex-snapshot-pieces-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let mut n = apex_core::Node::server();
        for (name, size) in [("big", 2 * PIECE + 12_345), ("small", 999), ("third", PIECE / 2 + 7)] {
            let b = n.create_buffer_as(name).unwrap();
            let text: String = "ab\u{e9}\n".chars().cycle().take(size).collect();
            n.append_splice(b, 0, 0, &text, apex_core::Origin::OtherFile).unwrap();
        }
        let uuid = [7; 16];
        write(&dir, uuid, 3, &n.state).unwrap();
        let bytes = std::fs::read(dir.join(FILE)).unwrap();
        assert_eq!(bytes[HEADER_LEN..], n.state.to_snapshot()[..], "the body is the state's encoding");
        let back = read(&dir.join(FILE), uuid, true).unwrap();
        assert_eq!((back.from_segment, back.hash), (3, *n.state.hash().as_bytes()));
        assert_eq!(back.state.to_snapshot(), n.state.to_snapshot());
        assert!(!dir.join(TEMP).exists());
        let _ = std::fs::remove_dir_all(&dir);
    }
}
