//! The column layout policy (`cols.rs`) through real layout entries: a
//! thousand windows in one column get distinct, ordered places, and any
//! run of new, closed and moved windows keeps them so.

use apex_core::propose::{Created, Proposal};
use apex_core::*;
use proptest::prelude::*;

fn session() -> Node {
    let mut n = Node::server();
    make::init_session(&mut n).unwrap();
    n
}

fn new_window(n: &mut Node, column: usize) -> WindowId {
    let column = Some(n.state.layout.columns[column].id);
    match propose::apply(n, &Proposal::CreateWindow { body: None, column, name: String::new() }).unwrap().created {
        Created::Window(w) => w.window,
        other => panic!("{other:?}"),
    }
}

/// Every column's windows have strictly increasing tops, the first at 0.
fn check(n: &Node) {
    for c in &n.state.layout.columns {
        let ys: Vec<u32> = c.windows.iter().map(|p| p.y.0).collect();
        assert!(ys.windows(2).all(|p| p[0] < p[1]), "tops not distinct and ordered: {ys:?}");
        assert!(ys.first().is_none_or(|y| *y == 0), "the first window starts at the top: {ys:?}");
        assert!(ys.iter().all(|y| *y <= Frac::ONE.0));
    }
}

#[test]
fn a_thousand_windows_in_one_column_get_distinct_places() {
    let mut n = session();
    for _ in 0..1000 {
        new_window(&mut n, 0);
    }
    assert_eq!(n.state.layout.columns[0].windows.len(), 1000);
    check(&n);
}

#[derive(Clone, Debug)]
enum Step {
    New(usize),
    Close(usize),
    Move(usize, usize, u32),
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        4 => (0usize..2).prop_map(Step::New),
        1 => any::<usize>().prop_map(Step::Close),
        2 => (any::<usize>(), 0usize..2, 0u32..=Frac::ONE.0).prop_map(|(w, c, y)| Step::Move(w, c, y)),
    ]
}

proptest! {
    #[test]
    fn any_run_of_new_close_and_move_keeps_places_distinct(steps in prop::collection::vec(step(), 1..200)) {
        let mut n = session();
        for s in steps {
            let windows: Vec<WindowId> = n.state.layout.numbers.keys().copied().collect();
            match s {
                Step::New(c) => { new_window(&mut n, c); }
                Step::Close(i) if !windows.is_empty() => {
                    let w = windows[i % windows.len()];
                    propose::apply(&mut n, &Proposal::DeleteWindow { window: w }).unwrap();
                }
                Step::Move(i, c, y) if !windows.is_empty() => {
                    let w = windows[i % windows.len()];
                    let col = &n.state.layout.columns[c];
                    let y = cols::drop_y(col, Some(w), Frac(y));
                    let column = col.id;
                    propose::apply(&mut n, &Proposal::MoveWindow { window: w, column, y }).unwrap();
                }
                _ => {}
            }
            check(&n);
        }
    }
}
