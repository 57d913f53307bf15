//! The fixed-width lines acme's clients parse: `index` (one line per
//! window) and a window's `ctl` read (acme-fs.md §1). Every number is
//! right-aligned in 11 columns and followed by a blank.

use super::termwin;
use apex_core::{State, TermId, WindowId};
use std::fmt::Write;

/// The font a window reports when none was set (`ctl` field 7). Clients
/// such as `mc` and the Go package's `Win.Font` need a plausible one.
pub const DEFAULT_FONT: &str = "/lib/font/bit/lucsans/euro.8.font";
/// Body width in pixels a headless window reports (`ctl` field 6).
pub const BODY_WIDTH: u32 = 1024;
/// A character's width in pixels, for the tab width a headless window
/// reports.
pub const CHAR_WIDTH: u32 = 8;
/// Tab width in pixels (`ctl` field 8): core's default tab of four
/// characters. Must not be 0 (`Win.Font` fails on it).
pub const TAB_WIDTH: u32 = apex_core::exec::DEFAULT_TAB * CHAR_WIDTH;

/// The first five fields: id, tag length, body length (runes), is
/// directory, dirty.
fn five(state: &State, window: WindowId, number: u32) -> Option<String> {
    let w = state.windows.get(&window)?;
    let tag = state.buffers.get(&w.tag)?;
    let body = state.buffers.get(&w.body)?;
    Some(format!(
        "{:11} {:11} {:11} {:11} {:11} ",
        number,
        tag.len(),
        body.len(),
        u8::from(apex_core::look::is_dir(&body.name)),
        u8::from(body.dirty)
    ))
}

/// The window's tag up to its first newline.
pub fn tag_line(state: &State, window: WindowId) -> String {
    // Up to the newline only, not the whole tag copied (tags grow with
    // what is written to them).
    let Some(tag) = state.windows.get(&window).and_then(|w| state.buffers.get(&w.tag)) else { return String::new() };
    tag.text.rope().chars().take_while(|c| *c != '\n').collect()
}

/// `index`: one line per window, in column order; of Zerox copies (windows
/// on one body) only one, the focused one if it is among them; then the
/// terminals' windows.
pub fn index(state: &State) -> String {
    let mut out = String::new();
    let mut listed = std::collections::BTreeSet::new();
    let focus_body = state.layout.focus.and_then(|w| state.windows.get(&w)).map(|w| w.body);
    for column in &state.layout.columns {
        for placed in &column.windows {
            let Some(number) = state.layout.numbers.get(&placed.window) else { continue };
            let Some(w) = state.windows.get(&placed.window) else { continue };
            let is_focus = state.layout.focus == Some(placed.window);
            if (focus_body == Some(w.body) && !is_focus) || !listed.insert(w.body) {
                continue;
            }
            if let Some(f) = five(state, placed.window, number.0) {
                let _ = writeln!(out, "{f}{}", tag_line(state, placed.window));
            }
        }
    }
    for (id, t) in &state.terms {
        let shown = state.windows.values().any(|w| w.term == Some(*id));
        if !shown && state.layout.window_numbered(apex_core::AcmeNumber(termwin::number(*id))).is_none() {
            let _ = writeln!(out, "{}{}", termwin::five(*id, t), termwin::tag(*id, t));
        }
    }
    out
}

/// A terminal window's `ctl` read, in the fields of any window's.
pub fn term_ctl(id: TermId, t: &apex_core::term::Term) -> String {
    format!("{}{BODY_WIDTH:11} {DEFAULT_FONT} {TAB_WIDTH:11} {:11} {:11} ", termwin::five(id, t), 0, 0)
}

/// A font name as one token, quoted Plan 9 style if it needs it.
fn quoted(name: &str) -> String {
    match name.contains([' ', '\t', '\'', '\n']) || name.is_empty() {
        true => format!("'{}'", name.replace('\'', "''")),
        false => name.to_string(),
    }
}

/// A window's `ctl` read: the five index fields, then body width, font,
/// tab width, undo possible, redo possible; every field followed by a
/// blank and no newline.
pub fn ctl(state: &State, window: WindowId, number: u32) -> Option<String> {
    let w = state.windows.get(&window)?;
    let body = state.buffers.get(&w.body)?;
    let font = w.flags.font.as_deref().unwrap_or(DEFAULT_FONT);
    Some(format!(
        "{}{:11} {} {:11} {:11} {:11} ",
        five(state, window, number)?,
        BODY_WIDTH,
        quoted(font),
        w.flags.tab.map_or(TAB_WIDTH, |t| t.saturating_mul(CHAR_WIDTH)),
        u8::from(body.can_undo()),
        u8::from(body.can_redo())
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fonts_with_blanks_are_quoted() {
        assert_eq!(quoted("/lib/font/x.font"), "/lib/font/x.font");
        assert_eq!(quoted("my font"), "'my font'");
        assert_eq!(quoted("it's"), "'it''s'");
    }
}
