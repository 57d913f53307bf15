//! Proposals: base-versioned edits rebased through later edits, refused
//! clearly when too old; window and buffer creation through the leader.

use apex_core::changes::Changes;
use apex_core::*;
use propose::{Created, Proposal};

fn setup() -> (Node, BufferId) {
    let mut n = Node::server();
    make::init_session(&mut n).unwrap();
    let b = n.create_buffer_as("f").unwrap();
    let op = BufferOp::Splice { q0: 0, q1: 0, text: "hello world".into(), origin: Origin::FileWrite };
    n.append(Shard::Buffer(b), Op::Buffer(op)).unwrap();
    (n, b)
}

fn text(n: &Node, b: BufferId) -> String {
    n.state.buffer(b).unwrap().text.to_string()
}

fn version(n: &Node, b: BufferId) -> u64 {
    n.state.buffer(b).unwrap().version
}

#[test]
fn an_old_proposal_is_rebased_through_later_edits() {
    let (mut n, b) = setup();
    let seen = version(&n, b);
    // The leader's user types a comma meanwhile.
    let op = BufferOp::Splice { q0: 5, q1: 5, text: ",".into(), origin: Origin::Keyboard };
    n.append(Shard::Buffer(b), Op::Buffer(op)).unwrap();
    // A tool that saw "hello world" replaces "world": moved past the comma.
    let p =
        Proposal::Replace { buffer: b, version: seen, q0: 6, q1: 11, text: "there".into(), origin: Origin::OtherFile };
    propose::apply(&mut n, &p).unwrap();
    assert_eq!(text(&n, b), "hello, there");
    // And deletes "hello" as of the same old version: the comma, inserted
    // at the range's end, stays outside it (views move the same way).
    let p = Proposal::Delete { buffer: b, version: seen, q0: 0, q1: 5, origin: Origin::OtherFile };
    propose::apply(&mut n, &p).unwrap();
    assert_eq!(text(&n, b), ", there");
    // A proposal's own edit is one undo group.
    propose::apply(&mut n, &Proposal::Undo { buffer: b }).unwrap();
    assert_eq!(text(&n, b), "hello, there");
}

#[test]
fn stale_future_and_bad_proposals_are_refused_and_change_nothing() {
    let (mut n, b) = setup();
    let h = n.state.hash();
    let cur = version(&n, b);
    let cases = [
        (
            Proposal::Insert { buffer: b, version: cur + 1, q0: 0, text: "x".into(), origin: Origin::OtherFile },
            "newer than",
        ),
        (
            Proposal::Insert { buffer: b, version: cur, q0: 99, text: "x".into(), origin: Origin::OtherFile },
            "out of range",
        ),
        (Proposal::Delete { buffer: b, version: cur, q0: 3, q1: 3, origin: Origin::OtherFile }, "nothing to do"),
        (Proposal::Redo { buffer: b }, "nothing to redo"),
        (Proposal::Name { buffer: BufferId(777), name: "x".into() }, "buffer.777"),
        (Proposal::DeleteWindow { window: WindowId(5) }, "no window 5"),
    ];
    for (p, want) in cases {
        let err = propose::apply(&mut n, &p).unwrap_err().to_string();
        assert!(err.contains(want), "{err:?} lacks {want:?}");
        assert_eq!(n.state.hash(), h);
    }
    // Push the seen version out of the retained history.
    let seen = version(&n, b);
    for i in 0..HISTORY_LIMIT as u64 + 1 {
        let op = BufferOp::Splice { q0: i, q1: i, text: "x".into(), origin: Origin::Keyboard };
        n.append(Shard::Buffer(b), Op::Buffer(op)).unwrap();
    }
    let p = Proposal::Insert { buffer: b, version: seen, q0: 0, text: "y".into(), origin: Origin::OtherFile };
    let err = propose::apply(&mut n, &p).unwrap_err();
    assert!(matches!(err, Reject::StaleVersion { .. }), "{err}");
    assert!(err.to_string().contains("read the buffer again"));
    let ok = Proposal::Insert { buffer: b, version: seen + 1, q0: 0, text: "y".into(), origin: Origin::OtherFile };
    propose::apply(&mut n, &ok).unwrap();
}

