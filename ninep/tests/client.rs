//! The async client against a scripted server on a socket pair:
//! negotiation, pipelined requests answered out of order, Tflush of a
//! blocked read, long walks, chunked writes, errors and hang-ups.

use apex_ninep::fcall::*;
use apex_ninep::*;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::UnixStream;

/// What the scripted server saw.
#[derive(Default)]
struct Seen {
    writes: Vec<usize>,
    walks: Vec<usize>,
    flushed: Vec<u16>,
    /// The offsets of reads of `long`, in the order they came.
    long_reads: Vec<u64>,
}

/// `long`'s bytes: 50,000 of them, none like its neighbours.
fn long_byte(at: u64) -> u8 {
    (at % 251) as u8
}
const LONG: u64 = 50_000;
/// A read of `long` from here gives 1,000 bytes, however many were asked.
const LONG_SHORT_AT: u64 = 2 * 8168;

/// A tiny server: files are names; `slow` reads block until flushed;
/// `rev` reads are answered only when two are waiting, newest first.
async fn serve(mut s: UnixStream, seen: Arc<Mutex<Seen>>) {
    let mut buf = Vec::new();
    let mut fids: HashMap<u32, String> = HashMap::new();
    let mut held: Vec<(u16, String)> = Vec::new();
    let mut msize = 8192;
    loop {
        let n = loop {
            match check(&buf, msize).unwrap() {
                Some(n) => break n,
                None => {
                    let mut chunk = [0u8; 4096];
                    let k = s.read(&mut chunk).await.unwrap();
                    if k == 0 {
                        return;
                    }
                    buf.extend_from_slice(&chunk[..k]);
                }
            }
        };
        let msg = parse(&buf[..n]).unwrap();
        buf.drain(..n);
        let q = |ty| Qid { ty, vers: 0, path: 1 };
        let mut replies = vec![];
        let reply = match msg.body {
            Fcall::Tversion { msize: m, .. } => {
                msize = m.min(8192);
                Some(Fcall::Rversion { msize, version: "9P2000".into() })
            }
            Fcall::Tattach { fid, .. } => {
                fids.insert(fid, String::new());
                Some(Fcall::Rattach { qid: q(QTDIR) })
            }
            Fcall::Twalk { fid, newfid, wnames } => {
                seen.lock().unwrap().walks.push(wnames.len());
                let mut path = fids[&fid].clone();
                let mut wqids = vec![];
                for w in &wnames {
                    if w == "missing" {
                        break;
                    }
                    path = w.clone();
                    wqids.push(q(QTFILE));
                }
                if wqids.len() == wnames.len() {
                    fids.insert(newfid, path);
                }
                if wqids.is_empty() && !wnames.is_empty() {
                    Some(Fcall::Rerror { ename: "file does not exist".into() })
                } else {
                    Some(Fcall::Rwalk { wqids })
                }
            }
            Fcall::Topen { .. } => Some(Fcall::Ropen { qid: q(QTFILE), iounit: 0 }),
            Fcall::Tread { fid, offset, count } => match fids[&fid].as_str() {
                "slow" => {
                    held.push((msg.tag, "slow".into()));
                    None
                }
                "rev" => {
                    held.push((msg.tag, format!("rev{}", held.len())));
                    if held.len() == 2 {
                        for (tag, data) in held.drain(..).rev() {
                            replies.push(Msg { tag, body: Fcall::Rread { data: data.into_bytes() } });
                        }
                    }
                    None
                }
                "long" => {
                    seen.lock().unwrap().long_reads.push(offset);
                    let end = match offset {
                        LONG_SHORT_AT => offset + 1000,
                        _ => offset + u64::from(count),
                    };
                    Some(Fcall::Rread { data: (offset..end.min(LONG)).map(long_byte).collect() })
                }
                _ => {
                    let left = 10u64.saturating_sub(offset).min(count as u64) as usize;
                    Some(Fcall::Rread { data: vec![b'x'; left.min(4)] })
                }
            },
            Fcall::Twrite { data, .. } => {
                seen.lock().unwrap().writes.push(data.len());
                Some(Fcall::Rwrite { count: data.len() as u32 })
            }
            Fcall::Tflush { oldtag } => {
                seen.lock().unwrap().flushed.push(oldtag);
                held.retain(|(t, _)| *t != oldtag);
                Some(Fcall::Rflush)
            }
            Fcall::Tclunk { fid } => {
                fids.remove(&fid);
                Some(Fcall::Rclunk)
            }
            Fcall::Tstat { .. } => Some(Fcall::Rstat { stat: Box::new(Stat { name: "f".into(), ..Stat::default() }) }),
            other => Some(Fcall::Rerror { ename: format!("not scripted: {other:?}") }),
        };
        if let Some(body) = reply {
            replies.push(Msg { tag: msg.tag, body });
        }
        for r in replies {
            s.write_all(&to_bytes(&r)).await.unwrap();
        }
    }
}

