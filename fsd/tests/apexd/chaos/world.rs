//! The chaos tests' world: one session's hub (the real `attach` code)
//! and clients' links joined in memory, bytes moved and time advanced
//! when a test says; a seeded generator for the random steps; and the
//! checks every step is held to (one leader per shard and epoch, no gap
//! or repeat, nothing acknowledged lost, every hash the daemon's).

pub(crate) use apex_core::{
    make, AttachmentId, AttachmentKind, BufferId, BufferOp, Entry, Log, Node, Op, Origin, Proposal, RecordingHook,
    Shard, State,
};
pub(crate) use apex_fsd::attach::error::AttachError;
pub(crate) use apex_fsd::attach::hub::{self, ConnId, Written};
pub(crate) use apex_fsd::attach::link::{Event, Link, Submitted};
pub(crate) use apex_fsd::attach::wire::{ClientMsg, Frames};
pub(crate) use apex_fsd::attach::{feed, protocol};
pub(crate) use apex_fsd::session::Session;
pub(crate) use std::collections::{BTreeMap, VecDeque};
pub(crate) use tokio::sync::oneshot;

pub(crate) const DEADLINE: u64 = 3_000;
pub(crate) const GRACE: u64 = 10_000;

/// A small, seedable generator (xorshift64*).
pub(crate) struct Rng(pub(crate) u64);

impl Rng {
    pub(crate) fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    pub(crate) fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
    pub(crate) fn chance(&mut self, percent: u64) -> bool {
        self.below(100) < percent
    }
}

pub(crate) struct Client {
    pub(crate) link: Link,
    pub(crate) conn: Option<ConnId>,
    /// Frames taken from the link and not yet written.
    pub(crate) wire: VecDeque<(Vec<u8>, bool)>,
    /// A paused client neither writes nor reads (SIGSTOP).
    pub(crate) paused: bool,
    pub(crate) gone: bool,
}

type Answer = oneshot::Receiver<apex_fsd::attach::wire::Outcome>;

pub(crate) struct World {
    pub(crate) s: Session,
    pub(crate) now: u64,
    pub(crate) clients: Vec<Client>,
    /// Follows the daemon's log before anything is compacted: the whole
    /// history, to check acknowledged entries against.
    pub(crate) archive: Node,
    /// Every entry the daemon acknowledged, as (shard, entry).
    pub(crate) acked: Vec<(Shard, Entry)>,
    pub(crate) waits: Vec<Answer>,
    /// Texts proposed once each.
    pub(crate) markers: Vec<String>,
    pub(crate) refusals: Vec<String>,
    pub(crate) rng: Rng,
}

impl World {
    pub(crate) fn new(seed: u64) -> World {
        let mut s = Session::new(1, "chaos", [7; 16]).unwrap();
        s.hub_mut().config = hub::HubConfig { deadline_ms: DEADLINE, grace_ms: GRACE };
        let mirror = Log::mirror(&State::new(), Box::new(RecordingHook::default()));
        let mut archive = Node::new(AttachmentId(1 << 23), State::new(), mirror);
        archive.catch_up(&s.view().log).unwrap();
        World {
            s,
            now: 0,
            clients: Vec::new(),
            archive,
            acked: Vec::new(),
            waits: Vec::new(),
            markers: Vec::new(),
            refusals: Vec::new(),
            rng: Rng(seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1),
        }
    }

    /// Ends a change as the daemon does (`Daemon::change`): writers hear
    /// the outcomes it decided; then the archive follows the log.
    pub(crate) fn archive(&mut self) {
        self.s.settle_change().expect("a session kept nowhere takes every change");
        self.archive.catch_up(&self.s.view().log).expect("the archive follows every entry");
    }

    pub(crate) fn join(&mut self, kind: AttachmentKind) -> usize {
        let name = format!("c{}", self.clients.len());
        let conn = self.s.hub_mut().open();
        self.clients.push(Client {
            link: Link::new(kind, &name),
            conn: Some(conn),
            wire: VecDeque::new(),
            paused: false,
            gone: false,
        });
        self.clients.len() - 1
    }

    pub(crate) fn link(&mut self, i: usize) -> &mut Link {
        &mut self.clients[i].link
    }

