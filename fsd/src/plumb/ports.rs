//! The plumber's ports and rules as the daemon runs them for a session:
//! each port's readers with their queues, messages held for a `plumb
//! client`, and the metalog's rule texts read (`include` on this
//! machine).

use apex_core::meta::Meta;
use apex_core::plumb::rules::{IncludeError, Includes, Var};
use apex_core::plumb::{builtin_rules, Message, Rules};
use apex_core::{AttachmentId, RuleId};
use std::collections::{BTreeMap, VecDeque};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

/// Messages one reader of a port may have waiting; past it its oldest go.
pub const QUEUED_MAX: usize = 256;
/// The most bytes of messages one reader may have waiting (shared with
/// the other readers they went to), and a port may hold for its client.
pub const QUEUED_BYTES_MAX: usize = 16 << 20;
/// Messages held for a port a `plumb client` was started for.
pub const HELD_MAX: usize = 32;
/// The longest message `send` takes (the plumber's is its msize).
pub const MESSAGE_MAX: usize = 1 << 20;
/// The longest rule file a write or an include may hold.
pub const RULES_MAX: usize = 1 << 20;

/// The session's plumber as the daemon runs it.
#[derive(Debug, Default)]
pub struct Plumber {
    /// The rules read from the metalog, and which rule texts they were
    /// read from. Read again when those change; behind a lock of its own
    /// so a walk, which only looks at the session, can bring it up to date.
    compiled: Mutex<Option<Compiled>>,
    readers: BTreeMap<u64, Reader>,
    held: BTreeMap<String, VecDeque<Arc<[u8]>>>,
    next_reader: u64,
    /// The fid writing `rules`, if one is.
    rules_writer: Option<u64>,
}

#[derive(Debug)]
struct Compiled {
    from: Vec<RuleId>,
    rules: Arc<Rules>,
}

#[derive(Debug)]
struct Reader {
    port: String,
    /// Messages as sent, shared by every reader they went to.
    queue: VecDeque<Arc<[u8]>>,
    /// Their bytes.
    bytes: usize,
    /// Bytes of the front message read already.
    at: usize,
}

impl Reader {
    fn push(&mut self, port: &str, message: Arc<[u8]>) {
        self.bytes += message.len();
        self.queue.push_back(message);
        // The oldest go, but the one being read and the newest.
        let keep = 1 + usize::from(self.at > 0);
        while (self.queue.len() > QUEUED_MAX || self.bytes > QUEUED_BYTES_MAX) && self.queue.len() > keep {
            let gone = self.queue.remove(keep - 1).expect("more than kept");
            self.bytes -= gone.len();
            tracing::warn!(port, "a plumb port reader fell behind: its oldest message went");
        }
    }
}

impl Plumber {
    /// The session's rules in matching order: the attachments', then its
    /// own.
    pub fn rules(&self, meta: &Meta) -> Arc<Rules> {
        self.compiled(meta, |c| c.rules.clone())
    }

    fn compiled<R>(&self, meta: &Meta, f: impl FnOnce(&Compiled) -> R) -> R {
        let from: Vec<RuleId> = meta.rules.keys().copied().collect();
        let mut compiled = self.compiled.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        if compiled.as_ref().is_none_or(|c| c.from != from) {
            *compiled = Some(compile(meta, from));
        }
        f(compiled.as_ref().expect("just compiled"))
    }

    /// Every port: those the rules name, then any a reader holds open.
    pub fn ports(&self, meta: &Meta) -> Vec<String> {
        let mut ports = self.rules(meta).ports.clone();
        for r in self.readers.values() {
            if !ports.contains(&r.port) {
                ports.push(r.port.clone());
            }
        }
        ports
    }

    /// A turn to write `rules`; none while another has it.
    pub fn start_writing_rules(&mut self) -> Option<u64> {
        if self.rules_writer.is_some() {
            return None;
        }
        self.next_reader += 1;
        self.rules_writer = Some(self.next_reader);
        self.rules_writer
    }

    pub fn stop_writing_rules(&mut self, writer: u64) {
        if self.rules_writer == Some(writer) {
            self.rules_writer = None;
        }
    }

