//! acme's built-ins (`exec.rs`), each from a state in to the proposals and
//! host requests out, against a host of the test's own: a server node that
//! leads everything, a map for files, and a record of every request.

use apex_core::exec::{self, Call, ExecError, Host, BUILTINS};
use apex_core::make::NewWindow;
use apex_core::propose::{Applied, Created, Proposal};
use apex_core::*;
use std::collections::BTreeMap;
use std::result::Result;

#[derive(Default)]
pub(crate) struct Machine {
    pub(crate) files: BTreeMap<String, Vec<u8>>,
    /// Requests to the host, in order: `get B FILE`, `start DIR CMD`...
    asked: Vec<String>,
    /// The $winid each `start` was given (its window's number).
    winids: Vec<Option<u32>>,
    /// Files a put is refused for.
    unwritable: Vec<String>,
}

pub(crate) struct TestHost {
    pub(crate) node: Node,
    pub(crate) machine: Machine,
    pub(crate) proposed: Vec<Proposal>,
    last_pattern: Option<String>,
    /// `Kill Edit` comes once this many parts of changes were proposed.
    kill_after_parts: Option<usize>,
    /// Edits are run apart, as a UI runs them: held here until the test
    /// runs and finishes them.
    hold_edits: bool,
    /// How many changes an Edit proposes at a time, if not an entry's.
    part_changes: Option<usize>,
    held: Option<exec::PreparedEdit>,
}

/// The number a held Edit is listed by among the host's jobs.
const HELD: u64 = u64::MAX;

impl ecmd::Pipes for TestHost {
    fn run(&mut self, command: &str, input: Option<&str>, _: &ecmd::EditFile) -> Result<String, ecmd::PipeError> {
        self.machine.asked.push(format!("pipe {command}"));
        Ok(input.unwrap_or_default().to_uppercase())
    }
    fn load(&mut self, path: &str) -> Result<Vec<u8>, ecmd::PipeError> {
        self.machine.files.get(path).cloned().ok_or_else(|| ecmd::PipeError::System("No such file or directory".into()))
    }
    fn save(&mut self, path: &str, bytes: &[u8]) -> Result<(), ecmd::PipeError> {
        self.machine.files.insert(path.to_string(), bytes.to_vec());
        Ok(())
    }
    fn interrupted(&mut self) -> bool {
        let parts =
            self.proposed.iter().filter(|p| matches!(p, Proposal::Splices { .. } | Proposal::SplicesMore { .. }));
        self.kill_after_parts.is_some_and(|n| parts.count() >= n)
    }
}

impl Host for TestHost {
    fn state(&self) -> Result<impl std::ops::Deref<Target = State> + '_, ExecError> {
        Ok(&self.node.state)
    }
    fn propose(&mut self, p: Proposal) -> Result<Applied, ExecError> {
        self.proposed.push(p.clone());
        propose::apply(&mut self.node, &p).map_err(ExecError::from)
    }
    fn get(&mut self, b: BufferId, file: Option<&str>) -> Result<(), ExecError> {
        let name = file.map_or_else(|| self.node.state.buffer(b).unwrap().name.clone(), str::to_string);
        self.machine.asked.push(format!("get {name}"));
        let text = String::from_utf8(self.machine.files.get(&name).cloned().unwrap_or_default()).unwrap();
        for p in exec::get_proposals(self.node.state.buffer(b).unwrap(), b, &name, file.is_some(), vec![text]) {
            self.propose(p)?;
        }
        Ok(())
    }
    fn put(&mut self, b: BufferId, file: Option<&str>) -> Result<(), ExecError> {
        let buf = self.node.state.buffer(b).unwrap();
        let name = file.map_or_else(|| buf.name.clone(), str::to_string);
        self.machine.asked.push(format!("put {name}"));
        if self.machine.unwritable.contains(&name) {
            return Err(ExecError::Host(format!("put: {name}: refused")));
        }
        self.machine.files.insert(name, buf.text.to_string().into_bytes());
        self.propose(Proposal::Clean { buffer: b }).map(|_| ())
    }
    fn start(&mut self, dir: Option<&str>, command: &str, window: Option<WindowId>) -> Result<(), ExecError> {
        let winid = window.and_then(|w| self.node.state.layout.numbers.get(&w).map(|n| n.0));
        self.machine.winids.push(winid);
        self.machine.asked.push(format!("start {} {command}", dir.unwrap_or("-")));
        Ok(())
    }
    fn kill(&mut self, pid: u64) -> Result<(), ExecError> {
        self.machine.asked.push(format!("kill {pid}"));
        Ok(())
    }
    fn start_term(&mut self, dir: Option<&str>, command: Option<&str>) -> Result<(), ExecError> {
        self.machine.asked.push(format!("term {dir:?} {command:?}"));
        Ok(())
    }
    fn close_term(&mut self, term: apex_core::TermId) -> Result<(), ExecError> {
        self.machine.asked.push(format!("close term {}", term.0));
        Ok(())
    }
    fn exists(&mut self, path: &str) -> bool {
        self.machine.files.contains_key(path)
    }
    fn read_file(&mut self, path: &str) -> Result<Vec<u8>, ExecError> {
        self.machine.files.get(path).cloned().ok_or_else(|| ExecError::Host(format!("no file {path}")))
    }
    fn write_file(&mut self, path: &str, bytes: &[u8]) -> Result<(), ExecError> {
        self.machine.files.insert(path.to_string(), bytes.to_vec());
        Ok(())
    }
    fn home(&self) -> Option<String> {
        Some("/home/glenda".into())
    }
    fn cwd(&self) -> String {
        "/home/glenda".into()
    }
    fn exit(&mut self, abort: bool) -> Result<(), ExecError> {
        self.machine.asked.push(if abort { "abort".into() } else { "exit".into() });
        Ok(())
    }
    fn last_pattern(&self) -> Option<String> {
        self.last_pattern.clone()
    }
    fn set_last_pattern(&mut self, pattern: Option<String>) {
        self.last_pattern = pattern;
    }
    fn run_apart(&mut self, edit: exec::PreparedEdit) -> Result<Option<exec::PreparedEdit>, ExecError> {
        match (&self.held, self.hold_edits) {
            (_, false) => Ok(Some(edit)),
            (Some(running), true) => Err(ExecError::EditRunning(running.command().to_string())),
            (None, true) => {
                self.held = Some(edit);
                Ok(None)
            }
        }
    }
    fn part_changes(&self) -> usize {
        self.part_changes.unwrap_or(apex_core::op::SPOTS_MAX)
    }
    fn jobs(&self) -> Vec<(u64, String)> {
        self.held.iter().map(|e| (HELD, format!("Edit {}", e.command()))).collect()
    }
}

