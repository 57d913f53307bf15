//! acme's regular expressions (regexp(7)) and the way acme runs them
//! (`regx.c`'s `rxexecute`).
//!
//! Patterns are translated for the `regex` crate: `\n` is a newline, a
//! backslash quotes anything else, `^` and `$` work at lines, `[^...]`
//! never matches a newline, braces are literal. acme's matches are
//! leftmost-longest (`a|ab` takes all of `ab`), where the crate's are
//! leftmost-first, so a match is found in three steps: the leftmost start
//! (the same under both rules), the longest end from there (a search that
//! reports every match), and only if the pattern has groups, the groups of
//! a match held to exactly that span.
//!
//! acme's matcher sees the text only up to the end of the search (`eof`),
//! and past it a character that is no newline. So `$` matches only before
//! a newline, never at the end of the text or of a searched range; and a
//! match may start at `eof` only when the search starts there, so `^`
//! after a final newline matches only a search begun at the very end.
//! [`Haystack`] keeps those rules.

use regex_automata::meta::Regex;
use regex_automata::util::captures::Captures;
use regex_automata::{Anchored, Input, MatchKind};
use ropey::Rope;
use std::ops::Range;

/// A compiled acme regexp.
#[derive(Clone, Debug)]
pub struct Regexp {
    /// Finds the leftmost start.
    first: Regex,
    /// From a start, the longest end.
    longest: Regex,
    /// The pattern held to end at the end of its haystack, for groups.
    exact: Option<Regex>,
    /// A plain string: where it starts, it has one end, so the longest
    /// search is not needed (a whole-file substitution's every match),
    /// and it is found by `memmem` rather than by a regex search, whose
    /// setup costs more than the finding between matches a few bytes
    /// apart.
    literal: Option<Box<memchr::memmem::Finder<'static>>>,
}

/// A regexp that does not compile, and why.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("bad regexp {pattern:?}: {why}")]
pub struct RegexpError {
    pub pattern: String,
    pub why: String,
}

impl Regexp {
    /// Compiles an acme regexp.
    pub fn new(pattern: &str) -> Result<Regexp, RegexpError> {
        let bad = |e: regex_automata::meta::BuildError| {
            // The deepest cause says what is wrong ("unclosed group").
            let mut why = e.to_string();
            let mut source = std::error::Error::source(&e);
            while let Some(s) = source {
                why = s.to_string();
                source = s.source();
            }
            let why = why.lines().last().unwrap_or("").trim();
            RegexpError { pattern: pattern.to_string(), why: why.trim_start_matches("error: ").to_string() }
        };
        let translated = translate(pattern);
        let first = Regex::new(&translated).map_err(bad)?;
        let longest =
            Regex::builder().configure(Regex::config().match_kind(MatchKind::All)).build(&translated).map_err(bad)?;
        let exact = match first.group_info().group_len(regex_automata::PatternID::ZERO) > 1 {
            true => Some(Regex::new(&format!("(?:{translated})\\z")).map_err(bad)?),
            false => None,
        };
        let literal = plain(pattern).map(|p| Box::new(memchr::memmem::Finder::new(p.as_bytes()).into_owned()));
        Ok(Regexp { first, longest, exact, literal })
    }

    /// Whether it matches anywhere in `s` (a file name: no acme ends).
    pub fn is_match(&self, s: &str) -> bool {
        self.first.is_match(s)
    }

    /// The string it matches, found by `memmem`, if it is a plain one.
    pub fn plain(&self) -> Option<&memchr::memmem::Finder<'static>> {
        self.literal.as_deref()
    }
}

/// The string an acme regexp matches, where it matches one string only:
/// no operator, each escape a rune itself (`\n` a newline). `y/\n/`'s
/// millions of lines are found by `memmem`, not the regex.
fn plain(pattern: &str) -> Option<String> {
    let mut out = String::with_capacity(pattern.len());
    let mut chars = pattern.chars();
    while let Some(c) = chars.next() {
        match c {
            '\\' => match chars.next()? {
                'n' => out.push('\n'),
                c => out.push(c),
            },
            c if "\\.+*?()|[]{}^$".contains(c) => return None,
            c => out.push(c),
        }
    }
    (!out.is_empty()).then_some(out)
}

