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

use apex_ninep::forward::Forward;
use apex_ninep::srv::{serve_unix, Config};
use apex_ninep::{Client, ClientError};
use ssh::Remote;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::watch;

#[derive(Debug, thiserror::Error)]
pub enum ImportError {
    #[error("{0}")]
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
    #[error("{remote} serves no acme tree (its daemon runs with --no-acme): there is nothing to post as {name}")]
    NoAcme { remote: String, name: String },
    #[error("{0}")]
    Post(#[from] crate::fsys::post::PostError),
    /// The importer started in the background failed: its words.
    #[error("{0}")]
    Failed(String),
    #[error("{0}")]
    Start(apex_sys::daemon::StartError),
    #[error("nothing is imported as {name} in {}", dir.display())]
    NotImported { name: String, dir: PathBuf },
    #[error("apex import: {0}")]
    Io(#[from] std::io::Error),
}

/// An import's settings.
#[derive(Clone, Debug)]
pub struct Import {
    pub remote: Remote,
    /// The ssh command and its options.
    pub ssh: Vec<String>,
    /// `apexd` on the remote, when not found there by itself.
    pub apexd: Option<String>,
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
    /// The names posted, each with the attach name a client's empty one
    /// stands for there (`SESSION/acme` for the acme tree), given the
    /// remote's acme session. The first is posted last: whoever waits for
    /// it finds the others there.
    fn posts(&self, acme: Option<&str>) -> Result<Vec<(String, Option<String>)>, ImportError> {
        let acme_root = acme.map(|s| format!("{s}/acme"));
        match &self.name {
            // `-n acme` (win dials `acme`) serves the acme tree.
            Some(n) if n == "acme" || n.starts_with("acme.") => match acme_root {
                Some(root) => Ok(vec![(n.clone(), Some(root))]),
                None => Err(ImportError::NoAcme { remote: self.remote.address(), name: n.clone() }),
            },
            Some(n) => Ok(vec![(n.clone(), None)]),
            None => {
                let mut posts = vec![(self.remote.posted_name(), None)];
                if let Some(root) = acme_root {
                    posts.push((format!("acme.{}", self.remote.host), Some(root)));
                }
                Ok(posts)
            }
        }
    }

    /// The name whose socket answering means the import is up.
    pub fn first_name(&self) -> String {
        self.name.clone().unwrap_or_else(|| self.remote.posted_name())
    }
}

/// One connection to the remote: the client over it, and ssh.
struct Link {
    client: Client,
    ssh: tokio::process::Child,
}

/// Runs ssh and speaks Tversion through it; on failure, says why from
/// what ssh and the remote said.
async fn connect(imp: &Import) -> Result<Link, ImportError> {
    let (ours, theirs) = std::os::unix::net::UnixStream::pair()?;
    let program = imp.ssh[0].clone();
    let mut ssh = ssh::relay(&imp.remote, &imp.ssh, imp.apexd.as_deref(), theirs.into())
        .map_err(|source| ImportError::Ssh { program, source })?;
    let said = Arc::new(Mutex::new(String::new()));
    let listening = ssh.stderr.take().map(|e| tokio::spawn(keep_words(e, said.clone(), imp.remote.address())));
    let outcome = tokio::time::timeout(CONNECT_WAIT, Client::handshake(ours, imp.msize)).await;
    let error = match outcome {
        Ok(Ok(client)) => return Ok(Link { client, ssh }),
        Ok(Err(ClientError::Hangup)) | Ok(Err(ClientError::Io(_))) => None,
        Ok(Err(why)) => Some(ImportError::Protocol { remote: imp.remote.address(), why }),
        Err(_) => Some(ImportError::Timeout { remote: imp.remote.address(), wait: CONNECT_WAIT }),
    };
    let status = match tokio::time::timeout(Duration::from_secs(5), ssh.wait()).await {
        Ok(Ok(status)) => status.code(),
        _ => {
            let _ = ssh.kill().await;
            None
        }
    };
    if let Some(listening) = listening {
        let _ = tokio::time::timeout(Duration::from_secs(1), listening).await;
    }
    let said = said.lock().expect("words lock").clone();
    Err(error.unwrap_or_else(|| ssh::failure(&imp.remote, imp.apexd.as_deref(), status, &said)))
}

/// Keeps the last of what ssh and the remote say (for the error, if the
/// connection fails) and logs it.
async fn keep_words(stderr: tokio::process::ChildStderr, said: Arc<Mutex<String>>, remote: String) {
    use tokio::io::AsyncBufReadExt;
    let mut lines = tokio::io::BufReader::new(stderr).lines();
    while let Ok(Some(line)) = lines.next_line().await {
        tracing::info!(%remote, "{line}");
        let mut said = said.lock().expect("words lock");
        if said.len() < 4096 {
            if !said.is_empty() {
                said.push('\n');
            }
            said.push_str(&line);
        }
    }
}

/// The remote daemon's acme session, from its `/services`; none where it
/// serves no acme tree.
async fn acme_session(client: &Client) -> Option<String> {
    let root = client.attach(&apex_ninep::ns::user_name(), "").await.ok()?;
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
    String::from_utf8_lossy(&text)
        .lines()
        .find_map(|l| l.strip_prefix("acme ").map(|s| s.trim().to_string()))
        .filter(|s| !s.is_empty())
}

/// The importer: connects, posts, serves every local client over the
/// connection, and reconnects when it drops, until a signal stops it.
/// Returns only on an error before anything was posted, or at the end.
pub async fn serve(imp: Import) -> Result<(), ImportError> {
    let link = connect(&imp).await?;
    let acme = acme_session(&link.client).await;
    let posts = imp.posts(acme.as_deref())?;
    let (current, _) = watch::channel(link.client.clone());
    let mut posted: Vec<PathBuf> = Vec::new();
    // The first name last: once it answers, the others do.
    for (name, root) in posts.iter().rev() {
        let listener = match crate::fsys::post::post(&imp.dir, name) {
            Ok(l) => l,
            Err(e) => {
                unpost(&posted);
                return Err(e.into());
            }
        };
        posted.push(imp.dir.join(name));
        let serving = Serving { name: name.clone(), remote: imp.remote.address(), root: root.clone() };
        tokio::spawn(serving.accept(listener, current.subscribe()));
    }
    tracing::info!(remote = %imp.remote.address(), "imported as {}", posts.iter().map(|p| p.0.as_str()).collect::<Vec<_>>().join(", "));
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

/// Watches the link; when it drops, reconnects, backing off, and hands
/// the new one to whoever connects next. Never returns.
async fn keep_up(imp: &Import, mut link: Link, current: &watch::Sender<Client>) {
    loop {
        link.client.closed().await;
        let _ = link.ssh.kill().await;
        tracing::warn!(remote = %imp.remote.address(), "the connection ended; reconnecting");
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
        tracing::info!(remote = %imp.remote.address(), "reconnected");
        current.send_replace(link.client.clone());
    }
}

/// One posted name's server.
#[derive(Clone)]
struct Serving {
    name: String,
    remote: String,
    root: Option<String>,
}

impl Serving {
    async fn accept(self, listener: tokio::net::UnixListener, current: watch::Receiver<Client>) {
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
    async fn serve(self, stream: tokio::net::UnixStream, mut current: watch::Receiver<Client>) {
        let client = {
            let up = current.borrow_and_update().clone();
            match up.is_closed() {
                false => up,
                true => match tokio::time::timeout(DOWN_WAIT, current.changed()).await {
                    Ok(Ok(())) => current.borrow_and_update().clone(),
                    // Still down: its requests are refused, saying so.
                    _ => up,
                },
            }
        };
        let config = Config { msize: client.msize(), no_auth: format!("{}: authentication not required", self.name), auth: None };
        let forward = Arc::new(Forward::new(client.clone(), self.remote, self.root));
        tokio::select! {
            _ = serve_unix(forward, stream, config) => {}
            _ = client.closed() => {}
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
