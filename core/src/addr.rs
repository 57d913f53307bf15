//! Addresses: acme's and sam's address language, evaluated on a text.
//!
//! `#n` (rune n), `n` (line n), `/re/` and `?re?` (search forward and
//! backward, wrapping), `$` (the end), `.` (the base range, which for the
//! addr file is the current address), `a,b` (from the start of a to the end
//! of b, each from the base), `a;b` (b evaluated from a), and `a+b`, `a-b`
//! (b relative to a; a bare sign is one line). Juxtaposition follows acme:
//! after `.` or `$` a term is relative forward, after a number or regexp a
//! regexp searches on from its end and a number is absolute.
//!
//! Two dialects differ in one quirk (acme-fs.md §3): in acme's addr file a
//! `?` pattern ends only at `/`, a newline or the end, so a closing `?`
//! belongs to the pattern and clients write `-/re/` to search backward;
//! sam's Edit language keeps `?re?`.
//!
//! Regexps are acme's, run as acme runs them (`regx`). `//` reuses the
//! last regexp, which the caller keeps: one for the whole session, as acme
//! keeps one for the whole program.
//!
//! The two dialects also differ at the edges of a search, as acme's
//! `address` and Edit's `nextmatch` do: in the addr file a search may
//! match the empty string where it starts (`/^/` from #0 is #0), and `a,b`
//! with b before a is taken as written; Edit passes over an empty match
//! where it starts, so repeating a search moves on, and refuses addresses
//! out of order.

use crate::regx::{Haystack, Regexp};
use ropey::Rope;

/// A range of runes, `q0 <= q1` (except an addr file's backwards `#5,#2`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Range {
    pub q0: u64,
    pub q1: u64,
}

impl Range {
    pub fn new(q0: u64, q1: u64) -> Range {
        Range { q0, q1 }
    }

    /// The empty range at `q`.
    pub fn at(q: u64) -> Range {
        Range { q0: q, q1: q }
    }
}

/// Which address language: the addr file's, or sam's (Edit).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Dialect {
    AddrFile,
    Sam,
}

/// Why an address was refused; the text starts with acme's own words.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AddrError {
    #[error("bad address syntax: {0}")]
    Syntax(String),
    #[error("address out of range: {0}")]
    Range(String),
    #[error(transparent)]
    Regexp(#[from] crate::regx::RegexpError),
}

type Result<T> = std::result::Result<T, AddrError>;

#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Simple {
    Char(u64),
    Line(u64),
    /// A search; `forward` as written (`/`), before any sign flips it.
    Search {
        pattern: String,
        forward: bool,
    },
    Dot,
    End,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Expr {
    Simple(Simple),
    /// `a+b` or `a-b`; `None` is one line.
    Rel {
        base: Box<Expr>,
        forward: bool,
        by: Option<Simple>,
    },
    /// `a,b` or `a;b` with either side possibly missing.
    Pair {
        left: Option<Box<Expr>>,
        right: Option<Box<Expr>>,
        chain: bool,
    },
}

struct Parser<'a> {
    src: &'a [char],
    at: usize,
    dialect: Dialect,
}

