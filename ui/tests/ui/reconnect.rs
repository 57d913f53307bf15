//! Losing the daemon: the UI says so, keeps taking typing, dials again,
//! and either resumes its attachment (the connection went, the daemon
//! did not: nothing is lost and nothing is recovered), or is attached
//! anew: what it typed goes on where nobody else wrote meanwhile (a
//! daemon restarted on its state, even by kill -9), and only a real
//! conflict, or a daemon started anew, puts it in `FILE+Recovered`.

use crate::session::{attach_at, daemon, errors, Rig};
use crate::support::wait_for;
use apex_ui::app::DISCONNECTED;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use tokio::task::JoinHandle;

/// A unix-socket relay to the daemon whose connections a test can cut
/// (as a network that drops them would) while the daemon lives on.
struct Relay {
    address: String,
    conns: Arc<Mutex<Vec<JoinHandle<()>>>>,
    accept: JoinHandle<()>,
}

impl Relay {
    fn start(rt: &tokio::runtime::Runtime, path: PathBuf, to: PathBuf) -> Relay {
        let listener = rt.block_on(async { tokio::net::UnixListener::bind(&path) }).expect("bind the relay");
        let conns: Arc<Mutex<Vec<JoinHandle<()>>>> = Arc::default();
        let kept = conns.clone();
        let accept = rt.spawn(async move {
            while let Ok((mut near, _)) = listener.accept().await {
                let Ok(mut far) = tokio::net::UnixStream::connect(&to).await else { continue };
                let pipe = tokio::spawn(async move {
                    let _ = tokio::io::copy_bidirectional(&mut near, &mut far).await;
                });
                kept.lock().unwrap().push(pipe);
            }
        });
        Relay { address: format!("unix!{}", path.display()), conns, accept }
    }

    /// Drops every connection relayed so far; new ones still go through.
    fn cut(&self) {
        for pipe in self.conns.lock().unwrap().drain(..) {
            pipe.abort();
        }
    }
}

impl Drop for Relay {
    fn drop(&mut self) {
        self.cut();
        self.accept.abort();
    }
}

impl Rig {
    /// The connection went: the UI notices (once), says so in the row
    /// tag, and starts dialling.
    fn lose_connection(&mut self) {
        wait_for("the link to see the hang-up", || self.ui().host.att.is_closed().then_some(()));
        assert!(self.ui().woke(), "the loss is noticed");
        assert!(!self.ui().woke(), "and said once");
        assert_eq!(self.ui().status().as_deref(), Some(DISCONNECTED), "the row tag says so");
    }

    /// Waits until the UI is attached again and welcomed.
    fn reconnected(&mut self) {
        wait_for("the UI to attach again", || {
            self.ui().woke();
            self.ui().paint();
            (self.ui().status().is_none()).then_some(())
        });
    }
}

fn windows(r: &Rig) -> String {
    r.apex(&["read", "main/acme/index"])
}

/// Types " kept" into a file's window (the daemon has it), kills the
/// daemon, and types " offline" while it is gone; the file and window.
fn typed_then_daemon_gone(r: &mut Rig) -> (PathBuf, crate::session::Win) {
    let file = r.ns.join("notes.txt");
    std::fs::write(&file, "text\n").unwrap();
    let w = r.open(&file.display().to_string());
    let at = r.point(w.window, 4, false);
    r.click(1, at);
    r.typed(" kept");
    assert_eq!(r.served(w, "body"), "text kept\n", "acknowledged, so in the daemon's log");
    let _ = r.daemon.kill();
    let _ = r.daemon.wait();
    r.lose_connection();
    r.typed(" offline");
    (file, w)
}

