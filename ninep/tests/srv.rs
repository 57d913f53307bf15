//! The server connection loop against the project's client and raw bytes:
//! version and msize, pipelining, Tflush of a blocked read, fids clunked
//! on a second Tversion and on hang-up, malformed messages answered, and
//! a Tflush of a write that is let finish answered after its Rwrite (and
//! of a Topenfd after its Ropenfd and descriptor), a request that
//! panics answered with an Rerror, and large Twrites (read into buffers
//! of their own) whole, and refused as ever when wrong.

use apex_ninep::fcall::*;
use apex_ninep::srv::{serve_conn, Config, Serve};
use apex_ninep::*;
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// A flat file system: `/` holds named files; `block` never answers a
/// read until flushed; a write to `slow` takes a while, and a stat of
/// `sleepy` holds up its thread a while longer; an open of `slowopen`
/// takes a while; a stat of `panic` panics at once, a write to it after a
/// while.
#[derive(Default)]
struct Mem {
    files: Mutex<BTreeMap<String, Vec<u8>>>,
    clunks: AtomicUsize,
    cancelled_reads: AtomicUsize,
}

fn qid(name: &str) -> Qid {
    match name {
        "" => Qid { ty: QTDIR, vers: 0, path: 0 },
        n => Qid { ty: QTFILE, vers: 0, path: n.len() as u64 },
    }
}

/// Counts reads dropped before they finished.
struct DropCount<'a>(&'a AtomicUsize, bool);
impl Drop for DropCount<'_> {
    fn drop(&mut self) {
        if !self.1 {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }
}

