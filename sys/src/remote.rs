//! Another machine's sessions, reached over ssh: its address
//! (`ssh!USER@HOST!PORT`), the name its import is posted under here
//! (`apex.HOST`), and `apex import` run for a program that wants one up
//! (apex-ui's `-r`, apex-mnt's `ssh!` address) before it dials.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

#[derive(Debug, thiserror::Error)]
pub enum RemoteError {
    #[error("bad address {0:?}: want ssh!HOST, ssh!USER@HOST, ssh!HOST!PORT or ssh!USER@HOST!PORT")]
    Address(String),
    #[error("cannot run {}: {source} (is apex installed beside this program or on $PATH?)", program.display())]
    Run { program: PathBuf, source: std::io::Error },
    /// `apex import` failed: its words.
    #[error("{0}")]
    Import(String),
}

/// `ssh!HOST`, `ssh!USER@HOST`, `ssh!HOST!PORT` or `ssh!USER@HOST!PORT`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Remote {
    pub user: Option<String>,
    pub host: String,
    pub port: Option<u16>,
}

impl Remote {
    pub fn parse(addr: &str) -> Result<Remote, RemoteError> {
        let bad = || RemoteError::Address(addr.to_string());
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
        // Nothing ssh would take for an option, no blanks, and nothing a
        // posted name cannot hold.
        let fine =
            |s: &str| !s.is_empty() && !s.starts_with('-') && !s.contains(|c: char| c.is_whitespace() || c == '/');
        if !fine(host) || user.as_deref().is_some_and(|u| !fine(u)) {
            return Err(bad());
        }
        Ok(Remote { user, host: host.to_string(), port })
    }

    /// The address, as given.
    pub fn address(&self) -> String {
        let mut a = format!("ssh!{}", self.destination());
        if let Some(p) = self.port {
            a += &format!("!{p}");
        }
        a
    }

    /// ssh's destination: `[USER@]HOST`.
    pub fn destination(&self) -> String {
        match &self.user {
            Some(u) => format!("{u}@{}", self.host),
            None => self.host.clone(),
        }
    }

    /// What its import posts its root as: `apex.HOST`.
    pub fn posted_name(&self) -> String {
        format!("apex.{}", self.host)
    }
}

/// `apex` beside the running program, else on the PATH.
pub fn apex_program() -> PathBuf {
    crate::daemon::program("apex")
}

/// Brings up the import of `addr` (`apex import ADDR`, which stays in the
/// background, or finds the one that runs) and returns the socket it
/// posted in the namespace directory `dir`.
pub fn import(addr: &str, dir: &Path) -> Result<PathBuf, RemoteError> {
    let remote = Remote::parse(addr)?;
    let program = apex_program();
    let out = Command::new(&program)
        .args(["import", addr])
        .env("NAMESPACE", dir)
        .stdin(Stdio::null())
        .output()
        .map_err(|source| RemoteError::Run { program: program.clone(), source })?;
    if !out.status.success() {
        let said = String::from_utf8_lossy(&out.stderr);
        return Err(RemoteError::Import(said.trim().trim_start_matches("apex: ").to_string()));
    }
    Ok(dir.join(remote.posted_name()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn addresses() {
        let r = Remote::parse("ssh!alice@build!2222").unwrap();
        assert_eq!((r.user.as_deref(), r.host.as_str(), r.port), (Some("alice"), "build", Some(2222)));
        assert_eq!(r.address(), "ssh!alice@build!2222");
        assert_eq!(r.posted_name(), "apex.build");
        assert_eq!(Remote::parse("ssh!dev").unwrap(), Remote { user: None, host: "dev".into(), port: None });
        for bad in
            ["dev", "ssh!", "ssh!-oProxyCommand=x", "ssh!dev!port", "tcp!dev!1", "ssh!a b", "ssh!@dev", "ssh!a/b"]
        {
            assert!(Remote::parse(bad).is_err(), "{bad}");
        }
    }
}
