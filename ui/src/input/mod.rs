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
use crate::geom::{Metrics, Screen};
use crate::rect::Rect;
use apex_core::plumb::Plumb;
use apex_core::show::Shown;
use apex_core::{
    make, BufferId, BufferOp, ColumnId, Frac, Node, Op, Origin, Proposal, Shard, TermId, ViewId, WindowId,
};
use std::collections::BTreeSet;

mod boxes;
mod keys;
mod mouse;
mod scroll;
pub mod termkeys;
mod termmouse;

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
    /// name); in a terminal, whatever the program makes of it.
    Ctrl(char),
    /// Alt with a character (a terminal's program gets ESC and it).
    Alt(char),
    Insert,
    /// A function key, F1 to F12.
    F(u8),
}

impl Key {
    /// Whether the key erases text (and so continues a run of typing).
    pub fn erases(self) -> bool {
        matches!(self, Key::Backspace | Key::Delete | Key::Ctrl('h' | 'w' | 'u'))
    }
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
    /// Notches of the wheel turned (positive: forward, down the text).
    Wheel {
        notches: i32,
        x: i32,
        y: i32,
    },
    /// Text typed, composed characters included.
    Text(String),
    Key(Key),
}

/// Why an event changed nothing: the replica refused the edit, or the
/// text it was aimed at went away meanwhile (another party closed it).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum InputError {
    #[error(transparent)]
    Refused(#[from] apex_core::Reject),
    #[error("the text is gone (its window or column was closed)")]
    Gone,
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
    /// `word` is the word around a null click, looked for when `text`
    /// names no file (acme's `expand`).
    Look { window: WindowId, text: String, word: Option<String>, plumb: Plumb, from: Option<u64> },
    /// ^F: complete the file name `path` + `prefix` before the cursor,
    /// `path` relative to the window's directory unless rooted.
    Complete { window: Option<WindowId>, path: String, prefix: String },
    /// The event was refused (the replica refused its edit, say).
    Refused(InputError),
    /// Bytes typed into the terminal a window shows, for its program.
    TermInput { term: TermId, bytes: Vec<u8> },
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

/// The input layer's own state: where the pointer is, the text last
/// clicked, a sweep under way, the last click (for double-clicks) and
/// the run of typing under way (for Esc and undo).
#[derive(Debug, Default)]
pub struct Input {
    /// The text last clicked with button 1.
    pub focus: Option<Target>,
    /// The text last clicked with any button (acme's `barttext`): where
    /// typing goes with click-to-type.
    clicked: Option<Target>,
    /// Where the pointer was at the last event: typing goes to the text
    /// under it, as in acme.
    pointer: Option<(i32, i32)>,
    /// acme's `-b`: typing goes to the text last clicked instead.
    pub click_to_type: bool,
    /// How far a wheel notch scrolls (`$mousescrollsize`).
    pub scroll_size: ScrollSize,
    sweep: Option<Sweep>,
    last_click: Option<(Target, u64, u64)>,
    /// Where Esc's selection of what was typed starts (acme's `eq0`).
    typed_from: Option<(Target, u64)>,
    /// The run of typing not yet committed (acme's typing cache): one
    /// undo step until a newline, a cursor key, Esc or the mouse ends it.
    run: Option<Run>,
    /// Windows whose tag this UI shows on one line (Up in a tag; Down,
    /// End or a typed newline there expands it again, as in acme).
    pub collapsed: BTreeSet<WindowId>,
    /// The text last selected with button 1 (acme's `argtext`, for 2-1).
    last_selected: Option<Target>,
    /// A layout box held down.
    held: Option<BoxDrag>,
    /// Typing not yet applied by the leader, when watching.
    predicted: Option<Predicted>,
    /// Where the pointer is to be moved (acme's `moveto`).
    pub warp: Option<Warp>,
    /// How this UI looks at each terminal a window shows.
    pub term_views: crate::termview::TermViews,
    /// A button held over a terminal's text.
    term_sweep: Option<termmouse::TermSweep>,
    /// The last button-1 click on a terminal's text, for a double-click.
    term_click: Option<(WindowId, crate::termview::Cell, u64)>,
}

/// Where acme moves the pointer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Warp {
    /// The middle of a window's layout box, on the tag's first line: after
    /// the box was clicked or dragged (acme's `winmousebut`).
    LayoutBox(WindowId),
    /// Onto the start of a body's selection, 4 pixels right and the
    /// line's height less 4 down, so that another B3 there looks for the
    /// same text again (acme's `look3`).
    Selection(WindowId),
    /// To a point: down with a body its tag pushed down as it grew, so
    /// the pointer stays in the text it was in (acme's `winresize`).
    Point(i32, i32),
    /// Just right of and below a new window's layout box, in its body
    /// (acme's `coladd`: "near the button, but in the body").
    NewWindow(WindowId),
}

/// Typing under way in a text since its last commit: it started at `q0`
/// and is `len` runes long now.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Run {
    target: Target,
    q0: u64,
    len: u64,
}

