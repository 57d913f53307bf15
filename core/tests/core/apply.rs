//! `State::apply` refuses gaps, repeats, misplaced ops and bad ops with a
//! typed error, and the state's hash is unchanged after each refusal.

use apex_core::meta::Process;
use apex_core::*;

fn entry(seq: Seq, op: Op) -> Entry {
    Entry { seq, attachment: AttachmentId::SERVER, epoch: 0, op }
}

fn splice(q0: u64, q1: u64, text: &str) -> Op {
    Op::Buffer(BufferOp::Splice { q0, q1, text: text.into(), origin: Origin::OtherFile })
}

/// A server node with one buffer holding "hello".
fn setup() -> (Node, BufferId) {
    let mut n = Node::server();
    let b = n.create_buffer_as("f").unwrap();
    n.append(Shard::Buffer(b), splice(0, 0, "hello")).unwrap();
    (n, b)
}

#[test]
fn apply_rejects_gaps_repeats_and_wrong_shards_without_change() {
    let (n, b) = setup();
    let shard = Shard::Buffer(b);
    let mut s = n.state.clone();
    let h = s.hash();
    let cases: Vec<(Shard, Entry, &str)> = vec![
        (shard, entry(2, splice(0, 0, "x")), "out of sequence on buffer."), // repeat
        (shard, entry(4, splice(0, 0, "x")), "got seq 4, want 3"),          // gap
        (shard, entry(0, splice(0, 0, "x")), "got seq 0"),
        (shard, entry(3, Op::Layout(LayoutOp::Focus { window: None })), "a layout op does not belong on shard buffer."),
        (Shard::Meta, entry(s.applied(Shard::Meta) + 1, splice(0, 0, "x")), "does not belong on shard meta"),
        (shard, entry(3, splice(4, 9, "x")), "address out of range: 4,9 in a text of 5 runes"),
        (shard, entry(3, splice(3, 2, "x")), "address out of range: 3,2"),
        (shard, entry(3, Op::Buffer(BufferOp::Create { name: "again".into() })), "was created already"),
        (shard, entry(3, Op::Buffer(BufferOp::Select { view: ViewId::TopRow, q0: 0, q1: 0 })), "no view row"),
        (shard, entry(3, Op::Buffer(BufferOp::Redo)), "nothing to redo"),
        (Shard::Buffer(BufferId(12345)), entry(1, splice(0, 0, "x")), "no shard buffer.12345"),
        (
            shard,
            Entry { seq: 3, attachment: AttachmentId(4), epoch: 0, op: splice(0, 0, "x") },
            "fenced: lease of buffer.",
        ),
        (shard, Entry { seq: 3, attachment: AttachmentId::SERVER, epoch: 1, op: splice(0, 0, "x") }, "fenced:"),
        (
            Shard::Meta,
            entry(s.applied(Shard::Meta) + 1, Op::Meta(MetaOp::Detach { attachment: AttachmentId(9) })),
            "no attachment 9",
        ),
        (
            Shard::Meta,
            entry(s.applied(Shard::Meta) + 1, Op::Meta(MetaOp::ShardNew { shard, creator: AttachmentId(3) })),
            "exists already",
        ),
        (
            Shard::Meta,
            entry(s.applied(Shard::Meta) + 1, Op::Meta(MetaOp::LeaseReclaim { shard, epoch: 7, base: 0 })),
            "must be 1, got 7",
        ),
    ];
    for (shard, e, want) in cases {
        let err = s.apply(shard, &e).expect_err(want).to_string();
        assert!(err.contains(want), "{err:?} does not say {want:?}");
        assert_eq!(s.hash(), h, "state changed after refusing {e:?}");
        assert_eq!(s, n.state);
    }
    // And the next entry in order still applies.
    s.apply(shard, &entry(3, splice(5, 5, "!"))).unwrap();
    assert_eq!(s.buffer(b).unwrap().text.to_string(), "hello!");
}

