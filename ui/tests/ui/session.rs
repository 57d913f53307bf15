//! The UI against a real session: a real `apexd` on a namespace of the
//! test's own, the UI attached through apex-link as `apex-ui` attaches,
//! scripted mouse and keyboard events through the same `Ui` the window
//! feeds, and the results read back through the daemon's 9P files (with
//! the `apex` program, another process) and on disk.

use crate::support::{apex, namespace, sibling, wait_for};
use apex_core::{exec, AttachmentKind, BufferId, Shard, ViewId, WindowId};
use apex_link::Attached;
use apex_ui::app::Ui;
use apex_ui::frame::Frame;
use apex_ui::host::{UiHost, WAIT};
use apex_ui::input::{Event, Key, Target};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};

/// A daemon and one UI on its session `main`; everything stopped and
/// removed on drop, pass or fail.
pub(crate) struct Rig {
    pub(crate) ns: PathBuf,
    pub(crate) daemon: Child,
    pub(crate) ui: Option<Ui>,
    pub(crate) rt: tokio::runtime::Runtime,
    /// The UI's clock, in ms (double-clicks are timed by it).
    now: u64,
}

impl Drop for Rig {
    fn drop(&mut self) {
        if let Some(ui) = self.ui.take() {
            let att = ui.host.att.clone();
            self.rt.block_on(att.close());
        }
        let _ = self.daemon.kill();
        let _ = self.daemon.wait();
        let _ = std::fs::remove_dir_all(&self.ns);
    }
}

/// A UI attached to `main` on the daemon posted in `ns`, leading it
/// (the leases come from whoever had them).
pub(crate) fn attach(rt: &tokio::runtime::Runtime, ns: &std::path::Path, local: bool) -> Ui {
    attach_at(rt, ns, &format!("unix!{}", ns.join("apex").display()), local)
}

/// [`attach`] through `address` (a relay, say).
pub(crate) fn attach_at(rt: &tokio::runtime::Runtime, ns: &std::path::Path, address: &str, local: bool) -> Ui {
    let att = rt.block_on(async {
        let client = apex_ninep::dial(address, 1 << 20).await.expect("dial apexd");
        let att = Attached::open(&client, "main", AttachmentKind::Ui, "apex-ui-test").await.expect("attach");
        assert!(att.wait_for(WAIT, |l| l.leads(Shard::Layout)).await, "the layout's lease");
        att
    });
    let mut host = UiHost::new(att, address, "main", rt.handle().clone(), ns.to_path_buf());
    host.local = local;
    Ui::new(host, 900, 700, 1.0)
}

/// Starts `apexd` on the namespace `ns` (its log in `ns/apexd.log`) and
/// waits for its socket to answer.
pub(crate) fn daemon(ns: &std::path::Path, args: &[&str]) -> Child {
    let log = std::fs::OpenOptions::new().create(true).append(true).open(ns.join("apexd.log")).unwrap();
    let daemon = Command::new(sibling("apexd"))
        .arg("--namespace")
        .arg(ns)
        .arg("-q")
        // Nothing is kept unless a test names a state directory.
        .args((!args.contains(&"--state")).then_some("--ephemeral"))
        .args(args)
        // Its terminals' shells read none of the user's start-up files.
        .env("HOME", ns)
        .env_remove("PLAN9")
        .stdout(Stdio::null())
        .stderr(log)
        .spawn()
        .expect("start apexd");
    let socket = ns.join("apex");
    wait_for("apexd's socket", || std::os::unix::net::UnixStream::connect(&socket).ok());
    daemon
}

/// One window of the session, as the UI and the 9P tree name it.
#[derive(Clone, Copy)]
pub(crate) struct Win {
    pub(crate) window: WindowId,
    pub(crate) body: BufferId,
    tag: BufferId,
    pub(crate) number: u32,
}

impl Rig {
    /// `local`: Get reads files in the UI (as `apex-ui` does on the
    /// daemon's machine), else through the daemon (as over TCP).
    pub(crate) fn start(name: &str, local: bool) -> Rig {
        Rig::start_with(name, local, &[])
    }

    /// [`Rig::start`] with more `apexd` arguments.
    pub(crate) fn start_with(name: &str, local: bool, args: &[&str]) -> Rig {
        let ns = namespace(name);
        let daemon = daemon(&ns, args);
        let rt = tokio::runtime::Runtime::new().unwrap();
        let mut rig = Rig { ns, daemon, ui: None, rt, now: 10_000 };
        let ui = attach(&rig.rt, &rig.ns, local);
        rig.ui = Some(ui);
        rig
    }

    pub(crate) fn ui(&mut self) -> &mut Ui {
        self.ui.as_mut().expect("a UI")
    }

    pub(crate) fn apex(&self, args: &[&str]) -> String {
        apex(&self.ns, args)
    }

    /// Opens `path` as `apex-ui FILE` does; the window it is in.
    pub(crate) fn open(&mut self, path: &str) -> Win {
        exec::open(&mut self.ui().host, path, None).expect("open");
        self.win(path)
    }

    /// The tallest window showing `path` on the screen.
    fn tallest(&mut self, path: &str) -> Win {
        let screen = self.ui().screen().unwrap();
        let found = {
            let link = self.ui().host.att.lock();
            let st = &link.node().unwrap().state;
            let named = |w: &apex_core::win::Window| st.buffer(w.body).is_ok_and(|b| b.name == path);
            let w = screen
                .windows()
                .filter(|g| st.window(g.id).is_ok_and(named))
                .max_by_key(|g| g.rect.height())
                .expect("on the screen")
                .id;
            let win = st.window(w).unwrap();
            Win { window: w, body: win.body, tag: win.tag, number: st.layout.numbers[&w].0 }
        };
        found
    }

