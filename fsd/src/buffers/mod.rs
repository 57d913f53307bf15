//! The tool-facing buffer files, `buffers/N/`: what reading and writing
//! `body`, `name`, `ctl`, `addr`, `data` and `event` mean, with acme's
//! semantics (acme-fs.md §1) where acme has the same file.
//!
//! Every change is a proposal to the buffer's leader, made at the version
//! the tool saw: `body` appends at the end, `data` replaces the address,
//! which remembers the version it was set at, so an edit made meanwhile by
//! the leader moves the write instead of being overwritten.

pub mod files;

use crate::error::Error;
use crate::fsys::ctl::{self, Arg, Unfit, Verb};
use crate::session::{Addr, Session};
use apex_core::addr::{self, Dialect, Range};
use apex_core::regx::Haystack;
use apex_core::{Buffer, BufferId, Origin, Proposal};
use std::fmt::Write;

fn buffer(s: &Session, b: BufferId) -> Result<&Buffer, Error> {
    s.view().state.buffer(b).map_err(|_| Error::BufferGone(b.0))
}

/// The proposal that appends `text` to the body, as a write to acme's
/// `body` does (none for no change): a backspace (`\b`) erases the rune
/// before it, even one already in the buffer.
pub fn body_append(s: &Session, b: BufferId, text: String) -> Result<Option<Proposal>, Error> {
    let buf = buffer(s, b)?;
    let (erase, text) = backspaced(text);
    let erase = erase.min(buf.len());
    if erase == 0 && text.is_empty() {
        return Ok(None);
    }
    let end = buf.len();
    let p = Proposal::Replace {
        buffer: b,
        version: buf.version,
        q0: end - erase,
        q1: end,
        text,
        origin: Origin::FileWrite,
    };
    Ok(Some(p))
}

/// The proposal that appends `text` as it is (none for no text): a tag
/// write, command output.
pub fn append(s: &Session, b: BufferId, text: &str, origin: Origin) -> Result<Option<Proposal>, Error> {
    let buf = buffer(s, b)?;
    Ok((!text.is_empty()).then(|| Proposal::Insert {
        buffer: b,
        version: buf.version,
        q0: buf.len(),
        text: text.into(),
        origin,
    }))
}

/// Applies the backspaces in `text`: how many runes before it they erase,
/// and what is left to append.
pub fn backspaced(text: String) -> (u64, String) {
    if !text.contains('\u{8}') {
        return (0, text);
    }
    let (mut erase, mut out) = (0u64, String::with_capacity(text.len()));
    for c in text.chars() {
        match c {
            '\u{8}' => {
                if out.pop().is_none() {
                    erase += 1;
                }
            }
            c => out.push(c),
        }
    }
    (erase, out)
}

/// The proposal that empties the body (an open with OTRUNC), if it has
/// text.
pub fn truncate(s: &Session, b: BufferId) -> Result<Option<Proposal>, Error> {
    let buf = buffer(s, b)?;
    if buf.is_empty() {
        return Ok(None);
    }
    Ok(Some(Proposal::Delete { buffer: b, version: buf.version, q0: 0, q1: buf.len(), origin: Origin::FileWrite }))
}

/// Buffer `b`'s address, made if it has none. The addresses of buffers
/// deleted since go first: the table holds the live buffers' at most.
fn addr_of(s: &mut Session, b: BufferId) -> &mut Addr {
    let live: Vec<BufferId> = s.addrs().keys().filter(|b| s.view().state.buffer(**b).is_err()).copied().collect();
    for gone in live {
        s.addrs_mut().remove(&gone);
    }
    s.addrs_mut().entry(b).or_default()
}

/// The addr as of the buffer's current version: rebased through the edits
/// since it was set, clamped if those are no longer kept.
fn current_addr(s: &Session, b: BufferId) -> Result<Range, Error> {
    let buf = buffer(s, b)?;
    let a = s.addrs().get(&b).cloned().unwrap_or_default();
    let len = buf.len();
    let moved = |q: u64| buf.rebase(a.version, q).unwrap_or(q).min(len);
    Ok(Range::new(moved(a.range.q0), moved(a.range.q1)))
}

