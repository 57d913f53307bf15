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
    match propose::apply(n, &Proposal::CreateWindow { body: None, column, name: String::new(), near: None })
        .unwrap()
        .created
    {
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
    Grow(usize, u8, u32),
    Sort(usize),
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        4 => (0usize..2).prop_map(Step::New),
        1 => any::<usize>().prop_map(Step::Close),
        2 => (any::<usize>(), 0usize..2, 0u32..=Frac::ONE.0).prop_map(|(w, c, y)| Step::Move(w, c, y)),
        1 => (any::<usize>(), 1u8..=3, 1u32..100_000).prop_map(|(w, b, line)| Step::Grow(w, b, line)),
        1 => (0usize..2).prop_map(Step::Sort),
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
                Step::Grow(i, button, line) if !windows.is_empty() => {
                    let w = windows[i % windows.len()];
                    let (ci, _) = n.state.layout.find(w).unwrap();
                    let how = [cols::Grow::Some, cols::Grow::Most, cols::Grow::Full][button as usize - 1];
                    let col = &n.state.layout.columns[ci];
                    let tops = cols::grow(col, w, how, line);
                    let column = col.id;
                    propose::apply(&mut n, &Proposal::Arrange { column, tops }).unwrap();
                }
                Step::Sort(c) => {
                    let col = &n.state.layout.columns[c];
                    let tops = cols::sorted(col, |w| format!("{:?}", w.0 % 7));
                    let column = col.id;
                    propose::apply(&mut n, &Proposal::Arrange { column, tops }).unwrap();
                }
                _ => {}
            }
            check(&n);
        }
    }
}

#[test]
fn an_arrangement_must_cover_the_column_with_rising_tops() {
    let mut n = session();
    let (a, b) = (new_window(&mut n, 0), new_window(&mut n, 0));
    let column = n.state.layout.columns[0].id;
    let hash = n.state.hash();
    for tops in [
        vec![(a, Frac(0))],
        vec![(a, Frac(0)), (b, Frac(0))],
        vec![(b, Frac(10)), (a, Frac(0))],
        vec![(a, Frac(5)), (b, Frac(10))],
        vec![(a, Frac(0)), (b, Frac(2_000_000))],
    ] {
        let e = propose::apply(&mut n, &Proposal::Arrange { column, tops }).unwrap_err();
        assert!(e.to_string().contains("tops rising from 0"), "{e}");
        assert_eq!(n.state.hash(), hash, "a refused arrangement changes nothing");
    }
    propose::apply(&mut n, &Proposal::Arrange { column, tops: vec![(b, Frac(0)), (a, Frac(10))] }).unwrap();
    let order: Vec<WindowId> = n.state.layout.columns[0].windows.iter().map(|p| p.window).collect();
    assert_eq!(order, vec![b, a]);
}

fn apply_drag(n: &mut Node, window: WindowId, d: cols::Drag) {
    let p = match d {
        cols::Drag::Nothing => return,
        cols::Drag::Move { column, y } => Proposal::MoveWindow { window, column, y },
        cols::Drag::Arrange { column, tops } => Proposal::Arrange { column, tops },
    };
    propose::apply(n, &p).unwrap();
}

#[test]
fn a_dragged_layout_box_moves_shuffles_or_resizes_as_acme_s() {
    let mut n = session();
    let (a, b, c) = (new_window(&mut n, 0), new_window(&mut n, 0), new_window(&mut n, 0));
    let (left, right) = (n.state.layout.columns[0].id, n.state.layout.columns[1].id);
    let line = Frac::ONE.0 / 50;
    let tops = |n: &Node, col: usize| {
        n.state.layout.columns[col].windows.iter().map(|p| (p.window, p.y.0)).collect::<Vec<_>>()
    };
    let before = tops(&n, 0);
    assert_eq!(before.iter().map(|(w, _)| *w).collect::<Vec<_>>(), [a, b, c]);
    // Let go within its own room, just below the one above: its top moves
    // there (the one above shrinks), nothing else.
    let b_top = before[1].1;
    let d = cols::drag(&n.state.layout, b, left, Frac(b_top - 1000), line);
    assert!(matches!(d, cols::Drag::Arrange { .. }), "{d:?}");
    apply_drag(&mut n, b, d);
    assert_eq!(tops(&n, 0), [(a, 0), (b, b_top - 1000), (c, before[2].1)]);
    // Never above the tag of the one above.
    let d = cols::drag(&n.state.layout, b, left, Frac(1), line);
    apply_drag(&mut n, b, d);
    assert_eq!(tops(&n, 0)[1], (b, line));
    // Let go below its own bottom: shuffled down, into c's room.
    let d = cols::drag(&n.state.layout, a, left, Frac(Frac::ONE.0 - 10), line);
    apply_drag(&mut n, a, d);
    let order: Vec<WindowId> = tops(&n, 0).iter().map(|(w, _)| *w).collect();
    assert_eq!(order, [b, c, a], "a went to the bottom");
    check(&n);
    // Into the other column, where it falls.
    let d = cols::drag(&n.state.layout, c, right, Frac(Frac::ONE.0 / 2), line);
    assert_eq!(d, cols::Drag::Move { column: right, y: Frac::ZERO }, "an empty column takes it at the top");
    apply_drag(&mut n, c, d);
    assert_eq!(tops(&n, 1), [(c, 0)]);
    // The only window of a column stays where it is.
    assert_eq!(cols::drag(&n.state.layout, c, right, Frac(Frac::ONE.0 / 2), line), cols::Drag::Nothing);
    check(&n);

    // Columns: the first does not move within its room; the second's edge
    // moves, leaving each at least `min`; past the first, it goes before.
    let min = Frac::ONE.0 / 10;
    assert_eq!(cols::drag_column(&n.state.layout, left, Frac(Frac::ONE.0 / 4), min), None);
    let x = cols::drag_column(&n.state.layout, right, Frac(Frac::ONE.0 * 3 / 4), min).unwrap();
    assert_eq!(x, Frac(Frac::ONE.0 * 3 / 4));
    let x = cols::drag_column(&n.state.layout, right, Frac(5), min);
    assert_eq!(x, Some(Frac(min)), "not narrower than min");
    propose::apply(&mut n, &Proposal::MoveColumn { column: right, x: Frac(Frac::ONE.0 * 3 / 4) }).unwrap();
    assert_eq!(n.state.layout.columns[1].x, Frac(Frac::ONE.0 * 3 / 4));
    propose::apply(&mut n, &Proposal::MoveColumn { column: left, x: Frac(Frac::ONE.0 * 7 / 8) }).unwrap();
    assert_eq!(n.state.layout.columns[0].id, right, "the columns reordered");
}

