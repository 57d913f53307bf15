//! The plumber's messages, plumb(7), both ways as acme has them: what a
//! B3 click sends to the plumber's `send` file (`look3`), and what a UI
//! reading the plumber's `edit` port does with a message that arrives
//! there (`plumblook`, `plumbshow`): show the named file at its address,
//! or show the data in a new window.

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
        let attr = self.click.map(|c| format!("click={c}")).unwrap_or_default();
        let mut out = format!("acme\n\n{wdir}\ntext\n{attr}\n{}\n", self.data.len()).into_bytes();
        out.extend_from_slice(self.data.as_bytes());
        out
    }
}

/// A message as the plumber delivers it to a port.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Message {
    pub src: String,
    pub dst: String,
    pub wdir: String,
    /// Its type (`text` for everything acme acts on).
    pub kind: String,
    pub attr: Vec<(String, String)>,
    pub data: Vec<u8>,
}

/// A port's bytes that are not a plumb(7) message.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PlumbError {
    #[error("plumb message: {0} is not UTF-8")]
    NotText(&'static str),
    #[error("plumb message: the data length {0:?} is not a number")]
    Length(String),
}

const FIELDS: [&str; 6] = ["src", "dst", "wdir", "type", "attr", "ndata"];

impl Message {
    /// The first message in `bytes`, and how many bytes it took; none if
    /// `bytes` holds only a part of one yet.
    pub fn parse(bytes: &[u8]) -> Result<Option<(Message, usize)>, PlumbError> {
        let mut fields = Vec::with_capacity(FIELDS.len());
        let mut at = 0;
        for name in FIELDS {
            let Some(nl) = bytes[at..].iter().position(|b| *b == b'\n') else { return Ok(None) };
            let field = std::str::from_utf8(&bytes[at..at + nl]).map_err(|_| PlumbError::NotText(name))?;
            fields.push(field.to_string());
            at += nl + 1;
        }
        let n: usize = fields[5].trim().parse().map_err(|_| PlumbError::Length(fields[5].clone()))?;
        if bytes.len() < at + n {
            return Ok(None);
        }
        let message = Message {
            src: fields[0].clone(),
            dst: fields[1].clone(),
            wdir: fields[2].clone(),
            kind: fields[3].clone(),
            attr: attributes(&fields[4]),
            data: bytes[at..at + n].to_vec(),
        };
        Ok(Some((message, at + n)))
    }

    /// The value of attribute `name`.
    pub fn attr(&self, name: &str) -> Option<&str> {
        self.attr.iter().find(|(n, _)| n == name).map(|(_, v)| v.as_str())
    }

    /// `name` as an absolute path: relative to the message's `wdir`.
    fn path(&self, name: &str) -> String {
        match name.starts_with('/') || self.wdir.is_empty() {
            true => name.to_string(),
            false => format!("{}/{name}", self.wdir.trim_end_matches('/')),
        }
    }
}

/// plumb(7)'s attributes: `name=value` separated by blanks, a value in
/// single quotes when it holds blanks (a doubled quote is a quote).
fn attributes(s: &str) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let mut chars = s.chars().peekable();
    loop {
        while chars.next_if(|c| c.is_whitespace()).is_some() {}
        let mut name = String::new();
        while let Some(c) = chars.next_if(|c| *c != '=' && !c.is_whitespace()) {
            name.push(c);
        }
        if name.is_empty() {
            return out;
        }
        let mut value = String::new();
        if chars.next_if_eq(&'=').is_some() {
            let mut quoted = false;
            while let Some(&c) = chars.peek() {
                match c {
                    '\'' if quoted && chars.clone().nth(1) == Some('\'') => {
                        value.push('\'');
                        chars.next();
                    }
                    '\'' => quoted = !quoted,
                    c if c.is_whitespace() && !quoted => break,
                    c => value.push(c),
                }
                chars.next();
            }
        }
        out.push((name, value));
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
        return exec::open(h, &m.path(&text), m.attr("addr"));
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
    fn a_message_parses_whole_or_waits_for_the_rest() {
        let bytes = b"plumb\nedit\n/home/g\ntext\naddr=12 click='a b' q='it''s'\n9\nmain.go:1rest";
        let (m, used) = Message::parse(bytes).unwrap().unwrap();
        assert_eq!(used, bytes.len() - 4);
        assert_eq!(
            (m.src.as_str(), m.dst.as_str(), m.wdir.as_str(), m.kind.as_str()),
            ("plumb", "edit", "/home/g", "text")
        );
        assert_eq!(m.attr("addr"), Some("12"));
        assert_eq!(m.attr("click"), Some("a b"));
        assert_eq!(m.attr("q"), Some("it's"));
        assert_eq!(m.data, b"main.go:1");
        assert_eq!(m.path("main.go"), "/home/g/main.go");
        assert_eq!(m.path("/x"), "/x");
        for cut in [0, 3, 20, bytes.len() - 6] {
            assert_eq!(Message::parse(&bytes[..cut]).unwrap(), None, "{cut} bytes are not a message yet");
        }
        assert!(matches!(Message::parse(b"a\nb\nc\ntext\n\nlots\n"), Err(PlumbError::Length(_))));
    }

    #[test]
    fn a_click_s_message_round_trips() {
        let p = Plumb { data: "file.go:12".into(), click: Some(3) };
        let (m, _) = Message::parse(&p.message("/src")).unwrap().unwrap();
        assert_eq!((m.src.as_str(), m.wdir.as_str(), m.attr("click")), ("acme", "/src", Some("3")));
        assert_eq!(m.data, b"file.go:12");
    }
}
