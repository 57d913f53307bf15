//! The VT emulator a terminal's output goes through, and the updates made
//! of it: `alacritty_terminal` runs here, in the daemon only, and what
//! leaves is a [`TermUpdate`] of core's rows, so replicas never run it.
//!
//! Output is fed in chunks small enough that the rows one chunk can
//! scroll (a row per byte, at most) fit the emulator's history, whose
//! rows are allocated at full width: [`HISTORY_CELLS`] bounds both. After
//! each chunk, the rows that scrolled off the top are taken out of the
//! history (which then keeps none), so every scrolled row reaches the
//! shard however many chunks an update coalesces. (Only escape sequences
//! scrolling the whole screen many times over in one chunk can scroll
//! more; the blank rows past the history are then dropped.) An update
//! carries those rows, the screen rows that differ from what replicas
//! have (`shown`, kept by the same core functions their apply uses), and
//! whatever else changed; rows over [`UPDATE_BYTES`] go in several.

use alacritty_terminal::event::{Event, EventListener, WindowSize};
use alacritty_terminal::grid::{Dimensions, Scroll};
use alacritty_terminal::index::{Column, Line};
use alacritty_terminal::term::cell::{Cell, Flags};
use alacritty_terminal::term::{Config, TermMode};
use alacritty_terminal::vte::ansi::{Color as VtColor, CursorShape as VtShape, NamedColor, Processor, Rgb};
use apex_core::grid::{mode, style, Color, Cursor, CursorShape, Row, Run, Style};
use apex_core::packed::{Packed, RowChanges};
use apex_core::term::{resize_grid, scroll_grid, TermUpdate};
use std::sync::{Arc, Mutex};

/// The most output fed between two looks at the emulator's history.
pub const CHUNK: usize = 4096;
/// Cells of history the emulator may hold between two looks (24 bytes
/// each): room for what one chunk scrolls.
pub const HISTORY_CELLS: usize = 1 << 20;
/// Combining marks kept on one cell; more are dropped (a program writing
/// them forever would grow one cell forever).
pub const MAX_MARKS: usize = 16;
/// Roughly the most row bytes one update carries, well inside what apply
/// unpacks (`packed::UNPACKED_MAX`).
pub const UPDATE_BYTES: usize = 8 << 20;

/// Rows of history, and bytes per chunk, for a terminal `cols` wide.
fn budget(cols: usize) -> (usize, usize) {
    let rows = (HISTORY_CELLS / cols.max(1)).max(64);
    (rows, CHUNK.min(rows))
}

/// The size the emulator is given, cells only (no pixels here).
struct Size {
    cols: usize,
    rows: usize,
}

impl Dimensions for Size {
    fn total_lines(&self) -> usize {
        self.rows
    }
    fn screen_lines(&self) -> usize {
        self.rows
    }
    fn columns(&self) -> usize {
        self.cols
    }
}

/// How the emulator words an answer to a colour query.
type ColorAnswer = Arc<dyn Fn(Rgb) -> String + Sync + Send>;
/// How it words an answer to a size query.
type SizeAnswer = Arc<dyn Fn(WindowSize) -> String + Sync + Send>;

/// What the emulator asked for while it was fed.
#[derive(Default)]
struct Heard {
    /// Answers for the program (device attributes, cursor reports, colours).
    answers: Vec<u8>,
    title: Option<Option<String>>,
    bells: u32,
    /// Colour queries, answered after the feed with the colours then set.
    colors: Vec<(usize, ColorAnswer)>,
    sizes: Vec<SizeAnswer>,
}

#[derive(Clone, Default)]
struct Listener(Arc<Mutex<Heard>>);

impl EventListener for Listener {
    fn send_event(&self, event: Event) {
        let mut h = self.0.lock().expect("listener");
        match event {
            Event::PtyWrite(text) => h.answers.extend_from_slice(text.as_bytes()),
            Event::Title(t) => h.title = Some(Some(t)),
            Event::ResetTitle => h.title = Some(None),
            Event::Bell => h.bells += 1,
            Event::ColorRequest(index, answer) => h.colors.push((index, answer)),
            Event::TextAreaSizeRequest(answer) => h.sizes.push(answer),
            _ => {}
        }
    }
}