/// libdraw's `mousescrollsize`: lines a wheel notch scrolls, or a
/// percentage of the lines the frame has room for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ScrollSize {
    Lines(u32),
    Percent(u32),
}

impl Default for ScrollSize {
    fn default() -> ScrollSize {
        ScrollSize::Lines(1)
    }
}

impl ScrollSize {
    /// From `$mousescrollsize`'s value: `N` lines, or `N%` of the frame;
    /// anything else (or nothing) is one line.
    pub fn parse(setting: Option<&str>) -> ScrollSize {
        let Some(v) = setting.map(str::trim) else { return ScrollSize::default() };
        let number = |s: &str| s.trim().parse::<f64>().ok().filter(|n| n.is_finite() && *n >= 1.0);
        match v.strip_suffix('%') {
            Some(p) => number(p).map_or_else(ScrollSize::default, |n| ScrollSize::Percent(n.min(100.0) as u32)),
            None => number(v).map_or_else(ScrollSize::default, |n| ScrollSize::Lines(n as u32)),
        }
    }

    /// Lines a notch scrolls in a frame with room for `max_lines`; at
    /// least one.
    pub fn lines(self, max_lines: usize) -> i32 {
        let n = match self {
            ScrollSize::Lines(n) => n as usize,
            ScrollSize::Percent(p) => p as usize * max_lines / 100,
        };
        n.clamp(1, i32::MAX as usize) as i32
    }
}

