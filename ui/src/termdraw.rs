//! A terminal drawn in a window's body, in the fixed-width face: each
//! row's cells in their styles (the 16 ANSI colours made for acme's pale
//! body, 256 colours, truecolor, bold, underline, inverse, wide
//! characters over two cells) and the cursor in its shape. The grid is
//! the term shard's, as every replica has it: a watching UI draws the
//! same one.

use crate::canvas::Canvas;
use crate::font::{Face, Fonts};
use crate::palette::{self, Pixel};
use crate::rect::Rect;
use crate::termview::Cell;
use apex_core::grid::{style, Color, CursorShape, Row, Style};
use apex_core::term::Term;

/// The 16 ANSI colours as foregrounds on acme's body (#FFFFEA): each at
/// least 4.5:1 in contrast against it (WCAG AA), so `ls --color`, a
/// compiler's errors and a prompt are readable where acme draws text.
/// "White" and "bright white" are greys for the same reason.
pub const ANSI_ON_BODY: [Pixel; 16] = [
    0x000000, 0xA31515, 0x116611, 0x735C00, 0x1A3FB0, 0x8A1C8A, 0x0B6670, 0x555555, // normal
    0x444444, 0xC0171F, 0x1B7A1B, 0x7A6500, 0x2553D6, 0xA02BA0, 0x007A80, 0x333333, // bright
];

/// The 16 ANSI colours as xterm has them: for a background, and for a
/// foreground on a background a program chose.
pub const ANSI_XTERM: [Pixel; 16] = [
    0x000000, 0xCD0000, 0x00CD00, 0xCDCD00, 0x0000EE, 0xCD00CD, 0x00CDCD, 0xE5E5E5, // normal
    0x7F7F7F, 0xFF0000, 0x00FF00, 0xFFFF00, 0x5C5CFF, 0xFF00FF, 0x00FFFF, 0xFFFFFF, // bright
];

/// Colour `i` of the 256: the 16, the 6×6×6 cube, the 24 greys.
pub fn indexed(i: u8, on_body: bool) -> Pixel {
    match i {
        0..=15 if on_body => ANSI_ON_BODY[i as usize],
        0..=15 => ANSI_XTERM[i as usize],
        16..=231 => {
            let n = i - 16;
            let level = |v: u8| if v == 0 { 0 } else { 55 + 40 * u32::from(v) };
            (level(n / 36) << 16) | (level((n / 6) % 6) << 8) | level(n % 6)
        }
        232..=255 => {
            let g = 8 + 10 * u32::from(i - 232);
            (g << 16) | (g << 8) | g
        }
    }
}

/// A cell's colours: foreground and background, inverse applied.
pub fn colors(s: Style) -> (Pixel, Pixel) {
    let bg = match s.bg {
        Color::Default => palette::BODY,
        Color::Indexed(i) => indexed(i, false),
        Color::Rgb(r, g, b) => rgb(r, g, b),
    };
    // On the body the readable palette; on a background the program
    // chose, the colours it chose them against.
    let on_body = s.bg == Color::Default;
    let fg = match s.fg {
        Color::Default => palette::TEXT,
        Color::Indexed(i) if i < 8 && s.flags & style::BOLD != 0 => indexed(i + 8, on_body),
        Color::Indexed(i) => indexed(i, on_body),
        Color::Rgb(r, g, b) => rgb(r, g, b),
    };
    match s.flags & style::INVERSE != 0 {
        true => (bg, fg),
        false => (fg, bg),
    }
}

fn rgb(r: u8, g: u8, b: u8) -> Pixel {
    (u32::from(r) << 16) | (u32::from(g) << 8) | u32::from(b)
}

/// How many columns and rows of the fixed face fit in `rect`.
pub fn fits(fonts: &mut Fonts, rect: Rect) -> (u16, u16) {
    let cell = cell_width(fonts).max(1);
    let line = (fonts.line_height() as i32).max(1);
    let cols = (rect.width() / cell).clamp(2, 4096) as u16;
    let rows = (rect.height() / line).clamp(1, 4096) as u16;
    (cols, rows)
}

/// A cell's width: the fixed face's advance.
pub fn cell_width(fonts: &mut Fonts) -> i32 {
    fonts.face(Face::Fixed).advance('M') as i32
}

