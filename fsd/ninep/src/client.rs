//! An async 9P2000 client: many requests in flight on one connection.
//!
//! `Client` is cheap to clone and may be used from many tasks at once: each
//! request takes a free tag, registers for its reply and writes its frame;
//! one reader task hands every reply to whoever owns its tag, in whatever
//! order the server answers. Dropping a request's future before its reply
//! sends a Tflush (flush(5)), and the tag is reused only after the Rflush,
//! so a late reply can never be taken for another request's.
//!
//! The transport is any byte stream: `dial` opens `unix!PATH` or
//! `tcp!HOST!PORT` as plan9port spells them.

use crate::codec::{check, data_head, encode, encode_frame, parse, parse_stats, with_data, LARGE};
use crate::fcall::{Fcall, Msg, Qid, Stat, MAXWELEM, NOFID, NOTAG};
use crate::io::write_two;
use crate::version::{iounit, VERSION};
use std::collections::{BTreeSet, HashMap};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::sync::oneshot;

/// What a 9P call can fail with.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ClientError {
    /// The server answered Rerror.
    #[error("{0}")]
    Server(String),
    #[error("connection closed")]
    Hangup,
    #[error("i/o: {0}")]
    Io(String),
    #[error("protocol: {0}")]
    Protocol(String),
    #[error("bad address {0:?}: want unix!PATH or tcp!HOST!PORT")]
    BadAddress(String),
}

impl From<std::io::Error> for ClientError {
    fn from(e: std::io::Error) -> ClientError {
        ClientError::Io(e.to_string())
    }
}

type Result<T> = std::result::Result<T, ClientError>;
type Writer = tokio::sync::Mutex<Box<dyn AsyncWrite + Send + Unpin>>;

struct Shared {
    writer: Writer,
    /// Who waits for each tag's reply.
    pending: Mutex<HashMap<u16, oneshot::Sender<Fcall>>>,
    /// Tags in use, including flushed ones awaiting their Rflush.
    tags: Mutex<BTreeSet<u16>>,
    free_fids: Mutex<Vec<u32>>,
    next_fid: AtomicU32,
    msize: u32,
    /// Becomes true (or its sender drops) when the connection has ended.
    gone: tokio::sync::watch::Receiver<bool>,
    /// Dropped with the last `Client`: tells the reader task to stop, so
    /// the connection closes (the read half would keep it open).
    _closing: oneshot::Sender<()>,
}

/// A connection to a 9P2000 server.
#[derive(Clone)]
pub struct Client {
    shared: Arc<Shared>,
}

/// An open file: its fid and how much one read or write may carry.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct File {
    pub fid: u32,
    pub qid: Qid,
    pub iounit: u32,
}

/// Opens a plan9port-style address: `unix!PATH` or `tcp!HOST!PORT`.
pub async fn dial(addr: &str, msize: u32) -> Result<Client> {
    let bad = || ClientError::BadAddress(addr.to_string());
    let parts: Vec<&str> = addr.split('!').collect();
    match parts.as_slice() {
        ["unix", path] => {
            let stream = tokio::net::UnixStream::connect(path).await?;
            crate::io::room_for(std::os::fd::AsRawFd::as_raw_fd(&stream), msize);
            Client::handshake(stream, msize).await
        }
        ["tcp", host, port] => {
            let port: u16 = port.parse().map_err(|_| bad())?;
            Client::handshake(tokio::net::TcpStream::connect((*host, port)).await?, msize).await
        }
        _ => Err(bad()),
    }
}

async fn read_frame(r: &mut (impl AsyncRead + Unpin), buf: &mut Vec<u8>, msize: u32) -> Result<Option<Msg>> {
    loop {
        match check(buf, msize) {
            Ok(Some(n)) => {
                let msg = parse(&buf[..n]).map_err(|e| ClientError::Protocol(e.to_string()));
                buf.drain(..n);
                return msg.map(Some);
            }
            Ok(None) => {}
            Err(e) => return Err(ClientError::Protocol(e.to_string())),
        }
        if let Some((head, count)) = data_head(buf).filter(|(head, _)| buf.len() >= *head) {
            // A large Rread: its data is read into a buffer of its own,
            // which becomes the reply's, not copied out of this one.
            let mut data = Vec::with_capacity(count);
            data.extend_from_slice(&buf[head..]);
            let head: Vec<u8> = buf.drain(..).take(head).collect();
            while data.len() < count {
                // Never past this frame.
                let left = (count - data.len()) as u64;
                if (&mut *r).take(left).read_buf(&mut data).await? == 0 {
                    return Ok(None);
                }
            }
            return with_data(&head, data).map(Some).map_err(|e| ClientError::Protocol(e.to_string()));
        }
        // Read straight onto the buffer, room for the whole frame once its
        // size is known, so a large Rread is not copied on the way in.
        let want = match buf.get(..4) {
            Some(size) => (u32::from_le_bytes(size.try_into().expect("4 bytes")) as usize).min(msize as usize),
            None => 0,
        };
        buf.reserve(want.saturating_sub(buf.len()).max(64 * 1024));
        if r.read_buf(buf).await? == 0 {
            return Ok(None);
        }
    }
}

