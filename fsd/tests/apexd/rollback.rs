//! A write of the log that fails after its room was set aside (a disk's
//! EIO, injected with `APEXD_WRITES_FAIL_WHILE`): the change is undone in
//! memory and in the file, its writer hears why, a UI whose entries it
//! held resumes, agrees with the daemon and sends them again, and the
//! session takes the next change once the disk does, after a restart too.

use super::persist::Kept;
use super::{read, text, write};
use apex_core::{AttachmentKind, BufferId, Shard};
use apex_link::{Attached, Link};
use std::time::Duration;

const WAIT: Duration = Duration::from_secs(20);

/// A replica's copy of buffer `b`'s text.
fn body_of(l: &Link, b: u64) -> Option<String> {
    Some(l.node()?.state.buffer(BufferId(b)).ok()?.text.to_string())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_change_the_disk_fails_to_write_is_undone_and_the_session_serves_on() {
    let mut k = Kept::new("rollback");
    let failing = k.state.with_file_name("disk-fails");
    let failing_env = failing.to_str().unwrap().to_string();
    k.start(&[("APEXD_WRITES_FAIL_WHILE", &failing_env)], &[]);
    let (c, root) = k.client().await;
    let b: u64 = text(read(&c, root, "main/buffers/new").await.unwrap()).trim().parse().unwrap();
    let body = format!("main/buffers/{b}/body");
    write(&c, root, &body, "one\n").await.unwrap();

    // The daemon leads the buffer: its own change fails.
    let before = text(read(&c, root, "main/hash").await.unwrap());
    std::fs::write(&failing, "").unwrap();
    let why = write(&c, root, &body, "two\n").await.expect_err("the disk failed the write").to_string();
    assert!(why.contains("could not be written") && why.contains("undone"), "{why}");
    assert_eq!(text(read(&c, root, &body).await.unwrap()), "one\n", "the change was undone");
    assert_eq!(text(read(&c, root, "main/hash").await.unwrap()), before, "nothing of it is left");

    // A UI leads the buffer: the write is routed to it, and the entries
    // it makes are what the disk fails. They are undone; the UI's stream
    // breaks, and the write waits for the UI's resumed replica, which
    // sends them again.
    std::fs::remove_file(&failing).unwrap();
    let c2 = k.client().await.0;
    let ui = Attached::open(&c2, "main", AttachmentKind::Ui, "ui").await.unwrap();
    assert!(ui.wait_for(WAIT, |l| l.leads(Shard::Buffer(BufferId(b)))).await, "the UI leads the buffer");
    std::fs::write(&failing, "").unwrap();
    let routed = tokio::spawn({
        let (c, body) = (c.clone(), body.clone());
        async move { write(&c, root, &body, "three\n").await }
    });
    let deadline = std::time::Instant::now() + WAIT;
    while !ui.is_closed() {
        assert!(std::time::Instant::now() < deadline, "the UI's stream breaks");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    assert_eq!(text(read(&c, root, &body).await.unwrap()), "one\n", "its entries were undone");
    assert!(!routed.is_finished(), "the write waits for the UI");
    std::fs::remove_file(&failing).unwrap();
    ui.reconnect(&c2, "main").await.unwrap();
    tokio::time::timeout(WAIT, routed).await.expect("the write is answered").unwrap().unwrap();
    assert_eq!(text(read(&c, root, &body).await.unwrap()), "one\nthree\n");
    assert!(ui.wait_for(WAIT, |l| body_of(l, b).as_deref() == Some("one\nthree\n")).await);
    assert!(ui.with(|l| l.leads(Shard::Buffer(BufferId(b)))), "it resumed, leading what it led");
    assert!(ui.refused().iter().all(|r| r.contains("could not be written")), "{:?}", ui.refused());

    // The disk works again: the session takes changes, through the UI too.
    write(&c, root, &body, "four\n").await.unwrap();
    assert_eq!(text(read(&c, root, &body).await.unwrap()), "one\nthree\nfour\n");
    assert!(ui.wait_for(WAIT, |l| body_of(l, b).as_deref() == Some("one\nthree\nfour\n")).await);
    ui.close().await;
    drop((c, c2));

    // The file holds whole changes only: a check finds nothing to cut,
    // and a restart has what was acknowledged.
    k.kill9();
    let (report, ok) = k.check();
    assert!(ok && !report.contains("torn"), "{report}");
    k.start(&[], &[]);
    let (c, root) = k.client().await;
    assert_eq!(text(read(&c, root, &body).await.unwrap()), "one\nthree\nfour\n");
    assert!(k.said().contains("a change was undone"), "the daemon's log says so: {}", k.said());
}
