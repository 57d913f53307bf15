//! The plumbing rule language of plumb(7), as plan9port's plumber reads
//! it (`rules.c`): rule sets of one-line patterns and actions ended by a
//! blank or comment line, `include FILE`, variable assignments
//! (`name=value`, expanded where they are used), quoting as in rc.
//!
//! Everything the plumber refuses is refused here with the file, line and
//! reason; what it takes, this takes, so a user's plumbing file that the
//! plumber reads reads here too (a pattern it never acts on, `attr is`,
//! never matches, and a pattern reads only its argument's first word, as
//! there). One verb is apex's own: `isn't`, the opposite of `is`. Nothing
//! here reads a file: an `include` is asked of the caller ([`Includes`]).

use crate::regx::{Regexp, RegexpError};
use std::sync::Arc;

/// What a pattern looks at, or `plumb` for an action.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Object {
    Arg,
    Attr,
    Data,
    Dst,
    Plumb,
    Src,
    Type,
    Wdir,
}

const OBJECTS: [(&str, Object); 8] = [
    ("arg", Object::Arg),
    ("attr", Object::Attr),
    ("data", Object::Data),
    ("dst", Object::Dst),
    ("plumb", Object::Plumb),
    ("src", Object::Src),
    ("type", Object::Type),
    ("wdir", Object::Wdir),
];

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verb {
    Add,
    Client,
    Delete,
    Is,
    Isdir,
    Isfile,
    /// apex's: the field is not the argument.
    Isnt,
    Matches,
    Set,
    Start,
    To,
}

const VERBS: [(&str, Verb); 11] = [
    ("add", Verb::Add),
    ("client", Verb::Client),
    ("delete", Verb::Delete),
    ("is", Verb::Is),
    ("isdir", Verb::Isdir),
    ("isfile", Verb::Isfile),
    ("isn't", Verb::Isnt),
    ("matches", Verb::Matches),
    ("set", Verb::Set),
    ("start", Verb::Start),
    ("to", Verb::To),
];

impl Object {
    pub fn name(self) -> &'static str {
        OBJECTS.iter().find(|(_, o)| *o == self).map_or("", |(n, _)| n)
    }

    /// Whether a rule may pair this object with `verb`: the plumber's
    /// `parserule` refuses these pairs and no others.
    fn takes(self, verb: Verb) -> bool {
        use Verb::*;
        match verb {
            Client | Start | To => self == Object::Plumb,
            Add | Delete => self == Object::Attr,
            Is | Isnt | Matches | Set | Isfile | Isdir => self != Object::Plumb,
        }
    }
}

impl Verb {
    pub fn name(self) -> &'static str {
        VERBS.iter().find(|(_, v)| *v == self).map_or("", |(n, _)| n)
    }
}

/// One line of a rule set.
#[derive(Clone, Debug)]
pub struct Rule {
    pub object: Object,
    pub verb: Verb,
    /// The argument as written: actions and rewrites expand it again when
    /// a message matches (`$0`, `$file`, ...).
    pub arg: String,
    /// Its first word, expanded when the rules were read: what `is`
    /// compares and `matches` compiles, a port's name.
    pub qarg: String,
    pub regex: Option<Regexp>,
}

/// A rule set: patterns, then actions; where it was written.
#[derive(Clone, Debug)]
pub struct RuleSet {
    pub patterns: Vec<Rule>,
    pub actions: Vec<Rule>,
    /// Its `plumb to` port.
    pub port: Option<String>,
    pub file: String,
    pub line: usize,
    /// The variables as the file left them: a rule's argument is expanded
    /// with them when a message matches, as the plumber's are.
    pub vars: Arc<Vec<Var>>,
}

/// A variable: its value as written, and expanded.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Var {
    pub name: String,
    pub value: String,
    pub expanded: String,
}

/// A rule file read: its rule sets in order, the ports it names, its
/// variables.
#[derive(Clone, Debug, Default)]
pub struct Rules {
    pub sets: Vec<RuleSet>,
    /// Every port named by a `plumb to`, declared or in a rule set, in the
    /// order first named.
    pub ports: Vec<String>,
    pub vars: Vec<Var>,
}

