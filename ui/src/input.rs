//! The input layer: mouse and keyboard events, as the shell translates
//! them from the window system, become edits of the replica this UI
//! leads, and B2/B3 actions for the caller to carry out.
//!
//! Typing goes straight into the leader's node as the buffer's own entries
//! (one undo group per run of typing, as acme groups it), so a keystroke
//! never waits for the daemon; the shell flushes once a frame. Rules that
//! every UI shares come from core: what a double-click selects, what a
//! null B2/B3 click expands to, the tags' menus.

use crate::font::{Face, Fonts};
use crate::frame::Frame;
use crate::geom::{Metrics, Rect, Screen};
use apex_core::plumb::Plumb;
use apex_core::{
    cols, look, make, BufferId, BufferOp, ColumnId, Frac, Node, Op, Origin, Proposal, Shard, ViewId, WindowId,
};
use std::collections::BTreeSet;

/// A text on the screen that takes clicks and typing.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Target {
    RowTag,
    ColumnTag(ColumnId),
    Tag(WindowId),
    Body(WindowId),
}

/// The keys that are not text.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Key {
    Backspace,
    Delete,
    Left,
    Right,
    Up,
    Down,
    Home,
    End,
    PageUp,
    PageDown,
    Escape,
    /// A control character: `h`, `w`, `u`, `a`, `e`, `z` (undo), `y` (redo),
    /// `c`, `x`, `v` (snarf, cut, paste), `s` (Put), `f` (complete a file
    /// name).
    Ctrl(char),
}

/// An event from the shell, in pixels of the window.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Event {
    Press {
        button: u8,
        x: i32,
        y: i32,
    },
    Release {
        button: u8,
        x: i32,
        y: i32,
    },
    Motion {
        x: i32,
        y: i32,
    },
    /// Lines to scroll (positive: forward).
    Wheel {
        lines: i32,
        x: i32,
        y: i32,
    },
    /// Text typed, composed characters included.
    Text(String),
    Key(Key),
}

/// What the caller carries out.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Effect {
    /// B2 on `text` in a window (or a column or the row tag); `arg` is the
    /// last button-1 selection when button 1 was clicked during the sweep
    /// (acme's 2-1 chord).
    Execute { window: Option<WindowId>, column: Option<ColumnId>, text: String, arg: Option<String> },
    /// B3 on `text` in a window; `plumb` is what goes to a plumber, if
    /// one is posted (acme's `look3`), before core's look rules; `from`
    /// is where a search starts when the text is in the body itself (the
    /// end of the word clicked).
    Look { window: WindowId, text: String, plumb: Plumb, from: Option<u64> },
    /// ^F: complete the file name `path` + `prefix` before the cursor,
    /// `path` relative to the window's directory unless rooted.
    Complete { window: Option<WindowId>, path: String, prefix: String },
    /// The text was refused by the replica (not leading it, say).
    Refused(String),
}

/// Everything the input layer needs besides its own state.
pub struct Ctx<'a> {
    pub node: &'a mut Node,
    pub screen: &'a Screen,
    pub fonts: &'a mut Fonts,
    pub metrics: Metrics,
    /// Changes to shards this UI does not lead (it is watching another
    /// UI): proposals for the leader, for the caller to send.
    pub outbox: Vec<Proposal>,
}

/// Where typing in a buffer this UI does not lead has got to: the
/// proposals sent are not applied yet, so the next keystroke goes after
/// them, at the version they will have made.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Predicted {
    buffer: BufferId,
    view: ViewId,
    version: u64,
    q: u64,
}

/// A sweep of a mouse button in a text.
#[derive(Clone, Copy, Debug)]
struct Sweep {
    button: u8,
    target: Target,
    anchor: u64,
    /// What chords did meanwhile.
    chord: Chord,
}

/// A layout box held down: a window's or a column's.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Held {
    Window(WindowId),
    Column(ColumnId),
}

