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
    // What a compaction let go of is counted: the text its entries carried.
    let base = n.log.last(shard);
    n.log.compact(shard, base).unwrap();
    n.append(shard, splice(0, 0, "four")).unwrap();
    n.append(shard, splice(0, 0, "sixsix")).unwrap();
    assert_eq!(n.log.compact(shard, base + 2).unwrap(), 10, "the two splices' text");
    assert_eq!(n.log.compact(shard, base + 2).unwrap(), 0, "nothing more");
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
fn the_hash_is_blake3_of_the_snapshot_however_its_blocks_fall() {
    use apex_core::hashtree::{block_value, finish, Tail, BLOCK};
    // A state whose snapshot is `target` bytes long: a text of runes of
    // one to four bytes, padded out by the buffer's name.
    let state_of = |target: usize| {
        let make = |pad: usize, reps: usize| {
            let mut n = Node::server();
            let b = n.create_buffer_as(&"n".repeat(pad)).unwrap();
            n.append(Shard::Buffer(b), splice(0, 0, &"a\u{e9}\u{2713}\u{1d11e}\n".repeat(reps))).unwrap();
            n.state
        };
        let len = |s: &State| s.to_snapshot().len();
        let (base, each) = (len(&make(0, 0)), (len(&make(0, 1000)) - len(&make(0, 0))) / 1000);
        let reps = (target - base).saturating_sub(1000) / each;
        let mut pad = 0;
        for _ in 0..4 {
            let state = make(pad, reps);
            if len(&state) == target {
                return state;
            }
            pad = (pad + target).checked_sub(len(&state)).expect("the text alone is longer than the target");
        }
        panic!("no state of {target} bytes");
    };
    // Around one block and two, and numbers of blocks that are no power
    // of two (blake3's tree is then lopsided).
    for target in [BLOCK - 1, BLOCK, BLOCK + 1, 2 * BLOCK, 2 * BLOCK + 700, 5 * BLOCK + 3, 13 * BLOCK + 1025] {
        let state = state_of(target);
        let bytes = state.to_snapshot();
        assert_eq!(bytes.len(), target);
        let expected = blake3::hash(&bytes);
        assert_eq!(state.hash(), expected, "{target} bytes hashed in turn");
        // Made from the snapshot's parts and valued out of order, as the
        // daemon's threads do.
        let parts = state.snapshot_parts();
        let last = (bytes.len() - 1) / BLOCK;
        let mut values = vec![[0; 32]; last];
        for i in (0..last).rev() {
            values[i] = block_value(i, &parts.range(i * BLOCK, (i + 1) * BLOCK));
        }
        let tail = Tail { index: last, block: parts.range(last * BLOCK, usize::MAX) };
        assert_eq!(finish(values, tail), expected, "{target} bytes hashed side by side");
    }
}