/// One terminal's emulator and what its replicas have been sent.
pub struct Emulator {
    term: alacritty_terminal::Term<Listener>,
    parser: Processor,
    heard: Listener,
    /// Rows scrolled off since the last update, oldest first.
    scrolled: Vec<Row>,
    /// The grid replicas have.
    shown: Vec<Row>,
    shown_size: (u16, u16),
    size_changed: bool,
    cursor: Cursor,
    modes: u32,
    title: String,
}

impl Emulator {
    pub fn new(cols: u16, rows: u16) -> Emulator {
        let heard = Listener::default();
        let config = Config { scrolling_history: budget(cols as usize).0, ..Config::default() };
        let size = Size { cols: cols as usize, rows: rows as usize };
        let mut term = alacritty_terminal::Term::new(config, &size, heard.clone());
        term.is_focused = true;
        Emulator {
            term,
            parser: Processor::new(),
            heard,
            scrolled: Vec::new(),
            shown: vec![Row::default(); rows as usize],
            shown_size: (cols, rows),
            size_changed: false,
            cursor: Cursor::default(),
            modes: mode::LINE_WRAP,
            title: String::new(),
        }
    }

    /// An emulator for a terminal taken up from its keeper: showing the
    /// screen its replicas have ([`super::repaint`]), and knowing they
    /// have it, so only what the program does next goes out.
    pub fn resume(t: &apex_core::term::Term) -> Emulator {
        let mut e = Emulator::new(t.cols, t.rows);
        e.feed(&super::repaint::repaint(t));
        e.scrolled.clear();
        e.shown.clone_from(&t.grid);
        e.shown_size = (t.cols, t.rows);
        e.size_changed = false;
        e.cursor = t.cursor;
        e.modes = t.modes;
        e.title.clone_from(&t.title);
        let mut h = e.heard.0.lock().expect("listener");
        h.title = None;
        h.bells = 0;
        drop(h);
        e
    }

    /// Feeds the program's output; returns the answers it asked for, to be
    /// written to the pty.
    pub fn feed(&mut self, bytes: &[u8]) -> Vec<u8> {
        let (_, chunk) = budget(self.term.columns());
        for piece in bytes.chunks(chunk) {
            self.parser.advance(&mut self.term, piece);
            self.trim_marks();
            self.take_history();
        }
        self.answers()
    }

    /// Caps the combining marks on the cells by the cursor, the only ones
    /// a program can add to.
    fn trim_marks(&mut self) {
        let grid = self.term.grid_mut();
        let point = grid.cursor.point;
        let last = grid.columns() - 1;
        let row = &mut grid[point.line];
        for col in point.column.0.saturating_sub(2)..=point.column.0.min(last) {
            let cell = &mut row[Column(col)];
            let Some(marks) = cell.zerowidth().filter(|m| m.len() > MAX_MARKS).map(|m| m[..MAX_MARKS].to_vec()) else {
                continue;
            };
            let (underline, link) = (cell.underline_color(), cell.hyperlink());
            let mut fresh = Cell { c: cell.c, fg: cell.fg, bg: cell.bg, flags: cell.flags, extra: None };
            fresh.set_underline_color(underline);
            fresh.set_hyperlink(link);
            for m in marks {
                fresh.push_zerowidth(m);
            }
            *cell = fresh;
        }
    }

    /// Resizes the emulator; the next update carries the size and the
    /// new screen (rows the resize pushed off go to the scrollback).
    pub fn resize(&mut self, cols: u16, rows: u16) {
        self.term.resize(Size { cols: cols as usize, rows: rows as usize });
        self.term.grid_mut().update_history(budget(cols as usize).0);
        self.take_history();
        self.size_changed = true;
    }

