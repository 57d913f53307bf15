//! Typing (acme's `texttype`): text typed into the text it goes to, the
//! erasing keys, cursor keys, Esc, the control keys, ^F's completion, and
//! typing proposed to the leader while watching.

use super::{Ctx, Effect, Input, InputError, Key, Predicted, Target};
use apex_core::{look, show, BufferId, Origin, Proposal, Shard};

impl Input {
    /// Watching: replaces `q0..q1` of the target's text with `text` and
    /// moves its cursor after it, as proposals for the leader, at the
    /// version the typing sent before will have made.
    pub(super) fn propose_typing(
        &mut self,
        t: Target,
        b: BufferId,
        q0: u64,
        q1: u64,
        text: &str,
        cx: &mut Ctx,
    ) -> Result<(), InputError> {
        let (_, view) = cx.text_of(t).ok_or(InputError::Gone)?;
        let version = match self.pending(cx, b) {
            Some(p) => p.version,
            None => cx.node.state.buffer(b)?.version,
        };
        let q = q0 + text.chars().count() as u64;
        cx.outbox.push(Proposal::splice(b, version, q0, q1, text.to_string(), Origin::Keyboard));
        cx.outbox.push(Proposal::Select { buffer: b, view, version: version + 1, q0: q, q1: q });
        self.predicted = Some(Predicted { buffer: b, view, version: version + 1, q });
        Ok(())
    }

    /// Typed text goes in at the cursor. A selection is cut first
    /// (snarfed, a step of its own, as acme's `texttype` cuts it); a run
    /// of typing is one undo step until something commits it (a
    /// newline, a cursor key, Esc, the mouse leaving or clicking), as
    /// acme's `seq` counts steps.
    pub(super) fn typed(&mut self, s: &str, cx: &mut Ctx) -> Result<(), InputError> {
        let Some((t, b, q0, q1)) = self.typing_target(cx) else { return Ok(()) };
        let s: String = s
            .chars()
            .map(|c| if c == '\r' { '\n' } else { c })
            .filter(|c| !c.is_control() || *c == '\n' || *c == '\t')
            .collect();
        if s.is_empty() {
            return Ok(());
        }
        // Indent on: a newline takes the blanks the line starts with (up to
        // the cursor), as acme's autoindent does.
        let indenting = match t {
            Target::Body(w) => cx.node.state.window(w).is_ok_and(|w| w.flags.autoindent),
            _ => false,
        };
        let s = match (indenting, s.as_str()) {
            (true, "\n") => {
                let buf = cx.node.state.buffer(b)?;
                let start = look::show_origin(buf, q0);
                let blanks: String =
                    buf.slice(start, q0).unwrap_or_default().chars().take_while(|c| *c == ' ' || *c == '\t').collect();
                format!("\n{blanks}")
            }
            _ => s,
        };
        if let (Target::Tag(w), true) = (t, s.contains('\n')) {
            self.collapsed.remove(&w);
        }
        if !cx.node.leads(Shard::Buffer(b)) {
            if self.typed_from.is_none_or(|(tt, _)| tt != t) {
                self.typed_from = Some((t, q0));
            }
            return self.propose_typing(t, b, q0, q1, &s, cx);
        }
        let commits = s.contains('\n');
        if q0 < q1 {
            self.run = None;
            self.typed_from = None;
            self.new_step(b, cx)?;
            let cut = cx.slice(t, q0, q1);
            cx.snarf(cut)?;
            cx.splice(b, q0, q1, "")?;
            // Typing committed at this very key is the cut's step too.
            if !commits {
                self.new_step(b, cx)?;
            }
            self.run = Some(super::Run { target: t, q0, len: 0 });
        } else if !self.run.is_some_and(|r| r.target == t && r.q0 + r.len == q0) {
            let typed_from = self.typed_from;
            self.new_step(b, cx)?;
            self.typed_from = typed_from;
            self.run = Some(super::Run { target: t, q0, len: 0 });
        }
        if self.typed_from.is_none_or(|(tt, _)| tt != t) {
            self.typed_from = Some((t, q0));
        }
        let n = s.chars().count() as u64;
        cx.splice(b, q0, q0, &s)?;
        if let Some(r) = self.run.as_mut() {
            r.len += n;
        }
        if commits {
            self.run = None;
        }
        cx.select(t, q0 + n, q0 + n)?;
        cx.show(t, q0 + n)
    }

    /// ^F (acme's `textcomplete`): the selection goes as typing would take
    /// it, then the file name before the cursor is for the caller to
    /// complete (it lists the directory).
    pub(super) fn complete(&mut self, cx: &mut Ctx) -> Result<Vec<Effect>, InputError> {
        let Some((t, b, q0, q1)) = self.typing_target(cx) else { return Ok(Vec::new()) };
        // Nothing to complete (the cursor is inside a word): the selection
        // stays, as acme's textcomplete leaves it.
        let buf = cx.node.state.buffer(b)?;
        let at = q1.min(buf.len());
        if at < buf.len() && buf.text.char(at as usize) > ' ' {
            return Ok(Vec::new());
        }
        if q0 < q1 {
            // Cut, as typing cuts it (acme's texttype snarfs it).
            let cut = cx.slice(t, q0, q1);
            cx.snarf(cut)?;
            self.erase(t, b, q0, q1, cx)?;
        }
        let buf = cx.node.state.buffer(b)?;
        Ok(match look::completion_at(buf, q0.min(buf.len())) {
            Some((path, prefix)) => vec![Effect::Complete { window: Ctx::window_of(t), path, prefix }],
            None => Vec::new(),
        })
    }