/// A layout box pressed with `button` at (`x`, `y`).
#[derive(Clone, Copy, Debug)]
struct BoxDrag {
    button: u8,
    held: Held,
    x: i32,
    y: i32,
    /// Another button went down meanwhile: nothing happens (acme).
    cancelled: bool,
}

/// Where acme's chords have got to during a sweep.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
enum Chord {
    #[default]
    None,
    /// 1-2: the selection was cut (from `q0..q1`).
    Cut { q0: u64, q1: u64 },
    /// 1-3: the snarf buffer was pasted over `q0..q1`.
    Paste { q0: u64, q1: u64 },
    /// 2-1: the last button-1 selection is the command's argument.
    Argument,
    /// 2-3 or 3-1: the action is cancelled.
    Cancelled,
}

/// The input layer's own state: the focus, a sweep under way, the last
/// click (for double-clicks) and the start of the current run of typing
/// (for Esc).
#[derive(Debug, Default)]
pub struct Input {
    pub focus: Option<Target>,
    sweep: Option<Sweep>,
    last_click: Option<(Target, u64, u64)>,
    typed_from: Option<(Target, u64)>,
    /// The column Up and Down keep, in pixels.
    column_x: Option<i32>,
    /// Windows whose tag this UI shows on one line (Up in a tag; Down,
    /// End or a typed newline there expands it again, as in acme).
    pub collapsed: BTreeSet<WindowId>,
    /// The text last selected with button 1 (acme's `argtext`, for 2-1).
    last_selected: Option<Target>,
    /// A layout box held down.
    held: Option<BoxDrag>,
    /// Typing not yet applied by the leader, when watching.
    predicted: Option<Predicted>,
}

/// `part` of `whole` pixels as a layout fraction, within `0..=ONE`.
fn frac_of(part: i32, whole: i32) -> u32 {
    let whole = i64::from(whole.max(1));
    let part = i64::from(part).clamp(0, whole);
    (part * i64::from(Frac::ONE.0) / whole) as u32
}

/// Two clicks this close in time (ms) at one place are a double-click.
pub const DOUBLE_CLICK_MS: u64 = 500;

