//! Recipes that take several entries: laying out a session, making and
//! removing windows and columns. Proposals and the UI share them, so a
//! window made by a tool and one made in the UI are the same shards.
//!
//! Shards have no atomicity between them, so every recipe checks up front
//! that the node leads everything it will touch, then appends in an order a
//! reader can follow: a shard's creation before its entries, a buffer
//! before the window that shows it, the window before its place in the
//! layout.

use crate::cols;
use crate::error::{Reject, Result};
use crate::frac::Frac;
use crate::id::{AcmeNumber, BufferId, ColumnId, TermId, WindowId};
use crate::node::Node;
use crate::op::{BufferOp, LayoutOp, Op, Origin, WindowOp};
use crate::shard::{Shard, ViewId};

/// The top row's tag, as acme starts it.
pub const ROW_TAG: &str = "Newcol Kill Putall Dump Exit ";
/// A column's tag, as acme starts it.
pub const COLUMN_TAG: &str = "New Cut Paste Snarf Sort Zerox Delcol ";

/// A new window's tag for a file named `name` (acme's first
/// `winsettag`: nothing to undo yet, nothing to put).
pub fn window_tag(name: &str) -> String {
    format!("{}| Look ", tag_menu(name, &TagState::default()))
}

/// What a window's tag menu depends on.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TagState<'a> {
    /// The window offers the file menu (Undo, Redo, Put): not while a tool
    /// reads the events of a file window (acme's `filemenu`).
    pub menu: bool,
    pub can_undo: bool,
    pub can_redo: bool,
    pub dirty: bool,
    /// A terminal window's title or exit status ([`term_status`]).
    pub term: Option<&'a str>,
}

/// Longest terminal title a tag shows, in chars.
pub const TITLE_MAX: usize = 80;

/// What a terminal's window shows of it in its tag, after `Del Snarf`:
/// how its program ended once it has (`exit 2`, `signal 9`), else the
/// title it set, on one line, without a bar (which ends a tag's menu),
/// at most [`TITLE_MAX`] chars.
pub fn term_status(term: &crate::term::Term) -> String {
    match term.exit {
        Some(crate::term::ENDED_WITH_DAEMON) => "ended with the daemon".into(),
        Some(status) if status > 128 => format!("signal {}", status - 128),
        Some(status) => format!("exit {status}"),
        None => term
            .title
            .chars()
            .map(|c| match c {
                '|' => '¦',
                c if c.is_control() => ' ',
                c => c,
            })
            .take(TITLE_MAX)
            .collect::<String>()
            .trim()
            .to_string(),
    }
}

/// The part of a tag before its `|` (acme's `winsettag`): the name, `Del
/// Snarf`, then `Undo` and `Redo` when there is something to undo or redo
/// and `Put` when a named file is modified (with the menu on), and `Get`
/// for a directory; a terminal's window ends it with the terminal's
/// status. It ends with a blank.
pub fn tag_menu(name: &str, s: &TagState) -> String {
    let mut t = format!("{name} Del Snarf ");
    if let Some(status) = s.term {
        if !status.is_empty() {
            t += status;
            t += " ";
        }
        return t;
    }
    if s.menu {
        if s.can_undo {
            t += "Undo ";
        }
        if s.can_redo {
            t += "Redo ";
        }
        if !name.is_empty() && s.dirty && !crate::look::is_dir(name) {
            t += "Put ";
        }
    }
    if crate::look::is_dir(name) {
        t += "Get ";
    }
    t
}

/// Makes a clean buffer holding `text`, shown in `view` (these are
/// tags), its cursor at the end when `at_end` (where acme leaves the
/// cursor of the row's and columns' tags and of a file's window).
pub fn text_buffer(node: &mut Node, name: &str, text: &str, view: ViewId, at_end: bool) -> Result<BufferId> {
    let id = node.create_buffer_as(name)?;
    let shard = Shard::Buffer(id);
    if !text.is_empty() {
        node.append_splice(id, 0, 0, text, Origin::OtherFile)?;
    }
    node.append(shard, Op::Buffer(BufferOp::ViewAdd { view }))?;
    let end = text.chars().count() as u64;
    if at_end && end > 0 {
        node.append(shard, Op::Buffer(BufferOp::Select { view, q0: end, q1: end }))?;
    }
    node.append(shard, Op::Buffer(BufferOp::Clean))?;
    Ok(id)
}