    pub(super) fn key(&mut self, k: Key, cx: &mut Ctx) -> Result<(), InputError> {
        let Some((_, b, _, _)) = self.typing_target(cx) else { return Ok(()) };
        let pending = self.pending(cx, b);
        let done = self.key_in(k, cx);
        // Watching: a cursor key's move is a proposal too; the cursor is
        // predicted where it goes until the leader's move is in.
        let moved = cx.outbox.last().and_then(|p| match p {
            Proposal::Select { buffer, view, q0, q1, .. } if *buffer == b && q0 == q1 => Some((*view, *q0)),
            _ => None,
        });
        if let (false, Some((view, q))) = (cx.node.leads(Shard::Buffer(b)), moved) {
            let now = cx.node.state.buffer(b).map_or(0, |x| x.version);
            let version = pending.map_or(now, |p| p.version.max(now));
            if !k.erases() {
                self.predicted = Some(Predicted { buffer: b, view, version, q });
            }
        }
        done
    }

    pub(super) fn key_in(&mut self, k: Key, cx: &mut Ctx) -> Result<(), InputError> {
        let Some((t, b, q0, q1)) = self.typing_target(cx) else { return Ok(()) };
        let len = cx.node.state.buffer(b)?.len();
        // A watching UI's predicted cursor may be past the text it has.
        let (q0, q1) = (q0.min(len), q1.min(len));
        // An erasing key with a selection cuts it first, into the snarf
        // buffer, and then erases as it would from the selection's start,
        // all one step (acme's `texttype` cuts before it looks at the key,
        // under the key's `seq`): its range runs to the selection's end.
        if q0 < q1 && matches!(k, Key::Backspace | Key::Ctrl('h' | 'w' | 'u')) {
            let cut = cx.slice(t, q0, q1);
            cx.snarf(cut)?;
        }
        let buf = cx.node.state.buffer(b)?;
        let buf_text = buf.text.clone();
        let at = |q: u64| buf.text.char(q as usize);
        let line_start = |q: u64| look::show_origin(buf, q);
        let line_end = |q: u64| {
            let mut e = q;
            while e < len && at(e) != '\n' {
                e += 1;
            }
            e
        };
        let erase = |from: u64| -> (u64, u64) { (from, q1) };
        // Keys that move the cursor or act on the text commit the run of
        // typing (acme's `typecommit`); scrolling keys leave it going.
        if !matches!(k, Key::Up | Key::Down | Key::PageUp | Key::PageDown) && !k.erases() {
            self.run = None;
        }
        // In a tag, Up and Down fold and unfold it (acme's Tagup and
        // Tagdown); End unfolds it too.
        if let Target::Tag(w) = t {
            match k {
                Key::Up => {
                    self.collapsed.insert(w);
                    return Ok(());
                }
                Key::Down => {
                    self.collapsed.remove(&w);
                    return Ok(());
                }
                Key::End => {
                    self.collapsed.remove(&w);
                }
                _ => {}
            }
        }
        match k {
            Key::Backspace | Key::Ctrl('h') => {
                let (a, z) = erase(q0.saturating_sub(1));
                self.erase(t, b, a, z, cx)
            }
            Key::Delete => {
                let (a, z) = if q0 < q1 { (q0, q1) } else { (q0, (q1 + 1).min(len)) };
                self.erase(t, b, a, z, cx)
            }
            Key::Ctrl('w') => {
                // Back over blanks, then over a word (or one other rune).
                let mut a = q0;
                while a > 0 && matches!(at(a - 1), ' ' | '\t') {
                    a -= 1;
                }
                let word = |c: char| c.is_alphanumeric() || c == '_';
                if a > 0 && word(at(a - 1)) {
                    while a > 0 && word(at(a - 1)) {
                        a -= 1;
                    }
                } else if a > 0 && at(a - 1) != '\n' {
                    a -= 1;
                }
                let (a, z) = erase(a);
                self.erase(t, b, a, z, cx)
            }
            Key::Ctrl('u') => {
                let s = line_start(q0);
                let (a, z) = erase(if s == q0 { q0.saturating_sub(1) } else { s });
                self.erase(t, b, a, z, cx)
            }
            Key::Ctrl('a') => {
                let q = line_start(q0);
                cx.select(t, q, q)?;
                cx.show(t, q)
            }
            Key::Ctrl('e') => {
                let q = line_end(q1);
                cx.select(t, q, q)?;
                cx.show(t, q)
            }
            Key::Left => {
                let q = if q0 < q1 { q0 } else { q0.saturating_sub(1) };
                cx.select(t, q, q)?;
                cx.show(t, q)
            }
            Key::Right => {
                let q = if q0 < q1 { q1 } else { (q1 + 1).min(len) };
                cx.select(t, q, q)?;
                cx.show(t, q)
            }
            // In a body Up and Down scroll a third of the window, Page Up
            // and Down two thirds (acme's `texttype`); the cursor stays.
            Key::Up | Key::Down | Key::PageUp | Key::PageDown => {
                let Some(frame) = cx.frame(t) else { return Ok(()) };
                let max = frame.capacity() as i32;
                let n = match k {
                    Key::Up | Key::Down => max / 3,
                    _ => 2 * max / 3,
                };
                let back = matches!(k, Key::Up | Key::PageUp);
                self.scroll_lines(t, if back { -n } else { n }, cx)
            }
            // Home and End go to the insertion point first when it is off
            // the screen above (Home) or below (End), else to the top or
            // the end of the text.
            Key::Home | Key::End => {
                let Some(shown) = cx.shown(t) else { return Ok(()) };
                let insertion = q0;
                let off = match k {
                    Key::Home => shown.org > insertion,
                    _ => insertion > shown.end,
                };
                match (off, k) {
                    (true, _) => cx.set_origin(t, show::back_lines(&buf_text, insertion, 1)),
                    (false, Key::Home) if shown.org > 0 => cx.set_origin(t, 0),
                    (false, Key::End) => cx.show(t, len),
                    _ => Ok(()),
                }
            }
            Key::Escape => {
                // Esc selects what was typed since the last click; with
                // text selected it cuts it, as acme does.
                if q0 < q1 {
                    let text = cx.slice(t, q0, q1);
                    cx.snarf(text)?;
                    self.typed_from = None;
                    self.run = None;
                    return self.erase(t, b, q0, q1, cx);
                }
                match self.typed_from {
                    Some((tt, from)) if tt == t && from < q0 => {
                        self.typed_from = None;
                        cx.select(t, from, q0)
                    }
                    _ => Ok(()),
                }
            }
            // Ctrl-C, X and V: Snarf, Cut and Paste on the focused text,
            // through the session's snarf buffer.
            Key::Ctrl('c') => {
                let text = cx.slice(t, q0, q1);
                match text.is_empty() {
                    true => Ok(()),
                    false => cx.snarf(text),
                }
            }
            Key::Ctrl('x') => {
                if q0 == q1 {
                    return Ok(());
                }
                let text = cx.slice(t, q0, q1);
                self.new_step(b, cx)?;
                cx.snarf(text)?;
                cx.splice(b, q0, q1, "")?;
                cx.select(t, q0, q0)
            }
            Key::Ctrl('v') => {
                let snarf = cx.node.state.layout.snarf.clone();
                self.new_step(b, cx)?;
                cx.splice(b, q0, q1, &snarf)?;
                cx.select(t, q0, q0 + snarf.chars().count() as u64)
            }
            Key::Ctrl('z') | Key::Ctrl('y') => {
                let p = match k {
                    Key::Ctrl('z') => Proposal::Undo { buffer: b },
                    _ => Proposal::Redo { buffer: b },
                };
                self.typed_from = None;
                apex_core::propose::apply(cx.node, &p).map(|_| ()).map_err(InputError::from)
            }
            // Keys only a terminal's program takes.
            Key::Ctrl(_) | Key::Alt(_) | Key::Insert | Key::F(_) => Ok(()),
        }
    }