    /// The window named `path`.
    pub(crate) fn win(&mut self, path: &str) -> Win {
        let link = self.ui().host.att.lock();
        let st = &link.node().unwrap().state;
        let (window, body) = apex_core::look::window_named(st, path).expect("its window");
        let tag = st.window(window).unwrap().tag;
        let number = st.layout.numbers[&window].0;
        Win { window, body, tag, number }
    }

    pub(crate) fn send(&mut self, ev: Event) {
        self.now += 1000;
        let now = self.now;
        self.ui().handle_at(ev, now);
        self.ui().paint();
    }

    /// Where rune `q` is drawn in `w`'s body or tag (as the UI
    /// lays it out: its face and tab stops).
    pub(crate) fn point(&mut self, w: WindowId, q: u64, tag: bool) -> (i32, i32) {
        let target = if tag { Target::Tag(w) } else { Target::Body(w) };
        let line = self.ui().fonts.line_height() as i32;
        let frame = self.ui().frame(target).expect("the text is on the screen");
        let (x, y) = frame.point_of(q).expect("rune on screen");
        (x, y + line / 3)
    }

    pub(crate) fn click(&mut self, button: u8, (x, y): (i32, i32)) {
        self.send(Event::Press { button, x, y });
        self.send(Event::Release { button, x, y });
    }

    pub(crate) fn typed(&mut self, s: &str) {
        self.send(Event::Text(s.into()));
    }

    pub(crate) fn key(&mut self, k: Key) {
        self.send(Event::Key(k));
    }

    /// What the daemon serves for window `w`'s `file`, once the UI's
    /// edits are acknowledged.
    pub(crate) fn served(&mut self, w: Win, file: &str) -> String {
        self.ui().settle().expect("the daemon acknowledges");
        self.apex(&["read", &format!("main/acme/{}/{file}", w.number)])
    }

    pub(crate) fn tag_text(&mut self, w: Win) -> String {
        let link = self.ui().host.att.lock();
        link.node().unwrap().state.buffer(w.tag).unwrap().text.to_string()
    }
}

#[test]
fn typing_erasing_undo_and_put_reach_the_daemon_and_the_disk() {
    let mut r = Rig::start("session-type", true);
    let file = r.ns.join("notes.txt");
    std::fs::write(&file, "hello world\nsecond line\n").unwrap();
    let w = r.open(&file.display().to_string());
    assert_eq!(r.served(w, "body"), "hello world\nsecond line\n");
    let tag = r.served(w, "tag");
    assert!(!tag.contains(" Undo ") && !tag.contains(" Put "), "a file just opened: nothing to undo or put: {tag}");

    // Click after `hello`, type: the daemon has it, the tag offers Put.
    let at = r.point(w.window, 5, false);
    r.click(1, at);
    r.typed(", big");
    assert_eq!(r.served(w, "body"), "hello, big world\nsecond line\n");
    let tag = r.served(w, "tag");
    assert!(tag.contains(" Undo ") && tag.contains(" Put "), "{tag}");
    // Backspace, ^W, ^U.
    r.key(Key::Backspace);
    assert_eq!(r.served(w, "body"), "hello, bi world\nsecond line\n");
    r.key(Key::Ctrl('w'));
    assert_eq!(r.served(w, "body"), "hello,  world\nsecond line\n");
    r.key(Key::Ctrl('u'));
    assert_eq!(r.served(w, "body"), " world\nsecond line\n");
    // Undo takes the whole run back; Redo brings it again; undo again.
    r.key(Key::Ctrl('z'));
    assert_eq!(r.served(w, "body"), "hello world\nsecond line\n");
    r.key(Key::Ctrl('y'));
    assert_eq!(r.served(w, "body"), " world\nsecond line\n");
    r.key(Key::Ctrl('z'));
    assert_eq!(r.served(w, "body"), "hello world\nsecond line\n");

    // A sweep over `second`, typed over; Esc selects what was typed, Esc
    // again cuts it to the session's snarf buffer.
    let from = r.point(w.window, 12, false);
    let to = r.point(w.window, 18, false);
    r.send(Event::Press { button: 1, x: from.0, y: from.1 });
    r.send(Event::Motion { x: to.0, y: to.1 });
    r.send(Event::Release { button: 1, x: to.0, y: to.1 });
    r.typed("2nd");
    assert_eq!(r.served(w, "body"), "hello world\n2nd line\n");
    r.key(Key::Escape);
    assert_eq!(r.served(w, "rdsel"), "2nd", "Esc selected what was typed");
    r.key(Key::Escape);
    assert_eq!(r.served(w, "body"), "hello world\n line\n", "Esc cut `2nd`");
    let snapshot = Command::new(sibling("apex")).args(["read", "main/snapshot"]).env("NAMESPACE", &r.ns).output();
    let state = apex_core::State::from_snapshot(&snapshot.unwrap().stdout).expect("the daemon's snapshot");
    assert_eq!(state.layout.snarf, "2nd", "the session's snarf buffer has it");
    r.typed("last ✓ ünïcödé");
    assert_eq!(r.served(w, "body"), "hello world\nlast ✓ ünïcödé line\n");
    assert_eq!(std::fs::read_to_string(&file).unwrap(), "hello world\nsecond line\n", "nothing written yet");

    // B2 on Put in the tag: the daemon writes exactly what was typed, and
    // the window is clean again.
    let tag = r.tag_text(w);
    let put = tag.find(" Put ").expect("Put in the tag") as u64 + 2;
    let at = r.point(w.window, put, true);
    r.click(2, at);
    assert_eq!(std::fs::read_to_string(&file).unwrap(), "hello world\nlast ✓ ünïcödé line\n");
    wait_for("the tag to drop Put", || (!r.served(w, "tag").contains(" Put ")).then_some(()));
    let ctl = r.served(w, "ctl");
    let dirty: Vec<&str> = ctl.split_whitespace().collect();
    assert_eq!(dirty[4], "0", "clean after Put: {ctl}");
}

