//! A big Welcome encoded in parts while it is read, with the hub and the
//! encoder joined in memory (the test hands each part over): the bytes
//! read are those of the Welcome encoded whole, what comes meanwhile
//! follows it, and an encoder that stops short breaks its connection
//! alone; bytes a flushed read took are put back, and read next, in order.

use super::chaos::world::{window, World};
use apex_core::{AttachmentId, AttachmentKind, BufferOp, Op, Origin, Shard};
use apex_fsd::attach::error::AttachError;
use apex_fsd::attach::hub::ConnId;
use apex_fsd::attach::wire::{ClientMsg, Frames, ServerMsg};
use apex_fsd::attach::{feed, protocol};

/// Reads `conn` in reads of `count` until it has nothing more, its
/// Welcome encoded in parts of `part_size` that are handed over one at a
/// time, each only when a read finds nothing more; `meanwhile` runs once
/// the encoding has begun. `ended` false: the encoder stops without
/// saying it ended, after its first part. Every `put_back`th read (if not
/// 0) is put back, as a flushed read's bytes are.
fn read_while_encoded(
    w: &mut World,
    conn: ConnId,
    (part_size, count): (usize, u32),
    (ended, put_back): (bool, usize),
    mut meanwhile: impl FnMut(&mut World),
) -> Result<Vec<u8>, AttachError> {
    let mut got = Vec::new();
    let (mut made, mut encoder) = (Vec::new().into_iter(), None);
    let mut reads = 0;
    loop {
        match feed::read_deferred(&mut w.s, conn, count)? {
            feed::Readable::Bytes(bytes) => {
                assert!(bytes.len() <= count as usize);
                reads += 1;
                match put_back > 0 && reads % put_back == 0 {
                    true => feed::unread(&mut w.s, conn, bytes),
                    false => got.extend(bytes),
                }
            }
            feed::Readable::Welcome(job) => {
                let (tx, rx) = std::sync::mpsc::channel();
                feed::in_parts(&mut w.s, conn, rx);
                let mut parts = Vec::new();
                assert!(job.frame_in_parts(part_size, |p| {
                    parts.push(p);
                    true
                }));
                if !ended {
                    parts.truncate(1);
                }
                (made, encoder) = (parts.into_iter(), Some(tx));
                meanwhile(w);
            }
            feed::Readable::Nothing => match (made.next(), encoder.take()) {
                (Some(part), Some(tx)) => {
                    tx.send(Some(part)).unwrap();
                    encoder = Some(tx);
                }
                (None, Some(tx)) if ended => tx.send(None).unwrap(),
                (None, Some(_)) => {}
                (_, None) => return Ok(got),
            },
        }
    }
}

/// A connection that said Hello as `name`, asking to resume an
/// attachment the daemon never had when `resume`.
fn hello(w: &mut World, name: &str, resume: bool) -> ConnId {
    let conn = w.s.hub_mut().open();
    let resume = resume.then_some(apex_fsd::attach::wire::Resume { attachment: AttachmentId(1 << 20), token: 7 });
    let hello = ClientMsg::Hello { kind: AttachmentKind::Ui, name: name.into(), resume };
    protocol::write(&mut w.s, conn, &apex_fsd::attach::wire::frame(&hello), w.now).unwrap();
    conn
}

/// What a connection that asked to resume an unknown attachment reads, its
/// Welcome encoded whole: the Welcome and the error framed after it.
fn read_whole() -> Vec<u8> {
    let mut w = World::new(8);
    let conn = hello(&mut w, "late", true);
    let mut got = Vec::new();
    while let Some(bytes) = feed::read(&mut w.s, conn, 1 << 20).unwrap() {
        got.extend(bytes);
    }
    got
}

/// The first bytes a read of `conn` gives, its Welcome encoded whole.
fn read_first(w: &mut World, conn: ConnId, count: u32) -> Vec<u8> {
    loop {
        match feed::read_deferred(&mut w.s, conn, count).unwrap() {
            feed::Readable::Bytes(b) => return b,
            feed::Readable::Welcome(job) => feed::welcomed(&mut w.s, conn, job.frame()),
            feed::Readable::Nothing => panic!("a Welcome to read"),
        }
    }
}

/// The messages framed in `bytes`.
fn messages(bytes: &[u8]) -> Vec<ServerMsg> {
    let mut frames = Frames::default();
    frames.push(bytes);
    std::iter::from_fn(|| frames.next_msg::<ServerMsg>().unwrap()).collect()
}

