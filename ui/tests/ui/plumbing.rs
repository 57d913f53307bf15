//! B3 and the plumbers. Under Xvfb with the real `apex-ui` and no
//! plumber of plan9port's: the daemon apex-ui starts posts the session's
//! plumber as `plumb`; B3 on `FILE:3` goes through the session's rules to
//! the `edit` port the UI reads, and the file opens at line 3; a message
//! written to the posted `plumb/send` as `9p write` writes it shows
//! `FILE:5` in the UI, and a `showdata` one its data. In the UI in
//! process: B3 goes to another program's plumber when the session's
//! takes nothing, else looks; a file opened at an address is shown as
//! acme shows it.

use crate::session::Rig;
use crate::support::wait_for;
use crate::xvfb::desk;
use apex_core::plumb::Message;
use apex_core::ViewId;
use apex_ui::font::Fonts;
use apex_ui::input::{Event, Target};
use std::io::Read;
use std::process::{Command, Stdio};

#[test]
fn b3_and_a_shell_s_plumb_reach_the_ui_through_the_session_s_plumber() {
    let Some(mut d) = desk("plumb") else { return };
    crate::support::sibling("apexd");
    let file = d.ns.join("FILE");
    std::fs::write(&file, "one\ntwo\nthree\nfour\nfive\nsix\n").unwrap();
    let notes = d.ns.join("notes.txt");
    std::fs::write(&notes, "see FILE:3 here\n").unwrap();
    let window = d.start_ui(&[&notes]);
    assert!(d.ns.join("plumb").exists(), "the daemon apex-ui started posts the session's plumber");

    // A reader of the session's `edit` port beside the UI's: what the
    // plumber delivers there, it sees too.
    let mut watcher = Command::new(crate::support::sibling("apex"))
        .args(["read", "main/plumb/edit"])
        .env("NAMESPACE", &d.ns)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut watched = watcher.stdout.take().unwrap();
    let (tx, seen) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let (mut buf, mut bytes) = ([0u8; 4096], Vec::new());
        while let Ok(n) = watched.read(&mut buf) {
            if n == 0 {
                return;
            }
            bytes.extend_from_slice(&buf[..n]);
            while let Ok(Some((m, used))) = Message::parse(&bytes) {
                bytes.drain(..used);
                if tx.send(m).is_err() {
                    return;
                }
            }
        }
    });
    // It reads once a message of a type no editor acts on, sent to the
    // port by name, comes to it (the UI ignores those).
    let rt = tokio::runtime::Runtime::new().unwrap();
    let plumb = d.ns.join("plumb");
    let send = |message: &str| {
        let (plumb, message) = (plumb.clone(), message.to_string());
        rt.block_on(async move {
            // As `9p write plumb/send`: dial the posted service, attach,
            // walk to send, open it OWRITE|OTRUNC, one write.
            let c = apex_ninep::dial(&format!("unix!{}", plumb.display()), 8192).await.unwrap();
            let root = c.attach("glenda", "").await.unwrap();
            let f = c.open_path(root, "send", apex_ninep::fcall::OWRITE | apex_ninep::fcall::OTRUNC).await.unwrap();
            let r = c.write(f.fid, 0, message.as_bytes()).await;
            c.clunk(f.fid).await.unwrap();
            r.map(|_| ())
        })
    };
    wait_for("the watcher to read the port", || {
        send("probe\nedit\n/\nprobe\n\n1\nx").unwrap();
        (seen.recv_timeout(std::time::Duration::from_millis(300)).ok()?.kind == "probe").then_some(())
    });

    // B3 on FILE:3, where the layout puts it.
    let (_, geom, m, _) = d.window_of(&notes);
    let mut fonts = Fonts::new(1.0);
    let px: i32 = "see FI".chars().map(|c| fonts.proportional.advance(c) as i32).sum();
    let (x, y) = (geom.body.x0 + px, geom.body.y0 + m.line / 2);
    d.xdotool(&["windowfocus", "--sync", &window]);
    d.xdotool(&["mousemove", "--window", &window, &x.to_string(), &y.to_string(), "click", "3"]);

    let path = file.display().to_string();
    let selected = |d: &crate::xvfb::Desk, line: &str| {
        let w = d.apex(&["read", "main/meta/windows"]);
        let n = w.lines().find(|l| l.ends_with(&path))?.split(' ').next()?.to_string();
        (d.apex(&["read", &format!("main/acme/{n}/rdsel")]) == line).then_some(())
    };
    wait_for("FILE open at line 3", || selected(&d, "three\n"));
    let got = loop {
        let m = seen.recv_timeout(std::time::Duration::from_secs(10)).expect("the plumber delivered to edit");
        if m.kind != "probe" {
            break m;
        }
    };
    let wdir = d.ns.display().to_string();
    let want = format!("acme\nedit\n{wdir}\ntext\naddr=3\n{}\n{path}", path.len());
    assert_eq!(String::from_utf8_lossy(&got.pack()), want);

    // `9p write plumb/send` of FILE:5.
    send(&format!("plumb\n\n{wdir}\ntext\n\n6\nFILE:5")).unwrap();
    wait_for("FILE shown at line 5", || selected(&d, "five\n"));
    // plumb -d edit -a 'action=showdata filename=...': the data in a new
    // window of that name, as acme's plumbshow.
    send("plumb\nedit\n/\ntext\naction=showdata filename=/man/ls(1)\n6\nls(1)\n").unwrap();
    wait_for("the data shown in /man/ls(1)", || {
        let w = d.apex(&["read", "main/meta/windows"]);
        let n = w.lines().find(|l| l.ends_with("/man/ls(1)"))?.split(' ').next()?.to_string();
        (d.apex(&["read", &format!("main/acme/{n}/body")]) == "ls(1)\n").then_some(())
    });
    let _ = watcher.kill();
    let _ = watcher.wait();
}

