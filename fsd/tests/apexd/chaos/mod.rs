//! The attach protocol in miniature and under chaos: the daemon's hub and
//! clients' links joined in memory, with the test deciding when each byte
//! moves and what time it is.
//!
//! Scripted tests walk the leadership paths one by one; the seeded chaos
//! test takes random steps (UIs joining and taking over, zombie leaders,
//! disconnects and resumes, tool proposals and bounded leases, windows
//! made and deleted, compactions as reads go) and checks after every step
//! that at most one replica leads a shard at an epoch, that no replica has
//! a gap or a repeat, and that every acknowledged entry stays in the log;
//! at quiescence every replica's hash equals the daemon's. A failing seed
//! prints itself; `APEX_CHAOS_SEED=N` replays one, `APEX_CHAOS_SEEDS=N`
//! runs more.

mod stalled;
pub(crate) mod world;

use world::*;
#[test]
fn a_ui_leads_types_and_is_acked() {
    let mut w = World::new(1);
    let ui = w.join(AttachmentKind::Ui);
    w.settle();
    assert!(w.link(ui).leads(Shard::Layout), "a lone UI is granted every lease at once");
    let b = window(&mut w, ui, "/tmp/hello");
    // A change to a shard it leads applies here; a tool's goes to the UI.
    let p = Proposal::Insert { buffer: b, version: 0, q0: 0, text: "!".into(), origin: Origin::OtherFile };
    assert!(matches!(w.link(ui).submit(p.clone()), Submitted::Applied(Ok(_))));
    let tool = w.join(AttachmentKind::Tool);
    w.settle();
    assert!(matches!(w.link(tool).submit(p), Submitted::Sent(_)));
    w.settle();
    assert_eq!(text_of(&w, b), "!!", "both landed, the tool's through the UI");
    assert!(w.s.view().state.buffer(b).is_ok(), "the daemon has the UI's window");
    let b = w.type_in(ui, "hello").expect("it leads the buffers");
    w.settle();
    w.check();
    assert!(text_of(&w, b).contains("hello"));
    assert!(w.link(ui).quiet());
    w.quiesce();
}

#[test]
fn a_second_ui_takes_over_cooperatively_and_nothing_is_lost() {
    let mut w = World::new(2);
    let a = w.join(AttachmentKind::Ui);
    w.settle();
    window(&mut w, a, "/tmp/one");
    let b = w.type_in(a, "one").unwrap();
    // Typed but not flushed when the newcomer arrives.
    let newcomer = w.join(AttachmentKind::Ui);
    w.settle();
    assert!(w.link(newcomer).leads(Shard::Layout), "the holder released; the grant followed");
    assert!(w.link(a).fenced(), "the first UI knows it is watching");
    assert!(text_of(&w, b).contains("one"), "the holder flushed before releasing");
    assert!(w.refusals.is_empty(), "nothing was fenced: {:?}", w.refusals);
    w.type_in(newcomer, "two").unwrap();
    w.quiesce();
}

/// A leader stopped with five runes typed into /home/glenda/notes and
/// not sent, reclaimed at the deadline for a newcomer, which types
/// `newcomer` into the buffer first if asked; then the zombie wakes.
/// Returns the world, the zombie, the buffer and the buffers there were.
fn zombie_wakes(seed: u64, newcomer_types: bool) -> (World, usize, BufferId, usize) {
    let mut w = World::new(seed);
    let a = w.join(AttachmentKind::Ui);
    w.settle();
    let b = window(&mut w, a, "/home/glenda/notes");
    w.pause(a, true);
    for _ in 0..5 {
        let node = w.link(a).node_mut().unwrap();
        let op = BufferOp::Splice { q0: 0, q1: 0, text: "z".into(), origin: Origin::Keyboard };
        node.append(Shard::Buffer(b), Op::Buffer(op)).unwrap();
    }
    let newcomer = w.join(AttachmentKind::Ui);
    w.settle();
    assert!(!w.link(newcomer).leads(Shard::Layout), "the holder has not answered yet");
    w.advance(DEADLINE);
    w.settle();
    assert!(w.link(newcomer).leads(Shard::Layout), "reclaimed at the deadline and granted");
    if newcomer_types {
        let node = w.link(newcomer).node_mut().unwrap();
        let op = BufferOp::Splice { q0: 0, q1: 0, text: "newcomer ".into(), origin: Origin::Keyboard };
        node.append(Shard::Buffer(b), Op::Buffer(op)).unwrap();
        w.settle();
    }
    let before = w.s.view().state.buffers.len();
    w.pause(a, false);
    w.settle();
    assert!(w.refusals.iter().any(|r| r.starts_with("fenced:")), "the late tail is fenced: {:?}", w.refusals);
    (w, a, b, before)
}

