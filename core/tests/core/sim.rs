//! A session in miniature: the daemon's authoritative node, clients whose
//! nodes lead over mirror logs, a pure follower and nodes restored from
//! snapshots, wired together the way the attach protocol wires them (ship
//! a client's entries to the authority, fan everything out, metalog first).

use apex_core::*;
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

/// A mirror hook whose messages the simulation delivers to the daemon.
#[derive(Clone, Default)]
pub struct Outbox(pub Arc<Mutex<Vec<(bool, Shard)>>>);

impl MirrorHook for Outbox {
    fn create_shard(&mut self, shard: Shard) {
        self.0.lock().unwrap().push((true, shard));
    }
    fn delete_shard(&mut self, shard: Shard) {
        self.0.lock().unwrap().push((false, shard));
    }
}

pub struct Client {
    pub node: Node,
    pub outbox: Outbox,
    /// Not receiving fan-out: it may go on leading what it has lost.
    pub paused: bool,
    /// Times its tail was fenced and it came back from a snapshot.
    pub resyncs: usize,
    /// Per shard, the last seq of its own that the authority accepted (or
    /// that came with its snapshot): its own entries after it are unshipped.
    pub acked: BTreeMap<Shard, Seq>,
}

impl Client {
    /// A client (re)starting from `state`, as from a Welcome snapshot.
    pub fn new(a: AttachmentId, state: State) -> Client {
        let outbox = Outbox::default();
        let acked = state.applied.clone();
        let node = mirror_node(a, state, outbox.clone());
        Client { node, outbox, paused: false, resyncs: 0, acked }
    }

    pub fn id(&self) -> AttachmentId {
        self.node.attachment
    }

    /// Its own entries on `shard` the authority has not accepted yet.
    pub fn unshipped(&self, shard: Shard) -> Vec<Entry> {
        let acked = self.acked.get(&shard).copied().unwrap_or(0);
        match self.node.log.shard(shard) {
            Ok(log) => log.entries.iter().filter(|e| e.seq > acked && e.attachment == self.id()).cloned().collect(),
            Err(_) => Vec::new(),
        }
    }
}

pub struct Sim {
    pub server: Node,
    pub clients: Vec<Client>,
    pub follower: Node,
    pub restored: Vec<Node>,
    /// Entries the authority refused from stale leaders (and replicas
    /// refused too).
    pub fenced: usize,
}

pub fn mirror_node(attachment: AttachmentId, state: State, outbox: Outbox) -> Node {
    let log = Log::mirror(&state, Box::new(outbox));
    Node::new(attachment, state, log)
}

fn follower_node(state: State) -> Node {
    let log = Log::mirror(&state, Box::new(RecordingHook::default()));
    Node::new(AttachmentId(u64::MAX >> 40), state, log)
}

impl Sim {
    /// A session laid out by the server with `n` UI clients attached.
    pub fn new(n: usize) -> Sim {
        let mut server = Node::server();
        server.push_meta(MetaOp::Identity { uuid: SessionUuid([7; 16]) }).unwrap();
        server.push_meta(MetaOp::Label { label: "main".into() }).unwrap();
        make::init_session(&mut server).unwrap();
        let mut clients = Vec::new();
        for i in 0..n {
            let a = server.log.next_attachment().unwrap();
            let op = MetaOp::Attach { attachment: a, kind: AttachmentKind::Ui, name: format!("ui{i}") };
            server.push_meta(op).unwrap();
            clients.push(Client::new(a, server.state.clone()));
        }
        let follower = follower_node(State::new());
        Sim { server, clients, follower, restored: Vec::new(), fenced: 0 }
    }

