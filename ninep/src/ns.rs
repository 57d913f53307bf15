//! Finding posted services the way plan9port's lib9 does (`getns`,
//! `getuser`): the namespace directory and the address of a service
//! posted in it.
//!
//! The directory is an explicit one (apexd's `--namespace DIR`), else
//! `$NAMESPACE`, else `/tmp/ns.$USER.$DISPLAY`, with `DISPLAY`
//! canonicalised as plan9port's `getns` does (a trailing `.0` dropped, `/`
//! made `_`) and `:0` when unset.

use std::ffi::CStr;
use std::path::{Path, PathBuf};

/// `DISPLAY` as plan9port names namespaces after it.
pub fn canonical_display(display: Option<&str>) -> String {
    let d = match display {
        Some(d) if !d.is_empty() => d,
        _ => ":0",
    };
    let d = d.strip_suffix(".0").unwrap_or(d);
    d.replace('/', "_")
}

/// The user name plan9port would use: `$USER`, else the password entry,
/// else the numeric uid.
pub fn user_name() -> String {
    if let Ok(u) = std::env::var("USER") {
        if !u.is_empty() {
            return u;
        }
    }
    // SAFETY: getuid has no preconditions.
    let uid = unsafe { libc::getuid() };
    password_name(uid).unwrap_or_else(|| uid.to_string())
}

/// The name in `uid`'s password entry, read with the reentrant
/// `getpwuid_r` (plain `getpwuid` shares static storage between threads).
fn password_name(uid: libc::uid_t) -> Option<String> {
    let mut size = 1024usize;
    loop {
        let mut buf = vec![0 as libc::c_char; size];
        // SAFETY: an all-zero passwd is a valid value to be overwritten.
        let mut pw: libc::passwd = unsafe { std::mem::zeroed() };
        let mut found: *mut libc::passwd = std::ptr::null_mut();
        // SAFETY: every pointer is to memory we own for the call's length;
        // the strings it fills point into `buf`, which outlives their use.
        let rc = unsafe { libc::getpwuid_r(uid, &mut pw, buf.as_mut_ptr(), buf.len(), &mut found) };
        if rc == libc::ERANGE && size < 1 << 20 {
            size *= 4;
            continue;
        }
        if rc != 0 || found.is_null() || pw.pw_name.is_null() {
            return None;
        }
        // SAFETY: pw_name is a NUL-terminated string inside `buf`.
        return Some(unsafe { CStr::from_ptr(pw.pw_name) }.to_string_lossy().into_owned());
    }
}

/// Why a namespace directory is not to be trusted (plan9port's `getns`
/// refuses the same): whoever owns it, or can write in it, can put a
/// server of theirs where a client looks for yours, and read everything
/// the client sends.
#[derive(Debug, thiserror::Error)]
pub enum NsError {
    #[error("namespace directory {dir} belongs to {owner} (uid {uid}), not you: a server there is theirs; remove it, or set $NAMESPACE to a directory of yours")]
    Owner { dir: PathBuf, owner: String, uid: u32 },
    #[error("namespace directory {dir} has mode {mode:o}; it must be 0700, as others can reach what is posted there (chmod 700 {dir})")]
    Mode { dir: PathBuf, mode: u32 },
    #[error("namespace directory {dir}: permission denied (it is not yours to read)")]
    Denied { dir: PathBuf },
    #[error("namespace directory {dir}: {err}")]
    Io { dir: PathBuf, err: std::io::Error },
}

/// Checks that `dir` is the user's own and closed to others: the rule
/// for a namespace directory a server posts in and a client dials into.
/// A directory that does not exist passes (there is nothing to dial).
pub fn check_dir(dir: &Path) -> Result<(), NsError> {
    use std::os::unix::fs::MetadataExt;
    let meta = match std::fs::metadata(dir) {
        Ok(m) => m,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::PermissionDenied => {
            return Err(NsError::Denied { dir: dir.to_path_buf() })
        }
        Err(err) => return Err(NsError::Io { dir: dir.to_path_buf(), err }),
    };
    if !meta.is_dir() {
        return Err(NsError::Io { dir: dir.to_path_buf(), err: std::io::Error::other("not a directory") });
    }
    // SAFETY: getuid has no preconditions.
    let me = unsafe { libc::getuid() };
    if meta.uid() != me {
        let owner = password_name(meta.uid()).unwrap_or_else(|| meta.uid().to_string());
        return Err(NsError::Owner { dir: dir.to_path_buf(), owner, uid: meta.uid() });
    }
    let mode = meta.mode() & 0o777;
    if mode & 0o077 != 0 {
        return Err(NsError::Mode { dir: dir.to_path_buf(), mode });
    }
    Ok(())
}

/// The namespace directory: `flag` if given, else `$NAMESPACE`, else
/// `/tmp/ns.$USER.$DISPLAY`.
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

/// A plan9port address: `unix!PATH` and `tcp!HOST!PORT` as they are; a bare
/// name is the service of that name posted in the namespace directory,
/// which must be the user's own and closed to others ([`check_dir`]).
pub fn service_address(addr: &str) -> Result<String, NsError> {
    if addr.contains('!') {
        return Ok(addr.to_string());
    }
    let dir = namespace_dir(None);
    check_dir(&dir)?;
    Ok(format!("unix!{}", dir.join(addr).display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_namespace_directory_must_be_ours_and_closed() {
        use std::os::unix::fs::PermissionsExt;
        let d = std::env::temp_dir().join(format!("apex-ns-check-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        assert!(check_dir(&d).is_ok(), "none yet: nothing to dial");
        std::fs::create_dir(&d).unwrap();
        std::fs::set_permissions(&d, std::fs::Permissions::from_mode(0o700)).unwrap();
        check_dir(&d).unwrap();
        std::fs::set_permissions(&d, std::fs::Permissions::from_mode(0o777)).unwrap();
        let e = check_dir(&d).unwrap_err().to_string();
        assert!(e.contains("mode 777; it must be 0700"), "{e}");
        // Another's: /proc's owner is root, a file is no directory; as
        // root, a directory of nobody's.
        let theirs = d.join("theirs");
        std::fs::create_dir(&theirs).unwrap();
        // SAFETY: chown(2) on a path we made; 65534 is nobody.
        let path = std::ffi::CString::new(theirs.as_os_str().as_encoded_bytes()).unwrap();
        if unsafe { libc::chown(path.as_ptr(), 65534, 65534) } == 0 {
            let e = check_dir(&theirs).unwrap_err().to_string();
            assert!(e.contains("belongs to") && e.contains("not you"), "{e}");
        }
        std::fs::remove_dir_all(&d).unwrap();
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
    fn the_flag_wins_and_addresses_pass_through() {
        assert_eq!(namespace_dir(Some(Path::new("/x"))), PathBuf::from("/x"));
        assert_eq!(service_address("tcp!127.0.0.1!564").unwrap(), "tcp!127.0.0.1!564");
        if let Ok(a) = service_address("acme") {
            assert!(a.starts_with("unix!/") && a.ends_with("/acme"), "{a}");
        }
    }

    #[test]
    fn the_password_entry_names_this_user() {
        // SAFETY: getuid has no preconditions.
        let uid = unsafe { libc::getuid() };
        let name = password_name(uid).expect("this user has a password entry");
        assert!(!name.is_empty());
        if uid == 0 {
            assert_eq!(name, "root");
        }
        // Many threads at once each get their own answer.
        let names: Vec<_> = (0..8).map(|_| std::thread::spawn(move || password_name(uid))).collect();
        for t in names {
            assert_eq!(t.join().unwrap().as_deref(), Some(name.as_str()));
        }
    }
}
