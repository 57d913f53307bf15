//! A session's `ctl` language (`SessionCtl`): windows, buffers, commands
//! and kills, several in one write, one per line (the shape is
//! [`crate::fsys::ctl`]'s); each is checked against the session before any is
//! applied.

use crate::fsys::ctl::{self, Arg, CtlError, Unfit, Verb};
use crate::pty::proc::Spec;
use apex_core::term::{SCROLLBACK_LIMIT, SCROLLBACK_MAX};
use apex_core::{AcmeNumber, State};
use std::path::Path;

/// A message of a session's `ctl`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SessionCtl {
    /// A new window (on a new buffer named so).
    Window(Option<String>),
    /// A new buffer with no window.
    Buffer(Option<String>),
    /// Delete the window with this acme number.
    DelWindow(u64),
    /// Run a command in a directory: for the window with acme number
    /// `window` ($winid, $% and $samfile), with `font` as $font.
    Exec { dir: String, command: String, window: Option<u64>, font: Option<String> },
    /// End a process of the session.
    Kill(u64),
    /// A new terminal.
    Term(crate::pty::proc::Spec),
    /// Show a file in its window, made and loaded if there is none, at an
    /// address if one follows a colon (acme's openfile, as B3 on
    /// `file:addr` or the plumber's edit port does): `apex open`.
    Open { file: String, address: Option<String> },
}

/// A session ctl's verbs.
const VERBS: &[Verb<SessionCtl>] = &[
    Verb { name: "window", args: &[Arg::Optional("NAME")], make: |v| SessionCtl::Window(v[0].optional()) },
    Verb { name: "buffer", args: &[Arg::Optional("NAME")], make: |v| SessionCtl::Buffer(v[0].optional()) },
    Verb {
        name: "delwindow",
        args: &[Arg::Number("N")],
        make: |v| SessionCtl::DelWindow(v[0].number().unwrap_or_default()),
    },
    Verb {
        name: "exec",
        args: &[Arg::Flag("-w", "N"), Arg::FlagWord("-f", "FONT"), Arg::Word("DIR"), Arg::Rest("COMMAND")],
        make: |v| SessionCtl::Exec {
            dir: v[2].word(),
            command: v[3].word(),
            // Checked by `parse_session`: a window, a decodable font.
            window: v[0].number(),
            font: v[1].optional(),
        },
    },
    Verb { name: "kill", args: &[Arg::Number("PID")], make: |v| SessionCtl::Kill(v[0].number().unwrap_or_default()) },
    Verb {
        name: "open",
        args: &[Arg::Rest("FILE[:ADDR]")],
        make: |v| {
            let text = v[0].word();
            let (file, address) = apex_core::look::file_and_addr(&text);
            SessionCtl::Open { file: file.to_string(), address: address.map(str::to_string) }
        },
    },
    Verb {
        name: "term",
        args: &[
            Arg::FlagWord("-d", "DIR"),
            Arg::FlagWord("-s", "COLSxROWS"),
            Arg::Flag("-l", "SCROLLBACK"),
            Arg::RestOptional("COMMAND"),
        ],
        make: |v| {
            // The size and scrollback are checked by `parse_session`.
            let (cols, rows) = v[1].optional().map_or(Some((80, 24)), |s| size(&s)).unwrap_or((0, 0));
            let scrollback = v[2].number().map_or(SCROLLBACK_LIMIT, |n| n.min(u32::MAX as u64) as u32);
            // A directory with blanks comes as one ctl word (`%20`).
            let dir = v[0].optional().map(|d| apex_core::ctlword::decode(&d).unwrap_or(d)).unwrap_or_else(home);
            SessionCtl::Term(Spec { dir, cols, rows, scrollback, command: v[3].optional() })
        },
    },
];

/// A terminal as `term` makes one with no size given: in `dir` (the
/// daemon's home if none, or if it is not a directory), 80 by 24.
pub fn term_spec(dir: Option<&str>, command: Option<&str>) -> Spec {
    let dir = dir.filter(|d| Path::new(d).is_dir()).map_or_else(home, str::to_string);
    Spec { dir, cols: 80, rows: 24, scrollback: SCROLLBACK_LIMIT, command: command.map(str::to_string) }
}

/// Where a terminal starts unless told: the daemon's home, else `/`.
fn home() -> String {
    std::env::var("HOME").ok().filter(|h| Path::new(h).is_absolute()).unwrap_or_else(|| "/".into())
}

/// `COLSxROWS` of a size a terminal may have.
pub fn size(s: &str) -> Option<(u16, u16)> {
    let (c, r) = s.split_once('x')?;
    let (c, r): (u16, u16) = (c.parse().ok()?, r.parse().ok()?);
    crate::term::ctl::size_fits(c, r).then_some((c, r))
}

