//! `Link`: the client's side of the attach protocol, sans I/O.
//!
//! A link holds a [`Node`] over a mirror [`Log`] built from the Welcome
//! snapshot. Local appends (the UI's typing) apply at once; [`Link::flush`]
//! frames each led shard's new entries as `Append`, after the
//! `CreateShard`/`DeleteShard` its mirror hook queued, so the daemon has
//! granted the creator's lease before the entries arrive. Frames from the
//! daemon are applied as they come, the metalog first. Leadership is per
//! shard and read from the mirror's lease table: a `LeaseRequest` for a
//! led shard is answered by flushing and releasing at the last seq.
//!
//! When a lease is taken away while this replica has entries the daemon
//! never stored (a daemon restarted, a connection lost past its grace, a
//! zombie leader that was reclaimed), the replica has diverged: it asks
//! for a fresh Welcome and, from the old replica, takes each buffer's
//! unstored tail. Where nobody else changed the buffer past the tail's
//! base, the tail simply goes on: appended again where this replica
//! leads the buffer, proposed where another does. Only a real conflict
//! (someone else changed the buffer since) makes a window,
//! `FILE+Recovered`, one per buffer, that says what happened and holds
//! each piece to put back and where it was, with a note in
//! `meta/notifications`; a tag's typing and `+Errors`' output never do.
//! Nothing typed is silently lost.

pub use crate::tail::recovered_name;
use crate::tail::{pieces, proposable, recovery_text, splices_of, Replay, Tail};
use crate::welcome::{self, Streaming};
use crate::wire::{frame, ClientMsg, FrameError, Frames, Outcome, Refusal, Resume, ServerMsg};
use apex_core::propose::{self, Applied, Created};
use apex_core::{
    AttachmentId, AttachmentKind, BufferId, Entry, Epoch, Log, MetaOp, MirrorHook, Node, Op, Origin, Proposal, Seq,
    Shard, State,
};
use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::sync::{Arc, Mutex};

/// What happened that the link's user may want to show.
#[derive(Clone, Debug, PartialEq)]
pub enum Event {
    /// A Welcome arrived: attached (again) as this attachment.
    Welcome { attachment: AttachmentId },
    /// A led shard was taken away with entries the daemon never stored.
    Fenced { shard: Shard },
    /// A fenced buffer tail went into a `+Recovered` window.
    Recovered { buffer: BufferId, into: BufferId, entries: usize },
    /// The outcome of one of this link's proposals.
    Answer { id: u64, result: Outcome },
    /// The daemon said something (a refused resume, an expired lease).
    Error(String),
}

/// What `Link::submit` did with a change.
#[derive(Clone, Debug, PartialEq)]
pub enum Submitted {
    /// This link leads the shard: applied here, to go out at the next flush.
    Applied(Outcome),
    /// Sent to the holder as the proposal with this id.
    Sent(u64),
}

/// A message on its way out: framed when it is taken, or already framed
/// (frames taken and put back).
#[derive(Debug)]
pub enum Outgoing {
    Message(ClientMsg),
    Frames(Vec<u8>),
}

impl Outgoing {
    /// Its frames.
    pub fn into_frames(self) -> Vec<u8> {
        match self {
            Outgoing::Message(msg) => frame(&msg),
            Outgoing::Frames(bytes) => bytes,
        }
    }

    /// How many bytes its frames take.
    pub fn framed_len(&self) -> usize {
        match self {
            Outgoing::Message(msg) => crate::wire::framed_len(crate::wire::size_of(msg)),
            Outgoing::Frames(bytes) => bytes.len(),
        }
    }
}

/// A whole snapshot's state, or why it did not decode.
fn decode_snapshot(snapshot: &[u8]) -> Result<State, apex_core::Reject> {
    State::from_snapshot(snapshot)
}

/// The mirror hook: shard creations and deletions queued for the stream.
struct Queue(Arc<Mutex<VecDeque<ClientMsg>>>);

impl MirrorHook for Queue {
    fn create_shard(&mut self, shard: Shard) {
        self.0.lock().expect("hook lock").push_back(ClientMsg::CreateShard { shard });
    }
    fn delete_shard(&mut self, shard: Shard) {
        self.0.lock().expect("hook lock").push_back(ClientMsg::DeleteShard { shard });
    }
}

