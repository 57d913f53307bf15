//! Terminal windows under Xvfb: a shell in a window of its own, drawn in
//! the fixed-width face; keys typed with xdotool reach it (read back
//! through `terms/N/screen`), SGR colours show on screen in the palette
//! made for acme's body, ^C interrupts, `vi` takes the alternate screen
//! and gives it back, and the window's size is the pty's (`stty size`,
//! and again after the X window is resized); the wheel scrolls back,
//! button 1 sweeps a command in the scrollback and button 2 runs it.

use crate::support::wait_for;
use crate::xvfb::{desk, pixel, Desk};
use apex_core::State;
use apex_ui::font::Fonts;
use apex_ui::geom::{Metrics, Screen};
use apex_ui::rect::Rect;
use apex_ui::termdraw;
use std::io::Write;

/// Writes `text` to the session's `ctl`.
fn ctl(d: &Desk, text: &str) {
    crate::support::apex_write(&d.ns, "main/ctl", text);
}

/// The body rectangle of the window showing terminal `term`, laid out
/// at `w`×`h` as the UI lays it out, and the terminal's size there.
fn body_of(state: &State, term: u64, w: i32, h: i32) -> (Rect, (u16, u16)) {
    let mut fonts = Fonts::new(1.0);
    let m = Metrics::new(fonts.line_height(), 1.0);
    let screen = Screen::new(state, w, h, &m, &mut fonts, &Default::default());
    let (id, _) = state.windows.iter().find(|(_, x)| x.term == Some(apex_core::TermId(term))).expect("its window");
    let body = screen.window(*id).expect("on the screen").body;
    (body, termdraw::fits(&mut fonts, body))
}

#[test]
fn a_shell_in_a_terminal_window_takes_keys_shows_colours_and_has_the_window_s_size() {
    let Some(mut d) = desk("terminal") else { return };
    let window = d.start_ui(&[]);
    ctl(&d, &format!("term -d {} sh\n", d.ns.display()));
    let term: u64 = wait_for("the terminal", || {
        d.apex(&["read", "main/terms/index"]).split_whitespace().next().and_then(|n| n.parse().ok())
    });
    let screen_of = |d: &Desk| d.apex(&["read", &format!("main/terms/{term}/screen")]);
    // The window the daemon made for it, laid out as the UI lays it out.
    let state = wait_for("its window", || {
        let st = d.state();
        st.windows.values().any(|w| w.term == Some(apex_core::TermId(term))).then_some(st)
    });
    let (body, size) = body_of(&state, term, 1024, 768);
    // The UI gave the terminal its window's size.
    wait_for("the pty to take the window's size", || {
        let ctl = d.apex(&["read", &format!("main/terms/{term}/ctl")]);
        ctl.contains(&format!("size {}x{}", size.0, size.1)).then_some(())
    });

    // Typing with the pointer over it goes to the shell.
    d.xdotool(&["windowfocus", "--sync", &window]);
    let (x, y) = (body.x0 + 20, body.y0 + 20);
    d.xdotool(&["mousemove", "--window", &window, &x.to_string(), &y.to_string()]);
    d.xdotool(&["type", "--delay", "10", "printf '\\033[31mRED\\033[0m %s\\n' done; stty size"]);
    d.xdotool(&["key", "Return"]);
    // Both commands' output: printf's, then stty's (a line of two numbers).
    let shown = wait_for("the shell to run what was typed", || {
        let s = screen_of(&d);
        let lines: Vec<&str> = s.lines().collect();
        let at = lines.iter().position(|l| l.starts_with("RED done"))?;
        let sized = lines[at + 1..].iter().any(|l| {
            let w: Vec<&str> = l.split_whitespace().collect();
            w.len() == 2 && w.iter().all(|n| n.parse::<u16>().is_ok())
        });
        sized.then_some(s)
    });
    assert!(shown.contains(&format!("{} {}", size.1, size.0)), "stty size is the window's: {shown}");

    // RED in the palette's red, where the screen says.
    let png =
        std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("apex-ui-terminal-{}.png", std::process::id()));
    // Glyphs are anti-aliased: a pixel is the palette's red blended with
    // the body; its hue says which.
    let red = termdraw::ANSI_ON_BODY[1];
    let reddish = |p: u32| {
        let (r, g, b) = ((p >> 16) & 0xff, (p >> 8) & 0xff, p & 0xff);
        r > g + 60 && r > b + 60
    };
    assert!(reddish(red));
    wait_for("the red text on screen", || {
        let rgb = d.screenshot(&png);
        let found = (body.y0..body.y1)
            .flat_map(|py| (body.x0..body.x1).map(move |px| (px, py)))
            .filter(|(px, py)| reddish(pixel(&rgb, *px, *py)))
            .count();
        (found > 20).then_some(())
    });
    let _ = writeln!(std::io::stderr(), "terminal screenshot: {}", png.display());

    // Keys as a terminal sends them: ^U erases the line, ^C interrupts.
    d.xdotool(&["type", "--delay", "10", "sleep 30"]);
    d.xdotool(&["key", "Return"]);
    d.xdotool(&["key", "ctrl+c"]);
    d.xdotool(&["type", "--delay", "10", "echo after-$?"]);
    d.xdotool(&["key", "Return"]);
    wait_for("^C to interrupt sleep", || screen_of(&d).lines().any(|l| l.starts_with("after-130")).then_some(()));

    // A full-screen program takes the alternate screen and gives it back.
    let alt = |d: &Desk| {
        d.state().terms.get(&apex_core::TermId(term)).is_some_and(|t| t.modes & apex_core::grid::mode::ALT_SCREEN != 0)
    };
    d.xdotool(&["type", "--delay", "10", "vi"]);
    d.xdotool(&["key", "Return"]);
    wait_for("vi on the alternate screen", || {
        (alt(&d) && screen_of(&d).lines().any(|l| l.trim_end() == "~")).then_some(())
    });
    d.xdotool(&["type", "--delay", "10", ":q"]);
    d.xdotool(&["key", "Return"]);
    wait_for("the shell's screen back", || (!alt(&d) && screen_of(&d).contains("after-130")).then_some(()));

    // The X window resized: the terminal's size follows.
    d.xdotool(&["windowsize", &window, "800", "600"]);
    let (_, small) = body_of(&d.state(), term, 800, 600);
    assert_ne!(small, size);
    wait_for("the pty to take the new size", || {
        let ctl = d.apex(&["read", &format!("main/terms/{term}/ctl")]);
        ctl.contains(&format!("size {}x{}", small.0, small.1)).then_some(())
    });
    d.xdotool(&["type", "--delay", "10", "stty size"]);
    d.xdotool(&["key", "Return"]);
    wait_for("stty size to say it", || screen_of(&d).contains(&format!("{} {}", small.1, small.0)).then_some(()));

    // The wheel scrolls back to a command in the scrollback; button 1
    // sweeps it and button 2 on the selection runs it, where the shell is.
    d.xdotool(&["type", "--delay", "10", "echo 'touch b2-made'; seq 1 100"]);
    d.xdotool(&["key", "Return"]);
    let rows: Vec<String> = wait_for("seq to end at a prompt", || {
        let st = d.state();
        let t = st.terms.get(&apex_core::TermId(term))?;
        let rows: Vec<String> =
            t.scrollback.iter().map(|r| r.text.clone()).chain(t.grid.iter().map(|r| r.text.clone())).collect();
        let last = rows.iter().rev().find(|l| !l.trim().is_empty())?;
        (rows.iter().any(|l| l == "100") && last.trim_end().ends_with(['$', '#'])).then_some(rows)
    });
    let at = rows.iter().rposition(|l| l == "touch b2-made").expect("the command's line");
    let (body, _) = body_of(&d.state(), term, 800, 600);
    let mut fonts = Fonts::new(1.0);
    let (line, cell) = (fonts.line_height() as i32, termdraw::cell_width(&mut fonts));
    let shown = (body.height() / line) as usize;
    let bottom = rows.len() - shown;
    assert!(at < bottom, "the command scrolled off: row {at} of {}", rows.len());
    // Up to the oldest row (a notch scrolls a few rows; more notches
    // than needed stop there).
    let notches = bottom.div_ceil(3) + 5;
    assert!(at < shown, "row {at} shows from the top");
    let (mx, my) = (body.x0 + body.width() / 2, body.y0 + body.height() / 2);
    d.xdotool(&["mousemove", "--window", &window, &mx.to_string(), &my.to_string()]);
    for _ in 0..notches {
        d.xdotool(&["click", "4"]);
    }
    let y = (body.y0 + at as i32 * line + line / 2).to_string();
    let (x0, x1) = (body.x0 + cell / 2, body.x0 + 13 * cell + cell / 2);
    d.xdotool(&["mousemove", "--window", &window, &x0.to_string(), &y]);
    d.xdotool(&["mousedown", "1"]);
    d.xdotool(&["mousemove", "--window", &window, &x1.to_string(), &y]);
    d.xdotool(&["mouseup", "1"]);
    d.xdotool(&["mousemove", "--window", &window, &(x0 + 3 * cell).to_string(), &y]);
    d.xdotool(&["click", "2"]);
    let made = d.ns.join("b2-made");
    wait_for("button 2 to run the swept command", || made.exists().then_some(()));
}

