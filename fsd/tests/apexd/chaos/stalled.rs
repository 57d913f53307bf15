//! A holder that applied a routed proposal making shards, then stalled
//! past the deadline: the daemon made them itself meanwhile, so what the
//! holder made, sent when it wakes, is discarded, not left beside (a
//! window in no layout, a column tag nothing shows, a second buffer of
//! the name).

use super::world::*;

/// Every window placed in the layout, and each name in one window.
fn one_placed_window_named(w: &World, name: &str) {
    let state = &w.s.view().state;
    for id in state.windows.keys() {
        assert!(state.layout.find(*id).is_some(), "window {id} is in no layout");
    }
    let named =
        state.windows.values().filter(|win| state.buffers.get(&win.body).is_some_and(|b| b.name == name)).count();
    assert_eq!(named, 1, "one window of {name}");
    let buffers = state.buffers.values().filter(|b| b.name == name).count();
    assert_eq!(buffers, 1, "one buffer of {name}");
}

/// The UI gets `p` routed, applies it, and stops before sending what it
/// made; the deadline passes and the daemon applies it; the UI wakes.
fn stalled_after_applying(seed: u64, p: Proposal) -> (World, usize) {
    let mut w = World::new(seed);
    let ui = w.join(AttachmentKind::Ui);
    w.settle();
    window(&mut w, ui, "/tmp/first");
    let tool = w.join(AttachmentKind::Tool);
    w.settle();
    w.link(tool).propose(p);
    w.send(tool);
    w.recv(ui);
    w.pause(ui, true);
    w.advance(DEADLINE);
    w.settle();
    w.pause(ui, false);
    w.settle();
    (w, ui)
}

#[test]
fn a_routed_window_its_stalled_holder_made_is_discarded_when_it_wakes() {
    let p = Proposal::CreateWindow { body: None, column: None, name: "/tmp/routed".into(), near: None };
    let (mut w, ui) = stalled_after_applying(31, p);
    one_placed_window_named(&w, "/tmp/routed");
    let recovered = w.s.view().state.buffers.values().filter(|b| b.name.ends_with("+Recovered")).count();
    assert_eq!(recovered, 0, "nothing was typed: nothing to recover");
    w.quiesce();
    one_placed_window_named(&w, "/tmp/routed");
    assert!(w.link(ui).node().is_some());
}

#[test]
fn a_routed_buffer_its_stalled_holder_made_is_discarded_when_it_wakes() {
    let p = Proposal::CreateBuffer { name: "/tmp/routed-buffer".into(), text: "made\n".into() };
    let (mut w, _) = stalled_after_applying(32, p);
    w.quiesce();
    let state = &w.s.view().state;
    let named: Vec<_> = state.buffers.values().filter(|b| b.name == "/tmp/routed-buffer").collect();
    assert_eq!(named.len(), 1, "one buffer of the name");
    assert_eq!(named[0].text.to_string(), "made\n");
}

#[test]
fn a_routed_column_its_stalled_holder_made_is_discarded_when_it_wakes() {
    let p = Proposal::CreateColumn { x: None };
    let (mut w, _) = stalled_after_applying(33, p);
    w.quiesce();
    let state = &w.s.view().state;
    let shown: Vec<BufferId> = state.layout.columns.iter().map(|c| c.tag).collect();
    for (id, b) in &state.buffers {
        let in_window = state.windows.values().any(|win| win.tag == *id || win.body == *id);
        let is_row_tag = state.layout.row_tag == Some(*id);
        assert!(in_window || shown.contains(id) || is_row_tag, "buffer {id} ({:?}) is shown nowhere", b.name);
    }
}

/// The general form: a UI makes a window of its own and types in it,
/// then stalls, and its layout lease goes to a newcomer at the deadline.
/// The window's placement is fenced when it wakes: its body is shown in
/// a window the new leader places, and the window nothing placed goes.
#[test]
fn a_window_a_stalled_leader_made_is_placed_by_the_next_leader_with_its_text() {
    let mut w = World::new(34);
    let a = w.join(AttachmentKind::Ui);
    w.settle();
    window(&mut w, a, "/tmp/first");
    w.pause(a, true);
    let node = w.link(a).node_mut().unwrap();
    let made = make::new_window(node, None, None, "/tmp/made-while-stalled").unwrap();
    let op = BufferOp::Splice { q0: 0, q1: 0, text: "typed\n".into(), origin: Origin::Keyboard };
    node.append(Shard::Buffer(made.body), Op::Buffer(op)).unwrap();
    let newcomer = w.join(AttachmentKind::Ui);
    w.settle();
    w.advance(DEADLINE);
    w.settle();
    assert!(w.link(newcomer).leads(Shard::Layout), "reclaimed at the deadline and granted");
    w.pause(a, false);
    w.settle();
    w.quiesce();
    let state = &w.s.view().state;
    for id in state.windows.keys() {
        assert!(state.layout.find(*id).is_some(), "window {id} is in no layout");
    }
    let showing: Vec<_> = state
        .windows
        .values()
        .filter(|win| state.buffers.get(&win.body).is_some_and(|b| b.text.to_string() == "typed\n"))
        .collect();
    assert_eq!(showing.len(), 1, "the text typed is in one placed window");
}

/// The other way round: a leader deletes a window, then stalls with a
/// routed proposal unanswered, and the server takes the layout back at
/// the deadline (only the layout: the window's shards are still its
/// own). Its shards' deletion is taken when it wakes, its unplacing
/// fenced: the server drops the place of the window that is gone.
#[test]
fn a_window_a_stalled_leader_deleted_leaves_no_place_behind() {
    let mut w = World::new(35);
    let a = w.join(AttachmentKind::Ui);
    w.settle();
    window(&mut w, a, "/tmp/kept");
    let doomed = {
        let node = w.link(a).node_mut().unwrap();
        make::new_window(node, None, None, "/tmp/doomed").unwrap().window
    };
    w.settle();
    let tool = w.join(AttachmentKind::Tool);
    w.settle();
    w.link(tool).propose(Proposal::CreateColumn { x: None });
    w.send(tool);
    w.pause(a, true);
    make::delete_window(w.link(a).node_mut().unwrap(), doomed).unwrap();
    w.advance(DEADLINE);
    w.settle();
    assert_eq!(w.s.view().log.lease(Shard::Layout).unwrap().holder, AttachmentId::SERVER, "reclaimed");
    w.pause(a, false);
    w.quiesce();
    let state = &w.s.view().state;
    assert!(!state.windows.contains_key(&doomed), "the window is gone");
    assert!(state.layout.find(doomed).is_none(), "and so is its place");
    assert!(!state.layout.numbers.contains_key(&doomed), "and its number");
}
