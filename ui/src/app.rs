//! The application without its window: the led replica (through the
//! host), the input layer, the fonts and the painted canvas. The shell
//! feeds it the window system's events and shows its canvas; tests feed
//! it scripted events against a real session and read the result back
//! through the daemon's files. Nothing here knows about winit.

use crate::clip::Clip;
use crate::damage::Painter;
use crate::editjob::EditJob;
use crate::font::Fonts;
use crate::geom::{Metrics, Screen};
use crate::host::UiHost;
use crate::input::{Ctx, Effect, Event, Input, Key, Target, Warp};
use crate::rect::Rect;
use crate::render::Canvas;
use apex_core::exec;
use std::time::Instant;

/// One UI on a session.
pub struct Ui {
    pub host: UiHost,
    pub fonts: Fonts,
    pub input: Input,
    /// The last frame painted.
    pub canvas: Canvas,
    painter: Painter,
    width: i32,
    height: i32,
    started: Instant,
    /// Edits made since the last flush to the daemon.
    unflushed: bool,
    /// The connection's end was reported.
    lost: bool,
    /// Text bytes of log entries the link let go of since memory was
    /// last given back.
    compacted: usize,
    /// The system clipboard, once the shell has a display.
    clip: Option<Clip>,
    /// What the last frame showed at the right of the row tag.
    shown_status: Option<String>,
    /// Button 2 went down on the status's last word (`Lead`, `Kill`), and
    /// what the status said then: its release is ours too, and acts only
    /// if the status still says it.
    status_pressed: Option<String>,
    /// The body the pointer was in after the last event, and its top.
    pointer_body: Option<(apex_core::WindowId, i32)>,
    /// The faces `-f` and `-F` chose (the Go fonts by default).
    font_choice: crate::font::Choice,
    /// The windows of the layout when this UI last looked, to find one
    /// it has just made (`None` before the first look).
    known_windows: Option<std::collections::BTreeSet<apex_core::WindowId>>,
}

/// Bytes of log entries let go of before their memory is given back.
const GIVE_BACK_AFTER: usize = 64 << 20;

/// What a UI that another UI took the leases from shows at the right of
/// its row tag; B2 on `Lead` takes them back.
pub const WATCHING: &str = " watching Lead ";

/// What a UI whose connection to the daemon went shows there while it
/// dials again.
pub const DISCONNECTED: &str = " apexd gone: reconnecting ";

impl Ui {
    /// A UI of `width`×`height` pixels at `scale`.
    pub fn new(host: UiHost, width: i32, height: i32, scale: f64) -> Ui {
        let mut ui = Ui {
            host,
            fonts: Fonts::new(scale),
            input: Input::new(),
            canvas: Canvas::new(0, 0),
            painter: Painter::default(),
            width,
            height,
            started: Instant::now(),
            // What was done before the first frame (files opened from the
            // command line) goes out with it.
            unflushed: true,
            lost: false,
            compacted: 0,
            clip: None,
            shown_status: None,
            status_pressed: None,
            pointer_body: None,
            font_choice: Default::default(),
            known_windows: None,
        };
        ui.follow_new_window(false);
        ui
    }

    /// Another UI leads this session's shards (it took the leases): this
    /// one follows it live, and what is typed here goes to it as
    /// proposals.
    pub fn watching(&self) -> bool {
        self.host.att.with(|l| l.fenced())
    }

    /// Asks for the leases back (`Lead`).
    pub fn lead(&mut self) {
        self.host.att.with(|l| l.lead());
        self.unflushed = true;
    }

    /// What the row tag says at its right: the connection is gone, an
    /// Edit runs (`Kill` ends it), or another UI leads (`Lead` takes the
    /// shards back).
    pub fn status(&self) -> Option<String> {
        match () {
            _ if self.lost => Some(DISCONNECTED.to_string()),
            _ if self.host.edit.is_some() => self.host.edit.as_ref().map(EditJob::label),
            _ if self.watching() => Some(WATCHING.to_string()),
            _ => None,
        }
    }