#[test]
fn edits_from_elsewhere_appear_and_move_the_selection() {
    let mut r = Rig::start("session-live", false);
    let file = r.ns.join("live.txt");
    std::fs::write(&file, "abc\n").unwrap();
    let w = r.open(&file.display().to_string());
    let at = r.point(w.window, 3, false);
    r.click(1, at);
    r.ui().settle().unwrap();
    r.ui().paint();
    assert!(r.ui().paint().is_empty(), "nothing changed since the last frame");
    // A tool writes at the start of the body through the acme tree, as
    // `echo -n '#0' | 9p write acme/N/addr` and then `.../data` do.
    for (file, text) in [("addr", "#0"), ("data", "from a tool\n")] {
        let mut tool = Command::new(sibling("apex"))
            .args(["write", &format!("main/acme/{}/{file}", w.number)])
            .env("NAMESPACE", &r.ns)
            .stdin(Stdio::piped())
            .spawn()
            .unwrap();
        std::io::Write::write_all(tool.stdin.as_mut().unwrap(), text.as_bytes()).unwrap();
        drop(tool.stdin.take());
        assert!(tool.wait().unwrap().success(), "apex write {file}");
    }
    // The write is routed to this UI, which leads the buffer: it is in
    // the replica at once, drawn on the next frame, and the cursor moved
    // with the text it was in.
    let text = wait_for("the tool's text in the UI", || {
        let t = r.ui().host.att.lock().node().unwrap().state.buffer(w.body).unwrap().text.to_string();
        t.contains("from a tool").then_some(t)
    });
    assert_eq!(text, "from a tool\nabc\n");
    let damage = r.ui().paint();
    assert!(!damage.is_empty(), "the changed body is drawn again");
    // Typing goes on where the cursor was.
    r.typed("!");
    assert_eq!(r.served(w, "body"), "from a tool\nabc!\n");
}

/// The text of the `+Errors` windows the UI's replica has (each buffer
/// once), if any.
pub(crate) fn errors(r: &mut Rig) -> Option<String> {
    let link = r.ui().host.att.lock();
    let st = &link.node()?.state;
    let mut seen = std::collections::BTreeSet::new();
    let texts: Vec<String> = st
        .layout
        .numbers
        .keys()
        .filter_map(|w| {
            let win = st.window(*w).ok()?;
            let body = st.buffer(win.body).ok()?;
            (body.name.ends_with("+Errors") && seen.insert(win.body)).then(|| body.text.to_string())
        })
        .collect();
    (!texts.is_empty()).then(|| texts.concat())
}

#[test]
fn a_refused_put_is_shown_in_errors() {
    let mut r = Rig::start("session-errors", false);
    let dir = r.ns.join("gone");
    std::fs::create_dir(&dir).unwrap();
    let file = dir.join("f.txt");
    std::fs::write(&file, "text\n").unwrap();
    let w = r.open(&file.display().to_string());
    let at = r.point(w.window, 4, false);
    r.click(1, at);
    r.typed(" more");
    std::fs::remove_dir_all(&dir).unwrap();
    let tag = r.tag_text(w);
    let put = tag.find(" Put ").expect("Put in the tag") as u64 + 2;
    let at = r.point(w.window, put, true);
    r.click(2, at);
    let shown = errors(&mut r).expect("a +Errors window");
    assert!(shown.starts_with("put: ") && shown.contains("f.txt: No such file"), "the daemon says why: {shown:?}");
    assert!(r.served(w, "tag").contains(" Put "), "still dirty");
}

impl Rig {
    /// The session's state as the daemon has it (its snapshot file).
    pub(crate) fn daemon_state(&mut self) -> apex_core::State {
        self.ui().settle().expect("the daemon acknowledges");
        let out = Command::new(sibling("apex")).args(["read", "main/snapshot"]).env("NAMESPACE", &self.ns).output();
        apex_core::State::from_snapshot(&out.unwrap().stdout).expect("the daemon's snapshot")
    }

    /// A sweep with `button` from rune `from` to `to` of `w`'s body, with
    /// `chords` pressed and let go while it is held.
    pub(crate) fn sweep(&mut self, w: Win, button: u8, from: u64, to: u64, chords: &[u8]) {
        let a = self.point(w.window, from, false);
        let z = self.point(w.window, to, false);
        self.send(Event::Press { button, x: a.0, y: a.1 });
        self.send(Event::Motion { x: z.0, y: z.1 });
        for c in chords {
            self.send(Event::Press { button: *c, x: z.0, y: z.1 });
            self.send(Event::Release { button: *c, x: z.0, y: z.1 });
        }
        self.send(Event::Release { button, x: z.0, y: z.1 });
    }

    fn snarf(&mut self) -> String {
        self.daemon_state().layout.snarf
    }

    pub(crate) fn body_text(&mut self, w: Win) -> String {
        self.served(w, "body")
    }
}