impl Serve for Mem {
    type Fid = String;
    type Error = String;
    async fn attach(&self, _: &str, _: &str) -> srv::Result<(Qid, String)> {
        Ok((qid(""), String::new()))
    }
    async fn walk(&self, fid: &String, names: &[String]) -> srv::Result<(Vec<Qid>, Option<String>)> {
        match names {
            [] => Ok((vec![], Some(fid.clone()))),
            [n] if fid.is_empty()
                && (["block", "slow", "sleepy", "slowopen", "panic"].contains(&n.as_str())
                    || self.files.lock().unwrap().contains_key(n)) =>
            {
                Ok((vec![qid(n)], Some(n.clone())))
            }
            [n, ..] => Err(format!("file does not exist: {n}")),
        }
    }
    async fn open(&self, fid: &String, _: u8) -> srv::Result<(Qid, String)> {
        if fid == "slowopen" {
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        Ok((qid(fid), fid.clone()))
    }
    async fn create(&self, fid: &String, name: &str, _: u32, _: u8) -> srv::Result<(Qid, String)> {
        if !fid.is_empty() {
            return Err("not a directory".into());
        }
        self.files.lock().unwrap().insert(name.into(), vec![]);
        Ok((qid(name), name.into()))
    }
    async fn read(&self, fid: &String, offset: u64, count: u32) -> srv::Result<Vec<u8>> {
        if fid == "block" {
            let mut guard = DropCount(&self.cancelled_reads, false);
            tokio::time::sleep(Duration::from_secs(3600)).await;
            guard.1 = true;
            return Ok(vec![]);
        }
        let files = self.files.lock().unwrap();
        let data = files.get(fid).ok_or("is a directory")?;
        let from = (offset as usize).min(data.len());
        Ok(data[from..(from + count as usize).min(data.len())].to_vec())
    }
    async fn write(&self, fid: &String, offset: u64, data: Vec<u8>) -> srv::Result<u32> {
        if fid == "slow" {
            tokio::time::sleep(Duration::from_millis(200)).await;
            return Ok(data.len() as u32);
        }
        if fid == "panic" {
            tokio::time::sleep(Duration::from_millis(50)).await;
            panic!("a write that panics");
        }
        let mut files = self.files.lock().unwrap();
        let f = files.get_mut(fid).ok_or("is a directory")?;
        let end = offset as usize + data.len();
        if f.len() < end {
            f.resize(end, 0);
        }
        f[offset as usize..end].copy_from_slice(&data);
        Ok(data.len() as u32)
    }
    async fn clunk(&self, _: String) {
        self.clunks.fetch_add(1, Ordering::SeqCst);
    }
    async fn remove(&self, fid: String) -> srv::Result<()> {
        self.files.lock().unwrap().remove(&fid).map(|_| ()).ok_or("cannot remove the root".into())
    }
    async fn stat(&self, fid: &String) -> srv::Result<Stat> {
        assert_ne!(fid, "panic", "a stat that panics");
        if fid == "sleepy" {
            // Answered inline, with the connection's loop held meanwhile.
            std::thread::sleep(Duration::from_millis(600));
        }
        Ok(Stat { qid: qid(fid), name: fid.as_str().into(), ..Stat::default() })
    }
    async fn wstat(&self, _: &String, _: Stat) -> srv::Result<()> {
        Err("wstat not allowed".into())
    }
}

fn start(mem: Arc<Mem>) -> tokio::net::UnixStream {
    let (a, b) = tokio::net::UnixStream::pair().unwrap();
    let config = Config { msize: 64 * 1024, ..Config::default() };
    tokio::spawn(serve_conn(mem, b, config));
    a
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn requests_sent_before_any_reply_is_awaited_all_go_out_and_are_answered() {
    // The server, its replies unread, blocks writing them and reads no
    // more requests; the client, its requests unread, blocks writing
    // them. Unless the client reads while it waits for room, neither
    // goes on.
    let mem = Arc::new(Mem::default());
    let c = Client::handshake(start(mem), 1 << 20).await.unwrap();
    let root = c.attach("glenda", "").await.unwrap();
    let all = async {
        let mut sent = Vec::new();
        for _ in 0..5000 {
            sent.push(c.send(Fcall::Tstat { fid: root }).await.unwrap());
        }
        for s in sent {
            assert!(matches!(s.reply().await.unwrap(), Fcall::Rstat { .. }));
        }
    };
    tokio::time::timeout(Duration::from_secs(60), all).await.expect("every request written and answered");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn files_through_the_client_over_tcp() {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let mem = Arc::new(Mem::default());
    tokio::spawn(async move {
        let (stream, _) = listener.accept().await.unwrap();
        serve_conn(mem, stream, Config::default()).await
    });
    let c = dial(&format!("tcp!127.0.0.1!{port}"), 1 << 20).await.unwrap();
    let root = c.attach("glenda", "").await.unwrap();
    let (dir, _) = c.walk(root, &[]).await.unwrap();
    let f = c.create(dir, "notes", 0o644, ORDWR).await.unwrap();
    let text: Vec<u8> = (0..600_000u32).map(|i| (i % 251) as u8).collect();
    c.write_all(&f, 0, &text).await.unwrap();
    let g = c.open_path(root, "notes", OREAD).await.unwrap();
    assert!(c.read_all(&g).await.unwrap() == text, "read back as written");
    assert_eq!(c.stat(g.fid).await.unwrap().name, "notes");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn files_through_the_client() {
    let mem = Arc::new(Mem::default());
    let c = Client::handshake(start(mem.clone()), 1 << 20).await.unwrap();
    assert_eq!(c.msize(), 64 * 1024, "the smaller of client's and server's");
    let root = c.attach("glenda", "").await.unwrap();
    let (dir, _) = c.walk(root, &[]).await.unwrap();
    let f = c.create(dir, "notes", 0o644, ORDWR).await.unwrap();
    c.write_all(&f, 0, &vec![b'a'; 200_000]).await.unwrap();
    let g = c.open_path(root, "notes", OREAD).await.unwrap();
    assert_eq!(c.read_all(&g).await.unwrap().len(), 200_000);
    assert_eq!(c.walk(root, &["nope"]).await.unwrap_err().to_string(), "file does not exist: nope");
    assert_eq!(c.stat(g.fid).await.unwrap().name, "notes");
    assert_eq!(c.wstat(g.fid, Stat::dont_touch()).await.unwrap_err().to_string(), "wstat not allowed");
    c.clunk(g.fid).await.unwrap();
    assert_eq!(c.stat(g.fid).await.unwrap_err().to_string(), format!("unknown fid {}", g.fid));
    // Many requests at once on one connection.
    let reads = (0..32).map(|_| {
        let c = c.clone();
        async move {
            let h = c.open_path(root, "notes", OREAD).await.unwrap();
            let n = c.read(h.fid, 100, 10).await.unwrap().len();
            c.clunk(h.fid).await.unwrap();
            n
        }
    });
    let got: Vec<usize> = futures_join_all(reads).await;
    assert!(got.iter().all(|n| *n == 10));
}

async fn futures_join_all<F: std::future::Future<Output = usize> + Send + 'static>(
    fs: impl Iterator<Item = F>,
) -> Vec<usize> {
    let handles: Vec<_> = fs.map(tokio::spawn).collect();
    let mut out = vec![];
    for h in handles {
        out.push(h.await.unwrap());
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn flush_cancels_a_blocked_read_and_others_go_on() {
    let mem = Arc::new(Mem::default());
    mem.files.lock().unwrap().insert("f".into(), b"data".to_vec());
    let c = Client::handshake(start(mem.clone()), 8192).await.unwrap();
    let root = c.attach("u", "").await.unwrap();
    let b = c.open_path(root, "block", OREAD).await.unwrap();
    let blocked = tokio::spawn({
        let c = c.clone();
        async move { c.read(b.fid, 0, 10).await }
    });
    // The blocked read does not hold up other requests.
    let f = c.open_path(root, "f", OREAD).await.unwrap();
    assert_eq!(c.read_all(&f).await.unwrap(), b"data");
    assert!(tokio::time::timeout(Duration::from_millis(50), c.read(b.fid, 0, 10)).await.is_err());
    blocked.abort();
    for _ in 0..200 {
        if mem.cancelled_reads.load(Ordering::SeqCst) == 2 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    assert_eq!(mem.cancelled_reads.load(Ordering::SeqCst), 2, "both flushed reads were cancelled in the server");
    assert_eq!(c.read_all(&f).await.unwrap(), b"data");
}

/// Writes raw frames and reads raw replies.
async fn raw_rpc(s: &mut tokio::net::UnixStream, frame: &[u8]) -> Msg {
    s.write_all(frame).await.unwrap();
    let mut buf = Vec::new();
    loop {
        if let Some(n) = check(&buf, 1 << 20).unwrap() {
            return parse(&buf[..n]).unwrap();
        }
        let mut chunk = [0u8; 4096];
        let k = s.read(&mut chunk).await.unwrap();
        assert!(k > 0, "server hung up");
        buf.extend_from_slice(&chunk[..k]);
    }
}

fn t(tag: u16, body: Fcall) -> Vec<u8> {
    to_bytes(&Msg { tag, body })
}

#[tokio::test]
async fn version_rules_and_malformed_messages() {
    let mem = Arc::new(Mem::default());
    let mut s = start(mem.clone());
    // Nothing before Tversion.
    let r = raw_rpc(&mut s, &t(1, Fcall::Tattach { fid: 0, afid: NOFID, uname: "u".into(), aname: "".into() })).await;
    assert_eq!(r.body, Fcall::Rerror { ename: "send Tversion first".into() });
    let r = raw_rpc(&mut s, &t(NOTAG, Fcall::Tversion { msize: 100, version: "9P2000".into() })).await;
    assert!(matches!(r.body, Fcall::Rerror { ref ename } if ename.contains("at least 256")), "{r:?}");
    let r = raw_rpc(&mut s, &t(NOTAG, Fcall::Tversion { msize: 8192, version: "9P2000.L".into() })).await;
    assert_eq!(r.body, Fcall::Rversion { msize: 8192, version: "9P2000".into() });
    let r = raw_rpc(&mut s, &t(NOTAG, Fcall::Tversion { msize: 8192, version: "styx".into() })).await;
    assert_eq!(r.body, Fcall::Rversion { msize: 8192, version: "unknown".into() });
    raw_rpc(&mut s, &t(NOTAG, Fcall::Tversion { msize: 8192, version: "9P2000".into() })).await;
    let r = raw_rpc(&mut s, &t(2, Fcall::Tauth { afid: 1, uname: "u".into(), aname: "".into() })).await;
    assert_eq!(r.body, Fcall::Rerror { ename: "authentication not required".into() });
    for fid in [0, 1] {
        let r = raw_rpc(&mut s, &t(3, Fcall::Tattach { fid, afid: NOFID, uname: "u".into(), aname: "".into() })).await;
        assert!(matches!(r.body, Fcall::Rattach { .. }));
    }
    let r = raw_rpc(&mut s, &t(3, Fcall::Tattach { fid: 0, afid: NOFID, uname: "u".into(), aname: "".into() })).await;
    assert_eq!(r.body, Fcall::Rerror { ename: "fid 0 in use".into() });
    // A malformed message is answered on its tag; the next one is served.
    let mut bad = t(4, Fcall::Tclunk { fid: 0 });
    bad.push(0);
    bad[0] += 1;
    let r = raw_rpc(&mut s, &bad).await;
    assert_eq!(r.tag, 4);
    assert!(matches!(r.body, Fcall::Rerror { ref ename } if ename.contains("after its message")), "{r:?}");
    let r = raw_rpc(&mut s, &[7, 0, 0, 0, 250, 5, 0]).await;
    assert_eq!(
        (r.tag, r.body),
        (5, Fcall::Rerror { ename: "unknown 9P message type 250: this server speaks 9P2000".into() })
    );
    let r = raw_rpc(&mut s, &t(6, Fcall::Rclunk)).await;
    assert!(matches!(r.body, Fcall::Rerror { .. }));
    // A second Tversion clunks every fid.
    assert_eq!(mem.clunks.load(Ordering::SeqCst), 0);
    raw_rpc(&mut s, &t(NOTAG, Fcall::Tversion { msize: 8192, version: "9P2000".into() })).await;
    assert_eq!(mem.clunks.load(Ordering::SeqCst), 2);
    let r = raw_rpc(&mut s, &t(7, Fcall::Tstat { fid: 0 })).await;
    assert_eq!(r.body, Fcall::Rerror { ename: "unknown fid 0".into() });
    // A frame larger than msize ends the connection.
    raw_rpc(&mut s, &t(8, Fcall::Tattach { fid: 9, afid: NOFID, uname: "u".into(), aname: "".into() })).await;
    s.write_all(&[0, 0, 1, 0, 116]).await.unwrap();
    let mut rest = Vec::new();
    s.read_to_end(&mut rest).await.unwrap();
    assert!(rest.is_empty(), "no reply to a broken frame, just the hang-up");
    for _ in 0..100 {
        if mem.clunks.load(Ordering::SeqCst) == 3 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    assert_eq!(mem.clunks.load(Ordering::SeqCst), 3, "the hang-up clunked the last fid");
}

/// Reads `n` replies off the stream.
async fn raw_replies(s: &mut tokio::net::UnixStream, n: usize) -> Vec<Msg> {
    raw_until(s, |got| got.len() == n).await
}

/// Reads replies off the stream until `done` says they are enough.
async fn raw_until(s: &mut tokio::net::UnixStream, done: impl Fn(&[Msg]) -> bool) -> Vec<Msg> {
    let mut buf = Vec::new();
    let mut out = Vec::new();
    while !done(&out) {
        if let Some(k) = check(&buf, 1 << 20).unwrap() {
            out.push(parse(&buf[..k]).unwrap());
            buf.drain(..k);
            continue;
        }
        let mut chunk = [0u8; 4096];
        let k = tokio::time::timeout(Duration::from_secs(20), s.read(&mut chunk)).await.expect("a reply").unwrap();
        assert!(k > 0, "server hung up");
        buf.extend_from_slice(&chunk[..k]);
    }
    assert!(buf.is_empty(), "no reply beyond those: {:?}", parse(&buf));
    out
}

/// A connection to `mem` with fid 0 its root and fid 1 its file `name`.
async fn start_at(mem: Arc<Mem>, name: &str) -> tokio::net::UnixStream {
    let mut s = start(mem);
    raw_rpc(&mut s, &t(NOTAG, Fcall::Tversion { msize: 8192, version: "9P2000".into() })).await;
    raw_rpc(&mut s, &t(1, Fcall::Tattach { fid: 0, afid: NOFID, uname: "u".into(), aname: "".into() })).await;
    raw_rpc(&mut s, &t(1, Fcall::Twalk { fid: 0, newfid: 1, wnames: vec![name.into()] })).await;
    s
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_flushed_write_is_answered_before_its_rflush_and_others_meanwhile() {
    let mut s = start_at(Arc::new(Mem::default()), "slow").await;
    raw_rpc(&mut s, &t(1, Fcall::Topen { fid: 1, mode: OWRITE })).await;
    // The write, its flush, and a stat, in one go; then a flush of a tag
    // that is not in flight, and one of the stat already answered.
    let mut frames = t(5, Fcall::Twrite { fid: 1, offset: 0, data: b"x".to_vec() });
    frames.extend(t(6, Fcall::Tflush { oldtag: 5 }));
    frames.extend(t(7, Fcall::Tstat { fid: 0 }));
    frames.extend(t(8, Fcall::Tflush { oldtag: 7 }));
    s.write_all(&frames).await.unwrap();
    let got: Vec<(u16, u8)> = raw_replies(&mut s, 4).await.iter().map(|m| (m.tag, m.body.ty())).collect();
    let at = |tag: u16| got.iter().position(|(t, _)| *t == tag).expect("answered");
    assert!(at(7) < at(5), "the stat is answered while the write waits: {got:?}");
    assert!(at(7) < at(8), "a flush of an answered request follows its answer: {got:?}");
    assert!(at(5) < at(6), "the write's Rwrite precedes its Rflush: {got:?}");
    assert_eq!(got[at(5)].1, 119, "the write was let finish: {got:?}");
    // The write finishes, replies and frees its tag while the connection's
    // loop is held by a stat; the flush that then finds the tag free is
    // answered after that reply.
    raw_rpc(&mut s, &t(1, Fcall::Twalk { fid: 0, newfid: 2, wnames: vec!["sleepy".into()] })).await;
    s.write_all(&t(11, Fcall::Twrite { fid: 1, offset: 0, data: b"z".to_vec() })).await.unwrap();
    tokio::time::sleep(Duration::from_millis(20)).await;
    let mut frames = t(12, Fcall::Tstat { fid: 2 });
    frames.extend(t(13, Fcall::Tflush { oldtag: 11 }));
    s.write_all(&frames).await.unwrap();
    let got: Vec<(u16, u8)> = raw_replies(&mut s, 3).await.iter().map(|m| (m.tag, m.body.ty())).collect();
    let at = |tag: u16| got.iter().position(|(t, _)| *t == tag).expect("answered");
    assert!(at(11) < at(13) && got[at(11)].1 == 119 && got[at(13)].1 == 109, "the Rwrite, then its Rflush: {got:?}");
    // A Tversion aborts a write and the flush waiting for it: nothing of
    // either follows the Rversion (their tags are free again), and the
    // connection goes on.
    s.write_all(&t(9, Fcall::Twrite { fid: 1, offset: 0, data: b"y".to_vec() })).await.unwrap();
    s.write_all(&t(10, Fcall::Tflush { oldtag: 9 })).await.unwrap();
    s.write_all(&t(NOTAG, Fcall::Tversion { msize: 8192, version: "9P2000".into() })).await.unwrap();
    s.write_all(&t(10, Fcall::Tattach { fid: 0, afid: NOFID, uname: "u".into(), aname: "".into() })).await.unwrap();
    let got = raw_until(&mut s, |got| got.iter().any(|m| matches!(m.body, Fcall::Rattach { .. }))).await;
    let version = got.iter().position(|m| matches!(m.body, Fcall::Rversion { .. })).expect("Rversion");
    assert_eq!(got.len(), version + 2, "only the Rattach after the Rversion: {got:?}");
    tokio::time::sleep(Duration::from_millis(400)).await;
    let r = raw_rpc(&mut s, &t(10, Fcall::Tstat { fid: 0 })).await;
    assert!(matches!(r.body, Fcall::Rstat { .. }), "no stray reply came since: {r:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_that_panics_is_answered_and_its_tag_freed() {
    let mut s = start_at(Arc::new(Mem::default()), "panic").await;
    let failed =
        |r: &Msg| matches!(&r.body, Fcall::Rerror { ename } if ename.contains("the server failed on this request"));
    // Answered inline: the panic comes in the connection's own loop.
    let r = raw_rpc(&mut s, &t(5, Fcall::Tstat { fid: 1 })).await;
    assert!(r.tag == 5 && failed(&r), "{r:?}");
    // In a task of its own: the reply comes, and the tag is free after.
    raw_rpc(&mut s, &t(1, Fcall::Topen { fid: 1, mode: OWRITE })).await;
    let r = raw_rpc(&mut s, &t(6, Fcall::Twrite { fid: 1, offset: 0, data: b"x".to_vec() })).await;
    assert!(r.tag == 6 && failed(&r), "{r:?}");
    let r = raw_rpc(&mut s, &t(6, Fcall::Tstat { fid: 0 })).await;
    assert!(matches!(r.body, Fcall::Rstat { .. }), "tag 6 is free and the connection goes on: {r:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_flushed_openfd_is_answered_with_its_descriptor_before_its_rflush() {
    use std::io::{Read, Write};
    use std::os::fd::AsRawFd;
    let mem = Arc::new(Mem::default());
    let (ours, theirs) = tokio::net::UnixStream::pair().unwrap();
    tokio::spawn(srv::serve_unix(mem, theirs, Config::default()));
    let mut s = ours.into_std().unwrap();
    s.set_nonblocking(false).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    tokio::task::spawn_blocking(move || {
        let frame = |s: &mut std::os::unix::net::UnixStream| {
            let mut size = [0u8; 4];
            s.read_exact(&mut size).expect("a reply");
            let mut m = size.to_vec();
            m.resize(u32::from_le_bytes(size) as usize, 0);
            s.read_exact(&mut m[4..]).expect("a reply");
            parse(&m).unwrap()
        };
        let rpc = |s: &mut std::os::unix::net::UnixStream, frame_out: Vec<u8>| {
            s.write_all(&frame_out).unwrap();
            frame(s)
        };
        rpc(&mut s, t(NOTAG, Fcall::Tversion { msize: 8192, version: "9P2000".into() }));
        rpc(&mut s, t(1, Fcall::Tattach { fid: 0, afid: NOFID, uname: "u".into(), aname: "".into() }));
        rpc(&mut s, t(1, Fcall::Twalk { fid: 0, newfid: 1, wnames: vec!["slowopen".into()] }));
        // The open takes a while; the flush comes meanwhile and is
        // answered only after the Ropenfd and its descriptor.
        let mut frames = t(3, Fcall::Topenfd { fid: 1, mode: OREAD });
        frames.extend(t(4, Fcall::Tflush { oldtag: 3 }));
        s.write_all(&frames).unwrap();
        let first = frame(&mut s);
        assert!(first.tag == 3 && matches!(first.body, Fcall::Ropenfd { .. }), "the Ropenfd first: {first:?}");
        apex_ninep::fdpass::recv_fd(s.as_raw_fd()).expect("its descriptor, right after it");
        let next = frame(&mut s);
        assert_eq!((next.tag, next.body), (4, Fcall::Rflush), "then the Rflush");
    })
    .await
    .unwrap();
}

/// A Twrite too large to be copied out of the stream's buffer has its data
/// read into a buffer of its own: whole however the bytes come, never
/// reading into the frames after it, and with the connection's other
/// replies going out while it arrives.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_large_write_arriving_in_pieces_is_whole_and_what_follows_it_is_served() {
    let mem = Arc::new(Mem::default());
    let (mut s, b) = tokio::net::UnixStream::pair().unwrap();
    tokio::spawn(serve_conn(mem.clone(), b, Config { msize: 1 << 20, ..Config::default() }));
    raw_rpc(&mut s, &t(NOTAG, Fcall::Tversion { msize: 1 << 20, version: "9P2000".into() })).await;
    raw_rpc(&mut s, &t(1, Fcall::Tattach { fid: 0, afid: NOFID, uname: "u".into(), aname: "".into() })).await;
    raw_rpc(&mut s, &t(1, Fcall::Twalk { fid: 0, newfid: 1, wnames: vec![] })).await;
    let r = raw_rpc(&mut s, &t(1, Fcall::Tcreate { fid: 1, name: "big".into(), perm: 0o644, mode: ORDWR })).await;
    assert!(matches!(r.body, Fcall::Rcreate { .. }), "{r:?}");
    raw_rpc(&mut s, &t(1, Fcall::Twalk { fid: 0, newfid: 2, wnames: vec!["slow".into()] })).await;
    raw_rpc(&mut s, &t(1, Fcall::Topen { fid: 2, mode: OWRITE })).await;

    let data: Vec<u8> = (0..600_000u32).map(|i| (i % 251) as u8).collect();
    let large = t(11, Fcall::Twrite { fid: 1, offset: 0, data: data.clone() });
    // A slow write first: its reply comes while the large frame is half
    // read.
    s.write_all(&t(10, Fcall::Twrite { fid: 2, offset: 0, data: b"x".to_vec() })).await.unwrap();
    s.write_all(&large[..40]).await.unwrap();
    tokio::time::sleep(Duration::from_millis(20)).await;
    s.write_all(&large[40..300_000]).await.unwrap();
    let got = raw_replies(&mut s, 1).await;
    assert_eq!((got[0].tag, &got[0].body), (10, &Fcall::Rwrite { count: 1 }), "answered while the large write waits");
    // The rest of it and two more requests in one piece.
    let mut rest = large[300_000..].to_vec();
    rest.extend(t(12, Fcall::Tstat { fid: 1 }));
    rest.extend(t(13, Fcall::Tread { fid: 1, offset: 599_990, count: 100 }));
    s.write_all(&rest).await.unwrap();
    let mut got = raw_replies(&mut s, 3).await;
    got.sort_by_key(|m| m.tag);
    assert_eq!(got[0].body, Fcall::Rwrite { count: 600_000 });
    assert!(matches!(got[1].body, Fcall::Rstat { .. }), "{:?}", got[1]);
    assert_eq!(got[2].body, Fcall::Rread { data: data[599_990..].to_vec() });
    assert!(mem.files.lock().unwrap()["big"] == data, "the file holds the write whole");
}

/// Large Twrites that are wrong meet what they always met: one whose
/// size and count disagree is refused on its tag and the connection goes
/// on; one over an msize a Tversion just lowered ends the connection; a
/// peer that hangs up part-way through one has its fids clunked.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn large_writes_that_are_wrong_are_refused_as_ever() {
    async fn opened(mem: &Arc<Mem>) -> tokio::net::UnixStream {
        let (mut s, b) = tokio::net::UnixStream::pair().unwrap();
        tokio::spawn(serve_conn(mem.clone(), b, Config { msize: 1 << 20, ..Config::default() }));
        raw_rpc(&mut s, &t(NOTAG, Fcall::Tversion { msize: 1 << 20, version: "9P2000".into() })).await;
        raw_rpc(&mut s, &t(1, Fcall::Tattach { fid: 0, afid: NOFID, uname: "u".into(), aname: "".into() })).await;
        raw_rpc(&mut s, &t(1, Fcall::Twalk { fid: 0, newfid: 1, wnames: vec!["big".into()] })).await;
        raw_rpc(&mut s, &t(1, Fcall::Topen { fid: 1, mode: OWRITE })).await;
        s
    }
    let mem = Arc::new(Mem::default());
    mem.files.lock().unwrap().insert("big".into(), Vec::new());

    let mut s = opened(&mem).await;
    let mut bad = t(5, Fcall::Twrite { fid: 1, offset: 0, data: vec![b'a'; 300_000] });
    bad.extend_from_slice(&[0; 10]);
    let size = bad.len() as u32;
    bad[..4].copy_from_slice(&size.to_le_bytes());
    s.write_all(&bad[..100_000]).await.unwrap();
    let r = raw_rpc(&mut s, &bad[100_000..]).await;
    assert_eq!(r.tag, 5);
    assert!(matches!(r.body, Fcall::Rerror { ref ename } if ename.contains("after its message")), "{r:?}");
    let r = raw_rpc(&mut s, &t(6, Fcall::Tstat { fid: 1 })).await;
    assert!(matches!(r.body, Fcall::Rstat { .. }), "served on: {r:?}");
    assert!(mem.files.lock().unwrap()["big"].is_empty(), "nothing written");

    // A Tversion to 8192, and a large Twrite after it in the same write.
    let mut both = t(NOTAG, Fcall::Tversion { msize: 8192, version: "9P2000".into() });
    both.extend(t(7, Fcall::Twrite { fid: 1, offset: 0, data: vec![b'a'; 300_000] }));
    // The server may hang up before it has read all of it.
    let _ = s.write_all(&both).await;
    // What came before the hang-up (a reset, with the frame unread).
    let mut rest = Vec::new();
    let mut chunk = [0u8; 4096];
    loop {
        match tokio::time::timeout(Duration::from_secs(20), s.read(&mut chunk)).await.expect("a hang-up") {
            Ok(0) | Err(_) => break,
            Ok(k) => rest.extend_from_slice(&chunk[..k]),
        }
    }
    // The broken frame ends the connection as soon as it is seen: the
    // Rversion made in the same pass may never go out, and nothing else
    // does.
    if !rest.is_empty() {
        let r = parse(&rest[..check(&rest, 1 << 20).unwrap().expect("a whole reply")]).unwrap();
        assert_eq!(r.body, Fcall::Rversion { msize: 8192, version: "9P2000".into() });
        assert_eq!(check(&rest, 1 << 20).unwrap(), Some(rest.len()), "nothing after the Rversion");
    }

    // Half a large Twrite, then gone.
    let clunks = mem.clunks.load(Ordering::SeqCst);
    let mut s = opened(&mem).await;
    let half = t(8, Fcall::Twrite { fid: 1, offset: 0, data: vec![b'a'; 300_000] });
    s.write_all(&half[..150_000]).await.unwrap();
    drop(s);
    for _ in 0..2000 {
        if mem.clunks.load(Ordering::SeqCst) == clunks + 2 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(mem.clunks.load(Ordering::SeqCst), clunks + 2, "both fids clunked at the hang-up");
    assert!(mem.files.lock().unwrap()["big"].is_empty(), "nothing written");
}

/// A server whose one file's read is answered only once it is flushed,
/// with data: a reply already on its way when the Tflush came.
struct Late;

impl Serve for Late {
    type Fid = ();
    type Error = String;
    async fn attach(&self, _: &str, _: &str) -> srv::Result<(Qid, ())> {
        Ok((qid(""), ()))
    }
    async fn walk(&self, _: &(), names: &[String]) -> srv::Result<(Vec<Qid>, Option<()>)> {
        Ok((names.iter().map(|n| qid(n)).collect(), Some(())))
    }
    async fn open(&self, _: &(), _: u8) -> srv::Result<(Qid, ())> {
        Ok((qid("late"), ()))
    }
    async fn create(&self, _: &(), _: &str, _: u32, _: u8) -> srv::Result<(Qid, ())> {
        Err("no".into())
    }
    async fn read(&self, _: &(), _: u64, _: u32) -> srv::Result<Vec<u8>> {
        srv::flushed().await;
        Ok(b"late".to_vec())
    }
    async fn write(&self, _: &(), _: u64, _: Vec<u8>) -> srv::Result<u32> {
        Err("no".into())
    }
    async fn clunk(&self, _: ()) {}
    async fn remove(&self, _: ()) -> srv::Result<()> {
        Err("no".into())
    }
    async fn stat(&self, _: &()) -> srv::Result<Stat> {
        Ok(Stat::default())
    }
    async fn wstat(&self, _: &(), _: Stat) -> srv::Result<()> {
        Err("no".into())
    }
    fn finishes_flushed_reads(&self) -> bool {
        true
    }
}

/// Through a forwarder (9pserve's), a read flushed locally is flushed
/// upstream, and the reply that came before the upstream Rflush is passed
/// on before the local one: what the read took is not lost.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_forwarded_read_answered_as_it_is_flushed_is_passed_on_before_the_rflush() {
    let (up, served) = tokio::net::UnixStream::pair().unwrap();
    tokio::spawn(serve_conn(Arc::new(Late), served, Config::default()));
    let client = Client::handshake(up, 8192).await.unwrap();
    let forward = Arc::new(apex_ninep::forward::Forward::new(client, "up", None));
    let (mut s, local) = tokio::net::UnixStream::pair().unwrap();
    tokio::spawn(srv::serve_unix(forward, local, Config::default()));
    raw_rpc(&mut s, &t(NOTAG, Fcall::Tversion { msize: 8192, version: "9P2000".into() })).await;
    raw_rpc(&mut s, &t(1, Fcall::Tattach { fid: 0, afid: NOFID, uname: "u".into(), aname: "".into() })).await;
    raw_rpc(&mut s, &t(1, Fcall::Twalk { fid: 0, newfid: 1, wnames: vec!["late".into()] })).await;
    raw_rpc(&mut s, &t(1, Fcall::Topen { fid: 1, mode: OREAD })).await;
    s.write_all(&t(5, Fcall::Tread { fid: 1, offset: 0, count: 100 })).await.unwrap();
    tokio::time::sleep(Duration::from_millis(100)).await;
    s.write_all(&t(6, Fcall::Tflush { oldtag: 5 })).await.unwrap();
    let replies = raw_replies(&mut s, 2).await;
    assert_eq!(replies[0], Msg { tag: 5, body: Fcall::Rread { data: b"late".to_vec() } });
    assert_eq!(replies[1], Msg { tag: 6, body: Fcall::Rflush });
}

/// A record layer for the test: each byte masked, plaintext given out at
/// most 1000 bytes a read (the rest held, as TLS holds what it opened),
/// and sealed bytes queued until the socket takes them.
#[derive(Default)]
struct Masked(Mutex<MaskedState>);

#[derive(Default)]
struct MaskedState {
    held: std::collections::VecDeque<u8>,
    queued: Vec<u8>,
    ended: bool,
}

const MASK: u8 = 0x5a;

impl layer::Layer for Masked {
    fn read(&self, socket: &mut layer::Wire<'_>, into: &mut Vec<u8>, most: usize) -> std::io::Result<usize> {
        use std::io::Read;
        let mut s = self.0.lock().unwrap();
        if s.held.is_empty() && !s.ended {
            let mut buf = vec![0u8; 256 * 1024];
            let n = socket.read(&mut buf)?;
            s.ended = n == 0;
            s.held.extend(buf[..n].iter().map(|b| b ^ MASK));
        }
        let n = s.held.len().min(most).min(1000);
        into.extend(s.held.drain(..n));
        Ok(n)
    }
    fn seal(&self, parts: &[&[u8]]) -> std::io::Result<()> {
        let mut s = self.0.lock().unwrap();
        for part in parts {
            s.queued.extend(part.iter().map(|b| b ^ MASK));
        }
        Ok(())
    }
    fn flush(&self, socket: &mut layer::Wire<'_>) -> std::io::Result<()> {
        use std::io::Write;
        let mut s = self.0.lock().unwrap();
        while !s.queued.is_empty() {
            let n = socket.write(&s.queued)?;
            s.queued.drain(..n);
        }
        Ok(())
    }
    fn queued(&self) -> bool {
        !self.0.lock().unwrap().queued.is_empty()
    }
    fn close(&self, _: &mut layer::Wire<'_>) {}
}

/// The server's side of the masked socket: bytes unmasked on their way to
/// a real server and masked on their way back. While `paused`, the
/// client's requests are left unread, so its socket fills and its records
/// queue.
async fn unmasking(mem: Arc<Mem>, theirs: tokio::net::UnixStream, paused: Arc<std::sync::atomic::AtomicBool>) {
    let (plain, server) = tokio::net::UnixStream::pair().unwrap();
    tokio::spawn(serve_conn(mem, server, Config { msize: 1 << 20, ..Config::default() }));
    let (mut from_client, mut to_client) = theirs.into_split();
    let (mut from_server, mut to_server) = plain.into_split();
    let up = async move {
        let mut buf = vec![0u8; 64 * 1024];
        loop {
            while paused.load(Ordering::SeqCst) {
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
            let Ok(n @ 1..) = from_client.read(&mut buf).await else { break };
            buf[..n].iter_mut().for_each(|b| *b ^= MASK);
            if to_server.write_all(&buf[..n]).await.is_err() {
                break;
            }
        }
    };
    let down = async move {
        let mut buf = vec![0u8; 256 * 1024];
        while let Ok(n @ 1..) = from_server.read(&mut buf).await {
            buf[..n].iter_mut().for_each(|b| *b ^= MASK);
            if to_client.write_all(&buf[..n]).await.is_err() {
                break;
            }
        }
    };
    tokio::join!(up, down);
}

/// Through a record layer the client reads and writes as on a bare
/// socket: what the layer holds is read though the socket is not
/// readable (replies that came together, given out a little at a time,
/// each reach their request), and what it queues while the socket is
/// full goes out as room comes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_through_a_record_layer_works_as_on_the_socket() {
    let mem = Arc::new(Mem::default());
    let (ours, theirs) = tokio::net::UnixStream::pair().unwrap();
    let paused = Arc::new(std::sync::atomic::AtomicBool::new(false));
    tokio::spawn(unmasking(mem.clone(), theirs, paused.clone()));
    let all = async {
        let c = Client::handshake_through(ours, Box::new(Masked::default()), 1 << 20).await.unwrap();
        let root = c.attach("glenda", "").await.unwrap();
        let text: Vec<u8> = (0..600_000u32).map(|i| (i % 251) as u8).collect();
        // One write, sent while the far end reads nothing: more than the
        // socket holds is sealed and queued, and the writer itself sends
        // the rest as room comes (nobody else will).
        let f = c.create(c.walk(root, &[]).await.unwrap().0, "notes", 0o644, ORDWR).await.unwrap();
        assert!(f.iounit as usize >= text.len(), "one Twrite carries it");
        paused.store(true, Ordering::SeqCst);
        let resume = paused.clone();
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(300)).await;
            resume.store(false, Ordering::SeqCst);
        });
        c.write_all(&f, 0, &text).await.unwrap();
        let g = c.open_path(root, "notes", OREAD).await.unwrap();
        assert!(c.read_all(&g).await.unwrap() == text, "read back as written");
        // Many small reads at once: their replies come together and are
        // given out 1000 bytes at a time.
        let reads = (0..64).map(|i| {
            let c = c.clone();
            async move {
                let h = c.open_path(root, "notes", OREAD).await.unwrap();
                let got = c.read(h.fid, i * 100, 100).await.unwrap();
                c.clunk(h.fid).await.unwrap();
                got
            }
        });
        let handles: Vec<_> = reads.map(tokio::spawn).collect();
        for (i, h) in handles.into_iter().enumerate() {
            assert!(h.await.unwrap() == text[i * 100..i * 100 + 100], "read {i} has its own bytes");
        }
    };
    tokio::time::timeout(Duration::from_secs(30), all).await.expect("every request answered through the layer");
}
