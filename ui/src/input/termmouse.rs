//! The mouse over a terminal's window. Unless the program asked for the
//! mouse, acme's language works on the terminal's text (its scrollback
//! and screen): button 1 selects, button 2 executes and button 3 looks
//! (the selection, or the word clicked), the 1-2 chord snarfs what is
//! selected and 1-3 pastes, which types the snarf into the program; the
//! wheel scrolls back through the scrollback (on the alternate screen it
//! sends the cursor keys, as xterm's alternate scroll does). A program
//! that asked for the mouse (vim's `mouse=a`, htop) gets its reports.

use super::termkeys;
use super::{Ctx, Effect, Event, Input, Key, Target, DOUBLE_CLICK_MS};
use crate::rect::Rect;
use crate::termview::{self, Cell};
use apex_core::grid::mode;
use apex_core::plumb::Plumb;
use apex_core::{TermId, WindowId};

/// A button held over a terminal's text.
#[derive(Clone, Copy, Debug)]
pub(super) struct TermSweep {
    window: WindowId,
    term: TermId,
    button: u8,
    from: Cell,
    /// Another button was pressed while it was held: a chord, which is
    /// all the sweep does.
    chorded: bool,
}

/// Lines a wheel notch scrolls a terminal.
const WHEEL_LINES: i64 = 3;

impl Input {
    /// The window showing a terminal whose body is at (`x`, `y`).
    fn term_body_at(&self, cx: &Ctx, x: i32, y: i32) -> Option<(WindowId, TermId, Rect)> {
        let (Target::Body(w), _) = cx.hit(x, y)? else { return None };
        let term = cx.node.state.window(w).ok()?.term.filter(|t| cx.node.state.terms.contains_key(t))?;
        Some((w, term, cx.screen.window(w)?.body))
    }

    /// The cell at (`x`, `y`) of window `w`'s terminal, clamped into it.
    fn term_cell(&self, cx: &mut Ctx, w: WindowId, term: TermId, body: Rect, x: i32, y: i32) -> Cell {
        let line = (cx.fonts.line_height() as i32).max(1);
        let cell = crate::termdraw::cell_width(cx.fonts).max(1);
        let Some(t) = cx.node.state.terms.get(&term) else { return Cell::default() };
        let shown = (body.height() / line).max(1) as usize;
        let top = termview::top(self.term_views.get(&w), t, shown);
        let row = top + ((y - body.y0).max(0) / line) as usize;
        let col = ((x - body.x0).max(0) / cell).min(i32::from(t.cols)) as u16;
        Cell { row: row.min(termview::rows(t).saturating_sub(1)), col }
    }

    /// Handles a mouse event over (or begun over) a terminal's window;
    /// `None` when it is not one.
    pub(super) fn term_mouse(&mut self, ev: &Event, now: u64, cx: &mut Ctx) -> Option<Vec<Effect>> {
        let (x, y) = match *ev {
            Event::Press { x, y, .. } | Event::Release { x, y, .. } | Event::Motion { x, y } => (x, y),
            Event::Wheel { x, y, .. } => (x, y),
            _ => return None,
        };
        let (w, term, body) = match self.term_sweep {
            Some(s) => (s.window, s.term, cx.screen.window(s.window)?.body),
            None => self.term_body_at(cx, x, y)?,
        };
        let modes = cx.node.state.terms.get(&term).map_or(0, |t| t.modes);
        if modes & (mode::MOUSE_CLICK | mode::MOUSE_DRAG | mode::MOUSE_MOTION) != 0 {
            return Some(self.report(ev, cx, term, body, modes));
        }
        let at = self.term_cell(cx, w, term, body, x, y);
        Some(match *ev {
            Event::Wheel { notches, .. } if modes & mode::ALT_SCREEN != 0 => {
                let k = if notches < 0 { Key::Up } else { Key::Down };
                let bytes: Vec<u8> = (0..notches.unsigned_abs() as i64 * WHEEL_LINES)
                    .flat_map(|_| termkeys::key(k, modes).unwrap_or_default())
                    .collect();
                vec![Effect::TermInput { term, bytes }]
            }
            Event::Wheel { notches, .. } => {
                self.scroll_term(cx, w, term, body, i64::from(notches) * WHEEL_LINES);
                Vec::new()
            }
            Event::Press { button, .. } => self.term_press(cx, w, term, button, at),
            Event::Motion { .. } => {
                if let Some(s) = self.term_sweep.filter(|s| s.button == 1 && !s.chorded) {
                    self.term_views.entry(w).or_default().sel = Some((s.from, at));
                }
                Vec::new()
            }
            Event::Release { button, .. } => self.term_release(cx, w, term, button, at, now),
            _ => Vec::new(),
        })
    }

    fn term_press(&mut self, cx: &mut Ctx, w: WindowId, term: TermId, button: u8, at: Cell) -> Vec<Effect> {
        if let Some(s) = self.term_sweep.as_mut() {
            // acme's chords, with button 1 held: 1-2 takes the selection
            // (a terminal's text cannot be cut: it is snarfed), 1-3 pastes,
            // which types the snarf into the program.
            if s.button != 1 {
                return Vec::new();
            }
            s.chorded = true;
            let sel = self.term_views.get(&w).and_then(|v| v.sel);
            let t = cx.node.state.terms.get(&term);
            return match button {
                2 => {
                    if let (Some((a, b)), Some(t)) = (sel, t) {
                        let text = termview::text(t, a, b);
                        if !text.is_empty() {
                            let _ = cx.snarf(text);
                        }
                    }
                    Vec::new()
                }
                3 => {
                    let snarf = cx.node.state.layout.snarf.clone();
                    let modes = t.map_or(0, |t| t.modes);
                    vec![Effect::TermInput { term, bytes: termkeys::paste(&snarf, modes) }]
                }
                _ => Vec::new(),
            };
        }
        self.term_sweep = Some(TermSweep { window: w, term, button, from: at, chorded: false });
        if button == 1 {
            self.term_views.entry(w).or_default().sel = Some((at, at));
        }
        Vec::new()
    }

