//! apex-link: the client side of apex's attach protocol (`NAME/attach`),
//! what a UI or a tool needs to lead or follow a session's shards, and
//! nothing of the daemon.
//!
//! # Brief overview
//!
//! - [`wire`]: the messages both sides exchange and their framing (a u32
//!   length, then postcard), with reassembly from arbitrary cuts.
//! - [`link`]: [`Link`], sans I/O: a node over a mirror log that leads what
//!   it holds a lease for, follows the rest, answers lease requests, and
//!   recovers a fenced tail into a `+Recovered` window.
//! - [`conn`]: [`Attached`], a link driven over one 9P fid (tokio), with a
//!   change subscription ([`Attached::changes`]) that wakes an event loop
//!   when entries, answers or lease changes arrive.
//! - [`plumber`]: a plumber as its clients reach it: send a message, read
//!   a port (the session's, or one another program posts).
//!
//! The daemon's side (the hub) lives in apex-fsd and takes its wire types
//! from here; `tests/tidy.rs` keeps this crate below it.
//!
//! ```
//! use apex_link::wire::{frame, ClientMsg, Frames};
//! use apex_core::AttachmentKind;
//!
//! let hello = ClientMsg::Hello { kind: AttachmentKind::Tool, name: "doc".into(), resume: None };
//! let bytes = frame(&hello);
//! let mut frames = Frames::default();
//! // A stream may be cut anywhere; whole frames come out.
//! frames.push(&bytes[..3]);
//! assert_eq!(frames.next_msg::<ClientMsg>(), Ok(None));
//! frames.push(&bytes[3..]);
//! assert_eq!(frames.next_msg::<ClientMsg>(), Ok(Some(hello)));
//! ```

pub mod conn;
pub mod error;
pub mod link;
pub mod plumber;
mod tail;
mod welcome;
pub mod wire;

pub use conn::Attached;
pub use error::LinkError;
pub use link::{Event, Link, Submitted};
