//! No request hangs because another party is stuck: a leader stopped
//! with a tool's write routed to it loses its lease at the deadline and
//! the daemon applies the write itself, once; a Tflush of a waiting write
//! holds up nothing else on its connection, and the write either lands
//! before the Rflush or never. Every wait has a generous watchdog, so a
//! hang fails the test rather than blocking CI.

use crate::attach::{eventually, type_at};
use crate::{read, text, write, Daemon};
use apex_core::{make, AttachmentKind, BufferId, Shard};
use apex_fsd::attach::conn::Attached;
use apex_ninep::codec::{check, parse, to_bytes};
use apex_ninep::fcall::*;
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

const WATCHDOG: Duration = Duration::from_secs(20);

/// A UI leading a window with `typed` in its body, then stopped (it reads
/// and answers nothing) with more typing it has not sent.
async fn stuck_leader(d: &Daemon) -> (Attached, BufferId) {
    let c = d.client().await;
    let ui = Attached::open(&c, "main", AttachmentKind::Ui, "stuck").await.unwrap();
    assert!(ui.wait_for(WATCHDOG, |l| l.leads(Shard::Layout)).await);
    let body = ui.with(|l| make::new_window(l.node_mut().unwrap(), None, None, "/tmp/apex/stuck").unwrap().body);
    ui.with(|l| type_at(l, body, 0, "typed"));
    ui.flush().await.unwrap();
    ui.pause();
    ui.with(|l| type_at(l, body, 5, " late"));
    (ui, body)
}

