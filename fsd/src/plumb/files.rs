//! plumber(4)'s files at `NAME/plumb/` (and at the root of the `plumb`
//! service, `apexd --plumb NAME`): `send`, `rules`, and a file per port.
//!
//! - `send`: each write adds to the message this fid is writing; once it
//!   holds a whole message it is sent, and the write that completed it
//!   fails with the plumber's reason if no one got it. A write that can be
//!   no message is refused and forgotten; one closed half written is
//!   dropped, and the log says what it lacked.
//! - `rules`: reads the session's own rules (`meta/rules` lists every
//!   rule and its owner). One writer at a time. What is written replaces
//!   them, or with no OTRUNC at the open adds to them, when the file is
//!   closed; each write is read first with what came before it (off the
//!   session's lock), and one that makes them unreadable is refused with
//!   the file, line and reason, and then nothing is taken. A last rule set
//!   with no action yet (core's `RuleError::unfinished`) waits.
//! - A port: each open fid is a reader; a read waits for a message and
//!   returns it, or as much as fits, the rest in the next reads.

use super::error::PlumbFsError;
use super::ports::{MESSAGE_MAX, RULES_MAX};
use crate::error::{Error, Result};
use crate::fsys::error::FsError;
use crate::fsys::fid::{Content, Fid, Opened};
use crate::fsys::place::{self, Place, PlumbFile, PLUMB};
use crate::fsys::tree::Fsys;
use crate::session::Session;
use apex_core::plumb::Message;
use apex_core::AttachmentId;
use apex_ninep::fcall::OTRUNC;

const PORT_SEED: u64 = u64::from_le_bytes(*b"apexport");

/// The number a port's place carries.
pub fn port_hash(name: &str) -> u64 {
    use std::hash::BuildHasher;
    foldhash::quality::FixedState::with_seed(PORT_SEED).hash_one(name)
}

/// The port of session `s` whose name hashes to `hash`.
pub fn port_name(s: &Session, hash: u64) -> Option<String> {
    s.plumber().ports(&s.view().state.meta).into_iter().find(|p| port_hash(p) == hash)
}

/// The session's own rules, as `rules` reads them.
pub fn own_rules(s: &Session) -> String {
    let own = s.view().state.meta.rules.values().filter(|r| r.owner == AttachmentId::SERVER);
    own.map(|r| r.text.as_str()).collect::<Vec<_>>().join("\n")
}

/// Whether `place` (a file of `plumb/`) exists in `s`.
pub fn exists(s: &Session, place: Place) -> bool {
    match place {
        Place::Plumb1(_, PlumbFile::Port(h)) => port_name(s, h).is_some(),
        _ => true,
    }
}

/// `plumb/`'s files now.
pub fn children(s: &Session, n: u64) -> Vec<Place> {
    let mut v: Vec<Place> = PLUMB.iter().map(|(_, f, _)| Place::Plumb1(n, *f)).collect();
    let ports = s.plumber().ports(&s.view().state.meta);
    v.extend(ports.iter().map(|p| Place::Plumb1(n, PlumbFile::Port(port_hash(p)))));
    v
}

/// One walk step in `plumb/`.
pub fn step(s: &Session, n: u64, name: &str) -> Option<Place> {
    if let Some(f) = place::lookup(PLUMB, name) {
        return Some(Place::Plumb1(n, f));
    }
    let ports = s.plumber().ports(&s.view().state.meta);
    ports.iter().any(|p| p == name).then(|| Place::Plumb1(n, PlumbFile::Port(port_hash(name))))
}

impl Fsys {
    pub(crate) async fn plumb_open(&self, n: u64, file: PlumbFile, mode: u8) -> Result<Opened> {
        let writes = matches!(mode & 3, 1 | 2);
        match file {
            PlumbFile::Send => Ok(Opened::PlumbSend { partial: Vec::new() }),
            PlumbFile::Rules => {
                let own = self.daemon.read(n, own_rules)?;
                let content = Content::made(own.clone().into_bytes());
                match writes {
                    false => Ok(Opened::Content(content)),
                    true => {
                        // One writer at a time, as the plumber's "file in use".
                        let writer = self.daemon.tend(n, |s| s.plumber_mut().start_writing_rules())?;
                        let writer = writer.ok_or(PlumbFsError::RulesInUse)?;
                        let base = match mode & OTRUNC != 0 {
                            true => None,
                            false if own.is_empty() || own.ends_with("\n\n") => Some(own),
                            false if own.ends_with('\n') => Some(own + "\n"),
                            false => Some(own + "\n\n"),
                        };
                        Ok(Opened::PlumbRules { content, base, written: Vec::new(), refused: false, writer })
                    }
                }
            }
            PlumbFile::Port(h) => {
                let reader = self.daemon.tend(n, |s| {
                    let name = port_name(s, h).ok_or_else(|| FsError::NoSuchFile("port".into()))?;
                    Ok::<_, Error>(s.plumber_mut().open_reader(&name))
                })??;
                Ok(Opened::PlumbPort { reader })
            }
        }
    }