pub(crate) fn host() -> TestHost {
    let mut node = Node::server();
    make::init_session(&mut node).unwrap();
    TestHost {
        node,
        machine: Machine::default(),
        proposed: Vec::new(),
        last_pattern: None,
        kill_after_parts: None,
        hold_edits: false,
        part_changes: None,
        held: None,
    }
}

impl TestHost {
    pub(crate) fn window(&mut self, name: &str, text: &str) -> NewWindow {
        let Created::Window(w) = self
            .propose(Proposal::CreateWindow { body: None, column: None, name: name.into(), near: None })
            .unwrap()
            .created
        else {
            panic!("a window")
        };
        if !text.is_empty() {
            let p = Proposal::Insert { buffer: w.body, version: 0, q0: 0, text: text.into(), origin: Origin::Keyboard };
            self.propose(p).unwrap();
        }
        self.proposed.clear();
        w
    }
    pub(crate) fn text(&self, b: BufferId) -> String {
        self.node.state.buffer(b).unwrap().text.to_string()
    }
    pub(crate) fn select(&mut self, w: &NewWindow, q0: u64, q1: u64) {
        let version = self.node.state.buffer(w.body).unwrap().version;
        let p = Proposal::Select { buffer: w.body, view: ViewId::WindowBody(w.window), version, q0, q1 };
        self.propose(p).unwrap();
        self.proposed.clear();
    }
    pub(crate) fn sel(&self, w: &NewWindow) -> (u64, u64) {
        let v = self.node.state.buffer(w.body).unwrap().views[&ViewId::WindowBody(w.window)];
        (v.q0, v.q1)
    }
    pub(crate) fn run(&mut self, name: &str, w: Option<&NewWindow>, arg: &str) -> Result<(), ExecError> {
        let b = exec::lookup(name).unwrap_or_else(|| panic!("{name} is a built-in"));
        exec::run(self, b, &Call { window: w.map(|w| w.window), column: None, arg: arg.into() })
    }
    pub(crate) fn flags(&self, w: &NewWindow) -> WindowFlags {
        self.node.state.window(w.window).unwrap().flags.clone()
    }
    pub(crate) fn window_named(&self, name: &str) -> Option<(WindowId, BufferId)> {
        look::window_named(&self.node.state, name)
    }
}

#[test]
fn the_table_has_every_acme_builtin_once() {
    let names: Vec<&str> = BUILTINS.iter().map(|b| b.name).collect();
    let acme = [
        "Abort", "Cut", "Del", "Delcol", "Delete", "Dump", "Edit", "Exit", "Font", "Get", "ID", "Incl", "Indent",
        "Kill", "Load", "Local", "Look", "New", "Newcol", "Paste", "Put", "Putall", "Redo", "Send", "Snarf", "Sort",
        "Tab", "Undo", "Zerox",
    ];
    // And apex's own: Win, a terminal in a window (acme runs win).
    let ours: Vec<&str> = names.iter().copied().filter(|n| *n != "Win").collect();
    assert_eq!(ours, acme);
    assert!(names.contains(&"Win"));
    assert!(exec::is_builtin("Del now") && !exec::is_builtin("Delx"));
    assert!(exec::is_builtin("Edit ,d") && !exec::is_builtin("ls -l"));
}

#[test]
fn snarf_cut_paste_and_send() {
    let mut h = host();
    let w = h.window("/tmp/f", "hello world\n");
    h.select(&w, 0, 5);
    h.run("Snarf", Some(&w), "").unwrap();
    assert_eq!(h.node.state.layout.snarf, "hello");
    assert_eq!(h.proposed, vec![Proposal::Snarf { text: "hello".into() }]);
    h.select(&w, 6, 11);
    h.run("Cut", Some(&w), "").unwrap();
    assert_eq!((h.text(w.body).as_str(), h.node.state.layout.snarf.as_str()), ("hello \n", "world"));
    h.select(&w, 0, 5);
    h.run("Paste", Some(&w), "").unwrap();
    assert_eq!(h.text(w.body), "world \n");
    assert_eq!(h.sel(&w), (0, 5), "Paste selects what it pasted");
    // Send: the selection is snarfed and appended, with a newline.
    h.select(&w, 0, 5);
    h.run("Send", Some(&w), "").unwrap();
    assert_eq!(h.text(w.body), "world \nworld\n");
    assert_eq!(h.sel(&w), (13, 13));
    // Nothing selected: what was snarfed goes again.
    h.run("Send", Some(&w), "").unwrap();
    assert_eq!(h.text(w.body), "world \nworld\nworld\n");
    assert_eq!(h.run("Cut", None, ""), Err(ExecError::NeedsWindow("Cut")));
}

