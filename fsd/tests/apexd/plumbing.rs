//! The session's plumber end to end: a tool's rules claim text for the
//! life of its attachment, and a B3 written back through an acme event
//! file reaches the tool's port; the posted `plumb` service with
//! python-9p; the session's own rules kept over a restart; what the
//! plumber refuses, refused.

use crate::acme::{acme_client, new_window, open, put, write_file};
use crate::attach::until;
use crate::{read, text, write, Daemon};
use apex_core::AttachmentKind;
use apex_fsd::attach::conn::Attached;
use apex_ninep::fcall::*;
use apex_ninep::{Client, File};
use std::time::Duration;

const WAIT: Duration = Duration::from_secs(10);

/// A daemon that posts `main`'s plumber as `plumb` and its acme tree.
fn plumb_daemon(name: &str, extra: &[&str]) -> Daemon {
    let mut args: Vec<String> = vec!["--plumb".into(), "main".into(), "--acme".into(), "main".into()];
    args.extend(extra.iter().map(|s| s.to_string()));
    let d = Daemon::start_with(name, &args);
    let deadline = std::time::Instant::now() + WAIT;
    while !d.dir.join("plumb").exists() || !d.dir.join("acme").exists() {
        assert!(std::time::Instant::now() < deadline, "apexd did not post plumb");
        std::thread::sleep(Duration::from_millis(20));
    }
    d
}

