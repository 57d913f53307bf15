//! The daemon's side of the attach protocol (`NAME/attach`): UIs lead over
//! a mirror log, tools follow and propose, leadership moves safely between
//! them.
//!
//! - [`hub`]: the daemon's side, per session, sans I/O.
//! - [`feed`]: what each connection reads.
//!
//! The client's side (frames, the link, the connection driver) is the
//! `apex-link` crate, re-exported here as [`wire`], [`link`] and [`conn`]
//! for the daemon's own `apex lead` and tests.

pub mod feed;
pub mod hub;

pub use apex_link::{conn, link, wire};
