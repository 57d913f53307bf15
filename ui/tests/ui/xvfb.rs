//! End to end under Xvfb: `apex-ui` started with no daemon running (it
//! starts one), a click into a body and typing with xdotool, the text
//! read back through 9P, and a screenshot whose colours are where the
//! layout says. Each test picks a free display and namespace, and kills
//! everything it started, pass or fail.

use crate::support::{apex, namespace, sibling, wait_for};
use apex_core::State;
use apex_ui::app::WATCHING;
use apex_ui::font::Fonts;
use apex_ui::geom::{Metrics, Screen, WindowGeom};
use apex_ui::palette;
use apex_ui::rect::Rect;
use apex_ui::render::label_width;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

/// Says a test cannot run (past the harness's capture); fails under CI.
pub(crate) fn skipped(reason: &str) {
    assert!(std::env::var_os("CI").is_none(), "CI must run every test, but: {reason}");
    let _ = writeln!(std::io::stderr(), "SKIPPED: {reason}");
}

fn have(program: &str) -> bool {
    Command::new("sh").arg("-c").arg(format!("command -v {program}")).output().is_ok_and(|o| o.status.success())
}

/// Everything a test started, killed and removed on drop.
pub(crate) struct Desk {
    pub(crate) display: String,
    pub(crate) ns: PathBuf,
    xvfb: Child,
    uis: Vec<Child>,
}

impl Drop for Desk {
    fn drop(&mut self) {
        for (n, ui) in self.uis.iter_mut().enumerate() {
            let _ = ui.kill();
            let _ = ui.wait();
            if std::thread::panicking() {
                let log = std::fs::read_to_string(self.ns.join(format!("ui{n}.log"))).unwrap_or_default();
                let _ = writeln!(std::io::stderr(), "apex-ui {n} said:\n{log}");
            }
        }
        crate::support::stop_daemons_started_in(&self.ns);
        // SIGTERM, not SIGKILL: Xvfb removes its lock file and socket, so
        // the next server that picks this display finds none left over.
        // SAFETY: kill(2) with plain integers.
        unsafe { libc::kill(self.xvfb.id() as i32, libc::SIGTERM) };
        let _ = self.xvfb.wait();
        let _ = std::fs::remove_dir_all(&self.ns);
    }
}

pub(crate) fn desk(name: &str) -> Option<Desk> {
    for tool in ["Xvfb", "xdotool", "import", "xclip"] {
        if !have(tool) {
            skipped(&format!("no {tool} (scripts/test installs xvfb, xdotool, imagemagick and xclip)"));
            return None;
        }
    }
    // Xvfb picks a free display itself and writes its number once it
    // is ready (-displayfd): no two tests can race for one. -noreset:
    // an X server resets when its last client leaves, and refuses
    // connections meanwhile (xdotool's come and go between the UI's).
    let mut xvfb = Command::new("Xvfb")
        .args(["-displayfd", "1", "-screen", "0", &format!("{SCREEN_W}x900x24"), "-nolisten", "tcp", "-noreset"])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("start Xvfb");
    let out = xvfb.stdout.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut line = String::new();
        let _ = std::io::BufRead::read_line(&mut std::io::BufReader::new(out), &mut line);
        let _ = tx.send(line);
    });
    let line = rx.recv_timeout(std::time::Duration::from_secs(30)).unwrap_or_default();
    let n: u32 = match line.trim().parse() {
        Ok(n) => n,
        Err(_) => {
            let _ = xvfb.kill();
            let _ = xvfb.wait();
            panic!("Xvfb did not say which display it took ({line:?})");
        }
    };
    let ns = namespace(name);
    let d = Desk { display: format!(":{n}"), ns, xvfb, uis: Vec::new() };
    // The server answers before anything is started on it.
    wait_for(&format!("Xvfb to answer on {}", d.display), || {
        let ok = Command::new("xdotool").arg("getdisplaygeometry").env("DISPLAY", &d.display).output();
        ok.is_ok_and(|o| o.status.success()).then_some(())
    });
    Some(d)
}

impl Desk {
    pub(crate) fn xdotool(&self, args: &[&str]) -> String {
        let out = Command::new("xdotool").args(args).env("DISPLAY", &self.display).output().expect("run xdotool");
        String::from_utf8_lossy(&out.stdout).to_string()
    }

    /// Starts `apex-ui` with `args` on this desk (the first starts the
    /// daemon); its window's X id, once it is mapped.
    pub(crate) fn start_ui(&mut self, args: &[&Path]) -> String {
        let args: Vec<&std::ffi::OsStr> = args.iter().map(|a| a.as_os_str()).collect();
        let ns = self.ns.clone();
        self.start_ui_with(&args, &[("NAMESPACE", ns.as_os_str())])
    }

