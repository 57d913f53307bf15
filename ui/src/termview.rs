//! How this UI looks at a terminal a window shows, apart from the
//! terminal itself (which every replica shares): how far back in its
//! scrollback the window is scrolled, and the cells button 1 selected.
//! A terminal's text is its scrollback and then its screen, one row
//! after another: a [`Cell`]'s row counts from the oldest row kept.

use apex_core::grid::{style, Row};
use apex_core::look;
use apex_core::term::Term;
use apex_core::WindowId;
use std::collections::HashMap;

/// A cell: a row of the scrollback-and-screen sequence, and a column.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Cell {
    pub row: usize,
    pub col: u16,
}

/// One window's view of its terminal.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct TermView {
    /// The first row shown; `None` follows the bottom (new output shows).
    pub top: Option<usize>,
    /// Cells selected, from the first to the one past the last.
    pub sel: Option<(Cell, Cell)>,
}

/// Every window's view of its terminal.
pub type TermViews = HashMap<WindowId, TermView>;

/// The rows in all: scrollback and screen.
pub fn rows(t: &Term) -> usize {
    t.scrollback.len() + t.grid.len()
}

/// Row `i` of the sequence.
pub fn row(t: &Term, i: usize) -> Option<&Row> {
    match i.checked_sub(t.scrollback.len()) {
        None => t.scrollback.get(i).map(|r| &**r),
        Some(j) => t.grid.get(j),
    }
}

/// The first row shown of `shown` rows: where the view is scrolled to,
/// else the bottom.
pub fn top(view: Option<&TermView>, t: &Term, shown: usize) -> usize {
    let bottom = rows(t).saturating_sub(shown);
    view.and_then(|v| v.top).map_or(bottom, |top| top.min(bottom))
}

/// The char at column `col` of `row` and the column it starts at (a wide
/// char takes two), if any.
fn char_at(row: &Row, col: u16) -> Option<(usize, char, u16)> {
    let mut at = 0u16;
    for (i, (c, s)) in row.styles().enumerate() {
        let w = if s.flags & style::WIDE != 0 { 2 } else { 1 };
        if col < at + w {
            return Some((i, c, at));
        }
        at += w;
    }
    None
}

/// The text of cells `a..b`: rows joined by newlines, but a row the
/// program wrapped runs on into the next without one.
pub fn text(t: &Term, a: Cell, b: Cell) -> String {
    let (a, b) = if a <= b { (a, b) } else { (b, a) };
    let mut out = String::new();
    for i in a.row..=b.row {
        let Some(r) = row(t, i) else { break };
        let from = if i == a.row { a.col } else { 0 };
        let to = if i == b.row { b.col } else { u16::MAX };
        let mut col = 0u16;
        for (c, s) in r.styles() {
            let w = if s.flags & style::WIDE != 0 { 2 } else { 1 };
            if col >= from && col < to {
                out.push(c);
            }
            col += w;
        }
        if i < b.row && !r.wrapped {
            out.push('\n');
        }
    }
    out
}

/// Where cell `at` is in the terminal's `text` (scrollback, then screen,
/// a newline after every row), in runes: the inverse of [`cell_of`].
pub fn offset(t: &Term, at: Cell) -> u64 {
    let before: u64 = (0..at.row).filter_map(|i| row(t, i)).map(|r| r.text.chars().count() as u64 + 1).sum();
    let Some(r) = row(t, at.row) else { return before };
    let mut col = 0u16;
    let mut chars = 0u64;
    for (_, s) in r.styles() {
        if col >= at.col {
            break;
        }
        col += if s.flags & style::WIDE != 0 { 2 } else { 1 };
        chars += 1;
    }
    before + chars
}

/// The cell at rune `q` of the terminal's `text` (a newline is the cell
/// after its row's last char).
pub fn cell_of(t: &Term, q: u64) -> Cell {
    let mut left = q;
    for i in 0..rows(t) {
        let Some(r) = row(t, i) else { break };
        let n = r.text.chars().count() as u64;
        if left <= n {
            let col = r.styles().take(left as usize).map(|(_, s)| if s.flags & style::WIDE != 0 { 2 } else { 1 }).sum();
            return Cell { row: i, col };
        }
        left -= n + 1;
    }
    Cell { row: rows(t).saturating_sub(1), col: 0 }
}

