//! End to end under Xvfb: `apex-ui` started with no daemon running (it
//! starts one), a click into a body and typing with xdotool, the text
//! read back through 9P, and a screenshot whose colours are where the
//! layout says. Each test picks a free display and namespace, and kills
//! everything it started, pass or fail.

use crate::support::{apex, namespace, sibling, wait_for};
use apex_core::State;
use apex_ui::font::Fonts;
use apex_ui::geom::{Metrics, Screen};
use apex_ui::palette;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

/// Says a test cannot run (past the harness's capture); fails under CI.
fn skipped(reason: &str) {
    assert!(std::env::var_os("CI").is_none(), "CI must run every test, but: {reason}");
    let _ = writeln!(std::io::stderr(), "SKIPPED: {reason}");
}

fn have(program: &str) -> bool {
    Command::new("sh").arg("-c").arg(format!("command -v {program}")).output().is_ok_and(|o| o.status.success())
}

/// Everything a test started, killed and removed on drop.
struct Desk {
    display: String,
    ns: PathBuf,
    xvfb: Child,
    ui: Option<Child>,
}

impl Drop for Desk {
    fn drop(&mut self) {
        if let Some(mut ui) = self.ui.take() {
            let _ = ui.kill();
            let _ = ui.wait();
        }
        // The daemon apex-ui started runs in a session of its own: find
        // it by the namespace in its environment.
        let mark = format!("NAMESPACE={}", self.ns.display());
        for entry in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
            let Ok(pid) = entry.file_name().to_string_lossy().parse::<i32>() else { continue };
            let env = std::fs::read(entry.path().join("environ")).unwrap_or_default();
            let cmd = std::fs::read(entry.path().join("cmdline")).unwrap_or_default();
            let ours = env.split(|b| *b == 0).any(|v| v == mark.as_bytes());
            if ours && String::from_utf8_lossy(&cmd).contains("apexd") {
                // SAFETY: kill(2) with plain integers.
                unsafe { libc::kill(pid, libc::SIGTERM) };
            }
        }
        let _ = self.xvfb.kill();
        let _ = self.xvfb.wait();
        let _ = std::fs::remove_dir_all(&self.ns);
    }
}

fn desk(name: &str) -> Option<Desk> {
    for tool in ["Xvfb", "xdotool", "import", "xclip"] {
        if !have(tool) {
            skipped(&format!("no {tool} (scripts/test installs xvfb, xdotool, imagemagick and xclip)"));
            return None;
        }
    }
    // Xvfb picks a free display itself and writes its number once it
    // is ready (-displayfd): no two tests can race for one.
    let mut xvfb = Command::new("Xvfb")
        .args(["-displayfd", "1", "-screen", "0", "1280x900x24", "-nolisten", "tcp"])
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
    Some(Desk { display: format!(":{n}"), ns, xvfb, ui: None })
}

impl Desk {
    fn xdotool(&self, args: &[&str]) -> String {
        let out = Command::new("xdotool").args(args).env("DISPLAY", &self.display).output().expect("run xdotool");
        String::from_utf8_lossy(&out.stdout).to_string()
    }

    /// Runs `apex` against this desk's namespace.
    fn apex(&self, args: &[&str]) -> String {
        apex(&self.ns, args)
    }

    /// The root window as 8-bit RGB, and a PNG of it for people.
    fn screenshot(&self, png: &Path) -> Vec<u8> {
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

fn pixel(rgb: &[u8], x: i32, y: i32) -> u32 {
    let i = ((y * 1280 + x) * 3) as usize;
    (u32::from(rgb[i]) << 16) | (u32::from(rgb[i + 1]) << 8) | u32::from(rgb[i + 2])
}

#[test]
fn apex_ui_starts_the_daemon_takes_typing_and_shows_acme_s_colours() {
    let Some(mut d) = desk("type") else { return };
    sibling("apexd");
    let file = d.ns.join("notes.txt");
    std::fs::write(&file, "first line\nsecond line\n").unwrap();
    assert!(!d.ns.join("apex").exists(), "no daemon before the UI");
    let ui = Command::new(env!("CARGO_BIN_EXE_apex-ui"))
        .arg(&file)
        .env("DISPLAY", &d.display)
        .env("NAMESPACE", &d.ns)
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(d.ns.join("ui.log")).unwrap())
        .spawn()
        .expect("start apex-ui");
    d.ui = Some(ui);
    let log = d.ns.join("ui.log");
    let window = wait_for(&format!("the apex-ui window ({})", log.display()), || {
        let found = d.xdotool(&["search", "--name", "^apex main$"]);
        found.lines().next().map(str::to_string)
    });
    assert!(d.ns.join("apex").exists(), "apex-ui started apexd");
    // The file is in a window, named so.
    let name = file.display().to_string();
    let windows = wait_for("the file's window", || {
        let w = d.apex(&["read", "main/meta/windows"]);
        w.contains(&name).then_some(w)
    });
    let number: u32 = windows.lines().find(|l| l.ends_with(&name)).unwrap().split(' ').next().unwrap().parse().unwrap();

    // Where the body is, from the session's own state and the UI's font.
    let snapshot =
        Command::new(sibling("apex")).args(["read", "main/snapshot"]).env("NAMESPACE", &d.ns).output().unwrap();
    let state = State::from_snapshot(&snapshot.stdout).expect("a snapshot");
    let mut fonts = Fonts::new(1.0);
    let m = Metrics::new(fonts.line_height(), 1.0);
    let screen = Screen::new(&state, 1024, 768, &m, &mut fonts, &Default::default());
    let id = state.layout.window_numbered(apex_core::AcmeNumber(number)).unwrap();
    let geom = *screen.window(id).unwrap();

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
    let png = std::env::temp_dir().join(format!("apex-ui-screenshot-{}.png", std::process::id()));
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

    // The clipboard: Esc selects what was typed, ^C snarfs it to the
    // session and the display's clipboard; text another program puts on
    // the clipboard is what ^V pastes.
    d.xdotool(&["key", "Escape", "ctrl+c"]);
    let clip = wait_for("the clipboard to hold the snarf", || {
        let out =
            Command::new("xclip").args(["-o", "-selection", "clipboard"]).env("DISPLAY", &d.display).output().ok()?;
        let text = String::from_utf8_lossy(&out.stdout).to_string();
        (text == " typed").then_some(text)
    });
    assert_eq!(clip, " typed");
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
    assert_eq!(body, "first lineoutside\nsecond line\n", "the clipboard's text replaced the selection");
}
