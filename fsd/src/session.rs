//! One session as the daemon holds it: the authoritative log under the
//! view node, which follows every shard and leads the leasable ones while
//! no UI does.
//!
//! A new session is laid out as acme starts (`make::init_session`), so
//! tools can work in a session nobody is looking at.

use apex_core::{make, MetaOp, Node, Reject, SessionUuid};

/// A session: its view node (SERVER over the authority log).
pub struct Session {
    /// Never reused in the daemon's life; qid paths are derived from it.
    pub seq: u64,
    pub view: Node,
}

impl Session {
    /// A fresh session labelled `label` with identity `uuid`.
    pub fn new(seq: u64, label: &str, uuid: [u8; 16]) -> Result<Session, Reject> {
        let mut view = Node::server();
        view.push_meta(MetaOp::Identity { uuid: SessionUuid(uuid) })?;
        view.push_meta(MetaOp::Label { label: label.to_string() })?;
        make::init_session(&mut view)?;
        Ok(Session { seq, view })
    }

    pub fn label(&self) -> &str {
        &self.view.state.meta.label
    }

    pub fn uuid(&self) -> String {
        self.view.state.meta.uuid.map(|u| u.to_string()).unwrap_or_default()
    }

    /// Renames the session (a new `Label` entry in the metalog).
    pub fn relabel(&mut self, label: &str) -> Result<(), Reject> {
        self.view.push_meta(MetaOp::Label { label: label.to_string() }).map(|_| ())
    }

    /// Its `index` line: name, uuid, attachments, shards.
    pub fn index_line(&self) -> String {
        let m = &self.view.state.meta;
        format!("{} {} {} {}\n", self.label(), self.uuid(), m.attachments.len(), m.shards().count())
    }
}
