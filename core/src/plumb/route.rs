//! A message matched against rules, as the plumber's `match.c` does: the
//! first rule set whose patterns all hold takes it, rewritten by its
//! `set`, `add` and `delete`, for its port, with what to start when no
//! one reads the port. A message no rule set takes goes to the port its
//! `dst` names, if it names one; else it is refused.
//!
//! What a `data matches` takes when the message has a `click` attribute:
//! the leftmost-longest match that holds the click, the same span for
//! every such pattern of the set; the data becomes that span and the
//! `click` attribute goes.

use super::message::{pack_attributes, Message};
use super::rules::{expand, Dollar, ExpandError, Object, Rule, RuleSet, Rules, Verb};
use crate::regx::find_in_str;

/// What `isfile` and `isdir` ask of the machine.
pub trait Files {
    /// Whether `path` is a directory (`Some(true)`), another file
    /// (`Some(false)`), or nothing.
    fn is_dir(&mut self, path: &str) -> Option<bool>;
}

/// A program a rule set starts when no one reads its port: `plumb start`
/// (the message is dropped) or `plumb client` (it is held for the port).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Start {
    pub argv: Vec<String>,
    pub client: bool,
}

/// Where a message goes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Routed {
    /// The message as the rule set rewrote it; its `dst` is the port.
    pub message: Message,
    /// The matching rule set's start or client action, expanded.
    pub start: Option<Start>,
    /// Where the rule set that took it was written; none when the message
    /// went to the port its `dst` named with no rule taking it.
    pub rule: Option<(String, usize)>,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RouteError {
    #[error("no matching plumb rule")]
    NoRule,
    #[error("{file}:{line}: {why}")]
    Expand { file: String, line: usize, why: String },
}

/// The plumber's number of groups a `matches` keeps (`$0`..`$99`).
const GROUPS: usize = 100;

/// What matching one rule set has found so far (the plumber's `Exec`).
struct Exec {
    groups: Vec<Option<String>>,
    /// The span a clicked `data matches` took.
    span: Option<(usize, usize)>,
    clear_click: bool,
    set_data: bool,
    file: Option<String>,
    dir: Option<String>,
}

struct Vars<'a> {
    exec: &'a Exec,
    message: &'a Message,
}

impl Dollar for Vars<'_> {
    fn group(&self, n: usize) -> String {
        self.exec.groups.get(n).cloned().flatten().unwrap_or_default()
    }

    fn builtin(&self, name: &str) -> Option<String> {
        let m = self.message;
        Some(match name {
            "src" => m.src.clone(),
            "dst" => m.dst.clone(),
            "wdir" => m.wdir.clone(),
            "type" => m.kind.clone(),
            "data" => m.data_text(),
            "attr" => pack_attributes(&m.attr),
            "file" => file_name(m, self.exec.file.as_deref()),
            "dir" => file_name(m, self.exec.dir.as_deref()),
            _ => return None,
        })
    }
}

/// `$file` and `$dir`: the name an `isfile` or `isdir` found, else the
/// data as a file name in `wdir`; cleaned.
fn file_name(m: &Message, found: Option<&str>) -> String {
    let data = m.data_text();
    let name = match found {
        Some(f) if !f.is_empty() => f.to_string(),
        _ if data.starts_with('/') || m.wdir.is_empty() => data,
        _ => format!("{}/{data}", m.wdir),
    };
    clean_name(&name)
}

/// Plan 9's `cleanname`: no empty, `.` or undone `..` elements.
pub fn clean_name(name: &str) -> String {
    let rooted = name.starts_with('/');
    let mut out: Vec<&str> = Vec::new();
    for elem in name.split('/') {
        match elem {
            "" | "." => {}
            ".." if out.last().is_some_and(|e| *e != "..") => {
                out.pop();
            }
            ".." if rooted => {}
            e => out.push(e),
        }
    }
    let joined = out.join("/");
    match (rooted, joined.is_empty()) {
        (true, _) => format!("/{joined}"),
        (false, true) => ".".to_string(),
        (false, false) => joined,
    }
}

