//! apex-ui on another machine's session: `apex-ui -r ssh!USER@localhost!PORT`
//! through a real sshd, under Xvfb. The UI imports the remote's sessions
//! (apex import, in the background) and attaches through the import; what
//! it types is the remote daemon's; and when ssh drops and comes back,
//! what was typed meanwhile is not lost.

use crate::support::{sibling, wait_for};
use crate::xvfb::desk;
use apex_tests::sshd::Sshd;
use std::ffi::OsStr;
use std::process::Command;

/// `apex` on the remote daemon's own socket (not through the import).
fn remote_apex(sshd: &Sshd, args: &[&str]) -> String {
    let socket = format!("unix!{}", sshd.remote_ns().join("apex").display());
    let out = Command::new(sibling("apex")).args(["-a", &socket]).args(args).output().unwrap();
    String::from_utf8_lossy(&out.stdout).to_string()
}

#[test]
fn apex_ui_edits_a_session_on_another_machine_over_ssh() {
    let Some(mut d) = desk("remote") else { return };
    let apexd = sibling("apexd");
    sibling("apex");
    // Another machine, as far as /machine tells: the UI reads no file
    // itself, and completes relative names where the remote daemon is.
    let mut sshd = Sshd::start_elsewhere("ui", apexd.parent());
    let file = d.ns.join("far.txt");
    std::fs::write(&file, "far away\n").unwrap();
    let (addr, ssh, ns) = (sshd.address(), sshd.ssh_command(), sshd.local_ns());
    let window = d.start_ui_with(
        // Click to type: the notice of the drop opens +Errors under the
        // pointer, and typing stays in the text clicked.
        &[OsStr::new("-b"), OsStr::new("-r"), OsStr::new(&addr), file.as_os_str(), OsStr::new("rel.txt")],
        &[("NAMESPACE", ns.as_os_str()), ("APEX_SSH", OsStr::new(&ssh))],
    );
    assert!(sshd.local_ns().join("apex.localhost").exists(), "the UI imported the remote's sessions");
    // The UI is attached to the remote daemon, and the file's window is
    // there.
    let attachments = wait_for("the UI's attachment on the remote", || {
        let a = remote_apex(&sshd, &["read", "main/meta/attachments"]);
        a.contains("apex-ui").then_some(a)
    });
    assert!(attachments.contains("ui"), "{attachments}");
    let path = file.display().to_string();
    let number = wait_for("the file's window on the remote", || {
        let w = remote_apex(&sshd, &["read", "main/meta/windows"]);
        w.lines().find(|l| l.ends_with(&path)).and_then(|l| l.split(' ').next()).map(str::to_string)
    });

    // A relative name is the remote's: completed with the remote
    // daemon's directory (its /machine says it), not this UI's.
    let machine = remote_apex(&sshd, &["read", "machine"]);
    let far = apex_sys::machine::Described::parse(&machine).cwd.expect("the remote says its directory");
    let here = std::env::current_dir().unwrap().display().to_string();
    assert_ne!(far, here, "the two directories differ, or this proves nothing");
    let relative = format!("{}/rel.txt", far.trim_end_matches('/'));
    wait_for("the relative name's window on the remote", || {
        let w = remote_apex(&sshd, &["read", "main/meta/windows"]);
        w.lines().any(|l| l.ends_with(&format!(" {relative}"))).then_some(())
    });
    let windows = remote_apex(&sshd, &["read", "main/meta/windows"]);
    assert!(!windows.contains(&format!("{here}/rel.txt")), "{windows}");

    // Typing at the end of the body reaches the remote daemon.
    let (_, geom, m, _) = {
        // The window's place on screen, from the remote's state.
        let snapshot = Command::new(sibling("apex"))
            .args(["-a", &format!("unix!{}", sshd.remote_ns().join("apex").display()), "read", "main/snapshot"])
            .output()
            .unwrap();
        let state = apex_core::State::from_snapshot(&snapshot.stdout).unwrap();
        let mut fonts = apex_ui::font::Fonts::new(1.0);
        let m = apex_ui::geom::Metrics::new(fonts.line_height(), 1.0);
        let screen = apex_ui::geom::Screen::new(&state, 1024, 768, &m, &mut fonts, &Default::default());
        let id = state.layout.window_numbered(apex_core::AcmeNumber(number.parse().unwrap())).unwrap();
        (number.clone(), *screen.window(id).unwrap(), m, screen)
    };
    let (x, y) = (geom.body.x0 + 400, geom.body.y0 + m.line / 2);
    d.xdotool(&["windowfocus", "--sync", &window]);
    d.xdotool(&["mousemove", "--window", &window, &x.to_string(), &y.to_string(), "click", "1"]);
    d.xdotool(&["type", "--delay", "20", " typed"]);
    let body = format!("main/acme/{number}/body");
    wait_for("the typing on the remote", || (remote_apex(&sshd, &["read", &body]) == "far away typed\n").then_some(()));

    // ssh drops (sshd gone, its connections killed): the UI keeps taking
    // typing; when ssh comes back, the import reconnects, the UI attaches
    // again, and what was typed meanwhile reaches the remote, with
    // nothing recovered aside.
    sshd.stop();
    sshd.drop_connections();
    d.xdotool(&["type", "--delay", "20", " more"]);
    std::thread::sleep(std::time::Duration::from_secs(2));
    sshd.restart();
    wait_for("the typing during the drop on the remote", || {
        (remote_apex(&sshd, &["read", &body]) == "far away typed more\n").then_some(())
    });
    let windows = remote_apex(&sshd, &["read", "main/meta/windows"]);
    assert!(!windows.contains("+Recovered"), "{windows}");
}
