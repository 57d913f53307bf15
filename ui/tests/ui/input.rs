//! The input layer over a replica that leads everything (a server node
//! laid out as a session is): scripted mouse and keyboard sequences, and
//! the text, selections and tags they leave.

use apex_core::propose::{self, Created, Proposal};
use apex_core::*;
use apex_ui::font::Fonts;
use apex_ui::frame::Frame;
use apex_ui::geom::{Metrics, Screen};
use apex_ui::input::{Ctx, Effect, Event, Input, Key, Target};

struct Rig {
    node: Node,
    fonts: Fonts,
    w: make::NewWindow,
    input: Input,
    now: u64,
    /// Milliseconds between events.
    step: u64,
}

impl Rig {
    fn new(text: &str) -> Rig {
        let mut node = Node::server();
        make::init_session(&mut node).unwrap();
        let column = Some(node.state.layout.columns[0].id);
        let p = Proposal::CreateWindow { body: None, column, name: "/tmp/input.txt".into(), near: None };
        let Created::Window(w) = propose::apply(&mut node, &p).unwrap().created else { panic!("a window") };
        if !text.is_empty() {
            let p = Proposal::Insert { buffer: w.body, version: 0, q0: 0, text: text.into(), origin: Origin::Keyboard };
            propose::apply(&mut node, &p).unwrap();
            propose::apply(&mut node, &Proposal::Clean { buffer: w.body }).unwrap();
        }
        Rig { node, fonts: Fonts::new(1.0), w, input: Input::default(), now: 1000, step: 1000 }
    }

    fn screen(&mut self) -> (Screen, Metrics) {
        let m = Metrics::new(self.fonts.line_height(), 1.0);
        (Screen::new(&self.node.state, 800, 600, &m, &mut self.fonts, &Default::default()), m)
    }

    fn send(&mut self, ev: Event) -> Vec<Effect> {
        let (screen, metrics) = self.screen();
        self.now += self.step;
        let mut cx = Ctx { node: &mut self.node, screen: &screen, fonts: &mut self.fonts, metrics, outbox: Vec::new() };
        self.input.handle(ev, self.now, &mut cx)
    }

    /// Where rune `q` of the body is drawn (its middle, a third down).
    fn point(&mut self, q: u64) -> (i32, i32) {
        let (screen, _) = self.screen();
        let rect = screen.window(self.w.window).unwrap().body;
        let line = self.fonts.line_height() as i32;
        let b = self.node.state.buffer(self.w.body).unwrap();
        let org = b.views[&ViewId::WindowBody(self.w.window)].org;
        let frame = Frame::new(b.text.rope(), org, rect, &mut self.fonts.proportional, line, 4);
        let (x, y) = frame.point_of(q).unwrap();
        (x, y + line / 3)
    }

    /// A button-1 sweep from rune `q0` to rune `q1` of the body.
    fn sweep(&mut self, q0: u64, q1: u64) {
        let (x0, y) = self.point(q0);
        let (x1, _) = self.point(q1);
        self.send(Event::Press { button: 1, x: x0, y });
        self.send(Event::Motion { x: x1, y });
        self.send(Event::Release { button: 1, x: x1, y });
    }

    fn click(&mut self, q: u64) {
        let (x, y) = self.point(q);
        self.send(Event::Press { button: 1, x, y });
        self.send(Event::Release { button: 1, x, y });
    }

    fn text(&self) -> String {
        self.node.state.buffer(self.w.body).unwrap().text.to_string()
    }

    fn sel(&self) -> (u64, u64) {
        let v = self.node.state.buffer(self.w.body).unwrap().views[&ViewId::WindowBody(self.w.window)];
        (v.q0, v.q1)
    }

    fn tag(&self) -> String {
        self.node.state.buffer(self.w.tag).unwrap().text.to_string()
    }

    fn key(&mut self, k: Key) {
        assert_eq!(self.send(Event::Key(k)), vec![]);
    }

    fn typed(&mut self, s: &str) {
        assert_eq!(self.send(Event::Text(s.into())), vec![]);
    }
}

