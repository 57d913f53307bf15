//! The daemon's side of the attach protocol (`NAME/attach`): UIs lead over
//! a mirror log, tools follow and propose, leadership moves safely between
//! them.
//!
//! - [`hub`]: one session's attach state, as data.
//! - [`protocol`]: the frames a connection writes, hang-ups and time.
//! - [`lease`]: leadership moves (ask, grant, reclaim, give back).
//! - [`feed`]: what each connection reads.
//! - [`error`]: why a frame was refused.
//! - [`route`]: where a proposal goes, for every writer (a tool's write
//!   to a file as much as an attached client's `Propose`).
//!
//! The client's side (frames, the link, the connection driver) is the
//! `apex-link` crate, re-exported here as [`wire`], [`link`] and [`conn`]
//! for the daemon's own `apex lead` and tests.

pub mod error;
pub mod feed;
pub mod hub;
pub mod lease;
pub mod protocol;
pub mod route;

pub use apex_link::{conn, link, wire};
