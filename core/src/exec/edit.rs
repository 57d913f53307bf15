//! `Edit`: sam's command language over every window's text (`ecmd`),
//! its changes, dots, undos, names and output proposed through the host.

use super::{clean_to_close, open, warn, ExecError, Host, Result};
use crate::addr::Range;
use crate::ecmd::{self, Changes, EditFile};
use crate::id::{BufferId, GroupId, WindowId};
use crate::op::{Origin, WindowFlags};
use crate::propose::Proposal;
use crate::shard::ViewId;
use crate::state::State;
use std::collections::BTreeMap;

/// The Edit command's view of the session: every window's text, in layout
/// order, with the one it runs in.
struct Gathered {
    files: Vec<EditFile>,
    seen: Vec<(WindowId, BufferId, u64)>,
    /// Which files are terminals' text: searched, never changed.
    terms: Vec<bool>,
    current: usize,
}

fn gather(st: &State, window: Option<WindowId>) -> Gathered {
    let mut g = Gathered { files: Vec::new(), seen: Vec::new(), terms: Vec::new(), current: 0 };
    for placed in st.layout.columns.iter().flat_map(|c| &c.windows) {
        let Ok(win) = st.window(placed.window) else { continue };
        let Ok(b) = st.buffer(win.body) else { continue };
        let dot = b
            .views
            .get(&ViewId::WindowBody(placed.window))
            .map_or_else(Default::default, |v| Range::new(v.q0.min(b.len()), v.q1.min(b.len())));
        if Some(placed.window) == window {
            g.current = g.files.len();
        }
        let warned = win.flags.warned == Some(b.version);
        // A terminal's window: its text is the terminal's (scrollback and
        // screen), for searches.
        let term = win.term.and_then(|t| st.terms.get(&t));
        let (text, dot) = match term {
            Some(t) => (ropey::Rope::from_str(&t.text()), Range::default()),
            None => (b.text.rope().clone(), dot),
        };
        g.files.push(EditFile { name: b.name.clone(), text, dot, dirty: b.dirty, warned });
        g.seen.push((placed.window, win.body, b.version));
        g.terms.push(term.is_some());
    }
    g
}

/// An Edit gathered from the session: every window's text (ropes,
/// shared, not copied) and the versions it saw, ready to run where
/// nothing waits on it.
pub struct Prepared {
    g: Gathered,
    window: Option<WindowId>,
    command: String,
}

/// What a [`Prepared`] Edit's commands did, still to be proposed
/// ([`finish`]).
pub struct Ran {
    g: Gathered,
    window: Option<WindowId>,
    ran: std::result::Result<ecmd::Outcome, crate::edit::EditError>,
    last: Option<String>,
}

impl Prepared {
    /// The Edit's command, as given.
    pub fn command(&self) -> &str {
        &self.command
    }

    /// Runs the commands over the texts gathered: the slow part, holding
    /// nothing of the session's. `last` is the host's last pattern
    /// (`//`), given back in the [`Ran`].
    pub fn run(self, pipes: &mut impl ecmd::Pipes, mut last: Option<String>) -> Ran {
        let ran = match ecmd::run(&self.command, &self.g.files, self.g.current, pipes, &mut last) {
            // A pipe killed with the Edit fails: the Edit was killed.
            Err(_) if pipes.interrupted() => Err(crate::edit::EditError::Killed),
            ran => ran,
        };
        // The texts as they were are let go of before the changes are
        // made: the buffer's rope is built anew where they change it, and
        // the old one kept here too would hold a whole-file Edit's text
        // twice meanwhile.
        let mut g = self.g;
        for f in &mut g.files {
            f.text = ropey::Rope::new();
        }
        Ran { g, window: self.window, ran, last }
    }
}

