//! `Buffer`'s tests: its ops, its undo records and their bound.

use super::*;
use crate::id::GroupId;
use crate::op::Origin;

fn splice(b: &mut Buffer, q0: u64, q1: u64, text: &str) {
    b.apply(&BufferOp::Splice { q0, q1, text: text.into(), origin: Origin::Keyboard }).unwrap();
}

#[test]
fn a_name_is_one_line_where_it_is_made() {
    let mut server = crate::Node::server();
    let before = server.state.hash();
    assert!(matches!(server.create_buffer_as("x\ny"), Err(Reject::BadName { .. })));
    assert_eq!(server.state.hash(), before, "no shard made for it");
    let b = server.create_buffer_as("/a").unwrap();
    let rename = |name: &str| crate::Op::Buffer(BufferOp::Rename { name: name.into() });
    let refused = server.append(crate::Shard::Buffer(b), rename("/a\nb"));
    assert!(matches!(refused, Err(Reject::BadName { .. })), "{refused:?}");
    // acme's ctl may set a tab in a name (then say it is bad).
    server.append(crate::Shard::Buffer(b), rename("/a\tb")).unwrap();
    // A log written before the rule replays: applying takes its names.
    let mut old = Buffer::new("/a".into());
    old.apply(&BufferOp::Rename { name: "/a\nb".into() }).unwrap();
    assert_eq!(old.name, "/a\nb");
}

#[test]
fn a_rename_is_an_undo_step_of_its_own() {
    let mut b = Buffer::new(String::new());
    splice(&mut b, 0, 0, "abc");
    b.apply(&BufferOp::Clean).unwrap();
    assert!(!b.differs_from_file());
    b.apply(&BufferOp::Rename { name: "/a".into() }).unwrap();
    b.apply(&BufferOp::Rename { name: "/a".into() }).unwrap();
    b.apply(&BufferOp::Rename { name: "/b".into() }).unwrap();
    assert!(!b.dirty && b.differs_from_file(), "Put shows, the text is not dirty");
    b.apply(&BufferOp::Undo).unwrap();
    assert_eq!(b.name, "/a");
    b.apply(&BufferOp::Undo).unwrap();
    assert_eq!((b.name.as_str(), b.text.to_string().as_str()), ("", "abc"), "the same name twice is one step");
    assert!(!b.differs_from_file(), "back where it was clean");
    b.apply(&BufferOp::Undo).unwrap();
    assert_eq!(b.text.to_string(), "", "then the text");
    b.apply(&BufferOp::Redo).unwrap();
    let before = (b.version, b.text.to_string());
    b.apply(&BufferOp::Redo).unwrap();
    assert_eq!(b.name, "/a");
    assert_eq!((b.version, b.text.to_string()), (before.0 + 1, before.1), "an edit of nothing in the history");
    // Typing after a rename coalesces only with typing.
    b.apply(&BufferOp::Redo).unwrap();
    splice(&mut b, 3, 3, "d");
    b.apply(&BufferOp::Undo).unwrap();
    assert_eq!((b.name.as_str(), b.text.to_string().as_str()), ("/b", "abc"));
}

#[test]
fn a_copy_shares_undo_groups_and_an_edit_after_copies_only_the_group_it_changes() {
    let mut b = Buffer::new("/tmp/x".into());
    let big = "x".repeat(1 << 20);
    splice(&mut b, 0, 0, &big);
    splice(&mut b, 0, 1 << 20, "");
    let copy = b.clone();
    assert_eq!(copy.undo.len(), b.undo.len());
    assert!(b.undo.iter().zip(&copy.undo).all(|(a, c)| Arc::ptr_eq(a, c)), "a copy shares every group");
    // An edit of the original changes its own top group only.
    splice(&mut b, 0, 0, "y");
    assert!(!Arc::ptr_eq(b.undo.last().unwrap(), copy.undo.last().unwrap()));
    assert_eq!(copy.undo.last().unwrap().changes.len(), 2, "the copy's group is as it was");
    assert_eq!(b.undo.last().unwrap().changes.len(), 3);
    // Each undoes to its own text.
    let (mut b, mut copy) = (b, copy);
    b.apply(&BufferOp::Undo).unwrap();
    copy.apply(&BufferOp::Undo).unwrap();
    assert_eq!((b.len(), copy.len()), (0, 0));
    b.apply(&BufferOp::Redo).unwrap();
    copy.apply(&BufferOp::Redo).unwrap();
    assert_eq!(b.text.to_string(), "y");
    assert_eq!(copy.len(), 0);
    assert_eq!(copy.redo.len(), 0);
}

