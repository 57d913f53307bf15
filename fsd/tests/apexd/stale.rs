//! What a stuck leader made for a proposal taken from it does not stay
//! behind: a UI applies a routed proposal that makes shards, then stalls
//! before it sends them; at the deadline the server takes the layout back
//! and applies the proposal itself. When the UI wakes and sends what it
//! made, the shards it made for the proposal are deleted, not left in no
//! layout (an orphan window, a second buffer of the name). On the
//! in-memory hub and links of `chaos.rs`.

use crate::chaos::{World, DEADLINE};
use apex_core::{AttachmentKind, Proposal};
use apex_fsd::attach::hub::Written;

#[test]
fn what_a_stuck_leader_made_for_a_proposal_taken_from_it_is_deleted() {
    let proposals = [
        Proposal::CreateWindow { body: None, column: None, name: "/tmp/late".into() },
        Proposal::CreateBuffer { name: "/tmp/late".into(), text: "made once\n".into() },
        Proposal::CreateColumn { x: None },
    ];
    for (seed, proposal) in proposals.into_iter().enumerate() {
        let mut w = World::new(20 + seed as u64);
        let ui = w.join(AttachmentKind::Ui);
        w.settle();
        let what = format!("{proposal:?}");
        let Written::Wait(_, mut outcome) = apex_fsd::route::submit(&mut w.s, "a tool's write", proposal, None, w.now)
        else {
            panic!("routed to the UI that leads the layout")
        };
        // The UI applies it, and stalls before sending what it made.
        w.recv(ui);
        w.advance(DEADLINE);
        assert!(outcome.try_recv().is_ok_and(|o| o.is_ok()), "{what}: applied by the server at the deadline");
        // It wakes and sends what it made: the layout's part is fenced.
        w.send(ui);
        w.quiesce();
        let state = &w.s.view.state;
        let placed: Vec<_> = state.windows.keys().filter(|win| !state.layout.numbers.contains_key(win)).collect();
        assert!(placed.is_empty(), "{what}: windows in no layout: {placed:?}");
        let named = state.buffers.values().filter(|b| b.name == "/tmp/late").count();
        assert!(named <= 1, "{what}: {named} buffers named /tmp/late");
        // Every buffer is a window's tag or body, a column's tag or the
        // row's, or the one buffer the proposal made.
        let shown = |b: &apex_core::BufferId| {
            state.windows.values().any(|win| win.tag == *b || win.body == *b)
                || state.layout.columns.iter().any(|c| c.tag == *b)
                || state.layout.row_tag == Some(*b)
                || state.buffers[b].name == "/tmp/late"
        };
        let stray: Vec<_> = state.buffers.keys().filter(|b| !shown(b)).collect();
        assert!(stray.is_empty(), "{what}: buffers nothing shows: {stray:?}");
    }
}
