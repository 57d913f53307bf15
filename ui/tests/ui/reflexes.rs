//! acme's reflexes in the real program under Xvfb, with no window
//! manager (as acme was tried side by side): keys taken without anything
//! giving the window the focus, typing going to the text under the
//! pointer, every expose repainted (a window mapped over apex-ui and
//! closed, apex-ui unmapped and mapped), acme's arrow and box pointers
//! (read back through XFixes), the pointer moved onto a dropped window's
//! layout box and onto the text B3 found, which is shown a quarter of
//! the way down as acme's `textshow` shows it.

use crate::support::{sibling, wait_for};
use crate::xvfb::{crop, desk, Desk};
use apex_core::{show, ViewId};
use apex_ui::cursor::{Shape, ARROW, BOX};
use apex_ui::font::Fonts;
use apex_ui::geom::{Metrics, Screen};
use apex_ui::rect::Rect;
use x11rb::connection::Connection;
use x11rb::protocol::xfixes::ConnectionExt as _;
use x11rb::protocol::xproto::{ConnectionExt as _, CreateWindowAux, WindowClass};

/// The pointer's position on the screen.
fn pointer(d: &Desk) -> (i32, i32) {
    let out = d.xdotool(&["getmouselocation", "--shell"]);
    let get = |k: &str| out.lines().find_map(|l| l.strip_prefix(k)).and_then(|v| v.parse().ok()).unwrap_or(-1);
    (get("X="), get("Y="))
}

/// Whether the X server shows `shape` as the pointer now.
fn showing(conn: &impl Connection, shape: &Shape) -> bool {
    let Ok(reply) = conn.xfixes_get_cursor_image().map(|c| c.reply()) else { return false };
    let Ok(img) = reply else { return false };
    if (img.width, img.height, img.xhot, img.yhot) != (shape.width(), shape.height(), shape.hot.0, shape.hot.1) {
        return false;
    }
    img.cursor_image.iter().enumerate().all(|(i, argb)| {
        let (x, y) = (i % usize::from(img.width), i / usize::from(img.width));
        match shape.ink(x, y) {
            Some(true) => *argb == 0xff00_0000,
            Some(false) => *argb == 0xffff_ffff,
            None => argb >> 24 == 0,
        }
    })
}

