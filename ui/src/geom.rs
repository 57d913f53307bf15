//! The screen model's geometry: where the row tag, each column (its tag
//! and layout box) and each window (its tag, layout box, scroll bar and
//! body) are, in pixels, for a window of a given size. Everything comes
//! from the layout shard (columns' left edges and windows' top edges as
//! fractions) and the font's line height, so every UI of a session shows
//! the same arrangement at its own size.
//!
//! A window's tag shows all its lines, as plan9port acme's expanded tags
//! do (a long tag wraps, a newline starts a line), up to the window's
//! height; a tag this UI collapsed (Up in the tag, as acme's Tagup) keeps
//! one line. That choice is local: it is pixel geometry, not session state.

use crate::font::{Face, Fonts};
use crate::frame::Frame;
use crate::rect::Rect;
use apex_core::cols::{Framed, Lines};
use apex_core::exec::DEFAULT_TAB;
use apex_core::show::Shown;
use apex_core::{ColumnId, Frac, State, WindowId};
use std::collections::BTreeSet;

/// Sizes that follow the font and the scale factor.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Metrics {
    /// One line of text.
    pub line: i32,
    /// The rules between columns, windows and tags.
    pub border: i32,
    /// The scroll bar's (and layout box's) width.
    pub scroll_bar: i32,
    /// The gap between the scroll bar and the text.
    pub gap: i32,
}

impl Metrics {
    /// acme's sizes (Scrollwid 12, Scrollgap 4, Border 2) at `scale`.
    pub fn new(line: u32, scale: f64) -> Metrics {
        let px = |n: f64| ((n * scale).round() as i32).max(1);
        Metrics { line: line as i32, border: px(2.0), scroll_bar: px(12.0), gap: px(4.0) }
    }

    /// Where text starts right of a scroll bar.
    pub fn indent(&self) -> i32 {
        self.scroll_bar + self.gap
    }
}

/// One window on the screen.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WindowGeom {
    pub id: WindowId,
    /// The whole window.
    pub rect: Rect,
    /// The tag's line (layout box included) and its text.
    pub tag_line: Rect,
    pub tag: Rect,
    pub layout_box: Rect,
    /// The body's scroll bar and its text.
    pub scroll: Rect,
    pub body: Rect,
}

/// One column on the screen.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ColumnGeom {
    pub id: ColumnId,
    pub rect: Rect,
    pub tag_line: Rect,
    pub tag: Rect,
    pub layout_box: Rect,
    /// Where the column's windows go.
    pub area: Rect,
    pub windows: Vec<WindowGeom>,
}

/// How many lines window `w`'s tag takes laid out in `rect` (acme's
/// `wintaglines`): every line of its text, an empty one after a final
/// newline for typing, at least one, at most what the window holds.
fn tag_lines(state: &State, w: WindowId, rect: Rect, m: &Metrics, fonts: &mut Fonts) -> i32 {
    let Some(tag) = state.window(w).ok().and_then(|w| state.buffer(w.tag).ok()) else { return 1 };
    let frame = Frame::new(tag.text.rope(), 0, rect, fonts.face(Face::Proportional), m.line, DEFAULT_TAB);
    (frame.lines.len() as i32).max(1)
}

/// The whole screen.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Screen {
    pub width: i32,
    pub height: i32,
    pub row_tag: Rect,
    pub columns: Vec<ColumnGeom>,
}

fn at(f: Frac, from: i32, to: i32) -> i32 {
    from + ((i64::from(f.0) * i64::from((to - from).max(0))) / i64::from(Frac::ONE.0)) as i32
}

/// The windows' tops in a column's area `y0..y1`, from where their
/// positions put them (`placed`), moved so that each keeps its tag line
/// and border (acme's `colresize` gives every window at least that much),
/// pushed up from the bottom where they run past it; in a column too short
/// for that, spread evenly, so a squeezed window still has a row of
/// pixels to click. A window button 3 hid (`cols::hidden`) stays where
/// it is, hidden, as acme hides it.
fn reachable_tops(placed: &[i32], hidden: &[bool], y0: i32, y1: i32, m: &Metrics) -> Vec<i32> {
    let mut tops: Vec<i32> = placed.iter().map(|y| (*y).clamp(y0, y1)).collect();
    let shown: Vec<usize> = (0..tops.len()).filter(|&j| !hidden.get(j).copied().unwrap_or(false)).collect();
    let Some(&first) = shown.first() else { return tops };
    tops[first] = y0;
    place_shown(&mut tops, &shown, y0, y1, m);
    // A hidden window starts where the next shown one does (or the
    // column ends): it has no height, and the one above it ends there.
    let mut next = y1;
    for j in (0..tops.len()).rev() {
        match shown.binary_search(&j) {
            Ok(_) => next = tops[j],
            Err(_) => tops[j] = next,
        }
    }
    tops
}

/// `reachable_tops` for the windows shown (indices into `tops`, in order,
/// the first already at `y0`).
fn place_shown(tops: &mut [i32], shown: &[usize], y0: i32, y1: i32, m: &Metrics) {
    let n = shown.len() as i32;
    let least = m.line + m.border;
    if n * least > y1 - y0 {
        let each = ((y1 - y0) / n).max(1);
        for (k, &j) in shown.iter().enumerate() {
            tops[j] = (y0 + k as i32 * each).min(y1);
        }
        return;
    }
    for k in 1..shown.len() {
        tops[shown[k]] = tops[shown[k]].max(tops[shown[k - 1]] + least);
    }
    let mut limit = y1 - least;
    for &j in shown.iter().rev() {
        tops[j] = tops[j].min(limit);
        limit = tops[j] - least;
    }
}