impl Parser<'_> {
    fn peek(&self) -> Option<char> {
        self.src.get(self.at).copied()
    }

    fn addr(&mut self) -> Result<Option<Expr>> {
        let left = self.term()?;
        match self.peek() {
            Some(c @ (',' | ';')) => {
                self.at += 1;
                let right = self.addr()?;
                Ok(Some(Expr::Pair { left: left.map(Box::new), right: right.map(Box::new), chain: c == ';' }))
            }
            _ => Ok(left),
        }
    }

    fn term(&mut self) -> Result<Option<Expr>> {
        let mut expr: Option<Expr> = None;
        loop {
            match self.peek() {
                Some(c @ ('+' | '-')) => {
                    self.at += 1;
                    let by = match self.peek() {
                        Some('.' | '$') => {
                            return Err(AddrError::Syntax(format!("'{}' cannot follow '{c}'", self.src[self.at])))
                        }
                        _ => self.simple()?,
                    };
                    let base = expr.take().unwrap_or(Expr::Simple(Simple::Dot));
                    expr = Some(Expr::Rel { base: Box::new(base), forward: c == '+', by });
                }
                _ => {
                    let Some(s) = self.simple()? else { return Ok(expr) };
                    expr = Some(match expr {
                        None => Expr::Simple(s),
                        Some(prev) => juxtapose(prev, s)?,
                    });
                }
            }
        }
    }

    fn number(&mut self) -> Result<u64> {
        let start = self.at;
        while self.peek().is_some_and(|c| c.is_ascii_digit()) {
            self.at += 1;
        }
        let digits: String = self.src[start..self.at].iter().collect();
        digits.parse().map_err(|_| AddrError::Range(format!("number {digits} is too large")))
    }

    fn simple(&mut self) -> Result<Option<Simple>> {
        let Some(c) = self.peek() else { return Ok(None) };
        Ok(Some(match c {
            '#' => {
                self.at += 1;
                if !self.peek().is_some_and(|c| c.is_ascii_digit()) {
                    return Err(AddrError::Syntax("'#' wants a number of runes".into()));
                }
                Simple::Char(self.number()?)
            }
            '0'..='9' => Simple::Line(self.number()?),
            '.' => {
                self.at += 1;
                Simple::Dot
            }
            '$' => {
                self.at += 1;
                Simple::End
            }
            '/' | '?' => {
                self.at += 1;
                Simple::Search { pattern: self.pattern(c)?, forward: c == '/' }
            }
            _ => return Ok(None),
        }))
    }

    /// The pattern after `delim`, up to its end; backslash pairs are kept.
    fn pattern(&mut self, delim: char) -> Result<String> {
        let ends = |c: char| match (self.dialect, delim) {
            (Dialect::AddrFile, '?') => c == '/' || c == '\n',
            _ => c == delim || c == '\n',
        };
        let mut out = String::new();
        while let Some(c) = self.peek() {
            if c == '\\' {
                out.push(c);
                self.at += 1;
                if let Some(n) = self.peek() {
                    out.push(n);
                    self.at += 1;
                }
                continue;
            }
            if ends(c) {
                if c != '\n' {
                    self.at += 1;
                }
                return Ok(out);
            }
            out.push(c);
            self.at += 1;
        }
        Ok(out)
    }
}

/// `prev s` with no sign between.
fn juxtapose(prev: Expr, s: Simple) -> Result<Expr> {
    let prev_is_dot_or_end = matches!(prev, Expr::Simple(Simple::Dot | Simple::End));
    match s {
        Simple::Dot | Simple::End => {
            Err(AddrError::Syntax("'.' and '$' go only at the start or after ',' or ';'".into()))
        }
        Simple::Search { .. } => Ok(Expr::Rel { base: Box::new(prev), forward: true, by: Some(s) }),
        _ if prev_is_dot_or_end => Ok(Expr::Rel { base: Box::new(prev), forward: true, by: Some(s) }),
        _ => Ok(Expr::Simple(s)),
    }
}

/// The text an address is evaluated on, with the string form searches use
/// made once, on first need (or lent by the caller, who may keep one).
struct Subject<'a> {
    rope: &'a Rope,
    hay: Option<std::borrow::Cow<'a, Haystack>>,
    dialect: Dialect,
    /// acme's `limit=addr`: forward searches stop at its end and do not wrap.
    limit: Option<Range>,
}

impl Subject<'_> {
    fn len(&self) -> u64 {
        self.rope.len_chars() as u64
    }

    fn char_at(&self, q: u64) -> char {
        self.rope.char(q as usize)
    }

    fn haystack(&mut self) -> &Haystack {
        let rope = self.rope;
        self.hay.get_or_insert_with(|| std::borrow::Cow::Owned(Haystack::new(rope)))
    }
}

/// Evaluates `addr` on `text` with base range `dot`. `last_regex` is the
/// previous regexp, which `//` reuses; a search sets it.
pub fn eval(text: &Rope, addr: &str, dot: Range, dialect: Dialect, last_regex: &mut Option<String>) -> Result<Range> {
    eval_in(&Context::new(text, None, dialect, None), addr, dot, last_regex)
}

/// What an address is evaluated against, beyond the address and dot.
pub struct Context<'a> {
    pub text: &'a Rope,
    /// `text` made ready for searches, if the caller has it.
    pub flat: Option<&'a Haystack>,
    pub dialect: Dialect,
    /// acme's per-window limit (`limit=addr`): forward searches end at its
    /// end and do not wrap.
    pub limit: Option<Range>,
    /// `text`'s length in runes, asked for by every evaluation (ropey
    /// adds up the root's children for it each time it is asked; an
    /// Edit's loop evaluates a command's address once a match).
    pub(crate) len: u64,
}