#[test]
fn click_type_backspace_and_control_keys() {
    let mut r = Rig::new("hello world\n");
    r.click(5);
    assert_eq!(r.input.focus, Some(Target::Body(r.w.window)));
    assert_eq!(r.node.state.layout.focus, Some(r.w.window), "the layout has the focus");
    assert_eq!(r.sel(), (5, 5));
    r.typed(", big");
    assert_eq!(r.text(), "hello, big world\n");
    assert_eq!(r.sel(), (10, 10));
    assert!(r.tag().contains(" Undo Put "), "the tag shows the change: {}", r.tag());
    r.key(Key::Backspace);
    assert_eq!(r.text(), "hello, bi world\n");
    r.key(Key::Ctrl('w'));
    assert_eq!(r.text(), "hello,  world\n", "^W erases the word before");
    r.key(Key::Ctrl('u'));
    assert_eq!(r.text(), " world\n", "^U erases to the line's start");
    r.key(Key::Ctrl('e'));
    assert_eq!(r.sel(), (6, 6));
    r.key(Key::Ctrl('a'));
    assert_eq!(r.sel(), (0, 0));
    r.key(Key::Right);
    r.key(Key::Right);
    assert_eq!(r.sel(), (2, 2));
    r.key(Key::Left);
    assert_eq!(r.sel(), (1, 1));
    // The whole run of typing and erasing is one undo step.
    r.key(Key::Ctrl('z'));
    assert_eq!(r.text(), "hello world\n");
    r.key(Key::Ctrl('y'));
    assert_eq!(r.text(), " world\n");
}

#[test]
fn sweeps_double_clicks_and_esc() {
    let mut r = Rig::new("one two three\nfour (five six)\n");
    // A sweep selects; typing replaces the selection.
    let (x0, y0) = r.point(4);
    let (x1, y1) = r.point(7);
    r.send(Event::Press { button: 1, x: x0, y: y0 });
    r.send(Event::Motion { x: x1, y: y1 });
    r.send(Event::Release { button: 1, x: x1, y: y1 });
    assert_eq!(r.sel(), (4, 7));
    r.typed("2");
    assert_eq!(r.text(), "one 2 three\nfour (five six)\n");
    // Esc selects what was typed since the click; Esc again cuts it.
    r.key(Key::Escape);
    assert_eq!(r.sel(), (4, 5));
    r.key(Key::Escape);
    assert_eq!(r.text(), "one  three\nfour (five six)\n");
    assert_eq!(r.node.state.layout.snarf, "2", "Esc cut it to the snarf buffer");
    // A double-click selects a word, or the text inside brackets; two
    // clicks far apart in time are two clicks.
    r.click(1);
    r.click(1);
    assert_eq!(r.sel(), (1, 1), "slow clicks");
    r.step = 100;
    r.click(1);
    r.click(1);
    assert_eq!(r.sel(), (0, 3), "the word `one`");
    let open = r.text().find('(').unwrap() as u64 + 1;
    r.click(open);
    r.click(open);
    assert_eq!(r.sel(), (open, open + 8), "inside the brackets: `five six`");
}

#[test]
fn button_two_and_three_give_actions_and_the_wheel_scrolls() {
    let text: String = (0..200).map(|i| format!("line {i}\n")).collect();
    let mut r = Rig::new(&text);
    // B2 on a word of the tag: execute it for the window.
    let (screen, _) = r.screen();
    let tag = screen.window(r.w.window).unwrap().tag;
    let tag_text = r.tag();
    let put_at = tag_text.find("Del").unwrap() as u64;
    let b = r.node.state.buffer(r.w.tag).unwrap();
    let line = r.fonts.line_height() as i32;
    let frame = Frame::new(b.text.rope(), 0, tag, &mut r.fonts.proportional, line, 4);
    let (x, y) = frame.point_of(put_at + 1).unwrap();
    r.send(Event::Press { button: 2, x, y: y + 2 });
    let fx = r.send(Event::Release { button: 2, x, y: y + 2 });
    assert_eq!(fx, vec![Effect::Execute { window: Some(r.w.window), column: None, text: "Del".into(), arg: None }]);
    // B3 on a word of the body: look it up.
    let (x, y) = r.point(2);
    r.send(Event::Press { button: 3, x, y });
    let fx = r.send(Event::Release { button: 3, x, y });
    let plumb = apex_core::plumb::Plumb { data: "line".into(), click: Some(2) };
    assert_eq!(
        fx,
        vec![Effect::Look { window: r.w.window, text: "line".into(), word: Some("line".into()), plumb, from: Some(4) }]
    );
    // A notch of the wheel moves the origin a line ($mousescrollsize
    // unset); Page Down by two thirds of the window.
    let (x, y) = r.point(0);
    r.send(Event::Wheel { notches: 3, x, y });
    let org = |r: &Rig| r.node.state.buffer(r.w.body).unwrap().views[&ViewId::WindowBody(r.w.window)].org;
    assert_eq!(org(&r), "line 0\nline 1\nline 2\n".len() as u64);
    r.click(org(&r));
    r.key(Key::PageDown);
    assert!(org(&r) > 100, "a page further: {}", org(&r));
    // Home goes to the insertion point first, when it is off the screen
    // above (to the start of the line before it); then to the top.
    r.key(Key::Home);
    assert_eq!(org(&r), "line 0\nline 1\n".len() as u64);
    r.key(Key::Home);
    assert_eq!(org(&r), 0);
    r.send(Event::Wheel { notches: -2, x, y });
    assert_eq!(org(&r), 0, "not before the start");
}