#[test]
fn a_column_dragged_past_the_first_keeps_every_column_some_room() {
    let mut n = session();
    propose::apply(&mut n, &Proposal::CreateColumn { x: None }).unwrap();
    let min = Frac::ONE.0 / 20;
    let third = n.state.layout.columns[2].id;
    let x = cols::drag_column(&n.state.layout, third, Frac(1), min).expect("it moves");
    assert_eq!(x, Frac(min), "past the first column's left edge only by min");
    propose::apply(&mut n, &Proposal::MoveColumn { column: third, x }).unwrap();
    let xs: Vec<u32> = n.state.layout.columns.iter().map(|c| c.x.0).collect();
    assert!(xs.windows(2).all(|p| p[1] >= p[0] + min), "{xs:?}");
}

/// What a UI 720 px tall with 15 px lines would draw: each window's tag
/// one line, its body showing its text's lines (no wrapping) from the top.
fn draw(n: &mut Node) {
    let (height, line, border) = (720u32, 15u32, 2u32);
    let px = |f: Frac| (u64::from(f.0) * u64::from(height) / u64::from(Frac::ONE.0)) as u32;
    let mut windows = std::collections::BTreeMap::new();
    for c in &n.state.layout.columns {
        for (i, p) in c.windows.iter().enumerate() {
            let top = if i == 0 { 0 } else { px(p.y) };
            let bottom = c.windows.get(i + 1).map_or(height, |q| px(q.y) - border).max(top);
            let tag_end = (top + line).min(bottom);
            let body_top = tag_end + u32::from(tag_end + 1 + line <= bottom);
            let max_lines = (bottom - body_top) / line;
            let w = n.state.window(p.window).unwrap();
            let text = n.state.buffer(w.body).unwrap().text.to_string();
            let text_lines = text.split_inclusive('\n').count() as u32;
            let body = show::Shown { org: 0, end: 0, lines: text_lines.min(max_lines), max_lines };
            windows.insert(p.window, cols::Framed { tag_lines: 1, body });
        }
    }
    n.lines = Some(cols::Lines { height, line, border, windows });
}

fn body_lines(n: &Node, w: WindowId) -> u32 {
    n.lines.as_ref().unwrap().windows[&w].body.max_lines
}

fn fill(n: &mut Node, w: WindowId, text: &str) {
    let body = n.state.window(w).unwrap().body;
    let version = n.state.buffer(body).unwrap().version;
    let p = Proposal::Insert { buffer: body, version, q0: 0, text: text.into(), origin: op::Origin::OtherFile };
    propose::apply(n, &p).unwrap();
}