/// An open of `addr`: the first open fid resets the address to `#0,#0`
/// and clears the limit.
pub fn addr_open(s: &mut Session, b: BufferId) -> Result<(), Error> {
    let version = buffer(s, b)?.version;
    let a = addr_of(s, b);
    if a.opened == 0 {
        *a = Addr { version, ..Addr::default() };
    }
    a.opened += 1;
    Ok(())
}

/// A clunk of an opened `addr` fid.
pub fn addr_close(s: &mut Session, b: BufferId) {
    if let Some(a) = s.addrs_mut().get_mut(&b) {
        a.opened = a.opened.saturating_sub(1);
    }
}

/// `addr` read: two 11-wide numbers, each followed by a blank.
pub fn addr_read(s: &Session, b: BufferId) -> Result<String, Error> {
    let r = current_addr(s, b)?;
    Ok(format!("{:11} {:11} ", r.q0, r.q1))
}

/// A range seen at `version`, as of the buffer's current version.
fn rebased(buf: &Buffer, (r, version): (Range, u64)) -> Range {
    let moved = |q: u64| buf.rebase(version, q).unwrap_or(q).min(buf.len());
    Range::new(moved(r.q0), moved(r.q1))
}

/// `addr` write: evaluates the address from the current one (a failed
/// one changes nothing). Forward searches stop at the limit, if set.
/// Under the session's lock throughout; the daemon searches with no lock
/// held (`addr_search`, `AddrSearch::eval`, `addr_found`).
pub fn addr_write(s: &mut Session, b: BufferId, text: &str) -> Result<(), Error> {
    let found = addr_search(s, b)?.eval(text)?;
    addr_found(s, found).map(|_| ())
}

/// What an address is evaluated against, copied from the session: the
/// rope (sharing its nodes), the text as one string if one is kept for
/// this version (shared), the address, limit and last expression.
pub struct AddrSearch {
    b: BufferId,
    version: u64,
    dot: Range,
    limit: Option<Range>,
    last: Option<String>,
    /// The last expression when the search began.
    last_before: Option<String>,
    text: apex_core::text::Text,
    flat: Option<std::sync::Arc<Haystack>>,
}

/// An address found, to keep if nothing changed since its search began.
pub struct AddrFound {
    search: AddrSearch,
    range: Range,
    flat: std::sync::Arc<Haystack>,
}

/// Takes what evaluating an address in buffer `b` needs, under the lock.
pub fn addr_search(s: &Session, b: BufferId) -> Result<AddrSearch, Error> {
    let dot = current_addr(s, b)?;
    let a = s.addrs().get(&b);
    let buf = buffer(s, b)?;
    let version = buf.version;
    let flat = (s.flat().buffer == Some((b, version))).then(|| s.flat().text.clone());
    Ok(AddrSearch {
        b,
        version,
        dot,
        limit: a.and_then(|a| a.limit).map(|l| rebased(buf, l)),
        last: s.last_regex().map(str::to_string),
        last_before: s.last_regex().map(str::to_string),
        text: buf.text.clone(),
        flat,
    })
}

impl AddrSearch {
    /// Evaluates `addr` (a regular expression may read the whole text:
    /// call it with no lock held).
    pub fn eval(mut self, addr: &str) -> Result<AddrFound, Error> {
        // Searches need the text as one string: made once per version.
        let flat = self.flat.take().unwrap_or_else(|| std::sync::Arc::new(Haystack::new(&self.text)));
        let cx = addr::Context::new(&self.text, Some(&flat), Dialect::AddrFile, self.limit);
        let mut last = self.last.clone();
        let range = addr::eval_in(&cx, addr, self.dot, &mut last)?;
        self.last = last;
        Ok(AddrFound { search: self, range, flat })
    }

