//! Ids without coordination.
//!
//! Every id is a plain `u64` newtype. Whoever creates a thing issues its id:
//! a node takes ids from a range of its own, `(attachment << 40) | counter`,
//! so two attachments never issue the same buffer, window, column or term id
//! and nobody waits a round trip for one. Attachment ids come from the one
//! place that sequences them (the authoritative log), so they are never
//! reused within a session. This module is only the types and the packing;
//! the counters live in [`crate::node::Node`] and their high-water marks in
//! [`crate::state::State`], so a restored node never reissues an id.

use serde::{Deserialize, Serialize};
use std::fmt;

/// Bits of an id below the attachment prefix.
pub const COUNTER_BITS: u32 = 40;
/// Largest counter value a node may issue (the low 40 bits).
pub const COUNTER_MAX: u64 = (1 << COUNTER_BITS) - 1;

/// Per-shard sequence number; the first entry of every shard is 1.
pub type Seq = u64;
/// Fence epoch of a shard's lease; bumped on every grant and reclaim.
pub type Epoch = u64;

macro_rules! id_type {
    ($(#[$doc:meta])* $name:ident, $prefix:literal) => {
        $(#[$doc])*
        #[derive(
            Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize, Default,
        )]
        pub struct $name(pub u64);

        impl $name {
            /// The attachment whose node issued this id.
            pub fn issuer(self) -> AttachmentId {
                AttachmentId(self.0 >> COUNTER_BITS)
            }
            /// The issuer's counter value.
            pub fn counter(self) -> u64 {
                self.0 & COUNTER_MAX
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                write!(f, "{}{}", $prefix, self.0)
            }
        }
    };
}

id_type!(
    /// A text: a window's body or tag, a column's tag, the top row.
    BufferId,
    ""
);
id_type!(
    /// A window: a tag and a body, placed in a column.
    WindowId,
    ""
);
id_type!(
    /// A column of the layout.
    ColumnId,
    ""
);
id_type!(
    /// A terminal, created only by the daemon.
    TermId,
    ""
);
id_type!(
    /// An undo group: the edits one user action made.
    GroupId,
    ""
);
id_type!(
    /// A plumbing rule, numbered by the authoritative log.
    RuleId,
    ""
);

/// Who sequenced an entry: a UI or tool attached to the session, or the
/// daemon itself ([`AttachmentId::SERVER`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize, Default)]
pub struct AttachmentId(pub u64);

impl AttachmentId {
    /// The daemon, leading a shard itself. Never issued to a client.
    pub const SERVER: AttachmentId = AttachmentId(0);

    /// Packs this attachment's prefix with a counter into an id value.
    ///
    /// The counter must fit in 40 bits; callers check with
    /// [`COUNTER_MAX`] before calling (the node refuses to allocate past it).
    pub fn pack(self, counter: u64) -> u64 {
        debug_assert!(counter <= COUNTER_MAX);
        (self.0 << COUNTER_BITS) | (counter & COUNTER_MAX)
    }
}

impl fmt::Display for AttachmentId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)
    }
}

/// A window's acme number: the `N` of `acme/N/` and `$winid`.
///
/// Assigned by `apply` in the layout shard in creation order and never
/// reused, so it fits acme's 11-digit fields where a 64-bit id would not.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize, Default)]
pub struct AcmeNumber(pub u32);

impl fmt::Display for AcmeNumber {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)
    }
}

/// A session's identity: a UUID minted by whoever creates the session (the
/// daemon; core has no randomness) and recorded once in the metalog.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct SessionUuid(pub [u8; 16]);

/// Readable forms (the JSON of entry lines) carry the uuid as its
/// canonical text; compact ones (snapshots, the wire) as its 16 bytes.
impl Serialize for SessionUuid {
    fn serialize<S: serde::Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        match s.is_human_readable() {
            true => s.collect_str(self),
            false => self.0.serialize(s),
        }
    }
}

impl<'de> Deserialize<'de> for SessionUuid {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> std::result::Result<SessionUuid, D::Error> {
        if !d.is_human_readable() {
            return <[u8; 16]>::deserialize(d).map(SessionUuid);
        }
        let text = String::deserialize(d)?;
        text.parse().map_err(serde::de::Error::custom)
    }
}

/// Text that is not a uuid.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0:?} is not a uuid (8-4-4-4-12 hex digits)")]
pub struct BadUuid(pub String);

impl std::str::FromStr for SessionUuid {
    type Err = BadUuid;

    /// The canonical 8-4-4-4-12 hex form.
    fn from_str(text: &str) -> std::result::Result<SessionUuid, BadUuid> {
        let bad = || BadUuid(text.to_string());
        let groups: Vec<&str> = text.split('-').collect();
        if groups.iter().map(|g| g.len()).collect::<Vec<_>>() != [8, 4, 4, 4, 12] {
            return Err(bad());
        }
        let hex = groups.concat();
        let mut out = [0u8; 16];
        for (i, b) in out.iter_mut().enumerate() {
            *b = u8::from_str_radix(hex.get(2 * i..2 * i + 2).ok_or_else(bad)?, 16).map_err(|_| bad())?;
        }
        Ok(SessionUuid(out))
    }
}

impl fmt::Display for SessionUuid {
    /// The canonical 8-4-4-4-12 hex form.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, b) in self.0.iter().enumerate() {
            if matches!(i, 4 | 6 | 8 | 10) {
                f.write_str("-")?;
            }
            write!(f, "{b:02x}")?;
        }
        Ok(())
    }
}

/// Raises `issuer`'s high-water mark to `counter`.
pub(crate) fn mark(marks: &mut std::collections::BTreeMap<AttachmentId, u64>, issuer: AttachmentId, counter: u64) {
    let m = marks.entry(issuer).or_insert(0);
    *m = (*m).max(counter);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_pack_the_issuer_and_counter() {
        let a = AttachmentId(3);
        let id = BufferId(a.pack(17));
        assert_eq!(id.issuer(), a);
        assert_eq!(id.counter(), 17);
        assert_eq!(id.0, (3 << 40) | 17);
        assert_eq!(BufferId(AttachmentId::SERVER.pack(5)).issuer(), AttachmentId::SERVER);
    }

    #[test]
    fn uuid_prints_canonically() {
        let u = SessionUuid([
            0x12, 0x34, 0x56, 0x78, 0x9a, 0xbc, 0xde, 0xf0, 0x01, 0x23, 0x45, 0x67, 0x89, 0xab, 0xcd, 0xef,
        ]);
        assert_eq!(u.to_string(), "12345678-9abc-def0-0123-456789abcdef");
        assert_eq!(u.to_string().parse::<SessionUuid>(), Ok(u));
        assert!("12345678-9abc-def0-0123".parse::<SessionUuid>().is_err());
        assert!("1234567g-9abc-def0-0123-456789abcdef".parse::<SessionUuid>().is_err());
        // Compact encodings keep the 16 bytes.
        assert_eq!(postcard::to_allocvec(&u).unwrap(), u.0.to_vec());
        assert_eq!(postcard::from_bytes::<SessionUuid>(&u.0).unwrap(), u);
    }
}