#[test]
fn a_snapshot_in_parts_reads_as_the_whole_at_any_range() {
    let (mut n, _) = setup();
    // Texts of several pieces (runes cut across them), an empty one, and
    // one whose name (empty: a length of 0) and text look like an empty
    // text's encoding.
    let big: String = "naïve 文字 𝄞\n".repeat(3 * apex_core::text::PIECE / 17);
    for (name, text) in [("big", big.as_str()), ("empty", ""), ("", "\0\u{1}x")] {
        let b = n.create_buffer_as(name).unwrap();
        if !text.is_empty() {
            n.append(Shard::Buffer(b), splice(0, 0, text)).unwrap();
        }
    }
    let whole = n.state.to_snapshot();
    let parts = n.state.snapshot_parts();
    assert_eq!(parts.len(), whole.len());
    assert_eq!(parts.texts_kept(), 4, "every buffer's text kept apart");
    let len = whole.len();
    // Spread over the whole, and every start in its last bytes, where the
    // small texts begin and end next to each other.
    let starts = (0..len + 3).step_by(len / 29).chain(len.saturating_sub(300)..len + 2);
    for start in starts {
        for count in [0, 1, 7, 4096, 70_000, len] {
            let want = &whole[start.min(len)..(start + count).min(len)];
            assert!(parts.range(start, start + count) == want, "{start}+{count} of {len}");
        }
    }
    assert_eq!(State::from_snapshot(&parts.range(0, usize::MAX)).unwrap(), n.state);
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
fn terms_keep_a_grid_and_a_bounded_scrollback() {
    use apex_core::grid::{Color, Cursor, Row, Run, Style};
    use apex_core::packed::{Packed, RowChanges};
    use apex_core::term::TermUpdate;
    let mut n = Node::server();
    let t = TermId(n.alloc().unwrap());
    let shard = Shard::Term(t);
    n.create_shard(shard).unwrap();
    let update = |u: TermUpdate| Op::Term(TermOp::Update(Box::new(u)));
    let rows = |scrolled: &[&str], lines: &[(u16, &str)]| {
        Packed::pack(&RowChanges {
            scrolled: scrolled.iter().map(|t| Row::plain(t)).collect(),
            lines: lines.iter().map(|(i, t)| (*i, Row::plain(t))).collect(),
        })
    };
    let create = TermOp::Create { cols: 10, rows: 3, scrollback: 2, command: "rc".into(), dir: "/".into() };
    n.append(shard, Op::Term(create)).unwrap();
    n.append(shard, update(TermUpdate { rows: rows(&[], &[(0, "% ls"), (1, "a b")]), ..Default::default() })).unwrap();
    // Scrolled rows move the grid up and go to the scrollback, which keeps
    // its last 2.
    let scrolled = TermUpdate {
        rows: rows(&["% ls", "a b", "c"], &[(2, "% ")]),
        cursor: Some(Cursor { row: 2, col: 2, ..Cursor::default() }),
        ..Default::default()
    };
    n.append(shard, update(scrolled)).unwrap();
    let s = &n.state.terms[&t];
    assert_eq!(s.screen(), "\n\n% \n");
    assert_eq!(s.scrollback_text(), "a b\nc\n");
    assert_eq!((s.scrolled, s.cursor.col), (3, 2));
    assert_eq!(s.text_runes(), s.text().chars().count() as u64, "kept as rows come and go");
    // Refused whole: a row past the grid, a cursor off it, a size of 0,
    // rows that do not unpack.
    let before = n.state.hash();
    for bad in [
        TermUpdate { rows: rows(&[], &[(0, "x"), (3, "y")]), ..Default::default() },
        TermUpdate { cursor: Some(Cursor { row: 0, col: 10, ..Cursor::default() }), ..Default::default() },
        TermUpdate { size: Some((0, 3)), ..Default::default() },
        TermUpdate { rows: Packed::from_bytes(vec![9, 0, 0, 0, 1]), bells: 1, ..Default::default() },
    ] {
        assert!(n.append(shard, update(bad)).is_err());
    }
    assert_eq!(n.state.hash(), before);
    // Styled rows keep their runs; a resize cuts at the bottom; exit.
    let red = Style { fg: Color::Indexed(1), ..Style::default() };
    let styled = Row { text: "ok".into(), runs: vec![Run { len: 1, style: red }], wrapped: false };
    let u = TermUpdate {
        size: Some((20, 2)),
        rows: Packed::pack(&RowChanges { scrolled: vec![], lines: vec![(1, styled.clone())] }),
        title: Some("sh".into()),
        bells: 2,
        exit: Some(1),
        ..Default::default()
    };
    n.append(shard, update(u)).unwrap();
    let s = &n.state.terms[&t];
    assert_eq!(s.grid, vec![Row::default(), styled]);
    assert_eq!((s.cols, s.rows, s.title.as_str(), s.bells, s.exit), (20, 2, "sh", 2, Some(1)));
    assert_eq!(s.grid[1].styles().map(|(_, st)| st.fg).collect::<Vec<_>>(), [Color::Indexed(1), Color::Default]);
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

/// A log put back to an earlier state keeps the entries that state has,
/// for readers behind, and none of those after it.
#[test]
fn a_log_put_back_to_an_earlier_state_keeps_the_entries_it_has() {
    let (mut n, b) = setup();
    let shard = Shard::Buffer(b);
    let earlier = n.state.clone();
    n.append(shard, splice(5, 5, " world")).unwrap();
    let made = n.create_buffer_as("g").unwrap();
    let mut log = Log::authority_from(&earlier);
    assert!(log.entries_after(shard, 0).is_err(), "a log from a state alone keeps nothing");
    log.keep_entries_of(std::mem::replace(&mut n.log, Log::authority()));
    let kept: Vec<Seq> = log.entries_after(shard, 0).unwrap().map(|e| e.seq).collect();
    assert_eq!(kept, (1..=earlier.applied(shard)).collect::<Vec<_>>());
    assert_eq!(log.last(shard), earlier.applied(shard));
    assert!(log.shard(Shard::Buffer(made)).is_err(), "a shard made later is not there");
    assert_eq!(log.last(Shard::Meta), earlier.applied(Shard::Meta));
}
