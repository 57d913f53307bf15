//! What the daemon keeps does not grow with what came and went: fids
//! opened and clunked by the ten thousand leave its tables as they were,
//! and a file keeps its qid path (apex-mnt's inode number) throughout; a
//! session's log does not keep every text written to it in memory,
//! ephemeral or persisted.

use apex_fsd::fsys::Fsys;
use apex_fsd::registry::Registry;
use apex_ninep::fcall::{ORDWR, OREAD};
use apex_ninep::srv::Serve;

/// Walks from `root` to `path`, opens it with `mode` and clunks it; the
/// file's qid path.
async fn open_and_clunk(tree: &Fsys, root: &<Fsys as Serve>::Fid, path: &[String], mode: u8) -> u64 {
    let (qids, fid) = tree.walk(root, path).await.unwrap();
    let fid = fid.unwrap_or_else(|| panic!("walk {path:?}"));
    let (qid, open) = tree.open(&fid, mode).await.unwrap_or_else(|e| panic!("open {path:?}: {e}"));
    tree.clunk(open).await;
    assert_eq!(qids.last().map(|q| q.path), Some(qid.path));
    qid.path
}

/// The path of names `p`.
fn at(p: &[&str]) -> Vec<String> {
    p.iter().map(|s| s.to_string()).collect()
}

/// Writes `body` (then clunks it) with twice the bytes after which a
/// session's log lets go of what nobody needs, and more; checks the log
/// holds at most about that many, not all of it. The bytes written, and
/// the chunk written each time.
async fn write_past_the_log_limit(tree: &Fsys, body: <Fsys as Serve>::Fid) -> (u64, Vec<u8>) {
    let chunk = "a line of text, written again and again into one body\n".repeat(1 << 14).into_bytes();
    let limit = apex_fsd::session::LOG_KEPT_BYTES;
    let mut written = 0u64;
    while written < 2 * limit + (8 << 20) {
        tree.write(&body, 0, chunk.clone()).await.unwrap();
        written += chunk.len() as u64;
    }
    tree.clunk(body).await;
    let held: u64 = tree.daemon.log_bytes().iter().sum();
    assert!(held <= limit + chunk.len() as u64 * 2, "{held} bytes of entries held after {written} written");
    (written, chunk)
}

/// Opens `main/attach` and says Hello as a tool named `name`.
async fn attached_tool(tree: &Fsys, root: &<Fsys as Serve>::Fid, name: &str) -> <Fsys as Serve>::Fid {
    use apex_fsd::attach::wire::{frame, ClientMsg};
    let (_, attach) = tree.walk(root, &at(&["main", "attach"])).await.unwrap();
    let (_, attach) = tree.open(&attach.unwrap(), ORDWR).await.unwrap();
    let hello = frame(&ClientMsg::Hello { kind: apex_core::AttachmentKind::Tool, name: name.into(), resume: None });
    tree.write(&attach, 0, hello).await.unwrap();
    attach
}

/// A daemon's tree (its sessions kept nowhere) with session `main`, its
/// root fid, and a new buffer's number.
async fn tree_with_a_buffer() -> (Fsys, <Fsys as Serve>::Fid, String) {
    let mut registry = Registry::new(Box::new(|| [7; 16]));
    registry.create(Some("main")).unwrap();
    buffer_in(registry).await
}