#[test]
fn a_zombie_leader_is_reclaimed_fenced_and_its_untouched_tail_goes_on_quietly() {
    let (mut w, a, b, before) = zombie_wakes(3, false);
    // Nobody wrote to the buffer after the tail's base: the runes are
    // simply there (proposed to the newcomer, which leads it now).
    let events = w.link(a).events();
    assert!(!events.iter().any(|e| matches!(e, Event::Recovered { .. })), "nothing to recover: {events:?}");
    assert_eq!(text_of(&w, b), "zzzzz", "the tail went on in its own buffer");
    assert_eq!(w.s.view().state.buffers.len(), before, "no +Recovered window");
    w.quiesce();
}

#[test]
fn a_zombie_leader_s_tail_that_another_s_typing_came_after_is_recovered_beside_its_file() {
    let (mut w, a, b, before) = zombie_wakes(5, true);
    let events = w.link(a).events();
    assert!(events.iter().any(|e| matches!(e, Event::Recovered { .. })), "recovered: {events:?}");
    assert_eq!(text_of(&w, b), "newcomer ", "the tail is not mixed into another's text");
    let recovered: Vec<BufferId> = bodies(&w).into_iter().filter(|b| text_of(&w, *b).contains("zzzzz")).collect();
    assert_eq!(recovered.len(), 1, "one +Recovered buffer holds the tail");
    let buf = w.s.view().state.buffer(recovered[0]).unwrap();
    assert_eq!(buf.name, "/home/glenda/notes+Recovered", "named after its file");
    let text = buf.text.to_string();
    assert!(text.contains("#0: insert\n\tzzzzz\n"), "the piece and where it was: {text}");
    assert!(text.contains("To merge"), "how to merge: {text}");
    assert!(buf.dirty, "marked dirty");
    assert!(w.s.view().state.buffers.len() > before);
    let notes = &w.s.view().state.meta.notifications;
    assert!(notes.values().any(|n| n.text.contains("recovered 5 entries")), "{notes:?}");
    w.quiesce();
}

#[test]
fn a_dropped_ui_resumes_with_its_leases_and_unflushed_typing() {
    let mut w = World::new(4);
    let a = w.join(AttachmentKind::Ui);
    w.settle();
    window(&mut w, a, "/tmp/k");
    let b = w.type_in(a, "kept").unwrap();
    w.hangup(a);
    w.advance(GRACE / 2);
    w.reconnect(a);
    w.settle();
    let events = w.link(a).events();
    assert!(!events.iter().any(|e| matches!(e, Event::Error(_))), "resumed: {events:?}");
    assert!(w.link(a).leads(Shard::Buffer(b)), "kept its leases");
    assert!(text_of(&w, b).contains("kept"), "its unflushed typing went on");
    w.quiesce();
}

/// A UI asking for what a cut-off leader holds gets it at once, not at
/// the deadline; the leader coming back within its grace is fenced (its
/// resume refused: it attaches anew), and the typing it had not sent is
/// recovered, as after a deadline.
#[test]
fn leases_of_a_leader_cut_off_go_at_once_to_a_ui_that_asks() {
    let mut w = World::new(9);
    let a = w.join(AttachmentKind::Ui);
    w.settle();
    let b = window(&mut w, a, "/tmp/cut");
    let node = w.link(a).node_mut().unwrap();
    let op = BufferOp::Splice { q0: 0, q1: 0, text: "unsent".into(), origin: Origin::Keyboard };
    node.append(Shard::Buffer(b), Op::Buffer(op)).unwrap();
    w.hangup(a);
    let c = w.join(AttachmentKind::Ui);
    w.settle();
    assert!(w.link(c).leads(Shard::Layout) && w.link(c).leads(Shard::Buffer(b)), "no deadline waited for");
    w.advance(GRACE / 2);
    w.reconnect(a);
    w.settle();
    let events = w.link(a).events();
    assert!(events.iter().any(|e| matches!(e, Event::Error(t) if t.contains("resume of"))), "fenced: {events:?}");
    assert!(bodies(&w).iter().any(|b| text_of(&w, *b).contains("unsent")), "its unsent typing was recovered");
    w.quiesce();
}