/// The body of `file`'s `+Recovered` window, once it is there.
fn recovered(r: &Rig, file: &Path) -> String {
    let name = format!("{}+Recovered", file.display());
    let line = wait_for(&format!("{name} in the index"), || {
        windows(r).lines().find(|l| l.split_whitespace().nth(5) == Some(name.as_str())).map(str::to_string)
    });
    let number = line.split_whitespace().next().unwrap();
    // The window is made first and filled when the UI hears it was: its
    // name may be in the index before its text is in it.
    let body = format!("main/acme/{number}/body");
    wait_for(&format!("{name}'s text"), || Some(r.apex(&["read", &body])).filter(|text| !text.is_empty()))
}

#[test]
fn a_dropped_connection_resumes_the_attachment_and_loses_nothing() {
    let mut r = Rig::start("reconnect-resume", true);
    // This UI goes through a relay; the first one leaves.
    let relay = Relay::start(&r.rt, r.ns.join("relay"), r.ns.join("apex"));
    let first = r.ui.take().unwrap();
    r.rt.block_on(first.host.att.close());
    r.ui = Some(attach_at(&r.rt, &r.ns, &relay.address, true));
    let file = r.ns.join("notes.txt");
    std::fs::write(&file, "text\n").unwrap();
    let w = r.open(&file.display().to_string());
    let at = r.point(w.window, 4, false);
    r.click(1, at);
    r.typed(" before");
    assert_eq!(r.served(w, "body"), "text before\n");

    relay.cut();
    r.lose_connection();
    // Typing goes on while the UI dials again, and is not lost.
    r.typed(" during");
    r.reconnected();
    assert_eq!(r.served(w, "body"), "text before during\n");
    let shown = errors(&mut r).expect("a +Errors window");
    assert!(shown.contains("connection to apexd") && shown.contains("is gone"), "{shown:?}");
    assert!(shown.contains("connected to apexd again"), "{shown:?}");
    assert!(!shown.contains("refused"), "the attachment was resumed: {shown:?}");
    assert!(!windows(&r).contains("+Recovered"), "nothing to recover: {}", windows(&r));
    // And the UI leads again: typing after it reaches the daemon too.
    r.typed(" after");
    assert_eq!(r.served(w, "body"), "text before during after\n");

    // An Edit running while the connection is made again proposes
    // nothing: the replica it read from was made anew.
    let fifo = r.ns.join("fifo");
    assert!(std::process::Command::new("mkfifo").arg(&fifo).status().unwrap().success());
    r.execute_in_tag(w, &format!("Edit ,< cat {}", fifo.display()));
    relay.cut();
    r.lose_connection();
    wait_for("the UI to attach again", || {
        r.ui().woke();
        r.ui().paint();
        (r.ui().status().as_deref() != Some(DISCONNECTED)).then_some(())
    });
    let fed = std::thread::spawn(move || std::fs::write(fifo, "replaced\n").unwrap());
    r.edit_ended();
    fed.join().unwrap();
    assert_eq!(r.served(w, "body"), "text before during after\n");
    wait_for("the Edit's refusal", || errors(&mut r).filter(|e| e.contains("was made again while it ran")));
}

#[test]
fn a_daemon_started_anew_gets_the_ui_s_typing_in_recovered() {
    let mut r = Rig::start("reconnect-restart", true);
    let (file, w) = typed_then_daemon_gone(&mut r);
    // Bad requests while it is gone are refused at once, not hung.
    let put = apex_core::exec::Host::put(&mut r.ui().host, w.body, None);
    assert!(put.is_err_and(|e| e.to_string().contains("not connected")), "Put needs the daemon");

    r.daemon = daemon(&r.ns, &[]);
    r.reconnected();
    // The new daemon's session never had that window: the UI's text
    // comes back as a dirty FILE+Recovered window, saying why.
    let body = recovered(&r, &file);
    assert!(body.contains("text kept offline\n"), "{body:?}");
    assert!(body.contains("no longer has that text"), "{body:?}");
    // The daemon said why, in +Errors (it arrives as the UI catches up).
    wait_for("the refused resume in +Errors", || {
        r.ui().woke();
        errors(&mut r).filter(|shown| shown.contains("refused") && shown.contains("attached anew"))
    });
}