#[test]
fn in_a_column_tag_cut_paste_snarf_and_zerox_act_on_the_last_selection() {
    let in_column = |h: &mut TestHost, name: &str| {
        let column = h.node.state.layout.columns[0].id;
        let b = exec::lookup(name).unwrap();
        exec::run(h, b, &Call { window: None, column: Some(column), arg: String::new() })
    };
    // No window yet: nothing to act on.
    let mut h = host();
    assert_eq!(h.node.state.layout.focus, None);
    assert_eq!(in_column(&mut h, "Cut"), Err(ExecError::NeedsWindow("Cut")));
    let w = h.window("/tmp/f", "hello world\n");
    let other = h.window("/tmp/g", "other\n");
    h.select(&w, 6, 11);
    h.propose(Proposal::Focus { window: w.window }).unwrap();
    in_column(&mut h, "Snarf").unwrap();
    assert_eq!(h.node.state.layout.snarf, "world");
    in_column(&mut h, "Cut").unwrap();
    assert_eq!(h.text(w.body), "hello \n");
    h.select(&w, 0, 5);
    in_column(&mut h, "Paste").unwrap();
    assert_eq!(h.text(w.body), "world \n", "Paste pastes into the last selection");
    assert_eq!(h.text(other.body), "other\n");
    // Zerox copies the window last clicked, into its own column.
    let home = h.node.state.layout.find(w.window).unwrap().0;
    in_column(&mut h, "Zerox").unwrap();
    let copies: Vec<_> = h.node.state.windows.iter().filter(|(_, x)| x.body == w.body).map(|(id, _)| *id).collect();
    assert_eq!(copies.len(), 2);
    assert!(copies.iter().all(|c| h.node.state.layout.find(*c).unwrap().0 == home));
}

#[test]
fn del_warns_once_about_changes_and_delete_does_not() {
    let mut h = host();
    let w = h.window("/tmp/changed", "text");
    assert_eq!(h.run("Del", Some(&w), ""), Err(ExecError::Modified("/tmp/changed".into())));
    assert!(h.node.state.window(w.window).is_ok(), "the first Del only warns");
    h.run("Del", Some(&w), "").unwrap();
    assert!(h.node.state.window(w.window).is_err());
    // A change after the warning warns again.
    let w = h.window("/tmp/again", "x");
    assert!(h.run("Del", Some(&w), "").is_err());
    let p = Proposal::Insert { buffer: w.body, version: 1, q0: 1, text: "y".into(), origin: Origin::Keyboard };
    h.propose(p).unwrap();
    assert!(h.run("Del", Some(&w), "").is_err());
    h.run("Delete", Some(&w), "").unwrap();
    // Scratch windows and Zerox copies close at once.
    let s = h.window("/tmp/+Errors", "out");
    h.run("Del", Some(&s), "").unwrap();
    let w = h.window("/tmp/z", "text");
    h.run("Zerox", Some(&w), "").unwrap();
    assert_eq!(h.node.state.windows.values().filter(|x| x.body == w.body).count(), 2);
    h.run("Del", Some(&w), "").unwrap();
    assert!(h.node.state.buffer(w.body).is_ok(), "the copy still shows the text");
}

#[test]
fn get_put_and_putall_go_to_the_host() {
    let mut h = host();
    h.machine.files.insert("/tmp/a".into(), b"from disk".to_vec());
    let w = h.window("/tmp/a", "");
    h.run("Get", Some(&w), "").unwrap();
    assert_eq!(h.text(w.body), "from disk");
    let p = Proposal::Insert { buffer: w.body, version: 1, q0: 0, text: ">".into(), origin: Origin::Keyboard };
    h.propose(p).unwrap();
    assert_eq!(h.run("Get", Some(&w), ""), Err(ExecError::Modified("/tmp/a".into())), "Get warns too");
    h.run("Put", Some(&w), "").unwrap();
    assert_eq!(h.machine.files["/tmp/a"], b">from disk");
    h.run("Put", Some(&w), "b").unwrap();
    assert_eq!(h.machine.files["/tmp/b"], b">from disk", "a relative name is in the window's directory");
    let x = h.window("/tmp/b", "changed");
    let gone = h.window("/tmp/gone", "changed");
    let _ = gone;
    h.machine.asked.clear();
    h.run("Putall", None, "").unwrap();
    assert_eq!(h.machine.asked, vec!["put /tmp/b"]);
    assert!(!h.node.state.buffer(x.body).unwrap().dirty);
    let (_, errors) = h.window_named("+Errors").expect("the missing file is reported");
    assert!(h.text(errors).contains("no auto-Put of /tmp/gone"));
    // A file that cannot be written is said, and the rest still go.
    h.machine.files.insert("/tmp/gone".into(), Vec::new());
    h.machine.files.insert("/tmp/y".into(), Vec::new());
    h.machine.unwritable.push("/tmp/b".into());
    let y = h.window("/tmp/y", "changed");
    h.propose(Proposal::Insert { buffer: x.body, version: 1, q0: 0, text: "!".into(), origin: Origin::Keyboard })
        .unwrap();
    h.run("Putall", None, "").unwrap();
    assert_eq!(h.machine.files["/tmp/y"], b"changed", "written after the refusal");
    assert_eq!(h.machine.files["/tmp/gone"], b"changed");
    assert!(h.node.state.buffer(x.body).unwrap().dirty && !h.node.state.buffer(y.body).unwrap().dirty);
    assert!(h.text(errors).contains("put: /tmp/b: refused"), "{}", h.text(errors));
}

#[test]
fn undo_redo_look_and_id() {
    let mut h = host();
    let w = h.window("/tmp/u", "one two one");
    h.run("Undo", Some(&w), "").unwrap();
    assert_eq!(h.text(w.body), "");
    h.run("Redo", Some(&w), "").unwrap();
    assert_eq!(h.text(w.body), "one two one");
    // Nothing to redo: nothing happens, nothing is said (acme's undo), and
    // Edit's u stops there too, going on with the rest.
    h.proposed.clear();
    h.run("Redo", Some(&w), "").unwrap();
    h.run("Edit", Some(&w), "u -3\n=").unwrap();
    assert!(!h.proposed.iter().any(|p| matches!(p, Proposal::Redo { .. })), "{:?}", h.proposed);
    let (_, errors) = h.window_named("/tmp/+Errors").unwrap();
    assert_eq!(h.text(errors), "/tmp/u:1\n", "the = after the u ran");
    h.select(&w, 0, 3);
    h.run("Look", Some(&w), "").unwrap();
    assert_eq!(h.sel(&w), (8, 11), "Look finds the selection's next occurrence");
    h.run("Look", Some(&w), "two").unwrap();
    assert_eq!(h.sel(&w), (4, 7));
    assert_eq!(h.run("Look", Some(&w), "six"), Err(ExecError::NotFound("six".into())));
    h.run("ID", Some(&w), "").unwrap();
    let (_, errors) = h.window_named("/tmp/+Errors").unwrap();
    assert!(h.text(errors).ends_with(&format!("/mnt/acme/{}/\n", w.number.0)));
}