/// A rule file refused: where and why.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{file}:{line}: {why}")]
pub struct RuleError {
    pub file: String,
    pub line: usize,
    pub why: String,
    /// The text ended inside its last rule set, before any action: more
    /// lines may yet make it rules (a rules file written in pieces).
    pub unfinished: bool,
}

/// A file `include` names that cannot be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("can't open {name} for inclusion{}", .why.as_ref().map(|w| format!(": {w}")).unwrap_or_default())]
pub struct IncludeError {
    pub name: String,
    pub why: Option<String>,
}

/// A word that cannot be expanded.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ExpandError {
    #[error("expanded string too long (over {EXPANDED_MAX} bytes)")]
    TooLong,
    #[error("runaway quoted string literal")]
    RunawayQuote,
}

/// Where `include` finds a file.
pub trait Includes {
    /// The text of the file `include` names: its name as errors give it,
    /// and its text.
    fn include(&mut self, name: &str) -> Result<(String, String), IncludeError>;
}

/// No file can be included.
pub struct NoIncludes;

impl Includes for NoIncludes {
    fn include(&mut self, name: &str) -> Result<(String, String), IncludeError> {
        Err(IncludeError { name: name.to_string(), why: None })
    }
}

/// The plumber's limit on nested includes.
const INCLUDE_DEPTH: usize = 10;
/// The longest a word may grow when expanded (the plumber's is 4 KiB).
pub const EXPANDED_MAX: usize = 16 * 1024;
/// The longest port name: ports are file names.
pub const PORT_NAME_MAX: usize = 128;
/// Names a port cannot have: the plumber's own files.
const BAD_PORTS: [&str; 4] = [".", "..", "send", "rules"];
/// The most rule sets one text may hold, so no text grows without bound
/// in what every message is matched against.
pub const SETS_MAX: usize = 10_000;

struct Input {
    file: String,
    lines: Vec<String>,
    next: usize,
}

struct Parser<'a> {
    inputs: Vec<Input>,
    includes: &'a mut dyn Includes,
    vars: Vec<Var>,
    ports: Vec<String>,
}

enum Line {
    Eof,
    /// Blank, a comment or an assignment: it ends a rule set.
    Blank,
    Rule(Rule),
}

impl Rules {
    /// Reads the rule file `text`, named `file` in errors, starting from
    /// the variables `vars` (`$plan9`, or another file's).
    pub fn parse(file: &str, text: &str, includes: &mut dyn Includes, vars: &[Var]) -> Result<Rules, RuleError> {
        let mut p = Parser { inputs: Vec::new(), includes, vars: vars.to_vec(), ports: Vec::new() };
        p.push(file, text);
        let mut sets = Vec::new();
        while let Some(set) = p.rule_set()? {
            if sets.len() == SETS_MAX {
                return Err(p.error_at(&set.file, set.line, &format!("more than {SETS_MAX} rule sets")));
            }
            sets.push(set);
        }
        let vars = Arc::new(p.vars.clone());
        for set in &mut sets {
            set.vars = vars.clone();
        }
        Ok(Rules { sets, ports: p.ports, vars: p.vars })
    }

    /// These rules, then `later`'s: a message is matched against these
    /// first.
    pub fn then(mut self, later: Rules) -> Rules {
        self.sets.extend(later.sets);
        for port in later.ports {
            if !self.ports.contains(&port) {
                self.ports.push(port);
            }
        }
        self
    }
}