#[test]
fn button_three_plumbs_when_a_plumber_is_posted_and_looks_itself_otherwise() {
    let mut r = Rig::start("session-plumb", true);
    let go = r.ns.join("file.go");
    std::fs::write(&go, (1..=20).map(|i| format!("line {i}\n")).collect::<String>()).unwrap();
    let notes = r.ns.join("notes.txt");
    let text = "see file.go:12 and hello\nhello again\n";
    std::fs::write(&notes, text).unwrap();
    let w = r.open(&notes.display().to_string());
    let at = text.find("file.go:12").unwrap() as u64;
    let go_name = go.display().to_string();
    let go_window = |r: &mut Rig| {
        let link = r.ui().host.att.lock();
        apex_core::look::window_named(&link.node().unwrap().state, &go_name)
    };

    // With a plumber: the click's word goes to it, with where the click
    // was in it, and nothing is opened here.
    let sent = crate::plumber::post(&r.rt, &r.ns).sent;
    let p = r.point(w.window, at + 3, false);
    r.click(3, p);
    let ns = r.ns.display().to_string();
    assert_eq!(sent.all(), [format!("acme\n\n{ns}\ntext\nclick=3\n10\nfile.go:12")]);
    assert_eq!(go_window(&mut r), None, "the plumber took it");
    // A text the plumber refuses is looked up here: the next `hello`.
    let hello = text.find("hello").unwrap() as u64;
    let p = r.point(w.window, hello + 1, false);
    r.click(3, p);
    assert_eq!(sent.all().len(), 2, "{:?}", sent.all());
    assert!(sent.all()[1].ends_with("\nclick=1\n5\nhello"), "{:?}", sent.all()[1]);
    let second = text.rfind("hello").unwrap();
    let v = r.ui().host.att.lock().node().unwrap().state.buffer(w.body).unwrap().views[&ViewId::WindowBody(w.window)];
    assert_eq!((v.q0, v.q1), (second as u64, second as u64 + 5), "the search found the next hello");

    // A text too big for a plumber's message is not sent, as acme.
    let long = r.ns.join("long.txt");
    std::fs::write(&long, format!("{}\n", "x".repeat(8000))).unwrap();
    let l = r.open(&long.display().to_string());
    let p = r.point(l.window, 3, false);
    r.click(3, p);
    assert_eq!(sent.all().len(), 2, "nothing plumbed");
    let w = r.win(&notes.display().to_string());

    // Without a plumber: core's look opens file.go at line 12. (The
    // search scrolled the body; the wheel brings the top back.)
    std::fs::remove_file(r.ns.join("plumb")).unwrap();
    let screen = r.ui().screen().unwrap();
    let body = screen.window(w.window).unwrap().body;
    r.send(Event::Wheel { notches: -100, x: body.x0 + 5, y: body.y0 + 5 });
    let p = r.point(w.window, at + 3, false);
    r.click(3, p);
    let (gw, _) = go_window(&mut r).expect("file.go opened");
    let number = r.ui().host.att.lock().node().unwrap().state.layout.numbers[&gw].0;
    r.ui().settle().unwrap();
    let sel = r.apex(&["read", &format!("main/acme/{number}/rdsel")]);
    assert_eq!(sel, "line 12\n");
    assert_eq!(sent.all().len(), 2, "nothing more was plumbed");
}