#[test]
fn new_newcol_zerox_delcol_and_sort_change_the_layout() {
    let mut h = host();
    let w = h.window("/tmp/m", "");
    let columns = h.node.state.layout.columns.len();
    h.run("New", Some(&w), "").unwrap();
    assert_eq!(h.node.state.windows.len(), 2);
    h.machine.files.insert("/tmp/n".into(), b"n".to_vec());
    h.run("New", Some(&w), "n").unwrap();
    let (_, n) = h.window_named("/tmp/n").expect("New NAME opens the file");
    assert_eq!(h.text(n), "n");
    h.run("Newcol", None, "").unwrap();
    assert_eq!(h.node.state.layout.columns.len(), columns + 1);
    let last = h.node.state.layout.columns.last().unwrap().clone();
    assert_eq!(last.windows.len(), 1, "Newcol makes a window in the new column");
    // Sort orders the column by name.
    let col = h.node.state.layout.columns[1].id;
    let before: Vec<String> = names(&h, col);
    h.run("Sort", Some(&w), "").unwrap();
    let mut sorted = before.clone();
    sorted.sort();
    assert_eq!(names(&h, col), sorted);
    // Delcol takes the new column and its window.
    let in_last = last.windows[0].window;
    exec::run(
        &mut h,
        exec::lookup("Delcol").unwrap(),
        &Call { window: Some(in_last), column: None, arg: String::new() },
    )
    .unwrap();
    assert_eq!(h.node.state.layout.columns.len(), columns);
    assert!(h.node.state.window(in_last).is_err());
}

fn names(h: &TestHost, col: ColumnId) -> Vec<String> {
    let st = &h.node.state;
    let c = st.layout.columns.iter().find(|c| c.id == col).unwrap();
    c.windows.iter().map(|p| st.buffer(st.window(p.window).unwrap().body).unwrap().name.clone()).collect()
}

#[test]
fn delcol_refuses_a_changed_file() {
    let mut h = host();
    let w = h.window("/tmp/dirty", "x");
    assert_eq!(h.run("Delcol", Some(&w), ""), Err(ExecError::Modified("/tmp/dirty".into())));
    h.run("Delcol", Some(&w), "").unwrap();
    assert!(h.node.state.window(w.window).is_err());
}

#[test]
fn font_tab_indent_incl_are_replicated_settings() {
    let mut h = host();
    let w = h.window("/tmp/s", "");
    h.run("Font", Some(&w), "").unwrap();
    assert_eq!(h.flags(&w).font.as_deref(), Some(dump::FONT_FIX));
    h.run("Font", Some(&w), "").unwrap();
    assert_eq!(h.flags(&w).font, None, "Font toggles back");
    h.run("Font", Some(&w), "/lib/font/x.font").unwrap();
    assert_eq!(h.flags(&w).font.as_deref(), Some("/lib/font/x.font"));
    h.run("Tab", Some(&w), "8").unwrap();
    assert_eq!(h.flags(&w).tab, Some(8));
    assert!(h.run("Tab", Some(&w), "x").is_err());
    for wide in ["0", "1001", "536870912"] {
        let e = h.run("Tab", Some(&w), wide).unwrap_err().to_string();
        assert!(e.contains("from 1 to 1000"), "{e}");
    }
    assert_eq!(h.flags(&w).tab, Some(8), "a refused Tab changes nothing");
    // A leader's own flags op is held to the same range.
    for got in [0, exec::MAX_TAB + 1] {
        let wide = WindowFlags { tab: Some(got), ..h.flags(&w) };
        let op = Op::Window(WindowOp::Flags(Box::new(wide)));
        let refused = h.node.append(Shard::Window(w.window), op);
        assert!(matches!(refused, Err(Reject::TabWidth { max: 1000, .. })), "{refused:?}");
    }
    assert_eq!(h.flags(&w).tab, Some(8));
    h.run("Tab", Some(&w), "").unwrap();
    let (_, errors) = h.window_named("/tmp/+Errors").unwrap();
    assert_eq!(h.text(errors), "/tmp/s: Tab 8\n");
    h.run("Indent", Some(&w), "").unwrap();
    assert!(h.flags(&w).autoindent);
    h.run("Indent", Some(&w), "off").unwrap();
    assert!(!h.flags(&w).autoindent);
    h.run("Incl", Some(&w), "/usr/include /opt/inc").unwrap();
    assert_eq!(h.flags(&w).incl, vec!["/opt/inc", "/usr/include"]);
    // From outside a window, Tab sets every window's.
    let other = h.window("/tmp/t", "");
    h.run("Tab", None, "2").unwrap();
    assert_eq!((h.flags(&w).tab, h.flags(&other).tab), (Some(2), Some(2)));
}