impl Parser<'_> {
    fn push(&mut self, file: &str, text: &str) {
        // The piece after a final newline is no line.
        let text = text.strip_suffix('\n').unwrap_or(text);
        let lines = text.split('\n').map(|l| l.trim_end_matches('\r').to_string()).collect();
        self.inputs.push(Input { file: file.to_string(), lines, next: 0 });
    }

    fn error(&self, why: impl Into<String>) -> RuleError {
        let (file, line) = self.inputs.last().map_or((String::new(), 0), |i| (i.file.clone(), i.next));
        RuleError { file, line, why: why.into(), unfinished: false }
    }

    fn error_at(&self, file: &str, line: usize, why: &str) -> RuleError {
        RuleError { file: file.to_string(), line, why: why.to_string(), unfinished: false }
    }

    /// The next line and where it is; at the end of an included file the
    /// one that included it goes on.
    fn line(&mut self) -> Option<String> {
        loop {
            let input = self.inputs.last_mut()?;
            if let Some(line) = input.lines.get(input.next) {
                input.next += 1;
                return Some(line.clone());
            }
            if self.inputs.len() == 1 {
                return None;
            }
            self.inputs.pop();
        }
    }

    fn rule_set(&mut self) -> Result<Option<RuleSet>, RuleError> {
        loop {
            let mut set = RuleSet {
                patterns: Vec::new(),
                actions: Vec::new(),
                port: None,
                file: String::new(),
                line: 0,
                vars: Arc::default(),
            };
            let mut commands = 0;
            let mut at_end = false;
            loop {
                let rule = match self.read_rule()? {
                    Line::Eof => {
                        at_end = true;
                        break;
                    }
                    Line::Blank if set.patterns.is_empty() && set.actions.is_empty() => continue,
                    Line::Blank => break,
                    Line::Rule(rule) => rule,
                };
                if set.patterns.is_empty() && set.actions.is_empty() {
                    let input = self.inputs.last().expect("a line was read");
                    (set.file, set.line) = (input.file.clone(), input.next);
                }
                match rule.object {
                    Object::Plumb if rule.verb == Verb::To => {
                        if !set.patterns.is_empty() && set.port.is_some() {
                            return Err(self.error("too many ports: a rule set plumbs to one"));
                        }
                        if let Some(why) = port_problem(&rule.qarg) {
                            return Err(self.error(why));
                        }
                        set.port = Some(rule.qarg.clone());
                        set.actions.push(rule);
                    }
                    Object::Plumb => {
                        commands += 1;
                        set.actions.push(rule);
                    }
                    _ => set.patterns.push(rule),
                }
            }
            let at = |why: &str| RuleError {
                file: set.file.clone(),
                line: set.line,
                why: why.to_string(),
                unfinished: false,
            };
            if commands > 1 {
                return Err(at("rule set has more than one client or start action"));
            }
            match (set.patterns.is_empty(), set.actions.is_empty()) {
                (true, true) => return Ok(None),
                (false, false) => {
                    if let Some(port) = &set.port {
                        self.declare(port);
                    }
                    return Ok(Some(set));
                }
                (false, true) => {
                    return Err(RuleError { unfinished: at_end, ..at("rule set must have patterns and actions") });
                }
                (true, false) if commands > 0 || set.port.is_none() => {
                    return Err(at("rule set has no patterns: it may only declare ports (plumb to PORT)"));
                }
                // Only `plumb to`: ports declared, and on to the next set.
                (true, false) => {
                    for a in &set.actions {
                        self.declare(&a.qarg);
                    }
                }
            }
        }
    }

    fn declare(&mut self, port: &str) {
        if !self.ports.iter().any(|p| p == port) {
            self.ports.push(port.to_string());
        }
    }

    fn read_rule(&mut self) -> Result<Line, RuleError> {
        loop {
            let Some(line) = self.line() else { return Ok(Line::Eof) };
            let p = line.trim_start_matches([' ', '\t']);
            if p.is_empty() || p.starts_with('#') {
                return Ok(Line::Blank);
            }
            if p.contains('\0') {
                return Err(self.error("a NUL byte in a rule"));
            }
            if p.starts_with("include") && self.include(p)? {
                continue;
            }
            if self.assignment(p)? {
                return Ok(Line::Blank);
            }
            return self.rule(p).map(Line::Rule);
        }
    }

    /// `include FILE`: pushes the file; false if the line is no include.
    fn include(&mut self, p: &str) -> Result<bool, RuleError> {
        let words: Vec<&str> = p.split([' ', '\t']).filter(|w| !w.is_empty()).collect();
        if words[0] != "include" {
            return Ok(false);
        }
        let malformed =
            words.len() < 2 || words[1].starts_with('#') || words.get(2).is_some_and(|w| !w.starts_with('#'));
        if malformed {
            return Err(self.error("malformed include statement: include FILE"));
        }
        if self.inputs.len() > INCLUDE_DEPTH {
            return Err(self.error(format!("include stack too deep; max {INCLUDE_DEPTH}")));
        }
        let (name, text) = self.includes.include(words[1]).map_err(|e| self.error(e.to_string()))?;
        self.push(&name, &text);
        Ok(true)
    }

    /// `name=value`: sets the variable; false if the line is no assignment.
    fn assignment(&mut self, p: &str) -> Result<bool, RuleError> {
        let n = var_name_len(p);
        if n == 0 {
            return Ok(false);
        }
        let rest = p[n..].trim_start_matches([' ', '\t']);
        let Some(value) = rest.strip_prefix('=') else { return Ok(false) };
        let value = value.trim_start_matches([' ', '\t']);
        let (expanded, _) = expand(value, None, &self.vars).map_err(|e| self.error(e.to_string()))?;
        let var = Var { name: p[..n].to_string(), value: value.to_string(), expanded };
        match self.vars.iter_mut().find(|v| v.name == var.name) {
            Some(v) => *v = var,
            None => self.vars.push(var),
        }
        Ok(true)
    }

    fn rule(&self, p: &str) -> Result<Rule, RuleError> {
        let malformed = || self.error(format!("malformed rule {p:?}: OBJECT VERB ARGUMENT"));
        let (object, rest) = p.split_once([' ', '\t']).ok_or_else(malformed)?;
        let rest = rest.trim_start_matches([' ', '\t']);
        let (verb, arg) = rest.split_once([' ', '\t']).ok_or_else(malformed)?;
        let arg = arg.trim_start_matches([' ', '\t']);
        if arg.is_empty() {
            return Err(malformed());
        }
        let object = match object {
            // The plumber's old name for `type`.
            "kind" => Object::Type,
            o => OBJECTS.iter().find(|(n, _)| *n == o).map(|(_, o)| *o).ok_or_else(|| {
                self.error(format!("unknown object {o} (arg, attr, data, dst, plumb, src, type, wdir)"))
            })?,
        };
        let verb = VERBS.iter().find(|(n, _)| *n == verb).map(|(_, v)| *v).ok_or_else(|| {
            self.error(format!(
                "unknown verb {verb} (add, client, delete, is, isdir, isfile, isn't, matches, set, start, to)"
            ))
        })?;
        if !object.takes(verb) {
            return Err(self.error(format!("{} not valid verb for object {}", verb.name(), object.name())));
        }
        // An action's command is words; a pattern reads the first (what
        // follows it is passed over, as the plumber does).
        let (qarg, _) = expand(arg, None, &self.vars).map_err(|e| self.error(e.to_string()))?;
        let regex = match verb {
            Verb::Matches => Some(Regexp::new(&qarg).map_err(|e: RegexpError| self.error(e.to_string()))?),
            _ => None,
        };
        Ok(Rule { object, verb, arg: arg.to_string(), qarg, regex })
    }
}

