//! The renderer over a real state: acme's colours where the layout says,
//! glyph pixels inside the selection, wrapped lines, and nothing drawn
//! outside a window's rectangle.

use apex_core::propose::{self, Created, Proposal};
use apex_core::*;
use apex_ui::damage::Painter;
use apex_ui::font::Fonts;
use apex_ui::frame::Frame;
use apex_ui::geom::{Metrics, Screen};
use apex_ui::palette;
use apex_ui::rect::Rect;
use apex_ui::render::{draw, Canvas};
use std::collections::BTreeSet;

struct Scene {
    node: Node,
    left: make::NewWindow,
    right: make::NewWindow,
    zerox: WindowId,
    long: make::NewWindow,
}

fn window(node: &mut Node, column: usize, name: &str, text: &str) -> make::NewWindow {
    let column = Some(node.state.layout.columns[column].id);
    let Created::Window(w) =
        propose::apply(node, &Proposal::CreateWindow { body: None, column, name: name.into(), near: None })
            .unwrap()
            .created
    else {
        panic!("a window")
    };
    if !text.is_empty() {
        let p = Proposal::Insert { buffer: w.body, version: 0, q0: 0, text: text.into(), origin: Origin::Keyboard };
        propose::apply(node, &p).unwrap();
    }
    w
}

fn scene() -> Scene {
    let mut node = Node::server();
    make::init_session(&mut node).unwrap();
    let left = window(&mut node, 0, "/tmp/left.txt", "hello world\nsecond line\n");
    propose::apply(&mut node, &Proposal::Clean { buffer: left.body }).unwrap();
    let v = node.state.buffer(left.body).unwrap().version;
    let sel = Proposal::Select { buffer: left.body, view: ViewId::WindowBody(left.window), version: v, q0: 0, q1: 5 };
    propose::apply(&mut node, &sel).unwrap();
    let right = window(&mut node, 1, "/tmp/right.txt", "changed text\n");
    let Created::Window(z) = propose::apply(
        &mut node,
        &Proposal::CreateWindow { body: Some(right.body), column: None, name: String::new(), near: None },
    )
    .unwrap()
    .created
    else {
        panic!("a zerox")
    };
    let long = window(&mut node, 0, "/tmp/long.txt", &"wrapping ".repeat(80));
    Scene { node, left, right, zerox: z.window, long }
}

fn render(s: &Scene, width: i32, height: i32) -> (Canvas, Screen, Fonts, Metrics) {
    let mut fonts = Fonts::new(1.0);
    let m = Metrics::new(fonts.line_height(), 1.0);
    let screen = Screen::new(&s.node.state, width, height, &m, &mut fonts, &Default::default());
    let mut canvas = Canvas::new(width, height);
    draw(&mut canvas, &s.node.state, &screen, &mut fonts, &m, &Default::default());
    (canvas, screen, fonts, m)
}

/// The pixels of `r` in `canvas`.
fn pixels(canvas: &Canvas, r: Rect) -> Vec<u32> {
    (r.y0..r.y1).flat_map(|y| (r.x0..r.x1).map(move |x| (x, y))).map(|(x, y)| canvas.at(x, y)).collect()
}

fn dark(p: u32) -> bool {
    (p >> 16 & 0xff) < 0x80 && (p >> 8 & 0xff) < 0x80 && (p & 0xff) < 0x80
}

#[test]
fn colours_go_where_the_layout_says() {
    let s = scene();
    let (canvas, screen, _, m) = render(&s, 900, 600);
    assert_eq!(screen.columns.len(), 2);
    let left = screen.window(s.left.window).unwrap();
    let right = screen.window(s.right.window).unwrap();
    // Tag and body backgrounds, away from any text.
    assert_eq!(canvas.at(left.tag.x1 - 2, left.tag.y0 + 1), palette::TAG);
    assert_eq!(canvas.at(left.body.x1 - 2, left.body.y1 - 2), palette::BODY);
    // The layout box: clean (tag background inside a purple-blue border)
    // and dirty (medium blue).
    let mid = |r: Rect| ((r.x0 + r.x1) / 2, (r.y0 + r.y1) / 2);
    let (x, y) = mid(left.layout_box);
    assert_eq!(canvas.at(x, y), palette::TAG);
    assert_eq!(canvas.at(left.layout_box.x0, y), palette::TAG_BORDER);
    let (x, y) = mid(right.layout_box);
    assert_eq!(canvas.at(x, y), palette::DIRTY_BOX, "the right window's body is modified");
    // The row tag and a column tag's box.
    assert_eq!(canvas.at(screen.row_tag.x1 - 2, screen.row_tag.y0 + 1), palette::TAG);
    let (x, y) = mid(screen.columns[0].layout_box);
    assert_eq!(canvas.at(x, y), palette::COLUMN_BOX);
    // The rules between windows and columns stay black: nothing drawn
    // outside a window's rectangle.
    let long = screen.window(s.long.window).unwrap();
    assert_eq!(long.rect.y0, left.rect.y1 + m.border, "one border between the two windows");
    for x in left.rect.x0..left.rect.x1 {
        assert_eq!(canvas.at(x, left.rect.y1), palette::RULE, "the rule under the left window at x={x}");
    }
    let gap = screen.columns[0].rect.x1;
    for y in screen.columns[0].rect.y0..screen.height {
        assert_eq!(canvas.at(gap, y), palette::RULE, "the rule between the columns at y={y}");
    }
}

