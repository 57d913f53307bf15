//! Property tests: random op streams with leases moving among attachments,
//! stale leaders, snapshots and compactions interleaved; every replica's
//! hash equals the leader's after every step.

use crate::sim::Sim;
use apex_core::*;
use proptest::prelude::*;

const CLIENTS: usize = 3;

#[derive(Clone, Debug)]
enum Step {
    /// Actor `who` (a client index, or CLIENTS for the server) edits.
    Edit {
        who: usize,
        buf: usize,
        pos: u16,
        del: u8,
        text: String,
    },
    Select {
        who: usize,
        buf: usize,
        a: u16,
        b: u16,
    },
    Mark {
        who: usize,
        buf: usize,
    },
    Undo {
        who: usize,
        buf: usize,
    },
    Redo {
        who: usize,
        buf: usize,
    },
    NewBuffer {
        who: usize,
    },
    DelBuffer {
        who: usize,
        buf: usize,
    },
    NewWindow {
        who: usize,
    },
    Transfer {
        to: usize,
        buf: usize,
    },
    TransferLayout {
        to: usize,
    },
    Reclaim {
        buf: usize,
    },
    Pause {
        who: usize,
    },
    Resume {
        who: usize,
    },
    Snapshot,
    /// Compact every log to a random point below what all replicas passed.
    Compact {
        keep: u8,
    },
}

fn step() -> impl Strategy<Value = Step> {
    let who = 0..=CLIENTS;
    let client = 0..CLIENTS;
    let buf = any::<usize>();
    prop_oneof![
        6 => (who.clone(), buf, any::<u16>(), 0u8..4, "[a-z\n]{0,4}|é😀")
            .prop_map(|(who, buf, pos, del, text)| Step::Edit { who, buf, pos, del, text }),
        2 => (who.clone(), buf, any::<u16>(), any::<u16>())
            .prop_map(|(who, buf, a, b)| Step::Select { who, buf, a, b }),
        1 => (who.clone(), buf).prop_map(|(who, buf)| Step::Mark { who, buf }),
        1 => (who.clone(), buf).prop_map(|(who, buf)| Step::Undo { who, buf }),
        1 => (who.clone(), buf).prop_map(|(who, buf)| Step::Redo { who, buf }),
        2 => who.clone().prop_map(|who| Step::NewBuffer { who }),
        1 => (who.clone(), buf).prop_map(|(who, buf)| Step::DelBuffer { who, buf }),
        1 => who.clone().prop_map(|who| Step::NewWindow { who }),
        3 => (who.clone(), buf).prop_map(|(to, buf)| Step::Transfer { to, buf }),
        1 => who.clone().prop_map(|to| Step::TransferLayout { to }),
        2 => buf.prop_map(|buf| Step::Reclaim { buf }),
        1 => client.clone().prop_map(|who| Step::Pause { who }),
        2 => client.prop_map(|who| Step::Resume { who }),
        1 => Just(Step::Snapshot),
        1 => any::<u8>().prop_map(|keep| Step::Compact { keep }),
    ]
}

fn actor_id(sim: &Sim, who: usize) -> AttachmentId {
    match sim.clients.get(who) {
        Some(c) => c.id(),
        None => AttachmentId::SERVER,
    }
}

fn node(sim: &mut Sim, who: usize) -> &mut Node {
    match who < sim.clients.len() {
        true => &mut sim.clients[who].node,
        false => &mut sim.server,
    }
}

/// The `i`th buffer (modulo) that the actor's own replica knows.
fn pick(node: &Node, i: usize) -> Option<BufferId> {
    let ids: Vec<BufferId> = node.state.buffers.keys().copied().collect();
    (!ids.is_empty()).then(|| ids[i % ids.len()])
}

/// Prefer a buffer the actor believes it leads, so that stale leaders
/// (paused clients whose lease was reclaimed) actually write.
fn pick_led(node: &Node, i: usize) -> Option<BufferId> {
    let led: Vec<BufferId> = node
        .led()
        .keys()
        .filter_map(|s| match s {
            Shard::Buffer(b) if node.state.buffers.contains_key(b) => Some(*b),
            _ => None,
        })
        .collect();
    match led.is_empty() {
        true => pick(node, i),
        false => Some(led[i % led.len()]),
    }
}

/// A buffer some client holds the lease of, per the authority.
fn pick_client_held(server: &Node, i: usize) -> Option<BufferId> {
    let held: Vec<BufferId> = server
        .log
        .shards()
        .filter_map(|(s, _)| match s {
            Shard::Buffer(b) if server.log.lease(*s).unwrap().holder != AttachmentId::SERVER => Some(*b),
            _ => None,
        })
        .collect();
    (!held.is_empty()).then(|| held[i % held.len()])
}