#[test]
fn without_a_window_manager_it_takes_keys_types_under_the_pointer_repaints_and_moves_the_pointer_as_acme() {
    let Some(mut d) = desk("reflexes") else { return };
    sibling("apexd");
    let file = d.ns.join("haystack.txt");
    let mut text = String::from("look for needle. here\n");
    for i in 1..120 {
        text.push_str(&format!("line {i}\n"));
    }
    text.push_str("the needle at last\n");
    std::fs::write(&file, &text).unwrap();
    let window = d.start_ui(&[&file]);
    let name = file.display().to_string();
    wait_for("the file's window", || d.apex(&["read", "main/meta/windows"]).contains(&name).then_some(()));
    let state = d.state();
    let (id, body_id) = apex_core::look::window_named(&state, &name).expect("the file's window");
    let number = state.layout.numbers[&id].0;
    assert_eq!(state.layout.find(id).unwrap().0, 0, "a file named at start goes to the first column, as acme's");
    let mut fonts = Fonts::new(1.0);
    let m = Metrics::new(fonts.line_height(), 1.0);
    let screen = Screen::new(&state, 1024, 768, &m, &mut fonts, &Default::default());
    let geom = *screen.window(id).unwrap();
    let (x11, _) = x11rb::connect(Some(&d.display)).expect("connect to Xvfb");
    x11.xfixes_query_version(5, 0).unwrap().reply().expect("XFixes");

    // No `windowfocus`: a click and typing reach the body, the keys
    // taken with no window manager to give the focus.
    let (x, y) = (geom.body.x1 - 4, geom.body.y0 + m.line / 2);
    d.xdotool(&["mousemove", "--window", &window, &x.to_string(), &y.to_string(), "click", "1"]);
    d.xdotool(&["type", "--delay", "20", "!"]);
    let body = format!("main/acme/{number}/body");
    wait_for("typing to reach the body without a window manager", || {
        d.apex(&["read", &body]).starts_with("look for needle. here!\n").then_some(())
    });
    // acme's arrow over the window, not the server's cross.
    wait_for("acme's arrow", || showing(&x11, &ARROW).then_some(()));

    // Typing goes to the text under the pointer: over the tag, the tag.
    let state = d.state();
    let screen = Screen::new(&state, 1024, 768, &m, &mut fonts, &Default::default());
    let geom = *screen.window(id).unwrap();
    let tag_end = (geom.tag.x1 - 6, geom.tag.y0 + m.line / 2);
    d.xdotool(&["mousemove", "--window", &window, &tag_end.0.to_string(), &tag_end.1.to_string()]);
    d.xdotool(&["type", "--delay", "20", "Zq"]);
    let tag = format!("main/acme/{number}/tag");
    wait_for("typing over the tag to land in the tag", || d.apex(&["read", &tag]).contains("Zq").then_some(()));
    assert!(d.apex(&["read", &body]).starts_with("look for needle. here!\n"), "the body kept its text");

    // Repaint: a window mapped over apex-ui and closed leaves none of its
    // pixels; apex-ui unmapped and mapped again is drawn again whole.
    let png =
        std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("apex-ui-reflexes-{}.png", std::process::id()));
    let area = Rect::new(100, 100, 400, 300);
    let before = crop(&d.screenshot(&png), area, 0);
    let cover = x11.generate_id().unwrap();
    let root = x11.setup().roots[0].root;
    let aux = CreateWindowAux::new().background_pixel(0x00ff_0000).override_redirect(1);
    x11.create_window(0, cover, root, 100, 100, 300, 200, 0, WindowClass::INPUT_OUTPUT, 0, &aux).unwrap();
    x11.map_window(cover).unwrap();
    x11.flush().unwrap();
    wait_for("the covering window to show", || {
        crop(&d.screenshot(&png), area, 0).iter().all(|p| *p == 0xff_0000).then_some(())
    });
    x11.destroy_window(cover).unwrap();
    x11.flush().unwrap();
    wait_for("apex-ui to repaint what the window covered", || {
        (crop(&d.screenshot(&png), area, 0) == before).then_some(())
    });
    d.xdotool(&["windowunmap", "--sync", &window]);
    d.xdotool(&["windowmap", "--sync", &window]);
    wait_for("apex-ui to repaint itself when mapped again", || {
        (crop(&d.screenshot(&png), area, 0) == before).then_some(())
    });

    // The box pointer while a layout box is held; after the drop, the
    // arrow again and the pointer on the window's box (acme's
    // `winmousebut`): here a click, which grows the window.
    let b = geom.layout_box;
    let (bx, by) = ((b.x0 + b.x1) / 2 + 1, b.y0 + 3);
    d.xdotool(&["mousemove", "--window", &window, &bx.to_string(), &by.to_string(), "mousedown", "1"]);
    wait_for("the box pointer while the box is held", || showing(&x11, &BOX).then_some(()));
    d.xdotool(&["mouseup", "1"]);
    wait_for("the arrow after the drop", || showing(&x11, &ARROW).then_some(()));
    let state = d.state();
    let screen = Screen::new(&state, 1024, 768, &m, &mut fonts, &Default::default());
    let geom = *screen.window(id).unwrap();
    let b = geom.layout_box;
    let at_box = ((b.x0 + b.x1) / 2, b.y0 + m.line / 2);
    wait_for("the pointer on the window's layout box", || (pointer(&d) == at_box).then_some(()));

    // B3 on `needle.` looks for `needle` (no file has that name): found
    // far below, shown a quarter of the way down, and the pointer moved
    // onto it, 4 pixels right and the line's height less 4 down.
    let before_dot: i32 = "look for nee".chars().map(|c| fonts.proportional.advance(c) as i32).sum();
    let (x, y) = (geom.body.x0 + before_dot, geom.body.y0 + m.line / 2);
    d.xdotool(&["mousemove", "--window", &window, &x.to_string(), &y.to_string(), "click", "3"]);
    let now = d.apex(&["read", &body]);
    let found = now.rfind("the needle").unwrap() + "the ".len();
    let found = now[..found].chars().count() as u64;
    let state = wait_for("B3 to select the needle far below", || {
        let st = d.state();
        let v = st.buffer(body_id).ok()?.views.get(&ViewId::WindowBody(id)).copied()?;
        (v.q0 == found && v.q1 == found + 6).then_some(st)
    });
    let buffer = state.buffer(body_id).unwrap();
    let view = buffer.views[&ViewId::WindowBody(id)];
    let screen = Screen::new(&state, 1024, 768, &m, &mut fonts, &Default::default());
    let geom = *screen.window(id).unwrap();
    let max_lines = (geom.body.height() / m.line) as u32;
    assert_eq!(view.org, show::back_lines(&buffer.text, found, max_lines / 4), "a quarter of the way down");
    let frame = apex_ui::frame::Frame::new(
        buffer.text.rope(),
        view.org,
        geom.body,
        fonts.face(apex_ui::font::Face::Proportional),
        m.line,
        apex_core::exec::DEFAULT_TAB,
    );
    let (fx, fy) = frame.point_of(found).expect("the needle on the screen");
    wait_for("the pointer on the needle", || (pointer(&d) == (fx + 4, fy + m.line - 4)).then_some(()));

    // B2 on the column's New: the new window is placed as acme's coladd
    // places it, and the pointer goes just right of and below its box.
    let tag = screen.columns[0].tag;
    let (x, y) = (tag.x0 + 6, tag.y0 + m.line / 2);
    d.xdotool(&["mousemove", "--window", &window, &x.to_string(), &y.to_string(), "click", "2"]);
    let state = wait_for("a new window", || {
        let st = d.state();
        (st.layout.columns[0].windows.len() == 2).then_some(st)
    });
    let screen = Screen::new(&state, 1024, 768, &m, &mut fonts, &Default::default());
    let made = *screen.columns[0].windows.last().unwrap();
    assert_ne!(made.id, id);
    wait_for("the pointer in the new window", || {
        (pointer(&d) == (made.layout_box.x1 + 3, made.tag_line.y1 + 3)).then_some(())
    });
    let _ = std::io::Write::write_all(&mut std::io::stderr(), format!("reflexes: {}\n", png.display()).as_bytes());
}

