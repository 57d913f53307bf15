//! The server side of a 9P2000 connection: version, tags, fids, flush.
//!
//! [`serve_conn`] runs one connection over any byte stream and leaves what
//! files mean to a [`Serve`] implementation, as acme's `fsys.c` leaves it
//! to `xfid.c`. It owns the protocol bookkeeping:
//!
//! - Tversion negotiates the dialect and msize (version(5)); a second one
//!   aborts every outstanding request and clunks every fid.
//! - Every other request runs as its own task, so a blocked read never
//!   holds up the next request; replies go out in whatever order they
//!   finish.
//! - Tflush (flush(5)): a flushed Tread is cancelled and, as far as the
//!   client can tell, never happened; any other request is let finish, so
//!   its reply (say the Rwrite of a write already sequenced) precedes the
//!   Rflush, which waits for it apart from the connection: the other
//!   requests are answered meanwhile. `Serve::read` must therefore be
//!   cancel-safe, and a request that is let finish must finish (the
//!   daemon bounds a routed proposal's wait by the lease deadline).
//! - The fid table: attach and walk create fids, clunk and remove end them,
//!   "fid in use" / "unknown fid" are answered here, and so are reads and
//!   writes on a fid not opened for them, and walks or opens of an open
//!   fid. When the client hangs up, every fid is clunked.
//! - A malformed message with a tag gets an Rerror and the connection goes
//!   on; broken framing closes it.
//! - A request whose `Serve` call panics is answered with an Rerror that
//!   says so, and its tag is free again: a bug in one request never leaves
//!   its client waiting forever.

use crate::codec::{check, data_head, encode_frame, parse, with_data, LARGE};
use crate::error::FrameError;
use crate::fcall::{Fcall, Msg, Qid, Stat, NOTAG, OEXEC, ORDWR, OREAD, OWRITE};
use crate::io::{write_two, HangUp};
use crate::version::{iounit, negotiate, Negotiated, VERSION};
use std::collections::HashMap;
use std::future::Future;
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::sync::{Arc, Mutex};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

/// A 9P error reply's text.
pub type Error = String;
pub type Result<T> = std::result::Result<T, Error>;

/// What the files of a 9P server mean. `Fid` is whatever a fid refers to:
/// the connection keeps one per fid and hands it to each call.
pub trait Serve: Send + Sync + 'static {
    type Fid: Clone + Send + Sync + 'static;

    /// Tattach: the root named by `aname`.
    fn attach(&self, uname: &str, aname: &str) -> impl Future<Output = Result<(Qid, Self::Fid)>> + Send;
    /// Twalk: the qids of the names walked, and the fid's new state if all
    /// of them were (walk(5): a partial walk leaves newfid unset; an error
    /// on the first name is an Rerror).
    fn walk(
        &self,
        fid: &Self::Fid,
        names: &[String],
    ) -> impl Future<Output = Result<(Vec<Qid>, Option<Self::Fid>)>> + Send;
    /// Topen: the qid and the fid's state once open. `iounit` is the
    /// connection's.
    fn open(&self, fid: &Self::Fid, mode: u8) -> impl Future<Output = Result<(Qid, Self::Fid)>> + Send;
    /// Tcreate: the new file's qid and the fid's state, open on it.
    fn create(
        &self,
        fid: &Self::Fid,
        name: &str,
        perm: u32,
        mode: u8,
    ) -> impl Future<Output = Result<(Qid, Self::Fid)>> + Send;
    /// Tread: at most `count` bytes. Must be cancel-safe (a Tflush drops it).
    fn read(&self, fid: &Self::Fid, offset: u64, count: u32) -> impl Future<Output = Result<Vec<u8>>> + Send;
    /// Twrite: how many bytes were taken.
    fn write(&self, fid: &Self::Fid, offset: u64, data: Vec<u8>) -> impl Future<Output = Result<u32>> + Send;
    /// Tclunk, or the reset of a Tversion.
    fn clunk(&self, fid: Self::Fid) -> impl Future<Output = ()> + Send;
    /// The fid's connection ended without a clunk; by default the same.
    fn hangup(&self, fid: Self::Fid) -> impl Future<Output = ()> + Send {
        self.clunk(fid)
    }
    /// Tremove (the fid is clunked whatever the outcome).
    fn remove(&self, fid: Self::Fid) -> impl Future<Output = Result<()>> + Send;
    fn stat(&self, fid: &Self::Fid) -> impl Future<Output = Result<Stat>> + Send;
    fn wstat(&self, fid: &Self::Fid, stat: Stat) -> impl Future<Output = Result<()>> + Send;
}

/// A request being answered in a task of its own.
struct InFlight {
    task: JoinHandle<()>,
    cancelable: bool,
    /// Set by a Tflush of the request; none for a request that never
    /// asks (`flushed`): a read is aborted instead, a stat never waits.
    flushed: Option<Arc<Signal>>,
    /// Set once the request's reply is queued (its tag is free after), or
    /// its task is gone without one (aborted by a Tversion or hang-up).
    done: Arc<Signal>,
}

