//! A long Edit runs on a thread of its own: the UI goes on drawing and
//! typing, the row tag says what runs, another Edit waits its turn, and
//! `Kill Edit` (or B2 on the row tag's `Kill`) ends it with the text as
//! it was, its pipe killed with it. The Edit here is held up by a pipe
//! from a FIFO the test writes when it is ready (or never), so nothing
//! depends on how fast the machine is.

use crate::session::{errors, Rig};
use crate::support::wait_for;
use apex_ui::input::Event;
use std::path::Path;

/// Writes `text` to the FIFO once the Edit's `cat` opens it.
fn feed(fifo: &Path, text: &str) -> std::thread::JoinHandle<()> {
    let (fifo, text) = (fifo.to_path_buf(), text.to_string());
    std::thread::spawn(move || std::fs::write(fifo, text).unwrap())
}

fn said(r: &mut Rig, what: &str) {
    wait_for(what, || errors(r).filter(|e| e.contains(what)));
}

#[test]
fn a_long_edit_runs_apart_while_typing_goes_on_and_kill_ends_it() {
    let mut r = Rig::start("long-edit", true);
    let (a, b) = (r.ns.join("a.txt"), r.ns.join("b.txt"));
    std::fs::write(&a, "one\ntwo\n").unwrap();
    std::fs::write(&b, "x\n").unwrap();
    let fifo = r.ns.join("fifo");
    assert!(std::process::Command::new("mkfifo").arg(&fifo).status().unwrap().success());
    let a = r.open(&a.display().to_string());
    let b = r.open(&b.display().to_string());
    let edit = format!("Edit ,< cat {}", fifo.display());

    // Executed, it runs: the UI is back at once and says so.
    r.execute_in_tag(a, &edit);
    let status = r.ui().status().expect("the row tag says an Edit runs");
    assert!(status.starts_with(" Edit ,< cat ") && status.ends_with(" Kill "), "{status:?}");
    // Typing in another window goes on and reaches the daemon.
    let end = r.point(b.window, 2, false);
    r.click(1, end);
    r.typed("typed");
    assert_eq!(r.body_text(b), "x\ntyped");
    // A second Edit waits its turn.
    r.execute_in_tag(b, "Edit ,d");
    said(&mut r, "Edit: another runs (,< cat ");
    assert_eq!(r.body_text(b), "x\ntyped");
    // Fed, it ends, and what it did is made.
    let fed = feed(&fifo, "new text\n");
    r.edit_ended();
    fed.join().unwrap();
    assert_eq!(r.body_text(a), "new text\n");
    assert_eq!(r.ui().status(), None, "the row tag no longer says it");

    // B2 on the row tag's Kill while its pipe waits for input that never
    // comes: the pipe is killed with it, and it makes nothing.
    r.execute_in_tag(a, &edit);
    let row = r.ui().screen().unwrap().row_tag;
    let kill = apex_ui::render::label_width(&mut r.ui().fonts, " Kill ");
    let (x, y) = (row.x1 - kill / 2, (row.y0 + row.y1) / 2);
    r.send(Event::Press { button: 2, x, y });
    r.send(Event::Release { button: 2, x, y });
    r.edit_ended();
    assert_eq!(r.body_text(a), "new text\n");
    said(&mut r, "Edit: killed; the text is as it was");

    // `Kill Edit` from a tag, as acme's Kill names a command.
    r.execute_in_tag(a, &edit);
    r.run(b, "Kill Edit");
    r.edit_ended();
    assert_eq!(r.body_text(a), "new text\n");
    // With nothing running, Kill Edit says there is none.
    r.run(b, "Kill Edit");
    said(&mut r, "Kill: no process Edit");

    // Leaving (Exit, the window closed) while one runs: it is killed and
    // waited for, so nothing of it goes out in part.
    r.execute_in_tag(a, &edit);
    r.ui().leave();
    assert!(r.ui().host.edit.is_none(), "ended before the UI goes");
    assert_eq!(r.body_text(a), "new text\n");
}