#[test]
fn del_on_a_running_terminal_s_window_warns_once_then_ends_it() {
    let mut h = host();
    let make_term = |h: &mut TestHost| {
        let id = apex_core::TermId(h.node.alloc().unwrap());
        h.node.create_shard(Shard::Term(id)).unwrap();
        let create = apex_core::TermOp::Create {
            cols: 80,
            rows: 24,
            scrollback: 100,
            command: "sh".into(),
            dir: "/home/glenda".into(),
        };
        h.node.append(Shard::Term(id), apex_core::Op::Term(create)).unwrap();
        let Created::Window(w) = h.propose(Proposal::TermWindow { term: id, column: None }).unwrap().created else {
            panic!("a window")
        };
        (id, w)
    };
    let (id, w) = make_term(&mut h);
    assert_eq!(h.node.state.buffer(w.body).unwrap().name, format!("/home/glenda/-term.{}", id.0));
    let e = h.run("Del", Some(&w), "").unwrap_err().to_string();
    assert!(e.contains("its program is still running; Del again"), "{e}");
    assert!(h.node.state.windows.contains_key(&w.window), "warned, not closed");
    h.run("Del", Some(&w), "").unwrap();
    assert!(!h.node.state.windows.contains_key(&w.window));
    assert_eq!(h.machine.asked, vec![format!("close term {}", id.0)]);
    // Edit searches a terminal's text and refuses to change it.
    let (_, tw) = make_term(&mut h);
    let t = h.node.state.window(tw.window).unwrap().term.unwrap();
    h.node.state.terms.get_mut(&t).unwrap().grid[0] = apex_core::grid::Row::plain("$ make");
    let e = h.run("Edit", Some(&tw), ",s/make/made/").unwrap_err().to_string();
    assert!(e.contains("is a terminal: its text changes only by its program"), "{e}");
    h.run("Edit", Some(&tw), ",x/make/ p").unwrap();
    // Delete does not ask.
    let (id, w) = make_term(&mut h);
    h.run("Delete", Some(&w), "").unwrap();
    assert_eq!(h.machine.asked.last(), Some(&format!("close term {}", id.0)));
}

#[test]
fn win_opens_a_terminal_in_the_window_s_directory() {
    let mut h = host();
    let w = h.window("/home/glenda/src/f.c", "");
    h.run("Win", Some(&w), "").unwrap();
    h.run("Win", None, "htop").unwrap();
    assert_eq!(h.machine.asked, vec!["term Some(\"/home/glenda/src\") None", "term None Some(\"htop\")"]);
}

#[test]
fn commands_local_kill_exit_and_abort_ask_the_host() {
    let mut h = host();
    let w = h.window("/home/glenda/src/f.c", "");
    exec::execute(&mut h, Some(w.window), "ls -l").unwrap();
    h.run("Local", Some(&w), "mk").unwrap();
    assert_eq!(h.machine.asked, vec!["start /home/glenda/src ls -l", "start /home/glenda/src mk"]);
    // A command gets its window's $winid; Local's none (acme's run(nil)).
    let number = h.node.state.layout.numbers[&w.window].0;
    assert_eq!(h.machine.winids, vec![Some(number), None]);
    let process = |command: &str| meta::Process {
        owner: AttachmentId::SERVER,
        command: command.into(),
        dir: "/".into(),
        window: None,
    };
    h.node.push_meta(MetaOp::ProcessStart { pid: 7, process: Box::new(process("mk all")) }).unwrap();
    h.node.push_meta(MetaOp::ProcessStart { pid: 9, process: Box::new(process("sleep 9")) }).unwrap();
    h.machine.asked.clear();
    h.run("Kill", None, "mk").unwrap();
    assert_eq!(h.machine.asked, vec!["kill 7"]);
    assert_eq!(h.run("Kill", None, "vi"), Err(ExecError::NoProcess("vi".into())));
    h.machine.asked.clear();
    h.run("Kill", None, "").unwrap();
    assert_eq!(h.machine.asked, vec!["kill 7", "kill 9"]);
    // Exit warns about a changed file first, then asks the host.
    let d = h.window("/tmp/dirty", "x");
    h.machine.asked.clear();
    assert_eq!(h.run("Exit", None, ""), Err(ExecError::Modified("/tmp/dirty".into())));
    h.run("Exit", None, "").unwrap();
    h.run("Abort", None, "").unwrap();
    assert_eq!(h.machine.asked, vec!["exit", "abort"]);
    let _ = d;
}

#[test]
fn edit_gathers_every_window_and_pipes_through_the_host() {
    let mut h = host();
    let a = h.window("/tmp/a", "alpha\n");
    let b = h.window("/tmp/b", "beta\n");
    h.run("Edit", Some(&a), ",s/a/A/g").unwrap();
    assert_eq!(h.text(a.body), "AlphA\n");
    h.run("Edit", Some(&a), "X/\\/tmp\\/b/ ,|tr").unwrap();
    assert_eq!(h.text(b.body), "BETA\n", "the pipe ran through the host");
    assert!(h.machine.asked.contains(&"pipe tr".to_string()));
    h.run("Edit", Some(&a), "=").unwrap();
    let (_, errors) = h.window_named("/tmp/+Errors").unwrap();
    assert_eq!(h.text(errors), "/tmp/a:1\n");
    assert!(h.run("Edit", Some(&a), "s/(/x/").is_err());
}

#[test]
fn an_edit_that_changes_nothing_says_nothing() {
    let mut h = host();
    let a = h.window("/tmp/a", "no empty line\nhere\n");
    let version = h.node.state.buffer(a.body).unwrap().version;
    h.run("Edit", Some(&a), ",x/^$/d").unwrap();
    assert_eq!(h.text(a.body), "no empty line\nhere\n");
    assert_eq!(h.node.state.buffer(a.body).unwrap().version, version, "no change made");
    assert!(h.window_named("/tmp/+Errors").is_none(), "nothing said");
}

