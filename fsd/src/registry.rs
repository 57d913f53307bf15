//! The daemon's sessions, by name.
//!
//! Names are labels: unique, non-empty, no `/`, no white space, and none
//! of the root's own file names. `/ctl` commands are checked as a whole
//! before any is applied, so a bad line changes nothing.

use crate::session::Session;
use std::collections::BTreeMap;

/// Names the root directory uses for its own files.
pub const RESERVED: &[&str] = &["index", "ctl", "new", ".", ".."];

/// Every session of the daemon.
pub struct Registry {
    sessions: BTreeMap<u64, Session>,
    next_seq: u64,
    /// Mints session identities (the daemon's randomness lives here).
    mint: Box<dyn FnMut() -> [u8; 16] + Send>,
}

/// A `/ctl` command.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Command {
    New(Option<String>),
    Del(String),
    Rename(String, String),
}

const CTL_USAGE: &str = "expected \"new [NAME]\", \"del NAME\" or \"rename OLD NEW\"";

/// Parses `/ctl` text: one command per line.
pub fn parse_ctl(text: &str) -> Result<Vec<Command>, String> {
    let mut out = Vec::new();
    for line in text.lines().map(str::trim).filter(|l| !l.is_empty()) {
        let words: Vec<&str> = line.split_whitespace().collect();
        out.push(match words.as_slice() {
            ["new"] => Command::New(None),
            ["new", name] => Command::New(Some(name.to_string())),
            ["del", name] => Command::Del(name.to_string()),
            ["rename", old, new] => Command::Rename(old.to_string(), new.to_string()),
            _ => return Err(format!("ctl: bad command {line:?}; {CTL_USAGE}")),
        });
    }
    if out.is_empty() {
        return Err(format!("ctl: empty command; {CTL_USAGE}"));
    }
    Ok(out)
}

/// Whether `name` may name a session.
pub fn check_name(name: &str) -> Result<(), String> {
    if name.is_empty() || name.contains('/') || name.chars().any(char::is_whitespace) || RESERVED.contains(&name) {
        return Err(format!("bad session name {name:?}: no '/', no spaces, not one of {RESERVED:?}"));
    }
    Ok(())
}

impl Registry {
    pub fn new(mint: Box<dyn FnMut() -> [u8; 16] + Send>) -> Registry {
        Registry { sessions: BTreeMap::new(), next_seq: 1, mint }
    }

    pub fn sessions(&self) -> impl Iterator<Item = &Session> {
        self.sessions.values()
    }

    pub fn get(&self, seq: u64) -> Option<&Session> {
        self.sessions.get(&seq)
    }

    pub fn get_mut(&mut self, seq: u64) -> Option<&mut Session> {
        self.sessions.get_mut(&seq)
    }

    pub fn by_name(&self, name: &str) -> Option<u64> {
        self.sessions.values().find(|s| s.label() == name).map(|s| s.seq)
    }

    /// The first free name of the form N (1, 2, ...).
    fn fresh_name(&self, taken: &[String]) -> String {
        (1..)
            .map(|n| n.to_string())
            .find(|n| self.by_name(n).is_none() && !taken.contains(n))
            .expect("names are endless")
    }

    /// Creates a session; `None` picks a fresh name. Returns its seq.
    pub fn create(&mut self, name: Option<&str>) -> Result<u64, String> {
        let name = match name {
            Some(n) => n.to_string(),
            None => self.fresh_name(&[]),
        };
        check_name(&name)?;
        if self.by_name(&name).is_some() {
            return Err(format!("session {name:?} exists already"));
        }
        let seq = self.next_seq;
        let uuid = (self.mint)();
        let s = Session::new(seq, &name, uuid).map_err(|e| e.to_string())?;
        self.next_seq += 1;
        self.sessions.insert(seq, s);
        Ok(seq)
    }

    /// Renames a session.
    pub fn rename(&mut self, old: &str, new: &str) -> Result<(), String> {
        check_name(new)?;
        let seq = self.by_name(old).ok_or_else(|| format!("no session {old:?}"))?;
        if old != new && self.by_name(new).is_some() {
            return Err(format!("session {new:?} exists already"));
        }
        self.sessions.get_mut(&seq).expect("found").relabel(new).map_err(|e| e.to_string())
    }

    pub fn delete(&mut self, name: &str) -> Result<(), String> {
        let seq = self.by_name(name).ok_or_else(|| format!("no session {name:?}"))?;
        self.sessions.remove(&seq);
        Ok(())
    }

    /// Runs `/ctl` commands: all are checked against the names they would
    /// see before any is applied.
    pub fn run(&mut self, cmds: &[Command]) -> Result<(), String> {
        let mut names: Vec<String> = self.sessions.values().map(|s| s.label().to_string()).collect();
        for c in cmds {
            match c {
                Command::New(Some(n)) => {
                    check_name(n)?;
                    if names.contains(n) {
                        return Err(format!("session {n:?} exists already"));
                    }
                    names.push(n.clone());
                }
                Command::New(None) => names.push(self.fresh_name(&names)),
                Command::Del(n) => {
                    let i = names.iter().position(|x| x == n).ok_or_else(|| format!("no session {n:?}"))?;
                    names.remove(i);
                }
                Command::Rename(o, n) => {
                    check_name(n)?;
                    let i = names.iter().position(|x| x == o).ok_or_else(|| format!("no session {o:?}"))?;
                    if o != n && names.contains(n) {
                        return Err(format!("session {n:?} exists already"));
                    }
                    names[i] = n.clone();
                }
            }
        }
        for c in cmds {
            match c {
                Command::New(n) => self.create(n.as_deref()).map(|_| ())?,
                Command::Del(n) => self.delete(n)?,
                Command::Rename(o, n) => self.rename(o, n)?,
            }
        }
        Ok(())
    }
}