/// A small, fixed pseudo-random walk: each call a number below `n`.
fn numbers(mut seed: u64) -> impl FnMut(u64) -> u64 {
    move |n| {
        seed = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        (seed >> 33) % n
    }
}

/// What the undo and redo lists hold, counted afresh.
fn recount(b: &Buffer) -> u64 {
    b.undo.iter().chain(&b.redo).map(|g| g.cost()).sum()
}

fn mark(b: &mut Buffer, n: u64) {
    b.apply(&BufferOp::Mark { group: GroupId(n) }).unwrap();
}

/// A many-change splice leaves the text and the views as the same
/// changes made one at a time from the last do; Undo and Redo bring
/// back the same texts; its undo record survives an encoding, and the
/// undo count is a recount's.
#[test]
fn many_changes_at_once_are_the_changes_one_at_a_time() {
    use crate::spots::{Spot, Spots};
    let mut next = numbers(99u64);
    let view = ViewId::TopRow;
    for round in 0..400 {
        let text: String = (0..next(40)).map(|_| ['a', 'b', 'é', '\n', ' '][next(5) as usize]).collect();
        let mut one = Buffer::new("/x".into());
        splice(&mut one, 0, 0, &text);
        one.apply(&BufferOp::ViewAdd { view }).unwrap();
        let len = one.len();
        let q0 = next(len + 1);
        one.apply(&BufferOp::Select { view, q0, q1: q0 + next(len - q0 + 1) }).unwrap();
        one.apply(&BufferOp::SetOrigin { view, org: next(len + 1) }).unwrap();
        let mut many = one.clone();
        let mut changes = Vec::new();
        let mut at = 0;
        while changes.len() < 8 {
            let q0 = at + next(4);
            if q0 > len {
                break;
            }
            let q1 = q0 + next(3).min(len - q0);
            let t = ["", "x", "ü€", "\n\n"][next(4) as usize];
            // A change of nothing is no change (the leader drops them).
            changes.push((q0, q1, if q0 == q1 && t.is_empty() { "x" } else { t }));
            at = q1;
        }
        if changes.is_empty() {
            continue;
        }
        mark(&mut one, 1);
        mark(&mut many, 1);
        let seen = (one.version, many.version);
        for (q0, q1, t) in changes.iter().rev() {
            splice(&mut one, *q0, *q1, t);
        }
        let spot = |(q0, q1, t): &(u64, u64, &str)| Spot { q0: *q0, q1: *q1, inserted: t.chars().count() as u64 };
        let spots = Spots::pack(changes.iter().map(spot)).unwrap();
        let inserted: String = changes.iter().map(|c| c.2).collect();
        many.apply(&BufferOp::Splices { spots, text: inserted, origin: Origin::OtherFile }).unwrap();
        assert_eq!(many.text.to_string(), one.text.to_string(), "round {round}: {changes:?}");
        assert_eq!((many.len(), many.views.clone()), (one.len(), one.views.clone()), "round {round}: {changes:?}");
        assert_eq!(many.undo_bytes(), recount(&many));
        for p in 0..=len {
            let (a, b) = (one.rebase(seen.0, p).unwrap(), many.rebase(seen.1, p).unwrap());
            assert_eq!(a, b, "round {round}: point {p} rebased through {changes:?}");
        }
        let mut decoded: Buffer = postcard::from_bytes(&postcard::to_allocvec(&many).unwrap()).unwrap();
        decoded.restore();
        assert_eq!(decoded, many, "round {round}: the undo record decodes as it was");
        let after = many.text.to_string();
        for b in [&mut one, &mut many, &mut decoded] {
            b.apply(&BufferOp::Undo).unwrap();
            assert_eq!(b.text.to_string(), text, "round {round}: Undo");
            b.apply(&BufferOp::Redo).unwrap();
            assert_eq!(b.text.to_string(), after, "round {round}: Redo");
            assert_eq!(b.undo_bytes(), recount(b));
        }
    }
}