async fn connect() -> (Client, Arc<Mutex<Seen>>) {
    let (a, b) = tokio::net::UnixStream::pair().unwrap();
    let seen = Arc::new(Mutex::new(Seen::default()));
    tokio::spawn(serve(b, seen.clone()));
    (Client::handshake(a, 1 << 20).await.unwrap(), seen)
}

#[tokio::test]
async fn a_read_ahead_keeps_reads_in_flight_and_starts_again_after_a_short_reply() {
    let (c, seen) = connect().await;
    let root = c.attach("glenda", "").await.unwrap();
    let f = c.open_path(root, "long", OREAD).await.unwrap();
    let mut got = Vec::new();
    let n = c
        .read_ahead(&f, 3, |b| {
            got.extend_from_slice(b);
            Ok(())
        })
        .await
        .unwrap();
    assert_eq!(n, LONG);
    assert!(got == (0..LONG).map(long_byte).collect::<Vec<u8>>(), "every byte once, in order");
    let reads = seen.lock().unwrap().long_reads.clone();
    assert_eq!(reads[..3], [0, 8168, 2 * 8168], "{reads:?}");
    // The short reply at 16,336 came with reads at 24,504 and 32,672
    // already sent (one at a time, 24,504 would never be asked); reading
    // went on from 17,336.
    let restart = reads.iter().position(|&o| o == LONG_SHORT_AT + 1000).expect("read again from the short reply's end");
    assert!(reads[..restart].contains(&(3 * 8168)), "{reads:?}");
    assert!(reads.len() >= 9, "the reads past the end are sent ahead too: {reads:?}");
    // The fid and every tag are free again: a plain read still works.
    assert_eq!(c.read_all(&f).await.unwrap().len() as u64, LONG);
}

#[tokio::test]
async fn reads_writes_and_walks() {
    let (c, seen) = connect().await;
    assert_eq!(c.msize(), 8192, "msize is the smaller of the two");
    let root = c.attach("glenda", "").await.unwrap();
    let f = c.open_path(root, "/file", ORDWR).await.unwrap();
    assert_eq!(f.iounit, 8192 - 24, "iounit 0 means msize - 24");
    assert_eq!(c.read_all(&f).await.unwrap(), b"xxxxxxxxxx", "reads until a 0-byte read");
    c.write_all(&f, 0, &vec![7u8; 20_000]).await.unwrap();
    assert_eq!(seen.lock().unwrap().writes, [8168, 8168, 3664], "one Twrite per iounit");
    let names: Vec<String> = (0..20).map(|i| format!("d{i}")).collect();
    let names: Vec<&str> = names.iter().map(|s| s.as_str()).collect();
    let (fid, qids) = c.walk(root, &names).await.unwrap();
    assert_eq!(qids.len(), 20);
    assert_eq!(seen.lock().unwrap().walks[1..], [16, 4], "long walks go 16 names at a time");
    assert_eq!(c.stat(fid).await.unwrap().name, "f");
    c.clunk(fid).await.unwrap();
    let err = c.walk(root, &["a", "missing"]).await.unwrap_err();
    assert_eq!(err.to_string(), "file does not exist: a/missing");
    assert_eq!(c.walk(root, &["missing"]).await.unwrap_err(), ClientError::Server("file does not exist".into()));
}

