//! `State` and `apply`: the whole replicated state of a session, and the one
//! function that changes it.
//!
//! `apply` is pure and deterministic: no clock, no randomness, no I/O, and
//! it iterates only ordered maps. A leader that appends and applies and a
//! follower that only applies therefore end with equal state, which
//! `State::hash` checks. `apply` is dispatch only: each op's work lives in
//! its concept's file (`buf.rs`, `win.rs`, `layout.rs`, `term.rs`,
//! `meta.rs`). It refuses, with a typed error and without changing
//! anything, an op that does not fit the shard, a seq that is not exactly
//! the next, an entry outside the shard's current lease, and any op that
//! its shard's state refuses.

use crate::buf::Buffer;
use crate::entry::Entry;
use crate::error::{Reject, Result};
use crate::id::{AttachmentId, BufferId, Seq, TermId, WindowId};
use crate::layout::Layout;
use crate::meta::Meta;
use crate::op::{BufferOp, MetaOp, Op, TermOp, WindowOp};
use crate::shard::Shard;
use crate::term::Term;
use crate::win::Window;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// A session's state: what every replica agrees on.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct State {
    pub meta: Meta,
    pub layout: Layout,
    pub windows: BTreeMap<WindowId, Window>,
    pub buffers: BTreeMap<BufferId, Buffer>,
    pub terms: BTreeMap<TermId, Term>,
    /// The last seq applied on each shard.
    pub applied: BTreeMap<Shard, Seq>,
    /// Highest id counter each attachment has used for a shard (buffers,
    /// windows, terms), so a node restored from this state starts past it.
    /// Columns and undo groups keep their marks in the layout and in each
    /// buffer: a mark must live in the shard whose entries set it, or a
    /// replica that skips a deleted shard's tail would disagree.
    pub id_marks: BTreeMap<AttachmentId, u64>,
}

/// One shard's part of the state, kept while a batch applies.
struct Saved {
    applied: Seq,
    id_marks: BTreeMap<AttachmentId, u64>,
    part: Part,
}

enum Part {
    Buffer(Option<Box<Buffer>>),
    Window(Option<Window>),
    Term(Option<Term>),
    Layout(Box<Layout>),
}

impl State {
    /// A state with only the metalog.
    pub fn new() -> State {
        State::default()
    }

    /// The last seq applied on `shard` (0 for none).
    pub fn applied(&self, shard: Shard) -> Seq {
        self.applied.get(&shard).copied().unwrap_or(0)
    }

    pub fn buffer(&self, id: BufferId) -> Result<&Buffer> {
        self.buffers.get(&id).ok_or(Reject::NotCreated { shard: Shard::Buffer(id) })
    }

    pub fn window(&self, id: WindowId) -> Result<&Window> {
        self.windows.get(&id).ok_or(Reject::NoWindow { window: id })
    }

    /// Applies `entry` to `shard`. On error the state is unchanged.
    /// Inlined into a node's append and accept: a keystroke's whole apply
    /// is a hundred nanoseconds, and the call showed in it.
    #[inline]
    pub fn apply(&mut self, shard: Shard, entry: &Entry) -> Result<()> {
        if !entry.op.fits(&shard) {
            return Err(Reject::WrongShard { op: entry.op.kind(), shard });
        }
        let want = self.applied(shard) + 1;
        if entry.seq != want {
            return Err(Reject::Sequence { shard, got: entry.seq, want });
        }
        self.fence(shard, entry)?;
        self.apply_op(shard, &entry.op)?;
        // A shard that exists (the fence found its lease) is still there
        // after its own entry: only metalog entries delete shards.
        self.applied.insert(shard, entry.seq);
        Ok(())
    }

    /// [`State::apply`] of an entry its node's log has just checked
    /// against the same lease table and the same last seq (a node keeps
    /// its log's and its state's in step): the fence and the seq are not
    /// looked up a second time on every keystroke.
    pub(crate) fn apply_admitted(&mut self, shard: Shard, entry: &Entry) -> Result<()> {
        debug_assert_eq!(self.applied(shard) + 1, entry.seq, "the log's last seq is the state's");
        debug_assert!(self.fence(shard, entry).is_ok(), "the log's lease table is the state's");
        self.apply_op(shard, &entry.op)?;
        self.applied.insert(shard, entry.seq);
        Ok(())
    }

    /// Checks that `entry` lies within `shard`'s lease as this replica
    /// knows it (see `lease.rs`).
    pub fn fence(&self, shard: Shard, entry: &Entry) -> Result<()> {
        self.meta.leases.get(shard)?.admit(shard, entry)
    }

    fn apply_op(&mut self, shard: Shard, op: &Op) -> Result<()> {
        match (shard, op) {
            (Shard::Buffer(id), Op::Buffer(op)) => self.apply_buffer(id, op),
            (Shard::Window(id), Op::Window(op)) => self.apply_window(id, op),
            (Shard::Layout, Op::Layout(op)) => self.layout.apply(op),
            (Shard::Term(id), Op::Term(op)) => self.apply_term(id, op),
            (Shard::Meta, Op::Meta(op)) => self.apply_meta(op),
            _ => Err(Reject::WrongShard { op: op.kind(), shard }),
        }
    }

    fn apply_buffer(&mut self, id: BufferId, op: &BufferOp) -> Result<()> {
        let shard = Shard::Buffer(id);
        if let BufferOp::Create { name } = op {
            if self.buffers.contains_key(&id) {
                return Err(Reject::Created { shard });
            }
            self.buffers.insert(id, Buffer::new(name.clone()));
            return Ok(());
        }
        self.buffers.get_mut(&id).ok_or(Reject::NotCreated { shard })?.apply(op)
    }

