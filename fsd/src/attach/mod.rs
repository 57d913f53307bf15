//! The attach protocol (`NAME/attach`): UIs lead over a mirror log, tools
//! follow and propose, leadership moves safely between them.
//!
//! - [`wire`]: the messages and their framing (u32 length + postcard).
//! - [`hub`]: the daemon's side, per session, sans I/O.
//! - [`link`]: the client's side, sans I/O: a node over a mirror log that
//!   leads what it holds, follows the rest, and recovers a fenced tail.
//! - [`conn`]: a link driven over a 9P connection (tokio).

pub mod conn;
pub mod hub;
pub mod link;
pub mod wire;