    /// Writes client `i`'s frames, each cut into random pieces.
    pub(crate) fn send(&mut self, i: usize) -> bool {
        let c = &mut self.clients[i];
        let Some(conn) = c.conn else { return false };
        if c.paused {
            return false;
        }
        c.link.flush();
        c.wire.extend(c.link.take_frames());
        let frames: Vec<(Vec<u8>, bool)> = c.wire.drain(..).collect();
        let moved = !frames.is_empty();
        for (bytes, _) in frames {
            let mut decoded = Frames::default();
            decoded.push(&bytes);
            let msg: ClientMsg = decoded.next_msg().unwrap().unwrap();
            let mut at = 0;
            while at < bytes.len() {
                let n = 1 + self.rng.below(bytes.len() as u64 - at as u64) as usize;
                let piece = &bytes[at..at + n];
                at += n;
                let r = protocol::write(&mut self.s, conn, piece, self.now);
                self.archive();
                if at < bytes.len() {
                    assert!(matches!(r, Ok(Written::Done)), "a partial frame is taken: {r:?}");
                    continue;
                }
                if std::env::var("APEX_CHAOS_TRACE").is_ok() {
                    if let ClientMsg::Append { shard, entries, answers, .. } = &msg {
                        let seqs: Vec<String> = entries.iter().map(|e| format!("{}:{:?}", e.seq, e.op)).collect();
                        let ids: Vec<u64> = answers.iter().map(|(id, _)| *id).collect();
                        eprintln!("  client {i} append {shard} {seqs:?} answers {ids:?} -> {r:?}");
                    }
                    if !matches!(msg, ClientMsg::Append { .. }) {
                        eprintln!(
                            "  client {i} sends {:?} -> {r:?}",
                            format!("{msg:?}").chars().take(120).collect::<String>()
                        );
                    }
                }
                match r {
                    Ok(Written::Done) => {
                        if let ClientMsg::Append { shard, entries, .. } = &msg {
                            self.acked.extend(entries.iter().map(|e| (*shard, e.clone())));
                        }
                    }
                    Ok(Written::Wait(_, rx)) => self.waits.push(rx),
                    Err(e) => self.refusals.push(e.to_string()),
                }
            }
        }
        self.s.hub_mut().wakeups.clear();
        moved
    }

    /// Reads for client `i` until the daemon has nothing more.
    pub(crate) fn recv(&mut self, i: usize) -> bool {
        self.recv_some(i, usize::MAX)
    }

    /// Reads for client `i` at most `reads` times.
    pub(crate) fn recv_some(&mut self, i: usize, reads: usize) -> bool {
        let Some(conn) = self.clients[i].conn else { return false };
        if self.clients[i].paused {
            return false;
        }
        let mut moved = false;
        for _ in 0..reads {
            let count = 1 + self.rng.below(70_000) as u32;
            match feed::read(&mut self.s, conn, count) {
                Ok(Some(bytes)) => {
                    self.clients[i].link.receive(bytes).expect("the daemon sends whole frames");
                    moved = true;
                }
                _ => return moved,
            }
        }
        moved
    }

    pub(crate) fn advance(&mut self, ms: u64) {
        self.now += ms;
        protocol::tick(&mut self.s, self.now);
        self.s.hub_mut().wakeups.clear();
        self.archive();
    }

    /// Moves bytes until nothing moves.
    pub(crate) fn settle(&mut self) {
        for _ in 0..200 {
            let mut moved = false;
            for i in 0..self.clients.len() {
                moved |= self.send(i);
                moved |= self.recv(i);
            }
            if !moved {
                return;
            }
        }
        panic!("the session did not settle in 200 rounds");
    }

    pub(crate) fn hangup(&mut self, i: usize) {
        if let Some(conn) = self.clients[i].conn.take() {
            protocol::hangup(&mut self.s, conn, self.now);
            self.clients[i].wire.clear();
            // What it held that others asked for goes to them: entries.
            self.archive();
        }
    }

    pub(crate) fn reconnect(&mut self, i: usize) {
        if self.clients[i].conn.is_none() && !self.clients[i].gone {
            self.clients[i].link.reconnect();
            self.clients[i].conn = Some(self.s.hub_mut().open());
        }
    }

    pub(crate) fn leave(&mut self, i: usize) {
        if let Some(conn) = self.clients[i].conn.take() {
            protocol::clunk(&mut self.s, conn, self.now);
            self.archive();
        }
        self.clients[i].gone = true;
    }

    pub(crate) fn pause(&mut self, i: usize, paused: bool) {
        self.clients[i].paused = paused;
    }

