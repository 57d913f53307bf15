//! acme's built-in commands (`exec.c`'s `exectab`), once, for the daemon
//! and every UI: [`BUILTINS`] names each with its flags, and [`run`]
//! carries one out against a [`Host`], the caller's side of the world.
//!
//! A built-in reads the state and proposes; everything that touches the
//! machine (files, directories, commands, processes, leaving) is a
//! request to the host, as Edit's pipes are (`ecmd::Pipes`). The daemon's
//! host proposes through its tree and runs work on its machine; a UI's
//! applies to its own replica where it leads. So `Del`'s check for
//! changes, `Paste`'s selection, `Sort`'s order and `Dump`'s format are
//! the same wherever the command was clicked.
//!
//! B2 on text that is not a built-in runs it as a command (`execute`), B3
//! opens a file or searches the body (`look`), as acme's `look3` does
//! when no plumber takes the text.

use crate::addr::Range;
use crate::cols;
use crate::dump::{self, Dump};
use crate::ecmd::Pipes;
use crate::id::{BufferId, ColumnId, WindowId};
use crate::look;
use crate::op::{Origin, WindowFlags};
use crate::propose::{Applied, Created, Proposal};

use crate::shard::ViewId;
use crate::state::State;
use std::ops::Deref;

mod edit;
mod get;
mod look3;
mod row;

pub use edit::{edit, finish as finish_edit, Prepared as PreparedEdit, Ran as RanEdit};
pub use get::{absolute, file_or_name, get_proposals, keeps_place, replaced_as_read, replaces_text};
use look3::find_and_show;
pub(crate) use look3::select_and_show;
pub use look3::{look, look_file_or_word, look_from, open, open_in};

/// What a caller provides: the state as it is now, a way to propose, and
/// the machine.
pub trait Host: Pipes {
    /// The session's state now (after this command's earlier proposals).
    fn state(&self) -> Result<impl Deref<Target = State> + '_, ExecError>;
    /// Proposes a change and waits until it is sequenced (or refused).
    fn propose(&mut self, proposal: Proposal) -> Result<Applied, ExecError>;
    /// Replaces `buffer`'s text with `file`'s (its name if none; a
    /// directory lists its entries) and marks it clean.
    fn get(&mut self, buffer: BufferId, file: Option<&str>) -> Result<(), ExecError>;
    /// Writes `buffer` to `file` (its name if none) and marks it clean.
    fn put(&mut self, buffer: BufferId, file: Option<&str>) -> Result<(), ExecError>;
    /// Puts each of `buffers` to its own file, as [`Host::put`] with no
    /// file does, the outcomes in their order: one after another, or
    /// side by side where the host can (the daemon: a durable write waits
    /// on the disk, and a thousand waits one after another add up).
    fn put_each(&mut self, buffers: &[BufferId]) -> Vec<Result<(), ExecError>> {
        buffers.iter().map(|&b| self.put(b, None)).collect()
    }
    /// Starts `command` in `dir` (the host's own directory when `None` or
    /// missing), its output going to `DIR/+Errors`; does not wait. With
    /// the window it was executed in, the command gets acme's `$winid`,
    /// `$%` and `$samfile` (its number and file name).
    fn start(&mut self, dir: Option<&str>, command: &str, window: Option<WindowId>) -> Result<(), ExecError>;
    /// Ends a process this session started.
    fn kill(&mut self, pid: u64) -> Result<(), ExecError>;
    /// Starts a terminal in `dir` (the host's own directory when `None`)
    /// running `command` (the user's shell when `None`), shown in a new
    /// window: `Win`.
    fn start_term(&mut self, dir: Option<&str>, command: Option<&str>) -> Result<(), ExecError>;
    /// Ends terminal `term`: its program, and its shard.
    fn close_term(&mut self, term: crate::id::TermId) -> Result<(), ExecError>;
    /// The next `needle` in `text` after rune `from`, wrapping (Look's
    /// and B3's search, [`crate::look::find_next`]): in one thread here;
    /// a host with cores to spare (the daemon) searches a big text's
    /// parts side by side.
    fn find_text(&self, text: &crate::text::Text, needle: &str, from: u64) -> Option<(u64, u64)> {
        crate::look::find_next(text, needle, from)
    }
    /// Whether `path` names a file or directory on the host.
    fn exists(&mut self, path: &str) -> bool;
    fn read_file(&mut self, path: &str) -> Result<Vec<u8>, ExecError>;
    fn write_file(&mut self, path: &str, bytes: &[u8]) -> Result<(), ExecError>;
    /// The user's home directory, for the default dump file.
    fn home(&self) -> Option<String>;
    /// The host's working directory (a dump's first line).
    fn cwd(&self) -> String;
    /// `Exit` (or `Abort`): a UI closes and leaves the session running;
    /// the daemon, which has no window to close, says so.
    fn exit(&mut self, abort: bool) -> Result<(), ExecError>;
    /// The last regular expression used, which an empty one (`//`) means:
    /// one for the host, as acme keeps one for the whole program, so it
    /// carries from one Edit to the next.
    fn last_pattern(&self) -> Option<String>;
    fn set_last_pattern(&mut self, pattern: Option<String>);
    /// What `window`'s body frame shows at its origin, where the host
    /// lays it out (a UI): then a found text is shown as acme's
    /// `textshow` shows it (left where it is when on the screen, else a
    /// quarter down). Without one, at the top.
    fn shown(&mut self, window: WindowId) -> Option<crate::show::Shown> {
        let _ = window;
        None
    }
    /// What the host has selected of terminal window `window`'s text,
    /// in runes of the terminal's `text` (scrollback, then screen): a UI
    /// keeps its own selection of a terminal's text, which has no dot in
    /// the session. None where nothing is, or no UI draws it (the daemon).
    fn term_selection(&mut self, window: WindowId) -> Option<(u64, u64)> {
        let _ = window;
        None
    }
    /// Selects `q0..q1` of terminal window `window`'s text and shows it
    /// (a UI scrolls its view of the scrollback there). Where no UI draws
    /// it (the daemon) there is no view to move: found is all it is.
    fn show_term_text(&mut self, window: WindowId, q0: u64, q1: u64) -> Result<(), ExecError> {
        let _ = (window, q0, q1);
        Ok(())
    }
    /// Where a gathered Edit's commands run: a UI runs them on a thread of
    /// its own, so that drawing and typing go on, and hands what they did
    /// to [`finish_edit`] when they end (returning None); a host with no
    /// such place (the daemon, which runs a whole command as a job) gives
    /// the Edit back to be run here and now.
    fn run_apart(&mut self, edit: PreparedEdit) -> Result<Option<PreparedEdit>, ExecError> {
        Ok(Some(edit))
    }
    /// How many changes an Edit proposes at a time: an entry's worth
    /// ([`crate::op::SPOTS_MAX`]), or fewer where another thread waits on
    /// each proposal's apply (a UI's, drawing).
    fn part_changes(&self) -> usize {
        crate::op::SPOTS_MAX
    }
    /// Commands the host runs itself, by number and command, beside the
    /// session's processes (a UI's running Edit): `Kill` ends them too,
    /// through [`Host::kill`].
    fn jobs(&self) -> Vec<(u64, String)> {
        Vec::new()
    }
}