impl Rules {
    /// Where `message` goes: the first rule set that takes it, else the
    /// port its `dst` names; else [`RouteError::NoRule`].
    pub fn route(&self, message: &Message, files: &mut dyn Files) -> Result<Routed, RouteError> {
        for set in &self.sets {
            if let Some(routed) = route_by(set, message, files)? {
                return Ok(routed);
            }
        }
        match message.dst.is_empty() {
            true => Err(RouteError::NoRule),
            false => Ok(Routed { message: message.clone(), start: None, rule: None }),
        }
    }
}

fn route_by(set: &RuleSet, message: &Message, files: &mut dyn Files) -> Result<Option<Routed>, RouteError> {
    if let Some(port) = &set.port {
        if !message.dst.is_empty() && message.dst != *port {
            return Ok(None);
        }
    }
    let mut m = message.clone();
    let mut e =
        Exec { groups: vec![None; GROUPS], span: None, clear_click: false, set_data: false, file: None, dir: None };
    let failed = |e: ExpandError| RouteError::Expand { file: set.file.clone(), line: set.line, why: e.to_string() };
    for rule in &set.patterns {
        if !holds(rule, &mut m, &mut e, set, files).map_err(failed)? {
            return Ok(None);
        }
    }
    if let (Some(port), true) = (&set.port, m.dst.is_empty()) {
        m.dst = port.clone();
    }
    if e.clear_click {
        m.delete_attribute("click");
        if e.set_data {
            m.data = e.groups[0].clone().unwrap_or_default().into_bytes();
        }
    }
    let mut start = None;
    for a in set.actions.iter().filter(|a| matches!(a.verb, Verb::Start | Verb::Client)) {
        let mut argv = Vec::new();
        let mut rest = a.arg.as_str();
        loop {
            rest = rest.trim_start_matches([' ', '\t']);
            if rest.is_empty() {
                break;
            }
            let (word, after) = expand(rest, Some(&Vars { exec: &e, message: &m }), &set.vars).map_err(failed)?;
            argv.push(word);
            rest = after;
        }
        start = Some(Start { argv, client: a.verb == Verb::Client });
    }
    Ok(Some(Routed { message: m, start, rule: Some((set.file.clone(), set.line)) }))
}

/// Whether one pattern holds, doing what it says to the message.
fn holds(
    rule: &Rule,
    m: &mut Message,
    e: &mut Exec,
    set: &RuleSet,
    files: &mut dyn Files,
) -> Result<bool, ExpandError> {
    let expanded = |m: &Message, e: &Exec| -> Result<String, ExpandError> {
        expand(&rule.arg, Some(&Vars { exec: e, message: m }), &set.vars).map(|(w, _)| w)
    };
    // What the plumber takes and never acts on holds never (or, for a
    // `set`, changes nothing).
    let on_field = !matches!(rule.object, Object::Arg | Object::Attr | Object::Plumb);
    Ok(match rule.verb {
        Verb::Is => on_field && field(rule.object, m) == rule.qarg,
        Verb::Isnt => on_field && field(rule.object, m) != rule.qarg,
        Verb::Matches => on_field && matches(rule, m, e),
        Verb::Set => {
            let value = expanded(m, e)?;
            match rule.object {
                Object::Data => {
                    m.data = value.into_bytes();
                    e.span = None;
                    e.set_data = false;
                }
                Object::Dst => m.dst = value,
                Object::Type => m.kind = value,
                Object::Wdir => m.wdir = value,
                Object::Src => m.src = value,
                Object::Arg | Object::Attr | Object::Plumb => return Ok(false),
            }
            true
        }
        Verb::Add => {
            m.add_attributes(super::message::attributes(&expanded(m, e)?));
            true
        }
        // As the plumber does (its manual says otherwise): deleting an
        // attribute the message lacks fails the rule set.
        Verb::Delete => m.delete_attribute(&expanded(m, e)?),
        Verb::Isfile | Verb::Isdir => {
            let name = match rule.object {
                Object::Arg => expanded(m, e)?,
                Object::Data => m.data_text(),
                Object::Wdir => m.wdir.clone(),
                _ => return Ok(false),
            };
            let path = match name.starts_with('/') {
                true => name,
                false => clean_name(&format!("{}/{name}", m.wdir)),
            };
            let want_dir = rule.verb == Verb::Isdir;
            if files.is_dir(&path) != Some(want_dir) {
                return Ok(false);
            }
            match want_dir {
                true => e.dir = Some(path),
                false => e.file = Some(path),
            }
            true
        }
        Verb::Client | Verb::Start | Verb::To => false,
    })
}

