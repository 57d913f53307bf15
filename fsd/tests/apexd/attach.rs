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

pub const WAIT: Duration = Duration::from_secs(10);

pub fn type_at(link: &mut Link, b: BufferId, q: u64, s: &str) {
    let op = BufferOp::Splice { q0: q, q1: q, text: s.into(), origin: Origin::Keyboard };
    link.node_mut().unwrap().append(Shard::Buffer(b), Op::Buffer(op)).expect("the leader types");
}

/// Polls `probe` until it gives something, failing with `why()` after
/// `WAIT`: replicas and processes move in their own time.
pub async fn until<T>(why: impl Fn() -> String, mut probe: impl AsyncFnMut() -> Option<T>) -> T {
    let deadline = tokio::time::Instant::now() + WAIT;
    loop {
        if let Some(got) = probe().await {
            return got;
        }
        assert!(tokio::time::Instant::now() < deadline, "gave up waiting: {}", why());
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// Reads `path` until `pred` holds of it.
pub async fn eventually(c: &Client, root: u32, path: &str, pred: impl Fn(&str) -> bool) -> String {
    until(|| path.to_string(), async || Some(text(read(c, root, path).await.unwrap())).filter(|t| pred(t))).await
}

async fn daemon_hash(c: &Client, root: u32) -> String {
    text(read(c, root, "main/hash").await.unwrap()).trim().to_string()
}

/// Waits until every link is quiet and agrees with the daemon's hash.
pub async fn converge(c: &Client, root: u32, links: &[&Attached]) {
    let deadline = tokio::time::Instant::now() + WAIT;
    loop {
        let want = daemon_hash(c, root).await;
        let agree = links
            .iter()
            .all(|l| l.with(|l| l.quiet() && l.node().is_some_and(|n| n.state.hash().to_hex().as_str() == want)));
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
    let answered =
        |l: &Link| l.node().is_some_and(|n| n.state.buffer(body).is_ok_and(|b| b.text.to_string() == "> hello!"));
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
    assert!(
        ui2.wait_for(WAIT, |l| l.leads(Shard::Layout) && l.leads(Shard::Buffer(body))).await,
        "granted at the deadline"
    );
    ui2.with(|l| type_at(l, body, 0, "2"));
    ui2.flush().await.unwrap();

    // The stuck UI wakes: its late append is fenced, it shows fenced and
    // follows, and its tail, which the second UI's typing came after, lands
    // in the file's +Recovered window: the piece and where it was, and the
    // text as the first UI had it.
    let wrote = ui1.resume().await;
    assert!(wrote.as_ref().is_err_and(|e| e.to_string().starts_with("fenced:")), "{wrote:?}");
    assert!(ui1.refused().iter().any(|e| e.starts_with("fenced: lease of buffer.") && e.contains("epoch")));
    assert!(ui1.wait_for(WAIT, |l| l.fenced()).await, "the first UI is watching");
    let recovered = |l: &Link| {
        l.node().is_some_and(|n| {
            n.state.buffers.values().any(|b| {
                let t = b.text.to_string();
                b.name == "/tmp/apex/notes+Recovered"
                    && t.contains("\n#8: insert\n\t late\n")
                    && t.ends_with("\n> hello! late")
            })
        })
    };
    assert!(ui2.wait_for(WAIT, recovered).await, "the late tail is in /tmp/apex/notes+Recovered");
    eventually(&c, root, "main/meta/notifications", |n| n.contains("recovered 1 entries of buffer")).await;
    assert!(!text(read(&c, root, &path).await.unwrap()).contains("late"), "no fenced entry was applied");
    let recovered_ids: Vec<BufferId> = ui2.with(|l| {
        let n = l.node().unwrap();
        n.state.buffers.iter().filter(|(_, b)| b.name == "/tmp/apex/notes+Recovered").map(|(id, _)| *id).collect()
    });
    assert_eq!(recovered_ids.len(), 1, "one +Recovered per fenced attachment and buffer");
    let recovered_id = recovered_ids[0];
    let ctl = format!("main/buffers/{}/ctl", recovered_id.0);
    eventually(&c, root, &ctl, |t| t.contains("dirty 1")).await;

    // The first UI follows the second.
    ui2.with(|l| type_at(l, body, 0, "3"));
    ui2.flush().await.unwrap();
    let follows =
        |l: &Link| l.node().is_some_and(|n| n.state.buffer(body).is_ok_and(|b| b.text.to_string().starts_with("32")));
    assert!(ui1.wait_for(WAIT, follows).await);
    converge(&c, root, &[&ui1, &ui2, &tool]).await;

    // Clunking ends an attachment: Detach, and its leases go to the UI
    // left watching, which leads and applies proposals again.
    ui2.close().await;
    assert!(
        ui1.wait_for(WAIT, |l| l.leads(Shard::Layout) && l.leads(Shard::Buffer(body))).await,
        "the first UI leads again"
    );
    let version = ui1.with(|l| l.node().unwrap().state.buffer(body).unwrap().version);
    write(&c, root, "main/proposals", &format!("insert {} {version} 0\nv", body.0)).await.unwrap();
    assert!(text(read(&c, root, &path).await.unwrap()).starts_with("v32"));
    // With no UI at all, the leases go back to the server and proposals
    // to the view node.
    ui1.close().await;
    eventually(&c, root, "main/shards/layout/lease", |l| l.split_whitespace().next() == Some("0")).await;
    let version = tool.with(|l| l.node().unwrap().state.buffer(body).unwrap().version);
    write(&c, root, "main/proposals", &format!("insert {} {version} 0\nw", body.0)).await.unwrap();
    assert!(text(read(&c, root, &path).await.unwrap()).starts_with("wv32"));
    converge(&c, root, &[&tool]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_ui_attaching_gets_windows_made_meanwhile_and_leaves_a_tool_its_bounded_lease() {
    let d = Daemon::start("attach-race");
    let c1 = d.client().await;
    let ui1 = Attached::open(&c1, "main", AttachmentKind::Ui, "ui1").await.unwrap();
    assert!(ui1.wait_for(WAIT, |l| l.leads(Shard::Layout)).await);
    let first = ui1.with(|l| make::new_window(l.node_mut().unwrap(), None, None, "/tmp/apex/one").unwrap().body);
    ui1.flush().await.unwrap();

    // While the first UI is slow to answer, a tool asks for a bounded
    // lease of its buffer, the first UI makes a window the daemon has
    // not heard of yet, and a second UI attaches and asks for everything.
    ui1.pause();
    let c3 = d.client().await;
    let tool = Attached::open(&c3, "main", AttachmentKind::Tool, "fmt").await.unwrap();
    assert!(tool.wait_for(WAIT, |l| l.node().is_some()).await);
    tool.with(|l| l.ask_lease(first, 60_000));
    tool.flush().await.unwrap();
    let second = ui1.with(|l| make::new_window(l.node_mut().unwrap(), None, None, "/tmp/apex/two").unwrap());
    let c2 = d.client().await;
    let ui2 = Attached::open(&c2, "main", AttachmentKind::Ui, "ui2").await.unwrap();
    ui1.resume().await.expect("the first UI still led what it wrote");

    // The window made meanwhile goes to the second UI too.
    let leads_new = |l: &Link| {
        [Shard::Layout, Shard::Window(second.window), Shard::Buffer(second.body), Shard::Buffer(second.tag)]
            .iter()
            .all(|s| l.leads(*s))
    };
    assert!(ui2.wait_for(WAIT, leads_new).await, "the second UI leads the window made while it attached");
    // The tool's ask stood: it has its bounded lease, and when it lets
    // go, the buffer goes to the UI that leads now.
    assert!(tool.wait_for(WAIT, |l| l.leads(Shard::Buffer(first))).await, "the tool's ask was not overwritten");
    tool.with(|l| l.release(Shard::Buffer(first)));
    tool.flush().await.unwrap();
    assert!(ui2.wait_for(WAIT, |l| l.leads(Shard::Buffer(first))).await, "back to the leading UI");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_with_a_big_buffer_attaches_in_frames_of_at_most_4_mib() {
    use apex_fsd::attach::wire::{frame, ClientMsg, Frames, ServerMsg, FRAME_MAX, MORE};
    let d = Daemon::start("attach-big");
    let c = d.client().await;
    let root = c.attach("glenda", "main").await.unwrap();
    // 12 MB of text in a buffer: its Welcome is three times a frame.
    let made = text(read(&c, root, "buffers/new").await.unwrap());
    let id: u64 = made.trim().parse().unwrap_or_else(|_| panic!("{made:?}"));
    let line = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcde\n";
    let big: String = line.repeat((12 << 20) / line.len());
    let body = c.open_path(root, &format!("buffers/{id}/body"), apex_ninep::fcall::OWRITE).await.unwrap();
    for piece in big.as_bytes().chunks(1 << 19) {
        c.write(body.fid, 0, piece).await.unwrap();
    }
    c.clunk(body.fid).await.unwrap();

    let f = c.open_path(root, "attach", apex_ninep::fcall::ORDWR).await.unwrap();
    let hello = ClientMsg::Hello { kind: AttachmentKind::Tool, name: "big".into(), resume: None };
    c.write(f.fid, 0, &frame(&hello)).await.unwrap();
    let (mut frames, mut raw) = (Frames::default(), Vec::new());
    let welcome = loop {
        let got = c.read(f.fid, 0, 1 << 20).await.unwrap();
        raw.extend_from_slice(&got);
        frames.push(&got);
        if let Some(m) = frames.next_msg::<ServerMsg>().unwrap() {
            break m;
        }
    };
    let ServerMsg::Welcome { snapshot, .. } = welcome else { panic!("{welcome:?}") };
    let state = apex_core::State::from_snapshot(&snapshot).unwrap();
    assert_eq!(state.buffer(BufferId(id)).unwrap().text.len_bytes(), big.len(), "the whole buffer came");
    let mut at = 0;
    let mut pieces = 0;
    while at + 4 <= raw.len() && pieces < 100 {
        let header = u32::from_le_bytes(raw[at..at + 4].try_into().unwrap());
        let n = (header & !MORE) as usize;
        assert!(n <= FRAME_MAX, "a frame of {n} bytes");
        pieces += 1;
        at += 4 + n;
        if header & MORE == 0 {
            break;
        }
    }
    assert!(pieces >= 3, "the Welcome came in {pieces} frames");
    // A client frame over the limit is refused, and says how to send it.
    let mut over = ((FRAME_MAX + 1) as u32).to_le_bytes().to_vec();
    over.extend_from_slice(&[0; 16]);
    let err = c.write(f.fid, 0, &over).await.unwrap_err().to_string();
    assert!(err.contains("over the limit") && err.contains("pieces"), "{err}");
    // A client's message is at most 4 MiB: one in pieces is taken up to
    // there, and refused at the header that would take it past, so an
    // open holds no more than that of an unfinished message.
    let note = ClientMsg::Notify { text: "n".repeat(3 << 20) };
    for piece in frame(&note).chunks(1 << 19) {
        c.write(f.fid, 0, piece).await.unwrap();
    }
    let notes = text(read(&c, root, "meta/notifications").await.unwrap());
    assert!(notes.contains(&"n".repeat(1000)), "the long notification landed");
    let over = frame(&ClientMsg::Notify { text: "o".repeat(FRAME_MAX + 100) });
    let (first, rest) = over.split_at(4 + FRAME_MAX);
    assert!(u32::from_le_bytes(first[..4].try_into().unwrap()) & MORE != 0, "a message in pieces");
    for piece in first.chunks(1 << 19) {
        c.write(f.fid, 0, piece).await.unwrap();
    }
    let err = c.write(f.fid, 0, rest).await.unwrap_err().to_string();
    assert!(err.contains(&format!("more than {FRAME_MAX} bytes is refused")), "{err}");
    assert!(err.contains("several appends"), "it says how: {err}");
    c.clunk(f.fid).await.unwrap();
    let notes = text(read(&c, root, "meta/notifications").await.unwrap());
    assert!(!notes.contains("ooo"), "nothing of it landed");
}

/// A UI leading a buffer pastes 9 MB into it and sets a 3 MB snarf: its
/// replica makes them entries of at most a megabyte of text, the link
/// sends them in appends of at most 4 MiB, and the daemon takes them all.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_long_paste_goes_to_the_daemon_in_bounded_pieces() {
    use apex_fsd::attach::wire::CLIENT_MESSAGE_MAX;
    let d = Daemon::start("attach-paste");
    let c = d.client().await;
    let root = c.attach("glenda", "").await.unwrap();
    let c1 = d.client().await;
    let ui = Attached::open(&c1, "main", AttachmentKind::Ui, "ui").await.unwrap();
    assert!(ui.wait_for(WAIT, |l| l.leads(Shard::Layout)).await);
    let body = ui.with(|l| make::new_window(l.node_mut().unwrap(), None, None, "/tmp/apex/paste").unwrap().body);
    let line = "a line of the paste, with a rune or two: é ☺\n";
    let paste = line.repeat((9 << 20) / line.len());
    let snarf = "s".repeat(3 << 20);
    ui.with(|l| {
        let version = l.node().unwrap().state.buffer(body).unwrap().version;
        let insert = Proposal::Insert { buffer: body, version, q0: 0, text: paste.clone(), origin: Origin::Keyboard };
        assert!(matches!(l.submit(insert), apex_fsd::attach::link::Submitted::Applied(Ok(_))));
        assert!(matches!(
            l.submit(Proposal::Snarf { text: snarf.clone() }),
            apex_fsd::attach::link::Submitted::Applied(Ok(_))
        ));
        l.flush();
        let sizes = l.waiting_frames();
        assert!(sizes.len() >= 3, "{sizes:?}");
        assert!(sizes.iter().all(|n| *n <= CLIENT_MESSAGE_MAX + 4), "every message under the limit: {sizes:?}");
    });
    ui.flush().await.unwrap();
    let got = eventually(&c, root, &format!("main/buffers/{}/body", body.0), |t| t.len() == paste.len()).await;
    assert!(got == paste, "the paste arrived whole");
    converge(&c, root, &[&ui]).await;
    // One undo takes it all back.
    write(&c, root, &format!("main/buffers/{}/ctl", body.0), "undo").await.unwrap();
    eventually(&c, root, &format!("main/buffers/{}/body", body.0), |t| t.is_empty()).await;
    let snarfed = ui.with(|l| l.node().unwrap().state.layout.snarf.len());
    assert_eq!(snarfed, snarf.len());
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
    let welcome: apex_fsd::attach::wire::ServerMsg = frames.next_msg().unwrap().expect("a whole frame");
    assert!(matches!(welcome, apex_fsd::attach::wire::ServerMsg::Welcome { .. }), "{welcome:?}");
    let attachments = text(read(&c, root, "meta/attachments").await.unwrap());
    assert!(attachments.contains("raw"), "{attachments}");
    // A bounded lease lasts a millisecond at least and a day at most.
    for ttl_ms in [0, apex_fsd::attach::wire::MAX_LEASE_TTL_MS + 1, u64::MAX] {
        let lease = apex_fsd::attach::wire::ClientMsg::Lease { shard: Shard::Buffer(BufferId(1)), ttl_ms };
        let err = c.write(f.fid, 0, &apex_fsd::attach::wire::frame(&lease)).await.unwrap_err();
        assert!(err.to_string().contains("a ttl from 1 to 86400000 ms"), "{ttl_ms}: {err}");
    }
    c.clunk(f.fid).await.unwrap();
    let attachments = text(read(&c, root, "meta/attachments").await.unwrap());
    assert!(!attachments.contains("raw"), "detached on clunk: {attachments}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_layouts_leader_cannot_delete_it() {
    // A client that leads the layout (any UI may) sends DeleteShard for
    // it: refused, and the session keeps its layout and its lease.
    use apex_fsd::attach::wire::{frame, ClientMsg};
    let d = Daemon::start("attach-layout");
    let c = d.client().await;
    let root = c.attach("glenda", "").await.unwrap();
    let f = c.open_path(root, "main/attach", apex_ninep::fcall::ORDWR).await.unwrap();
    let hello = frame(&ClientMsg::Hello { kind: AttachmentKind::Ui, name: "rogue".into(), resume: None });
    c.write(f.fid, 0, &hello).await.unwrap();
    let leader = until(
        || "the UI was never granted the layout".into(),
        async || {
            let leases = text(read(&c, root, "main/meta/leases").await.unwrap());
            let line = leases.lines().find(|l| l.starts_with("layout "))?.to_string();
            (line.split(' ').nth(1) != Some("0")).then_some(line)
        },
    )
    .await;
    let err = c.write(f.fid, 0, &frame(&ClientMsg::DeleteShard { shard: Shard::Layout })).await.unwrap_err();
    assert!(err.to_string().contains("layout lasts as long as its session"), "{err}");
    let leases = text(read(&c, root, "main/meta/leases").await.unwrap());
    assert!(leases.lines().any(|l| l == leader), "{leader:?} in {leases}");
    c.clunk(f.fid).await.unwrap();
}

/// A child process killed (and reaped) on drop.
struct Reaped(std::process::Child);

impl Drop for Reaped {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn signal(child: &std::process::Child, sig: i32) {
    // SAFETY: kill(2) with a pid we spawned and a signal number.
    assert_eq!(unsafe { libc::kill(child.id() as i32, sig) }, 0);
}

/// Lines a child prints, collected by a thread.
fn collect_lines(out: std::process::ChildStdout) -> std::sync::Arc<std::sync::Mutex<Vec<String>>> {
    use std::io::BufRead;
    let lines = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let sink = lines.clone();
    std::thread::spawn(move || {
        for line in std::io::BufReader::new(out).lines().map_while(Result::ok) {
            sink.lock().unwrap().push(line);
        }
    });
    lines
}

async fn line_matching(lines: &std::sync::Mutex<Vec<String>>, pred: impl Fn(&str) -> bool) -> String {
    let why = || format!("no such line in {:?}", lines.lock().unwrap());
    until(why, async || lines.lock().unwrap().iter().find(|l| pred(l)).cloned()).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stopped_leader_is_fenced_and_no_entry_of_its_old_epoch_lands() {
    let d = Daemon::start_with("zombie", &["--lease-deadline".into(), "300".into()]);
    let c = d.client().await;
    let root = c.attach("glenda", "").await.unwrap();
    let addr = format!("unix!{}", d.socket().display());
    let child = std::process::Command::new(env!("CARGO_BIN_EXE_apex"))
        .args(["-a", &addr, "lead", "-i", "2", "-f", "40", "main", "/tmp/zombie/notes"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::inherit())
        .spawn()
        .expect("start apex lead");
    let mut zombie = Reaped(child);
    let lines = collect_lines(zombie.0.stdout.take().unwrap());
    let window = line_matching(&lines, |l| l.starts_with("window ")).await;
    let b: u64 = window[7..].parse().unwrap();
    let shard = Shard::Buffer(BufferId(b));

    // Follow the buffer's whole log from here on: an open entries reader
    // keeps it from being compacted.
    let entries = c.open_path(root, &format!("main/shards/{shard}/entries"), apex_ninep::fcall::OREAD).await.unwrap();
    let log = std::sync::Arc::new(std::sync::Mutex::new(String::new()));
    let (reader, sink) = (c.clone(), log.clone());
    let follow = tokio::spawn(async move {
        let mut offset = 0u64;
        while let Ok(chunk) = reader.read(entries.fid, offset, entries.iounit).await {
            if chunk.is_empty() {
                break;
            }
            offset += chunk.len() as u64;
            sink.lock().unwrap().push_str(&String::from_utf8_lossy(&chunk));
        }
    });
    line_matching(&lines, |l| l.starts_with("acked ") && l[6..].parse::<u64>().unwrap() > 20).await;

    // Stop it past the deadline, between two of its flushes (it types
    // every 2 ms and flushes every 40); another UI takes over and types.
    tokio::time::sleep(Duration::from_millis(20)).await;
    signal(&zombie.0, libc::SIGSTOP);
    let c2 = d.client().await;
    let ui = Attached::open(&c2, "main", AttachmentKind::Ui, "ui").await.unwrap();
    assert!(ui.wait_for(WAIT, |l| l.leads(shard) && l.leads(Shard::Layout)).await, "reclaimed at the deadline");
    let lease = text(read(&c, root, &format!("main/shards/{shard}/lease")).await.unwrap());
    let epoch: u64 = lease.split_whitespace().nth(1).unwrap().parse().unwrap();
    assert!(epoch >= 3, "reclaimed (epoch 2) and granted (epoch 3): {lease}");
    for _ in 0..5 {
        ui.with(|l| type_at(l, BufferId(b), 0, "U"));
        ui.flush().await.unwrap();
    }

    // It goes on, still typing at its old epoch: fenced, never applied.
    signal(&zombie.0, libc::SIGCONT);
    line_matching(&lines, |l| l == "fenced").await;
    let most = |prefix: &str| {
        let lines = lines.lock().unwrap();
        lines.iter().filter_map(|l| l.strip_prefix(prefix).map(|n| n.parse::<u64>().unwrap())).max().unwrap_or(0)
    };
    if most("typed ") > most("acked ") {
        // It had typing the daemon never stored: recovered, not lost.
        line_matching(&lines, |l| l.starts_with("recovered ")).await;
    }
    tokio::time::sleep(Duration::from_millis(100)).await;
    converge(&c, root, &[&ui]).await;
    let want = daemon_hash(&c, root).await;
    line_matching(&lines, |l| l == format!("hash {want}")).await;
    signal(&zombie.0, libc::SIGTERM);
    let status = zombie.0.wait().unwrap();
    assert!(status.success(), "apex lead ends cleanly on SIGTERM: {status:?}");

    // The log: the stopped leader's entries all come before the reclaim's
    // base, at epoch 1; every seq it was told was stored is there.
    let acked: u64 = lines
        .lock()
        .unwrap()
        .iter()
        .filter_map(|l| l.strip_prefix("acked ").map(|n| n.parse::<u64>().unwrap()))
        .max()
        .unwrap();
    let info = text(read(&c, root, &format!("main/shards/{shard}/info")).await.unwrap());
    let last: u64 = info.lines().find_map(|l| l.strip_prefix("last ")).unwrap().parse().unwrap();
    let reached =
        async || log.lock().unwrap().lines().any(|l| l.split(' ').next() == Some(&last.to_string())).then_some(());
    until(|| format!("the entries reader reaches seq {last}"), reached).await;
    follow.abort();
    let log = log.lock().unwrap().clone();
    let mut seen = Vec::new();
    for line in log.lines() {
        let f: Vec<&str> = line.splitn(4, ' ').collect();
        let (seq, att, ep): (u64, u64, u64) = (f[0].parse().unwrap(), f[1].parse().unwrap(), f[2].parse().unwrap());
        seen.push((seq, att, ep));
    }
    assert!(!seen.is_empty());
    for w in seen.windows(2) {
        assert_eq!(w[1].0, w[0].0 + 1, "no gap or repeat in the log");
    }
    let zombie_att = seen.iter().find(|e| e.2 == 1).map(|e| e.1).expect("the leader's entries");
    let last_old = seen.iter().filter(|e| e.1 == zombie_att).map(|e| e.0).max().unwrap();
    assert!(seen.iter().filter(|e| e.1 == zombie_att).all(|e| e.2 == 1), "only epoch 1 entries of the old leader");
    assert!(
        last_old >= acked,
        "every acked entry is in the log: acked {acked}, last {last_old}: {log}\n{:?}",
        lines.lock().unwrap()
    );
    assert!(
        seen.iter().filter(|e| e.0 > last_old).all(|e| e.1 != zombie_att && e.2 >= 3),
        "after it, only the new leader"
    );
}

/// A follower's event loop sleeps on the change subscription alone: every
/// wake-up it gets is from something that arrived (the leader's typing, a
/// proposal's answer, a lease moving), never a timer.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_change_subscription_wakes_a_follower_for_entries_answers_and_leases() {
    let d = Daemon::start("changes");
    let (c1, c2) = (d.client().await, d.client().await);
    let ui = Attached::open(&c1, "main", AttachmentKind::Ui, "ui").await.unwrap();
    assert!(ui.wait_for(WAIT, |l| l.leads(Shard::Layout)).await);
    let body = ui.with(|l| make::new_window(l.node_mut().unwrap(), None, None, "/tmp/apex/changes").unwrap().body);
    ui.flush().await.unwrap();
    let tool = Attached::open(&c2, "main", AttachmentKind::Tool, "tool").await.unwrap();
    let mut changes = tool.changes();
    let seen = |t: &Attached, want: &str| {
        t.with(|l| {
            l.node().and_then(|n| n.state.buffer(body).ok().map(|b| b.text.to_string())).as_deref() == Some(want)
        })
    };
    // Waits on the subscription only; the outer timeout is the test's
    // guard against a subscription that never fires.
    async fn sleep_until(changes: &mut tokio::sync::watch::Receiver<u64>, mut done: impl FnMut() -> bool) {
        let wait = async {
            while !done() {
                changes.changed().await.expect("the connection stays up");
            }
        };
        tokio::time::timeout(WAIT, wait).await.expect("the subscription woke the loop");
    }

    // Entries: the leader types, the follower wakes and sees it.
    ui.with(|l| type_at(l, body, 0, "typed"));
    ui.flush().await.unwrap();
    sleep_until(&mut changes, || seen(&tool, "typed")).await;

    // An answer: the tool proposes, the leader applies, the answer wakes it.
    let id = tool.with(|l| {
        let p = Proposal::Insert { buffer: body, version: 1, q0: 5, text: "!".into(), origin: Origin::OtherFile };
        match l.submit(p) {
            apex_fsd::attach::link::Submitted::Sent(id) => id,
            other => panic!("a tool proposes: {other:?}"),
        }
    });
    tool.flush().await.unwrap();
    let mut answered = false;
    sleep_until(&mut changes, || {
        let events = tool.with(|l| l.events());
        answered |= events.iter().any(|e| matches!(e, Event::Answer { id: got, result: Ok(_) } if *got == id));
        answered && seen(&tool, "typed!")
    })
    .await;

    // A lease change: the UI goes, the daemon takes its shards back.
    ui.close().await;
    sleep_until(&mut changes, || {
        tool.with(|l| l.node().is_some_and(|n| n.log.lease(Shard::Buffer(body)).is_ok_and(|l| l.holder.0 == 0)))
    })
    .await;
    assert!(!tool.is_closed());
}

/// When the UI that led goes (it closes, or hangs up and its grace runs
/// out), the UI left watching leads again by itself, with what the other
/// made meanwhile; `Lead` is only for taking it while the other is there.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_watching_ui_leads_again_when_the_leader_goes() {
    let d = Daemon::start_with("lead-back", &["--resume-grace".into(), "0.2".into()]);
    let c1 = d.client().await;
    let ui1 = Attached::open(&c1, "main", AttachmentKind::Ui, "ui1").await.unwrap();
    assert!(ui1.wait_for(WAIT, |l| l.leads(Shard::Layout)).await);
    // A second UI takes the lead; the first watches.
    let c2 = d.client().await;
    let ui2 = Attached::open(&c2, "main", AttachmentKind::Ui, "ui2").await.unwrap();
    assert!(ui2.wait_for(WAIT, |l| l.leads(Shard::Layout)).await);
    assert!(ui1.wait_for(WAIT, |l| !l.leads(Shard::Layout)).await, "the first watches");
    let made = ui2.with(|l| make::new_window(l.node_mut().unwrap(), None, None, "/tmp/apex/made").unwrap());
    ui2.flush().await.unwrap();
    // It closes: the first leads again, the window made meanwhile too.
    ui2.close().await;
    let leads_all =
        |l: &Link| [Shard::Layout, Shard::Window(made.window), Shard::Buffer(made.body)].iter().all(|s| l.leads(*s));
    assert!(ui1.wait_for(WAIT, leads_all).await, "the watching UI leads again once the other closed");

    // A leader killed (`apex lead`, SIGKILL) hangs up: it is waited for
    // through its grace, then the same.
    let mut lead = std::process::Command::new(env!("CARGO_BIN_EXE_apex"))
        .args(["lead", "-i", "1000", "main", "/tmp/apex/lead"])
        .env("NAMESPACE", &d.dir)
        .stdout(std::process::Stdio::null())
        .spawn()
        .expect("run apex lead");
    assert!(ui1.wait_for(WAIT, |l| !l.leads(Shard::Layout)).await, "apex lead took the lead");
    lead.kill().unwrap();
    lead.wait().unwrap();
    assert!(ui1.wait_for(WAIT, |l| l.leads(Shard::Layout)).await, "after the killed leader's grace");
}

/// A UI started again after the one that led was killed (its connection
/// gone, in its grace) leads at once: a holder that cannot answer is not
/// waited for until the deadline (here far beyond the test's patience).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_ui_asking_for_what_a_killed_leader_held_leads_at_once() {
    let long = ["--lease-deadline".into(), "600000".into(), "--resume-grace".into(), "600".into()];
    let d = Daemon::start_with("lead-after-kill", &long);
    let mut lead = Reaped(
        std::process::Command::new(env!("CARGO_BIN_EXE_apex"))
            .args(["lead", "-i", "1000", "main", "/tmp/apex/lead"])
            .env("NAMESPACE", &d.dir)
            .stdout(std::process::Stdio::null())
            .spawn()
            .expect("run apex lead"),
    );
    let c = d.client().await;
    let watcher = Attached::open(&c, "main", AttachmentKind::Tool, "watcher").await.unwrap();
    let led_by_lead = |l: &Link| {
        l.node().is_some_and(|n| {
            let layout = n.state.meta.leases.get(Shard::Layout).ok();
            layout.is_some_and(|lease| lease.holder != apex_core::AttachmentId::SERVER)
        })
    };
    assert!(watcher.wait_for(WAIT, led_by_lead).await, "apex lead leads");
    lead.0.kill().unwrap();
    lead.0.wait().unwrap();
    let c2 = d.client().await;
    let ui = Attached::open(&c2, "main", AttachmentKind::Ui, "again").await.unwrap();
    assert!(ui.wait_for(WAIT, |l| l.leads(Shard::Layout)).await, "the new UI leads without the deadline");
}

/// A client that opens attach again and again, leaving a message of 4 MiB
/// unfinished in each, cannot make the session hold more than 64 MiB of
/// them: the next is refused, saying why, while whole messages are taken
/// as ever; closing one makes room.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn half_written_attach_files_hold_a_bounded_amount_in_all() {
    use apex_fsd::attach::protocol::UNFINISHED_MAX;
    use apex_fsd::attach::wire::{frame, ClientMsg, FRAME_MAX, MORE};
    let d = Daemon::start("attach-unfinished");
    let c = d.client().await;
    let root = c.attach("glenda", "main").await.unwrap();
    // One piece of a longer message: a header with MORE and its 4 MiB.
    let mut piece = (FRAME_MAX as u32 | MORE).to_le_bytes().to_vec();
    piece.resize(4 + FRAME_MAX, b'n');
    let mut open = Vec::new();
    let refused = loop {
        let f = c.open_path(root, "attach", apex_ninep::fcall::ORDWR).await.unwrap();
        let mut sent = Ok(());
        for chunk in piece.chunks(1 << 19) {
            if let Err(e) = c.write(f.fid, 0, chunk).await {
                sent = Err(e.to_string());
                break;
            }
        }
        open.push(f);
        if let Err(e) = sent {
            break e;
        }
        assert!(open.len() <= UNFINISHED_MAX / piece.len() + 1, "{} attach files hold 4 MiB each", open.len());
    };
    assert!(refused.contains("not yet whole") && refused.contains("finish a message"), "{refused}");
    assert_eq!(open.len(), UNFINISHED_MAX / piece.len() + 1, "the one past the bound is refused");
    // A whole message on a fresh connection is taken meanwhile.
    let f = c.open_path(root, "attach", apex_ninep::fcall::ORDWR).await.unwrap();
    let hello = ClientMsg::Hello { kind: AttachmentKind::Tool, name: "whole".into(), resume: None };
    c.write(f.fid, 0, &frame(&hello)).await.unwrap();
    c.clunk(f.fid).await.unwrap();
    // Closing a half-written one makes room for another.
    c.clunk(open.remove(0).fid).await.unwrap();
    let f = c.open_path(root, "attach", apex_ninep::fcall::ORDWR).await.unwrap();
    for chunk in piece.chunks(1 << 19) {
        c.write(f.fid, 0, chunk).await.unwrap();
    }
    for f in open.into_iter().chain([f]) {
        c.clunk(f.fid).await.unwrap();
    }
}