    /// apex-ui with `args` and the environment `env` (its namespace
    /// directory among them) on this display; its X window's id once it
    /// shows.
    pub(crate) fn start_ui_with(&mut self, args: &[&std::ffi::OsStr], env: &[(&str, &std::ffi::OsStr)]) -> String {
        let n = self.uis.len();
        let before = self.xdotool(&["search", "--name", "^apex main$"]);
        let log = self.ns.join(format!("ui{n}.log"));
        let ui = Command::new(env!("CARGO_BIN_EXE_apex-ui"))
            .args(args)
            .env("DISPLAY", &self.display)
            .envs(env.iter().copied())
            // The daemon the first UI starts keeps its sessions here,
            // not in the user's state directory.
            .env("XDG_STATE_HOME", self.ns.join("state"))
            // The shells its terminals start read none of the user's
            // start-up files.
            .env("HOME", &self.ns)
            // The session's plumber reads apex's own basic rules.
            .env_remove("PLAN9")
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log).unwrap())
            .spawn()
            .expect("start apex-ui");
        self.uis.push(ui);
        // winit sets no _NET_WM_PID here: the new window is the one that
        // was not there before.
        wait_for(&format!("the apex-ui window ({})", log.display()), || {
            let found = self.xdotool(&["search", "--name", "^apex main$"]);
            found.lines().find(|w| !before.lines().any(|b| b == *w)).map(str::to_string)
        })
    }

    /// The session's state as the daemon has it (its snapshot).
    pub(crate) fn state(&self) -> State {
        let snapshot =
            Command::new(sibling("apex")).args(["read", "main/snapshot"]).env("NAMESPACE", &self.ns).output().unwrap();
        State::from_snapshot(&snapshot.stdout).expect("a snapshot")
    }

    /// The acme number of the window showing `file` (once there is one),
    /// and where a 1024x768 apex-ui lays it out, from the session's own
    /// state and the UI's font.
    pub(crate) fn window_of(&self, file: &Path) -> (u32, WindowGeom, Metrics, Screen) {
        let name = file.display().to_string();
        let windows = wait_for("the file's window", || {
            let w = self.apex(&["read", "main/meta/windows"]);
            w.contains(&name).then_some(w)
        });
        let line = windows.lines().find(|l| l.ends_with(&name)).unwrap();
        let number: u32 = line.split(' ').next().unwrap().parse().unwrap();
        let state = self.state();
        let mut fonts = Fonts::new(1.0);
        let m = Metrics::new(fonts.line_height(), 1.0);
        let screen = Screen::new(&state, 1024, 768, &m, &mut fonts, &Default::default());
        let id = state.layout.window_numbered(apex_core::AcmeNumber(number)).unwrap();
        (number, *screen.window(id).unwrap(), m, screen)
    }

    /// Runs `apex` against this desk's namespace.
    pub(crate) fn apex(&self, args: &[&str]) -> String {
        apex(&self.ns, args)
    }

    /// The root window as 8-bit RGB, and a PNG of it for people.
    pub(crate) fn screenshot(&self, png: &Path) -> Vec<u8> {
        let raw = self.ns.join("shot.rgb");
        for (fmt, out) in [("rgb", raw.as_path()), ("png", png)] {
            let target = format!("{fmt}:{}", out.display());
            let ok = Command::new("import")
                .args(["-window", "root", "-depth", "8", &target])
                .env("DISPLAY", &self.display)
                .status()
                .expect("run import");
            assert!(ok.success(), "import {target}");
        }
        std::fs::read(raw).unwrap()
    }
}

/// The display's width: room for two 1024-pixel UIs side by side.
pub(crate) const SCREEN_W: i32 = 2080;

pub(crate) fn pixel(rgb: &[u8], x: i32, y: i32) -> u32 {
    let i = ((y * SCREEN_W + x) * 3) as usize;
    (u32::from(rgb[i]) << 16) | (u32::from(rgb[i + 1]) << 8) | u32::from(rgb[i + 2])
}