/// A stream broken by a fault (a lost read, a change undone) is not a
/// leader gone: its client resumes at once, so a UI asking for its
/// leases meanwhile waits for them as for any holder's.
#[test]
fn a_broken_stream_keeps_its_leases_until_the_deadline() {
    let mut w = World::new(10);
    let a = w.join(AttachmentKind::Ui);
    w.settle();
    let conn = w.clients[a].conn.expect("connected");
    apex_fsd::attach::protocol::broken(&mut w.s, conn, w.now);
    let c = w.join(AttachmentKind::Ui);
    w.pause(a, true);
    w.settle();
    assert!(!w.link(c).leads(Shard::Layout), "the broken one is asked, not taken from");
    w.advance(DEADLINE + 1);
    w.settle();
    assert!(w.link(c).leads(Shard::Layout), "at the deadline");
    // Its client, told the stream broke, attaches again to resume.
    w.pause(a, false);
    w.clients[a].conn = None;
    w.reconnect(a);
    w.quiesce();
}

#[test]
fn a_resume_after_the_grace_is_refused_and_the_client_comes_back_new() {
    let mut w = World::new(5);
    let a = w.join(AttachmentKind::Ui);
    w.settle();
    let first = w.link(a).attachment().unwrap();
    let b = window(&mut w, a, "/tmp/late");
    let node = w.link(a).node_mut().unwrap();
    let op = BufferOp::Splice { q0: 0, q1: 0, text: "late".into(), origin: Origin::Keyboard };
    node.append(Shard::Buffer(b), Op::Buffer(op)).unwrap();
    w.hangup(a);
    w.advance(GRACE + 1);
    assert!(!w.s.view().state.meta.attachments.contains_key(&first), "detached when the grace ran out");
    w.reconnect(a);
    w.settle();
    let events = w.link(a).events();
    assert!(events.iter().any(|e| matches!(e, Event::Error(t) if t.contains("resume of"))), "{events:?}");
    assert_ne!(w.link(a).attachment().unwrap(), first, "a new attachment");
    assert!(bodies(&w).iter().any(|b| text_of(&w, *b).contains("late")), "the unflushed tail was recovered");
    w.quiesce();
}

#[test]
fn tool_proposals_go_to_the_leading_ui_and_follow_a_takeover() {
    let mut w = World::new(6);
    let ui = w.join(AttachmentKind::Ui);
    let tool = w.join(AttachmentKind::Tool);
    w.settle();
    let b = window(&mut w, ui, "/tmp/t");
    let version = w.s.view().state.buffer(b).unwrap().version;
    let p = Proposal::Insert { buffer: b, version, q0: 0, text: "tool ".into(), origin: Origin::OtherFile };
    let id = w.link(tool).propose(p);
    w.settle();
    assert!(text_of(&w, b).starts_with("tool "), "the UI applied it");
    let answered = w.link(tool).events();
    assert!(answered.iter().any(|e| matches!(e, Event::Answer { id: i, result: Ok(_) } if *i == id)), "{answered:?}");
    // A proposal waiting at a zombie holder moves to the next holder.
    w.pause(ui, true);
    let version = w.s.view().state.buffer(b).unwrap().version;
    let p = Proposal::Insert { buffer: b, version, q0: 0, text: "again ".into(), origin: Origin::OtherFile };
    w.link(tool).propose(p);
    w.send(tool);
    w.advance(100);
    let newcomer = w.join(AttachmentKind::Ui);
    w.settle();
    w.advance(DEADLINE);
    w.settle();
    assert!(w.link(newcomer).leads(Shard::Buffer(b)));
    assert!(text_of(&w, b).starts_with("again tool "), "{}", text_of(&w, b));
    w.quiesce();
}

