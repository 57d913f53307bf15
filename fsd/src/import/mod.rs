//! `apex import ssh!HOST`: a session on another machine, served here. The
//! system's `ssh` runs `apexd --stdio` there, which relays to that user's
//! long-lived daemon; the one connection is posted in the namespace
//! directory here as `apex.HOST` (and `acme.HOST`, the remote's acme tree,
//! when its daemon serves one), so `apex`, `9p`, `9pfuse`, `apex-mnt` and
//! apex-ui reach it as they reach a daemon of this machine.
//!
//! Every local client shares the connection through
//! [`apex_ninep::forward::Forward`] (9pserve's rules: tags and fids mapped
//! per client, Topenfd served here, a hang-up flushed and clunked
//! upstream). The importer runs in the background until `--stop`; when
//! ssh drops it hangs up its local clients (apex-ui attaches anew, as
//! after a daemon restart) and reconnects, backing off, to the same
//! remote daemon, which the ssh connection never owned.
//!
//! `ssh` holds the ssh command and what its failures mean; `start` the
//! command that starts, finds and stops an importer; this file the
//! connection's life, the posting and the serving.

pub mod ssh;
pub mod start;
pub mod tls;

use apex_ninep::forward::Forward;
use apex_ninep::srv::{serve_unix, Config};
use apex_ninep::{Client, ClientError};
pub use ssh::Remote;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::watch;

