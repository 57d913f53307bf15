//! A file's content as taken under its session's lock: small contents
//! whole, and what grows with a buffer's size (a body, a snapshot, a
//! hash) as a cheap copy of the state it comes from (ropes share their
//! nodes), made into bytes after the lock is let go, so one big buffer
//! does not hold up every other request.

use apex_core::term::Term;
use apex_core::text::Text;
use apex_core::State;

pub enum Made {
    Bytes(Vec<u8>),
    /// A text's runes as UTF-8.
    Text(Text),
    /// A session's snapshot encoding.
    Snapshot(Box<State>),
    /// A session's state hash, in hex, on a line.
    Hash(Box<State>),
    /// A terminal's text (its scrollback rows shared, not copied).
    Term(Box<Term>, TermText),
}

/// Which text of a terminal.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TermText {
    Screen,
    Scrollback,
    /// Both: the `text` file and its acme window's body.
    All,
}

/// Past this many bytes of text, making the bytes is moved off the
/// async workers: a worker busy for tens of milliseconds would hold up
/// the connections whose tasks wait on it.
const BIG: usize = 1 << 20;

impl Made {
    /// The bytes, made on a blocking thread when they are many: call it
    /// with no lock held.
    pub async fn made(self) -> Vec<u8> {
        if !self.is_big() {
            return self.bytes();
        }
        match tokio::task::spawn_blocking(move || self.bytes()).await {
            Ok(bytes) => bytes,
            Err(e) => std::panic::resume_unwind(e.into_panic()),
        }
    }

    fn is_big(&self) -> bool {
        // Terminals' rows count too (a snapshot writes every one).
        let rows = |st: &State| st.terms.values().map(|t| t.scrollback.len() * 100).sum::<usize>();
        let text = |st: &State| st.buffers.values().map(|b| b.text.len_bytes()).sum::<usize>() + rows(st);
        match self {
            Made::Bytes(_) => false,
            Made::Text(t) => t.len_bytes() > BIG,
            Made::Snapshot(st) | Made::Hash(st) => text(st) > BIG,
            Made::Term(t, _) => t.scrollback.len() > BIG / 100,
        }
    }

    /// The bytes: call it with no lock held.
    pub fn bytes(self) -> Vec<u8> {
        match self {
            Made::Bytes(b) => b,
            Made::Text(t) => t.to_string().into_bytes(),
            Made::Snapshot(st) => st.to_snapshot(),
            Made::Hash(st) => format!("{}\n", st.hash().to_hex()).into_bytes(),
            Made::Term(t, TermText::Screen) => t.screen().into_bytes(),
            Made::Term(t, TermText::Scrollback) => t.scrollback_text().into_bytes(),
            Made::Term(t, TermText::All) => t.text().into_bytes(),
        }
    }
}

impl From<String> for Made {
    fn from(s: String) -> Made {
        Made::Bytes(s.into_bytes())
    }
}
