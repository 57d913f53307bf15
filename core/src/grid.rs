//! What a terminal's grid is made of, as replicas keep it: rows of text
//! with runs of style, and the cursor. The daemon's emulator makes them;
//! replicas only store them, so nothing here depends on an emulator.
//!
//! A row is its text (trailing blank cells of the default style dropped)
//! plus [`Run`]s: consecutive from the row's first char, each a count of
//! chars in one [`Style`]; chars past the last run have the default
//! style. A run per style change, not a style per cell, keeps a snapshot
//! of a terminal compact. A char of a run with [`style::WIDE`] takes two
//! cells; a combining mark (a zero-width char) belongs to the char before
//! it and takes none.

use serde::{Deserialize, Serialize};

/// A colour as terminals name them.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Color {
    /// The terminal's foreground or background.
    #[default]
    Default,
    /// 0-15 are the 16 ANSI colours (8-15 the bright ones); 16-255 the
    /// 256-colour cube and greys.
    Indexed(u8),
    /// Truecolor.
    Rgb(u8, u8, u8),
}

/// Attribute bits of a [`Style`].
pub mod style {
    pub const BOLD: u16 = 1;
    pub const ITALIC: u16 = 1 << 1;
    pub const UNDERLINE: u16 = 1 << 2;
    pub const INVERSE: u16 = 1 << 3;
    pub const DIM: u16 = 1 << 4;
    pub const STRIKEOUT: u16 = 1 << 5;
    pub const HIDDEN: u16 = 1 << 6;
    pub const DOUBLE_UNDERLINE: u16 = 1 << 7;
    pub const UNDERCURL: u16 = 1 << 8;
    pub const DOTTED_UNDERLINE: u16 = 1 << 9;
    pub const DASHED_UNDERLINE: u16 = 1 << 10;
    /// Each char takes two cells.
    pub const WIDE: u16 = 1 << 11;
}

/// How a run of cells is drawn.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Style {
    pub fg: Color,
    pub bg: Color,
    /// [`style`] bits.
    pub flags: u16,
}

impl Style {
    pub fn is_default(&self) -> bool {
        *self == Style::default()
    }
}

/// `len` chars in one style.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Run {
    pub len: u32,
    pub style: Style,
}

/// One row of a terminal.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Row {
    pub text: String,
    pub runs: Vec<Run>,
    /// The row's text goes on in the next row (the program wrote past
    /// the last column): copy and search may join them.
    pub wrapped: bool,
}

impl Row {
    /// A row of plain text.
    pub fn plain(text: &str) -> Row {
        Row { text: text.to_string(), runs: Vec::new(), wrapped: false }
    }

    /// The style of each char, in order (for tests and drawing).
    pub fn styles(&self) -> impl Iterator<Item = (char, Style)> + '_ {
        let mut runs = self.runs.iter().flat_map(|r| std::iter::repeat_n(r.style, r.len as usize));
        self.text.chars().map(move |c| (c, runs.next().unwrap_or_default()))
    }

    /// Whether the runs cover no more chars than the text has.
    pub fn is_well_formed(&self) -> bool {
        let styled: u64 = self.runs.iter().map(|r| r.len as u64).sum();
        styled <= self.text.chars().count() as u64
    }
}

/// How the cursor is drawn.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub enum CursorShape {
    #[default]
    Block,
    Underline,
    Beam,
    /// An outline (a terminal without the focus).
    HollowBlock,
}

/// Where the cursor is and how it looks.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Cursor {
    pub row: u16,
    pub col: u16,
    pub shape: CursorShape,
    pub visible: bool,
    pub blinking: bool,
}

impl Default for Cursor {
    fn default() -> Cursor {
        Cursor { row: 0, col: 0, shape: CursorShape::Block, visible: true, blinking: false }
    }
}

/// Terminal mode bits a UI needs to draw a terminal and send it keys.
pub mod mode {
    /// The alternate screen is shown (full-screen programs).
    pub const ALT_SCREEN: u32 = 1;
    /// Cursor keys send application sequences (`ESC O A`).
    pub const APP_CURSOR: u32 = 1 << 1;
    /// The keypad sends application sequences.
    pub const APP_KEYPAD: u32 = 1 << 2;
    /// Pastes are bracketed (`ESC [200~ ... ESC [201~`).
    pub const BRACKETED_PASTE: u32 = 1 << 3;
    /// Mouse clicks are reported.
    pub const MOUSE_CLICK: u32 = 1 << 4;
    /// Mouse drags are reported.
    pub const MOUSE_DRAG: u32 = 1 << 5;
    /// All mouse motion is reported.
    pub const MOUSE_MOTION: u32 = 1 << 6;
    /// Mouse reports use the SGR form.
    pub const MOUSE_SGR: u32 = 1 << 7;
    /// Mouse reports use the UTF-8 form.
    pub const MOUSE_UTF8: u32 = 1 << 8;
    /// Focus in and out are reported.
    pub const FOCUS_REPORT: u32 = 1 << 9;
    /// The mouse wheel sends cursor keys on the alternate screen.
    pub const ALTERNATE_SCROLL: u32 = 1 << 10;
    /// Lines wrap at the last column.
    pub const LINE_WRAP: u32 = 1 << 11;
    /// Insert mode.
    pub const INSERT: u32 = 1 << 12;
    /// The kitty keyboard protocol is on in some form.
    pub const KITTY_KEYBOARD: u32 = 1 << 13;
}