#[test]
fn a_proposal_a_stuck_holder_never_answers_is_applied_by_the_server_at_the_deadline() {
    let mut w = World::new(8);
    let ui = w.join(AttachmentKind::Ui);
    let tool = w.join(AttachmentKind::Tool);
    w.settle();
    let b = window(&mut w, ui, "/tmp/stuck");
    w.settle();
    w.pause(ui, true);
    let version = w.s.view().state.buffer(b).unwrap().version;
    let p = Proposal::Insert { buffer: b, version, q0: 0, text: "tool ".into(), origin: Origin::OtherFile };
    let id = w.link(tool).propose(p);
    w.send(tool);
    w.advance(DEADLINE - 1);
    assert!(!text_of(&w, b).starts_with("tool "), "not before the deadline");
    w.advance(1);
    w.settle();
    assert!(text_of(&w, b).starts_with("tool "), "applied by the view node: {}", text_of(&w, b));
    assert_eq!(w.s.view().log.lease(Shard::Buffer(b)).unwrap().holder, AttachmentId::SERVER, "reclaimed");
    let answered = w.link(tool).events();
    assert!(answered.iter().any(|e| matches!(e, Event::Answer { id: i, result: Ok(_) } if *i == id)), "{answered:?}");
    // The holder wakes: the copy it was sent is stale and dropped.
    w.pause(ui, false);
    w.settle();
    assert_eq!(text_of(&w, b).matches("tool ").count(), 1, "applied once");
    w.quiesce();
}

#[test]
fn a_holder_that_keeps_resuming_without_answering_loses_the_lease_at_the_deadline() {
    // It reads nothing and answers nothing, but hangs up and resumes
    // every half deadline: each resume sends it the proposal again, which
    // must not start its deadline over.
    let mut w = World::new(10);
    let ui = w.join(AttachmentKind::Ui);
    let tool = w.join(AttachmentKind::Tool);
    w.settle();
    let b = window(&mut w, ui, "/tmp/flapping");
    w.settle();
    w.pause(ui, true);
    let version = w.s.view().state.buffer(b).unwrap().version;
    let p = Proposal::Insert { buffer: b, version, q0: 0, text: "tool ".into(), origin: Origin::OtherFile };
    w.link(tool).propose(p);
    w.send(tool);
    for _ in 0..4 {
        w.advance(DEADLINE / 2);
        w.hangup(ui);
        w.reconnect(ui);
        // Its resume goes out; nothing comes in.
        w.pause(ui, false);
        w.send(ui);
        w.pause(ui, true);
    }
    w.advance(1);
    w.settle();
    // (Reclaimed at the deadline; the UI, resuming after, asks for it back.)
    assert!(text_of(&w, b).starts_with("tool "), "applied by the view node: {:?}", text_of(&w, b));
    w.pause(ui, false);
    w.settle();
    assert_eq!(text_of(&w, b).matches("tool ").count(), 1, "applied once");
    w.quiesce();
}

#[test]
fn a_holder_away_longer_than_the_deadline_resumes_and_answers_what_it_was_sent() {
    // Its connection drops for two deadlines (inside its grace): the time
    // it was away is not held against it; resumed, it answers and keeps
    // its lease.
    let mut w = World::new(11);
    let ui = w.join(AttachmentKind::Ui);
    let tool = w.join(AttachmentKind::Tool);
    w.settle();
    let b = window(&mut w, ui, "/tmp/away");
    w.settle();
    let holder = w.s.view().log.lease(Shard::Buffer(b)).unwrap().holder;
    w.pause(ui, true);
    let version = w.s.view().state.buffer(b).unwrap().version;
    let p = Proposal::Insert { buffer: b, version, q0: 0, text: "tool ".into(), origin: Origin::OtherFile };
    w.link(tool).propose(p);
    w.send(tool);
    w.advance(DEADLINE / 4);
    w.hangup(ui);
    w.advance(2 * DEADLINE);
    w.reconnect(ui);
    w.pause(ui, false);
    w.send(ui);
    w.advance(1);
    w.settle();
    assert_eq!(w.s.view().log.lease(Shard::Buffer(b)).unwrap().holder, holder, "it kept its lease");
    assert!(text_of(&w, b).starts_with("tool "), "it answered: {:?}", text_of(&w, b));
    w.quiesce();
}

