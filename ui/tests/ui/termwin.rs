//! A terminal's window, headless over a real daemon: what is typed with
//! the pointer over it goes to its program; the wheel scrolls back
//! through its scrollback and new output leaves a scrolled view alone;
//! acme's mouse works on its text (button 1 selects, a double-click
//! the word, the 1-2 chord
//! snarfs, 1-3 pastes by typing the snarf into the program, button 2
//! executes a word of it); `Win` from a UI; a watching UI draws the same
//! terminal.

use crate::session::{errors, Rig};
use crate::support::wait_for;
use apex_core::{TermId, WindowId};
use apex_ui::input::Event;
use apex_ui::rect::Rect;

/// Writes `text` to the session file `path`.
fn write(r: &Rig, path: &str, text: &str) {
    crate::support::apex_write(&r.ns, path, text);
}

/// The window the UI shows terminal `term` in, and its body.
fn shown(r: &mut Rig, term: TermId) -> Option<(WindowId, Rect)> {
    r.ui().woke();
    let w = {
        let link = r.ui().host.att.lock();
        let st = &link.node()?.state;
        st.windows.iter().find(|(_, w)| w.term == Some(term)).map(|(id, _)| *id)?
    };
    r.ui().paint();
    let body = r.ui().screen()?.window(w)?.body;
    Some((w, body))
}

/// A shell in a terminal of the session, and the window the UI shows it
/// in, with that window's body.
fn terminal(r: &mut Rig) -> (TermId, WindowId, Rect) {
    write(r, "main/ctl", &format!("term -d {} sh\n", r.ns.display()));
    let term = TermId(wait_for("the terminal", || {
        r.apex(&["read", "main/terms/index"]).split_whitespace().next()?.parse().ok()
    }));
    let (w, body) = wait_for("its window", || shown(r, term));
    (term, w, body)
}

/// The terminal's rows (scrollback then screen) in the UI's replica.
fn rows(r: &mut Rig, term: TermId) -> Vec<String> {
    r.ui().woke();
    let link = r.ui().host.att.lock();
    let Some(t) = link.node().and_then(|n| n.state.terms.get(&term)) else { return Vec::new() };
    t.scrollback.iter().map(|row| row.text.clone()).chain(t.grid.iter().map(|row| row.text.clone())).collect()
}

#[test]
fn a_terminal_s_window_scrolls_back_and_takes_acme_s_mouse() {
    let mut r = Rig::start("termwin", true);
    let (term, w, body) = terminal(&mut r);
    let line = r.ui().fonts.line_height() as i32;
    let cell = apex_ui::termdraw::cell_width(&mut r.ui().fonts);
    let (x, y) = (body.x0 + cell, body.y0 + line / 2);

    // Typed with the pointer over it: to the shell.
    r.send(Event::Motion { x, y });
    r.send(Event::Text("seq 1 200; echo made-it\n".into()));
    wait_for("the output", || rows(&mut r, term).iter().any(|l| l == "made-it").then_some(()));
    let all = rows(&mut r, term).len();
    assert!(all > 200, "the scrollback keeps what scrolled off: {all} rows");

    // The wheel scrolls back; new output leaves the view where it is; at
    // the bottom again it follows.
    r.send(Event::Wheel { notches: -2, x, y });
    let top = r.ui().input.term_views.get(&w).and_then(|v| v.top).expect("scrolled back");
    r.send(Event::Text("echo more\n".into()));
    wait_for("more output", || rows(&mut r, term).iter().any(|l| l == "more").then_some(()));
    r.ui().paint();
    assert_eq!(r.ui().input.term_views[&w].top, Some(top), "left where it was");
    r.send(Event::Wheel { notches: 50, x, y });
    assert_eq!(r.ui().input.term_views[&w].top, None, "at the bottom it follows again");

    // Button 1 sweeps "made-it"; the 1-2 chord snarfs it.
    let shown_rows = (body.height() / line) as usize;
    let texts = rows(&mut r, term);
    let bottom = texts.len().saturating_sub(shown_rows);
    let at = texts.iter().rposition(|l| l == "made-it").unwrap();
    let ry = body.y0 + (at - bottom) as i32 * line + line / 2;
    let (x0, x7) = (body.x0 + cell / 2, body.x0 + 7 * cell + cell / 2);
    r.send(Event::Press { button: 1, x: x0, y: ry });
    r.send(Event::Motion { x: x7, y: ry });
    r.send(Event::Press { button: 2, x: x7, y: ry });
    r.send(Event::Release { button: 2, x: x7, y: ry });
    r.send(Event::Release { button: 1, x: x7, y: ry });
    r.ui().settle().unwrap();
    let snarf = { r.ui().host.att.lock().node().unwrap().state.layout.snarf.clone() };
    assert_eq!(snarf, "made-it", "the chord snarfed the terminal's text");

    // A double-click selects the word clicked (here all of "made-it").
    let x3 = body.x0 + 3 * cell + cell / 2;
    for (ev, t) in [
        (Event::Press { button: 1, x: x3, y: ry }, 10_000_000),
        (Event::Release { button: 1, x: x3, y: ry }, 10_000_050),
        (Event::Press { button: 1, x: x3, y: ry }, 10_000_200),
        (Event::Release { button: 1, x: x3, y: ry }, 10_000_250),
    ] {
        r.ui().handle_at(ev, t);
    }
    let sel = r.ui().input.term_views[&w].sel.expect("selected");
    assert_eq!((sel.0.col, sel.1.col, sel.0.row), (0, 7, at), "the word: {sel:?}");

    // 1-3 pastes: the snarf is typed into the shell.
    r.send(Event::Press { button: 1, x: x0, y: ry });
    r.send(Event::Press { button: 3, x: x0, y: ry });
    r.send(Event::Release { button: 3, x: x0, y: ry });
    r.send(Event::Release { button: 1, x: x0, y: ry });
    r.send(Event::Text("\n".into()));
    wait_for("the pasted command to run", || {
        rows(&mut r, term).iter().any(|l| l.contains("made-it: not found")).then_some(())
    });

    // Button 2 on a word of the text executes it, in the window's
    // directory: `made-it` is no command there either, said in +Errors.
    let texts = rows(&mut r, term);
    let bottom = texts.len().saturating_sub(shown_rows);
    let at = texts.iter().rposition(|l| l == "made-it").unwrap();
    let ry = body.y0 + (at - bottom) as i32 * line + line / 2;
    r.send(Event::Press { button: 2, x: x0, y: ry });
    r.send(Event::Release { button: 2, x: x0, y: ry });
    wait_for("the command's complaint in +Errors", || {
        r.ui().woke();
        errors(&mut r).filter(|e| e.contains("made-it")).map(|_| ())
    });
}