/// Frees a tag when its request ends; if the request ends without a reply
/// (its future was dropped), flushes it first.
/// A request on the wire, waiting for its reply.
pub struct Sent {
    guard: TagGuard,
    rx: oneshot::Receiver<Fcall>,
}

impl Sent {
    /// The reply; Rerror becomes `ClientError::Server`.
    pub async fn reply(mut self) -> Result<Fcall> {
        let reply = (&mut self.rx).await;
        self.guard.answered = true;
        match reply {
            Ok(Fcall::Rerror { ename }) => Err(ClientError::Server(ename)),
            Ok(r) => Ok(r),
            Err(_) => Err(ClientError::Hangup),
        }
    }
}

struct TagGuard {
    shared: Arc<Shared>,
    tag: u16,
    answered: bool,
}

impl Drop for TagGuard {
    fn drop(&mut self) {
        let shared = self.shared.clone();
        let tag = self.tag;
        if self.answered {
            shared.tags.lock().expect("tag lock").remove(&tag);
            return;
        }
        shared.pending.lock().expect("pending lock").remove(&tag);
        // The reply may still come: keep the tag taken until the Rflush.
        if let Ok(rt) = tokio::runtime::Handle::try_current() {
            rt.spawn(async move {
                let client = Client { shared: shared.clone() };
                let _ = client.rpc(Fcall::Tflush { oldtag: tag }).await;
                shared.tags.lock().expect("tag lock").remove(&tag);
            });
        }
    }
}

impl Client {
    /// Speaks Tversion on `stream` and starts the reader task.
    pub async fn handshake<S>(stream: S, msize: u32) -> Result<Client>
    where
        S: AsyncRead + AsyncWrite + Send + 'static,
    {
        let (mut r, mut w) = tokio::io::split(stream);
        let mut out = Vec::new();
        encode(&Msg { tag: NOTAG, body: Fcall::Tversion { msize, version: VERSION.into() } }, &mut out);
        w.write_all(&out).await?;
        let mut buf = Vec::new();
        let msize = match read_frame(&mut r, &mut buf, msize).await? {
            Some(Msg { body: Fcall::Rversion { msize: m, version }, .. }) if version == VERSION && m <= msize => m,
            Some(Msg { body: Fcall::Rversion { version, .. }, .. }) => {
                return Err(ClientError::Protocol(format!("server speaks {version:?}, not 9P2000")))
            }
            Some(Msg { body: Fcall::Rerror { ename }, .. }) => return Err(ClientError::Server(ename)),
            Some(other) => return Err(ClientError::Protocol(format!("unexpected reply to Tversion: {other:?}"))),
            None => return Err(ClientError::Hangup),
        };
        let (closing, mut closed) = oneshot::channel::<()>();
        let (gone_tx, gone) = tokio::sync::watch::channel(false);
        let shared = Arc::new(Shared {
            _closing: closing,
            writer: tokio::sync::Mutex::new(Box::new(w)),
            pending: Mutex::new(HashMap::new()),
            tags: Mutex::new(BTreeSet::new()),
            free_fids: Mutex::new(Vec::new()),
            next_fid: AtomicU32::new(0),
            msize,
            gone,
        });
        let reader = Arc::downgrade(&shared);
        tokio::spawn(async move {
            loop {
                let msg = tokio::select! {
                    got = read_frame(&mut r, &mut buf, msize) => match got {
                        Ok(Some(msg)) => msg,
                        _ => break,
                    },
                    _ = &mut closed => break,
                };
                let Some(shared) = reader.upgrade() else { break };
                let waiter = shared.pending.lock().expect("pending lock").remove(&msg.tag);
                if let Some(w) = waiter {
                    let _ = w.send(msg.body);
                }
            }
            // Hang-up: said first, then every waiter's sender drops, and it
            // sees Hangup; a request registered after the clearing sees the
            // hang-up said (`send`), so none waits for a reply forever.
            let _ = gone_tx.send(true);
            if let Some(shared) = reader.upgrade() {
                shared.pending.lock().expect("pending lock").clear();
            }
        });
        Ok(Client { shared })
    }

    /// Resolves when the connection has ended (the server hung up or the
    /// stream broke); at once if it already has.
    pub async fn closed(&self) {
        let mut gone = self.shared.gone.clone();
        let _ = gone.wait_for(|g| *g).await;
    }