#[test]
fn the_selection_holds_glyph_pixels_and_a_long_line_wraps() {
    let s = scene();
    let (canvas, screen, mut fonts, _) = render(&s, 900, 600);
    let left = screen.window(s.left.window).unwrap();
    let line = fonts.line_height() as i32;
    let body = s.node.state.buffer(s.left.body).unwrap();
    let frame = Frame::new(body.text.rope(), 0, left.body, &mut fonts.proportional, line, 4);
    let (x1, _) = frame.point_of(5).unwrap();
    let selected = Rect::new(left.body.x0, left.body.y0, x1, left.body.y0 + line);
    let inside = pixels(&canvas, selected);
    assert!(inside.contains(&palette::BODY_SELECTION), "the selection's colour behind `hello`");
    assert!(inside.iter().any(|p| dark(*p)), "the glyphs of `hello` inside the selection");
    // `world`, after the selection, has ink on the body's colour.
    let after = pixels(&canvas, Rect::new(x1 + 4, left.body.y0, left.body.x1, left.body.y0 + line));
    assert!(!after.contains(&palette::BODY_SELECTION) && after.iter().any(|p| dark(*p)));
    // The long line wraps: several lines, none wider than the body.
    let long = screen.window(s.long.window).unwrap();
    let body = s.node.state.buffer(s.long.body).unwrap();
    let frame = Frame::new(body.text.rope(), 0, long.body, &mut fonts.proportional, line, 4);
    assert!(frame.lines.len() > 2, "{} lines", frame.lines.len());
    assert!(frame.lines.iter().flat_map(|l| &l.cells).all(|c| c.x + c.width <= long.body.x1));
    let second = &frame.lines[1];
    assert!(pixels(&canvas, Rect::new(long.body.x0, second.y, long.body.x1, second.y + line)).iter().any(|p| dark(*p)));
}

#[test]
fn a_zerox_copy_shows_the_same_text_with_its_own_view() {
    let s = scene();
    let (canvas, screen, _, _) = render(&s, 900, 600);
    let a = screen.window(s.right.window).unwrap();
    let b = screen.window(s.zerox).unwrap();
    assert_eq!(a.rect.x0, b.rect.x0, "the copy is in the same column");
    let ink = |w: &apex_ui::geom::WindowGeom| {
        let r = Rect::new(w.body.x0, w.body.y0, w.body.x1, w.body.y0 + 10);
        pixels(&canvas, r).iter().map(|p| dark(*p)).collect::<Vec<_>>()
    };
    assert!(ink(a).iter().any(|d| *d));
    assert_eq!(ink(a), ink(b), "the same first line of text in both");
}

#[test]
fn the_scroll_bar_shows_the_visible_part() {
    let mut s = scene();
    let text: String = (0..400).map(|i| format!("line {i}\n")).collect();
    let big = window(&mut s.node, 1, "/tmp/big.txt", &text);
    let (canvas, screen, _, _) = render(&s, 900, 600);
    let w = screen.window(big.window).unwrap();
    assert_eq!(canvas.at(w.scroll.x0 + 2, w.scroll.y1 - 2), palette::BODY_BORDER, "below the thumb");
    assert_eq!(canvas.at(w.scroll.x0 + 2, w.scroll.y0), palette::BODY, "the thumb at the top");
    let thumb = apex_ui::render::thumb(w.scroll, 0, 40, 100);
    assert_eq!((thumb.y0, thumb.y1 - thumb.y0), (w.scroll.y0, w.scroll.height() * 40 / 100));
}

#[test]
fn tiny_and_empty_screens_draw_without_panicking() {
    let s = scene();
    for (w, h) in [(0, 0), (1, 1), (10, 5), (40, 30), (3000, 20)] {
        let (canvas, _, _, _) = render(&s, w, h);
        assert_eq!(canvas.pixels.len(), (w * h) as usize);
    }
}

