//! acme's behaviour where apex once differed, each observed by sending
//! the same 9P requests to plan9port's acme (under Xvfb) and to apexd, and
//! encoded here as request sequences with acme's answers; each test names
//! the acme functions it follows.

use crate::acme::{acme_client, acme_daemon, events_until, id_of, new_window, open, put, read_file, write_file};
use apex_ninep::fcall::*;
use apex_ninep::Client;

/// The text of the window named `name`, or "" if there is none.
async fn window_text(c: &Client, root: u32, name: &str) -> String {
    let index = read_file(c, root, "index").await;
    match index.lines().find(|l| l.split_whitespace().nth(5) == Some(name)) {
        Some(line) => read_file(c, root, &format!("{}/body", id_of(line))).await,
        None => String::new(),
    }
}

/// ctl `get`, `del` and `name` as plan9port acme answers them, each
/// sequence sent to acme under Xvfb and encoded here: get (exec.c's get
/// with winclean(w, TRUE)), del (xfidctlwrite, winclean), name (a new
/// undo step: seq++, filemark, fileunsetname).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ctl_get_del_and_name_do_what_acme_does() {
    let d = acme_daemon("acme-get-del");
    let dir = d.dir.display().to_string();
    let (c, root) = acme_client(&d, 8192).await;
    let errors = format!("{dir}/+Errors");
    std::fs::write(d.dir.join("f.txt"), "disk content\n").unwrap();
    std::fs::create_dir(d.dir.join("d")).unwrap();
    std::fs::write(d.dir.join("d/a"), "").unwrap();
    let window = async |initial: &str, name: Option<&str>| {
        let (ctl, id) = new_window(&c, root).await;
        if !initial.is_empty() {
            write_file(&c, root, &format!("{id}/body"), initial).await.unwrap();
        }
        if let Some(name) = name {
            put(&c, &ctl, &format!("name {name}\n")).await.unwrap();
        }
        (id, ctl)
    };
    let said = async |before: &str| {
        let after = window_text(&c, root, &errors).await;
        after.strip_prefix(before).unwrap_or(&after).to_string()
    };
    let body = async |id: u32| read_file(&c, root, &format!("{id}/body")).await;
    let tag = async |id: u32| read_file(&c, root, &format!("{id}/tag")).await;

    // get on a changed file: the write succeeds, the body stays and
    // +Errors says so; the same get again reads the file, with no Undo.
    let (id, ctl) = window("changed\n", Some(&format!("{dir}/f.txt"))).await;
    let before = window_text(&c, root, &errors).await;
    put(&c, &ctl, "get\n").await.unwrap();
    assert_eq!(body(id).await, "changed\n");
    assert_eq!(said(&before).await, format!("{dir}/f.txt modified\n"));
    put(&c, &ctl, "get\n").await.unwrap();
    assert_eq!(body(id).await, "disk content\n");
    assert_eq!(tag(id).await, format!("{dir}/f.txt Del Snarf | Look "));
    put(&c, &ctl, "delete\n").await.unwrap();
    // get of a file that is not there empties the window, cleanly.
    let (id, ctl) = window("x\n", Some(&format!("{dir}/missing.txt"))).await;
    put(&c, &ctl, "clean\n").await.unwrap();
    let before = window_text(&c, root, &errors).await;
    put(&c, &ctl, "get\n").await.unwrap();
    assert_eq!(body(id).await, "");
    assert_eq!(tag(id).await, format!("{dir}/missing.txt Del Snarf | Look "));
    assert_eq!(said(&before).await, format!("can't open {dir}/missing.txt: No such file or directory\n"));
    put(&c, &ctl, "delete\n").await.unwrap();
    // get in an unnamed window: "no file name", nothing else.
    let (id, ctl) = window("x\n", None).await;
    put(&c, &ctl, "clean\n").await.unwrap();
    let before = window_text(&c, root, "+Errors").await;
    put(&c, &ctl, "get\n").await.unwrap();
    assert_eq!(body(id).await, "x\n");
    let after = window_text(&c, root, "+Errors").await;
    assert_eq!(after.strip_prefix(&before).unwrap_or(&after), "no file name\n");
    put(&c, &ctl, "delete\n").await.unwrap();
    // A directory is listed.
    let (id, ctl) = window("", Some(&format!("{dir}/d/"))).await;
    put(&c, &ctl, "get\n").await.unwrap();
    assert_eq!(body(id).await, "a\n");
    assert_eq!(tag(id).await, format!("{dir}/d/ Del Snarf Get | Look "));
    put(&c, &ctl, "delete\n").await.unwrap();

    // del: a changed named file is refused once with "file dirty" and
    // warned of; an unnamed one only from 100 runes; .../guide and
    // ...+Errors never; -host (not acme's scratch) like any file.
    for (text, name, refused) in [
        ("dirty\n".to_string(), Some(format!("{dir}/zz")), Some(format!("{dir}/zz modified\n"))),
        ("dirty\n".to_string(), None, None),
        ("x".repeat(99), None, None),
        ("x".repeat(100), None, Some("unnamed file modified\n".to_string())),
        ("x\n".to_string(), Some(format!("{dir}/guide")), None),
        ("x\n".to_string(), Some(format!("{dir}/sub/+Errors")), None),
        ("x\n".to_string(), Some(format!("{dir}/-host")), Some(format!("{dir}/-host modified\n"))),
    ] {
        let (id, ctl) = window(&text, name.as_deref()).await;
        let warned_in = if name.is_some() { errors.clone() } else { "+Errors".to_string() };
        let before = window_text(&c, root, &warned_in).await;
        let first = put(&c, &ctl, "del\n").await;
        match &refused {
            Some(warning) => {
                let e = first.unwrap_err().to_string();
                assert!(e.starts_with("file dirty"), "{name:?}: {e}");
                let after = window_text(&c, root, &warned_in).await;
                assert_eq!(after.strip_prefix(&before).unwrap_or(&after), warning, "{name:?}");
                put(&c, &ctl, "del\n").await.unwrap();
            }
            None => assert!(first.is_ok(), "{name:?}: {first:?}"),
        }
        let index = read_file(&c, root, "index").await;
        assert!(!index.lines().any(|l| id_of(l) == id), "{name:?} is still there: {index}");
    }

    // name: a rename is an undo step; the tag gains Undo and Put.
    let (id, ctl) = window("abc\n", None).await;
    put(&c, &ctl, "clean\n").await.unwrap();
    assert_eq!(tag(id).await, " Del Snarf | Look ");
    put(&c, &ctl, &format!("name {dir}/r1.txt\n")).await.unwrap();
    assert_eq!(tag(id).await, format!("{dir}/r1.txt Del Snarf Undo Put | Look "));
    put(&c, &ctl, &format!("name {dir}/r2.txt\n")).await.unwrap();
    // Undo and Redo run from the tag through the event file, which is
    // closed again before the tag is read (while open, the menu is off).
    let run = async |word: &str| {
        let ev = open(&c, root, &format!("{id}/event"), ORDWR).await;
        put(&c, &ctl, "cleartag\n").await.unwrap();
        let q0 = tag(id).await.chars().count();
        write_file(&c, root, &format!("{id}/tag"), &format!(" {word}")).await.unwrap();
        put(&c, &ev, &format!("Mx{} {}\n", q0 + 1, q0 + 1 + word.len())).await.unwrap();
        put(&c, &ctl, "cleartag\n").await.unwrap();
        c.clunk(ev.fid).await.unwrap();
    };
    run("Undo").await;
    assert_eq!(tag(id).await, format!("{dir}/r1.txt Del Snarf Undo Redo Put |"));
    run("Undo").await;
    assert_eq!(tag(id).await, " Del Snarf Redo |");
    assert_eq!(body(id).await, "abc\n", "the text is untouched");
    run("Redo").await;
    assert_eq!(tag(id).await, format!("{dir}/r1.txt Del Snarf Undo Redo Put |"));
}