/// `registry`'s tree, with session `main`, its root fid, and a new
/// buffer's number.
async fn buffer_in(registry: Registry) -> (Fsys, <Fsys as Serve>::Fid, String) {
    let tree = Fsys::new(registry, "glenda");
    let (_, root) = tree.attach("glenda", "").await.unwrap();
    let (_, made) = tree.walk(&root, &at(&["main", "buffers", "new"])).await.unwrap();
    let (_, made) = tree.open(&made.unwrap(), OREAD).await.unwrap();
    let id = String::from_utf8(tree.read(&made, 0, 64).await.unwrap()).unwrap().trim().to_string();
    tree.clunk(made).await;
    (tree, root, id)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fids_opened_and_clunked_by_the_hundred_thousand_leave_nothing_behind() {
    let (tree, root, id) = tree_with_a_buffer().await;
    let shard = format!("buffer.{id}");
    let files: Vec<(Vec<String>, u8)> = vec![
        (at(&["main", "buffers", &id, "body"]), OREAD),
        (at(&["main", "buffers", &id, "ctl"]), ORDWR),
        (at(&["main", "buffers", &id, "event"]), OREAD),
        (at(&["main", "shards", &shard, "entries"]), OREAD),
        (at(&["main", "shards", &shard, "lease"]), OREAD),
        (at(&["main", "attach"]), ORDWR),
    ];
    let mut paths = Vec::new();
    for (path, mode) in &files {
        paths.push(open_and_clunk(&tree, &root, path, *mode).await);
    }
    let before = tree.daemon.table_sizes();
    for count in [10_000, 100_000] {
        for i in 0..count {
            let (path, mode) = &files[i % files.len()];
            let qid = open_and_clunk(&tree, &root, path, *mode).await;
            assert_eq!(qid, paths[i % files.len()], "{path:?} keeps its qid path");
        }
        assert_eq!(tree.daemon.table_sizes(), before, "after {count} fids");
    }
    let distinct: std::collections::BTreeSet<u64> = paths.iter().copied().collect();
    assert_eq!(distinct.len(), paths.len(), "distinct files, distinct paths: {paths:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deadlines_by_the_thousand_keep_one_timer() {
    // A tool takes a bounded lease of an hour and gives it back, again
    // and again: each grant sets a deadline, and the session's one timer
    // task sleeps until the earliest; no task per deadline is left
    // sleeping out its hour.
    use apex_core::{BufferId, Shard};
    use apex_fsd::attach::wire::{frame, ClientMsg};
    let (tree, root, id) = tree_with_a_buffer().await;
    let shard = Shard::Buffer(BufferId(id.parse().unwrap()));
    let attach = attached_tool(&tree, &root, "lessee").await;
    let tasks = || tokio::runtime::Handle::current().metrics().num_alive_tasks();
    let last = tree.daemon.read(1, |s| s.view().log.last(shard)).unwrap();
    let mut before = None;
    for i in 0..2_000 {
        let lease = frame(&ClientMsg::Lease { shard, ttl_ms: 3_600_000 });
        tree.write(&attach, 0, lease).await.unwrap_or_else(|e| panic!("lease {i}: {e}"));
        let release = frame(&ClientMsg::Release { shard, seq: last });
        tree.write(&attach, 0, release).await.unwrap_or_else(|e| panic!("release {i}: {e}"));
        if i == 10 {
            before = Some(tasks());
        }
    }
    let before = before.unwrap();
    assert!(tasks() <= before + 2, "{} tasks alive after 2,000 grants, {before} after 10", tasks());
    tree.clunk(attach).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_that_never_reads_leaves_one_welcome_queued_and_is_told_to_read() {
    // Resyncs without a read leave one Welcome of the newest state, not
    // a state each; answers pile up only so far before writes are refused
    // until the client reads.
    use apex_core::{BufferId, Proposal};
    use apex_fsd::attach::wire::{frame, ClientMsg, Frames, ServerMsg};
    let (tree, root, id) = tree_with_a_buffer().await;
    let buffer = BufferId(id.parse().unwrap());
    let attach = attached_tool(&tree, &root, "deaf").await;
    for _ in 0..1_000 {
        tree.write(&attach, 0, frame(&ClientMsg::Resync)).await.unwrap();
    }
    let unread = |tree: &Fsys| tree.daemon.table_sizes()[0][5];
    assert_eq!(unread(&tree), 1, "one Welcome queued");
    let mut sent = 0;
    let refused = loop {
        let propose = frame(&ClientMsg::Propose { id: sent, proposal: Proposal::Mark { buffer } });
        match tree.write(&attach, 0, propose).await {
            Ok(_) => sent += 1,
            Err(e) => break e.to_string(),
        }
        assert!(sent <= 10_000, "answers pile up without end");
    };
    assert!(refused.contains("messages wait unread; read the file"), "{refused}");
    let lease = frame(&ClientMsg::Lease { shard: apex_core::Shard::Buffer(buffer), ttl_ms: 1 });
    let refused = tree.write(&attach, 0, lease).await.unwrap_err().to_string();
    assert!(refused.contains("messages wait unread"), "a lease's expiry would add one more: {refused}");
    // Only what adds to the unread is refused: a Resync (its Welcome takes
    // the queued one's place) is not.
    tree.write(&attach, 0, frame(&ClientMsg::Resync)).await.expect("a resync is taken whatever waits");
    assert!(unread(&tree) <= 4096, "{}", unread(&tree));
    // Reading takes them; the Welcome comes once, then the answers.
    let mut frames = Frames::default();
    let (mut welcomes, mut answers) = (0, 0);
    while answers < sent {
        let got = tree.read(&attach, 0, 1 << 20).await.unwrap();
        assert!(!got.is_empty(), "{answers} of {sent} answers read");
        frames.push(&got);
        while let Some(msg) = frames.next_msg::<ServerMsg>().unwrap() {
            match msg {
                ServerMsg::Welcome { .. } => welcomes += 1,
                ServerMsg::Answer { .. } => answers += 1,
                _ => {}
            }
        }
    }
    assert_eq!(welcomes, 1);
    let propose = frame(&ClientMsg::Propose { id: sent, proposal: Proposal::Mark { buffer } });
    tree.write(&attach, 0, propose).await.expect("taken again once read");
    tree.clunk(attach).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_that_stops_reading_holds_back_no_entries() {
    // Attached and never reading while a body is written many times the
    // bytes after which the log lets go: it is sent a Welcome instead of
    // the entries, which go; reading, it gets one Welcome, of the state
    // with everything written.
    use apex_fsd::attach::wire::{Frames, ServerMsg};
    let (tree, root, id) = tree_with_a_buffer().await;
    let attach = attached_tool(&tree, &root, "asleep").await;
    let (_, body) = tree.walk(&root, &at(&["main", "buffers", &id, "body"])).await.unwrap();
    let (_, body) = tree.open(&body.unwrap(), apex_ninep::fcall::OWRITE).await.unwrap();
    let (written, chunk) = write_past_the_log_limit(&tree, body).await;
    let limit = apex_fsd::session::LOG_KEPT_BYTES;
    let mut frames = Frames::default();
    let mut welcomes = Vec::new();
    while welcomes.is_empty() {
        let got = tree.read(&attach, 0, 1 << 20).await.unwrap();
        assert!(!got.is_empty());
        frames.push(&got);
        while let Some(msg) = frames.next_msg::<ServerMsg>().unwrap() {
            if let ServerMsg::Welcome { snapshot, .. } = msg {
                welcomes.push(snapshot);
            }
        }
    }
    assert_eq!(welcomes.len(), 1, "one Welcome, not one per compaction");
    let state = apex_core::State::from_snapshot(&welcomes[0]).unwrap();
    let buffer = state.buffer(apex_core::BufferId(id.parse().unwrap())).unwrap();
    // Of the last compaction point: what came after follows it as entries.
    let had = buffer.text.len_bytes() as u64;
    assert!(had + limit + chunk.len() as u64 >= written, "{had} of {written} bytes: a state from late in the writing");
    tree.clunk(attach).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_waiting_in_a_read_is_reading_however_long_a_write_holds_the_lock() {
    // Idle, a read outstanding, while writes cross two of the points where
    // the log lets go before its read is woken: it has not stopped
    // reading, and gets the entries, not a fresh Welcome of everything.
    use apex_fsd::attach::wire::{Frames, ServerMsg};
    let (tree, root, id) = tree_with_a_buffer().await;
    let tree = std::sync::Arc::new(tree);
    let attach = std::sync::Arc::new(attached_tool(&tree, &root, "idle").await);
    let messages = |got: &[u8], frames: &mut Frames| {
        frames.push(got);
        std::iter::from_fn(|| frames.next_msg::<ServerMsg>().unwrap()).collect::<Vec<_>>()
    };
    let mut frames = Frames::default();
    let welcome = tree.read(&attach, 0, 1 << 20).await.unwrap();
    assert!(messages(&welcome, &mut frames).iter().any(|m| matches!(m, ServerMsg::Welcome { .. })));
    let reader = tokio::spawn({
        let (tree, attach) = (tree.clone(), attach.clone());
        async move { tree.read(&attach, 0, 1 << 20).await.unwrap() }
    });
    let waiting = || tree.daemon.read(1, |s| s.hub().waiting_reads()).unwrap();
    while waiting() == 0 {
        tokio::time::sleep(std::time::Duration::from_millis(5)).await;
    }
    let buffer = apex_core::BufferId(id.parse().unwrap());
    let text = "x".repeat(apex_fsd::session::LOG_KEPT_BYTES as usize + 1);
    tree.daemon
        .tend(1, |s| {
            for _ in 0..2 {
                let version = s.view().state.buffer(buffer).unwrap().version;
                let p = apex_core::Proposal::Insert {
                    buffer,
                    version,
                    q0: 0,
                    text: text.clone(),
                    origin: apex_core::Origin::OtherFile,
                };
                s.propose_owned("a big write", p).unwrap();
                apex_fsd::attach::feed::compact_covered(s);
            }
        })
        .unwrap();
    tree.daemon.changed_in(1);
    let mut got = messages(&reader.await.unwrap(), &mut frames);
    while let Ok(more) = tokio::time::timeout(std::time::Duration::from_secs(2), tree.read(&attach, 0, 1 << 20)).await {
        got.extend(messages(&more.unwrap(), &mut frames));
    }
    assert!(
        !got.iter().any(|m| matches!(m, ServerMsg::Welcome { .. })),
        "a reader waiting all along was sent a Welcome"
    );
    // Each write is several entries of at most SPLICE_MAX bytes.
    let inserted: usize = got
        .iter()
        .filter_map(|m| match m {
            ServerMsg::Entries { entries, .. } => Some(entries),
            _ => None,
        })
        .flatten()
        .filter_map(|e| match &e.op {
            apex_core::Op::Buffer(apex_core::BufferOp::Splice { text: t, .. }) if t.starts_with('x') => Some(t.len()),
            _ => None,
        })
        .sum();
    assert_eq!(inserted, 2 * text.len(), "both writes came as entries");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn windows_made_read_and_deleted_by_the_hundred_leave_no_state_behind() {
    // As win does: a window, its event and addr files open, then the
    // window deleted before they are clunked. What the daemon kept for it
    // goes with it.
    let (tree, _, _) = tree_with_a_buffer().await;
    let acme = tree.acme_service("main");
    let (_, root) = acme.attach("glenda", "").await.unwrap();
    let kept = |tree: &Fsys| tree.daemon.read(1, |s| (s.acme().windows.len(), s.addrs().len())).unwrap();
    for _ in 0..200 {
        let (_, ctl) = acme.walk(&root, &at(&["new", "ctl"])).await.unwrap();
        let (_, ctl) = acme.open(&ctl.unwrap(), ORDWR).await.unwrap();
        let id = String::from_utf8(acme.read(&ctl, 0, 12).await.unwrap()).unwrap().trim().to_string();
        let mut open = Vec::new();
        for file in ["event", "addr"] {
            let (_, f) = acme.walk(&root, &at(&[&id, file])).await.unwrap();
            open.push(acme.open(&f.unwrap(), ORDWR).await.unwrap().1);
        }
        acme.write(&open[1], 0, b"#0".to_vec()).await.unwrap();
        acme.write(&ctl, 0, b"delete\n".to_vec()).await.unwrap();
        for f in open {
            acme.clunk(f).await;
        }
        acme.clunk(ctl).await;
    }
    let (windows, addrs) = kept(&tree);
    assert!(windows <= 1 && addrs <= 2, "{windows} windows' and {addrs} buffers' states kept after 200 deleted");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_ephemeral_sessions_log_lets_go_of_what_it_was_written() {
    let (tree, root, id) = tree_with_a_buffer().await;
    // A second buffer's entries are being read meanwhile: its shard keeps
    // every entry.
    let (_, other) = tree.walk(&root, &at(&["main", "buffers", "new"])).await.unwrap();
    let (_, other) = tree.open(&other.unwrap(), OREAD).await.unwrap();
    let read = String::from_utf8(tree.read(&other, 0, 64).await.unwrap()).unwrap().trim().to_string();
    tree.clunk(other).await;
    let (_, reader) = tree.walk(&root, &at(&["main", "shards", &format!("buffer.{read}"), "entries"])).await.unwrap();
    let (_, reader) = tree.open(&reader.unwrap(), OREAD).await.unwrap();
    let first = String::from_utf8(tree.read(&reader, 0, 8).await.unwrap()).unwrap();
    let (_, read_body) = tree.walk(&root, &at(&["main", "buffers", &read, "body"])).await.unwrap();
    let (_, read_body) = tree.open(&read_body.unwrap(), apex_ninep::fcall::OWRITE).await.unwrap();
    let (_, body) = tree.walk(&root, &at(&["main", "buffers", &id, "body"])).await.unwrap();
    let (_, body) = tree.open(&body.unwrap(), apex_ninep::fcall::OWRITE).await.unwrap();
    let (_, chunk) = write_past_the_log_limit(&tree, body).await;
    let held: u64 = tree.daemon.log_bytes().iter().sum();
    assert!(held > 0, "what was written since the last compaction is still there");
    // The shard being read kept all its entries, the first one included.
    for _ in 0..8 {
        tree.write(&read_body, 0, chunk.clone()).await.unwrap();
    }
    let (_, again) = tree.walk(&root, &at(&["main", "shards", &format!("buffer.{read}"), "entries"])).await.unwrap();
    let (_, again) = tree.open(&again.unwrap(), OREAD).await.unwrap();
    assert_eq!(String::from_utf8(tree.read(&again, 0, 8).await.unwrap()).unwrap(), first, "from its first entry");
    // (A compaction may come meanwhile and let the other shard's go.)
    assert!(tree.daemon.log_bytes().iter().sum::<u64>() >= 8 * chunk.len() as u64);
    tree.clunk(again).await;
    tree.clunk(read_body).await;
    tree.clunk(reader).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_persisted_session_lets_its_entries_go_between_snapshots() {
    // Far less written than a snapshot waits for: the entries leave memory
    // all the same (the log's file has them), and the session comes back
    // from the log with everything written.
    let dir = std::env::temp_dir().join(format!("apex-bounded-persisted-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let options = apex_fsd::persist::Options { snapshot_bytes: 1 << 30, ..Default::default() };
    let mut registry = Registry::new(Box::new(|| [9; 16]));
    registry.restore(apex_fsd::persist::Store::open(&dir, options).unwrap()).unwrap();
    registry.create(Some("main")).unwrap();
    let (tree, root, id) = buffer_in(registry).await;
    let (_, body) = tree.walk(&root, &at(&["main", "buffers", &id, "body"])).await.unwrap();
    let (_, body) = tree.open(&body.unwrap(), apex_ninep::fcall::OWRITE).await.unwrap();
    let (written, chunk) = write_past_the_log_limit(&tree, body).await;
    drop(tree);
    let mut again = Registry::new(Box::new(|| [9; 16]));
    again.restore(apex_fsd::persist::Store::open(&dir, options).unwrap()).unwrap();
    let s = again.get(again.by_name("main").unwrap()).unwrap();
    let text =
        s.lock().unwrap().view().state.buffer(apex_core::BufferId(id.parse().unwrap())).unwrap().text.to_string();
    // A body's writes append: every one of them, from the log.
    assert_eq!(text.len() as u64, written, "bytes back from the log");
    assert!(text.as_bytes().chunks(chunk.len()).all(|c| c == &chunk[..]), "the writes back from the log");
    let _ = std::fs::remove_dir_all(&dir);
}