#[test]
fn a_follower_cannot_apply_proposals() {
    let (n, b) = setup();
    let mut f = Node::new(AttachmentId(3), n.state.clone(), Log::mirror(&n.state, Box::new(RecordingHook::default())));
    let p = Proposal::Clean { buffer: b };
    assert!(matches!(propose::apply(&mut f, &p), Err(Reject::NotLeader { .. })));
    assert_eq!(p.target(), Shard::Buffer(b));
}

#[test]
fn windows_get_acme_numbers_in_order_never_reused() {
    let (mut n, b) = setup();
    let mk = |n: &mut Node, body| match propose::apply(
        n,
        &Proposal::CreateWindow { body, column: None, name: "/tmp/a".into(), near: None },
    )
    .unwrap()
    .created
    {
        Created::Window(w) => w,
        other => panic!("{other:?}"),
    };
    let w1 = mk(&mut n, None);
    let w2 = mk(&mut n, Some(b));
    let w3 = mk(&mut n, Some(b)); // a Zerox of w2
    assert_eq!([w1.number.0, w2.number.0, w3.number.0], [1, 2, 3]);
    assert_eq!(w2.body, w3.body);
    assert_eq!(n.state.buffer(w1.tag).unwrap().text.to_string(), "/tmp/a Del Snarf | Look ");
    assert_eq!(n.state.buffer(w2.tag).unwrap().text.to_string(), "f Del Snarf Undo Put | Look ");
    let views = &n.state.buffer(b).unwrap().views;
    assert!(views.contains_key(&ViewId::WindowBody(w2.window)) && views.contains_key(&ViewId::WindowBody(w3.window)));
    // The Zerox takes its tag from the window it copies, and a change of
    // the body shows in the tags of both (found from the body's views).
    let tag = |n: &Node, t: BufferId| n.state.buffer(t).unwrap().text.to_string();
    assert_eq!(tag(&n, w3.tag), tag(&n, w2.tag));
    propose::apply(&mut n, &Proposal::Clean { buffer: b }).unwrap();
    assert_eq!([tag(&n, w2.tag), tag(&n, w3.tag)], ["f Del Snarf Undo | Look "; 2]);
    assert_eq!(tag(&n, w1.tag), "/tmp/a Del Snarf | Look ", "another body's window unchanged");
    propose::apply(&mut n, &Proposal::DeleteWindow { window: w2.window }).unwrap();
    assert!(n.state.buffers.contains_key(&b), "still shown by its Zerox");
    assert!(!n.state.buffers.contains_key(&w2.tag));
    let w4 = mk(&mut n, None);
    assert_eq!(w4.number.0, 4, "numbers are never reused");
    assert_eq!(n.state.layout.window_numbered(AcmeNumber(3)), Some(w3.window));
    propose::apply(&mut n, &Proposal::DeleteWindow { window: w3.window }).unwrap();
    assert!(!n.state.buffers.contains_key(&b), "the last window took its body with it");
    // Window ops change what the window shows and its flags.
    let w = w1.window;
    let flags = WindowFlags { scroll: false, menu: false, ..WindowFlags::default() };
    n.append(Shard::Window(w), Op::Window(WindowOp::Flags(Box::new(flags.clone())))).unwrap();
    n.append(Shard::Window(w), Op::Window(WindowOp::EventOpen { reader: AttachmentId(9) })).unwrap();
    n.append(Shard::Window(w), Op::Window(WindowOp::Tag { tag: w4.tag })).unwrap();
    let win = n.state.window(w).unwrap();
    assert_eq!((&win.flags, win.event_reader, win.tag), (&flags, Some(AttachmentId(9)), w4.tag));
    n.append(Shard::Window(w), Op::Window(WindowOp::EventClose)).unwrap();
    assert_eq!(n.state.window(w).unwrap().event_reader, None);
    let col = n.state.layout.columns[0].id;
    propose::apply(&mut n, &Proposal::MoveWindow { window: w1.window, column: col, y: Frac(500_000) }).unwrap();
    assert_eq!(n.state.layout.find(w1.window), Some((0, 0)));
}