/// The run of file-name characters around `at` (acme's expansion of a
/// null click), and the cells it covers.
pub fn word_at(t: &Term, at: Cell) -> Option<(String, Cell, Cell)> {
    let r = row(t, at.row)?;
    let chars: Vec<char> = r.text.chars().collect();
    let (i, c, _) = char_at(r, at.col)?;
    if !look::is_file_char(c) {
        return None;
    }
    let (mut i0, mut i1) = (i, i + 1);
    while i0 > 0 && look::is_file_char(chars[i0 - 1]) {
        i0 -= 1;
    }
    while i1 < chars.len() && look::is_file_char(chars[i1]) {
        i1 += 1;
    }
    let col =
        |i: usize| -> u16 { r.styles().take(i).map(|(_, s)| if s.flags & style::WIDE != 0 { 2 } else { 1 }).sum() };
    Some((chars[i0..i1].iter().collect(), Cell { row: at.row, col: col(i0) }, Cell { row: at.row, col: col(i1) }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use apex_core::grid::Row;

    fn term(scrollback: &[&str], screen: &[&str]) -> Term {
        let mut t = Term::new(20, screen.len() as u16, 100, "sh".into(), "/tmp".into()).unwrap();
        t.scrollback = scrollback.iter().map(|s| std::sync::Arc::new(Row::plain(s))).collect();
        t.grid = screen.iter().map(|s| Row::plain(s)).collect();
        t
    }

    #[test]
    fn the_scrollback_and_the_screen_are_one_text() {
        let t = term(&["old one", "old two"], &["$ ls", "a.c b.c", "$"]);
        assert_eq!(rows(&t), 5);
        assert_eq!(row(&t, 1).unwrap().text, "old two");
        assert_eq!(row(&t, 2).unwrap().text, "$ ls");
        assert_eq!(top(None, &t, 3), 2, "the bottom: the screen");
        assert_eq!(top(Some(&TermView { top: Some(0), sel: None }), &t, 3), 0);
        assert_eq!(top(Some(&TermView { top: Some(9), sel: None }), &t, 3), 2, "never past the bottom");
        let a = Cell { row: 1, col: 4 };
        let b = Cell { row: 3, col: 3 };
        assert_eq!(text(&t, a, b), "two\n$ ls\na.c");
        assert_eq!(text(&t, b, a), "two\n$ ls\na.c", "either way round");
        let (w, w0, w1) = word_at(&t, Cell { row: 3, col: 5 }).unwrap();
        assert_eq!((w.as_str(), w0.col, w1.col), ("b.c", 4, 7));
        assert!(word_at(&t, Cell { row: 3, col: 3 }).is_none(), "a blank");
        // Cells and runes of the text (Look's offsets) map both ways.
        let whole = t.text();
        let q = whole.find("b.c").unwrap() as u64;
        assert_eq!(cell_of(&t, q), Cell { row: 3, col: 4 });
        assert_eq!(offset(&t, Cell { row: 3, col: 4 }), q);
        assert_eq!(offset(&t, cell_of(&t, q + 3)), q + 3);
        assert_eq!(cell_of(&t, 0), Cell { row: 0, col: 0 });
    }

    #[test]
    fn a_wide_char_is_one_rune_over_two_cells() {
        let mut t = term(&[], &["x"]);
        let wide = apex_core::grid::Style { flags: style::WIDE, ..Default::default() };
        t.grid[0] =
            Row { text: "日本x".into(), runs: vec![apex_core::grid::Run { len: 2, style: wide }], wrapped: false };
        assert_eq!(cell_of(&t, 2), Cell { row: 0, col: 4 });
        assert_eq!(offset(&t, Cell { row: 0, col: 4 }), 2);
        assert_eq!(offset(&t, Cell { row: 0, col: 2 }), 1);
    }
}