    /// Whether (`x`, `y`) is on the status's last word when that word
    /// does something: `Lead` while watching, `Kill` while an Edit runs.
    fn on_status_action(&mut self, x: i32, y: i32) -> bool {
        let Some(status) = self.status().filter(|s| s.as_str() != DISCONNECTED) else { return false };
        self.screen().is_some_and(|screen| self.status_rect(&screen, &status).1.contains(x, y))
    }

    /// B2 on the status's last word: `Lead` takes the shards back, `Kill`
    /// ends the running Edit.
    fn status_action(&mut self) {
        match &self.host.edit {
            Some(job) => job.kill(),
            None => self.lead(),
        }
    }

    /// Where the status `label` is drawn, and where its last word is.
    fn status_rect(&mut self, screen: &Screen, label: &str) -> (Rect, Rect) {
        let width = crate::render::label_width(&mut self.fonts, label);
        let row = screen.row_tag;
        let all = Rect::new((row.x1 - width).max(row.x0), row.y0, row.x1, row.y1);
        let last = label.split_whitespace().last().unwrap_or_default();
        let last = crate::render::label_width(&mut self.fonts, &format!(" {last} "));
        (all, Rect::new((all.x1 - last).max(all.x0), all.y0, all.x1, all.y1))
    }

    /// Mirrors the session's snarf buffer to the display's clipboard.
    pub fn use_system_clipboard(&mut self) {
        let snarf = self.host.att.lock().node().map(|n| n.state.layout.snarf.clone()).unwrap_or_default();
        self.clip = Clip::open(&snarf);
    }

    /// A paste may follow (^V, or a button that may chord or execute
    /// Paste): the clipboard's text, if something outside apex changed
    /// it, becomes the session's snarf buffer first.
    fn take_clipboard(&mut self, ev: &Event) {
        let may_paste = matches!(ev, Event::Key(Key::Ctrl('v')) | Event::Press { button: 2 | 3, .. });
        let Some(clip) = self.clip.as_mut().filter(|_| may_paste) else { return };
        if let Some(text) = clip.take() {
            let _ = exec::Host::propose(&mut self.host, apex_core::Proposal::Snarf { text });
        }
    }

    /// The session's snarf buffer changed (here or elsewhere): the
    /// clipboard gets it.
    fn publish_snarf(&mut self) {
        let Some(clip) = self.clip.as_mut() else { return };
        let link = self.host.att.lock();
        if let Some(node) = link.node() {
            clip.publish(&node.state.layout.snarf);
        }
    }

    pub fn metrics(&self) -> Metrics {
        Metrics::new(self.fonts.line_height(), self.fonts.scale)
    }

    pub fn resize(&mut self, width: i32, height: i32) {
        (self.width, self.height) = (width.max(0), height.max(0));
    }

    /// Draws with the faces `choice` names from now on.
    pub fn choose_fonts(&mut self, choice: crate::font::Choice) {
        self.font_choice = choice;
        self.set_scale(self.fonts.scale);
    }

    /// The window moved to a screen of another scale: new glyphs, a
    /// whole new frame.
    pub fn set_scale(&mut self, scale: f64) {
        self.fonts = Fonts::with(&self.font_choice, scale);
        self.painter.invalidate();
    }

    /// The screen as it is now (none before the replica is attached).
    pub fn screen(&mut self) -> Option<Screen> {
        let m = self.metrics();
        let link = self.host.att.lock();
        let node = link.node()?;
        Some(Screen::new(&node.state, self.width, self.height, &m, &mut self.fonts, &self.input.collapsed))
    }

    /// A text on the screen laid out as it is drawn (its face, its tab
    /// stops): where its runes are, for tests and tools.
    pub fn frame(&mut self, t: crate::input::Target) -> Option<crate::frame::Frame> {
        self.frame_at(t, None)
    }

    /// [`Ui::frame`] as it would be from origin `org` (else the view's).
    fn frame_at(&mut self, t: crate::input::Target, org: Option<u64>) -> Option<crate::frame::Frame> {
        let m = self.metrics();
        let mut link = self.host.att.lock();
        let node = link.node_mut()?;
        let screen = Screen::new(&node.state, self.width, self.height, &m, &mut self.fonts, &self.input.collapsed);
        Ctx { node, screen: &screen, fonts: &mut self.fonts, metrics: m, outbox: Vec::new() }.frame_at(t, org)
    }