#[test]
fn chords_cut_paste_and_pass_an_argument_and_control_keys_snarf_cut_paste_put() {
    let mut r = Rig::start("session-chords", true);
    let file = r.ns.join("chords.txt");
    std::fs::write(&file, "one two three\n").unwrap();
    let w = r.open(&file.display().to_string());
    // 1-2: cut the swept text into the session's snarf buffer.
    r.sweep(w, 1, 4, 7, &[2]);
    assert_eq!(r.body_text(w), "one  three\n");
    assert_eq!(r.snarf(), "two");
    // 1-3: paste it over a click; the pasted text is selected.
    r.sweep(w, 1, 10, 10, &[3]);
    assert_eq!(r.body_text(w), "one  threetwo\n");
    assert_eq!(r.served(w, "rdsel"), "two");
    // 1-2-3: cut, then paste it back: the text as it was, and snarfed.
    r.sweep(w, 1, 0, 3, &[2, 3]);
    assert_eq!(r.body_text(w), "one  threetwo\n");
    assert_eq!(r.snarf(), "one");
    // 1-3-2: paste, then undo it.
    r.sweep(w, 1, 4, 4, &[3, 2]);
    assert_eq!(r.body_text(w), "one  threetwo\n");
    // Each chord step is an undo step of its own.
    r.sweep(w, 1, 5, 10, &[2]);
    assert_eq!(r.body_text(w), "one  two\n");
    r.key(Key::Ctrl('z'));
    assert_eq!(r.body_text(w), "one  threetwo\n");

    // Ctrl-C, Ctrl-X and Ctrl-V on the selection; Ctrl-S puts.
    r.sweep(w, 1, 0, 3, &[]);
    r.key(Key::Ctrl('c'));
    assert_eq!(r.snarf(), "one");
    r.sweep(w, 1, 5, 10, &[]);
    r.key(Key::Ctrl('x'));
    assert_eq!((r.body_text(w), r.snarf()), ("one  two\n".to_string(), "three".to_string()));
    r.key(Key::Ctrl('v'));
    r.key(Key::Ctrl('v'));
    assert_eq!(r.body_text(w), "one  threetwo\n", "a paste selects what it put; the next replaces it");
    r.key(Key::Ctrl('s'));
    assert_eq!(std::fs::read_to_string(&file).unwrap(), r.body_text(w), "Ctrl-S is Put");

    // 2-1: B2 on a command with B1 clicked during the sweep runs it with
    // the last B1 selection as its argument; its output goes to +Errors.
    let end = r.body_text(w).chars().count() as u64 - 1;
    r.sweep(w, 1, end, end, &[]);
    r.typed("\necho");
    let len = r.body_text(w).chars().count() as u64 - 1;
    assert_eq!(r.body_text(w), "one  threetwo\necho\n");
    r.sweep(w, 1, 0, 3, &[]);
    r.sweep(w, 2, len - 4, len, &[1]);
    let shown = wait_for("the command's output in +Errors", || errors(&mut r).filter(|e| e.contains("one")));
    assert_eq!(shown, "one\n", "echo ran with `one` as its argument");
    // 2-3 cancels.
    r.sweep(w, 2, len - 4, len, &[3]);
    std::thread::sleep(std::time::Duration::from_millis(300));
    assert_eq!(errors(&mut r).unwrap(), "one\n", "nothing ran");
}

#[test]
fn layout_boxes_grow_move_and_resize_windows_and_move_columns() {
    let mut r = Rig::start("session-boxes", true);
    let files: Vec<Win> = (0..3)
        .map(|i| {
            let f = r.ns.join(format!("f{i}.txt"));
            std::fs::write(&f, format!("file {i}\n")).unwrap();
            r.open(&f.display().to_string())
        })
        .collect();
    let place = |st: &apex_core::State, w: WindowId| {
        let (c, i) = st.layout.find(w).unwrap();
        (c, st.layout.columns[c].windows[i].y.0)
    };
    let screen = r.ui().screen().unwrap();
    let geom = |s: &apex_ui::geom::Screen, w: WindowId| *s.window(w).unwrap();
    let (c0, _) = place(&r.daemon_state(), files[0].window);
    assert!(files.iter().all(|w| place(&r.daemon_state(), w.window).0 == c0), "all in one column");
    let box_middle = |g: &apex_ui::geom::WindowGeom| {
        ((g.layout_box.x0 + g.layout_box.x1) / 2, (g.layout_box.y0 + g.layout_box.y1) / 2)
    };
    let line = r.ui().metrics().line;
    // Button 2 on the middle window's box: as much as can be; the others
    // keep their tags.
    let mid = geom(&screen, files[1].window);
    r.click(2, box_middle(&mid));
    let screen = r.ui().screen().unwrap();
    let col = screen.columns.iter().find(|c| c.windows.iter().any(|w| w.id == files[1].window)).unwrap().clone();
    let grown = geom(&screen, files[1].window);
    assert!(grown.rect.height() > col.area.height() - 3 * line, "{grown:?} in {:?}", col.area);
    let first = geom(&screen, files[0].window);
    assert!(first.rect.height() <= line && first.tag_line.height() > 0, "the first keeps its tag: {first:?}");
    assert_eq!(r.daemon_state().layout, r.ui().host.att.lock().node().unwrap().state.layout, "the daemon has it");
    // Button 1 on the first window's box: some more room for it.
    r.click(1, box_middle(&first));
    let screen = r.ui().screen().unwrap();
    assert!(geom(&screen, files[0].window).rect.height() > first.rect.height() + line);
    // Button 3 on the middle one: the whole column.
    let mid = geom(&screen, files[1].window);
    r.click(3, box_middle(&mid));
    let screen = r.ui().screen().unwrap();
    assert!(geom(&screen, files[1].window).rect.height() >= col.area.height() - 4, "the whole column");
    // Button 2 again: the others' tags come back.
    let mid = geom(&screen, files[1].window);
    r.click(2, box_middle(&mid));
    let screen = r.ui().screen().unwrap();

    // Drag the last window's box into the other column.
    let last = geom(&screen, files[2].window);
    let other = screen.columns.iter().find(|c| c.windows.is_empty()).expect("an empty column").clone();
    let (x0, y0) = (last.layout_box.x0 + 2, last.layout_box.y0 + 2);
    let (x1, y1) = ((other.rect.x0 + other.rect.x1) / 2, (other.area.y0 + other.area.y1) / 2);
    r.send(Event::Press { button: 1, x: x0, y: y0 });
    r.send(Event::Motion { x: x1, y: y1 });
    r.send(Event::Release { button: 1, x: x1, y: y1 });
    let st = r.daemon_state();
    let (c, _) = place(&st, files[2].window);
    assert_eq!(st.layout.columns[c].id, other.id, "moved to the other column");
    let index = r.apex(&["read", "main/acme/index"]);
    assert!(index.lines().any(|l| l.contains("f2.txt")), "{index}");

    // Drag the second column's box left: its edge moves there.
    let screen = r.ui().screen().unwrap();
    let col = screen.columns[1].clone();
    let (x0, y0) = (col.layout_box.x0 + 2, col.layout_box.y0 + 2);
    let x1 = col.rect.x0 - 100;
    r.send(Event::Press { button: 1, x: x0, y: y0 });
    r.send(Event::Release { button: 1, x: x1, y: y0 });
    let screen = r.ui().screen().unwrap();
    let moved = screen.columns.iter().find(|c| c.id == col.id).unwrap();
    assert!((moved.rect.x0 - x1).abs() <= 2, "the column's edge is where it was let go: {} vs {x1}", moved.rect.x0);
    let st = r.daemon_state();
    assert_eq!(st.layout, r.ui().host.att.lock().node().unwrap().state.layout);
    // Another button during a drag cancels it.
    let (x0, y0) = (col.layout_box.x0 + 2, col.layout_box.y0 + 2);
    let before = r.daemon_state().layout;
    r.send(Event::Press { button: 1, x: moved.layout_box.x0 + 2, y: y0 });
    r.send(Event::Press { button: 2, x: x0 + 200, y: y0 });
    r.send(Event::Release { button: 1, x: x0 + 200, y: y0 });
    r.send(Event::Release { button: 2, x: x0 + 200, y: y0 });
    assert_eq!(r.daemon_state().layout, before, "cancelled");
}