#[test]
fn a_new_window_takes_what_the_last_window_s_text_leaves_as_acme_s_coladd() {
    let mut n = session();
    // A directory's window showing one line (acme's start, seen side by side).
    let dir = new_window(&mut n, 1);
    fill(&mut n, dir, "acme.log\tns/\n");
    draw(&mut n);
    let first = new_window(&mut n, 1);
    draw(&mut n);
    assert_eq!(body_lines(&n, dir), 1, "the landing window keeps the line its text fills");
    assert!(body_lines(&n, first) > 40, "the new window takes the rest");
    // An empty window keeps only its tag.
    let second = new_window(&mut n, 1);
    draw(&mut n);
    assert_eq!(body_lines(&n, first), 0);
    assert!(body_lines(&n, second) > 40);
    // A full window is split half way down its body.
    fill(&mut n, second, &"line\n".repeat(200));
    draw(&mut n);
    let before = body_lines(&n, second);
    let third = new_window(&mut n, 1);
    draw(&mut n);
    let (kept, made) = (body_lines(&n, second), body_lines(&n, third));
    assert!(kept.abs_diff(before / 2) <= 1 && made.abs_diff(before / 2) <= 2, "{before} -> {kept} + {made}");
    check(&n);
    // A landing window of three lines or fewer is grown first.
    let mut n2 = session();
    let small = {
        // One column: a big full window above a small full one.
        let big = new_window(&mut n2, 0);
        fill(&mut n2, big, &"x\n".repeat(200));
        let small = new_window(&mut n2, 0);
        fill(&mut n2, small, &"x\n".repeat(200));
        let col = n2.state.layout.columns[0].id;
        propose::apply(&mut n2, &Proposal::Arrange { column: col, tops: vec![(big, Frac(0)), (small, Frac(950_000))] })
            .unwrap();
        small
    };
    draw(&mut n2);
    assert!(body_lines(&n2, small) <= 3);
    let newest = new_window(&mut n2, 0);
    draw(&mut n2);
    // Grown first, then split where its body's middle was before: the
    // new window keeps what room is left below (acme's y is taken first).
    assert!(body_lines(&n2, small) > 3, "grown before it was split: {}", body_lines(&n2, small));
    assert_eq!(body_lines(&n2, newest), 1);
    check(&n2);
}

#[test]
fn hundreds_of_windows_placed_by_what_is_drawn_stay_ordered() {
    let mut n = session();
    for i in 0..300 {
        let w = new_window(&mut n, i % 2);
        if i % 3 == 0 {
            fill(&mut n, w, &"x\n".repeat(i % 50 + 1));
        }
        draw(&mut n);
        check(&n);
    }
}

fn new_window_near(n: &mut Node, column: usize, near: WindowId) -> WindowId {
    let column = Some(n.state.layout.columns[column].id);
    let p = Proposal::CreateWindow { body: None, column, name: String::new(), near: Some(near) };
    match propose::apply(n, &p).unwrap().created {
        Created::Window(w) => w.window,
        other => panic!("{other:?}"),
    }
}

fn span(n: &Node, w: WindowId) -> (u32, u32) {
    let c = &n.state.layout.columns[n.state.layout.find(w).unwrap().0];
    let i = c.windows.iter().position(|p| p.window == w).unwrap();
    (c.windows[i].y.0, c.windows.get(i + 1).map_or(Frac::ONE.0, |p| p.y.0))
}

#[test]
fn a_file_opened_from_a_window_goes_into_the_most_empty_space_or_splits_as_acme_s_makenewwindow() {
    let mut n = session();
    // Two full windows, the upper one much bigger: a file opened from the
    // lower one splits the bigger half way down (not the last window).
    let upper = new_window(&mut n, 0);
    fill(&mut n, upper, &"x\n".repeat(300));
    let lower = new_window(&mut n, 0);
    fill(&mut n, lower, &"x\n".repeat(300));
    let col = n.state.layout.columns[0].id;
    let arrange = Proposal::Arrange { column: col, tops: vec![(upper, Frac(0)), (lower, Frac(750_000))] };
    propose::apply(&mut n, &arrange).unwrap();
    draw(&mut n);
    let opened = new_window_near(&mut n, 0, lower);
    let (o0, o1) = span(&n, opened);
    assert!(o0.abs_diff(375_000) < 20_000 && o1 == 750_000, "half way down the biggest: {o0}..{o1}");
    // The new window is empty: the next goes into its empty space, below
    // its (no) text, leaving it its tag.
    draw(&mut n);
    let next = new_window_near(&mut n, 0, lower);
    draw(&mut n);
    assert_eq!(body_lines(&n, opened), 0);
    assert_eq!(span(&n, next).1, 750_000);
    // An upper window with most of the column and only two lines of text:
    // the new window goes right below its text.
    let mut n = session();
    let notes = new_window(&mut n, 0);
    fill(&mut n, notes, "one\ntwo\n");
    let other = new_window(&mut n, 0);
    fill(&mut n, other, &"x\n".repeat(300));
    let col = n.state.layout.columns[0].id;
    let arrange = Proposal::Arrange { column: col, tops: vec![(notes, Frac(0)), (other, Frac(800_000))] };
    propose::apply(&mut n, &arrange).unwrap();
    draw(&mut n);
    let opened = new_window_near(&mut n, 0, other);
    draw(&mut n);
    assert_eq!(body_lines(&n, notes), 2, "the notes keep their two lines");
    assert!(body_lines(&n, opened) > 20, "the new window takes the empty space: {}", body_lines(&n, opened));
    assert!(span(&n, opened).1 == span(&n, other).0, "above the other window");
    check(&n);
}

#[test]
fn a_new_session_has_acme_s_two_columns_the_second_three_fifths_across() {
    let n = session();
    let xs: Vec<u32> = n.state.layout.columns.iter().map(|c| c.x.0).collect();
    assert_eq!(xs, vec![0, 600_000]);
}
