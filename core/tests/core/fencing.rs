//! Fencing: after a reclaim or a transfer, the old leader can get nothing
//! past the log or any replica; a cooperative transfer loses nothing.

use crate::sim::Sim;
use apex_core::*;

fn splice(q0: u64, text: &str) -> Op {
    Op::Buffer(BufferOp::Splice { q0, q1: q0, text: text.into(), origin: Origin::Keyboard })
}

fn text(n: &Node, b: BufferId) -> String {
    n.state.buffer(b).unwrap().text.to_string()
}

/// A session where client 0 leads a buffer it made and has typed into.
fn led_buffer() -> (Sim, BufferId) {
    let mut sim = Sim::new(2);
    let b = sim.clients[0].node.create_buffer_as("f").unwrap();
    sim.clients[0].node.append(Shard::Buffer(b), splice(0, "abc")).unwrap();
    sim.ship(0);
    sim.check();
    assert_eq!(text(&sim.server, b), "abc");
    (sim, b)
}

#[test]
fn fencing_rejects_a_stale_leader() {
    let (mut sim, b) = led_buffer();
    let shard = Shard::Buffer(b);
    // Client 0 stops hearing from the daemon; the daemon reclaims.
    sim.clients[0].paused = true;
    let op = sim.server.log.reclaim_op(shard).unwrap();
    let reclaim = sim.server.push_meta(op).unwrap();
    assert!(matches!(reclaim.op, Op::Meta(MetaOp::LeaseReclaim { epoch: 2, base: 2, .. })));
    sim.check();
    // The stale leader still thinks it leads and appends locally...
    let stale = sim.clients[0].node.append(shard, splice(3, "X")).unwrap();
    assert_eq!(stale.epoch, 1);
    // ...but the authority's log refuses it, naming the shard and epoch,
    let err = sim.server.log.check_entry(shard, stale).unwrap_err().to_string();
    assert!(err.starts_with("fenced: lease of buffer."), "{err}");
    assert!(err.contains("epoch 2"), "{err}");
    // and so does every replica, leaving its state as it was.
    let before = sim.follower.state.hash();
    let mut probe = sim.follower.state.clone();
    assert!(matches!(probe.apply(shard, stale), Err(Reject::Fenced { epoch: 2, .. })));
    assert_eq!(probe.hash(), before);
    // The server leads again and its entry at the same seq is the one kept.
    sim.server.append(shard, splice(0, ">")).unwrap();
    sim.clients[0].paused = false;
    sim.ship(0);
    assert_eq!(sim.fenced, 1);
    assert_eq!(sim.clients[0].resyncs, 1);
    sim.check();
    assert_eq!(text(&sim.server, b), ">abc");
    assert_eq!(text(&sim.clients[0].node, b), ">abc");
    assert!(!sim.clients[0].node.leads(shard));
}

#[test]
fn request_release_grant_loses_nothing() {
    let (mut sim, b) = led_buffer();
    let shard = Shard::Buffer(b);
    // Typed but not yet shipped when the request arrives.
    sim.clients[0].node.append(shard, splice(3, "def")).unwrap();
    let to = sim.clients[1].id();
    assert!(sim.transfer(shard, to));
    sim.check();
    assert_eq!(text(&sim.server, b), "abcdef", "the holder flushed before releasing");
    let lease = *sim.server.log.lease(shard).unwrap();
    assert_eq!((lease.holder, lease.epoch, lease.base), (to, 2, 3));
    // The new leader types; the old one is fenced by its own mirror now...
    sim.clients[1].node.append(shard, splice(6, "!")).unwrap();
    sim.ship(1);
    assert!(matches!(sim.clients[0].node.append(shard, splice(0, "x")), Err(Reject::NotLeader { .. })));
    // ...and an entry forged at its old epoch is refused everywhere.
    let forged =
        Entry { seq: sim.server.log.last(shard) + 1, attachment: sim.clients[0].id(), epoch: 1, op: splice(0, "x") };
    assert!(sim.server.log.check_entry(shard, &forged).is_err());
    assert!(sim.follower.state.clone().apply(shard, &forged).is_err());
    sim.check();
    assert_eq!(text(&sim.follower, b), "abcdef!");
}

#[test]
fn released_lease_admits_nothing_until_granted() {
    let (mut sim, b) = led_buffer();
    let shard = Shard::Buffer(b);
    sim.clients[0].node.release_lease(shard).unwrap();
    let op = sim.server.log.release_op(shard, sim.clients[0].id(), 1).unwrap_err();
    assert!(op.to_string().contains("flush first"), "{op}");
    let op = sim.server.log.release_op(shard, sim.clients[0].id(), 2).unwrap();
    sim.server.push_meta(op).unwrap();
    let late = Entry { seq: 3, attachment: sim.clients[0].id(), epoch: 1, op: splice(0, "x") };
    assert!(matches!(sim.server.log.check_entry(shard, &late), Err(Reject::Released { seq: 2, .. })));
    // Granting to someone else bumps the epoch past the old holder's.
    let op = sim.server.log.grant_op(shard, sim.clients[1].id()).unwrap();
    sim.server.push_meta(op).unwrap();
    sim.check();
    assert!(sim.clients[1].node.leads(shard));
    assert_eq!(sim.clients[1].node.led()[&shard], 2);
}