/// `Edit COMMAND`: sam's language over every window's text, the changes
/// proposed as one `Splices` per buffer at the version it saw (edits made
/// meanwhile move them), then dots, `u`, and what it printed to `+Errors`.
/// The commands run where the host says ([`Host::run_apart`]): here and
/// now, or apart, to be [`finish`]ed when they end.
pub fn edit<H: Host>(h: &mut H, window: Option<WindowId>, command: &str) -> Result<()> {
    let prepared = Prepared { g: gather(&*h.state()?, window), window, command: command.to_string() };
    let Some(prepared) = h.run_apart(prepared)? else { return Ok(()) };
    let last = h.last_pattern();
    let ran = prepared.run(h, last);
    finish(h, ran)
}

/// Proposes what an Edit's commands did (or says why they did nothing).
pub fn finish<H: Host>(h: &mut H, ran: Ran) -> Result<()> {
    let Ran { g, window, ran, last } = ran;
    h.set_last_pattern(last);
    let outcome = match ran {
        Ok(outcome) => outcome,
        Err(e @ crate::edit::EditError::Modified { file, .. }) => {
            // acme's winclean: the next `e` goes ahead.
            let (w, _, version) = g.seen[file];
            let flags = WindowFlags { warned: Some(version), ..h.state()?.window(w)?.flags.clone() };
            h.propose(Proposal::Flags { window: w, flags })?;
            return Err(e.into());
        }
        // acme's editerror drops every change the commands made.
        Err(e) => return Err(e.into()),
    };
    apply(h, window, &g, outcome)
}

/// `changes` in parts of an entry's worth each (`op::entry_parts`),
/// proposed from the last, so each part's places hold whatever the parts
/// after it did. A part is taken off the end of the list when its turn
/// comes, and the list's memory is given back as it shrinks: a whole-file
/// substitution's millions of changes are not held twice while they are
/// proposed.
struct Parts {
    changes: Changes,
    cuts: Vec<std::ops::Range<usize>>,
    /// The changes held when the list's memory was last given back.
    held: usize,
}

/// The most runes a part's changes span: applying a part builds the text
/// from its first change to its last anew, under the lock everyone else
/// who reads the session waits on (a megabyte is a millisecond or so),
/// so a whole-file `x/^\n/d`, its changes few and far apart, goes in many
/// parts, not a few of tens of megabytes.
const PART_SPAN: u64 = 1 << 20;

/// Changes taken off a [`Parts`] list before its memory is given back
/// (its places are about 4 bytes a change).
const SHRINK_EVERY: usize = 1 << 20;

impl Parts {
    fn new(changes: Changes, most: usize) -> Parts {
        let fits = |r: std::ops::Range<usize>| {
            let span = changes.get(r.end - 1).1.saturating_sub(changes.get(r.start).0);
            changes.text_of(r).len() <= crate::op::SPLICE_MAX && span <= PART_SPAN
        };
        let cuts = crate::op::parts_of_at_most(changes.len(), most, Changes::BLOCK, fits);
        Parts { held: changes.len(), changes, cuts }
    }

    /// How many parts are left.
    fn len(&self) -> usize {
        self.cuts.len()
    }

    /// The last part left.
    fn pop(&mut self) -> Option<Changes> {
        let part = self.cuts.pop()?;
        let out = self.changes.split_off(part.start);
        if self.held - self.changes.len() >= SHRINK_EVERY {
            self.changes.shrink_to_fit();
            self.held = self.changes.len();
        }
        Some(out)
    }
}

/// `Kill Edit` after some of its changes were made: each file's are taken
/// back as one undo step while they are still its newest; said as made in
/// part where they are not (or a file was renamed, which stays).
fn killed<H: Host>(h: &mut H, made: &[(BufferId, Option<GroupId>)], renamed: bool) -> Result<()> {
    let mut whole = !renamed;
    for (body, group) in made.iter().rev() {
        let newest = h.state().ok().and_then(|st| st.buffer(*body).ok().map(|b| b.newest_group()));
        let ours = group.is_some() && newest == Some(*group);
        if !(ours && h.propose(Proposal::Undo { buffer: *body }).is_ok()) {
            whole = false;
        }
    }
    match whole {
        true => Err(crate::edit::EditError::Killed.into()),
        false => Err(ExecError::KilledInPart),
    }
}