#[test]
fn the_log_refuses_what_apply_refuses() {
    let (mut n, b) = setup();
    let shard = Shard::Buffer(b);
    let last = n.log.last(shard);
    assert!(n.append(shard, splice(9, 9, "x")).is_err());
    assert_eq!(n.log.last(shard), last, "a refused op was logged");
    assert!(matches!(n.log.append_entry(shard, entry(last + 2, splice(0, 0, "x"))), Err(Reject::Sequence { .. })));
    assert!(matches!(
        n.log.append_entry(Shard::Meta, entry(99, Op::Meta(MetaOp::Label { label: "x".into() }))),
        Err(Reject::ServerOnly { .. })
    ));
    assert!(n.log.entries_after(shard, 0).is_ok());
    n.log.compact(shard, 1).unwrap();
    assert!(matches!(n.log.entries_after(shard, 0), Err(Reject::Compacted { base: 1, .. })));
    assert!(matches!(n.log.compact(shard, 99), Err(Reject::CompactBeyond { .. })));
}

#[test]
fn snapshots_round_trip_and_refuse_garbage() {
    let (n, _) = setup();
    let bytes = n.state.to_snapshot();
    let back = State::from_snapshot(&bytes).unwrap();
    assert_eq!(back, n.state);
    assert_eq!(back.hash(), n.state.hash());
    assert_eq!(n.state.hash(), blake3::hash(&bytes), "the hash is of the snapshot encoding");
    assert!(State::from_snapshot(&[]).is_err());
    assert!(State::from_snapshot(&[99, 1, 2]).unwrap_err().to_string().contains("format 99"));
    for cut in [1, bytes.len() / 2, bytes.len() - 1] {
        assert!(State::from_snapshot(&bytes[..cut]).is_err(), "truncated at {cut}");
    }
}

#[test]
fn meta_state_follows_its_ops() {
    let mut n = Node::server();
    let a = n.log.next_attachment().unwrap();
    n.push_meta(MetaOp::Attach { attachment: a, kind: AttachmentKind::Tool, name: "lsp".into() }).unwrap();
    let r = n.log.next_rule();
    n.push_meta(MetaOp::RuleAdd { rule: r, owner: a, text: "type is text".into() }).unwrap();
    n.push_meta(MetaOp::Notify { from: a, text: "hi".into() }).unwrap();
    n.push_meta(MetaOp::Notify { from: AttachmentId::SERVER, text: "kept".into() }).unwrap();
    n.push_meta(MetaOp::Setting { owner: a, key: "tabstop".into(), value: Some("4".into()) }).unwrap();
    n.push_meta(MetaOp::ProcessStart {
        pid: 42,
        process: Box::new(Process { owner: a, command: "mk".into(), dir: "/".into(), window: None }),
    })
    .unwrap();
    assert!(matches!(
        n.push_meta(MetaOp::ProcessStart {
            pid: 42,
            process: Box::new(Process { owner: a, command: "mk".into(), dir: "/".into(), window: None })
        }),
        Err(Reject::ProcessExists(42))
    ));
    assert_eq!(n.state.meta.processes.len(), 1);
    n.push_meta(MetaOp::ProcessExit { pid: 42, status: 0 }).unwrap();
    assert!(n.state.meta.processes.is_empty());
    // A tool's rules, settings and notifications go when it detaches.
    n.push_meta(MetaOp::Detach { attachment: a }).unwrap();
    let m = &n.state.meta;
    assert!(m.rules.is_empty() && m.settings.is_empty());
    assert_eq!(m.notifications.values().map(|x| x.text.as_str()).collect::<Vec<_>>(), ["kept"]);
    // Ids are never reused, even after a detach and a restore.
    assert_eq!(m.next_attachment, a.0 + 1);
    let mut restored = Log::authority_from(&n.state);
    assert_eq!(restored.next_attachment().unwrap(), AttachmentId(a.0 + 1));
    assert_eq!(restored.next_rule(), RuleId(r.0 + 1));
    assert!(n.push_meta(MetaOp::Identity { uuid: SessionUuid([1; 16]) }).is_ok());
    assert!(matches!(n.push_meta(MetaOp::Identity { uuid: SessionUuid([2; 16]) }), Err(Reject::IdentitySet)));
}

