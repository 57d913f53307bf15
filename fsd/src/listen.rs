//! `--listen tcp!HOST!PORT`: TLS 1.3 with tokens on any address (the
//! default), or, with `--insecure`, plain 9P on loopback only. A TLS
//! connection answers nothing but Tversion, Tauth and the auth fid's
//! reads and writes until a token is proven (`ninep::srv::auth`); plain 9P
//! sent to a TLS port is told so in a 9P error, then hung up.

use crate::access::tls;
use crate::access::tokens::TokenAuth;
use crate::fsys::Fsys;
use apex_ninep::srv::{serve_conn, serve_split, Config};
use apex_ninep::{Fcall, Msg};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

#[derive(Debug, thiserror::Error)]
pub enum ListenError {
    #[error("bad --listen {0:?}: want tcp!HOST!PORT")]
    Address(String),
    #[error("bad host in --listen {0:?}: want an IP address or localhost")]
    Host(String),
    #[error(
        "--listen {0:?} --insecure: plain TCP is served on loopback addresses only (127.0.0.1, ::1, localhost); \
         drop --insecure to serve TLS with tokens on any address"
    )]
    NotLoopback(String),
    #[error(
        "--listen {0:?} serves TLS, whose certificate and tokens are kept in the state directory: drop \
         --ephemeral, or give --insecure for plain TCP on loopback"
    )]
    NoStateDir(String),
    #[error(transparent)]
    Tls(#[from] tls::TlsError),
}

/// `tcp!HOST!PORT` as a socket address; plain (`insecure`) only on
/// loopback.
pub fn parse(addr: &str, insecure: bool) -> Result<SocketAddr, ListenError> {
    let ["tcp", host, port] = addr.split('!').collect::<Vec<_>>()[..] else {
        return Err(ListenError::Address(addr.to_string()));
    };
    let port: u16 = port.parse().map_err(|_| ListenError::Address(addr.to_string()))?;
    let ip: std::net::IpAddr = match host {
        "localhost" => std::net::Ipv4Addr::LOCALHOST.into(),
        h => h.parse().map_err(|_| ListenError::Host(addr.to_string()))?,
    };
    if insecure && !ip.is_loopback() {
        return Err(ListenError::NotLoopback(addr.to_string()));
    }
    Ok(SocketAddr::new(ip, port))
}

/// A TLS listener's settings: the daemon's identity and where its tokens
/// are.
#[derive(Clone)]
pub struct Tls {
    pub config: Arc<rustls::ServerConfig>,
    pub fingerprint: String,
    pub state_dir: PathBuf,
}

impl Tls {
    pub fn new(addr: &str, state_dir: Option<PathBuf>) -> Result<Tls, ListenError> {
        let state_dir = state_dir.ok_or_else(|| ListenError::NoStateDir(addr.to_string()))?;
        let (config, fingerprint) = tls::server(&state_dir)?;
        Ok(Tls { config, fingerprint, state_dir })
    }
}

/// How long a connection may take to say its first bytes and finish the
/// TLS handshake.
const HANDSHAKE_WAIT: Duration = Duration::from_secs(10);
/// How long a connection may take to prove a token after that.
const PROVE_WAIT: Duration = Duration::from_secs(30);

/// Serves `listener`'s connections: TLS with `tls`, else plain 9P.
pub async fn serve(listener: tokio::net::TcpListener, tree: Arc<Fsys>, config: Config, tls: Option<Tls>) {
    let mut pause = Duration::from_millis(10);
    loop {
        let (conn, peer) = match listener.accept().await {
            Ok(c) => {
                pause = Duration::from_millis(10);
                c
            }
            Err(e) => {
                // Descriptors ran out: said, and served on after a pause.
                tracing::warn!("tcp accept: {e}");
                tokio::time::sleep(pause).await;
                pause = (pause * 2).min(Duration::from_secs(1));
                continue;
            }
        };
        tracing::info!(%peer, tls = tls.is_some(), "tcp connection");
        let _ = conn.set_nodelay(true);
        let (tree, config) = (tree.clone(), config.clone());
        match &tls {
            None => {
                tokio::spawn(serve_conn(tree, conn, config));
            }
            Some(tls) => {
                tokio::spawn(serve_tls(conn, tree, config, tls.clone()));
            }
        }
    }
}

async fn serve_tls(conn: tokio::net::TcpStream, tree: Arc<Fsys>, config: Config, tls: Tls) {
    let mut first = [0u8; 7];
    let peeked = tokio::time::timeout(HANDSHAKE_WAIT, conn.peek(&mut first)).await;
    let Ok(Ok(n)) = peeked else { return };
    if tls::looks_like_9p(&first[..n]) {
        refuse_plain(conn, u16::from_le_bytes([first[5], first[6]])).await;
        return;
    }
    let (reader, writer) =
        match tokio::time::timeout(HANDSHAKE_WAIT, crate::tls::serve::accept(conn, tls.config.clone())).await {
            Ok(Ok(halves)) => halves,
            Ok(Err(e)) => {
                tracing::info!("tls handshake: {e}");
                return;
            }
            Err(_) => return,
        };
    let proven = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let auth = Arc::new(TokenAuth { state_dir: tls.state_dir.clone(), proven: proven.clone() });
    let config = Config { auth: Some(auth), ..config };
    let serving = serve_split(tree, reader, writer, config);
    tokio::pin!(serving);
    // A connection that proves nothing in time is let go: nobody holds
    // the daemon's memory without a token.
    let outcome = tokio::select! {
        r = &mut serving => Some(r),
        _ = tokio::time::sleep(PROVE_WAIT) => None,
    };
    let outcome = match outcome {
        Some(r) => r,
        None if proven.load(std::sync::atomic::Ordering::Acquire) => serving.await,
        None => {
            tracing::info!("tls connection proved no token within {}s: closed", PROVE_WAIT.as_secs());
            return;
        }
    };
    if let Err(e) = outcome {
        tracing::info!(error = %e, "tls connection closed");
    }
}

/// Plain 9P to a TLS port: one Rerror on the Tversion's tag, saying what
/// to do instead, then the end.
async fn refuse_plain(mut conn: tokio::net::TcpStream, tag: u16) {
    use tokio::io::AsyncWriteExt;
    let ename = "this port serves 9P inside TLS 1.3 with a token: apex import tcp!HOST!PORT --pin sha256:... \
                 --token FILE reaches it (apexd prints the pin at start; apex token new makes a token)";
    let frame = apex_ninep::to_bytes(&Msg { tag, body: Fcall::Rerror { ename: ename.into() } });
    let _ = tokio::time::timeout(HANDSHAKE_WAIT, conn.write_all(&frame)).await;
    let _ = conn.shutdown().await;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn addresses() {
        assert!(parse("tcp!0.0.0.0!5640", false).is_ok(), "TLS on any address");
        assert!(matches!(parse("tcp!0.0.0.0!5640", true), Err(ListenError::NotLoopback(_))));
        assert!(parse("tcp!localhost!5640", true).is_ok());
        assert!(matches!(parse("tcp!x!y", false), Err(ListenError::Address(_))));
        assert!(matches!(parse("tcp!host.example!1", false), Err(ListenError::Host(_))));
    }
}
