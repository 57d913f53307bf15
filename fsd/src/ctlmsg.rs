//! The ctl files of apex(4) (the root's, a session's, `buffers/N/ctl`)
//! take several messages in one write, one per line. The write is checked
//! whole before anything is applied, and a refusal names the line; the
//! acme tree's ctl files keep acme's rule instead (one by one).
//!
//! This module is the session ctl's language (`SessionCtl`) and the line
//! walk the three files share.

use apex_core::{AcmeNumber, State};
use std::path::Path;

/// The non-blank lines of a ctl write, numbered from 1, each trimmed.
pub fn lines(text: &str) -> impl Iterator<Item = (usize, &str)> {
    text.lines().enumerate().map(|(i, l)| (i + 1, l.trim())).filter(|(_, l)| !l.is_empty())
}

/// Parses every line with `parse`, or says which line is wrong; an empty
/// write is refused with `usage`.
pub fn parse_lines<T>(
    text: &str,
    usage: &str,
    mut parse: impl FnMut(&str) -> Result<T, String>,
) -> Result<Vec<T>, String> {
    let mut out = Vec::new();
    for (n, line) in lines(text) {
        out.push(parse(line).map_err(|e| format!("ctl line {n} ({line:?}): {e}"))?);
    }
    if out.is_empty() {
        return Err(format!("ctl: empty write; {usage}"));
    }
    Ok(out)
}

/// A message of a session's `ctl`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SessionCtl {
    /// A new window (on a new buffer named so).
    Window(Option<String>),
    /// A new buffer with no window.
    Buffer(Option<String>),
    /// Delete the window with this acme number.
    DelWindow(u32),
    /// Run a command in a directory.
    Exec { dir: String, command: String },
    /// End a process of the session.
    Kill(u64),
}

pub const SESSION_USAGE: &str = "expected window [NAME], buffer [NAME], delwindow N, exec DIR COMMAND or kill PID";

fn parse_session_line(line: &str) -> Result<SessionCtl, String> {
    let words: Vec<&str> = line.split_whitespace().collect();
    Ok(match words.as_slice() {
        ["window"] => SessionCtl::Window(None),
        ["window", name] => SessionCtl::Window(Some(name.to_string())),
        ["buffer"] => SessionCtl::Buffer(None),
        ["buffer", name] => SessionCtl::Buffer(Some(name.to_string())),
        ["delwindow", num] => {
            SessionCtl::DelWindow(num.parse().map_err(|_| format!("delwindow wants a window number, got {num:?}"))?)
        }
        ["exec", dir, _, ..] => {
            let command = line[4..].trim_start()[dir.len()..].trim_start();
            SessionCtl::Exec { dir: dir.to_string(), command: command.to_string() }
        }
        ["kill", pid] => SessionCtl::Kill(pid.parse().map_err(|_| format!("kill wants a pid, got {pid:?}"))?),
        _ => return Err(format!("unknown message; {SESSION_USAGE}")),
    })
}

/// Parses a session ctl write and checks every message against `state`
/// (and the machine, for exec's directory) before any is applied.
pub fn parse_session(text: &str, state: &State) -> Result<Vec<SessionCtl>, String> {
    let mut deleted = Vec::new();
    parse_lines(text, SESSION_USAGE, |line| {
        let msg = parse_session_line(line)?;
        match &msg {
            SessionCtl::DelWindow(num) => {
                if state.layout.window_numbered(AcmeNumber(*num)).is_none() || deleted.contains(num) {
                    return Err(format!("no window {num}"));
                }
                deleted.push(*num);
            }
            SessionCtl::Exec { dir, .. } if !Path::new(dir).is_absolute() => {
                return Err(format!("exec: {dir:?} is not an absolute path; name the directory in full"));
            }
            SessionCtl::Exec { dir, .. } if !Path::new(dir).is_dir() => {
                return Err(format!("exec: {dir}: not a directory"));
            }
            SessionCtl::Kill(pid) if !state.meta.processes.contains_key(pid) => {
                return Err(format!("kill: no process {pid} in this session (see meta/processes)"));
            }
            _ => {}
        }
        Ok(msg)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_session_write_is_checked_whole_and_names_the_bad_line() {
        let mut node = apex_core::Node::server();
        apex_core::make::init_session(&mut node).unwrap();
        let got = parse_session("window /tmp/a\n\nbuffer\nexec / ls -l\n", &node.state).unwrap();
        assert_eq!(got[0], SessionCtl::Window(Some("/tmp/a".into())));
        assert_eq!(got[2], SessionCtl::Exec { dir: "/".into(), command: "ls -l".into() });
        let e = parse_session("window\nkill 99\n", &node.state).unwrap_err();
        assert!(e.starts_with("ctl line 2 (\"kill 99\"): kill: no process 99"), "{e}");
        let e = parse_session("window\nfrob\n", &node.state).unwrap_err();
        assert!(e.contains("line 2") && e.contains("expected window"), "{e}");
        assert!(parse_session("\n", &node.state).unwrap_err().contains("empty"));
        assert!(parse_session("delwindow 1", &node.state).unwrap_err().contains("no window 1"));
    }
}