/// A flag set once, which tasks may wait for. Every request that may be
/// let finish after a Tflush gets one (a watch channel cost a good part of
/// a small request's time).
#[derive(Default)]
struct Signal {
    set: std::sync::atomic::AtomicBool,
    notify: tokio::sync::Notify,
}

impl Signal {
    fn raise(&self) {
        self.set.store(true, std::sync::atomic::Ordering::Release);
        self.notify.notify_waiters();
    }

    async fn wait(&self) {
        loop {
            let notified = self.notify.notified();
            tokio::pin!(notified);
            // Registered before the check, so a raise in between is heard.
            notified.as_mut().enable();
            if self.set.load(std::sync::atomic::Ordering::Acquire) {
                return;
            }
            notified.await;
        }
    }
}

/// Raises its signal when dropped: a request's task that is aborted (by a
/// Tversion or a hang-up) still frees whoever waits for its reply.
struct RaiseOnDrop(Arc<Signal>);

impl Drop for RaiseOnDrop {
    fn drop(&mut self) {
        self.0.raise();
    }
}

tokio::task_local! {
    /// The request running here was flushed: raised by its Tflush.
    static FLUSHED: Arc<Signal>;
}

/// Resolves once a Tflush names the request this runs in: a request that
/// is let finish (not a read) may use it to give up what it waits for, if
/// it can still do so as if it never happened, and end early. Outside a
/// request, or with no Tflush, it never resolves.
pub async fn flushed() {
    match FLUSHED.try_with(|f| f.clone()) {
        Ok(f) => f.wait().await,
        Err(_) => std::future::pending::<()>().await,
    }
}

/// Per-connection settings.
#[derive(Clone, Debug)]
pub struct Config {
    /// The largest msize offered.
    pub msize: u32,
    /// The text of Tauth's Rerror.
    pub no_auth: String,
}

impl Default for Config {
    fn default() -> Config {
        Config { msize: crate::version::DEFAULT_MSIZE, no_auth: "authentication not required".into() }
    }
}

/// A fid's state and, once opened, the mode it was opened with.
type Slot<F> = (F, Option<u8>);

/// A connection's table of the fids or tags its client picks: seeded per
/// process, as SipHash is, at a fraction of its cost per lookup.
type Table<K, V> = HashMap<K, V, foldhash::fast::RandomState>;

struct Conn<S: Serve> {
    serve: Arc<S>,
    fids: Mutex<Table<u32, Slot<S::Fid>>>,
    /// Requests in flight: their task, whether a Tflush may cancel it,
    /// and how one that is let finish hears it was flushed.
    tasks: Mutex<Table<u16, InFlight>>,
    /// Resets so far (Tversions, and the hang-up): a reply made for a
    /// request of an earlier one is dropped, its tag being free again.
    generation: std::sync::atomic::AtomicU64,
    out: mpsc::UnboundedSender<Msg>,
    /// Replies sent through `out` and not yet taken out: while there are
    /// none, the io loop need not look in the channel before a reply it
    /// makes itself.
    queued: std::sync::atomic::AtomicUsize,
    msize: std::sync::atomic::AtomicU32,
    /// The Unix socket, when the connection is one: `Topenfd` passes
    /// descriptors over it.
    socket: Option<RawFd>,
    /// Descriptors to pass right after the `Ropenfd` of their tag.
    passing: Mutex<Table<u16, OwnedFd>>,
}

impl<S: Serve> Conn<S> {
    fn reply(&self, tag: u16, body: Fcall) {
        // The writer is gone only when the connection is: nothing to do.
        // Counted before it is sent, both under the task lock when a task
        // replies: whoever takes that lock next sees it counted.
        self.queued.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        let _ = self.out.send(Msg { tag, body });
    }

    /// Queues `body` unless the connection was reset since `generation`
    /// (checked under the task lock, which the reset takes to move on).
    fn reply_since(&self, generation: u64, tag: u16, body: Fcall) {
        let _tasks = self.tasks.lock().expect("task lock");
        if self.generation.load(std::sync::atomic::Ordering::Relaxed) == generation {
            self.reply(tag, body);
        }
    }

    fn fid(&self, fid: u32) -> Result<S::Fid> {
        self.slot(fid).map(|(f, _)| f)
    }

    fn slot(&self, fid: u32) -> Result<Slot<S::Fid>> {
        self.fids.lock().expect("fid lock").get(&fid).cloned().ok_or_else(|| format!("unknown fid {fid}"))
    }

    /// A fid not yet opened (walk and open need one).
    fn unopened(&self, fid: u32, what: &str) -> Result<S::Fid> {
        match self.slot(fid)? {
            (f, None) => Ok(f),
            (_, Some(_)) => Err(format!("{what} of open fid {fid}")),
        }
    }

    /// An opened fid whose mode allows reading (`write` false) or writing.
    fn opened(&self, fid: u32, write: bool) -> Result<S::Fid> {
        let (f, mode) = self.slot(fid)?;
        let Some(mode) = mode else { return Err(format!("fid {fid} is not open: open it first")) };
        let (reads, writes) = match mode & 3 {
            OREAD | OEXEC => (true, false),
            OWRITE => (false, true),
            _ => (true, true),
        };
        match (write, reads, writes) {
            (false, false, _) => Err(format!("fid {fid} is open for writing only")),
            (true, _, false) => Err(format!("fid {fid} is open for reading only")),
            _ => Ok(f),
        }
    }