/// Whether the newest undo group's last record keeps its span whole.
fn keeps(list: &[Arc<Group>]) -> bool {
    list.last().and_then(|g| g.changes.last()).is_some_and(|c| c.kept.is_some())
}

/// A many-change splice that removes most of a big span (a `,y/\n/c/ /`)
/// keeps that span whole rather than a copy of what it removed, and its
/// Undo puts it back whole; each such record is the same as one holding
/// the runes: the same text and views one change at a time make, the same
/// encoding (so the same hash), count and equality, and the same Undo and
/// Redo as the record decoded from that encoding, which holds the runes.
#[test]
fn a_splice_that_removes_most_of_a_big_span_keeps_it_and_is_one_that_copies_it() {
    use crate::spots::{Spot, Spots};
    let mut next = numbers(5u64);
    let text: String = (0..120_000).map(|_| ['a', 'é', '€', ' ', 'b', 'c', '\n'][next(7) as usize]).collect();
    let runes: Vec<char> = text.chars().collect();
    let lines: Vec<(u64, u64)> = {
        let (mut out, mut start) = (Vec::new(), 0u64);
        for (i, c) in runes.iter().enumerate() {
            if *c == '\n' {
                out.push((start, i as u64));
                start = i as u64 + 1;
            }
        }
        out
    };
    // Every line's runes become `put`, the views before, among and after
    // the changes. The reversal of a longer text keeps what it spans too;
    // that of a space spans less than the least kept (a space and a
    // newline a line), and that of nothing removes nothing.
    for (put, reversal_keeps) in [("xyzxyzxyz", true), (" ", false), ("", false)] {
        let mut one = Buffer::new("/x".into());
        splice(&mut one, 0, 0, &text);
        let views =
            [ViewId::TopRow, ViewId::WindowTag(crate::id::WindowId(1)), ViewId::WindowBody(crate::id::WindowId(1))];
        for (view, (q0, q1)) in views.into_iter().zip([(3, 3), (500, 90_000), (119_990, 120_000)]) {
            one.apply(&BufferOp::ViewAdd { view }).unwrap();
            one.apply(&BufferOp::Select { view, q0, q1 }).unwrap();
        }
        mark(&mut one, 1);
        let mut many = one.clone();
        let changes: Vec<Spot> = lines
            .iter()
            .filter(|(q0, q1)| q1 > q0 || !put.is_empty())
            .map(|&(q0, q1)| Spot { q0, q1, inserted: put.chars().count() as u64 })
            .collect();
        for s in changes.iter().rev() {
            splice(&mut one, s.q0, s.q1, put);
        }
        let inserted = put.repeat(changes.len());
        let spots = Spots::pack(changes.iter().copied()).unwrap();
        many.apply(&BufferOp::Splices { spots, text: inserted, origin: Origin::OtherFile }).unwrap();
        assert!(keeps(&many.undo), "{put:?}: most of the span removed, the span kept");
        assert_eq!(many.text, one.text, "{put:?}");
        assert_eq!((many.len(), &many.views), (one.len(), &one.views), "{put:?}");
        let mut decoded: Buffer = postcard::from_bytes(&postcard::to_allocvec(&many).unwrap()).unwrap();
        decoded.restore();
        assert!(!keeps(&decoded.undo), "a record is decoded holding the runes");
        assert_eq!(postcard::to_allocvec(&decoded).unwrap(), postcard::to_allocvec(&many).unwrap(), "{put:?}");
        assert_eq!(decoded, many, "{put:?}");
        assert_eq!((many.undo_bytes(), decoded.undo_bytes()), (recount(&many), recount(&many)), "{put:?}");
        let after = many.text.to_string();
        for b in [&mut one, &mut many, &mut decoded] {
            b.apply(&BufferOp::Undo).unwrap();
            assert_eq!(b.text.to_string(), text, "{put:?}: Undo");
            assert_eq!(b.undo_bytes(), recount(b));
        }
        assert_eq!(keeps(&many.redo), reversal_keeps, "{put:?}: the reversal keeps what it spans");
        assert_eq!((&many.views, many.len()), (&one.views, one.len()), "{put:?}: Undo");
        assert_eq!(decoded, many, "{put:?}: Undo");
        assert_eq!(decoded.undo_bytes(), many.undo_bytes(), "{put:?}: Undo counted as if copied");
        assert_eq!(postcard::to_allocvec(&decoded).unwrap(), postcard::to_allocvec(&many).unwrap(), "{put:?}: Undo");
        for b in [&mut one, &mut many, &mut decoded] {
            b.apply(&BufferOp::Redo).unwrap();
            assert_eq!(b.text.to_string(), after, "{put:?}: Redo");
            assert_eq!(b.undo_bytes(), recount(b));
        }
        assert_eq!((&many.views, many.len()), (&one.views, one.len()), "{put:?}: Redo");
        assert_eq!(decoded, many, "{put:?}: Redo");
        assert_eq!(decoded.undo_bytes(), many.undo_bytes(), "{put:?}: Redo counted as if copied");
        // The record Redo made is undone as well (by a swap where it kept).
        for b in [&mut many, &mut decoded] {
            b.apply(&BufferOp::Undo).unwrap();
            assert_eq!(b.text.to_string(), text, "{put:?}: Undo again");
        }
        assert_eq!(decoded, many, "{put:?}: Undo again");
        assert_eq!(
            postcard::to_allocvec(&decoded).unwrap(),
            postcard::to_allocvec(&many).unwrap(),
            "{put:?}: Undo again"
        );
    }
}