    /// Shows the selection of each window a built-in made and showed text
    /// in before it had a frame (a file opened at an address), as acme's
    /// `textshow` does in the window it lays out: from the top where the
    /// selection is in sight from there, else with the selection a
    /// quarter down.
    fn show_new_windows(&mut self) {
        for w in std::mem::take(&mut self.host.unshown) {
            let Some(from_top) = self.frame_at(Target::Body(w), Some(0)) else { continue };
            let proposal = {
                let link = self.host.att.lock();
                let Some(st) = link.node().map(|n| &n.state) else { continue };
                let Ok(win) = st.window(w) else { continue };
                let Ok(b) = st.buffer(win.body) else { continue };
                let view = apex_core::ViewId::WindowBody(w);
                let Some(v) = b.views.get(&view).copied() else { continue };
                let events = win.event_reader.is_some();
                let org = apex_core::show::show(&b.text, from_top.shown(), v.q0, events).unwrap_or(0);
                (org != v.org).then_some(apex_core::Proposal::SetOrigin {
                    buffer: win.body,
                    view,
                    version: b.version,
                    org,
                })
            };
            if let Some(p) = proposal {
                let _ = exec::Host::propose(&mut self.host, p);
            }
        }
    }

    /// Handles one event now.
    pub fn handle(&mut self, ev: Event) {
        let now = self.started.elapsed().as_millis() as u64;
        self.handle_at(ev, now);
    }