    fn fid_free(&self, fid: u32) -> Result<()> {
        match self.fids.lock().expect("fid lock").contains_key(&fid) {
            true => Err(format!("fid {fid} in use")),
            false => Ok(()),
        }
    }

    fn set_fid(&self, fid: u32, state: S::Fid, mode: Option<u8>) {
        self.fids.lock().expect("fid lock").insert(fid, (state, mode));
    }

    fn take_fid(&self, fid: u32) -> Result<S::Fid> {
        self.fids.lock().expect("fid lock").remove(&fid).map(|(f, _)| f).ok_or_else(|| format!("unknown fid {fid}"))
    }

    /// Aborts every request and clunks every fid (or, when the
    /// connection went, tells the server each fid was left behind). The
    /// aborted tasks are waited for, so whatever reply one queued before it
    /// stopped is in the channel when this returns (and goes out before
    /// the Rversion); none comes after.
    async fn reset(&self, hangup: bool) {
        let tasks: Vec<_> = {
            let mut tasks = self.tasks.lock().expect("task lock");
            self.generation.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            tasks.drain().collect()
        };
        for (_, f) in &tasks {
            f.task.abort();
        }
        for (_, f) in tasks {
            let _ = f.task.await;
        }
        let fids: Vec<S::Fid> = self.fids.lock().expect("fid lock").drain().map(|(_, (f, _))| f).collect();
        for f in fids {
            match hangup {
                true => self.serve.hangup(f).await,
                false => self.serve.clunk(f).await,
            }
        }
    }

    /// Runs one request (not Tversion or Tflush) to its outcome. (Its
    /// future is boxed per request: one level, holding the request once.)
    async fn handle(self: Arc<Self>, tag: u16, body: Fcall) -> Result<Fcall> {
        let io = iounit(self.msize.load(std::sync::atomic::Ordering::Relaxed));
        let s = &self.serve;
        Ok(match body {
            Fcall::Tattach { fid, uname, aname, .. } => {
                self.fid_free(fid)?;
                let (qid, state) = s.attach(&uname, &aname).await?;
                self.set_fid(fid, state, None);
                Fcall::Rattach { qid }
            }
            Fcall::Twalk { fid, newfid, wnames } => {
                let from = self.unopened(fid, "walk")?;
                if newfid != fid {
                    self.fid_free(newfid)?;
                }
                let (wqids, state) = s.walk(&from, &wnames).await?;
                if wqids.len() == wnames.len() {
                    let state = state.ok_or("walk finished without a fid")?;
                    self.set_fid(newfid, state, None);
                }
                Fcall::Rwalk { wqids }
            }
            Fcall::Topen { fid, mode } => {
                let (qid, state) = s.open(&self.unopened(fid, "open")?, mode).await?;
                self.set_fid(fid, state, Some(mode));
                Fcall::Ropen { qid, iounit: io }
            }
            Fcall::Tcreate { fid, name, perm, mode } => {
                let (qid, state) = s.create(&self.unopened(fid, "create")?, &name, perm, mode).await?;
                self.set_fid(fid, state, Some(mode));
                Fcall::Rcreate { qid, iounit: io }
            }
            Fcall::Tread { fid, offset, count } => {
                let mut data = s.read(&self.opened(fid, false)?, offset, count.min(io)).await?;
                data.truncate(count.min(io) as usize);
                Fcall::Rread { data }
            }
            Fcall::Twrite { fid, offset, data } => {
                Fcall::Rwrite { count: s.write(&self.opened(fid, true)?, offset, data).await? }
            }
            Fcall::Tclunk { fid } => {
                s.clunk(self.take_fid(fid)?).await;
                Fcall::Rclunk
            }
            Fcall::Tremove { fid } => {
                s.remove(self.take_fid(fid)?).await?;
                Fcall::Rremove
            }
            Fcall::Tstat { fid } => Fcall::Rstat { stat: Box::new(s.stat(&self.fid(fid)?).await?) },
            Fcall::Twstat { fid, stat } => {
                s.wstat(&self.fid(fid)?, *stat).await?;
                Fcall::Rwstat
            }
            Fcall::Topenfd { fid, mode } => self.openfd(tag, fid, mode).await?,
            other => return Err(format!("unexpected 9P message type {}: send T-messages", other.ty())),
        })
    }
}

