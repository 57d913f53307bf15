//! 9P errors as errno values.
//!
//! 9P2000 errors are strings; a FUSE reply is a number. The mapping reads
//! the words servers use (Plan 9's own, plan9port's, apexd's), and the
//! message itself goes to the log, so the user sees a sensible errno and
//! the reason is kept.

use apex_ninep::ClientError;

/// The errno for a failed 9P call.
pub fn errno(e: &ClientError) -> libc::c_int {
    match e {
        ClientError::Server(msg) => from_message(msg),
        ClientError::Hangup | ClientError::Io(_) => libc::ENOTCONN,
        ClientError::NoFreeTags => libc::EAGAIN,
        ClientError::Protocol(_) | ClientError::BadAddress(_) => libc::EIO,
    }
}

/// The errno a server's error text means.
pub fn from_message(msg: &str) -> libc::c_int {
    let m = msg.to_ascii_lowercase();
    let has = |w: &str| m.contains(w);
    if has("does not exist") || has("not found") || has("no such") || has("was deleted") || has("unknown fid") {
        libc::ENOENT
    } else if has("permission denied") || has("read-only") || has("write-only") || has("not writable") {
        libc::EACCES
    } else if has("is a directory") {
        libc::EISDIR
    } else if has("not a directory") {
        libc::ENOTDIR
    } else if has("exists") || has("in use") {
        libc::EEXIST
    } else if has("not empty") {
        libc::ENOTEMPTY
    } else if has("cannot create") || has("cannot remove") || has("wstat can change") {
        libc::EPERM
    } else if has("interrupted") || has("flushed") {
        libc::EINTR
    } else if has("fenced") || has("busy") {
        libc::EBUSY
    } else {
        // A refusal that explains itself ("expected ..."): the request was
        // wrong.
        libc::EINVAL
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn server_words_map_to_errno() {
        for (msg, want) in [
            ("file does not exist: nosuch", libc::ENOENT),
            ("buffer 7 was deleted", libc::ENOENT),
            ("permission denied: hash is read-only", libc::EACCES),
            ("permission denied: buffers is a directory", libc::EACCES),
            ("not a directory: cannot walk to \"x\"", libc::ENOTDIR),
            ("session \"a\" exists already", libc::EEXIST),
            ("cannot create \"x\": sessions are made by ...", libc::EPERM),
            ("fenced: lease of buffer.7 is epoch 3", libc::EBUSY),
            ("proposals: unknown verb \"insrt\"; expected insert|...", libc::EINVAL),
        ] {
            assert_eq!(from_message(msg), want, "{msg}");
        }
        assert_eq!(errno(&ClientError::Hangup), libc::ENOTCONN);
    }
}
