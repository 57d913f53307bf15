//! The ssh side of an import: the command that runs `apexd --stdio` there through the system's own `ssh`
//! (its config, keys and agent apply), what its failures mean, and
//! `--upload`, which copies this machine's `apexd` into a versioned path
//! there.

use super::ImportError;
use crate::stdio::VERSION;
use apex_ninep::{Client, ClientError};
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::Duration;

pub use apex_sys::remote::Remote;

/// The ssh command line up to the remote command: `$APEX_SSH` (a
/// command and its options, split at blanks, as rsync's `-e`) or
/// `ssh`, then the port and the destination.
fn command(remote: &Remote, ssh: &[String]) -> tokio::process::Command {
    let mut cmd = tokio::process::Command::new(&ssh[0]);
    cmd.args(&ssh[1..]);
    // Refused without a terminal rather than asking where none reads; a
    // link that went silent (a network gone, no reset) noticed within a
    // minute, so the import reconnects.
    cmd.args(["-o", "BatchMode=yes", "-o", "ServerAliveInterval=15", "-o", "ServerAliveCountMax=3"]);
    if let Some(p) = remote.port {
        cmd.arg("-p").arg(p.to_string());
    }
    cmd.arg("--").arg(remote.destination());
    cmd
}

/// `apexd --stdio` there, its standard input and output `io`, its
/// standard error piped: the uploaded one (`--upload`'s versioned
/// path) where there is one, else `apexd` on the PATH, unless
/// `apexd` names one.
pub fn relay(
    remote: &Remote,
    ssh: &[String],
    apexd: Option<&str>,
    io: std::os::fd::OwnedFd,
) -> std::io::Result<tokio::process::Child> {
    let script = match apexd {
        Some(path) => format!("exec {} --stdio --client-version {VERSION}", quote(path)),
        None => {
            format!("p=\"$HOME\"/{UPLOADED}; [ -x \"$p\" ] || p=apexd; exec \"$p\" --stdio --client-version {VERSION}")
        }
    };
    let input = io.try_clone()?;
    command(remote, ssh)
        .arg(format!("sh -c {}", quote(&script)))
        .stdin(Stdio::from(input))
        .stdout(Stdio::from(io))
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
}

/// Copies `apexd` (this machine's) to the remote's versioned path,
/// where a later import finds it; refused where the remote's system
/// or architecture is not this one's.
pub async fn upload(remote: &Remote, ssh: &[String], apexd: &std::path::Path) -> Result<(), ImportError> {
    let (os, arch) = (uname_s(), std::env::consts::ARCH);
    let script = format!(
            "set -e; s=$(uname -s); m=$(uname -m); \
             if [ \"$s\" != {os} ] || [ \"$m\" != {arch} ]; then \
               echo \"this machine is $s $m, the apexd to upload is {os} {arch}: install apex here instead\" >&2; exit 3; fi; \
             mkdir -p \"$HOME\"/{DIR}; t=\"$HOME\"/{UPLOADED}.part.$$; cat > \"$t\"; chmod 755 \"$t\"; mv \"$t\" \"$HOME\"/{UPLOADED}"
        );
    let binary = std::fs::File::open(apexd)
        .map_err(|e| ImportError::Upload { remote: remote.address(), why: format!("{}: {e}", apexd.display()) })?;
    let out = command(remote, ssh)
        .arg(format!("sh -c {}", quote(&script)))
        .stdin(Stdio::from(binary))
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .output()
        .await
        .map_err(|e| ImportError::Ssh { program: ssh[0].clone(), source: e })?;
    match out.status.success() {
        true => Ok(()),
        false => Err(ImportError::Upload {
            remote: remote.address(),
            why: String::from_utf8_lossy(&out.stderr).trim().to_string(),
        }),
    }
}

/// Runs ssh and speaks Tversion through it (asking for `msize`); on
/// failure, says why from what ssh and the remote said.
pub async fn connect(
    remote: &Remote,
    ssh: &[String],
    apexd: Option<&str>,
    msize: u32,
) -> Result<(Client, tokio::process::Child), ImportError> {
    let (ours, theirs) = std::os::unix::net::UnixStream::pair()?;
    let program = ssh[0].clone();
    let mut child = relay(remote, ssh, apexd, theirs.into()).map_err(|source| ImportError::Ssh { program, source })?;
    let said = Arc::new(Mutex::new(String::new()));
    let listening = child.stderr.take().map(|e| tokio::spawn(keep_words(e, said.clone(), remote.address())));
    let outcome = tokio::time::timeout(super::CONNECT_WAIT, Client::handshake(ours, msize)).await;
    let error = match outcome {
        Ok(Ok(client)) => return Ok((client, child)),
        Ok(Err(ClientError::Hangup)) | Ok(Err(ClientError::Io(_))) => None,
        Ok(Err(why)) => Some(ImportError::Protocol { remote: remote.address(), why }),
        Err(_) => Some(ImportError::Timeout { remote: remote.address(), wait: super::CONNECT_WAIT }),
    };
    let status = match tokio::time::timeout(Duration::from_secs(5), child.wait()).await {
        Ok(Ok(status)) => status.code(),
        _ => {
            let _ = child.kill().await;
            None
        }
    };
    if let Some(listening) = listening {
        let _ = tokio::time::timeout(Duration::from_secs(1), listening).await;
    }
    let said = said.lock().expect("words lock").clone();
    Err(error.unwrap_or_else(|| failure(remote, apexd, status, &said)))
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

/// Where `--upload` puts `apexd` below the remote's `$HOME`: named by
/// version, so imports of different versions each find their own.
const DIR: &str = ".local/lib/apex";
const UPLOADED: &str = concat!(".local/lib/apex/apexd-", env!("CARGO_PKG_VERSION"));

/// The kernel's name as `uname -s` says it.
fn uname_s() -> &'static str {
    match std::env::consts::OS {
        "linux" => "Linux",
        "macos" => "Darwin",
        "freebsd" => "FreeBSD",
        "openbsd" => "OpenBSD",
        "netbsd" => "NetBSD",
        other => other,
    }
}

/// `s` quoted for sh: in single quotes, each of its own as `'\''`.
fn quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', r"'\''"))
}

/// What the relay's failure to answer means, from what ssh and the remote
/// said and how ssh exited: said plainly, with what to do.
pub fn failure(remote: &Remote, apexd: Option<&str>, status: Option<i32>, said: &str) -> ImportError {
    let said = said.trim().to_string();
    let remote_addr = remote.address();
    // ssh's own failure (no connection, no key taken, an identity file
    // missing): its words, not a guess about apexd.
    if status == Some(255) {
        return ImportError::Relay { remote: remote_addr, status, said };
    }
    if said.contains("--client-version") && (said.contains("unexpected argument") || said.contains("unrecognized")) {
        return ImportError::Version {
            remote: remote_addr,
            why: format!(
                "its apexd is older than this apex ({VERSION}) and cannot say its version; run the same version at \
                 both ends (apex import --upload copies this one there)"
            ),
        };
    }
    if said.contains("apexd --stdio: this machine's apexd is version") {
        return ImportError::Version { remote: remote_addr, why: said };
    }
    if status == Some(127) || said.contains("not found") || said.contains("No such file") {
        let which = apexd.map_or("apexd is not on its PATH".to_string(), |p| format!("{p} is not there"));
        return ImportError::NoApexd { remote: remote_addr, which, said };
    }
    ImportError::Relay { remote: remote_addr, status, said }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quoting() {
        assert_eq!(quote("it's"), r"'it'\''s'");
    }
}
