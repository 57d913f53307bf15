//! acme's column layout policy, for the daemon and every UI alike: where a
//! new window goes and how much room it gets (`cols.c`'s `coladd`), where
//! a dragged window lands within or across columns (`coldragwin`), who
//! takes a closed window's room (`colclose`), the order `Sort` gives a
//! column (`colsort`), and where a new column starts (`rows.c`'s
//! `rowadd`).
//!
//! Positions are top edges (and left edges) in `Frac`s: window `i` of a
//! column spans from its own `y` to the next window's, the last to the
//! bottom. acme splits the last window in half; halving alone runs out of
//! room after twenty windows, so a split that would leave less than
//! [`MIN_SHARE`] splits the tallest window instead, as acme grows a
//! window that is too small before it splits it. A window of height `h`
//! splits into two of at least `h / 2`, so with `n` windows the tallest
//! has at least `ONE / n` and every split gives distinct, ordered places
//! for hundreds of thousands of windows.

use crate::frac::Frac;
use crate::id::{ColumnId, WindowId};
use crate::layout::{Column, Layout};
use crate::show::Shown;
use std::collections::BTreeMap;

/// The smallest share a split gives a window before the policy turns to
/// the tallest window instead: a sixty-fourth of the column.
pub const MIN_SHARE: u32 = Frac::ONE.0 / 64;

/// A window's span in a column button 3 filled (`Grow::Full`): acme
/// hides the others there (`colgrow`), and button 1 or 2 on the filling
/// window's box gives them their tags back. Any other window keeps at
/// least its tag on every screen, however its span maps to pixels.
pub const HIDDEN: u32 = 1;

/// Whether each window of `col`, in order, is hidden ([`HIDDEN`]).
pub fn hidden(col: &Column) -> Vec<bool> {
    spans(col, None).iter().map(|(_, top, bottom)| bottom - top <= HIDDEN).collect()
}

/// Each window's span `(window, top, bottom)` in `col`, leaving out
/// `except` (a window being moved): the window above it takes its room.
fn spans(col: &Column, except: Option<WindowId>) -> Vec<(WindowId, u32, u32)> {
    let placed: Vec<_> = col.windows.iter().filter(|p| Some(p.window) != except).collect();
    let mut out = Vec::with_capacity(placed.len());
    for (i, p) in placed.iter().enumerate() {
        // The first window starts at the column's top whatever its y says.
        let top = if i == 0 { 0 } else { p.y.0 };
        let bottom = placed.get(i + 1).map_or(Frac::ONE.0, |n| n.y.0);
        out.push((p.window, top, bottom.max(top)));
    }
    out
}

/// The middle of the tallest of the spans `(_, top, bottom)` (the first of
/// equals).
fn split_tallest<K: Copy>(spans: &[(K, u32, u32)]) -> Frac {
    let tallest = spans.iter().map(|(_, t, b)| (*t, *b)).max_by_key(|(t, b)| (b - t, std::cmp::Reverse(*t)));
    let (top, bottom) = tallest.unwrap_or((0, Frac::ONE.0));
    Frac(top + (bottom - top).div_ceil(2))
}

/// Where a new window goes in `col`: the bottom half of the last window
/// (acme's default), or of the tallest when that half would be smaller
/// than [`MIN_SHARE`]; the top of an empty column.
pub fn new_window_y(col: &Column) -> Frac {
    let spans = spans(col, None);
    let Some((_, top, bottom)) = spans.last().copied() else { return Frac::ZERO };
    match (bottom - top) / 2 >= MIN_SHARE {
        true => Frac(top + (bottom - top) / 2),
        false => split_tallest(&spans),
    }
}

/// How a UI that leads the layout draws its columns, in pixels, so that a
/// new window is placed as acme's `coladd` places it: the landing window
/// keeps only the lines its text fills, and one too small is grown
/// first. Local to the node that leads the layout (never replicated);
/// without it (the daemon draws nothing) a new window halves the last.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Lines {
    /// A column's height below its tag, where its windows go.
    pub height: u32,
    /// One line of text.
    pub line: u32,
    /// The rule between two windows.
    pub border: u32,
    /// Each window's tag lines and what its body frame shows.
    pub windows: BTreeMap<WindowId, Framed>,
}

