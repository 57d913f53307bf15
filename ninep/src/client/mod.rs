//! An async 9P2000 client: many requests in flight on one connection.
//!
//! `Client` is cheap to clone and may be used from many tasks at once: each
//! request takes a free tag, registers for its reply and writes its frame.
//! Replies are read by the requests waiting for them, with no task in
//! between: whichever finds the socket readable reads what has come, hands
//! every whole reply to whoever owns its tag, in whatever order the server
//! answers, and keeps its own. So a lone request is answered by the
//! read(2) of the task that sent it, as a plain socket client would be.
//! Dropping a request's future before its reply sends a Tflush
//! (flush(5)), and the tag is reused only after the Rflush, so a late
//! reply can never be taken for another request's.
//!
//! The transport is a stream socket: `dial` opens `unix!PATH` or
//! `tcp!HOST!PORT` as plan9port spells them.
//!
//! Split along its seams: `incoming` (the shared connection, replies
//! read and handed over), `outgoing` (a request's frame written, `Sent`),
//! `tags` (taken, waited on, flushed, freed).

mod incoming;
mod outgoing;
mod tags;

use crate::codec::{encode, parse_stats};
use crate::fcall::{Fcall, Msg, Qid, Stat, MAXWELEM, NOFID, NOTAG};
use crate::layer::Layer;
use crate::socket::{self, Filled, Incoming, Socket};
use crate::version::{iounit, MIN_MSIZE, VERSION};
use std::sync::atomic::{AtomicU32, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use incoming::Shared;
use outgoing::Outgoing;
pub use outgoing::Sent;
use outgoing::TagGuard;
use tags::Tags;

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
    /// Every tag is taken: 65535 requests are in flight on the connection.
    #[error("no free tags: 65535 requests in flight; wait for some to be answered")]
    NoFreeTags,
    #[error("bad address {0:?}: want unix!PATH or tcp!HOST!PORT")]
    BadAddress(String),
}

impl From<std::io::Error> for ClientError {
    fn from(e: std::io::Error) -> ClientError {
        ClientError::Io(e.to_string())
    }
}

type Result<T> = std::result::Result<T, ClientError>;

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

/// Proven auth fids kept at most, each for one uname and aname.
const PROVEN_KEPT: usize = 4;

