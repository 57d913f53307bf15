//! A plumber of the test's own: a 9P server posted as `plumb` in a
//! namespace directory, with plan9port's plumber's `send` file. It records
//! every message written to it and takes those whose data matches its one
//! rule (a `file:line` address); any other is refused, as a plumber with
//! no matching rule refuses it.

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
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum File {
    Root,
    Send,
}

fn qid(f: File) -> Qid {
    match f {
        File::Root => Qid { ty: QTDIR, vers: 0, path: 0 },
        File::Send => Qid { ty: QTFILE, vers: 0, path: 1 },
    }
}

impl Serve for Plumber {
    type Fid = File;

    async fn attach(&self, _uname: &str, _aname: &str) -> Result<(Qid, File)> {
        Ok((qid(File::Root), File::Root))
    }

    async fn walk(&self, fid: &File, names: &[String]) -> Result<(Vec<Qid>, Option<File>)> {
        match (fid, names) {
            (f, []) => Ok((vec![], Some(*f))),
            (File::Root, [n]) if n == "send" => Ok((vec![qid(File::Send)], Some(File::Send))),
            _ => Err(format!("{names:?}: no such file")),
        }
    }

    async fn open(&self, fid: &File, _mode: u8) -> Result<(Qid, File)> {
        Ok((qid(*fid), *fid))
    }

    async fn create(&self, _: &File, _: &str, _: u32, _: u8) -> Result<(Qid, File)> {
        Err("permission denied".into())
    }

    async fn read(&self, _: &File, _: u64, _: u32) -> Result<Vec<u8>> {
        Ok(Vec::new())
    }

    async fn write(&self, _: &File, _: u64, data: Vec<u8>) -> Result<u32> {
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
        let name = if *fid == File::Root { "/" } else { "send" };
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

/// Posts a plumber as `plumb` in `ns` on `rt`; what it is sent.
pub fn post(rt: &tokio::runtime::Runtime, ns: &Path) -> Sent {
    let sent = Sent::default();
    let serve = Arc::new(Plumber { sent: sent.clone() });
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
    sent
}