/// `Win`, executed in a UI, starts a terminal in a window of its own in
/// the directory of the window it ran from (blanks and all), without waiting on itself
/// (the UI makes that window when it next wakes).
#[test]
fn win_opens_a_terminal_window_in_the_window_s_directory() {
    let mut r = Rig::start("termwin-win", true);
    // A blank in the name: the directory still reaches the daemon whole.
    let dir = r.ns.join("my src");
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("f.c");
    std::fs::write(&file, "int x;\n").unwrap();
    let w = r.open(&file.display().to_string());
    apex_core::exec::execute(&mut r.ui().host, Some(w.window), "Win").unwrap();
    let term = wait_for("Win's terminal in a window", || {
        r.ui().woke();
        let link = r.ui().host.att.lock();
        let st = &link.node()?.state;
        st.windows.values().find_map(|x| x.term)
    });
    let ctl = wait_for("the terminal", || {
        let c = r.apex(&["read", &format!("main/terms/{}/ctl", term.0)]);
        (!c.is_empty()).then_some(c)
    });
    assert!(ctl.contains(&format!("dir {}", dir.display())), "in the window's directory: {ctl}");
    // The UI made the window itself: it never stopped leading the layout
    // (a UI that blocked on its own request would have lost it).
    assert!(r.ui().host.att.with(|l| l.leads(apex_core::Shard::Layout)), "still leading");
}

/// A watching UI draws the same terminal: both UIs' pixels of its window
/// are the same, grid and colours, as output goes on.
#[test]
fn a_watching_ui_draws_the_same_terminal() {
    let mut r = Rig::start("termwin-watch", true);
    let (term, _, body) = terminal(&mut r);
    // A second UI takes the lead; this one watches.
    let mut second = crate::session::attach(&r.rt, &r.ns, true);
    write(&r, &format!("main/terms/{}/cons", term.0), "printf '\\033[32mgreen\\033[0m %s\\n' shared\n");
    let same = wait_for("both UIs to draw the same terminal", || {
        r.ui().woke();
        second.woke();
        r.ui().paint();
        second.paint();
        let shows = |ui: &apex_ui::app::Ui| {
            let link = ui.host.att.lock();
            let t = link.node()?.state.terms.get(&term)?;
            t.grid.iter().any(|row| row.text == "green shared").then_some(())
        };
        shows(r.ui())?;
        shows(&second)?;
        let pixels = |ui: &apex_ui::app::Ui| -> Vec<u32> {
            (body.y0..body.y1)
                .flat_map(|y| (body.x0..body.x1).map(move |x| (x, y)))
                .map(|(x, y)| ui.canvas.at(x, y))
                .collect()
        };
        let (a, b) = (pixels(r.ui()), pixels(&second));
        (a == b).then_some(a)
    });
    assert!(same.iter().any(|p| *p != apex_ui::palette::BODY), "something is drawn there");
    assert!(!r.ui().host.att.with(|l| l.leads(apex_core::Shard::Layout)), "the first watches");
    r.rt.block_on(second.host.att.close());
}

