//! The session as its own plumber, under Xvfb with the real `apex-ui`
//! and no plumber of plan9port's: the daemon apex-ui starts posts the
//! session's plumber as `plumb`; B3 on `FILE:3` goes through the
//! session's rules to the `edit` port the UI reads, and the file opens at
//! line 3; a message written to the posted `plumb/send` as `9p write`
//! writes it shows `FILE:5` in the UI, and a `showdata` one its data.

use crate::support::wait_for;
use crate::xvfb::desk;
use apex_core::plumb::Message;
use apex_ui::font::Fonts;
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
