//! A plumber as its clients reach it (plumb(3)): a message written to
//! its `send` file, a port read message by message. The same for the
//! session's plumber (`NAME/plumb/` in the daemon's tree) and for one
//! another program posts (`plumb` in the namespace directory).

use apex_core::plumb::Message;
use apex_ninep::fcall::{OREAD, OWRITE};
use apex_ninep::{Client, ClientError};
use std::time::Duration;

/// Why a plumber did not take a message.
#[derive(Debug, thiserror::Error)]
pub enum PlumberError {
    /// The plumber's refusal (no rule took it, no one reads its port), or
    /// why it could not be reached.
    #[error(transparent)]
    Said(#[from] ClientError),
    #[error("{0}: no answer in 10 s")]
    Silent(String),
}

/// plan9port's plumber's largest message: acme plumbs nothing longer
/// than this less 1 KiB.
pub const MESSAGE_SIZE: usize = 8192;
/// How long a send waits for a plumber before giving up.
pub const SEND_WAIT: Duration = Duration::from_secs(10);

/// Writes `message` to the file `send` (a path from `root`) on `c`: the
/// plumber's refusal (no rule took it, no one reads its port) as it
/// worded it.
pub async fn send_on(c: &Client, root: u32, send: &str, message: &[u8]) -> Result<(), PlumberError> {
    let f = c.open_path(root, send, OWRITE).await?;
    let written = c.write(f.fid, 0, message).await;
    let _ = c.clunk(f.fid).await;
    Ok(written.map(|_| ())?)
}

/// Sends `message` to the plumber posted at `address` (`unix!PATH`),
/// waiting at most [`SEND_WAIT`].
pub async fn send_to(address: &str, message: &[u8]) -> Result<(), PlumberError> {
    let sent = tokio::time::timeout(SEND_WAIT, async {
        let c = apex_ninep::dial(address, (MESSAGE_SIZE + 24) as u32).await?;
        let root = c.attach(&apex_ninep::ns::user_name(), "").await?;
        send_on(&c, root, "send", message).await
    })
    .await;
    sent.unwrap_or_else(|_| Err(PlumberError::Silent(address.to_string())))
}

/// Reads port `path` (from `root`) on `c` until it ends or fails, each
/// whole message handed to `got`. Returns why it stopped.
pub async fn read_port(c: &Client, root: u32, path: &str, mut got: impl FnMut(Message)) -> String {
    let port = match c.open_path(root, path, OREAD).await {
        Ok(p) => p,
        Err(e) => return e.to_string(),
    };
    let mut bytes = Vec::new();
    let why = loop {
        match c.read(port.fid, 0, port.iounit.max(MESSAGE_SIZE as u32)).await {
            Ok(more) if more.is_empty() => break "the port ended".to_string(),
            Ok(more) => bytes.extend_from_slice(&more),
            Err(e) => break e.to_string(),
        }
        loop {
            match Message::parse(&bytes) {
                Ok(Some((m, used))) => {
                    bytes.drain(..used);
                    got(m);
                }
                Ok(None) => break,
                // Not a message: what is left cannot be framed.
                Err(_) => {
                    bytes.clear();
                    break;
                }
            }
        }
    };
    let _ = c.clunk(port.fid).await;
    why
}

/// Whether the plumber posted at `address` is the tree of `session` on
/// `c` (a daemon that posts its session's plumber): the same qid for
/// its root as `session/plumb` has there.
pub async fn is_session_plumber(c: &Client, session: &str, address: &str) -> bool {
    let ours = async {
        let root = c.attach(&apex_ninep::ns::user_name(), "").await.ok()?;
        let walked = c.walk(root, &[session, "plumb"]).await;
        let _ = c.clunk(root).await;
        let (fid, qids) = walked.ok()?;
        let _ = c.clunk(fid).await;
        qids.last().map(|q| q.path)
    };
    let posted = async {
        let p = apex_ninep::dial(address, (MESSAGE_SIZE + 24) as u32).await.ok()?;
        root_qid(&p).await
    };
    match tokio::time::timeout(SEND_WAIT, async { (ours.await, posted.await) }).await {
        Ok((Some(a), Some(b))) => a == b,
        _ => false,
    }
}

async fn root_qid(c: &Client) -> Option<u64> {
    let root = c.attach(&apex_ninep::ns::user_name(), "").await.ok()?;
    let st = c.stat(root).await.ok();
    let _ = c.clunk(root).await;
    st.map(|s| s.qid.path)
}
