//! Running a shell command with text in and text out, for Edit's `<`, `>`
//! and `|` wherever Edit runs (the daemon, a UI): `sh -c` in a directory,
//! the text on standard input, its standard output back; a command that
//! fails is an error, so the Edit changes nothing.

use apex_core::ecmd::PipeError;
use std::io::{Read, Write};
use std::path::Path;
use std::process::{Command, Stdio};

/// Runs `command` in `dir` (the caller's own directory if `None`) with
/// `input` on its standard input. `started` is told its pid (its process
/// group's) once it runs, so that a caller can let it be killed: a
/// command that never ends, or never prints, holds the Edit until then.
pub fn pipe(
    command: &str,
    input: Option<&str>,
    dir: Option<&Path>,
    started: impl FnOnce(u32),
) -> Result<String, PipeError> {
    let start = |why: String| PipeError::Start { command: command.into(), why };
    let max = output_max();
    let mut cmd = Command::new("sh");
    cmd.arg("-c").arg(command).stdout(Stdio::piped()).stderr(Stdio::piped());
    crate::fds::original_limit_for(&mut cmd);
    // A group of its own: a flood is ended with whatever it started.
    std::os::unix::process::CommandExt::process_group(&mut cmd, 0);
    cmd.stdin(if input.is_some() { Stdio::piped() } else { Stdio::null() });
    if let Some(d) = dir {
        cmd.current_dir(d);
    }
    let mut child = cmd.spawn().map_err(|e| start(format!("sh: {e}")))?;
    started(child.id());
    // Fed from a thread, so a command that writes before it has read all
    // of its input cannot deadlock against us.
    let feeder = match (input, child.stdin.take()) {
        (Some(text), Some(mut stdin)) => {
            let text = text.to_string();
            Some(std::thread::spawn(move || stdin.write_all(text.as_bytes())))
        }
        _ => None,
    };
    // What it says of a failure, read beside its output (a little of it).
    let pid = child.id() as i32;
    let errors = child.stderr.take().map(|mut e| {
        std::thread::spawn(move || {
            let (mut said, mut all, mut buf) = (Vec::new(), 0u64, [0u8; 8192]);
            while let Ok(n) = e.read(&mut buf) {
                if n == 0 {
                    break;
                }
                all += n as u64;
                if said.len() < STDERR_KEPT {
                    said.extend_from_slice(&buf[..n]);
                }
                if all > max {
                    // SAFETY: kill(2) with plain integers; the child (its
                    // group's leader) is not reaped until this thread's
                    // end is waited for.
                    unsafe { libc::kill(-pid, libc::SIGKILL) };
                    break;
                }
            }
            (said, all > max)
        })
    });
    let mut printed = Vec::new();
    let read = child.stdout.take().map(|out| out.take(max + 1).read_to_end(&mut printed));
    let too_much = printed.len() as u64 > max;
    if too_much || matches!(read, Some(Err(_))) {
        // It would go on for ever (`yes`), or cannot be read: ended, with
        // what it started.
        // SAFETY: kill(2) with plain integers; the child is not reaped.
        unsafe { libc::kill(-pid, libc::SIGKILL) };
    }
    // Its standard error to its end before it is reaped: the thread
    // reading it may kill it by its pid, which must still be its.
    let (said, flooded) = errors.and_then(|e| e.join().ok()).unwrap_or_default();
    let status = child.wait().map_err(|e| start(e.to_string()))?;
    if let Some(f) = feeder {
        let _ = f.join();
    }
    if too_much || flooded {
        return Err(PipeError::TooMuch { command: command.into(), max });
    }
    if let Some(Err(e)) = read {
        return Err(start(e.to_string()));
    }
    if !status.success() {
        let why = String::from_utf8_lossy(&said).trim().to_string();
        return Err(PipeError::Failed { command: command.into(), status: status.to_string(), stderr: why });
    }
    String::from_utf8(printed).map_err(|_| PipeError::NotText { command: command.into() })
}

/// The most a command may add to a buffer or `+Errors` unless set
/// ([`set_output_max`]): past it, it is killed and the cap said.
pub const OUTPUT_MAX: u64 = 64 << 20;

static OUTPUT_SET: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(OUTPUT_MAX);

/// Sets the most one command may add (apexd's `--max-output`).
pub fn set_output_max(bytes: u64) {
    OUTPUT_SET.store(bytes.max(1), std::sync::atomic::Ordering::Relaxed);
}

/// The most one command may add.
pub fn output_max() -> u64 {
    OUTPUT_SET.load(std::sync::atomic::Ordering::Relaxed)
}
/// How much of a failed command's standard error is kept to say why.
const STDERR_KEPT: usize = 64 << 10;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_goes_through_and_failures_say_why() {
        let mut started = None;
        assert_eq!(pipe("tr a-z A-Z", Some("abc\n"), None, |pid| started = Some(pid)).unwrap(), "ABC\n");
        assert!(started.is_some(), "told its pid");
        assert_eq!(pipe("pwd", None, Some(Path::new("/")), |_| {}).unwrap(), "/\n");
        let e = pipe("echo oops >&2; exit 3", None, None, |_| {}).unwrap_err().to_string();
        assert!(e.contains("oops") && e.contains('3'), "{e}");
    }

    #[test]
    fn a_command_that_prints_for_ever_is_killed_and_said() {
        for flood in ["yes", "yes 1>&2"] {
            let e = pipe(flood, None, None, |_| {}).unwrap_err();
            assert!(matches!(e, PipeError::TooMuch { .. }), "{flood}: {e}");
            assert!(e.to_string().contains("the most one command may add; it was killed"), "{e}");
        }
        assert_eq!(pipe("echo fine", None, None, |_| {}).unwrap(), "fine\n");
        // What it started in the background goes with it.
        let e = pipe("sleep 1000 & yes", None, None, |_| {}).unwrap_err();
        assert!(matches!(e, PipeError::TooMuch { .. }), "{e}");
        let e = pipe("echo why >&2; exit 3", None, None, |_| {}).unwrap_err().to_string();
        assert!(e.contains("why"), "{e}");
    }
}