impl<'a> Context<'a> {
    pub fn new(text: &'a Rope, flat: Option<&'a Haystack>, dialect: Dialect, limit: Option<Range>) -> Context<'a> {
        Context { text, flat, dialect, limit, len: text.len_chars() as u64 }
    }
}

/// [`eval`] with a limit and, optionally, the text already flattened.
pub fn eval_in(cx: &Context, addr: &str, dot: Range, last_regex: &mut Option<String>) -> Result<Range> {
    let src: Vec<char> = addr.chars().collect();
    let (address, used) = Address::parse_prefix(&src, cx.dialect)?;
    if used < src.len() {
        let rest: String = src[used..].iter().collect();
        return Err(AddrError::Syntax(format!("unexpected {rest:?}")));
    }
    address.eval(cx, dot, last_regex)
}

/// A parsed address. The Edit language reads one before each command, so
/// parsing stops at the first character that cannot continue it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Address(Option<Expr>);

impl Address {
    /// Parses the address at the start of `src`; returns it and the number
    /// of characters it took.
    pub fn parse_prefix(src: &[char], dialect: Dialect) -> Result<(Address, usize)> {
        let mut p = Parser { src, at: 0, dialect };
        let expr = p.addr()?;
        Ok((Address(expr), p.at))
    }

    /// Whether no address was written (the command's default applies).
    pub fn is_empty(&self) -> bool {
        self.0.is_none()
    }

    /// Whether evaluating it searches the text (a regexp in it).
    pub fn searches(&self) -> bool {
        fn simple(s: &Simple) -> bool {
            matches!(s, Simple::Search { .. })
        }
        fn expr(e: &Expr) -> bool {
            match e {
                Expr::Simple(s) => simple(s),
                Expr::Rel { base, by, .. } => expr(base) || by.as_ref().is_some_and(simple),
                Expr::Pair { left, right, .. } => {
                    left.as_deref().is_some_and(expr) || right.as_deref().is_some_and(expr)
                }
            }
        }
        self.0.as_ref().is_some_and(expr)
    }

    /// Evaluates the address with base range `dot`.
    pub fn eval(&self, cx: &Context, dot: Range, last_regex: &mut Option<String>) -> Result<Range> {
        let len = cx.len;
        debug_assert_eq!(len, cx.text.len_chars() as u64, "a context's length is its text's");
        // The addr file may hold a backwards range (`#5,#2`), as acme's does.
        if (dot.q0 > dot.q1 && cx.dialect == Dialect::Sam) || dot.q0.max(dot.q1) > len {
            return Err(AddrError::Range(format!("dot #{},#{} is outside a text of {len} runes", dot.q0, dot.q1)));
        }
        // No address (a loop's command, once a match): dot as it is.
        let Some(e) = &self.0 else { return Ok(dot) };
        let mut subject = Subject {
            rope: cx.text,
            hay: cx.flat.map(std::borrow::Cow::Borrowed),
            limit: cx.limit,
            dialect: cx.dialect,
        };
        evaluate(&mut subject, e, dot, last_regex)
    }
}

fn evaluate(t: &mut Subject, e: &Expr, base: Range, last: &mut Option<String>) -> Result<Range> {
    match e {
        Expr::Simple(s) => simple(t, s, base, None, last),
        Expr::Rel { base: b, forward, by } => {
            let r = evaluate(t, b, base, last)?;
            match by {
                None => line(t, 1, r, Some(*forward)),
                Some(s) => simple(t, s, r, Some(*forward), last),
            }
        }
        Expr::Pair { left, right, chain } => {
            let l = match left {
                Some(l) => evaluate(t, l, base, last)?,
                None => Range::at(0),
            };
            let from = if *chain { l } else { base };
            let r = match right {
                Some(r) => evaluate(t, r, from, last)?,
                None => Range::at(t.len()),
            };
            // acme's addr file takes `#5,#2` as written; Edit refuses it.
            if l.q0 > r.q1 && t.dialect == Dialect::Sam {
                return Err(AddrError::Range(format!("addresses out of order: #{} is after #{}", l.q0, r.q1)));
            }
            Ok(Range::new(l.q0, r.q1))
        }
    }
}