impl Ctx<'_> {
    /// The buffer and view of a target.
    fn text_of(&self, t: Target) -> Option<(BufferId, ViewId)> {
        let st = &self.node.state;
        match t {
            Target::RowTag => st.layout.row_tag.map(|b| (b, ViewId::TopRow)),
            Target::ColumnTag(c) => st.layout.columns.iter().find(|x| x.id == c).map(|x| (x.tag, ViewId::ColumnTag(c))),
            Target::Tag(w) => st.window(w).ok().map(|x| (x.tag, ViewId::WindowTag(w))),
            Target::Body(w) => st.window(w).ok().map(|x| (x.body, ViewId::WindowBody(w))),
        }
    }

    /// The rectangle a target's text is laid out in.
    fn rect_of(&self, t: Target) -> Option<Rect> {
        match t {
            Target::RowTag => Some(self.screen.row_tag),
            Target::ColumnTag(c) => self.screen.columns.iter().find(|x| x.id == c).map(|x| x.tag),
            Target::Tag(w) => self.screen.window(w).map(|x| x.tag),
            Target::Body(w) => self.screen.window(w).map(|x| x.body),
        }
    }

    /// The target's text laid out as it is drawn.
    pub fn frame(&mut self, t: Target) -> Option<Frame> {
        let (b, view) = self.text_of(t)?;
        let rect = self.rect_of(t)?;
        let (face, tab) = match t {
            Target::Body(w) => {
                let f = &self.node.state.window(w).ok()?.flags;
                (Face::for_setting(f.font.as_deref()), f.tab.unwrap_or(apex_core::exec::DEFAULT_TAB))
            }
            _ => (Face::Proportional, apex_core::exec::DEFAULT_TAB),
        };
        let line = self.fonts.line_height() as i32;
        let buf = self.node.state.buffer(b).ok()?;
        let org = buf.views.get(&view).map_or(0, |v| v.org);
        Some(Frame::new(buf.text.rope(), org, rect, self.fonts.face(face), line, tab))
    }

    /// The text target under a point, and whether it is a window's scroll
    /// bar instead.
    fn hit(&self, x: i32, y: i32) -> Option<(Target, bool)> {
        if self.screen.row_tag.contains(x, y) {
            return Some((Target::RowTag, false));
        }
        for c in &self.screen.columns {
            if c.tag_line.contains(x, y) {
                return Some((Target::ColumnTag(c.id), false));
            }
            for w in &c.windows {
                if w.tag_line.contains(x, y) {
                    return Some((Target::Tag(w.id), false));
                }
                if w.scroll.contains(x, y) {
                    return Some((Target::Body(w.id), true));
                }
                if w.rect.contains(x, y) && y >= w.body.y0 {
                    return Some((Target::Body(w.id), false));
                }
            }
        }
        None
    }

    /// The layout box under a point, if any.
    fn layout_box(&self, x: i32, y: i32) -> Option<Held> {
        for c in &self.screen.columns {
            if c.layout_box.contains(x, y) {
                return Some(Held::Column(c.id));
            }
            if let Some(w) = c.windows.iter().find(|w| w.layout_box.contains(x, y)) {
                return Some(Held::Window(w.id));
            }
        }
        None
    }

    /// The column whose span of the screen holds `x` (the nearest at the
    /// edges).
    fn column_at(&self, x: i32) -> Option<ColumnId> {
        let cols = &self.screen.columns;
        let found = cols.iter().find(|c| x >= c.rect.x0 && x < c.rect.x1 + self.metrics.border);
        found.or(if x < 0 { cols.first() } else { cols.last() }).map(|c| c.id)
    }

    fn selection(&self, t: Target) -> Option<(BufferId, ViewId, u64, u64)> {
        let (b, view) = self.text_of(t)?;
        let buf = self.node.state.buffer(b).ok()?;
        let v = buf.views.get(&view).copied().unwrap_or_default();
        Some((b, view, v.q0.min(buf.len()), v.q1.min(buf.len())))
    }

    fn append(&mut self, b: BufferId, op: BufferOp) -> Result<(), String> {
        if !self.node.leads(Shard::Buffer(b)) {
            // Watching: the leader applies it, as it would a tool's.
            let version = self.node.state.buffer(b).map_err(|e| e.to_string())?.version;
            let p = match op {
                BufferOp::Splice { q0, q1, text, origin } => Proposal::splice(b, version, q0, q1, text, origin),
                BufferOp::Select { view, q0, q1 } => Proposal::Select { buffer: b, view, version, q0, q1 },
                BufferOp::SetOrigin { view, org } => Proposal::SetOrigin { buffer: b, view, version, org },
                BufferOp::ExecAt(action) => Proposal::Exec { buffer: b, action: *action },
                BufferOp::LookAt(action) => Proposal::Look { buffer: b, action: *action },
                // Undo groups are the leader's to mark.
                _ => return Ok(()),
            };
            self.outbox.push(p);
            return Ok(());
        }
        self.node.append(Shard::Buffer(b), Op::Buffer(op)).map(|_| ()).map_err(|e| e.to_string())
    }

    /// Sets the session's snarf buffer: here when this UI leads the
    /// layout, else by a proposal to the leader.
    fn snarf(&mut self, text: String) -> Result<(), String> {
        let p = Proposal::Snarf { text };
        if !self.node.leads(Shard::Layout) {
            self.outbox.push(p);
            return Ok(());
        }
        apex_core::propose::apply(self.node, &p).map(|_| ()).map_err(|e| e.to_string())
    }

    fn select(&mut self, t: Target, q0: u64, q1: u64) -> Result<(), String> {
        let Some((b, view)) = self.text_of(t) else { return Ok(()) };
        self.append(b, BufferOp::Select { view, q0: q0.min(q1), q1: q0.max(q1) })
    }

    fn set_origin(&mut self, t: Target, org: u64) -> Result<(), String> {
        let Some((b, view)) = self.text_of(t) else { return Ok(()) };
        self.append(b, BufferOp::SetOrigin { view, org })
    }

    /// Replaces `q0..q1` of the target's text with `text` as typing does.
    fn splice(&mut self, b: BufferId, q0: u64, q1: u64, text: &str) -> Result<(), String> {
        if q0 == q1 && text.is_empty() {
            return Ok(());
        }
        let op = BufferOp::Splice { q0, q1, text: text.to_string(), origin: Origin::Keyboard };
        self.append(b, op)?;
        make::settag(self.node, b, Origin::Keyboard).map_err(|e| e.to_string())
    }

    /// The text of `q0..q1` of the target.
    fn slice(&self, t: Target, q0: u64, q1: u64) -> String {
        self.text_of(t)
            .and_then(|(b, _)| self.node.state.buffer(b).ok())
            .and_then(|b| b.slice(q0, q1).ok())
            .unwrap_or_default()
    }

    fn window_of(t: Target) -> Option<WindowId> {
        match t {
            Target::Tag(w) | Target::Body(w) => Some(w),
            _ => None,
        }
    }
}

