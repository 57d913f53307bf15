//! View adjustment: acme's textinsert/textdelete rules, table-driven.
//!
//! Notation: `[` `]` mark view A's selection (a window body), `{` `}` view
//! B's (a Zerox copy of it on the same buffer); `|` marks A's origin when
//! it is not 0.

use apex_core::*;

const A: ViewId = ViewId::WindowBody(WindowId(1));
const B: ViewId = ViewId::WindowBody(WindowId(2));

struct Parsed {
    text: String,
    a: (u64, u64),
    b: Option<(u64, u64)>,
    org: u64,
}

fn parse(s: &str) -> Parsed {
    let (mut text, mut a, mut b, mut org) = (String::new(), (0, 0), None::<(u64, u64)>, 0);
    let mut n = 0u64;
    for c in s.chars() {
        match c {
            '[' => a.0 = n,
            ']' => a.1 = n,
            '{' => b = Some((n, 0)),
            '}' => b.as_mut().unwrap().1 = n,
            '|' => org = n,
            c => {
                text.push(c);
                n += 1;
            }
        }
    }
    Parsed { text, a, b, org }
}

fn render(buf: &Buffer) -> String {
    let a = buf.views[&A];
    let b = buf.views.get(&B).copied();
    let mut out = String::new();
    let text: Vec<char> = buf.text.to_string().chars().collect();
    // At each position: ends of selections, the origin, empty selections,
    // then starts, so that the notation reads back unambiguously.
    let marks = |v: View, open: char, close: char, i: u64, out: &mut String, phase: u8| match phase {
        0 if v.q0 != v.q1 && v.q1 == i => out.push(close),
        1 if v.q0 == v.q1 && v.q0 == i => {
            out.push(open);
            out.push(close)
        }
        2 if v.q0 != v.q1 && v.q0 == i => out.push(open),
        _ => {}
    };
    for i in 0..=text.len() as u64 {
        for phase in 0..3 {
            if phase == 1 && a.org == i && a.org != 0 {
                out.push('|');
            }
            marks(a, '[', ']', i, &mut out, phase);
            if let Some(b) = b {
                marks(b, '{', '}', i, &mut out, phase);
            }
        }
        if let Some(c) = text.get(i as usize) {
            out.push(*c);
        }
    }
    out
}

fn check(before: &str, q0: u64, q1: u64, insert: &str, after: &str) {
    let p = parse(before);
    let mut n = Node::server();
    let id = n.create_buffer_as("t").unwrap();
    let shard = Shard::Buffer(id);
    let op = |o| Op::Buffer(o);
    n.append(shard, op(BufferOp::Splice { q0: 0, q1: 0, text: p.text.clone(), origin: Origin::FileWrite })).unwrap();
    n.append(shard, op(BufferOp::ViewAdd { view: A })).unwrap();
    n.append(shard, op(BufferOp::Select { view: A, q0: p.a.0, q1: p.a.1 })).unwrap();
    n.append(shard, op(BufferOp::SetOrigin { view: A, org: p.org })).unwrap();
    if let Some((b0, b1)) = p.b {
        n.append(shard, op(BufferOp::ViewAdd { view: B })).unwrap();
        n.append(shard, op(BufferOp::Select { view: B, q0: b0, q1: b1 })).unwrap();
    }
    n.append(shard, op(BufferOp::Splice { q0, q1, text: insert.into(), origin: Origin::Keyboard })).unwrap();
    let got = render(n.state.buffer(id).unwrap());
    assert_eq!(got, after, "{before:?} splice {q0},{q1} {insert:?}");
}

#[test]
fn insert_before_inside_at_and_after_a_selection() {
    check("ab[cd]ef", 1, 1, "XY", "aXYb[cd]ef"); // before: both ends move
    check("ab[cd]ef", 3, 3, "X", "ab[cXd]ef"); // inside: q1 moves
    check("ab[cd]ef", 2, 2, "X", "ab[Xcd]ef"); // at q0: acme grows the selection
    check("ab[cd]ef", 4, 4, "X", "ab[cd]Xef"); // at q1: not included
    check("ab[cd]ef", 5, 5, "X", "ab[cd]eXf"); // after: nothing moves
    check("ab[]cd", 2, 2, "X", "ab[]Xcd"); // at an empty selection: it stays before
    check("[]", 0, 0, "é😀", "[]é😀"); // runes, not bytes
}

#[test]
fn delete_overlapping_each_end_inside_and_around() {
    check("ab[cd]ef", 1, 3, "", "a[d]ef"); // overlaps q0
    check("ab[cd]ef", 3, 5, "", "ab[c]f"); // overlaps q1
    check("ab[cd]ef", 1, 5, "", "a[]f"); // covers the selection
    check("ab[cdef]g", 3, 5, "", "ab[cf]g"); // inside it
    check("ab[cd]", 0, 1, "", "b[cd]"); // before it
    check("ab[cd]ef", 4, 6, "", "ab[cd]"); // after it
    check("ab[cd]ef", 2, 4, "Z", "ab[]Zef"); // replace the selection itself
}

#[test]
fn origin_moves_like_a_point() {
    check("ab|cd[]ef", 0, 1, "", "b|cd[]ef");
    check("ab|cd[]ef", 1, 3, "", "a|d[]ef"); // org inside the deletion goes to its start
    check("ab|cd[]ef", 0, 0, "XY", "XYab|cd[]ef");
    check("ab|cd[]ef", 2, 2, "X", "ab|Xcd[]ef");
}

#[test]
fn zerox_views_keep_independent_selections() {
    check("a[b]c{d}e", 2, 2, "X", "a[b]Xc{d}e");
    check("a[b]c{d}e", 0, 0, "X", "Xa[b]c{d}e");
    check("a[bc{d]e}f", 2, 4, "", "a[b]{e}f");
    check("{a[b]c}", 1, 2, "XYZ", "{a[]XYZc}"); // the typist sets its own dot after
    check("a[b]{}c", 2, 2, "Q", "a[b]{}Qc");
}