/// Translates an acme regexp to the `regex` crate's syntax.
pub fn translate(pattern: &str) -> String {
    let mut out = String::from("(?m)");
    let mut chars = pattern.chars().peekable();
    let quote = |out: &mut String, c: char| match c {
        'n' => out.push_str("\\n"),
        c => out.push_str(&regex_syntax_escape(c)),
    };
    while let Some(c) = chars.next() {
        match c {
            '\\' => match chars.next() {
                Some(n) => quote(&mut out, n),
                None => out.push_str("\\\\"),
            },
            '[' => {
                out.push('[');
                let negated = chars.peek() == Some(&'^');
                if negated {
                    chars.next();
                    out.push_str("^\\n");
                }
                let mut first = true;
                while let Some(c) = chars.next() {
                    match c {
                        ']' if !first => break,
                        '\\' => match chars.next() {
                            Some('n') => out.push_str("\\n"),
                            Some(n) => out.push_str(&regex_syntax_escape(n)),
                            None => out.push_str("\\\\"),
                        },
                        '-' if !first && chars.peek() != Some(&']') => out.push('-'),
                        c => out.push_str(&regex_syntax_escape(c)),
                    }
                    first = false;
                }
                out.push(']');
            }
            '{' | '}' => quote(&mut out, c),
            '(' if chars.peek() == Some(&'?') => {
                out.push('(');
                chars.next();
                out.push_str("\\?");
            }
            c => out.push(c),
        }
    }
    out
}

fn regex_syntax_escape(c: char) -> String {
    regex::escape(c.encode_utf8(&mut [0; 4]))
}

/// A match: the whole of it and each parenthesized group, as byte ranges
/// of the text.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Found {
    whole: Range<usize>,
    /// Groups 1 and on, where the pattern has any (none allocated for a
    /// match of a pattern without: most of a substitution's).
    groups: Vec<Option<Range<usize>>>,
}

impl Found {
    /// The whole match.
    pub fn whole(&self) -> Range<usize> {
        self.whole.clone()
    }

