//! A [`Link`] driven over a 9P connection: one fid of `NAME/attach`, a
//! reader task that applies what arrives, and flushes that write each
//! frame in Twrites of its own.
//!
//! Writes are pipelined: every Twrite of a flush is sent before any reply
//! is awaited (the daemon handles them in order), and a Propose's reply,
//! which comes only once the proposal is sequenced, is awaited apart.

use crate::error::LinkError;
use crate::link::Link;
use apex_core::AttachmentKind;
use apex_ninep::client::{Client, File};
use apex_ninep::fcall::{Fcall, ORDWR};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::watch;

/// The connection the link is written to and read from: swapped by
/// [`Attached::reconnect`].
#[derive(Clone)]
struct Conn {
    client: Client,
    file: File,
}

/// How many refusals an attachment remembers.
pub const REFUSALS_KEPT: usize = 64;

struct Inner {
    conn: Mutex<Conn>,
    link: Mutex<Link>,
    /// Bumped after every frame read and every flush.
    changed: watch::Sender<u64>,
    writing: tokio::sync::Mutex<()>,
    /// Writes the daemon refused, oldest first: the last [`REFUSALS_KEPT`].
    refused: Mutex<std::collections::VecDeque<String>>,
    reader: Mutex<Option<tokio::task::JoinHandle<()>>>,
    /// While paused nothing is written, and bytes read wait in the stash
    /// (whose lock orders them before anything read after the pause).
    paused: std::sync::atomic::AtomicBool,
    stash: Mutex<Stash>,
}

#[derive(Default)]
struct Stash {
    holding: bool,
    bytes: Vec<u8>,
}

impl Conn {
    /// Opens `session/attach` on `client`.
    async fn open(client: &Client, session: &str) -> Result<Conn, LinkError> {
        let user = std::env::var("USER").unwrap_or_else(|_| "none".into());
        let root = client
            .attach(&user, session)
            .await
            .map_err(|source| LinkError::Attach { session: session.to_string(), source })?;
        let file = client
            .open_path(root, "attach", ORDWR)
            .await
            .map_err(|source| LinkError::Open { session: session.to_string(), source });
        let _ = client.clunk(root).await;
        Ok(Conn { client: client.clone(), file: file? })
    }
}

/// An attachment over 9P. Clones share it.
#[derive(Clone)]
pub struct Attached {
    inner: Arc<Inner>,
}

impl Attached {
    /// Attaches to session `session` on `client` as `kind` named `name`.
    pub async fn open(client: &Client, session: &str, kind: AttachmentKind, name: &str) -> Result<Attached, LinkError> {
        Attached::with_link(client, session, Link::new(kind, name)).await
    }

    /// Attaches with an existing link (after `Link::reconnect`, to resume).
    pub async fn with_link(client: &Client, session: &str, link: Link) -> Result<Attached, LinkError> {
        let conn = Conn::open(client, session).await?;
        let inner = Arc::new(Inner {
            conn: Mutex::new(conn),
            link: Mutex::new(link),
            changed: watch::Sender::new(0),
            writing: tokio::sync::Mutex::new(()),
            refused: Mutex::default(),
            reader: Mutex::new(None),
            paused: std::sync::atomic::AtomicBool::new(false),
            stash: Mutex::new(Stash::default()),
        });
        let me = Attached { inner };
        me.flush().await?;
        let reader = tokio::spawn(me.clone().read_loop());
        *me.inner.reader.lock().expect("reader lock") = Some(reader);
        Ok(me)
    }

    /// Starts over on `client` (a new connection to the daemon, after the
    /// old one went): the link asks to resume its attachment, and the
    /// daemon either continues it (within its grace) or attaches it anew,
    /// with what the daemon never acknowledged recovered.
    pub async fn reconnect(&self, client: &Client, session: &str) -> Result<(), LinkError> {
        let conn = Conn::open(client, session).await?;
        if let Some(r) = self.inner.reader.lock().expect("reader lock").take() {
            r.abort();
        }
        let _turn = self.inner.writing.lock().await;
        self.with(|l| l.reconnect());
        *self.inner.conn.lock().expect("conn lock") = conn;
        let reader = tokio::spawn(self.clone().read_loop());
        *self.inner.reader.lock().expect("reader lock") = Some(reader);
        drop(_turn);
        self.flush().await
    }

