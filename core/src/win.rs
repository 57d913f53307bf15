//! `Window`: the state of one window shard: which buffers it shows and its
//! flags. Where it sits and its acme number are the layout's (`layout.rs`);
//! its selections are its buffers' views (`view.rs`).

use crate::error::Result;
use crate::id::{AttachmentId, BufferId, TermId};
use crate::op::{WindowFlags, WindowOp};
use serde::{Deserialize, Serialize};

/// One window: a tag over a body, or over a terminal.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Window {
    /// The tag line's buffer.
    pub tag: BufferId,
    /// The body's buffer; two windows on one buffer are Zerox copies.
    pub body: BufferId,
    pub flags: WindowFlags,
    /// The tool reading this window's event file, if one is: the UI then
    /// sends B2/B3 actions here as entries instead of acting on them.
    pub event_reader: Option<AttachmentId>,
    /// The terminal the window shows in its body's place: a UI draws its
    /// grid and sends it what is typed there.
    pub term: Option<TermId>,
}

/// A window as snapshots of format 1 hold it (before `term`).
#[derive(Deserialize)]
struct WindowV1 {
    tag: BufferId,
    body: BufferId,
    flags: WindowFlags,
    event_reader: Option<AttachmentId>,
}

/// A window as snapshots of this format hold it.
#[derive(Deserialize)]
struct WindowV2 {
    tag: BufferId,
    body: BufferId,
    flags: WindowFlags,
    event_reader: Option<AttachmentId>,
    term: Option<TermId>,
}

impl<'de> Deserialize<'de> for Window {
    /// A window of the snapshot format being read
    /// ([`crate::format::reading_format`]): a format-1 snapshot's has no
    /// terminal.
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> std::result::Result<Window, D::Error> {
        match crate::format::reading_format() {
            1 => WindowV1::deserialize(d).map(|w| Window {
                tag: w.tag,
                body: w.body,
                flags: w.flags,
                event_reader: w.event_reader,
                term: None,
            }),
            _ => WindowV2::deserialize(d).map(|w| Window {
                tag: w.tag,
                body: w.body,
                flags: w.flags,
                event_reader: w.event_reader,
                term: w.term,
            }),
        }
    }
}

impl Window {
    pub fn new(tag: BufferId, body: BufferId) -> Window {
        Window { tag, body, flags: WindowFlags::default(), event_reader: None, term: None }
    }

    /// Applies an op other than `Create` (the state's to handle).
    pub fn apply(&mut self, op: &WindowOp) -> Result<()> {
        match op {
            WindowOp::Create { .. } => {}
            WindowOp::Tag { tag } => self.tag = *tag,
            WindowOp::Body { body } => self.body = *body,
            WindowOp::Flags(flags) => self.flags = (**flags).clone(),
            WindowOp::EventOpen { reader } => self.event_reader = Some(*reader),
            WindowOp::EventClose => self.event_reader = None,
            WindowOp::Term { term } => self.term = *term,
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use crate::{make, Node, State};

    /// A snapshot written before windows could show a terminal (format 1:
    /// a window's encoding without `term`) still decodes, its windows
    /// showing their bodies.
    #[test]
    fn a_format_1_snapshot_decodes_with_no_terminals() {
        let mut node = Node::server();
        make::init_session(&mut node).unwrap();
        let w = make::new_window(&mut node, None, None, "/tmp/old").unwrap();
        let now = node.state.to_snapshot();
        assert_eq!(now[0], crate::snap::SNAPSHOT_FORMAT);
        let old = crate::format::older::snapshot(&node.state, 1);
        let back = State::from_snapshot(&old).expect("format 1 decodes");
        assert_eq!(back.hash(), node.state.hash());
        assert!(back.window(w.window).unwrap().term.is_none());
        // And this build's own, with a terminal shown.
        assert!(State::from_snapshot(&now).is_ok());
        assert!(State::from_snapshot(&[9]).is_err_and(|e| e.to_string().contains("formats 1 to 3")));
    }
}