    pub(crate) async fn plumb_write(&self, fid: &Fid, n: u64, file: PlumbFile, data: Vec<u8>) -> Result<()> {
        match file {
            PlumbFile::Send => {
                let bytes = {
                    let mut opened = fid.lock();
                    let Opened::PlumbSend { partial } = &mut *opened else {
                        return Err(FsError::Unopened("send").into());
                    };
                    partial.extend_from_slice(&data);
                    if partial.len() > MESSAGE_MAX {
                        partial.clear();
                        return Err(PlumbFsError::TooLong.into());
                    }
                    match Message::parse_one(partial) {
                        Ok(None) => return Ok(()),
                        Ok(Some(m)) => {
                            partial.clear();
                            m
                        }
                        Err(e) => {
                            partial.clear();
                            return Err(PlumbFsError::from(e).into());
                        }
                    }
                };
                Box::pin(super::send(&self.daemon, n, bytes)).await.map(|_| ())
            }
            PlumbFile::Rules => {
                let text = {
                    let mut opened = fid.lock();
                    let Opened::PlumbRules { base, written, .. } = &mut *opened else {
                        return Err(FsError::Unopened("rules").into());
                    };
                    let base = base.as_deref().unwrap_or_default();
                    if base.len() + written.len() + data.len() > RULES_MAX {
                        return Err(PlumbFsError::RulesTooLong.into());
                    }
                    let mut bytes = written.clone();
                    bytes.extend_from_slice(&data);
                    // What is written so far, to its last whole line (a
                    // write may end inside a line, or a character).
                    let whole = bytes.iter().rposition(|b| *b == b'\n').map_or(0, |i| i + 1);
                    let text = std::str::from_utf8(&bytes[..whole]).map_err(|_| FsError::NotUtf8(Some("rules")))?;
                    format!("{base}{text}")
                };
                // Read off the session's lock: an error is this write's,
                // and the write is forgotten; taken only at the clunk.
                let scope = crate::access::current();
                let check = move || super::rules::check_rules(None, AttachmentId::SERVER, &text);
                let checked = tokio::task::spawn_blocking(move || crate::access::within_blocking(scope, check))
                    .await
                    .map_err(|source| Error::Task { what: "plumb rules", source })?;
                let refusal = match checked {
                    // A last rule set with no action yet waits for the
                    // next write.
                    Err(PlumbFsError::Rules(e)) if !e.unfinished => Some(PlumbFsError::Rules(e)),
                    Err(PlumbFsError::Rules(_)) | Ok(()) => None,
                    Err(e) => Some(e),
                };
                if let Opened::PlumbRules { written, refused, .. } = &mut *fid.lock() {
                    match refusal {
                        Some(_) => *refused = true,
                        None => written.extend_from_slice(&data),
                    }
                }
                refusal.map_or(Ok(()), |e| Err(e.into()))
            }
            PlumbFile::Port(_) => Err(place::not_writable(fid.place).into()),
        }
    }

    /// A port's read: waits for a message.
    pub(crate) async fn plumb_read(&self, fid: &Fid, n: u64, count: u32) -> Result<Vec<u8>> {
        let Opened::PlumbPort { reader } = *fid.lock() else { return Err(FsError::Unopened("port").into()) };
        loop {
            let mut wake = self.daemon.subscribe_to(n);
            let got = self.daemon.tend(n, |s| match s.plumber().has_reader(reader) {
                true => Ok(s.plumber_mut().take(reader, count)),
                false => Err(FsError::Unopened("port")),
            })??;
            if let Some(bytes) = got {
                return Ok(bytes);
            }
            if wake.changed().await.is_err() {
                return Ok(Vec::new());
            }
        }
    }

    /// What a `plumb/` fid going away ends: its reader; a rule set its
    /// writes left waiting is read now (its error, if any, goes to the log:
    /// a clunk has no one to tell, as in the plumber).
    pub(crate) fn plumb_clunk(&self, n: u64, opened: Opened) {
        match opened {
            Opened::PlumbPort { reader } => {
                let _ = self.daemon.tend(n, |s| s.plumber_mut().close_reader(reader));
            }
            Opened::PlumbSend { partial } if !partial.is_empty() => {
                tracing::warn!(session = n, "plumb send closed half written, dropped: {}", Message::short(&partial));
            }
            Opened::PlumbRules { base, written, refused, writer, .. } => {
                // Opened with OTRUNC and nothing written: no rules, as the
                // plumber's truncating open leaves; after a refused write,
                // nothing changes.
                let text = match (base, written.is_empty()) {
                    _ if refused => None,
                    (Some(_), true) => None,
                    (base, _) => Some(format!("{}{}", base.unwrap_or_default(), String::from_utf8_lossy(&written))),
                };
                let taken = text.map_or(Ok(Ok(())), |text| {
                    self.daemon.change(n, |s, _| super::rules::replace_rules(s, AttachmentId::SERVER, &text))
                });
                if let Err(e) = taken.and_then(|r| r.map_err(Error::from)) {
                    tracing::warn!(session = n, "plumb rules written and closed, not taken: {e}");
                }
                let _ = self.daemon.tend(n, |s| s.plumber_mut().stop_writing_rules(writer));
            }
            _ => {}
        }
    }
}