#[test]
fn apex_ui_starts_the_daemon_takes_typing_and_shows_acme_s_colours() {
    let Some(mut d) = desk("type") else { return };
    sibling("apexd");
    let file = d.ns.join("notes.txt");
    std::fs::write(&file, "first line\nsecond line\n").unwrap();
    assert!(!d.ns.join("apex").exists(), "no daemon before the UI");
    let window = d.start_ui(&[&file]);
    assert!(d.ns.join("apex").exists(), "apex-ui started apexd");
    // The file is in a window, named so; where its body is.
    let (number, geom, m, screen) = d.window_of(&file);

    // Click at the end of the first line and type.
    d.xdotool(&["windowfocus", "--sync", &window]);
    let (x, y) = (geom.body.x1 - 4, geom.body.y0 + m.line / 2);
    d.xdotool(&["mousemove", "--window", &window, &x.to_string(), &y.to_string(), "click", "1"]);
    d.xdotool(&["type", "--delay", "20", " typed"]);
    let body = wait_for("the typing to reach the daemon", || {
        let b = d.apex(&["read", &format!("main/acme/{number}/body")]);
        b.contains("typed").then_some(b)
    });
    assert_eq!(body, "first line typed\nsecond line\n");
    assert!(d.apex(&["read", &format!("main/acme/{number}/tag")]).contains(" Put "), "dirty: the tag offers Put");

    // acme's colours where the layout says, in a real screenshot.
    // Under target/, not /tmp: kept to be looked at, gone with `cargo clean`.
    let png = std::path::Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("apex-ui-screenshot-{}.png", std::process::id()));
    let rgb = wait_for("the dirty box to be drawn", || {
        let rgb = d.screenshot(&png);
        let (bx, by) = ((geom.layout_box.x0 + geom.layout_box.x1) / 2, (geom.layout_box.y0 + geom.layout_box.y1) / 2);
        (pixel(&rgb, bx, by) == palette::DIRTY_BOX).then_some(rgb)
    });
    assert_eq!(pixel(&rgb, geom.tag.x1 - 2, geom.tag.y0 + 1), palette::TAG, "the tag's colour");
    assert_eq!(pixel(&rgb, geom.body.x1 - 2, geom.body.y1 - 2), palette::BODY, "the body's colour");
    assert_eq!(pixel(&rgb, screen.row_tag.x1 - 2, 1), palette::TAG, "the row tag");
    let _ = writeln!(std::io::stderr(), "apex-ui screenshot: {}", png.display());

    // B2 on Put in the tag writes the file through the daemon, exactly
    // what was typed, and the window is clean again.
    let tag = d.apex(&["read", &format!("main/acme/{number}/tag")]);
    let at = tag.find(" Put ").unwrap() + 1;
    let mut fonts = Fonts::new(1.0);
    let before: String = tag[..at].to_string();
    let px: i32 = before.chars().map(|c| fonts.proportional.advance(c) as i32).sum();
    let (x, y) = (geom.tag.x0 + px + 4, geom.tag.y0 + m.line / 2);
    d.xdotool(&["mousemove", "--window", &window, &x.to_string(), &y.to_string(), "click", "2"]);
    wait_for("Put to write the file", || {
        (std::fs::read_to_string(&file).ok()? == "first line typed\nsecond line\n").then_some(())
    });
    wait_for("the tag to drop Put", || {
        (!d.apex(&["read", &format!("main/acme/{number}/tag")]).contains(" Put ")).then_some(())
    });

    // The clipboard: a double-click selects the word typed, ^C (typed
    // with the pointer over the body, where typing goes) snarfs it to
    // the session and the display's clipboard; text another program puts
    // on the clipboard is what ^V pastes.
    let px: i32 = "first line ty".chars().map(|c| fonts.proportional.advance(c) as i32).sum();
    let (x, y) = (geom.body.x0 + px, geom.body.y0 + m.line / 2);
    d.xdotool(&["mousemove", "--window", &window, &x.to_string(), &y.to_string(), "click", "--repeat", "2", "1"]);
    d.xdotool(&["key", "ctrl+c"]);
    let clip = wait_for("the clipboard to hold the snarf", || {
        let out =
            Command::new("xclip").args(["-o", "-selection", "clipboard"]).env("DISPLAY", &d.display).output().ok()?;
        let text = String::from_utf8_lossy(&out.stdout).to_string();
        (text == "typed").then_some(text)
    });
    assert_eq!(clip, "typed");
    let mut outside = Command::new("xclip")
        .args(["-quiet", "-i", "-selection", "clipboard"])
        .env("DISPLAY", &d.display)
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("run xclip");
    outside.stdin.take().unwrap().write_all(b"outside").unwrap();
    std::thread::sleep(Duration::from_millis(300));
    d.xdotool(&["key", "ctrl+v"]);
    let body = wait_for("the paste to reach the daemon", || {
        let b = d.apex(&["read", &format!("main/acme/{number}/body")]);
        b.contains("outside").then_some(b)
    });
    let _ = outside.kill();
    let _ = outside.wait();
    assert_eq!(body, "first line outside\nsecond line\n", "the clipboard's text replaced the selection");

    // An Edit typed in the tag and swept with B2 runs on a thread of its
    // own; the window, woken when it ends, carries it out.
    let (x, y) = (geom.tag.x1 - 4, geom.tag.y0 + m.line / 2);
    d.xdotool(&["mousemove", "--window", &window, &x.to_string(), &y.to_string(), "click", "1"]);
    d.xdotool(&["type", "--delay", "20", " Edit ,s/line/LINE/g"]);
    let tag = wait_for("the command in the tag", || {
        let t = d.apex(&["read", &format!("main/acme/{number}/tag")]);
        t.ends_with("Edit ,s/line/LINE/g").then_some(t)
    });
    let at = tag.rfind("Edit").unwrap();
    let mut width = |s: &str| -> i32 { s.chars().map(|c| fonts.proportional.advance(c) as i32).sum() };
    // From the middle of the blank before it (where a sweep starts does
    // not cut its first letter) to past its end.
    let (x0, x1) = (geom.tag.x0 + width(&tag[..at - 1]) + width(" ") / 2 + 4, geom.tag.x0 + width(&tag) + 6);
    d.xdotool(&["mousemove", "--window", &window, &x0.to_string(), &y.to_string(), "mousedown", "2"]);
    d.xdotool(&["mousemove", "--window", &window, &x1.to_string(), &y.to_string(), "mouseup", "2"]);
    wait_for("the Edit to reach the daemon", || {
        let b = d.apex(&["read", &format!("main/acme/{number}/body")]);
        (b == "first LINE outside\nsecond LINE\n").then_some(())
    });
}