    /// Handles one event at `now_ms` (milliseconds on the UI's clock,
    /// which double-clicks are timed by) and carries out its B2 and B3
    /// actions: core's built-ins with this UI as their host, anything else
    /// run by the daemon, looks by core's rules. A refusal is shown in
    /// `+Errors`, as acme shows it.
    pub fn handle_at(&mut self, ev: Event, now_ms: u64) {
        // B2 on the row tag's `Lead` while watching, or its `Kill` while
        // an Edit runs. (A release there ends a press elsewhere as usual.)
        match ev {
            Event::Press { button: 2, x, y } if self.on_status_action(x, y) => {
                self.status_pressed = self.status();
                return;
            }
            Event::Release { button: 2, x, y } if self.status_pressed.is_some() => {
                let pressed = self.status_pressed.take();
                if self.on_status_action(x, y) && self.status() == pressed {
                    self.status_action();
                }
                return;
            }
            _ => {}
        }
        self.take_clipboard(&ev);
        self.follow_body();
        let m = self.metrics();
        let effects = {
            let mut link = self.host.att.lock();
            let Some(node) = link.node_mut() else { return };
            let screen = Screen::new(&node.state, self.width, self.height, &m, &mut self.fonts, &self.input.collapsed);
            let mut cx = Ctx { node, screen: &screen, fonts: &mut self.fonts, metrics: m, outbox: Vec::new() };
            let effects = self.input.handle(ev, now_ms, &mut cx);
            // What this UI does not lead goes to the leader as proposals;
            // their answers come back on the link.
            let outbox = std::mem::take(&mut cx.outbox);
            // Built-ins look in a terminal's text after this UI's own
            // selection of it.
            self.host.term_selections = self
                .input
                .term_views
                .iter()
                .filter_map(|(w, v)| {
                    let (a, b) = v.sel.map(|(a, b)| (a.min(b), a.max(b)))?;
                    let t = node_terms(link.node()?, *w)?;
                    Some((*w, (crate::termview::offset(t, a), crate::termview::offset(t, b))))
                })
                .collect();
            for p in outbox {
                let _ = link.submit(p);
            }
            effects
        };
        self.unflushed = true;
        for e in effects {
            // A command in a terminal's text runs where its shell is, and a
            // name in it is looked up there (the program's current
            // directory, which the window's name does not say).
            let shell = match &e {
                Effect::Execute { window: Some(w), text, arg: None, .. }
                    if exec::lookup(apex_core::look::split_command(text).0).is_none() =>
                {
                    self.shell_dir(*w)
                }
                Effect::Look { window, text, .. } if !text.starts_with('/') => self.shell_dir(*window),
                _ => None,
            };
            let result = match e {
                Effect::Execute { window: Some(w), text, .. } if shell.is_some() => {
                    exec::Host::start(&mut self.host, shell.as_deref(), text.trim(), Some(w))
                }
                Effect::Look { window, text, word, plumb, from } if shell.is_some() => {
                    let dir = shell.as_deref().unwrap_or_default();
                    // No such file: the text itself is looked for.
                    let word = word.or_else(|| Some(text.clone()));
                    let text = format!("{}/{text}", dir.trim_end_matches('/'));
                    let plumb = apex_core::plumb::Plumb { data: text.clone(), ..plumb };
                    self.host.frames = self.frames_shown();
                    match self.host.plumb(window, &plumb) {
                        Ok(true) => Ok(()),
                        _ => exec::look_file_or_word(&mut self.host, window, &text, word.as_deref(), from),
                    }
                }
                Effect::Execute { text, .. } if text.trim() == "Lead" => {
                    self.lead();
                    Ok(())
                }
                Effect::Execute { window, column, text, arg: chorded } => {
                    let (word, arg) = apex_core::look::split_command(&text);
                    // A 2-1 chord's text is the built-in's argument when it
                    // has none of its own, and follows a command's words.
                    match (exec::lookup(word), chorded) {
                        (Some(b), chorded) => {
                            let arg = match (arg.trim().is_empty(), chorded) {
                                (true, Some(c)) => c,
                                _ => arg.to_string(),
                            };
                            exec::run(&mut self.host, b, &exec::Call { window, column, arg })
                        }
                        (None, Some(c)) => exec::execute(&mut self.host, window, &format!("{} {c}", text.trim_end())),
                        (None, None) => exec::execute(&mut self.host, window, &text),
                    }
                }
                Effect::Look { window, text, word, plumb, from } => match self.host.plumb(window, &plumb) {
                    Ok(true) => Ok(()),
                    // No plumber, or it did not take the text: look here,
                    // and move the pointer onto what was found.
                    _ => {
                        self.host.frames = self.frames_shown();
                        let focus = self.focused();
                        let looked = exec::look_file_or_word(&mut self.host, window, &text, word.as_deref(), from);
                        if looked.is_ok() {
                            let opened = self.focused().filter(|f| Some(*f) != focus);
                            self.input.warp = Some(Warp::Selection(opened.unwrap_or(window)));
                        }
                        looked
                    }
                },
                Effect::Complete { window, path, prefix } => {
                    self.complete(window, &path, &prefix, now_ms);
                    Ok(())
                }
                Effect::Refused(why) => Err(exec::ExecError::Host(why.to_string())),
                Effect::TermInput { term, bytes } => {
                    let (rt, c, session) = (self.host.rt.clone(), self.host.att.client(), self.host.session.clone());
                    self.host.terms.type_into(&rt, c, &session, term, bytes);
                    Ok(())
                }
            };
            if let Some((w, q0, q1)) = self.host.term_found.take() {
                self.show_term_text(w, q0, q1);
            }
            // A search that found nothing says nothing, as acme's look3.
            if let Err(e) = result.or_else(|e| match e {
                exec::ExecError::NotFound(_) => Ok(()),
                e => Err(e),
            }) {
                let _ = exec::warn(&mut self.host, None, &format!("{e}\n"));
            }
        }
        self.show_new_windows();
        self.follow_new_window(true);
        self.publish_snarf();
        self.follow_body();
    }

    /// Selects `q0..q1` of window `w`'s terminal text (runes of its
    /// `text`) and scrolls the view there when it is not in sight: a
    /// quarter down, as acme's `textshow` shows what it finds.
    fn show_term_text(&mut self, w: apex_core::WindowId, q0: u64, q1: u64) {
        let Some(body) = self.screen().and_then(|s| s.window(w).map(|g| g.body)) else { return };
        let shown = (body.height() / (self.fonts.line_height() as i32).max(1)).max(1) as usize;
        let link = self.host.att.lock();
        let Some(t) = link.node().and_then(|n| node_terms(n, w)) else { return };
        let (a, b) = (crate::termview::cell_of(t, q0), crate::termview::cell_of(t, q1));
        let view = self.input.term_views.entry(w).or_default();
        view.sel = Some((a, b));
        let top = crate::termview::top(Some(view), t, shown);
        if a.row < top || a.row >= top + shown {
            let bottom = crate::termview::rows(t).saturating_sub(shown);
            let to = a.row.saturating_sub(shown / 4).min(bottom);
            view.top = (to < bottom).then_some(to);
        }
    }