/// An Edit's parts, each a many-change splice that keeps its span, and a
/// plain splice, in one undo group: Undo puts back each in turn (the
/// places of each reversal as the ones after it left them), and Redo and
/// Undo again, the same as the records decoded, which hold the runes.
#[test]
fn kept_spans_among_other_changes_of_one_group_undo_in_turn() {
    use crate::spots::{Spot, Spots};
    let line = "a line of text\n";
    let lines = 20_000u64;
    let text = line.repeat(lines as usize);
    let mut b = Buffer::new("/x".into());
    splice(&mut b, 0, 0, &text);
    mark(&mut b, 1);
    let width = line.chars().count() as u64;
    // Every line's runes but its newline become "x", in two parts, the
    // last first (as an Edit's are proposed), then a word put in at the top.
    let part = |lines: std::ops::Range<u64>| {
        let spots = Spots::pack(lines.clone().map(|i| Spot { q0: i * width, q1: i * width + width - 1, inserted: 1 }));
        BufferOp::Splices { spots: spots.unwrap(), text: "x".repeat(lines.count()), origin: Origin::OtherFile }
    };
    b.apply(&part(lines / 2..lines)).unwrap();
    b.apply(&part(0..lines / 2)).unwrap();
    splice(&mut b, 0, 0, "top ");
    let changes = &b.undo.last().unwrap().changes;
    assert_eq!(changes.iter().map(|c| c.kept.is_some()).collect::<Vec<_>>(), [true, true, false]);
    let after = b.text.to_string();
    assert_eq!(after, format!("top {}", "x\n".repeat(lines as usize)));
    let mut decoded: Buffer = postcard::from_bytes(&postcard::to_allocvec(&b).unwrap()).unwrap();
    decoded.restore();
    for round in 0..2 {
        for x in [&mut b, &mut decoded] {
            x.apply(&BufferOp::Undo).unwrap();
            assert_eq!(x.text.to_string(), text, "round {round}: Undo");
            x.apply(&BufferOp::Redo).unwrap();
            assert_eq!(x.text.to_string(), after, "round {round}: Redo");
            assert_eq!(x.undo_bytes(), recount(x));
        }
        assert_eq!(decoded, b, "round {round}");
        assert_eq!(postcard::to_allocvec(&decoded).unwrap(), postcard::to_allocvec(&b).unwrap(), "round {round}");
    }
}