    /// Forgets what replicas were sent: the next updates send the whole
    /// screen, size, cursor, modes and title (after an update was refused).
    pub fn resync(&mut self) {
        let nothing = Row { text: "\0".into(), runs: Vec::new(), wrapped: false };
        self.shown.iter_mut().for_each(|r| *r = nothing.clone());
        self.shown_size = (0, 0);
        self.size_changed = true;
        self.cursor.row = u16::MAX;
        self.modes = u32::MAX;
        self.title = "\0".into();
    }

    fn answers(&mut self) -> Vec<u8> {
        let mut h = self.heard.0.lock().expect("listener");
        let colors = std::mem::take(&mut h.colors);
        for (index, answer) in colors {
            let rgb = self.term.colors()[index].unwrap_or_else(|| default_color(index));
            h.answers.extend_from_slice(answer(rgb).as_bytes());
        }
        let (cols, rows) = (self.term.columns() as u16, self.term.screen_lines() as u16);
        for answer in std::mem::take(&mut h.sizes) {
            let size = WindowSize { num_lines: rows, num_cols: cols, cell_width: 8, cell_height: 16 };
            h.answers.extend_from_slice(answer(size).as_bytes());
        }
        std::mem::take(&mut h.answers)
    }

    /// Moves the rows that scrolled off into `scrolled`, oldest first.
    fn take_history(&mut self) {
        let grid = self.term.grid_mut();
        let n = grid.history_size();
        if n == 0 {
            return;
        }
        // A view scrolled back would shift what Line(-i) names.
        grid.scroll_display(Scroll::Bottom);
        for i in (1..=n as i32).rev() {
            self.scrolled.push(row_of(&grid[Line(-i)][..]));
        }
        grid.clear_history();
    }

    /// Whatever changed since the last update, in as many updates as
    /// its rows need (none if nothing changed): the rows that scrolled
    /// off first, the rest in the last.
    pub fn updates(&mut self) -> Vec<TermUpdate> {
        let Some((mut last, changes)) = self.update() else { return Vec::new() };
        let weight = |r: &Row| r.text.len() + r.runs.len() * 16 + 8;
        if changes.scrolled.iter().map(weight).sum::<usize>() <= UPDATE_BYTES {
            last.rows = Packed::pack(&changes);
            return vec![last];
        }
        let mut out = Vec::new();
        let (mut piece, mut bytes) = (Vec::new(), 0);
        for row in changes.scrolled {
            bytes += weight(&row);
            piece.push(row);
            if bytes > UPDATE_BYTES {
                let rows = Packed::pack(&RowChanges { scrolled: std::mem::take(&mut piece), lines: Vec::new() });
                out.push(TermUpdate { rows, ..TermUpdate::default() });
                bytes = 0;
            }
        }
        last.rows = Packed::pack(&RowChanges { scrolled: piece, lines: changes.lines });
        out.push(last);
        out
    }

    /// Whatever changed since the last update, if anything did: the
    /// update without its rows, and the rows.
    fn update(&mut self) -> Option<(TermUpdate, RowChanges)> {
        let (cols, rows) = (self.term.columns() as u16, self.term.screen_lines() as u16);
        let mut u = TermUpdate::default();
        if self.size_changed && (cols, rows) != self.shown_size {
            u.size = Some((cols, rows));
            self.shown_size = (cols, rows);
            resize_grid(&mut self.shown, rows);
        }
        self.size_changed = false;
        let scrolled = std::mem::take(&mut self.scrolled);
        scroll_grid(&mut self.shown, scrolled.len());
        let mut lines = Vec::new();
        let grid = self.term.grid();
        for (i, shown) in self.shown.iter_mut().enumerate() {
            let row = row_of(&grid[Line(i as i32)][..]);
            if row != *shown {
                *shown = row.clone();
                lines.push((i as u16, row));
            }
        }
        let changes = RowChanges { scrolled, lines };
        let changed_rows = !changes.is_empty();
        let cursor = self.cursor_now();
        if cursor != self.cursor || u.size.is_some() {
            self.cursor = cursor;
            u.cursor = Some(cursor);
        }
        let modes = modes_of(*self.term.mode());
        if modes != self.modes {
            self.modes = modes;
            u.modes = Some(modes);
        }
        {
            let mut h = self.heard.0.lock().expect("listener");
            if let Some(title) = h.title.take() {
                let title = title.unwrap_or_default();
                if title != self.title {
                    self.title.clone_from(&title);
                    u.title = Some(title);
                }
            }
            u.bells = std::mem::take(&mut h.bells);
        }
        let nothing = !changed_rows && u.size.is_none() && u.cursor.is_none() && u.modes.is_none() && u.title.is_none();
        match nothing && u.bells == 0 {
            true => None,
            false => Some((u, changes)),
        }
    }