    /// Whether the text is big enough for a thread of its own.
    pub fn is_big(&self) -> bool {
        self.text.len_bytes() > 1 << 20
    }
}

/// Keeps an address found if the buffer and its address are as they were
/// when the search began; `false` if they changed (search again).
pub fn addr_found(s: &mut Session, found: AddrFound) -> Result<bool, Error> {
    let AddrFound { search, range, flat } = found;
    let b = search.b;
    let buf = buffer(s, b)?;
    let limit = s.addrs().get(&b).and_then(|a| a.limit).map(|l| rebased(buf, l));
    let unchanged = buf.version == search.version
        && current_addr(s, b)? == search.dot
        && limit == search.limit
        && s.last_regex() == search.last_before.as_deref();
    if !unchanged {
        return Ok(false);
    }
    s.set_flat(crate::session::FlatText { buffer: Some((b, search.version)), text: flat });
    let a = addr_of(s, b);
    a.range = range;
    a.version = search.version;
    s.set_last_regex(search.last);
    Ok(true)
}

/// Sets the limit (`limit=addr`) to the current address.
pub fn limit_to_addr(s: &mut Session, b: BufferId) -> Result<(), Error> {
    let r = current_addr(s, b)?;
    let version = buffer(s, b)?.version;
    addr_of(s, b).limit = Some((r, version));
    Ok(())
}

/// The current address (for `dot=addr`), as of the buffer's version.
pub fn addr_now(s: &Session, b: BufferId) -> Result<(Range, u64), Error> {
    Ok((current_addr(s, b)?, buffer(s, b)?.version))
}

/// Moves the addr to `range` at the buffer's version (`addr=dot`, and
/// after data reads and writes).
pub fn set_addr(s: &mut Session, b: BufferId, range: Range) -> Result<(), Error> {
    let version = buffer(s, b)?.version;
    let a = addr_of(s, b);
    a.range = range;
    a.version = version;
    Ok(())
}

/// `data` read: whole runes from addr.q0 that fit in `count` bytes; the
/// address moves past them. At the end it returns nothing (EOF). `xdata`
/// (`upto_q1`) stops at addr.q1 and moves only q0.
pub fn data_read(s: &mut Session, b: BufferId, count: u32, upto_q1: bool) -> Result<Vec<u8>, Error> {
    let r = current_addr(s, b)?;
    let buf = buffer(s, b)?;
    if r.q0 > buf.len() {
        return Err(Error::PastEnd { q0: r.q0, len: buf.len() });
    }
    let end = if upto_q1 { r.q1 } else { buf.len() };
    let mut out = String::new();
    let mut n = 0u64;
    if r.q0 < end {
        for c in buf.text.chars_at(r.q0 as usize).take((end - r.q0) as usize) {
            if out.len() + c.len_utf8() > count as usize {
                break;
            }
            out.push(c);
            n += 1;
        }
    }
    let q0 = r.q0 + n;
    set_addr(s, b, if upto_q1 { Range::new(q0, r.q1.max(q0)) } else { Range::at(q0) })?;
    Ok(out.into_bytes())
}

/// `data` write: replaces the addressed text, proposed at the version the
/// address was set at (see `data_written` for the address after). A write
/// of nothing deletes the addressed text. Returns the proposal and where
/// the address's start lands now, or nothing to do.
pub fn data_write(s: &Session, b: BufferId, text: &str) -> Result<Option<(Proposal, u64)>, Error> {
    let buf = buffer(s, b)?;
    let a = s.addrs().get(&b).cloned().unwrap_or(Addr { version: buf.version, ..Addr::default() });
    // A backwards address (`#5,#2`) replaces nothing: acme inserts at q0.
    let Range { q0, q1 } = a.range;
    let q1 = q1.max(q0);
    if q0 == q1 && text.is_empty() {
        return Ok(None);
    }
    // Where q0 lands now, for the address after the write.
    let at = buf.rebase(a.version, q0)?;
    let p = Proposal::Replace { buffer: b, version: a.version, q0, q1, text: text.into(), origin: Origin::OtherFile };
    Ok(Some((p, at)))
}