/// The client side of one attachment.
pub struct Link {
    kind: AttachmentKind,
    name: String,
    node: Option<Node>,
    token: u64,
    hooks: Arc<Mutex<VecDeque<ClientMsg>>>,
    pub(crate) frames: Frames,
    /// A Welcome in pieces being decoded as it arrives.
    pub(crate) streaming: Option<Streaming>,
    /// What to write, and whether each is a Propose (whose write returns
    /// only once the proposal is sequenced). Messages are framed by
    /// whoever takes them, off this link's lock (a flush after a 100 MB
    /// open is that much to encode).
    outbox: VecDeque<(Outgoing, bool)>,
    /// Per led shard, the last seq framed as Append.
    flushed: BTreeMap<Shard, Seq>,
    /// Per shard, the last seq the daemon acknowledged storing.
    acked: BTreeMap<Shard, Seq>,
    /// Waiting for a fresh Welcome; frames until then are ignored.
    resyncing: bool,
    /// Led shards to release at the next flush.
    releasing: BTreeSet<Shard>,
    /// Outcomes of routed proposals, sent after the entries they made.
    answers: Vec<(u64, Shard, Outcome)>,
    /// Routed proposals this replica has acted on: a copy that arrives
    /// again (sent before the lease went away and came back) is not
    /// applied twice. Each is forgotten once the daemon acknowledges the
    /// entries it made (its answer went with them), so this stays as
    /// small as what is in flight.
    acted: BTreeMap<u64, Acted>,
    /// Routed proposals that came while resynchronising.
    deferred: Vec<(u64, Epoch, Proposal)>,
    /// Fenced tails found at a Welcome, to recover once it is applied.
    pending_tails: Vec<Tail>,
    /// Unconflicted tails of buffers another leads, to propose once it is.
    pending_replays: Vec<Replay>,
    /// Tails being recovered, by the id of the proposal that makes their
    /// window.
    recovering: BTreeMap<u64, Tail>,
    next_proposal: u64,
    led_layout: bool,
    events: Vec<Event>,
    /// Proposals a caller waits on the answer to ([`Link::submit_awaited`]),
    /// and the answer once it came: kept out of `events`, so that another
    /// thread reading the events (a UI's, while its Edit's thread waits)
    /// cannot take it.
    awaited: BTreeMap<u64, Option<Outcome>>,
    /// Welcomes applied: the replica's generation, sent with appends so
    /// the daemon knows whether this replica already has them.
    generation: u64,
    /// Welcomes applied over the link's life, never reset: a replica made
    /// anew (after a reconnection) counts one more.
    welcomed: u64,
    /// Text bytes of the entries compacted away since last taken.
    compacted: usize,
}

/// A routed proposal this replica applied: its shard, the shard's last
/// seq after it, and the answer given.
#[derive(Debug)]
struct Acted {
    shard: Shard,
    made: Seq,
    result: Outcome,
}

impl Link {
    /// A link that will say Hello as `kind` named `name`.
    pub fn new(kind: AttachmentKind, name: &str) -> Link {
        let mut link = Link {
            kind,
            name: name.to_string(),
            node: None,
            token: 0,
            hooks: Arc::default(),
            frames: Frames::default(),
            streaming: None,
            outbox: VecDeque::new(),
            flushed: BTreeMap::new(),
            acked: BTreeMap::new(),
            resyncing: false,
            releasing: BTreeSet::new(),
            answers: Vec::new(),
            acted: BTreeMap::new(),
            deferred: Vec::new(),
            pending_tails: Vec::new(),
            recovering: BTreeMap::new(),
            pending_replays: Vec::new(),
            next_proposal: 1,
            led_layout: false,
            events: Vec::new(),
            awaited: BTreeMap::new(),
            generation: 0,
            welcomed: 0,
            compacted: 0,
        };
        link.send(ClientMsg::Hello { kind, name: name.to_string(), resume: None });
        link
    }

    /// Starts over on a new connection, asking to resume this attachment.
    /// Proposals framed but not written go after the Hello; anything else
    /// framed but not written is dropped, and unacked entries are sent
    /// again after the Welcome.
    pub fn reconnect(&mut self) {
        self.frames.clear();
        self.streaming = None;
        // Welcomes are counted per connection, as the daemon counts them:
        // an append says which of this connection's it was made after.
        self.generation = 0;
        // Proposals never written (a watching UI's typing while the
        // connection was down) go after the Hello: the daemon never saw
        // them, so they cannot be made twice. Whatever else was framed
        // is made again from the state after the Welcome.
        // (Not a +Recovered window's: its tail is proposed again after
        // the Welcome, below.)
        let recovering = &self.recovering;
        let unsent: Vec<(Outgoing, bool)> = self
            .outbox
            .drain(..)
            .filter(|(o, waits)| {
                *waits && !matches!(o, Outgoing::Message(ClientMsg::Propose { id, .. }) if recovering.contains_key(id))
            })
            .collect();
        self.answers.clear();
        // A resumed attachment is sent its unanswered proposals again.
        self.deferred.clear();
        let resume = self.node.as_ref().map(|n| Resume { attachment: n.attachment, token: self.token });
        self.send(ClientMsg::Hello { kind: self.kind, name: self.name.clone(), resume });
        self.outbox.extend(unsent);
        // Nothing more goes out until the Welcome says where we stand.
        self.resyncing = self.node.is_some();
        // A recovery proposal in flight when the connection went may never
        // be answered: its tail is recovered again (at worst twice, never
        // lost).
        let waiting = std::mem::take(&mut self.recovering);
        self.pending_tails.extend(waiting.into_values());
    }

