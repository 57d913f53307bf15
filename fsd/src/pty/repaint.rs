//! A terminal's screen as the bytes that draw it: what a daemon feeds a
//! fresh emulator for a terminal it took up from its keeper, so the
//! program's next output lands on the screen its replicas show (the
//! grid with its styles, the modes the program set, the cursor and the
//! title). State the shard does not keep (the scroll region, saved
//! cursor, tab stops) starts afresh; the daemon asks full-screen programs
//! to draw again for that.

use apex_core::grid::{mode, style, Color, CursorShape, Style};
use apex_core::term::Term;
use std::fmt::Write;

/// The bytes that draw `t`'s screen on a blank terminal of its size.
pub fn repaint(t: &Term) -> Vec<u8> {
    let mut out = String::new();
    if t.modes & mode::ALT_SCREEN != 0 {
        out += "\x1b[?1049h";
    }
    out += "\x1b[H\x1b[2J";
    // Written without wrapping, so a full last row never scrolls.
    out += "\x1b[?7l";
    for (i, row) in t.grid.iter().enumerate() {
        let _ = write!(out, "\x1b[{};1H", i + 1);
        let mut current = Style::default();
        for (c, s) in row.styles() {
            if s != current {
                out += &sgr(&s);
                current = s;
            }
            out.push(c);
        }
        if !current.is_default() {
            out += "\x1b[0m";
        }
    }
    for (bit, on) in [
        (mode::APP_CURSOR, "\x1b[?1h"),
        (mode::APP_KEYPAD, "\x1b="),
        (mode::BRACKETED_PASTE, "\x1b[?2004h"),
        (mode::MOUSE_CLICK, "\x1b[?1000h"),
        (mode::MOUSE_DRAG, "\x1b[?1002h"),
        (mode::MOUSE_MOTION, "\x1b[?1003h"),
        (mode::MOUSE_SGR, "\x1b[?1006h"),
        (mode::MOUSE_UTF8, "\x1b[?1005h"),
        (mode::FOCUS_REPORT, "\x1b[?1004h"),
        (mode::INSERT, "\x1b[4h"),
        (mode::LINE_WRAP, "\x1b[?7h"),
    ] {
        if t.modes & bit != 0 {
            out += on;
        }
    }
    // Alternate scroll is on unless the program turned it off.
    if t.modes & mode::ALTERNATE_SCROLL == 0 {
        out += "\x1b[?1007l";
    }
    let c = t.cursor;
    let shape = match (c.shape, c.blinking) {
        (CursorShape::Block | CursorShape::HollowBlock, true) => 1,
        (CursorShape::Block | CursorShape::HollowBlock, false) => 2,
        (CursorShape::Underline, true) => 3,
        (CursorShape::Underline, false) => 4,
        (CursorShape::Beam, true) => 5,
        (CursorShape::Beam, false) => 6,
    };
    let _ = write!(out, "\x1b[{shape} q\x1b[{};{}H", c.row + 1, c.col + 1);
    if !c.visible {
        out += "\x1b[?25l";
    }
    if !t.title.is_empty() {
        let title: String = t.title.chars().filter(|c| !c.is_control()).collect();
        let _ = write!(out, "\x1b]2;{title}\x07");
    }
    out.into_bytes()
}

/// The SGR sequence that sets style `s` from the default.
fn sgr(s: &Style) -> String {
    let mut p: Vec<String> = vec!["0".into()];
    for (bit, code) in [
        (style::BOLD, "1"),
        (style::DIM, "2"),
        (style::ITALIC, "3"),
        (style::UNDERLINE, "4"),
        (style::DOUBLE_UNDERLINE, "4:2"),
        (style::UNDERCURL, "4:3"),
        (style::DOTTED_UNDERLINE, "4:4"),
        (style::DASHED_UNDERLINE, "4:5"),
        (style::INVERSE, "7"),
        (style::HIDDEN, "8"),
        (style::STRIKEOUT, "9"),
    ] {
        if s.flags & bit != 0 {
            p.push(code.into());
        }
    }
    color(&mut p, s.fg, 30, 90, 38);
    color(&mut p, s.bg, 40, 100, 48);
    format!("\x1b[{}m", p.join(";"))
}

fn color(p: &mut Vec<String>, c: Color, base: u8, bright: u8, extended: u8) {
    match c {
        Color::Default => {}
        Color::Indexed(i) if i < 8 => p.push((base + i).to_string()),
        Color::Indexed(i) if i < 16 => p.push((bright + i - 8).to_string()),
        Color::Indexed(i) => p.push(format!("{extended};5;{i}")),
        Color::Rgb(r, g, b) => p.push(format!("{extended};2;{r};{g};{b}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pty::emulator::Emulator;

    /// A screen drawn by a program, fed again to a fresh emulator from the
    /// shard alone, comes out the same: rows, styles, cursor, modes, title.
    #[test]
    fn a_repainted_screen_is_the_screen() {
        let mut first = Emulator::new(20, 4);
        first.feed(b"\x1b]0;vi notes\x07\x1b[?1049h\x1b[?1h\x1b[?2004h\x1b[H\x1b[2J");
        first.feed(
            "\x1b[1;31mred\x1b[0m plain \x1b[4;38;2;1;2;3mrgb\x1b[0m\r\n\x1b[7m 日本 \x1b[0m\r\nlast row fills it up"
                .as_bytes(),
        );
        first.feed(b"\x1b[2;3H\x1b[5 q");
        let mut t = Term::new(20, 4, 100, "sh".into(), "/".into()).unwrap();
        for u in first.updates() {
            t.apply(&apex_core::TermOp::Update(Box::new(u))).unwrap();
        }
        assert!(t.modes & mode::ALT_SCREEN != 0 && t.modes & mode::APP_CURSOR != 0, "{:b}", t.modes);

        let mut second = Emulator::new(20, 4);
        second.feed(&repaint(&t));
        let mut u = Term::new(20, 4, 100, "sh".into(), "/".into()).unwrap();
        for up in second.updates() {
            u.apply(&apex_core::TermOp::Update(Box::new(up))).unwrap();
        }
        assert_eq!(u.grid, t.grid);
        assert_eq!(u.cursor, t.cursor);
        assert_eq!(u.modes, t.modes);
        assert_eq!(u.title, t.title);
        assert!(u.scrollback.is_empty(), "nothing scrolled");
    }
}