#[test]
fn the_ui_reads_files_itself_only_where_the_daemon_sees_the_same_ones() {
    let r = Rig::start("session-machine", true);
    let said = r.apex(&["read", "machine"]);
    assert!(apex_ui::host::same_machine(&said), "the daemon here says this machine: {said:?}");
    assert!(r.ui.as_ref().unwrap().host.on_this_machine());
    assert!(!apex_ui::host::same_machine("0f0e-other-boot mnt:[1]"), "another machine's line is not");
}

#[test]
fn control_f_completes_a_file_name_as_acme_does() {
    let mut r = Rig::start("session-complete", true);
    let dir = r.ns.join("src");
    std::fs::create_dir(&dir).unwrap();
    std::fs::create_dir(dir.join("alpine")).unwrap();
    std::fs::write(dir.join("alpha.txt"), "").unwrap();
    std::fs::write(dir.join("beta.txt"), "").unwrap();
    let file = dir.join("notes.txt");
    std::fs::write(&file, "").unwrap();
    let w = r.open(&file.display().to_string());
    let at = r.point(w.window, 0, false);
    r.click(1, at);
    // One match: the rest of its name and a space.
    r.typed("be");
    r.key(Key::Ctrl('f'));
    assert_eq!(r.body_text(w), "beta.txt ");
    // Several: what they share is typed; then they are listed.
    r.typed("al");
    r.key(Key::Ctrl('f'));
    assert_eq!(r.body_text(w), "beta.txt alp");
    r.key(Key::Ctrl('f'));
    assert_eq!(r.body_text(w), "beta.txt alp", "nothing more to type");
    let d = dir.display();
    assert_eq!(errors(&mut r).unwrap(), format!("{d}/alp*\n alpha.txt\n alpine\n"));
    // A directory gets a slash, and completion goes on inside it.
    r.typed("i");
    r.key(Key::Ctrl('f'));
    assert_eq!(r.body_text(w), "beta.txt alpine/");
    // Nothing matches: every name is listed.
    r.typed(" zz");
    r.key(Key::Ctrl('f'));
    let shown = errors(&mut r).unwrap();
    assert!(
        shown.ends_with(&format!("{d}/zz*: no matches in:\n alpha.txt\n alpine\n beta.txt\n notes.txt\n")),
        "{shown}"
    );
    // A rooted path completes from its own directory.
    r.typed(&format!(" {d}/bet"));
    r.key(Key::Ctrl('f'));
    assert!(r.body_text(w).ends_with(&format!(" {d}/beta.txt ")), "{}", r.body_text(w));
}

impl Rig {
    /// Types `cmd` at the end of `w`'s tag and executes it with a B2 sweep
    /// over it, as a user adds a command to a tag and runs it; an Edit,
    /// which runs on a thread of its own, is waited for.
    pub(crate) fn run(&mut self, w: Win, cmd: &str) {
        self.execute_in_tag(w, cmd);
        if cmd.starts_with("Edit") {
            self.edit_ended();
        }
    }

    /// Until the Edit running apart has ended and what it did is
    /// proposed, as the UI does when woken.
    pub(crate) fn edit_ended(&mut self) {
        wait_for("the Edit to end", || {
            self.ui().woke();
            self.ui().host.edit.is_none().then_some(())
        });
        self.ui().paint();
    }

    /// [`Rig::run`] without waiting for an Edit.
    pub(crate) fn execute_in_tag(&mut self, w: Win, cmd: &str) {
        let end = self.tag_text(w).chars().count() as u64;
        // A window too small to show its tag's end is grown first, as a
        // user would (button 2 on its box).
        if self.ui().frame(Target::Tag(w.window)).and_then(|f| f.point_of(end)).is_none() {
            let g = *self.ui().screen().unwrap().window(w.window).unwrap();
            self.click(2, (g.layout_box.x0 + 2, g.layout_box.y0 + 2));
        }
        let at = self.point(w.window, end, true);
        self.click(1, at);
        self.typed(&format!(" {cmd}"));
        let tag = self.tag_text(w);
        let start = tag[..tag.rfind(cmd).unwrap()].chars().count() as u64;
        let a = self.point(w.window, start, true);
        let z = self.point(w.window, start + cmd.chars().count() as u64, true);
        self.send(Event::Press { button: 2, x: a.0, y: a.1 });
        self.send(Event::Motion { x: z.0, y: z.1 });
        self.send(Event::Release { button: 2, x: z.0, y: z.1 });
    }