    fn send(&mut self, msg: ClientMsg) {
        let waits = matches!(msg, ClientMsg::Propose { .. });
        self.outbox.push_back((Outgoing::Message(msg), waits));
    }

    /// Asks for every shard a UI leads (a watching UI's `Lead`).
    pub fn lead(&mut self) {
        self.send(ClientMsg::Lead);
    }

    /// Routed proposals remembered as acted on (bounded by what is in
    /// flight; for tests).
    pub fn acted_len(&self) -> usize {
        self.acted.len()
    }

    /// The replica, once welcomed.
    pub fn node(&self) -> Option<&Node> {
        self.node.as_ref()
    }

    /// The replica, to lead with: its appends apply at once and go out at
    /// the next flush.
    pub fn node_mut(&mut self) -> Option<&mut Node> {
        self.node.as_mut()
    }

    pub fn attachment(&self) -> Option<AttachmentId> {
        self.node.as_ref().map(|n| n.attachment)
    }

    /// Whether this link may append to `shard` now: it holds the lease and
    /// has every entry before the lease's base.
    pub fn leads(&self, shard: Shard) -> bool {
        let Some(n) = &self.node else { return false };
        if self.resyncing || !n.leads(shard) {
            return false;
        }
        n.log.lease(shard).is_ok_and(|l| n.log.last(shard) >= l.base)
    }

    /// A UI that led the layout and no longer does: it shows "watching"
    /// and follows.
    pub fn fenced(&self) -> bool {
        self.led_layout && !self.leads(Shard::Layout)
    }

    /// The last seq of `shard` the daemon acknowledged storing for us.
    pub fn acked(&self, shard: Shard) -> Seq {
        self.acked.get(&shard).copied().unwrap_or(0)
    }

    /// Whether everything this link sequenced is acknowledged.
    pub fn quiet(&self) -> bool {
        let Some(n) = &self.node else { return false };
        !self.resyncing
            && self.outbox.is_empty()
            && self.recovering.is_empty()
            && n.led().keys().all(|s| *s == Shard::Meta || n.log.last(*s) <= self.settled(n, *s))
    }

    /// Led shards with entries not yet acknowledged: (shard, last seq,
    /// last acknowledged), and whether a Welcome, a recovery or a write is
    /// awaited.
    pub fn unsettled(&self) -> (Vec<(Shard, Seq, Seq)>, [bool; 3]) {
        let Some(n) = &self.node else { return (Vec::new(), [true; 3]) };
        let shards = n
            .led()
            .keys()
            .filter(|s| **s != Shard::Meta)
            .map(|s| (*s, n.log.last(*s), self.settled(n, *s)))
            .filter(|(_, last, settled)| last > settled)
            .collect();
        (shards, [self.resyncing, !self.recovering.is_empty(), !self.outbox.is_empty()])
    }

    /// The last seq of a led shard that needs nothing more from this link:
    /// acknowledged, or before its lease began (another leader's).
    fn settled(&self, n: &Node, shard: Shard) -> Seq {
        let base = n.log.lease(shard).map_or(0, |l| l.base);
        self.acked.get(&shard).copied().unwrap_or(0).max(base)
    }

    /// What happened since the last call.
    pub fn events(&mut self) -> Vec<Event> {
        std::mem::take(&mut self.events)
    }

    /// Frames to write, each in Twrites of its own, with whether its
    /// write waits for a proposal's outcome.
    pub fn take_frames(&mut self) -> Vec<(Vec<u8>, bool)> {
        self.take_outgoing().into_iter().map(|(o, waits)| (o.into_frames(), waits)).collect()
    }

    /// What to write, not yet framed: [`Outgoing::into_frames`] is the
    /// caller's, with this link let go.
    pub fn take_outgoing(&mut self) -> Vec<(Outgoing, bool)> {
        self.outbox.drain(..).collect()
    }

    /// Frames taken but not written whole (the connection went), back at
    /// the front, in order.
    pub fn put_back(&mut self, frames: VecDeque<(Vec<u8>, bool)>) {
        for (bytes, waits) in frames.into_iter().rev() {
            self.outbox.push_front((Outgoing::Frames(bytes), waits));
        }
    }

    /// The sizes of the frames waiting to be written.
    pub fn waiting_frames(&self) -> Vec<usize> {
        self.outbox.iter().map(|(o, _)| o.framed_len()).collect()
    }

    /// Makes a change the way a leader or a follower must: applied here
    /// at once when this link leads the shard it touches, otherwise sent
    /// as a proposal to the holder (its outcome comes as `Event::Answer`).
    pub fn submit(&mut self, proposal: Proposal) -> Submitted {
        if self.leads(proposal.target()) {
            let node = self.node.as_mut().expect("a leader is welcomed");
            // Taken, not copied: a Get's text goes into the entries as it is.
            return Submitted::Applied(propose::apply_owned(node, proposal).map_err(Refusal::from));
        }
        Submitted::Sent(self.propose(proposal))
    }

