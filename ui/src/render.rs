//! The headless renderer: draws the screen model into a pixel buffer of
//! 0RGB words (what softbuffer shows), acme's colours and all. Every
//! drawing call is clipped to the rectangle it belongs to, so nothing
//! leaks out of a window.

pub use crate::canvas::Canvas;
use crate::font::{Face, Fonts};
use crate::frame::Frame;
use crate::geom::{ColumnGeom, Metrics, Screen, WindowGeom};
use crate::palette::{self, Pixel};
use crate::rect::Rect;
use apex_core::exec::DEFAULT_TAB;
use apex_core::show::Shown;
use apex_core::{Buffer, State, ViewId, WindowId};

/// How a text is drawn: its face, tab width and colours.
#[derive(Clone, Copy)]
struct Style {
    face: Face,
    tab: u32,
    back: Pixel,
    selection: Pixel,
}

const TAG_STYLE: Style =
    Style { face: Face::Proportional, tab: DEFAULT_TAB, back: palette::TAG, selection: palette::TAG_SELECTION };
const BODY_STYLE: Style =
    Style { face: Face::Proportional, tab: DEFAULT_TAB, back: palette::BODY, selection: palette::BODY_SELECTION };

/// Draws `buffer` as seen by `view` in `rect`; returns its frame.
fn text(canvas: &mut Canvas, fonts: &mut Fonts, style: Style, buffer: &Buffer, view: ViewId, rect: Rect) -> Frame {
    let (face, tab) = (style.face, style.tab);
    canvas.fill(rect, style.back);
    let v = buffer.views.get(&view).copied().unwrap_or_default();
    let line_height = fonts.line_height() as i32;
    let sized = fonts.face(face);
    let frame = Frame::new(buffer.text.rope(), v.org, rect, sized, line_height, tab);
    for line in &frame.lines {
        for cell in &line.cells {
            if (v.q0..v.q1).contains(&cell.q) {
                let r = Rect::new(cell.x, line.y, (cell.x + cell.width).min(rect.x1), line.y + line_height);
                canvas.fill(r.clip(&rect), style.selection);
            }
        }
        for cell in line.cells.iter().filter(|c| !c.c.is_whitespace()) {
            let g = sized.glyph(cell.c).clone();
            canvas.glyph(&g, cell.x, line.y, palette::TEXT, rect);
        }
    }
    // An empty selection is a tick at its place, as libframe draws it:
    // a line with a small square at its top and at its bottom.
    if v.q0 == v.q1 {
        if let Some((x, y)) = frame.point_of(v.q0) {
            let w = (fonts.scale.round() as i32).max(1);
            let serif = 3 * w;
            let (x0, y1) = (x - w, y + line_height);
            canvas.fill(Rect::new(x, y, x + w, y1).clip(&rect), palette::TEXT);
            canvas.fill(Rect::new(x0, y, x0 + serif, y + serif).clip(&rect), palette::TEXT);
            canvas.fill(Rect::new(x0, y1 - serif, x0 + serif, y1).clip(&rect), palette::TEXT);
        }
    }
    frame
}

/// Draws the whole screen of `state`; returns what each window's body
/// frame shows.
pub fn draw(
    canvas: &mut Canvas,
    state: &State,
    screen: &Screen,
    fonts: &mut Fonts,
    m: &Metrics,
    views: &crate::termview::TermViews,
) -> Vec<(WindowId, Shown)> {
    canvas.fill(canvas.bounds(), palette::RULE);
    row_tag(canvas, state, screen, fonts);
    let mut shown = Vec::new();
    for col in &screen.columns {
        column(canvas, state, col, fonts);
        for wg in &col.windows {
            window_tag(canvas, state, wg, fonts, m);
            shown.extend(window_body(canvas, state, wg, fonts, views).map(|s| (wg.id, s)));
        }
    }
    shown
}

/// The row tag.
pub fn row_tag(canvas: &mut Canvas, state: &State, screen: &Screen, fonts: &mut Fonts) {
    let row = screen.row_tag;
    canvas.fill(Rect::new(0, row.y0, row.x0, row.y1), palette::TAG);
    match state.layout.row_tag.and_then(|t| state.buffer(t).ok()) {
        Some(b) => {
            text(canvas, fonts, TAG_STYLE, b, ViewId::TopRow, screen.row_tag);
        }
        None => canvas.fill(screen.row_tag, palette::TAG),
    }
}

/// A column's tag line, and its area when it has no windows (white, as
/// acme leaves it; between windows the rules stay black).
pub fn column(canvas: &mut Canvas, state: &State, col: &ColumnGeom, fonts: &mut Fonts) {
    if col.windows.is_empty() {
        canvas.fill(col.area, palette::EMPTY);
    }
    canvas.fill(col.layout_box, palette::COLUMN_BOX);
    let tag_text = Rect::new(col.layout_box.x1, col.tag_line.y0, col.tag.x0, col.tag_line.y1);
    canvas.fill(tag_text, palette::TAG);
    let tag = state.layout.columns.iter().find(|c| c.id == col.id).and_then(|c| state.buffer(c.tag).ok());
    match tag {
        Some(b) => {
            text(canvas, fonts, TAG_STYLE, b, ViewId::ColumnTag(col.id), col.tag);
        }
        None => canvas.fill(col.tag, palette::TAG),
    }
}