#[test]
fn a_file_b3_opens_at_an_address_is_shown_as_acme_shows_it() {
    let mut r = Rig::start("session-show-new", true);
    let short = r.ns.join("short.txt");
    std::fs::write(&short, "one\ntwo\nthree\nfour\nfive\n").unwrap();
    let long = r.ns.join("long.txt");
    std::fs::write(&long, (1..=500).map(|i| format!("line {i}\n")).collect::<String>()).unwrap();
    let notes = r.ns.join("notes.txt");
    let text = "short.txt:3 long.txt:300\n";
    std::fs::write(&notes, text).unwrap();
    let w = r.open(&notes.display().to_string());
    let view_of = |r: &mut Rig, name: &str| {
        let link = r.ui().host.att.lock();
        let st = &link.node().unwrap().state;
        let (win, body) = apex_core::look::window_named(st, name).expect("opened");
        (win, st.buffer(body).unwrap().views[&ViewId::WindowBody(win)], st.buffer(body).unwrap().text.clone())
    };
    // A short file fits its new window: shown from the top, line 3
    // selected, as acme's textshow leaves a selection already in sight.
    let p = r.point(w.window, 2, false);
    r.click(3, p);
    let (_, v, _) = view_of(&mut r, &short.display().to_string());
    assert_eq!((v.org, v.q0, v.q1), (0, 8, 14), "from the top, `three` selected");
    // Line 300 of 500 is out of sight from the top: a quarter down.
    let w = r.win(&notes.display().to_string());
    let p = r.point(w.window, text.find("long").unwrap() as u64 + 2, false);
    r.click(3, p);
    let (lw, v, t) = view_of(&mut r, &long.display().to_string());
    let frame = r.ui().frame(Target::Body(lw)).expect("on the screen");
    let line_of = |q: u64| t.rope().char_to_line(q as usize);
    assert_eq!(line_of(v.q0), 299, "line 300 selected");
    let above = line_of(v.q0) - line_of(v.org);
    assert_eq!(above, frame.capacity() / 4, "a quarter of the window above it");
}

#[test]
fn a_file_the_edit_port_shows_gets_the_pointer_as_in_acme() {
    let mut r = Rig::start("plumbing-warp", true);
    let file = r.ns.join("FILE");
    std::fs::write(&file, "one\ntwo\nthree\nfour\nfive\n").unwrap();
    let mut m = apex_core::plumb::Message::text("plumb", "/", &file.display().to_string());
    m.dst = "edit".into();
    m.attr.push(("addr".into(), "3".into()));
    r.ui().host.plumbed.lock().unwrap().push(m);
    r.ui().woke();
    let w = r.win(&file.display().to_string());
    let (x, y) = r.ui().take_warp().expect("the pointer is moved");
    let at = r.point(w.window, 8, false);
    assert!((y - at.1).abs() <= r.ui().fonts.line_height() as i32, "on line 3: {:?} vs {:?}", (x, y), at);
    let v = r.ui().host.att.lock().node().unwrap().state.buffer(w.body).unwrap().views[&ViewId::WindowBody(w.window)];
    assert_eq!((v.q0, v.q1, v.org), (8, 14, 0));
}
