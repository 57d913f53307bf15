//! Replaying an editing trace through a leader node gives exactly the
//! trace's end content, and a follower agrees. The tests replay the trace
//! the repository carries; the benchmark replays the larger ones too and
//! checks the same end.

use crate::trace;
use apex_core::*;

fn replay(name: &str) {
    let t = trace::load(&trace::vendored(name));
    let mut leader = Node::server();
    let b = leader.create_buffer_as(name).unwrap();
    let shard = Shard::Buffer(b);
    if !t.start.is_empty() {
        let op = BufferOp::Splice { q0: 0, q1: 0, text: t.start.clone(), origin: Origin::FileWrite };
        leader.append(shard, Op::Buffer(op)).unwrap();
    }
    let mut n = 0;
    for (pos, del, text) in t.patches() {
        let op = BufferOp::Splice { q0: *pos, q1: pos + del, text: text.clone(), origin: Origin::Keyboard };
        leader.append(shard, Op::Buffer(op)).unwrap();
        n += 1;
    }
    let got = leader.state.buffer(b).unwrap().text.to_string();
    assert!(got == t.end, "{name}: replaying {n} patches did not give endContent");
    let mut follower =
        Node::new(AttachmentId(1), State::new(), Log::mirror(&State::new(), Box::new(RecordingHook::default())));
    follower.catch_up(&leader.log).unwrap();
    assert_eq!(follower.state.hash(), leader.state.hash(), "{name}: follower diverged");
}

#[test]
fn the_vendored_trace_replays_to_its_end() {
    replay(trace::VENDORED);
}
