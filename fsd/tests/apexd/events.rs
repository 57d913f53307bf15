//! acme's event files as streams: a reader is told of every change
//! after the thousands of entries that make no event, and of undos again
//! once it has caught up from further behind than the edits kept.

use crate::acme::{acme_client, acme_daemon, events_until, new_window, open, put, window_ids};
use apex_ninep::fcall::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_event_comes_after_thousands_of_entries_that_make_none() {
    // Undo marks (and selections, origins, dirty and clean) make no
    // event. Thousands of them before an insert, while the reader was
    // away, must not leave the insert unread until some later change.
    let d = acme_daemon("acme-silent");
    let (c, root) = acme_client(&d, 8192).await;
    let (ctl, id) = new_window(&c, root).await;
    let ev = open(&c, root, &format!("{id}/event"), ORDWR).await;
    for _ in 0..10 {
        put(&c, &ctl, &"mark\n".repeat(500)).await.unwrap();
    }
    let body = open(&c, root, &format!("{id}/body"), OWRITE).await;
    put(&c, &body, "after\n").await.unwrap();
    let mut seen = String::new();
    events_until(&c, &ev, &mut seen, "EI0 6 0 6 after\n").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_event_reader_far_behind_hears_undos_again_once_caught_up() {
    // An undo, then more edits than the buffer keeps, made while the
    // reader was away: it cannot tell what that undo did, but once it
    // has read to the end it reports the next undo as acme does.
    let d = acme_daemon("acme-behind");
    let (c, root) = acme_client(&d, 8192).await;
    let (_ctl, id) = new_window(&c, root).await;
    let ev = open(&c, root, &format!("{id}/event"), ORDWR).await;
    let body = open(&c, root, &format!("{id}/body"), OWRITE).await;
    let apex = d.client().await;
    let aroot = apex.attach("glenda", "").await.unwrap();
    let [body_buffer, _] = window_ids(&apex, aroot, id).await;
    let undo = format!("main/buffers/{body_buffer}/ctl");
    put(&c, &body, "ab").await.unwrap();
    crate::write(&apex, aroot, &undo, "undo\n").await.unwrap();
    let edits = apex_core::HISTORY_LIMIT as u64 + 50;
    for _ in 0..edits {
        put(&c, &body, "x").await.unwrap();
    }
    let mut seen = String::new();
    events_until(&c, &ev, &mut seen, &format!("EI{} {} 0 1 x\n", edits - 1, edits)).await;
    crate::write(&apex, aroot, &undo, "undo\n").await.unwrap();
    let mut after = String::new();
    events_until(&c, &ev, &mut after, &format!("D{} {} 0 0 \n", edits - 1, edits)).await;
}