    fn cursor_now(&self) -> Cursor {
        let point = self.term.grid().cursor.point;
        let style = self.term.cursor_style();
        let cols = self.term.columns().max(1) as u16;
        Cursor {
            row: point.line.0.max(0) as u16,
            col: (point.column.0 as u16).min(cols - 1),
            shape: match style.shape {
                VtShape::Underline => CursorShape::Underline,
                VtShape::Beam => CursorShape::Beam,
                VtShape::HollowBlock => CursorShape::HollowBlock,
                VtShape::Block | VtShape::Hidden => CursorShape::Block,
            },
            visible: self.term.mode().contains(TermMode::SHOW_CURSOR) && style.shape != VtShape::Hidden,
            blinking: style.blinking,
        }
    }
}

/// One emulator row as core's: its text without trailing default blanks,
/// and a run per style change.
fn row_of(cells: &[Cell]) -> Row {
    let wrapped = cells.last().is_some_and(|c| c.flags.contains(Flags::WRAPLINE));
    // The cells that matter: up to the last that is not a default blank.
    let used = cells.iter().rposition(|c| !(c.c == ' ' && style_of(c).is_default())).map_or(0, |i| i + 1);
    let mut text = String::with_capacity(used);
    let mut runs: Vec<Run> = Vec::new();
    for cell in &cells[..used] {
        if cell.flags.intersects(Flags::WIDE_CHAR_SPACER | Flags::LEADING_WIDE_CHAR_SPACER) {
            continue;
        }
        let style = style_of(cell);
        let mut chars = 1;
        text.push(cell.c);
        if let Some(marks) = cell.zerowidth() {
            let marks = &marks[..marks.len().min(MAX_MARKS)];
            text.extend(marks);
            chars += marks.len() as u32;
        }
        match runs.last_mut() {
            Some(run) if run.style == style => run.len += chars,
            _ => runs.push(Run { len: chars, style }),
        }
    }
    if runs.last().is_some_and(|r| r.style.is_default()) {
        runs.pop();
    }
    Row { text, runs, wrapped }
}

fn style_of(cell: &Cell) -> Style {
    const FLAGS: [(Flags, u16); 12] = [
        (Flags::BOLD, style::BOLD),
        (Flags::ITALIC, style::ITALIC),
        (Flags::UNDERLINE, style::UNDERLINE),
        (Flags::INVERSE, style::INVERSE),
        (Flags::DIM, style::DIM),
        (Flags::STRIKEOUT, style::STRIKEOUT),
        (Flags::HIDDEN, style::HIDDEN),
        (Flags::DOUBLE_UNDERLINE, style::DOUBLE_UNDERLINE),
        (Flags::UNDERCURL, style::UNDERCURL),
        (Flags::DOTTED_UNDERLINE, style::DOTTED_UNDERLINE),
        (Flags::DASHED_UNDERLINE, style::DASHED_UNDERLINE),
        (Flags::WIDE_CHAR, style::WIDE),
    ];
    let flags = FLAGS.iter().filter(|(f, _)| cell.flags.contains(*f)).fold(0, |acc, (_, bit)| acc | bit);
    Style { fg: color_of(cell.fg), bg: color_of(cell.bg), flags }
}