#[test]
fn a_watching_ui_s_typing_while_its_connection_is_down_lands_when_it_is_back() {
    // A UI that leads nothing (another attached after it and took the
    // lead) types by proposals. Typed while its connection is down, they
    // are not lost: they go after its Hello, once, whether it resumes or
    // is attached anew.
    for grace_passes in [false, true] {
        let mut w = World::new(13);
        let watcher = w.join(AttachmentKind::Ui);
        w.settle();
        let b = window(&mut w, watcher, "/tmp/watched");
        w.settle();
        let leader = w.join(AttachmentKind::Ui);
        w.settle();
        assert!(w.link(leader).leads(Shard::Buffer(b)), "the last UI to attach leads");
        assert!(!w.link(watcher).leads(Shard::Buffer(b)), "the first watches");
        w.hangup(watcher);
        let version = w.link(watcher).node().unwrap().state.buffer(b).unwrap().version;
        let p = Proposal::Insert { buffer: b, version, q0: 0, text: "typed away ".into(), origin: Origin::Keyboard };
        w.link(watcher).propose(p);
        if grace_passes {
            w.advance(10 * DEADLINE);
        }
        w.reconnect(watcher);
        w.settle();
        assert_eq!(text_of(&w, b).matches("typed away ").count(), 1, "grace passed: {grace_passes}");
        w.quiesce();
    }
}

#[test]
fn a_flushed_proposal_its_holder_applied_before_hanging_up_is_answered_as_applied() {
    // flush(5): the write's reply comes before the Rflush, or the write
    // never happens. The holder applied it, then its connection dropped
    // before what it made went out; the writer flushed meanwhile. When
    // the holder resumes and sends what it made, the write has happened:
    // it must not have been answered "nothing changed".
    let mut w = World::new(12);
    let ui = w.join(AttachmentKind::Ui);
    w.settle();
    let b = window(&mut w, ui, "/tmp/flushed");
    w.settle();
    let version = w.s.view().state.buffer(b).unwrap().version;
    let p = Proposal::Insert { buffer: b, version, q0: 0, text: "tool ".into(), origin: Origin::OtherFile };
    let Written::Wait(id, mut outcome) = apex_fsd::attach::route::submit(&mut w.s, "a tool's write", p, None, w.now)
    else {
        panic!("a proposal is answered on its channel")
    };
    w.recv(ui);
    w.hangup(ui);
    apex_fsd::attach::route::withdraw(&mut w.s, id, w.now);
    w.reconnect(ui);
    w.settle();
    let landed = text_of(&w, b).matches("tool ").count();
    let outcome = outcome.try_recv().expect("answered by now");
    assert_eq!((landed, outcome.is_ok()), (1, true), "applied once and said so: {outcome:?}");
    w.quiesce();
}

#[test]
fn tables_do_not_grow_with_the_proposals_that_went_through() {
    let mut w = World::new(9);
    let ui = w.join(AttachmentKind::Ui);
    let tool = w.join(AttachmentKind::Tool);
    w.settle();
    let mut sizes = Vec::new();
    for round in [10_000, 100_000] {
        for i in 0..round {
            w.link(tool).propose(Proposal::Snarf { text: format!("{round}.{i}") });
            if i % 1000 == 999 {
                w.send(tool);
                w.settle();
            }
        }
        w.settle();
        assert_eq!(w.s.view().state.layout.snarf, format!("{round}.{}", round - 1), "every proposal went through");
        sizes.push((w.s.hub().sizes(), w.link(ui).acted_len(), w.link(tool).events().len()));
    }
    assert_eq!(sizes[0].0, sizes[1].0, "the hub's tables: {sizes:?}");
    assert!(sizes.iter().all(|(_, acted, _)| *acted <= 1000), "the leader remembers only what is in flight: {sizes:?}");
    assert_eq!(sizes[0].0[1], 0, "nothing pending");
    w.quiesce();
}

