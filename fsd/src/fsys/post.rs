//! Posting a service the way plan9port does: a Unix socket named after the
//! service in the namespace directory.
//!
//! Where the namespace directory is, and how a client finds a posted
//! service, is `apex_ninep::ns` (shared with every client). A missing
//! directory is made mode 0700; an existing one must be ours and 0700,
//! since anyone who can reach the socket can edit every session. A stale
//! socket (nobody listening) is replaced; a live one means another
//! daemon serves there, which is an error.

use std::io::ErrorKind;
use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
use std::path::{Path, PathBuf};

/// Why a service could not be posted.
#[derive(Debug, thiserror::Error)]
pub enum PostError {
    #[error("namespace directory {dir}: {err}")]
    Dir { dir: PathBuf, err: std::io::Error },
    /// Another's, or open to others: clients refuse it too.
    #[error(transparent)]
    Namespace(#[from] apex_ninep::ns::NsError),
    #[error("{path} is served by a running daemon already; stop it or use another --namespace")]
    Live { path: PathBuf },
    #[error("cannot post {path}: {err}")]
    Bind { path: PathBuf, err: std::io::Error },
}

/// Makes or checks the namespace directory: made 0700, or the user's own
/// and closed to others (`apex_ninep::ns::check_dir`, the rule clients
/// dial by).
pub fn ensure_dir(dir: &Path) -> Result<(), PostError> {
    let err = |err| PostError::Dir { dir: dir.to_path_buf(), err };
    match std::fs::DirBuilder::new().mode(0o700).create(dir) {
        Ok(()) => {
            // The umask may have cut the mode; set it exactly.
            std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700)).map_err(err)?;
            Ok(())
        }
        Err(e) if e.kind() == ErrorKind::AlreadyExists => Ok(apex_ninep::ns::check_dir(dir)?),
        Err(e) => Err(err(e)),
    }
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
    // Bound and listening under a name of its own first, then renamed
    // into place: a client that finds the name can connect at once (a
    // socket is connectable only after listen(2), which follows bind(2)).
    let fresh = dir.join(format!(".{service}.{}", std::process::id()));
    let _ = std::fs::remove_file(&fresh);
    let listener = tokio::net::UnixListener::bind(&fresh).map_err(|err| PostError::Bind { path: path.clone(), err })?;
    if let Err(err) = std::fs::rename(&fresh, &path) {
        let _ = std::fs::remove_file(&fresh);
        return Err(PostError::Bind { path, err });
    }
    Ok(listener)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::MetadataExt;

    fn scratch(name: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("apex-post-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        d
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