/// Edit's file commands (ecmd.c's b_cmd, B_cmd, D_cmd, e_cmd, w_cmd and
/// cmdname) run through the event file on real files; what fails is said
/// in +Errors and the event write succeeds (xfideventwrite).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn edit_file_commands_do_what_acme_does() {
    let d = acme_daemon("acme-edit-files");
    let dir = d.dir.display().to_string();
    let (c, root) = acme_client(&d, 8192).await;
    let errors = format!("{dir}/+Errors");
    std::fs::write(d.dir.join("e.txt"), "disk one\ndisk two\n").unwrap();
    std::fs::write(d.dir.join("ins.txt"), "INSERTED\n").unwrap();
    std::fs::write(d.dir.join("bf.txt"), "b file\n").unwrap();
    let window = async |initial: &str, name: &str| {
        let (ctl, id) = new_window(&c, root).await;
        write_file(&c, root, &format!("{id}/body"), initial).await.unwrap();
        put(&c, &ctl, &format!("name {dir}/{name}\nclean\n")).await.unwrap();
        (id, ctl)
    };
    let body = async |id: u32| read_file(&c, root, &format!("{id}/body")).await;
    let field = async |id: u32, i: usize| {
        read_file(&c, root, &format!("{id}/ctl")).await.split_whitespace().nth(i).unwrap().to_string()
    };
    let names = async || {
        let index = read_file(&c, root, "index").await;
        index.lines().filter_map(|l| l.split_whitespace().nth(5).map(String::from)).collect::<Vec<_>>()
    };
    // Runs `Edit cmd` from the tag; returns what it said in +Errors.
    let edit = async |id: u32, ctl: &apex_ninep::File, cmd: &str| {
        let before = window_text(&c, root, &errors).await;
        let ev = open(&c, root, &format!("{id}/event"), ORDWR).await;
        put(&c, ctl, "cleartag\n").await.unwrap();
        let q0 = read_file(&c, root, &format!("{id}/tag")).await.chars().count() + 1;
        let word = format!("Edit {cmd}");
        write_file(&c, root, &format!("{id}/tag"), &format!(" {word}")).await.unwrap();
        put(&c, &ev, &format!("Mx{q0} {}\n", q0 + word.chars().count())).await.unwrap();
        put(&c, ctl, "cleartag\n").await.unwrap();
        c.clunk(ev.fid).await.unwrap();
        let after = window_text(&c, root, &errors).await;
        after.strip_prefix(&before).unwrap_or(&after).to_string()
    };

    // e FILE: the window takes the file's name and text, and is clean.
    let (w, ctl) = window("old\n", "x1.txt").await;
    assert_eq!(edit(w, &ctl, "e e.txt").await, "");
    assert_eq!(body(w).await, "disk one\ndisk two\n");
    let tag = read_file(&c, root, &format!("{w}/tag")).await;
    assert_eq!(tag.split_whitespace().next(), Some(format!("{dir}/e.txt").as_str()), "renamed");
    assert_eq!(field(w, 4).await, "0", "clean");
    // e on a changed file: refused once, then it goes ahead.
    write_file(&c, root, &format!("{w}/body"), "typed\n").await.unwrap();
    assert_eq!(edit(w, &ctl, "e").await, format!("{dir}/e.txt modified\n"));
    assert!(body(w).await.ends_with("typed\n"));
    assert_eq!(edit(w, &ctl, "e").await, "");
    assert_eq!(body(w).await, "disk one\ndisk two\n");
    // A file that cannot be read changes nothing and says why.
    let said = edit(w, &ctl, "r nosuch.txt").await;
    assert_eq!(said, format!("Edit: can't open {dir}/nosuch.txt: No such file or directory\n"));
    // r: the range becomes the file's text (dot by default).
    assert_eq!(edit(w, &ctl, "1r ins.txt").await, "");
    assert_eq!(body(w).await, "INSERTED\ndisk two\n");
    // w: the range, all by default, as it was before this Edit.
    assert_eq!(edit(w, &ctl, "$a/more/\n2w out1.txt").await, "");
    assert_eq!(std::fs::read_to_string(d.dir.join("out1.txt")).unwrap(), "disk two\n");
    assert_eq!(field(w, 4).await, "1");
    assert_eq!(edit(w, &ctl, "w").await, "");
    assert_eq!(std::fs::read_to_string(d.dir.join("e.txt")).unwrap(), "INSERTED\ndisk two\nmore");
    assert_eq!(field(w, 4).await, "0", "all of it to its own name: clean");
    assert!(edit(w, &ctl, "1e").await.starts_with("Edit: command takes no address"));

    // b: later commands work on the window named; its line is printed.
    let (w2, ctl2) = window("two\n", "w2.txt").await;
    assert_eq!(edit(w, &ctl, &format!("b {dir}/w2.txt\n,s/two/TWO/")).await, format!(" +  {dir}/w2.txt\n"));
    assert_eq!(body(w2).await, "TWO\n");
    assert!(edit(w, &ctl, "b /nope").await.starts_with("Edit: no such file"));
    // B opens windows (names in the window's directory), D closes them;
    // a changed window is kept once, with a warning.
    assert_eq!(edit(w, &ctl, "B bf.txt").await, "");
    assert!(names().await.contains(&format!("{dir}/bf.txt")));
    assert_eq!(edit(w, &ctl, "D bf.txt").await, "");
    assert!(!names().await.contains(&format!("{dir}/bf.txt")));
    assert_eq!(edit(w, &ctl, "D w2.txt").await, format!("{dir}/w2.txt modified\n"));
    assert!(names().await.contains(&format!("{dir}/w2.txt")));
    assert_eq!(edit(w, &ctl, "D w2.txt").await, "");
    assert!(!names().await.contains(&format!("{dir}/w2.txt")));
    c.clunk(ctl2.fid).await.unwrap();
    c.clunk(ctl.fid).await.unwrap();
}