/// Proposes what an Edit's commands did.
fn apply<H: Host>(h: &mut H, window: Option<WindowId>, g: &Gathered, mut outcome: ecmd::Outcome) -> Result<()> {
    // A terminal's text changes only by its program: an Edit that would
    // change it changes nothing at all.
    let changed = outcome.changes.iter().filter(|(_, c)| c.iter().any(|(q0, q1, text)| q0 != q1 || !text.is_empty()));
    let renamed = outcome.renamed.keys();
    if let Some(f) = changed.map(|(f, _)| f).chain(renamed).find(|f| g.terms[**f]) {
        return Err(ExecError::TermText(g.files[*f].name.clone()));
    }
    if h.interrupted() {
        return Err(crate::edit::EditError::Killed.into());
    }
    for (f, name) in &outcome.renamed {
        let body = g.seen[*f].1;
        h.propose(Proposal::Name { buffer: body, name: name.clone() })?;
    }
    // Each file's changes made so far and the undo group they began.
    let mut made: Vec<(BufferId, Option<GroupId>)> = Vec::new();
    // Each file's version once this Edit's own changes were made: a file
    // `w` or `e` left as on disk is clean only if nothing else changed
    // it meanwhile (typing goes on while a UI's Edit runs).
    let mut ours: BTreeMap<usize, u64> = g.seen.iter().enumerate().map(|(f, s)| (f, s.2)).collect();
    let renamed = !outcome.renamed.is_empty();
    // Moved, not copied: a whole-file Edit's changes are many. They go a
    // part at a time, the last part first, one undo group all the same,
    // so that no one proposal holds the session while the rest wait.
    for (f, mut changes) in std::mem::take(&mut outcome.changes) {
        let (_, body, version) = g.seen[f];
        changes.drop_empty();
        // An Edit that changes nothing here says nothing (acme).
        let mut parts = Parts::new(changes, h.part_changes());
        let count = parts.len();
        let (buffer, origin) = (body, Origin::OtherFile);
        let Some(first) = parts.pop() else { continue };
        if h.interrupted() {
            return killed(h, &made, renamed);
        }
        let applied = h.propose(Proposal::Splices { buffer, version, changes: first, origin })?;
        let group = match applied.created {
            crate::propose::Created::Group(g) => Some(g),
            _ => None,
        };
        made.push((body, group));
        ours.insert(f, h.state()?.buffer(body)?.version);
        while let Some(part) = parts.pop() {
            if h.interrupted() {
                return killed(h, &made, renamed);
            }
            let more = Proposal::SplicesMore { buffer, version, changes: part, origin, group };
            if let Err(why) = h.propose(more) {
                return Err(ExecError::PartlyMade { made: count - parts.len() - 1, parts: count, why: Box::new(why) });
            }
            ours.insert(f, h.state()?.buffer(body)?.version);
        }
    }
    // (A terminal's text has no dot of the window's to set.)
    for (f, dot) in outcome.dots.iter().filter(|d| !g.terms[*d.0]) {
        let (w, body, _) = g.seen[*f];
        // The dot is in the text as the Edit left it: the version now,
        // unless someone typed meanwhile.
        let version = h.state()?.buffer(body)?.version;
        let p = Proposal::Select { buffer: body, view: ViewId::WindowBody(w), version, q0: dot.q0, q1: dot.q1 };
        let _ = h.propose(p);
    }
    for (f, count) in &outcome.undo {
        let body = g.seen[*f].1;
        for _ in 0..count.unsigned_abs() {
            // With nothing (more) to undo or redo, `u` stops, silent.
            let able = {
                let st = h.state()?;
                let b = st.buffer(body)?;
                if *count > 0 {
                    b.can_undo()
                } else {
                    b.can_redo()
                }
            };
            if !able {
                break;
            }
            let p = if *count > 0 { Proposal::Undo { buffer: body } } else { Proposal::Redo { buffer: body } };
            h.propose(p)?;
            ours.insert(*f, h.state()?.buffer(body)?.version);
        }
    }
    for f in &outcome.cleaned {
        let body = g.seen[*f].1;
        if Some(h.state()?.buffer(body)?.version) == ours.get(f).copied() {
            h.propose(Proposal::Clean { buffer: body })?;
        }
    }
    // Output first: `D` may close the window whose +Errors it names.
    warn(h, window, &outcome.printed)?;
    for path in &outcome.open {
        match path.is_empty() {
            true => h
                .propose(Proposal::CreateWindow { body: None, column: None, name: String::new(), near: None })
                .map(|_| ())?,
            false => open(h, path, None).map(|_| ())?,
        }
    }
    // acme's D1: a window whose changes would be lost stays, and says so.
    let mut kept = String::new();
    for f in &outcome.close {
        let w = g.seen[*f].0;
        match clean_to_close(h, w, false) {
            Ok(()) => h.propose(Proposal::DeleteWindow { window: w }).map(|_| ())?,
            Err(e @ ExecError::Modified(_)) => kept += &format!("{e}\n"),
            Err(e) => return Err(e),
        }
    }
    warn(h, window, &kept)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Parts come off the end of the list, the last first, each an
    /// entry's worth cut where a block begins, and together they are the
    /// list in order, however often its memory is given back on the way.
    #[test]
    fn parts_come_off_the_end_and_together_are_the_list() {
        let count = 2 * SHRINK_EVERY + 7;
        let changes: Changes =
            (0..count as u64).map(|q| (2 * q, 2 * q + 1, if q % 3 == 0 { "é" } else { "x" })).collect();
        let mut parts = Parts::new(changes.clone(), 1000);
        let cuts = parts.len();
        assert!((count.div_ceil(1000)..=count.div_ceil(1000 - Changes::BLOCK)).contains(&cuts));
        // Cut where the list's blocks begin, so that taking a part off
        // moves them whole.
        assert!(parts.cuts[1..].iter().all(|c| c.start % Changes::BLOCK == 0));
        let mut taken = Vec::new();
        while let Some(part) = parts.pop() {
            assert!(part.len() <= 1000 && !part.is_empty());
            taken.push(part);
        }
        assert_eq!(taken.len(), cuts);
        let back: Vec<_> = taken.iter().rev().flat_map(|p| p.iter()).collect();
        assert!(back.iter().copied().eq(changes.iter()), "the parts, in order, are the list");
    }

    /// Changes far apart (a whole-file `x/^\n/d`'s) go in parts that each
    /// span at most [`PART_SPAN`] runes, however few changes each holds;
    /// one change longer than that goes alone.
    #[test]
    fn a_part_spans_at_most_a_part_span() {
        let gap = PART_SPAN / 10;
        let mut changes: Changes = (0..1000u64).map(|i| (i * gap, i * gap + 1, "")).collect();
        changes.push(1000 * gap, 1000 * gap + 3 * PART_SPAN, "");
        let mut parts = Parts::new(changes, crate::op::SPOTS_MAX);
        let mut spans = Vec::new();
        while let Some(part) = parts.pop() {
            let (first, last) = (part.get(0), part.get(part.len() - 1));
            spans.push((part.len(), last.1 - first.0));
        }
        assert_eq!(spans[0], (1, 3 * PART_SPAN), "the long change alone");
        assert!(spans[1..].iter().all(|&(_, span)| span <= PART_SPAN), "{spans:?}");
        // Eleven changes a part at most (ten gaps of a tenth of the span).
        assert!(spans.len() > 1000 / 11, "{} parts", spans.len());
        assert_eq!(spans.iter().map(|s| s.0).sum::<usize>(), 1001);
    }
}