/// After a `data` write of `text` at `at` landed: acme moves a selection
/// edge that was at the write's start past the new text (a view's point
/// at an insert otherwise stays before it), so output written where the
/// user's cursor is pushes the cursor along. The selections to propose.
pub fn selections_past(s: &Session, b: BufferId, at: u64, text: &str) -> Result<Vec<Proposal>, Error> {
    let n = text.chars().count() as u64;
    if n == 0 {
        return Ok(Vec::new());
    }
    let buf = buffer(s, b)?;
    let past = |q: u64| if q == at { at + n } else { q };
    Ok(buf
        .views
        .iter()
        .filter(|(_, v)| v.q0 == at || v.q1 == at)
        .map(|(view, v)| Proposal::Select {
            buffer: b,
            view: *view,
            version: buf.version,
            q0: past(v.q0),
            q1: past(v.q1),
        })
        .collect())
}

/// After a `data` write landed: the address follows the new text.
pub fn data_written(s: &mut Session, b: BufferId, at: u64, text: &str) -> Result<(), Error> {
    let end = at + text.chars().count() as u64;
    set_addr(s, b, Range::at(end))
}

/// `ctl` read: one `key value` line per property.
pub fn ctl_read(s: &Session, b: BufferId) -> Result<String, Error> {
    let buf = buffer(s, b)?;
    let mut out = String::new();
    let _ = writeln!(out, "buffer {}", b.0);
    let _ = writeln!(out, "version {}", buf.version);
    let _ = writeln!(out, "length {}", buf.len());
    let _ = writeln!(out, "dirty {}", u8::from(buf.dirty));
    let _ = writeln!(out, "views {}", buf.views.keys().map(|v| v.to_string()).collect::<Vec<_>>().join(" "));
    let _ = writeln!(out, "name {}", buf.name);
    let _ = writeln!(out, "undo {}", buf.undo_bytes());
    let _ = writeln!(out, "undolimit {}", buf.undo_limit());
    // The acme windows showing it (their `acme/N/` and $winid), in order.
    let mut numbers: Vec<u32> = s
        .view()
        .state
        .windows
        .iter()
        .filter(|(_, w)| w.body == b)
        .filter_map(|(id, _)| s.view().state.layout.numbers.get(id).map(|n| n.0))
        .collect();
    numbers.sort_unstable();
    let _ = writeln!(out, "winid {}", numbers.iter().map(u32::to_string).collect::<Vec<_>>().join(" "));
    Ok(out)
}

/// A `buffers/N/ctl` message.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum BufferCtl {
    Name(String),
    Clean,
    Dirty,
    Undo,
    Redo,
    /// Keep at most this many bytes of undo history (or four times the
    /// body's size, if more).
    UndoLimit(u64),
    /// Show the buffer in a new window.
    Window,
    /// Replace the text with a file's (the buffer's name if none).
    Get(Option<String>),
    /// Write the text, as of `version` if given, to a file (the buffer's
    /// name if none), then mark it clean at that version.
    Put {
        version: Option<u64>,
        file: Option<String>,
    },
}

/// `buffers/N/ctl`'s verbs.
const VERBS: &[Verb<BufferCtl>] = &[
    Verb { name: "name", args: &[Arg::Rest("NAME")], make: |v| BufferCtl::Name(v[0].word()) },
    Verb { name: "clean", args: &[], make: |_| BufferCtl::Clean },
    Verb { name: "dirty", args: &[], make: |_| BufferCtl::Dirty },
    Verb { name: "undo", args: &[], make: |_| BufferCtl::Undo },
    Verb { name: "redo", args: &[], make: |_| BufferCtl::Redo },
    Verb {
        name: "undolimit",
        args: &[Arg::Number("BYTES")],
        make: |v| BufferCtl::UndoLimit(v[0].number().unwrap_or(0)),
    },
    Verb { name: "window", args: &[], make: |_| BufferCtl::Window },
    Verb { name: "get", args: &[Arg::Optional("FILE")], make: |v| BufferCtl::Get(v[0].optional()) },
    Verb {
        name: "put",
        args: &[Arg::Flag("-v", "VERSION"), Arg::Optional("FILE")],
        make: |v| BufferCtl::Put { version: v[0].number(), file: v[1].optional() },
    },
];