/// Draws the rows `top..` of `t` (its scrollback then its screen, as one
/// sequence; the screen's first row is `t.scrollback.len()`) into `rect`,
/// and the cursor when the screen's rows are shown.
pub fn draw(canvas: &mut Canvas, fonts: &mut Fonts, t: &Term, top: usize, rect: Rect, sel: Option<(Cell, Cell)>) {
    canvas.fill(rect, palette::BODY);
    let line = fonts.line_height() as i32;
    let cell = cell_width(fonts);
    let back = t.scrollback.len();
    let mut y = rect.y0;
    let mut n = top;
    while y < rect.y1 {
        let row: Option<&Row> = match n.checked_sub(back) {
            None => t.scrollback.get(n).map(|r| &**r),
            Some(i) => t.grid.get(i),
        };
        let Some(row) = row else { break };
        // The selection under the text, in the body's selection colour.
        if let Some((a, b)) = sel.map(|(a, b)| if a <= b { (a, b) } else { (b, a) }) {
            if (a.row..=b.row).contains(&n) {
                let from = if n == a.row { a.col as i32 } else { 0 };
                let to = if n == b.row { b.col as i32 } else { i32::from(t.cols) };
                let r = Rect::new(rect.x0 + from * cell, y, rect.x0 + to * cell, y + line).clip(&rect);
                canvas.fill(r, palette::BODY_SELECTION);
            }
        }
        draw_row(canvas, fonts, row, rect, y, cell, line);
        if let Some(i) = n.checked_sub(back) {
            let c = t.cursor;
            if c.visible && i == c.row as usize {
                cursor(canvas, fonts, row, c.col, c.shape, rect, y, cell, line);
            }
        }
        y += line;
        n += 1;
    }
}

fn draw_row(canvas: &mut Canvas, fonts: &mut Fonts, row: &Row, rect: Rect, y: i32, cell: i32, line: i32) {
    let mut x = rect.x0;
    for (c, s) in row.styles() {
        if x >= rect.x1 {
            break;
        }
        let width = if s.flags & style::WIDE != 0 { 2 * cell } else { cell };
        let (fg, bg) = colors(s);
        let r = Rect::new(x, y, (x + width).min(rect.x1), (y + line).min(rect.y1));
        if bg != palette::BODY {
            canvas.fill(r, bg);
        }
        if s.flags & style::HIDDEN == 0 && !c.is_whitespace() {
            let face = fonts.face(Face::Fixed);
            let g = match s.flags & style::ITALIC != 0 {
                true => face.italic(c).clone(),
                false => face.glyph(c).clone(),
            };
            canvas.glyph(&g, x, y, fg, r);
            // No bold face: bold is the glyph again, a pixel right.
            if s.flags & style::BOLD != 0 {
                canvas.glyph(&g, x + 1, y, fg, r);
            }
        }
        if s.flags & (style::UNDERLINE | style::DOUBLE_UNDERLINE | style::UNDERCURL) != 0 {
            canvas.fill(Rect::new(r.x0, r.y1 - 2, r.x1, r.y1 - 1), fg);
        }
        if s.flags & style::STRIKEOUT != 0 {
            let mid = y + line / 2;
            canvas.fill(Rect::new(r.x0, mid, r.x1, mid + 1), fg);
        }
        x += width;
    }
}