    /// A new reader of `port`, given what was held for it.
    pub fn open_reader(&mut self, port: &str) -> u64 {
        self.next_reader += 1;
        let queue = self.held.remove(port).unwrap_or_default();
        let bytes = queue.iter().map(|m| m.len()).sum();
        self.readers.insert(self.next_reader, Reader { port: port.to_string(), queue, bytes, at: 0 });
        self.next_reader
    }

    pub fn close_reader(&mut self, reader: u64) {
        self.readers.remove(&reader);
    }

    /// Up to `count` bytes of the reader's next message (a read never
    /// joins two); none while it has none; an error if it is gone.
    pub fn take(&mut self, reader: u64, count: u32) -> Option<Vec<u8>> {
        let r = self.readers.get_mut(&reader)?;
        let front = r.queue.front()?;
        let n = (count as usize).min(front.len() - r.at);
        let out = front[r.at..r.at + n].to_vec();
        r.at += n;
        if r.at == front.len() {
            r.bytes -= front.len();
            r.queue.pop_front();
            r.at = 0;
        }
        Some(out)
    }

    /// Whether reader `reader` is still there.
    pub fn has_reader(&self, reader: u64) -> bool {
        self.readers.contains_key(&reader)
    }

    /// Gives `message` to every reader of `port`: false if it has none.
    pub fn deliver(&mut self, port: &str, message: &Message) -> bool {
        let packed: Arc<[u8]> = message.pack().into();
        let mut any = false;
        for r in self.readers.values_mut().filter(|r| r.port == port) {
            r.push(port, packed.clone());
            any = true;
        }
        any
    }

    /// Keeps `message` for the next reader of `port` (a `plumb client`'s),
    /// or gives it to the readers there are now, if one came meanwhile:
    /// whether it was kept.
    pub fn hold(&mut self, port: &str, message: &Message) -> bool {
        if self.deliver(port, message) {
            return false;
        }
        let held = self.held.entry(port.to_string()).or_default();
        held.push_back(message.pack().into());
        while held.len() > HELD_MAX
            || (held.len() > 1 && held.iter().map(|m| m.len()).sum::<usize>() > QUEUED_BYTES_MAX)
        {
            held.pop_front();
        }
        true
    }

    /// Forgets the last message held for `port` (its client did not start).
    pub fn unhold(&mut self, port: &str) {
        if let Some(held) = self.held.get_mut(port) {
            held.pop_back();
        }
    }
}

/// The rule texts of `meta` read in matching order.
fn compile(meta: &Meta, from: Vec<RuleId>) -> Compiled {
    let mut errors = Vec::new();
    let mut includes = HostIncludes::new();
    let mut own = Rules { vars: plan9_vars(), ..Rules::default() };
    for (id, rule) in meta.rules.iter().filter(|(_, r)| r.owner == AttachmentId::SERVER) {
        match Rules::parse("rules", &rule.text, &mut includes, &own.vars) {
            Ok(r) => {
                let vars = r.vars.clone();
                own = own.then(r);
                own.vars = vars;
            }
            Err(e) => errors.push(format!("rule {}: {e}", id.0)),
        }
    }
    let mut claims = Rules::default();
    for (id, rule) in meta.rules.iter().filter(|(_, r)| r.owner != AttachmentId::SERVER) {
        let name = format!("attachment {}", rule.owner.0);
        match Rules::parse(&name, &rule.text, &mut includes, &own.vars) {
            Ok(r) => claims = claims.then(r),
            Err(e) => errors.push(format!("rule {}: {e}", id.0)),
        }
    }
    for e in &errors {
        tracing::warn!("plumbing rules left out: {e}");
    }
    Compiled { from, rules: Arc::new(claims.then(own)) }
}

/// `$plan9`, where plan9port says where it is.
pub(crate) fn plan9_vars() -> Vec<Var> {
    match std::env::var("PLAN9") {
        Ok(p) if !p.is_empty() => vec![Var { name: "plan9".into(), value: p.clone(), expanded: p }],
        _ => Vec::new(),
    }
}

/// `include` on this machine: an absolute name as it is, `./` and `../`
/// from `$HOME/lib` (where the plumbing file is), any other in
/// `$PLAN9/plumb` where plan9port is, else apex's own.
pub(crate) struct HostIncludes {
    home_lib: Option<PathBuf>,
    plan9: Option<PathBuf>,
    /// Bytes the includes of one reading may still take.
    left: usize,
}