impl Input {
    /// Handles one event at `now_ms`; returns what the caller must do.
    pub fn handle(&mut self, ev: Event, now_ms: u64, cx: &mut Ctx) -> Vec<Effect> {
        let r = match ev {
            Event::Press { button, x, y } => self.press(button, x, y, now_ms, cx),
            Event::Motion { x, y } => self.motion(x, y, cx).map(|_| Vec::new()),
            Event::Release { button, x, y } => self.release(button, x, y, now_ms, cx),
            Event::Wheel { lines, x, y } => match cx.hit(x, y) {
                Some((t @ Target::Body(_), _)) => self.scroll_lines(t, lines, cx).map(|_| Vec::new()),
                _ => Ok(Vec::new()),
            },
            Event::Text(s) => self.typed(&s, cx).map(|_| Vec::new()),
            // Ctrl-S is Put, for the window typing goes to.
            Event::Key(Key::Ctrl('s')) => Ok(match self.focus.and_then(Ctx::window_of) {
                Some(w) => vec![Effect::Execute { window: Some(w), column: None, text: "Put".into(), arg: None }],
                None => Vec::new(),
            }),
            Event::Key(Key::Ctrl('f')) => self.complete(cx),
            Event::Key(k) => self.key(k, cx).map(|_| Vec::new()),
        };
        r.unwrap_or_else(|e| vec![Effect::Refused(e)])
    }