#[test]
fn a_welcome_read_while_it_is_encoded_in_parts_reads_as_if_encoded_whole() {
    // A Welcome and the error framed after it, read with the Welcome
    // encoded whole, and read while it is encoded in parts, in reads
    // smaller and larger than a part; then with some reads put back, as a
    // flushed read's are (before, inside and after the Welcome, and a
    // read that took all there was): they come again next.
    let whole = read_whole();
    assert!(whole.len() > 400, "{} bytes", whole.len());
    for sizes in [(100, 70), (100, 500), (16, 1 << 20), (1 << 20, 33)] {
        let mut w = World::new(8);
        let conn = hello(&mut w, "late", true);
        assert!(!feed::take_parts_read(&mut w.s, conn), "no Welcome read in parts yet");
        let got = read_while_encoded(&mut w, conn, sizes, (true, 0), |_| {}).unwrap();
        assert!(got == whole, "parts and reads of {sizes:?}");
        // Said once, for the memory the parts held to go back.
        assert!(feed::take_parts_read(&mut w.s, conn), "its parts all read");
        assert!(!feed::take_parts_read(&mut w.s, conn), "said once");
    }
    for (sizes, put_back) in [((100, 50), 3), ((100, 300), 2), ((100, 1 << 20), 2), ((16, 1 << 20), 5)] {
        let mut w = World::new(8);
        let conn = hello(&mut w, "late", true);
        let got = read_while_encoded(&mut w, conn, sizes, (true, put_back), |_| {}).unwrap();
        assert!(got == whole, "parts and reads of {sizes:?}, every {put_back}th put back");
    }
}

#[test]
fn what_comes_while_a_welcome_is_encoded_follows_it() {
    // Nothing is framed after the Welcome when it is queued; a UI types
    // while it is encoded, and the connection reads those entries once the
    // Welcome is read.
    let mut w = World::new(9);
    let ui = w.join(AttachmentKind::Ui);
    w.settle();
    let b = window(&mut w, ui, "/tmp/meanwhile");
    let conn = hello(&mut w, "reader", false);
    let got = read_while_encoded(&mut w, conn, (64, 1 << 20), (true, 0), |w| {
        let node = w.link(ui).node_mut().unwrap();
        let op = BufferOp::Splice { q0: 0, q1: 0, text: "meanwhile".into(), origin: Origin::Keyboard };
        node.append(Shard::Buffer(b), Op::Buffer(op)).unwrap();
        w.send(ui);
    })
    .unwrap();
    let msgs = messages(&got);
    assert!(matches!(msgs.first(), Some(ServerMsg::Welcome { .. })), "{msgs:?}");
    let typed = msgs.iter().any(|m| {
        matches!(m, ServerMsg::Entries { shard, entries } if *shard == Shard::Buffer(b)
            && entries.iter().any(|e| matches!(&e.op, Op::Buffer(BufferOp::Splice { text, .. }) if text == "meanwhile")))
    });
    assert!(typed, "the typing follows the Welcome: {msgs:?}");
}

#[test]
fn a_welcome_whose_encoder_stopped_short_breaks_its_connection_alone() {
    let mut w = World::new(10);
    let ui = w.join(AttachmentKind::Ui);
    w.settle();
    let conn = hello(&mut w, "broken", false);
    let err = read_while_encoded(&mut w, conn, (64, 1 << 20), (false, 0), |_| {}).unwrap_err();
    assert_eq!(err, AttachError::WelcomeUnfinished);
    assert!(err.to_string().contains("open attach again"), "{err}");
    // Every later read says so too; other connections go on.
    assert_eq!(feed::read_deferred(&mut w.s, conn, 1 << 20).unwrap_err(), AttachError::WelcomeUnfinished);
    window(&mut w, ui, "/tmp/still");
    w.check();
}