    fn apply_window(&mut self, id: WindowId, op: &WindowOp) -> Result<()> {
        let shard = Shard::Window(id);
        if let WindowOp::Create { tag, body } = op {
            if self.windows.contains_key(&id) {
                return Err(Reject::Created { shard });
            }
            self.windows.insert(id, Window::new(*tag, *body));
            return Ok(());
        }
        self.windows.get_mut(&id).ok_or(Reject::NotCreated { shard })?.apply(op)
    }

    fn apply_term(&mut self, id: TermId, op: &TermOp) -> Result<()> {
        let shard = Shard::Term(id);
        if let TermOp::Create { cols, rows, scrollback, command, dir } = op {
            if self.terms.contains_key(&id) {
                return Err(Reject::Created { shard });
            }
            self.terms.insert(id, Term::new(*cols, *rows, *scrollback, command.clone(), dir.clone())?);
            return Ok(());
        }
        self.terms.get_mut(&id).ok_or(Reject::NotCreated { shard })?.apply(op)
    }

    fn apply_meta(&mut self, op: &MetaOp) -> Result<()> {
        self.meta.apply(op)?;
        match op {
            MetaOp::ShardNew { shard, .. } => self.mark_shard(*shard),
            MetaOp::ShardDel { shard } => {
                self.applied.remove(shard);
                match shard {
                    Shard::Buffer(b) => {
                        self.buffers.remove(b);
                    }
                    Shard::Window(w) => {
                        self.windows.remove(w);
                    }
                    Shard::Term(t) => {
                        self.terms.remove(t);
                    }
                    Shard::Layout => self.layout = Layout::default(),
                    Shard::Meta => {}
                }
            }
            _ => {}
        }
        Ok(())
    }

    /// Applies a shard creation or deletion without sequencing it: a mirror
    /// does this for a shard its own node creates or deletes, ahead of the
    /// daemon's `ShardNew`/`ShardDel`, which then applies as a no-op.
    pub fn apply_unsequenced(&mut self, op: &MetaOp) -> Result<()> {
        match op {
            MetaOp::ShardNew { .. } | MetaOp::ShardDel { .. } => self.apply_meta(op),
            _ => Err(Reject::ServerOnly { shard: Shard::Meta }),
        }
    }

    fn mark_shard(&mut self, shard: Shard) {
        let id = match shard {
            Shard::Buffer(b) => b.0,
            Shard::Window(w) => w.0,
            Shard::Term(t) => t.0,
            Shard::Layout | Shard::Meta => return,
        };
        let id = BufferId(id);
        crate::id::mark(&mut self.id_marks, id.issuer(), id.counter());
    }

    /// Applies `entries` to `shard` in order, all or nothing: if one is
    /// refused, the shard is put back as it was and the error says which.
    /// Only for shards other than the metalog (whose entries change
    /// leases, and which is applied entry by entry).
    pub fn apply_all(&mut self, shard: Shard, entries: &[Entry]) -> std::result::Result<(), (usize, Reject)> {
        if shard == Shard::Meta {
            return Err((0, Reject::ServerOnly { shard }));
        }
        if let [one] = entries {
            // The common case copies nothing: apply checks before it
            // changes anything.
            return self.apply(shard, one).map_err(|e| (0, e));
        }
        let saved = self.save(shard);
        for (i, entry) in entries.iter().enumerate() {
            if let Err(e) = self.apply(shard, entry) {
                self.restore(shard, saved);
                return Err((i, e));
            }
        }
        Ok(())
    }

    fn save(&self, shard: Shard) -> Saved {
        Saved {
            applied: self.applied(shard),
            id_marks: self.id_marks.clone(),
            part: match shard {
                Shard::Buffer(b) => Part::Buffer(self.buffers.get(&b).cloned().map(Box::new)),
                Shard::Window(w) => Part::Window(self.windows.get(&w).cloned()),
                Shard::Term(t) => Part::Term(self.terms.get(&t).cloned()),
                Shard::Layout | Shard::Meta => Part::Layout(Box::new(self.layout.clone())),
            },
        }
    }

    fn restore(&mut self, shard: Shard, saved: Saved) {
        fn put<K: Ord, V>(map: &mut BTreeMap<K, V>, k: K, v: Option<V>) {
            match v {
                Some(v) => map.insert(k, v),
                None => map.remove(&k),
            };
        }
        match (shard, saved.part) {
            (Shard::Buffer(b), Part::Buffer(v)) => put(&mut self.buffers, b, v.map(|b| *b)),
            (Shard::Window(w), Part::Window(v)) => put(&mut self.windows, w, v),
            (Shard::Term(t), Part::Term(v)) => put(&mut self.terms, t, v),
            (_, Part::Layout(l)) => self.layout = *l,
            _ => unreachable!("saved from the same shard"),
        }
        self.applied.insert(shard, saved.applied);
        self.id_marks = saved.id_marks;
    }

    /// The next id counter a node of `a` may use, past every mark.
    pub fn next_id_counter(&self, a: AttachmentId) -> u64 {
        let shards = self.id_marks.get(&a).copied().unwrap_or(0);
        let columns = self.layout.column_marks.get(&a).copied().unwrap_or(0);
        shards.max(columns) + 1
    }

    /// The next undo-group counter a node of `a` may use: past every group
    /// id in a live buffer (group ids need only be unique where they live).
    pub fn next_group_counter(&self, a: AttachmentId) -> u64 {
        self.buffers.values().filter_map(|b| b.group_marks.get(&a)).max().copied().unwrap_or(0) + 1
    }
}