/// `shard`'s holder, from `meta/leases`.
async fn holder(c: &apex_ninep::Client, root: u32, shard: &str) -> String {
    let leases = text(read(c, root, "main/meta/leases").await.unwrap());
    let line = leases.lines().find(|l| l.split(' ').next() == Some(shard)).unwrap_or_else(|| panic!("{leases}"));
    line.split(' ').nth(1).unwrap().to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_write_routed_to_a_stopped_leader_is_applied_once_by_the_daemon_at_the_deadline() {
    let d = Daemon::start_with("stuck-leader", &["--lease-deadline".into(), "300".into()]);
    let c = d.client().await;
    let root = c.attach("glenda", "").await.unwrap();
    let (ui, body) = stuck_leader(&d).await;
    let shard = format!("buffer.{}", body.0);
    assert_ne!(holder(&c, root, &shard).await, "0", "the UI leads it");

    let path = format!("main/buffers/{}/body", body.0);
    let wrote = tokio::time::timeout(WATCHDOG, write(&c, root, &path, " hello")).await;
    wrote.expect("the write hung behind a stopped leader").expect("the daemon applied it");
    assert_eq!(text(read(&c, root, &path).await.unwrap()), "typed hello");
    assert_eq!(holder(&c, root, &shard).await, "0", "the lease was reclaimed");

    // The leader wakes: fenced from the buffer, its unsent typing
    // recovered, the write there once.
    let _ = tokio::time::timeout(WATCHDOG, ui.resume()).await.expect("resume");
    assert!(ui.wait_for(WATCHDOG, |l| !l.leads(Shard::Buffer(body))).await, "the woken leader lost it");
    eventually(&c, root, "main/meta/notifications", |n| n.contains("recovered")).await;
    assert_eq!(text(read(&c, root, &path).await.unwrap()), "typed hello", "applied once");
}

/// A raw 9P connection: frames out, replies in whatever order they come.
struct Raw {
    s: tokio::net::UnixStream,
    buf: Vec<u8>,
}

impl Raw {
    async fn send(&mut self, tag: u16, body: Fcall) {
        self.s.write_all(&to_bytes(&Msg { tag, body })).await.unwrap();
    }

    /// The next reply, or None if none comes within `wait`.
    async fn next(&mut self, wait: Duration) -> Option<Msg> {
        let deadline = tokio::time::Instant::now() + wait;
        loop {
            if let Some(n) = check(&self.buf, 1 << 20).unwrap() {
                let msg = parse(&self.buf[..n]).unwrap();
                self.buf.drain(..n);
                return Some(msg);
            }
            let mut chunk = [0u8; 8192];
            let k = tokio::time::timeout_at(deadline, self.s.read(&mut chunk)).await.ok()?.unwrap();
            assert!(k > 0, "the daemon hung up");
            self.buf.extend_from_slice(&chunk[..k]);
        }
    }

    async fn rpc(&mut self, tag: u16, body: Fcall) -> Fcall {
        self.send(tag, body).await;
        let m = self.next(WATCHDOG).await.expect("a reply");
        assert_eq!(m.tag, tag);
        m.body
    }
}

/// A raw connection with `main/buffers/N/body` open for writing as fid 1.
async fn raw_body(d: &Daemon, body: BufferId) -> Raw {
    let s = tokio::net::UnixStream::connect(d.socket()).await.unwrap();
    let mut r = Raw { s, buf: Vec::new() };
    let v = r.rpc(NOTAG, Fcall::Tversion { msize: 8192, version: "9P2000".into() }).await;
    assert!(matches!(v, Fcall::Rversion { .. }));
    let a = r.rpc(1, Fcall::Tattach { fid: 0, afid: NOFID, uname: "u".into(), aname: "".into() }).await;
    assert!(matches!(a, Fcall::Rattach { .. }));
    let names = ["main", "buffers", &body.0.to_string(), "body"].map(String::from).to_vec();
    let w = r.rpc(2, Fcall::Twalk { fid: 0, newfid: 1, wnames: names }).await;
    assert!(matches!(w, Fcall::Rwalk { ref wqids } if wqids.len() == 4), "{w:?}");
    let o = r.rpc(3, Fcall::Topen { fid: 1, mode: OWRITE }).await;
    assert!(matches!(o, Fcall::Ropen { .. }), "{o:?}");
    r
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_flushed_write_holds_up_nothing_and_lands_before_the_rflush_or_never() {
    // A deadline the test outlives only if the leader answers.
    let d = Daemon::start_with("stuck-flush", &["--lease-deadline".into(), "1500".into()]);
    let c = d.client().await;
    let root = c.attach("glenda", "").await.unwrap();
    let (ui, body) = stuck_leader(&d).await;
    let path = format!("main/buffers/{}/body", body.0);

    // Flushed while the stopped leader holds it: the connection's next
    // request is answered at once, while the flush waits.
    let mut r = raw_body(&d, body).await;
    r.send(10, Fcall::Twrite { fid: 1, offset: 0, data: b" never".to_vec() }).await;
    r.send(11, Fcall::Tflush { oldtag: 10 }).await;
    // Flushed again (a second interrupt): that Rflush waits too.
    r.send(13, Fcall::Tflush { oldtag: 10 }).await;
    r.send(12, Fcall::Tstat { fid: 0 }).await;
    let first = r.next(WATCHDOG).await.expect("the Tstat answered while the flush waits");
    assert_eq!(first.tag, 12, "{first:?}");
    assert!(matches!(first.body, Fcall::Rstat { .. }));
    // At the deadline the leader loses the lease; the flushed write is
    // dropped, not applied: its Rerror, then the Rflush.
    let write = r.next(WATCHDOG).await.expect("the write's reply");
    assert_eq!(write.tag, 10, "{write:?}");
    assert!(matches!(&write.body, Fcall::Rerror { ename } if ename.contains("flushed")), "{write:?}");
    let mut flushes: Vec<(u16, Fcall)> = Vec::new();
    for _ in 0..2 {
        let m = r.next(WATCHDOG).await.expect("an Rflush");
        flushes.push((m.tag, m.body));
    }
    flushes.sort_by_key(|(tag, _)| *tag);
    assert_eq!(flushes, [(11, Fcall::Rflush), (13, Fcall::Rflush)], "both after the write's reply");
    assert_eq!(holder(&c, root, &format!("buffer.{}", body.0)).await, "0", "reclaimed");
    assert_eq!(text(read(&c, root, &path).await.unwrap()), "typed", "the flushed write never appears");
    let _ = tokio::time::timeout(WATCHDOG, ui.resume()).await.expect("resume");

    // A second UI leads and answers: a write flushed once it was sent
    // there lands, and its Rwrite comes before the Rflush.
    let c2 = d.client().await;
    let ui2 = Attached::open(&c2, "main", AttachmentKind::Ui, "awake").await.unwrap();
    assert!(ui2.wait_for(WATCHDOG, |l| l.leads(Shard::Buffer(body))).await);
    let mut r = raw_body(&d, body).await;
    r.send(20, Fcall::Twrite { fid: 1, offset: 0, data: b" kept".to_vec() }).await;
    r.send(21, Fcall::Tflush { oldtag: 20 }).await;
    let mut tags = Vec::new();
    for _ in 0..2 {
        let m = r.next(WATCHDOG).await.expect("a reply");
        tags.push((m.tag, matches!(m.body, Fcall::Rwrite { .. } | Fcall::Rflush)));
    }
    let applied = text(read(&c, root, &path).await.unwrap());
    match applied.as_str() {
        "typed kept" => assert_eq!(tags, [(20, true), (21, true)], "the Rwrite before the Rflush"),
        "typed" => assert_eq!(tags[1], (21, true), "dropped, then the Rflush: {tags:?}"),
        other => panic!("the body is {other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lease_reclaimed_through_its_file_takes_the_writes_waiting_for_the_stuck_holder() {
    // The deadline is a minute: the write routed to the stopped leader
    // lands when somebody reclaims the lease by hand, not a minute on.
    let d = Daemon::start_with("stuck-reclaim", &["--lease-deadline".into(), "60000".into()]);
    let c = d.client().await;
    let root = c.attach("glenda", "").await.unwrap();
    let (ui, body) = stuck_leader(&d).await;
    let path = format!("main/buffers/{}/body", body.0);
    let writing = {
        let (c, path) = (c.clone(), path.clone());
        tokio::spawn(async move { write(&c, root, &path, " hello").await })
    };
    let shard = format!("buffer.{}", body.0);
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert!(!writing.is_finished(), "the write waits for the stopped leader");
    write(&c, root, &format!("main/shards/{shard}/lease"), "reclaim\n").await.unwrap();
    let wrote = tokio::time::timeout(WATCHDOG, writing).await.expect("the write still waits after the reclaim");
    wrote.unwrap().expect("applied by the daemon");
    assert_eq!(text(read(&c, root, &path).await.unwrap()), "typed hello");
    assert_eq!(holder(&c, root, &shard).await, "0");
    let _ = tokio::time::timeout(WATCHDOG, ui.resume()).await.expect("resume");
}
