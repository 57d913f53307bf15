//! `Link`'s own tests: framing, proposals too big to send, Welcomes.

use super::*;

/// A proposal a link has to send is handed out unframed, to be framed
/// off its lock (appends are framed from the log, under it); the sizes
/// it reports are the frames'.
#[test]
fn messages_are_framed_by_whoever_takes_them() {
    let mut link = Link::new(AttachmentKind::Ui, "ui");
    let hello = frame(&ClientMsg::Hello { kind: AttachmentKind::Ui, name: "ui".into(), resume: None });
    link.propose(Proposal::Snarf { text: "s".repeat(crate::wire::FRAME_MAX) });
    let sizes = link.waiting_frames();
    let out = link.take_outgoing();
    assert!(out.iter().all(|(o, _)| matches!(o, Outgoing::Message(_))), "nothing framed under the link");
    let frames: Vec<Vec<u8>> = out.into_iter().map(|(o, _)| o.into_frames()).collect();
    assert_eq!(frames[0], hello);
    assert_eq!(sizes, frames.iter().map(Vec::len).collect::<Vec<_>>());
}

/// A proposal more than one message carries is answered here, with
/// why, and not sent; a long snarf goes as several proposals, each a
/// message under the daemon's limit.
#[test]
fn a_proposal_too_big_to_send_is_refused_here_and_a_long_snarf_goes_in_pieces() {
    let mut link = Link::new(AttachmentKind::Ui, "ui");
    link.take_frames();
    let text = "x".repeat(crate::wire::CLIENT_MESSAGE_MAX + 10);
    let buffer = BufferId(7);
    let id = link.propose(Proposal::Insert { buffer, version: 0, q0: 0, text, origin: Origin::Keyboard });
    assert!(link.take_frames().is_empty(), "nothing sent");
    match link.events().as_slice() {
        [Event::Answer { id: got, result: Err(e) }] => {
            assert_eq!(*got, id);
            assert!(e.to_string().contains("more than one proposal carries"), "{e}");
        }
        other => panic!("{other:?}"),
    }
    let snarf = "s".repeat(3 * apex_core::op::SPLICE_MAX + 5);
    link.propose(Proposal::Snarf { text: snarf.clone() });
    let frames = link.take_frames();
    assert_eq!(frames.len(), 4);
    let mut got = String::new();
    for (f, _) in &frames {
        assert!(f.len() <= crate::wire::CLIENT_MESSAGE_MAX + 4);
        let mut fr = Frames::from_a_client();
        fr.push(f);
        match fr.next_msg::<ClientMsg>().unwrap() {
            Some(ClientMsg::Propose {
                proposal: Proposal::Snarf { text } | Proposal::SnarfMore { text, .. }, ..
            }) => got += &text,
            other => panic!("{other:?}"),
        }
    }
    assert!(got == snarf, "the pieces make the snarf");
}

#[test]
fn a_welcome_is_read_in_place_and_nothing_else_is_taken_for_one() {
    let snapshot: Vec<u8> = (0..=255u8).cycle().take(5000).collect();
    let welcome = ServerMsg::Welcome { attachment: AttachmentId(4), token: 77, snapshot: snapshot.clone() };
    let bytes = postcard::to_allocvec(&welcome).unwrap();
    let got = postcard::from_bytes::<WelcomeIn>(&bytes).unwrap();
    assert_eq!(got, WelcomeIn::Welcome { attachment: AttachmentId(4), token: 77, snapshot: &snapshot });
    for other in [ServerMsg::Acked { shard: Shard::Layout, seq: 3 }, ServerMsg::Error { text: "no".into() }] {
        assert!(postcard::from_bytes::<WelcomeIn>(&postcard::to_allocvec(&other).unwrap()).is_err(), "{other:?}");
    }
}

/// The link counts the Welcomes of its connection as the daemon
/// counts those it sent on it, so an append made after the daemon's
/// latest is told from one made before it, after a reconnect too (a
/// count over the link's life would match the daemon's by chance).
#[test]
fn welcomes_are_counted_per_connection_as_the_daemon_counts_them() {
    let mut link = Link::new(AttachmentKind::Ui, "ui");
    let welcome = || {
        let snapshot = apex_core::State::new().to_snapshot();
        frame(&ServerMsg::Welcome { attachment: AttachmentId(1), token: 9, snapshot })
    };
    link.receive(welcome()).unwrap();
    link.receive(welcome()).unwrap();
    assert_eq!(link.generation, 2, "a second Welcome on one connection");
    link.reconnect();
    link.receive(welcome()).unwrap();
    assert_eq!(link.generation, 1, "the new connection's first, as the daemon's count of it");
}

/// A proposal whose answer is awaited gets it through `take_answer`, never
/// among the events another thread reads; one refused before it was sent
/// too; one no longer awaited becomes an event again.
#[test]
fn an_awaited_answer_is_kept_for_its_waiter() {
    use apex_core::propose::{Applied, Created};
    let mut link = Link::new(AttachmentKind::Ui, "ui");
    link.take_frames();
    let insert =
        |text: String| Proposal::Insert { buffer: BufferId(7), version: 0, q0: 0, text, origin: Origin::Keyboard };
    let Submitted::Sent(id) = link.submit_awaited(insert("x".into())) else { panic!("not led here: sent") };
    let other = link.propose(insert("y".into()));
    let done = || Ok(Applied { entries: Vec::new(), created: Created::Nothing });
    link.on(ServerMsg::Answer { id, result: done() });
    link.on(ServerMsg::Answer { id: other, result: done() });
    assert!(matches!(link.events().as_slice(), [Event::Answer { id: got, .. }] if *got == other));
    assert!(link.take_answer(id).is_some_and(|r| r.is_ok()));
    assert_eq!(link.take_answer(id), None, "taken once");
    let big = "x".repeat(crate::wire::CLIENT_MESSAGE_MAX + 10);
    let Submitted::Sent(refused) = link.submit_awaited(insert(big)) else { panic!("sent") };
    assert!(link.events().is_empty());
    assert!(link.take_answer(refused).is_some_and(|r| r.is_err()));
    let Submitted::Sent(late) = link.submit_awaited(insert("z".into())) else { panic!("sent") };
    link.forget_answer(late);
    link.on(ServerMsg::Answer { id: late, result: done() });
    assert!(matches!(link.events().as_slice(), [Event::Answer { id: got, .. }] if *got == late));
}
