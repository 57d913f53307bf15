//! acme's look and expansion rules (`look.c`), pure: what a B2 or B3
//! action acts on (a null click expands to the command or file name
//! around it), the first word of a command and its argument, looked-up
//! text as a file name with an address, the search B3 makes in a body,
//! and the names acme derives from a window's name (its directory, its
//! `+Errors` window, whether it is a scratch or directory window).
//!
//! The daemon and every UI use these, so a click means the same wherever
//! it is made; `exec.rs` carries the actions out.

use crate::buf::Buffer;
use crate::id::{BufferId, WindowId};
use crate::state::State;
use crate::text::Text;

/// Characters of a file name (acme's `isfilec`).
pub fn is_file_char(c: char) -> bool {
    c.is_alphanumeric() || ".-+/:@_~,".contains(c) || c as u32 > 0x7f
}

/// Characters of a command to execute (acme's `isexecc`).
fn is_exec_char(c: char) -> bool {
    is_file_char(c) || "<|>".contains(c)
}

/// The range a null click at `q` acts on: the run of command (`exec`) or
/// file-name characters around it. Returns `q..q` when there is none.
pub fn expand(buffer: &Buffer, q: u64, exec: bool) -> (u64, u64) {
    run_around(buffer, q, |c| if exec { is_exec_char(c) && c != ':' } else { is_file_char(c) })
}

/// The run of characters `keep` takes around `q` (`q..q` for none).
fn run_around(buffer: &Buffer, q: u64, keep: impl Fn(char) -> bool) -> (u64, u64) {
    let len = buffer.len();
    let (mut q0, mut q1) = (q.min(len), q.min(len));
    while q1 < len && keep(buffer.text.char(q1 as usize)) {
        q1 += 1;
    }
    while q0 > 0 && keep(buffer.text.char(q0 as usize - 1)) {
        q0 -= 1;
    }
    (q0, q1)
}

/// Characters of a word B3 looks for when the text clicked is no file
/// (acme's `isalnum`: anything but blanks, controls and ASCII
/// punctuation).
pub fn is_word_char(c: char) -> bool {
    c > ' ' && !('\u{7f}'..='\u{a0}').contains(&c) && !"!\"#$%&'()*+,-./:;<=>?@[\\]^`{|}~".contains(c)
}

/// The word around `q` (acme's `expand` when `expandfile` finds no file):
/// `q..q` when there is none.
pub fn word(buffer: &Buffer, q: u64) -> (u64, u64) {
    run_around(buffer, q, is_word_char)
}

/// The first word of a command and the rest (the argument), trimmed.
pub fn split_command(text: &str) -> (&str, &str) {
    let text = text.trim();
    match text.find(char::is_whitespace) {
        Some(i) => (&text[..i], text[i..].trim()),
        None => (text, ""),
    }
}

/// The next occurrence of `needle` after rune `from`, wrapping to the
/// start (acme's B3 search of plain text). Searched in the rope's chunks
/// where they lie: a 100 MB body is not copied to be searched once.
pub fn find_next(text: &Text, needle: &str, from: u64) -> Option<(u64, u64)> {
    find_next_with(text, needle, from, |rope, finder, start, end| find_in_chunks(rope, finder, start, end, &|| false))
}