/// A simple address, absolute (`sign` None) or relative to `r`.
fn simple(t: &mut Subject, s: &Simple, r: Range, sign: Option<bool>, last: &mut Option<String>) -> Result<Range> {
    let len = t.len();
    match s {
        Simple::Dot => Ok(r),
        Simple::End => Ok(Range::at(len)),
        Simple::Char(n) => {
            let q = match sign {
                None => Some(*n),
                Some(true) => r.q1.checked_add(*n),
                Some(false) => r.q0.checked_sub(*n),
            };
            match q {
                Some(q) if q <= len => Ok(Range::at(q)),
                _ => Err(AddrError::Range(format!("#{n} is outside a text of {len} runes"))),
            }
        }
        Simple::Line(n) => line(t, *n, r, sign),
        Simple::Search { pattern, forward } => {
            let pattern = match (pattern.is_empty(), last.as_ref()) {
                (false, _) => pattern.clone(),
                (true, Some(p)) => p.clone(),
                (true, None) => return Err(AddrError::Syntax("no previous regular expression for //".into())),
            };
            *last = Some(pattern.clone());
            // A minus sign turns a search around, as in sam.
            let forward = *forward == sign.unwrap_or(true);
            search(t, &pattern, if forward { r.q1 } else { r.q0 }, forward)
        }
    }
}

/// Line `n`: absolute, or the nth line after (`+`) or before (`-`) `r`.
fn line(t: &Subject, n: u64, r: Range, sign: Option<bool>) -> Result<Range> {
    let len = t.len();
    let out_of_range = || AddrError::Range(format!("line {n} is past the end of the text"));
    if sign != Some(false) {
        let relative = sign == Some(true) && r.q1 > 0;
        let mut p;
        let q0;
        if n == 0 {
            if !relative {
                return Ok(Range::at(0));
            }
            q0 = r.q1;
            p = r.q1 - 1;
        } else {
            let mut count;
            if relative {
                p = r.q1 - 1;
                count = u64::from(t.char_at(p) == '\n');
                p += 1;
            } else {
                p = 0;
                count = 1;
            }
            while count < n {
                if p >= len {
                    return Err(out_of_range());
                }
                if t.char_at(p) == '\n' {
                    count += 1;
                }
                p += 1;
            }
            q0 = p;
        }
        while p < len {
            let c = t.char_at(p);
            p += 1;
            if c == '\n' {
                break;
            }
        }
        return Ok(Range::new(q0, p.max(q0)));
    }
    // Backward: from the start of r.
    let mut p = r.q0;
    let q1;
    if n == 0 {
        q1 = r.q0;
    } else {
        let mut count = 0;
        while count < n {
            if p == 0 {
                count += 1;
                if count != n {
                    return Err(AddrError::Range(format!("-{n} is before the start of the text")));
                }
            } else if t.char_at(p - 1) == '\n' {
                count += 1;
                if count != n {
                    p -= 1;
                }
            } else {
                p -= 1;
            }
        }
        q1 = p;
        p = p.saturating_sub(1);
    }
    while p > 0 && t.char_at(p - 1) != '\n' {
        p -= 1;
    }
    Ok(Range::new(p.min(q1), q1))
}

/// The next match of `pattern` forward from rune `from`, or the previous
/// one ending at or before it, wrapping around the text (a limit ends
/// forward searches instead). Edit passes over an empty match where the
/// search starts (`nextmatch`), the addr file does not (`regexp`).
fn search(t: &mut Subject, pattern: &str, from: u64, forward: bool) -> Result<Range> {
    let re = Regexp::new(pattern)?;
    let rope = t.rope;
    let limit = t.limit;
    let skip_empty_at_start = t.dialect == Dialect::Sam;
    let start = rope.char_to_byte(from as usize);
    let hay = t.haystack();
    let len = hay.len();
    let empty_at = |m: &std::ops::Range<usize>, at: usize| m.is_empty() && m.start == at;
    let found = if forward {
        match limit {
            Some(l) => {
                let end = rope.char_to_byte(l.q1.min(rope.len_chars() as u64) as usize);
                hay.find(&re, start, end).map(|f| f.whole())
            }
            None => match hay.find_wrapping(&re, start).map(|f| f.whole()) {
                Some(m) if skip_empty_at_start && empty_at(&m, start) => {
                    let next = hay.after_rune(start).unwrap_or(0);
                    hay.find_wrapping(&re, next).map(|f| f.whole())
                }
                found => found,
            },
        }
    } else {
        let matches: Vec<std::ops::Range<usize>> = hay.find_all(&re, 0, len, false).iter().map(|f| f.whole()).collect();
        // Backward, an empty match where the search starts is passed over
        // by Edit, and by the addr file only at the very start, where
        // acme's `rxbexecute` wraps instead (`?^?` from #0 is the line
        // start after the last newline; from #4, #4).
        let passed = |m: &std::ops::Range<usize>| m.is_empty() && m.end == start && (skip_empty_at_start || start == 0);
        let before = matches.iter().rev().find(|m| m.end <= start && !passed(m)).cloned();
        // Wrapped, the search begins again at the end, where an empty
        // match (`^` after a final newline) is found first.
        let at_end = || hay.find(&re, len, len).map(|f| f.whole()).filter(|m| !passed(m));
        before.or_else(at_end).or_else(|| matches.iter().rev().find(|m| !passed(m)).cloned())
    };
    let to_range =
        |m: std::ops::Range<usize>| Range::new(rope.byte_to_char(m.start) as u64, rope.byte_to_char(m.end) as u64);
    found.map(to_range).ok_or_else(|| AddrError::Range(format!("no match for /{pattern}/")))
}