    /// Group `i` (0 is the whole match), if it took part.
    pub fn group(&self, i: usize) -> Option<Range<usize>> {
        match i {
            0 => Some(self.whole()),
            i => self.groups.get(i - 1).cloned().flatten(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.whole().is_empty()
    }
}

/// A text made ready for acme's searches: its UTF-8, then one byte that is
/// no newline, which is what acme's matcher sees at the end.
#[derive(Clone, Debug)]
pub struct Haystack {
    bytes: Vec<u8>,
}

impl Haystack {
    pub fn new(text: &Rope) -> Haystack {
        let mut bytes = Vec::with_capacity(text.len_bytes() + 1);
        for chunk in text.chunks() {
            bytes.extend_from_slice(chunk.as_bytes());
        }
        bytes.push(0);
        Haystack { bytes }
    }

    pub fn of_str(text: &str) -> Haystack {
        let mut bytes = Vec::with_capacity(text.len() + 1);
        bytes.extend_from_slice(text.as_bytes());
        bytes.push(0);
        Haystack { bytes }
    }

    /// The text's length in bytes.
    pub fn len(&self) -> usize {
        self.bytes.len() - 1
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The text in `r` (byte offsets on rune boundaries).
    /// Whether byte `b` starts a rune (or is the end).
    pub fn is_char_boundary(&self, b: usize) -> bool {
        self.bytes.get(b).is_some_and(|x| x & 0xc0 != 0x80)
    }

    /// How many runes start in `r` ([`runes_in`]; a rope's UTF-8 is valid).
    pub fn runes_in(&self, r: Range<usize>) -> usize {
        runes_in(&self.bytes[r])
    }

    pub fn str(&self, r: Range<usize>) -> &str {
        std::str::from_utf8(&self.bytes[r]).unwrap_or_default()
    }

    /// The byte offset after the rune at `at`, if there is one: where a
    /// search goes on after an empty match.
    pub fn after_rune(&self, at: usize) -> Option<usize> {
        if at >= self.len() {
            return None;
        }
        let lead = self.bytes[at];
        let width = match lead {
            0x00..=0x7f => 1,
            0xc0..=0xdf => 2,
            0xe0..=0xef => 3,
            _ => 4,
        };
        Some((at + width).min(self.len()))
    }

    /// acme's `rxexecute(t, nil, start, eof)`: the leftmost match that
    /// starts at or after `start` and ends by `eof`. A match starts at
    /// `eof` only if the search starts there, and `$` does not match at
    /// `eof`, where acme's matcher sees no character.
    pub fn find(&self, re: &Regexp, start: usize, eof: usize) -> Option<Found> {
        let eof = eof.min(self.len());
        if start > eof {
            return None;
        }
        self.searched(start, eof).find(re, start, eof)
    }

    /// acme's address search (`rxexecute` to `Infinity`): forward from
    /// `start` to the end, then wrapping to the start; no match starts at
    /// the end of the text.
    pub fn find_wrapping(&self, re: &Regexp, start: usize) -> Option<Found> {
        let len = self.len();
        let whole = self.searched(0, len);
        let before_end = |f: &Found| f.whole().start < len;
        if let Some(f) = whole.search(re, start.min(len), len).filter(before_end) {
            return Some(f);
        }
        whole.search(re, 0, len).filter(|f| f.whole().start < start.min(len))
    }

    /// Every match in `start..eof` as acme's loops step through them: an
    /// empty match right where the previous one ended is passed over (and
    /// one at `start` too when `skip_at_start`, as `y` does).
    pub fn find_all(&self, re: &Regexp, start: usize, eof: usize, skip_at_start: bool) -> Vec<Found> {
        self.steps(re, start, eof, skip_at_start).collect()
    }

    /// The matches `find_all` finds, one at a time as asked for: a loop
    /// runs its command on each, and a substitution makes its change, as
    /// it is found, holding none.
    pub fn steps<'h>(&'h self, re: &'h Regexp, start: usize, eof: usize, skip_at_start: bool) -> Steps<'h> {
        let eof = eof.min(self.len());
        // A plain string's matches are never empty and end by `eof`: one
        // `memmem` pass over the range finds them as the steps would, with
        // none of a search's setup per match (a whole-file substitution's
        // millions).
        let literal = match &re.literal {
            Some(finder) if start <= eof => {
                Some((finder.find_iter(&self.bytes[start..eof]), start, finder.needle().len()))
            }
            _ => None,
        };
        Steps {
            hay: self,
            re,
            // One view of the range for every search of the loop.
            range: (start <= eof && literal.is_none()).then(|| self.searched(start, eof)),
            literal,
            p: start,
            eof,
            prev_end: skip_at_start.then_some(start),
            exhausted: start > eof,
        }
    }

    /// The text as acme's matcher sees it for searches from `start` to
    /// `eof`: the whole text if what follows `eof` is no newline, else a
    /// copy of the range (and the byte before it, which `^` looks at) with
    /// that newline hidden.
    fn searched(&self, start: usize, eof: usize) -> Searched<'_> {
        if self.bytes[eof] != b'\n' {
            return Searched { bytes: std::borrow::Cow::Borrowed(&self.bytes), base: 0 };
        }
        let from = start.saturating_sub(1);
        let mut window = self.bytes[from..=eof].to_vec();
        if let Some(last) = window.last_mut() {
            *last = 0;
        }
        Searched { bytes: std::borrow::Cow::Owned(window), base: from }
    }
}

/// The matches of a loop over a range, as acme's loops step through them
/// ([`Haystack::steps`]).
pub struct Steps<'h> {
    hay: &'h Haystack,
    re: &'h Regexp,
    /// The bytes searched; none once the steps are over (or when a plain
    /// string is looked for).
    range: Option<Searched<'h>>,
    /// A plain string's matches, where the range begins, the string's
    /// length.
    literal: Option<(memchr::memmem::FindIter<'h, 'h>, usize, usize)>,
    /// Where the next search starts.
    p: usize,
    eof: usize,
    prev_end: Option<usize>,
    exhausted: bool,
}

impl Steps<'_> {
    /// Whether the steps ended on a search that found nothing rather than
    /// by passing the end after an empty match (or have not ended).
    pub fn exhausted(&self) -> bool {
        self.exhausted
    }
}