#[test]
fn epochs_only_grow_and_grants_need_a_free_lease() {
    let (mut sim, b) = led_buffer();
    let shard = Shard::Buffer(b);
    assert!(matches!(sim.server.log.grant_op(shard, sim.clients[1].id()), Err(Reject::NotHolder { .. })));
    let bad = MetaOp::LeaseReclaim { shard, epoch: 1, base: 2 };
    assert!(matches!(sim.server.push_meta(bad), Err(Reject::Epoch { want: 2, got: 1, .. })));
    for want in 2..6 {
        let op = sim.server.log.reclaim_op(shard).unwrap();
        sim.server.push_meta(op).unwrap();
        assert_eq!(sim.server.log.lease(shard).unwrap().epoch, want);
    }
    assert!(matches!(
        sim.server.push_meta(MetaOp::LeaseGrant { shard: Shard::Meta, to: AttachmentId(1), epoch: 1, base: 0 }),
        Err(Reject::Pinned { .. })
    ));
    sim.check();
}

#[test]
fn catch_up_replays_the_metalog_first_across_epochs() {
    // Entries from an earlier epoch must still apply after the follower has
    // seen the later lease (metalog first).
    let (mut sim, b) = led_buffer();
    let to = sim.clients[1].id();
    assert!(sim.transfer(Shard::Buffer(b), to));
    sim.clients[1].node.append(Shard::Buffer(b), splice(0, "1")).unwrap();
    sim.ship(1);
    let mut late =
        Node::new(AttachmentId(99), State::new(), Log::mirror(&State::new(), Box::new(RecordingHook::default())));
    late.catch_up(&sim.server.log).unwrap();
    assert_eq!(late.state.hash(), sim.server.state.hash());
    assert_eq!(text(&late, b), "1abc");
}

#[test]
fn a_tool_cannot_write_the_metalog_or_pinned_shards() {
    let mut sim = Sim::new(1);
    sim.check();
    let forged = Entry {
        seq: sim.server.log.last(Shard::Meta) + 1,
        attachment: sim.clients[0].id(),
        epoch: 0,
        op: Op::Meta(MetaOp::Label { label: "x".into() }),
    };
    assert!(matches!(sim.server.accept(Shard::Meta, forged.clone()), Err(Reject::ServerOnly { .. })));
    assert!(matches!(sim.follower.state.clone().apply(Shard::Meta, &forged), Err(Reject::ServerOnly { .. })));
    assert!(matches!(sim.clients[0].node.push_meta(MetaOp::Label { label: "x".into() }), Err(Reject::MirrorCannot(_))));
    let t = Shard::Term(TermId(5));
    assert!(matches!(sim.clients[0].node.create_shard(t), Err(Reject::Pinned { .. })));
}

#[test]
fn the_layout_and_the_metalog_outlive_every_delete() {
    // Neither is ever made again once its session exists: a delete of the
    // layout (by its leader, or by the daemon) is refused like the
    // metalog's, on the authority and on a mirror, and changes nothing.
    let mut sim = Sim::new(1);
    let before = sim.server.state.hash();
    assert!(matches!(sim.server.delete_shard(Shard::Layout), Err(Reject::Lasting { shard: Shard::Layout })));
    assert!(matches!(sim.server.delete_shard(Shard::Meta), Err(Reject::Pinned { .. })));
    assert!(matches!(sim.clients[0].node.delete_shard(Shard::Layout), Err(Reject::Lasting { .. })));
    assert_eq!(sim.server.state.hash(), before);
    assert!(sim.server.log.lease(Shard::Layout).is_ok());
    sim.check();
}

#[test]
fn the_authority_log_sequences_lease_changes_a_follower_replays() {
    // The log's own grant/request/release/reclaim, as the daemon calls them,
    // append metalog entries that any replica applies to the same leases.
    let mut n = Node::server();
    let b = n.create_buffer_as("f").unwrap();
    let shard = Shard::Buffer(b);
    let a = AttachmentId(7);
    n.push_meta(MetaOp::Attach { attachment: a, kind: AttachmentKind::Ui, name: "ui".into() }).unwrap();
    n.release_lease(shard).unwrap();
    let g = n.log.grant(shard, a).unwrap();
    assert!(matches!(g.op, Op::Meta(MetaOp::LeaseGrant { epoch: 1, base: 1, .. })));
    n.log.request(shard, AttachmentId::SERVER).unwrap();
    let r = n.log.release(shard, a, 1).unwrap();
    assert!(matches!(r.op, Op::Meta(MetaOp::LeaseRelease { seq: 1, .. })));
    assert!(n.log.grant(shard, a).is_ok(), "a released lease may be granted again");
    let rc = n.log.reclaim(shard).unwrap();
    assert!(matches!(rc.op, Op::Meta(MetaOp::LeaseReclaim { epoch: 3, .. })));
    let mut f =
        Node::new(AttachmentId(9), State::new(), Log::mirror(&State::new(), Box::new(RecordingHook::default())));
    f.catch_up(&n.log).unwrap();
    let lease = f.state.meta.leases.get(shard).unwrap();
    assert_eq!((lease.holder, lease.epoch), (AttachmentId::SERVER, 3));
    assert_eq!(f.state.meta.shards().collect::<Vec<_>>(), [Shard::Meta, shard]);
}