#[tokio::test]
async fn pipelined_replies_in_any_order_reach_their_callers() {
    let (c, _) = connect().await;
    let root = c.attach("glenda", "").await.unwrap();
    let a = c.open_path(root, "rev", OREAD).await.unwrap();
    let b = c.open_path(root, "rev", OREAD).await.unwrap();
    let (ra, rb) = tokio::join!(c.read(a.fid, 0, 10), async {
        tokio::time::sleep(Duration::from_millis(20)).await;
        c.read(b.fid, 0, 10).await
    });
    // The server answered the second first; each caller got its own.
    assert_eq!((ra.unwrap(), rb.unwrap()), (b"rev0".to_vec(), b"rev1".to_vec()));
}

#[tokio::test]
async fn a_waiting_request_left_unpolled_holds_up_no_other() {
    // Requests read replies for each other: one that was polled, is still
    // alive and is polled no more (a select's other branch won, say) must
    // hold nothing the next request needs, and a reply read for it waits
    // for it.
    let (c, _) = connect().await;
    let root = c.attach("glenda", "").await.unwrap();
    let slow = c.open_path(root, "slow", OREAD).await.unwrap();
    let mut blocked = Box::pin(c.read(slow.fid, 0, 10));
    assert!(tokio::time::timeout(Duration::from_millis(20), &mut blocked).await.is_err(), "the read blocks");
    let f = c.open_path(root, "file", OREAD).await.unwrap();
    let mut left = Box::pin(c.read(f.fid, 0, 4));
    assert!(poll_once(&mut left).await.is_none(), "not answered before its reply is read");
    let other = tokio::time::timeout(Duration::from_secs(30), c.read_all(&f)).await;
    assert_eq!(other.expect("answered, not held up").unwrap().len(), 10);
    // The reply read for the request left alone waited for it.
    let data = tokio::time::timeout(Duration::from_secs(30), left).await.expect("answered when polled again");
    assert_eq!(data.unwrap().len(), 4);
    drop(blocked);
}

/// Polls `f` once: its output if it was ready.
async fn poll_once<F: std::future::Future + Unpin>(f: &mut F) -> Option<F::Output> {
    std::future::poll_fn(|cx| {
        std::task::Poll::Ready(match std::pin::Pin::new(&mut *f).poll(cx) {
            std::task::Poll::Ready(out) => Some(out),
            std::task::Poll::Pending => None,
        })
    })
    .await
}