    /// [`Link::submit`], with the answer of a proposal sent kept for
    /// [`Link::take_answer`] rather than given as an event.
    pub fn submit_awaited(&mut self, proposal: Proposal) -> Submitted {
        let submitted = self.submit(proposal);
        if let Submitted::Sent(id) = submitted {
            // Refused before it was sent: the answer is among the events.
            let given = self.events.iter().position(|e| matches!(e, Event::Answer { id: got, .. } if *got == id));
            let answer = given.and_then(|at| match self.events.remove(at) {
                Event::Answer { result, .. } => Some(result),
                _ => None,
            });
            self.awaited.insert(id, answer);
        }
        submitted
    }

    /// How many replicas the link has had: what was gathered from one is
    /// not placed by the versions of the next.
    pub fn welcomed(&self) -> u64 {
        self.welcomed
    }

    /// The answer to awaited proposal `id`, once it came; then it is
    /// forgotten.
    pub fn take_answer(&mut self, id: u64) -> Option<Outcome> {
        match self.awaited.get(&id) {
            Some(Some(_)) => self.awaited.remove(&id).flatten(),
            _ => None,
        }
    }

    /// Stops waiting for proposal `id`'s answer: when it comes, it is an
    /// event as any other.
    pub fn forget_answer(&mut self, id: u64) {
        if let Some(Some(result)) = self.awaited.remove(&id) {
            self.events.push(Event::Answer { id, result });
        }
    }

    /// Sends a proposal to the holder of the shard it touches; its outcome
    /// comes back as `Event::Answer` with the returned id.
    pub fn propose(&mut self, proposal: Proposal) -> u64 {
        // A long snarf goes in pieces, each a proposal of its own; the
        // last one's outcome is the snarf's.
        if let Proposal::Snarf { text } = &proposal {
            if text.len() > apex_core::op::SPLICE_MAX {
                let (mut id, mut at) = (0, 0);
                for (i, piece) in apex_core::op::pieces(text).into_iter().enumerate() {
                    let text = piece.to_string();
                    id = self.propose(match i {
                        0 => Proposal::Snarf { text },
                        _ => Proposal::SnarfMore { at, text },
                    });
                    at += piece.len() as u64;
                }
                return id;
            }
        }
        let id = self.next_proposal;
        self.next_proposal += 1;
        let msg = ClientMsg::Propose { id, proposal };
        let size = crate::wire::size_of(&msg);
        if size > crate::wire::CLIENT_MESSAGE_MAX {
            // The daemon would refuse it whole; say why here, as its
            // answer, and send nothing.
            let why = format!(
                "a change of {size} bytes is more than one proposal carries ({} bytes): make it where this client \
                 leads the text (Lead), or in parts",
                crate::wire::CLIENT_MESSAGE_MAX
            );
            self.events.push(Event::Answer { id, result: Err(Refusal::Said(why)) });
            return id;
        }
        self.send(msg);
        id
    }

    /// Asks for `buffer`'s lease for `ttl_ms` (a tool's bounded lease).
    pub fn ask_lease(&mut self, buffer: BufferId, ttl_ms: u64) {
        self.send(ClientMsg::Lease { shard: Shard::Buffer(buffer), ttl_ms });
    }

    /// Claims text for this attachment: its plumbing rules (plumb(7)) in
    /// place of those it had, sent at the next flush, which fails with the
    /// daemon's reason if they do not read.
    pub fn set_rules(&mut self, text: &str) {
        self.send(ClientMsg::Rules { text: text.to_string() });
    }

    /// Gives `shard` up at the next flush.
    pub fn release(&mut self, shard: Shard) {
        self.releasing.insert(shard);
    }

