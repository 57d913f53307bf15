//! Undo and redo live in the state: they work the same on every replica and
//! after leadership has moved.

use crate::sim::Sim;
use apex_core::*;

fn op(o: BufferOp) -> Op {
    Op::Buffer(o)
}

fn splice(q0: u64, q1: u64, text: &str) -> Op {
    op(BufferOp::Splice { q0, q1, text: text.into(), origin: Origin::Keyboard })
}

fn text(n: &Node, b: BufferId) -> String {
    n.state.buffer(b).unwrap().text.to_string()
}

#[test]
fn undo_and_redo_groups_and_dirtiness() {
    let mut n = Node::server();
    let b = n.create_buffer_as("f").unwrap();
    let s = Shard::Buffer(b);
    n.append(s, splice(0, 0, "hello")).unwrap();
    n.append(s, op(BufferOp::Clean)).unwrap();
    let g = n.new_group().unwrap();
    n.append(s, op(BufferOp::Mark { group: g })).unwrap();
    n.append(s, splice(5, 5, " world")).unwrap();
    n.append(s, splice(0, 1, "J")).unwrap();
    assert_eq!(text(&n, b), "Jello world");
    assert!(n.state.buffer(b).unwrap().dirty);
    n.append(s, op(BufferOp::Undo)).unwrap();
    assert_eq!(text(&n, b), "hello", "the whole group undoes at once");
    assert!(!n.state.buffer(b).unwrap().dirty, "back at the clean point");
    n.append(s, op(BufferOp::Undo)).unwrap();
    assert_eq!(text(&n, b), "");
    assert!(n.state.buffer(b).unwrap().dirty);
    assert!(matches!(n.append(s, op(BufferOp::Undo)), Err(Reject::NothingToUndo)));
    n.append(s, op(BufferOp::Redo)).unwrap();
    n.append(s, op(BufferOp::Redo)).unwrap();
    assert_eq!(text(&n, b), "Jello world");
    assert!(matches!(n.append(s, op(BufferOp::Redo)), Err(Reject::NothingToRedo)));
    n.append(s, op(BufferOp::Undo)).unwrap();
    // A fresh edit clears redo, as in acme.
    n.append(s, splice(0, 0, ">")).unwrap();
    assert!(matches!(n.append(s, op(BufferOp::Redo)), Err(Reject::NothingToRedo)));
    // Every undo and redo is an edit: versions count them.
    assert_eq!(n.state.buffer(b).unwrap().version, 3 + 2 + 2 + 2 + 2 + 1);
}

#[test]
fn undo_moves_views_like_any_edit() {
    let mut n = Node::server();
    let b = n.create_buffer_as("f").unwrap();
    let s = Shard::Buffer(b);
    let v = ViewId::WindowBody(WindowId(1));
    n.append(s, splice(0, 0, "abcdef")).unwrap();
    n.append(s, op(BufferOp::ViewAdd { view: v })).unwrap();
    let g = n.new_group().unwrap();
    n.append(s, op(BufferOp::Mark { group: g })).unwrap();
    n.append(s, splice(1, 1, "XYZ")).unwrap();
    n.append(s, op(BufferOp::Select { view: v, q0: 6, q1: 7 })).unwrap();
    n.append(s, op(BufferOp::Undo)).unwrap();
    let view = n.state.buffer(b).unwrap().views[&v];
    assert_eq!((view.q0, view.q1), (3, 4), "the selection stays on the same text");
}

#[test]
fn undo_works_after_leadership_moves() {
    let mut sim = Sim::new(2);
    let b = sim.clients[0].node.create_buffer_as("f").unwrap();
    let s = Shard::Buffer(b);
    let g = sim.clients[0].node.new_group().unwrap();
    sim.clients[0].node.append(s, op(BufferOp::Mark { group: g })).unwrap();
    sim.clients[0].node.append(s, splice(0, 0, "typed by the first UI")).unwrap();
    sim.ship(0);
    let to = sim.clients[1].id();
    assert!(sim.transfer(s, to));
    sim.clients[1].node.append(s, op(BufferOp::Undo)).unwrap();
    sim.ship(1);
    sim.check();
    assert_eq!(text(&sim.server, b), "");
    sim.clients[1].node.append(s, op(BufferOp::Redo)).unwrap();
    sim.ship(1);
    sim.check();
    assert_eq!(text(&sim.follower, b), "typed by the first UI");
}

