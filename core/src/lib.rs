//! apex-core: the replicated state machine every part of apex runs.
//!
//! A session is a set of append-only logs called shards. Each shard has one
//! leader, the only party allowed to append to it; everyone else follows,
//! replaying the shard's entries through the same pure [`State::apply`] and
//! reaching identical state. This crate is that machine and nothing else: no
//! I/O, no clock, no randomness, no async runtime. Everything arrives as an
//! [`Entry`].
//!
//! # Brief overview
//!
//! - [`Shard`] names a log: `Meta` (the metalog), `Layout`, `Window`,
//!   `Buffer`, `Term`. `Meta` and `Term` are pinned to the daemon.
//! - [`Entry`] is `{ seq, attachment, epoch, op }`; [`Op`] has one enum per
//!   shard kind, and [`Op::fits`] says where an op may go.
//! - [`State`] holds buffers (ropes with views, history and undo), windows,
//!   the layout, terminals and the metalog's state; `apply` refuses gaps,
//!   repeats, misplaced ops and fenced entries, changing nothing.
//!   Snapshots are its postcard bytes; [`State::hash`] is blake3 of them.
//! - [`Log`] stores the shards' entries and fences appends by lease
//!   `(holder, epoch)`: the authority on the daemon, a mirror on a client.
//! - [`Node`] is a replica: a state over a log, leading what it holds a
//!   lease for and following the rest.
//! - [`Proposal`]s are how non-leaders ask; [`propose::apply`] turns one
//!   into the leader's entries, rebased from the version it was made at.
//!
//! ```
//! use apex_core::{Node, Log, State, Shard, Op, BufferOp, Origin, AttachmentId, RecordingHook};
//!
//! // The daemon's node leads everything in a new session.
//! let mut leader = Node::server();
//! let b = leader.create_buffer_as("hello.txt").unwrap();
//! let op = BufferOp::Splice { q0: 0, q1: 0, text: "hello".into(), origin: Origin::Keyboard };
//! leader.append(Shard::Buffer(b), Op::Buffer(op)).unwrap();
//!
//! // A follower replays the log, metalog first, and agrees exactly.
//! let mut follower = Node::new(AttachmentId(1), State::new(),
//!     Log::mirror(&State::new(), Box::new(RecordingHook::default())));
//! follower.catch_up(&leader.log).unwrap();
//! assert_eq!(follower.state.hash(), leader.state.hash());
//! assert_eq!(follower.state.buffer(b).unwrap().text.to_string(), "hello");
//! ```

pub mod addr;
pub mod buf;
pub mod bytes;
pub mod changes;
pub mod cols;
pub mod ctlword;
pub mod dump;
pub mod ecmd;
pub mod edit;
pub mod entries;
pub mod entry;
pub mod error;
pub mod exec;
pub mod format;
pub mod frac;
pub mod grid;
pub mod hashtree;
pub mod id;
pub mod layout;
pub mod lease;
pub mod log;
pub mod look;
pub mod make;
pub mod meta;
pub mod node;
pub mod op;
pub mod packed;
pub mod plumb;
pub mod propose;
pub mod registry;
pub mod regx;
pub mod shard;
pub mod show;
pub mod snap;
pub mod spots;
pub mod state;
pub mod term;
pub mod text;
mod undo;
pub mod view;
pub mod win;

pub use buf::{Buffer, HISTORY_LIMIT};
pub use entry::Entry;
pub use error::{Reject, Result};
pub use id::{
    AcmeNumber, AttachmentId, BufferId, ColumnId, Epoch, GroupId, RuleId, Seq, SessionUuid, TermId, WindowId,
};
pub use layout::{Frac, Layout};
pub use lease::Lease;
pub use log::{Log, MirrorHook, RecordingHook, ShardLog, Sink};
pub use node::Node;
pub use op::{Action, AttachmentKind, BufferOp, LayoutOp, MetaOp, Op, Origin, TermOp, WindowFlags, WindowOp};
pub use propose::Proposal;
pub use shard::{Shard, ViewId};
pub use state::State;
pub use view::View;