/// Parses a ctl write, one message per line, and checks each against the
/// buffer before any is applied: a `put -v` at the version the buffer has
/// now, files named in full, a name to get or put by.
pub fn parse_ctl(text: &str, s: &Session, b: BufferId) -> Result<Vec<BufferCtl>, Error> {
    let buf = buffer(s, b)?;
    let msgs = ctl::parse_lines(text, VERBS, |msg| match &msg {
        BufferCtl::Name(name) => ctl::fit_name(name).map(|()| msg),
        BufferCtl::Get(Some(f)) | BufferCtl::Put { file: Some(f), .. } if !f.starts_with('/') => {
            Err(Unfit::RelativeFile(f.clone()))
        }
        BufferCtl::Get(None) | BufferCtl::Put { file: None, .. } if buf.name.is_empty() => Err(Unfit::Unnamed),
        BufferCtl::Put { version: Some(v), .. } if *v != buf.version => {
            Err(Unfit::StaleVersion { buffer: b.0, at: buf.version, asked: *v })
        }
        _ => Ok(msg),
    })?;
    Ok(msgs)
}

/// The proposal of a ctl message that needs no host service.
pub fn ctl_proposal(s: &Session, b: BufferId, msg: &BufferCtl) -> Result<Proposal, Error> {
    buffer(s, b)?;
    let p = match msg {
        BufferCtl::Name(name) => Proposal::Name { buffer: b, name: name.clone() },
        BufferCtl::Clean => Proposal::Clean { buffer: b },
        BufferCtl::Dirty => Proposal::Dirty { buffer: b },
        BufferCtl::Undo => Proposal::Undo { buffer: b },
        BufferCtl::Redo => Proposal::Redo { buffer: b },
        BufferCtl::UndoLimit(bytes) => Proposal::UndoLimit { buffer: b, bytes: *bytes },
        BufferCtl::Window => Proposal::CreateWindow { body: Some(b), column: None, name: String::new(), near: None },
        BufferCtl::Get(_) | BufferCtl::Put { .. } => return Err(Error::HostService),
    };
    Ok(p)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ctl_messages_parse_or_say_what_is_expected() {
        let p = |line| ctl::parse_line(VERBS, line);
        assert_eq!(p("name /tmp/a b"), Ok(BufferCtl::Name("/tmp/a b".into())));
        assert_eq!(p("clean"), Ok(BufferCtl::Clean));
        assert_eq!(p("undolimit 1048576"), Ok(BufferCtl::UndoLimit(1 << 20)));
        assert_eq!(p("put -v 3 /tmp/x"), Ok(BufferCtl::Put { version: Some(3), file: Some("/tmp/x".into()) }));
        assert_eq!(p("put"), Ok(BufferCtl::Put { version: None, file: None }));
        assert_eq!(p("get /etc/motd"), Ok(BufferCtl::Get(Some("/etc/motd".into()))));
        for bad in ["nme x", "name", "put -v x", "put a b", "", "undolimit", "undolimit 1M", "undolimit -1"] {
            let e = p(bad).unwrap_err().to_string();
            assert!(e.contains("expected") || e.contains("version number"), "{bad:?}: {e}");
        }
    }

    #[test]
    fn a_ctl_write_is_checked_whole() {
        let mut s = Session::new(1, "t", [0; 16]).unwrap();
        let b = s.view_mut().create_buffer_as("/tmp/named").unwrap();
        let got = parse_ctl("dirty\nclean\n\nput\n", &s, b).unwrap();
        assert_eq!(got, vec![BufferCtl::Dirty, BufferCtl::Clean, BufferCtl::Put { version: None, file: None }]);
        let e = parse_ctl("dirty\nget rel/path\n", &s, b).unwrap_err().to_string();
        assert!(e.starts_with("ctl line 2 (\"get rel/path\")") && e.contains("absolute"), "{e}");
        let e = parse_ctl("clean\nput -v 9\n", &s, b).unwrap_err().to_string();
        assert!(e.contains("line 2") && e.contains("not 9"), "{e}");
    }

    #[test]
    fn an_address_searched_off_the_lock_is_kept_only_if_nothing_changed_meanwhile() {
        let mut s = Session::new(1, "t", [0; 16]).unwrap();
        let b = s.view_mut().create_buffer_as("/tmp/searched").unwrap();
        let insert = |s: &mut Session, q0: u64, text: &str| {
            let version = s.view().state.buffer(b).unwrap().version;
            let p = Proposal::Insert { buffer: b, version, q0, text: text.into(), origin: Origin::FileWrite };
            s.propose("test", &p).unwrap();
        };
        insert(&mut s, 0, "alpha beta gamma\n");
        // Nothing changed: the address found is kept.
        let found = addr_search(&s, b).unwrap().eval("/beta/").unwrap();
        assert!(addr_found(&mut s, found).unwrap());
        assert_eq!(addr_now(&s, b).unwrap().0, Range::new(6, 10));
        // The text changed while searching: nothing is kept, search again.
        let search = addr_search(&s, b).unwrap();
        insert(&mut s, 0, "new ");
        let found = search.eval("/gamma/").unwrap();
        assert!(!addr_found(&mut s, found).unwrap());
        assert_eq!(addr_now(&s, b).unwrap().0, Range::new(10, 14), "still beta, moved by the insert");
        // Another write moved the address meanwhile: not kept either.
        let search = addr_search(&s, b).unwrap();
        addr_write(&mut s, b, "#0").unwrap();
        assert!(!addr_found(&mut s, search.eval("/gamma/").unwrap()).unwrap());
        assert_eq!(addr_now(&s, b).unwrap().0, Range::new(0, 0));
        // Searched again, it lands; a failed search changes nothing.
        addr_write(&mut s, b, "/gamma/").unwrap();
        assert_eq!(addr_now(&s, b).unwrap().0, Range::new(15, 20));
        assert!(addr_search(&s, b).unwrap().eval("/delta/").is_err());
        assert_eq!(addr_now(&s, b).unwrap().0, Range::new(15, 20));
    }

    /// The text kept flat for the next search stays while its buffer does
    /// not change, and goes once it does: not held, a whole text's worth,
    /// for nothing.
    #[test]
    fn the_text_kept_flat_for_searches_goes_once_its_buffer_changes() {
        let mut s = Session::new(1, "t", [0; 16]).unwrap();
        let b = s.view_mut().create_buffer_as("/tmp/searched").unwrap();
        let insert = |s: &mut Session, text: &str| {
            let version = s.view().state.buffer(b).unwrap().version;
            let p = Proposal::Insert { buffer: b, version, q0: 0, text: text.into(), origin: Origin::FileWrite };
            s.propose("test", &p).unwrap();
            s.settle_change().unwrap();
        };
        insert(&mut s, "alpha beta gamma\n");
        addr_write(&mut s, b, "/beta/").unwrap();
        assert_eq!(s.flat().buffer.map(|(kept, _)| kept), Some(b), "kept for the next search");
        s.view_mut().create_buffer_as("/tmp/other").unwrap();
        s.settle_change().unwrap();
        assert_eq!(s.flat().buffer.map(|(kept, _)| kept), Some(b), "another buffer made: still of use");
        insert(&mut s, "new ");
        assert_eq!(s.flat().buffer, None, "its buffer changed");
        assert!(s.flat().text.is_empty());
        addr_write(&mut s, b, "/gamma/").unwrap();
        assert_eq!(addr_now(&s, b).unwrap().0, Range::new(15, 20), "searched again, made anew");
    }
}
