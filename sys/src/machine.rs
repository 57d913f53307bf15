//! Which machine this is, as a file server and its clients compare it:
//! the kernel's boot and the mount namespace, so a daemon reached through
//! a socket another machine forwards (ssh), or from a container with
//! other files, is told apart from one whose files are ours.

/// This machine as a line of text: equal for two processes exactly when
/// they see the same files on the same running kernel.
pub fn id() -> String {
    let boot = std::fs::read_to_string("/proc/sys/kernel/random/boot_id").map(|b| b.trim().to_string());
    let mounts = std::fs::read_link("/proc/self/ns/mnt").map(|m| m.display().to_string());
    match (boot, mounts) {
        (Ok(boot), Ok(mounts)) => format!("{boot} {mounts}"),
        // No /proc: the host's name is the best there is.
        _ => {
            let mut name = [0u8; 256];
            // SAFETY: gethostname writes at most the length given into the
            // buffer, which lives across the call.
            let ok = unsafe { libc::gethostname(name.as_mut_ptr().cast(), name.len()) } == 0;
            let end = name.iter().position(|b| *b == 0).unwrap_or(name.len());
            match ok {
                true => format!("host {}", String::from_utf8_lossy(&name[..end])),
                false => "unknown".to_string(),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn this_machine_is_itself_and_says_where_it_booted() {
        let id = super::id();
        assert_eq!(id, super::id());
        assert!(id.contains("mnt:[") || id.starts_with("host "), "{id}");
    }
}