    /// Frames what the node did since the last flush: shard creations and
    /// deletions, each led shard's new entries, answers to routed
    /// proposals, then releases.
    pub fn flush(&mut self) {
        if self.resyncing {
            return;
        }
        // Led with every entry before the lease: what it shows is whole.
        let leads_layout = self.leads(Shard::Layout);
        let Some(node) = &mut self.node else { return };
        // A window whose maker lost the layout before placing it (or its
        // deleter before unplacing it), now led here with the layout:
        // placed, so it is shown (or its place dropped).
        if leads_layout {
            let _ = apex_core::make::mend_layout(node);
        } else {
            // One it leads that nothing places (its maker's placement was
            // fenced): let go of it, for the layout's holder to place. (One
            // whose placement is still on its way here is let go for
            // nothing worse than its lease moving.)
            let lost = apex_core::make::unplaced(&node.state).into_iter().filter(|w| node.leads(Shard::Window(*w)));
            self.releasing.extend(lost.map(Shard::Window));
        }
        let hooks = self.hooks.lock().expect("hook lock").drain(..).map(Outgoing::Message).collect();
        let mut out: Vec<Outgoing> = hooks;
        // The layout's entries, and any that carry a proposal's answer, go
        // last: a recipe (make.rs) writes a buffer before the window that
        // shows it and the window before its place in the layout, and the
        // daemon answers a proposal (a walk to `new`, say) as soon as its
        // answer arrives, so everything it made must be there by then.
        let mut late_msgs: Vec<Outgoing> = Vec::new();
        let me = node.attachment;
        for (shard, _) in node.led().clone() {
            if shard == Shard::Meta {
                continue;
            }
            let Ok(log) = node.log.shard(shard) else { continue };
            let from = self.flushed.get(&shard).copied().unwrap_or(0).max(log.base);
            let last = log.last();
            if last <= from {
                continue;
            }
            // Framed where they lie in the log, not copied out first.
            let entries: Vec<&Entry> = node
                .log
                .entries_after(shard, from)
                .map(|it| it.filter(|e| e.attachment == me).collect())
                .unwrap_or_default();
            self.flushed.insert(shard, last);
            if !entries.is_empty() {
                // The outcome of a proposal rides with its shard's entries,
                // so the daemon takes both or neither.
                let (mine, rest): (Vec<_>, Vec<_>) =
                    self.answers.drain(..).partition(|(_, s, r)| *s == shard && r.is_ok());
                self.answers = rest;
                let answers: Vec<_> = mine.into_iter().map(|(id, _, r)| (id, r)).collect();
                let late = shard == Shard::Layout || !answers.is_empty();
                let frames = crate::wire::append_frames(shard, &entries, self.generation, &answers);
                let frames = frames.into_iter().map(Outgoing::Frames);
                match late {
                    true => late_msgs.extend(frames),
                    false => out.extend(frames),
                }
            }
        }
        out.append(&mut late_msgs);
        for (id, _, result) in self.answers.drain(..) {
            out.push(Outgoing::Message(ClientMsg::Answer { id, result }));
        }
        for shard in std::mem::take(&mut self.releasing) {
            if node.leads(shard) {
                if let Ok(None) = node.release_lease(shard) {
                    out.push(Outgoing::Message(ClientMsg::Release { shard, seq: node.log.last(shard) }));
                }
            }
        }
        // None of these waits for an answer (a proposal's write does).
        self.outbox.extend(out.into_iter().map(|o| (o, false)));
    }

    /// Bytes read from `attach`. Frames are applied as they complete; a
    /// Welcome in pieces is decoded as they arrive.
    pub fn receive(&mut self, read: Vec<u8>) -> Result<(), FrameError> {
        let got = match &mut self.streaming {
            // All of the Welcome's frame: its decoder takes it as it is.
            Some(streaming) if streaming.inside(read.len()) => match streaming.feed_whole(read) {
                Some(decoded) => self.decoded(decoded),
                None => Ok(()),
            },
            _ => self.take_in(&read),
        };
        self.compact();
        got
    }

    /// [`Link::receive`] of bytes that may end a Welcome being decoded,
    /// hold whole messages, and begin another.
    fn take_in(&mut self, mut bytes: &[u8]) -> Result<(), FrameError> {
        if let Some(streaming) = &mut self.streaming {
            let (used, decoded) = streaming.feed(bytes)?;
            bytes = &bytes[used..];
            let Some(decoded) = decoded else { return Ok(()) };
            self.decoded(decoded)?;
        }
        self.frames.push(bytes);
        self.apply_frames()?;
        // What is left is the start of a message (all of it that has come);
        // a Welcome in pieces is decoded from here as it comes.
        if let Some(mut streaming) = welcome::begins(self.frames.held()).then(Streaming::start).flatten() {
            let held = std::mem::take(&mut self.frames);
            streaming.feed(held.held())?;
            self.streaming = Some(streaming);
        }
        Ok(())
    }

    /// A Welcome decoded as it arrived, now whole.
    fn decoded(&mut self, decoded: welcome::Decoded) -> Result<(), FrameError> {
        self.streaming = None;
        let (attachment, token, state) = decoded.map_err(|e| FrameError::Decode(e.to_string()))?;
        self.welcome(attachment, token, state);
        Ok(())
    }

    /// Applies every whole message held.
    fn apply_frames(&mut self) -> Result<(), FrameError> {
        let mut frames = std::mem::take(&mut self.frames);
        let got = loop {
            match frames.next_with(|bytes| self.on_bytes(bytes)) {
                Ok(Some(Ok(()))) => {}
                Ok(None) => break Ok(()),
                Ok(Some(Err(e))) | Err(e) => break Err(e),
            }
        };
        self.frames = frames;
        got
    }