#[test]
fn forgetting_undo_leaves_nothing_to_undo_and_the_text_clean() {
    let mut n = Node::server();
    let b = n.create_buffer_as("f").unwrap();
    let s = Shard::Buffer(b);
    n.append(s, splice(0, 0, "hello")).unwrap();
    n.append(s, op(BufferOp::Undo)).unwrap();
    n.append(s, op(BufferOp::Redo)).unwrap();
    let g = n.new_group().unwrap();
    n.append(s, op(BufferOp::Mark { group: g })).unwrap();
    n.append(s, splice(5, 5, "!")).unwrap();
    n.append(s, op(BufferOp::Undo)).unwrap();
    assert!(n.state.buffer(b).unwrap().can_undo() && n.state.buffer(b).unwrap().can_redo());
    // acme's ctl clean: Clean, then the history is forgotten.
    n.append(s, op(BufferOp::Clean)).unwrap();
    n.append(s, op(BufferOp::ForgetUndo)).unwrap();
    let buf = n.state.buffer(b).unwrap();
    assert!(!buf.can_undo() && !buf.can_redo() && !buf.dirty);
    assert!(matches!(n.append(s, op(BufferOp::Undo)), Err(Reject::NothingToUndo)));
    // The next edit is undoable and makes it dirty; undoing it is clean again.
    n.append(s, splice(0, 0, ">")).unwrap();
    assert!(n.state.buffer(b).unwrap().dirty);
    n.append(s, op(BufferOp::Undo)).unwrap();
    assert_eq!(text(&n, b), "hello");
    assert!(!n.state.buffer(b).unwrap().dirty);
}

/// A long text goes into the log in entries of at most `SPLICE_MAX`
/// bytes, whole runes each, and undoes as the one change it was; an entry
/// with more is refused where entries are made, and a long snarf goes in
/// pieces too.
#[test]
fn a_long_text_is_several_bounded_entries_that_undo_as_one() {
    let mut n = Node::server();
    make::init_session(&mut n).unwrap();
    let b = n.create_buffer_as("f").unwrap();
    let s = Shard::Buffer(b);
    n.append(s, splice(0, 0, "before after")).unwrap();
    // Runes of one to four bytes, so that pieces are cut between runes.
    let long = "aé☺𝄞".repeat((2 * op::SPLICE_MAX + 1000) / 10);
    let before = n.log.last(s);
    let p = Proposal::Replace { buffer: b, version: 1, q0: 6, q1: 7, text: long.clone(), origin: Origin::Keyboard };
    propose::apply(&mut n, &p).unwrap();
    let made: Vec<_> = n.log.entries_after(s, before).unwrap().cloned().collect();
    let splices: Vec<&String> = made
        .iter()
        .filter_map(|e| match &e.op {
            Op::Buffer(BufferOp::Splice { text, .. }) => Some(text),
            _ => None,
        })
        .collect();
    assert_eq!(splices.len(), 3, "{} entries", made.len());
    assert!(splices.iter().all(|t| t.len() <= op::SPLICE_MAX));
    assert!(text(&n, b) == format!("before{long}after"), "the text is the replacement");
    n.append(s, op(BufferOp::Undo)).unwrap();
    assert_eq!(text(&n, b), "before after", "one undo takes all of it back");
    // Made by hand, a longer entry is refused, and changes nothing.
    let over = "x".repeat(op::SPLICE_MAX + 1);
    assert!(matches!(n.append(s, splice(0, 0, &over)), Err(Reject::SpliceTooLong { .. })));
    assert_eq!(text(&n, b), "before after");
    // A snarf in pieces is the whole snarf.
    let snarf = "s☺".repeat(op::SPLICE_MAX / 2);
    propose::apply(&mut n, &Proposal::Snarf { text: snarf.clone() }).unwrap();
    assert!(n.state.layout.snarf == snarf, "the snarf is whole");
    let at = snarf.len() as u64;
    propose::apply(&mut n, &Proposal::SnarfMore { at, text: "!".into() }).unwrap();
    assert_eq!(n.state.layout.snarf.len(), snarf.len() + 1);
    // One that does not follow (another snarf came between) is refused.
    let stale = Proposal::SnarfMore { at, text: "?".into() };
    assert!(matches!(propose::apply(&mut n, &stale), Err(Reject::SnarfMoved { .. })));
    assert_eq!(n.state.layout.snarf.len(), snarf.len() + 1);
}