    /// Erases `q0..q1` as an erasing key does: what the run of typing
    /// put there goes within the run's step; anything before it is a step
    /// of its own (acme's `seq` moves on with each key; its typing cache
    /// gives back what it holds without a record).
    pub(super) fn erase(&mut self, t: Target, b: BufferId, q0: u64, q1: u64, cx: &mut Ctx) -> Result<(), InputError> {
        if q0 >= q1 {
            return Ok(());
        }
        if !cx.node.leads(Shard::Buffer(b)) {
            return self.propose_typing(t, b, q0, q1, "", cx);
        }
        let typed_from = self.typed_from;
        match self.run.filter(|r| r.target == t && r.q0 + r.len == q1) {
            Some(r) if q0 >= r.q0 => {
                cx.splice(b, q0, q1, "")?;
                self.run = Some(super::Run { len: r.len - (q1 - q0), ..r });
            }
            Some(r) => {
                cx.splice(b, r.q0, q1, "")?;
                self.new_step(b, cx)?;
                cx.splice(b, q0, r.q0, "")?;
            }
            None => {
                self.new_step(b, cx)?;
                cx.splice(b, q0, q1, "")?;
            }
        }
        // Esc then selects from where the erasing left the cursor, or
        // from where typing began if that is before it.
        self.typed_from = match typed_from {
            Some((tt, from)) if tt == t => Some((t, from.min(q0))),
            _ => Some((t, q0)),
        };
        cx.select(t, q0, q0)
    }
}