/// Where acme's Rerror is a known string (fsys.c's Eperm, Eexist,
/// xfid.c's Ebadctl, Ebadaddr, Ebadevent, Einuse, Edel), apex's starts
/// with it; detail may follow after a colon.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rerrors_start_with_acmes_words() {
    let d = acme_daemon("acme-rerrors");
    let (c, root) = acme_client(&d, 8192).await;
    let (ctl, id) = new_window(&c, root).await;
    write_file(&c, root, &format!("{id}/body"), "hello\n").await.unwrap();
    let walk = async |path: &str| {
        let names: Vec<&str> = path.split('/').collect();
        match c.walk(root, &names).await {
            Ok((fid, _)) => {
                c.clunk(fid).await.unwrap();
                "ok".to_string()
            }
            Err(e) => e.to_string(),
        }
    };
    let opened = async |path: &str, mode: u8| match c.open_path(root, path, mode).await {
        Ok(f) => {
            c.clunk(f.fid).await.unwrap();
            "ok".to_string()
        }
        Err(e) => e.to_string(),
    };
    let wrote = async |path: &str, data: &str| {
        let f = open(&c, root, path, OWRITE).await;
        let r = put(&c, &f, data).await.map(|_| "ok".to_string()).unwrap_or_else(|e| e.to_string());
        c.clunk(f.fid).await.unwrap();
        r
    };
    let table = [
        (walk("nosuchfile").await, "file does not exist"),
        (walk("99999").await, "file does not exist"),
        (opened("index", OWRITE).await, "permission denied"),
        (opened("consctl", OREAD).await, "permission denied"),
        (opened(&format!("{id}/errors"), OREAD).await, "permission denied"),
        (wrote(&format!("{id}/ctl"), "bogus\n").await, "ill-formed control message"),
        (wrote(&format!("{id}/ctl"), "\n").await, "ill-formed control message"),
        (wrote(&format!("{id}/ctl"), "name\n").await, "ill-formed control message"),
        (wrote(&format!("{id}/ctl"), "font /x").await, "ill-formed control message"),
        (wrote(&format!("{id}/ctl"), "name a\tb\n").await, "bad character in file name"),
        // acme refuses only control characters: a blank is a name's.
        (wrote(&format!("{id}/ctl"), "name /tmp/a b\n").await, "ok"),
        (wrote(&format!("{id}/event"), "garbage\n").await, "bad event syntax"),
        (wrote(&format!("{id}/event"), "Mx0 999\n").await, "bad event syntax"),
        (wrote(&format!("{id}/event"), "M!0 1\n").await, "bad event syntax"),
        (wrote(&format!("{id}/addr"), "x").await, "bad address syntax"),
        (wrote(&format!("{id}/addr"), "/zzz/").await, "address out of range"),
    ];
    for (got, want) in table {
        assert!(got.starts_with(want), "{got:?} does not start with {want:?}");
    }
    // A walk from a file: fsyswalk's Enotdir.
    let (file, _) = c.walk(root, &[&id.to_string(), "body"]).await.unwrap();
    let e = c.walk(file, &["x"]).await.unwrap_err().to_string();
    assert!(e.starts_with("not a directory"), "{e}");
    c.clunk(file).await.unwrap();
    let rdsel = open(&c, root, &format!("{id}/rdsel"), OREAD).await;
    assert!(opened(&format!("{id}/rdsel"), OREAD).await.starts_with("already in use"));
    c.clunk(rdsel.fid).await.unwrap();
    // A window deleted under an open fid: "deleted window"; walking to it
    // again, "file does not exist".
    let body = open(&c, root, &format!("{id}/body"), OREAD).await;
    put(&c, &ctl, "delete\n").await.unwrap();
    let e = c.read(body.fid, 0, 100).await.unwrap_err().to_string();
    assert!(e.starts_with("deleted window"), "{e}");
    assert!(walk(&format!("{id}/body")).await.starts_with("file does not exist"));
}