    /// Delivers client `i`'s hook messages and unshipped entries to the
    /// authority. A fenced tail is checked against the follower too (it
    /// must refuse it), then the client comes back from a snapshot.
    pub fn ship(&mut self, i: usize) {
        let msgs: Vec<(bool, Shard)> = std::mem::take(&mut *self.clients[i].outbox.0.lock().unwrap());
        let me = self.clients[i].id();
        let mut stale_delete = false;
        for (create, shard) in msgs {
            if create {
                self.server.create_shard_for(shard, me).expect("ids never collide");
            } else if self.server.log.shard(shard).is_ok() {
                // The daemon deletes only for the shard's holder; anyone
                // else dropped state it no longer led and must resync.
                if self.holder(shard) == me {
                    self.server.delete_shard(shard).unwrap();
                } else {
                    stale_delete = true;
                }
            }
        }
        let mut stale = stale_delete;
        let shards: Vec<Shard> = self.clients[i].node.log.shards().map(|(s, _)| *s).collect();
        'shards: for shard in shards {
            if stale {
                break;
            }
            if shard == Shard::Meta || self.server.log.shard(shard).is_err() {
                continue;
            }
            for e in self.clients[i].unshipped(shard) {
                match self.server.accept(shard, e.clone()) {
                    Ok(()) => {
                        self.clients[i].acked.insert(shard, e.seq);
                    }
                    Err(r) => {
                        assert!(r.to_string().starts_with("fenced:"), "unexpected refusal {r}");
                        // Every replica refuses it as the log did.
                        self.follower.catch_up(&self.server.log).unwrap();
                        let mut probe = self.follower.state.clone();
                        let before = probe.hash();
                        assert!(probe.apply(shard, &e).is_err(), "a replica took a fenced entry");
                        assert_eq!(probe.hash(), before, "a refused entry changed the state");
                        self.fenced += 1;
                        stale = true;
                        break 'shards;
                    }
                }
            }
        }
        // Release requests the client answered are the link's business: see
        // `transfer`. A stale client comes back as the attach layer brings
        // it back: the same attachment from a fresh snapshot.
        if stale {
            let state = State::from_snapshot(&self.server.state.to_snapshot()).unwrap();
            let c = &mut self.clients[i];
            let (paused, resyncs) = (c.paused, c.resyncs);
            *c = Client::new(me, state);
            c.paused = paused;
            c.resyncs = resyncs + 1;
        }
    }

    /// Fans the authority's entries out to every replica that listens.
    pub fn catch_up_all(&mut self) {
        self.follower.catch_up(&self.server.log).unwrap();
        for r in &mut self.restored {
            r.catch_up(&self.server.log).unwrap();
        }
        for c in &mut self.clients {
            if !c.paused {
                c.node.catch_up(&self.server.log).unwrap();
            }
        }
    }

    /// The holder of `shard`'s lease, per the authority.
    pub fn holder(&self, shard: Shard) -> AttachmentId {
        self.server.log.lease(shard).unwrap().holder
    }

    pub fn client_index(&self, a: AttachmentId) -> Option<usize> {
        self.clients.iter().position(|c| c.id() == a)
    }

    /// Cooperative transfer of `shard` to `to`: request, the holder
    /// flushes and releases at its last seq, grant. Returns false if the
    /// holder could not take part (paused), in which case nothing moved but
    /// the request.
    pub fn transfer(&mut self, shard: Shard, to: AttachmentId) -> bool {
        let holder = self.holder(shard);
        if holder == to {
            return true;
        }
        self.server.push_meta(MetaOp::LeaseRequest { shard, by: to }).unwrap();
        let seq = match self.client_index(holder) {
            Some(h) => {
                if self.clients[h].paused {
                    return false;
                }
                self.ship(h);
                self.catch_up_all();
                if self.holder(shard) != holder {
                    return false;
                }
                let node = &mut self.clients[h].node;
                node.release_lease(shard).unwrap();
                node.log.last(shard)
            }
            None => {
                self.server.release_lease(shard).unwrap();
                self.server.log.last(shard)
            }
        };
        if holder != AttachmentId::SERVER {
            let op = self.server.log.release_op(shard, holder, seq).unwrap();
            self.server.push_meta(op).unwrap();
        }
        let op = self.server.log.grant_op(shard, to).unwrap();
        self.server.push_meta(op).unwrap();
        self.catch_up_all();
        true
    }

    /// Takes a snapshot of the authority's state and keeps a node restored
    /// from it, to be caught up and compared from now on.
    pub fn snapshot(&mut self) {
        let bytes = self.server.state.to_snapshot();
        assert_eq!(self.server.state.clone().encoded_len() + 1, bytes.len(), "measured without the texts");
        // Held in parts, the snapshot reads as the whole does, in any cut.
        let parts = self.server.state.snapshot_parts();
        assert_eq!(parts.len(), bytes.len());
        let cut = (bytes.len() / 3).max(1);
        let mut read = Vec::new();
        for at in (0..bytes.len()).step_by(cut) {
            read.extend(parts.range(at, at + cut));
        }
        assert!(read == bytes, "a snapshot in parts reads as the whole");
        let state = State::from_snapshot(&bytes).unwrap();
        assert_eq!(state.hash(), self.server.state.hash());
        self.restored.push(follower_node(state));
    }

    /// Compacts the authority's logs up to what every replica has applied,
    /// as the daemon does after each fan-out, keeping `keep` of each
    /// shard's compactable entries (a random point, for the tests), and
    /// every mirror's and the follower's logs likewise.
    pub fn compact(&mut self, keep: u8) {
        let shards: Vec<Shard> = self.server.log.shards().map(|(s, _)| *s).collect();
        for shard in shards {
            let mut floor = self.server.log.last(shard);
            let mut see = |n: &Node| floor = floor.min(n.state.applied(shard));
            see(&self.follower);
            self.restored.iter().for_each(&mut see);
            self.clients.iter().map(|c| &c.node).for_each(&mut see);
            let base = self.server.log.shard(shard).unwrap().base;
            let upto = floor.saturating_sub(keep as u64).max(base);
            self.server.log.compact(shard, upto).unwrap();
        }
        // A follower's own log needs nothing it has applied.
        let shards: Vec<Shard> = self.follower.log.shards().map(|(s, _)| *s).collect();
        for shard in shards {
            let last = self.follower.log.last(shard);
            let base = self.follower.log.shard(shard).unwrap().base;
            self.follower.log.compact(shard, last.saturating_sub(keep as u64).max(base)).unwrap();
        }
        // Mirrors keep what they lead until the authority has it.
        for c in &mut self.clients {
            let shards: Vec<Shard> = c.node.log.shards().map(|(s, _)| *s).collect();
            for shard in shards {
                let first_unshipped = c.unshipped(shard).first().map(|e| e.seq - 1);
                let last = c.node.log.last(shard);
                let upto = first_unshipped.unwrap_or(last).min(self.server.log.last(shard)).min(last);
                let upto = upto.max(c.node.log.shard(shard).unwrap().base);
                c.node.log.compact(shard, upto).unwrap();
            }
        }
    }

    /// Every listening replica equals the authority.
    pub fn check(&mut self) {
        self.catch_up_all();
        let want = self.server.state.hash();
        assert_eq!(self.follower.state.hash(), want, "follower diverged");
        for r in &self.restored {
            assert_eq!(r.state.hash(), want, "restored node diverged");
        }
        for c in &self.clients {
            if !c.paused {
                assert_eq!(c.node.state.hash(), want, "client {} diverged", c.id());
            }
            // What a node believes it leads, kept entry by entry, is what
            // its log's lease table says.
            let mut held = c.node.log.held_by(c.node.attachment);
            held.remove(&Shard::Meta);
            assert_eq!(*c.node.led(), held, "client {} misjudges its leases", c.id());
        }
        assert_eq!(
            *self.server.led(),
            self.server.log.held_by(self.server.attachment),
            "the server misjudges its leases"
        );
    }
}
