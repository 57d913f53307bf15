//! B3 as acme's `look3` carries it out when no plumber takes the text:
//! an existing file opens (at its address) or shows its window; anything
//! else is searched for in the body, and what is found is selected and
//! shown (`textshow` where the host lays frames out).

use super::{dir_of, host, resolve, selection, window, ExecError, Host, Result, Win};
use crate::addr::{self, Range};
use crate::id::{BufferId, ColumnId, TermId, WindowId};
use crate::look;
use crate::propose::{Created, Proposal};
use crate::shard::ViewId;
use crate::show::Shown;

/// Searches the body for `needle` after its selection (wrapping), selects
/// it and scrolls to it. Text found nowhere is [`ExecError::NotFound`],
/// which acme does not report (`look3`): callers say nothing of it.
pub(super) fn find_and_show<H: Host>(h: &mut H, w: Win, needle: &str, from: Option<u64>) -> Result<()> {
    let term = h.state()?.window(w.id)?.term;
    if let Some(term) = term {
        return find_in_term(h, w.id, term, needle, from);
    }
    let (sel, version, _) = selection(h, w)?;
    // The text is taken (its rope shared) and searched with the state let
    // go: on the daemon, a search of a big body holds up no other request.
    let text = h.state()?.buffer(w.body)?.text.clone();
    let found = h.find_text(&text, needle, from.unwrap_or(sel.q1));
    let (q0, q1) = found.ok_or_else(|| ExecError::NotFound(needle.to_string()))?;
    select_and_show(h, w.id, w.body, version, Range::new(q0, q1))
}

/// [`find_and_show`] in a terminal's window: its text (scrollback, then
/// screen) searched after the host's selection of it, wrapping, and what
/// is found selected and shown where the host keeps that selection (a
/// UI's own, as a terminal's text has no dot in the session).
fn find_in_term<H: Host>(h: &mut H, window: WindowId, term: TermId, needle: &str, from: Option<u64>) -> Result<()> {
    // Its text is made, and searched, with the state let go.
    let text = crate::text::Text::from(term_of(h, term)?.text().as_str());
    let from = from.or_else(|| h.term_selection(window).map(|(_, q1)| q1)).unwrap_or(0);
    let (q0, q1) = h.find_text(&text, needle, from).ok_or_else(|| ExecError::NotFound(needle.to_string()))?;
    h.show_term_text(window, q0, q1)
}

/// The text selected in `w`: in its body, or of its terminal where the
/// host keeps a selection of it (what `Look` with no argument looks for).
pub(super) fn selected_text<H: Host>(h: &mut H, w: Win) -> Result<String> {
    let term = h.state()?.window(w.id)?.term;
    let Some(term) = term else { return Ok(selection(h, w)?.2) };
    let Some((q0, q1)) = h.term_selection(w.id) else { return Ok(String::new()) };
    let t = term_of(h, term)?;
    Ok(t.text().chars().skip(q0 as usize).take(q1.saturating_sub(q0) as usize).collect())
}

/// Terminal `term` as the state has it, copied out (its scrollback's rows
/// shared, not copied), so its text is made with no lock held: on the
/// daemon, a million rows of scrollback hold up no other request.
fn term_of<H: Host>(h: &H, term: TermId) -> Result<crate::term::Term> {
    h.state()?.terms.get(&term).cloned().ok_or(ExecError::from(crate::error::Reject::NoTerm { term }))
}

pub(crate) fn select_and_show<H: Host>(
    h: &mut H,
    window: WindowId,
    body: BufferId,
    version: u64,
    r: Range,
) -> Result<()> {
    let view = ViewId::WindowBody(window);
    h.propose(Proposal::Select { buffer: body, view, version, q0: r.q0, q1: r.q1 })?;
    let frame = h.shown(window);
    let (org, now, shown) = {
        let st = h.state()?;
        let b = st.buffer(body)?;
        let v = b.views.get(&view).copied().unwrap_or_default();
        let events = st.window(window).is_ok_and(|w| w.event_reader.is_some());
        let org = match frame {
            Some(frame) => crate::show::show(&b.text, Shown { org: v.org, ..frame }, v.q0, events),
            None => Some(look::show_origin(b, v.q0)),
        };
        (org, b.version, v.org)
    };
    match org {
        Some(org) if org != shown => {
            h.propose(Proposal::SetOrigin { buffer: body, view, version: now, org }).map(|_| ())
        }
        _ => Ok(()),
    }
}

