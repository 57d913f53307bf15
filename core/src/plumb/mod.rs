//! Plumbing, plumb(7) and plumber(4), as a session has it: the session is
//! its own plumber.
//!
//! - [`message`]: a message, read from and written to a plumber's files.
//! - [`rules`]: the rule language parsed (`include`, variables, rule sets,
//!   the checks the plumber makes), refused with the file, line and reason.
//! - [`route`]: a message matched against the rules, rewritten, and where
//!   it goes: a port, and what to start when no one reads it.
//! - Here: what a B3 click sends (`look3`), and what a UI reading the
//!   `edit` port does with a message (`plumblook`, `plumbshow`).
//!
//! All of it pure: files (`isfile`, `isdir`, `include`) are asked of the
//! caller, and starting programs is the caller's.

pub mod message;
pub mod route;
pub mod rules;

pub use message::{Message, PlumbError};
pub use route::{Routed, Start};
pub use rules::{RuleError, Rules};

/// apex's own rule files, which `include` reads where plan9port's are not
/// installed: `basic` (files with addresses to `edit`, URLs to `web`) and
/// the `fileaddr` it includes.
pub fn builtin_rules(name: &str) -> Option<&'static str> {
    match name {
        "basic" => Some(include_str!("basic.rules")),
        "fileaddr" => Some(include_str!("fileaddr.rules")),
        _ => None,
    }
}

/// The rules a session starts with where `$HOME/lib/plumbing` does not
/// exist.
pub const DEFAULT_RULES: &str = "include basic\n";

use crate::buf::Buffer;
use crate::exec::{self, Host};
use crate::op::Origin;
use crate::propose::{Created, Proposal};

/// What a B3 click sends the plumber (acme's `look3`): the text, or for a
/// click with nothing swept, the run of non-blank runes around `q` with a
/// `click` attribute saying where in it the click was, so the plumber's
/// rules do the expanding.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Plumb {
    pub data: String,
    pub click: Option<u64>,
}

impl Plumb {
    /// The non-blank run around rune `q` of `buf`, clicked at `q`; none
    /// when the click is on a blank.
    pub fn around(buf: &Buffer, q: u64) -> Option<Plumb> {
        let len = buf.len();
        let blank = |c: char| matches!(c, ' ' | '\t' | '\n');
        let q = q.min(len);
        let mut q0 = q;
        while q0 > 0 && !blank(buf.text.char(q0 as usize - 1)) {
            q0 -= 1;
        }
        let mut q1 = q;
        while q1 < len && !blank(buf.text.char(q1 as usize)) {
            q1 += 1;
        }
        (q0 < q1).then(|| Plumb { data: buf.slice(q0, q1).unwrap_or_default(), click: Some(q - q0) })
    }

    /// The message in plumb(7)'s format: source `acme`, no destination,
    /// the window's directory, type `text`, the attributes, the data.
    pub fn message(&self, wdir: &str) -> Vec<u8> {
        self.to_message(wdir).pack()
    }

    /// The message itself.
    pub fn to_message(&self, wdir: &str) -> Message {
        let mut m = Message::text("acme", wdir, &self.data);
        if let Some(c) = self.click {
            m.attr.push(("click".into(), c.to_string()));
        }
        m
    }
}

/// Acts on a message from the plumber's `edit` port as acme does: a
/// `text` message with `action=showdata` is shown in a new window named
/// by its `filename` attribute (else `Untitled-N`), clean; any other
/// names a file, shown (opened if need be) at its `addr` attribute.
/// Messages of other types are not for an editor and are left alone.
pub fn deliver<H: Host>(h: &mut H, m: &Message) -> exec::Result<()> {
    if m.kind != "text" {
        return Ok(());
    }
    let text = String::from_utf8_lossy(&m.data).to_string();
    if m.attr("action") != Some("showdata") {
        if text.is_empty() {
            return Ok(());
        }
        return exec::open(h, &m.path(&text), m.attr("addr")).map(|_| ());
    }
    let name = match m.attr("filename") {
        Some(f) => m.path(f),
        None => untitled(&*h.state()?),
    };
    let p = Proposal::CreateWindow { body: None, column: None, name: name.clone(), near: None };
    let Created::Window(made) = h.propose(p)?.created else {
        return Err(exec::ExecError::Host(format!("{name}: no window was made")));
    };
    h.propose(Proposal::Insert { buffer: made.body, version: 0, q0: 0, text, origin: Origin::OtherFile })?;
    h.propose(Proposal::Clean { buffer: made.body })?;
    h.propose(Proposal::ForgetUndo { buffer: made.body })?;
    Ok(())
}

/// The first `Untitled-N` no window is named (acme counts them; the
/// session's windows are the count here, the same for every UI).
fn untitled(st: &crate::state::State) -> String {
    let taken = |n: u32| st.buffers.values().any(|b| b.name == format!("Untitled-{n}"));
    let n = (1..).find(|n| !taken(*n)).unwrap_or(1);
    format!("Untitled-{n}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_click_s_message_round_trips() {
        let p = Plumb { data: "file.go:12".into(), click: Some(3) };
        let (m, _) = Message::parse(&p.message("/src")).unwrap().unwrap();
        assert_eq!((m.src.as_str(), m.wdir.as_str(), m.attr("click")), ("acme", "/src", Some("3")));
        assert_eq!(m.data, b"file.go:12");
    }
}