impl Input {
    /// An input layer with acme's defaults: point to type, and the wheel
    /// as `$mousescrollsize` says.
    pub fn new() -> Input {
        let size = std::env::var("mousescrollsize").ok();
        Input { scroll_size: ScrollSize::parse(size.as_deref()), ..Input::default() }
    }
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
        self.frame_at(t, None)
    }

    /// [`Ctx::frame`] as it would be from origin `org` (else the view's).
    pub fn frame_at(&mut self, t: Target, org: Option<u64>) -> Option<Frame> {
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
        let org = org.unwrap_or_else(|| buf.views.get(&view).map_or(0, |v| v.org));
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

    fn append(&mut self, b: BufferId, op: BufferOp) -> Result<(), InputError> {
        if !self.node.leads(Shard::Buffer(b)) {
            // Watching: the leader applies it, as it would a tool's.
            let version = self.node.state.buffer(b)?.version;
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
        self.node.append(Shard::Buffer(b), Op::Buffer(op)).map(|_| ()).map_err(InputError::from)
    }

    /// Sets the session's snarf buffer: here when this UI leads the
    /// layout, else by a proposal to the leader.
    fn snarf(&mut self, text: String) -> Result<(), InputError> {
        let p = Proposal::Snarf { text };
        if !self.node.leads(Shard::Layout) {
            self.outbox.push(p);
            return Ok(());
        }
        apex_core::propose::apply(self.node, &p).map(|_| ()).map_err(InputError::from)
    }

    fn select(&mut self, t: Target, q0: u64, q1: u64) -> Result<(), InputError> {
        let Some((b, view)) = self.text_of(t) else { return Ok(()) };
        self.append(b, BufferOp::Select { view, q0: q0.min(q1), q1: q0.max(q1) })
    }

    fn set_origin(&mut self, t: Target, org: u64) -> Result<(), InputError> {
        let Some((b, view)) = self.text_of(t) else { return Ok(()) };
        self.append(b, BufferOp::SetOrigin { view, org })
    }

    /// Replaces `q0..q1` of the target's text with `text` as typing does.
    fn splice(&mut self, b: BufferId, q0: u64, q1: u64, text: &str) -> Result<(), InputError> {
        if q0 == q1 && text.is_empty() {
            return Ok(());
        }
        // Led here, a long paste goes in entries of bounded size.
        match self.node.leads(Shard::Buffer(b)) {
            true => self.node.append_splice(b, q0, q1, text, Origin::Keyboard)?,
            false => self.append(b, BufferOp::Splice { q0, q1, text: text.to_string(), origin: Origin::Keyboard })?,
        }
        make::settag(self.node, b, Origin::Keyboard)?;
        Ok(())
    }

    /// What the target's frame shows now.
    fn shown(&mut self, t: Target) -> Option<Shown> {
        self.frame(t).map(|f| f.shown())
    }

    /// Scrolls a body so that rune `q` is shown, as acme's `textshow`
    /// (a tag shows all its text).
    fn show(&mut self, t: Target, q: u64) -> Result<(), InputError> {
        let Target::Body(w) = t else { return Ok(()) };
        let Some(shown) = self.shown(t) else { return Ok(()) };
        let (b, _) = self.text_of(t).ok_or(InputError::Gone)?;
        let events = self.node.state.window(w).is_ok_and(|w| w.event_reader.is_some());
        match apex_core::show::show(&self.node.state.buffer(b)?.text, shown, q, events) {
            Some(org) => self.set_origin(t, org),
            None => Ok(()),
        }
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
        if let Event::Press { x, y, .. }
        | Event::Release { x, y, .. }
        | Event::Motion { x, y }
        | Event::Wheel { x, y, .. } = ev
        {
            self.pointer_at(x, y, cx);
        }
        if let Some(effects) = self.term_mouse(&ev, now_ms, cx) {
            return effects;
        }
        let r = match ev {
            Event::Press { button, x, y } => self.press(button, x, y, now_ms, cx),
            Event::Motion { x, y } => self.motion(x, y, cx).map(|_| Vec::new()),
            Event::Release { button, x, y } => self.release(button, x, y, now_ms, cx),
            Event::Wheel { notches, x, y } => self.wheel(notches, x, y, cx).map(|_| Vec::new()),
            // Typing into a terminal's window goes to its program, every
            // key as xterm sends it.
            Event::Text(s) if self.typing_term(cx).is_some() => {
                let term = self.typing_term(cx).expect("checked");
                Ok(vec![Effect::TermInput { term, bytes: termkeys::text(&s) }])
            }
            Event::Key(k) if self.typing_term(cx).is_some() => {
                let term = self.typing_term(cx).expect("checked");
                let modes = cx.node.state.terms.get(&term).map_or(0, |t| t.modes);
                Ok(termkeys::key(k, modes).map(|bytes| Effect::TermInput { term, bytes }).into_iter().collect())
            }
            Event::Text(s) => self.typed(&s, cx).map(|_| Vec::new()),
            // Ctrl-S is Put, for the window typing goes to.
            Event::Key(Key::Ctrl('s')) => Ok(match self.typing_text(cx).and_then(Ctx::window_of) {
                Some(w) => vec![Effect::Execute { window: Some(w), column: None, text: "Put".into(), arg: None }],
                None => Vec::new(),
            }),
            Event::Key(Key::Ctrl('f')) => self.complete(cx),
            Event::Key(k) => self.key(k, cx).map(|_| Vec::new()),
        };
        r.unwrap_or_else(|e| vec![Effect::Refused(e)])
    }

    /// Where the pointer was at the last event.
    pub fn pointer(&self) -> Option<(i32, i32)> {
        self.pointer
    }

    /// The pointer was moved (by this UI): typing follows it.
    pub fn moved_pointer(&mut self, x: i32, y: i32) {
        self.pointer = Some((x, y));
    }

    /// Whether a layout box is held down (the pointer is a box then).
    pub fn holding_box(&self) -> bool {
        self.held.is_some()
    }

    /// Whether a button is down (on a text or a layout box).
    pub fn button_down(&self) -> bool {
        self.held.is_some() || self.sweep.is_some()
    }

    /// The pointer moved to (`x`, `y`). Leaving a text ends its run of
    /// typing and what Esc would select, as acme's mouse thread commits
    /// the text the mouse leaves.
    fn pointer_at(&mut self, x: i32, y: i32, cx: &Ctx) {
        let under = cx.hit(x, y).map(|(t, _)| t);
        let before = self.pointer.and_then(|(px, py)| cx.hit(px, py)).map(|(t, _)| t);
        self.pointer = Some((x, y));
        if under != before && !self.click_to_type {
            self.run = None;
            self.typed_from = None;
        }
    }

    /// The text typing goes to: the one under the pointer (acme), or with
    /// click-to-type the one last clicked (acme's `-b`). A window's
    /// layout box takes no typing. Before the pointer was ever seen, the
    /// text last clicked.
    pub fn typing_text(&self, cx: &Ctx) -> Option<Target> {
        if self.click_to_type {
            return self.clicked.or(self.focus);
        }
        let Some((x, y)) = self.pointer else { return self.focus };
        if cx.layout_box(x, y).is_some() {
            return None;
        }
        cx.hit(x, y).map(|(t, _)| t)
    }

    /// The terminal typing goes to, if the text typing goes to is the
    /// body of a window showing one.
    pub fn typing_term(&self, cx: &Ctx) -> Option<TermId> {
        let Some(Target::Body(w)) = self.typing_text(cx) else { return None };
        cx.node.state.window(w).ok()?.term.filter(|t| cx.node.state.terms.contains_key(t))
    }

    /// Starts an undo step of its own in `b` (a chord's cut or paste).
    fn new_step(&mut self, b: BufferId, cx: &mut Ctx) -> Result<(), InputError> {
        self.typed_from = None;
        self.run = None;
        let group = cx.node.new_group()?;
        cx.append(b, BufferOp::Mark { group })
    }

    /// Undoes a chord's last step and selects what was selected before it.
    fn undo_step(&mut self, t: Target, q0: u64, q1: u64, cx: &mut Ctx) -> Result<(), InputError> {
        let (b, _) = cx.text_of(t).ok_or(InputError::Gone)?;
        apex_core::propose::apply(cx.node, &Proposal::Undo { buffer: b })?;
        cx.select(t, q0, q1)
    }

    /// The target typing goes to, and where its selection is (where the
    /// typing this UI sent the leader will have left it, when watching).
    fn typing_target(&self, cx: &Ctx) -> Option<(Target, BufferId, u64, u64)> {
        let t = self.typing_text(cx)?;
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
}