fn field(object: Object, m: &Message) -> String {
    match object {
        Object::Data => m.data_text(),
        Object::Dst => m.dst.clone(),
        Object::Type => m.kind.clone(),
        Object::Wdir => m.wdir.clone(),
        Object::Src => m.src.clone(),
        Object::Arg | Object::Attr | Object::Plumb => String::new(),
    }
}

/// `matches`: the whole field, or for clicked data the match holding
/// the click; its groups become `$0`...
fn matches(rule: &Rule, m: &Message, e: &mut Exec) -> bool {
    let Some(re) = &rule.regex else { return false };
    let text = field(rule.object, m);
    let click = match rule.object {
        Object::Data => m.attr("click").map(atoi),
        _ => None,
    };
    let found = match click {
        None => find_in_str(re, &text, 0).filter(|f| f.whole() == (0..text.len())),
        // Before the text, as the plumber's loop has it: nothing.
        Some(click) if click < 0 => return false,
        Some(click) => {
            let Some(f) = holding(re, &text, click as usize) else { return false };
            let span = (f.whole().start, f.whole().end);
            if e.span.is_some_and(|s| s != span) {
                return false;
            }
            e.span = Some(span);
            e.clear_click = true;
            e.set_data = true;
            Some(f)
        }
    };
    let Some(f) = found else { return false };
    e.groups = (0..GROUPS).map(|i| f.group(i).map(|r| text[r].to_string())).collect();
    true
}

/// C's `atoi`, as the plumber reads a click: leading blanks, a sign,
/// digits; 0 where there are none.
fn atoi(s: &str) -> i64 {
    let s = s.trim_start();
    let (sign, digits) = match s.strip_prefix('-') {
        Some(rest) => (-1, rest),
        None => (1, s.strip_prefix('+').unwrap_or(s)),
    };
    let n = digits
        .bytes()
        .take_while(u8::is_ascii_digit)
        .fold(0i64, |n, d| n.saturating_mul(10).saturating_add(i64::from(d - b'0')));
    sign * n
}

/// The leftmost-longest match of `re` in `text` that holds rune `click`
/// (or ends right at it). Each search starts past the last match's start,
/// and the first match starting after the click ends the looking: the
/// work is a search per match before the click, not per rune.
fn holding(re: &crate::regx::Regexp, text: &str, click: usize) -> Option<crate::regx::Found> {
    let at = text.char_indices().nth(click).map_or(text.len(), |(i, _)| i);
    let mut from = 0;
    loop {
        let f = find_in_str(re, text, from)?;
        let whole = f.whole();
        if whole.start > at {
            return None;
        }
        if at <= whole.end {
            return Some(f);
        }
        // The next start after this match's: a rune on.
        from = text[whole.start..].chars().next().map_or(text.len() + 1, |c| whole.start + c.len_utf8());
        if from > at {
            return None;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_click_reads_as_atoi_reads_it() {
        for (s, n) in [("12", 12), (" 7x", 7), ("-1", -1), ("x", 0), ("", 0), ("+3", 3)] {
            assert_eq!(atoi(s), n, "{s:?}");
        }
    }

    #[test]
    fn clicked_matching_is_a_search_per_match_not_per_rune() {
        let re = crate::regx::Regexp::new("[a-z]+").unwrap();
        // Half a megabyte of one-letter words, clicked at the end: found,
        // and fast enough for a test however slow the machine.
        let text = "!a".repeat(1 << 18);
        let f = holding(&re, &text, text.len() - 1).unwrap();
        assert_eq!(f.whole(), text.len() - 1..text.len());
        assert!(holding(&re, "!!!!", 2).is_none());
        let f = holding(&re, "ab cd", 2).unwrap();
        assert_eq!(f.whole(), 0..2, "a match ending at the click holds it");
    }

    #[test]
    fn clean_names_as_plan9_does() {
        for (from, to) in [
            ("/a/./b//c/../d", "/a/b/d"),
            ("a/../..", ".."),
            ("/..", "/"),
            ("", "."),
            ("./x/", "x"),
            ("../../a", "../../a"),
        ] {
            assert_eq!(clean_name(from), to, "{from}");
        }
    }
}
