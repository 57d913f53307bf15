//! What the first command gives, with no display (the daemon alone):
//! the daemon apex-ui starts posts `apex` and `acme` for the session the
//! UI opens, so plan9port's tools reach it with nothing else; a live
//! `acme` already posted (a running acme) is left alone; and when the
//! daemon cannot start, apex-ui says the daemon's own words.

use crate::support::{apex, namespace, sibling, stop_daemons_started_in, wait_for};
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

/// A namespace directory of the test's own, and every daemon started in
/// it (by apex-ui or by the test) stopped and the directory removed when
/// it goes, even on failure.
struct Ns {
    dir: PathBuf,
    held: Vec<std::process::Child>,
}

impl Ns {
    fn new(name: &str) -> Ns {
        Ns { dir: namespace(name), held: Vec::new() }
    }

    /// `apex-ui` with no display, its state under this namespace.
    fn ui(&self, args: &[&str]) -> Output {
        sibling("apexd");
        Command::new(env!("CARGO_BIN_EXE_apex-ui"))
            .args(args)
            .env_remove("DISPLAY")
            .env_remove("WAYLAND_DISPLAY")
            .env("NAMESPACE", &self.dir)
            .env("XDG_STATE_HOME", self.dir.join("state"))
            .stdin(Stdio::null())
            .output()
            .expect("run apex-ui")
    }
}

impl Drop for Ns {
    fn drop(&mut self) {
        stop_daemons_started_in(&self.dir);
        for d in &mut self.held {
            let _ = d.kill();
            let _ = d.wait();
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn said(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).to_string()
}

#[test]
fn the_daemon_apex_ui_starts_posts_acme_for_its_session_and_win_s_messages_work() {
    let ns = Ns::new("acme");
    let out = ns.ui(&["-s", "work"]);
    assert!(out.status.success(), "apex-ui: {}", said(&out));
    assert!(ns.dir.join("apex").exists() && ns.dir.join("acme").exists(), "apex and acme posted");
    // What win does first (acme-fs.md §5), through the posted acme as
    // 9p does it: a window made by reading new/ctl, named, written to,
    // listed in the index; all in the session the UI opened.
    let ctl = apex(&ns.dir, &["read", "acme/new/ctl"]);
    let n: u32 = ctl.split_whitespace().next().unwrap().parse().unwrap();
    let name = format!("{}/-win", ns.dir.display());
    let write = |file: &str, text: &str| {
        let mut w = Command::new(sibling("apex"))
            .args(["write", &format!("acme/{n}/{file}")])
            .env("NAMESPACE", &ns.dir)
            .stdin(Stdio::piped())
            .spawn()
            .unwrap();
        std::io::Write::write_all(&mut w.stdin.take().unwrap(), text.as_bytes()).unwrap();
        assert!(w.wait().unwrap().success(), "write acme/{n}/{file}");
    };
    write("ctl", &format!("name {name}\n"));
    write("body", "% ls\n");
    let index = apex(&ns.dir, &["read", "acme/index"]);
    assert!(index.lines().any(|l| l.split_whitespace().nth(5) == Some(name.as_str())), "named in the index: {index}");
    assert_eq!(apex(&ns.dir, &["read", &format!("acme/{n}/body")]), "% ls\n");
    assert_eq!(apex(&ns.dir, &["read", &format!("work/acme/{n}/body")]), "% ls\n", "the session -s named");
}

#[test]
fn a_live_acme_already_posted_is_left_alone() {
    let ns = Ns::new("liveacme");
    let acme = std::os::unix::net::UnixListener::bind(ns.dir.join("acme")).unwrap();
    let out = ns.ui(&[]);
    assert!(out.status.success(), "apex-ui: {}", said(&out));
    assert!(ns.dir.join("apex").exists(), "apex posted");
    // The socket at acme is still the running acme's.
    let _ = std::os::unix::net::UnixStream::connect(ns.dir.join("acme")).expect("acme answers");
    acme.set_nonblocking(true).unwrap();
    assert!(acme.accept().is_ok(), "the connection went to the acme that was there");
    assert!(apex(&ns.dir, &["read", "main/acme/index"]).is_empty(), "apex's own acme tree is in apex");
}

#[test]
fn when_the_daemon_cannot_start_apex_ui_says_its_words() {
    let mut ns = Ns::new("words");
    // Another daemon, posted elsewhere, holds the state directory the UI's
    // would use.
    let elsewhere = ns.dir.join("elsewhere");
    std::fs::create_dir(&elsewhere).unwrap();
    std::fs::set_permissions(&elsewhere, std::os::unix::fs::PermissionsExt::from_mode(0o700)).unwrap();
    let holder = Command::new(sibling("apexd"))
        .args(["-q", "--namespace"])
        .arg(&elsewhere)
        .arg("--state")
        .arg(ns.dir.join("state/apex"))
        .spawn()
        .expect("start apexd");
    ns.held.push(holder);
    wait_for("the first daemon to post", || Path::new(&elsewhere.join("apex")).exists().then_some(()));
    let out = ns.ui(&[]);
    assert!(!out.status.success(), "apex-ui cannot have started a second daemon on the same state");
    let words = said(&out);
    assert!(words.contains("in use by another apexd"), "the daemon's own words: {words}");
    assert!(words.contains("exited"), "said as the daemon's exit: {words}");
}