impl<S: Serve> Conn<S> {
    /// plan9port's `Topenfd`: opens the fid, answers `Ropenfd` followed by
    /// a descriptor (one end of a socket pair), and pumps the other end
    /// with reads and writes on the fid, which moves over to the pump. (A
    /// request like the others: flushed and aborted as they are.)
    async fn openfd(self: &Arc<Self>, tag: u16, fid: u32, mode: u8) -> Result<Fcall> {
        if self.socket.is_none() {
            return Err("openfd passes a file descriptor, which needs a Unix socket connection: use open".into());
        }
        let io = iounit(self.msize.load(std::sync::atomic::Ordering::Relaxed));
        let (qid, state) = self.serve.open(&self.unopened(fid, "openfd")?, mode).await?;
        self.take_fid(fid)?;
        let (ours, theirs) = std::os::unix::net::UnixStream::pair().map_err(|e| format!("openfd: socketpair: {e}"))?;
        ours.set_nonblocking(true).map_err(|e| format!("openfd: {e}"))?;
        let ours = tokio::net::UnixStream::from_std(ours).map_err(|e| format!("openfd: {e}"))?;
        let unixfd = theirs.as_raw_fd() as u32;
        self.passing.lock().expect("passing lock").insert(tag, OwnedFd::from(theirs));
        tokio::spawn(pump(self.serve.clone(), state, mode, ours, io));
        Ok(Fcall::Ropenfd { qid, iounit: io, unixfd })
    }
}

/// Moves bytes between an openfd descriptor's other end and its fid: reads
/// of the fid (growing offsets, to EOF or an error) are written to the
/// socket; what the client writes becomes writes of the fid. Then the fid
/// is clunked, as soon as the client closes its end, not when a read that
/// may wait for long (an event file's) returns at last.
async fn pump<S: Serve>(serve: Arc<S>, fid: S::Fid, mode: u8, stream: tokio::net::UnixStream, io: u32) {
    // (OEXEC reads, as an open for it does.)
    let reads = matches!(mode & 3, OREAD | ORDWR | OEXEC);
    let writes = matches!(mode & 3, OWRITE | ORDWR);
    // A reader may stop writing and read on (a half-close): reads go on
    // until it has closed its end both ways.
    let hang_up = reads.then(|| HangUp::watch(&stream)).flatten();
    let (mut r, mut w) = stream.into_split();
    {
        let to_client = async {
            let mut offset = 0u64;
            while let Ok(data) = serve.read(&fid, offset, io).await {
                if data.is_empty() || w.write_all(&data).await.is_err() {
                    break;
                }
                offset += data.len() as u64;
            }
            drop(w);
        };
        let from_client = async |r: &mut tokio::net::unix::OwnedReadHalf| {
            let mut buf = vec![0u8; io as usize];
            let mut offset = 0u64;
            while let Ok(n @ 1..) = r.read(&mut buf).await {
                if serve.write(&fid, offset, buf[..n].to_vec()).await.is_err() {
                    break;
                }
                offset += n as u64;
            }
        };
        // Where the socket cannot be watched, what a read-only client
        // sends is taken for its end of the stream (or bytes it should not
        // send): either way it is done.
        let closed = async |r: &mut tokio::net::unix::OwnedReadHalf| match &hang_up {
            Some(hang_up) => hang_up.heard().await,
            None => {
                let mut byte = [0u8; 1];
                let _ = r.read(&mut byte).await;
            }
        };
        match (reads, writes) {
            (true, true) => {
                let (wrote_all, written) = tokio::sync::oneshot::channel::<()>();
                let reading = async {
                    tokio::select! {
                        _ = to_client => {}
                        _ = async {
                            let _ = written.await;
                            match &hang_up {
                                Some(hang_up) => hang_up.heard().await,
                                None => std::future::pending().await,
                            }
                        } => {}
                    }
                };
                let writing = async {
                    from_client(&mut r).await;
                    let _ = wrote_all.send(());
                };
                tokio::join!(reading, writing);
            }
            (true, false) => {
                tokio::select! {
                    _ = to_client => {}
                    _ = closed(&mut r) => {}
                }
            }
            _ => from_client(&mut r).await,
        }
    }
    serve.clunk(fid).await;
}

/// Serves a Unix socket connection: as [`serve_conn`], and `Topenfd`
/// too, which passes descriptors over the socket.
pub async fn serve_unix<S: Serve>(
    serve: Arc<S>,
    stream: tokio::net::UnixStream,
    config: Config,
) -> std::result::Result<(), FrameError> {
    let fd = stream.as_raw_fd();
    // The stream's own halves: `tokio::io::split` locks on every poll.
    let (r, w) = stream.into_split();
    serve_halves(serve, r, w, config, Some(fd)).await
}

/// Serves one connection until the client hangs up or its framing breaks.
///
/// One task reads requests and writes replies: a request that completes
/// at once (most do: stat, walk, a read of a plain file) is answered from
/// here without a task of its own, and replies ready together go out in
/// one write. A request that has to wait runs as its own task and sends its
/// reply back through a channel.
pub async fn serve_conn<S, T>(serve: Arc<S>, stream: T, config: Config) -> std::result::Result<(), FrameError>
where
    S: Serve,
    T: AsyncRead + AsyncWrite + Send + 'static,
{
    let (r, w) = tokio::io::split(stream);
    serve_halves(serve, r, w, config, None).await
}