    /// A tag that grew (typing, a tool's edit making the window dirty)
    /// pushed its body down under the pointer: the pointer goes down with
    /// it, so typing goes on in the body (acme's `winresize` moves the
    /// mouse so). Then remembers which body the pointer is in, and where
    /// that body starts.
    fn follow_body(&mut self) {
        let Some((x, mut y)) = self.input.pointer() else { return };
        let Some(screen) = self.screen() else { return };
        let moved = self.pointer_body.filter(|_| self.input.warp.is_none()).and_then(|(w, y0)| {
            let body = screen.window(w)?.body;
            (body.y0 > y0 && y < body.y0).then(|| (y + body.y0 - y0).min(body.y1 - 1))
        });
        if let Some(to) = moved {
            y = to;
            self.input.moved_pointer(x, y);
            self.input.warp = Some(Warp::Point(x, y));
        }
        let windows = screen.columns.iter().flat_map(|c| &c.windows);
        self.pointer_body = windows.filter(|w| w.body.contains(x, y)).map(|w| (w.id, w.body.y0)).next();
    }

    /// acme's `coladd` moves the pointer onto a window it makes, unless a
    /// button is down: with `warp`, after this UI's own action, the
    /// newest window it made as the layout's leader since it last looked.
    /// Windows made for another UI or a tool are only noted. A watching
    /// UI's pointer stays where it is.
    fn follow_new_window(&mut self, warp: bool) {
        let (leads, now) = {
            let link = self.host.att.lock();
            let Some(node) = link.node() else { return };
            let numbers = &node.state.layout.numbers;
            (node.leads(apex_core::Shard::Layout), numbers.keys().copied().collect::<std::collections::BTreeSet<_>>())
        };
        let Some(before) = self.known_windows.replace(now.clone()) else { return };
        if !warp || !leads || self.input.button_down() || self.input.warp.is_some() {
            return;
        }
        let numbers = exec::Host::state(&self.host).map(|st| st.layout.numbers.clone()).unwrap_or_default();
        if let Some(w) = now.difference(&before).max_by_key(|w| numbers.get(w).map(|n| n.0)) {
            self.input.warp = Some(Warp::NewWindow(*w));
        }
    }

    /// The current directory of the shell in the terminal window `w`
    /// shows, if it shows one whose program the daemon can see.
    fn shell_dir(&self, w: apex_core::WindowId) -> Option<String> {
        let term = self.host.att.with(|l| l.node()?.state.window(w).ok()?.term)?;
        self.host.term_cwd(term)
    }

    /// The window the layout says has the focus.
    fn focused(&self) -> Option<apex_core::WindowId> {
        exec::Host::state(&self.host).ok().and_then(|st| st.layout.focus)
    }

    /// What every window's body shows, as laid out now.
    fn frames_shown(&mut self) -> std::collections::HashMap<apex_core::WindowId, apex_core::show::Shown> {
        let Some(screen) = self.screen() else { return Default::default() };
        let ids: Vec<_> = screen.columns.iter().flat_map(|c| &c.windows).map(|w| w.id).collect();
        let mut shown = std::collections::HashMap::new();
        for w in ids {
            if let Some(f) = self.frame(Target::Body(w)) {
                shown.insert(w, f.shown());
            }
        }
        shown
    }

    /// Where the pointer is to be moved now, in pixels, if anywhere
    /// (acme's `moveto`): resolved against the screen as it is after the
    /// event that asked for it.
    pub fn take_warp(&mut self) -> Option<(i32, i32)> {
        let warp = self.input.warp.take()?;
        let at = self.warp_point(warp)?;
        self.input.moved_pointer(at.0, at.1);
        Some(at)
    }