/// Why a built-in did nothing (or stopped). Its text is what acme would
/// warn, and the 9P error a tool sees.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ExecError {
    /// A whole-file Edit goes in parts; one after the first failed.
    #[error("Edit: made {made} of its {parts} parts of changes, then {why}; Undo takes back what it made")]
    PartlyMade { made: usize, parts: usize, why: Box<ExecError> },
    /// `Kill Edit` came after changes it could not all take back.
    #[error(
        "Edit: killed after some of its changes were made (or a file renamed); Undo in each window takes them back"
    )]
    KilledInPart,
    #[error("{0}: execute it in a window's tag or body")]
    NeedsWindow(&'static str),
    #[error("{0}: execute it in a column's tag or a window in the column")]
    NeedsColumn(&'static str),
    /// acme's `%s modified` (`unnamed file modified` without a name):
    /// the command again goes ahead.
    #[error("{} modified", if .0.is_empty() { "unnamed file" } else { .0.as_str() })]
    Modified(String),
    #[error("can't delete column; {0} is running an application")]
    Running(String),
    /// An Edit would change a terminal's text.
    #[error("Edit: {0} is a terminal: its text changes only by its program; type into it")]
    TermText(String),
    /// `Del` on a terminal's window whose program runs: warned once.
    #[error("{0}: its program is still running; Del again to end it")]
    TermRunning(String),
    #[error("Kill: no process {0}")]
    NoProcess(String),
    /// A UI runs one Edit at a time.
    #[error("Edit: another runs ({0}); wait for it, or Kill Edit")]
    EditRunning(String),
    /// A file named for the daemon's machine must be named in full.
    #[error("{what}: {file:?} is not an absolute path; name the file in full (the daemon runs elsewhere)")]
    NotAbsolute { what: &'static str, file: String },
    #[error("{0}: the buffer has no name; give a file")]
    Unnamed(&'static str),
    /// acme's get in a window with no name.
    #[error("no file name")]
    NoFileName,
    /// acme's get of a file it cannot read (`textload`); the window is
    /// left empty and clean (see [`get_proposals`] with no text).
    #[error("can't open {file}: {why}")]
    CantOpen { file: String, why: String },
    #[error(transparent)]
    Load(#[from] dump::LoadError),
    #[error(transparent)]
    Edit(#[from] crate::edit::EditError),
    #[error("no {0:?} in the body")]
    NotFound(String),
    #[error(transparent)]
    Refused(#[from] crate::error::Reject),
    /// What the host said.
    #[error("{0}")]
    Host(String),
}

pub(crate) type Result<T, E = ExecError> = std::result::Result<T, E>;

/// Which built-in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Cmd {
    Abort,
    Cut,
    Del,
    Delcol,
    Delete,
    Dump,
    Edit,
    Exit,
    Font,
    Get,
    Id,
    Incl,
    Indent,
    Kill,
    Load,
    Local,
    Look,
    New,
    Newcol,
    Paste,
    Put,
    Putall,
    Redo,
    Send,
    Snarf,
    Sort,
    Tab,
    Undo,
    /// apex's own: a terminal in a window (acme runs plan9port's `win`).
    Win,
    Zerox,
}

/// One row of the table, as acme's `Exectab`.
#[derive(Clone, Copy, Debug)]
pub struct Builtin {
    pub name: &'static str,
    pub cmd: Cmd,
    /// It acts on a window (its body's selection, its file).
    pub needs_window: bool,
    /// It changes text, so a UI starts a new undo group first (acme's
    /// `mark` field); proposals already start one per change.
    pub marks: bool,
}

const fn b(name: &'static str, cmd: Cmd, needs_window: bool, marks: bool) -> Builtin {
    Builtin { name, cmd, needs_window, marks }
}

/// Every built-in acme has, by name. Nothing else lists them.
pub const BUILTINS: &[Builtin] = &[
    b("Abort", Cmd::Abort, false, false),
    b("Cut", Cmd::Cut, true, true),
    b("Del", Cmd::Del, true, false),
    b("Delcol", Cmd::Delcol, false, false),
    b("Delete", Cmd::Delete, true, false),
    b("Dump", Cmd::Dump, false, false),
    b("Edit", Cmd::Edit, false, false),
    b("Exit", Cmd::Exit, false, false),
    b("Font", Cmd::Font, false, false),
    b("Get", Cmd::Get, true, false),
    b("ID", Cmd::Id, true, false),
    b("Incl", Cmd::Incl, true, false),
    b("Indent", Cmd::Indent, false, false),
    b("Kill", Cmd::Kill, false, false),
    b("Load", Cmd::Load, false, false),
    b("Local", Cmd::Local, false, false),
    b("Look", Cmd::Look, true, false),
    b("New", Cmd::New, false, false),
    b("Newcol", Cmd::Newcol, false, false),
    b("Paste", Cmd::Paste, true, true),
    b("Put", Cmd::Put, true, false),
    b("Putall", Cmd::Putall, false, false),
    b("Redo", Cmd::Redo, true, false),
    b("Send", Cmd::Send, true, true),
    b("Snarf", Cmd::Snarf, true, false),
    b("Sort", Cmd::Sort, false, false),
    b("Tab", Cmd::Tab, false, false),
    b("Undo", Cmd::Undo, true, false),
    b("Win", Cmd::Win, false, false),
    b("Zerox", Cmd::Zerox, true, false),
];

/// Whether `command`'s first word is a built-in.
pub fn is_builtin(command: &str) -> bool {
    lookup(look::split_command(command).0).is_some()
}

/// The built-in named `name`.
pub fn lookup(name: &str) -> Option<&'static Builtin> {
    BUILTINS.iter().find(|b| b.name == name)
}

/// Where a command was executed.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Call {
    /// The window whose tag or body it was in.
    pub window: Option<WindowId>,
    /// The column whose tag it was in (or the window's column).
    pub column: Option<ColumnId>,
    /// The text after the command's first word.
    pub arg: String,
}

impl Call {
    /// A command executed in `window`.
    pub fn in_window(window: WindowId, arg: &str) -> Call {
        Call { window: Some(window), column: None, arg: arg.to_string() }
    }
}

/// A window's ids.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Win {
    pub(crate) id: WindowId,
    pub(crate) body: BufferId,
}

fn window(state: &State, id: WindowId) -> Result<Win> {
    let w = state.window(id)?;
    Ok(Win { id, body: w.body })
}

fn host(e: impl std::fmt::Display) -> ExecError {
    ExecError::Host(e.to_string())
}

/// Runs `text` as B2 does: a built-in by its first word, any other text as
/// a command in the window's directory. A command that starts with `|`,
/// `<` or `>` works on the selection of the window (else of the window
/// last clicked), as acme runs it with `rdsel` and `wrsel`: `|` replaces
/// the selection with what the command makes of it, `<` with what the
/// command prints, `>` sends it to the command, whose output goes to
/// `+Errors`. The host runs it in the background, as any command (the
/// daemon reads the selection and puts the output in its place).
pub fn execute<H: Host>(h: &mut H, window: Option<WindowId>, text: &str) -> Result<()> {
    let (word, arg) = look::split_command(text);
    if word.is_empty() {
        return Ok(());
    }
    let call = Call { window, column: None, arg: arg.to_string() };
    match lookup(word) {
        Some(builtin) => run(h, builtin, &call),
        None if text.trim_start().starts_with(['|', '<', '>']) => {
            let on = match window {
                Some(w) => Some(w),
                None => h.state()?.layout.focus,
            };
            let dir = dir_of(h, on)?;
            h.start(dir.as_deref(), text.trim(), on)
        }
        None => {
            let dir = dir_of(h, window)?;
            h.start(dir.as_deref(), text.trim(), window)
        }
    }
}

/// The directory commands run in for `window`: its name's.
fn dir_of<H: Host>(h: &H, window: Option<WindowId>) -> Result<Option<String>> {
    let st = h.state()?;
    Ok(window
        .and_then(|w| st.window(w).ok())
        .and_then(|w| st.buffer(w.body).ok())
        .and_then(|b| look::window_dir(&b.name)))
}

/// Carries out one built-in.
pub fn run<H: Host>(h: &mut H, builtin: &Builtin, call: &Call) -> Result<()> {
    // In a column's tag, Cut, Paste, Snarf and Zerox act on the last
    // selection (acme's `seltext`): the window last clicked, a Zerox
    // going to that window's column.
    let selected;
    let call = match (call.window, call.column, builtin.cmd) {
        (None, Some(_), Cmd::Cut | Cmd::Paste | Cmd::Snarf | Cmd::Zerox) => {
            let focus = h.state()?.layout.focus;
            selected = Call { window: focus, column: None, arg: call.arg.clone() };
            &selected
        }
        _ => call,
    };
    let w = match call.window {
        Some(id) => Some(window(&*h.state()?, id)?),
        None if builtin.needs_window => return Err(ExecError::NeedsWindow(builtin.name)),
        None => None,
    };
    let need = || w.ok_or(ExecError::NeedsWindow(builtin.name));
    let arg = call.arg.trim();
    let arg_opt = (!arg.is_empty()).then_some(arg);
    match builtin.cmd {
        Cmd::Abort => h.exit(true),
        Cmd::Exit => {
            let st = h.state()?;
            let ids: Vec<WindowId> =
                st.layout.columns.iter().flat_map(|c| c.windows.iter().map(|p| p.window)).collect();
            drop(st);
            let mut first = None;
            for id in ids {
                if let Err(e) = clean_to_close(h, id, true) {
                    first.get_or_insert(e);
                }
            }
            match first {
                Some(e) => Err(e),
                None => h.exit(false),
            }
        }
        Cmd::Cut | Cmd::Snarf => {
            let w = need()?;
            let (sel, version, text) = selection(h, w)?;
            if sel.q0 == sel.q1 {
                return Ok(());
            }
            h.propose(Proposal::Snarf { text })?;
            if builtin.cmd == Cmd::Cut {
                let p = Proposal::Delete { buffer: w.body, version, q0: sel.q0, q1: sel.q1, origin: Origin::Mouse };
                h.propose(p)?;
            }
            Ok(())
        }
        Cmd::Paste => {
            let w = need()?;
            let (sel, version, _) = selection(h, w)?;
            paste(h, w, sel, version)
        }
        Cmd::Send => send(h, need()?),
        Cmd::Del | Cmd::Delete => {
            let w = need()?;
            // A terminal's window: Del warns once while its program runs;
            // then, and with Delete, the window goes and the terminal ends.
            let term = h.state()?.window(w.id)?.term.filter(|t| h.state().is_ok_and(|st| st.terms.contains_key(t)));
            if let Some(t) = term {
                if builtin.cmd == Cmd::Del {
                    running_to_close(h, w.id, t)?;
                }
                h.propose(Proposal::DeleteWindow { window: w.id })?;
                return h.close_term(t);
            }
            if builtin.cmd == Cmd::Del {
                let (event_reader, copies) = {
                    let st = h.state()?;
                    let copies = st.windows.values().filter(|o| o.body == w.body).count();
                    (st.window(w.id)?.event_reader.is_some(), copies)
                };
                // acme: a tool reading the events decides; a Zerox copy
                // closes freely; otherwise changes are warned about once.
                if !event_reader && copies < 2 {
                    clean_to_close(h, w.id, false)?;
                }
            }
            h.propose(Proposal::DeleteWindow { window: w.id }).map(|_| ())
        }
        Cmd::Delcol => {
            let column = column_of(h, call, w).ok_or(ExecError::NeedsColumn(builtin.name))?;
            let ids: Vec<WindowId> = {
                let st = h.state()?;
                let col = st.layout.columns.iter().find(|c| c.id == column).ok_or(ExecError::NeedsColumn("Delcol"))?;
                col.windows.iter().map(|p| p.window).collect()
            };
            for id in &ids {
                clean_to_close(h, *id, true)?;
            }
            for id in &ids {
                let st = h.state()?;
                if st.window(*id)?.event_reader.is_some() {
                    return Err(ExecError::Running(st.buffer(st.window(*id)?.body)?.name.clone()));
                }
            }
            h.propose(Proposal::DeleteColumn { column }).map(|_| ())
        }
        Cmd::Dump => {
            let file = row::dump_file(h, arg_opt)?;
            let bytes = row::dump_state(h)?.to_bytes();
            h.write_file(&file, &bytes)
        }
        Cmd::Load => {
            let file = row::dump_file(h, arg_opt)?;
            let d = Dump::parse(&h.read_file(&file)?)?;
            row::load(h, &d)
        }
        Cmd::Edit => edit(h, w.map(|w| w.id), arg),
        Cmd::Font => {
            let name = arg_opt.map(str::to_string);
            settings(h, w, |f| {
                f.font = match &name {
                    Some(n) => Some(n.clone()),
                    // No argument: switch between the fixed and the
                    // variable font.
                    None => match f.font.as_deref() {
                        Some(dump::FONT_FIX) => None,
                        _ => Some(dump::FONT_FIX.to_string()),
                    },
                }
            })
        }
        Cmd::Tab => match arg_opt {
            Some(n) => {
                let n: u32 = n.parse().ok().filter(|n| (1..=MAX_TAB).contains(n)).ok_or_else(|| {
                    ExecError::Host(format!(
                        "Tab: {n:?} is not a tab width; give a number of characters from 1 to {MAX_TAB}, as Tab 8"
                    ))
                })?;
                settings(h, w, |f| f.tab = Some(n))
            }
            None => {
                let w = need()?;
                let (name, tab) = {
                    let st = h.state()?;
                    (st.buffer(w.body)?.name.clone(), st.window(w.id)?.flags.tab.unwrap_or(DEFAULT_TAB))
                };
                warn(h, Some(w.id), &format!("{name}: Tab {tab}\n"))
            }
        },
        Cmd::Indent => {
            let on = match arg_opt.map(str::to_ascii_lowercase).as_deref() {
                Some("on") => Some(true),
                Some("off") => Some(false),
                None => None,
                Some(other) => return Err(ExecError::Host(format!("Indent: {other:?}: say on, off, or nothing"))),
            };
            settings(h, w, |f| f.autoindent = on.unwrap_or(!f.autoindent))
        }
        Cmd::Incl => {
            let w = need()?;
            if arg.is_empty() {
                let incl = h.state()?.window(w.id)?.flags.incl.clone();
                let text: String = incl.iter().map(|d| format!("{d}\n")).collect();
                return warn(h, Some(w.id), &text);
            }
            let words: Vec<String> = arg.split_whitespace().map(str::to_string).collect();
            settings(h, Some(w), |f| {
                for d in &words {
                    if !f.incl.contains(d) {
                        f.incl.insert(0, d.clone());
                    }
                }
            })
        }
        Cmd::Id => {
            let w = need()?;
            let n = h.state()?.layout.numbers.get(&w.id).map_or(0, |n| n.0);
            warn(h, Some(w.id), &format!("/mnt/acme/{n}/\n"))
        }
        Cmd::Kill => kill(h, arg),
        Cmd::Win => {
            // In the directory of the window it is run from, as win
            // starts in the directory acme runs it in; the argument, if
            // any, is the command (else the user's shell).
            let dir = dir_of(h, w.map(|w| w.id))?;
            h.start_term(dir.as_deref(), (!arg.is_empty()).then_some(arg))
        }
        Cmd::Local => {
            if arg.is_empty() {
                return Ok(());
            }
            // acme's Local runs with no window: no $winid.
            let dir = dir_of(h, w.map(|w| w.id))?;
            h.start(dir.as_deref(), arg, None)
        }
        Cmd::Look => {
            let w = need()?;
            let needle = match arg_opt {
                Some(a) => a.to_string(),
                None => look3::selected_text(h, w)?,
            };
            find_and_show(h, w, &needle, None)
        }
        Cmd::New => {
            let column = column_of(h, call, w);
            if arg.is_empty() {
                let p = Proposal::CreateWindow { body: None, column, name: String::new(), near: None };
                return h.propose(p).map(|_| ());
            }
            let dir = dir_of(h, w.map(|w| w.id))?;
            for name in arg.split_whitespace() {
                let path = resolve(dir.as_deref(), name);
                open_in(h, &path, None, None, w.map(|w| w.id))?;
            }
            Ok(())
        }
        Cmd::Newcol => {
            let Created::Column(column) = h.propose(Proposal::CreateColumn { x: None })?.created else {
                return Err(ExecError::Host("Newcol: no column was made".into()));
            };
            let p = Proposal::CreateWindow { body: None, column: Some(column), name: String::new(), near: None };
            h.propose(p).map(|_| ())
        }
        Cmd::Get => {
            let w = need()?;
            clean_to_close(h, w.id, true)?;
            let dir = dir_of(h, Some(w.id))?;
            let file = arg_opt.map(|a| resolve(dir.as_deref(), a));
            h.get(w.body, file.as_deref())
        }
        Cmd::Put => {
            let w = need()?;
            let dir = dir_of(h, Some(w.id))?;
            let file = arg_opt.map(|a| resolve(dir.as_deref(), a));
            h.put(w.body, file.as_deref())
        }
        Cmd::Putall => putall(h),
        // acme's undo: with nothing to undo or redo, nothing happens and
        // nothing is said.
        Cmd::Undo | Cmd::Redo => {
            let body = need()?.body;
            let undo = builtin.cmd == Cmd::Undo;
            let able = {
                let st = h.state()?;
                let b = st.buffer(body)?;
                if undo {
                    b.can_undo()
                } else {
                    b.can_redo()
                }
            };
            match (able, undo) {
                (false, _) => Ok(()),
                (true, true) => h.propose(Proposal::Undo { buffer: body }).map(|_| ()),
                (true, false) => h.propose(Proposal::Redo { buffer: body }).map(|_| ()),
            }
        }
        Cmd::Sort => {
            let column = column_of(h, call, w).ok_or(ExecError::NeedsColumn(builtin.name))?;
            let moves = {
                let st = h.state()?;
                let col = st.layout.columns.iter().find(|c| c.id == column).ok_or(ExecError::NeedsColumn("Sort"))?;
                let name = |id: WindowId| {
                    st.window(id).ok().and_then(|w| st.buffer(w.body).ok()).map(|b| b.name.clone()).unwrap_or_default()
                };
                cols::sorted(col, name)
            };
            h.propose(Proposal::Arrange { column, tops: moves }).map(|_| ())
        }
        Cmd::Zerox => {
            let w = need()?;
            let column = column_of(h, call, Some(w));
            h.propose(Proposal::CreateWindow { body: Some(w.body), column, name: String::new(), near: None })
                .map(|_| ())
        }
    }
}

/// A window's tab widths, kept with the window's flags.
pub use crate::op::{DEFAULT_TAB, MAX_TAB};

/// `path` as a name: absolute as it is, else under `dir`.
pub(crate) fn resolve(dir: Option<&str>, path: &str) -> String {
    match (path.starts_with('/'), dir) {
        (false, Some(d)) => format!("{}/{path}", d.trim_end_matches('/')),
        _ => path.to_string(),
    }
}

/// The column a command acts on: the one named, or the window's.
fn column_of<H: Host>(h: &H, call: &Call, w: Option<Win>) -> Option<ColumnId> {
    call.column.or_else(|| {
        let st = h.state().ok()?;
        let (ci, _) = st.layout.find(w?.id)?;
        Some(st.layout.columns[ci].id)
    })
}

/// The body's selection, the version it is at, and its text.
fn selection<H: Host>(h: &H, w: Win) -> Result<(Range, u64, String)> {
    let (sel, version, text) = {
        let st = h.state()?;
        let b = st.buffer(w.body)?;
        let v = b.views.get(&ViewId::WindowBody(w.id)).copied().unwrap_or_default();
        (Range::new(v.q0.min(b.len()), v.q1.min(b.len())), b.version, b.text.clone())
    };
    // Copied with the state let go: a big selection holds up no one.
    Ok((sel, version, text.slice(sel.q0 as usize..sel.q1 as usize).to_string()))
}

/// acme's `winclean`: whether `window` may lose its changes. A changed
/// file warns once (`NAME modified`, remembered at the body's version, so
/// the same command again goes ahead); an unnamed one only when it holds
/// 100 runes or more. Windows named `.../guide` or `...+Errors` and
/// directories never warn; unless `conservative`, a window whose events a
/// tool reads is the tool's to decide.
pub fn clean_to_close<H: Host>(h: &mut H, window: WindowId, conservative: bool) -> Result<()> {
    let (flags, name, version) = {
        let st = h.state()?;
        let w = st.window(window)?;
        let b = st.buffer(w.body)?;
        let small_and_unnamed = b.name.is_empty() && b.len() < 100;
        let safe = !b.dirty || look::never_warns(&b.name) || look::is_dir(&b.name) || small_and_unnamed;
        if safe || (!conservative && w.event_reader.is_some()) || w.flags.warned == Some(b.version) {
            return Ok(());
        }
        (w.flags.clone(), b.name.clone(), b.version)
    };
    let flags = WindowFlags { warned: Some(version), ..flags };
    h.propose(Proposal::Flags { window, flags })?;
    Err(ExecError::Modified(name))
}

/// acme's `winclean` for a terminal's window: while its program runs,
/// warns once (remembered in the window's flags, as a dirty file's
/// warning is) and refuses; a second `Del` goes ahead.
fn running_to_close<H: Host>(h: &mut H, window: WindowId, term: crate::id::TermId) -> Result<()> {
    let (flags, name, version) = {
        let st = h.state()?;
        let w = st.window(window)?;
        let b = st.buffer(w.body)?;
        let running = st.terms.get(&term).is_some_and(|t| t.exit.is_none());
        if !running || w.flags.warned == Some(b.version) {
            return Ok(());
        }
        (w.flags.clone(), b.name.clone(), b.version)
    };
    h.propose(Proposal::Flags { window, flags: WindowFlags { warned: Some(version), ..flags } })?;
    Err(ExecError::TermRunning(name))
}

/// Replaces `sel` with the snarf buffer and selects what was pasted.
fn paste<H: Host>(h: &mut H, w: Win, sel: Range, version: u64) -> Result<()> {
    let snarf = h.state()?.layout.snarf.clone();
    if snarf.is_empty() && sel.q0 == sel.q1 {
        return Ok(());
    }
    let p = Proposal::Replace {
        buffer: w.body,
        version,
        q0: sel.q0,
        q1: sel.q1,
        text: snarf.clone(),
        origin: Origin::Mouse,
    };
    h.propose(p)?;
    let now = h.state()?.buffer(w.body)?.version;
    let q1 = sel.q0 + snarf.chars().count() as u64;
    let p = Proposal::Select { buffer: w.body, view: ViewId::WindowBody(w.id), version: now, q0: sel.q0, q1 };
    h.propose(p).map(|_| ())
}

/// acme's `Send` (what `win` relies on): the selection, if any, becomes
/// the snarf buffer; the snarf buffer is appended at the end of the body,
/// with a newline if it does not end in one, and the end is selected.
fn send<H: Host>(h: &mut H, w: Win) -> Result<()> {
    let (sel, _, text) = selection(h, w)?;
    if sel.q0 != sel.q1 {
        h.propose(Proposal::Snarf { text })?;
    }
    let (len, version, snarf) = {
        let st = h.state()?;
        let b = st.buffer(w.body)?;
        (b.len(), b.version, st.layout.snarf.clone())
    };
    let mut text = snarf;
    let ends_in_newline = match text.is_empty() {
        true => len == 0 || h.state()?.buffer(w.body)?.text.char(len as usize - 1) == '\n',
        false => text.ends_with('\n'),
    };
    if !ends_in_newline {
        text.push('\n');
    }
    if !text.is_empty() {
        h.propose(Proposal::Insert { buffer: w.body, version, q0: len, text, origin: Origin::Mouse })?;
    }
    let (end, version) = {
        let st = h.state()?;
        let b = st.buffer(w.body)?;
        (b.len(), b.version)
    };
    let p = Proposal::Select { buffer: w.body, view: ViewId::WindowBody(w.id), version, q0: end, q1: end };
    h.propose(p).map(|_| ())
}

/// Changes window settings: `w`'s, or every window's when executed
/// outside one (acme's row tag changes them all).
pub(crate) fn settings<H: Host>(h: &mut H, w: Option<Win>, change: impl Fn(&mut WindowFlags)) -> Result<()> {
    let targets: Vec<(WindowId, WindowFlags)> = {
        let st = h.state()?;
        match w {
            Some(w) => vec![(w.id, st.window(w.id)?.flags.clone())],
            None => st.windows.iter().map(|(id, w)| (*id, w.flags.clone())).collect(),
        }
    };
    for (window, old) in targets {
        let mut flags = old.clone();
        change(&mut flags);
        if flags != old {
            h.propose(Proposal::Flags { window, flags })?;
        }
    }
    Ok(())
}

/// acme's `warning`: appends `text` to the `+Errors` window of `window`'s
/// directory (made if missing), keeping it clean.
pub fn warn<H: Host>(h: &mut H, window: Option<WindowId>, text: &str) -> Result<()> {
    if text.is_empty() {
        return Ok(());
    }
    let name = {
        let st = h.state()?;
        let of = window.and_then(|w| st.window(w).ok()).and_then(|w| st.buffer(w.body).ok());
        of.map_or_else(|| "+Errors".to_string(), |b| look::errors_for(&b.name))
    };
    let found = look::window_named(&*h.state()?, &name);
    let body = match found {
        Some((_, body)) => body,
        None => match h
            .propose(Proposal::CreateWindow { body: None, column: None, name: name.clone(), near: None })?
            .created
        {
            Created::Window(made) => made.body,
            _ => return Err(ExecError::Host(format!("no window {name} was made"))),
        },
    };
    let (len, version) = {
        let st = h.state()?;
        let b = st.buffer(body)?;
        (b.len(), b.version)
    };
    let p = Proposal::Insert { buffer: body, version, q0: len, text: text.to_string(), origin: Origin::OtherFile };
    h.propose(p)?;
    h.propose(Proposal::Clean { buffer: body }).map(|_| ())
}

/// `Kill NAME...`: ends the session's processes whose command starts with
/// each name; with no name, every process this session runs.
fn kill<H: Host>(h: &mut H, arg: &str) -> Result<()> {
    let mut procs: Vec<(u64, String)> =
        h.state()?.meta.processes.iter().map(|(pid, p)| (*pid, p.command.clone())).collect();
    procs.extend(h.jobs());
    let names: Vec<&str> = arg.split_whitespace().collect();
    if names.is_empty() {
        for (pid, _) in procs {
            h.kill(pid)?;
        }
        return Ok(());
    }
    for name in names {
        let hits: Vec<u64> =
            procs.iter().filter(|(_, c)| c.split_whitespace().next() == Some(name)).map(|(p, _)| *p).collect();
        if hits.is_empty() {
            return Err(ExecError::NoProcess(name.to_string()));
        }
        for pid in hits {
            h.kill(pid)?;
        }
    }
    Ok(())
}

/// The round each of a [`Host::put_each`]'s buffers may be put in, by
/// their file names in order: the first after every earlier buffer of
/// its name. Puts of one round may go side by side; the last buffer of a
/// name is then the file's text, as when they go one after another.
pub fn put_rounds<S: AsRef<str>>(names: &[S]) -> Vec<usize> {
    let mut last: std::collections::HashMap<&str, usize> = std::collections::HashMap::new();
    names
        .iter()
        .map(|name| {
            let round = last.get(name.as_ref()).map_or(0, |r| r + 1);
            last.insert(name.as_ref(), round);
            round
        })
        .collect()
}

/// `Putall`: every changed file window that is not a tool's, once per
/// file; a file that is gone is not made again.
fn putall<H: Host>(h: &mut H) -> Result<()> {
    let todo: Vec<(BufferId, String)> = {
        let st = h.state()?;
        let mut seen = std::collections::BTreeSet::new();
        let mut todo = Vec::new();
        for p in st.layout.columns.iter().flat_map(|c| &c.windows) {
            let Ok(w) = st.window(p.window) else { continue };
            let Ok(b) = st.buffer(w.body) else { continue };
            if look::is_scratch(&b.name) || look::is_dir(&b.name) || w.event_reader.is_some() || !b.dirty {
                continue;
            }
            if seen.insert(w.body) {
                todo.push((w.body, b.name.clone()));
            }
        }
        todo
    };
    // One file that cannot be written is said, and the rest still go;
    // what is said is in the windows' order.
    let there: Vec<bool> = todo.iter().map(|(_, name)| h.exists(name)).collect();
    let bodies: Vec<BufferId> = todo.iter().zip(&there).filter(|(_, t)| **t).map(|((b, _), _)| *b).collect();
    let mut put = h.put_each(&bodies).into_iter();
    let mut said = String::new();
    for ((_, name), there) in todo.iter().zip(there) {
        match there {
            true => {
                if let Some(Err(e)) = put.next() {
                    said += &format!("{e}\n");
                }
            }
            false => said += &format!("no auto-Put of {name}: file does not exist\n"),
        }
    }
    warn(h, None, &said)
}