#[test]
fn refusals_cross_the_wire_typed() {
    use apex_core::Reject;
    use apex_fsd::attach::wire::Refusal;
    let mut w = World::new(10);
    let ui = w.join(AttachmentKind::Ui);
    let tool = w.join(AttachmentKind::Tool);
    w.settle();
    let b = window(&mut w, ui, "/tmp/typed");
    w.settle();
    let version = w.s.view().state.buffer(b).unwrap().version;
    // Routed to the leading UI, refused by its core: the tool sees why by
    // variant, and the text is core's.
    let p = Proposal::Insert { buffer: b, version, q0: 99, text: "x".into(), origin: Origin::OtherFile };
    let id = w.link(tool).propose(p);
    w.settle();
    let events = w.link(tool).events();
    let refused = events.iter().find_map(|e| match e {
        Event::Answer { id: i, result: Err(r) } if *i == id => Some(r.clone()),
        _ => None,
    });
    let Some(Refusal::Rejected(Reject::Range { q0: 99, .. })) = &refused else { panic!("{events:?}") };
    assert!(refused.unwrap().to_string().contains("99"), "the words are core's");
    w.quiesce();
}

#[test]
fn a_tool_holds_a_bounded_lease_and_it_returns_to_the_ui() {
    let mut w = World::new(7);
    let ui = w.join(AttachmentKind::Ui);
    let tool = w.join(AttachmentKind::Tool);
    w.settle();
    let b = window(&mut w, ui, "/tmp/fmt");
    w.link(tool).ask_lease(b, 1_000);
    w.settle();
    assert!(w.link(tool).leads(Shard::Buffer(b)), "the UI released it to the tool");
    assert!(!w.link(ui).leads(Shard::Buffer(b)));
    let node = w.link(tool).node_mut().unwrap();
    let op = BufferOp::Splice { q0: 0, q1: 0, text: "formatted".into(), origin: Origin::OtherFile };
    node.append(Shard::Buffer(b), Op::Buffer(op)).unwrap();
    w.settle();
    assert!(text_of(&w, b).starts_with("formatted"));
    w.advance(1_000);
    w.settle();
    assert!(w.link(ui).leads(Shard::Buffer(b)), "back to the UI at expiry");
    // A late append after expiry is fenced.
    let node = w.link(tool).node_mut().unwrap();
    let stale = node.log.last(Shard::Buffer(b));
    let late = Entry {
        seq: stale + 1,
        attachment: node.attachment,
        epoch: 2,
        op: Op::Buffer(BufferOp::Splice { q0: 0, q1: 0, text: "late".into(), origin: Origin::OtherFile }),
    };
    let tool_conn = w.clients[tool].conn.unwrap();
    let frame = apex_fsd::attach::wire::frame(&ClientMsg::Append {
        shard: Shard::Buffer(b),
        entries: vec![late],
        generation: 1,
        answers: vec![],
    });
    // Matched by variant: the authority log fenced it, on that shard.
    let err = protocol::write(&mut w.s, tool_conn, &frame, w.now).unwrap_err();
    assert!(
        matches!(err, AttachError::Rejected(apex_core::Reject::Fenced { shard, .. }) if shard == Shard::Buffer(b)),
        "{err:?}"
    );
    assert!(err.to_string().starts_with("fenced:"), "the Rerror's text is as it was: {err}");
    assert!(!text_of(&w, b).contains("late"));
    w.quiesce();
}

#[test]
fn a_refused_resume_is_said_after_the_welcome_it_came_with() {
    // The client shows the error in the replica the Welcome makes; said
    // before it, it went into the replica being replaced.
    let mut w = World::new(8);
    let conn = w.s.hub_mut().open();
    let resume = apex_fsd::attach::wire::Resume { attachment: AttachmentId(1 << 20), token: 7 };
    let hello = ClientMsg::Hello { kind: AttachmentKind::Ui, name: "late".into(), resume: Some(resume) };
    protocol::write(&mut w.s, conn, &apex_fsd::attach::wire::frame(&hello), w.now).unwrap();
    let mut frames = Frames::default();
    while let Some(bytes) = feed::read(&mut w.s, conn, 1 << 20).unwrap() {
        frames.push(&bytes);
    }
    let mut msgs = Vec::new();
    while let Some(m) = frames.next_msg::<apex_fsd::attach::wire::ServerMsg>().unwrap() {
        msgs.push(m);
    }
    use apex_fsd::attach::wire::ServerMsg;
    assert!(matches!(msgs.first(), Some(ServerMsg::Welcome { .. })), "{msgs:?}");
    assert!(
        matches!(msgs.get(1), Some(ServerMsg::Error { text }) if text.contains("refused") && text.contains("attached anew")),
        "{msgs:?}"
    );
}