    fn warp_point(&mut self, warp: Warp) -> Option<(i32, i32)> {
        let screen = self.screen()?;
        let line = self.metrics().line;
        match warp {
            Warp::LayoutBox(w) => {
                let b = screen.window(w)?.layout_box;
                Some(((b.x0 + b.x1) / 2, b.y0 + line / 2))
            }
            Warp::Point(x, y) => Some((x, y)),
            Warp::NewWindow(w) => {
                let g = screen.window(w)?;
                Some((g.layout_box.x1 + 3, g.tag_line.y1 + 3))
            }
            Warp::Selection(w) if self.input.term_views.get(&w).is_some_and(|v| v.sel.is_some()) => {
                // The start of the selection in a terminal's text.
                let body = screen.window(w)?.body;
                let link = self.host.att.lock();
                let t = node_terms(link.node()?, w)?;
                let shown = (body.height() / line.max(1)).max(1) as usize;
                let view = self.input.term_views.get(&w);
                let (a, _) = view?.sel?;
                let row = a.row.checked_sub(crate::termview::top(view, t, shown))?;
                let cell = crate::termdraw::cell_width(&mut self.fonts);
                Some((body.x0 + i32::from(a.col) * cell + 4, body.y0 + row as i32 * line + line - 4))
            }
            Warp::Selection(w) => {
                let frame = self.frame(Target::Body(w))?;
                let q0 = {
                    let st = exec::Host::state(&self.host).ok()?;
                    let body = st.window(w).ok()?.body;
                    st.buffer(body).ok()?.views.get(&apex_core::ViewId::WindowBody(w))?.q0
                };
                let (x, y) = frame.point_of(q0)?;
                Some((x + 4, y + line - 4))
            }
        }
    }

    /// ^F: completes `path` + `prefix` against the directory's names (the
    /// window's directory for a relative path): what all matches share is
    /// typed; otherwise they are listed in `+Errors`, as acme lists them.
    fn complete(&mut self, window: Option<apex_core::WindowId>, path: &str, prefix: &str, now_ms: u64) {
        let dir = match path.starts_with('/') {
            true => path.to_string(),
            false => {
                let name = window.and_then(|w| {
                    let st = exec::Host::state(&self.host).ok()?;
                    let body = st.window(w).ok()?.body;
                    Some(st.buffer(body).ok()?.name.clone())
                });
                let base =
                    name.and_then(|n| apex_core::look::window_dir(&n)).unwrap_or_else(|| exec::Host::cwd(&self.host));
                format!("{}/{path}", base.trim_end_matches('/'))
            }
        };
        let entries = match apex_sys::files::entries(&dir) {
            Ok(entries) => entries,
            Err(e) => {
                let _ = exec::warn(&mut self.host, None, &format!("error attempting completion: {dir}: {e}\n"));
                return;
            }
        };
        let c = apex_core::look::complete(prefix, &entries);
        match c.advance {
            Some(rest) => self.handle_at(Event::Text(rest), now_ms),
            None => {
                let sep = if dir.ends_with('/') { "" } else { "/" };
                let none = if c.matched == 0 { ": no matches in:" } else { "" };
                let mut text = format!("{dir}{sep}{prefix}*{none}\n");
                for n in &c.names {
                    text.push_str(&format!(" {n}\n"));
                }
                let _ = exec::warn(&mut self.host, None, &text);
            }
        }
    }

    /// The link has news. Returns whether the connection was found gone
    /// just now: that is said in `+Errors` and the row tag, and the UI
    /// dials the daemon again until it answers. Typing goes on meanwhile
    /// (this UI leads what it edits); the daemon takes it when the
    /// attachment resumes, or it is recovered into `+Recovered` if the
    /// daemon attaches this UI anew (it was restarted, or the resume
    /// grace ran out).
    pub fn woke(&mut self) -> bool {
        self.end_edit();
        self.give_back_compacted();
        self.report_events();
        self.take_plumbed();
        // A window another UI or a tool made moves nobody's pointer here:
        // it is only noted, as known.
        self.follow_new_window(false);
        let closed = self.host.att.is_closed();
        if closed && self.lost {
            // Gone again before it was welcomed: dial on.
            self.host.reconnect();
        }
        if !closed || self.lost {
            return false;
        }
        self.lost = true;
        let text = format!(
            "apex-ui: the connection to apexd ({}) is gone; dialling it again. Typing in what this UI leads goes \
             on and is sent when it answers\n",
            self.host.address
        );
        let _ = exec::warn(&mut self.host, None, &text);
        self.host.reconnect();
        true
    }