    /// B2 on `word` in the row tag, or in the tag of column `column`.
    pub(crate) fn click_word(&mut self, column: Option<usize>, word: &str) {
        let screen = self.ui().screen().unwrap();
        let (rect, buffer, view) = {
            let link = self.ui().host.att.lock();
            let st = &link.node().unwrap().state;
            match column {
                None => (screen.row_tag, st.layout.row_tag.unwrap(), ViewId::TopRow),
                Some(i) => {
                    let c = &st.layout.columns[i];
                    (screen.columns.iter().find(|g| g.id == c.id).unwrap().tag, c.tag, ViewId::ColumnTag(c.id))
                }
            }
        };
        let ui = self.ui();
        let line = ui.fonts.line_height() as i32;
        let link = ui.host.att.lock();
        let b = link.node().unwrap().state.buffer(buffer).unwrap();
        let text = b.text.to_string();
        let q = text[..text.find(word).unwrap_or_else(|| panic!("{word} in {text:?}"))].chars().count() as u64 + 1;
        let org = b.views.get(&view).map_or(0, |v| v.org);
        let frame = Frame::new(b.text.rope(), org, rect, &mut ui.fonts.proportional, line, 4);
        let (x, y) = frame.point_of(q).unwrap();
        drop(link);
        self.click(2, (x, y + line / 3));
    }

    fn windows(&mut self) -> String {
        self.ui().settle().unwrap();
        self.apex(&["read", "main/meta/windows"])
    }
}

#[test]
fn every_built_in_runs_from_a_tag_against_the_session() {
    let mut r = Rig::start("session-builtins", true);
    // Wide enough for a new column's tag to show Delcol.
    r.ui().resize(1800, 1000);
    let dir = r.ns.join("b");
    std::fs::create_dir(&dir).unwrap();
    let (fa, fb) = (dir.join("a.txt"), dir.join("b.txt"));
    std::fs::write(&fa, "alpha\n").unwrap();
    std::fs::write(&fb, "beta\n").unwrap();
    let a = r.open(&fa.display().to_string());
    let b = r.open(&fb.display().to_string());
    let end = |r: &mut Rig, w: Win| {
        let n = r.body_text(w).chars().count() as u64;
        let at = r.point(w.window, n, false);
        r.click(1, at);
    };

    // Undo, Redo, Put, Get.
    end(&mut r, a);
    r.typed("x\n");
    r.run(a, "Undo");
    assert_eq!(r.body_text(a), "alpha\n");
    r.run(a, "Redo");
    assert_eq!(r.body_text(a), "alpha\nx\n");
    r.run(a, "Put");
    assert_eq!(std::fs::read_to_string(&fa).unwrap(), "alpha\nx\n");
    std::fs::write(&fa, "changed\n").unwrap();
    r.run(a, "Get");
    assert_eq!(r.body_text(a), "changed\n");

    // Snarf, Cut, Paste on the body's selection.
    r.sweep(a, 1, 0, 7, &[]);
    r.run(a, "Snarf");
    assert_eq!(r.snarf(), "changed");
    r.sweep(a, 1, 0, 7, &[]);
    r.run(a, "Cut");
    assert_eq!(r.body_text(a), "\n");
    r.run(a, "Paste");
    assert_eq!(r.body_text(a), "changed\n");
    // Send: the snarf buffer at the end of the body.
    r.run(b, "Send");
    assert!(r.body_text(b).starts_with("beta\nchanged"), "{:?}", r.body_text(b));

    // Look, Edit.
    r.run(b, "Look beta");
    assert_eq!(r.served(b, "rdsel"), "beta");
    r.run(b, "Edit ,s/beta/gamma/");
    assert!(r.body_text(b).starts_with("gamma\n"), "{:?}", r.body_text(b));

    // Font, Tab, Indent (and typing with it), Incl: the window's settings.
    r.run(b, "Font");
    r.run(b, "Tab 8");
    r.run(b, "Indent on");
    r.run(b, "Incl /usr/include");
    let flags = r.daemon_state().window(b.window).unwrap().flags.clone();
    assert_eq!((flags.font.is_some(), flags.tab, flags.autoindent), (true, Some(8), true), "{flags:?}");
    assert!(flags.incl.iter().any(|d| d == "/usr/include"), "{flags:?}");
    let n = r.body_text(b).chars().count() as u64;
    let at = r.point(b.window, n, false);
    r.click(1, at);
    r.typed("\t  indented");
    r.typed("\n");
    r.typed("next");
    assert!(r.body_text(b).ends_with("\t  indented\n\t  next"), "{:?}", r.body_text(b));

    // ID says where the window is in the acme tree.
    r.run(a, "ID");
    let number = a.number;
    wait_for("ID's answer", || errors(&mut r).filter(|e| e.contains(&format!("/mnt/acme/{number}/"))));

    // Zerox, New, Newcol, Sort, Delcol.
    let before = r.windows().lines().count();
    r.run(a, "Zerox");
    let windows = r.windows();
    assert_eq!(windows.lines().count(), before + 1);
    assert_eq!(windows.lines().filter(|l| l.ends_with("/a.txt")).count(), 2, "{windows}");
    r.run(a, "New");
    assert_eq!(r.windows().lines().count(), before + 2);
    let columns = r.daemon_state().layout.columns.len();
    r.click_word(None, "Newcol");
    assert_eq!(r.daemon_state().layout.columns.len(), columns + 1);
    let last = r.daemon_state().layout.columns.len() - 1;
    r.click_word(Some(last), "Delcol");
    assert_eq!(r.daemon_state().layout.columns.len(), columns);
    let st = r.daemon_state();
    let (ci, _) = st.layout.find(a.window).unwrap();
    r.click_word(Some(ci), "Sort");
    let st = r.daemon_state();
    let names: Vec<String> = st.layout.columns[ci]
        .windows
        .iter()
        .map(|p| st.buffer(st.window(p.window).unwrap().body).unwrap().name.clone())
        .collect();
    let mut sorted = names.clone();
    sorted.sort();
    assert_eq!(names, sorted, "Sort orders the column by name");

    // Putall writes every dirty window.
    end(&mut r, a);
    r.typed("A");
    end(&mut r, b);
    r.typed("B");
    r.click_word(None, "Putall");
    assert!(std::fs::read_to_string(&fa).unwrap().ends_with('A'));
    assert!(
        std::fs::read_to_string(&fb).unwrap().ends_with('B'),
        "{:?} {:?}",
        std::fs::read_to_string(&fb),
        errors(&mut r)
    );
    let st = r.daemon_state();
    for w in [a.window, b.window] {
        assert!(!st.buffer(st.window(w).unwrap().body).unwrap().dirty, "Putall leaves each window clean");
    }

    // Dump and Load.
    let dump = r.ns.join("apex.dump");
    r.run(a, &format!("Dump {}", dump.display()));
    let text = std::fs::read_to_string(&dump).expect("Dump wrote the file");
    assert!(text.contains(&fa.display().to_string()) && text.contains(&fb.display().to_string()), "{text}");
    r.run(a, &format!("Load {}", dump.display()));
    assert!(r.windows().lines().any(|l| l.ends_with("/b.txt")));
    // Load made the windows again.
    // Load made the windows of the dump; go on in the tallest one showing
    // b.txt (the ones it squeezed are out of sight).
    let b = r.tallest(&fb.display().to_string());
    let name = "b.txt";

    // A command, Local, and Kill.
    r.run(b, "sleep 30");
    let ns = r.ns.clone();
    let running = || r_processes(&ns);
    wait_for("sleep to run", || running().contains("sleep 30").then_some(()));
    r.click_word(None, "Kill");
    wait_for("Kill to end it", || {
        (!running().lines().any(|l| l.contains("sleep 30") && !l.contains("exit"))).then_some(())
    });
    r.run(b, "Local touch local-ran");
    wait_for("Local's command", || dir.join("local-ran").exists().then_some(()));

    // Del warns once about a dirty window; Delete does not ask.
    end(&mut r, b);
    r.typed("dirty");
    let listed = |r: &mut Rig| r.windows().lines().any(|l| l.starts_with(&format!("{} ", b.number)));
    r.run(b, "Del");
    assert!(listed(&mut r), "a dirty window is not deleted at once");
    wait_for("the warning", || errors(&mut r).filter(|e| e.contains(&format!("{name} modified"))));
    r.run(b, "Delete");
    assert!(!listed(&mut r), "Delete does not ask");

    // Exit (and Abort) close this UI; the session goes on.
    assert!(!r.ui().exiting());
    r.click_word(None, "Exit");
    assert!(r.ui().exiting(), "Exit closes the UI");
    assert!(r.apex(&["ls", "main"]).contains("acme"), "the session goes on");
}