    /// One message's bytes: a Welcome's snapshot is read where it lies in
    /// the frame buffer (it may be a whole session's text); any other
    /// message is decoded whole.
    fn on_bytes(&mut self, bytes: &[u8]) -> Result<(), FrameError> {
        if let Ok(WelcomeIn::Welcome { attachment, token, snapshot }) = postcard::from_bytes::<WelcomeIn>(bytes) {
            self.welcome(attachment, token, decode_snapshot(snapshot));
            return Ok(());
        }
        let msg = postcard::from_bytes::<ServerMsg>(bytes).map_err(|e| FrameError::Decode(e.to_string()))?;
        self.on(msg);
        Ok(())
    }

    fn on(&mut self, msg: ServerMsg) {
        match msg {
            ServerMsg::Welcome { attachment, token, snapshot } => {
                self.welcome(attachment, token, decode_snapshot(&snapshot))
            }
            ServerMsg::Entries { shard, entries } => {
                if !self.resyncing && self.node.is_some() {
                    self.entries(shard, entries);
                }
            }
            ServerMsg::Acked { shard, seq } => {
                let a = self.acked.entry(shard).or_insert(0);
                *a = (*a).max(seq);
                self.acted.retain(|_, a| a.shard != shard || a.made > seq);
            }
            ServerMsg::Proposal { id, epoch, proposal } => self.routed(id, epoch, proposal),
            ServerMsg::Answer { id, result } => match self.recovering.remove(&id) {
                Some(tail) => self.recovered(tail, result),
                None => match self.awaited.get_mut(&id) {
                    Some(slot) => *slot = Some(result),
                    None => self.events.push(Event::Answer { id, result }),
                },
            },
            ServerMsg::Error { text } => self.events.push(Event::Error(text)),
        }
    }

    /// A proposal routed here as the leader of its shard at `epoch`.
    fn routed(&mut self, id: u64, epoch: Epoch, proposal: Proposal) {
        let shard = proposal.target();
        if let Some(Acted { result: done, .. }) = self.acted.get(&id) {
            // Sent again (after a resume, say): answered again, not
            // applied again.
            let done = done.clone();
            self.answers.push((id, shard, done));
            return;
        }
        if self.resyncing {
            // Acted on once the Welcome says what this replica leads.
            self.deferred.push((id, epoch, proposal));
            return;
        }
        // Routed while this replica led at an earlier epoch (it lost the
        // lease and got it back since): stale. The daemon routed it again
        // when the lease moved, to this replica too if it leads now.
        let here = self.node.as_ref().and_then(|n| n.led().get(&shard).copied());
        if here.is_some_and(|e| e > epoch) {
            return;
        }
        let Some(node) = &mut self.node else { return };
        let result = propose::apply_owned(node, proposal).map_err(Refusal::from);
        if result.is_ok() {
            let made = node.log.last(shard);
            self.acted.insert(id, Acted { shard, made, result: result.clone() });
        }
        self.answers.push((id, shard, result));
    }

    /// A Welcome's state, or why its snapshot did not decode.
    fn welcome(&mut self, attachment: AttachmentId, token: u64, state: Result<State, apex_core::Reject>) {
        let state = match state {
            Ok(s) => s,
            Err(e) => {
                self.events.push(Event::Error(format!("attach: welcome snapshot does not decode: {e}")));
                return;
            }
        };
        let marks: BTreeMap<Shard, Seq> = state.applied.clone();
        let log = Log::mirror(&state, Box::new(Queue(self.hooks.clone())));
        let mut node = Node::new(attachment, state, log);
        self.hooks.lock().expect("hook lock").clear();
        let old = self.node.take();
        let old_attachment = old.as_ref().map(|n| n.attachment);
        let old_acked = std::mem::take(&mut self.acked);
        self.flushed = marks.clone();
        self.acked = marks;
        self.token = token;
        self.resyncing = false;
        self.generation += 1;
        self.welcomed += 1;
        if let Some(old) = old {
            self.carry_over(&old, &mut node, &old_acked);
            // What the old replica did to a shard still led at the same
            // epoch goes on (its entries were carried over, its answers go
            // with them); elsewhere routed proposals are acted on afresh,
            // as what was done may have been fenced.
            let kept: BTreeSet<Shard> = old
                .led()
                .iter()
                .filter(|(s, e)| node.attachment == old.attachment && node.led().get(s) == Some(e))
                .map(|(s, _)| *s)
                .collect();
            self.acted.retain(|_, a| kept.contains(&a.shard));
            self.answers.retain(|(_, s, _)| kept.contains(s));
        } else {
            self.acted.clear();
            self.answers.clear();
        }
        self.led_layout |= node.leads(Shard::Layout);
        let same = old_attachment == Some(node.attachment);
        self.node = Some(node);
        self.events.push(Event::Welcome { attachment });
        // Proposals that came while resynchronising, for this attachment
        // (a new one's were routed elsewhere when the old one ended).
        for (id, epoch, proposal) in std::mem::take(&mut self.deferred) {
            if same {
                self.routed(id, epoch, proposal);
            }
        }
        self.recover_tails();
    }

