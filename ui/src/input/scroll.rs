//! Scrolling (acme's `scrl.c` and the scrolling keys of `texttype`):
//! the scroll bar's three buttons, the wheel, and scrolling by lines.

use super::{Ctx, Input, InputError, Target};
use apex_core::{look, show};

impl Input {
    /// acme's scroll bar: B1 back and B3 forward by as many lines as the
    /// click is below the bar's top, B2 to the proportional place.
    pub(super) fn scroll_click(&mut self, t: Target, button: u8, y: i32, cx: &mut Ctx) -> Result<(), InputError> {
        let Some(rect) = cx.rect_of(t) else { return Ok(()) };
        let lines = ((y - rect.y0) / cx.metrics.line.max(1)).max(1);
        match button {
            1 => self.scroll_lines(t, -lines, cx),
            3 => self.scroll_lines(t, lines, cx),
            2 => {
                let (b, _) = cx.text_of(t).ok_or(InputError::Gone)?;
                let buf = cx.node.state.buffer(b)?;
                let frac = f64::from((y - rect.y0).max(0)) / f64::from(rect.height().max(1));
                let q = (buf.len() as f64 * frac) as u64;
                // To the start of that line, as acme's B2 jump does.
                let org = look::show_origin(buf, q);
                cx.set_origin(t, org)
            }
            _ => Ok(()),
        }
    }

    /// The wheel turned `notches` over (`x`, `y`): in a window's body it
    /// scrolls `$mousescrollsize` lines a notch; in a window's tag it
    /// folds (up) or unfolds (down) the tag, as acme's `texttype` takes
    /// its scroll keys; elsewhere nothing.
    pub(super) fn wheel(&mut self, notches: i32, x: i32, y: i32, cx: &mut Ctx) -> Result<(), InputError> {
        match cx.hit(x, y) {
            Some((t @ Target::Body(_), _)) => {
                let Some(frame) = cx.frame(t) else { return Ok(()) };
                let n = self.scroll_size.lines(frame.capacity());
                self.scroll_lines(t, notches.saturating_mul(n), cx)
            }
            Some((Target::Tag(w), _)) => {
                match notches < 0 {
                    true => self.collapsed.insert(w),
                    false => self.collapsed.remove(&w),
                };
                Ok(())
            }
            _ => Ok(()),
        }
    }

    /// Scrolls by `lines` lines (negative: back): forward to the rune at
    /// the start of that line of the frame, back over that many lines of
    /// text (acme's `textbacknl`, a long line counted every 128 runes).
    pub fn scroll_lines(&mut self, t: Target, lines: i32, cx: &mut Ctx) -> Result<(), InputError> {
        let Some(frame) = cx.frame(t) else { return Ok(()) };
        let (b, _) = cx.text_of(t).ok_or(InputError::Gone)?;
        let buf = cx.node.state.buffer(b)?;
        let org = if lines >= 0 {
            match frame.lines.get(lines as usize) {
                Some(l) => l.q0,
                None => frame.end.min(look::show_origin(buf, buf.len())),
            }
        } else {
            show::back_lines(&buf.text, frame.org, lines.unsigned_abs())
        };
        if org == frame.org {
            return Ok(());
        }
        cx.set_origin(t, org)
    }
}