#[test]
fn with_a_tool_reading_the_events_actions_are_reported_not_done() {
    let mut r = Rig::new("make test\n");
    let p = Proposal::EventReader { window: r.w.window, reader: Some(AttachmentId(7)) };
    propose::apply(&mut r.node, &p).unwrap();
    let (x, y) = r.point(1);
    r.send(Event::Press { button: 2, x, y });
    assert_eq!(r.send(Event::Release { button: 2, x, y }), vec![], "nothing for the UI to do");
    let b = r.node.state.buffer(r.w.body).unwrap();
    let (kind, a) = b.last_action.clone().expect("the action is in the buffer for the event reader");
    assert_eq!(format!("{kind:?}"), "Exec");
    assert_eq!((a.q0, a.q1, a.expansion, a.flags & 2), (1, 1, Some((0, 4)), 2), "a null click, expanded");
}

#[test]
fn a_chord_with_nothing_to_cut_or_paste_undoes_nothing_and_control_f_in_a_word_keeps_the_selection() {
    let mut r = Rig::new("");
    r.click(0);
    r.typed("hello");
    // 1-2 with an empty selection and an empty snarf buffer, then 3:
    // no step was made, so nothing is undone.
    let (x, y) = r.point(5);
    r.send(Event::Press { button: 1, x, y });
    r.send(Event::Press { button: 2, x, y });
    r.send(Event::Press { button: 3, x, y });
    r.send(Event::Release { button: 3, x, y });
    r.send(Event::Release { button: 2, x, y });
    r.send(Event::Release { button: 1, x, y });
    assert_eq!(r.text(), "hello");
    // ^F with the cursor inside a word: nothing happens, the selection
    // stays.
    r.step = 100;
    r.click(2);
    r.click(2);
    assert_eq!(r.sel(), (0, 5));
    r.step = 1000;
    let (x, y) = r.point(1);
    r.send(Event::Press { button: 1, x, y });
    let x3 = r.point(3).0;
    r.send(Event::Motion { x: x3, y });
    r.send(Event::Release { button: 1, x: x3, y });
    assert_eq!(r.sel(), (1, 3));
    assert_eq!(r.send(Event::Key(Key::Ctrl('f'))), vec![]);
    assert_eq!((r.text().as_str(), r.sel()), ("hello", (1, 3)));
}

#[test]
fn a_tab_of_any_width_lays_out_to_the_edge_at_most() {
    // However wide a window's tab (a leader's op is held to Tab's range,
    // but a frame must not trust it), a tab stops at the right edge at
    // most, and what follows goes on from there.
    let mut r = Rig::new("a\tb\n");
    let (screen, _) = r.screen();
    let rect = screen.window(r.w.window).unwrap().body;
    let line = r.fonts.line_height() as i32;
    for tab in [1, 8, apex_core::exec::MAX_TAB, 1 << 29, u32::MAX] {
        let b = r.node.state.buffer(r.w.body).unwrap();
        let frame = Frame::new(b.text.rope(), 0, rect, &mut r.fonts.proportional, line, tab);
        let (x, _) = frame.point_of(2).expect("b is laid out");
        assert!((rect.x0..=rect.x1).contains(&x), "tab {tab}: b at {x} in {rect:?}");
    }
}

/// Undoes one step, as the `Undo` built-in does.
fn undo(r: &mut Rig) {
    propose::apply(&mut r.node, &Proposal::Undo { buffer: r.w.body }).unwrap();
}