impl Iterator for Steps<'_> {
    type Item = Found;

    fn next(&mut self) -> Option<Found> {
        if let Some((matches, base, len)) = &mut self.literal {
            let Some(at) = matches.next() else {
                self.exhausted = true;
                return None;
            };
            return Some(Found { whole: *base + at..*base + at + *len, groups: Vec::new() });
        }
        let range = self.range.as_ref()?;
        while self.p <= self.eof {
            let Some(f) = range.find(self.re, self.p, self.eof) else {
                self.exhausted = true;
                break;
            };
            let m = f.whole();
            if m.is_empty() {
                if Some(m.start) == self.prev_end {
                    match self.hay.after_rune(self.p) {
                        Some(next) => self.p = next,
                        None => break,
                    }
                    continue;
                }
                self.p = self.hay.after_rune(m.end).unwrap_or(self.eof + 1);
            } else {
                self.p = m.end;
            }
            self.prev_end = Some(m.end);
            return Some(f);
        }
        self.range = None;
        None
    }
}

/// A plain string's matches in bytes `start..eof` of a rope, in order,
/// each as its byte range and rune range: what [`Haystack::steps`] and
/// [`RunesOnward`] give for it, found chunk by chunk, with no flat copy
/// of the text (a whole-file `s/a/b/` or `y/\n/` would make one of the
/// whole file, page by page). Its matches are never empty and never
/// overlap: a match across chunks is found by searching the end of the
/// chunks before (at most the string's length less one, past the last
/// match) joined to the start of the next.
pub struct RopeMatches<'r> {
    finder: &'r memchr::memmem::Finder<'static>,
    rope: &'r Rope,
    chunks: ropey::iter::Chunks<'r>,
    /// The chunk searched, cut at `eof`, and its first byte's offset.
    chunk: &'r [u8],
    chunk_start: usize,
    /// Where in `chunk` the next search starts.
    from: usize,
    /// A byte offset at or before the next match, its rune offset.
    counted: (usize, u64),
    eof: usize,
    /// The bytes not passed at the end of the chunks before this one (at
    /// most the string's length less one), where they begin, and the
    /// joined bytes searched for a match across them.
    carry: Vec<u8>,
    carry_start: usize,
    joined: Vec<u8>,
    /// Every rune a byte: no counting.
    ascii: bool,
    /// The string's runes.
    runes: u64,
}

