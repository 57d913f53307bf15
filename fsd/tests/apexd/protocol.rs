//! The protocol against a real apexd: streams that block, pipelined
//! requests answered out of order, Tflush of a blocked read, hang-ups with
//! open fids, and malformed messages that disturb no one else.

use super::session::{new_buffer, read_lines};
use super::*;
use apex_fsd::shards::entrytext::{parse_entry, parse_registry};
use apex_ninep::codec::{check, parse, to_bytes};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn streams_block_answer_out_of_order_and_flush() {
    let d = Daemon::start("streams");
    let c = d.client().await;
    let other = d.client().await;
    let root = c.attach("glenda", "").await.unwrap();
    let oroot = other.attach("glenda", "").await.unwrap();
    let n = new_buffer(&c, root).await;

    // Catch up with the buffer's entries, then block at the end.
    let info = text(read(&c, root, &format!("main/shards/buffer.{n}/info")).await.unwrap());
    let last: usize = info.lines().find_map(|l| l.strip_prefix("last ")).unwrap().parse().unwrap();
    let entries = c.open_path(root, &format!("main/shards/buffer.{n}/entries"), OREAD).await.unwrap();
    let event = c.open_path(root, &format!("main/buffers/{n}/event"), OREAD).await.unwrap();
    let mut offset = 0;
    read_lines(&c, &entries, &mut offset, last).await;
    let blocked = {
        let c = c.clone();
        let fid = entries.fid;
        tokio::spawn(async move { c.read(fid, offset, 8192).await })
    };
    // Later requests on the same connection are answered while it waits.
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert!(!blocked.is_finished(), "the read waits for a new entry");
    let st = c.stat(entries.fid).await.unwrap();
    assert_eq!(st.name, "entries");
    assert_eq!(text(read(&c, root, "main/label").await.unwrap()), "main\n");
    // Another client's write wakes it with the new entries, lossless.
    write(&other, oroot, &format!("main/buffers/{n}/body"), "hi\n").await.unwrap();
    let got = tokio::time::timeout(Duration::from_secs(10), blocked).await.unwrap().unwrap().unwrap();
    let got = text(got);
    let lines: Vec<_> = got.lines().map(|l| parse_entry(l).unwrap()).collect();
    assert!(lines.iter().all(|e| e.seq as usize > last), "{got}");
    assert!(got.contains("\"Splice\""), "{got}");
    offset += got.len() as u64;
    // The event file saw the same change as acme reports it.
    let mut eoff = 0;
    assert_eq!(read_lines(&c, &event, &mut eoff, 1).await, "EI0 3 0 3 hi\n\n");

    // Tflush of a blocked read: the read is cancelled and never happened;
    // the stream goes on from where it was.
    let flushed = tokio::time::timeout(Duration::from_millis(200), c.read(entries.fid, offset, 8192)).await;
    assert!(flushed.is_err(), "nothing new, so the read was still blocked");
    // Its Tflush went out as it was given up: a request after it on the
    // connection is answered after the server cancelled the read.
    c.stat(entries.fid).await.unwrap();
    write(&other, oroot, &format!("main/buffers/{n}/body"), "x").await.unwrap();
    let line = read_lines(&c, &entries, &mut offset, 1).await;
    assert!(line.contains("\"text\":\"x\""), "{line}");
    // Offsets must follow on.
    assert!(c.read(entries.fid, 3, 10).await.unwrap_err().to_string().contains("streams read in order"));

    // /registry streams the set of sessions.
    let reg = c.open_path(root, "registry", OREAD).await.unwrap();
    let mut roff = 0;
    let first = read_lines(&c, &reg, &mut roff, 1).await;
    assert!(first.contains("SessionNew") && first.contains("\"main\""), "{first}");
    write(&other, oroot, "ctl", "new extra\n").await.unwrap();
    let next = parse_registry(read_lines(&c, &reg, &mut roff, 1).await.trim_end()).unwrap();
    assert_eq!(next.seq, 2);
    assert!(format!("{:?}", next.op).contains("extra"));
    // A stream of a deleted session ends (EOF); reads of its files fail.
    let xentries = c.open_path(root, "extra/shards/meta/entries", OREAD).await.unwrap();
    let mut xoff = 0;
    read_lines(&c, &xentries, &mut xoff, 3).await;
    let pending = {
        let c = c.clone();
        tokio::spawn(async move {
            loop {
                let got = c.read(xentries.fid, xoff, 65536).await.unwrap();
                if got.is_empty() {
                    return;
                }
                xoff += got.len() as u64;
            }
        })
    };
    write(&other, oroot, "ctl", "del extra\n").await.unwrap();
    tokio::time::timeout(Duration::from_secs(10), pending).await.expect("EOF after the session went").unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hang_up_clunks_every_fid() {
    let d = Daemon::start("hangup");
    let c = d.client().await;
    let root = c.attach("glenda", "").await.unwrap();
    let n = new_buffer(&c, root).await;
    write(&c, root, &format!("main/buffers/{n}/body"), "0123456789").await.unwrap();
    // A holds addr open at #3 and then hangs up without clunking.
    {
        let a = d.client().await;
        let ar = a.attach("glenda", "").await.unwrap();
        let addr = a.open_path(ar, &format!("main/buffers/{n}/addr"), ORDWR).await.unwrap();
        a.write(addr.fid, 0, b"#3").await.unwrap();
        let b = d.client().await;
        let br = b.attach("glenda", "").await.unwrap();
        let seen = b.open_path(br, &format!("main/buffers/{n}/addr"), OREAD).await.unwrap();
        assert_eq!(text(b.read(seen.fid, 0, 30).await.unwrap()), "          3           3 ", "shared while open");
        b.clunk(seen.fid).await.unwrap();
    }
    // Once its connection is gone its fid is clunked: the next first open
    // resets the address.
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let addr = c.open_path(root, &format!("main/buffers/{n}/addr"), OREAD).await.unwrap();
        let now = text(c.read(addr.fid, 0, 30).await.unwrap());
        c.clunk(addr.fid).await.unwrap();
        if now == "          0           0 " {
            break;
        }
        assert!(Instant::now() < deadline, "the hung-up client's addr fid was never clunked: {now:?}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

async fn raw_reply(s: &mut tokio::net::UnixStream, frame: &[u8]) -> Option<Msg> {
    s.write_all(frame).await.ok()?;
    let mut buf = Vec::new();
    loop {
        if let Some(n) = check(&buf, 1 << 20).ok()? {
            return parse(&buf[..n]).ok();
        }
        let mut chunk = [0u8; 4096];
        let k = tokio::time::timeout(Duration::from_secs(10), s.read(&mut chunk)).await.ok()?.ok()?;
        if k == 0 {
            return None;
        }
        buf.extend_from_slice(&chunk[..k]);
    }
}

fn frame(tag: u16, body: Fcall) -> Vec<u8> {
    to_bytes(&Msg { tag, body })
}

/// A raw frame: size, type, tag, body bytes.
fn raw(ty: u8, tag: u16, body: &[u8]) -> Vec<u8> {
    let mut out = ((7 + body.len()) as u32).to_le_bytes().to_vec();
    out.push(ty);
    out.extend_from_slice(&tag.to_le_bytes());
    out.extend_from_slice(body);
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn malformed_messages_are_answered_and_disturb_no_one() {
    let d = Daemon::start("malformed");
    let good = d.client().await;
    let groot = good.attach("glenda", "").await.unwrap();
    let mut s = tokio::net::UnixStream::connect(d.socket()).await.unwrap();
    let r = raw_reply(&mut s, &frame(NOTAG, Fcall::Tversion { msize: 8192, version: "9P2000".into() })).await.unwrap();
    assert!(matches!(r.body, Fcall::Rversion { .. }));
    raw_reply(&mut s, &frame(1, Fcall::Tattach { fid: 0, afid: NOFID, uname: "u".into(), aname: "".into() }))
        .await
        .unwrap();
    let many: Vec<String> = (0..17).map(|i| format!("n{i}")).collect();
    let mut walk17 = 0u32.to_le_bytes().to_vec();
    walk17.extend_from_slice(&1u32.to_le_bytes());
    walk17.extend_from_slice(&17u16.to_le_bytes());
    for n in &many {
        walk17.extend_from_slice(&(n.len() as u16).to_le_bytes());
        walk17.extend_from_slice(n.as_bytes());
    }
    // (what, frame, whether it is answered without an error)
    let table: Vec<(&str, Vec<u8>, bool)> = vec![
        ("unknown type", raw(250, 2, &[]), false),
        ("an R-message", raw(121, 3, &[]), false),
        ("more than 16 walk names", raw(110, 4, &walk17), false),
        ("string overruns", raw(104, 5, &[9, 0, 0, 0, 255, 255, 255, 255, 200, 0, b'u']), false),
        ("short Tstat", raw(124, 6, &[1]), false),
        ("count overruns", raw(118, 7, &[0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 255, 255, 0, 0]), false),
        ("unknown fid", frame(8, Fcall::Tstat { fid: 42 }), false),
        ("walk to a file", frame(9, Fcall::Twalk { fid: 0, newfid: 2, wnames: vec!["index".into()] }), true),
        ("walk from a file", frame(10, Fcall::Twalk { fid: 2, newfid: 4, wnames: vec!["x".into()] }), false),
        ("walk to ctl", frame(11, Fcall::Twalk { fid: 0, newfid: 3, wnames: vec!["ctl".into()] }), true),
        ("open of a write-only file for reading", frame(12, Fcall::Topen { fid: 3, mode: OREAD }), false),
        ("read of an unopened fid", frame(13, Fcall::Tread { fid: 3, offset: 0, count: 10 }), false),
        (
            "write of a bad session name",
            frame(14, Fcall::Twrite { fid: 3, offset: 0, data: b"new a/b".to_vec() }),
            false,
        ),
        ("walk of a fid in use", frame(15, Fcall::Twalk { fid: 0, newfid: 2, wnames: vec![] }), false),
    ];
    for (what, bytes, ok) in &table {
        let tag = u16::from_le_bytes([bytes[5], bytes[6]]);
        let r = raw_reply(&mut s, bytes).await.unwrap_or_else(|| panic!("{what}: the connection closed"));
        assert_eq!(r.tag, tag, "{what}");
        assert_eq!(!matches!(r.body, Fcall::Rerror { .. }), *ok, "{what}: {r:?}");
    }
    // Broken framing (a size past msize) closes that connection only.
    assert!(raw_reply(&mut s, &[0, 0, 0, 1, 116, 0, 0]).await.is_none());
    assert!(text(read(&good, groot, "index").await.unwrap()).starts_with("main "));
    let fresh = d.client().await;
    let froot = fresh.attach("glenda", "").await.unwrap();
    assert!(text(read(&fresh, froot, "index").await.unwrap()).starts_with("main "));
}

/// read(5) for directories: whole entries only, offset 0 or where the last
/// read ended, and offset 0 lists the directory again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn directory_reads_are_whole_entries_in_order() {
    let d = Daemon::start("dirreads");
    let c = d.client().await;
    let root = c.attach("glenda", "").await.unwrap();
    let dir = c.open_path(root, "", OREAD).await.unwrap();
    let first = c.read(dir.fid, 0, 150).await.unwrap();
    let got = apex_ninep::codec::parse_stats(&first).expect("whole entries");
    assert!(!got.is_empty() && first.len() <= 150);
    let e = c.read(dir.fid, 7, 150).await.unwrap_err().to_string();
    assert!(e.contains(&format!("continue at {}", first.len())), "{e}");
    assert!(c.read(dir.fid, first.len() as u64, 10).await.unwrap_err().to_string().contains("too small"));
    let mut names: Vec<String> = got.into_iter().map(|s| s.name.into_string()).collect();
    let mut offset = first.len() as u64;
    loop {
        let more = c.read(dir.fid, offset, 150).await.unwrap();
        if more.is_empty() {
            break;
        }
        offset += more.len() as u64;
        names.extend(apex_ninep::codec::parse_stats(&more).unwrap().into_iter().map(|s| s.name.into_string()));
    }
    names.sort();
    assert_eq!(names, ["ctl", "index", "machine", "main", "new", "registry", "services"]);
    // A session made meanwhile shows once the directory is read from 0.
    write(&c, root, "ctl", "new later\n").await.unwrap();
    let again = c.read(dir.fid, 0, 8192).await.unwrap();
    let names: Vec<String> =
        apex_ninep::codec::parse_stats(&again).unwrap().into_iter().map(|s| s.name.into_string()).collect();
    assert!(names.contains(&"later".to_string()), "{names:?}");
}
