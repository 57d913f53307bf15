//! The Edit language (sam's command language as acme's `Edit` has it):
//! parsing a command line into [`Cmd`]s. Running them is `ecmd.rs`.
//!
//! `[address] command [arguments]`, one command per line:
//! `a/text/`, `i/text/`, `c/text/` (or the text on the lines that follow,
//! up to a line holding only `.`), `d`, `s/re/replacement/[g]` (`sN/...`
//! for the Nth match), `m ADDR`, `t ADDR`, `p`, `=`, `=#`, `=+`,
//! `x/re/ cmd`, `y/re/ cmd`, `X/re/ cmd`, `Y/re/ cmd`, `g/re/ cmd`,
//! `v/re/ cmd`, `u [N]`, `<cmd`, `>cmd`, `|cmd`, `f`, `{ ... }`; an address
//! alone sets dot. The file commands, on the files of the daemon's (or the
//! UI's) machine and the session's windows: `b FILE` (go on in another
//! window), `B FILE...` (open windows), `D [FILE...]` (close them), `e
//! [FILE]` (replace the text with a file's), `r FILE` (replace the range),
//! `w [FILE]` (write the range, by default all). Text arguments end at any delimiter not a letter or
//! digit; `\n` in them is a newline. Addresses are sam's (`?re?` works).

use crate::addr::{AddrError, Address, Dialect};

/// One command and the address it applies to (dot if none).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Cmd {
    pub addr: Address,
    pub kind: Kind,
}

/// Which of `=`'s forms.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Position {
    /// `=`: `file:line` or `file:line,line`.
    Lines,
    /// `=#`: `file:#q0` or `file:#q0,#q1`.
    Runes,
    /// `=+`: `file:line+#column`.
    LineColumn,
}

/// The loops: over matches, between them, over windows, or a test.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Loop {
    /// `x`: each match in the range.
    Matches,
    /// `y`: the text between matches.
    Between,
    /// `X`: each window whose name matches.
    Files,
    /// `Y`: each window whose name does not match.
    OtherFiles,
    /// `g`: the range, if it holds a match.
    If,
    /// `v`: the range, if it does not.
    Unless,
}

/// Where a pipe's text goes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Pipe {
    /// `<cmd`: the output replaces the range.
    From,
    /// `>cmd`: the range is the input; the output is printed.
    To,
    /// `|cmd`: the range is the input and the output replaces it.
    Through,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Kind {
    /// An address alone: set dot.
    Dot,
    Append(String),
    Insert(String),
    Change(String),
    Delete,
    Substitute {
        pattern: String,
        replacement: String,
        /// Which match, from 1.
        nth: usize,
        global: bool,
    },
    Move(Address),
    Copy(Address),
    Print,
    Equals(Position),
    /// `f`: print the window's name line.
    Name,
    Loop {
        kind: Loop,
        /// `None`: lines for `x`/`y`, every window for `X`/`Y`.
        pattern: Option<String>,
        body: Box<Cmd>,
    },
    /// `u N`: undo N changes (redo for negative N).
    Undo(i64),
    Pipe {
        kind: Pipe,
        command: String,
    },
    Group(Vec<Cmd>),
    /// `b`, `B`, `D`, `e`, `r`, `w`.
    File {
        kind: FileCmd,
        arg: String,
    },
}

/// The commands on files and windows.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FileCmd {
    /// `b FILE`: later commands work on that window.
    Switch,
    /// `B FILE...`: opens each in a window (an empty one with none).
    Open,
    /// `D [FILE...]`: closes each (the current window with none).
    Close,
    /// `e [FILE]`: the whole text becomes the file's.
    Replace,
    /// `r FILE`: the range becomes the file's text.
    Read,
    /// `w [FILE]`: writes the range (all by default) to the file.
    Write,
}