    /// The 9P connection the attachment is on now.
    pub fn client(&self) -> Client {
        self.conn().client
    }

    fn conn(&self) -> Conn {
        self.inner.conn.lock().expect("conn lock").clone()
    }

    async fn read_loop(self) {
        let Conn { client, file } = self.conn();
        let read = || client.send(Fcall::Tread { fid: file.fid, offset: 0, count: file.iounit });
        let mut next = read().await;
        loop {
            let got = match next {
                Ok(sent) => sent.reply().await,
                Err(e) => Err(e),
            };
            let bytes = match got {
                Ok(Fcall::Rread { data }) if !data.is_empty() => data,
                _ => break,
            };
            // The next read goes out before these bytes are applied, so the
            // daemon has it while they are (a big Welcome comes in a read
            // per megabyte).
            next = read().await;
            {
                let mut stash = self.inner.stash.lock().expect("stash lock");
                if stash.holding {
                    stash.bytes.extend_from_slice(&bytes);
                    continue;
                }
            }
            let bad = self.with(|l| l.receive(bytes).err());
            if let Some(e) = bad {
                self.refuse(e.to_string());
                break;
            }
            self.inner.changed.send_modify(|n| *n += 1);
            // Releases, answers and recoveries go out without waiting
            // for the user to flush.
            let me = self.clone();
            tokio::spawn(async move {
                let _ = me.flush().await;
            });
        }
        self.inner.changed.send_modify(|n| *n += 1);
    }

