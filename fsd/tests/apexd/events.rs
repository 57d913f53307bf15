//! acme's event files as streams: a reader is told of every change
//! after the thousands of entries that make no event, and of undos again
//! once it has caught up from further behind than the edits kept; one
//! read through an openfd descriptor gives its window back when that
//! closes.

use crate::acme::{acme_client, acme_daemon, events_until, new_window, open, put, rpc_raw, window_ids, write_file};
use crate::attach::until;
use crate::text;
use apex_ninep::fcall::*;
use std::os::fd::AsRawFd;
use std::time::Duration;

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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_event_file_read_through_openfd_gives_the_window_back_when_the_descriptor_closes() {
    let d = acme_daemon("acme-openfd-event");
    let (c, root) = acme_client(&d, 8192).await;
    let (_ctl, id) = new_window(&c, root).await;
    // An openfd of the event file (9p readfd ID/event, or rdwr) makes the
    // window a tool's: closing the descriptor gives it back at once, not
    // at the window's next event (which would go to nobody meanwhile).
    // (Each shows as an entry of the window's shard: EventOpen, EventClose.)
    let apex = d.client().await;
    let aroot = apex.attach("glenda", "").await.unwrap();
    let [_, window] = window_ids(&apex, aroot, id).await;
    let info = format!("main/shards/window.{window}/info");
    let last = async || {
        let info = text(crate::read(&apex, aroot, &info).await.unwrap());
        info.lines().find_map(|l| l.strip_prefix("last ")).unwrap().parse::<u64>().unwrap()
    };
    for mode in [OREAD, ORDWR] {
        let before = last().await;
        let path = d.dir.join("acme");
        let event_fd = tokio::task::spawn_blocking(move || {
            let mut s = std::os::unix::net::UnixStream::connect(path).unwrap();
            let v = rpc_raw(&mut s, NOTAG, Fcall::Tversion { msize: 8192, version: "9P2000".into() });
            assert!(matches!(v, Fcall::Rversion { .. }));
            let a = rpc_raw(&mut s, 1, Fcall::Tattach { fid: 0, afid: NOFID, uname: "u".into(), aname: "".into() });
            assert!(matches!(a, Fcall::Rattach { .. }));
            let w =
                rpc_raw(&mut s, 2, Fcall::Twalk { fid: 0, newfid: 1, wnames: vec![id.to_string(), "event".into()] });
            assert!(matches!(w, Fcall::Rwalk { .. }));
            let o = rpc_raw(&mut s, 3, Fcall::Topenfd { fid: 1, mode });
            assert!(matches!(o, Fcall::Ropenfd { .. }), "{o:?}");
            let fd = apex_ninep::fdpass::recv_fd(s.as_raw_fd()).unwrap();
            (s, std::os::unix::net::UnixStream::from(fd))
        })
        .await
        .unwrap();
        until(|| "the event reader never took the window".into(), async || (last().await > before).then_some(())).await;
        // Done writing (or never writing), not reading: events still
        // come through.
        event_fd.1.shutdown(std::net::Shutdown::Write).unwrap();
        write_file(&c, root, &format!("{id}/body"), "more\n").await.unwrap();
        let mut events = event_fd.1.try_clone().unwrap();
        let got = tokio::task::spawn_blocking(move || {
            use std::io::Read;
            let (mut got, mut chunk) = (String::new(), [0u8; 256]);
            while !got.contains(" more\n") {
                match events.read(&mut chunk).unwrap() {
                    0 => break,
                    n => got += &String::from_utf8_lossy(&chunk[..n]),
                }
            }
            got
        });
        let got = tokio::time::timeout(Duration::from_secs(60), got).await.expect("no event after a half-close");
        let got = got.unwrap();
        assert!(got.lines().any(|l| l.starts_with("EI") && l.ends_with(" more")), "the insert's event: {got:?}");
        let opened = last().await;
        drop(event_fd);
        until(
            || format!("the window stayed a closed reader's (mode {mode})"),
            async || (last().await > opened).then_some(()),
        )
        .await;
    }
}