impl<'r> RopeMatches<'r> {
    /// The matches of `finder`'s string in bytes `start..eof` of `rope`
    /// (`start` at rune `rune`, both on rune boundaries).
    pub fn new(
        finder: &'r memchr::memmem::Finder<'static>,
        rope: &'r Rope,
        start: usize,
        eof: usize,
        rune: u64,
    ) -> RopeMatches<'r> {
        let eof = eof.min(rope.len_bytes());
        let start = start.min(eof);
        let (chunks, chunk_start, _, _) = rope.chunks_at_byte(start);
        let needle = finder.needle();
        let mut m = RopeMatches {
            finder,
            rope,
            chunks,
            chunk: &[],
            chunk_start,
            from: 0,
            counted: (start, rune),
            eof,
            carry: Vec::with_capacity(needle.len()),
            carry_start: start,
            joined: Vec::with_capacity(2 * needle.len()),
            ascii: rope.len_bytes() == rope.len_chars(),
            runes: std::str::from_utf8(needle).map_or(needle.len(), |n| n.chars().count()) as u64,
        };
        m.chunk = m.next_chunk();
        m.from = start - chunk_start;
        m
    }

    /// The next chunk, cut at `eof` (empty past it).
    fn next_chunk(&mut self) -> &'r [u8] {
        let Some(c) = self.chunks.next() else { return &[] };
        let c = c.as_bytes();
        &c[..c.len().min(self.eof.saturating_sub(self.chunk_start))]
    }

    /// The rune offset of byte `b` of the chunk searched (at or after the
    /// last counted), counted on from there.
    fn rune_in_chunk(&mut self, b: usize) -> u64 {
        let at = self.chunk_start + b;
        if self.ascii {
            return at as u64;
        }
        let (from, q) = self.counted;
        let q = match from >= self.chunk_start {
            true => q + runes_in(&self.chunk[from - self.chunk_start..b]) as u64,
            // Counted up to a chunk before: from this chunk's start.
            false => self.rope.byte_to_char(at) as u64,
        };
        self.counted = (at, q);
        q
    }

    /// The match found at `b` of the chunk searched.
    fn found_in_chunk(&mut self, b: usize) -> (Range<usize>, Range<u64>) {
        let n = self.finder.needle().len();
        let q0 = self.rune_in_chunk(b);
        self.from = b + n;
        self.carry.clear();
        let at = self.chunk_start + b;
        (at..at + n, q0..q0 + self.runes)
    }

    /// Past the chunk searched, to the next: its bytes not passed (with
    /// those carried before, when none were passed) keep their last
    /// `keep`, and the runes are counted to its end. False at `eof`.
    fn pass_chunk(&mut self, keep: usize) -> bool {
        let end = self.chunk_start + self.chunk.len();
        if end >= self.eof {
            return false;
        }
        let rest = &self.chunk[self.from.min(self.chunk.len())..];
        // What is carried ends where this chunk began, or was cleared by a
        // match in it: either way the carried bytes and `rest` are one run.
        self.carry.extend_from_slice(&rest[rest.len().saturating_sub(keep)..]);
        let over = self.carry.len().saturating_sub(keep);
        self.carry.drain(..over);
        self.carry_start = end - self.carry.len();
        if !self.ascii && self.counted.0 >= self.chunk_start {
            let (from, q) = self.counted;
            self.counted = (end, q + runes_in(&self.chunk[from - self.chunk_start..]) as u64);
        }
        self.chunk_start = end;
        self.chunk = self.next_chunk();
        self.from = 0;
        !self.chunk.is_empty()
    }
}

impl Iterator for RopeMatches<'_> {
    type Item = (Range<usize>, Range<u64>);

    fn next(&mut self) -> Option<(Range<usize>, Range<u64>)> {
        let n = self.finder.needle().len();
        let keep = n - 1;
        loop {
            if let Some(b) = self.finder.find(&self.chunk[self.from.min(self.chunk.len())..]) {
                let b = self.from + b;
                return Some(self.found_in_chunk(b));
            }
            if !self.pass_chunk(keep) {
                return None;
            }
            if self.carry.is_empty() {
                continue;
            }
            // A match begun in the carried bytes and ended in this chunk
            // comes before any in the chunk alone.
            self.joined.clear();
            self.joined.extend_from_slice(&self.carry);
            self.joined.extend_from_slice(&self.chunk[..self.chunk.len().min(keep)]);
            if let Some(i) = self.finder.find(&self.joined).filter(|&i| i < self.carry.len()) {
                let at = self.carry_start + i;
                let q0 = match self.ascii {
                    true => at as u64,
                    false => self.rope.byte_to_char(at) as u64,
                };
                self.from = at + n - self.chunk_start;
                self.counted = (at + n, q0 + self.runes);
                self.carry.clear();
                return Some((at..at + n, q0..q0 + self.runes));
            }
        }
    }
}

/// How many runes start in `bytes` (valid UTF-8, or cut from it): the
/// bytes that are not a rune's continuation, counted with no check of the
/// UTF-8, in a loop the compiler makes wide.
fn runes_in(bytes: &[u8]) -> usize {
    bytes.iter().filter(|&&b| b & 0xc0 != 0x80).count()
}