impl Screen {
    /// The screen of `state`'s layout in a `width`×`height` window, the
    /// tags of `collapsed` windows one line high.
    pub fn new(
        state: &State,
        width: i32,
        height: i32,
        m: &Metrics,
        fonts: &mut Fonts,
        collapsed: &BTreeSet<WindowId>,
    ) -> Screen {
        // The row tag's text starts where every other text does, right of
        // a scroll bar's room (acme gives the row tag one too).
        let row_tag = Rect::new(m.indent().min(width), 0, width, m.line.min(height));
        let top = (row_tag.y1 + m.border).min(height);
        let cols = &state.layout.columns;
        let mut columns = Vec::with_capacity(cols.len());
        for (i, c) in cols.iter().enumerate() {
            let x0 = if i == 0 { 0 } else { at(c.x, 0, width) };
            let x1 = cols.get(i + 1).map_or(width, |n| at(n.x, 0, width) - m.border).max(x0);
            let rect = Rect::new(x0, top, x1, height);
            let tag_line = Rect::new(x0, top, x1, (top + m.line).min(height));
            let layout_box = Rect::new(x0, top, (x0 + m.scroll_bar).min(x1), tag_line.y1);
            let tag = Rect::new((x0 + m.indent()).min(x1), top, x1, tag_line.y1);
            let area = Rect::new(x0, (tag_line.y1 + m.border).min(height), x1, height);
            let mut windows = Vec::with_capacity(c.windows.len());
            let placed: Vec<i32> = c.windows.iter().map(|p| at(p.y, area.y0, area.y1)).collect();
            let tops = reachable_tops(&placed, &apex_core::cols::hidden(c), area.y0, area.y1, m);
            for (j, p) in c.windows.iter().enumerate() {
                let wy0 = tops[j];
                let wy1 = tops.get(j + 1).map_or(area.y1, |n| n - m.border).max(wy0);
                let rect = Rect::new(x0, wy0, x1, wy1);
                let tag_text = Rect::new((x0 + m.indent()).min(x1), wy0, x1, wy1);
                let lines = match collapsed.contains(&p.window) {
                    true => 1,
                    false => tag_lines(state, p.window, tag_text, m, fonts),
                };
                let tag_line = Rect::new(x0, wy0, x1, (wy0 + lines * m.line).min(wy1));
                // A pixel's rule under the tag, where a line of body fits
                // below it (acme's `winresize`).
                let rule = i32::from(tag_line.y1 + 1 + m.line <= wy1);
                let body_top = tag_line.y1 + rule;
                windows.push(WindowGeom {
                    id: p.window,
                    rect,
                    tag_line,
                    tag: Rect::new(tag_text.x0, wy0, x1, tag_line.y1),
                    layout_box: Rect::new(x0, wy0, (x0 + m.scroll_bar).min(x1), (wy0 + m.line).min(wy1)),
                    scroll: Rect::new(x0, body_top, (x0 + m.scroll_bar).min(x1), wy1),
                    body: Rect::new((x0 + m.indent()).min(x1), body_top, x1, wy1),
                });
            }
            columns.push(ColumnGeom { id: c.id, rect, tag_line, tag, layout_box, area, windows });
        }
        Screen { width, height, row_tag, columns }
    }

    /// Every window, column by column.
    pub fn windows(&self) -> impl Iterator<Item = &WindowGeom> {
        self.columns.iter().flat_map(|c| c.windows.iter())
    }

    pub fn window(&self, id: WindowId) -> Option<&WindowGeom> {
        self.windows().find(|w| w.id == id)
    }

    /// How this screen draws its columns, for core to place a new window
    /// as acme's `coladd` does: the columns' height, a line, the border,
    /// and each window's tag lines with what its body frame `shown`.
    pub fn lines(&self, m: &Metrics, shown: &std::collections::HashMap<WindowId, Shown>) -> Option<Lines> {
        let area = self.columns.first()?.area;
        let windows = self
            .windows()
            .filter_map(|w| {
                let body = *shown.get(&w.id)?;
                let tag_lines = (w.tag_line.height() / m.line.max(1)).max(1) as u32;
                Some((w.id, Framed { tag_lines, body }))
            })
            .collect();
        Some(Lines { height: area.height().max(0) as u32, line: m.line as u32, border: m.border as u32, windows })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Shown windows keep a tag line each, pushed up from the column's
    /// bottom; a hidden one between them starts where the next shown one
    /// does, so the window above it ends before that one, not over it.
    #[test]
    fn shown_windows_keep_a_tag_and_a_hidden_one_takes_no_room() {
        let m = Metrics::new(15, 1.0);
        let least = m.line + m.border;
        let tops = reachable_tops(&[0, 90, 90, 95], &[false, true, false, false], 0, 100, &m);
        assert_eq!(tops, vec![0, 100 - 2 * least, 100 - 2 * least, 100 - least]);
        // Too short for every tag: a row of pixels each, in order.
        let tops = reachable_tops(&[0, 1, 2, 3, 4, 5, 6, 7], &[false; 8], 0, 40, &m);
        assert!(tops.windows(2).all(|t| t[0] < t[1]), "{tops:?}");
    }
}