fn run(sim: &mut Sim, s: &Step) {
    match s.clone() {
        Step::Edit { who, buf, pos, del, text } => {
            let n = node(sim, who);
            if let Some(b) = pick_led(n, buf) {
                let len = n.state.buffer(b).unwrap().len();
                let q0 = pos as u64 % (len + 1);
                let q1 = (q0 + del as u64).min(len);
                let op = BufferOp::Splice { q0, q1, text, origin: Origin::Keyboard };
                let r = n.append(Shard::Buffer(b), Op::Buffer(op));
                assert!(r.is_ok() || matches!(r, Err(Reject::NotLeader { .. })), "{r:?}");
            }
        }
        Step::Select { who, buf, a, b: bb } => {
            let n = node(sim, who);
            if let Some(b) = pick(n, buf) {
                let buffer = n.state.buffer(b).unwrap();
                let len = buffer.len();
                let Some(view) = buffer.views.keys().next().copied() else { return };
                let (q0, q1) = ((a as u64 % (len + 1)), (bb as u64 % (len + 1)));
                let op = BufferOp::Select { view, q0: q0.min(q1), q1: q0.max(q1) };
                let _ = n.append(Shard::Buffer(b), Op::Buffer(op));
            }
        }
        Step::Mark { who, buf } => {
            let n = node(sim, who);
            if let Some(b) = pick(n, buf) {
                if n.leads(Shard::Buffer(b)) {
                    let group = n.new_group().unwrap();
                    n.append(Shard::Buffer(b), Op::Buffer(BufferOp::Mark { group })).unwrap();
                }
            }
        }
        Step::Undo { who, buf } | Step::Redo { who, buf } => {
            let undo = matches!(s, Step::Undo { .. });
            let n = node(sim, who);
            if let Some(b) = pick(n, buf) {
                let op = if undo { BufferOp::Undo } else { BufferOp::Redo };
                let r = n.append(Shard::Buffer(b), Op::Buffer(op));
                assert!(
                    matches!(r, Ok(_) | Err(Reject::NotLeader { .. } | Reject::NothingToUndo | Reject::NothingToRedo)),
                    "{r:?}"
                );
            }
        }
        Step::NewBuffer { who } => {
            node(sim, who).create_buffer_as("new").unwrap();
        }
        Step::DelBuffer { who, buf } => {
            let n = node(sim, who);
            if let Some(b) = pick(n, buf) {
                // Only buffers no window or column shows, so the layout
                // stays meaningful.
                let shown = !n.state.buffer(b).unwrap().views.is_empty();
                if !shown && n.leads(Shard::Buffer(b)) {
                    n.delete_shard(Shard::Buffer(b)).unwrap();
                }
            }
        }
        Step::NewWindow { who } => {
            let n = node(sim, who);
            if n.leads(Shard::Layout) {
                make::new_window(n, None, None, "/tmp/x").unwrap();
            }
        }
        Step::Transfer { to, buf } => {
            let to = actor_id(sim, to);
            if let Some(b) = pick(&sim.server, buf) {
                sim.transfer(Shard::Buffer(b), to);
            }
        }
        Step::TransferLayout { to } => {
            let to = actor_id(sim, to);
            sim.transfer(Shard::Layout, to);
        }
        Step::Reclaim { buf } => {
            if let Some(b) = pick_client_held(&sim.server, buf) {
                let shard = Shard::Buffer(b);
                if sim.holder(shard) != AttachmentId::SERVER {
                    let op = sim.server.log.reclaim_op(shard).unwrap();
                    sim.server.push_meta(op).unwrap();
                }
            }
        }
        Step::Pause { who } => sim.clients[who].paused = true,
        Step::Resume { who } => sim.clients[who].paused = false,
        Step::Snapshot => sim.snapshot(),
        Step::Compact { keep } => sim.compact(keep),
    }
    for i in 0..sim.clients.len() {
        if !sim.clients[i].paused {
            sim.ship(i);
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 128, ..ProptestConfig::default() })]

    /// After every step, the follower, every restored node and every
    /// listening client have the authority's hash; at the end everyone does.
    #[test]
    fn replicas_agree_through_leadership_changes(steps in proptest::collection::vec(step(), 1..60)) {
        let mut sim = Sim::new(CLIENTS);
        sim.snapshot();
        for s in &steps {
            run(&mut sim, s);
            sim.check();
        }
        for c in &mut sim.clients {
            c.paused = false;
        }
        for i in 0..CLIENTS {
            sim.ship(i);
        }
        sim.compact(0);
        sim.snapshot();
        sim.check();
        // Every id anyone issued is unique: the authority created each
        // shard exactly once (`ship` asserts it), and a fresh node derives
        // its counters past every id in the state.
        for c in &sim.clients {
            let fresh = Node::new(c.id(), sim.server.state.clone(), Log::authority_from(&sim.server.state));
            let mut probe = fresh;
            let id = BufferId(probe.alloc().unwrap());
            prop_assert!(!sim.server.state.buffers.contains_key(&id));
            prop_assert!(!sim.server.state.windows.keys().any(|w| w.0 == id.0));
        }
    }

    /// Many attachments creating shards and allocating ids in random
    /// interleavings, with restarts from snapshots, never collide.
    #[test]
    fn ids_never_collide(order in proptest::collection::vec((0..4usize, any::<bool>()), 1..80)) {
        let mut sim = Sim::new(3);
        let mut seen = std::collections::BTreeSet::new();
        for (who, restart) in order {
            if restart && who < 3 {
                // A resumed node starts from the state it last had.
                let c = &mut sim.clients[who];
                let state = State::from_snapshot(&c.node.state.to_snapshot()).unwrap();
                *c = crate::sim::Client::new(c.id(), state);
            }
            let n = node(&mut sim, who);
            let b = n.create_buffer_as("x").unwrap();
            let g = n.new_group().unwrap();
            prop_assert!(seen.insert(b.0), "buffer id {} issued twice", b.0);
            n.append(Shard::Buffer(b), Op::Buffer(BufferOp::Mark { group: g })).unwrap();
            prop_assert!(seen.insert(g.0 | (1 << 63)), "group id {} issued twice", g.0);
            for i in 0..3 {
                sim.ship(i);
            }
            sim.check();
        }
    }
}