/// The `layout` shard's holder, from `meta/leases`.
fn layout_holder(d: &Desk) -> String {
    let leases = d.apex(&["read", "main/meta/leases"]);
    let line = leases.lines().find(|l| l.starts_with("layout ")).unwrap_or_else(|| panic!("{leases}"));
    line.split(' ').nth(1).unwrap().to_string()
}

/// The pixels of `r` in a screenshot, `dx` to the right of where the
/// layout puts it (the second UI's window sits there).
pub(crate) fn crop(rgb: &[u8], r: Rect, dx: i32) -> Vec<u32> {
    (r.y0..r.y1).flat_map(|y| (r.x0..r.x1).map(move |x| (x, y))).map(|(x, y)| pixel(rgb, x + dx, y)).collect()
}

/// Where the second UI's window is moved to.
pub(crate) const SECOND_X: i32 = 1050;

#[test]
fn two_apex_uis_share_a_session_the_watching_one_follows_and_lead_and_a_box_drag_work() {
    let Some(mut d) = desk("two") else { return };
    sibling("apexd");
    let file = d.ns.join("notes.txt");
    std::fs::write(&file, "alpha\nbeta\n").unwrap();
    let first = d.start_ui(&[&file]);
    let name = file.display().to_string();
    wait_for("the file's window", || d.apex(&["read", "main/meta/windows"]).contains(&name).then_some(()));
    let leader = layout_holder(&d);

    // A second apex-ui asks for the leases and gets them; the first
    // watches and says so at the right of its row tag.
    let second = d.start_ui(&[]);
    wait_for("the leases to move to the second UI", || (layout_holder(&d) != leader).then_some(()));
    d.xdotool(&["windowmove", "--sync", &second, &SECOND_X.to_string(), "0"]);
    let state = d.state();
    let mut fonts = Fonts::new(1.0);
    let m = Metrics::new(fonts.line_height(), 1.0);
    let screen = Screen::new(&state, 1024, 768, &m, &mut fonts, &Default::default());
    let (id, _) = apex_core::look::window_named(&state, &name).expect("the file's window");
    let geom = *screen.window(id).unwrap();
    let row = screen.row_tag;
    // Inside the row tag's line, clear of its border.
    let label = Rect::new(row.x1 - label_width(&mut fonts, WATCHING), row.y0 + 2, row.x1 - 2, row.y0 + m.line - 2);
    let has_text = |rgb: &[u8], r: Rect, dx: i32| crop(rgb, r, dx).iter().filter(|p| **p != palette::TAG).count() > 20;
    let png = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("apex-ui-two-{}.png", std::process::id()));
    wait_for("the first UI to show `watching`", || {
        let rgb = d.screenshot(&png);
        (has_text(&rgb, label, 0) && !has_text(&rgb, label, SECOND_X)).then_some(())
    });

    // Typing in the second appears in the first, drawn as the second
    // draws it.
    let line = Rect::new(geom.body.x0, geom.body.y0, geom.body.x1, geom.body.y0 + m.line);
    let typed = Rect::new(line.x0, line.y0, line.x0 + label_width(&mut fonts, "alpha tw"), line.y1);
    let before = crop(&d.screenshot(&png), typed, 0);
    d.xdotool(&["windowfocus", "--sync", &second]);
    let (x, y) = (geom.body.x1 - 4, geom.body.y0 + m.line / 2);
    d.xdotool(&["mousemove", "--window", &second, &x.to_string(), &y.to_string(), "click", "1"]);
    d.xdotool(&["type", "--delay", "20", " two"]);
    let body = format!("main/acme/{}/body", state.layout.numbers[&id].0);
    wait_for("the second UI's typing to reach the daemon", || {
        (d.apex(&["read", &body]) == "alpha two\nbeta\n").then_some(())
    });
    wait_for("the first UI to draw it as the second does", || {
        let rgb = d.screenshot(&png);
        let shown = crop(&rgb, typed, 0);
        (shown != before && shown == crop(&rgb, typed, SECOND_X)).then_some(())
    });

    // Typing in the watching UI goes to the leader as proposals.
    d.xdotool(&["windowfocus", "--sync", &first]);
    let y = geom.body.y0 + m.line + m.line / 2;
    d.xdotool(&["mousemove", "--window", &first, &x.to_string(), &y.to_string(), "click", "1"]);
    d.xdotool(&["type", "--delay", "20", " one"]);
    wait_for("the watching UI's typing to land", || {
        (d.apex(&["read", &body]) == "alpha two\nbeta one\n").then_some(())
    });
    assert_ne!(layout_holder(&d), leader, "typing in a watching UI does not take the leases");

    // B2 on `Lead` takes them back; now the second watches.
    let lead = label_width(&mut fonts, " Lead ");
    let (x, y) = (row.x1 - lead / 2, row.y0 + m.line / 2);
    d.xdotool(&["mousemove", "--window", &first, &x.to_string(), &y.to_string(), "click", "2"]);
    wait_for("the leases to come back to the first UI", || (layout_holder(&d) == leader).then_some(()));
    wait_for("the second UI to show `watching`", || {
        let rgb = d.screenshot(&png);
        (!has_text(&rgb, label, 0) && has_text(&rgb, label, SECOND_X)).then_some(())
    });

    // Dragging the window's layout box to the other column moves it
    // there, in the session's layout and its acme/index.
    let from = state.layout.columns.iter().position(|c| c.windows.iter().any(|p| p.window == id)).unwrap();
    let to = screen.columns.iter().position(|c| c.id != state.layout.columns[from].id).expect("a second column");
    let target = screen.columns[to].rect;
    let b = geom.layout_box;
    let (bx, by) = ((b.x0 + b.x1) / 2, (b.y0 + b.y1) / 2);
    let (tx, ty) = ((target.x0 + target.x1) / 2, (target.y0 + target.y1) / 2);
    d.xdotool(&["mousemove", "--window", &first, &bx.to_string(), &by.to_string(), "mousedown", "1"]);
    d.xdotool(&["mousemove", "--window", &first, &((bx + tx) / 2).to_string(), &((by + ty) / 2).to_string()]);
    d.xdotool(&["mousemove", "--window", &first, &tx.to_string(), &ty.to_string(), "mouseup", "1"]);
    let moved = wait_for("the window to move to the other column", || {
        let st = d.state();
        let column = st.layout.columns.iter().find(|c| c.windows.iter().any(|p| p.window == id))?;
        (column.id == screen.columns[to].id).then_some(st)
    });
    let number = moved.layout.numbers[&id].0;
    let index = d.apex(&["read", "main/acme/index"]);
    assert!(index.lines().any(|l| l.split_whitespace().next() == Some(&number.to_string())), "{index}");
    assert_eq!(d.apex(&["read", &body]), "alpha two\nbeta one\n", "the drag kept the text");
    wait_for("the second UI to draw the move too", || {
        let rgb = d.screenshot(&png);
        let b = screen.columns[to].rect;
        let inside = Rect::new(b.x0 + 2, b.y0 + 2 * m.line + 2, b.x1 - 2, b.y0 + 3 * m.line);
        (crop(&rgb, inside, SECOND_X) == crop(&rgb, inside, 0)).then_some(())
    });
    let _ = writeln!(std::io::stderr(), "two apex-uis: {}", png.display());
}