/// The cursor at column `col` of `row`: a block (the cell's text drawn
/// over it in the body's colour), an underline, a beam or an outline.
#[allow(clippy::too_many_arguments)]
fn cursor(
    canvas: &mut Canvas,
    fonts: &mut Fonts,
    row: &Row,
    col: u16,
    shape: CursorShape,
    rect: Rect,
    y: i32,
    cell: i32,
    line: i32,
) {
    // The cell's place: wide chars before it take two.
    let mut x = rect.x0;
    let mut at = 0u16;
    let mut under = ' ';
    for (c, s) in row.styles() {
        let w = if s.flags & style::WIDE != 0 { 2 } else { 1 };
        if at + w > col {
            under = c;
            break;
        }
        at += w;
        x += w as i32 * cell;
    }
    x += (col - at.min(col)) as i32 * cell;
    let r = Rect::new(x, y, x + cell, y + line).clip(&rect);
    match shape {
        CursorShape::Block => {
            canvas.fill(r, palette::TEXT);
            if !under.is_whitespace() {
                let g = fonts.face(Face::Fixed).glyph(under).clone();
                canvas.glyph(&g, x, y, palette::BODY, r);
            }
        }
        CursorShape::Underline => canvas.fill(Rect::new(r.x0, r.y1 - 2, r.x1, r.y1), palette::TEXT),
        CursorShape::Beam => canvas.fill(Rect::new(r.x0, r.y0, r.x0 + 2, r.y1), palette::TEXT),
        CursorShape::HollowBlock => canvas.border(r, 1, palette::TEXT),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// WCAG's relative luminance and contrast ratio.
    fn contrast(a: Pixel, b: Pixel) -> f64 {
        let lum = |p: Pixel| {
            let ch = |v: u32| {
                let c = f64::from(v & 0xff) / 255.0;
                if c <= 0.03928 {
                    c / 12.92
                } else {
                    ((c + 0.055) / 1.055).powf(2.4)
                }
            };
            0.2126 * ch(p >> 16) + 0.7152 * ch(p >> 8) + 0.0722 * ch(p)
        };
        let (x, y) = (lum(a), lum(b));
        (x.max(y) + 0.05) / (x.min(y) + 0.05)
    }

    #[test]
    fn every_ansi_foreground_is_readable_on_acme_s_body() {
        for (i, c) in ANSI_ON_BODY.iter().enumerate() {
            let r = contrast(*c, palette::BODY);
            assert!(r >= 4.5, "colour {i} ({c:06x}) is {r:.2}:1 on the body");
        }
    }

    /// Italic is drawn slanted: the same text in the same cells, other
    /// pixels, the top of the `l` further right than its foot.
    #[test]
    fn italic_is_drawn_slanted() {
        let mut fonts = Fonts::new(1.0);
        let cell = cell_width(&mut fonts);
        let line = fonts.line_height() as i32;
        let rect = Rect::new(0, 0, 4 * cell, line);
        let ink = |italic: bool, fonts: &mut Fonts| {
            let mut canvas = Canvas::new(rect.x1, rect.y1);
            canvas.fill(rect, palette::BODY);
            let flags = if italic { style::ITALIC } else { 0 };
            let row = Row {
                text: "l".into(),
                runs: vec![apex_core::grid::Run { len: 1, style: Style { flags, ..Style::default() } }],
                wrapped: false,
            };
            draw_row(&mut canvas, fonts, &row, rect, 0, cell, line);
            // The leftmost inked column of the top and bottom inked rows.
            let left = |y: i32| (0..rect.x1).find(|x| canvas.at(*x, y) != palette::BODY);
            let rows: Vec<i32> = (0..line).filter(|y| left(*y).is_some()).collect();
            (left(rows[0]).unwrap(), left(*rows.last().unwrap()).unwrap())
        };
        let (top, foot) = ink(false, &mut fonts);
        let (itop, ifoot) = ink(true, &mut fonts);
        assert!(itop - ifoot > top - foot, "roman {top}/{foot}, italic {itop}/{ifoot}");
    }

    #[test]
    fn colours_follow_xterm_s_rules() {
        assert_eq!(indexed(196, false), 0xFF0000, "the cube's red");
        assert_eq!(indexed(232, false), 0x080808, "the first grey");
        let red_on_body = Style { fg: Color::Indexed(1), ..Style::default() };
        assert_eq!(colors(red_on_body), (ANSI_ON_BODY[1], palette::BODY));
        let white_on_blue = Style { fg: Color::Indexed(7), bg: Color::Indexed(4), flags: 0 };
        assert_eq!(colors(white_on_blue), (ANSI_XTERM[7], ANSI_XTERM[4]), "a program's own pairing");
        let inverse = Style { flags: style::INVERSE, ..Style::default() };
        assert_eq!(colors(inverse), (palette::BODY, palette::TEXT));
        let bold = Style { fg: Color::Indexed(1), flags: style::BOLD, ..Style::default() };
        assert_eq!(colors(bold).0, ANSI_ON_BODY[9], "bold is bright");
        assert_eq!(colors(Style { fg: Color::Rgb(1, 2, 3), ..Style::default() }).0, 0x010203);
    }
}
