//! The rows one terminal update changes, packed: zstd (level 1) of their
//! postcard.
//!
//! A terminal's output is mostly rows scrolling off; the log keeps each
//! once, packed, so a flood of text logs well under its own size. Packing
//! happens once, where the emulator runs; every replica unpacks on apply,
//! which refuses a packing that is damaged or claims more than
//! [`UNPACKED_MAX`] bytes before allocating anything.

use crate::error::{Reject, Result};
use crate::grid::Row;
use serde::{Deserialize, Serialize};

/// zstd's fastest level: a flood is packed as it arrives.
const LEVEL: i32 = 1;

/// The most bytes one update's rows may unpack to.
pub const UNPACKED_MAX: usize = 64 << 20;

/// Rows an update changes.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RowChanges {
    /// Rows that scrolled off the top, oldest first: they go to the
    /// scrollback and the grid moves up by as many (at most its height).
    pub scrolled: Vec<Row>,
    /// Rows redrawn after that, by their index from the top.
    pub lines: Vec<(u16, Row)>,
}

impl RowChanges {
    pub fn is_empty(&self) -> bool {
        self.scrolled.is_empty() && self.lines.is_empty()
    }
}

/// [`RowChanges`] packed: empty, or the unpacked length (u32, little
/// endian) then a zstd frame.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Packed(#[serde(with = "crate::bytes")] Vec<u8>);

impl Packed {
    pub fn pack(changes: &RowChanges) -> Packed {
        if changes.is_empty() {
            return Packed::default();
        }
        let raw = postcard::to_allocvec(changes).expect("rows encode");
        let mut out = vec![0u8; 4 + zstd::zstd_safe::compress_bound(raw.len())];
        out[..4].copy_from_slice(&(raw.len() as u32).to_le_bytes());
        let n = zstd::bulk::compress_to_buffer(&raw, &mut out[4..], LEVEL).expect("room for the worst case");
        out.truncate(4 + n);
        Packed(out)
    }

    pub fn unpack(&self) -> Result<RowChanges> {
        let bad = |why: String| Reject::TermPacked { why };
        let Some((len, block)) = self.0.split_first_chunk::<4>() else {
            return match self.0.is_empty() {
                true => Ok(RowChanges::default()),
                false => Err(bad("shorter than its length".into())),
            };
        };
        let len = u32::from_le_bytes(*len) as usize;
        if len > UNPACKED_MAX {
            return Err(bad(format!("claims {len} bytes, over the limit of {UNPACKED_MAX}")));
        }
        let mut raw = vec![0u8; len];
        let got = zstd::bulk::decompress_to_buffer(block, &mut raw[..]).map_err(|e| bad(e.to_string()))?;
        if got != len {
            return Err(bad(format!("unpacked to {got} bytes, not {len}")));
        }
        postcard::from_bytes(&raw).map_err(|e| bad(e.to_string()))
    }

    /// Its size in the log.
    pub fn len(&self) -> usize {
        self.0.len()
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// A packing from raw bytes (what a damaged entry might carry).
    pub fn from_bytes(bytes: Vec<u8>) -> Packed {
        Packed(bytes)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rows_pack_and_unpack_and_a_damaged_packing_is_refused() {
        let rows: Vec<Row> = (0..200).map(|i| Row::plain(&format!("line {i} of the same old text"))).collect();
        let changes = RowChanges { scrolled: rows.clone(), lines: vec![(3, Row::plain("x"))] };
        let packed = Packed::pack(&changes);
        let raw = postcard::to_allocvec(&changes).unwrap().len();
        assert!(packed.len() * 2 < raw, "{} packed from {raw}", packed.len());
        assert_eq!(packed.unpack().unwrap(), changes);
        assert_eq!(Packed::pack(&RowChanges::default()).unpack().unwrap(), RowChanges::default());
        for bad in [vec![1u8], vec![0xff, 0xff, 0xff, 0x7f, 0], vec![10, 0, 0, 0, 0xf0, 1, 2]] {
            assert!(matches!(Packed::from_bytes(bad).unpack(), Err(Reject::TermPacked { .. })));
        }
        let mut cut = packed.0.clone();
        cut.truncate(cut.len() / 2);
        assert!(Packed::from_bytes(cut).unpack().is_err());
    }
}