/// Rune offsets of a text's byte offsets met in order (a loop's or a
/// substitution's matches): each counted on from the one before in the
/// flat text, which costs less than a descent of the rope a match does;
/// one met out of order, or not at a rune's start, is looked up in the
/// rope.
pub struct RunesOnward<'a> {
    hay: &'a Haystack,
    rope: &'a Rope,
    /// The last byte offset met, and its rune offset.
    at: (usize, u64),
    /// Whether every rune is a byte (the rope says so for nothing: it
    /// counts both), so that nothing need be counted.
    ascii: bool,
}

impl<'a> RunesOnward<'a> {
    /// Counting from byte `byte` of `hay` (the flat `rope`), rune `rune`.
    pub fn new(hay: &'a Haystack, rope: &'a Rope, byte: usize, rune: u64) -> RunesOnward<'a> {
        let ascii = rope.len_bytes() == rope.len_chars();
        RunesOnward { hay, rope, at: (byte, rune), ascii }
    }

    /// The rune offset of byte `b`.
    #[inline]
    pub fn rune_at(&mut self, b: usize) -> u64 {
        match self.ascii {
            true => b as u64,
            false => self.counted_to(b),
        }
    }

    fn counted_to(&mut self, b: usize) -> u64 {
        let (from, q) = self.at;
        let q = match b >= from && self.hay.is_char_boundary(from) && self.hay.is_char_boundary(b) {
            true => q + self.hay.runes_in(from..b) as u64,
            false => self.rope.byte_to_char(b) as u64,
        };
        self.at = (b, q);
        q
    }
}

/// Bytes searched for one range, offsets in them `base` less than the
/// text's.
struct Searched<'a> {
    bytes: std::borrow::Cow<'a, [u8]>,
    base: usize,
}

impl Searched<'_> {
    /// [`Haystack::find`] within this range.
    fn find(&self, re: &Regexp, start: usize, eof: usize) -> Option<Found> {
        let found = self.search(re, start, eof)?;
        (found.whole().start < eof || start == eof).then_some(found)
    }

    fn search(&self, re: &Regexp, start: usize, eof: usize) -> Option<Found> {
        search_in(re, &self.bytes, start - self.base, eof - self.base, self.base)
    }
}

/// The leftmost-longest match in `text` at or after byte `start`, where
/// `$` also matches at the end: the plumber's `regexec` on a string.
pub fn find_in_str(re: &Regexp, text: &str, start: usize) -> Option<Found> {
    search_in(re, text.as_bytes(), start.min(text.len()), text.len(), 0)
}

