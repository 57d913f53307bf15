//! The ssh side of an import: the address (`ssh!USER@HOST!PORT`), the
//! command that runs `apexd --stdio` there through the system's own `ssh`
//! (its config, keys and agent apply), what its failures mean, and
//! `--upload`, which copies this machine's `apexd` into a versioned path
//! there.

use super::ImportError;
use crate::stdio::VERSION;
use std::process::Stdio;

/// Where an import reaches: `ssh!HOST`, `ssh!USER@HOST`, `ssh!HOST!PORT`
/// or `ssh!USER@HOST!PORT`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Remote {
    pub user: Option<String>,
    pub host: String,
    pub port: Option<u16>,
}

impl Remote {
    pub fn parse(addr: &str) -> Result<Remote, ImportError> {
        let bad = || ImportError::Address(addr.to_string());
        let parts: Vec<&str> = addr.split('!').collect();
        let (target, port) = match parts.as_slice() {
            ["ssh", target] => (*target, None),
            ["ssh", target, port] => (*target, Some(port.parse::<u16>().map_err(|_| bad())?)),
            _ => return Err(bad()),
        };
        let (user, host) = match target.split_once('@') {
            Some((user, host)) => (Some(user.to_string()), host),
            None => (None, target),
        };
        // Nothing ssh would take for an option, and no blanks.
        let fine = |s: &str| !s.is_empty() && !s.starts_with('-') && !s.contains(char::is_whitespace);
        if !fine(host) || user.as_deref().is_some_and(|u| !fine(u)) {
            return Err(bad());
        }
        Ok(Remote { user, host: host.to_string(), port })
    }

    /// The address as given, for messages.
    pub fn address(&self) -> String {
        let mut a = format!("ssh!{}", self.destination());
        if let Some(p) = self.port {
            a += &format!("!{p}");
        }
        a
    }

    /// ssh's destination: `[USER@]HOST`.
    fn destination(&self) -> String {
        match &self.user {
            Some(u) => format!("{u}@{}", self.host),
            None => self.host.clone(),
        }
    }

    /// The ssh command line up to the remote command: `$APEX_SSH` (a
    /// command and its options, split at blanks, as rsync's `-e`) or
    /// `ssh`, then the port and the destination.
    fn ssh(&self, ssh: &[String]) -> tokio::process::Command {
        let mut cmd = tokio::process::Command::new(&ssh[0]);
        cmd.args(&ssh[1..]);
        // Refused without a terminal rather than asking where none reads.
        cmd.arg("-o").arg("BatchMode=yes");
        if let Some(p) = self.port {
            cmd.arg("-p").arg(p.to_string());
        }
        cmd.arg("--").arg(self.destination());
        cmd
    }

    /// `apexd --stdio` there, its standard input and output `io`, its
    /// standard error piped: the uploaded one (`--upload`'s versioned
    /// path) where there is one, else `apexd` on the PATH, unless
    /// `apexd` names one.
    pub fn relay(&self, ssh: &[String], apexd: Option<&str>, io: std::os::fd::OwnedFd) -> std::io::Result<tokio::process::Child> {
        let script = match apexd {
            Some(path) => format!("exec {} --stdio --client-version {VERSION}", quote(path)),
            None => format!(
                "p=\"$HOME\"/{UPLOADED}; [ -x \"$p\" ] || p=apexd; exec \"$p\" --stdio --client-version {VERSION}"
            ),
        };
        let input = io.try_clone()?;
        self.ssh(ssh)
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
    pub async fn upload(&self, ssh: &[String], apexd: &std::path::Path) -> Result<(), ImportError> {
        let (os, arch) = (uname_s(), std::env::consts::ARCH);
        let script = format!(
            "set -e; s=$(uname -s); m=$(uname -m); \
             if [ \"$s\" != {os} ] || [ \"$m\" != {arch} ]; then \
               echo \"this machine is $s $m, the apexd to upload is {os} {arch}: install apex here instead\" >&2; exit 3; fi; \
             mkdir -p \"$HOME\"/{DIR}; t=\"$HOME\"/{UPLOADED}.part.$$; cat > \"$t\"; chmod 755 \"$t\"; mv \"$t\" \"$HOME\"/{UPLOADED}"
        );
        let binary = std::fs::File::open(apexd)
            .map_err(|e| ImportError::Upload { remote: self.address(), why: format!("{}: {e}", apexd.display()) })?;
        let out = self
            .ssh(ssh)
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
                remote: self.address(),
                why: String::from_utf8_lossy(&out.stderr).trim().to_string(),
            }),
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
    fn addresses() {
        let r = Remote::parse("ssh!alice@build!2222").unwrap();
        assert_eq!((r.user.as_deref(), r.host.as_str(), r.port), (Some("alice"), "build", Some(2222)));
        assert_eq!(r.address(), "ssh!alice@build!2222");
        assert_eq!(Remote::parse("ssh!dev").unwrap(), Remote { user: None, host: "dev".into(), port: None });
        for bad in ["dev", "ssh!", "ssh!-oProxyCommand=x", "ssh!dev!port", "tcp!dev!1", "ssh!a b", "ssh!@dev"] {
            assert!(Remote::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn quoting() {
        assert_eq!(quote("it's"), r"'it'\''s'");
    }
}
