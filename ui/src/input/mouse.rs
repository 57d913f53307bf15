//! Mouse buttons in texts (acme's `mousethread`, `textselect`, `textselect2`
//! and `textselect3`): clicks and sweeps that select, double-clicks, the
//! chords, and B2 and B3 made into effects for the caller.

use super::{BoxDrag, Chord, Ctx, Effect, Input, InputError, Sweep, Target, DOUBLE_CLICK_MS};
use apex_core::plumb::Plumb;
use apex_core::{look, BufferOp, Op, Origin, Shard};

impl Input {
    pub(super) fn press(
        &mut self,
        button: u8,
        x: i32,
        y: i32,
        now: u64,
        cx: &mut Ctx,
    ) -> Result<Vec<Effect>, InputError> {
        if let Some(d) = self.held.as_mut() {
            d.cancelled |= d.button != button;
            return Ok(Vec::new());
        }
        if let Some(s) = self.sweep.filter(|s| s.button != button) {
            return self.chord(s, button, cx).map(|_| Vec::new());
        }
        if let Some(held) = cx.layout_box(x, y) {
            self.held = Some(BoxDrag { button, held, x, y, cancelled: false });
            return Ok(Vec::new());
        }
        let Some((t, in_scroll)) = cx.hit(x, y) else { return Ok(Vec::new()) };
        if in_scroll {
            self.scroll_click(t, button, y, cx)?;
            return Ok(Vec::new());
        }
        let Some(frame) = cx.frame(t) else { return Ok(Vec::new()) };
        let q = frame.rune_at(x, y);
        // A click commits the run of typing and ends what Esc would
        // select (acme's mouse thread: `eq0 = ~0`, `wincommit`).
        self.run = None;
        self.typed_from = None;
        self.clicked = Some(t);
        if button == 1 {
            self.focus = Some(t);
            self.typed_from = None;
            self.predicted = None;
            // The layout records the focus, so acme's log reports it.
            if let Some(w) = Ctx::window_of(t).filter(|w| cx.node.state.layout.focus != Some(*w)) {
                let op = apex_core::LayoutOp::Focus { window: Some(w) };
                cx.node.append(Shard::Layout, Op::Layout(op))?;
            }
            let double = self.last_click.is_some_and(|(lt, lq, at)| lt == t && lq == q && now - at <= DOUBLE_CLICK_MS);
            if double {
                let (b, _) = cx.text_of(t).ok_or(InputError::Gone)?;
                let (q0, q1) = look::double_click(cx.node.state.buffer(b)?, q);
                self.last_click = None;
                self.sweep = None;
                return cx.select(t, q0, q1).map(|_| Vec::new());
            }
            self.last_click = Some((t, q, now));
            cx.select(t, q, q)?;
        }
        self.sweep = Some(Sweep { button, target: t, anchor: q, chord: Chord::None });
        Ok(Vec::new())
    }

    /// Another button pressed during a sweep: acme's chords. With button 1
    /// down, 2 cuts and 3 pastes, and each undoes the other's last step
    /// in a body (1-2-3 leaves the text as it was, snarfed); with 2 down,
    /// 1 adds the last selection as an argument and 3 cancels; with 3
    /// down, 1 cancels.
    pub(super) fn chord(&mut self, mut s: Sweep, button: u8, cx: &mut Ctx) -> Result<(), InputError> {
        let t = s.target;
        let body = matches!(t, Target::Body(_));
        s.chord = match (s.button, button, s.chord) {
            (1, 2, Chord::Paste { q0, q1 }) if body => {
                self.undo_step(t, q0, q1, cx)?;
                Chord::None
            }
            (1, 2, Chord::Cut { q0, q1 }) => Chord::Cut { q0, q1 },
            (1, 2, _) => {
                let (b, _, q0, q1) = cx.selection(t).ok_or(InputError::Gone)?;
                // Nothing to cut is no step: a later 1-3 must not undo
                // an edit made before the chord.
                if q0 == q1 {
                    return Ok(());
                }
                self.new_step(b, cx)?;
                let text = cx.slice(t, q0, q1);
                cx.snarf(text)?;
                cx.splice(b, q0, q1, "")?;
                cx.select(t, q0, q0)?;
                Chord::Cut { q0, q1 }
            }
            (1, 3, Chord::Cut { q0, q1 }) if body => {
                self.undo_step(t, q0, q1, cx)?;
                Chord::None
            }
            (1, 3, Chord::Paste { q0, q1 }) => Chord::Paste { q0, q1 },
            (1, 3, _) => {
                let (b, _, q0, q1) = cx.selection(t).ok_or(InputError::Gone)?;
                let snarf = cx.node.state.layout.snarf.clone();
                if q0 == q1 && snarf.is_empty() {
                    return Ok(());
                }
                self.new_step(b, cx)?;
                cx.splice(b, q0, q1, &snarf)?;
                cx.select(t, q0, q0 + snarf.chars().count() as u64)?;
                Chord::Paste { q0, q1 }
            }
            (2, 1, Chord::None) => Chord::Argument,
            (2, 3, _) | (3, 1, _) | (3, 2, _) => Chord::Cancelled,
            (_, _, c) => c,
        };
        self.sweep = Some(s);
        Ok(())
    }