/// Reads one whole message from an open port, waiting at most [`WAIT`].
async fn next_message(c: &Client, port: &File) -> apex_core::plumb::Message {
    let mut bytes = Vec::new();
    loop {
        if let Some((m, _)) = apex_core::plumb::Message::parse(&bytes).unwrap() {
            return m;
        }
        let got = tokio::time::timeout(WAIT, c.read(port.fid, 0, 8192)).await.expect("a message on the port");
        bytes.extend(got.unwrap());
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tool_s_rules_claim_text_until_it_detaches() {
    let d = plumb_daemon("plumb-tool", &[]);
    let c = d.client().await;
    let root = c.attach("glenda", "").await.unwrap();
    let tool = Attached::open(&c, "main", AttachmentKind::Tool, "tracker").await.unwrap();

    // Rules that do not read are refused whole, with line and reason.
    tool.with(|l| l.set_rules("type is text\ndata frob x\nplumb to issues\n"));
    let e = tool.flush().await.unwrap_err().to_string();
    assert!(e.contains(":2: unknown verb frob"), "{e}");
    assert!(!text(read(&c, root, "main/meta/rules").await.unwrap()).contains("issues"));

    tool.with(|l| l.set_rules("type is text\ndata matches 'issue ([0-9]+)'\nattr add id=$1\nplumb to issues\n"));
    tool.flush().await.unwrap();
    let rules = text(read(&c, root, "main/meta/rules").await.unwrap());
    assert!(rules.contains("issue ([0-9]+)"), "{rules}");
    let listed = String::from_utf8_lossy(&read(&c, root, "main/plumb").await.unwrap()).into_owned();
    assert!(listed.contains("issues"), "the tool's port is a file");

    // The tool reads its port.
    let port = c.open_path(root, "main/plumb/issues", OREAD).await.unwrap();
    let reading = tokio::spawn({
        let c = c.clone();
        async move { (next_message(&c, &port).await, port) }
    });

    // A B3 swept over "issue 42" and written back through the window's
    // event file goes to the session's plumber, and the tool's rule
    // takes it.
    let (ac, aroot) = acme_client(&d, 8192).await;
    let (_ctl, id) = new_window(&ac, aroot).await;
    write_file(&ac, aroot, &format!("{id}/body"), "see issue 42 now\n").await.unwrap();
    let ev = open(&ac, aroot, &format!("{id}/event"), ORDWR).await;
    put(&ac, &ev, "ML4 12 \n").await.unwrap();
    let (m, port) = tokio::time::timeout(WAIT, reading).await.expect("the tool got the message").unwrap();
    assert_eq!((m.src.as_str(), m.dst.as_str(), m.data.as_slice()), ("acme", "issues", &b"issue 42"[..]));
    assert_eq!(m.attr("id"), Some("42"));
    // A null click in dot plumbs dot, as acme's look3 does.
    let ctl = open(&ac, aroot, &format!("{id}/ctl"), ORDWR).await;
    let addr = open(&ac, aroot, &format!("{id}/addr"), ORDWR).await;
    put(&ac, &addr, "#4,#12").await.unwrap();
    put(&ac, &ctl, "dot=addr").await.unwrap();
    put(&ac, &ev, "ML7 7 \n").await.unwrap();
    let m = next_message(&c, &port).await;
    assert_eq!((m.data.as_slice(), m.attr("click")), (&b"issue 42"[..], None));
    // A null click on a blank plumbs nothing (and looks for nothing).
    put(&ac, &ev, "ML3 3 \n").await.unwrap();
    let quiet = tokio::time::timeout(Duration::from_millis(300), c.read(port.fid, 0, 8192)).await;
    assert!(quiet.is_err(), "nothing came: {quiet:?}");
    c.clunk(port.fid).await.unwrap();

    // The tool detaches: its rule and its port go.
    tool.close().await;
    until(
        || "the tool's rule outlived it".into(),
        async || (!text(read(&c, root, "main/meta/rules").await.unwrap()).contains("issues")).then_some(()),
    )
    .await;
    let listed = String::from_utf8_lossy(&read(&c, root, "main/plumb").await.unwrap()).into_owned();
    assert!(!listed.contains("issues"), "{listed:?}");
    let e = write(&c, root, "main/plumb/send", "me\n\n/tmp\ntext\n\n8\nissue 42").await.unwrap_err().to_string();
    assert!(e.contains("no matching plumb rule"), "{e}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_session_s_plumber_delivers_to_every_reader_and_refuses_what_the_plumber_refuses() {
    let d = plumb_daemon("plumb-send", &[]);
    let files = d.dir.join("files");
    std::fs::create_dir_all(&files).unwrap();
    std::fs::write(files.join("FILE"), "a\nb\nc\n").unwrap();
    let wdir = files.display().to_string();
    // The posted service's root is the plumber's, as plan9port's is.
    let p = apex_ninep::dial(&format!("unix!{}", d.dir.join("plumb").display()), 8192).await.unwrap();
    let proot = p.attach("glenda", "").await.unwrap();
    let names = text(read(&p, proot, "rules").await.unwrap());
    assert_eq!(names, "include basic\n", "a session starts with the basic rules");

    // Two readers of `edit`: each gets the message, rewritten by the rule.
    let readers: Vec<_> = readers_of(&p, proot, "edit", 2).await;
    let msg = format!("me\n\n{wdir}\ntext\nclick=2\n6\nFILE:3");
    write(&p, proot, "send", &msg).await.unwrap();
    for (c, port) in &readers {
        let m = next_message(c, port).await;
        assert_eq!(m.dst, "edit");
        assert_eq!(m.data, format!("{wdir}/FILE").into_bytes());
        assert_eq!((m.attr("addr"), m.attr("click")), (Some("3"), None));
    }
    // A message in two writes is one message.
    write_in_two(&p, proot, &msg).await;
    for (c, port) in &readers {
        assert_eq!(next_message(c, port).await.attr("addr"), Some("3"));
    }

    // What the plumber refuses: no rule; a port nobody reads and no
    // program to start; not a message; a port that does not exist.
    let refused = [
        ("me\n\n/\ntext\n\n5\nhello".to_string(), "no matching plumb rule"),
        (format!("me\n\n{wdir}\ntext\n\n6\nFILE:3"), ""),
        ("me\nnowhere\n/\ntext\n\n1\nx".into(), "no such plumb port \"nowhere\""),
        ("me\n\n/\ntext\n\nmany\nx".into(), "the data length \"many\" is not a number"),
        ("me\n\n/\ntext\n\n1\nxyz".into(), "bytes after the message's data"),
    ];
    for (m, says) in &refused[..1] {
        let e = write(&p, proot, "send", m).await.unwrap_err().to_string();
        assert!(e.contains(says), "{m:?}: {e}");
    }
    for (c, port) in readers {
        c.clunk(port.fid).await.unwrap();
    }
    let e = write(&p, proot, "send", &refused[1].0).await.unwrap_err().to_string();
    assert!(e.contains("nobody reads port edit"), "{e}");
    for (m, says) in &refused[2..] {
        let e = write(&p, proot, "send", m).await.unwrap_err().to_string();
        assert!(e.contains(says), "{m:?}: {e}");
    }

    // Rules: a bad text refused whole, with its line; a good one replaces
    // the session's own (OTRUNC) or adds to them (no OTRUNC).
    let bad = "type is text\nplumb to edit\n\ndata matches '(x'\nplumb to edit\n";
    let f = p.open_path(proot, "rules", OWRITE | OTRUNC).await.unwrap();
    let e = p.write(f.fid, 0, bad.as_bytes()).await.unwrap_err().to_string();
    p.clunk(f.fid).await.unwrap();
    assert!(e.contains("rules:4: bad regexp \"(x\": unclosed group"), "{e}");
    assert_eq!(text(read(&p, proot, "rules").await.unwrap()), "include basic\n", "refused whole");
    let f = p.open_path(proot, "rules", OWRITE | OTRUNC).await.unwrap();
    p.write(f.fid, 0, b"data is one\nplumb to first\n\n").await.unwrap();
    p.clunk(f.fid).await.unwrap();
    let f = p.open_path(proot, "rules", OWRITE).await.unwrap();
    // In pieces, the last rule set waiting for its action until the clunk.
    p.write(f.fid, 0, b"data is two\n").await.unwrap();
    p.write(f.fid, 0, b"plumb to second").await.unwrap();
    p.clunk(f.fid).await.unwrap();
    let rules = text(read(&p, proot, "rules").await.unwrap());
    assert_eq!(rules, "data is one\nplumb to first\n\ndata is two\nplumb to second");
    // One writer at a time, as the plumber's "in use".
    let f = p.open_path(proot, "rules", OWRITE).await.unwrap();
    let e = p.open_path(proot, "rules", OWRITE).await.unwrap_err().to_string();
    assert!(e.contains("rules: in use"), "{e}");
    p.clunk(f.fid).await.unwrap();
    assert_eq!(text(read(&p, proot, "rules").await.unwrap()), rules, "an open and clunk adds nothing");
    let listed = String::from_utf8_lossy(&read(&p, proot, "").await.unwrap()).into_owned();
    assert!(listed.contains("first") && listed.contains("second") && !listed.contains("edit"), "{listed:?}");
    // A truncating open with nothing written leaves no rules.
    let f = p.open_path(proot, "rules", OWRITE | OTRUNC).await.unwrap();
    p.clunk(f.fid).await.unwrap();
    assert_eq!(text(read(&p, proot, "rules").await.unwrap()), "");
}

/// `n` clients reading port `name`, opened before anything is sent.
async fn readers_of(p: &Client, _root: u32, name: &str, n: usize) -> Vec<(Client, File)> {
    let mut out = Vec::new();
    for _ in 0..n {
        let c = p.clone();
        let root = c.attach("glenda", "").await.unwrap();
        out.push((c.clone(), c.open_path(root, name, OREAD).await.unwrap()));
    }
    out
}

async fn write_in_two(c: &Client, root: u32, msg: &str) {
    let f = c.open_path(root, "send", OWRITE).await.unwrap();
    let (a, b) = msg.split_at(9);
    c.write(f.fid, 0, a.as_bytes()).await.unwrap();
    c.write(f.fid, 0, b.as_bytes()).await.unwrap();
    c.clunk(f.fid).await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_session_s_rules_survive_a_restart() {
    let state = std::env::temp_dir().join(format!("apex-e2e-plumb-state-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&state);
    let args = ["--state", state.to_str().unwrap()];
    let rules = "data matches 'kept ([0-9]+)'\nplumb to kept\n";
    {
        let d = plumb_daemon("plumb-restart", &args);
        let c = d.client().await;
        let root = c.attach("glenda", "").await.unwrap();
        let f = c.open_path(root, "main/plumb/rules", OWRITE | OTRUNC).await.unwrap();
        c.write(f.fid, 0, rules.as_bytes()).await.unwrap();
        c.clunk(f.fid).await.unwrap();
    }
    let d = plumb_daemon("plumb-restart", &args);
    let c = d.client().await;
    let root = c.attach("glenda", "").await.unwrap();
    assert_eq!(text(read(&c, root, "main/plumb/rules").await.unwrap()), rules);
    let port = c.open_path(root, "main/plumb/kept", OREAD).await.unwrap();
    write(&c, root, "main/plumb/send", "me\n\n/\ntext\n\n6\nkept 7").await.unwrap();
    assert_eq!(next_message(&c, &port).await.dst, "kept");
    drop(d);
    let _ = std::fs::remove_dir_all(&state);
}

/// python-9p (plan9port's C codec): one client sends to the posted
/// `plumb/send`, another reads the `edit` port.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_independent_client_python_9p_sends_and_reads_a_port() {
    let Some(python) = crate::client_python("python-9p", "APEX_PYTHON9P_PYTHON") else { return };
    let d = plumb_daemon("plumb-python9p", &[]);
    let files = d.dir.join("files");
    std::fs::create_dir_all(&files).unwrap();
    std::fs::write(files.join("FILE"), "a\nb\nc\n").unwrap();
    let socket = d.dir.join("plumb").display().to_string();
    let out = crate::run_script(&python, "python9p_plumb.py", &[&socket, &files.display().to_string()]);
    assert!(out.contains("python-9p plumb: ok"), "{out}");
}

/// apexd on namespace `ns` (kept as it is, unlike [`Daemon::start`]'s)
/// with `home` as its `$HOME`, once it serves.
async fn apexd_in(ns: &std::path::Path, home: &std::path::Path, extra: &[&str]) -> Daemon {
    let child = std::process::Command::new(env!("CARGO_BIN_EXE_apexd"))
        .args(["--ephemeral", "--namespace"])
        .arg(ns)
        .args(extra)
        .env("HOME", home)
        .env_remove("PLAN9")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let d = Daemon { child, dir: ns.to_path_buf() };
    until(|| "apexd did not post".into(), async || d.socket().exists().then_some(())).await;
    d
}

/// Writes the session's own rules, replacing them (`9p write`'s OTRUNC).
async fn set_rules(c: &Client, root: u32, rules: &str) {
    let f = c.open_path(root, "main/plumb/rules", OWRITE | OTRUNC).await.unwrap();
    c.write(f.fid, 0, rules.as_bytes()).await.unwrap();
    c.clunk(f.fid).await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn start_and_client_run_a_program_when_no_one_reads_and_a_client_s_message_waits_for_it() {
    let d = plumb_daemon("plumb-start", &[]);
    let c = d.client().await;
    let root = c.attach("glenda", "").await.unwrap();
    let rules = "data matches 'start (.+)'\nplumb to started\nplumb start touch $1\n\n\
                 data matches 'client (.+)'\nplumb to held\nplumb client touch $1\n\n\
                 data is nothing\nplumb to none\nplumb start /no/such/program\n";
    set_rules(&c, root, rules).await;
    let dir = d.dir.display().to_string();
    let send = |data: String| {
        let c = c.clone();
        async move { write(&c, root, "main/plumb/send", &format!("me\n\n/\ntext\n\n{}\n{data}", data.len())).await }
    };
    // start: the program runs with the rule's arguments; the message goes.
    send(format!("start {dir}/started")).await.unwrap();
    until(|| "plumb start ran no touch".into(), async || d.dir.join("started").exists().then_some(())).await;
    // client: the program runs, and the message waits for the port's
    // first reader.
    send(format!("client {dir}/client")).await.unwrap();
    until(|| "plumb client ran no touch".into(), async || d.dir.join("client").exists().then_some(())).await;
    let port = c.open_path(root, "main/plumb/held", OREAD).await.unwrap();
    let m = next_message(&c, &port).await;
    assert_eq!(m.data, format!("client {dir}/client").into_bytes());
    // A program that cannot start is the send's error.
    let e = send("nothing".into()).await.unwrap_err().to_string();
    assert!(e.contains("plumb start /no/such/program"), "{e}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_starts_with_the_user_s_plumbing_file() {
    let home = std::env::temp_dir().join(format!("apex-e2e-plumb-home-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&home);
    std::fs::create_dir_all(home.join("lib")).unwrap();
    let mine = "editor=acme\n\n# mine\ntype is text\ndata matches 'mine'\nplumb to mine\n\ninclude basic\n";
    std::fs::write(home.join("lib/plumbing"), mine).unwrap();
    let ns = home.join("ns");
    let d = apexd_in(&ns, &home, &[]).await;
    let c = d.client().await;
    let root = c.attach("glenda", "").await.unwrap();
    assert_eq!(text(read(&c, root, "main/plumb/rules").await.unwrap()), mine);
    let listed = String::from_utf8_lossy(&read(&c, root, "main/plumb").await.unwrap()).into_owned();
    assert!(listed.contains("mine") && listed.contains("edit"), "its ports and basic's");
    drop(d);

    // A file that does not read: the basic set, and the session says why.
    std::fs::write(home.join("lib/plumbing"), "type is text\ndata frob x\nplumb to p\n").unwrap();
    let d = apexd_in(&ns, &home, &[]).await;
    let c = d.client().await;
    let root = c.attach("glenda", "").await.unwrap();
    assert_eq!(text(read(&c, root, "main/plumb/rules").await.unwrap()), "include basic\n");
    let said = text(read(&c, root, "main/meta/notifications").await.unwrap());
    assert!(said.contains("lib/plumbing:2: unknown verb frob"), "{said}");
    drop(d);
    let _ = std::fs::remove_dir_all(&home);
}

/// Where a plumber is posted already, `apexd --plumb` takes nothing from
/// it: the socket stays the other plumber's, and apexd serves on.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_live_plumber_is_left_alone() {
    let ns = std::env::temp_dir().join(format!("apex-e2e-plumb-live-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&ns);
    std::fs::create_dir_all(&ns).unwrap();
    std::fs::set_permissions(&ns, std::os::unix::fs::PermissionsExt::from_mode(0o700)).unwrap();
    let theirs = std::os::unix::net::UnixListener::bind(ns.join("plumb")).unwrap();
    let d = apexd_in(&ns, &ns, &["--plumb", "main"]).await;
    let _c = std::os::unix::net::UnixStream::connect(ns.join("plumb")).unwrap();
    theirs.set_nonblocking(true).unwrap();
    assert!(theirs.accept().is_ok(), "the plumb socket is still the other plumber's");
    // The session's plumber is there all the same, in apex's tree.
    let c = d.client().await;
    let root = c.attach("glenda", "").await.unwrap();
    assert_eq!(text(read(&c, root, "main/plumb/rules").await.unwrap()), "include basic\n");
}

/// B3 written back through an event file goes to another program's
/// plumber (here a second apexd's, posted where the first looks) when
/// the session's rules take nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn b3_no_session_rule_takes_goes_to_another_program_s_plumber() {
    let other = plumb_daemon("plumb-system", &[]);
    let oc = other.client().await;
    let oroot = oc.attach("glenda", "").await.unwrap();
    set_rules(&oc, oroot, "data matches 'ticket ([0-9]+)'\nplumb to tickets\n").await;
    let port = oc.open_path(oroot, "main/plumb/tickets", OREAD).await.unwrap();

    // This daemon's namespace has that plumber posted as `plumb`.
    let ns = std::env::temp_dir().join(format!("apex-e2e-plumb-first-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&ns);
    std::fs::create_dir_all(&ns).unwrap();
    std::fs::set_permissions(&ns, std::os::unix::fs::PermissionsExt::from_mode(0o700)).unwrap();
    std::os::unix::fs::symlink(other.dir.join("plumb"), ns.join("plumb")).unwrap();
    let d = apexd_in(&ns, &ns, &["--acme", "main"]).await;
    let (ac, aroot) = acme_client(&d, 8192).await;
    let (_ctl, id) = new_window(&ac, aroot).await;
    write_file(&ac, aroot, &format!("{id}/body"), "see ticket 7 now\n").await.unwrap();
    let ev = open(&ac, aroot, &format!("{id}/event"), ORDWR).await;
    put(&ac, &ev, "ML4 12 \n").await.unwrap();
    let m = next_message(&oc, &port).await;
    assert_eq!((m.src.as_str(), m.data.as_slice()), ("acme", &b"ticket 7"[..]));
}
