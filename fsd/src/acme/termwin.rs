//! Terminals as acme windows: each terminal of the session appears in the
//! acme tree as a window named `DIR/-term.N` (as `win` names its windows
//! `DIR/-sysname`) whose body is the terminal's `text`, so tools that
//! read acme windows (`index`, `N/body`, `N/tag`, `N/ctl`) see terminal
//! output. They are read-only there: typing goes to `terms/N/cons`.
//!
//! acme numbers come from the layout, which a UI may lead, so the daemon
//! cannot take one for a terminal; a terminal's window is numbered
//! [`TERMS_FROM`] plus its terminal number instead, a range the layout's
//! counter does not reach.

use apex_core::term::Term;
use apex_core::{State, TermId};

/// The acme number of terminal 0; terminal N's window is this plus N.
pub const TERMS_FROM: u32 = 1_000_000;

/// Terminal `id`'s window number.
pub fn number(id: TermId) -> u32 {
    TERMS_FROM.saturating_add(u32::try_from(id.0).unwrap_or(u32::MAX - TERMS_FROM))
}

/// The terminal whose window is numbered `number`, if `state` has it.
pub fn term_of(state: &State, number: u32) -> Option<(TermId, &Term)> {
    let id = TermId(number.checked_sub(TERMS_FROM)? as u64);
    state.terms.get(&id).map(|t| (id, t))
}

/// `DIR/-term.N`.
pub fn name(id: TermId, t: &Term) -> String {
    t.window_name(id)
}

/// The window's tag, as acme makes a fresh window's.
pub fn tag(id: TermId, t: &Term) -> String {
    format!("{} Del Snarf | Look ", name(id, t))
}

/// The first five `index` and `ctl` fields of terminal `id`'s window.
pub fn five(id: TermId, t: &Term) -> String {
    let tag = tag(id, t).chars().count();
    format!("{:11} {:11} {:11} {:11} {:11} ", number(id), tag, t.text_runes(), 0, 0)
}