/// acme's `-c`: a new session starts with that many columns, each made as
/// `Newcol` makes one (at three fifths of the last); a session that has
/// windows keeps its own.
#[test]
fn dash_c_gives_a_new_session_its_columns() {
    let Some(mut d) = desk("columns") else { return };
    sibling("apexd");
    let file = d.ns.join("f.txt");
    std::fs::write(&file, "f\n").unwrap();
    let dash = std::path::Path::new;
    d.start_ui(&[dash("-c"), dash("4"), &file]);
    let state = wait_for("four columns and the file's window", || {
        let st = d.state();
        (st.layout.columns.len() == 4 && !st.windows.is_empty()).then_some(st)
    });
    let xs: Vec<u32> = state.layout.columns.iter().map(|c| c.x.0).collect();
    // Each new column starts three fifths into the one before it.
    for i in 2..4 {
        let (a, b) = (xs[i - 1], xs[i]);
        let want = a + 3 * (apex_core::Frac::ONE.0 - a) / 5;
        assert!(b.abs_diff(want) <= 1, "column {i} at {b}, want {want}: {xs:?}");
    }
    // Once it has windows, a session keeps its columns (the UI sets them
    // before it shows its window).
    d.start_ui(&[dash("-c"), dash("1")]);
    assert_eq!(d.state().layout.columns.len(), 4);
}