/// What one window shows, as a UI last drew it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Framed {
    pub tag_lines: u32,
    pub body: Shown,
}

/// One window of a column in pixels, as a UI draws it.
#[derive(Clone, Copy, Debug)]
struct Drawn {
    window: WindowId,
    top: u32,
    /// Where its body frame starts (below its tag and the tag's rule).
    body: u32,
    bottom: u32,
    tag_lines: u32,
}

impl Lines {
    /// A fraction of the column to pixels, as a UI rounds it (down).
    fn px(&self, f: Frac) -> u32 {
        ((u64::from(f.0) * u64::from(self.height)) / u64::from(Frac::ONE.0)) as u32
    }

    /// The smallest fraction a UI draws at pixel `px` or below it.
    fn frac(&self, px: u32) -> Frac {
        let f = (u64::from(px) * u64::from(Frac::ONE.0)).div_ceil(u64::from(self.height.max(1)));
        Frac(f.min(u64::from(Frac::ONE.0)) as u32)
    }

    /// One line as a fraction of the column (at least 1).
    pub fn line_frac(&self) -> u32 {
        self.frac(self.line).0.max(1)
    }

    fn drawn(&self, col: &Column) -> Vec<Drawn> {
        let n = col.windows.len();
        (0..n)
            .map(|i| {
                let p = &col.windows[i];
                let top = if i == 0 { 0 } else { self.px(p.y) };
                let bottom = col.windows.get(i + 1).map_or(self.height, |q| self.px(q.y).saturating_sub(self.border));
                let bottom = bottom.max(top);
                let tag_lines = self.windows.get(&p.window).map_or(1, |f| f.tag_lines.max(1));
                let tag_end = (top + tag_lines * self.line).min(bottom);
                // A pixel's rule under the tag where a line of body fits.
                let rule = u32::from(tag_end + 1 + self.line <= bottom);
                Drawn { window: p.window, top, body: tag_end + rule, bottom, tag_lines }
            })
            .collect()
    }

    /// The lines `w`'s body frame has room for, drawn as `d`.
    fn max_lines(&self, d: &Drawn) -> u32 {
        (d.bottom - d.body) / self.line.max(1)
    }

    /// The lines of text `w`'s frame holds once it has room for `max`: all
    /// it showed, or more when it was full (the text goes on).
    fn filled(&self, w: WindowId, max: u32) -> u32 {
        match self.windows.get(&w) {
            Some(f) if f.body.lines < f.body.max_lines => f.body.lines.min(max),
            Some(_) => max,
            None => max / 2,
        }
    }
}

