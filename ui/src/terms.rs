//! What the UI sends the terminals its windows show, through the
//! daemon's files: what is typed goes to `terms/N/cons`, in order, each
//! terminal through a fid of its own kept open by a writer task (so a
//! keystroke is one Twrite, never an open); the size a window gives a
//! terminal goes to `terms/N/ctl` as `resize COLS ROWS` (the pty's
//! SIGWINCH), once per size.

use apex_core::TermId;
use apex_ninep::fcall::OWRITE;
use apex_ninep::Client;
use std::collections::HashMap;
use tokio::sync::mpsc;

/// The daemon's file `path` (from its root) open in `mode`: how the UI
/// reaches a session's files beside its attachment.
pub async fn open_file(c: &Client, path: &str, mode: u8) -> Result<apex_ninep::File, apex_ninep::ClientError> {
    let root = c.attach(&apex_ninep::ns::user_name(), "").await?;
    let f = c.open_path(root, path, mode).await;
    let _ = c.clunk(root).await;
    f
}

/// Writes `bytes` to the daemon's file `path` in one write.
pub async fn write_file(c: &Client, path: &str, bytes: &[u8]) -> Result<(), apex_ninep::ClientError> {
    let f = open_file(c, path, OWRITE).await?;
    let r = c.write(f.fid, 0, bytes).await;
    let _ = c.clunk(f.fid).await;
    r.map(|_| ())
}

/// The terminals' writers and the sizes asked for.
#[derive(Default)]
pub struct Terminals {
    writers: HashMap<TermId, mpsc::UnboundedSender<Vec<u8>>>,
    sized: HashMap<TermId, (u16, u16)>,
}

impl Terminals {
    /// Sends `bytes` to terminal `term`'s program. A writer whose fid
    /// failed (the terminal closed, the connection went) is made again
    /// at the next keystroke.
    pub fn type_into(&mut self, rt: &tokio::runtime::Handle, c: Client, session: &str, term: TermId, bytes: Vec<u8>) {
        if let Some(tx) = self.writers.get(&term) {
            match tx.send(bytes) {
                Ok(()) => return,
                Err(mpsc::error::SendError(bytes)) => {
                    self.writers.remove(&term);
                    return self.type_into(rt, c, session, term, bytes);
                }
            }
        }
        let (tx, mut rx) = mpsc::unbounded_channel::<Vec<u8>>();
        let _ = tx.send(bytes);
        self.writers.insert(term, tx);
        let path = format!("{session}/terms/{}/cons", term.0);
        rt.spawn(async move {
            let Ok(f) = open_file(&c, &path, OWRITE).await else { return };
            while let Some(bytes) = rx.recv().await {
                if c.write(f.fid, 0, &bytes).await.is_err() {
                    break;
                }
            }
            let _ = c.clunk(f.fid).await;
        });
    }

    /// Asks for terminal `term` to be `cols` by `rows`, unless that was
    /// the last size asked for it.
    pub fn fit(&mut self, rt: &tokio::runtime::Handle, c: Client, session: &str, term: TermId, size: (u16, u16)) {
        if self.sized.insert(term, size) == Some(size) {
            return;
        }
        let path = format!("{session}/terms/{}/ctl", term.0);
        rt.spawn(async move {
            let _ = write_file(&c, &path, format!("resize {} {}\n", size.0, size.1).as_bytes()).await;
        });
    }

    /// Attached anew (the daemon restarted, or the connection went): the
    /// writers' fids were on the old connection, and the daemon may have
    /// another size for each terminal. Both are made again as needed.
    pub fn forget(&mut self) {
        self.writers.clear();
        self.sized.clear();
    }

    /// The size last asked for terminal `term`.
    pub fn asked(&self, term: TermId) -> Option<(u16, u16)> {
        self.sized.get(&term).copied()
    }
}
