//! Where new windows go and what a command run from one gets, as acme
//! does them: acme's `coladd` through a real UI and daemon (the window
//! it lands on keeps the lines its text fills, the pointer moves into
//! the new one), and `$winid` and `$font` in a command's environment.

use crate::session::Rig;
use crate::support::wait_for;

#[test]
fn a_new_window_leaves_the_one_it_lands_on_the_lines_its_text_fills_as_acme_does() {
    let mut r = Rig::start("session-place", true);
    let f = r.ns.join("one.txt");
    std::fs::write(&f, "one line\n").unwrap();
    let a = r.open(&f.display().to_string());
    r.ui().paint();
    let (ci, _) = r.daemon_state().layout.find(a.window).unwrap();
    let line = r.ui().metrics().line;
    // New in the column's tag (acme's coladd): the window it lands on
    // keeps its one line of text; the new one takes the rest.
    r.click_word(Some(ci), "New");
    let screen = r.ui().screen().unwrap();
    let col = screen.columns[ci].clone();
    let made = col.windows.last().unwrap().id;
    assert_ne!(made, a.window);
    assert_eq!(screen.window(a.window).unwrap().body.height() / line, 1, "{col:?}");
    assert!(screen.window(made).unwrap().body.height() > col.area.height() / 2, "{col:?}");
    // The pointer goes just right of and below its layout box, into its
    // body, so what is typed next goes there.
    let g = *screen.window(made).unwrap();
    assert_eq!(r.ui().take_warp(), Some((g.layout_box.x1 + 3, g.tag_line.y1 + 3)));
    r.typed("typed");
    let body = r.daemon_state().window(made).unwrap().body;
    r.ui().settle().unwrap();
    assert_eq!(r.daemon_state().buffer(body).unwrap().text.to_string(), "typed");
    // Again, twice: the typed window keeps its line; an empty one only
    // its tag.
    r.click_word(Some(ci), "New");
    let screen = r.ui().screen().unwrap();
    let second = screen.columns[ci].windows.last().unwrap().id;
    assert_eq!(screen.window(made).unwrap().body.height() / line, 1);
    r.click_word(Some(ci), "New");
    let screen = r.ui().screen().unwrap();
    assert_eq!(screen.window(second).unwrap().body.height() / line, 0);
    assert_eq!(r.daemon_state().layout, r.ui().host.att.lock().node().unwrap().state.layout, "the daemon has it");
}

#[test]
fn a_command_gets_acme_s_winid_and_the_ui_s_font() {
    let mut r = Rig::start("session-env", true);
    r.ui().host.font = Some("Go Regular 11".into());
    let f = r.ns.join("notes.txt");
    std::fs::write(&f, "notes\n").unwrap();
    let a = r.open(&f.display().to_string());
    r.ui().paint();
    r.run(a, "printenv winid font >env.out");
    let out = r.ns.join("env.out");
    let want = format!("{}\nGo Regular 11\n", a.number);
    wait_for("the command's environment", || std::fs::read_to_string(&out).ok().filter(|s| *s == want));
}

#[test]
fn a_pipe_command_from_a_tag_replaces_the_body_s_selection_through_the_daemon() {
    let mut r = Rig::start("session-pipe", true);
    let f = r.ns.join("pipe.txt");
    std::fs::write(&f, "keep sel keep\n").unwrap();
    let a = r.open(&f.display().to_string());
    r.ui().paint();
    r.sweep(a, 1, 5, 8, &[]);
    r.run(a, "|tr a-z A-Z");
    // The daemon runs it in the background and puts what it printed in
    // the selection's place: the UI is not held up meanwhile.
    wait_for("the selection replaced", || {
        let link = r.ui().host.att.lock();
        let text = link.node()?.state.buffer(a.body).ok()?.text.to_string();
        (text == "keep SEL keep\n").then_some(())
    });
}