async fn serve_halves<S: Serve>(
    serve: Arc<S>,
    mut r: impl AsyncRead + Unpin,
    mut w: impl AsyncWrite + Unpin,
    config: Config,
    socket: Option<RawFd>,
) -> std::result::Result<(), FrameError> {
    let (tx, mut rx) = mpsc::unbounded_channel::<Msg>();
    let conn = Arc::new(Conn {
        serve,
        fids: Mutex::new(Table::default()),
        tasks: Mutex::new(Table::default()),
        generation: std::sync::atomic::AtomicU64::new(0),
        out: tx,
        queued: std::sync::atomic::AtomicUsize::new(0),
        msize: std::sync::atomic::AtomicU32::new(0),
        socket,
        passing: Mutex::new(Table::default()),
    });
    let result = io_loop(&conn, &mut r, &mut w, &mut rx, &config).await;
    conn.reset(true).await;
    result
}

/// Bytes asked of the socket per read.
const READ_CHUNK: usize = 256 * 1024;

async fn io_loop<S: Serve>(
    conn: &Arc<Conn<S>>,
    r: &mut (impl AsyncRead + Unpin),
    w: &mut (impl AsyncWrite + Unpin),
    rx: &mut mpsc::UnboundedReceiver<Msg>,
    config: &Config,
) -> std::result::Result<(), FrameError> {
    let mut buf: Vec<u8> = Vec::new();
    let mut start = 0;
    let mut large: Option<Large> = None;
    let mut out = Vec::new();
    let mut ready = Vec::new();
    loop {
        if let Some(l) = large.take_if(|l| l.data.len() == l.count) {
            let parsed = with_data(&l.head, l.data);
            if !received(conn, parsed, config, &mut Ready { list: &mut ready, rx, queued: &conn.queued }).await {
                return Ok(());
            }
        }
        // Every complete frame read so far.
        while large.is_none() {
            // Before Tversion, frames may be as large as we would ever allow.
            let limit = match conn.msize.load(std::sync::atomic::Ordering::Relaxed) {
                0 => config.msize,
                m => m,
            };
            let Some(n) = check(&buf[start..], limit)? else {
                // A large Twrite begun (its size checked): the rest of its
                // data is read into a buffer of its own, which becomes the
                // request's, rather than into this one and copied out. (A
                // large Rread, which no client sends, goes so too, to be
                // refused whole as it always was.)
                if let Some((head, count)) = data_head(&buf[start..], LARGE / 4) {
                    let mut data = Vec::with_capacity(count);
                    data.extend_from_slice(&buf[start + head..]);
                    large = Some(Large { head: buf[start..start + head].to_vec(), data, count });
                    start = buf.len();
                }
                break;
            };
            let parsed = parse(&buf[start..start + n]);
            start += n;
            if !received(conn, parsed, config, &mut Ready { list: &mut ready, rx, queued: &conn.queued }).await {
                return Ok(());
            }
        }
        buf.drain(..start);
        start = 0;
        // The replies that are ready, in as few writes as may be.
        Ready { list: &mut ready, rx, queued: &conn.queued }.take_queued();
        if send_passing(conn, w, &mut out, &ready).await.is_err() {
            return Ok(());
        }
        ready.clear();
        // Polled in order, with no random draw each pass: replies that
        // came meanwhile go out on the next pass either way (`try_recv`).
        tokio::select! {
            biased;
            got = read_more(r, &mut buf, large.as_mut()) => {
                if !got {
                    return Ok(());
                }
            }
            // A reply from a request that had to wait: written on the
            // next pass, with whatever else is ready then.
            Some(msg) = rx.recv() => {
                conn.queued.fetch_sub(1, std::sync::atomic::Ordering::SeqCst);
                ready.push(msg);
            }
        }
    }
}

/// A large Twrite being read: its head, and its data so far, read into a
/// buffer of its own ([`data_head`]).
struct Large {
    head: Vec<u8>,
    data: Vec<u8>,
    count: usize,
}

/// Answers a message read (`dispatch`), or with an Rerror one that did
/// not parse; false when that has no tag to answer on: the stream can no
/// longer be trusted, and the connection ends.
async fn received<S: Serve>(
    conn: &Arc<Conn<S>>,
    parsed: std::result::Result<Msg, crate::error::DecodeError>,
    config: &Config,
    ready: &mut Ready<'_>,
) -> bool {
    match parsed {
        Ok(msg) => {
            if let Fcall::Tversion { .. } = msg.body {
                // Every request before it is aborted, every fid clunked,
                // before it is answered (version(5)).
                conn.reset(false).await;
            }
            dispatch(conn, msg, config, ready);
            true
        }
        Err(e) => {
            tracing::info!(error = %e, "malformed 9P message");
            let Some(tag) = e.tag() else { return false };
            ready.push(tag, Fcall::Rerror { ename: e.to_string() });
            true
        }
    }
}

/// Polls a request, a panic caught and made its outcome (an Rerror), so
/// the request is answered and its tag freed as any other. (It is not
/// polled again after.)
fn caught<F: Future<Output = Result<Fcall>> + ?Sized>(
    request: std::pin::Pin<&mut F>,
    cx: &mut std::task::Context<'_>,
) -> std::task::Poll<Result<Fcall>> {
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| request.poll(cx))).unwrap_or_else(|panic| {
        let what = match (panic.downcast_ref::<&str>(), panic.downcast_ref::<String>()) {
            (Some(s), _) => s.to_string(),
            (_, Some(s)) => s.clone(),
            _ => "a panic".to_string(),
        };
        tracing::error!(panic = %what, "a request panicked");
        std::task::Poll::Ready(Err(format!(
            "the server failed on this request ({what}): a bug, worth reporting; other requests go on"
        )))
    })
}