    fn press(&mut self, button: u8, x: i32, y: i32, now: u64, cx: &mut Ctx) -> Result<Vec<Effect>, String> {
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
        self.column_x = None;
        if button == 1 {
            self.focus = Some(t);
            self.typed_from = None;
            self.predicted = None;
            // The layout records the focus, so acme's log reports it.
            if let Some(w) = Ctx::window_of(t).filter(|w| cx.node.state.layout.focus != Some(*w)) {
                let op = apex_core::LayoutOp::Focus { window: Some(w) };
                cx.node.append(Shard::Layout, Op::Layout(op)).map_err(|e| e.to_string())?;
            }
            let double = self.last_click.is_some_and(|(lt, lq, at)| lt == t && lq == q && now - at <= DOUBLE_CLICK_MS);
            if double {
                let (b, _) = cx.text_of(t).ok_or("gone")?;
                let (q0, q1) = look::double_click(cx.node.state.buffer(b).map_err(|e| e.to_string())?, q);
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
    fn chord(&mut self, mut s: Sweep, button: u8, cx: &mut Ctx) -> Result<(), String> {
        let t = s.target;
        let body = matches!(t, Target::Body(_));
        s.chord = match (s.button, button, s.chord) {
            (1, 2, Chord::Paste { q0, q1 }) if body => {
                self.undo_step(t, q0, q1, cx)?;
                Chord::None
            }
            (1, 2, Chord::Cut { q0, q1 }) => Chord::Cut { q0, q1 },
            (1, 2, _) => {
                let (b, _, q0, q1) = cx.selection(t).ok_or("gone")?;
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
                let (b, _, q0, q1) = cx.selection(t).ok_or("gone")?;
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

    /// A layout box let go (acme's `coldragwin` and `rowdragcol`): a click
    /// on a window's grows it (button 1 some, 2 most, 3 the whole column),
    /// a drag moves it within or across columns, or resizes it against
    /// the one above; a column's box dragged moves the column's edge.
    fn let_go(&mut self, d: BoxDrag, x: i32, y: i32, cx: &mut Ctx) -> Result<(), String> {
        if d.cancelled {
            return Ok(());
        }
        let slop = cx.metrics.gap + 1;
        let still = (x - d.x).abs() < slop && (y - d.y).abs() < slop;
        let layout = &cx.node.state.layout;
        let proposal = match d.held {
            Held::Window(w) => {
                let (ci, _) = layout.find(w).ok_or("the window is gone")?;
                let col = &layout.columns[ci];
                let geom = cx.screen.columns.iter().find(|g| g.id == col.id).ok_or("the column is gone")?;
                let area = geom.area;
                let line = frac_of(cx.metrics.line, area.height());
                if still {
                    let how = match d.button {
                        1 => cols::Grow::Some,
                        2 => cols::Grow::Most,
                        _ => cols::Grow::Full,
                    };
                    Some(Proposal::Arrange { column: col.id, tops: cols::grow(col, w, how, line) })
                } else {
                    // A flick to the right tosses it to the next column.
                    let width = geom.rect.width();
                    let flick = (y - d.y).abs() < 10 && x > d.x + 30 && geom.rect.contains(x, geom.rect.y0);
                    let x = if flick { d.x + width } else { x };
                    let to = cx.column_at(x).unwrap_or(col.id);
                    let to_area = cx.screen.columns.iter().find(|g| g.id == to).map_or(area, |g| g.area);
                    let at = Frac(frac_of(y - to_area.y0, to_area.height()));
                    match cols::drag(layout, w, to, at, line) {
                        cols::Drag::Nothing => None,
                        cols::Drag::Move { column, y } => Some(Proposal::MoveWindow { window: w, column, y }),
                        cols::Drag::Arrange { column, tops } => Some(Proposal::Arrange { column, tops }),
                    }
                }
            }
            Held::Column(c) if !still => {
                let min = frac_of(cx.metrics.indent() + 80, cx.screen.width);
                let at = Frac(frac_of(x, cx.screen.width));
                cols::drag_column(layout, c, at, min).map(|x| Proposal::MoveColumn { column: c, x })
            }
            Held::Column(_) => None,
        };
        match proposal {
            Some(p) => apex_core::propose::apply(cx.node, &p).map(|_| ()).map_err(|e| e.to_string()),
            None => Ok(()),
        }
    }

    /// Starts an undo step of its own in `b` (a chord's cut or paste).
    fn new_step(&mut self, b: BufferId, cx: &mut Ctx) -> Result<(), String> {
        self.typed_from = None;
        let group = cx.node.new_group().map_err(|e| e.to_string())?;
        cx.append(b, BufferOp::Mark { group })
    }

    /// Undoes a chord's last step and selects what was selected before it.
    fn undo_step(&mut self, t: Target, q0: u64, q1: u64, cx: &mut Ctx) -> Result<(), String> {
        let (b, _) = cx.text_of(t).ok_or("gone")?;
        apex_core::propose::apply(cx.node, &Proposal::Undo { buffer: b }).map_err(|e| e.to_string())?;
        cx.select(t, q0, q1)
    }

    fn motion(&mut self, x: i32, y: i32, cx: &mut Ctx) -> Result<(), String> {
        let Some(s) = self.sweep.filter(|s| s.button == 1 && s.chord == Chord::None) else { return Ok(()) };
        let Some(frame) = cx.frame(s.target) else { return Ok(()) };
        let q = frame.rune_at(x, y);
        cx.select(s.target, s.anchor.min(q), s.anchor.max(q))
    }

    fn release(&mut self, button: u8, x: i32, y: i32, _now: u64, cx: &mut Ctx) -> Result<Vec<Effect>, String> {
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
        if q0 == q1 {
            let (b, _) = cx.text_of(s.target).ok_or("gone")?;
            let buf = cx.node.state.buffer(b).map_err(|e| e.to_string())?;
            // A click inside the selection acts on the selection, as acme.
            let sel = cx.selection(s.target).map(|(_, _, a, z)| (a, z)).unwrap_or_default();
            (q0, q1) = match sel.0 < sel.1 && (sel.0..=sel.1).contains(&q0) {
                true => sel,
                false => {
                    plumb = Plumb::around(buf, q0);
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
            let version = cx.node.state.buffer(b).map_err(|e| e.to_string())?.version;
            let expanded = swept != (q0, q1);
            let builtin = button == 2 && look::is_builtin(&text);
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
                vec![Effect::Look { window, text, plumb, from }]
            }
            _ => Vec::new(),
        })
    }

    fn motion_to(&mut self, s: Sweep, x: i32, y: i32, cx: &mut Ctx) -> Result<(), String> {
        self.sweep = Some(s);
        let r = self.motion(x, y, cx);
        self.sweep = None;
        r
    }

    /// acme's scroll bar: B1 back and B3 forward by as many lines as the
    /// click is below the bar's top, B2 to the proportional place.
    fn scroll_click(&mut self, t: Target, button: u8, y: i32, cx: &mut Ctx) -> Result<(), String> {
        let Some(rect) = cx.rect_of(t) else { return Ok(()) };
        let lines = ((y - rect.y0) / cx.metrics.line.max(1)).max(1);
        match button {
            1 => self.scroll_lines(t, -lines, cx),
            3 => self.scroll_lines(t, lines, cx),
            2 => {
                let (b, _) = cx.text_of(t).ok_or("gone")?;
                let buf = cx.node.state.buffer(b).map_err(|e| e.to_string())?;
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
    pub fn scroll_lines(&mut self, t: Target, lines: i32, cx: &mut Ctx) -> Result<(), String> {
        let Some(frame) = cx.frame(t) else { return Ok(()) };
        let (b, _) = cx.text_of(t).ok_or("gone")?;
        let buf = cx.node.state.buffer(b).map_err(|e| e.to_string())?;
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

    /// The target typing goes to, and where its selection is (where the
    /// typing this UI sent the leader will have left it, when watching).
    fn typing_target(&self, cx: &Ctx) -> Option<(Target, BufferId, u64, u64)> {
        let t = self.focus?;
        let (b, _, q0, q1) = cx.selection(t)?;
        match self.pending(cx, b) {
            Some(p) => Some((t, b, p.q, p.q)),
            None => Some((t, b, q0, q1)),
        }
    }

    /// The prediction for `b`, while the leader has not applied it yet:
    /// the edit (the version is behind), or the cursor move after it (an
    /// entry of its own, which may come in a later frame).
    fn pending(&self, cx: &Ctx, b: BufferId) -> Option<Predicted> {
        let p = self.predicted.filter(|p| p.buffer == b)?;
        let buf = cx.node.state.buffer(b).ok()?;
        let moved = buf.views.get(&p.view).is_some_and(|v| (v.q0, v.q1) == (p.q, p.q));
        (buf.version < p.version || (buf.version == p.version && !moved)).then_some(p)
    }

    /// Watching: replaces `q0..q1` of the target's text with `text` and
    /// moves its cursor after it, as proposals for the leader, at the
    /// version the typing sent before will have made.
    fn propose_typing(
        &mut self,
        t: Target,
        b: BufferId,
        q0: u64,
        q1: u64,
        text: &str,
        cx: &mut Ctx,
    ) -> Result<(), String> {
        let (_, view) = cx.text_of(t).ok_or("gone")?;
        let version = match self.pending(cx, b) {
            Some(p) => p.version,
            None => cx.node.state.buffer(b).map_err(|e| e.to_string())?.version,
        };
        let q = q0 + text.chars().count() as u64;
        cx.outbox.push(Proposal::splice(b, version, q0, q1, text.to_string(), Origin::Keyboard));
        cx.outbox.push(Proposal::Select { buffer: b, view, version: version + 1, q0: q, q1: q });
        self.predicted = Some(Predicted { buffer: b, view, version: version + 1, q });
        Ok(())
    }

    /// Typed text replaces the selection; a run of typing is one undo
    /// group.
    fn typed(&mut self, s: &str, cx: &mut Ctx) -> Result<(), String> {
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
                let buf = cx.node.state.buffer(b).map_err(|e| e.to_string())?;
                let start = look::show_origin(buf, q0);
                let blanks: String =
                    buf.slice(start, q0).unwrap_or_default().chars().take_while(|c| *c == ' ' || *c == '\t').collect();
                format!("\n{blanks}")
            }
            _ => s,
        };
        if self.typed_from.is_none_or(|(tt, _)| tt != t) {
            let group = cx.node.new_group().map_err(|e| e.to_string())?;
            cx.append(b, BufferOp::Mark { group })?;
            self.typed_from = Some((t, q0));
        }
        if let (Target::Tag(w), true) = (t, s.contains('\n')) {
            self.collapsed.remove(&w);
        }
        if !cx.node.leads(Shard::Buffer(b)) {
            return self.propose_typing(t, b, q0, q1, &s, cx);
        }
        cx.splice(b, q0, q1, &s)?;
        let q = q0 + s.chars().count() as u64;
        self.column_x = None;
        cx.select(t, q, q)
    }

    /// ^F (acme's `textcomplete`): the selection goes as typing would take
    /// it, then the file name before the cursor is for the caller to
    /// complete (it lists the directory).
    fn complete(&mut self, cx: &mut Ctx) -> Result<Vec<Effect>, String> {
        let Some((t, b, q0, q1)) = self.typing_target(cx) else { return Ok(Vec::new()) };
        // Nothing to complete (the cursor is inside a word): the selection
        // stays, as acme's textcomplete leaves it.
        let buf = cx.node.state.buffer(b).map_err(|e| e.to_string())?;
        let at = q1.min(buf.len());
        if at < buf.len() && buf.text.char(at as usize) > ' ' {
            return Ok(Vec::new());
        }
        if q0 < q1 {
            self.erase(t, b, q0, q1, cx)?;
        }
        let buf = cx.node.state.buffer(b).map_err(|e| e.to_string())?;
        Ok(match look::completion_at(buf, q0.min(buf.len())) {
            Some((path, prefix)) => vec![Effect::Complete { window: Ctx::window_of(t), path, prefix }],
            None => Vec::new(),
        })
    }

    fn key(&mut self, k: Key, cx: &mut Ctx) -> Result<(), String> {
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
            if !matches!(k, Key::Backspace | Key::Delete | Key::Ctrl('h' | 'w' | 'u')) {
                self.predicted = Some(Predicted { buffer: b, view, version, q });
            }
        }
        done
    }

    fn key_in(&mut self, k: Key, cx: &mut Ctx) -> Result<(), String> {
        let Some((t, b, q0, q1)) = self.typing_target(cx) else { return Ok(()) };
        let buf = cx.node.state.buffer(b).map_err(|e| e.to_string())?;
        let len = buf.len();
        // A watching UI's predicted cursor may be past the text it has.
        let (q0, q1) = (q0.min(len), q1.min(len));
        let at = |q: u64| buf.text.char(q as usize);
        let line_start = |q: u64| look::show_origin(buf, q);
        let line_end = |q: u64| {
            let mut e = q;
            while e < len && at(e) != '\n' {
                e += 1;
            }
            e
        };
        // Erasing keys take the selection if there is one.
        let erase = |from: u64| -> (u64, u64) {
            if q0 < q1 {
                (q0, q1)
            } else {
                (from, q0)
            }
        };
        let vertical = matches!(k, Key::Up | Key::Down);
        if !vertical {
            self.column_x = None;
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
            Key::Ctrl('a') => cx.select(t, line_start(q0), line_start(q0)),
            Key::Ctrl('e') => cx.select(t, line_end(q1), line_end(q1)),
            Key::Left => {
                let q = if q0 < q1 { q0 } else { q0.saturating_sub(1) };
                cx.select(t, q, q)
            }
            Key::Right => {
                let q = if q0 < q1 { q1 } else { (q1 + 1).min(len) };
                cx.select(t, q, q)
            }
            Key::Up | Key::Down => {
                let Some(frame) = cx.frame(t) else { return Ok(()) };
                let Some((x, y)) = frame.point_of(q0) else { return Ok(()) };
                let x = *self.column_x.get_or_insert(x);
                let dy = if k == Key::Up { -frame.line_height } else { frame.line_height };
                let y = y + dy;
                if y < frame.rect.y0 || y >= frame.rect.y0 + frame.lines.len() as i32 * frame.line_height {
                    // Off the frame: scroll a line, then move.
                    self.scroll_lines(t, if k == Key::Up { -1 } else { 1 }, cx)?;
                    let Some(frame) = cx.frame(t) else { return Ok(()) };
                    let y = y.clamp(frame.rect.y0, frame.rect.y1 - 1);
                    let q = frame.rune_at(x, y);
                    return cx.select(t, q, q);
                }
                let q = frame.rune_at(x, y);
                cx.select(t, q, q)
            }
            Key::Home => cx.set_origin(t, 0),
            Key::End => {
                let org = line_start(len);
                cx.set_origin(t, org)
            }
            Key::PageUp | Key::PageDown => {
                let Some(frame) = cx.frame(t) else { return Ok(()) };
                let n = frame.capacity().max(2) as i32 - 1;
                self.scroll_lines(t, if k == Key::PageUp { -n } else { n }, cx)
            }
            Key::Escape => {
                // Esc selects what was typed since the last click; with
                // text selected it cuts it, as acme does.
                if q0 < q1 {
                    let text = cx.slice(t, q0, q1);
                    cx.snarf(text)?;
                    self.typed_from = None;
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
                apex_core::propose::apply(cx.node, &p).map(|_| ()).map_err(|e| e.to_string())
            }
            Key::Ctrl(_) => Ok(()),
        }
    }

    fn erase(&mut self, t: Target, b: BufferId, q0: u64, q1: u64, cx: &mut Ctx) -> Result<(), String> {
        if q0 >= q1 {
            return Ok(());
        }
        if !cx.node.leads(Shard::Buffer(b)) {
            return self.propose_typing(t, b, q0, q1, "", cx);
        }
        if self.typed_from.is_none_or(|(tt, _)| tt != t) {
            let group = cx.node.new_group().map_err(|e| e.to_string())?;
            cx.append(b, BufferOp::Mark { group })?;
            self.typed_from = Some((t, q0));
        }
        if let Some((_, from)) = self.typed_from.as_mut() {
            *from = (*from).min(q0);
        }
        cx.splice(b, q0, q1, "")?;
        cx.select(t, q0, q0)
    }
}