/// Lays out a fresh session: the layout shard, the top row's tag and two
/// columns, as acme starts (`rowadd` twice: the second three fifths
/// across). The node becomes the layout's leader.
pub fn init_session(node: &mut Node) -> Result<()> {
    node.create_shard(Shard::Layout)?;
    let tag = text_buffer(node, "", ROW_TAG, ViewId::TopRow, true)?;
    node.append(Shard::Layout, Op::Layout(LayoutOp::RowTag { tag }))?;
    for _ in 0..2 {
        let x = cols::new_column_x(&node.state.layout);
        add_column(node, x)?;
    }
    Ok(())
}

/// Adds a column whose left edge is at `x`.
pub fn add_column(node: &mut Node, x: Frac) -> Result<ColumnId> {
    require_leader(node, Shard::Layout)?;
    let column = ColumnId(node.alloc()?);
    let tag = text_buffer(node, "", COLUMN_TAG, ViewId::ColumnTag(column), true)?;
    node.append(Shard::Layout, Op::Layout(LayoutOp::ColumnAdd { column, tag, x }))?;
    Ok(column)
}

/// A window that `new_window` made.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct NewWindow {
    pub window: WindowId,
    pub number: AcmeNumber,
    pub tag: BufferId,
    pub body: BufferId,
}

/// The tag text of a window already showing `body`: the focused one if
/// it shows it, else the first.
fn clone_tag(state: &crate::state::State, body: BufferId) -> Option<String> {
    let showing = |w: &WindowId| state.window(*w).is_ok_and(|x| x.body == body);
    let clone = state.layout.focus.filter(showing).or_else(|| windows_showing(state, body).next())?;
    Some(state.buffer(state.window(clone).ok()?.tag).ok()?.text.to_string())
}

/// The windows whose body is `body`, in order, found from the buffer's
/// views rather than by a walk of every window (each new window and
/// every tag rewrite asked, so a session of many windows was quadratic).
fn windows_showing(state: &crate::state::State, body: BufferId) -> impl Iterator<Item = WindowId> + '_ {
    let views = state.buffers.get(&body).into_iter().flat_map(|b| b.views.keys());
    views
        .filter_map(|v| match v {
            ViewId::WindowBody(w) => Some(*w),
            _ => None,
        })
        .filter(move |w| state.windows.get(w).is_some_and(|x| x.body == body))
}

fn require_leader(node: &Node, shard: Shard) -> Result<()> {
    match node.leads(shard) {
        true => Ok(()),
        false => Err(Reject::NotLeader { shard }),
    }
}

/// Makes a window showing `body` (or a new empty buffer named `name`) in
/// `column`, else the column of the window last clicked (acme's
/// `makenewwindow`: the active column, or the last selection's), else the
/// last column; below the column's last window. A second window on a
/// body (Zerox) starts with the tag of one already showing it, the text
/// typed after its `|` included, as acme's `wininit` copies its clone's.
pub fn new_window(node: &mut Node, body: Option<BufferId>, column: Option<ColumnId>, name: &str) -> Result<NewWindow> {
    new_window_near(node, body, column, name, None)
}

/// [`new_window`] for the text of window `near` (a file button 3 opened:
/// acme's `makenewwindow(t)`): placed in the largest empty space of the
/// column, else splitting `near` or the biggest window (`cols::add_near`).
pub fn new_window_near(
    node: &mut Node,
    body: Option<BufferId>,
    column: Option<ColumnId>,
    name: &str,
    near: Option<WindowId>,
) -> Result<NewWindow> {
    require_leader(node, Shard::Layout)?;
    let layout = &node.state.layout;
    let focused = layout.focus.and_then(|w| layout.find(w)).map(|(ci, _)| layout.columns[ci].id);
    let column = match column.or(focused) {
        Some(c) => c,
        None => layout.columns.last().map(|c| c.id).ok_or(Reject::NoColumn { column: ColumnId(0) })?,
    };
    let col = node.state.layout.columns.iter().find(|c| c.id == column).ok_or(Reject::NoColumn { column })?;
    let (moved, y) = match near {
        Some(near) => cols::add_near(col, node.lines.as_ref(), near),
        None => cols::add(col, node.lines.as_ref(), None),
    };
    if let Some(b) = body {
        node.state.buffer(b)?;
        require_leader(node, Shard::Buffer(b))?;
    }
    let window = WindowId(node.alloc()?);
    let name = match body {
        Some(b) => node.state.buffer(b)?.name.clone(),
        None => name.to_string(),
    };
    let body = match body {
        Some(b) => b,
        None => node.create_buffer_as(&name)?,
    };
    let clone_tag = clone_tag(&node.state, body);
    // A file's window and a copy have the tag's cursor at its end; an
    // unnamed new window (New, new/ctl) at its start, as acme leaves them.
    let at_end = clone_tag.is_some() || !name.is_empty();
    let tag_text = clone_tag.unwrap_or_else(|| window_tag(&name));
    let tag = text_buffer(node, "", &tag_text, ViewId::WindowTag(window), at_end)?;
    node.append(Shard::Buffer(body), Op::Buffer(BufferOp::ViewAdd { view: ViewId::WindowBody(window) }))?;
    node.create_shard(Shard::Window(window))?;
    node.append(Shard::Window(window), Op::Window(WindowOp::Create { tag, body }))?;
    move_tops(node, column, &moved)?;
    node.append(Shard::Layout, Op::Layout(LayoutOp::WindowAdd { window, column, y }))?;
    let number = node.state.layout.numbers[&window];
    Ok(NewWindow { window, number, tag, body })
}

