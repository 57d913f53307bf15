//! Running a shell command with text in and text out, for Edit's `<`, `>`
//! and `|` wherever Edit runs (the daemon, a UI): `sh -c` in a directory,
//! the text on standard input, its standard output back; a command that
//! fails is an error, so the Edit changes nothing.

use apex_core::ecmd::PipeError;
use std::io::Write;
use std::path::Path;
use std::process::{Command, Stdio};

/// Runs `command` in `dir` (the caller's own directory if `None`) with
/// `input` on its standard input.
pub fn pipe(command: &str, input: Option<&str>, dir: Option<&Path>) -> Result<String, PipeError> {
    let start = |why: String| PipeError::Start { command: command.into(), why };
    let mut cmd = Command::new("sh");
    cmd.arg("-c").arg(command).stdout(Stdio::piped()).stderr(Stdio::piped());
    crate::fds::original_limit_for(&mut cmd);
    cmd.stdin(if input.is_some() { Stdio::piped() } else { Stdio::null() });
    if let Some(d) = dir {
        cmd.current_dir(d);
    }
    let mut child = cmd.spawn().map_err(|e| start(format!("sh: {e}")))?;
    // Fed from a thread, so a command that writes before it has read all
    // of its input cannot deadlock against us.
    let feeder = match (input, child.stdin.take()) {
        (Some(text), Some(mut stdin)) => {
            let text = text.to_string();
            Some(std::thread::spawn(move || stdin.write_all(text.as_bytes())))
        }
        _ => None,
    };
    let out = child.wait_with_output().map_err(|e| start(e.to_string()))?;
    if let Some(f) = feeder {
        let _ = f.join();
    }
    if !out.status.success() {
        let why = String::from_utf8_lossy(&out.stderr).trim().to_string();
        return Err(PipeError::Failed { command: command.into(), status: out.status.to_string(), stderr: why });
    }
    String::from_utf8(out.stdout).map_err(|_| PipeError::NotText { command: command.into() })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_goes_through_and_failures_say_why() {
        assert_eq!(pipe("tr a-z A-Z", Some("abc\n"), None).unwrap(), "ABC\n");
        assert_eq!(pipe("pwd", None, Some(Path::new("/"))).unwrap(), "/\n");
        let e = pipe("echo oops >&2; exit 3", None, None).unwrap_err().to_string();
        assert!(e.contains("oops") && e.contains('3'), "{e}");
    }
}