/// A window's tag: its layout box (dark blue when the body is dirty) and
/// its text, on as many lines as the screen gave it.
pub fn window_tag(canvas: &mut Canvas, state: &State, wg: &WindowGeom, fonts: &mut Fonts, m: &Metrics) {
    canvas.fill(wg.tag_line, palette::TAG);
    let Ok(w) = state.window(wg.id) else { return };
    let (Ok(tag), Ok(body)) = (state.buffer(w.tag), state.buffer(w.body)) else { return };
    if body.dirty {
        canvas.fill(wg.layout_box, palette::DIRTY_BOX);
    }
    canvas.border(wg.layout_box, m.border.max(1), palette::TAG_BORDER);
    text(canvas, fonts, TAG_STYLE, tag, ViewId::WindowTag(wg.id), wg.tag);
    // The rule under the tag, in the tag's border colour.
    canvas.fill(Rect::new(wg.rect.x0, wg.tag_line.y1, wg.rect.x1, wg.scroll.y0), palette::TAG_BORDER);
}

/// A window's body and scroll bar; the bar shows what part is visible.
/// Returns what the body's frame shows.
pub fn window_body(
    canvas: &mut Canvas,
    state: &State,
    wg: &WindowGeom,
    fonts: &mut Fonts,
    views: &crate::termview::TermViews,
) -> Option<Shown> {
    let Some((w, body)) = state.window(wg.id).ok().and_then(|w| Some((w, state.buffer(w.body).ok()?))) else {
        canvas.fill(body_area(wg), palette::BODY);
        return None;
    };
    if let Some(t) = w.term.and_then(|t| state.terms.get(&t)) {
        canvas.fill(Rect::new(wg.scroll.x1, wg.body.y0, wg.body.x0, wg.body.y1), palette::BODY);
        // Where the window is scrolled to in its scrollback; the bottom,
        // as a terminal shows it, unless scrolled back.
        let view = views.get(&wg.id);
        let shown = (wg.body.height() / (fonts.line_height() as i32).max(1)).max(1) as usize;
        let top = crate::termview::top(view, t, shown);
        crate::termdraw::draw(canvas, fonts, t, top, wg.body, view.and_then(|v| v.sel));
        canvas.fill(wg.scroll, palette::BODY_BORDER);
        let all = crate::termview::rows(t) as u64;
        let th = thumb(wg.scroll, top as u64, (top + shown) as u64, all);
        canvas.fill(Rect::new(th.x0, th.y0, th.x1 - 1, th.y1), palette::BODY);
        return None;
    }
    canvas.fill(Rect::new(wg.scroll.x1, wg.body.y0, wg.body.x0, wg.body.y1), palette::BODY);
    let style = Style {
        face: Face::for_setting(w.flags.font.as_deref()),
        tab: w.flags.tab.unwrap_or(DEFAULT_TAB),
        ..BODY_STYLE
    };
    let frame = text(canvas, fonts, style, body, ViewId::WindowBody(wg.id), wg.body);
    canvas.fill(wg.scroll, palette::BODY_BORDER);
    // The thumb in the body's colour, its right edge the bar's (scrl.c).
    let t = thumb(wg.scroll, frame.org, frame.end, body.len());
    canvas.fill(Rect::new(t.x0, t.y0, t.x1 - 1, t.y1), palette::BODY);
    Some(frame.shown())
}

/// A line of text of this UI's own (not a buffer's) on the tag colour,
/// in `rect`: the row tag's `watching Lead`.
pub fn label(canvas: &mut Canvas, fonts: &mut Fonts, text: &str, rect: Rect) {
    canvas.fill(rect, palette::TAG);
    let face = fonts.face(Face::Proportional);
    let mut x = rect.x0;
    for c in text.chars() {
        let g = face.glyph(c).clone();
        canvas.glyph(&g, x, rect.y0, palette::TEXT, rect);
        x += face.advance(c) as i32;
    }
}

/// The width `text` takes in the proportional face.
pub fn label_width(fonts: &mut Fonts, text: &str) -> i32 {
    let face = fonts.face(Face::Proportional);
    text.chars().map(|c| face.advance(c) as i32).sum()
}

/// What [`window_body`] draws on: the scroll bar, the gap and the text.
pub fn body_area(wg: &WindowGeom) -> Rect {
    Rect::new(wg.scroll.x0, wg.body.y0, wg.body.x1, wg.body.y1)
}

/// The part of a scroll bar that stands for the visible runes
/// `org..end` of `len` (acme's `scrpos`), at least a pixel or two.
pub fn thumb(bar: Rect, org: u64, end: u64, len: u64) -> Rect {
    if len == 0 || bar.is_empty() {
        return bar;
    }
    let h = i64::from(bar.height());
    let y0 = bar.y0 + (i64::try_from(org).unwrap_or(i64::MAX) * h / len as i64) as i32;
    let y1 = bar.y0 + (i64::try_from(end).unwrap_or(i64::MAX) * h / len as i64) as i32;
    let y1 = y1.max(y0 + 2).min(bar.y1);
    Rect::new(bar.x0, y0.min(bar.y1 - 2).max(bar.y0), bar.x1, y1)
}