fn color_of(c: VtColor) -> Color {
    match c {
        VtColor::Spec(Rgb { r, g, b }) => Color::Rgb(r, g, b),
        VtColor::Indexed(i) => Color::Indexed(i),
        VtColor::Named(n) => {
            let i = n as usize;
            match i < 16 {
                true => Color::Indexed(i as u8),
                // The dim forms of the eight colours (alacritty keeps DIM
                // as a flag too) are the colours themselves here.
                false => match n {
                    NamedColor::DimBlack
                    | NamedColor::DimRed
                    | NamedColor::DimGreen
                    | NamedColor::DimYellow
                    | NamedColor::DimBlue
                    | NamedColor::DimMagenta
                    | NamedColor::DimCyan
                    | NamedColor::DimWhite => Color::Indexed((i - NamedColor::DimBlack as usize) as u8),
                    _ => Color::Default,
                },
            }
        }
    }
}

fn modes_of(m: TermMode) -> u32 {
    const MODES: [(TermMode, u32); 13] = [
        (TermMode::ALT_SCREEN, mode::ALT_SCREEN),
        (TermMode::APP_CURSOR, mode::APP_CURSOR),
        (TermMode::APP_KEYPAD, mode::APP_KEYPAD),
        (TermMode::BRACKETED_PASTE, mode::BRACKETED_PASTE),
        (TermMode::MOUSE_REPORT_CLICK, mode::MOUSE_CLICK),
        (TermMode::MOUSE_DRAG, mode::MOUSE_DRAG),
        (TermMode::MOUSE_MOTION, mode::MOUSE_MOTION),
        (TermMode::SGR_MOUSE, mode::MOUSE_SGR),
        (TermMode::UTF8_MOUSE, mode::MOUSE_UTF8),
        (TermMode::FOCUS_IN_OUT, mode::FOCUS_REPORT),
        (TermMode::ALTERNATE_SCROLL, mode::ALTERNATE_SCROLL),
        (TermMode::LINE_WRAP, mode::LINE_WRAP),
        (TermMode::INSERT, mode::INSERT),
    ];
    let mut bits = MODES.iter().filter(|(m2, _)| m.contains(*m2)).fold(0, |acc, (_, bit)| acc | bit);
    if m.intersects(TermMode::KITTY_KEYBOARD_PROTOCOL) {
        bits |= mode::KITTY_KEYBOARD;
    }
    bits
}