/// Makes a window showing terminal `term` in `column` (else where
/// [`new_window`] puts one): an empty body named as the terminal's
/// window (`Term::window_name`), the terminal drawn in its place.
pub fn new_term_window(node: &mut Node, term: TermId, column: Option<ColumnId>) -> Result<NewWindow> {
    let name = node.state.terms.get(&term).ok_or(Reject::NoTerm { term })?.window_name(term);
    let made = new_window(node, None, column, &name)?;
    node.append(Shard::Window(made.window), Op::Window(WindowOp::Term { term: Some(term) }))?;
    Ok(made)
}

/// Removes a window: out of the layout, its views off its buffers, its tag
/// buffer and shard deleted, and its body too if no other window shows it.
pub fn delete_window(node: &mut Node, window: WindowId) -> Result<()> {
    let w = node.state.window(window)?.clone();
    for shard in [Shard::Layout, Shard::Window(window), Shard::Buffer(w.tag), Shard::Buffer(w.body)] {
        require_leader(node, shard)?;
    }
    let room = node.state.layout.find(window).and_then(|(ci, _)| cols::close(&node.state.layout.columns[ci], window));
    node.append(Shard::Layout, Op::Layout(LayoutOp::WindowDel { window }))?;
    if let Some((below, y)) = room {
        let column = node.state.layout.find(below).map(|(ci, _)| node.state.layout.columns[ci].id);
        if let Some(column) = column {
            node.append(Shard::Layout, Op::Layout(LayoutOp::WindowMove { window: below, column, y }))?;
        }
    }
    let shown_elsewhere = node.state.windows.iter().any(|(id, o)| *id != window && o.body == w.body);
    if shown_elsewhere {
        node.append(Shard::Buffer(w.body), Op::Buffer(BufferOp::ViewDel { view: ViewId::WindowBody(window) }))?;
    } else {
        node.delete_shard(Shard::Buffer(w.body))?;
    }
    node.delete_shard(Shard::Buffer(w.tag))?;
    node.delete_shard(Shard::Window(window))?;
    Ok(())
}

/// The windows the layout does not place, in id order.
pub fn unplaced(state: &crate::State) -> Vec<WindowId> {
    let placed: std::collections::BTreeSet<WindowId> =
        state.layout.columns.iter().flat_map(|c| c.windows.iter().map(|p| p.window)).collect();
    state.windows.keys().filter(|w| !placed.contains(w)).copied().collect()
}