#[test]
fn select_and_exec_proposals_name_their_version() {
    let (mut n, b) = setup();
    let w = match propose::apply(
        &mut n,
        &Proposal::CreateWindow { body: Some(b), column: None, name: String::new(), near: None },
    )
    .unwrap()
    .created
    {
        Created::Window(w) => w,
        other => panic!("{other:?}"),
    };
    let seen = version(&n, b);
    let view = ViewId::WindowBody(w.window);
    let op = BufferOp::Splice { q0: 0, q1: 0, text: "¡".into(), origin: Origin::Keyboard };
    n.append(Shard::Buffer(b), Op::Buffer(op)).unwrap();
    propose::apply(&mut n, &Proposal::Select { buffer: b, view, version: seen, q0: 6, q1: 11 }).unwrap();
    let v = n.state.buffer(b).unwrap().views[&view];
    assert_eq!((v.q0, v.q1), (7, 12));
    let action = Action {
        view: Some(view),
        version: seen,
        q0: 0,
        q1: 5,
        expansion: None,
        arg: None,
        flags: 0,
        origin: Origin::Mouse,
    };
    propose::apply(&mut n, &Proposal::Exec { buffer: b, action: action.clone() }).unwrap();
    assert_eq!(n.state.buffer(b).unwrap().last_action, Some((buf::ActionKind::Exec, action)));
}

#[test]
fn splices_apply_as_one_undo_group_rebased_or_not_at_all() {
    let (mut n, b) = setup();
    let seen = version(&n, b);
    // The user types at the end meanwhile.
    let op = BufferOp::Splice { q0: 11, q1: 11, text: "!".into(), origin: Origin::Keyboard };
    n.append(Shard::Buffer(b), Op::Buffer(op)).unwrap();
    let changes = [(0, 1, "H"), (5, 5, ","), (6, 11, "there")].into_iter().collect();
    let p = Proposal::Splices { buffer: b, version: seen, changes, origin: Origin::OtherFile };
    propose::apply(&mut n, &p).unwrap();
    assert_eq!(text(&n, b), "Hello, there!");
    propose::apply(&mut n, &Proposal::Undo { buffer: b }).unwrap();
    assert_eq!(text(&n, b), "hello world!", "one undo undoes the whole Edit");
    // Out of order or out of range: refused, nothing changed.
    let h = n.state.hash();
    let cur = version(&n, b);
    for changes in
        [vec![(5, 6, String::new()), (1, 2, String::new())], vec![(0, 1, "x".into()), (3, 99, String::new())]]
    {
        let changes = changes.into_iter().collect();
        let p = Proposal::Splices { buffer: b, version: cur, changes, origin: Origin::OtherFile };
        assert!(propose::apply(&mut n, &p).is_err());
        assert_eq!(n.state.hash(), h);
    }
}

#[test]
fn tags_follow_the_buffer_as_acme_s_winsettag() {
    let mut n = Node::server();
    make::init_session(&mut n).unwrap();
    let p = Proposal::CreateWindow { body: None, column: None, name: "/tmp/t.c".into(), near: None };
    let Created::Window(w) = propose::apply(&mut n, &p).unwrap().created else { panic!("a window") };
    let tag = |n: &Node| n.state.buffer(w.tag).unwrap().text.to_string();
    assert_eq!(tag(&n), "/tmp/t.c Del Snarf | Look ");
    // The user's words after the bar stay whatever the menu does.
    let len = n.state.buffer(w.tag).unwrap().len();
    let p = Proposal::Insert { buffer: w.tag, version: 1, q0: len, text: "mk ".into(), origin: Origin::Keyboard };
    propose::apply(&mut n, &p).unwrap();
    let p = Proposal::Insert { buffer: w.body, version: 0, q0: 0, text: "x".into(), origin: Origin::Keyboard };
    propose::apply(&mut n, &p).unwrap();
    assert_eq!(tag(&n), "/tmp/t.c Del Snarf Undo Put | Look mk ");
    propose::apply(&mut n, &Proposal::Undo { buffer: w.body }).unwrap();
    assert_eq!(tag(&n), "/tmp/t.c Del Snarf Redo | Look mk ", "undone to the clean state: no Put");
    propose::apply(&mut n, &Proposal::Redo { buffer: w.body }).unwrap();
    propose::apply(&mut n, &Proposal::Clean { buffer: w.body }).unwrap();
    assert_eq!(tag(&n), "/tmp/t.c Del Snarf Undo | Look mk ");
    // A tool reading a file window's events turns the menu off.
    let mut flags = n.state.window(w.window).unwrap().flags.clone();
    flags.menu = false;
    propose::apply(&mut n, &Proposal::Flags { window: w.window, flags }).unwrap();
    assert_eq!(tag(&n), "/tmp/t.c Del Snarf | Look mk ");
    // Renaming changes the first word; a directory offers Get.
    propose::apply(&mut n, &Proposal::Name { buffer: w.body, name: "/tmp/".into() }).unwrap();
    assert_eq!(tag(&n), "/tmp/ Del Snarf Get | Look mk ");
    assert_eq!(make::tag_menu("", &make::TagState { menu: true, dirty: true, ..Default::default() }), " Del Snarf ");
}

