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

/// This process's directory: where a relative file name is, here.
pub fn cwd() -> String {
    std::env::current_dir().map_or_else(|_| "/".into(), |d| d.display().to_string())
}

/// This process's user's home, if it names one.
pub fn home() -> Option<String> {
    std::env::var("HOME").ok().filter(|h| !h.is_empty())
}

/// What a daemon's `/machine` says: the machine ([`id`]) on its first
/// line, then `cwd DIR` and `home DIR`, so that a client on another
/// machine completes a relative file name where the daemon would.
pub fn describe() -> String {
    let mut said = format!("{}\ncwd {}\n", id(), cwd());
    if let Some(home) = home() {
        said.push_str(&format!("home {home}\n"));
    }
    said
}

/// A `/machine` read back: the machine, and the daemon's directory and
/// home where it says them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Described {
    pub id: String,
    pub cwd: Option<String>,
    pub home: Option<String>,
}

impl Described {
    pub fn parse(said: &str) -> Described {
        let mut lines = said.lines();
        let id = lines.next().unwrap_or("").trim().to_string();
        let (mut cwd, mut home) = (None, None);
        for line in lines {
            match line.split_once(' ') {
                Some(("cwd", dir)) if dir.starts_with('/') => cwd = Some(dir.to_string()),
                Some(("home", dir)) if dir.starts_with('/') => home = Some(dir.to_string()),
                _ => {}
            }
        }
        Described { id, cwd, home }
    }

    /// Whether it is this machine, seeing these files.
    pub fn is_here(&self) -> bool {
        self.id == id()
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

    #[test]
    fn a_description_reads_back_as_said() {
        let here = super::Described::parse(&super::describe());
        assert!(here.is_here());
        assert_eq!(here.cwd, Some(super::cwd()));
        assert_eq!(here.home, super::home());
        let far = super::Described::parse("other mnt:[1]\ncwd /home/glenda\nhome /home/glenda\nnew thing\n");
        assert!(!far.is_here());
        assert_eq!(far.cwd.as_deref(), Some("/home/glenda"));
        // An older daemon's one line: no directory said.
        assert_eq!(super::Described::parse("other mnt:[1]\n").cwd, None);
    }
}
