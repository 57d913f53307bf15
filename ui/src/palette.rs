//! acme's colours (plan9port's `acme.c` `iconinit`), as 0RGB pixels.
//!
//! acme mixes pale yellow (#FFFFAA) and pale blue-green (#AAFFFF) with
//! white by dithering; on a modern screen the mix is the solid average
//! acme users know: #FFFFEA behind bodies and #EAFFFF behind tags.

pub type Pixel = u32;

/// Body background: pale yellow mixed with white.
pub const BODY: Pixel = 0xFFFFEA;
/// Body selection (acme's DDarkyellow).
pub const BODY_SELECTION: Pixel = 0xEEEE9E;
/// Body scroll bar and borders (acme's DYellowgreen).
pub const BODY_BORDER: Pixel = 0x99994C;
/// Tag background: pale blue-green mixed with white.
pub const TAG: Pixel = 0xEAFFFF;
/// Tag selection (acme's DPalegreygreen).
pub const TAG_SELECTION: Pixel = 0x9EEEEE;
/// Tag scroll area and the layout box's border (acme's DPurpleblue).
pub const TAG_BORDER: Pixel = 0x8888CC;
/// The layout box of a window whose body is modified (acme's DMedblue).
pub const DIRTY_BOX: Pixel = 0x000099;
/// A column tag's layout box (acme's colbutton, DPurpleblue).
pub const COLUMN_BOX: Pixel = 0x8888CC;
/// A column with no windows.
pub const EMPTY: Pixel = 0xFFFFFF;
/// Text and the lines between windows and columns.
pub const TEXT: Pixel = 0x000000;
pub const RULE: Pixel = 0x000000;