#[test]
fn bad_frames_are_refused_and_change_nothing() {
    let mut w = World::new(8);
    let ui = w.join(AttachmentKind::Ui);
    w.settle();
    let conn = w.clients[ui].conn.unwrap();
    let h = w.s.view().state.hash();
    let two =
        [apex_fsd::attach::wire::frame(&ClientMsg::Resync), apex_fsd::attach::wire::frame(&ClientMsg::Resync)].concat();
    let e = protocol::write(&mut w.s, conn, &two, w.now).unwrap_err();
    assert_eq!(e, AttachError::TrailingBytes(two.len() / 2));
    assert!(e.to_string().contains("at most one frame"), "{e}");
    let e = protocol::write(&mut w.s, conn, &[2, 0, 0, 0, 0xff, 0xff], w.now).unwrap_err();
    assert!(matches!(e, AttachError::Frame(_)) && e.to_string().starts_with("attach: bad frame"), "{e}");
    let hello = ClientMsg::Hello { kind: AttachmentKind::Ui, name: "again".into(), resume: None };
    let e = protocol::write(&mut w.s, conn, &apex_fsd::attach::wire::frame(&hello), w.now).unwrap_err();
    assert!(matches!(e, AttachError::AlreadyAttached(_)) && e.to_string().contains("Hello comes once"), "{e}");
    let meta = ClientMsg::Append { shard: Shard::Meta, entries: vec![], generation: 1, answers: vec![] };
    let e = protocol::write(&mut w.s, conn, &apex_fsd::attach::wire::frame(&meta), w.now).unwrap_err();
    assert_eq!(e, AttachError::MetalogIsTheDaemons);
    let other = ClientMsg::CreateShard { shard: Shard::Buffer(BufferId(5 << 40 | 1)) };
    let e = protocol::write(&mut w.s, conn, &apex_fsd::attach::wire::frame(&other), w.now).unwrap_err();
    assert_eq!(e, AttachError::NotItsShard(Shard::Buffer(BufferId(5 << 40 | 1))));
    assert!(e.to_string().contains("own range"), "{e}");
    assert_eq!(w.s.view().state.hash(), h, "nothing changed");
    let fresh = w.s.hub_mut().open();
    let e = protocol::write(&mut w.s, fresh, &apex_fsd::attach::wire::frame(&ClientMsg::Resync), w.now).unwrap_err();
    assert_eq!(e, AttachError::NotHello);
    // The good client goes on undisturbed.
    w.type_in(ui, "fine").unwrap();
    w.quiesce();
}

