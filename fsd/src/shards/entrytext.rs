//! Entries as text lines, for `shards/SHARD/entries` and `/registry`.
//!
//! A line is `SEQ ATTACHMENT EPOCH OP` (a registry line is `SEQ OP`),
//! where OP is the op as one line of JSON, so the form is lossless:
//! [`parse_entry`] of a line gives back exactly the entry, and a shell
//! script (or `jq`) can follow a shard and replay it. JSON escapes every
//! newline in text, so one entry is always one line.

use apex_core::registry::RegistryEntry;
use apex_core::{AttachmentId, Entry};

/// `entry` as its line, newline included.
pub fn format_entry(entry: &Entry) -> String {
    let op = serde_json::to_string(&entry.op).expect("ops always encode as JSON");
    format!("{} {} {} {op}\n", entry.seq, entry.attachment, entry.epoch)
}

/// Why a line is not an entry (or a registry entry); `kind` says which.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LineError {
    #[error("{kind} line ends before its {what}")]
    Ends { kind: &'static str, what: &'static str },
    #[error("{kind} {what} {word:?} is not a number")]
    NotANumber { kind: &'static str, what: &'static str, word: String },
    #[error("{kind} line has no op")]
    NoOp { kind: &'static str },
    #[error("{kind} op: {why}")]
    Op { kind: &'static str, why: String },
}

/// Parses a line of `entries` (with or without its newline).
pub fn parse_entry(line: &str) -> Result<Entry, LineError> {
    const KIND: &str = "entry";
    let line = line.strip_suffix('\n').unwrap_or(line);
    let mut parts = line.splitn(4, ' ');
    let mut number = |what: &'static str| -> Result<u64, LineError> {
        let word = parts.next().ok_or(LineError::Ends { kind: KIND, what })?;
        word.parse().map_err(|_| LineError::NotANumber { kind: KIND, what, word: word.to_string() })
    };
    let seq = number("seq")?;
    let attachment = AttachmentId(number("attachment")?);
    let epoch = number("epoch")?;
    let json = parts.next().ok_or(LineError::NoOp { kind: KIND })?;
    let op = serde_json::from_str(json).map_err(|e| LineError::Op { kind: KIND, why: e.to_string() })?;
    Ok(Entry { seq, attachment, epoch, op })
}

/// A registry entry as its line.
pub fn format_registry(entry: &RegistryEntry) -> String {
    let op = serde_json::to_string(&entry.op).expect("registry ops always encode as JSON");
    format!("{} {op}\n", entry.seq)
}

/// Parses a line of `/registry`.
pub fn parse_registry(line: &str) -> Result<RegistryEntry, LineError> {
    const KIND: &str = "registry";
    let line = line.strip_suffix('\n').unwrap_or(line);
    let (seq, json) = line.split_once(' ').ok_or(LineError::NoOp { kind: KIND })?;
    let seq = seq.parse().map_err(|_| LineError::NotANumber { kind: KIND, what: "seq", word: seq.to_string() })?;
    let op = serde_json::from_str(json).map_err(|e| LineError::Op { kind: KIND, why: e.to_string() })?;
    Ok(RegistryEntry { seq, op })
}

#[cfg(test)]
mod tests {
    use super::*;
    use apex_core::registry::RegistryOp;
    use apex_core::{BufferOp, Op, Origin, SessionUuid};

    #[test]
    fn lines_round_trip() {
        let entry = Entry {
            seq: 12,
            attachment: AttachmentId(3),
            epoch: 2,
            op: Op::Buffer(BufferOp::Splice { q0: 1, q1: 2, text: "a\nb \"c\"\u{263a}".into(), origin: Origin::Mouse }),
        };
        let line = format_entry(&entry);
        assert_eq!(line.matches('\n').count(), 1);
        assert!(line.starts_with("12 3 2 {"));
        assert_eq!(parse_entry(&line), Ok(entry));
        let reg = RegistryEntry {
            seq: 4,
            op: RegistryOp::SessionNew { session: 2, name: "x".into(), uuid: SessionUuid([1; 16]) },
        };
        let line = format_registry(&reg);
        assert!(line.contains("\"uuid\":\"01010101-0101-0101-0101-010101010101\""), "a uuid reads as one: {line}");
        assert_eq!(parse_registry(&line), Ok(reg));
        for bad in ["", "1", "1 2 3", "x 2 3 {}", "1 2 3 {\"Nope\":1}"] {
            assert!(parse_entry(bad).is_err(), "{bad:?}");
        }
    }
}
