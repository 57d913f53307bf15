//! The acme(4) tree, `NAME/acme/` (and the root of `NSDIR/acme` with
//! `apexd --acme NAME`): what plan9port acme's files mean, so acme's
//! client programs (`win`, acme-lsp, Watch, the Go `9fans.net/go/acme`
//! package, acme.rc scripts) work against a session unchanged.
//! `../shared/acme-fs.md` is the specification.
//!
//! Windows here are apex windows, named by their acme number (the
//! layout's). Every change is a proposal to the shard's holder, as for every
//! tool; the per-window state acme keeps for tools (addr, limit) is the
//! same `session::Addr` that `buffers/N/` uses, keyed by the body buffer.
//!
//! - [`fields`]: `index` lines and the `ctl` read.
//! - [`ctl`]: ctl messages, matched by prefix and applied one by one.
//! - [`event`]: event messages and their write-back.
//! - [`termwin`]: terminals as read-only windows `DIR/-term.N`.
//! - acme's rules (built-ins, look, the layout policy) are core's:
//!   `apex_core::exec`, `apex_core::look`, `apex_core::cols`.
//! - [`Acme`] (here): what the daemon keeps per session for the tree: the
//!   `log` lines, made from the layout's entries as they are sequenced, and
//!   per-window counts of open event files.
//!
//! The tree's side (walks, opens, reads, writes) is [`files`].

pub mod ctl;
pub mod event;
pub mod fields;
pub mod files;
pub mod termwin;

use apex_core::{AcmeNumber, BufferId, LayoutOp, Node, Op, Seq, Shard, WindowId};
use std::collections::{BTreeMap, VecDeque};

/// `log` lines kept for readers that fall behind.
pub const LOG_KEPT: usize = 4096;

/// One `log` line: `ID OP NAME`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LogLine {
    pub number: u32,
    pub op: &'static str,
    pub name: String,
}

impl LogLine {
    pub fn text(&self) -> String {
        format!("{} {} {}\n", self.number, self.op, self.name)
    }
}

/// What the tree keeps per acme window beyond the shared state.
#[derive(Clone, Debug, Default)]
pub struct WinState {
    /// Open fids of the window's `event` file.
    pub event_opens: u32,
    /// An open `rdsel` fid (one at a time).
    pub rdsel_open: bool,
    /// The ctl fid that wrote `lock`, until it writes `unlock` or is
    /// clunked (acme's `ctlfid`).
    pub ctl_lock: Option<usize>,
}

/// The session's acme state.
#[derive(Debug, Default)]
pub struct Acme {
    pub windows: BTreeMap<WindowId, WinState>,
    log: VecDeque<LogLine>,
    /// The index of `log[0]` among all lines ever logged.
    log_first: u64,
    /// The last layout entry turned into log lines.
    layout_seen: Seq,
    /// Number and name of every live window, for the `del` line of one
    /// whose state is already gone.
    known: BTreeMap<WindowId, (AcmeNumber, String)>,
    /// Windows placed before their shard's entries arrived (a UI's
    /// appends come shard by shard): logged once they have.
    unannounced: Vec<WindowId>,
    /// The origin letter of the daemon's undo and redo entries made for
    /// an event written back (`Mx Undo`): reported with the writer's
    /// letter, as acme reports them, not `F`. The last [`ORIGINS_KEPT`].
    origins: VecDeque<((BufferId, Seq), char)>,
    /// While events written back run: each one's window's buffers and
    /// origin letter (a reader may format the undo before it is noted);
    /// one per event, so two in different windows at once keep theirs.
    running_events: Vec<([BufferId; 2], char)>,
}

/// Origin letters of undo and redo entries kept for event readers.
pub const ORIGINS_KEPT: usize = 256;

/// Events written back that may run at once, kept for their letters.
const EVENTS_RUNNING_KEPT: usize = 64;

impl Acme {
    /// Notes that buffer `b`'s entry `seq` was made for an event written
    /// back with origin letter `c1`.
    pub fn note_origin(&mut self, b: BufferId, seq: Seq, c1: char) {
        self.origins.push_back(((b, seq), c1));
        if self.origins.len() > ORIGINS_KEPT {
            self.origins.pop_front();
        }
    }

    /// The origin letter noted for buffer `b`'s entry `seq`, or the
    /// running event's for its buffers.
    pub fn origin(&self, b: BufferId, seq: Seq) -> Option<char> {
        let noted = self.origins.iter().rev().find(|(k, _)| *k == (b, seq)).map(|(_, c)| *c);
        noted.or(self.running_events.iter().rev().find(|(bs, _)| bs.contains(&b)).map(|(_, c)| *c))
    }

    /// An event written back to the window of `buffers` (body and tag)
    /// with origin letter `c1` starts running.
    pub fn event_runs(&mut self, buffers: [BufferId; 2], c1: char) {
        // (One whose request ended without `event_ran`, a panic caught,
        // goes once this many more have started.)
        if self.running_events.len() >= EVENTS_RUNNING_KEPT {
            self.running_events.remove(0);
        }
        self.running_events.push((buffers, c1));
    }

    /// That event is done (its entries noted by `note_origin`).
    pub fn event_ran(&mut self, buffers: [BufferId; 2], c1: char) {
        if let Some(i) = self.running_events.iter().rposition(|e| *e == (buffers, c1)) {
            self.running_events.remove(i);
        }
    }

    /// The index the next log line will have: where a new reader starts.
    pub fn log_end(&self) -> u64 {
        self.log_first + self.log.len() as u64
    }