/// Where a new window goes in `col`, as acme's `coladd(c, nil, nil, y)`
/// places it, with `y` in pixels (`None`: in the last window's body, half
/// way down): the tops of the windows it moved first (growing the window
/// it lands on when that has three lines or fewer), then its own top.
/// Without `lines` (nothing draws the column), the bottom half of the
/// last window (or of the tallest, see [`new_window_y`]).
pub fn add(col: &Column, lines: Option<&Lines>, y: Option<u32>) -> (Vec<(WindowId, Frac)>, Frac) {
    let halves = || (Vec::new(), new_window_y(col));
    let Some(l) = lines.filter(|l| l.line > 0 && l.height > 2 * l.line) else { return halves() };
    if col.windows.is_empty() {
        return halves();
    }
    let mut col = col.clone();
    let drawn = l.drawn(&col);
    let last = drawn[drawn.len() - 1];
    // By default, half of the last window's body.
    let y = y.unwrap_or(last.body + (last.bottom - last.body) / 2);
    // The window it lands on, and the one after it (if any).
    let i = drawn.iter().position(|d| y < d.bottom).unwrap_or(drawn.len() - 1);
    let landing = drawn[i].window;
    let minimum = l.line + l.border + 1;
    // A landing window too small is grown first (ten times at most).
    let mut moved = Vec::new();
    for _ in 0..10 {
        let v = l.drawn(&col)[i];
        if l.max_lines(&v) > 3 && v.bottom - v.body > minimum {
            break;
        }
        let tops = grow(&col, landing, Grow::Some, l.line_frac());
        if tops.iter().zip(&col.windows).all(|((w, t), p)| *w == p.window && *t == p.y) {
            break;
        }
        for (w, t) in &tops {
            if let Some(p) = col.windows.iter_mut().find(|p| p.window == *w) {
                p.y = *t;
            }
        }
        moved = tops;
    }
    let v = l.drawn(&col)[i];
    let y_max = match col.windows.get(i + 1) {
        Some(next) => l.px(next.y).saturating_sub(l.border),
        None => l.height,
    };
    // It starts below the landing window's first tag line, and early
    // enough to end before the next window.
    let first_tag_line = v.top + l.line + l.border;
    let y = y.max(first_tag_line).min(y_max.saturating_sub(minimum));
    if y < first_tag_line {
        return halves();
    }
    let y = y.min(y_max.saturating_sub(l.line * v.tag_lines + l.line + l.border + 1));
    // The landing window keeps what its text fills, no more.
    let keeps = y.min(v.body + l.filled(landing, l.max_lines(&v)) * l.line).max(v.body.min(v.top + l.line));
    let top = l.frac(keeps + l.border);
    let above = col.windows[i].y;
    match top > above && top < Frac::ONE {
        true => (moved, top),
        false => halves(),
    }
}

/// Where a new window for the text of window `near` goes in `col`, as
/// acme's `makenewwindow(t)` places a file button 3 opened: below the
/// text of the window with the most empty lines, when that is more than
/// 15 lines or (more than 3) half the biggest window; else half way down
/// `near` (when it is in `col` and not much smaller than the biggest) or
/// the biggest window. A new window of fewer than two lines is grown.
/// What [`add`] returns; without `lines`, as [`add`] places it.
pub fn add_near(col: &Column, lines: Option<&Lines>, near: WindowId) -> (Vec<(WindowId, Frac)>, Frac) {
    let Some(l) = lines.filter(|l| l.line > 0 && l.height > 2 * l.line) else { return add(col, None, None) };
    let drawn = l.drawn(col);
    if drawn.is_empty() {
        return add(col, lines, None);
    }
    let room = |d: &Drawn| l.max_lines(d);
    let empty = |d: &Drawn| room(d).saturating_sub(l.filled(d.window, room(d)));
    // `>=`: of equals, the one lower down.
    let (mut big, mut emptiest) = (drawn[0], drawn[0]);
    for d in &drawn[1..] {
        if room(d) >= room(&big) {
            big = *d;
        }
        if empty(d) >= empty(&emptiest) {
            emptiest = *d;
        }
    }
    let el = empty(&emptiest);
    let y = if el > 15 || (el > 3 && el > room(&big).saturating_sub(1) / 2) {
        emptiest.body + l.filled(emptiest.window, room(&emptiest)) * l.line
    } else {
        if let Some(n) = drawn.iter().find(|d| d.window == near) {
            if n.bottom - n.top > 2 * (big.bottom - big.top) / 3 {
                big = *n;
            }
        }
        (big.top + big.bottom) / 2
    };
    let (mut moved, top) = add(col, lines, Some(y));
    // Too small to show two lines: grown, as acme's colgrow does.
    let mut after = col.clone();
    for (w, t) in &moved {
        if let Some(p) = after.windows.iter_mut().find(|p| p.window == *w) {
            p.y = *t;
        }
    }
    let new = WindowId(u64::MAX);
    let at = after.windows.partition_point(|p| p.y <= top);
    after.windows.insert(at, crate::layout::Placed { window: new, y: top });
    let d = l.drawn(&after)[at];
    if l.max_lines(&d) >= 2 {
        return (moved, top);
    }
    let grown = grow(&after, new, Grow::Some, l.line_frac());
    let top = grown.iter().find(|(w, _)| *w == new).map_or(top, |(_, t)| *t);
    moved = grown.into_iter().filter(|(w, _)| *w != new).collect();
    (moved, top)
}

