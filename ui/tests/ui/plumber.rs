//! A plumber of the test's own: a 9P server posted as `plumb` in a
//! namespace directory, with plan9port's plumber's `send` file and its
//! `edit` port. It records every message written to `send` and takes
//! those whose data matches its one rule (a `file:line` address); any
//! other is refused, as a plumber with no matching rule refuses it. What
//! the test puts in `Posted::edit` is read from `edit`, a message a read,
//! as a program that plumbs to the editor would have it delivered.

use apex_ninep::fcall::{Qid, Stat, QTDIR, QTFILE};
use apex_ninep::srv::{self, Result, Serve};
use std::path::Path;
use std::sync::{Arc, Mutex};

/// What was sent, in order: the messages' bytes, taken or not.
#[derive(Clone, Default)]
pub struct Sent(Arc<Mutex<Vec<String>>>);

impl Sent {
    pub fn all(&self) -> Vec<String> {
        self.0.lock().unwrap().clone()
    }
}

struct Plumber {
    sent: Sent,
    edit: tokio::sync::Mutex<tokio::sync::mpsc::UnboundedReceiver<Vec<u8>>>,
}

/// A posted plumber: what it was sent, and its `edit` port's feed.
pub struct Posted {
    pub sent: Sent,
    pub edit: tokio::sync::mpsc::UnboundedSender<Vec<u8>>,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum File {
    Root,
    Send,
    Edit,
}

fn qid(f: File) -> Qid {
    match f {
        File::Root => Qid { ty: QTDIR, vers: 0, path: 0 },
        File::Send => Qid { ty: QTFILE, vers: 0, path: 1 },
        File::Edit => Qid { ty: QTFILE, vers: 0, path: 2 },
    }
}

impl Serve for Plumber {
    type Fid = File;
    type Error = String;

    async fn attach(&self, _uname: &str, _aname: &str) -> Result<(Qid, File)> {
        Ok((qid(File::Root), File::Root))
    }

    async fn walk(&self, fid: &File, names: &[String]) -> Result<(Vec<Qid>, Option<File>)> {
        match (fid, names) {
            (f, []) => Ok((vec![], Some(*f))),
            (File::Root, [n]) if n == "send" => Ok((vec![qid(File::Send)], Some(File::Send))),
            (File::Root, [n]) if n == "edit" => Ok((vec![qid(File::Edit)], Some(File::Edit))),
            _ => Err(format!("{names:?}: no such file")),
        }
    }

    async fn open(&self, fid: &File, _mode: u8) -> Result<(Qid, File)> {
        Ok((qid(*fid), *fid))
    }

    async fn create(&self, _: &File, _: &str, _: u32, _: u8) -> Result<(Qid, File)> {
        Err("permission denied".into())
    }

    async fn read(&self, fid: &File, _: u64, _: u32) -> Result<Vec<u8>> {
        match fid {
            // A port's read waits for the next message.
            File::Edit => Ok(self.edit.lock().await.recv().await.unwrap_or_default()),
            _ => Ok(Vec::new()),
        }
    }

    async fn write(&self, fid: &File, _: u64, data: Vec<u8>) -> Result<u32> {
        if *fid != File::Send {
            return Err("permission denied".into());
        }
        let text = String::from_utf8_lossy(&data).to_string();
        self.sent.0.lock().unwrap().push(text.clone());
        // plumb(7): src, dst, wdir, type, attr, ndata, then the data.
        let body = text.splitn(7, '\n').nth(6).unwrap_or_default();
        let rule = file_and_line(body);
        match rule {
            true => Ok(data.len() as u32),
            false => Err("no matching plumb rule".into()),
        }
    }

    async fn clunk(&self, _: File) {}

    async fn remove(&self, _: File) -> Result<()> {
        Err("permission denied".into())
    }

    async fn stat(&self, fid: &File) -> Result<Stat> {
        let name = match fid {
            File::Root => "/",
            File::Send => "send",
            File::Edit => "edit",
        };
        Ok(Stat {
            qid: qid(*fid),
            name: name.into(),
            uid: "t".into(),
            gid: "t".into(),
            muid: "t".into(),
            ..Default::default()
        })
    }