/// Searches `bytes[start..eof]` for acme's leftmost-longest match,
/// reporting offsets plus `base`.
fn search_in(re: &Regexp, bytes: &[u8], start: usize, eof: usize, base: usize) -> Option<Found> {
    if let Some(finder) = &re.literal {
        let from = start + finder.find(&bytes[start..eof])?;
        let whole = from + base..from + finder.needle().len() + base;
        return Some(Found { whole, groups: Vec::new() });
    }
    let leftmost = re.first.search(&Input::new(bytes).span(start..eof))?;
    let from = leftmost.start();
    let at_start = Input::new(bytes).span(from..eof).anchored(Anchored::Yes);
    let end = re.longest.search(&at_start).map_or(leftmost.end(), |m| m.end().max(leftmost.end()));
    let whole = from + base..end + base;
    let groups = match &re.exact {
        None => Vec::new(),
        Some(exact) => {
            let mut caps: Captures = exact.create_captures();
            exact.search_captures(&Input::new(&bytes[..end]).span(from..end).anchored(Anchored::Yes), &mut caps);
            if !caps.is_match() {
                re.first.search_captures(&Input::new(bytes).span(from..eof).anchored(Anchored::Yes), &mut caps);
            }
            let shift = |s: regex_automata::Span| s.start + base..s.end + base;
            (1..caps.group_len()).map(|i| caps.get_group(i).map(shift)).collect()
        }
    };
    Some(Found { whole, groups })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn all(text: &str, pattern: &str) -> Vec<Range<usize>> {
        let re = Regexp::new(pattern).unwrap();
        let h = Haystack::of_str(text);
        let n = h.len();
        h.find_all(&re, 0, n, false).iter().map(Found::whole).collect()
    }

    #[test]
    fn translation_keeps_acme_meaning() {
        let re = Regexp::new("a{2}\\.b").unwrap();
        assert!(re.is_match("a{2}.b"));
        assert!(!re.is_match("aa.b"));
        assert!(!Regexp::new("[^x]").unwrap().is_match("\n"));
        assert!(Regexp::new("x\\nx").unwrap().is_match("x\nx"));
    }

    #[test]
    fn dollar_matches_only_before_a_newline() {
        assert_eq!(all("a\nb\n", "$"), vec![1..1, 3..3]);
        assert_eq!(all("a\nb", "$"), vec![1..1]);
        // Not at the end of a searched range either, newline or not.
        let re = Regexp::new("$").unwrap();
        let h = Haystack::of_str("ab\ncd\n");
        assert_eq!(h.find(&re, 0, 1), None);
        assert_eq!(h.find(&re, 0, 2), None);
        assert_eq!(h.find(&re, 0, 3).map(|f| f.whole()), Some(2..2));
    }

    #[test]
    fn caret_after_the_final_newline_matches_only_a_search_begun_there() {
        assert_eq!(all("a\nb\n", "^"), vec![0..0, 2..2]);
        // acme's loop starts a last search at the end after an empty match
        // on the line before, and there `^` matches.
        assert_eq!(all("a\n\n", "^"), vec![0..0, 2..2, 3..3]);
        let re = Regexp::new("^").unwrap();
        let h = Haystack::of_str("");
        assert_eq!(h.find(&re, 0, 0).map(|f| f.whole()), Some(0..0));
        assert_eq!(h.find_wrapping(&re, 0), None, "an address search never matches at the end");
    }

    #[test]
    fn an_empty_match_right_after_a_match_is_passed_over() {
        assert_eq!(all("hello", "l*"), vec![0..0, 1..1, 2..4, 5..5]);
        assert_eq!(all("abc", "x*"), vec![0..0, 1..1, 2..2, 3..3]);
    }

    #[test]
    fn wrapping_searches_go_on_from_the_start() {
        let re = Regexp::new("a").unwrap();
        let h = Haystack::of_str("a b a");
        assert_eq!(h.find_wrapping(&re, 1).map(|f| f.whole()), Some(4..5));
        assert_eq!(h.find_wrapping(&re, 5).map(|f| f.whole()), Some(0..1));
        let re = Regexp::new("^").unwrap();
        assert_eq!(h.find_wrapping(&re, 0).map(|f| f.whole()), Some(0..0), "an empty match at the start counts");
    }

    #[test]
    fn matches_are_leftmost_longest() {
        assert_eq!(all("ab|ac", "a|ab"), vec![0..2, 3..4]);
        assert_eq!(all("foofoo", "foo|foofoo"), vec![0..6]);
        let re = Regexp::new("(a|ab)(c|bcd)").unwrap();
        let h = Haystack::of_str("abcd");
        let f = h.find(&re, 0, 4).unwrap();
        assert_eq!(f.whole(), 0..4);
        assert_eq!((f.group(1), f.group(2)), (Some(0..1), Some(1..4)));
    }

    /// A plain string is found by `memmem`, not the regex: every match,
    /// as a string's own search finds them, across runes of every width.
    #[test]
    fn plain_strings_are_found_where_a_string_search_finds_them() {
        let mut seed = 3u64;
        let mut next = |n: u64| {
            seed = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            (seed >> 33) % n
        };
        // Each with the string it matches: an escape is its rune.
        let plain =
            [("a", "a"), ("ab", "ab"), ("éa", "éa"), ("bb", "bb"), ("€", "€"), ("\\n", "\n"), ("a\\nb", "a\nb")];
        let escaped = [("\\.", "."), ("b\\*", "b*"), ("\\\\", "\\"), ("\\é", "é")];
        for (pattern, string) in plain.into_iter().chain(escaped) {
            let re = Regexp::new(pattern).unwrap();
            assert!(re.literal.is_some(), "{pattern} is plain");
            for _ in 0..50 {
                let text: String =
                    (0..next(300)).map(|_| ['a', 'b', 'é', '€', '\n', '.', '*', '\\'][next(8) as usize]).collect();
                let want: Vec<_> = text.match_indices(string).map(|(i, m)| i..i + m.len()).collect();
                assert_eq!(all(&text, pattern), want, "{pattern:?} in {text:?}");
                // The regex finds the same.
                let hay = Haystack::of_str(&text);
                let by_regex = Regexp { literal: None, ..re.clone() };
                let found: Vec<_> = hay.find_all(&by_regex, 0, hay.len(), false).iter().map(Found::whole).collect();
                assert_eq!(found, all(&text, pattern), "{pattern:?} by the regex in {text:?}");
            }
        }
        for operator in ["a.b", "a*", "^a", "a$", "[a]", "a|b", "(a)", "a+", "a?", "\\"] {
            assert!(Regexp::new(operator).unwrap().literal.is_none(), "{operator} is not plain");
        }
    }

    #[test]
    fn groups_are_reported() {
        let re = Regexp::new("(a)(x)?b").unwrap();
        let h = Haystack::of_str("zab");
        let f = h.find(&re, 0, 3).unwrap();
        assert_eq!(f.whole(), 1..3);
        assert_eq!(f.group(1), Some(1..2));
        assert_eq!(f.group(2), None);
        assert_eq!(h.str(f.whole()), "ab");
    }

    /// A rope of `text` whose chunks end wherever `cuts` say (each a
    /// fraction of what is left), not only where ropey's builder would.
    fn rope_cut(text: &str, cuts: &[u16]) -> Rope {
        let mut rope = Rope::new();
        let mut rest = text;
        for cut in cuts {
            let mut at = rest.len() * usize::from(*cut) / usize::from(u16::MAX);
            while !rest.is_char_boundary(at) {
                at -= 1;
            }
            rope.insert(rope.len_chars(), &rest[..at]);
            rest = &rest[at..];
        }
        rope.insert(rope.len_chars(), rest);
        rope
    }

    proptest::proptest! {
        /// Chunk by chunk, a plain string's matches and their runes are the
        /// flat text's steps, from anywhere to anywhere, across chunks.
        #[test]
        fn a_plain_strings_matches_in_a_rope_are_the_flat_texts(
            text in proptest::collection::vec(proptest::sample::select(vec!['a', 'b', 'é', '✓', '\n']), 0..6000),
            needle in proptest::collection::vec(proptest::sample::select(vec!['a', 'b', 'é', '✓', '\n']), 1..9),
            cuts in proptest::collection::vec(proptest::num::u16::ANY, 0..12),
            ends in (proptest::num::u16::ANY, proptest::num::u16::ANY),
        ) {
            let text: String = text.into_iter().collect();
            let needle: String = needle.into_iter().collect();
            let pattern: String = needle.chars().map(|c| if c == '\n' { "\\n".to_string() } else { c.to_string() }).collect();
            let re = Regexp::new(&pattern).unwrap();
            let finder = re.plain().expect("a plain string");
            let rope = rope_cut(&text, &cuts);
            let runes = rope.len_chars();
            let (a, b) = (runes * usize::from(ends.0) / 65535, runes * usize::from(ends.1) / 65535);
            let (q0, q1) = (a.min(b), a.max(b));
            let (start, eof) = (rope.char_to_byte(q0), rope.char_to_byte(q1));
            let hay = Haystack::new(&rope);
            let mut counted = RunesOnward::new(&hay, &rope, start, q0 as u64);
            let want: Vec<(Range<usize>, Range<u64>)> = hay
                .steps(&re, start, eof, false)
                .map(|f| {
                    let w = f.whole();
                    let r = counted.rune_at(w.start)..counted.rune_at(w.end);
                    (w, r)
                })
                .collect();
            let got: Vec<_> = RopeMatches::new(finder, &rope, start, eof, q0 as u64).collect();
            proptest::prop_assert_eq!(got, want);
        }
    }
}
