//! `--listen tcp!HOST!PORT` without `--insecure`: TLS 1.3, the daemon's
//! certificate pinned by its fingerprint, a token proven with 9P's Tauth
//! before anything is answered, and the token's scope enforced on every
//! request. Each refusal (no token, a wrong one, a replayed proof, a
//! wrong pin, plain 9P to the TLS port, a read token writing, an edit
//! token running a program or a terminal) is said plainly and changes
//! nothing.

use crate::{read, text, write};
use apex_ninep::fcall::*;
use apex_ninep::Client;
use std::io::BufRead;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};

const APEX: &str = env!("CARGO_BIN_EXE_apex");

/// A daemon serving TLS on a free loopback port, its state directory
/// kept (the certificate and tokens live there), all gone on drop.
struct TlsDaemon {
    child: Child,
    dir: PathBuf,
    port: u16,
    pin: String,
}

impl TlsDaemon {
    fn start(name: &str) -> TlsDaemon {
        let dir = std::env::temp_dir().join(format!("apex-e2e-tls-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(dir.join("local")).unwrap();
        std::fs::set_permissions(dir.join("local"), std::os::unix::fs::PermissionsExt::from_mode(0o700)).unwrap();
        let port = apex_tests::sshd::free_port();
        let mut child = Command::new(env!("CARGO_BIN_EXE_apexd"))
            .arg("--namespace")
            .arg(dir.join("ns"))
            .arg("--state")
            .arg(dir.join("state"))
            .args(["-q", "--listen", &format!("tcp!127.0.0.1!{port}")])
            .env("HOME", &dir)
            .env_remove("PLAN9")
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("start apexd");
        let mut line = String::new();
        std::io::BufReader::new(child.stderr.take().unwrap()).read_line(&mut line).unwrap();
        let pin = line.split_whitespace().find(|w| w.starts_with("sha256:")).unwrap_or_else(|| panic!("{line}"));
        let d = TlsDaemon { child, pin: pin.to_string(), dir, port };
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
        while !d.dir.join("ns/apex").exists() {
            assert!(std::time::Instant::now() < deadline, "apexd did not post its socket");
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        d
    }

    /// `apex token new -s SCOPE NAME`, kept in a file of the test's.
    fn token(&self, scope: &str, name: &str) -> PathBuf {
        let out = Command::new(APEX)
            .args(["token", "--state", self.dir.join("state").to_str().unwrap(), "new", "-s", scope, name])
            .output()
            .unwrap();
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        let path = self.dir.join(format!("{name}.token"));
        std::fs::write(&path, &out.stdout).unwrap();
        path
    }

    fn address(&self) -> String {
        format!("tcp!127.0.0.1!{}", self.port)
    }

    /// A client over TLS (the pin checked), not yet attached.
    async fn client(&self) -> Client {
        apex_fsd::import::tls::connect("127.0.0.1", self.port, &self.pin, 65536).await.unwrap()
    }

    /// A client attached with the token in `file`.
    async fn attached(&self, file: &Path) -> (Client, u32) {
        let c = self.client().await;
        let held = apex_fsd::access::tokens::Held::read(file).unwrap();
        let (root, _) = c.attach_proving("glenda", "", |ch| held.prove(ch, "glenda", "")).await.unwrap();
        (c, root)
    }

    /// The daemon's own socket, which needs no token.
    async fn local(&self) -> (Client, u32) {
        let c = apex_ninep::dial(&format!("unix!{}", self.dir.join("ns/apex").display()), 65536).await.unwrap();
        let root = c.attach("glenda", "").await.unwrap();
        (c, root)
    }

    fn import(&self, flags: &[&str]) -> Output {
        Command::new(APEX)
            .arg("import")
            .args(flags)
            .arg(self.address())
            .env("NAMESPACE", self.dir.join("local"))
            .output()
            .unwrap()
    }
}

impl Drop for TlsDaemon {
    fn drop(&mut self) {
        let stop = Command::new(APEX)
            .args(["import", "--stop", &self.address()])
            .env("NAMESPACE", self.dir.join("local"))
            .output();
        // An importer --stop missed (a test that failed half way) is ended
        // all the same, found by the token file it was given.
        if !stop.is_ok_and(|o| o.status.success()) {
            let _ = Command::new("pkill").args(["-f", &self.dir.display().to_string()]).status();
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn said(out: &Output) -> String {
    format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_full_token_imports_the_session_over_tls_and_the_certificate_is_pinned() {
    let d = TlsDaemon::start("full");
    let full = d.token("full", "laptop");
    let listed = Command::new(APEX).args(["token", "--state", d.dir.join("state").to_str().unwrap(), "ls"]).output();
    assert_eq!(String::from_utf8_lossy(&listed.unwrap().stdout), "laptop full\n", "names and scopes, no secret");
    let key = std::fs::metadata(d.dir.join("state/tls/key.der")).unwrap();
    assert_eq!(std::os::unix::fs::PermissionsExt::mode(&key.permissions()) & 0o777, 0o600);
    let tokens = std::fs::metadata(d.dir.join("state/tokens")).unwrap();
    assert_eq!(std::os::unix::fs::PermissionsExt::mode(&tokens.permissions()) & 0o777, 0o600);

    let out = d.import(&["--pin", &d.pin, "--token", full.to_str().unwrap()]);
    assert!(out.status.success(), "{}", said(&out));
    assert!(said(&out).contains("posted acme.127.0.0.1 apex.127.0.0.1"), "{}", said(&out));
    let via = |args: &[&str]| {
        Command::new(APEX).args(["-a", "apex.127.0.0.1"]).args(args).env("NAMESPACE", d.dir.join("local")).output()
    };
    let b = String::from_utf8(via(&["read", "main/buffers/new"]).unwrap().stdout).unwrap().trim().to_string();
    let mut w = Command::new(APEX)
        .args(["-a", "apex.127.0.0.1", "write", &format!("main/buffers/{b}/body")])
        .env("NAMESPACE", d.dir.join("local"))
        .stdin(Stdio::piped())
        .spawn()
        .unwrap();
    std::io::Write::write_all(&mut w.stdin.take().unwrap(), b"over tls\n").unwrap();
    assert!(w.wait().unwrap().success());
    let (c, root) = d.local().await;
    assert_eq!(text(read(&c, root, &format!("main/buffers/{b}/body")).await.unwrap()), "over tls\n");
    // The daemon says where it serves TLS and its pin, for an import
    // over ssh to find.
    let services = text(read(&c, root, "services").await.unwrap());
    assert!(services.contains(&format!("tls {} {}", d.address(), d.pin)), "{services}");

    // Another pin: refused before anything is said, and nothing posted.
    let wrong = format!("sha256:{}", "0".repeat(64));
    let out = d.import(&["-n", "other", "--pin", &wrong, "--token", full.to_str().unwrap()]);
    assert!(!out.status.success() && said(&out).contains("not the pinned"), "{}", said(&out));
    assert!(!d.dir.join("local/other").exists());
    // A token that is not the daemon's: refused, nothing posted.
    let forged = d.dir.join("forged.token");
    std::fs::write(&forged, format!("laptop:{}\n", "ab".repeat(32))).unwrap();
    let out = d.import(&["-n", "forged", "--pin", &d.pin, "--token", forged.to_str().unwrap()]);
    assert!(!out.status.success() && said(&out).contains("authentication failed"), "{}", said(&out));
    assert!(!d.dir.join("local/forged").exists());
    // Without a pin or a token, tcp! is refused saying what it needs.
    let out = d.import(&["-n", "bare"]);
    assert!(said(&out).contains("--pin") && said(&out).contains("--token"), "{}", said(&out));
    // Plain 9P to the TLS port: a 9P error saying so.
    let plain = Command::new(APEX).args(["-a", &d.address(), "ls"]).output().unwrap();
    assert!(said(&plain).contains("serves 9P inside TLS"), "{}", said(&plain));
    // Stopped by its address alone: no pin or token needed to end it.
    let stop = Command::new(APEX)
        .args(["import", "--stop", &d.address()])
        .env("NAMESPACE", d.dir.join("local"))
        .output()
        .unwrap();
    assert!(stop.status.success(), "{}", said(&stop));
    assert!(!d.dir.join("local/apex.127.0.0.1").exists() && !d.dir.join("local/acme.127.0.0.1").exists());
}

/// Bodies of megabytes both ways through TLS, at a small msize (each
/// reply ends inside a record, the rest kept for the next) and at 1 MiB
/// (replies of many records, four in flight): byte for byte what the
/// daemon holds.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn megabytes_cross_tls_both_ways_byte_for_byte() {
    let d = TlsDaemon::start("bulk");
    let full = d.token("full", "bulk");
    let held = apex_fsd::access::tokens::Held::read(&full).unwrap();
    let body: String = (0..60_000).map(|i| format!("line {i} of the body, {}\n", "é".repeat(i % 7))).collect();
    let (local, local_root) = d.local().await;
    for msize in [8192, 65536, 1 << 20] {
        let c = apex_fsd::import::tls::connect("127.0.0.1", d.port, &d.pin, msize).await.unwrap();
        let (root, _) = c.attach_proving("glenda", "", |ch| held.prove(ch, "glenda", "")).await.unwrap();
        let new = c.open_path(root, "main/buffers/new", OREAD).await.unwrap();
        let b = text(c.read_all(&new).await.unwrap()).trim().to_string();
        let path = format!("main/buffers/{b}/body");
        let f = c.open_path(root, &path, OWRITE).await.unwrap();
        c.write_all(&f, 0, body.as_bytes()).await.unwrap();
        c.clunk(f.fid).await.unwrap();
        assert!(text(read(&local, local_root, &path).await.unwrap()) == body, "msize {msize}: written as sent");
        let f = c.open_path(root, &path, OREAD).await.unwrap();
        assert!(c.read_all(&f).await.unwrap() == body.as_bytes(), "msize {msize}: read one at a time");
        let mut ahead = Vec::new();
        c.read_ahead(&f, 4, |part| {
            ahead.extend_from_slice(part);
            Ok(())
        })
        .await
        .unwrap();
        assert!(ahead == body.as_bytes(), "msize {msize}: read four in flight");
        c.clunk(f.fid).await.unwrap();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nothing_is_answered_before_a_token_is_proven_and_a_proof_is_not_replayed() {
    let d = TlsDaemon::start("proof");
    let full = d.token("full", "desk");
    let held = apex_fsd::access::tokens::Held::read(&full).unwrap();
    let c = d.client().await;
    // No token: an attach is refused, and so is anything but proving.
    let e = c.attach("glenda", "").await.unwrap_err().to_string();
    assert!(e.contains("authentication required"), "{e}");
    let e = c.rpc(Fcall::Twalk { fid: 0, newfid: 1, wnames: vec![] }).await.unwrap_err().to_string();
    assert!(e.contains("authenticate first"), "{e}");
    // A proof recorded once answers its own challenge only: written to a
    // fresh auth fid, it proves nothing, and the attach is refused.
    let mut recorded = Vec::new();
    let (root, _) = c
        .attach_proving("glenda", "", |ch| {
            recorded = held.prove(ch, "glenda", "");
            recorded.clone()
        })
        .await
        .unwrap();
    c.clunk(root).await.unwrap();
    // The next attach on that connection names the auth fid proven then:
    // nothing is proven again (this proof would prove nothing).
    let (root, _) = c.attach_proving("glenda", "", |_| b"desk 00".to_vec()).await.unwrap();
    c.clunk(root).await.unwrap();
    // Attaches under many names: a few proven auth fids are kept, never
    // as many as the daemon lets a connection hold open (sixteen).
    for i in 0..20 {
        let user = format!("user{i}");
        let (root, _) = c.attach_proving(&user, "", |ch| held.prove(ch, &user, "")).await.unwrap();
        c.clunk(root).await.unwrap();
    }
    let again = d.client().await;
    let e = again.attach_proving("glenda", "", |_| recorded.clone()).await.unwrap_err().to_string();
    assert!(e.contains("authentication failed"), "{e}");
    let e = again.rpc(Fcall::Tstat { fid: 0 }).await.unwrap_err().to_string();
    assert!(e.contains("authenticate first"), "{e}");
    // A removed token proves nothing from then on.
    let rm =
        Command::new(APEX).args(["token", "--state", d.dir.join("state").to_str().unwrap(), "rm", "desk"]).output();
    assert!(rm.unwrap().status.success());
    let e = d.client().await.attach_proving("glenda", "", |ch| held.prove(ch, "glenda", "")).await.unwrap_err();
    assert!(e.to_string().contains("authentication failed"), "{e}");
    // Nor does the auth fid it proved before: the connection that kept
    // it is asked for a proof again, which fails.
    let e = c.attach_proving("glenda", "", |ch| held.prove(ch, "glenda", "")).await.unwrap_err();
    assert!(e.to_string().contains("authentication failed"), "{e}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_token_s_scope_is_enforced_on_every_request() {
    let d = TlsDaemon::start("scopes");
    let (local, lroot) = d.local().await;
    let b = text(read(&local, lroot, "main/buffers/new").await.unwrap()).trim().to_string();
    write(&local, lroot, &format!("main/buffers/{b}/body"), "kept\n").await.unwrap();
    let hash = text(read(&local, lroot, "main/hash").await.unwrap());

    // read: reads, and nothing else.
    let (r, root) = d.attached(&d.token("read", "viewer")).await;
    assert_eq!(text(read(&r, root, &format!("main/buffers/{b}/body")).await.unwrap()), "kept\n");
    for (path, mode) in [
        (format!("main/buffers/{b}/body"), OWRITE),
        ("main/ctl".to_string(), OWRITE),
        ("ctl".to_string(), OWRITE),
        ("main/buffers/new".to_string(), OREAD),
        ("new".to_string(), OREAD),
    ] {
        let e = r.open_path(root, &path, mode).await.unwrap_err().to_string();
        assert!(e.contains("a read token reads only"), "{path}: {e}");
    }
    let e = r.walk(root, &["main", "acme", "new"]).await.unwrap_err().to_string();
    assert!(e.contains("a read token reads only"), "{e}");
    // Nor what changes others' view by being opened: a window's event
    // file (its reader takes B2 and B3), a buffer's addr, a plumb port.
    let ctl = local.open_path(lroot, "main/acme/new/ctl", OREAD).await.unwrap();
    let id = text(local.read(ctl.fid, 0, 64).await.unwrap()).split_whitespace().next().unwrap().to_string();
    for path in [format!("main/acme/{id}/event"), format!("main/buffers/{b}/addr"), "main/plumb/edit".to_string()] {
        let e = r.open_path(root, &path, OREAD).await.unwrap_err().to_string();
        assert!(e.contains("a read token reads only"), "{path}: {e}");
    }

    // edit: text and layout, but no program, terminal or file of the
    // daemon's.
    let (e_c, eroot) = d.attached(&d.token("edit", "pair")).await;
    write(&e_c, eroot, &format!("main/buffers/{b}/body"), "edited\n").await.unwrap();
    for (path, line, why) in [
        ("main/ctl", "exec /tmp touch /tmp/apex-edit-token-ran", "running a command"),
        ("main/ctl", "term", "a terminal"),
        (&*format!("main/buffers/{b}/ctl"), "put /tmp/apex-edit-token-put", "put"),
        (&*format!("main/buffers/{b}/ctl"), "get /etc/hostname", "get"),
    ] {
        let e = write(&e_c, eroot, path, line).await.unwrap_err().to_string();
        assert!(e.contains(why) && e.contains("needs a full token"), "{line}: {e}");
    }
    // Nothing whose readers act as the user's own: a proposal of a B2 not
    // flagged a built-in (win runs it), a plumbed message, a dump
    // command, and no session ended.
    for (path, line, why) in [
        ("main/proposals", &*format!("exec {b} 0 0 0"), "not a built-in"),
        ("main/plumb/send", "me\nedit\n/\ntext\n\n11\n/etc/passwd", "plumbing a message"),
        (&*format!("main/acme/{id}/ctl"), "dump rm -rf /tmp/x\n", "dump"),
        ("ctl", "del main", "del"),
    ] {
        let e = write(&e_c, eroot, path, line).await.unwrap_err().to_string();
        assert!(e.contains(why) && e.contains("needs a full token"), "{line}: {e}");
    }
    let f = e_c.open_path(eroot, "main/plumb/rules", OWRITE | OTRUNC).await.unwrap();
    let e = e_c.write(f.fid, 0, b"include /etc/passwd\n").await.unwrap_err().to_string();
    assert!(e.contains("include") && e.contains("needs a full token"), "{e}");
    let _ = e_c.clunk(f.fid).await;
    let rules = "data matches 'x'\nplumb start touch /tmp/apex-edit-token-plumbed\n";
    let f = e_c.open_path(eroot, "main/plumb/rules", OWRITE | OTRUNC).await.unwrap();
    let e = e_c.write(f.fid, 0, rules.as_bytes()).await.unwrap_err().to_string();
    assert!(e.contains("starts a program") && e.contains("needs a full token"), "{e}");
    let _ = e_c.clunk(f.fid).await;
    assert!(!Path::new("/tmp/apex-edit-token-ran").exists() && !Path::new("/tmp/apex-edit-token-put").exists());
    // Nothing ran or was started: no process, no terminal; the only
    // change is the edit token's own text.
    assert_eq!(text(read(&local, lroot, "main/meta/processes").await.unwrap()), "");
    assert_eq!(text(read(&local, lroot, "main/terms/index").await.unwrap()), "");
    assert_eq!(text(read(&local, lroot, &format!("main/buffers/{b}/body")).await.unwrap()), "kept\nedited\n");
    assert_ne!(text(read(&local, lroot, "main/hash").await.unwrap()), hash);
}

/// What an `edit` token types reaches a tool reading the window's events
/// (win) as a write, `E`, never as typing, `K` or `M`: win sends what is
/// typed after its prompt to its shell, which would run a program. So
/// whether the daemon leads the text (the typing proposed) or the edit
/// token's client does (its own entries), and undo or redo proposed there
/// is refused.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_edit_token_s_typing_reaches_an_event_reader_as_a_write() {
    use apex_core::{AttachmentKind, Origin, Proposal, Shard};
    use apex_link::Attached;
    let d = TlsDaemon::start("typing");
    let edit = d.token("edit", "pair");
    let (local, lroot) = d.local().await;
    // A window a tool reads the events of, as win does.
    let ctl = text(read(&local, lroot, "main/acme/new/ctl").await.unwrap());
    let n: u32 = ctl.split_whitespace().next().unwrap().parse().unwrap();
    let events = local.open_path(lroot, &format!("main/acme/{n}/event"), OREAD).await.unwrap();
    let state = apex_core::State::from_snapshot(&read(&local, lroot, "main/snapshot").await.unwrap()).unwrap();
    let window = state.layout.window_numbered(apex_core::AcmeNumber(n)).unwrap();
    let body = state.windows[&window].body;
    let event = async || String::from_utf8(local.read(events.fid, 0, 8192).await.unwrap()).unwrap();

    // Through an import with the edit token, as apex-ui -r would be.
    let out = d.import(&["--pin", &d.pin, "--token", edit.to_str().unwrap()]);
    assert!(out.status.success(), "{}", said(&out));
    let address = format!("unix!{}", d.dir.join("local/apex.127.0.0.1").display());
    let c = apex_ninep::dial(&address, 1 << 20).await.unwrap();
    // A tool's typing, proposed to the daemon, which leads the text.
    let tool = Attached::open(&c, "main", AttachmentKind::Tool, "pair-tool").await.unwrap();
    tool.with(|l| {
        l.propose(Proposal::Insert { buffer: body, version: 0, q0: 0, text: "ls\n".into(), origin: Origin::Keyboard })
    });
    tool.flush().await.unwrap();
    assert_eq!(event().await, "EI0 3 0 3 ls\n\n", "proposed typing is said as a write");
    // Undo proposed where a tool reads the events: refused, saying why.
    tool.with(|l| l.propose(Proposal::Undo { buffer: body }));
    let _ = tool.flush().await;
    // (A proposal's refusal comes back as its write's answer, later.)
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while tool.refused().is_empty() && std::time::Instant::now() < deadline {
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    let refused = tool.refused().join("\n");
    assert!(refused.contains("needs a full token"), "{refused}");
    tool.close().await;
    // And so through the session's proposals file, the other way in.
    let root = c.attach("glenda", "").await.unwrap();
    let e = write(&c, root, "main/proposals", &format!("undo {}\n", body.0)).await.unwrap_err().to_string();
    assert!(e.contains("needs a full token"), "{e}");

    // A UI of the edit token's, leading the text: its own entries too.
    let ui = Attached::open(&c, "main", AttachmentKind::Ui, "pair-ui").await.unwrap();
    assert!(ui.wait_for(std::time::Duration::from_secs(10), |l| l.leads(Shard::Buffer(body))).await, "the UI leads");
    ui.with(|l| {
        let version = l.node().unwrap().state.buffer(body).unwrap().version;
        l.submit(Proposal::Insert { buffer: body, version, q0: 3, text: "date\n".into(), origin: Origin::Keyboard })
    });
    ui.flush().await.unwrap();
    assert_eq!(event().await, "EI3 8 0 5 date\n\n", "a limited leader's typing is said as a write");
    ui.close().await;
    // The daemon's own socket types as ever.
    write(&local, lroot, &format!("main/acme/{n}/ctl"), "clean\n").await.unwrap();
    assert_eq!(text(read(&local, lroot, &format!("main/acme/{n}/body")).await.unwrap()), "ls\ndate\n");
}

/// An edit token's B2 in a window a tool reads the events of (win) goes
/// to that tool only when it is flagged a built-in (win sends any other
/// text to its shell); and what the tool writes back (win sends a
/// built-in's event straight back, and acme runs what is at those runes
/// then) runs only a built-in, with the edit token's scope: `Send` there
/// appends the snarf as a write, which win does not run, and text that is
/// no built-in runs nothing, +Errors saying why.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_edit_token_s_b2_through_an_event_reader_runs_built_ins_only() {
    use apex_core::{Action, AttachmentKind, Origin, Proposal, ViewId};
    use apex_link::Attached;
    let d = TlsDaemon::start("b2");
    let edit = d.token("edit", "b2");
    let (local, lroot) = d.local().await;
    let ran = d.dir.join("ran");
    let command = format!("touch {}", ran.display());
    let ctl = text(read(&local, lroot, "main/acme/new/ctl").await.unwrap());
    let n: u32 = ctl.split_whitespace().next().unwrap().parse().unwrap();
    // And a file of the daemon's, named in the text for a B3.
    let secret = d.dir.join("secret");
    std::fs::write(&secret, "not for an edit token\n").unwrap();
    let secret = secret.display().to_string();
    write(&local, lroot, &format!("main/acme/{n}/body"), &format!("Send\n{command}\n{secret}\n")).await.unwrap();
    // The reader plays win: it reads events and writes back on one fid.
    let events = local.open_path(lroot, &format!("main/acme/{n}/event"), ORDWR).await.unwrap();
    // The body's events (the tag's, its dirty mark, pass by).
    let event = async || loop {
        let wait = std::time::Duration::from_secs(10);
        let read = tokio::time::timeout(wait, local.read(events.fid, 0, 8192)).await.expect("an event within 10 s");
        let got = String::from_utf8(read.unwrap()).unwrap();
        let body: String = messages(&got).into_iter().filter(|m| !m.chars().nth(1).unwrap().is_lowercase()).collect();
        if !body.is_empty() {
            break body;
        }
    };
    let state = apex_core::State::from_snapshot(&read(&local, lroot, "main/snapshot").await.unwrap()).unwrap();
    let window = state.layout.window_numbered(apex_core::AcmeNumber(n)).unwrap();
    let body = state.windows[&window].body;
    let version = state.buffer(body).unwrap().version;

    let out = d.import(&["--pin", &d.pin, "--token", edit.to_str().unwrap()]);
    assert!(out.status.success(), "{}", said(&out));
    let address = format!("unix!{}", d.dir.join("local/apex.127.0.0.1").display());
    let c = apex_ninep::dial(&address, 1 << 20).await.unwrap();
    let tool = Attached::open(&c, "main", AttachmentKind::Tool, "b2-tool").await.unwrap();
    let action = |q0: u64, q1: u64, flags: u32| Action {
        view: Some(ViewId::WindowBody(window)),
        version,
        q0,
        q1,
        expansion: None,
        arg: None,
        flags,
        origin: Origin::Mouse,
    };
    let b2 = |q0, q1, flags| Proposal::Exec { buffer: body, action: action(q0, q1, flags) };
    let end = 5 + command.chars().count() as u64;

    // A built-in: reported as acme reports it, written back, run.
    tool.with(|l| l.propose(Proposal::Snarf { text: "date\n".into() }));
    tool.with(|l| l.propose(b2(0, 4, 1)));
    tool.flush().await.unwrap();
    assert_eq!(event().await, "MX0 4 1 4 Send\n", "a built-in's B2, as acme reports it");
    local.write(events.fid, 0, b"MX0 4\n").await.unwrap();
    let len = end + 1 + secret.chars().count() as u64 + 1;
    assert_eq!(
        event().await,
        format!("EI{len} {} 0 5 date\n\n", len + 5),
        "the snarf Send appends is said as a write, which win does not send to its shell"
    );

    // Text that is no built-in, flagged as one: win sends it back, and
    // nothing runs.
    tool.with(|l| l.propose(b2(5, end, 1)));
    tool.flush().await.unwrap();
    // (Its text is not carried: the body changed since the version it names.)
    assert_eq!(event().await, format!("MX5 {end} 1 0 \n"));
    local.write(events.fid, 0, format!("MX5 {end}\n").as_bytes()).await.unwrap();
    let index = text(read(&local, lroot, "main/acme/index").await.unwrap());
    let errors = index.lines().find(|l| l.contains("+Errors")).unwrap_or_else(|| panic!("no +Errors in {index}"));
    let errors: u32 = errors.split_whitespace().next().unwrap().parse().unwrap();
    let said_there = text(read(&local, lroot, &format!("main/acme/{errors}/body")).await.unwrap());
    assert!(said_there.contains("by a client with an edit token, which runs built-ins only"), "{said_there}");

    // A B3 on the file's name, written back, looks with the edit token's
    // scope, which knows no file of the daemon's: the name is searched
    // for, and no window opens the file.
    let (s0, s1) = (end + 1, end + 1 + secret.chars().count() as u64);
    tool.with(|l| l.propose(Proposal::Look { buffer: body, action: action(s0, s1, 0) }));
    tool.flush().await.unwrap();
    assert_eq!(event().await, format!("ML{s0} {s1} 0 0 \n"));
    local.write(events.fid, 0, format!("ML{s0} {s1}\n").as_bytes()).await.unwrap();
    let index = text(read(&local, lroot, "main/acme/index").await.unwrap());
    assert!(!index.contains(&secret), "{index}");

    // A click's expansion is the reader's to write back (the Go acme
    // package does), so the one an edit token says is not passed on: the
    // click is, which the daemon expands when it comes back.
    let click = Proposal::Exec { buffer: body, action: Action { expansion: Some((5, end)), ..action(5, 5, 1 | 2) } };
    tool.with(|l| l.propose(click));
    tool.flush().await.unwrap();
    assert_eq!(event().await, "MX5 5 1 0 \n");

    // Not flagged a built-in: refused, as win would send it to its shell.
    tool.with(|l| l.propose(b2(5, end, 0)));
    let _ = tool.flush().await;
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while tool.refused().is_empty() && std::time::Instant::now() < deadline {
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    let refused = tool.refused().join("\n");
    assert!(refused.contains("not a built-in") && refused.contains("needs a full token"), "{refused}");
    tool.close().await;
    assert_eq!(text(read(&local, lroot, "main/meta/processes").await.unwrap()), "", "nothing was started");
    assert!(!ran.exists(), "the command did not run");
    let _ = local.clunk(events.fid).await;
}

/// Event messages one by one: `C1C2q0 q1 flag nr`, a blank, `nr` runes
/// (which may hold newlines) and a newline.
fn messages(events: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut rest = events;
    while !rest.is_empty() {
        let fields: Vec<&str> = rest.splitn(5, ' ').collect();
        let nr: usize = fields[3].parse().unwrap();
        let head = fields[..4].join(" ").len() + 1;
        let text: usize = fields[4].chars().take(nr).map(char::len_utf8).sum();
        let end = head + text + 1;
        out.push(rest[..end].to_string());
        rest = &rest[end..];
    }
    out
}

/// Where glibc copies TLS records slowly (an AMD CPU with FSRM, glibc
/// before 2.39), the daemon runs with `rep movsb` kept out of its copies,
/// having started itself again with the tunable; elsewhere its
/// environment is the one it was given.
#[test]
fn the_daemon_keeps_rep_movsb_out_of_its_copies_where_it_is_slow() {
    let d = TlsDaemon::start("tunables");
    let environ = std::fs::read(format!("/proc/{}/environ", d.child.id())).unwrap();
    let tuned = environ
        .split(|b| *b == 0)
        .filter_map(|v| v.strip_prefix(b"GLIBC_TUNABLES="))
        .any(|t| String::from_utf8_lossy(t).contains("glibc.cpu.x86_rep_movsb_threshold="));
    assert_eq!(tuned, apex_sys::tunables::slow_rep_movsb());
}