/// Why an Edit command was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum EditError {
    #[error("Edit: {0}")]
    Syntax(String),
    /// `Kill Edit` (or `kill PID` of it) ended it.
    #[error("Edit: killed; the text is as it was")]
    Killed,
    #[error("Edit: {0}")]
    Addr(#[from] AddrError),
    #[error("Edit: no substitution for /{0}/")]
    NoSubstitution(String),
    #[error("Edit: changes out of order or overlapping at #{0}: each command's changes must be in sequence")]
    Overlap(u64),
    #[error("Edit: {0}")]
    Pipe(#[from] PipeError),
    #[error("Edit: no such file {0:?}")]
    NoSuchFile(String),
    #[error("Edit: no file name")]
    NoFileName,
    #[error("Edit: can't open {file}: {why}")]
    CantOpen { file: String, why: PipeError },
    /// acme's winclean before `e`: `NAME modified`, once.
    #[error("{} modified", if name.is_empty() { "unnamed file" } else { name.as_str() })]
    Modified { file: usize, name: String },
}

/// Why the host could not do what an Edit command asked of it outside
/// the text: run a command (`<`, `>`, `|`) or read or write a file (`e`,
/// `r`, `w`). The words are the system's, as acme's `%r` gives them.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PipeError {
    /// The shell could not be started or waited for.
    #[error("{command}: {why}")]
    Start { command: String, why: String },
    /// The command exited unsuccessfully: its status and its standard
    /// error.
    #[error("{command}: {status} {stderr}")]
    Failed { command: String, status: String, stderr: String },
    #[error("{command}: its output is not UTF-8 text")]
    NotText { command: String },
    /// The command printed more than a command may add: it was killed.
    #[error("{command}: printed more than {max} bytes, the most one command may add; it was killed")]
    TooMuch { command: String, max: u64 },
    #[error("{0}: not found")]
    NotFound(String),
    /// `e` or `r` of a directory, which acme's e_cmd refuses.
    #[error("is a directory")]
    IsADirectory,
    /// The system refused the file (its words, without Rust's "(os
    /// error N)").
    #[error("{0}")]
    System(String),
    /// The files are another machine's (a UI away from its daemon).
    #[error("{0}")]
    Elsewhere(&'static str),
}

type Result<T> = std::result::Result<T, EditError>;

const COMMANDS: &str =
    "a c i d s m t p = x y X Y g v u < > | f b B D e r w and { }, each after an optional address, one per line";

/// Parses a whole command text: commands separated by newlines.
pub fn parse(src: &str) -> Result<Vec<Cmd>> {
    let chars: Vec<char> = src.chars().collect();
    let mut p = Parser { src: &chars, at: 0 };
    let mut out = Vec::new();
    loop {
        p.skip_blanks_and_newlines();
        if p.at >= chars.len() {
            return Ok(out);
        }
        if p.peek() == Some('}') {
            return Err(EditError::Syntax("unexpected '}' with no '{' open".into()));
        }
        out.push(p.command()?);
    }
}

struct Parser<'a> {
    src: &'a [char],
    at: usize,
}