    /// Once the link has let go of [`GIVE_BACK_AFTER`] bytes of entries
    /// (a big file's, acknowledged by the daemon), what they held goes
    /// back to the system, on a thread of its own: malloc keeps freed
    /// memory inside its heap resident, and a 1 GB file would leave the
    /// UI holding twice its size.
    fn give_back_compacted(&mut self) {
        self.compacted += self.host.att.with(|l| l.take_compacted());
        if self.compacted >= GIVE_BACK_AFTER {
            self.compacted = 0;
            // A thread that cannot be made leaves the memory where it is.
            let _ = std::thread::Builder::new().name("give back".into()).spawn(apex_sys::malloc::give_back);
        }
    }

    /// The Edit running on its own thread ended (what it did is proposed
    /// already): what it said goes to `+Errors`, the windows it made are
    /// shown, and its pattern is the last.
    fn end_edit(&mut self) {
        let Some(ended) = self.host.edit.as_mut().and_then(EditJob::ended) else { return };
        self.host.edit = None;
        exec::Host::set_last_pattern(&mut self.host, ended.last_pattern);
        self.host.unshown.extend(ended.unshown);
        self.host.events.extend(ended.events);
        self.unflushed = true;
        if let Err(e) = ended.result {
            let _ = exec::warn(&mut self.host, None, &format!("{e}\n"));
        }
        self.show_new_windows();
        self.follow_new_window(true);
        self.publish_snarf();
    }

    /// Leaving (Exit, or the window closed) while an Edit runs: it is
    /// killed and waited for, so that what it made is taken back whole
    /// before the last flush, never sent in part.
    pub fn leave(&mut self) {
        let Some(job) = &self.host.edit else { return };
        job.kill();
        let deadline = Instant::now() + crate::host::WAIT;
        while self.host.edit.is_some() && Instant::now() < deadline {
            std::thread::sleep(std::time::Duration::from_millis(5));
            self.end_edit();
        }
    }

    /// Acts on what the plumber delivered to its `edit` port (a file to
    /// show, data to show), as acme does, moving the pointer there. Only the leading UI does: every
    /// UI reading the port gets each message, and one window is wanted.
    fn take_plumbed(&mut self) {
        let messages = std::mem::take(&mut *self.host.plumbed.lock().expect("plumbed lock"));
        if self.watching() {
            return;
        }
        for m in messages {
            self.host.frames = self.frames_shown();
            let shown = apex_core::plumb::deliver(&mut self.host, &m);
            self.show_new_windows();
            match shown {
                // The pointer goes to what was shown, as acme moves it.
                Ok(()) if m.kind == "text" => self.input.warp = self.focused().map(Warp::Selection),
                Ok(()) => {}
                Err(e) => {
                    let name = String::from_utf8_lossy(&m.data).to_string();
                    let _ = exec::warn(&mut self.host, None, &format!("plumb: {name}: {e}\n"));
                }
            }
            self.unflushed = true;
        }
    }

