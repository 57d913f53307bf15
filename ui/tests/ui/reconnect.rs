//! Losing the daemon: the UI says so, keeps taking typing, dials again,
//! and either resumes its attachment (the connection went, the daemon
//! did not: nothing is lost and nothing is recovered) or, with a daemon
//! started anew, is attached anew with what it typed in `+Recovered`.

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
        assert_eq!(self.ui().status(), Some(DISCONNECTED), "the row tag says so");
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

/// The body of the `+Recovered` window beside `file`, once it is there.
fn recovered(r: &Rig, file: &Path) -> String {
    let name = file.with_file_name("+Recovered").display().to_string();
    let line = wait_for(&format!("{name} in the index"), || {
        windows(r).lines().find(|l| l.split_whitespace().nth(5) == Some(name.as_str())).map(str::to_string)
    });
    let number = line.split_whitespace().next().unwrap();
    r.apex(&["read", &format!("main/acme/{number}/body")])
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
    // comes back as a dirty +Recovered window beside the file's name.
    let body = recovered(&r, &file);
    assert!(body.contains("text kept offline\n"), "{body:?}");
    // The daemon said why, in +Errors (it arrives as the UI catches up).
    wait_for("the refused resume in +Errors", || {
        r.ui().woke();
        errors(&mut r).filter(|shown| shown.contains("refused") && shown.contains("attached anew"))
    });
}

#[test]
fn a_daemon_restarted_on_its_state_keeps_the_window_and_recovers_the_typing_it_never_had() {
    let state = std::env::temp_dir().join(format!("apex-ui-kept-state-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&state);
    let kept = ["--state", state.to_str().unwrap()];
    let mut r = Rig::start_with("reconnect-kept", true, &kept);
    let (file, w) = typed_then_daemon_gone(&mut r);
    r.daemon = daemon(&r.ns, &kept);
    r.reconnected();
    // The restarted daemon brought the window back as it had it; what the
    // UI typed while it was gone comes back in +Recovered.
    assert_eq!(r.served(w, "body"), "text kept\n");
    let body = recovered(&r, &file);
    assert!(body.contains("offline"), "{body:?}");
    let _ = std::fs::remove_dir_all(&state);
}