/// Why `port` cannot name a port, if it cannot.
fn port_problem(port: &str) -> Option<String> {
    if BAD_PORTS.contains(&port) || port.is_empty() {
        return Some(format!("illegal port name {port:?}"));
    }
    if port.contains(['/', '\n', '\0']) || port.len() > PORT_NAME_MAX {
        return Some(format!("illegal port name {port:?}: a port is a file name of at most {PORT_NAME_MAX} bytes"));
    }
    None
}

/// The length of the variable name `s` starts with (rc's: a letter or
/// `_`, then letters, digits and `_`).
fn var_name_len(s: &str) -> usize {
    let b = s.as_bytes();
    if b.first().is_none_or(|c| !(c.is_ascii_alphabetic() || *c == b'_')) {
        return 0;
    }
    b.iter().take_while(|c| c.is_ascii_alphanumeric() || **c == b'_').count()
}

/// What `$NAME` means while a message is matched.
pub trait Dollar {
    /// `$0`..`$99`: a group of the last `data matches`.
    fn group(&self, n: usize) -> String;
    /// `$src`, `$dst`, `$dir`, `$attr`, `$data`, `$file`, `$type`, `$wdir`.
    fn builtin(&self, name: &str) -> Option<String>;
}

/// Expands the blank-ended word `s` starts with: quotes taken off (a
/// doubled quote in quotes is a quote), `$var` replaced by its value when
/// it has one. With no message (`dollar` none), as the rules are read,
/// `$0` and the built-ins are left as they are. The expansion and what is
/// left after the word.
pub fn expand<'s>(s: &'s str, dollar: Option<&dyn Dollar>, vars: &[Var]) -> Result<(String, &'s str), ExpandError> {
    let mut out = String::new();
    let mut quoting = false;
    let mut rest = s;
    while let Some(c) = rest.chars().next() {
        if !quoting && (c == ' ' || c == '\t') {
            break;
        }
        if out.len() > EXPANDED_MAX {
            return Err(ExpandError::TooLong);
        }
        rest = &rest[c.len_utf8()..];
        if c == '\'' {
            match (quoting, rest.strip_prefix('\'')) {
                (true, Some(after)) => {
                    out.push('\'');
                    rest = after;
                }
                _ => quoting = !quoting,
            }
            continue;
        }
        if quoting || c != '$' {
            out.push(c);
            continue;
        }
        match value_of(rest, dollar, vars) {
            Some((value, used)) => {
                out.push_str(&value);
                rest = &rest[used..];
            }
            None => out.push('$'),
        }
    }
    if quoting {
        return Err(ExpandError::RunawayQuote);
    }
    if out.len() > EXPANDED_MAX {
        return Err(ExpandError::TooLong);
    }
    Ok((out, rest))
}

