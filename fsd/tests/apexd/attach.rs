//! The attach protocol through a real `apexd`: UIs and tools on their own
//! 9P connections, leadership moving between them, a stuck leader fenced
//! and its late typing recovered, and every replica agreeing with the
//! daemon's `NAME/hash` at the end.

use crate::{read, text, write, Daemon};
use apex_core::{make, AttachmentKind, BufferId, BufferOp, Op, Origin, Proposal, Shard};
use apex_fsd::attach::conn::Attached;
use apex_fsd::attach::link::{Event, Link};
use apex_ninep::Client;
use std::time::Duration;

const WAIT: Duration = Duration::from_secs(10);

pub fn type_at(link: &mut Link, b: BufferId, q: u64, s: &str) {
    let op = BufferOp::Splice { q0: q, q1: q, text: s.into(), origin: Origin::Keyboard };
    link.node_mut().unwrap().append(Shard::Buffer(b), Op::Buffer(op)).expect("the leader types");
}

/// Reads `path` until `pred` holds of it (replicas flush in their own time).
pub async fn eventually(c: &Client, root: u32, path: &str, pred: impl Fn(&str) -> bool) -> String {
    let deadline = tokio::time::Instant::now() + WAIT;
    loop {
        let got = text(read(c, root, path).await.unwrap());
        if pred(&got) {
            return got;
        }
        assert!(tokio::time::Instant::now() < deadline, "{path}: {got:?}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

async fn daemon_hash(c: &Client, root: u32) -> String {
    text(read(c, root, "main/hash").await.unwrap()).trim().to_string()
}

/// Waits until every link is quiet and agrees with the daemon's hash.
pub async fn converge(c: &Client, root: u32, links: &[&Attached]) {
    let deadline = tokio::time::Instant::now() + WAIT;
    loop {
        let want = daemon_hash(c, root).await;
        let agree = links.iter().all(|l| {
            l.with(|l| l.quiet() && l.node().is_some_and(|n| n.state.hash().to_hex().as_str() == want))
        });
        if agree {
            return;
        }
        if tokio::time::Instant::now() > deadline {
            let states: Vec<String> = links
                .iter()
                .map(|l| l.with(|l| format!("{:?} {:?}", l.unsettled(), l.node().map(|n| n.state.hash().to_hex()))))
                .collect();
            panic!("replicas did not converge on {want}: {states:?}");
        }
        for l in links {
            let _ = l.flush().await;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_uis_and_a_tool_take_over_fence_recover_and_agree() {
    let d = Daemon::start_with("attach", &["--lease-deadline".into(), "300".into()]);
    let c = d.client().await;
    let root = c.attach("glenda", "").await.unwrap();
    let c1 = d.client().await;
    let ui1 = Attached::open(&c1, "main", AttachmentKind::Ui, "ui1").await.unwrap();
    assert!(ui1.wait_for(WAIT, |l| l.leads(Shard::Layout)).await, "a lone UI leads at once");

    // The UI makes a window and types; the daemon has it on flush.
    let body = ui1.with(|l| make::new_window(l.node_mut().unwrap(), None, None, "/tmp/apex/notes").unwrap().body);
    ui1.with(|l| type_at(l, body, 0, "hello"));
    ui1.flush().await.unwrap();
    let path = format!("main/buffers/{}/body", body.0);
    assert_eq!(text(read(&c, root, &path).await.unwrap()), "hello");

    // A tool proposes through the proposals file and through the protocol;
    // the leading UI applies both, and each write returns once sequenced.
    let c3 = d.client().await;
    let tool = Attached::open(&c3, "main", AttachmentKind::Tool, "lint").await.unwrap();
    assert!(tool.wait_for(WAIT, |l| l.node().is_some()).await);
    let version = ui1.with(|l| l.node().unwrap().state.buffer(body).unwrap().version);
    write(&c, root, "main/proposals", &format!("insert {} {version} 5\n!", body.0)).await.unwrap();
    assert_eq!(text(read(&c, root, &path).await.unwrap()), "hello!");
    let version = ui1.with(|l| l.node().unwrap().state.buffer(body).unwrap().version);
    let p = Proposal::Insert { buffer: body, version, q0: 0, text: "> ".into(), origin: Origin::OtherFile };
    let id = tool.with(|l| l.propose(p));
    tool.flush().await.unwrap();
    let answered = |l: &Link| l.node().is_some_and(|n| n.state.buffer(body).is_ok_and(|b| b.text.to_string() == "> hello!"));
    assert!(tool.wait_for(WAIT, answered).await, "the tool follows the UI's entries");
    let mut got = Vec::new();
    assert!(tool.wait_for(WAIT, |l| l.node().is_some()).await);
    for _ in 0..100 {
        got.extend(tool.with(|l| l.events()));
        if got.iter().any(|e| matches!(e, Event::Answer { id: i, result: Ok(_) } if *i == id)) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(got.iter().any(|e| matches!(e, Event::Answer { id: i, result: Ok(_) } if *i == id)), "{got:?}");
    let outcomes = text(read(&c, root, "main/proposals").await.unwrap());
    assert!(outcomes.contains("ok insert"), "{outcomes}");

    // The first UI gets stuck with typing it has not sent; a second UI
    // asks for the leases and, at the deadline, the server reclaims them.
    ui1.pause();
    ui1.with(|l| type_at(l, body, 8, " late"));
    let c2 = d.client().await;
    let ui2 = Attached::open(&c2, "main", AttachmentKind::Ui, "ui2").await.unwrap();
    assert!(ui2.wait_for(WAIT, |l| l.leads(Shard::Layout) && l.leads(Shard::Buffer(body))).await, "granted at the deadline");
    ui2.with(|l| type_at(l, body, 0, "2"));
    ui2.flush().await.unwrap();

    // The stuck UI wakes: its late append is fenced, it shows fenced and
    // follows, and its tail lands in +Recovered.
    let wrote = ui1.resume().await;
    assert!(wrote.as_ref().is_err_and(|e| e.starts_with("fenced:")), "{wrote:?}");
    assert!(ui1.refused().iter().any(|e| e.starts_with("fenced: lease of buffer.") && e.contains("epoch")));
    assert!(ui1.wait_for(WAIT, |l| l.fenced()).await, "the first UI is watching");
    let recovered = |l: &Link| {
        l.node().is_some_and(|n| {
            n.state.buffers.values().any(|b| b.name == "/tmp/apex/+Recovered" && b.text.to_string() == "> hello! late")
        })
    };
    assert!(ui2.wait_for(WAIT, recovered).await, "the late tail is in /tmp/apex/+Recovered");
    eventually(&c, root, "main/meta/notifications", |n| n.contains("recovered 1 entries of buffer")).await;
    assert!(!text(read(&c, root, &path).await.unwrap()).contains("late"), "no fenced entry was applied");
    let recovered_ids: Vec<BufferId> = ui2.with(|l| {
        let n = l.node().unwrap();
        n.state.buffers.iter().filter(|(_, b)| b.name == "/tmp/apex/+Recovered").map(|(id, _)| *id).collect()
    });
    assert_eq!(recovered_ids.len(), 1, "one +Recovered per fenced attachment and buffer");
    let recovered_id = recovered_ids[0];
    let ctl = format!("main/buffers/{}/ctl", recovered_id.0);
    eventually(&c, root, &ctl, |t| t.contains("dirty 1") && t.contains("length 13")).await;

    // The first UI follows the second.
    ui2.with(|l| type_at(l, body, 0, "3"));
    ui2.flush().await.unwrap();
    let follows = |l: &Link| l.node().is_some_and(|n| n.state.buffer(body).is_ok_and(|b| b.text.to_string().starts_with("32")));
    assert!(ui1.wait_for(WAIT, follows).await);
    converge(&c, root, &[&ui1, &ui2, &tool]).await;

    // Clunking ends an attachment: Detach, and its leases go back.
    ui2.close().await;
    eventually(&c, root, "main/shards/layout/lease", |l| l.split_whitespace().next() == Some("0")).await;
    // With no UI leading, proposals go to the view node again.
    let version = ui1.with(|l| l.node().unwrap().state.buffer(body).unwrap().version);
    write(&c, root, "main/proposals", &format!("insert {} {version} 0\nv", body.0)).await.unwrap();
    assert!(text(read(&c, root, &path).await.unwrap()).starts_with("v32"));
    converge(&c, root, &[&ui1, &tool]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn attach_refuses_bad_opens_and_frames_clearly() {
    let d = Daemon::start("attach-bad");
    let c = d.client().await;
    let root = c.attach("glenda", "main").await.unwrap();
    let err = c.open_path(root, "attach", apex_ninep::fcall::OREAD).await.unwrap_err();
    assert!(err.to_string().contains("open it read-write (ORDWR)"), "{err}");
    let f = c.open_path(root, "attach", apex_ninep::fcall::ORDWR).await.unwrap();
    let err = c.write(f.fid, 0, &[1, 0, 0, 0, 0xee]).await.unwrap_err();
    assert!(err.to_string().starts_with("attach: bad frame"), "{err}");
    let resync = apex_fsd::attach::wire::frame(&apex_fsd::attach::wire::ClientMsg::Resync);
    let err = c.write(f.fid, 0, &resync).await.unwrap_err();
    assert!(err.to_string().contains("the first frame must be Hello"), "{err}");
    // A frame split over writes is taken; the session is unharmed.
    let hello = apex_fsd::attach::wire::frame(&apex_fsd::attach::wire::ClientMsg::Hello {
        kind: AttachmentKind::Tool,
        name: "raw".into(),
        resume: None,
    });
    for piece in hello.chunks(3) {
        assert_eq!(c.write(f.fid, 0, piece).await.unwrap() as usize, piece.len());
    }
    let got = c.read(f.fid, 0, 1 << 16).await.unwrap();
    let mut frames = apex_fsd::attach::wire::Frames::default();
    frames.push(&got);
    let welcome: apex_fsd::attach::wire::ServerMsg = frames.next().unwrap().expect("a whole frame");
    assert!(matches!(welcome, apex_fsd::attach::wire::ServerMsg::Welcome { .. }), "{welcome:?}");
    let attachments = text(read(&c, root, "meta/attachments").await.unwrap());
    assert!(attachments.contains("raw"), "{attachments}");
    c.clunk(f.fid).await.unwrap();
    let attachments = text(read(&c, root, "meta/attachments").await.unwrap());
    assert!(!attachments.contains("raw"), "detached on clunk: {attachments}");
}
