//! Undoing a change the log's file did not take. The write-ahead log has
//! cut its file back to where the change began (`persist::wal`), so the
//! files hold every change before it, whole; the session goes back to
//! them and serves on, writing nothing while it does (the disk that
//! failed may still fail): the state is read back from the files (the
//! log in memory keeps the entries before the change, for readers
//! behind); what the change told the attach protocol's connections is
//! taken back and their streams broken, so each client resumes its attachment, is
//! welcomed with the state as it is, and sends again its own entries
//! since its last acknowledgement (`attach::protocol::undone`); the
//! proposals the change routed are refused to their writers, as the
//! outcomes it decided are (`Session::settle_log`); terminals it started
//! end. The writer of the change hears why (`Daemon::change`). Only if
//! the files cannot be read back does the log stop taking changes until
//! a restart.

use super::Session;
use crate::persist::durable::LogError;
use apex_core::{AttachmentId, Log, Node};

impl Session {
    /// Goes back to what the log's files hold after a change they did not
    /// take (`why`).
    pub(super) fn roll_back(&mut self, why: &LogError) {
        let Some(p) = &self.persisted else { return };
        let state = match p.state_on_disk() {
            Ok(state) => state,
            Err(e) => {
                p.stop(format!("{why}; and the session's files could not be read back ({e})"));
                return;
            }
        };
        let mut log = Log::authority_from(&state);
        let old = std::mem::replace(&mut self.view, Node::server());
        log.keep_entries_of(old.log);
        log.set_sink(p.sink());
        self.view = Node::new(AttachmentId::SERVER, state, log);
        tracing::warn!(session = %self.label(), error = %why, "a change was undone: the session is back to its log");

        let marks = std::mem::take(&mut self.began);
        crate::attach::protocol::undone(self, &marks, &why.to_string());
        // A terminal the change started is not in the state: its program
        // ends with its handle.
        let terms = &self.view.state.terms;
        self.terms.retain(|id, _| terms.contains_key(id));
        self.taken_up.retain(|(id, _)| terms.contains_key(id));
        self.flat = Default::default();
    }

    /// Settles what a change that sequences nothing of its own may have
    /// stored (`Daemon::tend`), undoing it if the file did not take it.
    pub fn settle_quietly(&mut self) {
        if let Err(e @ LogError::Failed(_)) = self.settle_log() {
            self.roll_back(&e);
        }
    }
}