/// `APEX_UI_SHOT=FILE.ppm` writes the scene's frame for a person to look at.
#[test]
fn a_picture_for_people() {
    let Some(path) = std::env::var_os("APEX_UI_SHOT") else { return };
    let s = scene();
    let (canvas, _, _, _) = render(&s, 900, 600);
    let mut out = format!("P6\n{} {}\n255\n", canvas.width, canvas.height).into_bytes();
    for p in &canvas.pixels {
        out.extend_from_slice(&[(p >> 16) as u8, (p >> 8) as u8, *p as u8]);
    }
    std::fs::write(path, out).unwrap();
}

/// Paints `s` with `painter` into `canvas`; returns the damage.
fn paint(s: &Scene, painter: &mut Painter, canvas: &mut Canvas, collapsed: &BTreeSet<WindowId>) -> Vec<Rect> {
    let mut fonts = Fonts::new(1.0);
    let m = Metrics::new(fonts.line_height(), 1.0);
    let screen = Screen::new(&s.node.state, 900, 600, &m, &mut fonts, collapsed);
    painter.paint(canvas, &s.node.state, &screen, &mut fonts, &m)
}

#[test]
fn only_what_changed_is_drawn_again_and_the_frame_is_the_same_as_a_whole_one() {
    let mut s = scene();
    let mut painter = Painter::default();
    let mut canvas = Canvas::new(0, 0);
    let none = BTreeSet::new();
    assert_eq!(
        paint(&s, &mut painter, &mut canvas, &none),
        vec![Rect::new(0, 0, 900, 600)],
        "the first frame is whole"
    );
    assert_eq!(paint(&s, &mut painter, &mut canvas, &none), vec![], "nothing changed, nothing drawn");
    let (_, screen, _, _) = render(&s, 900, 600);

    // A selection in the left body: that body alone.
    let v = s.node.state.buffer(s.left.body).unwrap().version;
    let sel =
        Proposal::Select { buffer: s.left.body, view: ViewId::WindowBody(s.left.window), version: v, q0: 6, q1: 11 };
    propose::apply(&mut s.node, &sel).unwrap();
    let left = screen.window(s.left.window).unwrap();
    let damage = paint(&s, &mut painter, &mut canvas, &none);
    assert_eq!(damage, vec![apex_ui::render::body_area(left)]);
    assert_eq!(canvas.pixels, render(&s, 900, 600).0.pixels, "the same pixels as a whole frame");

    // Typing into a buffer two windows show (the right one and its
    // Zerox copy): both bodies, and the tags whose menus changed.
    let v = s.node.state.buffer(s.right.body).unwrap().version;
    let p = Proposal::Insert { buffer: s.right.body, version: v, q0: 0, text: "x".into(), origin: Origin::Keyboard };
    propose::apply(&mut s.node, &p).unwrap();
    let damage = paint(&s, &mut painter, &mut canvas, &none);
    for w in [s.right.window, s.zerox] {
        let body = apex_ui::render::body_area(screen.window(w).unwrap());
        assert!(damage.contains(&body), "{w:?}'s body in {damage:?}");
    }
    assert!(!damage.contains(&apex_ui::render::body_area(left)), "the left body is left alone");
    assert!(damage.iter().all(|r| r.x0 >= screen.columns[1].rect.x0), "nothing in the left column: {damage:?}");
    assert_eq!(canvas.pixels, render(&s, 900, 600).0.pixels);

    // A change of arrangement (a tag grown a line, then folded to one)
    // draws it all.
    let tag = s.node.state.window(s.long.window).unwrap().tag;
    let (v, len) = s.node.state.buffer(tag).map(|b| (b.version, b.len())).unwrap();
    let p = Proposal::Insert { buffer: tag, version: v, q0: len, text: "\nmk".into(), origin: Origin::Keyboard };
    propose::apply(&mut s.node, &p).unwrap();
    assert_eq!(paint(&s, &mut painter, &mut canvas, &none), vec![Rect::new(0, 0, 900, 600)]);
    let folded: BTreeSet<WindowId> = [s.long.window].into();
    assert_eq!(paint(&s, &mut painter, &mut canvas, &folded), vec![Rect::new(0, 0, 900, 600)]);
}