#[tokio::test]
async fn dropping_a_blocked_read_flushes_it() {
    let (c, seen) = connect().await;
    let root = c.attach("glenda", "").await.unwrap();
    let f = c.open_path(root, "slow", OREAD).await.unwrap();
    let r = tokio::time::timeout(Duration::from_millis(50), c.read(f.fid, 0, 10)).await;
    assert!(r.is_err(), "the read blocks");
    // The flush goes out on its own; the connection goes on serving.
    for _ in 0..100 {
        if !seen.lock().unwrap().flushed.is_empty() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    assert_eq!(seen.lock().unwrap().flushed.len(), 1);
    let g = c.open_path(root, "file", OREAD).await.unwrap();
    assert_eq!(c.read_all(&g).await.unwrap().len(), 10);
}

#[tokio::test]
async fn a_hang_up_fails_what_is_pending() {
    let (a, mut b) = tokio::net::UnixStream::pair().unwrap();
    let server = tokio::spawn(async move {
        let mut buf = vec![0u8; 512];
        let n = b.read(&mut buf).await.unwrap();
        let msg = parse(&buf[..n]).unwrap();
        let reply = Msg { tag: msg.tag, body: Fcall::Rversion { msize: 4096, version: "9P2000".into() } };
        b.write_all(&to_bytes(&reply)).await.unwrap();
        let _ = b.read(&mut buf).await; // the Tattach, never answered
    });
    let c = Client::handshake(a, 8192).await.unwrap();
    let pending = c.attach("u", "");
    let (r, _) = tokio::join!(pending, server);
    assert_eq!(r.unwrap_err(), ClientError::Hangup);
}

#[tokio::test]
async fn a_hang_up_with_nothing_in_flight_ends_closed_and_fails_the_next_request() {
    let (a, mut b) = tokio::net::UnixStream::pair().unwrap();
    let mut buf = Vec::new();
    let answer = tokio::spawn(async move {
        answer_version(&mut b, &mut buf, 8192).await;
        b
    });
    let c = Client::handshake(a, 8192).await.unwrap();
    let b = answer.await.unwrap();
    drop(b);
    tokio::time::timeout(Duration::from_secs(30), c.closed()).await.expect("the end seen with nothing in flight");
    assert_eq!(c.attach("glenda", "").await, Err(ClientError::Hangup));
}

#[tokio::test]
async fn a_request_given_up_part_way_through_its_frame_still_sends_it_whole() {
    // A large Twrite is given up (a timeout; apex-mnt's interrupt) while
    // the socket, which the server does not read yet, has taken only part
    // of it. The rest must follow, or the server would read the frames
    // after it as its data.
    let (a, mut b) = tokio::net::UnixStream::pair().unwrap();
    let data = vec![b'x'; (1 << 20) - 100];
    let want = data.clone();
    let server = tokio::spawn(async move {
        let mut buf = Vec::new();
        answer_version(&mut b, &mut buf, 1 << 20).await;
        // Nothing read for a while: the Twrite stalls part-way.
        tokio::time::sleep(Duration::from_millis(300)).await;
        let mut seen = Vec::new();
        while !(seen.contains(&"Tflush") && seen.contains(&"Tstat")) {
            let msg = next_frame(&mut b, &mut buf).await;
            let (what, reply) = match &msg.body {
                Fcall::Twrite { data, .. } => {
                    assert!(*data == want, "the Twrite arrives whole");
                    ("Twrite", Fcall::Rwrite { count: data.len() as u32 })
                }
                Fcall::Tflush { .. } => ("Tflush", Fcall::Rflush),
                Fcall::Tstat { .. } => {
                    ("Tstat", Fcall::Rstat { stat: Box::new(Stat { name: "f".into(), ..Stat::default() }) })
                }
                other => panic!("not a frame sent: {other:?}"),
            };
            seen.push(what);
            b.write_all(&to_bytes(&Msg { tag: msg.tag, body: reply })).await.unwrap();
        }
        (seen, b)
    });
    let c = Client::handshake(a, 1 << 20).await.unwrap();
    let given_up = tokio::time::timeout(Duration::from_millis(50), c.write(7, 0, &data)).await;
    assert!(given_up.is_err(), "the write was still going");
    let stat = tokio::time::timeout(Duration::from_secs(30), c.stat(7)).await.expect("answered, the stream whole");
    assert_eq!(stat.unwrap().name, "f");
    let (seen, _b) =
        tokio::time::timeout(Duration::from_secs(30), server).await.expect("the server saw it all").unwrap();
    assert_eq!(seen[0], "Twrite", "{seen:?}");
    assert_eq!(seen.len(), 3, "{seen:?}");
}

#[tokio::test]
async fn a_write_waiting_for_room_ends_when_the_connection_does() {
    // The server reads nothing after Tversion and sends a frame too small
    // to be one, keeping the stream open: a large write waiting for room
    // fails once the broken framing ends the connection, rather than wait
    // for room that will never come.
    let (a, mut b) = tokio::net::UnixStream::pair().unwrap();
    let server = tokio::spawn(async move {
        let mut buf = Vec::new();
        answer_version(&mut b, &mut buf, 1 << 20).await;
        tokio::time::sleep(Duration::from_millis(100)).await;
        b.write_all(&[3, 0, 0, 0]).await.unwrap();
        tokio::time::sleep(Duration::from_secs(60)).await;
        b
    });
    let c = Client::handshake(a, 1 << 20).await.unwrap();
    let data = vec![b'x'; (1 << 20) - 100];
    // `closed()` polled first reads the broken frame: the write then has
    // nothing to read, no room, and only the connection's end to go by.
    let (ended, write) = tokio::join!(
        tokio::time::timeout(Duration::from_secs(30), c.closed()),
        tokio::time::timeout(Duration::from_secs(30), c.write(7, 0, &data)),
    );
    ended.expect("the broken framing ends the connection");
    assert_eq!(write.expect("the write gives up, not waits"), Err(ClientError::Hangup));
    server.abort();
}

#[tokio::test]
async fn a_server_without_9p2000_is_refused() {
    let (a, mut b) = tokio::net::UnixStream::pair().unwrap();
    tokio::spawn(async move {
        let mut buf = vec![0u8; 512];
        let _ = b.read(&mut buf).await.unwrap();
        let reply = Msg { tag: NOTAG, body: Fcall::Rversion { msize: 4096, version: "unknown".into() } };
        b.write_all(&to_bytes(&reply)).await.unwrap();
    });
    let err = Client::handshake(a, 8192).await.err().unwrap();
    assert!(err.to_string().contains("\"unknown\""), "{err}");
    assert!(matches!(dial("ftp!x", 8192).await, Err(ClientError::BadAddress(_))));
}

#[tokio::test]
async fn a_walk_answered_with_more_qids_than_names_fails_cleanly() {
    // A broken server answers a walk of no names, and one of one name,
    // with two qids: each walk fails as the server's fault, nothing
    // panics, and the new fid is clunked.
    let (a, mut b) = tokio::net::UnixStream::pair().unwrap();
    let server = tokio::spawn(async move {
        let mut buf = Vec::new();
        let mut clunked = Vec::new();
        answer_version(&mut b, &mut buf, 8192).await;
        loop {
            let Msg { tag, body } = next_frame(&mut b, &mut buf).await;
            let reply = match body {
                Fcall::Tattach { .. } => Fcall::Rattach { qid: Qid::default() },
                Fcall::Twalk { .. } => Fcall::Rwalk { wqids: vec![Qid::default(); 2] },
                Fcall::Tclunk { fid } => {
                    clunked.push(fid);
                    Fcall::Rclunk
                }
                _ => return clunked,
            };
            b.write_all(&to_bytes(&Msg { tag, body: reply })).await.unwrap();
        }
    });
    let c = Client::handshake(a, 8192).await.unwrap();
    let root = c.attach("glenda", "").await.unwrap();
    for names in [&[][..], &["one"][..]] {
        let e = c.walk(root, names).await.unwrap_err();
        assert!(matches!(e, ClientError::Protocol(_)), "{e}");
    }
    let _ = c.stat(root).await;
    assert_eq!(server.await.unwrap().len(), 2, "each new fid clunked");
}

#[tokio::test]
async fn a_server_agreeing_to_an_msize_too_small_or_too_large_is_refused() {
    // msize 24 leaves no byte for data (every read would end at once);
    // one over what was asked for breaks what the client sized for.
    for (agreed, says) in [(24, "under the least"), (16384, "over the 8192 asked for")] {
        let (a, mut b) = tokio::net::UnixStream::pair().unwrap();
        tokio::spawn(async move {
            let mut buf = Vec::new();
            answer_version(&mut b, &mut buf, agreed).await;
        });
        let err = Client::handshake(a, 8192).await.err().unwrap();
        assert!(err.to_string().contains(says), "{agreed}: {err}");
    }
}

/// Reads one whole frame from `s` onto `buf`.
async fn next_frame(s: &mut UnixStream, buf: &mut Vec<u8>) -> Msg {
    loop {
        if let Some(n) = check(buf, 1 << 20).unwrap() {
            let msg = parse(&buf[..n]).unwrap();
            buf.drain(..n);
            return msg;
        }
        let mut chunk = [0u8; 4096];
        let k = s.read(&mut chunk).await.unwrap();
        assert!(k > 0, "the client hung up");
        buf.extend_from_slice(&chunk[..k]);
    }
}

/// As a server: reads the client's Tversion and agrees to `msize`.
async fn answer_version(s: &mut UnixStream, buf: &mut Vec<u8>, msize: u32) {
    let Msg { tag, .. } = next_frame(s, buf).await;
    s.write_all(&to_bytes(&Msg { tag, body: Fcall::Rversion { msize, version: "9P2000".into() } })).await.unwrap();
}

#[tokio::test]
async fn large_rreads_arrive_whole_however_the_stream_is_cut() {
    // Two large Rreads and a small reply written back to back, cut at
    // these offsets (inside the first's head, right after it, inside the
    // data, across into the next): each read gets exactly its data.
    let data = |k: u8| -> Vec<u8> { (0..300_000u32).map(|i| (i % 251) as u8 ^ k).collect() };
    for cuts in [vec![3], vec![11], vec![12, 13], vec![150_000, 300_011, 300_015], vec![1, 2, 600_000]] {
        let shown = format!("{cuts:?}");
        let (a, mut b) = tokio::net::UnixStream::pair().unwrap();
        let server = tokio::spawn(async move {
            let mut buf = Vec::new();
            answer_version(&mut b, &mut buf, 1 << 20).await;
            let mut out = Vec::new();
            // Each read's data by its count, the large ones first.
            let mut reads = Vec::new();
            for _ in 0..3 {
                let Msg { tag, body: Fcall::Tread { count, .. } } = next_frame(&mut b, &mut buf).await else {
                    panic!("a Tread")
                };
                reads.push((count, tag));
            }
            reads.sort_by(|x, y| y.cmp(x));
            for (count, tag) in reads {
                let data = match count {
                    10 => b"small".to_vec(),
                    n => data((n - 400_000) as u8),
                };
                encode(&Msg { tag, body: Fcall::Rread { data } }, &mut out);
            }
            let mut at = 0;
            for cut in cuts.into_iter().chain([out.len()]) {
                b.write_all(&out[at..cut]).await.unwrap();
                b.flush().await.unwrap();
                tokio::time::sleep(Duration::from_millis(5)).await;
                at = cut;
            }
            b
        });
        let c = Client::handshake(a, 1 << 20).await.unwrap();
        let (x, y, z) = tokio::join!(c.read(1, 0, 400_000), c.read(1, 0, 400_001), c.read(1, 0, 10));
        assert!(x.unwrap() == data(0) && y.unwrap() == data(1), "cut at {shown}");
        assert_eq!(z.unwrap(), b"small");
        drop(server.await.unwrap());
    }
}

#[tokio::test]
async fn a_request_after_the_framing_broke_fails_rather_than_waits() {
    // The server answers Tversion, then sends a frame too small to be one
    // and keeps the stream open: the request it broke fails, and so does
    // every one after, at once (the stream would take their writes).
    let (a, mut b) = tokio::net::UnixStream::pair().unwrap();
    let server = tokio::spawn(async move {
        let mut buf = Vec::new();
        answer_version(&mut b, &mut buf, 8192).await;
        next_frame(&mut b, &mut buf).await;
        b.write_all(&[3, 0, 0, 0]).await.unwrap();
        // Keep the stream open, taking whatever comes.
        let mut sink = [0u8; 4096];
        while matches!(b.read(&mut sink).await, Ok(k) if k > 0) {}
    });
    let c = Client::handshake(a, 8192).await.unwrap();
    assert!(c.attach("glenda", "").await.is_err(), "the broken reply");
    c.closed().await;
    let later = tokio::time::timeout(Duration::from_secs(30), c.attach("glenda", "")).await;
    assert_eq!(later.expect("answered, not left waiting"), Err(ClientError::Hangup));
    drop(c);
    server.abort();
}

/// A request given up while every tag is taken keeps its tag until its
/// Rflush: its Tflush waits for a tag to come free, and goes out then,
/// rather than being dropped with the tag freed at once (after which a
/// late reply to the old request could be taken for a new one's).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_dropped_with_every_tag_taken_is_flushed_once_a_tag_frees() {
    let (a, mut b) = tokio::net::UnixStream::pair().unwrap();
    let (to_server, mut told) = tokio::sync::mpsc::unbounded_channel::<Msg>();
    let (seen_tx, mut seen) = tokio::sync::mpsc::unbounded_channel::<Msg>();
    let server = tokio::spawn(async move {
        let mut buf = Vec::new();
        answer_version(&mut b, &mut buf, 8192).await;
        loop {
            tokio::select! {
                msg = next_frame(&mut b, &mut buf) => { let _ = seen_tx.send(msg); }
                Some(reply) = told.recv() => b.write_all(&to_bytes(&reply)).await.unwrap(),
            }
        }
    });
    let c = Client::handshake(a, 8192).await.unwrap();
    let mut sent = Vec::new();
    for _ in 0..NOTAG {
        sent.push(Some(c.send(Fcall::Tstat { fid: 1 }).await.unwrap()));
    }
    for _ in 0..NOTAG {
        seen.recv().await.unwrap();
    }
    assert!(matches!(c.send(Fcall::Tstat { fid: 1 }).await, Err(ClientError::NoFreeTags)));
    drop(sent[100].take());
    // No tag is free: no Tflush can go out yet.
    tokio::time::sleep(Duration::from_millis(50)).await;
    assert!(seen.try_recv().is_err(), "nothing sent while every tag is taken");
    // Tag 5 is answered and freed: the Tflush of tag 100 goes out on it.
    to_server.send(Msg { tag: 5, body: Fcall::Rstat { stat: Box::new(Stat::default()) } }).unwrap();
    sent[5].take().unwrap().reply().await.unwrap();
    let flush = tokio::time::timeout(Duration::from_secs(20), seen.recv()).await.expect("the Tflush came").unwrap();
    assert_eq!(flush, Msg { tag: 5, body: Fcall::Tflush { oldtag: 100 } });
    server.abort();
}

