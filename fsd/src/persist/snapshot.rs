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
use std::path::Path;

pub const FILE: &str = "snapshot";
pub const TEMP: &str = "snapshot.tmp";
const MAGIC: &[u8; 8] = b"APEXSNP\0";
const VERSION: u32 = 1;
const HEADER_LEN: usize = 8 + 4 + 16 + 8 + 32 + 8 + 4 + 4;

/// A snapshot read back.
pub struct Snapshot {
    pub from_segment: u64,
    /// The state's hash when it was written.
    pub hash: [u8; 32],
    pub state: State,
}

/// Writes `state` as the snapshot covering every segment before
/// `from_segment`, atomically.
pub fn write(dir: &Path, uuid: [u8; 16], from_segment: u64, state: &State) -> Result<(), StoreError> {
    let body = state.to_snapshot();
    let hash = *apex_sys::statehash::bytes_hash(&body).as_bytes();
    let mut h = Vec::with_capacity(HEADER_LEN);
    h.extend_from_slice(MAGIC);
    h.extend_from_slice(&VERSION.to_le_bytes());
    h.extend_from_slice(&uuid);
    h.extend_from_slice(&from_segment.to_le_bytes());
    h.extend_from_slice(&hash);
    h.extend_from_slice(&(body.len() as u64).to_le_bytes());
    h.extend_from_slice(&crc32c::crc32c(&body).to_le_bytes());
    let crc = crc32c::crc32c(&h);
    h.extend_from_slice(&crc.to_le_bytes());
    let temp = dir.join(TEMP);
    let mut f = super::create_private(&temp).map_err(|e| StoreError::io(&temp, e))?;
    f.write_all(&h)
        .and_then(|_| f.write_all(&body))
        .and_then(|_| f.sync_all())
        .map_err(|e| StoreError::io(&temp, e))?;
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
