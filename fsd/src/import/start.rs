//! `apex import`'s command: the importer started in the background (as
//! the daemon is, detached, waited for until its first name answers),
//! found again (an import already up is left as it is) and stopped.

use super::{Import, ImportError};
use std::time::Duration;

/// What `apex import` did.
#[derive(Debug, PartialEq, Eq)]
pub enum Started {
    /// An importer of this name answers already: left as it is.
    Already {
        pid: u32,
    },
    Started,
}

/// Starts the importer in the background (`apex import --foreground`,
/// `args` its flags), after `--upload` if asked, unless one answers
/// already; returns once it has posted its names, or with its error.
pub fn start(imp: &Import, args: &[String], upload: bool) -> Result<Started, ImportError> {
    if let Some(pid) = super::importer(&imp.dir, &imp.first_name()) {
        // Another import under the same name (another user, another
        // daemon of the host) is not this one.
        let theirs = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
        let theirs = theirs.split(|b| *b == 0).rfind(|w| !w.is_empty()).unwrap_or_default();
        let theirs = String::from_utf8_lossy(theirs).to_string();
        if theirs != imp.via.address() {
            return Err(ImportError::NameTaken { name: imp.first_name(), theirs });
        }
        return Ok(Started::Already { pid });
    }
    if let (true, super::Via::Ssh { remote, ssh, .. }) = (upload, &imp.via) {
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
        rt.block_on(super::ssh::upload(remote, ssh, &apex_sys::daemon::apexd_program()))?;
    }
    let program = std::env::current_exe()?;
    let socket = imp.dir.join(imp.first_name());
    let wait = super::CONNECT_WAIT + Duration::from_secs(5);
    match apex_sys::daemon::start_detached(&program, args, &socket, wait) {
        Ok(()) => Ok(Started::Started),
        // Its own words: what went wrong, said as it says it.
        Err(apex_sys::daemon::StartError::Failed { said, .. }) if !said.is_empty() => {
            // Its error, from its last `apex:` line on (what it logged
            // before, what ssh said, is in the error already).
            let error = said.rfind("apex: ").map_or(&*said, |at| &said[at + "apex: ".len()..]);
            Err(ImportError::Failed(error.to_string()))
        }
        Err(e) => Err(ImportError::Start(e)),
    }
}

/// Stops the importer serving `name` in `dir`, and waits until its
/// names are gone.
pub fn stop(dir: &std::path::Path, name: &str) -> Result<u32, ImportError> {
    let name = name.to_string();
    let Some(pid) = super::importer(dir, &name) else {
        return Err(ImportError::NotImported { name, dir: dir.to_path_buf() });
    };
    // SAFETY: kill(2) with plain integers.
    unsafe { libc::kill(pid as i32, libc::SIGTERM) };
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    while dir.join(&name).exists() && std::time::Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    Ok(pid)
}

/// `apex import`'s flags.
pub struct Command {
    pub name: Option<String>,
    pub remote_apexd: Option<String>,
    pub upload: bool,
    pub stop: bool,
    /// The importer itself (started by the others).
    pub foreground: bool,
    pub msize: u32,
    pub pin: Option<String>,
    pub token: Option<std::path::PathBuf>,
    pub addr: String,
}

impl Command {
    /// The import `addr` names: `ssh!...`, or `tcp!HOST!PORT` with a pin
    /// and a token.
    fn import(&self) -> Result<Import, ImportError> {
        let via = match self.addr.split('!').collect::<Vec<_>>()[..] {
            ["tcp", host, _] if host.is_empty() || host.contains(['/', ' ']) || host.starts_with('.') => {
                return Err(apex_sys::remote::RemoteError::Address(self.addr.clone()).into());
            }
            ["tcp", host, port] => {
                let (Some(pin), Some(token)) = (&self.pin, &self.token) else {
                    return Err(ImportError::TlsNeeds(self.addr.clone()));
                };
                let port = port.parse().map_err(|_| apex_sys::remote::RemoteError::Address(self.addr.clone()))?;
                crate::access::tls::check_pin(pin)
                    .map_err(|e| ImportError::Tls { remote: self.addr.clone(), why: e.to_string() })?;
                let token = crate::access::tokens::Held::read(token)?;
                super::Via::Tls { host: host.to_string(), port, pin: pin.clone(), token }
            }
            _ => super::Via::Ssh {
                remote: super::Remote::parse(&self.addr)?,
                ssh: super::ssh_command(),
                apexd: self.remote_apexd.clone(),
            },
        };
        Ok(Import { via, dir: apex_ninep::ns::namespace_dir(None), name: self.name.clone(), msize: self.msize })
    }