/// A request given up is flushed before whatever its caller sends next:
/// the Tflush is written as the request is dropped, not by a task that
/// runs later, so a request after it reaches the server after the flush.
#[tokio::test]
async fn a_dropped_request_is_flushed_before_the_next_request_goes() {
    let (a, mut b) = tokio::net::UnixStream::pair().unwrap();
    let server = tokio::spawn(async move {
        let mut buf = Vec::new();
        answer_version(&mut b, &mut buf, 8192).await;
        let mut seen = Vec::new();
        for _ in 0..3 {
            seen.push(next_frame(&mut b, &mut buf).await);
        }
        seen
    });
    let c = Client::handshake(a, 8192).await.unwrap();
    let given_up = c.send(Fcall::Tread { fid: 1, offset: 0, count: 10 }).await.unwrap();
    drop(given_up);
    let next = c.send(Fcall::Tstat { fid: 1 }).await.unwrap();
    let seen = tokio::time::timeout(Duration::from_secs(20), server).await.expect("three frames").unwrap();
    let read_tag = seen[0].tag;
    assert!(matches!(seen[0].body, Fcall::Tread { .. }), "{seen:?}");
    assert_eq!(seen[1].body, Fcall::Tflush { oldtag: read_tag }, "{seen:?}");
    assert!(matches!(seen[2].body, Fcall::Tstat { .. }), "{seen:?}");
    drop(next);
}

