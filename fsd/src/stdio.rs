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
    /// Not the user's own directory, closed to others: whoever serves
    /// there could be someone else.
    #[error("apexd --stdio: {0}")]
    Namespace(#[from] apex_ninep::ns::NsError),
    #[error("apexd --stdio: {}: {source}", socket.display())]
    Connect { socket: PathBuf, source: std::io::Error },
    #[error(
        "apexd --stdio: this machine's apexd is version {ours}, the client's apex is {theirs}: run the same \
         version at both ends (apex import --upload copies the client's apexd here)"
    )]
    Version { ours: String, theirs: String },
    #[error("apexd --stdio: relaying: {0}")]
    Io(#[from] std::io::Error),
}

/// The version both ends of a relay must share: what the daemon and the
/// client speak (9P, and the attach protocol inside it) is this build's.
pub const VERSION: &str = env!("CARGO_PKG_VERSION");

/// Refuses a client of another version, saying both.
pub fn check_version(theirs: &str) -> Result<(), RelayError> {
    match theirs == VERSION {
        true => Ok(()),
        false => Err(RelayError::Version { ours: VERSION.to_string(), theirs: theirs.to_string() }),
    }
}

/// The flags a daemon the relay starts is given: the relay's own, less
/// those that are the relay's alone (`--stdio`, `--client-version V`).
pub fn daemon_flags(argv: &[String]) -> Vec<String> {
    let mut flags = Vec::new();
    let mut args = argv.iter();
    while let Some(a) = args.next() {
        match a.as_str() {
            "--stdio" => {}
            "--client-version" => {
                args.next();
            }
            a if a.starts_with("--client-version=") => {}
            _ => flags.push(a.clone()),
        }
    }
    flags
}

/// The namespace directory the relay serves: `--namespace`, else
/// `$NAMESPACE`, else the one of display `:0` whatever `$DISPLAY` says (an
/// ssh connection forwarding X has a display of its own, and the
/// sessions are the machine's, not the connection's).
pub fn namespace_dir(flag: Option<&Path>) -> PathBuf {
    if flag.is_some() || std::env::var_os("NAMESPACE").is_some_and(|v| !v.is_empty()) {
        return apex_ninep::ns::namespace_dir(flag);
    }
    let display = apex_ninep::ns::canonical_display(None);
    PathBuf::from(format!("/tmp/ns.{}.{display}", apex_ninep::ns::user_name()))
}

/// Relays standard input and output to the daemon posted in `dir`,
/// starting it (as `apexd` with `args`, told `dir`) when none answers
/// there. The directory must be the user's own and closed to others, as
/// every client checks. Returns once either side has closed.
pub fn relay(dir: &Path, args: &[String]) -> Result<(), RelayError> {
    let socket = dir.join("apex");
    if dir.exists() {
        apex_ninep::ns::check_dir(dir)?;
    }
    let daemon = match UnixStream::connect(&socket) {
        Ok(d) => d,
        Err(_) => {
            let program = std::env::current_exe().unwrap_or_else(|_| apex_sys::daemon::apexd_program());
            let mut args = args.to_vec();
            if !args.iter().any(|a| a == "--namespace") {
                args.extend(["--namespace".to_string(), dir.display().to_string()]);
            }
            // Another relay may have started one at the same moment, and
            // this one's found the state directory in use: the other's
            // answers.
            if let Err(e) = apex_sys::daemon::start_detached(&program, &args, &socket, START_WAIT) {
                if !answers_soon(&socket) {
                    return Err(e.into());
                }
            }
            apex_ninep::ns::check_dir(dir)?;
            UnixStream::connect(&socket).map_err(|source| RelayError::Connect { socket: socket.clone(), source })?
        }
    };
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
    match down {
        // Whoever read standard output went (ssh hung up): the end.
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(()),
        r => r.map(|_| ()).map_err(RelayError::Io),
    }
}

/// Whether the daemon at `socket` answers within a few seconds.
fn answers_soon(socket: &Path) -> bool {
    let deadline = std::time::Instant::now() + Duration::from_secs(3);
    while std::time::Instant::now() < deadline {
        if UnixStream::connect(socket).is_ok() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    false
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