/// Half of a span's runes removed, and half of its bytes, keeps it; half
/// of its runes but a quarter of its bytes (an ASCII rune removed from
/// between runes of three bytes) copies what it removed, so that what is
/// kept is never more than twice what the undo bound counts.
#[test]
fn a_span_is_kept_for_half_its_bytes_removed_not_half_its_runes() {
    use crate::spots::{Spot, Spots};
    for (between, kept) in ['b', '€'].into_iter().zip([true, false]) {
        let mut b = Buffer::new("/x".into());
        let pairs = 40_000u64;
        splice(&mut b, 0, 0, &format!("a{between}").repeat(pairs as usize));
        mark(&mut b, 1);
        let spots = Spots::pack((0..pairs).map(|i| Spot { q0: 2 * i, q1: 2 * i + 1, inserted: 0 })).unwrap();
        b.apply(&BufferOp::Splices { spots, text: String::new(), origin: Origin::OtherFile }).unwrap();
        assert_eq!(keeps(&b.undo), kept, "{between:?} between");
        assert_eq!(b.undo.last().unwrap().changes[0].removed_text(), "a".repeat(pairs as usize));
        assert_eq!(b.undo_bytes(), recount(&b));
        b.apply(&BufferOp::Undo).unwrap();
        assert_eq!(b.text.to_string(), format!("a{between}").repeat(pairs as usize));
    }
}

/// A many-change splice that removes less than half of what it spans, or
/// spans little, copies what it removed.
#[test]
fn a_splice_that_removes_little_of_its_span_or_spans_little_copies_what_it_removed() {
    use crate::spots::{Spot, Spots};
    for (len, every) in [(200_000u64, 3u64), (1_000, 1)] {
        let mut b = Buffer::new("/x".into());
        splice(&mut b, 0, 0, &"ab".repeat(len as usize / 2));
        let spots: Vec<Spot> =
            (0..len / 2).step_by(every as usize).map(|i| Spot { q0: 2 * i, q1: 2 * i + 1, inserted: 0 }).collect();
        let gone = spots.len();
        let spots = Spots::pack(spots).unwrap();
        b.apply(&BufferOp::Splices { spots, text: String::new(), origin: Origin::OtherFile }).unwrap();
        assert!(!keeps(&b.undo), "{len} runes, one in {} removed", 2 * every);
        assert_eq!(b.undo.last().unwrap().changes.last().unwrap().removed, "a".repeat(gone));
    }
}

#[test]
fn a_many_change_splice_that_does_not_fit_changes_nothing() {
    use crate::spots::{Spot, Spots};
    let mut b = Buffer::new("/x".into());
    splice(&mut b, 0, 0, "hello");
    let before = b.clone();
    let spots = Spots::pack([Spot { q0: 1, q1: 2, inserted: 1 }, Spot { q0: 4, q1: 6, inserted: 0 }]).unwrap();
    let past_the_end = BufferOp::Splices { spots: spots.clone(), text: "x".into(), origin: Origin::OtherFile };
    assert!(matches!(b.apply(&past_the_end), Err(Reject::Range { .. })));
    let spots = Spots::pack([Spot { q0: 1, q1: 2, inserted: 1 }]).unwrap();
    let miscounted = BufferOp::Splices { spots, text: "xy".into(), origin: Origin::OtherFile };
    assert!(matches!(b.apply(&miscounted), Err(Reject::BadSpots { .. })));
    assert_eq!(b, before);
}

#[test]
fn the_undo_count_follows_every_op_as_a_recount_would() {
    let mut b = Buffer::new("/x".into());
    // A small, fixed pseudo-random walk over the ops that change the
    // lists: the count kept along the way equals a recount each time.
    let mut next = numbers(12345u64);
    for i in 0..3000 {
        let len = b.len();
        let op = match next(10) {
            0..=3 => {
                let q0 = next(len + 1);
                let q1 = q0 + next(len - q0 + 1).min(20);
                let text = ["", "a", "héllo", "\n", "xyz"][next(5) as usize];
                BufferOp::Splice { q0, q1, text: text.into(), origin: Origin::Keyboard }
            }
            4 => BufferOp::Mark { group: GroupId(i) },
            5 | 6 => BufferOp::Undo,
            7 => BufferOp::Redo,
            8 => BufferOp::Rename { name: format!("/n{}", next(3)) },
            _ => BufferOp::UndoLimit { bytes: 200 + next(2000) },
        };
        let _ = b.apply(&op);
        assert_eq!(b.undo_bytes(), recount(&b), "after op {i}: {op:?}");
    }
    // What was kept still undoes, step by step, inside the text.
    while b.can_undo() {
        b.apply(&BufferOp::Undo).unwrap();
    }
    b.apply(&BufferOp::ForgetUndo).unwrap();
    assert_eq!(b.undo_bytes(), 0);
}