#[test]
fn a_tag_shows_all_its_lines_unless_folded() {
    let mut s = scene();
    let tag = s.node.state.window(s.left.window).unwrap().tag;
    let len = s.node.state.buffer(tag).unwrap().len();
    let v = s.node.state.buffer(tag).unwrap().version;
    let p = Proposal::Insert { buffer: tag, version: v, q0: len, text: "\nmk test\n".into(), origin: Origin::Keyboard };
    propose::apply(&mut s.node, &p).unwrap();
    let mut fonts = Fonts::new(1.0);
    let m = Metrics::new(fonts.line_height(), 1.0);
    let screen = Screen::new(&s.node.state, 900, 600, &m, &mut fonts, &BTreeSet::new());
    let w = screen.window(s.left.window).unwrap();
    // The menu line, `mk test`, and an empty line after the final newline.
    assert_eq!(w.tag_line.height(), 3 * m.line);
    assert_eq!(w.body.y0, w.tag_line.y1 + 1, "a pixel's rule under the tag, as acme draws it");
    assert_eq!(w.layout_box.height(), m.line, "the box stays on the first line");
    let mut canvas = Canvas::new(900, 600);
    draw(&mut canvas, &s.node.state, &screen, &mut fonts, &m, &Default::default());
    let second = Rect::new(w.tag.x0, w.tag.y0 + m.line, w.tag.x1, w.tag.y0 + 2 * m.line);
    assert!(pixels(&canvas, second).iter().any(|p| dark(*p)), "`mk test` drawn on the tag's second line");
    assert_eq!(canvas.at(w.body.x1 - 2, w.tag.y0 + 2 * m.line + 2), palette::TAG, "the third line is tag");
    // A long tag wraps onto a second line.
    let long = screen.window(s.long.window).unwrap();
    assert_eq!(long.tag_line.height(), m.line, "a short tag keeps one line");
    // Folded, one line, and the body takes the rest.
    let folded: BTreeSet<WindowId> = [s.left.window].into();
    let screen = Screen::new(&s.node.state, 900, 600, &m, &mut fonts, &folded);
    let w = screen.window(s.left.window).unwrap();
    assert_eq!((w.tag_line.height(), w.body.y0), (m.line, w.rect.y0 + m.line + 1));
    // A tag never takes more than the window.
    let many = "\nx".repeat(200);
    let v = s.node.state.buffer(tag).unwrap().version;
    let len = s.node.state.buffer(tag).unwrap().len();
    let p = Proposal::Insert { buffer: tag, version: v, q0: len, text: many, origin: Origin::Keyboard };
    propose::apply(&mut s.node, &p).unwrap();
    let screen = Screen::new(&s.node.state, 900, 600, &m, &mut fonts, &BTreeSet::new());
    let w = screen.window(s.left.window).unwrap();
    assert!(w.tag_line.y1 <= w.rect.y1 && w.body.height() < m.line, "{w:?}");
}

#[test]
fn borders_rules_ticks_and_the_thumb_are_drawn_as_acme_draws_them() {
    let s = scene();
    let (canvas, screen, mut fonts, m) = render(&s, 900, 600);
    assert_eq!(m.border, 2, "acme's Border");
    // Under the row tag and between the columns: two black pixels.
    let row = screen.row_tag;
    for y in row.y1..row.y1 + 2 {
        assert_eq!(canvas.at(400, y), palette::RULE);
    }
    assert_eq!(canvas.at(400, row.y1 + 2), palette::TAG, "the column tag below");
    let right = screen.columns[1].rect;
    for x in right.x0 - 2..right.x0 {
        assert_eq!(canvas.at(x, right.y0 + 40), palette::RULE);
    }
    // The row tag's text starts where a window tag's does, its left
    // margin in the tag's colour.
    assert_eq!(row.x0, m.indent());
    assert_eq!(canvas.at(2, 2), palette::TAG);
    // Under a window's tag a pixel's rule in the tag's border colour.
    let w = screen.window(s.left.window).unwrap();
    assert_eq!(canvas.at(w.body.x0 + 100, w.tag_line.y1), palette::TAG_BORDER);
    assert_eq!(w.body.y0, w.tag_line.y1 + 1);
    // The tick at the end of a tag, where acme leaves a new tag's cursor:
    // a line with a square at its top and its bottom.
    let tag = s.node.state.buffer(s.node.state.layout.row_tag.unwrap()).unwrap();
    let frame = Frame::new(tag.text.rope(), 0, row, &mut fonts.proportional, m.line, 4);
    let (x, y) = frame.point_of(tag.len()).expect("the end of the row tag is shown");
    assert_eq!(tag.views[&ViewId::TopRow].q0, tag.len());
    for (dx, dy) in [(-1, 0), (0, 0), (1, 0), (0, m.line / 2), (-1, m.line - 1), (1, m.line - 1)] {
        assert_eq!(canvas.at(x + dx, y + dy), palette::TEXT, "the tick at ({dx}, {dy})");
    }
    assert_eq!(canvas.at(x + 1, y + m.line / 2), palette::TAG, "its middle is a line");
    // The thumb: the body's colour, its right edge the bar's.
    let bar = w.scroll;
    assert_eq!(canvas.at(bar.x0 + 1, bar.y0 + 1), palette::BODY);
    assert_eq!(canvas.at(bar.x1 - 1, bar.y0 + 1), palette::BODY_BORDER);
}
