//! The session registry: the daemon-wide log of which sessions exist.
//!
//! Sessions come and go by entries, as everything else does: `SessionNew`,
//! `SessionDel`, `SessionRename`, numbered densely from 1 and applied by
//! [`Registry::apply`], which refuses a gap, a repeat, a taken or ill-formed
//! name and an unknown session, changing nothing. The daemon sequences the
//! log and serves it as `/registry`; a client that replays it knows the set
//! of sessions exactly as the daemon does, and `/index` is derived from it.
//!
//! A session is named here by its registry number (never reused, so
//! handles derived from it are never reused either) and by its label, which
//! the session's own metalog also records.

use crate::id::{Seq, SessionUuid};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// Names the daemon's root directory uses for its own files; no session may
/// take them.
pub const RESERVED_NAMES: &[&str] = &["index", "ctl", "new", "registry", ".", ".."];

/// An op of the registry log.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum RegistryOp {
    /// Session number `session` exists, labelled `name`.
    SessionNew { session: u64, name: String, uuid: SessionUuid },
    /// It is gone.
    SessionDel { session: u64 },
    /// It is labelled `name` now.
    SessionRename { session: u64, name: String },
}

/// One entry of the registry log.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RegistryEntry {
    pub seq: Seq,
    pub op: RegistryOp,
}

/// What the registry knows of one session.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SessionInfo {
    pub name: String,
    pub uuid: SessionUuid,
}

/// Why the registry refused an op.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RegistryError {
    #[error("bad session name {0:?}: no '/', no blanks, not empty, not one of {RESERVED_NAMES:?}")]
    BadName(String),
    #[error("a session name of {len} bytes is too long: at most {max}")]
    NameTooLong { len: usize, max: usize },
    #[error("session {0:?} exists already")]
    NameTaken(String),
    #[error("no session {0:?} (see /index)")]
    NoSuchName(String),
    #[error("no session number {0}")]
    NoSession(u64),
    #[error("session number {session} must be {want}: numbers are never reused")]
    Number { session: u64, want: u64 },
    #[error("registry out of sequence: got seq {got}, want {want}")]
    Sequence { got: Seq, want: Seq },
}

/// The longest session name, in bytes.
pub const SESSION_NAME_MAX: usize = 255;

/// Whether `name` may label a session.
pub fn check_name(name: &str) -> Result<(), RegistryError> {
    if name.len() > SESSION_NAME_MAX {
        return Err(RegistryError::NameTooLong { len: name.len(), max: SESSION_NAME_MAX });
    }
    let bad = name.is_empty()
        || name.contains('/')
        || name.chars().any(|c| c.is_whitespace() || c.is_control())
        || RESERVED_NAMES.contains(&name);
    match bad {
        true => Err(RegistryError::BadName(name.to_string())),
        false => Ok(()),
    }
}

/// The registry's state: every live session, by number.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Registry {
    pub sessions: BTreeMap<u64, SessionInfo>,
    /// The last seq applied.
    pub applied: Seq,
    /// Past every session number ever used.
    pub next_session: u64,
}

impl Registry {
    pub fn new() -> Registry {
        Registry { sessions: BTreeMap::new(), applied: 0, next_session: 1 }
    }

    /// The number of the session labelled `name`.
    pub fn by_name(&self, name: &str) -> Option<u64> {
        self.sessions.iter().find(|(_, s)| s.name == name).map(|(n, _)| *n)
    }

    /// The first free label of the form `1`, `2`, ...
    pub fn fresh_name(&self) -> String {
        (1..).map(|n: u64| n.to_string()).find(|n| self.by_name(n).is_none()).expect("names are endless")
    }

    /// Checks `op` against the state without changing anything.
    pub fn check(&self, op: &RegistryOp) -> Result<(), RegistryError> {
        let taken = |name: &str, except: Option<u64>| match self.by_name(name) {
            Some(n) if Some(n) != except => Err(RegistryError::NameTaken(name.to_string())),
            _ => Ok(()),
        };
        match op {
            RegistryOp::SessionNew { session, name, .. } => {
                if *session != self.next_session {
                    return Err(RegistryError::Number { session: *session, want: self.next_session });
                }
                check_name(name)?;
                taken(name, None)
            }
            RegistryOp::SessionDel { session } => self.known(*session),
            RegistryOp::SessionRename { session, name } => {
                self.known(*session)?;
                check_name(name)?;
                taken(name, Some(*session))
            }
        }
    }

    fn known(&self, session: u64) -> Result<(), RegistryError> {
        match self.sessions.contains_key(&session) {
            true => Ok(()),
            false => Err(RegistryError::NoSession(session)),
        }
    }

    /// Applies the next entry of the log.
    pub fn apply(&mut self, entry: &RegistryEntry) -> Result<(), RegistryError> {
        if entry.seq != self.applied + 1 {
            return Err(RegistryError::Sequence { got: entry.seq, want: self.applied + 1 });
        }
        self.check(&entry.op)?;
        match &entry.op {
            RegistryOp::SessionNew { session, name, uuid } => {
                self.sessions.insert(*session, SessionInfo { name: name.clone(), uuid: *uuid });
                self.next_session = session + 1;
            }
            RegistryOp::SessionDel { session } => {
                self.sessions.remove(session);
            }
            RegistryOp::SessionRename { session, name } => {
                if let Some(s) = self.sessions.get_mut(session) {
                    s.name = name.clone();
                }
            }
        }
        self.applied = entry.seq;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(seq: Seq, op: RegistryOp) -> RegistryEntry {
        RegistryEntry { seq, op }
    }

    #[test]
    fn replay_builds_the_set_of_sessions_and_refuses_without_change() {
        let mut r = Registry::new();
        let uuid = SessionUuid([7; 16]);
        r.apply(&entry(1, RegistryOp::SessionNew { session: 1, name: "main".into(), uuid })).unwrap();
        r.apply(&entry(2, RegistryOp::SessionNew { session: 2, name: "work".into(), uuid })).unwrap();
        let before = r.clone();
        let refused = [
            entry(3, RegistryOp::SessionNew { session: 3, name: "main".into(), uuid }),
            entry(3, RegistryOp::SessionNew { session: 2, name: "x".into(), uuid }),
            entry(3, RegistryOp::SessionNew { session: 3, name: "a b".into(), uuid }),
            entry(3, RegistryOp::SessionNew { session: 3, name: "registry".into(), uuid }),
            entry(3, RegistryOp::SessionRename { session: 1, name: "work".into() }),
            entry(3, RegistryOp::SessionDel { session: 9 }),
            entry(4, RegistryOp::SessionDel { session: 1 }),
            entry(2, RegistryOp::SessionDel { session: 1 }),
        ];
        for e in &refused {
            assert!(r.apply(e).is_err(), "{e:?}");
            assert_eq!(r, before);
        }
        r.apply(&entry(3, RegistryOp::SessionRename { session: 1, name: "main2".into() })).unwrap();
        r.apply(&entry(4, RegistryOp::SessionDel { session: 2 })).unwrap();
        assert_eq!(r.by_name("main2"), Some(1));
        assert_eq!(r.by_name("work"), None);
        // Numbers are never reused, even after a delete.
        assert!(r.check(&RegistryOp::SessionNew { session: 2, name: "w".into(), uuid }).is_err());
        assert!(r.check(&RegistryOp::SessionNew { session: 3, name: "w".into(), uuid }).is_ok());
        assert_eq!(r.fresh_name(), "1");
    }
}