/// The value of the variable `s` starts with (after its `$`), and its
/// name's length.
fn value_of(s: &str, dollar: Option<&dyn Dollar>, vars: &[Var]) -> Option<(String, usize)> {
    let digits = s.bytes().take_while(u8::is_ascii_digit).count();
    if digits > 0 {
        let d = dollar?;
        let n: usize = s[..digits].parse().unwrap_or(usize::MAX);
        return Some((d.group(n), digits));
    }
    let n = var_name_len(s);
    if n == 0 {
        return None;
    }
    let name = &s[..n];
    if let Some(value) = dollar.and_then(|d| d.builtin(name)) {
        return Some((value, n));
    }
    vars.iter().find(|v| v.name == name).map(|v| (v.expanded.clone(), n))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<Rules, RuleError> {
        Rules::parse("rules", text, &mut NoIncludes, &[])
    }

    #[test]
    fn rule_sets_end_at_blank_and_comment_lines() {
        let r = parse("type is text\nplumb to a\n# note\ntype is x\nplumb to b\n\n\nplumb to c\nplumb to d\n").unwrap();
        assert_eq!(r.sets.len(), 2);
        assert_eq!((r.sets[0].line, r.sets[1].line), (1, 4));
        assert_eq!(r.ports, ["a", "b", "c", "d"]);
        assert_eq!(r.sets[1].port.as_deref(), Some("b"));
    }

    #[test]
    fn what_the_plumber_takes_is_taken() {
        // A second word after a pattern's argument is passed over, and a
        // pattern the plumber never acts on parses, as there.
        let r = parse("data is a b\nattr is x\nsrc isfile y\ndata isn't z\nplumb to p extra\n").unwrap();
        assert_eq!(r.sets[0].patterns[0].qarg, "a");
        assert_eq!(r.sets[0].patterns[3].verb, Verb::Isnt);
        assert_eq!(r.sets[0].port.as_deref(), Some("p"));
    }

    #[test]
    fn variables_expand_where_the_rules_are_read_and_quotes_come_off() {
        let r = parse("x='a b'\ny = $x''c\ndata is $y\nplumb to 'it''s'\n").unwrap();
        assert_eq!(r.vars[1].expanded, "a bc");
        assert_eq!(r.sets[0].patterns[0].qarg, "a bc");
        assert_eq!(r.sets[0].port.as_deref(), Some("it's"));
        // Unknown names and $0 stay as written until a message matches.
        let r = parse("data is $nope$0\nplumb to p\n").unwrap();
        assert_eq!(r.sets[0].patterns[0].qarg, "$nope$0");
    }

    #[test]
    fn what_the_plumber_refuses_is_refused_with_line_and_reason() {
        let cases = [
            ("type is text\n", 1, "must have patterns and actions"),
            ("\n\ntype frob text\nplumb to x\n", 3, "unknown verb frob"),
            ("type is text\nbogus is x\nplumb to x\n", 2, "unknown object bogus"),
            ("type is text\nplumb to x\nplumb to y\n", 3, "too many ports"),
            ("type is text\nplumb to send\n", 2, "illegal port name"),
            ("type is text\nplumb to a/b\n", 2, "illegal port name"),
            ("type is text\nplumb start a\nplumb client b\n", 1, "more than one client or start"),
            ("type\n", 1, "malformed rule"),
            ("type is\n", 1, "malformed rule"),
            ("data add x=1\nplumb to p\n", 1, "add not valid verb for object data"),
            ("plumb is x\n", 1, "is not valid verb for object plumb"),
            ("data matches '(x'\nplumb to p\n", 1, "bad regexp"),
            ("data matches 'x\nplumb to p\n", 1, "runaway quoted"),
            ("plumb start x\n", 1, "may only declare ports"),
            ("include\n", 1, "malformed include"),
            ("include basic\n", 1, "can't open basic"),
        ];
        for (text, line, why) in cases {
            let e = parse(text).expect_err(text);
            assert_eq!(e.line, line, "{text:?}: {e}");
            assert!(e.why.contains(why), "{text:?}: {e}");
            assert!(e.to_string().starts_with(&format!("rules:{line}: ")), "{e}");
        }
    }

    #[test]
    fn a_text_that_ends_before_its_last_set_s_action_is_unfinished() {
        assert!(parse("data is x\nplumb to p\n\ndata is y\n").unwrap_err().unfinished);
        // Ended by a blank line, it is wrong, not unfinished.
        assert!(!parse("data is y\n\ndata is x\nplumb to p\n").unwrap_err().unfinished);
        assert!(!parse("data frob y\n").unwrap_err().unfinished);
    }

    #[test]
    fn includes_nest_and_a_loop_is_refused() {
        struct Files;
        impl Includes for Files {
            fn include(&mut self, name: &str) -> Result<(String, String), IncludeError> {
                match name {
                    "vars" => Ok(("/lib/vars".into(), "v=1\n".into())),
                    "loop" => Ok(("/lib/loop".into(), "include loop\n".into())),
                    _ => Err(IncludeError { name: name.into(), why: None }),
                }
            }
        }
        let r = Rules::parse("r", "include vars # why\ndata is $v\nplumb to p\n", &mut Files, &[]).unwrap();
        assert_eq!(r.sets[0].patterns[0].qarg, "1");
        assert_eq!((r.sets[0].file.as_str(), r.sets[0].line), ("r", 2));
        let e = Rules::parse("r", "include loop\n", &mut Files, &[]).unwrap_err();
        assert!(e.why.contains("include stack too deep"), "{e}");
        assert_eq!(e.file, "/lib/loop");
    }

    #[test]
    fn hostile_text_is_refused_never_a_panic() {
        let long = format!("x={}\ny=$x$x$x$x$x\n", "a".repeat(EXPANDED_MAX / 4));
        assert!(parse(&long).unwrap_err().why.contains("too long"));
        for text in ["\0", "data matches \0\nplumb to p", "é is é", "$", "'", "=", "a=", "data matches [\nplumb to x"]
        {
            let _ = parse(text);
        }
        let mut bytes = 0u64;
        for n in 0..2000u64 {
            bytes = bytes.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407 + n);
            let words = ["data", "matches", "'", "$", "\n", "plumb", "to", " ", "is", "x=", "include", "#", "(", "\t"];
            let text: String = (0..40).map(|i| words[((bytes >> (i % 60)) as usize) % words.len()]).collect();
            let _ = parse(&text);
        }
    }
}