#[test]
fn past_its_limit_a_buffer_drops_its_oldest_undo_groups_and_keeps_the_newest() {
    let mut b = Buffer::new("/x".into());
    b.apply(&BufferOp::UndoLimit { bytes: 10_000 }).unwrap();
    let block = "x".repeat(1000);
    for n in 1..=30 {
        // Truncate and write again, as the 300 rounds did.
        mark(&mut b, n);
        let len = b.len();
        splice(&mut b, 0, len, "");
        splice(&mut b, 0, 0, &block);
    }
    assert!(b.undo_bytes() <= 10_000, "{} bytes held", b.undo_bytes());
    assert!(b.undo_bytes() > 9_000, "as much kept as the limit allows: {}", b.undo_bytes());
    assert_eq!(b.undo_bytes(), recount(&b));
    // The newest rounds undo; then there is nothing more to undo.
    let mut undone = 0;
    while b.can_undo() {
        b.apply(&BufferOp::Undo).unwrap();
        undone += 1;
    }
    assert!((5..30).contains(&undone), "{undone} rounds undone");
    assert_eq!(b.text.to_string(), block, "each kept round undoes to the block before it");
    assert!(b.differs_from_file(), "the empty text it was clean at can no longer be reached");
    // The body's size raises the bound: four times a 100 KB body.
    let mut b = Buffer::new("/y".into());
    b.apply(&BufferOp::UndoLimit { bytes: 1000 }).unwrap();
    splice(&mut b, 0, 0, &"y".repeat(100_000));
    for n in 1..=3 {
        mark(&mut b, n);
        splice(&mut b, 0, 100_000, &"z".repeat(100_000));
    }
    assert!(b.undo_bytes() > 300_000 && b.undo_bytes() <= 400_000, "{}", b.undo_bytes());
}

#[test]
fn the_newest_group_stays_however_large() {
    let mut b = Buffer::new("/x".into());
    splice(&mut b, 0, 0, &"ab".repeat(5000));
    b.apply(&BufferOp::Clean).unwrap();
    b.apply(&BufferOp::UndoLimit { bytes: 100 }).unwrap();
    mark(&mut b, 1);
    // One group of 5,000 substitutions, as one Edit makes.
    for q in (0..10_000).step_by(2) {
        splice(&mut b, q, q + 1, "c");
    }
    assert!(b.undo_bytes() > 5000 * CHANGE_COST, "{}", b.undo_bytes());
    b.apply(&BufferOp::Undo).unwrap();
    assert_eq!(b.text.to_string(), "ab".repeat(5000));
    assert!(!b.differs_from_file(), "undone to where it was clean");
    // Undone, it is the next redo, which stays too.
    b.apply(&BufferOp::Redo).unwrap();
    assert_eq!(b.text.to_string(), "cb".repeat(5000));
}

#[test]
fn a_snapshot_before_format_3_decodes_with_the_default_limit() {
    let mut node = crate::Node::server();
    crate::make::init_session(&mut node).unwrap();
    let w = crate::make::new_window(&mut node, None, None, "/tmp/old").unwrap();
    node.append(
        crate::Shard::Buffer(w.body),
        crate::Op::Buffer(BufferOp::Splice { q0: 0, q1: 0, text: "hello".into(), origin: Origin::Keyboard }),
    )
    .unwrap();
    let old = crate::format::older::snapshot(&node.state, 2);
    let back = crate::State::from_snapshot(&old).expect("format 2 decodes");
    assert_eq!(back.hash(), node.state.hash());
    let body = back.buffer(w.body).unwrap();
    assert_eq!((body.undo_limit(), body.undo_bytes()), (UNDO_LIMIT, recount(body)));
    assert!(body.undo_bytes() > 0);
    // A limit set is kept by this format's snapshots.
    node.append(crate::Shard::Buffer(w.body), crate::Op::Buffer(BufferOp::UndoLimit { bytes: 77 })).unwrap();
    let back = crate::State::from_snapshot(&node.state.to_snapshot()).unwrap();
    assert_eq!(back.buffer(w.body).unwrap().undo_limit(), 77);
}