/// Parses a session ctl write and checks every message against `state`
/// (and the machine, for exec's directory) before any is applied.
pub fn parse_session(text: &str, state: &State) -> Result<Vec<SessionCtl>, CtlError> {
    let mut deleted = Vec::new();
    ctl::parse_lines(text, VERBS, |msg| {
        match &msg {
            SessionCtl::DelWindow(num) => {
                let numbered = u32::try_from(*num).ok().and_then(|n| state.layout.window_numbered(AcmeNumber(n)));
                if numbered.is_none() || deleted.contains(num) {
                    return Err(Unfit::NoWindow(*num));
                }
                deleted.push(*num);
            }
            SessionCtl::Exec { dir, .. } if !Path::new(dir).is_absolute() => {
                return Err(Unfit::RelativeDir(dir.clone()));
            }
            SessionCtl::Exec { dir, .. } if !Path::new(dir).is_dir() => {
                return Err(Unfit::NotADirectory(dir.clone()));
            }
            SessionCtl::Exec { window: Some(n), .. }
                if u32::try_from(*n).ok().and_then(|n| state.layout.window_numbered(AcmeNumber(n))).is_none() =>
            {
                return Err(Unfit::NoWindow(*n));
            }
            SessionCtl::Exec { font: Some(f), .. } if apex_core::ctlword::decode(f).is_none() => {
                return Err(Unfit::BadFont(f.clone()));
            }
            SessionCtl::Kill(pid) if !state.meta.processes.contains_key(pid) => {
                return Err(Unfit::NoProcess(*pid));
            }
            SessionCtl::Open { file, .. } if !Path::new(file).is_absolute() => {
                return Err(Unfit::RelativeFile(file.clone()));
            }
            SessionCtl::Open { file, .. } if crate::fsys::ctl::fit_name(file).is_err() => {
                return Err(Unfit::BadName(file.clone()));
            }
            SessionCtl::Term(spec) if spec.cols == 0 => return Err(Unfit::TermSize),
            SessionCtl::Term(spec) if spec.scrollback > SCROLLBACK_MAX => {
                return Err(Unfit::TermScrollback(spec.scrollback as u64))
            }
            SessionCtl::Term(Spec { dir, .. }) if !Path::new(dir).is_absolute() => {
                return Err(Unfit::RelativeDir(dir.clone()));
            }
            SessionCtl::Term(Spec { dir, .. }) if !Path::new(dir).is_dir() => {
                return Err(Unfit::NotADirectory(dir.clone()));
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
        assert_eq!(got[2], SessionCtl::Exec { dir: "/".into(), command: "ls -l".into(), window: None, font: None });
        let e = parse_session("window\nkill 99\n", &node.state).unwrap_err().to_string();
        assert!(e.starts_with("ctl line 2 (\"kill 99\"): kill: no process 99"), "{e}");
        let e = parse_session("window\nfrob\n", &node.state).unwrap_err().to_string();
        assert!(e.contains("line 2") && e.contains("expected window"), "{e}");
        assert!(parse_session("\n", &node.state).unwrap_err().to_string().contains("empty"));
        assert!(parse_session("delwindow 1", &node.state).unwrap_err().to_string().contains("no window 1"));
        let t = parse_session("term -s 100x30 -l 50 -d /tmp top -d 1", &node.state).unwrap();
        let want = Spec { dir: "/tmp".into(), cols: 100, rows: 30, scrollback: 50, command: Some("top -d 1".into()) };
        assert_eq!(t, [SessionCtl::Term(want)]);
        let blanks = std::env::temp_dir().join(format!("apex ctl {}", std::process::id()));
        std::fs::create_dir_all(&blanks).unwrap();
        let msg = format!("term -d {}", apex_core::ctlword::encode(&blanks.display().to_string()));
        let t = parse_session(&msg, &node.state).unwrap();
        assert!(matches!(&t[0], SessionCtl::Term(s) if Path::new(&s.dir) == blanks), "{t:?}");
        let _ = std::fs::remove_dir(&blanks);
        for (bad, says) in [
            ("term -s 0x24", "2 to 4096 columns"),
            ("term -s 1x24", "2 to 4096 columns"),
            ("term -s 80x4097", "2 to 4096 columns"),
            ("term -s 80", "2 to 4096 columns"),
            ("term -l 2000000", "over the limit"),
            ("term -d tmp", "not an absolute path"),
            ("term -d /no/such/dir", "not a directory"),
        ] {
            let e = parse_session(bad, &node.state).unwrap_err().to_string();
            assert!(e.contains(says), "{bad}: {e}");
        }
    }
}