/// Button 3 on a relative name in a terminal's output looks it up where
/// the shell is now (its `cwd`, which `terms/N/ctl` says), not where the
/// terminal started.
#[test]
fn button_three_on_a_name_in_a_terminal_looks_where_the_shell_is() {
    let mut r = Rig::start("termwin-cwd", true);
    let sub = r.ns.join("sub");
    std::fs::create_dir_all(&sub).unwrap();
    std::fs::write(sub.join("note.txt"), "found\n").unwrap();
    let (term, _, body) = terminal(&mut r);
    write(&r, &format!("main/terms/{}/cons", term.0), "cd sub; ls\n");
    wait_for("ls in sub", || rows(&mut r, term).iter().any(|l| l == "note.txt").then_some(()));
    let ctl = r.apex(&["read", &format!("main/terms/{}/ctl", term.0)]);
    assert!(ctl.contains(&format!("cwd {}", sub.display())), "{ctl}");
    let line = r.ui().fonts.line_height() as i32;
    let cell = apex_ui::termdraw::cell_width(&mut r.ui().fonts);
    let texts = rows(&mut r, term);
    let shown_rows = (body.height() / line) as usize;
    let bottom = texts.len().saturating_sub(shown_rows);
    let at = texts.iter().rposition(|l| l == "note.txt").unwrap();
    let (x, y) = (body.x0 + cell + cell / 2, body.y0 + (at - bottom) as i32 * line + line / 2);
    r.send(Event::Press { button: 3, x, y });
    r.send(Event::Release { button: 3, x, y });
    let name = sub.join("note.txt").display().to_string();
    wait_for("the file opened from the shell's directory", || {
        r.ui().woke();
        let link = r.ui().host.att.lock();
        apex_core::look::window_named(&link.node()?.state, &name).map(|_| ())
    });
}

/// The tag shows the terminal's title while its program runs and how
/// it ended after; `Look` finds text in the scrollback, selects it and
/// scrolls the view to it, and with no argument looks for what is
/// selected of the terminal's text, on after it.
#[test]
fn the_tag_shows_the_title_and_look_searches_the_scrollback() {
    let mut r = Rig::start("termwin-look", true);
    let (term, w, body) = terminal(&mut r);
    let tag_of = |r: &mut Rig| -> String {
        r.ui().woke();
        r.ui().paint();
        let link = r.ui().host.att.lock();
        let st = &link.node().unwrap().state;
        st.buffer(st.window(w).unwrap().tag).unwrap().text.to_string()
    };
    let cons = format!("main/terms/{}/cons", term.0);
    write(&r, &cons, "printf '\\033]0;building | %s\\007' apex\n");
    let tag = wait_for("the title in the tag", || Some(tag_of(&mut r)).filter(|t| t.contains("building ¦ apex")));
    assert!(tag.starts_with(&format!("{}/-term.{} Del Snarf building ¦ apex |", r.ns.display(), term.0)), "{tag}");

    // Two needles, both scrolled far off the screen.
    write(&r, &cons, "seq 1 200; printf 'needle-%s\\n' here; seq 1 200; printf 'needle-%s\\n' here; seq 1 200\n");
    wait_for("the output", || (rows(&mut r, term).iter().filter(|l| *l == "needle-here").count() == 2).then_some(()));
    let needles: Vec<usize> =
        rows(&mut r, term).iter().enumerate().filter(|(_, l)| *l == "needle-here").map(|(i, _)| i).collect();

    // `Look needle-here`, swept with button 2 in the tag.
    let tag = tag_of(&mut r);
    let end = tag.chars().count() as u64;
    let pointer = r.point(w, end, true);
    r.send(Event::Motion { x: pointer.0, y: pointer.1 });
    r.typed("needle-here");
    let tag = tag_of(&mut r);
    let look = tag.chars().count() - "Look needle-here".len();
    let (from, to) = (r.point(w, look as u64, true), r.point(w, tag.chars().count() as u64, true));
    r.send(Event::Press { button: 2, x: from.0, y: from.1 });
    r.send(Event::Motion { x: to.0, y: to.1 });
    r.send(Event::Release { button: 2, x: to.0, y: to.1 });
    let line = r.ui().fonts.line_height() as i32;
    let shown_rows = (body.height() / line) as usize;
    let check = |r: &mut Rig, row: usize| {
        let v = r.ui().input.term_views[&w];
        let (a, b) = v.sel.expect("Look selected what it found");
        assert_eq!((a.row, a.col, b.row, b.col), (row, 0, row, 11), "{v:?}");
        let top = v.top.expect("scrolled back to it");
        assert!((top..top + shown_rows).contains(&row), "row {row} shown from {top}");
    };
    check(&mut r, needles[0]);

    // `Look` alone: the selection, found again after itself.
    let at = r.point(w, look as u64 + 1, true);
    r.click(2, at);
    check(&mut r, needles[1]);
    r.click(2, at);
    check(&mut r, needles[0]);

    // The program ends: the tag says how.
    write(&r, &cons, "exit 3\n");
    wait_for("the exit in the tag", || Some(tag_of(&mut r)).filter(|t| t.contains("Del Snarf exit 3 |")));
}