/// Where a window dropped at `y` in `col` lands (acme's `coldragwin` then
/// `coladd` at `y`): inside the window it falls on, below that window's
/// top and above its bottom, so both keep some room; the top of an empty
/// column. `moving` is the window being dragged, if it is in `col`: its
/// own room does not count.
pub fn drop_y(col: &Column, moving: Option<WindowId>, y: Frac) -> Frac {
    let spans = spans(col, moving);
    if spans.is_empty() {
        return Frac::ZERO;
    }
    let y = y.0.min(Frac::ONE.0);
    let (_, top, bottom) = spans.iter().copied().rfind(|(_, t, _)| *t <= y).unwrap_or(spans[0]);
    if bottom - top < 2 {
        return split_tallest(&spans);
    }
    Frac(y.clamp(top + 1, bottom - 1))
}

/// Who takes a closing window's room (acme's `colclose`): the window below
/// it moves up to its top; the last window's room goes to the one above
/// (which then reaches the bottom, nothing to move). The move, if any.
pub fn close(col: &Column, window: WindowId) -> Option<(WindowId, Frac)> {
    let i = col.windows.iter().position(|p| p.window == window)?;
    let next = col.windows.get(i + 1)?;
    let top = if i == 0 { Frac::ZERO } else { col.windows[i].y };
    Some((next.window, top))
}

/// `Sort`: the column's windows ordered by `name` (acme's `colsort`
/// compares file names rune by rune), each keeping its height, from the
/// top down; the new top edges, in order.
pub fn sorted(col: &Column, mut name: impl FnMut(WindowId) -> String) -> Vec<(WindowId, Frac)> {
    let spans = spans(col, None);
    let mut order: Vec<(String, WindowId, u32)> = spans.iter().map(|(w, t, b)| (name(*w), *w, b - t)).collect();
    order.sort_by(|a, b| a.0.cmp(&b.0));
    let mut y = 0u32;
    let mut out = Vec::with_capacity(order.len());
    for (_, w, height) in order {
        out.push((w, Frac(y)));
        y = y.saturating_add(height).min(Frac::ONE.0);
    }
    out
}

/// How a click on a window's layout box grows it (acme's `colgrow`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Grow {
    /// Button 1: some more room, taken half at a time from the nearest
    /// windows below and above.
    Some,
    /// Button 2: as big as can be; every other window keeps only its tag.
    Most,
    /// Button 3: the whole column; the others keep a sliver.
    Full,
}

/// The column's new tops after growing `window` (acme's `colgrow`).
/// `line` is one line's height as a fraction of the column (the UI's
/// font over its height): the least a window keeps (its tag), and the
/// unit of button 1's growth. Tops stay distinct and ordered.
pub fn grow(col: &Column, window: WindowId, how: Grow, line: u32) -> Vec<(WindowId, Frac)> {
    let spans = spans(col, None);
    let Some(i) = spans.iter().position(|(w, _, _)| *w == window) else { return Vec::new() };
    let n = spans.len() as u32;
    // Each other window's least height, so that all of them still fit.
    let keep = match how {
        Grow::Full => HIDDEN,
        _ => line.clamp(1, (Frac::ONE.0 / n.max(1)).max(1)),
    };
    let mut heights: Vec<u32> = spans.iter().map(|(_, t, b)| b - t).collect();
    match how {
        Grow::Most | Grow::Full => {
            let others = keep * (n - 1);
            for (j, h) in heights.iter_mut().enumerate() {
                *h = if j == i { Frac::ONE.0 - others } else { keep };
            }
        }
        Grow::Some => {
            let old = heights[i];
            let total = Frac::ONE.0;
            let want = old.saturating_add((5 * line).max(old / 2)).min(total);
            let mut need = want - old;
            for k in 1..spans.len() {
                for j in [i.checked_add(k), i.checked_sub(k)].into_iter().flatten() {
                    let Some(h) = heights.get(j).copied() else { continue };
                    let spare = h.saturating_sub(keep);
                    let take = need.min(spare.div_ceil(2).max(spare.min(1)));
                    heights[j] -= take;
                    heights[i] += take;
                    need -= take;
                }
            }
        }
    }
    let mut y = 0u32;
    spans
        .iter()
        .zip(heights)
        .map(|((w, _, _), h)| {
            let top = Frac(y);
            y = y.saturating_add(h);
            (*w, top)
        })
        .collect()
}