#[test]
fn dump_and_load_restore_windows_in_acme_s_format() {
    let mut h = host();
    h.machine.files.insert("/tmp/clean".into(), b"on disk".to_vec());
    let clean = h.window("/tmp/clean", "");
    h.run("Get", Some(&clean), "").unwrap();
    let changed = h.window("/tmp/changed", "typed text");
    h.select(&changed, 2, 4);
    h.run("Zerox", Some(&clean), "").unwrap();
    h.run("Dump", None, "").unwrap();
    let bytes = h.machine.files["/home/glenda/apex.dump"].clone();
    let d = dump::Dump::parse(&bytes).unwrap();
    let kinds: Vec<dump::Kind> = d.windows.iter().map(|w| w.kind).collect();
    assert!(kinds.contains(&dump::Kind::File) && kinds.contains(&dump::Kind::Text), "{kinds:?}");
    assert!(kinds.contains(&dump::Kind::Zerox), "{kinds:?}");
    assert!(String::from_utf8_lossy(&bytes).contains("typed text"));

    // Load into a fresh session: the same files, text and selection.
    let mut fresh = host();
    fresh.machine.files = h.machine.files.clone();
    fresh.run("Load", None, "").unwrap();
    let (_, body) = fresh.window_named("/tmp/changed").expect("the changed window is back");
    assert_eq!(fresh.text(body), "typed text");
    assert!(fresh.node.state.buffer(body).unwrap().dirty);
    let (_, body) = fresh.window_named("/tmp/clean").expect("the clean file is back");
    assert_eq!(fresh.text(body), "on disk");
    assert_eq!(fresh.node.state.windows.values().filter(|w| w.body == body).count(), 2, "with its Zerox");
    fresh.machine.files.insert("/tmp/bad.dump".into(), b"/\nf\n".to_vec());
    assert!(matches!(fresh.run("Load", None, "/tmp/bad.dump"), Err(ExecError::Load(_))));

    // Load where the windows are still open: as acme's rowload, the
    // dump's windows are made beside them (acme's `coladd` for each, no
    // lookup of what is open), so there are two of each now.
    let before = h.node.state.layout.columns.iter().map(|c| c.windows.len()).sum::<usize>();
    h.run("Load", None, "").unwrap();
    let after = h.node.state.layout.columns.iter().map(|c| c.windows.len()).sum::<usize>();
    assert_eq!(after, 2 * before, "the dump's windows beside the open ones");
    let named = |h: &TestHost, name: &str| {
        h.node.state.windows.values().filter(|w| h.node.state.buffer(w.body).is_ok_and(|b| b.name == name)).count()
    };
    assert_eq!(named(&h, "/tmp/changed"), 2);
    // Each still has room in its column: a top below the one before it.
    for c in &h.node.state.layout.columns {
        for pair in c.windows.windows(2) {
            assert!(pair[0].y < pair[1].y, "a window squeezed to nothing: {:?}", c.windows);
        }
    }
}

#[test]
fn b3_opens_files_at_addresses_or_searches() {
    let mut h = host();
    h.machine.files.insert("/tmp/dir/f.c".into(), b"int\nmain\n".to_vec());
    let w = h.window("/tmp/dir/notes", "see f.c:2 and main");
    exec::look(&mut h, w.window, "f.c:2").unwrap();
    let (fw, fb) = h.window_named("/tmp/dir/f.c").expect("opened");
    let v = h.node.state.buffer(fb).unwrap().views[&ViewId::WindowBody(fw)];
    assert_eq!((v.q0, v.q1), (4, 9));
    assert_eq!(h.node.state.layout.focus, Some(fw));
    let windows = h.node.state.windows.len();
    exec::look(&mut h, w.window, "f.c").unwrap();
    assert_eq!(h.node.state.windows.len(), windows, "an open file's window is shown again");
    exec::look(&mut h, w.window, "main").unwrap();
    assert_eq!(h.sel(&w), (14, 18));
}

#[test]
fn completion_finds_the_name_before_the_cursor_and_what_to_type() {
    let entries: Vec<(String, bool)> = [("alpha.txt", false), ("alpine", true), ("beta.txt", false), ("ünï", false)]
        .map(|(n, d)| (n.to_string(), d))
        .to_vec();
    let c = look::complete("al", &entries);
    assert_eq!((c.advance.as_deref(), c.matched), (Some("p"), 2));
    let c = look::complete("alp", &entries);
    assert_eq!((c.advance, c.names), (None, vec!["alpha.txt".to_string(), "alpine".to_string()]));
    assert_eq!(look::complete("alpi", &entries).advance.as_deref(), Some("ne/"));
    assert_eq!(look::complete("b", &entries).advance.as_deref(), Some("eta.txt "));
    assert_eq!(look::complete("ü", &entries).advance.as_deref(), Some("nï "));
    let none = look::complete("z", &entries);
    assert_eq!((none.advance, none.matched, none.names.len()), (None, 0, 4));

    let mut h = host();
    let w = h.window("/tmp/c.txt", "see  /usr/lo and x\n");
    let b = h.node.state.buffer(w.body).unwrap().clone();
    assert_eq!(look::completion_at(&b, 12), Some(("/usr/".to_string(), "lo".to_string())));
    assert_eq!(look::completion_at(&b, 10), None, "inside a word");
    assert_eq!(look::completion_at(&b, 4), Some((String::new(), String::new())), "after a blank");
}

#[test]
fn a_new_window_goes_to_the_column_last_clicked_and_a_zerox_keeps_the_tag_typed() {
    let mut h = host();
    let first = h.node.state.layout.columns[0].id;
    let last = h.node.state.layout.columns.last().unwrap().id;
    let column_of = |h: &TestHost, w: WindowId| {
        let l = &h.node.state.layout;
        l.columns[l.find(w).unwrap().0].id
    };
    // Nothing clicked: the last column, as acme's makenewwindow.
    let a = h.window("/tmp/a", "a\n");
    assert_eq!(column_of(&h, a.window), last);
    // A file's window has its tag's cursor at the end; an unnamed one
    // (New, new/ctl) at the start, as acme leaves them.
    let cursor =
        |h: &TestHost, tag: BufferId, w: WindowId| h.node.state.buffer(tag).unwrap().views[&ViewId::WindowTag(w)].q0;
    assert_eq!(cursor(&h, a.tag, a.window), h.node.state.buffer(a.tag).unwrap().len());
    let unnamed = h.window("", "");
    assert_eq!(cursor(&h, unnamed.tag, unnamed.window), 0);
    // A window clicked in the first column: new ones go there.
    let p = Proposal::CreateWindow { body: None, column: Some(first), name: "/tmp/b".into(), near: None };
    let Created::Window(b) = h.propose(p).unwrap().created else { panic!("a window") };
    h.propose(Proposal::Focus { window: b.window }).unwrap();
    let c = h.window("/tmp/c", "c\n");
    assert_eq!(column_of(&h, c.window), first);
    // Zerox: the copy's tag is the original's, what was typed after the
    // bar included (acme's wininit copies its clone's tag).
    let tag = h.node.state.buffer(b.tag).unwrap();
    let (len, version) = (tag.len(), tag.version);
    let p = Proposal::Insert { buffer: b.tag, version, q0: len, text: "mk test".into(), origin: Origin::Keyboard };
    h.propose(p).unwrap();
    h.run("Zerox", Some(&b), "").unwrap();
    let copy = *h.node.state.windows.iter().find(|(id, w)| w.body == b.body && **id != b.window).unwrap().0;
    let copy_tag = h.node.state.window(copy).unwrap().tag;
    assert_eq!(h.text(copy_tag), h.text(b.tag));
    assert!(h.text(copy_tag).ends_with("mk test"));
}