impl Parser<'_> {
    fn peek(&self) -> Option<char> {
        self.src.get(self.at).copied()
    }

    fn skip_blanks(&mut self) {
        while matches!(self.peek(), Some(' ' | '\t')) {
            self.at += 1;
        }
    }

    fn skip_blanks_and_newlines(&mut self) {
        while matches!(self.peek(), Some(' ' | '\t' | '\n')) {
            self.at += 1;
        }
    }

    fn address(&mut self) -> Result<Address> {
        let (addr, used) = Address::parse_prefix(&self.src[self.at..], Dialect::Sam)?;
        self.at += used;
        Ok(addr)
    }

    /// The end of a command: blanks, then a newline or the end (or a `}`
    /// closing a group, left for the group).
    fn end_of_command(&mut self, what: char) -> Result<()> {
        self.skip_blanks();
        match self.peek() {
            None | Some('}') => Ok(()),
            Some('\n') => {
                self.at += 1;
                Ok(())
            }
            Some(c) => Err(EditError::Syntax(format!("unexpected {c:?} after '{what}'"))),
        }
    }

    fn command(&mut self) -> Result<Cmd> {
        self.skip_blanks();
        let addr = self.address()?;
        self.skip_blanks();
        let Some(c) = self.peek() else { return Ok(Cmd { addr, kind: Kind::Dot }) };
        if c == '\n' || c == '}' {
            if c == '\n' {
                self.at += 1;
            }
            return Ok(Cmd { addr, kind: Kind::Dot });
        }
        self.at += 1;
        let kind = match c {
            'a' | 'i' | 'c' => {
                let text = self.text()?;
                match c {
                    'a' => Kind::Append(text),
                    'i' => Kind::Insert(text),
                    _ => Kind::Change(text),
                }
            }
            'd' | 'p' | 'f' => {
                self.end_of_command(c)?;
                match c {
                    'd' => Kind::Delete,
                    'p' => Kind::Print,
                    _ => Kind::Name,
                }
            }
            '=' => {
                let form = match self.peek() {
                    Some('#') => Position::Runes,
                    Some('+') => Position::LineColumn,
                    _ => Position::Lines,
                };
                if form != Position::Lines {
                    self.at += 1;
                }
                self.end_of_command('=')?;
                Kind::Equals(form)
            }
            's' => self.substitute()?,
            'm' | 't' => {
                self.skip_blanks();
                let to = self.address()?;
                if to.is_empty() {
                    return Err(EditError::Syntax(format!("'{c}' wants an address to put the text after")));
                }
                self.end_of_command(c)?;
                if c == 'm' {
                    Kind::Move(to)
                } else {
                    Kind::Copy(to)
                }
            }
            'x' | 'y' | 'X' | 'Y' | 'g' | 'v' => self.looping(c)?,
            'u' => {
                self.skip_blanks();
                let negative = self.peek() == Some('-');
                if negative {
                    self.at += 1;
                }
                let start = self.at;
                while self.peek().is_some_and(|c| c.is_ascii_digit()) {
                    self.at += 1;
                }
                let digits: String = self.src[start..self.at].iter().collect();
                let n: i64 = match digits.is_empty() {
                    true => 1,
                    false => digits.parse().map_err(|_| EditError::Syntax(format!("u {digits}: too large")))?,
                };
                self.end_of_command('u')?;
                Kind::Undo(if negative { -n } else { n })
            }
            '<' | '>' | '|' => {
                let start = self.at;
                while self.peek().is_some_and(|c| c != '\n') {
                    self.at += 1;
                }
                let command: String = self.src[start..self.at].iter().collect::<String>().trim().to_string();
                if self.peek() == Some('\n') {
                    self.at += 1;
                }
                if command.is_empty() {
                    return Err(EditError::Syntax(format!("'{c}' wants a command")));
                }
                let kind = match c {
                    '<' => Pipe::From,
                    '>' => Pipe::To,
                    _ => Pipe::Through,
                };
                Kind::Pipe { kind, command }
            }
            '{' => {
                let mut cmds = Vec::new();
                loop {
                    self.skip_blanks_and_newlines();
                    match self.peek() {
                        None => return Err(EditError::Syntax("'{' without its '}'".into())),
                        Some('}') => {
                            self.at += 1;
                            break;
                        }
                        _ => cmds.push(self.command()?),
                    }
                }
                self.end_of_command('}')?;
                Kind::Group(cmds)
            }
            'k' | 'n' | 'q' | '!' => {
                return Err(EditError::Syntax(format!("'{c}' is sam's, not acme's; {COMMANDS}")));
            }
            'b' | 'B' | 'D' | 'e' | 'r' | 'w' => {
                let kind = match c {
                    'b' => FileCmd::Switch,
                    'B' => FileCmd::Open,
                    'D' => FileCmd::Close,
                    'e' => FileCmd::Replace,
                    'r' => FileCmd::Read,
                    _ => FileCmd::Write,
                };
                // acme's cmdtab: only r and w take an address.
                if !addr.is_empty() && !matches!(kind, FileCmd::Read | FileCmd::Write) {
                    return Err(EditError::Syntax(format!("command takes no address: '{c}'")));
                }
                let arg = self.file_argument(c, kind)?;
                Kind::File { kind, arg }
            }
            c => return Err(EditError::Syntax(format!("unknown command {c:?}; {COMMANDS}"))),
        };
        Ok(Cmd { addr, kind })
    }

    /// A file command's argument: the rest of the line for `b`, `B` and
    /// `D` (acme's linex), one word for `e`, `r` and `w` (wordx); `b` and
    /// `r` need one.
    fn file_argument(&mut self, c: char, kind: FileCmd) -> Result<String> {
        self.skip_blanks();
        let start = self.at;
        let whole_line = matches!(kind, FileCmd::Switch | FileCmd::Open | FileCmd::Close);
        while self.peek().is_some_and(|c| c != '\n' && (whole_line || !matches!(c, ' ' | '\t'))) {
            self.at += 1;
        }
        let arg = self.src[start..self.at].iter().collect::<String>().trim().to_string();
        self.end_of_command(c)?;
        if arg.is_empty() && matches!(kind, FileCmd::Switch | FileCmd::Read) {
            return Err(EditError::Syntax(format!("'{c}' wants a file name")));
        }
        Ok(arg)
    }

    /// A delimiter: any character but a letter, a digit, a blank or a
    /// newline.
    fn delimiter(&mut self) -> Option<char> {
        match self.peek() {
            Some(d) if !d.is_alphanumeric() && !matches!(d, ' ' | '\t' | '\n') => {
                self.at += 1;
                Some(d)
            }
            _ => None,
        }
    }

    /// Text up to `delim` (or the newline or the end), with `\n` a newline
    /// and `\delim` the delimiter itself; `raw` keeps every other backslash
    /// pair as written (for regexps and replacements).
    fn delimited(&mut self, delim: char, raw: bool) -> String {
        let mut out = String::new();
        while let Some(c) = self.peek() {
            if c == '\n' {
                break;
            }
            self.at += 1;
            if c == delim {
                return out;
            }
            if c == '\\' {
                match self.peek() {
                    Some(n) if n == delim => {
                        self.at += 1;
                        // In a regexp a quoted delimiter that is a
                        // metacharacter stays quoted.
                        if raw && !n.is_alphanumeric() && "\\.*+?()[]{}|^$".contains(n) {
                            out.push('\\');
                        }
                        out.push(n);
                    }
                    Some('n') if !raw => {
                        self.at += 1;
                        out.push('\n');
                    }
                    Some(n) => {
                        self.at += 1;
                        out.push('\\');
                        out.push(n);
                    }
                    None => out.push('\\'),
                }
                continue;
            }
            out.push(c);
        }
        out
    }

    /// The text of `a`, `i` or `c`: delimited, or the following lines up
    /// to one holding only `.`.
    fn text(&mut self) -> Result<String> {
        self.skip_blanks();
        if self.peek() == Some('\n') || self.peek().is_none() {
            self.at += 1;
            let mut out = String::new();
            loop {
                let start = self.at.min(self.src.len());
                let mut end = start;
                while end < self.src.len() && self.src[end] != '\n' {
                    end += 1;
                }
                let line: String = self.src[start..end].iter().collect();
                self.at = end + 1;
                if line == "." || start >= self.src.len() {
                    return Ok(out);
                }
                out.push_str(&line);
                out.push('\n');
            }
        }
        let delim =
            self.delimiter().ok_or_else(|| EditError::Syntax("text wants a delimiter, as in a/text/".into()))?;
        let text = self.delimited(delim, false);
        self.end_of_command(delim)?;
        Ok(text)
    }

    fn substitute(&mut self) -> Result<Kind> {
        let start = self.at;
        while self.peek().is_some_and(|c| c.is_ascii_digit()) {
            self.at += 1;
        }
        let digits: String = self.src[start..self.at].iter().collect();
        let nth = match digits.is_empty() {
            true => 1,
            false => digits
                .parse()
                .ok()
                .filter(|n| *n > 0)
                .ok_or_else(|| EditError::Syntax(format!("s{digits}: bad count")))?,
        };
        let delim = self.delimiter().ok_or_else(|| EditError::Syntax("s wants s/regexp/replacement/".into()))?;
        let pattern = self.delimited(delim, true);
        let replacement = self.delimited(delim, true);
        let global = self.peek() == Some('g');
        if global {
            self.at += 1;
        }
        self.end_of_command('s')?;
        Ok(Kind::Substitute { pattern, replacement, nth, global })
    }

    fn looping(&mut self, c: char) -> Result<Kind> {
        let kind = match c {
            'x' => Loop::Matches,
            'y' => Loop::Between,
            'X' => Loop::Files,
            'Y' => Loop::OtherFiles,
            'g' => Loop::If,
            _ => Loop::Unless,
        };
        self.skip_blanks();
        let pattern = self.delimiter().map(|d| self.delimited(d, true));
        if pattern.is_none() && matches!(kind, Loop::If | Loop::Unless) {
            return Err(EditError::Syntax(format!("'{c}' wants a regexp: {c}/re/ command")));
        }
        self.skip_blanks();
        let body = match self.peek() {
            None | Some('\n') | Some('}') => {
                if self.peek() == Some('\n') {
                    self.at += 1;
                }
                let kind = if matches!(kind, Loop::Files | Loop::OtherFiles) { Kind::Name } else { Kind::Print };
                Cmd { addr: Address::parse_prefix(&[], Dialect::Sam)?.0, kind }
            }
            _ => self.command()?,
        };
        Ok(Kind::Loop { kind, pattern, body: Box::new(body) })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kinds(src: &str) -> Vec<Kind> {
        parse(src).unwrap().into_iter().map(|c| c.kind).collect()
    }

    #[test]
    fn commands_and_their_arguments() {
        assert_eq!(kinds("a/x\\ny/"), [Kind::Append("x\ny".into())]);
        assert_eq!(kinds("i:a/b:"), [Kind::Insert("a/b".into())]);
        assert_eq!(kinds("c\none\ntwo\n.\n"), [Kind::Change("one\ntwo\n".into())]);
        assert_eq!(kinds(",d"), [Kind::Delete]);
        assert_eq!(
            kinds("s2/a\\/b/[&]/g"),
            [Kind::Substitute { pattern: "a/b".into(), replacement: "[&]".into(), nth: 2, global: true }]
        );
        assert_eq!(
            kinds("=#\n=+\n="),
            [Kind::Equals(Position::Runes), Kind::Equals(Position::LineColumn), Kind::Equals(Position::Lines)]
        );
        assert_eq!(kinds("u\nu 3\nu -2"), [Kind::Undo(1), Kind::Undo(3), Kind::Undo(-2)]);
        assert_eq!(kinds("| sort -u"), [Kind::Pipe { kind: Pipe::Through, command: "sort -u".into() }]);
        let Kind::Loop { kind, pattern, body } = &kinds(",x/fo+/ c/bar/")[0] else { panic!() };
        assert_eq!((*kind, pattern.as_deref()), (Loop::Matches, Some("fo+")));
        assert_eq!(body.kind, Kind::Change("bar".into()));
        let Kind::Loop { body, .. } = &kinds("X/\\.c$/")[0] else { panic!() };
        assert_eq!(body.kind, Kind::Name);
        let Kind::Group(g) = &kinds(",x/a/ {\n\ti/[/\n\ta/]/\n}")[0].clone() else {
            let Kind::Loop { body, .. } = &kinds(",x/a/ {\n\ti/[/\n\ta/]/\n}")[0] else { panic!() };
            let Kind::Group(g) = &body.kind else { panic!() };
            assert_eq!(g.len(), 2);
            return;
        };
        panic!("{g:?}");
    }

    #[test]
    fn mistakes_say_what_is_expected() {
        for (src, says) in [
            ("k", "sam's"),
            ("1b /f", "command takes no address"),
            ("b", "wants a file name"),
            ("r", "wants a file name"),
            ("w a b", "after 'w'"),
            ("z", "unknown command"),
            ("s", "s/regexp/replacement/"),
            ("g p", "wants a regexp"),
            ("m", "wants an address"),
            ("{ p", "without its '}'"),
            ("}", "no '{'"),
            ("dx", "after 'd'"),
            ("<", "wants a command"),
        ] {
            let e = parse(src).unwrap_err().to_string();
            assert!(e.contains(says), "{src:?}: {e}");
        }
    }
}