    /// Types `text` at a random place in a buffer client `i` leads.
    pub(crate) fn type_in(&mut self, i: usize, text: &str) -> Option<BufferId> {
        let link = &mut self.clients[i].link;
        let node = link.node()?;
        let led: Vec<BufferId> = node
            .led()
            .keys()
            .filter_map(|s| match s {
                Shard::Buffer(b) => Some(*b),
                _ => None,
            })
            .collect();
        let led: Vec<BufferId> = led.into_iter().filter(|b| link.leads(Shard::Buffer(*b))).collect();
        if led.is_empty() {
            return None;
        }
        let b = led[self.rng.below(led.len() as u64) as usize];
        let len = link.node().unwrap().state.buffer(b).ok()?.len();
        let q = self.rng.below(len + 1);
        let op = BufferOp::Splice { q0: q, q1: q, text: text.into(), origin: Origin::Keyboard };
        link.node_mut().unwrap().append(Shard::Buffer(b), Op::Buffer(op)).expect("a leader appends");
        Some(b)
    }

    /// Every check that holds after any step.
    pub(crate) fn check(&self) {
        let mut leaders: BTreeMap<(Shard, u64), usize> = BTreeMap::new();
        for (i, c) in self.clients.iter().enumerate() {
            let Some(node) = c.link.node() else { continue };
            for (shard, epoch) in node.led() {
                if let Some(j) = leaders.insert((*shard, *epoch), i) {
                    panic!("clients {j} and {i} both lead {shard} at epoch {epoch}");
                }
            }
            for (shard, log) in node.log.shards() {
                assert_eq!(node.state.applied(*shard), log.last(), "client {i}: {shard} applied and stored agree");
            }
        }
        let daemon = &self.s.view();
        for (shard, log) in daemon.log.shards() {
            assert_eq!(daemon.state.applied(*shard), log.last(), "daemon: {shard}");
        }
        for (shard, e) in &self.acked {
            if !self.archive.state.meta.has_shard(*shard) {
                continue; // deleted since
            }
            let kept = self.archive.log.entries_after(*shard, e.seq - 1).ok().and_then(|mut it| it.next().cloned());
            assert_eq!(kept.as_ref(), Some(e), "acknowledged entry {shard}:{} is in the log", e.seq);
        }
    }

    /// Lets everything finish: paused clients go on, deadlines and graces
    /// pass, every byte moves. Then every replica agrees with the daemon.
    pub(crate) fn quiesce(&mut self) {
        for i in 0..self.clients.len() {
            self.pause(i, false);
        }
        for _ in 0..4 {
            self.settle();
            self.advance(DEADLINE + GRACE + 1);
            self.settle();
        }
        self.check();
        let want = self.s.view().state.hash();
        assert_eq!(self.archive.state.hash(), want, "the archive replayed every entry");
        for (i, c) in self.clients.iter().enumerate() {
            if c.conn.is_none() {
                continue;
            }
            let node = c.link.node().expect("welcomed");
            if node.state.hash() != want && std::env::var("APEX_CHAOS_TRACE").is_ok() {
                for (shard, l) in node.log.shards() {
                    if format!("{shard}") == "buffer.1099511627784" {
                        eprintln!("client base {} lease {:?}", l.base, node.log.lease(*shard));
                        for e in &l.entries {
                            eprintln!("client {shard}: {e:?}");
                        }
                    }
                }
                for (shard, l) in node.log.shards() {
                    let theirs = self
                        .archive
                        .log
                        .shard(*shard)
                        .map(|l| l.entries.iter().map(|e| format!("{e:?}")).collect::<Vec<_>>());
                    let ours: Vec<String> = l.entries.iter().map(|e| format!("{e:?}")).collect();
                    if let Ok(t) = theirs {
                        for o in &ours {
                            if !t.contains(o) {
                                eprintln!("client {i} {shard} has {o}");
                            }
                        }
                    }
                }
            }
            if node.state.hash() != want {
                panic!(
                    "client {i} disagrees with the daemon: {}\nrefusals {:?}\nleases {:?}",
                    diff(&node.state, &self.s.view().state),
                    self.refusals,
                    self.s.view().log.held_by(node.attachment)
                );
            }
            assert!(c.link.quiet(), "client {i} has everything acknowledged: {:?}", c.link.unsettled());
        }
        // Every window is placed, once, and every number names a window:
        // none made by a leader that lost the layout is left shown nowhere.
        let state = &self.s.view().state;
        let placed: Vec<apex_core::WindowId> =
            state.layout.columns.iter().flat_map(|c| c.windows.iter().map(|p| p.window)).collect();
        for id in state.windows.keys() {
            let log = &self.s.view().log;
            assert_eq!(
                placed.iter().filter(|w| *w == id).count(),
                1,
                "window {id} is placed once (its lease {:?}, the layout's {:?}; clients {:?})",
                log.lease(Shard::Window(*id)),
                log.lease(Shard::Layout),
                self.clients
                    .iter()
                    .map(|c| (
                        c.link.attachment(),
                        c.conn.is_some(),
                        c.gone,
                        c.link.node().map(|n| {
                            let placed = n.state.layout.find(*id).is_some();
                            (n.leads(Shard::Layout), n.leads(Shard::Window(*id)), placed)
                        })
                    ))
                    .collect::<Vec<_>>()
            );
        }
        for (id, n) in &state.layout.numbers {
            assert!(state.windows.contains_key(id), "number {n:?} names window {id}, which is gone");
        }
        // A proposal lands at most once (a +Recovered copy of a fenced
        // tail aside).
        for m in &self.markers {
            let n: usize = state
                .buffers
                .values()
                .filter(|b| !b.name.ends_with("+Recovered"))
                .map(|b| b.text.to_string().matches(m.as_str()).count())
                .sum();
            let places: Vec<String> = state
                .buffers
                .iter()
                .filter(|(_, b)| b.text.to_string().contains(m.as_str()))
                .map(|(id, b)| format!("buffer {} {:?}: {:?}", id.0, b.name, b.text.to_string()))
                .collect();
            assert!(n <= 1, "proposal {m} landed {n} times: {places:?}");
        }
        for (k, rx) in self.waits.iter_mut().enumerate() {
            assert!(rx.try_recv().is_ok(), "proposal {k} was answered");
        }
    }
}