fn r_processes(ns: &std::path::Path) -> String {
    apex(ns, &["read", "main/meta/processes"])
}

#[test]
fn a_second_ui_leads_the_first_watches_types_through_proposals_and_leads_again() {
    let mut r = Rig::start("session-two", true);
    let file = r.ns.join("two.txt");
    std::fs::write(&file, "shared\n").unwrap();
    let w = r.open(&file.display().to_string());
    // Everything the first made is the daemon's before the second comes.
    r.ui().settle().unwrap();
    assert!(!r.ui().watching());

    // A second UI attaches: the leases go to it, the first watches.
    let second = attach(&r.rt, &r.ns, true);
    let first = r.ui.replace(second).unwrap();
    let mut first = Some(first);
    let swap = |r: &mut Rig, other: &mut Option<Ui>| {
        let ui = r.ui.take();
        r.ui = other.take();
        *other = ui;
    };
    swap(&mut r, &mut first);
    wait_for("the first UI to watch", || r.ui().watching().then_some(()));
    let damage = r.ui().paint();
    let screen = r.ui().screen().unwrap();
    let label = *damage.last().expect("the row tag's label drawn");
    assert_eq!((label.y0, label.x1), (screen.row_tag.y0, screen.row_tag.x1), "at the right of the row tag");
    let inked =
        (label.y0..label.y1).any(|y| (label.x0..label.x1).any(|x| r.ui().canvas.at(x, y) != apex_ui::palette::TAG));
    assert!(inked, "`watching Lead` is drawn");

    // The second types; the first follows live.
    swap(&mut r, &mut first);
    let leads_all = |r: &mut Rig| {
        r.ui().host.att.with(|l| {
            [Shard::Buffer(w.body), Shard::Buffer(w.tag), Shard::Window(w.window)].iter().all(|s| l.leads(*s))
        })
    };
    wait_for("the second to lead the window", || leads_all(&mut r).then_some(()));
    let end = r.body_text(w).chars().count() as u64 - 1;
    let at = r.point(w.window, end, false);
    r.click(1, at);
    r.typed(" by two");
    assert_eq!(r.body_text(w), "shared by two\n");
    swap(&mut r, &mut first);
    wait_for("the first to show the second's typing", || {
        let t = r.ui().host.att.lock().node().unwrap().state.buffer(w.body).unwrap().text.to_string();
        (t == "shared by two\n").then_some(())
    });

    // The watching one types, key by key without waiting: its proposals
    // land in order at its own cursor.
    let at = r.point(w.window, 6, false);
    r.click(1, at);
    r.ui().settle().unwrap();
    wait_for("the click's selection to come back", || {
        let v =
            r.ui().host.att.lock().node().unwrap().state.buffer(w.body).unwrap().views[&ViewId::WindowBody(w.window)];
        (v.q0 == 6).then_some(())
    });
    for c in [",", " ", "o", "n", "e"] {
        r.typed(c);
    }
    r.key(Key::Backspace);
    r.typed("e!");
    let mut seen = String::new();
    let typed = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        wait_for("the daemon to have the watching UI's typing", || {
            seen = r.apex(&["read", &format!("main/acme/{}/body", w.number)]);
            (seen == "shared, one! by two\n").then_some(())
        })
    }));
    assert!(typed.is_ok(), "the daemon has {seen:?}; +Errors: {:?}", errors(&mut r));
    // A cursor key moves the cursor there too: typing follows it.
    r.key(Key::Left);
    r.key(Key::Left);
    r.typed("~");
    wait_for("typing after two Lefts", || {
        (r.apex(&["read", &format!("main/acme/{}/body", w.number)]) == "shared, on~e! by two\n").then_some(())
    });
    assert!(r.ui().watching(), "still watching: typing did not take the leases");

    // B2 on `Lead`: the leases come back; the second watches.
    let screen = r.ui().screen().unwrap();
    let (x, y) = (screen.row_tag.x1 - 8, screen.row_tag.y0 + 4);
    r.click(2, (x, y));
    wait_for("the first to lead again", || leads_all(&mut r).then_some(()));
    assert!(!r.ui().watching());
    swap(&mut r, &mut first);
    wait_for("the second to watch", || r.ui().watching().then_some(()));
    swap(&mut r, &mut first);
    r.typed("?");
    assert_eq!(r.body_text(w), "shared, on~?e! by two\n", "typing applies at once again");
    if let Some(ui) = first.take() {
        r.rt.block_on(ui.host.att.close());
    }
}