/// acme's xfidopen and xfidclose: a file window's tag menu is off while a
/// tool reads its events and back on (its dump settings dropped) after; a
/// directory window's menu is left as it is.
#[test]
fn the_event_reader_turns_a_file_windows_menu_off_and_on() {
    let mut n = Node::server();
    make::init_session(&mut n).unwrap();
    let mut window = |name: &str| match propose::apply(
        &mut n,
        &Proposal::CreateWindow { body: None, column: None, name: name.into(), near: None },
    )
    .unwrap()
    .created
    {
        Created::Window(w) => w.window,
        _ => panic!("a window"),
    };
    let (file, dir) = (window("/d/f.c"), window("/d/"));
    let flags = |n: &Node, w: WindowId| n.state.window(w).unwrap().flags.clone();
    let reader = |w, open: bool| Proposal::EventReader { window: w, reader: open.then_some(AttachmentId::SERVER) };
    let dumped = WindowFlags { dump: Some("win".into()), dumpdir: Some("/d".into()), ..flags(&n, file) };
    propose::apply(&mut n, &Proposal::Flags { window: file, flags: dumped }).unwrap();
    propose::apply(&mut n, &reader(file, true)).unwrap();
    assert!(!flags(&n, file).menu);
    assert!(n.state.buffer(n.state.window(file).unwrap().tag).unwrap().text.to_string().ends_with("Snarf | Look "));
    propose::apply(&mut n, &reader(file, false)).unwrap();
    let after = flags(&n, file);
    assert!(after.menu && after.dump.is_none() && after.dumpdir.is_none(), "{after:?}");
    // A directory whose menu a tool turned off keeps it off.
    let off = WindowFlags { menu: false, ..flags(&n, dir) };
    propose::apply(&mut n, &Proposal::Flags { window: dir, flags: off }).unwrap();
    propose::apply(&mut n, &reader(dir, true)).unwrap();
    propose::apply(&mut n, &reader(dir, false)).unwrap();
    assert!(!flags(&n, dir).menu);
}

/// Many changes proposed at once (a whole-file Edit's) are rebased
/// through typing made meanwhile as a few would be, and a change whose
/// text is over an entry's limit still goes in, in entries of its own;
/// no entry made carries more than the limit.
#[test]
fn many_changes_at_once_rebase_and_a_long_one_goes_in_pieces() {
    let (mut n, b) = setup();
    let seen = version(&n, b);
    let long = "é".repeat(op::SPLICE_MAX / 2 + 7);
    // Every rune of "hello world" but the first replaced, the "w" by the
    // long text.
    let changes: Changes = (1..11u64)
        .map(|q| (q, q + 1, if q == 6 { long.clone() } else { format!("<{q}>") }))
        .chain(std::iter::repeat_n((11, 11, "!".to_string()), 20))
        .collect();
    // Typed meanwhile, before the text.
    let op = BufferOp::Splice { q0: 0, q1: 0, text: "> ".into(), origin: Origin::Keyboard };
    n.append(Shard::Buffer(b), Op::Buffer(op)).unwrap();
    let before = n.log.last(Shard::Buffer(b));
    let p = Proposal::Splices { buffer: b, version: seen, changes, origin: Origin::OtherFile };
    propose::apply(&mut n, &p).unwrap();
    let want = format!("> h<1><2><3><4><5>{long}<7><8><9><10>{}", "!".repeat(20));
    assert!(text(&n, b) == want, "{} runes, not {}", text(&n, b).chars().count(), want.chars().count());
    let entries: Vec<_> = n.log.entries_after(Shard::Buffer(b), before).unwrap().cloned().collect();
    assert!(entries.iter().all(|e| e.op.admissible().is_ok()));
    assert!(entries.iter().any(|e| matches!(e.op, Op::Buffer(BufferOp::Splices { .. }))), "{entries:?}");
    propose::apply(&mut n, &Proposal::Undo { buffer: b }).unwrap();
    assert_eq!(text(&n, b), "> hello world", "one undo group");
}