#[test]
fn one_undo_takes_back_what_one_acme_undo_does() {
    // acme's seq: a run of typing is a step until a newline, a cursor
    // key, Esc or the mouse commits it; an erase past the run, and the
    // cut of a selection typing replaces, are steps of their own.
    let mut r = Rig::new("abc\n");
    r.click(3);
    r.typed("d");
    r.typed("e");
    r.typed("\n");
    r.typed("fg");
    r.key(Key::Left);
    r.typed("X");
    assert_eq!(r.text(), "abcde\nfXg\n");
    undo(&mut r);
    assert_eq!(r.text(), "abcde\nfg\n", "the run after the cursor key");
    undo(&mut r);
    assert_eq!(r.text(), "abcde\n\n", "the run after the newline");
    undo(&mut r);
    assert_eq!(r.text(), "abc\n", "typing up to and with its newline");

    // Backspace within the run is part of it; past the run, each is a
    // step of its own.
    let mut r = Rig::new("abc\n");
    r.click(3);
    r.typed("xy");
    r.key(Key::Backspace);
    r.key(Key::Backspace);
    r.key(Key::Backspace);
    r.key(Key::Backspace);
    assert_eq!(r.text(), "a\n");
    undo(&mut r);
    assert_eq!(r.text(), "ab\n", "the last erase past the run");
    undo(&mut r);
    assert_eq!(r.text(), "abc\n", "the first");

    // Typing over a selection cuts it (snarfed) as a step, then types.
    let mut r = Rig::new("one two\n");
    r.sweep(4, 7);
    assert_eq!(r.sel(), (4, 7));
    r.typed("2");
    assert_eq!(r.text(), "one 2\n");
    assert_eq!(r.node.state.layout.snarf, "two", "the selection typed over is snarfed, as acme");
    undo(&mut r);
    assert_eq!(r.text(), "one \n");
    undo(&mut r);
    assert_eq!(r.text(), "one two\n");

    // An erasing key over a selection cuts it (snarfed) and erases on
    // from its start, one step (acme's texttype: the cut under the key's
    // own seq), checked side by side: `line` selected in `one line`, then
    // Backspace, leaves `one`.
    for (k, left) in [(Key::Backspace, "one\n"), (Key::Ctrl('w'), "\n"), (Key::Ctrl('u'), "\n")] {
        let mut r = Rig::new("one line\n");
        r.sweep(4, 8);
        assert_eq!(r.sel(), (4, 8));
        r.key(k);
        assert_eq!(r.text(), left, "{k:?}");
        assert_eq!(r.node.state.layout.snarf, "line", "{k:?}: the selection is snarfed");
        undo(&mut r);
        assert_eq!(r.text(), "one line\n", "{k:?}: one step");
    }

    // ^F over a selection cuts it too, before it completes.
    let mut r = Rig::new("x sel\n");
    r.sweep(2, 5);
    r.send(Event::Key(Key::Ctrl('f')));
    assert_eq!(r.text(), "x \n");
    assert_eq!(r.node.state.layout.snarf, "sel", "^F snarfs the selection it replaces");

    // Esc's cut is a step; typing after it another.
    let mut r = Rig::new("x\n");
    r.click(1);
    r.typed("abc");
    r.key(Key::Escape);
    assert_eq!(r.sel(), (1, 4), "Esc selects what was typed");
    r.key(Key::Escape);
    assert_eq!(r.text(), "x\n");
    r.typed("z");
    undo(&mut r);
    assert_eq!(r.text(), "x\n");
    undo(&mut r);
    assert_eq!(r.text(), "xabc\n");
}

#[test]
fn typing_goes_under_the_pointer_or_with_click_to_type_to_the_text_clicked() {
    let mut r = Rig::new("body\n");
    r.click(4);
    // The pointer moves over the tag: typing goes there.
    let (screen, m) = r.screen();
    let tag = screen.window(r.w.window).unwrap().tag;
    r.send(Event::Motion { x: tag.x1 - 4, y: tag.y0 + m.line / 2 });
    r.typed("T");
    assert_eq!(r.text(), "body\n");
    assert!(r.tag().ends_with("Look T"), "at the tag's own cursor, which acme leaves at its end: {}", r.tag());
    // Over the window's layout box: nowhere.
    let b = screen.window(r.w.window).unwrap().layout_box;
    r.send(Event::Motion { x: b.x0 + 2, y: b.y0 + 2 });
    r.typed("N");
    assert!(!r.tag().contains('N') && !r.text().contains('N'));

    // acme's -b: the text last clicked, wherever the pointer is.
    let mut r = Rig::new("body\n");
    r.input.click_to_type = true;
    r.click(4);
    r.send(Event::Motion { x: tag.x1 - 4, y: tag.y0 + m.line / 2 });
    r.typed("B");
    assert_eq!(r.text(), "bodyB\n");
}

