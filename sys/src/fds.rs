//! The daemon's descriptor limit. Raised at start from the soft limit to
//! the hard one, so connections and terminals are not refused at the
//! usual 1024; the programs it starts get the original soft limit back
//! (a program may assume `select(2)`'s 1024). How much room is left says
//! when a new terminal would leave too little for connections.

use std::sync::OnceLock;

/// The soft and hard limits at start, before [`raise`].
static ORIGINAL: OnceLock<(u64, u64)> = OnceLock::new();

/// Raises the soft limit on descriptors to the hard one; the limit before
/// and after (soft limits), or none if it cannot be read.
pub fn raise() -> Option<(u64, u64)> {
    let mut lim = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
    // SAFETY: getrlimit(2) fills the rlimit it is given.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) } != 0 {
        return None;
    }
    let _ = ORIGINAL.set((lim.rlim_cur, lim.rlim_max));
    let before = lim.rlim_cur;
    lim.rlim_cur = lim.rlim_max;
    // SAFETY: setrlimit(2) reads the rlimit it is given.
    if unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &lim) } != 0 {
        return Some((before, before));
    }
    Some((before, lim.rlim_cur))
}

/// Sets, in a child between fork and exec, the soft limit it had before
/// [`raise`] (nothing if it was not raised).
///
/// # Safety
///
/// Only between fork and exec, as `pre_exec` runs it: it makes one
/// async-signal-safe system call.
pub unsafe fn restore_original() -> std::io::Result<()> {
    if let Some((soft, hard)) = ORIGINAL.get() {
        let lim = libc::rlimit { rlim_cur: *soft, rlim_max: *hard };
        // SAFETY: setrlimit(2) reads the rlimit it is given.
        unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &lim) };
    }
    Ok(())
}

/// Gives a command the descriptor limit the daemon had at start.
pub fn original_limit_for(cmd: &mut std::process::Command) {
    use std::os::unix::process::CommandExt;
    // SAFETY: restore_original makes one async-signal-safe call.
    unsafe { cmd.pre_exec(|| restore_original()) };
}

/// Descriptors this process has open, and may have.
pub fn usage() -> Option<(u64, u64)> {
    let mut lim = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
    // SAFETY: getrlimit(2) fills the rlimit it is given.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) } != 0 {
        return None;
    }
    // Counting them takes one more: none left is all of them open.
    let open = match std::fs::read_dir("/proc/self/fd") {
        Ok(dir) => dir.count() as u64,
        Err(e) if matches!(e.raw_os_error(), Some(libc::EMFILE | libc::ENFILE)) => lim.rlim_cur,
        Err(_) => return None,
    };
    Some((open, lim.rlim_cur))
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_limit_is_raised_and_what_is_open_is_counted() {
        let (before, after) = super::raise().expect("a limit");
        assert!(after >= before);
        let (open, limit) = super::usage().expect("a count");
        assert!(open >= 3 && limit == after, "{open} of {limit}");
    }
}