/// The most bytes the includes of one rule text may read in all, so no
/// text reads without end (a file included again and again).
pub const INCLUDED_MAX: usize = 4 * RULES_MAX;

impl HostIncludes {
    pub(crate) fn new() -> HostIncludes {
        let var = |v| std::env::var_os(v).filter(|p| !p.is_empty()).map(PathBuf::from);
        HostIncludes { home_lib: var("HOME").map(|h| h.join("lib")), plan9: var("PLAN9"), left: INCLUDED_MAX }
    }
}

impl Includes for HostIncludes {
    fn include(&mut self, name: &str) -> Result<(String, String), IncludeError> {
        let path = match name {
            n if n.starts_with('/') => Some(PathBuf::from(n)),
            n if n.starts_with("./") || n.starts_with("../") => self.home_lib.as_ref().map(|h| h.join(n)),
            n => self.plan9.as_ref().map(|p| p.join("plumb").join(n)).filter(|p| p.exists()),
        };
        let text = match (path, builtin_rules(name)) {
            (Some(p), _) => read_rules(&p).map(|t| (p.display().to_string(), t)),
            (None, Some(text)) => Ok((name.to_string(), text.to_string())),
            (None, None) => Err(IncludeError { name: name.to_string(), why: None }),
        }?;
        self.left = self.left.checked_sub(text.1.len()).ok_or_else(|| IncludeError {
            name: name.to_string(),
            why: Some(format!("the includes read over {INCLUDED_MAX} bytes in all")),
        })?;
        Ok(text)
    }
}

/// A rule file's text, no more than [`RULES_MAX`].
pub(crate) fn read_rules(path: &std::path::Path) -> Result<String, IncludeError> {
    use std::io::Read;
    let failed = |why: String| IncludeError { name: path.display().to_string(), why: Some(why) };
    let mut text = String::new();
    // A regular file only, opened without waiting: a fifo or a device
    // named in a rule would hold the session's lock.
    use std::os::unix::fs::OpenOptionsExt;
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(path)
        .map_err(|e| failed(e.to_string()))?;
    if !file.metadata().map_err(|e| failed(e.to_string()))?.is_file() {
        return Err(failed("not a regular file".into()));
    }
    file.take(RULES_MAX as u64 + 1).read_to_string(&mut text).map_err(|e| failed(e.to_string()))?;
    match text.len() > RULES_MAX {
        true => Err(failed(format!("over {RULES_MAX} bytes"))),
        false => Ok(text),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn message(n: usize, size: usize) -> Message {
        Message::text("t", "/", &format!("{n:08}{}", "x".repeat(size)))
    }

    /// Every reader gets every message; one that stops reading keeps the
    /// newest, by count and by bytes, and the one it is partway through.
    #[test]
    fn a_reader_behind_keeps_the_newest_and_the_one_it_reads() {
        let mut p = Plumber::default();
        let (a, b) = (p.open_reader("edit"), p.open_reader("edit"));
        for n in 0..QUEUED_MAX + 10 {
            assert!(p.deliver("edit", &message(n, 0)));
        }
        assert!(!p.deliver("web", &message(0, 0)), "no reader of web");
        let first = |p: &mut Plumber, r| String::from_utf8(p.take(r, 1 << 20).unwrap()).unwrap();
        assert!(first(&mut p, a).ends_with("\n00000010"), "the 10 oldest went");
        // Partway through one, then far behind in bytes: it keeps it.
        let part = p.take(b, 3).unwrap();
        assert_eq!(part, b"t\n\n");
        let big = QUEUED_BYTES_MAX / 4 + 1;
        for n in 0..5 {
            p.deliver("edit", &message(1000 + n, big));
        }
        let rest = String::from_utf8(p.take(b, 1 << 20).unwrap()).unwrap();
        assert!(rest.ends_with("\n00000010"), "the one being read stays: {rest:?}");
        let next = String::from_utf8(p.take(b, 64).unwrap()).unwrap();
        assert!(next.contains("00001002"), "then the newest that fit: {next:?}");
        p.close_reader(a);
        assert!(p.take(a, 10).is_none());
    }
}