#[test]
fn scrolling_keys_and_the_wheel_move_as_acme_s_texttype() {
    let text: String = (0..300).map(|i| format!("line {i}\n")).collect();
    let mut r = Rig::new(&text);
    let org = |r: &Rig| r.node.state.buffer(r.w.body).unwrap().views[&ViewId::WindowBody(r.w.window)].org;
    let (screen, m) = r.screen();
    let body = screen.window(r.w.window).unwrap().body;
    let max = (body.height() / m.line) as usize;
    let line = |n: usize| (0..n).map(|i| format!("line {i}\n").len() as u64).sum::<u64>();
    r.click(0);
    // Down: a third of the window; the cursor stays.
    r.key(Key::Down);
    assert_eq!(org(&r), line(max / 3));
    assert_eq!(r.sel(), (0, 0));
    r.key(Key::Up);
    assert_eq!(org(&r), 0);
    r.key(Key::PageDown);
    assert_eq!(org(&r), line(2 * max / 3));
    // End: the end of the text a quarter down (the cursor is on screen
    // above); Home with the cursor off the screen above: to it first.
    r.key(Key::End);
    assert_eq!(org(&r), line(300 - max / 4));
    r.key(Key::Home);
    assert_eq!(org(&r), 0, "the line of the insertion point, the first");

    // $mousescrollsize: lines, or a percentage of the window.
    use apex_ui::input::ScrollSize;
    assert_eq!(ScrollSize::parse(None).lines(40), 1);
    assert_eq!(ScrollSize::parse(Some("7")).lines(40), 7);
    assert_eq!(ScrollSize::parse(Some("50%")).lines(40), 20);
    assert_eq!(ScrollSize::parse(Some("junk")).lines(40), 1);
    r.input.scroll_size = ScrollSize::Lines(5);
    let (x, y) = (body.x0 + 20, body.y0 + 5);
    r.send(Event::Wheel { notches: 2, x, y });
    assert_eq!(org(&r), line(10));
}

/// A window whose top another's squeezes to within a pixel keeps its
/// tag line, as acme's `colresize` keeps one for every window, and the
/// windows below it give way, pushed up from the column's bottom: typing
/// over that tag reaches it. In a column too short for every tag, each
/// window still has a row of pixels of its own.
#[test]
fn a_squeezed_window_keeps_its_tag_line_and_typing_over_it_reaches_it() {
    let mut r = Rig::new("first\n");
    let column = r.node.state.layout.columns[0].id;
    let mut made = vec![r.w.window];
    for i in 0..3 {
        let p = Proposal::CreateWindow { body: None, column: Some(column), name: format!("/tmp/w{i}"), near: None };
        let Created::Window(w) = propose::apply(&mut r.node, &p).unwrap().created else { panic!("a window") };
        made.push(w.window);
    }
    // The second window's top put just above the third's, and the last
    // near the very bottom: both would be less than a pixel high (a
    // thousandth of the column is about half a pixel here).
    let y =
        |r: &Rig, w: WindowId| r.node.state.layout.find(w).map(|(c, i)| r.node.state.layout.columns[c].windows[i].y);
    let third = y(&r, made[2]).unwrap();
    let moves = [(made[1], Frac(third.0 - 1_000)), (made[3], Frac(Frac::ONE.0 - 1_000))];
    for (window, y) in moves {
        r.node.append(Shard::Layout, Op::Layout(LayoutOp::WindowMove { window, column, y })).unwrap();
    }
    let (screen, m) = r.screen();
    let rects: Vec<_> = made.iter().map(|w| *screen.window(*w).unwrap()).collect();
    for pair in rects.windows(2) {
        assert!(pair[0].rect.y1 < pair[1].rect.y0, "in order, apart: {rects:?}");
    }
    for g in &rects {
        assert!(g.tag_line.height() >= m.line, "a tag line each: {g:?}");
        assert!(g.rect.y1 <= screen.columns[0].area.y1, "within the column: {g:?}");
    }
    let squeezed = rects[1].tag;
    r.send(Event::Motion { x: squeezed.x1 - 4, y: squeezed.y0 + m.line / 2 });
    r.typed("Q");
    let tag_of =
        |r: &Rig, w: WindowId| r.node.state.buffer(r.node.state.window(w).unwrap().tag).unwrap().text.to_string();
    assert!(tag_of(&r, made[1]).ends_with('Q'), "typing reached the squeezed window's tag: {}", tag_of(&r, made[1]));

    // Eighty windows in a column 600 pixels high: no room for every tag,
    // but every window has pixels of its own, in order.
    for i in 0..80 {
        let p = Proposal::CreateWindow { body: None, column: Some(column), name: format!("/tmp/many{i}"), near: None };
        propose::apply(&mut r.node, &p).unwrap();
    }
    let (screen, _) = r.screen();
    let tops: Vec<i32> = screen.columns[0].windows.iter().map(|g| g.rect.y0).collect();
    assert_eq!(tops.len(), 84);
    assert!(tops.windows(2).all(|t| t[0] < t[1]), "{tops:?}");
    assert!(*tops.last().unwrap() < screen.columns[0].area.y1);
}