#[test]
fn terms_keep_a_grid_and_scrollback() {
    let mut n = Node::server();
    let t = TermId(n.alloc().unwrap());
    let shard = Shard::Term(t);
    n.create_shard(shard).unwrap();
    let term = |op| Op::Term(op);
    n.append(shard, term(TermOp::Create { cols: 10, rows: 3, command: "rc".into(), dir: "/".into() })).unwrap();
    n.append(shard, term(TermOp::Lines { top: 0, lines: vec!["% ls".into(), "a b".into()] })).unwrap();
    n.append(shard, term(TermOp::Scroll { scrolled: vec!["% ls".into()] })).unwrap();
    n.append(shard, term(TermOp::Cursor { row: 2, col: 1, visible: true })).unwrap();
    assert!(n.append(shard, term(TermOp::Lines { top: 2, lines: vec!["x".into(), "y".into()] })).is_err());
    assert!(n.append(shard, term(TermOp::Resize { cols: 0, rows: 3 })).is_err());
    n.append(shard, term(TermOp::Exit { status: 1 })).unwrap();
    let s = &n.state.terms[&t];
    assert_eq!(s.screen(), "a b\n\n\n");
    assert_eq!(s.scrollback, ["% ls"]);
    assert_eq!((s.cursor, s.exit), ((2, 1), Some(1)));
}

proptest::proptest! {
    /// A damaged snapshot is refused, or decodes to a state on which edits,
    /// undo and redo return errors rather than panic.
    #[test]
    fn damaged_snapshots_never_panic(flips in proptest::collection::vec((proptest::prelude::any::<usize>(), proptest::prelude::any::<u8>()), 1..4)) {
        let (mut n, b) = setup();
        let shard = Shard::Buffer(b);
        n.append(shard, splice(2, 4, "XYZ")).unwrap();
        n.append(shard, Op::Buffer(BufferOp::Undo)).unwrap();
        let mut bytes = n.state.to_snapshot();
        for (at, v) in flips {
            let i = 1 + at % (bytes.len() - 1);
            bytes[i] ^= v | 1;
        }
        if let Ok(mut s) = State::from_snapshot(&bytes) {
            for b in s.buffers.keys().copied().collect::<Vec<_>>() {
                let shard = Shard::Buffer(b);
                for op in [BufferOp::Redo, BufferOp::Undo, BufferOp::Undo, BufferOp::Redo] {
                    let seq = s.applied(shard) + 1;
                    let _ = s.apply(shard, &entry(seq, Op::Buffer(op)));
                }
                let seq = s.applied(shard) + 1;
                let _ = s.apply(shard, &entry(seq, splice(0, 1, "q")));
            }
        }
    }
}

#[test]
fn a_run_of_entries_applies_all_or_nothing() {
    let (mut n, b) = setup();
    let shard = Shard::Buffer(b);
    let h = n.state.hash();
    let last = n.log.last(shard);
    // The third entry is out of range once the first two applied.
    let run = vec![entry(3, splice(5, 5, " world")), entry(4, splice(0, 1, "H")), entry(5, splice(40, 41, "x"))];
    let (i, e) = n.accept_all(shard, run).unwrap_err();
    assert_eq!(i, 2);
    assert!(e.to_string().contains("address out of range"), "{e}");
    assert_eq!(n.state.hash(), h, "a refused run changes nothing");
    assert_eq!(n.log.last(shard), last);
    // A fence or seq failure in the middle is caught before anything applies.
    let run = vec![entry(3, splice(5, 5, "!")), entry(5, splice(0, 0, "x"))];
    let (i, e) = n.accept_all(shard, run).unwrap_err();
    assert_eq!((i, e.to_string().contains("want 4")), (1, true), "{e}");
    assert_eq!(n.state.hash(), h);
    // A good run lands whole.
    n.accept_all(shard, vec![entry(3, splice(5, 5, " world")), entry(4, splice(0, 1, "H"))]).unwrap();
    assert_eq!(n.state.buffer(b).unwrap().text.to_string(), "Hello world");
    assert_eq!(n.log.last(shard), 4);
}
