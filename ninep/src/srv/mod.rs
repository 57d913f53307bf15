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
//!
//! Split along its seams: `conn` (the fid table, requests in flight, a
//! reset, the dispatch to `Serve`), `flush` (Tflush and [`flushed`]),
//! `openfd` (plan9port's Topenfd and its pump), `auth` (what proves a
//! client, where a connection must be proven) and `proving` (Tauth, the
//! auth fids, the attach that takes a proof), `wire` (frames in,
//! replies out).

pub mod auth;
mod conn;
mod flush;
mod openfd;
mod proving;
#[cfg(test)]
mod tests;
mod wire;

use crate::error::FrameError;
use crate::fcall::{Msg, Qid, Stat};
use std::future::Future;
use std::os::fd::{AsRawFd, RawFd};
use std::sync::{Arc, Mutex};
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::sync::mpsc;

pub use conn::MAX_FIDS;
use conn::{Conn, Table};
pub use flush::flushed;
use wire::io_loop;
pub use wire::{Plain, ReplyWrite};

/// A 9P error reply's text: what the connection itself refuses with (an
/// unknown fid, a read of a fid open for writing), and what a `Serve`
/// whose errors are plain text may use as its `Error`.
pub type Error = String;
/// A request's outcome; `E` is a `Serve`'s own error type.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// A walk's outcome: the qids of the names walked, and the new fid's
/// state if all of them were.
pub type Walked<F> = (Vec<Qid>, Option<F>);

/// What the files of a 9P server mean. `Fid` is whatever a fid refers to:
/// the connection keeps one per fid and hands it to each call.
pub trait Serve: Send + Sync + 'static {
    type Fid: Clone + Send + Sync + 'static;
    /// Why a request was refused. Its `Display` is the Rerror's text: the
    /// error stays typed up to this edge and becomes words only here.
    type Error: std::fmt::Display + Send + 'static;

    /// Tattach: the root named by `aname`.
    fn attach(&self, uname: &str, aname: &str) -> impl Future<Output = Result<(Qid, Self::Fid), Self::Error>> + Send;
    /// Tattach with an auth fid that proved `grant` (see [`auth`]); by
    /// default, as attach.
    fn attach_granted(
        &self,
        uname: &str,
        aname: &str,
        grant: &str,
    ) -> impl Future<Output = Result<(Qid, Self::Fid), Self::Error>> + Send {
        let _ = grant;
        self.attach(uname, aname)
    }
    /// Twalk: the qids of the names walked, and the fid's new state if all
    /// of them were (walk(5): a partial walk leaves newfid unset; an error
    /// on the first name is an Rerror).
    fn walk(
        &self,
        fid: &Self::Fid,
        names: &[String],
    ) -> impl Future<Output = Result<Walked<Self::Fid>, Self::Error>> + Send;
    /// Topen: the qid and the fid's state once open. `iounit` is the
    /// connection's.
    fn open(&self, fid: &Self::Fid, mode: u8) -> impl Future<Output = Result<(Qid, Self::Fid), Self::Error>> + Send;
    /// Tcreate: the new file's qid and the fid's state, open on it.
    fn create(
        &self,
        fid: &Self::Fid,
        name: &str,
        perm: u32,
        mode: u8,
    ) -> impl Future<Output = Result<(Qid, Self::Fid), Self::Error>> + Send;
    /// Tread: at most `count` bytes. Must be cancel-safe (a Tflush drops it).
    fn read(
        &self,
        fid: &Self::Fid,
        offset: u64,
        count: u32,
    ) -> impl Future<Output = Result<Vec<u8>, Self::Error>> + Send;
    /// Twrite: how many bytes were taken.
    fn write(
        &self,
        fid: &Self::Fid,
        offset: u64,
        data: Vec<u8>,
    ) -> impl Future<Output = Result<u32, Self::Error>> + Send;
    /// Tclunk, or the reset of a Tversion.
    fn clunk(&self, fid: Self::Fid) -> impl Future<Output = ()> + Send;
    /// The fid's connection ended without a clunk; by default the same.
    fn hangup(&self, fid: Self::Fid) -> impl Future<Output = ()> + Send {
        self.clunk(fid)
    }
    /// Whether a flushed read is let finish, hearing its flush through
    /// [`flushed`] as a write does, rather than aborted: a forwarder's is,
    /// so that a reply already on its way from upstream is passed on
    /// before the Rflush, not lost.
    fn finishes_flushed_reads(&self) -> bool {
        false
    }
    /// Tremove (the fid is clunked whatever the outcome).
    fn remove(&self, fid: Self::Fid) -> impl Future<Output = Result<(), Self::Error>> + Send;
    fn stat(&self, fid: &Self::Fid) -> impl Future<Output = Result<Stat, Self::Error>> + Send;
    fn wstat(&self, fid: &Self::Fid, stat: Stat) -> impl Future<Output = Result<(), Self::Error>> + Send;
}

/// Per-connection settings.
#[derive(Clone)]
pub struct Config {
    /// The largest msize offered.
    pub msize: u32,
    /// The text of Tauth's Rerror, where no authentication is asked for.
    pub no_auth: String,
    /// How clients must prove themselves before they attach; none: every
    /// attach is taken, and Tauth answers `no_auth`.
    pub auth: Option<Arc<dyn auth::Authenticate>>,
}

impl std::fmt::Debug for Config {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Config")
            .field("msize", &self.msize)
            .field("no_auth", &self.no_auth)
            .field("auth", &self.auth.is_some())
            .finish()
    }
}

impl Default for Config {
    fn default() -> Config {
        Config { msize: crate::version::DEFAULT_MSIZE, no_auth: "authentication not required".into(), auth: None }
    }
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

/// Serves a connection whose halves are the caller's own: as
/// [`serve_conn`], its replies written through `w`, which may write a
/// large reply's data its own way (TLS sealing it where it lies).
pub async fn serve_split<S: Serve>(
    serve: Arc<S>,
    r: impl AsyncRead + Unpin,
    w: impl ReplyWrite,
    config: Config,
) -> std::result::Result<(), FrameError> {
    serve_replying(serve, r, w, config, None).await
}

async fn serve_halves<S: Serve>(
    serve: Arc<S>,
    r: impl AsyncRead + Unpin,
    w: impl AsyncWrite + Unpin + Send,
    config: Config,
    socket: Option<RawFd>,
) -> std::result::Result<(), FrameError> {
    serve_replying(serve, r, Plain(w), config, socket).await
}

async fn serve_replying<S: Serve>(
    serve: Arc<S>,
    mut r: impl AsyncRead + Unpin,
    mut w: impl ReplyWrite,
    config: Config,
    socket: Option<RawFd>,
) -> std::result::Result<(), FrameError> {
    let (tx, mut rx) = mpsc::unbounded_channel::<Msg>();
    let conn = Arc::new(Conn {
        serve,
        fids: Mutex::new(Table::default()),
        opening: Mutex::new(Table::default()),
        next_open: std::sync::atomic::AtomicU64::new(0),
        tasks: Mutex::new(Table::default()),
        generation: std::sync::atomic::AtomicU64::new(0),
        out: tx,
        queued: std::sync::atomic::AtomicUsize::new(0),
        msize: std::sync::atomic::AtomicU32::new(0),
        socket,
        passing: Mutex::new(Table::default()),
        auth: config.auth.clone(),
        afids: Mutex::new(Table::default()),
        attached: std::sync::atomic::AtomicBool::new(false),
    });
    let result = io_loop(&conn, &mut r, &mut w, &mut rx, &config).await;
    w.end().await;
    conn.reset(true).await;
    result
}