#[derive(Debug, thiserror::Error)]
pub enum ImportError {
    #[error(transparent)]
    Address(#[from] apex_sys::remote::RemoteError),
    #[error("cannot run {program}: {source} (is ssh installed? $APEX_SSH names another command)")]
    Ssh { program: String, source: std::io::Error },
    #[error("apex import --upload: {remote}: {why}")]
    Upload { remote: String, why: String },
    #[error("{remote}: {why}")]
    Version { remote: String, why: String },
    #[error(
        "{remote}: {which}{}: install apex there, name its apexd with --remote-apexd PATH, or copy this one \
         there with apex import --upload",
        if said.is_empty() { String::new() } else { format!(" ({said})") }
    )]
    NoApexd { remote: String, which: String, said: String },
    #[error(
        "{remote}: the connection ended before 9P was spoken{}{}",
        status.map_or(String::new(), |s| format!(" (ssh exited {s})")),
        if said.is_empty() { String::new() } else { format!(": {said}") }
    )]
    Relay { remote: String, status: Option<i32>, said: String },
    #[error("{remote}: no answer within {}s (is ssh waiting for a password? import needs keys or an agent)", wait.as_secs())]
    Timeout { remote: String, wait: Duration },
    #[error("{remote}: {why}")]
    Protocol { remote: String, why: ClientError },
    #[error("{remote}: {why}")]
    Tls { remote: String, why: String },
    #[error(transparent)]
    Token(#[from] crate::access::tokens::TokenError),
    #[error("{0}: give --pin sha256:... (apexd prints it at start) and --token FILE (apex token new makes one)")]
    TlsNeeds(String),
    #[error("{remote} serves no acme tree (its daemon runs with --no-acme): there is nothing to post as {name}")]
    NoAcme { remote: String, name: String },
    #[error(transparent)]
    Post(#[from] crate::fsys::post::PostError),
    /// The importer started in the background failed: its words.
    #[error("{0}")]
    Failed(String),
    #[error("{0}")]
    Start(apex_sys::daemon::StartError),
    #[error("{name} is the import of {theirs}: give this one another name with -n NAME")]
    NameTaken { name: String, theirs: String },
    #[error("nothing is imported as {name} in {}", dir.display())]
    NotImported { name: String, dir: PathBuf },
    #[error("apex import: {0}")]
    Io(#[from] std::io::Error),
}

/// How an import reaches the remote daemon.
#[derive(Clone)]
pub enum Via {
    /// The system's ssh, running `apexd --stdio` there.
    Ssh {
        remote: Remote,
        /// The ssh command and its options.
        ssh: Vec<String>,
        /// `apexd` on the remote, when not found there by itself.
        apexd: Option<String>,
    },
    /// TLS 1.3 to `--listen tcp!HOST!PORT`, its certificate pinned, a
    /// token proven at every attach.
    Tls { host: String, port: u16, pin: String, token: crate::access::tokens::Held },
}

impl Via {
    /// `ssh!...` or `tcp!HOST!PORT`, for messages.
    pub fn address(&self) -> String {
        match self {
            Via::Ssh { remote, .. } => remote.address(),
            Via::Tls { host, port, .. } => format!("tcp!{host}!{port}"),
        }
    }

    pub fn host(&self) -> &str {
        match self {
            Via::Ssh { remote, .. } => &remote.host,
            Via::Tls { host, .. } => host,
        }
    }

    /// What proves an attach upstream, where the remote asks.
    fn prove(&self) -> Option<apex_ninep::forward::Prove> {
        match self {
            Via::Ssh { .. } => None,
            Via::Tls { token, .. } => {
                let token = token.clone();
                Some(Arc::new(move |challenge: &[u8], uname: &str, aname: &str| token.prove(challenge, uname, aname)))
            }
        }
    }
}

/// An import's settings.
#[derive(Clone)]
pub struct Import {
    pub via: Via,
    /// The local namespace directory.
    pub dir: PathBuf,
    /// `-n NAME`: the one name to post, instead of `apex.HOST` and
    /// `acme.HOST`.
    pub name: Option<String>,
    pub msize: u32,
}

/// How long connecting may take: ssh's own, then a daemon the relay
/// starts there.
pub const CONNECT_WAIT: Duration = Duration::from_secs(60);
/// How long a client that connects while the link is down waits for it,
/// before its requests are refused saying so.
const DOWN_WAIT: Duration = Duration::from_secs(20);
/// The longest pause between two attempts to reconnect.
const BACKOFF_MAX: Duration = Duration::from_secs(30);

/// The ssh command: `$APEX_SSH`, split at blanks, else `ssh`.
pub fn ssh_command() -> Vec<String> {
    let words: Vec<String> =
        std::env::var("APEX_SSH").unwrap_or_default().split_whitespace().map(String::from).collect();
    match words.is_empty() {
        true => vec!["ssh".to_string()],
        false => words,
    }
}

impl Import {
    /// The names posted, each saying whether it serves the remote's acme
    /// tree (`SESSION/acme`, as a client's empty attach name stands for
    /// there), given the remote's acme session. The first is posted last:
    /// whoever waits for it finds the others there.
    fn posts(&self, acme: Option<&str>) -> Result<Vec<(String, bool)>, ImportError> {
        match &self.name {
            // `-n acme` (win dials `acme`) serves the acme tree.
            Some(n) if n == "acme" || n.starts_with("acme.") => match acme {
                Some(_) => Ok(vec![(n.clone(), true)]),
                None => Err(ImportError::NoAcme { remote: self.via.address(), name: n.clone() }),
            },
            Some(n) => Ok(vec![(n.clone(), false)]),
            None => {
                let mut posts = vec![(format!("apex.{}", self.via.host()), false)];
                if acme.is_some() {
                    posts.push((format!("acme.{}", self.via.host()), true));
                }
                Ok(posts)
            }
        }
    }

    /// The name whose socket answering means the import is up.
    pub fn first_name(&self) -> String {
        self.name.clone().unwrap_or_else(|| format!("apex.{}", self.via.host()))
    }
}

/// One connection to the remote: the client over it, and the ssh that
/// carries it (over TLS the client holds the socket itself).
struct Link {
    client: Client,
    ssh: Option<tokio::process::Child>,
}

impl Link {
    async fn end(&mut self) {
        if let Some(child) = &mut self.ssh {
            let _ = child.kill().await;
        }
    }
}

async fn connect(imp: &Import) -> Result<Link, ImportError> {
    match &imp.via {
        Via::Ssh { remote, ssh, apexd } => {
            let (client, child) = ssh::connect(remote, ssh, apexd.as_deref(), imp.msize).await?;
            Ok(Link { client, ssh: Some(child) })
        }
        Via::Tls { host, port, pin, .. } => {
            let client = tls::connect(host, *port, pin, imp.msize).await?;
            Ok(Link { client, ssh: None })
        }
    }
}

/// Attaches as a client will (proving the token, over TLS), and reads the
/// remote daemon's acme session from its `/services`: none where it serves
/// no acme tree. An attach refused (a wrong token) is the import's error.
async fn probe(imp: &Import, client: &Client) -> Result<Option<String>, ImportError> {
    let user = apex_ninep::ns::user_name();
    let attached = match imp.via.prove() {
        Some(prove) => client.attach_proving(&user, "", |c| prove(c, &user, "")).await.map(|(f, _)| f),
        None => client.attach(&user, "").await,
    };
    let root = attached.map_err(|why| ImportError::Protocol { remote: imp.via.address(), why })?;
    let file = client.open_path(root, "services", apex_ninep::fcall::OREAD).await;
    let text = match file {
        Ok(f) => {
            let text = client.read_all(&f).await.unwrap_or_default();
            let _ = client.clunk(f.fid).await;
            text
        }
        Err(_) => Vec::new(),
    };
    let _ = client.clunk(root).await;
    Ok(String::from_utf8_lossy(&text)
        .lines()
        .find_map(|l| l.strip_prefix("acme ").map(|s| s.trim().to_string()))
        .filter(|s| !s.is_empty()))
}

/// The importer: connects, posts, serves every local client over the
/// connection, and reconnects when it drops, until a signal stops it.
/// Returns only on an error before anything was posted, or at the end.
pub async fn serve(imp: Import) -> Result<(), ImportError> {
    let link = connect(&imp).await?;
    let acme = probe(&imp, &link.client).await?;
    let posts = imp.posts(acme.as_deref())?;
    let (current, _) = watch::channel(Up { client: link.client.clone(), acme: acme.clone() });
    let mut posted: Vec<PathBuf> = Vec::new();
    // The first name last: once it answers, the others do.
    for (name, acme_tree) in posts.iter().rev() {
        let listener = match crate::fsys::post::post(&imp.dir, name) {
            Ok(l) => l,
            Err(e) => {
                unpost(&posted);
                return Err(e.into());
            }
        };
        posted.push(imp.dir.join(name));
        let serving =
            Serving { name: name.clone(), remote: imp.via.address(), acme: *acme_tree, prove: imp.via.prove() };
        tokio::spawn(serving.accept(listener, current.subscribe()));
    }
    tracing::info!(remote = %imp.via.address(), "imported as {}", posts.iter().map(|p| p.0.as_str()).collect::<Vec<_>>().join(", "));
    let stop = async {
        use tokio::signal::unix::{signal, SignalKind};
        let (Ok(mut term), Ok(mut int)) = (signal(SignalKind::terminate()), signal(SignalKind::interrupt())) else {
            return std::future::pending().await;
        };
        tokio::select! {
            _ = term.recv() => {}
            _ = int.recv() => {}
        }
    };
    tokio::select! {
        _ = stop => {}
        _ = keep_up(&imp, link, &current) => {}
    }
    unpost(&posted);
    Ok(())
}

fn unpost(posted: &[PathBuf]) {
    for p in posted {
        let _ = std::fs::remove_file(p);
    }
}

/// The link that is up, as local clients are served over it: its client,
/// and the remote's acme session (its `/services`), read at each connect.
#[derive(Clone)]
struct Up {
    client: Client,
    acme: Option<String>,
}

/// Watches the link; when it drops, reconnects, backing off, and hands
/// the new one to whoever connects next, with the acme session the
/// remote serves now (a daemon there started anew may serve another).
/// Never returns.
async fn keep_up(imp: &Import, mut link: Link, current: &watch::Sender<Up>) {
    loop {
        link.client.closed().await;
        link.end().await;
        tracing::warn!(remote = %imp.via.address(), "the connection ended; reconnecting");
        let mut pause = Duration::from_secs(1);
        link = loop {
            match connect(imp).await {
                Ok(l) => break l,
                Err(e) => {
                    tracing::warn!("{e}; again in {}s", pause.as_secs());
                    tokio::time::sleep(pause).await;
                    pause = (pause * 2).min(BACKOFF_MAX);
                }
            }
        };
        tracing::info!(remote = %imp.via.address(), "reconnected");
        let before = current.borrow().acme.clone();
        let acme = match probe(imp, &link.client).await {
            Ok(Some(acme)) => Some(acme),
            // None now (or unread): acme.HOST, posted, keeps the one it had.
            Ok(None) | Err(_) => before.clone(),
        };
        if acme != before {
            tracing::info!(remote = %imp.via.address(), acme = ?acme, "the remote serves another acme session now");
        }
        current.send_replace(Up { client: link.client.clone(), acme });
    }
}

/// One posted name's server.
#[derive(Clone)]
struct Serving {
    name: String,
    remote: String,
    /// Serves the remote's acme tree (`SESSION/acme`, its session as the
    /// link that is up says), not its root.
    acme: bool,
    prove: Option<apex_ninep::forward::Prove>,
}

impl Serving {
    async fn accept(self, listener: tokio::net::UnixListener, current: watch::Receiver<Up>) {
        loop {
            match listener.accept().await {
                Ok((stream, _)) => {
                    tokio::spawn(self.clone().serve(stream, current.clone()));
                }
                Err(e) => {
                    tracing::warn!("{}: accept: {e}", self.name);
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
            }
        }
    }

    /// Serves one local client over the link that is up (waiting a while
    /// for one while it is down); hangs it up when that link ends.
    async fn serve(self, stream: tokio::net::UnixStream, mut current: watch::Receiver<Up>) {
        let up = {
            let up = current.borrow_and_update().clone();
            match up.client.is_closed() {
                false => up,
                true => match tokio::time::timeout(DOWN_WAIT, current.changed()).await {
                    Ok(Ok(())) => current.borrow_and_update().clone(),
                    // Still down: its requests are refused, saying so.
                    _ => up,
                },
            }
        };
        let root = match self.acme {
            true => up.acme.as_ref().map(|session| format!("{session}/acme")),
            false => None,
        };
        let client = up.client;
        let config = Config {
            msize: client.msize(),
            no_auth: format!("{}: authentication not required", self.name),
            auth: None,
        };
        let forward = Arc::new(Forward::new(client.clone(), self.remote, root).proving(self.prove));
        match client.is_closed() {
            // Still down: served all the same, every request refused saying
            // the link is down, until the client hangs up.
            true => {
                let _ = serve_unix(forward, stream, config).await;
            }
            // Up: hung up when the link ends, as a daemon's end hangs up.
            false => {
                tokio::select! {
                    _ = serve_unix(forward, stream, config) => {}
                    _ = client.closed() => {}
                }
            }
        }
    }
}

/// The importer serving `name` in `dir`, if one does: its process id, from
/// the socket's peer (checked to be an `apex import` of this user's).
pub fn importer(dir: &Path, name: &str) -> Option<u32> {
    use std::os::fd::AsRawFd;
    let stream = std::os::unix::net::UnixStream::connect(dir.join(name)).ok()?;
    let mut cred = libc::ucred { pid: 0, uid: 0, gid: 0 };
    let mut len = std::mem::size_of::<libc::ucred>() as libc::socklen_t;
    // SAFETY: getsockopt(2) writes at most `len` bytes into `cred`, ours.
    let r = unsafe {
        libc::getsockopt(
            stream.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_PEERCRED,
            (&mut cred as *mut libc::ucred).cast(),
            &mut len,
        )
    };
    // SAFETY: getuid(2) cannot fail.
    if r != 0 || cred.uid != unsafe { libc::getuid() } {
        return None;
    }
    let cmdline = std::fs::read(format!("/proc/{}/cmdline", cred.pid)).ok()?;
    let words: Vec<&[u8]> = cmdline.split(|b| *b == 0).collect();
    words.iter().any(|w| *w == b"import").then_some(cred.pid as u32)
}
