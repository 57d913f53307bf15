//! What a view shows and where it scrolls to: acme's `textbacknl`
//! (back over lines, a long line counted every 128 runes) and `textshow`
//! (a rune off the screen is brought a quarter of the way down, one on
//! it is left where it is). Every UI lays its frames out itself, so what
//! the frame holds comes in as [`Shown`].

use crate::text::Text;

/// What a view's frame holds at its origin.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Shown {
    /// The first rune shown.
    pub org: u64,
    /// The rune after the last one shown.
    pub end: u64,
    /// Lines the frame shows text on (libframe's `nlines`: not the empty
    /// line after a final newline).
    pub lines: u32,
    /// Lines it has room for.
    pub max_lines: u32,
}

/// How far back from `p` the start of the `n`th line before it is, where
/// a line longer than 128 runes counts as a line every 128 (acme's
/// `textbacknl`); with `n` 0, the start of `p`'s own line.
pub fn back_lines(text: &Text, mut p: u64, n: u32) -> u64 {
    let p_max = text.len_chars() as u64;
    p = p.min(p_max);
    let at = |q: u64| text.char(q as usize);
    let mut n = n;
    if n == 0 && p > 0 && at(p - 1) != '\n' {
        n = 1;
    }
    for _ in 0..n {
        if p == 0 {
            break;
        }
        // At a newline now: back over it.
        p -= 1;
        if p == 0 {
            break;
        }
        let mut left = 127;
        while left > 0 && p > 0 {
            if at(p - 1) == '\n' {
                break;
            }
            p -= 1;
            left -= 1;
        }
    }
    p
}

/// Where `q` is as acme's Get remembers a view's places across the new
/// text (`nlcount`): the newlines from `from` to it, and the runes after
/// the last of them (from `from` when there is none).
pub fn line_place(text: &Text, from: u64, q: u64) -> (u64, u64) {
    let (mut lines, mut runes) = (0, 0);
    let n = q.saturating_sub(from) as usize;
    for c in text.rope().chars_at((from as usize).min(text.len_chars())).take(n) {
        match c {
            '\n' => (lines, runes) = (lines + 1, 0),
            _ => runes += 1,
        }
    }
    (lines, runes)
}

/// The rune `lines` newlines and then `runes` runes on from rune `from`
/// of `text`, the runes stopping at the line's end and everything at the
/// text's (`nlcounttopos`). A text given as its pieces, in order: a Get
/// places views in the text it read before it becomes the buffer's.
pub fn line_pos_in<'a>(text: impl IntoIterator<Item = &'a str>, from: u64, (lines, runes): (u64, u64)) -> u64 {
    let mut q = from;
    let mut chars = text.into_iter().flat_map(str::chars).skip(from as usize).peekable();
    let mut left = lines;
    while left > 0 {
        let Some(c) = chars.next() else { return q };
        q += 1;
        if c == '\n' {
            left -= 1;
        }
    }
    let mut left = runes;
    while left > 0 && chars.peek().is_some_and(|c| *c != '\n') {
        chars.next();
        q += 1;
        left -= 1;
    }
    q
}

/// An origin in the middle of a line moved on to the next line's start,
/// looking at most 256 runes ahead (acme's inexact `textsetorigin`).
pub fn next_line_start<'a>(text: impl IntoIterator<Item = &'a str>, org: u64) -> u64 {
    let mut chars = text.into_iter().flat_map(str::chars).skip((org as usize).saturating_sub(1));
    if org == 0 || chars.next().is_none_or(|c| c == '\n') {
        return org;
    }
    let mut q = org;
    for c in chars.take(256) {
        q += 1;
        if c == '\n' {
            break;
        }
    }
    q
}

/// Where to put the origin so that `q` is shown (acme's `textshow`):
/// `None` when it is shown already (the end of the text counts when it
/// is on a line the frame shows); else a quarter of the frame above it,
/// or three quarters when a program reads the window's events (it is
/// likely typing at the bottom), never moving back when the rune is
/// ahead.
pub fn show(text: &Text, shown: Shown, q: u64, events_read: bool) -> Option<u64> {
    let len = text.len_chars() as u64;
    if shown.org <= q {
        if len == 0 || q < shown.end {
            return None;
        }
        if q == shown.end && shown.end == len {
            // The end: shown when the last line has room below it.
            let ends_line = text.char(len as usize - 1) == '\n';
            if !ends_line || shown.lines < shown.max_lines {
                return None;
            }
        }
    }
    let nl = if events_read { 3 * shown.max_lines / 4 } else { shown.max_lines / 4 };
    let org = back_lines(text, q, nl);
    // A long line: going back when the rune is ahead would not show it.
    if q > shown.org && org < shown.org {
        return Some(shown.end.max(shown.org + 1).min(q));
    }
    Some(org)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn text(s: &str) -> Text {
        Text::from(s)
    }

    #[test]
    fn places_by_lines_and_runes_come_back_in_another_text() {
        let old = text("one\ntwo\nthree\n");
        assert_eq!(line_place(&old, 0, 10), (2, 2), "th|ree");
        assert_eq!(line_place(&old, 8, 10), (0, 2));
        let new = "1\n2\nthr\n";
        assert_eq!(line_pos_in([new], 0, (2, 2)), 6);
        assert_eq!(line_pos_in([&new[..2], &new[2..]], 0, (2, 9)), 7, "the runes stop at the line's end");
        assert_eq!(line_pos_in([new], 0, (9, 0)), 8, "the lines at the text's");
        assert_eq!(line_pos_in([new], 6, (0, 1)), 7);
        assert_eq!(next_line_start([&new[..3], &new[3..]], 5), 8, "mid-line: on to the next line");
        assert_eq!(next_line_start([new], 4), 4);
    }

    #[test]
    fn back_lines_goes_to_line_starts_and_counts_a_long_line_every_128_runes() {
        let t = text("one\ntwo\nthree\n");
        assert_eq!(back_lines(&t, 10, 0), 8, "the start of its own line");
        assert_eq!(back_lines(&t, 8, 0), 8, "already there");
        assert_eq!(back_lines(&t, 10, 1), 8);
        assert_eq!(back_lines(&t, 8, 1), 4, "at a line start, one back is the line before");
        assert_eq!(back_lines(&t, 10, 5), 0);
        let long = text(&"x".repeat(300));
        assert_eq!(back_lines(&long, 300, 1), 300 - 128);
    }

    #[test]
    fn show_leaves_a_shown_rune_and_brings_another_a_quarter_down() {
        let s: String = (0..100).map(|i| format!("line {i}\n")).collect();
        let t = text(&s);
        let line = |n: usize| s.lines().take(n).map(|l| l.len() as u64 + 1).sum::<u64>();
        let shown = Shown { org: line(10), end: line(30), lines: 20, max_lines: 20 };
        assert_eq!(show(&t, shown, line(15), false), None, "on the screen: stays");
        assert_eq!(show(&t, shown, line(50), false), Some(line(45)), "a quarter of 20 lines above it");
        assert_eq!(show(&t, shown, line(2), false), Some(0), "above: as far back as there is");
        assert_eq!(show(&t, shown, line(50), true), Some(line(35)), "three quarters for an event reader");
        let end = Shown { org: line(95), end: s.len() as u64, lines: 6, max_lines: 20 };
        assert_eq!(show(&t, end, s.len() as u64, false), None, "the end, with room below it");
    }
}