/// A request's reply from its outcome: an error becomes an Rerror, and a
/// refused change is worth a line; a refused walk or read is routine
/// (shells probe for files), so it is only traced.
fn reply_of(ty: u8, changes: bool, outcome: Result<Fcall>) -> Fcall {
    match outcome {
        Ok(r) => r,
        Err(ename) => {
            if changes {
                tracing::info!(ty, error = %ename, "request refused");
            } else {
                tracing::debug!(ty, error = %ename, "request refused");
            }
            Fcall::Rerror { ename }
        }
    }
}

/// Writes `replies`, each `Ropenfd` followed at once by its descriptor.
async fn send_passing<S: Serve>(
    conn: &Conn<S>,
    w: &mut (impl AsyncWrite + Unpin),
    out: &mut Vec<u8>,
    replies: &[Msg],
) -> std::io::Result<()> {
    let mut from = 0;
    for (i, msg) in replies.iter().enumerate() {
        if !matches!(msg.body, Fcall::Ropenfd { .. }) {
            continue;
        }
        send(w, out, &replies[from..=i]).await?;
        w.flush().await?;
        from = i + 1;
        let fd = conn.passing.lock().expect("passing lock").remove(&msg.tag);
        if let (Some(socket), Some(fd)) = (conn.socket, fd) {
            crate::fdpass::send_fd(socket, &fd).await?;
        }
    }
    send(w, out, &replies[from..]).await
}

/// Writes `replies`: small ones gathered into one write, the data of a
/// large Rread written from its own buffer rather than copied.
async fn send(w: &mut (impl AsyncWrite + Unpin), out: &mut Vec<u8>, replies: &[Msg]) -> std::io::Result<()> {
    out.clear();
    for msg in replies {
        if let Some(data) = encode_frame(msg, out, LARGE) {
            write_two(w, out, data).await?;
            out.clear();
        }
    }
    if !out.is_empty() {
        w.write_all(out).await?;
    }
    Ok(())
}

/// Reads more of the stream: onto `buf`, or into the data of the large
/// Twrite being read, never past it; false at the end.
async fn read_more(r: &mut (impl AsyncRead + Unpin), buf: &mut Vec<u8>, large: Option<&mut Large>) -> bool {
    let got = match large {
        Some(l) => (&mut *r).take((l.count - l.data.len()) as u64).read_buf(&mut l.data).await,
        None => {
            buf.reserve(READ_CHUNK);
            r.read_buf(buf).await
        }
    };
    matches!(got, Ok(k) if k > 0)
}

/// The replies the io loop writes on its next pass.
struct Ready<'a> {
    list: &'a mut Vec<Msg>,
    /// Where the tasks of requests that had to wait send their replies.
    rx: &'a mut mpsc::UnboundedReceiver<Msg>,
    /// The connection's count of replies in `rx`.
    queued: &'a std::sync::atomic::AtomicUsize,
}

impl Ready<'_> {
    /// Queues a reply made here, after every reply a task queued before
    /// now: a task queues its reply and gives up its tag under the task
    /// lock, so a Tflush that found the tag free answers after that reply,
    /// as flush(5) wants, and a Tversion after what the aborted requests
    /// said.
    fn push(&mut self, tag: u16, body: Fcall) {
        self.take_queued();
        self.list.push(Msg { tag, body });
    }

    /// Moves the replies the tasks queued onto the list (none to look for
    /// while the count says so: most requests are answered here).
    fn take_queued(&mut self) {
        use std::sync::atomic::Ordering::SeqCst;
        while self.queued.load(SeqCst) > 0 {
            match self.rx.try_recv() {
                Ok(msg) => {
                    self.queued.fetch_sub(1, SeqCst);
                    self.list.push(msg);
                }
                // Counted, not yet in the channel: the sender is between
                // the two, and the loop's next pass takes it.
                Err(_) => break,
            }
        }
    }
}