    /// The flags of the importer started in the background.
    fn foreground_flags(&self) -> Vec<String> {
        let mut flags = vec!["import".to_string(), "--foreground".to_string(), format!("--msize={}", self.msize)];
        let mut flag = |name: &str, value: Option<String>| {
            if let Some(v) = value {
                flags.extend([name.to_string(), v]);
            }
        };
        flag("-n", self.name.clone());
        flag("--remote-apexd", self.remote_apexd.clone());
        flag("--pin", self.pin.clone());
        flag("--token", self.token.as_ref().map(|t| t.display().to_string()));
        flags.push(self.addr.clone());
        flags
    }
}

/// Runs `apex import`: stops an importer, is one, or starts one in the
/// background; what it did, to say.
pub fn command(cmd: Command) -> Result<String, ImportError> {
    if cmd.stop {
        // Only the name is needed (no pin or token to stop a TLS import).
        let parts: Vec<&str> = cmd.addr.split('!').collect();
        let name = match (&cmd.name, parts.as_slice()) {
            (Some(n), _) => n.clone(),
            (None, ["tcp", host, _]) => format!("apex.{host}"),
            (None, _) => super::Remote::parse(&cmd.addr)?.posted_name(),
        };
        let pid = stop(&apex_ninep::ns::namespace_dir(None), &name)?;
        return Ok(format!("apex import: stopped {name} (pid {pid})"));
    }
    let imp = cmd.import()?;
    if cmd.foreground {
        let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build()?;
        rt.block_on(super::serve(imp))?;
        return Ok(String::new());
    }
    Ok(match start(&imp, &cmd.foreground_flags(), cmd.upload)? {
        Started::Already { pid } => format!("apex import: {} is imported already (pid {pid})", imp.first_name()),
        Started::Started => {
            let host = format!(".{}", imp.via.host());
            let mut names: Vec<String> = std::fs::read_dir(&imp.dir)
                .map(|d| d.filter_map(|e| e.ok()?.file_name().into_string().ok()).collect())
                .unwrap_or_default();
            names.retain(|n| Some(n) == imp.name.as_ref() || (imp.name.is_none() && n.ends_with(&host)));
            names.sort();
            let mut said = format!("apex import: {} posted {}", imp.via.address(), names.join(" "));
            let listeners = match imp.via {
                super::Via::Ssh { .. } => tls_listeners(&imp),
                super::Via::Tls { .. } => Vec::new(),
            };
            for (addr, pin) in listeners {
                said += &format!(
                    "\napex import: it serves TLS at {addr}, certificate {pin}: apex import {addr} --pin {pin} --token FILE"
                );
            }
            said
        }
    })
}

/// The remote daemon's TLS listeners and their pins, from its `/services`
/// read through the import (over ssh, the pin needs no copy and paste).
fn tls_listeners(imp: &Import) -> Vec<(String, String)> {
    let Ok(rt) = tokio::runtime::Builder::new_current_thread().enable_all().build() else { return Vec::new() };
    let socket = format!("unix!{}", imp.dir.join(imp.first_name()).display());
    let text = rt.block_on(async {
        let c = apex_ninep::dial(&socket, 8192).await.ok()?;
        let root = c.attach(&apex_ninep::ns::user_name(), "").await.ok()?;
        let f = c.open_path(root, "services", apex_ninep::fcall::OREAD).await.ok()?;
        c.read_all(&f).await.ok()
    });
    String::from_utf8_lossy(&text.unwrap_or_default())
        .lines()
        .filter_map(|l| match l.split(' ').collect::<Vec<_>>()[..] {
            ["tls", addr, pin] => Some((addr.to_string(), pin.to_string())),
            _ => None,
        })
        .collect()
}