/// [`find_next`], each range of bytes searched by `search` (the first
/// match of the finder lying within `start..end` of the rope, as
/// [`find_in_chunks`] finds it): a host with threads to spare searches a
/// big range's parts side by side.
pub fn find_next_with(
    text: &Text,
    needle: &str,
    from: u64,
    search: impl Fn(&ropey::Rope, &memchr::memmem::Finder<'_>, usize, usize) -> Option<usize>,
) -> Option<(u64, u64)> {
    if needle.is_empty() {
        return None;
    }
    let start = text.char_to_byte(from.min(text.len_chars() as u64) as usize);
    let finder = memchr::memmem::Finder::new(needle.as_bytes());
    // Wrapping, only what starts before `start` is left to look at.
    let wrapped = || search(text.rope(), &finder, 0, start + needle.len() - 1);
    let at = search(text.rope(), &finder, start, usize::MAX).or_else(wrapped)?;
    let q0 = text.byte_to_char(at) as u64;
    Some((q0, q0 + needle.chars().count() as u64))
}

/// The byte offset of the first match of `finder` at or after byte
/// `start` of `rope`, within its bytes before `end`: looked for in each
/// chunk where it lies, and across each boundary by comparing the end of
/// the chunk before with the needle's start (a second search per chunk
/// cost Look a fifth more than one). `stop` is asked before each chunk:
/// once it says so, the search ends finding nothing (another part of a
/// search side by side found first). An empty needle, or a range empty
/// or past the end, finds nothing.
pub fn find_in_chunks(
    rope: &ropey::Rope,
    finder: &memchr::memmem::Finder<'_>,
    start: usize,
    end: usize,
    stop: &dyn Fn() -> bool,
) -> Option<usize> {
    let needle = finder.needle();
    if needle.is_empty() || start >= end || start > rope.len_bytes() {
        return None;
    }
    let reach = needle.len() - 1;
    // The bytes searched before, which a match may begin in the end of.
    let mut before: &[u8] = &[];
    // A plain loop over the chunks, not `chunks_between`'s adapters: a
    // 100 MB body has a hundred thousand of them.
    let (chunks, mut chunk_at, _, _) = rope.chunks_at_byte(start);
    for chunk in chunks {
        if chunk_at >= end || stop() {
            break;
        }
        let whole = chunk.as_bytes();
        let from = start.saturating_sub(chunk_at);
        let (bytes, bytes_at) = (&whole[from..whole.len().min(end - chunk_at)], chunk_at + from);
        chunk_at += whole.len();
        if bytes.len() < reach {
            // A match could span this chunk and more: looked for a
            // boundary at a time from where one could begin.
            return find_across_chunks(rope, finder, bytes_at - reach.min(before.len()), end, stop);
        }
        // The byte before the boundary first: most boundaries end in no
        // byte of the needle's start.
        if let Some(&last) = before.last().filter(|last| needle[..reach].contains(last)) {
            for k in (1..=reach.min(before.len())).rev() {
                if needle[k - 1] == last && before.ends_with(&needle[..k]) && bytes.starts_with(&needle[k..]) {
                    return Some(bytes_at - k);
                }
            }
        }
        if let Some(i) = finder.find(bytes) {
            return Some(bytes_at + i);
        }
        before = bytes;
    }
    None
}

/// The rope's chunks from byte `start` to byte `end`, each cut to them,
/// with the byte offset of each.
fn chunks_between(rope: &ropey::Rope, start: usize, end: usize) -> impl Iterator<Item = (&[u8], usize)> {
    let (chunks, first, _, _) = rope.chunks_at_byte(start);
    chunks
        .scan(first, |at, chunk| {
            let chunk_at = *at;
            *at += chunk.len();
            Some((chunk.as_bytes(), chunk_at))
        })
        .take_while(move |&(_, at)| at < end)
        .map(move |(chunk, at)| (&chunk[start.saturating_sub(at)..chunk.len().min(end - at)], at.max(start)))
}

/// As [`find_in_chunks`], for a needle that may span more than two
/// chunks: across each boundary, the last bytes searched and the next
/// ones are copied together and searched; `stop` asked before each.
fn find_across_chunks(
    rope: &ropey::Rope,
    finder: &memchr::memmem::Finder<'_>,
    start: usize,
    end: usize,
    stop: &dyn Fn() -> bool,
) -> Option<usize> {
    let reach = finder.needle().len() - 1;
    // The last `reach` bytes searched, which start at `behind_at`.
    let mut behind: Vec<u8> = Vec::with_capacity(2 * reach);
    let mut behind_at = start;
    for (bytes, bytes_at) in chunks_between(rope, start, end) {
        if stop() {
            return None;
        }
        if !behind.is_empty() {
            let kept = behind.len();
            behind.extend_from_slice(&bytes[..reach.min(bytes.len())]);
            if let Some(i) = finder.find(&behind) {
                return Some(behind_at + i);
            }
            behind.truncate(kept);
        }
        if let Some(i) = finder.find(bytes) {
            return Some(bytes_at + i);
        }
        if bytes.len() >= reach {
            behind.clear();
            behind.extend_from_slice(&bytes[bytes.len() - reach..]);
        } else {
            behind.extend_from_slice(bytes);
            behind.drain(..behind.len().saturating_sub(reach));
        }
        behind_at = bytes_at + bytes.len() - behind.len();
    }
    None
}

/// A looked-up text as a file name and an optional address after `:`
/// (`file.c:12`, `file.c:/main/`).
pub fn file_and_addr(text: &str) -> (&str, Option<&str>) {
    match text.find(':') {
        Some(i) if i > 0 => (&text[..i], Some(&text[i + 1..]).filter(|a| !a.is_empty())),
        _ => (text, None),
    }
}

/// The directory a window's commands run in: its name's directory (the
/// name itself for a directory window).
pub fn window_dir(name: &str) -> Option<String> {
    if !name.starts_with('/') {
        return None;
    }
    if name.ends_with('/') {
        return Some(name.trim_end_matches('/').to_string()).map(|d| if d.is_empty() { "/".into() } else { d });
    }
    let dir = &name[..name.rfind('/').unwrap_or(0)];
    Some(if dir.is_empty() { "/".into() } else { dir.to_string() })
}

/// Whether a window name is a directory's (acme: it ends in `/`).
pub fn is_dir(name: &str) -> bool {
    name.ends_with('/')
}

/// A scratch window, whose changes acme never warns about: names like
/// `+Errors` and `-host`, or none (acme's `isscratch`, and unnamed).
pub fn is_scratch(name: &str) -> bool {
    let last = name.rsplit('/').next().unwrap_or(name);
    name.is_empty() || last.starts_with('+') || last.starts_with('-')
}

/// A window acme never warns about losing (`winsetname`'s `isscratch`):
/// one named `.../guide` or `...+Errors`.
pub fn never_warns(name: &str) -> bool {
    name.ends_with("/guide") || name.ends_with("+Errors")
}

/// The name of the errors window for commands run in `dir`.
pub fn errors_name(dir: &str) -> String {
    format!("{}/+Errors", dir.trim_end_matches('/'))
}

/// The errors window for a window named `name`: `DIR/+Errors` for its
/// directory, `+Errors` for a window without one.
pub fn errors_for(name: &str) -> String {
    window_dir(name).map_or("+Errors".to_string(), |d| errors_name(&d))
}

/// The first window (in layout order) whose body is named `name`.
pub fn window_named(state: &State, name: &str) -> Option<(WindowId, BufferId)> {
    // The buffers of that name first, in one walk: most names asked for
    // (a file being opened) are no buffer's, and a session of many
    // windows is not searched window by window for each file opened.
    let named: Vec<BufferId> = state.buffers.iter().filter(|(_, b)| b.name == name).map(|(id, _)| *id).collect();
    if named.is_empty() {
        return None;
    }
    // Then the windows showing them, and the first of those in layout
    // order, each found by a walk rather than a lookup per window.
    let showing: Vec<(WindowId, BufferId)> =
        state.windows.iter().filter(|(_, w)| named.contains(&w.body)).map(|(id, w)| (*id, w.body)).collect();
    state
        .layout
        .columns
        .iter()
        .flat_map(|c| &c.windows)
        .find_map(|p| showing.iter().find(|(w, _)| *w == p.window))
        .copied()
}

/// The part of a tag that `cleartag` removes: everything after the first
/// `|`, if there is any.
pub fn cleartag_range(tag: &Buffer) -> Option<(u64, u64)> {
    let text = tag.text.to_string();
    let bar = text.find('|')?;
    let q0 = text[..=bar].chars().count() as u64;
    (q0 < tag.len()).then_some((q0, tag.len()))
}

/// The origin that shows rune `q` on a view's first line (acme's
/// `textshow` as `show` uses it): the start of `q`'s line.
pub fn show_origin(buffer: &Buffer, q: u64) -> u64 {
    let line = buffer.text.char_to_line(q.min(buffer.len()) as usize);
    buffer.text.line_to_char(line) as u64
}

/// Brackets a double-click matches, left and right (acme's `left` and
/// `right`): a newline matches a newline, so a click at a line's edge
/// selects the line.
const LEFT: [&str; 3] = ["{[(<«", "\n", "'\"`"];
const RIGHT: [&str; 3] = ["}])>»", "\n", "'\"`"];

/// What a double-click at `q` selects (acme's `textdoubleclick`): after an
/// opening bracket or quote (or at a line's start) the text up to its
/// match (or the line); before a closing one, back to its match; else the
/// word of letters and digits around `q`.
pub fn double_click(buffer: &Buffer, q: u64) -> (u64, u64) {
    let len = buffer.len();
    let q = q.min(len);
    let at = |i: u64| buffer.text.char(i as usize);
    for (l, r) in LEFT.iter().zip(RIGHT) {
        let c = if q == 0 { '\n' } else { at(q - 1) };
        if let Some(i) = l.chars().position(|x| x == c) {
            let close = r.chars().nth(i).expect("paired");
            if let Some(end) = click_match(buffer, c, close, q, true) {
                // A line: up to and not including its newline.
                return (q, end - u64::from(c != '\n'));
            }
            return (q, q);
        }
        let c = if q == len { '\n' } else { at(q) };
        if let Some(i) = r.chars().position(|x| x == c) {
            let open = l.chars().nth(i).expect("paired");
            if let Some(start) = click_match(buffer, c, open, q, false) {
                let q1 = q + u64::from(q < len && c == '\n');
                let q0 = if c != '\n' || start != 0 || (len > 0 && at(0) == '\n') { start + 1 } else { start };
                return (q0, q1);
            }
            return (q, q);
        }
    }
    let word = |c: char| c.is_alphanumeric() || c == '_';
    let (mut q0, mut q1) = (q, q);
    while q1 < len && word(at(q1)) {
        q1 += 1;
    }
    while q0 > 0 && word(at(q0 - 1)) {
        q0 -= 1;
    }
    (q0, q1)
}

/// Finds the bracket `close` matching `open` from `q`, forward (the
/// position after the match) or backward (the position of the match),
/// counting nesting (acme's `textclickmatch`).
fn click_match(buffer: &Buffer, open: char, close: char, q: u64, forward: bool) -> Option<u64> {
    let len = buffer.len();
    let mut nest = 1;
    let mut q = q;
    loop {
        let c = match forward {
            true if q < len => buffer.text.char(q as usize),
            true => return (close == '\n').then_some(q + 1),
            false if q > 0 => buffer.text.char(q as usize - 1),
            false => return (open == '\n').then_some(0),
        };
        if forward {
            q += 1;
        } else {
            q -= 1;
        }
        if c == close {
            nest -= 1;
            if nest == 0 {
                return Some(q);
            }
        } else if c == open {
            nest += 1;
        }
    }
}

#[cfg(test)]
pub(crate) fn test_buffer(text: &str) -> Buffer {
    let mut b = Buffer::new(String::new());
    let op = crate::op::BufferOp::Splice { q0: 0, q1: 0, text: text.into(), origin: crate::op::Origin::Keyboard };
    b.apply(&op).expect("an insert into an empty buffer");
    b
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn null_clicks_expand_to_a_command_or_a_file_name() {
        let b = test_buffer("run ls|wc here /etc/passwd:3 x");
        assert_eq!(expand(&b, 5, true), (4, 9)); // ls|wc
        assert_eq!(expand(&b, 5, false), (4, 6)); // ls
        assert_eq!(expand(&b, 18, false), (15, 28)); // /etc/passwd:3
        assert_eq!(expand(&b, 18, true), (15, 26)); // exec stops at ':'
        assert_eq!(expand(&b, 3, true), (0, 3));
        let blank = test_buffer("a  b");
        assert_eq!(expand(&blank, 2, true), (2, 2));
    }

    #[test]
    fn commands_names_and_searches() {
        assert_eq!(split_command("  Look foo bar \n"), ("Look", "foo bar"));
        let b = test_buffer("one two one two");
        let b = &b.text;
        assert_eq!(find_next(b, "two", 0), Some((4, 7)));
        assert_eq!(find_next(b, "two", 7), Some((12, 15)));
        assert_eq!(find_next(b, "one", 9), Some((0, 3)));
        assert_eq!(find_next(b, "six", 0), None);
        // Across the rope's chunk boundaries, wherever they fall, runes of
        // every width before it.
        let filler: String = "ab\u{e9}\u{2713} \u{1d11e}\n".chars().cycle().take(9000).collect();
        for q in (0..filler.chars().count()).step_by(7) {
            let mut t: String = filler.chars().take(q).collect();
            t.push_str("needle");
            t.extend(filler.chars().skip(q));
            let text = Text::from(t.as_str());
            assert!(text.rope().chunks().count() > 8, "many chunks");
            let q = q as u64;
            assert_eq!(find_next(&text, "needle", 0), Some((q, q + 6)), "at {q}");
            assert_eq!(find_next(&text, "needle", q + 1), Some((q, q + 6)), "wrapping, at {q}");
            assert_eq!(find_next(&text, "needlf", q + 1), None, "nowhere, from {q}");
            // Runes of several bytes, against the flat text's search.
            let runes = "\u{e9}\u{2713} \u{1d11e}";
            let from = t.char_indices().nth(q as usize + 3).map_or(t.len(), |(i, _)| i);
            let flat = t[from..]
                .find(runes)
                .map(|i| i + from)
                .or_else(|| t.find(runes))
                .map(|i| t[..i].chars().count() as u64);
            assert_eq!(find_next(&text, runes, q + 3).map(|(q0, _)| q0), flat, "after {q}");
        }
        assert_eq!(find_next(&Text::from("needl"), "needle", 0), None);
        // A needle longer than a chunk, so spanning three or more.
        let long: String = filler.chars().skip(5).take(2500).collect::<String>() + "!";
        for q in [0, 1, 999, 4000] {
            let mut t: String = filler.chars().take(q).collect();
            t.push_str(&long);
            t.extend(filler.chars().skip(q));
            let text = Text::from(t.as_str());
            let at = t[..t.find(&long).unwrap()].chars().count() as u64;
            assert_eq!(find_next(&text, &long, 0).map(|(q0, _)| q0), Some(at), "a long needle at {q}");
        }
        assert_eq!(file_and_addr("/etc/passwd:3"), ("/etc/passwd", Some("3")));
        assert_eq!(file_and_addr("/etc/passwd"), ("/etc/passwd", None));
        assert_eq!(window_dir("/home/u/f.c").as_deref(), Some("/home/u"));
        assert_eq!(window_dir("/home/u/").as_deref(), Some("/home/u"));
        assert_eq!(window_dir("/f").as_deref(), Some("/"));
        assert_eq!(window_dir("+Errors"), None);
        assert!(is_scratch("/a/+Errors") && is_scratch("-host") && is_scratch("") && !is_scratch("/a/f.c"));
        assert!(never_warns("/a/+Errors") && never_warns("/a/guide") && never_warns("+Errors"));
        assert!(!never_warns("/a/-host") && !never_warns("") && !never_warns("guide") && !never_warns("/a/+Errors.c"));
        assert_eq!(errors_for("/home/u/f.c"), "/home/u/+Errors");
        assert_eq!(errors_for("scratch"), "+Errors");
    }

    #[test]
    fn double_clicks_select_words_lines_and_bracketed_text() {
        let b = test_buffer("one two_3 (a (b) c) \"q\"\nline two\n");
        assert_eq!(double_click(&b, 5), (4, 9), "a word");
        assert_eq!(double_click(&b, 11), (11, 18), "after ( up to its match, nested");
        assert_eq!(double_click(&b, 18), (11, 18), "before ) back to its match");
        assert_eq!(double_click(&b, 21), (21, 22), "inside quotes");
        assert_eq!(double_click(&b, 0), (0, 24), "at a line's start: the line, its newline too");
        assert_eq!(double_click(&b, 24), (24, 33), "after a newline: the next line");
        assert_eq!(double_click(&b, 23), (0, 24), "before a newline: the line and its newline");
        let open = test_buffer("f(x");
        assert_eq!(double_click(&open, 2), (2, 2), "no match, no selection");
    }

    #[test]
    fn cleartag_and_show() {
        let tag = test_buffer("/f Del Snarf | Look x y");
        assert_eq!(cleartag_range(&tag), Some((14, 23)));
        assert_eq!(cleartag_range(&test_buffer("/f Del |")), None);
        assert_eq!(cleartag_range(&test_buffer("/f Del")), None);
        let body = test_buffer("one\ntwo\nthree");
        assert_eq!(show_origin(&body, 5), 4);
        assert_eq!(show_origin(&body, 0), 0);
        assert_eq!(show_origin(&body, 99), 8);
    }
}

/// What ^F's file-name completion found (plan9port's `complete(3)` as
/// acme's `textcomplete` uses it).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Completion {
    /// Runes to type after the prefix: the rest of the one name that
    /// matched (then `/` for a directory, a space for a file), or what
    /// all the matches share beyond the prefix. None if that is nothing.
    pub advance: Option<String>,
    /// How many names matched.
    pub matched: usize,
    /// The names to list when there is nothing to type: the matches, or
    /// every name when none matched.
    pub names: Vec<String>,
}