    /// Says in `+Errors` what the link reported: typing this UI made but
    /// never got to the daemon and could not simply go on (another changed
    /// the text meanwhile) is in `FILE+Recovered`; a proposal the leader refused; the daemon's own
    /// messages.
    fn report_events(&mut self) {
        let mut events = std::mem::take(&mut self.host.events);
        events.extend(self.host.att.with(|l| l.events()));
        events.extend(std::mem::take(&mut *self.host.later.lock().expect("later lock")));
        for e in events {
            let text = match e {
                apex_link::Event::Recovered { into, entries, .. } => {
                    let name = exec::Host::state(&self.host)
                        .ok()
                        .and_then(|st| st.buffer(into).ok().map(|b| b.name.clone()))
                        .unwrap_or_else(|| "+Recovered".into());
                    format!(
                        "apex-ui: {entries} edits this UI had not sent could not go back where they were (another \
                         changed that text meanwhile, or the daemon no longer has it); they are in {name}\n"
                    )
                }
                apex_link::Event::Answer { result: Err(e), .. } => {
                    format!("apex-ui: the leader refused an edit: {e}\n")
                }
                apex_link::Event::Error(text) => format!("apex-ui: {text}\n"),
                // A new replica (a Resync): its text may differ at the same
                // versions, so the next frame is drawn whole.
                apex_link::Event::Welcome { .. } => {
                    self.painter.invalidate();
                    self.host.terms.forget();
                    // Welcomed on a new connection: attached again.
                    if !std::mem::replace(&mut self.lost, false) {
                        continue;
                    }
                    self.unflushed = true;
                    "apex-ui: connected to apexd again\n".to_string()
                }
                _ => continue,
            };
            let _ = exec::warn(&mut self.host, None, &text);
        }
    }

    /// Paints what changed since the last frame into the canvas and
    /// returns where; then sends what was typed since the last frame to
    /// the daemon, in one flush.
    pub fn paint(&mut self) -> Vec<Rect> {
        self.follow_body();
        let m = self.metrics();
        let status = self.status();
        if status != self.shown_status {
            // The row tag under the old status is drawn again.
            self.painter.invalidate();
            self.shown_status.clone_from(&status);
        }
        let (mut damage, screen) = {
            let mut link = self.host.att.lock();
            let Some(node) = link.node_mut() else { return Vec::new() };
            // A terminal's title and exit show in the tags this UI leads.
            let terms: Vec<apex_core::TermId> = node.state.windows.values().filter_map(|w| w.term).collect();
            for term in terms {
                self.unflushed |= apex_core::make::settag_term(node, term).unwrap_or(false);
            }
            let screen = Screen::new(&node.state, self.width, self.height, &m, &mut self.fonts, &self.input.collapsed);
            self.painter.term_views.clone_from(&self.input.term_views);
            let damage = self.painter.paint(&mut self.canvas, &node.state, &screen, &mut self.fonts, &m);
            // New windows are placed by what is on the screen, as acme's.
            node.lines = screen.lines(&m, self.painter.shown());
            // The leading UI gives each terminal its window's size.
            let sizes: Vec<(apex_core::TermId, (u16, u16))> = match node.leads(apex_core::Shard::Layout) {
                true => screen
                    .columns
                    .iter()
                    .flat_map(|c| &c.windows)
                    .filter_map(|wg| {
                        let term = node.state.window(wg.id).ok()?.term?;
                        let t = node.state.terms.get(&term).filter(|t| t.exit.is_none())?;
                        let fits = crate::termdraw::fits(&mut self.fonts, wg.body);
                        (fits != (t.cols, t.rows)).then_some((term, fits))
                    })
                    .collect(),
                false => Vec::new(),
            };
            drop(link);
            for (term, size) in sizes {
                let (rt, c) = (self.host.rt.clone(), self.host.att.client());
                self.host.terms.fit(&rt, c, &self.host.session.clone(), term, size);
            }
            (damage, screen)
        };
        if let Some(text) = status {
            let (rect, _) = self.status_rect(&screen, &text);
            crate::render::label(&mut self.canvas, &mut self.fonts, &text, rect);
            damage.push(rect);
        }
        self.publish_snarf();
        if std::mem::take(&mut self.unflushed) {
            let att = self.host.att.clone();
            self.host.rt.spawn(async move {
                let _ = att.flush().await;
            });
        }
        damage
    }

    /// Flushes and waits until the daemon has acknowledged everything
    /// this UI did (for Put, and for tests that read the daemon's files).
    pub fn settle(&mut self) -> Result<(), apex_core::exec::ExecError> {
        self.unflushed = false;
        self.host.settle()
    }

    /// Exit or Abort was executed.
    pub fn exiting(&self) -> bool {
        self.host.exit
    }
}

/// The terminal window `w` shows.
fn node_terms(node: &apex_core::Node, w: apex_core::WindowId) -> Option<&apex_core::term::Term> {
    node.state.terms.get(&node.state.window(w).ok()?.term?)
}