    fn term_release(&mut self, cx: &mut Ctx, w: WindowId, term: TermId, button: u8, at: Cell, now: u64) -> Vec<Effect> {
        let Some(s) = self.term_sweep.filter(|s| s.button == button) else { return Vec::new() };
        self.term_sweep = None;
        if s.chorded {
            return Vec::new();
        }
        let Some(t) = cx.node.state.terms.get(&term) else { return Vec::new() };
        if button == 1 {
            // A second click at the same cell soon after selects the word
            // there, else the whole line (acme's double-click, as far as a
            // terminal's text has words and lines).
            let double = s.from == at
                && self.term_click.is_some_and(|(lw, lc, t)| lw == w && lc == at && now - t <= DOUBLE_CLICK_MS);
            let sel = match double {
                true => {
                    self.term_click = None;
                    let line = (Cell { row: at.row, col: 0 }, Cell { row: at.row, col: t.cols });
                    Some(termview::word_at(t, at).map_or(line, |(_, a, b)| (a, b)))
                }
                false => {
                    self.term_click = (s.from == at).then_some((w, at, now));
                    Some((s.from, at)).filter(|(a, b)| a != b)
                }
            };
            self.term_views.entry(w).or_default().sel = sel;
            return Vec::new();
        }
        // The text swept, else the selection if the click is in it, else
        // the word clicked (acme's expansion of a null click).
        let sel = self.term_views.get(&w).and_then(|v| v.sel).map(|(a, b)| if a <= b { (a, b) } else { (b, a) });
        let (text, end) = match (s.from != at, sel) {
            (true, _) => (termview::text(t, s.from, at), s.from.max(at)),
            (false, Some((a, b))) if (a..b).contains(&at) => (termview::text(t, a, b), b),
            _ => termview::word_at(t, at).map(|(word, _, end)| (word, end)).unwrap_or_default(),
        };
        let text = text.trim().to_string();
        if text.is_empty() {
            return Vec::new();
        }
        match button {
            2 => vec![Effect::Execute { window: Some(w), column: None, text, arg: None }],
            3 => {
                let plumb = Plumb { data: text.clone(), click: None };
                // A search goes on from the end of what was clicked, as
                // acme's look3 searches on in the body.
                let from = Some(termview::offset(t, end));
                vec![Effect::Look { window: w, text, word: None, plumb, from }]
            }
            _ => Vec::new(),
        }
    }

    /// Scrolls window `w`'s view of its terminal by `lines` (back when
    /// negative); at the bottom it follows new output again.
    fn scroll_term(&mut self, cx: &mut Ctx, w: WindowId, term: TermId, body: Rect, lines: i64) {
        let Some(t) = cx.node.state.terms.get(&term) else { return };
        let line = (cx.fonts.line_height() as i32).max(1);
        let shown = (body.height() / line).max(1) as usize;
        let bottom = termview::rows(t).saturating_sub(shown);
        let now = termview::top(self.term_views.get(&w), t, shown) as i64;
        let to = (now + lines).clamp(0, bottom as i64) as usize;
        self.term_views.entry(w).or_default().top = (to < bottom).then_some(to);
    }

    /// A mouse event as the program asked for it: SGR's form
    /// (`ESC [ < b ; x ; y M`, `m` for a release) or the older one.
    fn report(&mut self, ev: &Event, cx: &mut Ctx, term: TermId, body: Rect, modes: u32) -> Vec<Effect> {
        let line = (cx.fonts.line_height() as i32).max(1);
        let cell = crate::termdraw::cell_width(cx.fonts).max(1);
        let (code, x, y, release) = match *ev {
            Event::Press { button, x, y } => {
                self.term_sweep = None;
                (button_code(button), x, y, false)
            }
            Event::Release { button, x, y } => (button_code(button), x, y, true),
            Event::Motion { x, y } if modes & (mode::MOUSE_DRAG | mode::MOUSE_MOTION) != 0 => (32 + 3, x, y, false),
            Event::Wheel { notches, x, y } => (if notches < 0 { 64 } else { 65 }, x, y, false),
            _ => return Vec::new(),
        };
        let col = ((x - body.x0).max(0) / cell + 1) as u32;
        let row = ((y - body.y0).max(0) / line + 1) as u32;
        let bytes = match modes & mode::MOUSE_SGR != 0 {
            true => format!("\x1b[<{code};{col};{row}{}", if release { 'm' } else { 'M' }).into_bytes(),
            false => {
                let b = if release { 3 } else { code };
                vec![0x1b, b'[', b'M', (32 + b).min(255) as u8, (32 + col).min(255) as u8, (32 + row).min(255) as u8]
            }
        };
        vec![Effect::TermInput { term, bytes }]
    }
}

/// A button's code in a mouse report: 0, 1 and 2 for buttons 1 to 3.
fn button_code(button: u8) -> u32 {
    u32::from(button.saturating_sub(1).min(2))
}