/// Completes `prefix` against a directory's `entries` (name, is a
/// directory), in order of name.
pub fn complete(prefix: &str, entries: &[(String, bool)]) -> Completion {
    let mut matches: Vec<&(String, bool)> = entries.iter().filter(|(n, _)| n.starts_with(prefix)).collect();
    matches.sort_by(|a, b| a.0.cmp(&b.0));
    let all = || {
        let mut names: Vec<String> = entries.iter().map(|(n, _)| n.clone()).collect();
        names.sort();
        names
    };
    match matches.as_slice() {
        [] => Completion { advance: None, matched: 0, names: all() },
        [(name, dir)] => {
            let rest = format!("{}{}", &name[prefix.len()..], if *dir { "/" } else { " " });
            Completion { advance: Some(rest), matched: 1, names: vec![name.clone()] }
        }
        many => {
            let shared = |a: &str, b: &str| -> usize {
                a.chars().zip(b.chars()).take_while(|(x, y)| x == y).map(|(x, _)| x.len_utf8()).sum()
            };
            let first = &many[0].0;
            let common = many[1..].iter().map(|(n, _)| shared(first, n)).min().unwrap_or(first.len());
            let rest = &first[prefix.len()..common.max(prefix.len())];
            Completion {
                advance: (!rest.is_empty()).then(|| rest.to_string()),
                matched: many.len(),
                names: many.iter().map(|(n, _)| n.clone()).collect(),
            }
        }
    }
}

/// The file name ^F completes, ending at rune `q` of `buf` (acme's
/// `textfilewidth`): the directory part (back to a blank) and the last
/// element (back to a `/`). None when `q` is inside a word.
pub fn completion_at(buf: &Buffer, q: u64) -> Option<(String, String)> {
    let len = buf.len();
    let q = q.min(len);
    if q < len && buf.text.char(q as usize) > ' ' {
        return None;
    }
    let back = |from: u64, one_element: bool| {
        let mut p = from;
        while p > 0 {
            let c = buf.text.char(p as usize - 1);
            if c <= ' ' || (one_element && c == '/') {
                break;
            }
            p -= 1;
        }
        p
    };
    let name_start = back(q, true);
    let path_start = back(name_start, false);
    let slice = |a: u64, b: u64| buf.slice(a, b).unwrap_or_default();
    Some((slice(path_start, name_start), slice(name_start, q)))
}
