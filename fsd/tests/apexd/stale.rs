//! What a stuck leader made for a proposal taken from it does not stay
//! behind: a UI applies a routed proposal that makes shards, then stalls
//! before it sends them; at the deadline the server takes the layout back
//! and applies the proposal itself. Whether the UI, awake, first sends
//! what it made or first reads that the layout went, the shards it made
//! for the proposal end up deleted or never made: no window in no
//! layout, no column tag nothing shows, and nothing "recovered" of them.
//! On the in-memory hub and links of `chaos.rs`.

use crate::chaos::{window, World, DEADLINE};
use apex_core::{AttachmentKind, Proposal};
use apex_fsd::attach::hub::Written;
use apex_fsd::attach::link::Event;

#[test]
fn what_a_stuck_leader_made_for_a_proposal_taken_from_it_does_not_stay_behind() {
    // The last a second window on a body the UI leads, which the server,
    // leading only the layout, cannot make.
    let proposals = |body| {
        [
            Proposal::CreateWindow { body: None, column: None, name: "/tmp/late".into() },
            Proposal::CreateColumn { x: None },
            Proposal::CreateWindow { body: Some(body), column: None, name: String::new() },
        ]
    };
    for sends_first in [true, false] {
        for seed in 0..3 {
            let mut w = World::new(20 + seed);
            let ui = w.join(AttachmentKind::Ui);
            w.settle();
            let body = window(&mut w, ui, "/tmp/shown");
            let proposal = proposals(body)[seed as usize].clone();
            let what = format!("{proposal:?}, sending first: {sends_first}");
            let Written::Wait(_, mut outcome) =
                apex_fsd::route::submit(&mut w.s, "a tool's write", proposal, None, w.now)
            else {
                panic!("routed to the UI that leads the layout")
            };
            // The UI applies it, and stalls before sending what it made.
            w.recv(ui);
            w.advance(DEADLINE);
            let outcome = outcome.try_recv().expect("answered at the deadline");
            assert!(outcome.is_ok() || seed == 2, "{what}: applied by the server at the deadline: {outcome:?}");
            // Awake, it sends what it made (the layout's part is fenced),
            // or reads first that the layout went.
            match sends_first {
                true => _ = w.send(ui),
                false => _ = w.recv(ui),
            }
            w.quiesce();
            let events = w.link(ui).events();
            assert!(!events.iter().any(|e| matches!(e, Event::Recovered { .. })), "{what}: {events:?}");
            let state = &w.s.view.state;
            let unplaced: Vec<_> = state.windows.keys().filter(|win| !state.layout.numbers.contains_key(win)).collect();
            assert!(unplaced.is_empty(), "{what}: windows in no layout: {unplaced:?}");
            // Every buffer is a window's tag or body, or a column's tag or
            // the row's.
            let shown = |b: &apex_core::BufferId| {
                state.windows.values().any(|win| win.tag == *b || win.body == *b)
                    || state.layout.columns.iter().any(|c| c.tag == *b)
                    || state.layout.row_tag == Some(*b)
            };
            let stray: Vec<_> = state.buffers.iter().filter(|(b, _)| !shown(b)).map(|(_, b)| &b.name).collect();
            assert!(stray.is_empty(), "{what}: buffers nothing shows: {stray:?}");
            // No view of a window that is gone.
            let views: Vec<_> = state.buffers[&body].views.keys().collect();
            let gone = |v: &&apex_core::ViewId| match v {
                apex_core::ViewId::WindowBody(win) => !state.windows.contains_key(win),
                _ => false,
            };
            assert!(!views.iter().any(gone), "{what}: {views:?}");
        }
    }
}
