//! The TLS side of an import: TCP to `--listen tcp!HOST!PORT`, TLS 1.3
//! trusting the pinned certificate alone, and the 9P client over it,
//! which reads and writes a socket of its own: a task moves the bytes
//! between that socket and the TLS stream.

use super::ImportError;
use apex_ninep::Client;
use std::time::Duration;

/// Connects, verifies the pin, and speaks Tversion (asking for `msize`).
pub async fn connect(
    host: &str,
    port: u16,
    pin: &str,
    msize: u32,
) -> Result<(Client, tokio::task::JoinHandle<()>), ImportError> {
    let remote = format!("tcp!{host}!{port}");
    let config =
        crate::access::tls::client(pin).map_err(|e| ImportError::Tls { remote: remote.clone(), why: e.to_string() })?;
    let wait = super::CONNECT_WAIT;
    let tcp = tokio::time::timeout(wait, tokio::net::TcpStream::connect((host, port)))
        .await
        .map_err(|_| ImportError::Timeout { remote: remote.clone(), wait })?
        .map_err(|e| ImportError::Tls { remote: remote.clone(), why: e.to_string() })?;
    let _ = tcp.set_nodelay(true);
    let connector = tokio_rustls::TlsConnector::from(config);
    let tls = tokio::time::timeout(wait, connector.connect(crate::access::tls::server_name(), tcp))
        .await
        .map_err(|_| ImportError::Timeout { remote: remote.clone(), wait })?
        .map_err(|e| ImportError::Tls { remote: remote.clone(), why: e.to_string() })?;
    let (ours, theirs) = tokio::net::UnixStream::pair()?;
    let task = tokio::spawn(async move {
        let (mut tls, mut theirs) = (tls, theirs);
        let _ = tokio::io::copy_bidirectional(&mut tls, &mut theirs).await;
    });
    let handshake = tokio::time::timeout(Duration::from_secs(30), Client::handshake(ours, msize)).await;
    match handshake {
        Ok(Ok(client)) => Ok((client, task)),
        Ok(Err(why)) => {
            task.abort();
            Err(ImportError::Protocol { remote, why })
        }
        Err(_) => {
            task.abort();
            Err(ImportError::Timeout { remote, wait: Duration::from_secs(30) })
        }
    }
}
