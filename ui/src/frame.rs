//! Laying a text out in a rectangle, as acme's libframe does: from an
//! origin rune, glyph after glyph, a newline ending its line, a line that
//! does not fit wrapping onto the next, tabs to the next multiple of the
//! tab width (in widths of `0`), until the rectangle is full. Only the
//! visible runes are looked at, so a 100 MB text costs what one screen
//! does. The frame maps runes to points and points to runes.

use crate::font::Sized;
use crate::rect::Rect;
use ropey::Rope;

/// One laid-out rune.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Cell {
    pub q: u64,
    pub x: i32,
    pub width: i32,
    pub c: char,
}

/// One line of the frame.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Line {
    pub y: i32,
    /// The runes `q0..q1` are on this line.
    pub q0: u64,
    pub q1: u64,
    pub cells: Vec<Cell>,
}

/// A text laid out in a rectangle.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Frame {
    pub rect: Rect,
    pub line_height: i32,
    pub org: u64,
    /// The first rune not shown.
    pub end: u64,
    pub lines: Vec<Line>,
}

impl Frame {
    /// Lays `text` out from rune `org` in `rect`, lines `line_height`
    /// apart, tabs every `tab` widths of `0`.
    pub fn new(text: &Rope, org: u64, rect: Rect, face: &mut Sized, line_height: i32, tab: u32) -> Frame {
        let len = text.len_chars() as u64;
        let org = org.min(len);
        let mut frame = Frame { rect, line_height, org, end: org, lines: Vec::new() };
        if rect.is_empty() || line_height <= 0 {
            return frame;
        }
        // A stop past the right edge is as good as the edge: no wider, so
        // the sums below stay in range whatever width a window was given.
        let tab_px =
            (u64::from(face.advance('0').max(1)) * u64::from(tab.max(1))).min((rect.x1 - rect.x0) as u64) as i32;
        let mut line = Line { y: rect.y0, q0: org, q1: org, cells: Vec::new() };
        let mut x = rect.x0;
        let mut q = org;
        let fits = |y: i32| y + line_height <= rect.y1;
        if !fits(line.y) {
            return frame;
        }
        // Ends the line before rune `q` and starts the next; whether the
        // next still fits.
        let next_line = |frame: &mut Frame, line: &mut Line, q: u64| {
            let y = line.y + line_height;
            line.q1 = q;
            frame.lines.push(std::mem::replace(line, Line { y, q0: q, q1: q, cells: Vec::new() }));
            fits(y)
        };
        for c in text.chars_at(org as usize) {
            let width = match c {
                '\n' => (rect.x1 - x).max(0),
                '\t' => {
                    let next = rect.x0 + ((x - rect.x0) / tab_px + 1) * tab_px;
                    (next.min(rect.x1) - x).max(1)
                }
                c => face.advance(c) as i32,
            };
            // A rune that does not fit goes to the next line, unless the
            // line is empty (then it is cut at the edge).
            if c != '\n' && x + width > rect.x1 && !line.cells.is_empty() {
                x = rect.x0;
                if !next_line(&mut frame, &mut line, q) {
                    frame.end = q;
                    return frame;
                }
            }
            line.cells.push(Cell { q, x, width, c });
            q += 1;
            x += width;
            if c == '\n' {
                x = rect.x0;
                if !next_line(&mut frame, &mut line, q) {
                    frame.end = q;
                    return frame;
                }
            }
        }
        line.q1 = q;
        frame.lines.push(line);
        frame.end = q;
        frame
    }

    /// Where rune `q` starts, if it is shown (the end of the text counts).
    pub fn point_of(&self, q: u64) -> Option<(i32, i32)> {
        // The end of the text is on the last line (the empty one after a
        // final newline, if that is shown).
        let last = self.lines.last().filter(|l| q == self.end && q >= l.q0);
        let line = self.lines.iter().find(|l| (l.q0..l.q1).contains(&q)).or(last)?;
        let x = line.cells.iter().find(|c| c.q == q).map_or_else(
            || line.cells.last().map_or(self.rect.x0, |c| c.x + if c.c == '\n' { 0 } else { c.width }),
            |c| c.x,
        );
        Some((x, line.y))
    }

    /// The rune a click at (`x`, `y`) lands before (acme's `frcharofpt`).
    pub fn rune_at(&self, x: i32, y: i32) -> u64 {
        let Some(line) = self.lines.iter().find(|l| y < l.y + self.line_height).or(self.lines.last()) else {
            return self.org;
        };
        for c in &line.cells {
            if c.c == '\n' || x < c.x + c.width / 2 {
                return c.q;
            }
        }
        line.q1
    }

    /// What the frame shows, for core's `show` (acme's `textshow`).
    pub fn shown(&self) -> apex_core::show::Shown {
        // Lines holding text, as libframe's nlines counts them: not the
        // empty one after a final newline (or of an empty text).
        let empty_last = self.lines.last().is_some_and(|l| l.cells.is_empty());
        let lines = (self.lines.len() - usize::from(empty_last)) as u32;
        apex_core::show::Shown { org: self.org, end: self.end, lines, max_lines: self.capacity() as u32 }
    }

    /// How many lines there are room for.
    pub fn capacity(&self) -> usize {
        (self.rect.height() / self.line_height.max(1)) as usize
    }
}