#[test]
fn edit_patterns_carry_over_and_a_mistake_changes_nothing() {
    let mut h = host();
    let a = h.window("/tmp/a", "x\nfoo\n");
    // No regexp yet: `/` fails, and the `a` before it is undone with it
    // (acme's editerror truncates every edit log).
    let e = h.run("Edit", Some(&a), "0a/top\n/").unwrap_err();
    assert!(e.to_string().contains("no previous"), "{e}");
    assert_eq!(h.text(a.body), "x\nfoo\n");
    // A pattern one Edit used is `//` in the next, as acme's lastpat.
    h.run("Edit", Some(&a), "/foo/").unwrap();
    h.run("Edit", Some(&a), "0a/top\n/").unwrap();
    assert_eq!(h.text(a.body), "topx\nfoo\n");
    h.run("Edit", Some(&a), ",x/foo/c/bar/").unwrap();
    let e = h.run("Edit", Some(&a), ",s//baz/").unwrap_err();
    assert!(e.to_string().contains("foo"), "the empty regexp is the last one: {e}");
    h.run("Edit", Some(&a), "/bar/").unwrap();
    h.run("Edit", Some(&a), ",x//d").unwrap();
    assert_eq!(h.text(a.body), "topx\n\n");
}

#[test]
fn pipe_commands_go_to_the_host_with_the_window_whose_selection_they_take() {
    let mut h = host();
    let a = h.window("/tmp/a", "keep sel keep");
    let number = h.node.state.layout.numbers[&a.window].0;
    exec::execute(&mut h, Some(a.window), "|tr a-z A-Z").unwrap();
    exec::execute(&mut h, Some(a.window), ">wc").unwrap();
    // From no window: the window last clicked.
    propose::apply(&mut h.node, &Proposal::Focus { window: a.window }).unwrap();
    exec::execute(&mut h, None, "<date").unwrap();
    assert_eq!(h.machine.asked, vec!["start /tmp |tr a-z A-Z", "start /tmp >wc", "start /tmp <date"]);
    assert_eq!(h.machine.winids, vec![Some(number); 3], "the window whose selection the daemon takes");
    assert_eq!(h.text(a.body), "keep sel keep", "nothing done here: the host runs it");
}

#[test]
fn a_terminal_s_tag_shows_its_title_then_how_it_ended() {
    let mut h = host();
    let id = apex_core::TermId(h.node.alloc().unwrap());
    h.node.create_shard(Shard::Term(id)).unwrap();
    let create =
        apex_core::TermOp::Create { cols: 80, rows: 24, scrollback: 100, command: "sh".into(), dir: "/tmp".into() };
    h.node.append(Shard::Term(id), apex_core::Op::Term(create)).unwrap();
    let Created::Window(w) = h.propose(Proposal::TermWindow { term: id, column: None }).unwrap().created else {
        panic!("a window")
    };
    let tag = |h: &TestHost| h.node.state.buffer(w.tag).unwrap().text.to_string();
    let name = format!("/tmp/-term.{}", id.0);
    assert_eq!(tag(&h), format!("{name} Del Snarf | Look "));
    let update = |h: &mut TestHost, u: apex_core::term::TermUpdate| {
        h.node.append(Shard::Term(id), apex_core::Op::Term(apex_core::TermOp::Update(Box::new(u)))).unwrap();
        apex_core::make::settag_term(&mut h.node, id).unwrap()
    };
    // The user's own words after the bar stay.
    let end = tag(&h).chars().count() as u64;
    let op = apex_core::BufferOp::Splice { q0: end, q1: end, text: "Send".into(), origin: apex_core::Origin::Keyboard };
    h.node.append(Shard::Buffer(w.tag), apex_core::Op::Buffer(op)).unwrap();
    let title = |t: &str| apex_core::term::TermUpdate { title: Some(t.into()), ..Default::default() };
    assert!(update(&mut h, title("glenda@box: ~/src | make\x07")));
    assert_eq!(tag(&h), format!("{name} Del Snarf glenda@box: ~/src ¦ make | Look Send"));
    assert!(!update(&mut h, title("glenda@box: ~/src | make\x07")), "the same title changes nothing");
    assert!(update(&mut h, title("")));
    assert_eq!(tag(&h), format!("{name} Del Snarf | Look Send"));
    for (status, shown) in
        [(0, "exit 0"), (130, "signal 2"), (apex_core::term::ENDED_WITH_DAEMON, "ended with the daemon")]
    {
        let u = apex_core::term::TermUpdate { exit: Some(status), ..Default::default() };
        update(&mut h, u);
        assert_eq!(tag(&h), format!("{name} Del Snarf {shown} | Look Send"));
    }
}