/// Mends the layout where a leader that lost it left it wrong (a leader
/// stalled past its deadline, whose layout entries were fenced while its
/// own shards' were taken): places every window the layout does not
/// place that this node leads, where a new window would go, and drops
/// the place of every window that is gone; returns how many of each.
/// The maker of a window (or its deleter) never sees either while it
/// leads the layout but mid-recipe, so a node that leads the layout and
/// sees one is the one left to mend it.
pub fn mend_layout(node: &mut Node) -> Result<(usize, usize)> {
    if !node.leads(Shard::Layout) {
        return Ok((0, 0));
    }
    let state = &node.state;
    let gone: Vec<WindowId> = state
        .layout
        .columns
        .iter()
        .flat_map(|c| c.windows.iter().map(|p| p.window))
        // Deleted, as the metalog says: a window whose shard is made and
        // whose entries are still to come is not gone.
        .filter(|w| !state.windows.contains_key(w) && !state.meta.has_shard(Shard::Window(*w)))
        .collect();
    for &window in &gone {
        node.append(Shard::Layout, Op::Layout(LayoutOp::WindowDel { window }))?;
    }
    let lost: Vec<WindowId> = unplaced(&node.state).into_iter().filter(|w| node.leads(Shard::Window(*w))).collect();
    let Some(column) = node.state.layout.columns.last().map(|c| c.id) else { return Ok((0, gone.len())) };
    for &window in &lost {
        let col = node.state.layout.columns.iter().find(|c| c.id == column).ok_or(Reject::NoColumn { column })?;
        let (moved, y) = cols::add(col, node.lines.as_ref(), None);
        move_tops(node, column, &moved)?;
        node.append(Shard::Layout, Op::Layout(LayoutOp::WindowAdd { window, column, y }))?;
    }
    Ok((lost.len(), gone.len()))
}

/// Moves `window` so its top is at `y` in `column`; the window below its
/// old place takes the room it leaves, as acme's `colclose` gives it.
pub fn move_window(node: &mut Node, window: WindowId, column: ColumnId, y: Frac) -> Result<()> {
    require_leader(node, Shard::Layout)?;
    let (ci, _) = node.state.layout.find(window).ok_or(Reject::NoWindow { window })?;
    let room = cols::close(&node.state.layout.columns[ci], window).filter(|(below, _)| *below != window);
    let from = node.state.layout.columns[ci].id;
    node.append(Shard::Layout, Op::Layout(LayoutOp::WindowMove { window, column, y }))?;
    if let Some((below, top)) = room {
        // Within one column the window may have landed in that room.
        let still_below = node.state.layout.find(below).map(|(c, _)| node.state.layout.columns[c].id) == Some(from);
        if still_below && !(column == from && y == top) {
            node.append(Shard::Layout, Op::Layout(LayoutOp::WindowMove { window: below, column: from, y: top }))?;
        }
    }
    Ok(())
}

/// Removes a column and every window in it (acme's `Delcol`).
pub fn delete_column(node: &mut Node, column: ColumnId) -> Result<()> {
    require_leader(node, Shard::Layout)?;
    let col = node.state.layout.columns.iter().find(|c| c.id == column).ok_or(Reject::NoColumn { column })?;
    let (windows, tag): (Vec<WindowId>, _) = (col.windows.iter().map(|p| p.window).collect(), col.tag);
    for w in windows {
        delete_window(node, w)?;
    }
    node.append(Shard::Layout, Op::Layout(LayoutOp::ColumnDel { column }))?;
    if node.state.buffers.contains_key(&tag) && node.leads(Shard::Buffer(tag)) {
        node.delete_shard(Shard::Buffer(tag))?;
    }
    Ok(())
}

/// Gives `column`'s windows the tops `tops` (top to bottom): each of the
/// column's windows once, strictly rising from 0, or nothing changes.
pub fn arrange(node: &mut Node, column: ColumnId, tops: &[(WindowId, Frac)]) -> Result<()> {
    require_leader(node, Shard::Layout)?;
    let col = node.state.layout.columns.iter().find(|c| c.id == column).ok_or(Reject::NoColumn { column })?;
    let mut have: Vec<WindowId> = col.windows.iter().map(|p| p.window).collect();
    let mut want: Vec<WindowId> = tops.iter().map(|(w, _)| *w).collect();
    have.sort_unstable();
    want.sort_unstable();
    let rising = tops.first().is_none_or(|(_, y)| *y == Frac::ZERO) && tops.windows(2).all(|p| p[0].1 < p[1].1);
    if have != want || !rising || tops.iter().any(|(_, y)| *y > Frac::ONE) {
        return Err(Reject::Arrangement { column });
    }
    move_tops(node, column, tops)
}

