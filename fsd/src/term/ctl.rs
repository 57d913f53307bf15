//! A terminal's `ctl` language (`terms/N/ctl`): `resize COLS ROWS`,
//! `signal NAME`, `kill`, `close`, one per line, the whole write parsed
//! before any is done (the shape is [`crate::fsys::ctl`]'s).

use crate::fsys::ctl::{self, Arg, CtlError, Unfit, Verb};
use apex_core::term::MAX_SIDE;

/// A message of a terminal's `ctl`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum TermCtl {
    Resize {
        cols: u16,
        rows: u16,
    },
    /// A signal to the foreground process group.
    Signal(i32),
    /// SIGKILL to the program and the foreground process group.
    Kill,
    /// Ends the program if it runs and removes the terminal.
    Close,
}

/// Signals by name, as kill(1) spells them without `SIG`.
pub const SIGNALS: &[(&str, i32)] = &[
    ("HUP", libc::SIGHUP),
    ("INT", libc::SIGINT),
    ("QUIT", libc::SIGQUIT),
    ("KILL", libc::SIGKILL),
    ("USR1", libc::SIGUSR1),
    ("USR2", libc::SIGUSR2),
    ("PIPE", libc::SIGPIPE),
    ("ALRM", libc::SIGALRM),
    ("TERM", libc::SIGTERM),
    ("CONT", libc::SIGCONT),
    ("STOP", libc::SIGSTOP),
    ("TSTP", libc::SIGTSTP),
    ("TTIN", libc::SIGTTIN),
    ("TTOU", libc::SIGTTOU),
    ("WINCH", libc::SIGWINCH),
];

/// The most cells a terminal's screen may have: the emulator keeps two
/// grids of them (the alternate screen's too).
pub const MAX_CELLS: u32 = 1 << 20;

/// Whether a terminal may be `cols` by `rows`: 2 to 4096 columns (the
/// emulator needs two for a wide character), 1 to 4096 rows, at most
/// [`MAX_CELLS`] cells.
pub fn size_fits(cols: u16, rows: u16) -> bool {
    (2..=MAX_SIDE).contains(&cols) && (1..=MAX_SIDE).contains(&rows) && cols as u32 * rows as u32 <= MAX_CELLS
}

/// A signal's number from its name (`INT`, `SIGINT`, `int`).
pub fn signal_named(name: &str) -> Option<i32> {
    let upper = name.to_ascii_uppercase();
    let bare = upper.strip_prefix("SIG").unwrap_or(&upper);
    SIGNALS.iter().find(|(n, _)| *n == bare).map(|(_, s)| *s)
}

const VERBS: &[Verb<Parsed>] = &[
    Verb {
        name: "resize",
        args: &[Arg::Number("COLS"), Arg::Number("ROWS")],
        make: |v| Parsed::Resize(v[0].number().unwrap_or(0), v[1].number().unwrap_or(0)),
    },
    Verb { name: "signal", args: &[Arg::Word("NAME")], make: |v| Parsed::Signal(v[0].word()) },
    Verb { name: "kill", args: &[], make: |_| Parsed::Ready(TermCtl::Kill) },
    Verb { name: "close", args: &[], make: |_| Parsed::Ready(TermCtl::Close) },
];

/// A message before its arguments are checked.
enum Parsed {
    Resize(u64, u64),
    Signal(String),
    Ready(TermCtl),
}

/// Parses a terminal ctl write whole.
pub fn parse(text: &str) -> Result<Vec<TermCtl>, CtlError> {
    let msgs = ctl::parse_lines(text, VERBS, Ok)?;
    let mut out = Vec::new();
    for (n, (msg, line)) in msgs.into_iter().zip(text.lines().map(str::trim).filter(|l| !l.is_empty())).enumerate() {
        let checked = match msg {
            Parsed::Resize(c, r) => match (u16::try_from(c), u16::try_from(r)) {
                (Ok(cols), Ok(rows)) if size_fits(cols, rows) => Ok(TermCtl::Resize { cols, rows }),
                _ => Err(Unfit::TermSize),
            },
            Parsed::Signal(name) => signal_named(&name).map(TermCtl::Signal).ok_or(Unfit::NoSignal(name)),
            Parsed::Ready(m) => Ok(m),
        };
        let why = |e: Unfit| CtlError::Line { n: n + 1, line: line.to_string(), why: Box::new(CtlError::Refused(e)) };
        if out.last() == Some(&TermCtl::Close) {
            return Err(why(Unfit::AfterClose));
        }
        out.push(checked.map_err(why)?);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_parse_whole_and_bad_ones_say_why() {
        assert_eq!(
            parse("resize 100 40\nsignal int\nsignal SIGTERM\nkill\nclose\n").unwrap(),
            [
                TermCtl::Resize { cols: 100, rows: 40 },
                TermCtl::Signal(libc::SIGINT),
                TermCtl::Signal(libc::SIGTERM),
                TermCtl::Kill,
                TermCtl::Close
            ]
        );
        for (bad, says) in [
            ("resize 0 40", "2 to 4096 columns"),
            ("resize 1 40", "2 to 4096 columns"),
            ("resize 80 5000", "2 to 4096 columns"),
            ("resize 4096 4096", "at most 1048576 cells"),
            ("resize 80", "resize wants ROWS"),
            ("kill\nsignal FOO", "line 2"),
            ("signal FOO", "no signal \"FOO\""),
            ("frob", "expected resize COLS ROWS, signal NAME, kill or close"),
            ("close\nresize 80 24", "nothing may follow close"),
        ] {
            let e = parse(bad).unwrap_err().to_string();
            assert!(e.contains(says), "{bad}: {e}");
        }
    }
}