    async fn wstat(&self, _: &File, _: Stat) -> Result<()> {
        Err("permission denied".into())
    }
}

/// The plumber's one rule: `NAME.EXT:DIGITS`.
fn file_and_line(data: &str) -> bool {
    let Some((file, line)) = data.rsplit_once(':') else { return false };
    file.contains('.') && !line.is_empty() && line.chars().all(|c| c.is_ascii_digit())
}

/// Posts a plumber as `plumb` in `ns` on `rt`.
pub fn post(rt: &tokio::runtime::Runtime, ns: &Path) -> Posted {
    let sent = Sent::default();
    let (edit, port) = tokio::sync::mpsc::unbounded_channel();
    let serve = Arc::new(Plumber { sent: sent.clone(), edit: tokio::sync::Mutex::new(port) });
    let listener = {
        let _guard = rt.enter();
        tokio::net::UnixListener::bind(ns.join("plumb")).expect("post plumb")
    };
    rt.spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            let serve = serve.clone();
            tokio::spawn(async move {
                let _ = srv::serve_conn(serve, stream, srv::Config::default()).await;
            });
        }
    });
    Posted { sent, edit }
}

/// A message on the `edit` port as plan9port's plumber delivers it.
fn delivered(wdir: &str, attr: &str, data: &str) -> Vec<u8> {
    format!("plumb\nedit\n{wdir}\ntext\n{attr}\n{}\n{data}", data.len()).into_bytes()
}

#[test]
fn the_plumber_s_edit_port_opens_files_at_their_address_and_shows_data() {
    use crate::session::Rig;
    use crate::support::wait_for;
    let mut r = Rig::start("plumb-edit", true);
    let go = r.ns.join("file.go");
    std::fs::write(&go, (1..=20).map(|i| format!("line {i}\n")).collect::<String>()).unwrap();
    let plumber = post(&r.rt, &r.ns);
    r.ui().host.listen_to_plumber();
    let ns = r.ns.display().to_string();
    let window = |r: &mut Rig, name: &str| {
        r.ui().woke();
        let link = r.ui().host.att.lock();
        let st = &link.node().unwrap().state;
        apex_core::look::window_named(st, name).map(|(w, _)| st.layout.numbers[&w].0)
    };

    // `plumb file.go:5` from a shell in ns: the rule sends the file with
    // an addr attribute; the UI opens it there (a relative name is the
    // message's wdir's).
    plumber.edit.send(delivered(&ns, "addr=5", "file.go")).unwrap();
    let name = go.display().to_string();
    let number = wait_for("file.go to open", || window(&mut r, &name));
    r.ui().settle().unwrap();
    assert_eq!(r.apex(&["read", &format!("main/acme/{number}/rdsel")]), "line 5\n");
    // Again, at another address: the same window, the new selection.
    plumber.edit.send(delivered("/elsewhere", "addr='/line 17/'", &name)).unwrap();
    wait_for("the selection to move", || {
        window(&mut r, &name);
        r.ui().settle().unwrap();
        (r.apex(&["read", &format!("main/acme/{number}/rdsel")]) == "line 17").then_some(())
    });

    // action=showdata: the data in a new, clean window named by the
    // filename attribute.
    plumber.edit.send(delivered(&ns, "action=showdata filename=+out", "some output\n")).unwrap();
    let out = format!("{ns}/+out");
    let number = wait_for("the data's window", || window(&mut r, &out));
    r.ui().settle().unwrap();
    assert_eq!(r.apex(&["read", &format!("main/acme/{number}/body")]), "some output\n");
    let ctl = r.apex(&["read", &format!("main/acme/{number}/ctl")]);
    assert_eq!(ctl.split_whitespace().nth(4), Some("0"), "clean: {ctl}");
    // A file that is not there is said in +Errors.
    plumber.edit.send(delivered(&ns, "", "/no/such/file.c")).unwrap();
    wait_for("the refusal in +Errors", || {
        r.ui().woke();
        crate::session::errors(&mut r).filter(|e| e.contains("plumb: /no/such/file.c")).map(|_| ())
    });
}

#[test]
fn a_plumber_started_after_the_ui_is_found() {
    use crate::session::Rig;
    use crate::support::wait_for;
    let mut r = Rig::start("plumb-late", true);
    // Listening before any plumber is posted: nothing to read yet.
    r.ui().host.listen_to_plumber();
    std::thread::sleep(std::time::Duration::from_millis(300));
    let plumber = post(&r.rt, &r.ns);
    let file = r.ns.join("late.txt");
    std::fs::write(&file, "found\n").unwrap();
    plumber.edit.send(delivered(&r.ns.display().to_string(), "", "late.txt")).unwrap();
    let name = file.display().to_string();
    wait_for("the late plumber's file to open", || {
        r.ui().woke();
        let link = r.ui().host.att.lock();
        let st = &link.node().unwrap().state;
        apex_core::look::window_named(st, &name).map(|_| ())
    });
}
