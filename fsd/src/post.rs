//! Posting a service the way plan9port does: a Unix socket named after the
//! service in the namespace directory.
//!
//! The directory is `--namespace DIR`, else `$NAMESPACE`, else
//! `/tmp/ns.$USER.$DISPLAY`, with `DISPLAY` canonicalised as plan9port's
//! `getns` does (a trailing `.0` dropped, `/` made `_`) and `:0` when unset.
//! A missing directory is made mode 0700; an existing one must be ours and
//! 0700, since anyone who can reach the socket can edit every session. A
//! stale socket (nobody listening) is replaced; a live one means another
//! daemon serves there, which is an error.

use std::io::ErrorKind;
use std::os::unix::fs::{DirBuilderExt, MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};

/// Why a service could not be posted.
#[derive(Debug, thiserror::Error)]
pub enum PostError {
    #[error("namespace directory {dir}: {err}")]
    Dir { dir: PathBuf, err: std::io::Error },
    #[error("namespace directory {dir} belongs to uid {owner}, not you (uid {me}): remove it or use --namespace")]
    Owner { dir: PathBuf, owner: u32, me: u32 },
    #[error("namespace directory {dir} has mode {mode:o}; it must be 0700 (chmod 700 {dir})")]
    Mode { dir: PathBuf, mode: u32 },
    #[error("{path} is served by a running daemon already; stop it or use another --namespace")]
    Live { path: PathBuf },
    #[error("cannot post {path}: {err}")]
    Bind { path: PathBuf, err: std::io::Error },
}

/// `DISPLAY` as plan9port names namespaces after it.
pub fn canonical_display(display: Option<&str>) -> String {
    let d = match display {
        Some(d) if !d.is_empty() => d,
        _ => ":0",
    };
    let d = d.strip_suffix(".0").unwrap_or(d);
    d.replace('/', "_")
}

/// The user name plan9port would use: `$USER`, else the password entry.
pub fn user_name() -> String {
    if let Ok(u) = std::env::var("USER") {
        if !u.is_empty() {
            return u;
        }
    }
    // SAFETY: getpwuid returns a pointer into static storage or null; we
    // copy the name out at once and call nothing else in between.
    unsafe {
        let pw = libc::getpwuid(libc::getuid());
        if !pw.is_null() && !(*pw).pw_name.is_null() {
            return std::ffi::CStr::from_ptr((*pw).pw_name).to_string_lossy().into_owned();
        }
        format!("{}", libc::getuid())
    }
}

/// The namespace directory for these settings.
pub fn namespace_dir(flag: Option<&Path>) -> PathBuf {
    if let Some(d) = flag {
        return d.to_path_buf();
    }
    if let Some(ns) = std::env::var_os("NAMESPACE").filter(|v| !v.is_empty()) {
        return PathBuf::from(ns);
    }
    let display = std::env::var("DISPLAY").ok();
    PathBuf::from(format!("/tmp/ns.{}.{}", user_name(), canonical_display(display.as_deref())))
}

/// Makes or checks the namespace directory.
pub fn ensure_dir(dir: &Path) -> Result<(), PostError> {
    let err = |err| PostError::Dir { dir: dir.to_path_buf(), err };
    match std::fs::DirBuilder::new().mode(0o700).create(dir) {
        Ok(()) => {
            // The umask may have cut the mode; set it exactly.
            std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700)).map_err(err)?;
            return Ok(());
        }
        Err(e) if e.kind() == ErrorKind::AlreadyExists => {}
        Err(e) => return Err(err(e)),
    }
    let meta = std::fs::metadata(dir).map_err(err)?;
    if !meta.is_dir() {
        return Err(err(std::io::Error::other("not a directory")));
    }
    // SAFETY: getuid has no preconditions.
    let me = unsafe { libc::getuid() };
    if meta.uid() != me {
        return Err(PostError::Owner { dir: dir.to_path_buf(), owner: meta.uid(), me });
    }
    let mode = meta.mode() & 0o777;
    if mode != 0o700 {
        return Err(PostError::Mode { dir: dir.to_path_buf(), mode });
    }
    Ok(())
}

/// Posts `service` in `dir`: the listening socket.
pub fn post(dir: &Path, service: &str) -> Result<tokio::net::UnixListener, PostError> {
    ensure_dir(dir)?;
    let path = dir.join(service);
    if path.exists() {
        if std::os::unix::net::UnixStream::connect(&path).is_ok() {
            return Err(PostError::Live { path });
        }
        std::fs::remove_file(&path).map_err(|err| PostError::Bind { path: path.clone(), err })?;
    }
    tokio::net::UnixListener::bind(&path).map_err(|err| PostError::Bind { path, err })
}

/// A plan9port address: `unix!PATH` and `tcp!HOST!PORT` as they are; a bare
/// name is the service of that name posted in the namespace directory.
pub fn service_address(addr: &str) -> String {
    if addr.contains('!') {
        return addr.to_string();
    }
    format!("unix!{}", namespace_dir(None).join(addr).display())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scratch(name: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("apex-post-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        d
    }

    #[test]
    fn display_is_canonicalised_as_plan9port_does() {
        assert_eq!(canonical_display(None), ":0");
        assert_eq!(canonical_display(Some(":0.0")), ":0");
        assert_eq!(canonical_display(Some("host:1.0")), "host:1");
        assert_eq!(canonical_display(Some("/tmp/launch-x/org.xquartz:0")), "_tmp_launch-x_org.xquartz:0");
        assert_eq!(canonical_display(Some(":1.1")), ":1.1");
    }

    #[test]
    fn the_flag_wins_then_namespace() {
        assert_eq!(namespace_dir(Some(Path::new("/x"))), PathBuf::from("/x"));
    }

    #[tokio::test]
    async fn directory_rules_and_sockets() {
        let d = scratch("rules");
        let l = post(&d, "apex").unwrap();
        let mode = std::fs::metadata(&d).unwrap().mode() & 0o777;
        assert_eq!(mode, 0o700);
        // A live socket is an error...
        let e = post(&d, "apex").unwrap_err().to_string();
        assert!(e.contains("served by a running daemon"), "{e}");
        // ...a stale one is replaced.
        drop(l);
        post(&d, "apex").unwrap();
        std::fs::set_permissions(&d, std::fs::Permissions::from_mode(0o755)).unwrap();
        let e = post(&d, "apex").unwrap_err().to_string();
        assert!(e.contains("mode 755; it must be 0700"), "{e}");
        std::fs::remove_dir_all(&d).unwrap();
    }
}