/// Where two states differ, for a failure message.
pub(crate) fn diff(a: &State, b: &State) -> String {
    let mut out = Vec::new();
    if a.applied != b.applied {
        let shards: std::collections::BTreeSet<_> = a.applied.keys().chain(b.applied.keys()).collect();
        for s in shards {
            let (x, y) = (a.applied.get(s), b.applied.get(s));
            if x != y {
                out.push(format!("{s}: applied {x:?} vs {y:?}"));
            }
        }
    }
    if a.meta != b.meta {
        out.push(format!("meta differs: leases {:?}\nvs {:?}", a.meta.leases, b.meta.leases));
    }
    for (id, buf) in &a.buffers {
        match b.buffers.get(id) {
            Some(o) if o != buf => {
                out.push(format!("buffer {}: {:?} vs {:?}", id.0, buf.text.to_string(), o.text.to_string()));
                let (x, y) = (format!("{buf:?}"), format!("{o:?}"));
                let at = x.chars().zip(y.chars()).position(|(p, q)| p != q).unwrap_or(0);
                let show = |s: &str| s.chars().skip(at.saturating_sub(150)).take(300).collect::<String>();
                out.push(format!("  first difference: {}\n  vs {}", show(&x), show(&y)));
            }
            None => out.push(format!("buffer {} only in the first", id.0)),
            _ => {}
        }
    }
    if a.layout != b.layout {
        out.push("layout differs".into());
    }
    if a.windows != b.windows {
        out.push("windows differ".into());
    }
    if a.id_marks != b.id_marks {
        out.push(format!("id marks {:?} vs {:?}", a.id_marks, b.id_marks));
    }
    out.join("\n")
}

pub(crate) fn text_of(w: &World, b: BufferId) -> String {
    w.s.view().state.buffer(b).unwrap().text.to_string()
}

/// A window made by UI `ui`, which leads the layout; its body buffer.
pub(crate) fn window(w: &mut World, ui: usize, name: &str) -> BufferId {
    let node = w.link(ui).node_mut().expect("welcomed");
    let made = make::new_window(node, None, None, name).expect("the UI leads the layout");
    w.settle();
    made.body
}

/// The buffers of every window's body.
pub(crate) fn bodies(w: &World) -> Vec<BufferId> {
    // A window whose body's entries were lost with a fenced tail has a
    // shard but no buffer; it is left out.
    let state = &w.s.view().state;
    state.windows.values().map(|win| win.body).filter(|b| state.buffers.contains_key(b)).collect()
}