    /// The link, locked: hold it only briefly (the reader task waits).
    pub fn lock(&self) -> std::sync::MutexGuard<'_, Link> {
        self.inner.link.lock().expect("link lock")
    }

    /// Runs `f` on the link.
    pub fn with<R>(&self, f: impl FnOnce(&mut Link) -> R) -> R {
        f(&mut self.inner.link.lock().expect("link lock"))
    }

    /// Flushes the link and writes its frames. Returns the first refusal
    /// (a fenced append says `fenced: ...`); the rest are still written.
    pub async fn flush(&self) -> Result<(), LinkError> {
        if self.is_paused() {
            return Ok(());
        }
        let _turn = self.inner.writing.lock().await;
        // Checked again under the link's lock, which `pause` takes too: a
        // flush that raced a pause writes nothing made after it.
        let outgoing = self.with(|l| match self.is_paused() {
            true => Vec::new(),
            false => {
                l.flush();
                l.take_outgoing()
            }
        });
        // Framed here, with the link let go: typing goes on meanwhile.
        let frames: Vec<(Vec<u8>, bool)> = outgoing.into_iter().map(|(o, waits)| (o.into_frames(), waits)).collect();
        let Conn { client: c, file } = self.conn();
        let (fid, iounit) = (file.fid, file.iounit as usize);
        let mut waits = Vec::new();
        let mut first = Ok(());
        let mut frames = std::collections::VecDeque::from(frames);
        while let Some((bytes, proposal)) = frames.pop_front() {
            for piece in bytes.chunks(iounit.max(1)) {
                match c.send(Fcall::Twrite { fid, offset: 0, data: piece.to_vec() }).await {
                    Ok(sent) => waits.push((sent, proposal)),
                    Err(e) => {
                        // The connection is gone: this frame never arrived
                        // whole, nor did those after it. They wait for the
                        // next connection (`Link::reconnect` keeps the
                        // proposals among them).
                        frames.push_front((bytes, proposal));
                        self.with(|l| l.put_back(frames));
                        return Err(LinkError::Write(e));
                    }
                }
            }
        }
        for (sent, proposal) in waits {
            if proposal {
                let me = self.clone();
                tokio::spawn(async move {
                    if let Err(e) = sent.reply().await {
                        me.refuse(e.to_string());
                    }
                });
                continue;
            }
            if let Err(e) = sent.reply().await {
                self.refuse(e.to_string());
                if first.is_ok() {
                    first = Err(LinkError::Refused(e));
                }
            }
        }
        self.inner.changed.send_modify(|n| *n += 1);
        first
    }

    fn is_paused(&self) -> bool {
        self.inner.paused.load(std::sync::atomic::Ordering::SeqCst)
    }

    /// Stops applying what arrives and writing anything, as a UI that is
    /// stuck (or suspended) would; the connection stays up. For tests.
    #[cfg(feature = "test-support")]
    pub fn pause(&self) {
        self.inner.stash.lock().expect("stash lock").holding = true;
        self.with(|_| self.inner.paused.store(true, std::sync::atomic::Ordering::SeqCst));
    }

    /// Goes on after `pause` as a stuck leader that wakes up does: first
    /// it writes what it had (a fenced tail is refused), then it applies
    /// what arrived meanwhile. For tests.
    #[cfg(feature = "test-support")]
    pub async fn resume(&self) -> Result<(), LinkError> {
        self.inner.paused.store(false, std::sync::atomic::Ordering::SeqCst);
        let wrote = self.flush().await;
        let bad = {
            let mut stash = self.inner.stash.lock().expect("stash lock");
            let bytes = std::mem::take(&mut stash.bytes);
            stash.holding = false;
            self.with(|l| l.receive(bytes).err())
        };
        if let Some(e) = bad {
            return Err(LinkError::Frame(e.to_string()));
        }
        self.inner.changed.send_modify(|n| *n += 1);
        self.flush().await?;
        wrote
    }

    /// A subscription to changes: its value moves on after every frame
    /// read (entries, answers, lease changes, a Welcome), every flush, and
    /// when the connection ends, so an event loop can sleep on
    /// `changed()` instead of polling.
    pub fn changes(&self) -> watch::Receiver<u64> {
        self.inner.changed.subscribe()
    }

    /// Whether the connection's reader has stopped (the daemon hung up or
    /// sent what the link could not take).
    pub fn is_closed(&self) -> bool {
        self.inner.reader.lock().expect("reader lock").as_ref().is_none_or(|r| r.is_finished())
    }

    /// Waits until `cond` holds of the link, or `timeout` passes; says which.
    pub async fn wait_for(&self, timeout: Duration, cond: impl Fn(&Link) -> bool) -> bool {
        let mut rx = self.changes();
        let deadline = tokio::time::Instant::now() + timeout;
        loop {
            if self.with(|l| cond(l)) {
                return true;
            }
            match tokio::time::timeout_at(deadline, rx.changed()).await {
                Ok(Ok(())) => {}
                _ => return self.with(|l| cond(l)),
            }
        }
    }

    /// Writes the daemon refused lately, oldest first.
    pub fn refused(&self) -> Vec<String> {
        self.inner.refused.lock().expect("refused lock").iter().cloned().collect()
    }

    fn refuse(&self, why: String) {
        let mut refused = self.inner.refused.lock().expect("refused lock");
        if refused.len() == REFUSALS_KEPT {
            refused.pop_front();
        }
        refused.push_back(why);
    }

    /// Ends the attachment (clunks the fid: Detach, leases back).
    pub async fn close(&self) {
        if let Some(r) = self.inner.reader.lock().expect("reader lock").take() {
            r.abort();
        }
        let Conn { client, file } = self.conn();
        let _ = client.clunk(file.fid).await;
    }

    /// Takes the link out (to reconnect it elsewhere); the fid stays open
    /// until the connection goes.
    pub fn into_link(&self) -> Link {
        if let Some(r) = self.inner.reader.lock().expect("reader lock").take() {
            r.abort();
        }
        self.with(|l| std::mem::replace(l, Link::new(AttachmentKind::Tool, "")))
    }
}