#[cfg(test)]
mod tests {
    use super::*;

    const TEXT: &str = "one\ntwo\nthree\nfour two\n";

    #[test]
    fn a_backward_search_from_an_empty_match_wraps_to_the_end() {
        // acme: `?^?` written to a fresh window's addr (dot #0) answers
        // the line start after the last newline.
        let rope = Rope::from_str(TEXT);
        let end = TEXT.chars().count() as u64;
        let mut last = None;
        let r = eval(&rope, "?^?", Range::at(0), Dialect::AddrFile, &mut last).unwrap();
        assert_eq!((r.q0, r.q1), (end, end));
        // Elsewhere the empty match where it starts is the answer.
        assert_eq!(at("?^?", (4, 4)).unwrap(), (4, 4));
    }

    fn at(addr: &str, dot: (u64, u64)) -> Result<(u64, u64)> {
        let rope = Rope::from_str(TEXT);
        let mut last = None;
        eval(&rope, addr, Range::new(dot.0, dot.1), Dialect::AddrFile, &mut last).map(|r| (r.q0, r.q1))
    }

    #[test]
    fn simple_addresses() {
        assert_eq!(at("#0", (5, 5)), Ok((0, 0)));
        assert_eq!(at("#5", (0, 0)), Ok((5, 5)));
        assert_eq!(at("$", (0, 0)), Ok((23, 23)));
        assert_eq!(at(".", (2, 3)), Ok((2, 3)));
        assert_eq!(at("", (2, 3)), Ok((2, 3)));
        assert_eq!(at("0", (4, 4)), Ok((0, 0)));
        assert_eq!(at("1", (9, 9)), Ok((0, 4)));
        assert_eq!(at("2", (0, 0)), Ok((4, 8)));
        assert_eq!(at("4", (0, 0)), Ok((14, 23)));
        // One past the last line is the empty range at the end.
        assert_eq!(at("5", (0, 0)), Ok((23, 23)));
        assert!(matches!(at("6", (0, 0)), Err(AddrError::Range(_))));
        assert!(matches!(at("#24", (0, 0)), Err(AddrError::Range(_))));
    }

    #[test]
    fn compound_addresses() {
        assert_eq!(at(",", (3, 3)), Ok((0, 23)));
        assert_eq!(at("#2,#5", (0, 0)), Ok((2, 5)));
        assert_eq!(at(",#5", (0, 0)), Ok((0, 5)));
        assert_eq!(at(".,", (4, 4)), Ok((4, 23)));
        assert_eq!(at("0,#3", (9, 9)), Ok((0, 3)));
        assert_eq!(at("2,3", (0, 0)), Ok((4, 14)));
        assert_eq!(at("2+#0", (0, 0)), Ok((8, 8)));
        assert_eq!(at("2-#1", (0, 0)), Ok((3, 3)));
        assert_eq!(at("#5;+#2", (0, 0)), Ok((5, 7)));
        // acme's addr file takes the pair as written (address); Edit
        // refuses it (cmdaddress).
        assert_eq!(at("#5,#2", (0, 0)), Ok((5, 2)));
        let mut last = None;
        let edit = eval(&Rope::from_str(TEXT), "#5,#2", Range::at(0), Dialect::Sam, &mut last);
        assert!(matches!(edit, Err(AddrError::Range(_))));
    }

