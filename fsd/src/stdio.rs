//! `apexd --stdio`: 9P on standard input and output, relayed to the
//! user's long-lived daemon on this machine (its `apex` socket in the
//! namespace directory), which is started detached when none answers, so
//! a session outlives the connection that carries it (ssh's) exactly as
//! it outlives a UI. The relay only copies bytes: every 9P request is the
//! daemon's to answer.

use std::io::{Read, Write};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// How long a daemon started here may take to answer.
pub const START_WAIT: Duration = Duration::from_secs(20);

#[derive(Debug, thiserror::Error)]
pub enum RelayError {
    #[error("apexd --stdio: {0}")]
    Start(#[from] apex_sys::daemon::StartError),
    #[error("apexd --stdio: {}: {source}", socket.display())]
    Connect { socket: PathBuf, source: std::io::Error },
    #[error("apexd --stdio: relaying: {0}")]
    Io(#[from] std::io::Error),
}

/// Relays standard input and output to the daemon at `socket`, starting
/// it (as `apexd` with `args`) when none answers there. Returns once
/// either side has closed.
pub fn relay(socket: &Path, args: &[String]) -> Result<(), RelayError> {
    if UnixStream::connect(socket).is_err() {
        let program = std::env::current_exe().unwrap_or_else(|_| apex_sys::daemon::apexd_program());
        apex_sys::daemon::start_detached(&program, args, socket, START_WAIT)?;
    }
    let daemon =
        UnixStream::connect(socket).map_err(|source| RelayError::Connect { socket: socket.to_path_buf(), source })?;
    let to_daemon = daemon.try_clone()?;
    // Standard input to the daemon; its end (ssh gone) ends the daemon's
    // side of the connection, which the daemon takes as a hang-up.
    let upstream = std::thread::spawn(move || {
        let mut to_daemon = to_daemon;
        let _ = copy(&mut std::io::stdin().lock(), &mut to_daemon);
        let _ = to_daemon.shutdown(std::net::Shutdown::Write);
    });
    let mut from_daemon = daemon;
    let down = copy(&mut from_daemon, &mut std::io::stdout().lock());
    // The daemon hung up: nothing more is read from standard input.
    let _ = from_daemon.shutdown(std::net::Shutdown::Both);
    drop(upstream);
    down.map(|_| ()).map_err(RelayError::Io)
}

/// Copies until the end, writing each read at once (a reply must not
/// wait in a buffer for the next).
fn copy(from: &mut impl Read, to: &mut impl Write) -> std::io::Result<u64> {
    let mut buf = vec![0u8; 64 << 10];
    let mut total = 0;
    loop {
        let n = match from.read(&mut buf) {
            Ok(0) => return Ok(total),
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        to.write_all(&buf[..n])?;
        to.flush()?;
        total += n as u64;
    }
}
