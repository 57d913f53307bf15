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
        assert_eq!(service_address("tcp!127.0.0.1!564"), "tcp!127.0.0.1!564");
        assert!(service_address("acme").starts_with("unix!/"));
        assert!(service_address("acme").ends_with("/acme"));
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