#[test]
fn a_read_that_holds_bytes_goes_first_and_its_put_back_comes_next() {
    // A read takes bytes and holds them (waiting for the log to settle);
    // another read of the connection waits; the first is flushed and puts
    // them back: the other reads them, in order.
    let mut w = World::new(8);
    let conn = hello(&mut w, "late", true);
    let whole = read_whole();
    let first = read_first(&mut w, conn, 100);
    let held = feed::hold(&mut w.s, conn).unwrap();
    assert!(matches!(feed::read_deferred(&mut w.s, conn, 100).unwrap(), feed::Readable::Nothing));
    feed::unread(&mut w.s, conn, first);
    assert!(held.release(), "the waiting read is woken");
    let mut got = Vec::new();
    while let feed::Readable::Bytes(b) = feed::read_deferred(&mut w.s, conn, 100).unwrap() {
        got.extend(b);
    }
    assert!(got == whole, "read in order after the put-back");
}

#[test]
fn a_welcome_that_could_not_be_encoded_whole_breaks_its_connection_alone() {
    // A reader's encoding of a small Welcome failed (it panicked): the
    // reads that wait for its frames fail instead of waiting for ever.
    let mut w = World::new(12);
    let ui = w.join(AttachmentKind::Ui);
    w.settle();
    let conn = hello(&mut w, "unencoded", false);
    let Ok(feed::Readable::Welcome(_job)) = feed::read_deferred(&mut w.s, conn, 1 << 20) else {
        panic!("a Welcome to encode")
    };
    assert!(matches!(feed::read_deferred(&mut w.s, conn, 1 << 20).unwrap(), feed::Readable::Nothing));
    feed::unfinished(&mut w.s, conn);
    assert_eq!(feed::read_deferred(&mut w.s, conn, 1 << 20).unwrap_err(), AttachError::WelcomeUnfinished);
    window(&mut w, ui, "/tmp/still");
    w.check();
}

#[test]
fn a_read_that_lost_the_bytes_it_held_breaks_its_connection_which_resumes_anew() {
    // A read that took bytes panicked: neither answered with them nor put
    // back, they leave a gap, so every later read of the connection fails
    // rather than go on past it. The connection is then as if hung up: it
    // takes nothing more, holds nothing back, and its client resumes on a
    // new one, as the error says to, even after closing the broken one.
    use apex_fsd::attach::wire::Resume;
    let mut w = World::new(13);
    let ui = w.join(AttachmentKind::Ui);
    w.settle();
    let conn = hello(&mut w, "gap", false);
    let Some(ServerMsg::Welcome { attachment, token, .. }) = messages(&read_first(&mut w, conn, 1 << 20)).pop() else {
        panic!("the Welcome, all that is read")
    };
    let held = feed::hold(&mut w.s, conn).unwrap();
    held.break_off();
    let err = feed::read_deferred(&mut w.s, conn, 100).unwrap_err();
    assert_eq!(err, AttachError::StreamBroken);
    assert!(err.breaks_stream() && err.to_string().contains("open attach again"), "{err}");
    protocol::broken(&mut w.s, conn, w.now);
    // The broken fid takes nothing more (a Resync's Welcome would bring
    // it back as connected), and closing it first spoils no resume.
    let resync = apex_fsd::attach::wire::frame(&ClientMsg::Resync);
    assert_eq!(protocol::write(&mut w.s, conn, &resync, w.now).unwrap_err(), AttachError::StreamBroken);
    protocol::clunk(&mut w.s, conn, w.now);
    // What the UI writes now is not held for the broken connection.
    let b = window(&mut w, ui, "/tmp/still");
    for _ in 0..3 {
        w.type_in(ui, "typed while the reader is away\n");
    }
    w.settle();
    assert!(w.s.view().log.shard(Shard::Buffer(b)).unwrap().base > 0, "compacted past the broken connection");
    // A new connection resumes the attachment.
    let again = w.s.hub_mut().open();
    let hello =
        ClientMsg::Hello { kind: AttachmentKind::Ui, name: "gap".into(), resume: Some(Resume { attachment, token }) };
    protocol::write(&mut w.s, again, &apex_fsd::attach::wire::frame(&hello), w.now).unwrap();
    let mut got = Vec::new();
    while let Some(bytes) = feed::read(&mut w.s, again, 1 << 20).unwrap() {
        got.extend(bytes);
    }
    let msgs = messages(&got);
    assert!(matches!(msgs.first(), Some(ServerMsg::Welcome { attachment: a, .. }) if *a == attachment), "{msgs:?}");
    assert!(!msgs.iter().any(|m| matches!(m, ServerMsg::Error { .. })), "resumed, not refused: {msgs:?}");
    assert_eq!(feed::read_deferred(&mut w.s, conn, 100).unwrap_err(), AttachError::ConnectionGone);
    w.check();
}