    pub(super) fn motion(&mut self, x: i32, y: i32, cx: &mut Ctx) -> Result<(), InputError> {
        let Some(s) = self.sweep.filter(|s| s.button == 1 && s.chord == Chord::None) else { return Ok(()) };
        let Some(frame) = cx.frame(s.target) else { return Ok(()) };
        let q = frame.rune_at(x, y);
        cx.select(s.target, s.anchor.min(q), s.anchor.max(q))
    }

    pub(super) fn release(
        &mut self,
        button: u8,
        x: i32,
        y: i32,
        _now: u64,
        cx: &mut Ctx,
    ) -> Result<Vec<Effect>, InputError> {
        if let Some(d) = self.held.filter(|d| d.button == button) {
            self.held = None;
            return self.let_go(d, x, y, cx).map(|_| Vec::new());
        }
        // A chord's button coming up ends nothing.
        let Some(s) = self.sweep.filter(|s| s.button == button) else { return Ok(Vec::new()) };
        self.sweep = None;
        if button == 1 {
            if s.chord == Chord::None {
                self.motion_to(s, x, y, cx)?;
            }
            self.last_selected = Some(s.target);
            return Ok(Vec::new());
        }
        if s.chord == Chord::Cancelled {
            return Ok(Vec::new());
        }
        // B2 and B3: the swept text, or what a null click expands to.
        let Some(frame) = cx.frame(s.target) else { return Ok(Vec::new()) };
        let q = frame.rune_at(x, y);
        let swept = (s.anchor.min(q), s.anchor.max(q));
        let (mut q0, mut q1) = swept;
        let mut plumb = None;
        let mut word = None;
        if q0 == q1 {
            let (b, _) = cx.text_of(s.target).ok_or(InputError::Gone)?;
            let buf = cx.node.state.buffer(b)?;
            // A click inside the selection acts on the selection, as acme.
            let sel = cx.selection(s.target).map(|(_, _, a, z)| (a, z)).unwrap_or_default();
            (q0, q1) = match sel.0 < sel.1 && (sel.0..=sel.1).contains(&q0) {
                true => sel,
                false => {
                    plumb = Plumb::around(buf, q0);
                    let (w0, w1) = look::word(buf, q0);
                    word = (button == 3 && w0 < w1).then(|| buf.slice(w0, w1).unwrap_or_default());
                    look::expand(buf, q0, button == 2)
                }
            };
        }
        let text = cx.slice(s.target, q0, q1);
        let plumb = plumb.unwrap_or_else(|| Plumb { data: text.clone(), click: None });
        if text.trim().is_empty() {
            return Ok(Vec::new());
        }
        let window = Ctx::window_of(s.target);
        let column = match s.target {
            Target::ColumnTag(c) => Some(c),
            _ => None,
        };
        let arg = match s.chord {
            Chord::Argument => self.last_selected.and_then(|t| {
                let (_, _, q0, q1) = cx.selection(t)?;
                Some(cx.slice(t, q0, q1)).filter(|a| !a.is_empty())
            }),
            _ => None,
        };
        // A tool reading the window's events decides: the action is
        // reported to it (acme's event file), not carried out here.
        let reader = window.and_then(|w| cx.node.state.window(w).ok()).and_then(|w| w.event_reader);
        if let (Some(_), Some((b, view))) = (reader, cx.text_of(s.target)) {
            // The action's entry holds at most SPLICE_MAX bytes of an
            // argument: a longer one is not reported (acme reports only
            // its first 256 runes anyway).
            let arg = arg.filter(|a| a.len() <= apex_core::op::SPLICE_MAX);
            let version = cx.node.state.buffer(b)?.version;
            let expanded = swept != (q0, q1);
            let builtin = button == 2 && apex_core::exec::is_builtin(&text);
            let flags = u32::from(builtin) | if expanded { 2 } else { 0 } | if arg.is_some() { 8 } else { 0 };
            let action = Box::new(apex_core::Action {
                view: Some(view),
                version,
                q0: swept.0,
                q1: swept.1,
                expansion: expanded.then_some((q0, q1)),
                arg: arg.clone(),
                flags,
                origin: Origin::Mouse,
            });
            let op = if button == 2 { BufferOp::ExecAt(action) } else { BufferOp::LookAt(action) };
            cx.append(b, op)?;
            return Ok(Vec::new());
        }
        Ok(match (button, window) {
            (2, _) => vec![Effect::Execute { window, column, text, arg }],
            (3, Some(window)) => {
                let from = matches!(s.target, Target::Body(_)).then_some(q1);
                vec![Effect::Look { window, text, word, plumb, from }]
            }
            _ => Vec::new(),
        })
    }

    pub(super) fn motion_to(&mut self, s: Sweep, x: i32, y: i32, cx: &mut Ctx) -> Result<(), InputError> {
        self.sweep = Some(s);
        let r = self.motion(x, y, cx);
        self.sweep = None;
        r
    }
}
