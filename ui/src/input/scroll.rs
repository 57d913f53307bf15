//! Scrolling (acme's `scrl.c`): the scroll bar's three buttons and
//! scrolling by lines.

use super::{InputError, Ctx, Input, Target};
use apex_core::look;

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

    /// Scrolls by `lines` display lines (negative: back).
    pub fn scroll_lines(&mut self, t: Target, lines: i32, cx: &mut Ctx) -> Result<(), InputError> {
        let Some(frame) = cx.frame(t) else { return Ok(()) };
        let (b, _) = cx.text_of(t).ok_or(InputError::Gone)?;
        let buf = cx.node.state.buffer(b)?;
        let org = if lines >= 0 {
            let n = lines as usize;
            match frame.lines.get(n) {
                Some(l) => l.q0,
                None => frame.end.min(look::show_origin(buf, buf.len())),
            }
        } else {
            // Back by whole text lines: cheap and close to acme's.
            let line = buf.text.char_to_line(frame.org as usize) as i64;
            let to = (line + i64::from(lines)).max(0) as usize;
            buf.text.line_to_char(to) as u64
        };
        if org == frame.org {
            return Ok(());
        }
        cx.set_origin(t, org)
    }
}