/// A runtime dropped while a request waits on a server that answers
/// nothing (a program's exit): the request's Tflush is written and, its
/// task dropped with the runtime, not flushed in turn. (Each flush
/// flushing the last one ended in a stack overflow.)
#[test]
fn a_runtime_dropped_with_requests_waiting_ends_cleanly() {
    let (a, b) = std::os::unix::net::UnixStream::pair().unwrap();
    // The server agrees to 9P2000 and then only reads.
    let server = std::thread::spawn(move || {
        use std::io::{Read, Write};
        let mut b = b;
        let mut frames = Vec::new();
        let mut buf = [0u8; 4096];
        let mut got = Vec::new();
        loop {
            while let Some(n) = check(&got, 1 << 20).unwrap() {
                let msg = parse(&got[..n]).unwrap();
                got.drain(..n);
                if let Fcall::Tversion { .. } = msg.body {
                    let reply = Msg { tag: msg.tag, body: Fcall::Rversion { msize: 8192, version: "9P2000".into() } };
                    b.write_all(&to_bytes(&reply)).unwrap();
                } else {
                    frames.push(msg.body);
                }
            }
            match b.read(&mut buf) {
                Ok(0) | Err(_) => return frames,
                Ok(k) => got.extend_from_slice(&buf[..k]),
            }
        }
    });
    // One thread: the tasks are dropped one after another, each request's
    // flush written as it goes (with two, a flush can find the other's
    // frame going out, and be dropped with its task unwritten).
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    rt.block_on(async {
        a.set_nonblocking(true).unwrap();
        let c = Client::handshake(tokio::net::UnixStream::from_std(a).unwrap(), 8192).await.unwrap();
        for _ in 0..3 {
            let c = c.clone();
            tokio::spawn(async move { c.read(1, 0, 10).await });
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    });
    drop(rt);
    let frames = server.join().unwrap();
    let reads = frames.iter().filter(|f| matches!(f, Fcall::Tread { .. })).count();
    let flushes = frames.iter().filter(|f| matches!(f, Fcall::Tflush { .. })).count();
    assert_eq!((reads, flushes), (3, 3), "each read flushed once, no flush flushed: {frames:?}");
}

/// A request written to a server that has gone fails with Hangup and
/// raises no SIGPIPE, which would kill a program that has not ignored it
/// (Rust's own programs ignore it; one embedding this client may not).
/// Blocked on this thread, where the runtime writes, a SIGPIPE raised
/// would be left pending (Linux keeps a blocked signal even while it is
/// ignored), and nothing else in the process is disturbed.
#[test]
fn a_write_to_a_server_gone_raises_no_sigpipe() {
    // SAFETY: sigset calls on local sets, and this thread's own mask.
    let (pipe, old) = unsafe {
        let mut pipe: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut pipe);
        libc::sigaddset(&mut pipe, libc::SIGPIPE);
        let mut old: libc::sigset_t = std::mem::zeroed();
        assert_eq!(libc::pthread_sigmask(libc::SIG_BLOCK, &pipe, &mut old), 0);
        (pipe, old)
    };
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let got = rt.block_on(async {
        let (a, mut b) = tokio::net::UnixStream::pair().unwrap();
        let mut buf = Vec::new();
        let (c, ()) = tokio::join!(Client::handshake(a, 8192), answer_version(&mut b, &mut buf, 8192));
        let c = c.unwrap();
        drop(b);
        c.attach("glenda", "").await
    });
    drop(rt);
    // SAFETY: as above; a zero timeout takes a pending SIGPIPE, if any,
    // without waiting, before the mask is put back.
    let raised = unsafe {
        let mut pending: libc::sigset_t = std::mem::zeroed();
        libc::sigpending(&mut pending);
        let raised = libc::sigismember(&pending, libc::SIGPIPE) == 1;
        if raised {
            let zero = libc::timespec { tv_sec: 0, tv_nsec: 0 };
            libc::sigtimedwait(&pipe, std::ptr::null_mut(), &zero);
        }
        libc::pthread_sigmask(libc::SIG_SETMASK, &old, std::ptr::null_mut());
        raised
    };
    assert_eq!(got, Err(ClientError::Hangup));
    assert!(!raised, "the write raised SIGPIPE");
}