/// A whole-file substitution is a few entries, not one a match: each
/// holds at most `SPOTS_MAX` changes; one Undo takes all of it back, and
/// Redo does it again.
#[test]
fn an_edit_of_many_matches_is_a_few_entries_and_one_undo() {
    let mut h = host();
    let line = "a b a\n";
    let text = line.repeat(20_000);
    let w = h.window("/tmp/many", &text);
    let before = h.node.log.last(Shard::Buffer(w.body));
    h.run("Edit", Some(&w), ",s/a/xy/g").unwrap();
    let want = text.replace('a', "xy");
    assert_eq!(h.text(w.body), want);
    let made = h.node.log.last(Shard::Buffer(w.body)) - before;
    // 40,000 changes: two entries of changes, the undo mark, the dot.
    assert!(made <= 4, "{made} entries");
    let b = h.node.state.buffer(w.body).unwrap();
    assert!(b.undo_bytes() < 40_000 * 8, "about three bytes a change kept, and the runes removed: {}", b.undo_bytes());
    h.run("Undo", Some(&w), "").unwrap();
    assert_eq!(h.text(w.body), text);
    h.run("Redo", Some(&w), "").unwrap();
    assert_eq!(h.text(w.body), want);
    // And a few matches stay an entry each, as acme reports them.
    let w = h.window("/tmp/few", "a a a");
    let before = h.node.log.last(Shard::Buffer(w.body));
    h.run("Edit", Some(&w), ",s/a/b/g").unwrap();
    assert_eq!(h.text(w.body), "b b b");
    let kinds: Vec<_> =
        h.node.log.entries_after(Shard::Buffer(w.body), before).unwrap().map(|e| e.op.clone()).collect();
    assert_eq!(kinds.iter().filter(|op| matches!(op, Op::Buffer(BufferOp::Splice { .. }))).count(), 3, "{kinds:?}");
}

/// A host that runs an Edit apart (a UI, on a thread of its own) is given
/// it gathered and returns at once; typing goes on meanwhile, and when
/// the Edit is finished its changes land where the text they were made
/// against went, the typing kept. While it runs, another Edit is refused
/// and `Kill Edit` finds it among the host's jobs.
#[test]
fn an_edit_run_apart_is_finished_later_around_what_was_typed_meanwhile() {
    let mut h = host();
    let w = h.window("/tmp/apart", "a b a\n");
    h.hold_edits = true;
    h.last_pattern = Some("b".into());
    h.run("Edit", Some(&w), ",s//xy/g").unwrap();
    assert_eq!(h.text(w.body), "a b a\n", "nothing made yet");
    assert!(h.proposed.is_empty(), "{:?}", h.proposed);
    let version = h.node.state.buffer(w.body).unwrap().version;
    h.propose(Proposal::Insert { buffer: w.body, version, q0: 0, text: "typed ".into(), origin: Origin::Keyboard })
        .unwrap();
    let e = h.run("Edit", Some(&w), ",d").unwrap_err();
    assert_eq!(e.to_string(), "Edit: another runs (,s//xy/g); wait for it, or Kill Edit");
    h.run("Kill", None, "Edit").unwrap();
    assert_eq!(h.machine.asked, [format!("kill {HELD}")]);
    // The thread's part, then the host's.
    let held = h.held.take().unwrap();
    let last = h.last_pattern.take();
    let ran = held.run(&mut h, last);
    exec::finish_edit(&mut h, ran).unwrap();
    assert_eq!(h.text(w.body), "typed a xy a\n");
    assert_eq!(h.last_pattern.as_deref(), Some("b"), "the pattern it used is the last");
    h.run("Undo", Some(&w), "").unwrap();
    assert_eq!(h.text(w.body), "typed a b a\n", "one step takes the Edit back, the typing stays");

    // `w` writes the text as the Edit saw it: the window is clean after
    // it only if nothing was typed meanwhile.
    for typed in [false, true] {
        h.run("Edit", Some(&w), "w").unwrap();
        if typed {
            let version = h.node.state.buffer(w.body).unwrap().version;
            let p = Proposal::Insert { buffer: w.body, version, q0: 0, text: "!".into(), origin: Origin::Keyboard };
            h.propose(p).unwrap();
        }
        let held = h.held.take().unwrap();
        let ran = held.run(&mut h, None);
        exec::finish_edit(&mut h, ran).unwrap();
        assert_eq!(h.machine.files["/tmp/apart"], b"typed a b a\n");
        assert_eq!(h.node.state.buffer(w.body).unwrap().dirty, typed, "typed meanwhile: {typed}");
    }
}

/// A host that asks for smaller parts (a UI, whose drawing waits on each
/// part's apply) gets them, the Edit one undo step all the same.
#[test]
fn an_edit_goes_in_the_parts_its_host_asks_for() {
    let text = "a b a\n".repeat(100);
    let mut h = host();
    let w = h.window("/tmp/parts", &text);
    h.part_changes = Some(16);
    h.run("Edit", Some(&w), ",s/a/xy/g").unwrap();
    let parts = h.proposed.iter().filter(|p| matches!(p, Proposal::Splices { .. } | Proposal::SplicesMore { .. }));
    assert_eq!(parts.count(), 200 / 16 + 1, "200 changes, 16 a part");
    assert_eq!(h.text(w.body), text.replace('a', "xy"));
    h.run("Undo", Some(&w), "").unwrap();
    assert_eq!(h.text(w.body), text);
}

/// `Kill Edit` between the parts of a whole-file Edit over two windows
/// takes back every part made, in each window, and says it was killed;
/// killed before any, it makes nothing.
#[test]
fn an_edit_killed_between_its_parts_leaves_every_text_as_it_was() {
    let text = "a b a\n".repeat(20_000);
    for after in [0, 1, 3] {
        let mut h = host();
        let one = h.window("/tmp/one", &text);
        let two = h.window("/tmp/two", &text);
        h.kill_after_parts = Some(after);
        let e = h.run("Edit", Some(&one), "X/\\/tmp\\/(one|two)/ ,s/a/xy/g").unwrap_err().to_string();
        assert_eq!(e, "Edit: killed; the text is as it was", "after {after} parts");
        assert_eq!(h.text(one.body), text, "after {after} parts");
        assert_eq!(h.text(two.body), text, "after {after} parts");
    }
}

#[test]
fn files_named_twice_are_put_in_later_rounds_in_their_order() {
    let rounds = apex_core::exec::put_rounds(&["/a", "/b", "/a", "/c", "/a", "/b"]);
    assert_eq!(rounds, [0, 0, 1, 0, 2, 1]);
    assert!(apex_core::exec::put_rounds::<&str>(&[]).is_empty());
}