/// B3 on `text` in `window`: an existing file (with `:address`) opens or
/// shows its window; anything else is searched for in the body.
pub fn look<H: Host>(h: &mut H, window: WindowId, text: &str) -> Result<()> {
    look_from(h, window, text, None)
}

/// [`look()`], the search starting at `from` when the text was clicked in
/// the body itself (acme's `look3` searches on from the end of the word
/// clicked), else at the end of the body's selection.
pub fn look_from<H: Host>(h: &mut H, window: WindowId, text: &str, from: Option<u64>) -> Result<()> {
    look_file_or_word(h, window, text, None, from)
}

/// [`look_from`] of a null click's expansion: `text` is the file name
/// around the click and `word` the word; when no file has that name, the
/// word is what is looked for (acme's `expand`: `executes.` looks for
/// `executes`).
pub fn look_file_or_word<H: Host>(
    h: &mut H,
    window: WindowId,
    text: &str,
    word: Option<&str>,
    from: Option<u64>,
) -> Result<()> {
    let w = window_ids(h, window)?;
    let text = text.trim();
    let (file, at) = look::file_and_addr(text);
    let dir = dir_of(h, Some(window))?;
    if file.starts_with('/') || dir.is_some() {
        let path = resolve(dir.as_deref(), file);
        if h.exists(&path) {
            return open_in(h, &path, at, None, Some(window)).map(|_| ());
        }
    }
    find_and_show(h, w, word.filter(|w| !w.trim().is_empty()).unwrap_or(text), from)
}

fn window_ids<H: Host>(h: &H, id: WindowId) -> Result<Win> {
    window(&*h.state()?, id)
}

/// Shows `path` in its window (made and loaded if there is none), at
/// `address` if given (acme's `openfile`).
pub fn open<H: Host>(h: &mut H, path: &str, address: Option<&str>) -> Result<WindowId> {
    open_in(h, path, address, None, None)
}

/// [`open`], a new window going to `column` (else where
/// `Proposal::CreateWindow` puts one), placed for the text of window
/// `near` when the file was named there (acme's `makenewwindow(t)`).
pub fn open_in<H: Host>(
    h: &mut H,
    path: &str,
    address: Option<&str>,
    column: Option<ColumnId>,
    near: Option<WindowId>,
) -> Result<WindowId> {
    let found = look::window_named(&*h.state()?, path);
    let (window, body) = match found {
        Some(f) => f,
        None => {
            let p = Proposal::CreateWindow { body: None, column, name: path.to_string(), near };
            let Created::Window(made) = h.propose(p)?.created else {
                return Err(ExecError::Host(format!("{path}: no window was made")));
            };
            h.get(made.body, None)?;
            // A file opened in a new window has nothing to undo, as acme's
            // openfile loads it (a later Get can be undone); a host's get
            // may have forgotten it already.
            let undoable = h.state()?.buffer(made.body).map(|b| b.can_undo() || b.can_redo())?;
            if undoable {
                h.propose(Proposal::ForgetUndo { buffer: made.body })?;
            }
            (made.window, made.body)
        }
    };
    h.propose(Proposal::Focus { window })?;
    let Some(address) = address else { return Ok(window) };
    let (text, version) = {
        let st = h.state()?;
        let b = st.buffer(body)?;
        (b.text.clone(), b.version)
    };
    // Evaluated with the state let go: a search holds up no one.
    let cx = addr::Context::new(&text, None, addr::Dialect::Sam, None);
    let r = addr::eval_in(&cx, address, Range::at(0), &mut None).map_err(host)?;
    select_and_show(h, window, body, version, r)?;
    Ok(window)
}