    /// The log line at `index`, or where the log now starts if that line
    /// was dropped (the reader skips ahead), or nothing yet.
    pub fn log_line(&self, index: u64) -> Option<(u64, &LogLine)> {
        let at = index.max(self.log_first);
        self.log.get((at - self.log_first) as usize).map(|l| (at, l))
    }

    /// Logs `op` on window `number` (`get`, `put`; the layout's are found
    /// by [`Acme::sync`]).
    pub fn log(&mut self, number: u32, op: &'static str, name: String) {
        self.log.push_back(LogLine { number, op, name });
        while self.log.len() > LOG_KEPT {
            self.log.pop_front();
            self.log_first += 1;
        }
    }

    /// Turns the layout entries sequenced since the last call into `log`
    /// lines: `new` (placed), `zerox` (placed on a body another window
    /// shows), `del` (removed), `focus`. Runs after every change, so it
    /// costs nothing when the layout did not change and only the windows
    /// concerned when it did. A window's `del` line has the name it was
    /// announced with, or was given since through the acme tree
    /// ([`Acme::note_name`]).
    pub fn sync(&mut self, view: &Node) {
        let layout_changed = view.log.last(Shard::Layout) != self.layout_seen;
        if !layout_changed && self.unannounced.is_empty() {
            return;
        }
        let state = &view.state;
        let name_of = |w: WindowId| {
            state.windows.get(&w).and_then(|w| state.buffers.get(&w.body)).map(|b| b.name.clone()).unwrap_or_default()
        };
        let mut lines = Vec::new();
        if let Ok(entries) = view.log.entries_after(Shard::Layout, self.layout_seen) {
            for e in entries {
                self.layout_seen = e.seq;
                let Op::Layout(op) = &e.op else { continue };
                match op {
                    LayoutOp::WindowAdd { window, .. } => self.unannounced.push(*window),
                    LayoutOp::WindowDel { window } => {
                        self.unannounced.retain(|w| w != window);
                        if let Some((n, name)) = self.known.remove(window) {
                            lines.push((n.0, "del", name));
                        }
                        self.windows.remove(window);
                    }
                    LayoutOp::Focus { window: Some(window) } => {
                        if let Some(n) = state.layout.numbers.get(window) {
                            lines.push((n.0, "focus", name_of(*window)));
                        }
                    }
                    _ => {}
                }
            }
        }
        // Placed windows whose shard has arrived: `new`, or `zerox` for a
        // second window on a body.
        let mut announced = Vec::new();
        for window in std::mem::take(&mut self.unannounced) {
            let (Some(w), Some(n)) = (state.windows.get(&window), state.layout.numbers.get(&window)) else {
                if state.layout.numbers.contains_key(&window) {
                    self.unannounced.push(window);
                }
                continue;
            };
            let shown_elsewhere = |b: &apex_core::Buffer| {
                b.views.keys().any(|v| matches!(v, apex_core::ViewId::WindowBody(o) if *o != window))
            };
            let copy = state.buffers.get(&w.body).is_some_and(shown_elsewhere);
            let name = name_of(window);
            self.known.insert(window, (*n, name.clone()));
            announced.push((n.0, if copy { "zerox" } else { "new" }, name));
        }
        // Focus lines name windows already announced; new ones come first.
        lines.splice(0..0, announced);
        for (number, op, name) in &lines {
            self.log(*number, op, name.clone());
        }
    }

    /// A window was renamed: its `del` line will carry the new name.
    pub fn note_name(&mut self, window: WindowId, name: &str) {
        if let Some(k) = self.known.get_mut(&window) {
            k.1 = name.to_string();
        }
    }

    /// A buffer was renamed (through `buffers/N/`): every window showing
    /// it carries the new name.
    pub fn note_buffer_name(&mut self, state: &apex_core::State, buffer: apex_core::BufferId) {
        let Ok(name) = state.buffer(buffer).map(|b| b.name.clone()) else { return };
        for (id, w) in &state.windows {
            if w.body == buffer {
                self.note_name(*id, &name);
            }
        }
    }
}

/// A buffer holding `text`, for the modules' tests.
#[cfg(test)]
pub(crate) fn test_buffer(text: &str) -> apex_core::Buffer {
    let mut b = apex_core::Buffer::new(String::new());
    let op = apex_core::BufferOp::Splice { q0: 0, q1: 0, text: text.into(), origin: apex_core::Origin::Keyboard };
    b.apply(&op).expect("an insert into an empty buffer");
    b
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn events_running_at_once_in_two_windows_keep_their_letters() {
        let mut acme = Acme::default();
        let (one, two) = ([BufferId(1), BufferId(2)], [BufferId(3), BufferId(4)]);
        acme.event_runs(one, 'M');
        acme.event_runs(two, 'K');
        assert_eq!((acme.origin(BufferId(1), 9), acme.origin(BufferId(4), 9)), (Some('M'), Some('K')));
        acme.event_ran(one, 'M');
        assert_eq!((acme.origin(BufferId(2), 9), acme.origin(BufferId(3), 9)), (None, Some('K')), "the other runs on");
        acme.event_ran(two, 'K');
        assert_eq!(acme.origin(BufferId(3), 9), None);
        for _ in 0..2 * EVENTS_RUNNING_KEPT {
            acme.event_runs(one, 'M');
        }
        assert!(acme.running_events.len() <= EVENTS_RUNNING_KEPT);
    }
}