/// What letting go of a window's layout box does (acme's `coldragwin`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Drag {
    /// Nothing (the only window of its column, or the first dragged within
    /// its own room).
    Nothing,
    /// The window goes to `y` of `column` (`Proposal::MoveWindow`).
    Move { column: ColumnId, y: Frac },
    /// The column's windows get these tops (`Proposal::Arrange`): the
    /// window's top moved, resizing it and the one above.
    Arrange { column: ColumnId, tops: Vec<(WindowId, Frac)> },
}

/// `window`, dragged by its layout box and let go at `y` of column `to`
/// (acme's `coldragwin`): into another column where it falls
/// ([`drop_y`]); within its own, shuffled there when let go above the
/// window before it or below its own bottom; otherwise its top moves to
/// `y`, leaving the window above and itself at least `line` (a tag).
pub fn drag(layout: &Layout, window: WindowId, to: ColumnId, y: Frac, line: u32) -> Drag {
    let Some((ci, i)) = layout.find(window) else { return Drag::Nothing };
    let col = &layout.columns[ci];
    let Some(target) = layout.columns.iter().find(|c| c.id == to) else { return Drag::Nothing };
    if target.id != col.id {
        return Drag::Move { column: to, y: drop_y(target, None, y) };
    }
    let spans = spans(col, None);
    let n = spans.len();
    if n == 1 {
        return Drag::Nothing;
    }
    let (_, top, bottom) = spans[i];
    let above = (i > 0).then(|| spans[i - 1].1);
    if above.is_some_and(|t| y.0 < t) || y.0 > bottom {
        return Drag::Move { column: to, y: drop_y(col, Some(window), y) };
    }
    let Some(above_top) = above else { return Drag::Nothing };
    let line = line.max(1);
    let lo = above_top.saturating_add(line);
    let hi = bottom.saturating_sub(line).max(lo);
    let new_top = y.0.clamp(lo, hi);
    if new_top == top {
        return Drag::Nothing;
    }
    let tops = spans.iter().map(|(w, t, _)| (*w, Frac(if *w == window { new_top } else { *t }))).collect();
    Drag::Arrange { column: to, tops }
}

/// Where column `column`'s left edge goes when its box is let go at `x`
/// (acme's `rowdragcol`): past a neighbour, there (the columns reorder);
/// otherwise between its neighbours, each left at least `min` wide. None
/// when nothing moves (the first column within its own room).
pub fn drag_column(layout: &Layout, column: ColumnId, x: Frac, min: u32) -> Option<Frac> {
    let i = layout.columns.iter().position(|c| c.id == column)?;
    let cols = &layout.columns;
    let left = cols[i].x.0;
    let right = cols.get(i + 1).map_or(Frac::ONE.0, |c| c.x.0);
    let x = x.0.min(Frac::ONE.0 - 1);
    let before = (i > 0).then(|| cols[i - 1].x.0);
    if before.is_some_and(|b| x < b) || (i + 1 < cols.len() && x > right) {
        // Into the column it falls on, leaving that one and itself `min`
        // (acme's rowadd), or nowhere if there is no such room.
        let others: Vec<u32> = cols.iter().filter(|c| c.id != column).map(|c| c.x.0).collect();
        let k = others.iter().rposition(|l| *l <= x)?;
        let (l, r) = (others[k], others.get(k + 1).copied().unwrap_or(Frac::ONE.0));
        let (lo, hi) = (l.saturating_add(min), r.saturating_sub(min));
        return (lo <= hi).then(|| Frac(x.clamp(lo, hi)));
    }
    let b = before?;
    let x = x.clamp(b.saturating_add(min), right.saturating_sub(min).max(b.saturating_add(min)));
    (x != left).then_some(Frac(x))
}