/// Answers `msg`: a reply ready at once goes onto `ready` (written by the
/// io loop with the others, with no wake-up through the channel); one that
/// has to wait comes through the channel from its task. (A Tversion's
/// reset is done before: this never waits.)
fn dispatch<S: Serve>(conn: &Arc<Conn<S>>, msg: Msg, config: &Config, ready: &mut Ready<'_>) {
    let tag = msg.tag;
    let mut reply = |body: Fcall| ready.push(tag, body);
    match msg.body {
        Fcall::Tversion { msize, version } => {
            let body = match negotiate(msize, &version, config.msize) {
                Ok(Negotiated::Speak { msize }) => {
                    conn.msize.store(msize, std::sync::atomic::Ordering::Relaxed);
                    // Room for a whole reply of the size agreed on.
                    if let Some(fd) = conn.socket {
                        crate::io::room_for(fd, msize);
                    }
                    Fcall::Rversion { msize, version: VERSION.into() }
                }
                Ok(Negotiated::Unknown) => {
                    Fcall::Rversion { msize: msize.min(config.msize), version: "unknown".into() }
                }
                Err(e) => Fcall::Rerror { ename: e.to_string() },
            };
            reply(body);
        }
        _ if conn.msize.load(std::sync::atomic::Ordering::Relaxed) == 0 => {
            reply(Fcall::Rerror { ename: "send Tversion first".into() })
        }
        Fcall::Tauth { .. } => reply(Fcall::Rerror { ename: config.no_auth.clone() }),
        Fcall::Tflush { oldtag } => {
            let mut tasks = conn.tasks.lock().expect("task lock");
            let Some(f) = tasks.get(&oldtag) else {
                drop(tasks);
                reply(Fcall::Rflush);
                return;
            };
            // Answered later, unless a Tversion comes first.
            let generation = conn.generation.load(std::sync::atomic::Ordering::Relaxed);
            if f.cancelable {
                // A read never happened, as far as the client can tell.
                let f = tasks.remove(&oldtag).expect("found");
                drop(tasks);
                f.task.abort();
                // It may have been replying: that reply goes first.
                let conn = conn.clone();
                tokio::spawn(async move {
                    let _ = f.task.await;
                    conn.reply_since(generation, tag, Fcall::Rflush);
                });
                return;
            }
            // A request that is let finish (a write waiting to be
            // sequenced) keeps its tag until its reply is sent, so a second
            // Tflush of it waits too; the Rflush follows that reply, waited
            // for apart: the connection's other requests are answered
            // meanwhile.
            if let Some(flushed) = &f.flushed {
                flushed.raise();
            }
            let done = f.done.clone();
            drop(tasks);
            let conn = conn.clone();
            tokio::spawn(async move {
                done.wait().await;
                conn.reply_since(generation, tag, Fcall::Rflush);
            });
        }
        body if body.is_request() && tag != NOTAG => {
            if conn.tasks.lock().expect("task lock").contains_key(&tag) {
                reply(Fcall::Rerror { ename: format!("tag {tag} in use") });
                return;
            }
            let cancelable = matches!(body, Fcall::Tread { .. });
            let (ty, changes) = (body.ty(), body.changes());
            let flushed =
                (!matches!(body, Fcall::Tread { .. } | Fcall::Tstat { .. })).then(|| Arc::new(Signal::default()));
            let handle = conn.clone().handle(tag, body);
            let mut request: std::pin::Pin<Box<dyn Future<Output = Result<Fcall>> + Send>> = match &flushed {
                Some(f) => Box::pin(FLUSHED.scope(f.clone(), handle)),
                None => Box::pin(handle),
            };
            // Most requests finish without waiting: answer those here.
            // One that waits keeps its place (the next poll, in its own
            // task, registers the real waker).
            let mut cx = std::task::Context::from_waker(std::task::Waker::noop());
            if let std::task::Poll::Ready(outcome) = caught(request.as_mut(), &mut cx) {
                reply(reply_of(ty, changes, outcome));
                return;
            }
            let c = conn.clone();
            // The task registers itself under the lock, so it cannot finish
            // and unregister before it is registered.
            let mut tasks = conn.tasks.lock().expect("task lock");
            let done = Arc::new(Signal::default());
            let replied = RaiseOnDrop(done.clone());
            let task = tokio::spawn(async move {
                let reply = reply_of(ty, changes, std::future::poll_fn(|cx| caught(request.as_mut(), cx)).await);
                // Reply and unregister without an await between, so a Tflush
                // sees either a running request or a queued reply.
                let mut tasks = c.tasks.lock().expect("task lock");
                tasks.remove(&tag);
                c.reply(tag, reply);
                drop(replied);
            });
            tasks.insert(tag, InFlight { task, cancelable, flushed, done });
        }
        body => reply(Fcall::Rerror { ename: format!("unexpected 9P message type {} with tag {tag}", body.ty()) }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};

    /// A reply made here goes after every reply a task counted and sent
    /// before (flush(5): an Rflush never overtakes the reply it follows),
    /// and the channel is not looked in while the count is 0.
    #[test]
    fn a_reply_made_here_follows_those_tasks_queued_before() {
        let (tx, mut rx) = mpsc::unbounded_channel::<Msg>();
        let queued = AtomicUsize::new(0);
        let mut list = Vec::new();
        // Sent but not counted: not looked for (a reply is counted before
        // it is sent, so this is never so but here).
        tx.send(Msg { tag: 9, body: Fcall::Rclunk }).unwrap();
        Ready { list: &mut list, rx: &mut rx, queued: &queued }.push(1, Fcall::Rflush);
        assert_eq!(list.iter().map(|m| m.tag).collect::<Vec<_>>(), [1]);
        rx.try_recv().unwrap();
        list.clear();
        for tag in [5, 6] {
            queued.fetch_add(1, SeqCst);
            tx.send(Msg { tag, body: Fcall::Rwrite { count: 1 } }).unwrap();
        }
        Ready { list: &mut list, rx: &mut rx, queued: &queued }.push(7, Fcall::Rflush);
        assert_eq!(list.iter().map(|m| m.tag).collect::<Vec<_>>(), [5, 6, 7]);
        assert_eq!(queued.load(SeqCst), 0);
    }

    /// Keeps what is written to it, in order; every fid is the same.
    #[derive(Default)]
    struct Keep(Mutex<Vec<Vec<u8>>>);

    impl Serve for Keep {
        type Fid = ();
        async fn attach(&self, _: &str, _: &str) -> Result<(Qid, ())> {
            Ok((Qid::default(), ()))
        }
        async fn walk(&self, _: &(), names: &[String]) -> Result<(Vec<Qid>, Option<()>)> {
            Ok((names.iter().map(|_| Qid::default()).collect(), Some(())))
        }
        async fn open(&self, _: &(), _: u8) -> Result<(Qid, ())> {
            Ok((Qid::default(), ()))
        }
        async fn create(&self, _: &(), _: &str, _: u32, _: u8) -> Result<(Qid, ())> {
            Err("no create".into())
        }
        async fn read(&self, _: &(), _: u64, _: u32) -> Result<Vec<u8>> {
            Ok(Vec::new())
        }
        async fn write(&self, _: &(), _: u64, data: Vec<u8>) -> Result<u32> {
            let n = data.len() as u32;
            self.0.lock().unwrap().push(data);
            Ok(n)
        }
        async fn clunk(&self, _: ()) {}
        async fn remove(&self, _: ()) -> Result<()> {
            Err("no remove".into())
        }
        async fn stat(&self, _: &()) -> Result<Stat> {
            Ok(Stat::default())
        }
        async fn wstat(&self, _: &(), _: Stat) -> Result<()> {
            Err("no wstat".into())
        }
    }

    /// A stream that gives its pieces in turn, each read no more than it
    /// is asked for, and notes how much each read asked for.
    struct Script {
        pieces: std::collections::VecDeque<Vec<u8>>,
        asked: Arc<Mutex<Vec<usize>>>,
    }

    impl AsyncRead for Script {
        fn poll_read(
            mut self: std::pin::Pin<&mut Self>,
            _: &mut std::task::Context<'_>,
            buf: &mut tokio::io::ReadBuf<'_>,
        ) -> std::task::Poll<std::io::Result<()>> {
            if let Some(mut piece) = self.pieces.pop_front() {
                self.asked.lock().unwrap().push(buf.remaining());
                let n = piece.len().min(buf.remaining());
                buf.put_slice(&piece[..n]);
                if n < piece.len() {
                    self.pieces.push_front(piece.split_off(n));
                }
            }
            std::task::Poll::Ready(Ok(()))
        }
    }

    fn frame(tag: u16, body: Fcall) -> Vec<u8> {
        crate::codec::to_bytes(&Msg { tag, body })
    }

    /// A large Twrite's data is read into a buffer of its own: once its
    /// head (here cut between reads) and some data are in, each read asks
    /// for no more than what is left of the frame, so the read that ends
    /// it ends exactly there, and the frames after it are read as ever.
    #[tokio::test]
    async fn a_large_writes_data_is_read_up_to_its_frames_end_and_no_further() {
        let (one, two): (Vec<u8>, Vec<u8>) = ((0..300_000u32).map(|i| i as u8).collect(), vec![b'z'; 280_000]);
        let mut setup = frame(NOTAG, Fcall::Tversion { msize: 1 << 20, version: "9P2000".into() });
        setup.extend(frame(
            1,
            Fcall::Tattach { fid: 0, afid: crate::fcall::NOFID, uname: "u".into(), aname: "".into() },
        ));
        setup.extend(frame(1, Fcall::Twalk { fid: 0, newfid: 1, wnames: vec!["f".into()] }));
        setup.extend(frame(1, Fcall::Topen { fid: 1, mode: OWRITE }));
        let first = frame(2, Fcall::Twrite { fid: 1, offset: 0, data: one.clone() });
        let mut rest = first[100_023 + 70_000..].to_vec();
        rest.extend(frame(3, Fcall::Twrite { fid: 1, offset: 0, data: two.clone() }));
        rest.extend(frame(4, Fcall::Tclunk { fid: 1 }));
        let pieces = [
            setup,
            first[..10].to_vec(),
            first[10..23 + 70_000].to_vec(),
            first[23 + 70_000..100_023 + 70_000].to_vec(),
            rest,
        ];
        let asked = Arc::new(Mutex::new(Vec::new()));
        let script = Script { pieces: pieces.into(), asked: asked.clone() };
        let keep = Arc::new(Keep::default());
        serve_halves(keep.clone(), script, tokio::io::sink(), Config { msize: 1 << 20, ..Config::default() }, None)
            .await
            .expect("served to the end");
        assert!(*keep.0.lock().unwrap() == [one, two], "both writes whole, in order");
        let asked = asked.lock().unwrap().clone();
        // The setup, the head's first 10 bytes, the rest of it with 70,000
        // of data: then the frame's 230,000 bytes left, of which 100,000
        // came, then its last 130,000.
        assert_eq!(asked[3..5], [230_000, 130_000], "reads asked for: {asked:?}");
    }
}
