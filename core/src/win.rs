//! `Window`: the state of one window shard: which buffers it shows and its
//! flags. Where it sits and its acme number are the layout's (`layout.rs`);
//! its selections are its buffers' views (`view.rs`).

use crate::error::Result;
use crate::id::{AttachmentId, BufferId};
use crate::op::{WindowFlags, WindowOp};
use serde::{Deserialize, Serialize};

/// One window: a tag over a body.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Window {
    /// The tag line's buffer.
    pub tag: BufferId,
    /// The body's buffer; two windows on one buffer are Zerox copies.
    pub body: BufferId,
    pub flags: WindowFlags,
    /// The tool reading this window's event file, if one is: the UI then
    /// sends B2/B3 actions here as entries instead of acting on them.
    pub event_reader: Option<AttachmentId>,
}

impl Window {
    pub fn new(tag: BufferId, body: BufferId) -> Window {
        Window { tag, body, flags: WindowFlags::default(), event_reader: None }
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
        }
        Ok(())
    }
}
