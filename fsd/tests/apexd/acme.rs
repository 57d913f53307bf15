//! The acme(4) tree through a real `apexd --acme main`: replays of the file
//! operations acme's clients perform (`win`, a Watch-style loop, the Go
//! `9fans.net/go/acme` package, acme-lsp), each against the posted `acme`
//! service, with a UI attached where the client needs a user (typing, B2
//! and B3 actions, focus). Also Topenfd with raw frames, and table tests
//! of addresses and ctl messages through the files.

use crate::attach::{type_at, until};
use crate::{text, Daemon};
use apex_core::{make, AcmeNumber, Action, AttachmentKind, BufferId, BufferOp, LayoutOp, Op, Origin, Shard, WindowId};
use apex_fsd::attach::conn::Attached;
use apex_ninep::fcall::*;
use apex_ninep::{dial, Client, ClientError, File};
use std::time::Duration;

const WAIT: Duration = Duration::from_secs(10);

/// A daemon serving `main`'s acme tree as `NSDIR/acme`.
pub fn acme_daemon(name: &str) -> Daemon {
    let d = Daemon::start_with(name, &["--acme".into(), "main".into()]);
    let deadline = std::time::Instant::now() + WAIT;
    while !d.dir.join("acme").exists() {
        assert!(std::time::Instant::now() < deadline, "apexd did not post acme");
        std::thread::sleep(Duration::from_millis(20));
    }
    d
}

/// Dials the acme service as plan9port's clients do (9pserve's 8192).
pub async fn acme_client(d: &Daemon, msize: u32) -> (Client, u32) {
    let c = dial(&format!("unix!{}", d.dir.join("acme").display()), msize).await.unwrap();
    let root = c.attach("somebody-else", "").await.unwrap();
    (c, root)
}

pub async fn open(c: &Client, root: u32, path: &str, mode: u8) -> File {
    c.open_path(root, path, mode).await.unwrap_or_else(|e| panic!("open {path}: {e}"))
}

pub async fn put(c: &Client, f: &File, s: &str) -> Result<u32, ClientError> {
    c.write(f.fid, 0, s.as_bytes()).await
}

/// Opens, writes once, clunks (as `9p write` does, OTRUNC included).
pub async fn write_file(c: &Client, root: u32, path: &str, s: &str) -> Result<(), ClientError> {
    let f = open(c, root, path, OWRITE | OTRUNC).await;
    let r = put(c, &f, s).await;
    c.clunk(f.fid).await.unwrap();
    r.map(|_| ())
}

/// Reads a whole file as `9p read` does (chunks until a 0-byte read).
pub async fn read_file(c: &Client, root: u32, path: &str) -> String {
    let f = open(c, root, path, OREAD).await;
    let data = c.read_all(&f).await.unwrap();
    c.clunk(f.fid).await.unwrap();
    text(data)
}

/// Reads `f` in reads of `chunk` bytes at growing offsets until EOF (the
/// Go package's ReadAddr and Info).
async fn read_in_chunks(c: &Client, f: &File, chunk: u32) -> String {
    let mut out = Vec::new();
    loop {
        let got = c.read(f.fid, out.len() as u64, chunk).await.unwrap();
        if got.is_empty() {
            return text(out);
        }
        out.extend(got);
    }
}

/// Reads the event stream until `want` has arrived, returning all read.
pub async fn events_until(c: &Client, ev: &File, seen: &mut String, want: &str) {
    let deadline = tokio::time::Instant::now() + WAIT;
    while !seen.contains(want) {
        let got = tokio::time::timeout_at(deadline, c.read(ev.fid, 0, 8192)).await;
        let got = got.unwrap_or_else(|_| panic!("no {want:?} in the events; got {seen:?}")).unwrap();
        seen.push_str(&text(got));
    }
}

/// The first field of a ctl or index line: the window id.
pub fn id_of(line: &str) -> u32 {
    line.split_whitespace().next().unwrap().parse().unwrap()
}

/// A new window (a walk to `new/ctl`, as acme's clients make one): its
/// open ctl file and its number.
pub async fn new_window(c: &Client, root: u32) -> (File, u32) {
    let ctl = open(c, root, "new/ctl", ORDWR).await;
    let id = id_of(&text(c.read(ctl.fid, 0, 12).await.unwrap()));
    (ctl, id)
}

/// Acme window `id`'s body buffer and window shard numbers, from the
/// apex tree's `meta/windows` (`client` attached there as `root`).
pub async fn window_ids(client: &Client, root: u32, id: u32) -> [String; 2] {
    let windows = text(crate::read(client, root, "main/meta/windows").await.unwrap());
    let line = windows.lines().find(|l| l.split(' ').next() == Some(&id.to_string())).expect("listed");
    let fields: Vec<&str> = line.split(' ').collect();
    [fields[1].to_string(), fields[2].to_string()]
}

/// The addr file's two numbers.
fn addr_of(s: &str) -> (u64, u64) {
    assert_eq!(s.len(), 24, "addr reads as two 11-wide numbers each followed by a blank: {s:?}");
    let v: Vec<u64> = s.split_whitespace().map(|n| n.parse().unwrap()).collect();
    (v[0], v[1])
}

/// A UI on its own connection that leads everything, as apex's UI does.
async fn ui(d: &Daemon) -> (Client, Attached) {
    let c = d.client().await;
    let ui = Attached::open(&c, "main", AttachmentKind::Ui, "ui").await.unwrap();
    assert!(ui.wait_for(WAIT, |l| l.leads(Shard::Layout)).await, "a lone UI leads the layout");
    (c, ui)
}

/// The window numbered `n` and its body, once the UI has it and leads it.
async fn ui_window(ui: &Attached, n: u32) -> (WindowId, BufferId) {
    let found = until(
        || format!("the UI does not have window {n}"),
        async || {
            ui.with(|l| {
                let state = &l.node()?.state;
                let w = state.layout.window_numbered(AcmeNumber(n))?;
                let body = state.window(w).ok()?.body;
                l.leads(Shard::Buffer(body)).then_some((w, body))
            })
        },
    );
    found.await
}

