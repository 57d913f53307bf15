//! Starting the user's daemon detached, as tmux starts its server: in a
//! session of its own, so it outlives whoever started it (apex-ui, an
//! `apexd --stdio` relay over ssh), and waited for until its socket
//! answers. What it says until then is kept: if it exits first (a state
//! directory in use or unreadable, a namespace directory not ours), its
//! words are the error.

use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

#[derive(Debug, thiserror::Error)]
pub enum StartError {
    #[error("cannot start {}: {source} (is apexd installed beside this program or on $PATH?)", program.display())]
    Spawn { program: PathBuf, source: std::io::Error },
    #[error(
        "started {} but {} did not answer{}",
        program.display(),
        socket.display(),
        if said.is_empty() { " (run apexd yourself to see why)".to_string() } else { format!("; it said: {said}") }
    )]
    Silent { program: PathBuf, socket: PathBuf, said: String },
    /// The daemon exited before it answered: its words.
    #[error(
        "{} exited ({status}) before it answered{}",
        program.display(),
        if said.is_empty() { String::new() } else { format!(": {said}") }
    )]
    Failed { program: PathBuf, status: ExitStatus, said: String },
}

/// `apexd` beside the running program, else on the PATH.
pub fn apexd_program() -> PathBuf {
    program("apexd")
}

/// apex's program `name` beside the running program, else on the PATH.
pub fn program(name: &str) -> PathBuf {
    std::env::current_exe()
        .ok()
        .and_then(|e| e.parent().map(|d| d.join(name)))
        .filter(|p| p.exists())
        .unwrap_or_else(|| PathBuf::from(name))
}

/// Starts `program` with `args` detached and waits at most `wait` for
/// `socket` to answer.
pub fn start_detached(program: &Path, args: &[String], socket: &Path, wait: Duration) -> Result<(), StartError> {
    use std::os::unix::process::CommandExt;
    let spawn = |source| StartError::Spawn { program: program.to_path_buf(), source };
    let said = std::env::temp_dir().join(format!("apexd-started-by-{}.err", std::process::id()));
    // Made new, ours alone, never through a link someone left there.
    use std::os::unix::fs::OpenOptionsExt;
    let _ = std::fs::remove_file(&said);
    let stderr = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW)
        .open(&said)
        .map_err(spawn)?;
    // Unlinked at once: the daemon writes on into it, and nothing is left
    // behind however this ends. What it said is read back through a
    // descriptor of our own.
    let mut words = std::fs::File::open(&said).map_err(spawn)?;
    let _ = std::fs::remove_file(&said);
    let mut cmd = Command::new(program);
    cmd.args(args).stdin(Stdio::null()).stdout(Stdio::null()).stderr(stderr);
    // SAFETY: setsid is async-signal-safe and touches no memory of ours.
    unsafe {
        cmd.pre_exec(|| {
            libc::setsid();
            Ok(())
        });
    }
    let mut child = cmd.spawn().map_err(spawn)?;
    let mut said = || {
        let mut text = String::new();
        let _ = std::io::Read::read_to_string(&mut words, &mut text);
        text.trim().to_string()
    };
    let deadline = Instant::now() + wait;
    while std::os::unix::net::UnixStream::connect(socket).is_err() {
        if let Ok(Some(status)) = child.try_wait() {
            return Err(StartError::Failed { program: program.to_path_buf(), status, said: said() });
        }
        if Instant::now() > deadline {
            return Err(StartError::Silent {
                program: program.to_path_buf(),
                socket: socket.to_path_buf(),
                said: said(),
            });
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    Ok(())
}