/// Where a new column starts (acme's `rowadd`): three fifths into the last
/// column, or the middle of the widest when that leaves less than
/// [`MIN_SHARE`]; the left edge when there is none.
pub fn new_column_x(layout: &Layout) -> Frac {
    let edges: Vec<((), u32, u32)> = layout
        .columns
        .iter()
        .enumerate()
        .map(|(i, c)| {
            let right = layout.columns.get(i + 1).map_or(Frac::ONE.0, |n| n.x.0);
            ((), c.x.0, right.max(c.x.0))
        })
        .collect();
    let Some((_, left, right)) = edges.last().copied() else { return Frac::ZERO };
    match (right - left) * 2 / 5 >= MIN_SHARE {
        true => Frac(left + (right - left) * 3 / 5),
        false => split_tallest(&edges),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::id::{BufferId, ColumnId};
    use crate::layout::Placed;

    fn column(ys: &[u32]) -> Column {
        let windows = ys.iter().enumerate().map(|(i, y)| Placed { window: WindowId(i as u64 + 1), y: Frac(*y) });
        Column { id: ColumnId(1), tag: BufferId(1), x: Frac::ZERO, windows: windows.collect() }
    }

    #[test]
    fn new_windows_take_half_the_last_then_the_tallest() {
        assert_eq!(new_window_y(&column(&[])), Frac::ZERO);
        assert_eq!(new_window_y(&column(&[0])), Frac(500_000));
        assert_eq!(new_window_y(&column(&[0, 500_000])), Frac(750_000));
        // The last is too small to halve: the tallest (the first) splits.
        assert_eq!(new_window_y(&column(&[0, 990_000])), Frac(495_000));
    }

    #[test]
    fn drops_land_inside_a_window_and_closes_give_room_below() {
        let c = column(&[0, 500_000]);
        assert_eq!(drop_y(&c, None, Frac(200_000)), Frac(200_000));
        assert_eq!(drop_y(&c, None, Frac(500_000)), Frac(500_001));
        assert_eq!(drop_y(&c, Some(WindowId(2)), Frac(600_000)), Frac(600_000));
        assert_eq!(drop_y(&column(&[]), None, Frac(600_000)), Frac::ZERO);
        assert_eq!(close(&c, WindowId(2)), None);
        assert_eq!(close(&c, WindowId(1)), Some((WindowId(2), Frac::ZERO)));
        let three = column(&[0, 300_000, 600_000]);
        assert_eq!(close(&three, WindowId(2)), Some((WindowId(3), Frac(300_000))));
    }

    #[test]
    fn growing_takes_room_from_the_neighbours() {
        let c = column(&[0, 250_000, 500_000, 750_000]);
        let tops = |g: Vec<(WindowId, Frac)>| g.into_iter().map(|(_, y)| y.0).collect::<Vec<_>>();
        // Button 1 on the second window: half of 250,000 more, taken from
        // the window below (half of what it can spare), then above.
        let got = tops(grow(&c, WindowId(2), Grow::Some, 10_000));
        assert_eq!(got, vec![0, 245_000, 620_000, 750_000]);
        assert_eq!(tops(grow(&c, WindowId(2), Grow::Most, 10_000)), vec![0, 10_000, 980_000, 990_000]);
        assert_eq!(tops(grow(&c, WindowId(1), Grow::Full, 10_000)), vec![0, 999_997, 999_998, 999_999]);
        assert_eq!(grow(&c, WindowId(9), Grow::Some, 10_000), vec![]);
    }

    #[test]
    fn sort_keeps_heights_and_columns_split_three_fifths() {
        let c = column(&[0, 100_000, 400_000]);
        let names = |w: WindowId| ["", "/z", "/a", "/m"][w.0 as usize].to_string();
        let got = sorted(&c, names);
        assert_eq!(got, vec![(WindowId(2), Frac(0)), (WindowId(3), Frac(300_000)), (WindowId(1), Frac(900_000))]);
        let mut layout = Layout::default();
        assert_eq!(new_column_x(&layout), Frac::ZERO);
        layout.columns.push(column(&[]));
        assert_eq!(new_column_x(&layout), Frac(600_000));
    }
}
