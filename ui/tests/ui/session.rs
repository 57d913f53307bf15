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
use apex_ui::input::{Event, Key};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};

/// A daemon and one UI on its session `main`; everything stopped and
/// removed on drop, pass or fail.
struct Rig {
    ns: PathBuf,
    daemon: Child,
    ui: Option<Ui>,
    rt: tokio::runtime::Runtime,
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

/// One window of the session, as the UI and the 9P tree name it.
#[derive(Clone, Copy)]
struct Win {
    window: WindowId,
    body: BufferId,
    tag: BufferId,
    number: u32,
}

impl Rig {
    /// `local`: Get reads files in the UI (as `apex-ui` does on the
    /// daemon's machine), else through the daemon (as over TCP).
    fn start(name: &str, local: bool) -> Rig {
        let ns = namespace(name);
        let daemon = Command::new(sibling("apexd"))
            .arg("--namespace")
            .arg(&ns)
            .arg("-q")
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(ns.join("apexd.log")).unwrap())
            .spawn()
            .expect("start apexd");
        let socket = ns.join("apex");
        let rt = tokio::runtime::Runtime::new().unwrap();
        let mut rig = Rig { ns, daemon, ui: None, rt, now: 10_000 };
        wait_for("apexd's socket", || std::os::unix::net::UnixStream::connect(&socket).ok());
        let address = format!("unix!{}", socket.display());
        let (client, att) = rig.rt.block_on(async {
            let client = apex_ninep::dial(&address, 1 << 20).await.expect("dial apexd");
            let att = Attached::open(&client, "main", AttachmentKind::Ui, "apex-ui-test").await.expect("attach");
            assert!(att.wait_for(WAIT, |l| l.leads(Shard::Layout)).await, "the layout's lease");
            (client, att)
        });
        let host = UiHost { att, client, session: "main".into(), rt: rig.rt.handle().clone(), exit: false, local };
        rig.ui = Some(Ui::new(host, 900, 700, 1.0));
        rig
    }

    fn ui(&mut self) -> &mut Ui {
        self.ui.as_mut().expect("a UI")
    }

    fn apex(&self, args: &[&str]) -> String {
        apex(&self.ns, args)
    }

    /// Opens `path` as `apex-ui FILE` does; the window it is in.
    fn open(&mut self, path: &str) -> Win {
        exec::open(&mut self.ui().host, path, None).expect("open");
        let link = self.ui().host.att.lock();
        let st = &link.node().unwrap().state;
        let (window, body) = apex_core::look::window_named(st, path).expect("its window");
        let tag = st.window(window).unwrap().tag;
        let number = st.layout.numbers[&window].0;
        Win { window, body, tag, number }
    }

    fn send(&mut self, ev: Event) {
        self.now += 1000;
        let now = self.now;
        self.ui().handle_at(ev, now);
        self.ui().paint();
    }

    /// Where rune `q` of `buffer` is drawn in `w`'s body or tag.
    fn point(&mut self, w: WindowId, buffer: BufferId, q: u64, tag: bool) -> (i32, i32) {
        let screen = self.ui().screen().unwrap();
        let g = screen.window(w).unwrap();
        let rect = if tag { g.tag } else { g.body };
        let ui = self.ui();
        let line = ui.fonts.line_height() as i32;
        let view = if tag { ViewId::WindowTag(w) } else { ViewId::WindowBody(w) };
        let link = ui.host.att.lock();
        let b = link.node().unwrap().state.buffer(buffer).unwrap();
        let org = b.views.get(&view).map_or(0, |v| v.org);
        let frame = Frame::new(b.text.rope(), org, rect, &mut ui.fonts.proportional, line, 4);
        let (x, y) = frame.point_of(q).expect("rune on screen");
        (x, y + line / 3)
    }

    fn click(&mut self, button: u8, (x, y): (i32, i32)) {
        self.send(Event::Press { button, x, y });
        self.send(Event::Release { button, x, y });
    }

    fn typed(&mut self, s: &str) {
        self.send(Event::Text(s.into()));
    }

    fn key(&mut self, k: Key) {
        self.send(Event::Key(k));
    }

    /// What the daemon serves for window `w`'s `file`, once the UI's
    /// edits are acknowledged.
    fn served(&mut self, w: Win, file: &str) -> String {
        self.ui().settle().expect("the daemon acknowledges");
        self.apex(&["read", &format!("main/acme/{}/{file}", w.number)])
    }

    fn tag_text(&mut self, w: Win) -> String {
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
    let at = r.point(w.window, w.body, 5, false);
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
    let from = r.point(w.window, w.body, 12, false);
    let to = r.point(w.window, w.body, 18, false);
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
    let at = r.point(w.window, w.tag, put, true);
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
    let at = r.point(w.window, w.body, 3, false);
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

/// The text of the `+Errors` window the UI's replica has, if any.
fn errors(r: &mut Rig) -> Option<String> {
    let link = r.ui().host.att.lock();
    let st = &link.node()?.state;
    st.layout.numbers.keys().find_map(|w| {
        let win = st.window(*w).ok()?;
        let tag = st.buffer(win.tag).ok()?.text.to_string();
        let name = tag.split([' ', '\t']).next()?;
        name.ends_with("+Errors").then(|| st.buffer(win.body).ok().map(|b| b.text.to_string()))?
    })
}

#[test]
fn a_refused_put_and_a_lost_connection_are_shown_in_errors() {
    let mut r = Rig::start("session-errors", false);
    let dir = r.ns.join("gone");
    std::fs::create_dir(&dir).unwrap();
    let file = dir.join("f.txt");
    std::fs::write(&file, "text\n").unwrap();
    let w = r.open(&file.display().to_string());
    let at = r.point(w.window, w.body, 4, false);
    r.click(1, at);
    r.typed(" more");
    std::fs::remove_dir_all(&dir).unwrap();
    let tag = r.tag_text(w);
    let put = tag.find(" Put ").expect("Put in the tag") as u64 + 2;
    let at = r.point(w.window, w.tag, put, true);
    r.click(2, at);
    let shown = errors(&mut r).expect("a +Errors window");
    assert!(shown.starts_with("put: ") && shown.contains("f.txt: No such file"), "the daemon says why: {shown:?}");
    assert!(r.served(w, "tag").contains(" Put "), "still dirty");

    // The daemon goes away: said once, in +Errors, and the UI goes on.
    let _ = r.daemon.kill();
    let _ = r.daemon.wait();
    wait_for("the link to see the hang-up", || r.ui().host.att.is_closed().then_some(()));
    assert!(r.ui().woke(), "the loss is noticed");
    assert!(!r.ui().woke(), "and said once");
    r.ui().paint();
    let shown = errors(&mut r).unwrap();
    assert!(shown.contains("connection to apexd is gone"), "{shown:?}");
}