    /// The negotiated msize.
    pub fn msize(&self) -> u32 {
        self.shared.msize
    }

    fn take_tag(&self) -> Result<u16> {
        let mut tags = self.shared.tags.lock().expect("tag lock");
        let tag = (0..NOTAG).find(|t| !tags.contains(t)).ok_or(ClientError::Protocol("no free tags".into()))?;
        tags.insert(tag);
        Ok(tag)
    }

    /// Sends one request and waits for its reply; Rerror becomes
    /// `ClientError::Server`.
    pub async fn rpc(&self, body: Fcall) -> Result<Fcall> {
        self.send(body).await?.reply().await
    }

    /// Sends one request and returns once it is written, so requests sent
    /// one after another reach the server in that order while their
    /// replies are awaited apart. Dropping the `Sent` unanswered flushes it.
    pub async fn send(&self, body: Fcall) -> Result<Sent> {
        let tag = self.take_tag()?;
        let mut guard = TagGuard { shared: self.shared.clone(), tag, answered: false };
        let (tx, rx) = oneshot::channel();
        self.shared.pending.lock().expect("pending lock").insert(tag, tx);
        if *self.shared.gone.borrow() {
            // The reader is gone (the server hung up, or its framing
            // broke while the stream stays open): no reply can come.
            guard.answered = true;
            self.shared.pending.lock().expect("pending lock").remove(&tag);
            return Err(ClientError::Hangup);
        }
        let mut out = Vec::new();
        let msg = Msg { tag, body };
        let bulk = encode_frame(&msg, &mut out, LARGE);
        let sent = async {
            let mut w = self.shared.writer.lock().await;
            write_two(&mut *w, &out, bulk.unwrap_or_default()).await
        };
        if let Err(e) = sent.await {
            guard.answered = true;
            self.shared.pending.lock().expect("pending lock").remove(&tag);
            return Err(e.into());
        }
        Ok(Sent { guard, rx })
    }

    fn new_fid(&self) -> u32 {
        match self.shared.free_fids.lock().expect("fid lock").pop() {
            Some(f) => f,
            None => self.shared.next_fid.fetch_add(1, Ordering::Relaxed),
        }
    }

    fn unexpected<T>(what: &str, r: Fcall) -> Result<T> {
        Err(ClientError::Protocol(format!("unexpected reply to {what}: {r:?}")))
    }

    /// Attaches to `aname` as `uname`; returns the root fid.
    pub async fn attach(&self, uname: &str, aname: &str) -> Result<u32> {
        let fid = self.new_fid();
        let t = Fcall::Tattach { fid, afid: NOFID, uname: uname.into(), aname: aname.into() };
        match self.rpc(t).await? {
            Fcall::Rattach { .. } => Ok(fid),
            r => Self::unexpected("Tattach", r),
        }
    }

    /// Walks from `fid` through `names` (any number: walks of at most 16
    /// names each) to a new fid.
    pub async fn walk(&self, fid: u32, names: &[&str]) -> Result<(u32, Vec<Qid>)> {
        let newfid = self.new_fid();
        let mut qids = Vec::new();
        let mut from = fid;
        let chunks: Vec<&[&str]> = if names.is_empty() { vec![&[][..]] } else { names.chunks(MAXWELEM).collect() };
        for chunk in chunks {
            let wnames = chunk.iter().map(|s| s.to_string()).collect();
            let r = self.rpc(Fcall::Twalk { fid: from, newfid, wnames }).await;
            match r {
                Ok(Fcall::Rwalk { wqids }) if wqids.len() == chunk.len() => qids.extend(wqids),
                Ok(Fcall::Rwalk { wqids }) => {
                    self.abandon_walk(from, newfid).await;
                    let at = qids.len() + wqids.len();
                    return Err(ClientError::Server(format!("file does not exist: {}", names[..=at].join("/"))));
                }
                Ok(r) => return Self::unexpected("Twalk", r),
                Err(e) => {
                    self.abandon_walk(from, newfid).await;
                    return Err(e);
                }
            }
            from = newfid;
        }
        Ok((newfid, qids))
    }

    /// After a failed walk step: a newfid that already exists (a later
    /// step walked it onto itself) is clunked; one never made is freed.
    async fn abandon_walk(&self, from: u32, newfid: u32) {
        if from == newfid {
            let _ = self.clunk(newfid).await;
        } else {
            self.shared.free_fids.lock().expect("fid lock").push(newfid);
        }
    }

    /// Opens `fid` with `mode` (OREAD, OWRITE, ORDWR, | OTRUNC).
    pub async fn open(&self, fid: u32, mode: u8) -> Result<File> {
        match self.rpc(Fcall::Topen { fid, mode }).await? {
            Fcall::Ropen { qid, iounit: n } => Ok(File { fid, qid, iounit: self.io(n) }),
            r => Self::unexpected("Topen", r),
        }
    }