/// The tag's rewrites as acme's event file reports them (winsettag1):
/// the name replaced first when it changed, then the menu from the first
/// rune that differs through the bar, which goes back in; reported with
/// the window's owner: 'E' for the event file's open (xfidopen's lock),
/// 'F' for a ctl write.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tag_rewrites_reach_the_event_file_as_acmes_do() {
    let d = acme_daemon("acme-tag-events");
    let dir = d.dir.display().to_string();
    let (c, root) = acme_client(&d, 8192).await;
    let (ctl, id) = new_window(&c, root).await;
    let name = format!("{dir}/ev.txt");
    put(&c, &ctl, &format!("name {name}\n")).await.unwrap();
    write_file(&c, root, &format!("{id}/body"), "hello world\n").await.unwrap();
    let tag = read_file(&c, root, &format!("{id}/tag")).await;
    assert_eq!(tag, format!("{name} Del Snarf Undo Put | Look "));
    // Opening the event file turns the menu off: "Undo Put |" goes, "|"
    // comes back.
    let ev = open(&c, root, &format!("{id}/event"), ORDWR).await;
    let n = name.chars().count() + 11;
    let want = format!("Ed{n} {} 0 0 \nEi{n} {} 0 1 |\n", n + 10, n + 1);
    let mut seen = String::new();
    events_until(&c, &ev, &mut seen, &want).await;
    assert_eq!(seen, want);
    // A rename through ctl replaces the name, then nothing else differs.
    let renamed = format!("{dir}/ev2.txt");
    put(&c, &ctl, &format!("name {renamed}\n")).await.unwrap();
    let (l0, l1) = (name.chars().count(), renamed.chars().count());
    let want = format!("Fd0 {l0} 0 0 \nFi0 {l1} 0 {l1} {renamed}\n");
    let mut seen = String::new();
    events_until(&c, &ev, &mut seen, &want).await;
    assert_eq!(seen, want);
    c.clunk(ev.fid).await.unwrap();
    // The last close brings the menu back.
    let tag = read_file(&c, root, &format!("{id}/tag")).await;
    assert_eq!(tag, format!("{renamed} Del Snarf Undo Put | Look "));
}