    /// From the replica before a Welcome: entries the daemon has not
    /// acknowledged go on under the same lease (a resume), or are a fenced
    /// tail to recover.
    fn carry_over(&mut self, old: &Node, node: &mut Node, old_acked: &BTreeMap<Shard, Seq>) {
        let resumed = node.attachment == old.attachment;
        // Every shard the old node held, released ones too: a release
        // sent after a tail the daemon refused does not make it stored.
        let held: Vec<(Shard, Epoch)> = old
            .log
            .shards()
            .filter(|(s, _)| **s != Shard::Meta)
            .filter_map(|(s, _)| old.log.lease(*s).ok().filter(|l| l.holder == old.attachment).map(|l| (*s, l.epoch)))
            .collect();
        // Entries routed proposals made here: the daemon routes those
        // proposals again to whoever leads now, so they are never this
        // replica's to put back (a flushed write stays unwritten).
        let routed: BTreeSet<(Shard, Seq)> = self
            .acted
            .values()
            .filter_map(|a| a.result.as_ref().ok())
            .flat_map(|applied| applied.entries.iter().flat_map(|r| r.each()))
            .collect();
        // Ids from here on the daemon has never seen (taken before any
        // shard is made again below).
        let unseen = node.state.next_id_counter(node.attachment);
        for (shard, epoch) in &held {
            let (shard, epoch) = (shard, epoch);
            // Entries up to the lease's base are another leader's, and may
            // be compacted away here.
            let base = old.log.shard(*shard).map_or(0, |l| l.base);
            let acked = old_acked.get(shard).copied().unwrap_or(0).max(base);
            let Ok(after) = old.log.entries_after(*shard, acked) else { continue };
            let unacked: Vec<Entry> = after.filter(|e| e.attachment == old.attachment).cloned().collect();
            if unacked.is_empty() {
                continue;
            }
            // A shard the old node made that the daemon never heard of is
            // made again, if its whole log is still here.
            // (A shard whose id the daemon has seen, even one deleted
            // since, is never made again: ids are not reused.)
            let seen = shard_counter(*shard).is_none_or(|c| c < unseen);
            let unknown = !seen && node.log.shard(*shard).is_err() && *epoch == 1 && unacked[0].seq == 1;
            if resumed
                && unknown
                && node.create_shard(*shard).is_ok()
                && node.accept_all(*shard, unacked.clone()).is_ok()
            {
                continue;
            }
            let kept = resumed && node.led().get(shard) == Some(epoch);
            if kept {
                let have = node.log.last(*shard);
                let rest: Vec<Entry> = unacked.iter().filter(|e| e.seq > have).cloned().collect();
                if node.accept_all(*shard, rest).is_ok() {
                    continue;
                }
            }
            self.events.push(Event::Fenced { shard: *shard });
            let Shard::Buffer(b) = shard else { continue };
            let Ok(buf) = old.state.buffer(*b) else { continue };
            // Nobody else wrote to it past the tail's base, and all of
            // the tail is this replica's own: it goes on.
            let untouched = node.log.shard(*shard).is_ok()
                && node.log.last(*shard) == acked
                && !unacked.iter().any(|e| routed.contains(&(*shard, e.seq)));
            if untouched && node.leads(*shard) && unacked.iter().all(|e| node.append(*shard, e.op.clone()).is_ok()) {
                continue;
            }
            // Proposed, only a tail of plain typing goes on: an undo's
            // edits are no splices to propose.
            if untouched && !node.leads(*shard) && unacked.iter().all(|e| proposable(&e.op)) {
                if let Ok(now) = node.state.buffer(*b) {
                    let splices = unacked.iter().flat_map(|e| splices_of(&e.op)).collect();
                    self.pending_replays.push(Replay { buffer: *b, version: now.version, splices });
                    continue;
                }
            }
            // A conflict. A tag's typing and +Errors' output are not kept.
            let is_tag = old.state.windows.values().any(|w| w.tag == *b);
            if is_tag || buf.name.ends_with("+Errors") {
                continue;
            }
            let splices: Vec<_> = unacked.iter().flat_map(|e| splices_of(&e.op)).collect();
            // Nothing in it changed text (a buffer made and shown, say,
            // whose shard the daemon discarded): nothing to recover.
            let changed_text = unacked.iter().any(|e| {
                matches!(
                    e.op,
                    Op::Buffer(
                        apex_core::BufferOp::Splice { .. }
                            | apex_core::BufferOp::Splices { .. }
                            | apex_core::BufferOp::Undo
                            | apex_core::BufferOp::Redo
                    )
                )
            });
            if !changed_text {
                continue;
            }
            self.pending_tails.push(Tail {
                from: old.attachment,
                epoch: *epoch,
                buffer: *b,
                name: buf.name.clone(),
                text: buf.text.to_string(),
                pieces: pieces(&splices),
                gone: node.log.shard(*shard).is_err(),
                entries: old.log.last(*shard).saturating_sub(acked) as usize,
            });
        }
        node.refresh_counters();
    }