    /// Creates `name` in the directory `fid`, which becomes the new file.
    pub async fn create(&self, fid: u32, name: &str, perm: u32, mode: u8) -> Result<File> {
        match self.rpc(Fcall::Tcreate { fid, name: name.into(), perm, mode }).await? {
            Fcall::Rcreate { qid, iounit: n } => Ok(File { fid, qid, iounit: self.io(n) }),
            r => Self::unexpected("Tcreate", r),
        }
    }

    /// The iounit to use: the server's, or msize - 24 when it says 0.
    fn io(&self, n: u32) -> u32 {
        match n {
            0 => iounit(self.shared.msize),
            n => n.min(iounit(self.shared.msize)),
        }
    }

    /// One Tread.
    pub async fn read(&self, fid: u32, offset: u64, count: u32) -> Result<Vec<u8>> {
        let count = count.min(iounit(self.shared.msize));
        match self.rpc(Fcall::Tread { fid, offset, count }).await? {
            Fcall::Rread { data } => Ok(data),
            r => Self::unexpected("Tread", r),
        }
    }

    /// One Twrite; returns the count the server took.
    pub async fn write(&self, fid: u32, offset: u64, data: &[u8]) -> Result<u32> {
        match self.rpc(Fcall::Twrite { fid, offset, data: data.to_vec() }).await? {
            Fcall::Rwrite { count } => Ok(count),
            r => Self::unexpected("Twrite", r),
        }
    }

    /// Reads `file` from offset 0 until a 0-byte read, as `9p read` does.
    pub async fn read_all(&self, file: &File) -> Result<Vec<u8>> {
        let mut out = Vec::new();
        loop {
            let chunk = self.read(file.fid, out.len() as u64, file.iounit).await?;
            if chunk.is_empty() {
                return Ok(out);
            }
            out.extend_from_slice(&chunk);
        }
    }

    /// Writes all of `data` from `offset`, one Twrite per iounit.
    pub async fn write_all(&self, file: &File, mut offset: u64, data: &[u8]) -> Result<()> {
        for chunk in data.chunks(file.iounit.max(1) as usize) {
            let n = self.write(file.fid, offset, chunk).await?;
            if n as usize != chunk.len() {
                return Err(ClientError::Protocol(format!("short write: {n} of {} bytes", chunk.len())));
            }
            offset += n as u64;
        }
        Ok(())
    }

    /// The directory entries of an open directory, read to the end.
    pub async fn read_dir(&self, file: &File) -> Result<Vec<Stat>> {
        let mut out = Vec::new();
        let mut offset = 0u64;
        loop {
            let chunk = self.read(file.fid, offset, file.iounit).await?;
            if chunk.is_empty() {
                return Ok(out);
            }
            offset += chunk.len() as u64;
            out.extend(parse_stats(&chunk).map_err(|e| ClientError::Protocol(e.to_string()))?);
        }
    }

    pub async fn stat(&self, fid: u32) -> Result<Stat> {
        match self.rpc(Fcall::Tstat { fid }).await? {
            Fcall::Rstat { stat } => Ok(stat),
            r => Self::unexpected("Tstat", r),
        }
    }

    pub async fn wstat(&self, fid: u32, stat: Stat) -> Result<()> {
        match self.rpc(Fcall::Twstat { fid, stat }).await? {
            Fcall::Rwstat => Ok(()),
            r => Self::unexpected("Twstat", r),
        }
    }

    /// Forgets `fid`; it may be reused afterwards.
    pub async fn clunk(&self, fid: u32) -> Result<()> {
        let r = self.rpc(Fcall::Tclunk { fid }).await;
        // Clunk frees the fid whatever the reply (clunk(5)).
        self.shared.free_fids.lock().expect("fid lock").push(fid);
        match r? {
            Fcall::Rclunk => Ok(()),
            r => Self::unexpected("Tclunk", r),
        }
    }

    pub async fn remove(&self, fid: u32) -> Result<()> {
        let r = self.rpc(Fcall::Tremove { fid }).await;
        self.shared.free_fids.lock().expect("fid lock").push(fid);
        match r? {
            Fcall::Rremove => Ok(()),
            r => Self::unexpected("Tremove", r),
        }
    }

    /// Walks from `root` to `path` (slash-separated) and opens it.
    pub async fn open_path(&self, root: u32, path: &str, mode: u8) -> Result<File> {
        let names: Vec<&str> = path.split('/').filter(|s| !s.is_empty()).collect();
        let (fid, _) = self.walk(root, &names).await?;
        match self.open(fid, mode).await {
            Ok(f) => Ok(f),
            Err(e) => {
                let _ = self.clunk(fid).await;
                Err(e)
            }
        }
    }
}