#[test]
fn a_stopped_ui_that_lost_its_lease_keeps_its_typing_or_finds_it_in_recovered_and_is_told() {
    let mut r = Rig::start_with("session-fenced", true, &["--lease-deadline", "300"]);
    let file = r.ns.join("stuck.txt");
    std::fs::write(&file, "text\n").unwrap();
    let w = r.open(&file.display().to_string());
    r.ui().settle().unwrap();
    let at = r.point(w.window, 4, false);
    r.click(1, at);
    r.ui().settle().unwrap();
    // The UI stops (as a suspended process would) with typing not sent.
    r.ui().host.att.pause();
    r.typed(" unsent");
    // Another UI comes; the stopped one does not hand over, so the daemon
    // takes the leases at the deadline and gives them to the newcomer.
    let second = attach(&r.rt, &r.ns, true);
    let body = format!("main/acme/{}/body", w.number);
    assert_eq!(r.apex(&["read", &body]), "text\n", "the unsent typing is not the daemon's");
    // The stopped UI wakes: nobody else wrote there meanwhile, so its
    // typing simply goes on, proposed to the newcomer; nothing recovered.
    let att = r.ui().host.att.clone();
    let wrote = r.rt.block_on(att.resume());
    assert!(wrote.as_ref().is_err_and(|e| e.to_string().starts_with("fenced")), "its old tail is refused: {wrote:?}");
    wait_for("the typing to go on", || (r.apex(&["read", &body]) == "text unsent\n").then_some(()));
    r.ui().woke();
    assert!(!r.windows().contains("+Recovered"), "nothing to recover: {}", r.windows());

    // The newcomer goes; this UI leads again. Stopped again with typing
    // not sent, and this time a third UI writes there first: that is a
    // conflict, recovered beside the file, and the UI says so.
    r.rt.block_on(second.host.att.close());
    wait_for("this UI to lead again", || r.ui().host.att.with(|l| l.leads(apex_core::Shard::Layout)).then_some(()));
    r.ui().settle().unwrap();
    r.ui().host.att.pause();
    r.typed(" late");
    let third = attach(&r.rt, &r.ns, true);
    let mut writer = std::process::Command::new(crate::support::sibling("apex"))
        .args(["write", &body])
        .env("NAMESPACE", &r.ns)
        .stdin(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    std::io::Write::write_all(&mut writer.stdin.take().unwrap(), b"third\n").unwrap();
    assert!(writer.wait().unwrap().success());
    let att = r.ui().host.att.clone();
    let _ = r.rt.block_on(att.resume());
    let shown = wait_for("the UI to say where its typing went", || {
        r.ui().woke();
        errors(&mut r).filter(|e| e.contains("+Recovered"))
    });
    let name = format!("{}+Recovered", file.display());
    assert!(shown.contains(&name) && shown.contains("another changed that text"), "{shown}");
    let windows = r.windows();
    let recovered = windows.lines().find(|l| l.contains(&name)).expect("a FILE+Recovered window");
    let n = recovered.split(' ').next().unwrap();
    let text = r.apex(&["read", &format!("main/acme/{n}/body")]);
    assert!(text.contains("insert\n\t late\n"), "the piece to put back: {text}");
    assert_eq!(r.apex(&["read", &body]), "text unsent\nthird\n", "nothing of it mixed into the text");
    r.rt.block_on(third.host.att.close());
}

/// A file that is not UTF-8, opened in a UI on the daemon's machine (which
/// reads it itself), loads as acme loads it, each bad byte a U+FFFD, says
/// so beside the file, and Put warns once before it writes U+FFFD's bytes
/// over the file's.
#[test]
fn a_file_not_utf8_loads_with_u_fffd_and_put_warns_first() {
    let mut r = Rig::start("session-not-utf8", true);
    let file = r.ns.join("latin1.txt");
    std::fs::write(&file, b"caf\xe9\n").unwrap();
    let w = r.open(&file.display().to_string());
    assert_eq!(r.body_text(w), "caf\u{FFFD}\n");
    let said = format!("{}: 1 byte that is not UTF-8 is shown as U+FFFD", file.display());
    wait_for("the load's warning", || errors(&mut r).filter(|e| e.contains(&said)));
    r.run(w, "Put");
    wait_for("Put's warning", || errors(&mut r).filter(|e| e.contains("holds bytes that are not UTF-8")));
    assert_eq!(std::fs::read(&file).unwrap(), b"caf\xe9\n", "the file is as it was");
    r.run(w, "Put");
    assert_eq!(std::fs::read_to_string(&file).unwrap(), "caf\u{FFFD}\n");
}