/// `names` cut into the walks that carry them: at most [`MAXWELEM`]
/// names each, and no Twalk over `msize` bytes (sixteen long names can be
/// more than a small msize holds). One empty walk for no names.
fn walks<'a>(names: &'a [&'a str], msize: u32) -> Result<Vec<&'a [&'a str]>> {
    // size[4] type[1] tag[2] fid[4] newfid[4] nwname[2], then s[2] each.
    const HEAD: usize = 4 + 1 + 2 + 4 + 4 + 2;
    if names.is_empty() {
        return Ok(vec![&names[..0]]);
    }
    let mut out = Vec::new();
    let (mut start, mut size) = (0, HEAD);
    for (i, name) in names.iter().enumerate() {
        let n = 2 + name.len();
        if HEAD + n > msize as usize {
            return Err(ClientError::Protocol(format!(
                "a file name of {} bytes does not fit a Twalk of at most {msize} bytes",
                name.len()
            )));
        }
        if i > start && (i - start == MAXWELEM || size + n > msize as usize) {
            out.push(&names[start..i]);
            (start, size) = (i, HEAD);
        }
        size += n;
    }
    out.push(&names[start..]);
    Ok(out)
}

impl Client {
    /// Speaks Tversion on `stream`, a connected Unix or TCP socket.
    pub async fn handshake(stream: impl Socket, msize: u32) -> Result<Client> {
        Client::start(socket::register(stream, None)?, msize).await
    }

    /// Speaks Tversion through `layer` (TLS, its handshake done) over
    /// `stream`: the client reads and writes the socket itself, sealing
    /// and opening records as it goes.
    pub async fn handshake_through(stream: impl Socket, layer: Box<dyn Layer>, msize: u32) -> Result<Client> {
        Client::start(socket::register(stream, Some(layer))?, msize).await
    }

    async fn start(io: socket::Io, msize: u32) -> Result<Client> {
        let mut out = Vec::new();
        encode(&Msg { tag: NOTAG, body: Fcall::Tversion { msize, version: VERSION.into() } }, &mut out);
        socket::write_two(&io, &out, &[]).await?;
        let mut incoming = Incoming::default();
        let reply = loop {
            if let Some(msg) = incoming.next(msize).map_err(|e| ClientError::Protocol(e.to_string()))? {
                break msg;
            }
            let mut ready = io.readable().await?;
            match incoming.fill(&io, msize) {
                Ok(Filled::Got { drained }) if drained => ready.clear_ready(),
                Ok(Filled::Got { .. }) => {}
                Ok(Filled::End) => return Err(ClientError::Hangup),
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => ready.clear_ready(),
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e.into()),
            }
        };
        let msize = match reply {
            Msg { body: Fcall::Rversion { msize: m, version }, .. } if version == VERSION && m > msize => {
                return Err(ClientError::Protocol(format!("server agreed to msize {m}, over the {msize} asked for")))
            }
            Msg { body: Fcall::Rversion { msize: m, version }, .. } if version == VERSION && m < MIN_MSIZE => {
                // Too small to carry a message's header and any data.
                return Err(ClientError::Protocol(format!("server agreed to msize {m}, under the least, {MIN_MSIZE}")));
            }
            Msg { body: Fcall::Rversion { msize: m, version }, .. } if version == VERSION => m,
            Msg { body: Fcall::Rversion { version, .. }, .. } => {
                return Err(ClientError::Protocol(format!("server speaks {version:?}, not 9P2000")))
            }
            Msg { body: Fcall::Rerror { ename }, .. } => return Err(ClientError::Server(ename)),
            other => return Err(ClientError::Protocol(format!("unexpected reply to Tversion: {other:?}"))),
        };
        let shared = Arc::new(Shared {
            io,
            writing: Arc::new(tokio::sync::Mutex::new(Vec::new())),
            reading: Mutex::new(incoming),
            released: tokio::sync::Notify::new(),
            waiting: AtomicUsize::new(0),
            tags: Mutex::new(Tags::default()),
            free_fids: Mutex::new(Vec::new()),
            proven: Mutex::new(std::collections::HashMap::new()),
            next_fid: AtomicU32::new(0),
            msize,
            gone: tokio::sync::watch::Sender::new(false),
        });
        Ok(Client { shared })
    }

    /// Resolves when the connection has ended (the server hung up or the
    /// stream broke); at once if it already has. While it waits, it reads
    /// for every request on the connection, so the end is seen even when
    /// none is in flight.
    pub async fn closed(&self) {
        let mut gone = self.shared.gone.subscribe();
        while !*gone.borrow_and_update() {
            tokio::select! {
                biased;
                _ = gone.changed() => {}
                _ = self.shared.read_for(None) => {}
            }
        }
    }

    /// Whether the connection is known to have ended (as [`Client::closed`]
    /// would see at once).
    pub fn is_closed(&self) -> bool {
        *self.shared.gone.borrow()
    }

    /// The negotiated msize.
    pub fn msize(&self) -> u32 {
        self.shared.msize
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
        self.send_making(body, None).await
    }

    /// [`Client::send`] of a request that may make fid `made` on the
    /// server: given up, it is clunked once the request is over.
    async fn send_making(&self, body: Fcall, made: Option<u32>) -> Result<Sent> {
        let tag = self.shared.tags_anyway().take()?;
        let is_flush = matches!(body, Fcall::Tflush { .. });
        let on_wire = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let mut guard = TagGuard {
            shared: self.shared.clone(),
            tag,
            answered: false,
            is_flush,
            on_wire: on_wire.clone(),
            clunk_after: made,
        };
        if *self.shared.gone.borrow() {
            // Nothing more is read (the server hung up, or its framing
            // broke while the stream stays open): no reply can come.
            guard.answered = true;
            self.shared.tags_anyway().forget(tag);
            return Err(ClientError::Hangup);
        }
        let msg = Msg { tag, body };
        let sent = async {
            // Most often no other frame is going out: the turn is taken
            // without a wait's machinery.
            let turn = match self.shared.writing.clone().try_lock_owned() {
                Ok(turn) => turn,
                Err(_) => self.shared.writing.clone().lock_owned().await,
            };
            Outgoing::new(self.shared.clone(), turn, msg, on_wire).write().await
        };
        if let Err(e) = sent.await {
            guard.answered = true;
            self.shared.tags_anyway().forget(tag);
            use std::io::ErrorKind::{BrokenPipe, ConnectionReset};
            if matches!(e.kind(), BrokenPipe | ConnectionReset) {
                // The server hung up while nothing was being read.
                self.shared.end(&mut self.shared.reading.lock().unwrap_or_else(std::sync::PoisonError::into_inner));
                return Err(ClientError::Hangup);
            }
            return Err(e.into());
        }
        Ok(Sent { guard })
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
        self.attach_qid(uname, aname).await.map(|(fid, _)| fid)
    }

    /// [`Client::attach`], with the root's qid.
    pub async fn attach_qid(&self, uname: &str, aname: &str) -> Result<(u32, Qid)> {
        self.attach_with(NOFID, uname, aname).await
    }

    /// Tattach with `afid` (NOFID for none): the new root fid and its qid.
    async fn attach_with(&self, afid: u32, uname: &str, aname: &str) -> Result<(u32, Qid)> {
        let fid = self.new_fid();
        let t = Fcall::Tattach { fid, afid, uname: uname.into(), aname: aname.into() };
        // Given up meanwhile (a local client that hung up), the attach is
        // flushed and then fid clunked: a late Rattach made it.
        let r = async { self.send_making(t, Some(fid)).await?.reply().await }.await;
        if r.is_err() {
            self.shared.free_fids.lock().expect("fid lock").push(fid);
        }
        match r? {
            Fcall::Rattach { qid } => Ok((fid, qid)),
            r => Self::unexpected("Tattach", r),
        }
    }

    /// Attaches to `aname` as `uname` after proving who it is (9P's
    /// Tauth, see `srv::auth`): `prove` makes the proof of the challenge
    /// read from the auth fid, which is written back before the Tattach
    /// that names it; returns the root fid and its qid.
    ///
    /// The proven auth fid is kept for the connection's life, and the next
    /// attach as the same user to the same name names it at once: one
    /// round trip, not four. Should the server no longer take it (what it
    /// proved was revoked), it is clunked and a proof made anew.
    pub async fn attach_proving(
        &self,
        uname: &str,
        aname: &str,
        prove: impl FnOnce(&[u8]) -> Vec<u8>,
    ) -> Result<(u32, Qid)> {
        let key = (uname.to_string(), aname.to_string());
        let known = self.shared.proven.lock().expect("proven lock").get(&key).copied();
        if let Some(afid) = known {
            match self.attach_with(afid, uname, aname).await {
                Err(ClientError::Server(why)) => {
                    tracing::debug!(afid, %why, "a proven auth fid refused: proving anew");
                    let forgotten = {
                        let mut proven = self.shared.proven.lock().expect("proven lock");
                        proven.get(&key) == Some(&afid) && proven.remove(&key).is_some()
                    };
                    if forgotten {
                        // Clunked before a new Tauth, which the server
                        // might otherwise refuse for auth fids open.
                        let _ = self.clunk(afid).await;
                    }
                }
                attached => return attached,
            }
        }
        let afid = self.new_fid();
        let t = Fcall::Tauth { afid, uname: uname.into(), aname: aname.into() };
        let r = async { self.send_making(t, Some(afid)).await?.reply().await }.await;
        match r {
            Ok(Fcall::Rauth { .. }) => {}
            Ok(r) => {
                let _ = self.clunk(afid).await;
                return Self::unexpected("Tauth", r);
            }
            Err(e) => {
                self.shared.free_fids.lock().expect("fid lock").push(afid);
                return Err(e);
            }
        }
        // The auth fid is clunked on a task if this ends before it is
        // kept: nobody waits for that round trip.
        let mut held = ClunkOnDrop { client: self.clone(), fid: afid };
        let challenge = self.read(afid, 0, 4096).await?;
        let proof = prove(&challenge);
        self.write(afid, 0, &proof).await?;
        let attached = self.attach_with(afid, uname, aname).await?;
        let mut proven = self.shared.proven.lock().expect("proven lock");
        // Kept, unless another attach meanwhile kept its own first, or as
        // many are kept as may be: a server allows a few auth fids open
        // (apexd sixteen), and local clients may attach under any name.
        if proven.len() < PROVEN_KEPT {
            if let std::collections::hash_map::Entry::Vacant(slot) = proven.entry(key) {
                slot.insert(afid);
                held.fid = NOFID;
            }
        }
        Ok(attached)
    }

    /// Walks from `fid` through `names` (any number: walks of at most 16
    /// names each, and each within the msize) to a new fid.
    pub async fn walk(&self, fid: u32, names: &[&str]) -> Result<(u32, Vec<Qid>)> {
        let chunks = walks(names, self.shared.msize)?;
        let newfid = self.new_fid();
        let mut qids = Vec::new();
        let mut from = fid;
        for chunk in chunks {
            let wnames = chunk.iter().map(|s| s.to_string()).collect();
            // Given up meanwhile (an interrupt, a timeout), the walk is
            // flushed and then newfid clunked: a late Rwalk made it.
            let r = async {
                self.send_making(Fcall::Twalk { fid: from, newfid, wnames }, Some(newfid)).await?.reply().await
            }
            .await;
            match r {
                Ok(Fcall::Rwalk { wqids }) if wqids.len() == chunk.len() => qids.extend(wqids),
                Ok(Fcall::Rwalk { wqids }) if wqids.len() < chunk.len() => {
                    self.abandon_walk(from, newfid).await;
                    let at = qids.len() + wqids.len();
                    return Err(ClientError::Server(format!("file does not exist: {}", names[..=at].join("/"))));
                }
                // More qids than names, or no Rwalk: the server is broken,
                // and may have made newfid; it is clunked, never left.
                Ok(r) => {
                    let _ = self.clunk(newfid).await;
                    return Self::unexpected("Twalk", r);
                }
                Err(e) => {
                    self.abandon_walk(from, newfid).await;
                    return Err(e);
                }
            }
            from = newfid;
        }
        Ok((newfid, qids))
    }

    /// One Twalk of the names as given (at most [`MAXWELEM`], within the
    /// msize), answered as walk(5) answers: the qids of the names walked,
    /// and the new fid when all of them were. A forwarder's walk: another
    /// client's request, passed on as it came.
    pub async fn walk_once(&self, fid: u32, wnames: Vec<String>) -> Result<(Vec<Qid>, Option<u32>)> {
        let newfid = self.new_fid();
        let asked = wnames.len();
        let r = async { self.send_making(Fcall::Twalk { fid, newfid, wnames }, Some(newfid)).await?.reply().await };
        match r.await {
            Ok(Fcall::Rwalk { wqids }) if wqids.len() == asked => Ok((wqids, Some(newfid))),
            Ok(Fcall::Rwalk { wqids }) if wqids.len() < asked => {
                self.shared.free_fids.lock().expect("fid lock").push(newfid);
                Ok((wqids, None))
            }
            Ok(r) => {
                let _ = self.clunk(newfid).await;
                Self::unexpected("Twalk", r)
            }
            Err(e) => {
                self.shared.free_fids.lock().expect("fid lock").push(newfid);
                Err(e)
            }
        }
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

    /// Reads `file` whole as [`Client::read_all`] does, handing each
    /// reply's bytes to `each` in order, with up to `depth` Treads in
    /// flight at the offsets that follow, so the server prepares (and a
    /// TLS link seals) the next reply while this one is taken in, and a
    /// long link carries `depth` replies a round trip. Only for a file
    /// read at its offsets (a body, a file on disk), never a stream such
    /// as an event file, where a read sent ahead would take what a later
    /// one was for. A short reply sets aside the replies to reads sent
    /// past it, and reading goes on from where it ended. Returns the
    /// count of bytes read.
    pub async fn read_ahead(
        &self,
        file: &File,
        depth: usize,
        mut each: impl FnMut(&[u8]) -> std::io::Result<()>,
    ) -> Result<u64> {
        let count = file.iounit.min(iounit(self.shared.msize));
        let (mut done, mut next) = (0u64, 0u64);
        let mut flight = std::collections::VecDeque::with_capacity(depth);
        let mut ended = false;
        loop {
            while !ended && flight.len() < depth.max(1) {
                flight.push_back(self.send(Fcall::Tread { fid: file.fid, offset: next, count }).await?);
                next += u64::from(count);
            }
            let Some(sent) = flight.pop_front() else { return Ok(done) };
            if ended {
                // Past the end: what it says (nothing, or an error a
                // server gives past the end) is set aside.
                let _ = sent.reply().await;
                continue;
            }
            let data = match sent.reply().await? {
                Fcall::Rread { data } => data,
                r => return Self::unexpected("Tread", r),
            };
            done += data.len() as u64;
            each(&data)?;
            if data.is_empty() {
                ended = true;
            } else if data.len() < count as usize {
                // What was sent ahead asked for the wrong offsets.
                for sent in flight.drain(..) {
                    let _ = sent.reply().await;
                }
                next = done;
            }
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
            Fcall::Rstat { stat } => Ok(*stat),
            r => Self::unexpected("Tstat", r),
        }
    }

    pub async fn wstat(&self, fid: u32, stat: Stat) -> Result<()> {
        match self.rpc(Fcall::Twstat { fid, stat: Box::new(stat) }).await? {
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

/// A fid clunked on a task when its holder goes (none for NOFID).
struct ClunkOnDrop {
    client: Client,
    fid: u32,
}

impl Drop for ClunkOnDrop {
    fn drop(&mut self) {
        let fid = self.fid;
        if fid == NOFID {
            return;
        }
        let Ok(rt) = tokio::runtime::Handle::try_current() else { return };
        let client = self.client.clone();
        rt.spawn(async move {
            let _ = client.clunk(fid).await;
        });
    }
}

#[cfg(test)]
mod tests {
    use super::walks;

    /// Walks carry at most sixteen names and fit the msize: forty names of
    /// 200 bytes under an msize of 1,024 go four to a walk; a name no
    /// Twalk can carry is refused before anything is sent.
    #[test]
    fn walks_hold_sixteen_names_and_fit_the_msize() {
        let long = "n".repeat(200);
        let names: Vec<&str> = (0..40).map(|_| long.as_str()).collect();
        let w = walks(&names, 1024).unwrap();
        assert_eq!(w.iter().map(|c| c.len()).collect::<Vec<_>>(), [4; 10]);
        for c in &w {
            assert!(17 + c.iter().map(|n| 2 + n.len()).sum::<usize>() <= 1024);
        }
        let short: Vec<&str> = (0..40).map(|_| "a").collect();
        assert_eq!(walks(&short, 8192).unwrap().iter().map(|c| c.len()).collect::<Vec<_>>(), [16, 16, 8]);
        assert!(walks(&[long.as_str()], 100).is_err());
        assert_eq!(walks(&[], 100).unwrap(), [&[] as &[&str]]);
    }
}