/// Many changes proposed at the version the text is at are checked as
/// they are, not rebased: changes of nothing are left out, and a list out
/// of order, overlapping or past the end is refused with nothing changed,
/// however many changes it has.
#[test]
fn many_changes_at_the_version_now_are_checked_as_they_are() {
    let (mut n, b) = setup();
    let now = version(&n, b);
    // Each of the 11 runes doubled, a change of nothing after each.
    let changes: Changes = (0..11u64)
        .flat_map(|q| {
            let rune = "hello world".chars().nth(q as usize).unwrap();
            [(q, q + 1, format!("{rune}{rune}")), (q + 1, q + 1, String::new())]
        })
        .collect();
    let before = n.log.last(Shard::Buffer(b));
    propose::apply(&mut n, &Proposal::Splices { buffer: b, version: now, changes, origin: Origin::OtherFile }).unwrap();
    assert_eq!(text(&n, b), "hheelllloo  wwoorrlldd");
    let entries: Vec<_> = n.log.entries_after(Shard::Buffer(b), before).unwrap().cloned().collect();
    let made: usize = entries
        .iter()
        .map(|e| match &e.op {
            Op::Buffer(BufferOp::Splices { spots, .. }) => spots.iter().count(),
            Op::Buffer(BufferOp::Splice { .. }) => 1,
            _ => 0,
        })
        .sum();
    assert_eq!(made, 11, "the changes of nothing left out: {entries:?}");
    let h = n.state.hash();
    let now = version(&n, b);
    let many =
        |last: (u64, u64)| -> Changes { (0..20u64).map(|q| (q, q + 1, "x")).chain([(last.0, last.1, "y")]).collect() };
    for (last, why) in [((5, 6), "out of order"), ((19, 21), "overlapping"), ((30, 99), "past the end")] {
        let p = Proposal::Splices { buffer: b, version: now, changes: many(last), origin: Origin::OtherFile };
        assert!(matches!(propose::apply(&mut n, &p), Err(Reject::Range { .. })), "{why}");
        assert_eq!(n.state.hash(), h, "{why}: nothing changed");
    }
    // A text longer than an entry carries goes in entries of its own, the
    // changes around it in others: a bad change in any part, the long one
    // too, refuses the whole list before any part is made.
    let long = "y".repeat(apex_core::op::SPLICE_MAX + 1);
    let parted = |long_at: (u64, u64), last: (u64, u64)| -> Changes {
        (0..18u64)
            .map(|q| (q, q + 1, "x"))
            .chain([(long_at.0, long_at.1, long.as_str()), (last.0, last.1, "z")])
            .collect()
    };
    assert!(propose::apply(
        &mut n,
        &Proposal::Splices { buffer: b, version: now, changes: parted((18, 19), (20, 21)), origin: Origin::OtherFile }
    )
    .is_ok());
    let h = n.state.hash();
    let now = version(&n, b);
    let len = n.state.buffer(b).unwrap().len();
    for (long_at, last, why) in [
        ((17, 19), (20, 21), "the long one overlapping the part before"),
        ((19, 20), (19, 21), "the part after overlapping the long one"),
        ((len + 1, len + 1), (len + 2, len + 3), "the long one past the end"),
        ((18, 19), (3, 4), "the last part out of order"),
    ] {
        let p =
            Proposal::Splices { buffer: b, version: now, changes: parted(long_at, last), origin: Origin::OtherFile };
        assert!(matches!(propose::apply(&mut n, &p), Err(Reject::Range { .. })), "{why}");
        assert_eq!(n.state.hash(), h, "{why}: nothing changed");
    }
}