/// One random run.
fn chaos(seed: u64, steps: usize) {
    let mut w = World::new(seed);
    w.join(AttachmentKind::Ui);
    w.settle();
    for step in 0..steps {
        let n = w.clients.len();
        let i = w.rng.below(n as u64) as usize;
        let live = !w.clients[i].gone;
        let roll = w.rng.below(100);
        if std::env::var("APEX_CHAOS_TRACE").is_ok() {
            let a = w.clients[i].link.attachment();
            eprintln!(
                "step {step}: client {i} ({a:?}) roll {roll} paused {} conn {:?}",
                w.clients[i].paused, w.clients[i].conn
            );
        }
        match roll {
            0..=29 if live => {
                let text = ["a", "bc", "\n", "é", "xyz"][w.rng.below(5) as usize];
                w.type_in(i, text);
            }
            30..=49 if live => {
                w.send(i);
            }
            50..=59 if live => {
                w.recv(i);
            }
            60..=64 if live => {
                // Part of what is there: a frame may wait in the daemon.
                let reads = 1 + w.rng.below(2) as usize;
                w.recv_some(i, reads);
            }
            65..=67 if n < 6 => {
                let kind = if w.rng.chance(50) { AttachmentKind::Ui } else { AttachmentKind::Tool };
                w.join(kind);
            }
            68..=70 => {
                let p = !w.clients[i].paused;
                w.pause(i, p);
            }
            71..=74 => {
                let ms = w.rng.below(DEADLINE + 500);
                w.advance(ms);
            }
            75..=76 => w.hangup(i),
            77..=79 => w.reconnect(i),
            80 if n > 2 => w.leave(i),
            81..=85 if live => {
                // A change from whoever this is: applied if it leads the
                // buffer, proposed to the holder if not.
                let bs = bodies(&w);
                if w.rng.chance(25) {
                    // A window asked for: routed to the layout's holder,
                    // who may stall after making it.
                    let p =
                        Proposal::CreateWindow { body: None, column: None, name: format!("/tmp/p{step}"), near: None };
                    w.link(i).propose(p);
                } else if !bs.is_empty() {
                    let b = bs[w.rng.below(bs.len() as u64) as usize];
                    let version = w.s.view().state.buffer(b).unwrap().version;
                    // A text of its own, to check it lands at most once.
                    let text = format!("[{step}]");
                    w.markers.push(text.clone());
                    let p = Proposal::Insert { buffer: b, version, q0: 0, text, origin: Origin::OtherFile };
                    match w.rng.chance(50) {
                        true => drop(w.link(i).submit(p)),
                        false => drop(w.link(i).propose(p)),
                    }
                }
            }
            86..=87 if live => {
                let bs = bodies(&w);
                if !bs.is_empty() {
                    let b = bs[w.rng.below(bs.len() as u64) as usize];
                    let ttl = 200 + w.rng.below(3_000);
                    w.link(i).ask_lease(b, ttl);
                }
            }
            88..=91 if live && w.link(i).leads(Shard::Layout) => {
                let node = w.link(i).node_mut().unwrap();
                let name = format!("/tmp/w{step}");
                make::new_window(node, None, None, &name).expect("a layout leader makes windows");
            }
            92..=93 if live => {
                let link = w.link(i);
                if link.leads(Shard::Layout) {
                    let node = link.node().unwrap();
                    let wins: Vec<_> = node.state.windows.iter().map(|(id, win)| (*id, win.tag, win.body)).collect();
                    // A window whose placement was in a fenced layout tail
                    // exists without a place; only placed ones are deleted.
                    let doomed = wins.into_iter().find(|(id, tag, body)| {
                        node.state.layout.find(*id).is_some()
                            && link.leads(Shard::Window(*id))
                            && link.leads(Shard::Buffer(*tag))
                            && link.leads(Shard::Buffer(*body))
                    });
                    if let Some((id, ..)) = doomed {
                        make::delete_window(link.node_mut().unwrap(), id).expect("its leader deletes a window");
                    }
                }
            }
            _ => {}
        }
        if std::env::var("APEX_CHAOS_TRACE").is_ok() {
            for (k, c) in w.clients.iter_mut().enumerate() {
                for e in c.link.events() {
                    eprintln!("  client {k}: {e:?}");
                }
            }
        }
        w.check();
    }
    w.quiesce();
}

#[test]
fn chaos_seeds() {
    let seeds: Vec<u64> = match std::env::var("APEX_CHAOS_SEED") {
        Ok(s) => vec![s.parse().expect("APEX_CHAOS_SEED is a number")],
        Err(_) => {
            let n = std::env::var("APEX_CHAOS_SEEDS").ok().and_then(|s| s.parse().ok()).unwrap_or(1000);
            (1..=n).collect()
        }
    };
    for seed in seeds {
        let run = std::panic::catch_unwind(|| chaos(seed, 300));
        if let Err(e) = run {
            let why = e
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| e.downcast_ref::<&str>().map(|s| s.to_string()))
                .unwrap_or_default();
            panic!("chaos seed {seed} failed: {why}\nreplay with APEX_CHAOS_SEED={seed} cargo test -p apex-fsd --test apexd chaos_seeds");
        }
    }
}
