//! Many clients over one connection, as plan9port's 9pserve serves them: a
//! [`srv::Serve`](crate::srv::Serve) whose every request is passed on to
//! an upstream [`Client`]. Each local client gets its own tags and fids
//! (the server connection keeps them) mapped onto the upstream's (the
//! client allocates them), so clients never see each other's numbers; a
//! Tflush of a local request drops its upstream call, which flushes it
//! there; a local hang-up clunks every fid it left upstream; and
//! `Topenfd`, which passes a descriptor and so cannot cross a network,
//! is served here, by the server connection, as an open and reads and
//! writes passed on.
//!
//! An upstream fid is clunked when the local client clunks it (awaited,
//! so what a clunk does upstream, a rules file taken or an event reader
//! gone, is done before the Rclunk), else when the last local state
//! referring to it goes (a walk onto the same fid replaces it; a hang-up
//! drops them all).

use crate::client::{Client, ClientError};
use crate::fcall::{Fcall, Qid, Stat};
use crate::srv::{Serve, Walked};
use std::future::Future;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

/// A fid upstream, shared by the local states that refer to it.
pub struct Upstream {
    fid: u32,
    client: Client,
    /// Clunked (or removed) already: nothing is left to let go.
    gone: AtomicBool,
}

impl Drop for Upstream {
    fn drop(&mut self) {
        if self.gone.swap(true, Ordering::AcqRel) {
            return;
        }
        let Ok(rt) = tokio::runtime::Handle::try_current() else { return };
        let (client, fid) = (self.client.clone(), self.fid);
        rt.spawn(async move {
            let _ = client.clunk(fid).await;
        });
    }
}

/// What a local fid is: the upstream fid it stands for.
pub type Fid = Arc<Upstream>;

/// Why a forwarded request failed: the upstream's own words, or the
/// upstream connection's end.
#[derive(Debug, thiserror::Error)]
pub enum ForwardError {
    #[error("{0}")]
    Server(String),
    #[error("{remote}: the connection is down ({why}); try again once it is back")]
    Down { remote: String, why: ClientError },
}

/// What proves a forwarder's attaches upstream, where the upstream asks
/// (`Client::attach_proving`): the proof of a challenge, for a uname and
/// an aname.
pub type Prove = Arc<dyn Fn(&[u8], &str, &str) -> Vec<u8> + Send + Sync>;

/// The server side of a forwarder: each local connection gets one,
/// sharing the upstream `client`.
pub struct Forward {
    client: Client,
    prove: Option<Prove>,
    /// Who is upstream, for errors (`ssh!host`).
    remote: String,
    /// The attach name a client's empty (or acme's numeric) attach name
    /// stands for: a service posted as one of the upstream's trees (its
    /// acme tree, `SESSION/acme`), as the upstream's own services answer.
    root: Option<String>,
}

impl Forward {
    pub fn new(client: Client, remote: impl Into<String>, root: Option<String>) -> Forward {
        Forward { client, prove: None, remote: remote.into(), root }
    }

    /// Attaches upstream proving who it is, with `prove`.
    pub fn proving(self, prove: Option<Prove>) -> Forward {
        Forward { prove, ..self }
    }

    fn error(&self, e: ClientError) -> ForwardError {
        match e {
            ClientError::Server(text) => ForwardError::Server(text),
            why => ForwardError::Down { remote: self.remote.clone(), why },
        }
    }

    fn upstream(&self, fid: u32) -> Fid {
        Arc::new(Upstream { fid, client: self.client.clone(), gone: AtomicBool::new(false) })
    }

    /// The local client clunked the fid: it is clunked upstream now, and
    /// waited for, even while a request of it is in flight (a read that
    /// waits on an event file would otherwise keep the reader upstream).
    async fn let_go(&self, fid: Fid) {
        if !fid.gone.swap(true, Ordering::AcqRel) {
            let _ = self.client.clunk(fid.fid).await;
        }
    }
}

type Result<T> = std::result::Result<T, ForwardError>;