/// Under Xvfb, a second apex-ui on the session leads and the first
/// watches: both draw the terminal's window the same, colours and all.
#[test]
fn a_watching_ui_draws_the_terminal_as_the_leading_one_does() {
    let Some(mut d) = desk("terminal-two") else { return };
    d.start_ui(&[]);
    ctl(&d, &format!("term -d {} sh\n", d.ns.display()));
    let term: u64 = wait_for("the terminal", || {
        d.apex(&["read", "main/terms/index"]).split_whitespace().next().and_then(|n| n.parse().ok())
    });
    let state = wait_for("its window", || {
        let st = d.state();
        st.windows.values().any(|w| w.term == Some(apex_core::TermId(term))).then_some(st)
    });
    let (body, _) = body_of(&state, term, 1024, 768);
    let second = d.start_ui(&[]);
    d.xdotool(&["windowmove", "--sync", &second, &crate::xvfb::SECOND_X.to_string(), "0"]);
    let cons = format!("main/terms/{term}/cons");
    crate::support::apex_write(
        &d.ns,
        &cons,
        "printf '\\033[32mgreen\\033[0m and \\033[1;34mblue\\033[0m %s\\n' shared\n",
    );
    let png = std::path::Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("apex-ui-terminal-two-{}.png", std::process::id()));
    let green = |p: u32| {
        let (r, g, b) = ((p >> 16) & 0xff, (p >> 8) & 0xff, p & 0xff);
        g > r + 40 && g > b + 40
    };
    wait_for("both UIs to draw the terminal alike, in colour", || {
        let rgb = d.screenshot(&png);
        let (mine, theirs) = (crate::xvfb::crop(&rgb, body, 0), crate::xvfb::crop(&rgb, body, crate::xvfb::SECOND_X));
        (mine == theirs && mine.iter().filter(|p| green(**p)).count() > 10).then_some(())
    });
}