    fn recover_tails(&mut self) {
        for r in std::mem::take(&mut self.pending_replays) {
            for (version, (q0, q1, text, origin)) in (r.version..).zip(r.splices) {
                self.propose(Proposal::splice(r.buffer, version, q0, q1, text, origin));
            }
        }
        for tail in std::mem::take(&mut self.pending_tails) {
            let name = recovered_name(&tail.name);
            let id = self.propose(Proposal::CreateWindow { body: None, column: None, name, near: None });
            self.recovering.insert(id, tail);
        }
    }

    /// The `+Recovered` window exists: fill it, mark it dirty, say so.
    fn recovered(&mut self, tail: Tail, result: Outcome) {
        let body = match result {
            Ok(Applied { created: Created::Window(w), .. }) => w.body,
            Ok(_) => return,
            Err(e) => {
                self.events.push(Event::Error(format!("could not make a +Recovered window: {e}")));
                return;
            }
        };
        // In pieces each one splice: the window is new, so the k-th is
        // made at version k, after the pieces before it.
        let text = recovery_text(&tail);
        let mut q0 = 0;
        for (version, piece) in apex_core::op::pieces(&text).into_iter().enumerate() {
            let text = piece.to_string();
            let runes = piece.chars().count() as u64;
            self.propose(Proposal::Insert {
                buffer: body,
                version: version as u64,
                q0,
                text,
                origin: Origin::OtherFile,
            });
            q0 += runes;
        }
        self.propose(Proposal::Dirty { buffer: body });
        let text = format!(
            "recovered {} entries of buffer {} ({}) that {} typed at epoch {} and another changed since; \
             what to put back is in {}",
            tail.entries,
            tail.buffer.0,
            tail.name,
            tail.from,
            tail.epoch,
            recovered_name(&tail.name)
        );
        self.send(ClientMsg::Notify { text });
        self.events.push(Event::Recovered { buffer: tail.buffer, into: body, entries: tail.entries });
    }

    fn entries(&mut self, shard: Shard, entries: Vec<Entry>) {
        let node = self.node.as_mut().expect("welcomed");
        let me = node.attachment;
        if shard != Shard::Meta {
            if node.log.shard(shard).is_err() {
                return; // deleted here already; the daemon's ShardDel follows
            }
            // Our own entries come back when the daemon cannot know we
            // have them (after a Welcome, or behind others' entries).
            let have = node.log.last(shard);
            if let Some(e) = entries.iter().find(|e| e.seq <= have && e.attachment != me) {
                let why = format!("{shard}: seq {} from {} is one this replica has as its own", e.seq, e.attachment);
                self.diverged(why);
                return;
            }
            let entries: Vec<Entry> = entries.into_iter().filter(|e| e.seq > have).collect();
            if let Err((_, e)) = node.accept_all(shard, entries) {
                self.diverged(format!("{shard}: {e}"));
            }
            return;
        }
        for entry in entries {
            if let Op::Meta(op) = &entry.op {
                match op {
                    MetaOp::LeaseGrant { shard, base, .. } | MetaOp::LeaseReclaim { shard, base, .. }
                        if node.log.last(*shard) > *base =>
                    {
                        // The daemon had `base` when the lease moved, and
                        // entries reach a follower only in its order: more
                        // here are ours that it never stored (led, or
                        // released after it was too late).
                        let shard = *shard;
                        self.diverged(format!("lease of {shard} was taken while entries were in flight"));
                        return;
                    }
                    MetaOp::LeaseRequest { shard, by } if *by != me && node.leads(*shard) => {
                        self.releasing.insert(*shard);
                    }
                    _ => {}
                }
            }
            if let Err(e) = node.accept(Shard::Meta, entry) {
                self.diverged(format!("metalog: {e}"));
                return;
            }
        }
        self.led_layout |= node.leads(Shard::Layout);
    }

    /// The replica no longer agrees with the daemon: ask for a snapshot.
    fn diverged(&mut self, why: String) {
        tracing::info!(why, "attach: replica diverged; resynchronising");
        self.resyncing = true;
        self.releasing.clear();
        self.send(ClientMsg::Resync);
    }
}

/// The id counter of a shard a node makes.
fn shard_counter(shard: Shard) -> Option<u64> {
    match shard {
        Shard::Buffer(b) => Some(b.counter()),
        Shard::Window(w) => Some(BufferId(w.0).counter()),
        Shard::Term(t) => Some(BufferId(t.0).counter()),
        Shard::Layout | Shard::Meta => None,
    }
}

/// `ServerMsg::Welcome` (its first variant), borrowing its snapshot; any
/// other message does not decode as this.
#[derive(Debug, PartialEq, serde::Deserialize)]
enum WelcomeIn<'a> {
    Welcome { attachment: AttachmentId, token: u64, snapshot: &'a [u8] },
}

mod compact;
#[cfg(test)]
mod tests;
