//! The one shape of every ctl file's language: a table of verbs, each
//! with the forms of its arguments and what it makes. The table is the
//! grammar, the usage line in every refusal, and the parser:
//!
//! - [`parse_lines`]: apex(4)'s ctl files (the root's, a session's,
//!   `buffers/N/ctl`): a message per line, words after the verb; the write
//!   is parsed whole before anything is applied, and a refusal names the
//!   line.
//! - [`parse_prefix`]: acme's window `ctl`: a message matched by prefix,
//!   its argument running to the newline, a plain one's newline optional
//!   (acme-fs.md §2); the caller applies messages one by one.

/// Why a ctl message was refused; each says what is expected instead.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CtlError {
    #[error("unknown message; {usage}")]
    Unknown { usage: String },
    /// An argument is missing (`verb` may name a flag too: `put -v`).
    #[error("{verb} wants {what}; expected {usage}")]
    Missing { verb: String, what: &'static str, usage: String },
    #[error("{verb} wants a number for {what}, got {got:?}; expected {usage}")]
    NotANumber { verb: &'static str, what: &'static str, got: String, usage: String },
    #[error("{verb}: {extra:?} is one argument too many; expected {usage}")]
    TooMany { verb: &'static str, extra: String, usage: String },
    /// The message parsed, but the file's state refuses it.
    #[error(transparent)]
    Refused(Unfit),
    #[error("ctl line {n} ({line:?}): {why}")]
    Line { n: usize, line: String, why: Box<CtlError> },
    #[error("ctl: empty write; {usage}")]
    Empty { usage: String },
    /// acme's: a verb that takes an argument was given none.
    #[error("{bad}: {verb} needs an argument")]
    NeedsArgument { bad: &'static str, verb: &'static str },
    /// acme's: a verb's argument runs to a newline that is not there.
    #[error("{bad}: {verb}'s argument must end with a newline")]
    NoNewline { bad: &'static str, verb: &'static str },
    /// acme's: a file name with a control character (acme's own words,
    /// not its ill-formed message).
    #[error("bad character in file name: {name:?}")]
    BadName { name: String },
    /// acme's: no verb matches.
    #[error("{bad}: {line:?}; {usage}")]
    Unmatched { bad: &'static str, line: String, usage: String },
}

/// Why a well-formed ctl message does not fit the state it would act on;
/// each says what to do instead.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Unfit {
    #[error("{0:?} is not an absolute path; name the file in full (the daemon runs elsewhere)")]
    RelativeFile(String),
    #[error("the buffer has no name; give a file")]
    Unnamed,
    #[error("put: buffer {buffer} is at version {at}, not {asked}; read it again or put without -v")]
    StaleVersion { buffer: u64, at: u64, asked: u64 },
    #[error("no window {0}")]
    NoWindow(u64),
    #[error("exec: {0:?} is not an absolute path; name the directory in full")]
    RelativeDir(String),
    #[error("exec: {0}: not a directory")]
    NotADirectory(String),
    #[error("kill: no process {0} in this session (see meta/processes)")]
    NoProcess(u64),
    #[error("a terminal is 2 to 4096 columns by 1 to 4096 rows, at most 1048576 cells (term -s 80x24, resize 80 24)")]
    TermSize,
    #[error("no signal {0:?}; name one of HUP INT QUIT KILL USR1 USR2 PIPE ALRM TERM CONT STOP TSTP TTIN TTOU WINCH")]
    NoSignal(String),
    #[error("nothing may follow close in the same write")]
    AfterClose,
    #[error("term: a scrollback of {0} rows is over the limit of 1000000")]
    TermScrollback(u64),
    #[error("bad character in file name {0:?}: a name holds no control character")]
    BadName(String),
    #[error("exec -f {0:?}: write a blank in a font's name as %20 and % as %25")]
    BadFont(String),
}

/// Whether `name` may name a buffer through apex's own files: no control
/// character (a tab would split its line of `index`, a newline end it).
pub fn fit_name(name: &str) -> Result<(), Unfit> {
    match name.chars().any(char::is_control) {
        true => Err(Unfit::BadName(name.to_string())),
        false => Ok(()),
    }
}

/// One argument's form, with the name the usage gives it.
#[derive(Clone, Copy, Debug)]
pub enum Arg {
    /// A word.
    Word(&'static str),
    /// A word, or nothing.
    Optional(&'static str),
    /// A decimal number.
    Number(&'static str),
    /// A flag and its number (`-v VERSION`), or nothing.
    Flag(&'static str, &'static str),
    /// A flag and its word (`-d DIR`), or nothing. Flags next to each
    /// other in a table may come in any order.
    FlagWord(&'static str, &'static str),
    /// The rest of the line, spaces and all; not empty.
    Rest(&'static str),
    /// The rest of the line, or nothing.
    RestOptional(&'static str),
}

/// What an argument was.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Value {
    Word(String),
    Number(u64),
    Absent,
}

impl Value {
    /// The word (a `Word`, `Rest`, or a present `Optional`).
    pub fn word(&self) -> String {
        self.optional().unwrap_or_default()
    }

    /// The word, if it was given.
    pub fn optional(&self) -> Option<String> {
        match self {
            Value::Word(w) => Some(w.clone()),
            Value::Number(n) => Some(n.to_string()),
            Value::Absent => None,
        }
    }

    /// The number (a `Number`), or a present `Flag`'s.
    pub fn number(&self) -> Option<u64> {
        match self {
            Value::Number(n) => Some(*n),
            _ => None,
        }
    }
}

/// A verb of a ctl language: its name, its arguments' forms, and the
/// message it makes of their values (in the order of `args`).
pub struct Verb<T> {
    pub name: &'static str,
    pub args: &'static [Arg],
    pub make: fn(&[Value]) -> T,
}

/// One verb's usage: `put [-v VERSION] [FILE]`.
fn verb_usage<T>(v: &Verb<T>) -> String {
    let mut out = v.name.to_string();
    for a in v.args {
        out.push(' ');
        out.push_str(&match a {
            Arg::Word(n) | Arg::Number(n) => n.to_string(),
            Arg::Rest(n) => n.to_string(),
            Arg::Optional(n) | Arg::RestOptional(n) => format!("[{n}]"),
            Arg::Flag(f, n) | Arg::FlagWord(f, n) => format!("[{f} {n}]"),
        });
    }
    out
}

/// The usage line of a whole table: `expected new [NAME], del NAME or
/// rename OLD NEW`.
pub fn usage<T>(table: &[Verb<T>]) -> String {
    let all: Vec<String> = table.iter().map(verb_usage).collect();
    match all.split_last() {
        Some((last, rest)) if !rest.is_empty() => format!("expected {} or {last}", rest.join(", ")),
        Some((last, _)) => format!("expected {last}"),
        None => "expected nothing".into(),
    }
}

/// Parses one line: the verb, then its arguments by their forms.
pub fn parse_line<T>(table: &[Verb<T>], line: &str) -> Result<T, CtlError> {
    let line = line.trim();
    let (name, mut rest) = line.split_once(char::is_whitespace).unwrap_or((line, ""));
    let Some(verb) = table.iter().find(|v| v.name == name) else {
        return Err(CtlError::Unknown { usage: usage(table) });
    };
    let name = verb.name;
    let missing = |what: &'static str| CtlError::Missing { verb: name.to_string(), what, usage: verb_usage(verb) };
    let next_word = |rest: &mut &str| -> Option<String> {
        let r = rest.trim_start();
        if r.is_empty() {
            return None;
        }
        let (w, after) = r.split_once(char::is_whitespace).unwrap_or((r, ""));
        *rest = after;
        Some(w.to_string())
    };
    let number = |got: String, what: &'static str| -> Result<u64, CtlError> {
        got.parse().map_err(|_| CtlError::NotANumber { verb: name, what, got, usage: verb_usage(verb) })
    };
    let mut values = vec![Value::Absent; verb.args.len()];
    let mut i = 0;
    while i < verb.args.len() {
        let arg = verb.args[i];
        let flag_of = |a: &Arg| match *a {
            Arg::Flag(f, w) | Arg::FlagWord(f, w) => Some((f, w, matches!(a, Arg::Flag(..)))),
            _ => None,
        };
        if flag_of(&arg).is_some() {
            // A run of flags, taken in any order, each once.
            let run = verb.args[i..].iter().take_while(|a| flag_of(a).is_some()).count();
            loop {
                let mut peek = rest;
                let Some(w) = next_word(&mut peek) else { break };
                let Some(k) = (i..i + run).find(|k| flag_of(&verb.args[*k]).is_some_and(|(f, _, _)| f == w)) else {
                    break;
                };
                if values[k] != Value::Absent {
                    break;
                }
                let (flag, what, numeric) = flag_of(&verb.args[k]).expect("a flag");
                rest = peek;
                let w = next_word(&mut rest).ok_or_else(|| CtlError::Missing {
                    verb: format!("{name} {flag}"),
                    what,
                    usage: verb_usage(verb),
                })?;
                values[k] = match numeric {
                    true => Value::Number(number(w, what)?),
                    false => Value::Word(w),
                };
            }
            i += run;
            continue;
        }
        values[i] = match arg {
            Arg::Word(what) => Value::Word(next_word(&mut rest).ok_or_else(|| missing(what))?),
            Arg::Optional(_) => next_word(&mut rest).map_or(Value::Absent, Value::Word),
            Arg::Number(what) => {
                let w = next_word(&mut rest).ok_or_else(|| missing(what))?;
                Value::Number(number(w, what)?)
            }
            Arg::Rest(what) => {
                let r = std::mem::take(&mut rest).trim();
                if r.is_empty() {
                    return Err(missing(what));
                }
                Value::Word(r.to_string())
            }
            Arg::RestOptional(_) => match std::mem::take(&mut rest).trim() {
                "" => Value::Absent,
                r => Value::Word(r.to_string()),
            },
            Arg::Flag(..) | Arg::FlagWord(..) => unreachable!("flags are taken above"),
        };
        i += 1;
    }
    if let Some(extra) = next_word(&mut rest) {
        return Err(CtlError::TooMany { verb: name, extra, usage: verb_usage(verb) });
    }
    Ok((verb.make)(&values))
}

/// Parses every non-blank line of a write with `table` and checks each
/// message with `check`, or says which line is wrong; an empty write is
/// refused with the table's usage.
pub fn parse_lines<T>(
    text: &str,
    table: &[Verb<T>],
    mut check: impl FnMut(T) -> Result<T, Unfit>,
) -> Result<Vec<T>, CtlError> {
    let mut out = Vec::new();
    let lines = text.lines().enumerate().map(|(i, l)| (i + 1, l.trim())).filter(|(_, l)| !l.is_empty());
    for (n, line) in lines {
        let msg = parse_line(table, line).and_then(|m| check(m).map_err(CtlError::Refused));
        out.push(msg.map_err(|why| CtlError::Line { n, line: line.to_string(), why: Box::new(why) })?);
    }
    if out.is_empty() {
        return Err(CtlError::Empty { usage: usage(table) });
    }
    Ok(out)
}

/// Parses the message at the start of `text` the way acme does: the
/// longest verb that `text` starts with (a verb with an argument
/// wants a space after it, and the argument runs to the newline); returns
/// it and the bytes it used, trailing newlines included. `bad` prefixes
/// every refusal (acme's "ill-formed control message").
pub fn parse_prefix<T>(table: &[Verb<T>], text: &str, bad: &'static str) -> Result<(T, usize), CtlError> {
    // The longest verb that matches (`delete` over `del`), as acme's order
    // of comparisons makes it.
    let matches = |v: &&Verb<T>| match v.args {
        [] => text.starts_with(v.name),
        [Arg::Rest(_)] => text.strip_prefix(v.name).is_some_and(|r| r.starts_with(' ')),
        _ => false,
    };
    let Some(verb) = table.iter().filter(matches).max_by_key(|v| v.name.len()) else {
        let line = text.split('\n').next().unwrap_or_default().to_string();
        return Err(CtlError::Unmatched { bad, line, usage: usage(table) });
    };
    let (used, values) = match verb.args {
        [] => (verb.name.len(), Vec::new()),
        _ => {
            // The argument runs to a newline, which must be there.
            let Some((arg, _)) = text[verb.name.len() + 1..].split_once('\n') else {
                return Err(CtlError::NoNewline { bad, verb: verb.name });
            };
            if arg.is_empty() {
                return Err(CtlError::NeedsArgument { bad, verb: verb.name });
            }
            (verb.name.len() + 1 + arg.len(), vec![Value::Word(arg.to_string())])
        }
    };
    let newlines = text[used..].bytes().take_while(|b| *b == b'\n').count();
    Ok(((verb.make)(&values), used + newlines))
}

#[cfg(test)]
mod tests {
    use super::*;

    const TERM: &[Verb<Msg>] = &[Verb {
        name: "term",
        args: &[Arg::FlagWord("-d", "DIR"), Arg::FlagWord("-s", "SIZE"), Arg::RestOptional("COMMAND")],
        make: |v| Msg::Term(v[0].optional(), v[1].optional(), v[2].optional()),
    }];

    #[derive(Debug, PartialEq)]
    enum Msg {
        Term(Option<String>, Option<String>, Option<String>),
        Put(Option<u64>, Option<String>),
        Exec(String, String),
        Kill(u64),
        Name(String),
        Clean,
    }

    const TABLE: &[Verb<Msg>] = &[
        Verb {
            name: "put",
            args: &[Arg::Flag("-v", "VERSION"), Arg::Optional("FILE")],
            make: |v| Msg::Put(v[0].number(), v[1].optional()),
        },
        Verb {
            name: "exec",
            args: &[Arg::Word("DIR"), Arg::Rest("COMMAND")],
            make: |v| Msg::Exec(v[0].word(), v[1].word()),
        },
        Verb { name: "kill", args: &[Arg::Number("PID")], make: |v| Msg::Kill(v[0].number().unwrap_or(0)) },
        Verb { name: "name", args: &[Arg::Rest("NAME")], make: |v| Msg::Name(v[0].word()) },
        Verb { name: "clean", args: &[], make: |_| Msg::Clean },
    ];

    #[test]
    fn a_line_parses_by_its_verbs_forms() {
        let p = |l| parse_line(TABLE, l);
        assert_eq!(p("put"), Ok(Msg::Put(None, None)));
        assert_eq!(p("put -v 3 /tmp/x"), Ok(Msg::Put(Some(3), Some("/tmp/x".into()))));
        assert_eq!(p("put /tmp/x"), Ok(Msg::Put(None, Some("/tmp/x".into()))));
        assert_eq!(p("exec /  ls -l  "), Ok(Msg::Exec("/".into(), "ls -l".into())));
        assert_eq!(p("name a b"), Ok(Msg::Name("a b".into())));
        assert_eq!(p("kill 7"), Ok(Msg::Kill(7)));
        let t = |l| parse_line(TERM, l);
        assert_eq!(t("term"), Ok(Msg::Term(None, None, None)));
        assert_eq!(
            t("term -s 80x24 -d /tmp vi x"),
            Ok(Msg::Term(Some("/tmp".into()), Some("80x24".into()), Some("vi x".into())))
        );
        assert_eq!(t("term -d /a ls -d /b"), Ok(Msg::Term(Some("/a".into()), None, Some("ls -d /b".into()))));
        assert_eq!(t("term -d /a -d /b"), Ok(Msg::Term(Some("/a".into()), None, Some("-d /b".into()))));
        assert_eq!(
            t("term -s").unwrap_err().to_string(),
            "term -s wants SIZE; expected term [-d DIR] [-s SIZE] [COMMAND]"
        );
        let bad: &[(&str, &str)] = &[
            ("put -v x", "put wants a number for VERSION, got \"x\"; expected put [-v VERSION] [FILE]"),
            ("put -v", "put -v wants VERSION; expected put [-v VERSION] [FILE]"),
            ("put a b", "put: \"b\" is one argument too many; expected put [-v VERSION] [FILE]"),
            ("exec /", "exec wants COMMAND; expected exec DIR COMMAND"),
            ("kill", "kill wants PID; expected kill PID"),
            ("clean now", "clean: \"now\" is one argument too many; expected clean"),
            (
                "frob",
                "unknown message; expected put [-v VERSION] [FILE], exec DIR COMMAND, kill PID, name NAME or clean",
            ),
        ];
        for (line, want) in bad {
            assert_eq!(p(line).unwrap_err().to_string(), *want, "{line:?}");
        }
    }

    #[test]
    fn a_write_is_checked_whole_and_names_the_bad_line() {
        let got = parse_lines("clean\n\n kill 3 \n", TABLE, Ok).unwrap();
        assert_eq!(got, vec![Msg::Clean, Msg::Kill(3)]);
        let e = parse_lines("clean\nkill 4\n", TABLE, |m| match m {
            Msg::Kill(4) => Err(Unfit::NoProcess(4)),
            m => Ok(m),
        })
        .unwrap_err();
        assert_eq!(e.to_string(), "ctl line 2 (\"kill 4\"): kill: no process 4 in this session (see meta/processes)");
        assert!(matches!(&e, CtlError::Line { n: 2, why, .. } if **why == CtlError::Refused(Unfit::NoProcess(4))));
        assert!(parse_lines(" \n", TABLE, Ok).unwrap_err().to_string().starts_with("ctl: empty write; expected put"));
    }

    #[test]
    fn a_prefix_match_as_acme_makes_it() {
        let p = |t| parse_prefix(TABLE, t, "bad");
        assert_eq!(p("cleanname x\n\nclean"), Ok((Msg::Clean, 5)));
        assert_eq!(p("name x y\n\nclean"), Ok((Msg::Name("x y".into()), 10)));
        assert_eq!(p("name x").unwrap_err(), CtlError::NoNewline { bad: "bad", verb: "name" });
        assert_eq!(p("name \n").unwrap_err(), CtlError::NeedsArgument { bad: "bad", verb: "name" });
        assert!(p("nam\n").unwrap_err().to_string().starts_with("bad: \"nam\"; expected put"));
        // Only plain verbs and verbs with a rest-of-line argument are
        // matched by prefix; others are for whole lines.
        assert!(p("kill 3\n").is_err());
    }
}