/// The UI's B2 or B3 on `q0..q1` of a body.
fn act(ui: &Attached, body: BufferId, exec: bool, q0: u64, q1: u64) {
    ui.with(|l| {
        let node = l.node_mut().unwrap();
        let version = node.state.buffer(body).unwrap().version;
        let a = Action { view: None, version, q0, q1, expansion: None, arg: None, flags: 0, origin: Origin::Mouse };
        let a = Box::new(a);
        let op = if exec { BufferOp::ExecAt(a) } else { BufferOp::LookAt(a) };
        node.append(Shard::Buffer(body), Op::Buffer(op)).unwrap();
    });
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn win_runs_against_the_acme_service() {
    let d = acme_daemon("acme-win");
    let dir = d.dir.display().to_string();
    let (c, root) = acme_client(&d, 8192).await;
    assert_eq!(c.msize(), 8192);
    // Tauth fails with acme's words; the user name is not checked.
    let auth = c.rpc(Fcall::Tauth { afid: 77, uname: "u".into(), aname: "".into() }).await;
    assert!(matches!(auth, Err(ClientError::Server(e)) if e == "acme: authentication not required"));

    // 2. new/ctl, ORDWR, exactly 12 bytes: the id.
    let ctl = open(&c, root, "new/ctl", ORDWR).await;
    let first = text(c.read(ctl.fid, 0, 12).await.unwrap());
    assert_eq!(first.len(), 12);
    let id = id_of(&first);
    // 4. event, addr, data.
    let ev = open(&c, root, &format!("{id}/event"), ORDWR).await;
    let addr = open(&c, root, &format!("{id}/addr"), ORDWR).await;
    let data = open(&c, root, &format!("{id}/data"), ORDWR).await;
    // 5. The name sticks although the "0" line is refused.
    let e = put(&c, &ctl, &format!("name {dir}/-host\n0\n")).await.unwrap_err();
    assert!(e.to_string().starts_with("ill-formed control message"), "{e}");
    let index = read_file(&c, root, "index").await;
    assert!(index.contains(&format!("{dir}/-host Del Snarf")), "{index}");
    for m in [format!("dumpdir {dir}/\n"), "dump win\n".into(), "scroll".into()] {
        put(&c, &ctl, &m).await.unwrap();
    }
    // 6. Output at P: addr #P, data, an empty data write.
    put(&c, &addr, "#0").await.unwrap();
    put(&c, &data, "hello\n").await.unwrap();
    put(&c, &data, "").await.unwrap();
    put(&c, &addr, "#6").await.unwrap();
    put(&c, &data, "$ ").await.unwrap();
    let mut seen = String::new();
    events_until(&c, &ev, &mut seen, "FI0 6 0 6 hello\n").await;
    events_until(&c, &ev, &mut seen, "FI6 8 0 2 $ \n").await;
    // A bad #P is refused and changes nothing; win then resyncs with $.
    let e = put(&c, &addr, "#99").await.unwrap_err();
    assert!(e.to_string().starts_with("address out of range"), "{e}");
    put(&c, &addr, "$").await.unwrap();
    assert_eq!(addr_of(&text(c.read(addr.fid, 0, 40).await.unwrap())), (8, 8));

    // 7. The user types a command after P and executes it with B2.
    let (_uc, ui) = ui(&d).await;
    let (w, body) = ui_window(&ui, id).await;
    // While a tool reads its events the window's own actions are the
    // tool's: the leader knows, and the tag menu is off.
    let flags = ui.with(|l| l.node().unwrap().state.window(w).unwrap().clone());
    assert_eq!((flags.event_reader.is_some(), flags.flags.menu), (true, false), "{flags:?}");
    ui.with(|l| type_at(l, body, 8, "echo hi-from-win\n"));
    ui.flush().await.unwrap();
    events_until(&c, &ev, &mut seen, "KI8 25 0 17 echo hi-from-win\n").await;
    act(&ui, body, true, 8, 24);
    ui.flush().await.unwrap();
    events_until(&c, &ev, &mut seen, "MX8 24 0 16 echo hi-from-win\n").await;
    // win writes back what it does not handle: the daemon runs it in the
    // window's directory, output in DIR/+Errors.
    put(&c, &ev, "MX8 24\n").await.unwrap();
    let errors = format!("{dir}/+Errors");
    until(
        || format!("no {errors} with the output"),
        async || {
            let index = read_file(&c, root, "index").await;
            let line = index.lines().find(|l| l.ends_with(&format!("{errors} Del Snarf Undo | Look ")))?;
            let body = read_file(&c, root, &format!("{}/body", id_of(line))).await;
            body.contains("hi-from-win").then_some(())
        },
    )
    .await;
    // B3 written back looks the text up: the next "hello" is selected.
    act(&ui, body, false, 0, 5);
    ui.flush().await.unwrap();
    events_until(&c, &ev, &mut seen, "ML0 5 0 5 hello\n").await;
    put(&c, &ev, "ML0 5 \n").await.unwrap();
    let (_, sel) = until(
        || "the look did not select".into(),
        async || {
            put(&c, &ctl, "addr=dot").await.unwrap();
            let a = addr_of(&text(c.read(addr.fid, 0, 40).await.unwrap()));
            (a == (0, 5)).then_some(((), a))
        },
    )
    .await;
    assert_eq!(sel, (0, 5));
    // A bad write-back says what is expected.
    let e = put(&c, &ev, "MI0 1\n").await.unwrap_err();
    assert!(e.to_string().starts_with("bad event syntax"), "{e}");

    // Body writes are E events; backspace erases.
    let bodyf = open(&c, root, &format!("{id}/body"), OWRITE).await;
    put(&c, &bodyf, "typos\u{8}\n").await.unwrap();
    events_until(&c, &ev, &mut seen, "EI25 30 0 5 typo\n").await;

    // 8. Deleting the window fails the pending event read.
    let pending = {
        let c = c.clone();
        let fid = ev.fid;
        tokio::spawn(async move { c.read(fid, 0, 8192).await })
    };
    tokio::time::sleep(Duration::from_millis(100)).await;
    let ctl2 = open(&c, root, &format!("{id}/ctl"), OWRITE).await;
    put(&c, &ctl2, "delete\n").await.unwrap();
    let r = tokio::time::timeout(WAIT, pending).await.expect("the event read must not hang").unwrap();
    assert!(matches!(&r, Err(ClientError::Server(e)) if e.starts_with("window shut down")), "{r:?}");
    let r = c.read(addr.fid, 0, 40).await;
    assert!(matches!(&r, Err(ClientError::Server(e)) if e == "deleted window"), "{r:?}");
    assert!(!read_file(&c, root, "index").await.contains("-host"));
    ui.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn watch_clears_and_refills_and_the_go_package_reads_to_eof() {
    let d = acme_daemon("acme-watch");
    let dir = d.dir.display().to_string();
    // The Go package asks 131072 and expects no more.
    let (c, root) = acme_client(&d, 131072).await;
    assert!(c.msize() <= 131072);
    let ctl = open(&c, root, "new/ctl", ORDWR).await;
    let id = id_of(&read_in_chunks(&c, &ctl, 40).await);
    // Win.Ctl adds a newline; Watch names, cleans, sets dump, writes its tag.
    for m in [format!("name {dir}/+watch\n"), "clean\n".into(), format!("dumpdir {dir}\n"), "dump Watch\n".into()] {
        put(&c, &ctl, &m).await.unwrap();
    }
    write_file(&c, root, &format!("{id}/tag"), "Get Kill Quit ").await.unwrap();
    let tag = read_file(&c, root, &format!("{id}/tag")).await;
    // acme's winsettag: nothing to undo after clean, so no Undo.
    assert_eq!(tag, format!("{dir}/+watch Del Snarf | Look Get Kill Quit "));
    let addr = open(&c, root, &format!("{id}/addr"), ORDWR).await;
    let data = open(&c, root, &format!("{id}/data"), ORDWR).await;
    for round in ["one\n\tdetail\ntwo\n", "three\n\tmore\nfour\n"] {
        // Clear: addr "," and an empty data write.
        put(&c, &addr, ",").await.unwrap();
        put(&c, &data, "").await.unwrap();
        assert_eq!(read_file(&c, root, &format!("{id}/body")).await, "");
        write_file(&c, root, &format!("{id}/body"), round).await.unwrap();
        assert_eq!(read_file(&c, root, &format!("{id}/body")).await, round);
    }
    // Watch finds the next line that starts with a blank and reads addr.
    // (Tabs are literal; \n is regexp(7)'s newline.)
    put(&c, &addr, "#0/^[ \t][^ \t\\n].*\\n/").await.unwrap();
    assert_eq!(addr_of(&read_in_chunks(&c, &addr, 40).await), (6, 12));
    put(&c, &ctl, "dot=addr\n").await.unwrap();
    put(&c, &ctl, "show\n").await.unwrap();
    // Selection(): addr=dot, then xdata.
    put(&c, &addr, "#0").await.unwrap();
    put(&c, &ctl, "addr=dot\n").await.unwrap();
    let xdata = open(&c, root, &format!("{id}/xdata"), OREAD).await;
    assert_eq!(text(c.read_all(&xdata).await.unwrap()), "\tmore\n");

    // Info: ctl read in 40-byte pieces to EOF, 10 fields, no newline.
    let info = read_in_chunks(&c, &ctl, 40).await;
    let fields: Vec<&str> = info.split_whitespace().collect();
    assert_eq!(fields.len(), 10, "{info:?}");
    assert!(!info.ends_with('\n') && info.ends_with(' '));
    assert_eq!(id_of(&info), id);
    assert!(fields[7].parse::<u32>().unwrap() > 0, "tab width must not be 0: {info:?}");
    // Windows(): index lines are 60 bytes of fields, then the tag.
    let f = open(&c, root, "index", OREAD).await;
    let index = read_in_chunks(&c, &f, 40).await;
    let line = index.lines().find(|l| id_of(l) == id).unwrap();
    // The body changed since: the menu shows Undo and Put now, as acme's.
    let tag = read_file(&c, root, &format!("{id}/tag")).await;
    assert_eq!(tag, format!("{dir}/+watch Del Snarf Undo Put | Look Get Kill Quit "));
    assert_eq!(&line[60..], tag.as_str());
    assert!(line[60..].contains(" Del Snarf "));
    let nums: Vec<u64> = line[..60].split_whitespace().map(|n| n.parse().unwrap()).collect();
    assert_eq!(nums[2], "three\n\tmore\nfour\n".chars().count() as u64);
    // Offsets are honoured and reading past the end is EOF.
    assert_eq!(text(c.read(f.fid, 12, 11).await.unwrap()).trim(), nums[1].to_string());
    assert!(c.read(f.fid, index.len() as u64 + 5, 100).await.unwrap().is_empty());
    // Err(): New, name DIR/+Errors, addr $, dot=addr, body, addr ., dot=addr, show.
    let ectl = open(&c, root, "new/ctl", ORDWR).await;
    let eid = id_of(&text(c.read(ectl.fid, 0, 12).await.unwrap()));
    put(&c, &ectl, &format!("name {dir}/+Errors\n")).await.unwrap();
    let eaddr = open(&c, root, &format!("{eid}/addr"), ORDWR).await;
    put(&c, &eaddr, "$").await.unwrap();
    put(&c, &ectl, "dot=addr\n").await.unwrap();
    write_file(&c, root, &format!("{eid}/body"), "oops\n").await.unwrap();
    put(&c, &eaddr, ".,").await.unwrap();
    put(&c, &ectl, "dot=addr\n").await.unwrap();
    put(&c, &ectl, "show\n").await.unwrap();
    put(&c, &ectl, "addr=dot\n").await.unwrap();
    assert_eq!(addr_of(&text(c.read(eaddr.fid, 0, 40).await.unwrap())), (0, 5), "the message is selected");
    // data reads return whole runes only.
    put(&c, &addr, ",").await.unwrap();
    put(&c, &data, "é").await.unwrap();
    put(&c, &addr, "#0").await.unwrap();
    assert!(c.read(data.fid, 0, 1).await.unwrap().is_empty(), "half a rune is not returned");
    assert_eq!(text(c.read(data.fid, 0, 2).await.unwrap()), "é");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn acme_lsp_follows_the_log_and_edits_through_addr_and_data() {
    let d = acme_daemon("acme-lsp");
    let dir = d.dir.display().to_string();
    let file = format!("{dir}/main.go");
    std::fs::write(&file, "package main\n\nfunc main() {\n}\n").unwrap();
    let (c, root) = acme_client(&d, 8192).await;
    let log = open(&c, root, "log", OREAD).await;
    let (_uc, ui) = ui(&d).await;

    // A window for the file, as the user would open it.
    let (ctl, id) = new_window(&c, root).await;
    // Each log read is one whole entry; windows made via new have no name yet.
    assert_eq!(text(c.read(log.fid, 0, 8192).await.unwrap()), format!("{id} new \n"));
    put(&c, &ctl, &format!("name {file}\nget\n")).await.unwrap();
    assert_eq!(text(c.read(log.fid, 0, 8192).await.unwrap()), format!("{id} get {file}\n"));
    // acme-lsp reads the name from the tag and the body from offset 0.
    let tag = read_file(&c, root, &format!("{id}/tag")).await;
    assert_eq!(tag.split(' ').next().unwrap(), file);
    assert_eq!(read_file(&c, root, &format!("{id}/body")).await, "package main\n\nfunc main() {\n}\n");

    // Focus moves to the window in the UI.
    let (w, body) = ui_window(&ui, id).await;
    ui.with(|l| {
        let op = Op::Layout(LayoutOp::Focus { window: Some(w) });
        l.node_mut().unwrap().append(Shard::Layout, op).unwrap();
    });
    ui.flush().await.unwrap();
    assert_eq!(text(c.read(log.fid, 0, 8192).await.unwrap()), format!("{id} focus {file}\n"));
    // A Zerox copy is logged as such, and index lists the focused one only.
    let copy = ui.with(|l| make::new_window(l.node_mut().unwrap(), Some(body), None, "").unwrap());
    ui.flush().await.unwrap();
    assert_eq!(text(c.read(log.fid, 0, 8192).await.unwrap()), format!("{} zerox {file}\n", copy.number.0));
    let index = read_file(&c, root, "index").await;
    assert_eq!(index.lines().filter(|l| l.contains(&file)).map(id_of).collect::<Vec<_>>(), [id], "{index}");
    ui.with(|l| make::delete_window(l.node_mut().unwrap(), copy.window).unwrap());
    ui.flush().await.unwrap();
    assert_eq!(text(c.read(log.fid, 0, 8192).await.unwrap()), format!("{} del {file}\n", copy.number.0));
    // A terminal's window is announced as every window is (acme's log
    // says `new` for each), and `del` when it goes.
    let main = d.client().await;
    let mroot = main.attach("glenda", "").await.unwrap();
    let tctl = main.open_path(mroot, "main/ctl", ORDWR).await.unwrap();
    main.write(tctl.fid, 0, b"term -d / -s 30x5 /bin/sh\n").await.unwrap();
    let t = text(main.read(tctl.fid, 0, 64).await.unwrap()).trim().to_string();
    main.clunk(tctl.fid).await.unwrap();
    let line = text(c.read(log.fid, 0, 8192).await.unwrap());
    assert!(line.ends_with(&format!(" new /-term.{t}\n")), "{line}");
    let number = line.split_whitespace().next().unwrap().to_string();
    let term_ctl = open(&c, root, &format!("{number}/ctl"), OWRITE).await;
    put(&c, &term_ctl, "delete").await.unwrap();
    assert_eq!(text(c.read(log.fid, 0, 8192).await.unwrap()), format!("{number} del /-term.{t}\n"));

    // Position: open addr, addr=dot, read addr (the UI put dot at 14).
    ui.with(|l| {
        let op = BufferOp::Select { view: apex_core::ViewId::WindowBody(w), q0: 14, q1: 14 };
        l.node_mut().unwrap().append(Shard::Buffer(body), Op::Buffer(op)).unwrap();
    });
    ui.flush().await.unwrap();
    let addr = open(&c, root, &format!("{id}/addr"), ORDWR).await;
    until(
        || "dot did not reach the daemon".into(),
        async || {
            put(&c, &ctl, "addr=dot").await.unwrap();
            (addr_of(&text(c.read(addr.fid, 0, 40).await.unwrap())) == (14, 14)).then_some(())
        },
    )
    .await;
    // Edits: nomark, mark, then last to first with addr #q0,#q1 and data.
    put(&c, &ctl, "nomark").await.unwrap();
    put(&c, &ctl, "mark").await.unwrap();
    let data = open(&c, root, &format!("{id}/data"), OWRITE).await;
    for (q0, q1, t) in [(27, 28, "\n\tprintln()\n"), (8, 12, "Main")] {
        put(&c, &addr, &format!("#{q0},#{q1}")).await.unwrap();
        put(&c, &data, t).await.unwrap();
    }
    // The address keeps the version it was set at: the user typing at the
    // top meanwhile moves the next data write instead of breaking it.
    put(&c, &addr, "#14,#18").await.unwrap();
    ui.with(|l| type_at(l, body, 0, "// x\n"));
    ui.flush().await.unwrap();
    until(
        || "the typing did not arrive".into(),
        async || read_file(&c, root, &format!("{id}/body")).await.starts_with("// x\n").then_some(()),
    )
    .await;
    put(&c, &data, "fn").await.unwrap();
    let marks = async |want: bool| {
        let why = || format!("the window's mark flag did not become {want}");
        let mark = || ui.with(|l| l.node().and_then(|n| n.state.window(w).ok().map(|x| x.flags.mark)));
        until(why, async || (mark() == Some(want)).then_some(())).await
    };
    marks(false).await;
    // Closing a data fid ends nomark.
    c.clunk(data.fid).await.unwrap();
    marks(true).await;
    let want = "// x\npackage Main\n\nfn main() {\n\tprintln()\n}\n";
    assert_eq!(read_file(&c, root, &format!("{id}/body")).await, want);
    // The edits since mark undo as one group.
    let info = read_file(&c, root, &format!("{id}/ctl")).await;
    assert_eq!(info.split_whitespace().nth(8), Some("1"), "undo is possible: {info:?}");
    // Put logs put; the file has the text.
    put(&c, &ctl, "put\n").await.unwrap();
    assert_eq!(text(c.read(log.fid, 0, 8192).await.unwrap()), format!("{id} put {file}\n"));
    assert_eq!(std::fs::read_to_string(&file).unwrap(), want);

    // Its own windows: made, named, cleared, filled, cleaned, tag
    // appended; X Reload handled by it, the rest written back.
    let ctl2 = open(&c, root, "new/ctl", ORDWR).await;
    let diag = id_of(&text(c.read(ctl2.fid, 0, 12).await.unwrap()));
    assert_eq!(text(c.read(log.fid, 0, 8192).await.unwrap()), format!("{diag} new \n"));
    put(&c, &ctl2, "name /LSP/Diagnostics\n").await.unwrap();
    let ev = open(&c, root, &format!("{diag}/event"), ORDWR).await;
    let a2 = open(&c, root, &format!("{diag}/addr"), ORDWR).await;
    let d2 = open(&c, root, &format!("{diag}/data"), ORDWR).await;
    put(&c, &a2, ",").await.unwrap();
    put(&c, &d2, "").await.unwrap();
    write_file(&c, root, &format!("{diag}/body"), &format!("{file}:3: unused\n")).await.unwrap();
    put(&c, &ctl2, "clean\n").await.unwrap();
    write_file(&c, root, &format!("{diag}/tag"), "Reload ").await.unwrap();
    let index = read_file(&c, root, "index").await;
    let line = index.lines().find(|l| id_of(l) == diag).unwrap();
    assert_eq!(line[48..60].trim(), "0", "clean: {line:?}");
    // Del in the tag written back: deleted although dirty (event open).
    write_file(&c, root, &format!("{diag}/body"), "more\n").await.unwrap();
    let tag = read_file(&c, root, &format!("{diag}/tag")).await;
    let at = tag.find("Del").unwrap() as u64;
    put(&c, &ev, &format!("Mx{} {} \n", at, at + 3)).await.unwrap();
    assert_eq!(text(c.read(log.fid, 0, 8192).await.unwrap()), format!("{diag} del /LSP/Diagnostics\n"));
    // On exit: delete.
    put(&c, &ctl, "delete").await.unwrap();
    assert_eq!(text(c.read(log.fid, 0, 8192).await.unwrap()), format!("{id} del {file}\n"));
    ui.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn addresses_and_ctl_messages_through_the_files() {
    let d = acme_daemon("acme-tables");
    let c = d.client().await;
    // The acme tree is also NAME/acme on the main service.
    let root = c.attach("glenda", "main/acme").await.unwrap();
    let (ctl, id) = new_window(&c, root).await;
    write_file(&c, root, &format!("{id}/body"), "one\ntwo\nthree\nfour two\n").await.unwrap();
    let addr = open(&c, root, &format!("{id}/addr"), ORDWR).await;
    // (addr before, address written, addr after or the error's start)
    type Row = (&'static str, &'static str, Result<(u64, u64), &'static str>);
    let table: &[Row] = &[
        ("#0", "#3", Ok((3, 3))),
        ("#0", "#4,#7", Ok((4, 7))),
        ("#0", ",", Ok((0, 23))),
        ("#0", "$", Ok((23, 23))),
        ("#4", ".,", Ok((4, 23))),
        ("#0", "0,#2", Ok((0, 2))),
        ("#0", ",#5", Ok((0, 5))),
        ("#0", "2,3", Ok((4, 14))),
        ("#0", "2+#0", Ok((8, 8))),
        ("#0", "#5/t/", Ok((8, 9))),
        ("#0", "/two/", Ok((4, 7))),
        ("#8", "-/two/", Ok((4, 7))),
        ("#0", "3", Ok((8, 14))),
        ("#0", "5", Ok((23, 23))),
        // As plan9port acme answers (address, regexp, rxexecute): an empty
        // match where the search starts counts, `$` only before a newline,
        // no search matches at the very end, and `a,b` may run backwards.
        ("#0", "/^/", Ok((0, 0))),
        ("#23", "/^/", Ok((0, 0))),
        ("#0", "/$/", Ok((3, 3))),
        ("#22", "/$/", Ok((22, 22))),
        ("#4", "-/^/", Ok((4, 4))),
        ("#3", "/o*/", Ok((3, 3))),
        ("#3", "-/o*/", Ok((3, 3))),
        ("#0", "#5,#2", Ok((5, 2))),
        ("#0", "/(/", Err("address out of range")),
        ("#0", "#3\n", Err("bad address syntax")),
        ("#0", "#3 ", Err("bad address syntax")),
        ("#0", ".+$", Err("bad address syntax")),
        ("#0", "#99", Err("address out of range")),
        ("#0", "/zebra/", Err("address out of range")),
        ("#0", "7", Err("address out of range")),
    ];
    for (from, a, want) in table {
        put(&c, &addr, from).await.unwrap();
        let got = put(&c, &addr, a).await;
        let now = addr_of(&text(c.read(addr.fid, 0, 40).await.unwrap()));
        match want {
            Ok(r) => {
                assert!(got.is_ok(), "{a:?} from {from}: {got:?}");
                assert_eq!(now, *r, "{a:?} from {from}");
            }
            Err(prefix) => {
                let e = got.unwrap_err().to_string();
                assert!(e.starts_with(prefix), "{a:?}: {e}");
                // A failed write leaves addr unchanged.
                let r: u64 = from[1..].parse().unwrap();
                assert_eq!(now, (r, r), "{a:?} changed addr");
            }
        }
    }
    // A backwards address replaces nothing: the write goes in at its
    // start (xfidwrite); dot=addr, on which acme dies, is refused.
    put(&c, &addr, "#5,#2").await.unwrap();
    let e = put(&c, &ctl, "dot=addr\n").await.unwrap_err().to_string();
    assert!(e.starts_with("address out of range"), "{e}");
    write_file(&c, root, &format!("{id}/data"), "Z").await.unwrap();
    assert_eq!(read_file(&c, root, &format!("{id}/body")).await, "one\ntZwo\nthree\nfour two\n");
    put(&c, &addr, "#5,#6").await.unwrap();
    write_file(&c, root, &format!("{id}/data"), "").await.unwrap();
    // `//` reuses the last regexp of the whole session, not the window's.
    let ctl2 = open(&c, root, "new/ctl", ORDWR).await;
    let id2 = id_of(&text(c.read(ctl2.fid, 0, 12).await.unwrap()));
    write_file(&c, root, &format!("{id2}/body"), "a three b\n").await.unwrap();
    put(&c, &addr, "/three/").await.unwrap();
    let addr2 = open(&c, root, &format!("{id2}/addr"), ORDWR).await;
    put(&c, &addr2, "//").await.unwrap();
    assert_eq!(addr_of(&text(c.read(addr2.fid, 0, 40).await.unwrap())), (2, 7));
    c.clunk(addr2.fid).await.unwrap();
    put(&c, &ctl2, "delete\n").await.unwrap();
    c.clunk(ctl2.fid).await.unwrap();
    // A data write at the selection pushes it past the new text (acme's
    // exception to the insert rule); elsewhere it stays.
    put(&c, &addr, "#3").await.unwrap();
    put(&c, &ctl, "dot=addr\n").await.unwrap();
    let data = open(&c, root, &format!("{id}/data"), OWRITE).await;
    put(&c, &addr, "#3").await.unwrap();
    put(&c, &data, "XY").await.unwrap();
    put(&c, &addr, "#0").await.unwrap();
    put(&c, &data, "<").await.unwrap();
    put(&c, &ctl, "addr=dot\n").await.unwrap();
    assert_eq!(addr_of(&text(c.read(addr.fid, 0, 40).await.unwrap())), (6, 6));
    put(&c, &addr, "#0,#1").await.unwrap();
    put(&c, &data, "").await.unwrap();
    put(&c, &addr, "#3,#5").await.unwrap();
    put(&c, &data, "").await.unwrap();
    c.clunk(data.fid).await.unwrap();
    assert_eq!(read_file(&c, root, &format!("{id}/body")).await, "one\ntwo\nthree\nfour two\n");
    // limit=addr: forward searches stop at it and do not wrap.
    put(&c, &addr, "#0,#8").await.unwrap();
    put(&c, &ctl, "limit=addr\n").await.unwrap();
    put(&c, &addr, "#0").await.unwrap();
    put(&c, &addr, "/two/").await.unwrap();
    put(&c, &addr, "#5").await.unwrap();
    let e = put(&c, &addr, "/two/").await.unwrap_err();
    assert!(e.to_string().starts_with("address out of range"), "{e}");
    // The first open of addr clears the limit.
    c.clunk(addr.fid).await.unwrap();
    let addr = open(&c, root, &format!("{id}/addr"), ORDWR).await;
    assert_eq!(addr_of(&text(c.read(addr.fid, 0, 40).await.unwrap())), (0, 0));
    put(&c, &addr, "#5").await.unwrap();
    put(&c, &addr, "/two/").await.unwrap();
    assert_eq!(addr_of(&text(c.read(addr.fid, 0, 40).await.unwrap())), (19, 22));

    // ctl messages one by one: dirty, then del warns (and clears), then del.
    put(&c, &ctl, &format!("name {}/f\n", d.dir.display())).await.unwrap();
    put(&c, &ctl, "dirty\nnomenu\nmenu\nfont /lib/font/bit/pelm/unicode.9.font\n").await.unwrap();
    let info = text(c.read(ctl.fid, 0, 200).await.unwrap());
    assert_eq!(info.split_whitespace().nth(4), Some("1"), "dirty: {info:?}");
    assert_eq!(info.split_whitespace().nth(6), Some("/lib/font/bit/pelm/unicode.9.font"));
    put(&c, &ctl, "cleartag\n").await.unwrap();
    assert!(read_file(&c, root, &format!("{id}/tag")).await.ends_with('|'));
    let e = put(&c, &ctl, "frob\n").await.unwrap_err();
    assert!(e.to_string().starts_with("ill-formed control message"), "{e}");
    // As acme's xfidctlwrite: a bare newline, and a name, font, dump or
    // dumpdir without its newline, are ill-formed and change nothing; a
    // name with a blank is set, then refused, and nothing after it runs.
    let name = format!("{}/f", d.dir.display());
    for bad in ["\n", "\nclean\n", &format!("name {name}-new"), "font /lib/font/x.font", "dump win", "dumpdir /tmp"] {
        let e = put(&c, &ctl, bad).await.unwrap_err().to_string();
        assert!(e.starts_with("ill-formed control message"), "{bad:?}: {e}");
    }
    let tag_name = async || read_file(&c, root, &format!("{id}/tag")).await.split(' ').next().unwrap().to_string();
    assert_eq!(tag_name().await, name);
    let e = put(&c, &ctl, &format!("name {name}\tx\nclean\n")).await.unwrap_err().to_string();
    assert!(e.contains("bad character in file name"), "{e}");
    assert_eq!(tag_name().await, format!("{name}\tx"));
    let info = text(c.read(ctl.fid, 0, 200).await.unwrap());
    assert_eq!(info.split_whitespace().nth(4), Some("1"), "clean did not run: {info:?}");
    put(&c, &ctl, &format!("name {name}\n")).await.unwrap();
    // lock and unlock (xfidctlwrite's ctlfid): one fid holds the window's
    // ctl; another fid's lock is refused (acme's waits, forever if the
    // holder never lets go), an unlock with none held is refused (acme's
    // crashes), and a clunk lets go.
    let other = open(&c, root, &format!("{id}/ctl"), ORDWR).await;
    let e = put(&c, &other, "unlock\n").await.unwrap_err().to_string();
    assert!(e.starts_with("ill-formed control message") && e.contains("unlock without lock"), "{e}");
    put(&c, &ctl, "lock\n").await.unwrap();
    put(&c, &ctl, "lock\n").await.unwrap();
    let e = put(&c, &other, "lock\n").await.unwrap_err().to_string();
    assert!(e.starts_with("already in use"), "{e}");
    put(&c, &ctl, "unlock\n").await.unwrap();
    put(&c, &other, "lock\n").await.unwrap();
    c.clunk(other.fid).await.unwrap();
    put(&c, &ctl, "lock\nunlock\n").await.unwrap();
    let e = put(&c, &ctl, "del\n").await.unwrap_err();
    assert!(e.to_string().starts_with("file dirty"), "{e}");
    put(&c, &ctl, "del\n").await.unwrap();
    assert!(!read_file(&c, root, "index").await.lines().any(|l| id_of(l) == id));
    // Files that cannot be opened, and what they say.
    for (path, mode, why) in [
        ("consctl", OREAD, "permission denied"),
        ("editout", OWRITE, "permission denied"),
        ("index", OWRITE, "permission denied"),
        ("draw", OREAD, "permission denied"),
    ] {
        let e = c.open_path(root, path, mode).await.unwrap_err().to_string();
        assert!(e.starts_with(why), "{path}: {e}");
    }
    // Numbers resolve from acme/ too; a deleted window does not.
    let (fid, _) = c.walk(root, &["acme", "acme", "new"]).await.unwrap();
    let st = c.stat(fid).await.unwrap();
    let n: u32 = st.name.parse().unwrap();
    assert!(c.walk(root, &["acme", &n.to_string(), "ctl"]).await.is_ok());
    assert!(c.walk(root, &[&id.to_string()]).await.is_err());
    let st = c.stat(c.walk(root, &[&n.to_string(), "body"]).await.unwrap().0).await.unwrap();
    assert_eq!(st.mode & DMAPPEND, DMAPPEND);
    assert_eq!(st.qid.ty & QTAPPEND, QTAPPEND);
}

/// One raw 9P exchange on a blocking socket: the reply frame, exactly.
pub fn rpc_raw(s: &mut std::os::unix::net::UnixStream, tag: u16, body: Fcall) -> Fcall {
    use std::io::{Read, Write};
    s.write_all(&apex_ninep::to_bytes(&Msg { tag, body })).unwrap();
    let mut size = [0u8; 4];
    s.read_exact(&mut size).unwrap();
    let mut frame = size.to_vec();
    frame.resize(u32::from_le_bytes(size) as usize, 0);
    s.read_exact(&mut frame[4..]).unwrap();
    let msg = apex_ninep::parse(&frame).unwrap();
    assert_eq!(msg.tag, tag);
    msg.body
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn topenfd_passes_a_descriptor_that_writes_the_tag() {
    use std::io::Write;
    use std::os::fd::AsRawFd;
    let d = acme_daemon("acme-openfd");
    let (c, root) = acme_client(&d, 8192).await;
    let (_ctl, id) = new_window(&c, root).await;
    // win: Topenfd ID/tag OWRITE, then write "Send " through the fd.
    let path = d.dir.join("acme");
    let raw = tokio::task::spawn_blocking(move || {
        let mut s = std::os::unix::net::UnixStream::connect(&path).unwrap();
        let v = rpc_raw(&mut s, NOTAG, Fcall::Tversion { msize: 8192, version: "9P2000".into() });
        assert!(matches!(v, Fcall::Rversion { .. }));
        let a = rpc_raw(&mut s, 1, Fcall::Tattach { fid: 0, afid: NOFID, uname: "u".into(), aname: "".into() });
        assert!(matches!(a, Fcall::Rattach { .. }));
        let w = rpc_raw(&mut s, 2, Fcall::Twalk { fid: 0, newfid: 1, wnames: vec![id.to_string(), "tag".into()] });
        assert!(matches!(w, Fcall::Rwalk { wqids } if wqids.len() == 2));
        let o = rpc_raw(&mut s, 3, Fcall::Topenfd { fid: 1, mode: OWRITE });
        assert!(matches!(o, Fcall::Ropenfd { iounit, .. } if iounit > 0), "{o:?}");
        let fd = apex_ninep::fdpass::recv_fd(s.as_raw_fd()).unwrap();
        let mut f = std::fs::File::from(fd);
        f.write_all(b"Send ").unwrap();
        drop(f);
        // The fid moved to the pump: it is free again on this connection.
        let w = rpc_raw(&mut s, 4, Fcall::Twalk { fid: 0, newfid: 1, wnames: vec![] });
        assert!(matches!(w, Fcall::Rwalk { .. }), "{w:?}");
        s
    })
    .await
    .unwrap();
    let tag = until(
        || "Send did not reach the tag".into(),
        async || Some(read_file(&c, root, &format!("{id}/tag")).await).filter(|t| t.ends_with("Send ")),
    )
    .await;
    assert!(tag.contains(" Del Snarf "), "{tag}");
    // An OREAD openfd of the body streams its text, then EOF.
    write_file(&c, root, &format!("{id}/body"), "through a pipe\n").await.unwrap();
    let text_read = tokio::task::spawn_blocking(move || {
        use std::io::Read;
        let mut s = raw;
        let w = rpc_raw(&mut s, 5, Fcall::Twalk { fid: 0, newfid: 2, wnames: vec![id.to_string(), "body".into()] });
        assert!(matches!(w, Fcall::Rwalk { .. }));
        let o = rpc_raw(&mut s, 6, Fcall::Topenfd { fid: 2, mode: OREAD });
        assert!(matches!(o, Fcall::Ropenfd { .. }), "{o:?}");
        let mut f = std::fs::File::from(apex_ninep::fdpass::recv_fd(s.as_raw_fd()).unwrap());
        let mut out = String::new();
        f.read_to_string(&mut out).unwrap();
        out
    })
    .await
    .unwrap();
    assert_eq!(text_read, "through a pipe\n");
    // A window that does not exist cannot be walked to.
    let e = c.walk(root, &["999", "tag"]).await.unwrap_err().to_string();
    assert!(e.contains("file does not exist"), "{e}");
}

/// The acme service through a client this project did not write:
/// python-9p (plan9port's C codec) over the posted `acme` socket.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_independent_client_python_9p_drives_the_acme_service() {
    let Some(python) = crate::client_python("python-9p", "APEX_PYTHON9P_PYTHON") else { return };
    let d = acme_daemon("acme-python9p");
    let socket = d.dir.join("acme").display().to_string();
    let stdout = crate::run_script(&python, "python9p_acme.py", &[&socket]);
    let id: u32 =
        stdout.strip_prefix("python-9p acme: ok ").unwrap_or_else(|| panic!("{stdout}")).trim().parse().unwrap();
    // Its written-back look selected "beta"; our client agrees.
    let (c, root) = acme_client(&d, 8192).await;
    assert_eq!(read_file(&c, root, &format!("{id}/body")).await, "alpha\nbeta\ngamma\n");
    let ctl = open(&c, root, &format!("{id}/ctl"), ORDWR).await;
    let addr = open(&c, root, &format!("{id}/addr"), ORDWR).await;
    put(&c, &ctl, "addr=dot").await.unwrap();
    assert_eq!(addr_of(&text(c.read(addr.fid, 0, 40).await.unwrap())), (6, 10));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn edit_commands_run_through_the_event_file() {
    let d = acme_daemon("acme-edit");
    let dir = d.dir.display().to_string();
    let (c, root) = acme_client(&d, 8192).await;
    let (ctl, id) = new_window(&c, root).await;
    put(&c, &ctl, &format!("name {dir}/notes\n")).await.unwrap();
    let ev = open(&c, root, &format!("{id}/event"), ORDWR).await;
    write_file(&c, root, &format!("{id}/body"), "one two one\nthree\n").await.unwrap();
    // Each Edit is put in the tag and executed there (x, tag, written back).
    let edit = async |cmd: &str| -> Result<(), ClientError> {
        put(&c, &ctl, "cleartag\n").await.unwrap();
        let tag = read_file(&c, root, &format!("{id}/tag")).await;
        let q0 = tag.chars().count();
        write_file(&c, root, &format!("{id}/tag"), &format!(" Edit {cmd}")).await.unwrap();
        let q1 = q0 + 1 + format!("Edit {cmd}").chars().count();
        put(&c, &ev, &format!("Mx{} {q1}\n", q0 + 1)).await.map(|_| ())
    };
    let body = async || read_file(&c, root, &format!("{id}/body")).await;
    edit(",x/one/ c/1/").await.unwrap();
    assert_eq!(body().await, "1 two 1\nthree\n");
    // A pipe through the shell in the window's directory.
    edit("2|tr a-z A-Z").await.unwrap();
    assert_eq!(body().await, "1 two 1\nTHREE\n");
    // Every change of one command is against the original text, in order.
    edit(",x/[0-9]/ {\ni/(/\na/)/\n}").await.unwrap();
    assert_eq!(body().await, "(1) two (1)\nTHREE\n");
    // One Edit is one undo step; u undoes it.
    edit("u").await.unwrap();
    assert_eq!(body().await, "1 two 1\nTHREE\n");
    // A look written back at a word of the body searches on from its end
    // (acme's look3), finding the next occurrence, not the same one.
    put(&c, &ctl, "cleartag\n").await.unwrap();
    let look = open(&c, root, "new/ctl", ORDWR).await;
    let lid = id_of(&text(c.read(look.fid, 0, 12).await.unwrap()));
    let lev = open(&c, root, &format!("{lid}/event"), ORDWR).await;
    write_file(&c, root, &format!("{lid}/body"), "word x word y\n").await.unwrap();
    let laddr = open(&c, root, &format!("{lid}/addr"), ORDWR).await;
    put(&c, &laddr, "#0").await.unwrap();
    put(&c, &look, "dot=addr\n").await.unwrap();
    put(&c, &lev, "ML0 4\n").await.unwrap();
    put(&c, &look, "addr=dot\n").await.unwrap();
    assert_eq!(addr_of(&text(c.read(laddr.fid, 0, 40).await.unwrap())), (7, 11));
    for f in [laddr, lev, look] {
        c.clunk(f.fid).await.unwrap();
    }
    // Undo and Redo executed through the event file are reported with the
    // writer's origin letter (acme's winundo under the event's seq), not F,
    // so win keeps its output point.
    let mut seen = String::new();
    events_until(&c, &ev, &mut seen, "MD").await;
    let from = seen.len();
    let run = async |word: &str| {
        put(&c, &ctl, "cleartag\n").await.unwrap();
        let q0 = read_file(&c, root, &format!("{id}/tag")).await.chars().count();
        write_file(&c, root, &format!("{id}/tag"), &format!(" {word}")).await.unwrap();
        put(&c, &ev, &format!("Mx{} {}\n", q0 + 1, q0 + 1 + word.len())).await.unwrap();
    };
    run("Redo").await;
    assert_eq!(body().await, "(1) two (1)\nTHREE\n");
    events_until(&c, &ev, &mut seen, "MI0 1 0 1 (").await;
    run("Undo").await;
    assert_eq!(body().await, "1 two 1\nTHREE\n");
    let mut undone = String::new();
    events_until(&c, &ev, &mut undone, "MD0 1 0 0").await;
    let ours = format!("{}{undone}", &seen[from..]);
    assert!(!ours.contains("FD") && !ours.contains("FI"), "{ours}");
    // = prints where dot is into DIR/+Errors; dot is the addressed line.
    edit("2").await.unwrap();
    edit("=").await.unwrap();
    let errors = format!("{dir}/+Errors");
    until(
        || format!("no {errors} with the position"),
        async || {
            let index = read_file(&c, root, "index").await;
            let line = index.lines().find(|l| l.contains(&format!("{errors} Del Snarf")))?;
            let text = read_file(&c, root, &format!("{}/body", id_of(line))).await;
            text.contains(&format!("{dir}/notes:2\n")).then_some(())
        },
    )
    .await;
    // Mistakes change nothing; as acme's xfideventwrite, the event write
    // succeeds and the message goes to DIR/+Errors. A bad second line
    // cancels the first too (editerror drops every pending change).
    let errors_text = async || {
        let index = read_file(&c, root, "index").await;
        let line = index.lines().find(|l| l.contains(&format!("{errors} Del Snarf"))).unwrap();
        read_file(&c, root, &format!("{}/body", id_of(line))).await
    };
    for (cmd, says) in [
        (",s/zzz/y/", "Edit: no substitution"),
        ("1d\n1c/x/", "out of order or overlapping"),
        ("k", "sam's"),
        ("1d\n,s/((/x/", "bad regexp"),
    ] {
        let before = errors_text().await;
        edit(cmd).await.unwrap_or_else(|e| panic!("{cmd:?}: the event write was refused: {e}"));
        let after = errors_text().await;
        let said = after.strip_prefix(&before).unwrap_or(&after);
        assert!(said.contains(says) && said.ends_with('\n'), "{cmd:?}: {said:?}");
        assert_eq!(body().await, "1 two 1\nTHREE\n");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn label_cons_errors_rdsel_and_wrsel_do_what_acme_does() {
    let d = acme_daemon("acme-rest");
    let dir = d.dir.display().to_string();
    let (c, root) = acme_client(&d, 8192).await;
    let (ctl, id) = new_window(&c, root).await;
    put(&c, &ctl, &format!("name {dir}/sel.txt\n")).await.unwrap();
    write_file(&c, root, &format!("{id}/body"), "alpha beta gamma\n").await.unwrap();
    // label: writes accepted and ignored, reads empty (rio's).
    write_file(&c, root, "label", "my label").await.unwrap();
    assert_eq!(read_file(&c, root, "label").await, "");
    // cons: writes land in +Errors (aname "" has no directory).
    // A rune cut between two writes is joined, as acme does.
    let cons = open(&c, root, "cons", OWRITE).await;
    let e_acute = "é".as_bytes();
    c.write(cons.fid, 0, &[b"from cons \xc3".as_slice()].concat()).await.unwrap();
    c.write(cons.fid, 0, &[&e_acute[1..], b"\n".as_slice()].concat()).await.unwrap();
    c.clunk(cons.fid).await.unwrap();
    // errors: writes land in DIR/+Errors for the window's directory.
    write_file(&c, root, &format!("{id}/errors"), "from errors\n").await.unwrap();
    let index = read_file(&c, root, "index").await;
    let body_of = async |name: &str| {
        let line = index.lines().find(|l| l[60..].starts_with(&format!("{name} ")))?;
        Some(read_file(&c, root, &format!("{}/body", id_of(line))).await)
    };
    assert_eq!(body_of("+Errors").await.as_deref(), Some("from cons é\n"), "{index}");
    assert_eq!(body_of(&format!("{dir}/+Errors")).await.as_deref(), Some("from errors\n"), "{index}");
    // rdsel: the selection as it was at open; one opener at a time.
    let addr = open(&c, root, &format!("{id}/addr"), ORDWR).await;
    put(&c, &addr, "#6,#10").await.unwrap();
    put(&c, &ctl, "dot=addr\n").await.unwrap();
    let rdsel = open(&c, root, &format!("{id}/rdsel"), OREAD).await;
    let e = c.open_path(root, &format!("{id}/rdsel"), OREAD).await.unwrap_err().to_string();
    assert!(e.starts_with("already in use"), "{e}");
    put(&c, &addr, "#0,#5").await.unwrap();
    put(&c, &ctl, "dot=addr\n").await.unwrap();
    assert_eq!(text(c.read_all(&rdsel).await.unwrap()), "beta");
    c.clunk(rdsel.fid).await.unwrap();
    // wrsel: opening deletes the selection; writes follow one another.
    let wrsel = open(&c, root, &format!("{id}/wrsel"), OWRITE).await;
    assert_eq!(read_file(&c, root, &format!("{id}/body")).await, " beta gamma\n");
    put(&c, &wrsel, "ALPHA").await.unwrap();
    put(&c, &wrsel, "!").await.unwrap();
    c.clunk(wrsel.fid).await.unwrap();
    assert_eq!(read_file(&c, root, &format!("{id}/body")).await, "ALPHA! beta gamma\n");
    // Its close selects what was written (xfidclose's textshow).
    put(&c, &ctl, "addr=dot\n").await.unwrap();
    assert_eq!(addr_of(&text(c.read(addr.fid, 0, 40).await.unwrap())), (0, 6));
    // A body write moves dot to the end of what it wrote (xfidwrite's
    // textshow), unless the window is noscroll.
    write_file(&c, root, &format!("{id}/body"), "more\n").await.unwrap();
    put(&c, &ctl, "addr=dot\n").await.unwrap();
    assert_eq!(addr_of(&text(c.read(addr.fid, 0, 40).await.unwrap())), (23, 23));
    put(&c, &addr, "#0").await.unwrap();
    put(&c, &ctl, "dot=addr\nnoscroll\n").await.unwrap();
    write_file(&c, root, &format!("{id}/body"), "still\n").await.unwrap();
    put(&c, &ctl, "addr=dot\nscroll\n").await.unwrap();
    assert_eq!(addr_of(&text(c.read(addr.fid, 0, 40).await.unwrap())), (0, 0));
    // Bytes as acme makes them runes (cvttorunes, in xfidwrite): NULs
    // dropped, a U+FFFD for each byte that starts no UTF-8 sequence, a
    // rune cut by a write's end joined with the next write; never refused.
    let ctl2 = open(&c, root, "new/ctl", ORDWR).await;
    let id2 = id_of(&text(c.read(ctl2.fid, 0, 12).await.unwrap()));
    let body = open(&c, root, &format!("{id2}/body"), OWRITE).await;
    c.write(body.fid, 0, b"a\0b\xffc\xe6\xbcd \xe6").await.unwrap();
    c.write(body.fid, 0, b"\xbc\xa2\n").await.unwrap();
    c.clunk(body.fid).await.unwrap();
    assert_eq!(read_file(&c, root, &format!("{id2}/body")).await, "ab\u{fffd}c\u{fffd}\u{fffd}d 漢\n");
    let tag = open(&c, root, &format!("{id2}/tag"), OWRITE).await;
    c.write(tag.fid, 0, b"\0x\xfe").await.unwrap();
    c.clunk(tag.fid).await.unwrap();
    assert!(read_file(&c, root, &format!("{id2}/tag")).await.ends_with("x\u{fffd}"));
    c.clunk(ctl2.fid).await.unwrap();
    // acme refuses every wstat, a truncation too; the body stays.
    let (fid, _) = c.walk(root, &[&id2.to_string(), "body"]).await.unwrap();
    let truncate = apex_ninep::fcall::Stat { length: 0, ..apex_ninep::fcall::Stat::dont_touch() };
    let e = c.wstat(fid, truncate).await.unwrap_err().to_string();
    assert!(e.starts_with("permission denied"), "{e}");
    c.clunk(fid).await.unwrap();
    assert!(read_file(&c, root, &format!("{id2}/body")).await.ends_with("漢\n"));
    // editout opens only while an Edit pipe runs.
    let e = c.open_path(root, &format!("{id}/editout"), OWRITE).await.unwrap_err().to_string();
    assert!(e.starts_with("permission denied") && e.contains("Edit"), "{e}");
    // ctl clean also forgets the undo history (ctl field 9 goes to 0).
    let undoable = |info: &str| info.split_whitespace().nth(8).map(String::from);
    assert_eq!(undoable(&read_file(&c, root, &format!("{id}/ctl")).await).as_deref(), Some("1"));
    put(&c, &ctl, "clean\n").await.unwrap();
    let info = read_file(&c, root, &format!("{id}/ctl")).await;
    assert_eq!((undoable(&info).as_deref(), info.split_whitespace().nth(4)), (Some("0"), Some("0")), "{info}");
}