/// Moves windows of `column` to new tops (in the column's order), one
/// entry each that moves: those going up from the top down, then those
/// going down from the bottom up, so the column keeps its order at every
/// step (a move takes a window out and puts it back by its top).
fn move_tops(node: &mut Node, column: ColumnId, tops: &[(WindowId, Frac)]) -> Result<()> {
    let col = node.state.layout.columns.iter().find(|c| c.id == column).ok_or(Reject::NoColumn { column })?;
    let now = |w: WindowId| col.windows.iter().find(|p| p.window == w).map(|p| p.y);
    let up: Vec<_> = tops.iter().filter(|(w, y)| now(*w).is_some_and(|old| *y < old)).copied().collect();
    let down: Vec<_> = tops.iter().rev().filter(|(w, y)| now(*w).is_some_and(|old| *y > old)).copied().collect();
    for (window, y) in up.into_iter().chain(down) {
        node.append(Shard::Layout, Op::Layout(LayoutOp::WindowMove { window, column, y }))?;
    }
    Ok(())
}

/// Where a tag's file name ends, as acme's `parsetag` finds it: at " Del
/// Snarf" if that comes before the bar (" |" or "\t|"), else at the first
/// blank or tab. A byte offset.
fn tag_name_end(tag: &str) -> usize {
    let pipe = [tag.find(" |"), tag.find("\t|")].into_iter().flatten().min();
    match tag.find(" Del Snarf") {
        Some(p) if pipe.is_none_or(|bar| p < bar) => p,
        _ => tag.find([' ', '\t']).unwrap_or(tag.len()),
    }
}

/// Brings the tags of the windows showing `buffer` up to date (acme's
/// `winsettag`): everything before the first `|` is made again from the
/// buffer's name and state ([`tag_menu`]); what the user wrote after it
/// stays. Only tags this node leads are touched. As acme does, the tag is
/// replaced from the first rune that differs through the bar, which goes
/// back in, so a tool reading the events sees what acme's would; `origin`
/// is whose change it follows (acme reports it with the window's owner).
/// Whether a tag changed.
pub fn settag(node: &mut Node, buffer: BufferId, origin: Origin) -> Result<bool> {
    let Ok(b) = node.state.buffer(buffer) else { return Ok(false) };
    let (name, can_undo, can_redo, dirty) = (b.name.clone(), b.can_undo(), b.can_redo(), b.differs_from_file());
    let status = |w: &crate::win::Window| w.term.and_then(|t| node.state.terms.get(&t)).map(term_status);
    let windows: Vec<(BufferId, bool, Option<String>)> = windows_showing(&node.state, buffer)
        .filter_map(|w| node.state.windows.get(&w))
        .map(|w| (w.tag, w.flags.menu, status(w)))
        .collect();
    let mut changed = false;
    for (tag, menu, term) in windows {
        if !node.leads(Shard::Buffer(tag)) {
            continue;
        }
        let Ok(t) = node.state.buffer(tag) else { continue };
        let mut text = t.text.to_string();
        // The name first, as winsettag1 does after parsetag.
        let name_end = tag_name_end(&text);
        if text[..name_end] != name {
            let q1 = text[..name_end].chars().count() as u64;
            let op = BufferOp::Splice { q0: 0, q1, text: name.clone(), origin };
            node.append(Shard::Buffer(tag), Op::Buffer(op))?;
            text.replace_range(..name_end, &name);
            changed = true;
        }
        let menu_text = tag_menu(&name, &TagState { menu, can_undo, can_redo, dirty, term: term.as_deref() });
        // The menu part runs through the bar; a tag without one is all
        // menu, and gets one.
        let end = text.find('|').map_or(text.len(), |bar| bar + 1);
        let have: Vec<char> = text[..end].chars().collect();
        let want: Vec<char> = format!("{menu_text}|").chars().collect();
        if have == want {
            continue;
        }
        let prefix = have.iter().zip(&want).take_while(|(a, b)| a == b).count();
        let (q0, q1) = (prefix as u64, have.len() as u64);
        let text: String = want[prefix..].iter().collect();
        node.append_splice(tag, q0, q1, &text, origin)?;
        changed = true;
    }
    Ok(changed)
}

/// Brings the tags of terminal `term`'s windows up to date with its
/// title and exit ([`settag`]): the daemon does after each update it
/// appends, a UI when it draws, each for the tags it leads. Whether a
/// tag changed.
pub fn settag_term(node: &mut Node, term: TermId) -> Result<bool> {
    let bodies: Vec<BufferId> = node.state.windows.values().filter(|w| w.term == Some(term)).map(|w| w.body).collect();
    let mut changed = false;
    for body in bodies {
        changed |= settag(node, body, Origin::OtherFile)?;
    }
    Ok(changed)
}