#[test]
fn a_daemon_restarted_on_its_state_keeps_the_window_and_the_typing_it_never_had() {
    let state = std::env::temp_dir().join(format!("apex-ui-kept-state-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&state);
    let kept = ["--state", state.to_str().unwrap()];
    let mut r = Rig::start_with("reconnect-kept", true, &kept);
    let (file, w) = typed_then_daemon_gone(&mut r);
    r.daemon = daemon(&r.ns, &kept);
    r.reconnected();
    // The restarted daemon brought the window back as it had it, and
    // nobody wrote there since: what the UI typed while it was gone simply
    // goes on in its own window, quietly.
    wait_for("the offline typing in its window", || (r.served(w, "body") == "text kept offline\n").then_some(()));
    assert!(!windows(&r).contains("+Recovered"), "nothing to recover: {}", windows(&r));
    let _ = file;
    let _ = std::fs::remove_dir_all(&state);
}

/// Two file windows with typing the daemon has; the daemon killed
/// (SIGKILL) and more typed into both while it is gone. With
/// `second_party`, the daemon is first started on its state elsewhere and
/// a tool writes into the second file's buffer. Then the daemon comes back
/// where the UI dials; the two files and windows.
fn two_windows_typed_through_a_kill_9(
    r: &mut Rig,
    kept: &[&str],
    second_party: bool,
) -> [(PathBuf, crate::session::Win); 2] {
    let mut ws = Vec::new();
    for name in ["one.txt", "two.txt"] {
        let file = r.ns.join(name);
        std::fs::write(&file, "text\n").unwrap();
        let w = r.open(&file.display().to_string());
        ws.push((file, w));
    }
    for (_, w) in &ws {
        let at = r.point(w.window, 4, false);
        r.click(1, at);
        r.typed(" kept");
    }
    r.ui().settle().unwrap();
    let _ = r.daemon.kill();
    let _ = r.daemon.wait();
    r.lose_connection();
    for (_, w) in &ws {
        let at = r.point(w.window, 9, false);
        r.click(1, at);
        r.typed(" offline");
    }
    if second_party {
        let elsewhere = r.ns.join("elsewhere");
        std::fs::create_dir_all(&elsewhere).unwrap();
        std::fs::set_permissions(&elsewhere, std::os::unix::fs::PermissionsExt::from_mode(0o700)).unwrap();
        let mut other = daemon(&elsewhere, kept);
        let mut writer = std::process::Command::new(crate::support::sibling("apex"))
            .args(["write", &format!("main/acme/{}/body", ws[1].1.number)])
            .env("NAMESPACE", &elsewhere)
            .stdin(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        std::io::Write::write_all(&mut writer.stdin.take().unwrap(), b"theirs\n").unwrap();
        assert!(writer.wait().unwrap().success(), "the second party's write");
        // SAFETY: kill(2) with plain integers: a clean stop, log synced.
        unsafe { libc::kill(other.id() as i32, libc::SIGTERM) };
        let _ = other.wait();
    }
    r.daemon = daemon(&r.ns, kept);
    r.reconnected();
    [ws.remove(0), ws.remove(0)]
}

#[test]
fn kill_9_while_typing_in_two_windows_loses_nothing_and_recovers_nothing() {
    let state = std::env::temp_dir().join(format!("apex-ui-kill9-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&state);
    let kept = ["--state", state.to_str().unwrap()];
    let mut r = Rig::start_with("reconnect-kill9", true, &kept);
    let [(_, one), (_, two)] = two_windows_typed_through_a_kill_9(&mut r, &kept, false);
    for w in [one, two] {
        wait_for("every typed rune in its own window", || (r.served(w, "body") == "text kept offline\n").then_some(()));
    }
    assert!(!windows(&r).contains("+Recovered"), "no +Recovered window: {}", windows(&r));
    let _ = std::fs::remove_dir_all(&state);
}

#[test]
fn kill_9_with_a_second_party_editing_one_buffer_recovers_that_buffer_only() {
    let state = std::env::temp_dir().join(format!("apex-ui-kill9-2nd-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&state);
    let kept = ["--state", state.to_str().unwrap()];
    let mut r = Rig::start_with("reconnect-kill9-2nd", true, &kept);
    let [(_, one), (two_file, two)] = two_windows_typed_through_a_kill_9(&mut r, &kept, true);
    wait_for("the untouched window's typing", || (r.served(one, "body") == "text kept offline\n").then_some(()));
    assert_eq!(r.served(two, "body"), "text kept\ntheirs\n", "the second party's text stands");
    let body = recovered(&r, &two_file);
    assert!(body.contains("insert\n\t offline\n"), "what to put back and where: {body}");
    let index = windows(&r);
    assert_eq!(index.matches("+Recovered").count(), 1, "exactly one +Recovered window: {index}");
    let _ = std::fs::remove_dir_all(&state);
}

/// A shell in a terminal window lives through a kill -9 of the daemon:
/// the next daemon takes it up from its keeper, and typing in the window
/// reaches the same shell, its variables as they were.
#[test]
fn a_shell_in_a_window_lives_through_a_kill_9_of_the_daemon() {
    let state = std::env::temp_dir().join(format!("apex-ui-kill9-term-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&state);
    // Removed pass or fail: its terminal's keeper ends the shell then.
    let _removed = Removed(state.clone());
    let kept = ["--state", state.to_str().unwrap()];
    let mut r = Rig::start_with("reconnect-term", true, &kept);
    crate::support::apex_write(&r.ns, "main/ctl", &format!("term -d {} sh\n", r.ns.display()));
    let term = apex_core::TermId(wait_for("the terminal", || {
        r.apex(&["read", "main/terms/index"]).split_whitespace().next()?.parse().ok()
    }));
    let rows = |r: &mut Rig| -> Vec<String> {
        r.ui().woke();
        r.ui().paint();
        let link = r.ui().host.att.lock();
        let Some(t) = link.node().and_then(|n| n.state.terms.get(&term)) else { return Vec::new() };
        t.scrollback.iter().map(|row| row.text.clone()).chain(t.grid.iter().map(|row| row.text.clone())).collect()
    };
    let over = |r: &mut Rig| -> Option<(i32, i32)> {
        r.ui().woke();
        r.ui().paint();
        let w = {
            let link = r.ui().host.att.lock();
            let st = &link.node()?.state;
            st.windows.iter().find(|(_, w)| w.term == Some(term)).map(|(id, _)| *id)?
        };
        let body = r.ui().screen()?.window(w)?.body;
        Some((body.x0 + 10, body.y0 + 5))
    };
    let (x, y) = wait_for("its window", || over(&mut r));
    r.send(apex_ui::input::Event::Motion { x, y });
    r.typed("X=lives; echo set-$X\n");
    wait_for("the shell's answer", || rows(&mut r).iter().any(|l| l == "set-lives").then_some(()));

    let _ = r.daemon.kill();
    let _ = r.daemon.wait();
    r.lose_connection();
    r.daemon = daemon(&r.ns, &kept);
    r.reconnected();
    let (x, y) = wait_for("its window again", || over(&mut r));
    r.send(apex_ui::input::Event::Motion { x, y });
    r.typed("echo $X-on\n");
    wait_for("the same shell's answer", || rows(&mut r).iter().any(|l| l == "lives-on").then_some(()));
    let index = r.apex(&["read", "main/terms/index"]);
    assert!(index.contains(" running "), "{index}");
}

/// A directory removed when it goes out of scope, pass or fail.
struct Removed(PathBuf);

impl Drop for Removed {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}
