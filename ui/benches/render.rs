//! `cargo bench -p apex-ui`: the headless renderer's figures, each beside
//! a reference measured in the same run (a plain fill of the same frame,
//! as fast as pixels can be written). Nothing here asserts a time.
//!
//! - a full 1920×1080 frame of two columns and four windows over a
//!   10,000-line file;
//! - keystroke to pixels: one rune typed as the leader types it
//!   (`Node::append`) and the frame drawn again, p50 and p99;
//! - scrolling a 100 MB text by a page (the origin moved, the frame drawn);
//! - opening that text: the buffer made and its first frame drawn, and the
//!   process's resident memory against the text's size.

use apex_core::propose::{self, Created, Proposal};
use apex_core::*;
use apex_ui::font::Fonts;
use apex_ui::geom::{Metrics, Screen};
use apex_ui::render::{draw, Canvas};
use std::time::{Duration, Instant};

const W: i32 = 1920;
const H: i32 = 1080;

fn window(node: &mut Node, column: usize, name: &str, body: Option<BufferId>) -> make::NewWindow {
    let column = Some(node.state.layout.columns[column].id);
    let p = Proposal::CreateWindow { body, column, name: name.into() };
    match propose::apply(node, &p).unwrap().created {
        Created::Window(w) => w,
        other => panic!("{other:?}"),
    }
}

fn text_of_lines(n: usize) -> String {
    (0..n)
        .map(|i| format!("{i:5}\tfn line_{i}(x: u64) -> u64 {{ x * {i} + 1 }} // some text to fill the width\n"))
        .collect()
}

fn insert(node: &mut Node, b: BufferId, q: u64, text: &str) {
    let op = BufferOp::Splice { q0: q, q1: q, text: text.into(), origin: Origin::Keyboard };
    node.append(Shard::Buffer(b), Op::Buffer(op)).unwrap();
}

fn best_of(runs: usize, mut f: impl FnMut() -> Duration) -> Duration {
    (0..runs).map(|_| f()).min().unwrap_or_default()
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

fn resident_bytes() -> u64 {
    let statm = std::fs::read_to_string("/proc/self/statm").unwrap_or_default();
    let pages: u64 = statm.split_whitespace().nth(1).and_then(|p| p.parse().ok()).unwrap_or(0);
    pages * 4096
}

fn main() {
    println!("apex-ui render benchmark ({W}x{H}; ratios are to a plain fill of the same frame in this run)");
    let mut fonts = Fonts::new(1.0);
    let m = Metrics::new(fonts.line_height(), 1.0);
    let mut canvas = Canvas::new(W, H);
    let fill = best_of(50, || {
        let t = Instant::now();
        canvas.fill(canvas.bounds(), 0x123456);
        std::hint::black_box(&canvas.pixels);
        t.elapsed()
    });
    println!("reference: fill of the frame {:.3} ms", ms(fill));

    // Two columns, four windows, a 10,000-line file in each.
    let mut node = Node::server();
    make::init_session(&mut node).unwrap();
    let a = window(&mut node, 0, "/tmp/a.rs", None);
    insert(&mut node, a.body, 0, &text_of_lines(10_000));
    window(&mut node, 0, "/tmp/b.rs", Some(a.body));
    let c = window(&mut node, 1, "/tmp/c.rs", None);
    insert(&mut node, c.body, 0, &text_of_lines(10_000));
    window(&mut node, 1, "/tmp/d.rs", Some(c.body));
    let screen = Screen::new(&node.state, W, H, &m, &mut fonts, &Default::default());
    draw(&mut canvas, &node.state, &screen, &mut fonts, &m); // warm the glyph cache
    let frame = best_of(20, || {
        let t = Instant::now();
        draw(&mut canvas, &node.state, &screen, &mut fonts, &m);
        t.elapsed()
    });
    println!("full frame: {:.3} ms ({:.1}x the fill; target <= 4 ms)", ms(frame), ms(frame) / ms(fill));

    // Keystroke to pixels, as the leader types.
    let mut times = Vec::new();
    for i in 0..300u64 {
        let t = Instant::now();
        insert(&mut node, a.body, 100 + i, "x");
        draw(&mut canvas, &node.state, &screen, &mut fonts, &m);
        times.push(t.elapsed());
    }
    times.sort();
    let p = |q: f64| ms(times[((times.len() as f64 * q) as usize).min(times.len() - 1)]);
    println!("keystroke to pixels: p50 {:.3} ms, p99 {:.3} ms (target p99 <= 8 ms)", p(0.5), p(0.99));

    // A 100 MB text: open it (make the buffer, draw the first frame),
    // then scroll it a page at a time.
    let before = resident_bytes();
    let line = "the quick brown fox jumps over the lazy dog; 0123456789 abcdefghijklmnopqrstuvwxyz\n";
    let big: String = line.repeat(100 * 1024 * 1024 / line.len());
    let size = big.len();
    let t = Instant::now();
    let mut node = Node::server();
    make::init_session(&mut node).unwrap();
    let w = window(&mut node, 0, "/tmp/big.txt", None);
    insert(&mut node, w.body, 0, &big);
    drop(big);
    let screen = Screen::new(&node.state, W, H, &m, &mut fonts, &Default::default());
    draw(&mut canvas, &node.state, &screen, &mut fonts, &m);
    let open = t.elapsed();
    let grew = resident_bytes().saturating_sub(before);
    println!(
        "open 100 MB: {:.1} ms to the first frame (target <= 1 s); resident memory grew {:.1} MB, {:.2}x the text (target <= 2x)",
        ms(open),
        grew as f64 / 1e6,
        grew as f64 / size as f64
    );
    let body = screen.window(w.window).unwrap().body;
    let page = (body.height() / m.line) as u64 * line.len() as u64;
    let mut org = 0u64;
    let pages = 200;
    let t = Instant::now();
    for _ in 0..pages {
        org += page;
        let op = BufferOp::SetOrigin { view: ViewId::WindowBody(w.window), org };
        node.append(Shard::Buffer(w.body), Op::Buffer(op)).unwrap();
        draw(&mut canvas, &node.state, &screen, &mut fonts, &m);
    }
    let per_page = t.elapsed() / pages;
    println!("scroll 100 MB by a page: {:.3} ms per page, frame drawn (target <= 4 ms)", ms(per_page));
}