/// The colour a query gets for a slot the program never set: xterm's
/// palette, and acme's black on pale yellow for the text and background.
fn default_color(index: usize) -> Rgb {
    const ANSI: [(u8, u8, u8); 16] = [
        (0x00, 0x00, 0x00),
        (0xcd, 0x00, 0x00),
        (0x00, 0xcd, 0x00),
        (0xcd, 0xcd, 0x00),
        (0x00, 0x00, 0xee),
        (0xcd, 0x00, 0xcd),
        (0x00, 0xcd, 0xcd),
        (0xe5, 0xe5, 0xe5),
        (0x7f, 0x7f, 0x7f),
        (0xff, 0x00, 0x00),
        (0x00, 0xff, 0x00),
        (0xff, 0xff, 0x00),
        (0x5c, 0x5c, 0xff),
        (0xff, 0x00, 0xff),
        (0x00, 0xff, 0xff),
        (0xff, 0xff, 0xff),
    ];
    let (r, g, b) = match index {
        0..16 => ANSI[index],
        16..232 => {
            let i = index - 16;
            let level = |v: usize| if v == 0 { 0 } else { (55 + v * 40) as u8 };
            (level(i / 36), level(i / 6 % 6), level(i % 6))
        }
        232..256 => {
            let v = (8 + (index - 232) * 10) as u8;
            (v, v, v)
        }
        i if i == NamedColor::Background as usize => (0xff, 0xff, 0xea),
        _ => (0, 0, 0),
    };
    Rgb { r, g, b }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn apply_all(e: &mut Emulator, term: &mut apex_core::term::Term, bytes: &[u8]) {
        e.feed(bytes);
        for u in e.updates() {
            term.apply(&apex_core::TermOp::Update(Box::new(u))).unwrap();
        }
    }

    #[test]
    fn every_scrolled_row_reaches_the_replica_and_the_screen_matches() {
        let mut e = Emulator::new(20, 5);
        let mut t = apex_core::term::Term::new(20, 5, 1_000_000, "sh".into(), "/".into()).unwrap();
        let mut out = String::new();
        for i in 1..=10_000 {
            out.push_str(&format!("{i}\r\n"));
        }
        // One update for many chunks: nothing scrolled is lost.
        apply_all(&mut e, &mut t, out.as_bytes());
        assert_eq!(t.scrollback.len(), 9_996);
        assert_eq!(t.scrollback[0].text, "1");
        assert_eq!(t.scrollback[9_995].text, "9996");
        assert_eq!(t.screen(), "9997\n9998\n9999\n10000\n\n");
        assert_eq!((t.cursor.row, t.cursor.col), (4, 0));
        // Nothing new, no update.
        assert!(e.updates().is_empty());
    }

    #[test]
    fn colours_attributes_and_wide_chars_make_runs() {
        let mut e = Emulator::new(30, 3);
        let mut t = apex_core::term::Term::new(30, 3, 100, "sh".into(), "/".into()).unwrap();
        let text = "\x1b[31mred\x1b[0m \x1b[1;38;5;208mo\x1b[0m \x1b[48;2;1;2;3mtc\x1b[0m 漢x";
        apply_all(&mut e, &mut t, text.as_bytes());
        let row = &t.grid[0];
        assert_eq!(row.text, "red o tc 漢x");
        let red = Style { fg: Color::Indexed(1), ..Style::default() };
        let orange = Style { fg: Color::Indexed(208), flags: style::BOLD, ..Style::default() };
        let truecolor = Style { bg: Color::Rgb(1, 2, 3), ..Style::default() };
        let wide = Style { flags: style::WIDE, ..Style::default() };
        let d = Style::default();
        let runs: Vec<(u32, Style)> = row.runs.iter().map(|r| (r.len, r.style)).collect();
        assert_eq!(runs, [(3, red), (1, d), (1, orange), (1, d), (2, truecolor), (1, d), (1, wide)]);
    }

    #[test]
    fn title_bell_cursor_shape_and_modes_reach_the_replica() {
        let mut e = Emulator::new(10, 3);
        let mut t = apex_core::term::Term::new(10, 3, 100, "sh".into(), "/".into()).unwrap();
        // OSC 0 title, BEL, DECSCUSR 6 (steady bar), bracketed paste,
        // application cursor keys, SGR mouse with button reporting, a
        // hidden cursor.
        apply_all(&mut e, &mut t, b"\x1b]0;my title\x07\x07\x1b[6 q\x1b[?2004h\x1b[?1h\x1b[?1000h\x1b[?1006h\x1b[?25l");
        assert_eq!(t.title, "my title");
        assert_eq!(t.bells, 1);
        assert_eq!((t.cursor.shape, t.cursor.visible, t.cursor.blinking), (CursorShape::Beam, false, false));
        let want = mode::BRACKETED_PASTE | mode::APP_CURSOR | mode::MOUSE_CLICK | mode::MOUSE_SGR;
        assert_eq!(t.modes & want, want);
        apply_all(&mut e, &mut t, b"\x1b[?2004l\x1b[?25h\x1b]0;\x07");
        assert_eq!(t.modes & mode::BRACKETED_PASTE, 0);
        assert!(t.cursor.visible);
        assert_eq!(t.title, "");
    }

    #[test]
    fn a_cursor_report_is_answered_and_the_alternate_screen_comes_and_goes() {
        let mut e = Emulator::new(10, 3);
        assert_eq!(e.feed(b"ab\x1b[6n"), b"\x1b[1;3R");
        let mut t = apex_core::term::Term::new(10, 3, 100, "sh".into(), "/".into()).unwrap();
        apply_all(&mut e, &mut t, b"\x1b[?1049h\x1b[Hfull");
        assert_eq!(t.modes & mode::ALT_SCREEN, mode::ALT_SCREEN);
        assert_eq!(t.screen(), "full\n\n\n");
        apply_all(&mut e, &mut t, b"\x1b[?1049l");
        assert_eq!(t.screen(), "ab\n\n\n");
        assert_eq!(t.modes & mode::ALT_SCREEN, 0);
    }
}