    #[test]
    fn relative_lines() {
        // From within line 2, + is line 3 and - is line 1.
        assert_eq!(at("+", (5, 5)), Ok((8, 14)));
        assert_eq!(at("-", (5, 5)), Ok((0, 4)));
        assert_eq!(at("++", (5, 5)), Ok((14, 23)));
        assert_eq!(at("+2", (5, 5)), Ok((14, 23)));
        assert_eq!(at("-#2", (5, 5)), Ok((3, 3)));
        assert_eq!(at("+#2", (5, 6)), Ok((8, 8)));
        assert_eq!(at(".+1", (0, 4)), Ok((4, 8)));
    }

    #[test]
    fn searches() {
        // The addr file takes an empty match where the search starts
        // (acme's regexp); Edit moves on past it (nextmatch).
        assert_eq!(at("/^/", (0, 0)), Ok((0, 0)));
        let mut last = None;
        let edit = eval(&Rope::from_str(TEXT), "/^/", Range::at(0), Dialect::Sam, &mut last);
        assert_eq!(edit, Ok(Range::at(4)));
        assert_eq!(at("/$/", (0, 0)), Ok((3, 3)));
        assert_eq!(at("/two/", (0, 0)), Ok((4, 7)));
        assert_eq!(at("/two/", (4, 7)), Ok((19, 22)));
        // Wraps to the start.
        assert_eq!(at("/two/", (19, 22)), Ok((4, 7)));
        assert_eq!(at("-/two/", (19, 22)), Ok((4, 7)));
        assert_eq!(at("#5/t/", (0, 0)), Ok((8, 9)));
        assert_eq!(at("/^f/", (0, 0)), Ok((14, 15)));
        assert_eq!(at("/o$/", (0, 0)), Ok((6, 7)));
        assert_eq!(at("/t[^w]/", (0, 0)), Ok((8, 10)));
        assert_eq!(at("/thr/,/four/", (0, 0)), Ok((8, 18)));
        assert!(matches!(at("/zebra/", (0, 0)), Err(AddrError::Range(_))));
        assert!(matches!(at("/(/", (0, 0)), Err(AddrError::Regexp(_))));
        // The addr file's quirk: ? runs to '/' or the end, so the closing
        // '?' makes the last letter optional.
        let rope = Rope::from_str(TEXT);
        let mut last = None;
        let r = eval(&rope, "?on?", Range::at(22), Dialect::AddrFile, &mut last);
        assert_eq!(r, Ok(Range::new(21, 22)));
        let r = eval(&rope, "?on?", Range::at(22), Dialect::Sam, &mut last);
        assert_eq!(r, Ok(Range::new(0, 2)));
        // // reuses the last regexp.
        let r = eval(&rope, "#3//", Range::at(0), Dialect::Sam, &mut last);
        assert_eq!(r, Ok(Range::new(0, 2)));
    }

    #[test]
    fn a_limit_ends_forward_searches_without_wrapping() {
        let rope = Rope::from_str(TEXT);
        let flat = Haystack::of_str(TEXT);
        let limited = |addr: &str, dot: u64, limit: (u64, u64)| {
            let cx = Context::new(&rope, Some(&flat), Dialect::AddrFile, Some(Range::new(limit.0, limit.1)));
            eval_in(&cx, addr, Range::at(dot), &mut None).map(|r| (r.q0, r.q1))
        };
        assert_eq!(limited("/two/", 0, (0, 8)), Ok((4, 7)));
        // The match past the limit is not found, and the search does not wrap.
        assert!(matches!(limited("/two/", 8, (0, 18)), Err(AddrError::Range(_))));
        assert!(matches!(limited("/two/", 20, (0, 23)), Err(AddrError::Range(_))));
        assert_eq!(limited("/two/", 8, (0, 23)), Ok((19, 22)));
    }

    #[test]
    fn syntax_errors() {
        for bad in ["#", "#5\n", "#5 ", "x", ".+$", "#1.", "1$"] {
            assert!(matches!(at(bad, (0, 0)), Err(AddrError::Syntax(_))), "{bad:?}: {:?}", at(bad, (0, 0)));
        }
        assert!(at("99999999999999999999999", (0, 0)).is_err());
    }
}