/// An Edit proposed in parts is one undo group while nothing comes
/// between its parts; a change of another's between them keeps its own
/// group, and the part after it begins another, so no Undo takes back
/// someone else's typing with the Edit's changes.
#[test]
fn the_parts_of_an_edit_join_its_undo_group_unless_another_change_came_between() {
    let part = |from: u64| -> Changes { (from..from + 5).map(|q| (q, q + 1, "_")).collect() };
    for typed_between in [false, true] {
        let (mut n, b) = setup();
        let seen = version(&n, b);
        let first = Proposal::Splices { buffer: b, version: seen, changes: part(6), origin: Origin::OtherFile };
        let group = match propose::apply(&mut n, &first).unwrap().created {
            Created::Group(g) => Some(g),
            other => panic!("the first part begins a group: {other:?}"),
        };
        assert_eq!(text(&n, b), "hello _____");
        if typed_between {
            let typed = Proposal::Insert {
                buffer: b,
                version: version(&n, b),
                q0: 11,
                text: "!".into(),
                origin: Origin::Keyboard,
            };
            propose::apply(&mut n, &typed).unwrap();
        }
        let more =
            Proposal::SplicesMore { buffer: b, version: seen, changes: part(0), origin: Origin::OtherFile, group };
        propose::apply(&mut n, &more).unwrap();
        let undo = |n: &mut Node| propose::apply(n, &Proposal::Undo { buffer: b }).unwrap();
        match typed_between {
            false => {
                assert_eq!(text(&n, b), "_____ _____");
                undo(&mut n);
                assert_eq!(text(&n, b), "hello world", "one Undo takes back both parts");
            }
            true => {
                assert_eq!(text(&n, b), "_____ _____!");
                undo(&mut n);
                assert_eq!(text(&n, b), "hello _____!", "the part after the typing, alone");
                undo(&mut n);
                assert_eq!(text(&n, b), "hello _____", "then the typing");
                undo(&mut n);
                assert_eq!(text(&n, b), "hello world");
            }
        }
    }
}

/// A text given up to a proposal (a Get's, a tool's write) goes in as
/// the same entries, in the same order, as the text lent: pieces of at
/// most an entry's limit, from its start; the text, the views and one
/// undo group come out the same.
#[test]
fn a_text_given_up_makes_the_entries_a_text_lent_makes() {
    let long: String = "aé\n€xyz".chars().cycle().take(op::SPLICE_MAX * 5 / 2 + 1234).collect();
    let views = [ViewId::TopRow, ViewId::WindowBody(WindowId(1)), ViewId::WindowBody(WindowId(2))];
    for put in [long.as_str(), "short"] {
        let made = |given: bool| {
            let (mut n, b) = setup();
            for (view, (q0, q1)) in views.iter().zip([(0, 6), (7, 9), (11, 11)]) {
                n.append(Shard::Buffer(b), Op::Buffer(BufferOp::ViewAdd { view: *view })).unwrap();
                n.append(Shard::Buffer(b), Op::Buffer(BufferOp::Select { view: *view, q0, q1 })).unwrap();
            }
            let before = n.log.last(Shard::Buffer(b));
            let p = Proposal::Replace {
                buffer: b,
                version: version(&n, b),
                q0: 6,
                q1: 11,
                text: put.to_string(),
                origin: Origin::OtherFile,
            };
            match given {
                true => propose::apply_owned(&mut n, p).unwrap(),
                false => propose::apply(&mut n, &p).unwrap(),
            };
            let ops: Vec<_> = n.log.entries_after(Shard::Buffer(b), before).unwrap().map(|e| e.op.clone()).collect();
            (n, b, ops)
        };
        let ((mut given, b, given_ops), (lent, _, lent_ops)) = (made(true), made(false));
        assert_eq!(given_ops, lent_ops, "the same entries in the same order");
        assert!(given_ops.iter().all(|o| o.admissible().is_ok()));
        assert!(text(&given, b) == format!("hello {put}"));
        let views = |n: &Node| n.state.buffer(b).unwrap().views.clone();
        assert_eq!(views(&given), views(&lent));
        propose::apply(&mut given, &Proposal::Undo { buffer: b }).unwrap();
        assert_eq!(text(&given, b), "hello world", "one undo group");
    }
}
