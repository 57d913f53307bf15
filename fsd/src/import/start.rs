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
        return Ok(Started::Already { pid });
    }
    if upload {
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
        rt.block_on(super::ssh::upload(&imp.remote, &imp.ssh, &apex_sys::daemon::apexd_program()))?;
    }
    let program = std::env::current_exe()?;
    let socket = imp.dir.join(imp.first_name());
    let wait = super::CONNECT_WAIT + Duration::from_secs(5);
    match apex_sys::daemon::start_detached(&program, args, &socket, wait) {
        Ok(()) => Ok(Started::Started),
        // Its own words: what went wrong, said as it says it.
        Err(apex_sys::daemon::StartError::Failed { said, .. }) if !said.is_empty() => {
            Err(ImportError::Failed(said.trim_start_matches("apex: ").to_string()))
        }
        Err(e) => Err(ImportError::Start(e)),
    }
}

/// Stops the importer serving `imp`'s first name, and waits until its
/// names are gone.
pub fn stop(imp: &Import) -> Result<u32, ImportError> {
    let name = imp.first_name();
    let Some(pid) = super::importer(&imp.dir, &name) else {
        return Err(ImportError::NotImported { name, dir: imp.dir.clone() });
    };
    // SAFETY: kill(2) with plain integers.
    unsafe { libc::kill(pid as i32, libc::SIGTERM) };
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    while imp.dir.join(&name).exists() && std::time::Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    Ok(pid)
}