impl Serve for Forward {
    type Fid = Fid;
    type Error = ForwardError;

    async fn attach(&self, uname: &str, aname: &str) -> Result<(Qid, Fid)> {
        let aname = match &self.root {
            Some(root) if aname.bytes().all(|c| c.is_ascii_digit()) => root.as_str(),
            _ => aname,
        };
        let attached = match &self.prove {
            Some(prove) => self.client.attach_proving(uname, aname, |c| prove(c, uname, aname)).await,
            None => self.client.attach_qid(uname, aname).await,
        };
        let (fid, qid) = attached.map_err(|e| self.error(e))?;
        Ok((qid, self.upstream(fid)))
    }

    async fn walk(&self, fid: &Fid, names: &[String]) -> Result<Walked<Fid>> {
        let (qids, newfid) = self.client.walk_once(fid.fid, names.to_vec()).await.map_err(|e| self.error(e))?;
        Ok((qids, newfid.map(|n| self.upstream(n))))
    }

    async fn open(&self, fid: &Fid, mode: u8) -> Result<(Qid, Fid)> {
        let file = self.client.open(fid.fid, mode).await.map_err(|e| self.error(e))?;
        Ok((file.qid, fid.clone()))
    }

    async fn create(&self, fid: &Fid, name: &str, perm: u32, mode: u8) -> Result<(Qid, Fid)> {
        let file = self.client.create(fid.fid, name, perm, mode).await.map_err(|e| self.error(e))?;
        Ok((file.qid, fid.clone()))
    }

    /// A read flushed locally is flushed upstream, and whichever answer
    /// comes first is the local one: a read that happened upstream (an
    /// event, a plumbed message taken) is passed on before the Rflush,
    /// never lost between the two.
    async fn read(&self, fid: &Fid, offset: u64, count: u32) -> Result<Vec<u8>> {
        let count = count.min(crate::version::iounit(self.client.msize()));
        let sent = self.client.send(Fcall::Tread { fid: fid.fid, offset, count }).await.map_err(|e| self.error(e))?;
        let tag = sent.tag();
        let reply = sent.reply();
        tokio::pin!(reply);
        let outcome = tokio::select! {
            biased;
            r = &mut reply => r,
            _ = crate::srv::flushed() => {
                let flush = self.client.rpc(Fcall::Tflush { oldtag: tag });
                tokio::pin!(flush);
                tokio::select! {
                    biased;
                    r = &mut reply => r,
                    _ = &mut flush => {
                        // The Rflush came: a reply before it was handed
                        // over first, so it is there now or never was.
                        let mut cx = std::task::Context::from_waker(std::task::Waker::noop());
                        match reply.as_mut().poll(&mut cx) {
                            std::task::Poll::Ready(r) => r,
                            std::task::Poll::Pending => Err(ClientError::Server("flushed".into())),
                        }
                    }
                }
            }
        };
        match outcome.map_err(|e| self.error(e))? {
            Fcall::Rread { data } => Ok(data),
            other => Err(ForwardError::Server(format!("unexpected reply to Tread: {other:?}"))),
        }
    }

    fn finishes_flushed_reads(&self) -> bool {
        true
    }

    async fn write(&self, fid: &Fid, offset: u64, data: Vec<u8>) -> Result<u32> {
        self.client.write(fid.fid, offset, &data).await.map_err(|e| self.error(e))
    }

    async fn clunk(&self, fid: Fid) {
        self.let_go(fid).await
    }

    async fn remove(&self, fid: Fid) -> Result<()> {
        // Removed, the fid is gone upstream whatever the outcome (remove(5)).
        fid.gone.store(true, Ordering::Release);
        self.client.remove(fid.fid).await.map_err(|e| self.error(e))
    }

    async fn stat(&self, fid: &Fid) -> Result<Stat> {
        self.client.stat(fid.fid).await.map_err(|e| self.error(e))
    }

    async fn wstat(&self, fid: &Fid, stat: Stat) -> Result<()> {
        self.client.wstat(fid.fid, stat).await.map_err(|e| self.error(e))
    }
}
