//! apex-fsd: the apex daemon, `apexd`, serving sessions as a 9P2000 file
//! system.
//!
//! # Brief overview
//!
//! - [`post`]: the namespace directory and the posted Unix socket, as
//!   plan9port services do it.
//! - [`registry`]: the daemon's sessions and the registry log that makes
//!   them; `/ctl`'s commands.
//! - [`session`]: one session: its view node over the authoritative log,
//!   proposal outcomes, each buffer's addr.
//! - [`tree`]: [`tree::Tree`], the file tree, a `ninep::srv::Serve`;
//!   `tree::place` names every file, `tree::stream` serves the blocking
//!   streams.
//! - [`entrytext`]: entries as lossless text lines.
//! - [`proposals`]: the `proposals` file's language.
//! - [`buffers`]: the meaning of `buffers/N/` files.
//! - [`ctlmsg`]: ctl writes of several lines, checked whole; a session's
//!   ctl messages.
//! - [`acme`]: the acme(4) tree's meaning: index and ctl fields, ctl
//!   messages, events, looking things up.
//! - [`tables`]: the text tables of `meta/`, leases and outcomes.
//! - [`host`]: get, put and exec on the daemon's machine.
//!
//! The binary `apexd` (`src/bin/apexd.rs`) posts the socket, makes the
//! session `main`, and serves every connection with
//! `apex_ninep::srv::serve_conn` over a shared `Tree`.
//!
//! ```
//! use apex_fsd::registry::{parse_ctl, Command};
//! assert_eq!(parse_ctl("new work\n").unwrap(), vec![Command::New(Some("work".into()))]);
//! assert!(parse_ctl("nwe work").unwrap_err().contains("expected"));
//! ```

pub mod acme;
pub mod attach;
pub mod buffers;
pub mod ctl;
pub mod ctlmsg;
pub mod daemon;
pub mod entrytext;
pub mod error;
pub mod exec;
pub mod fsys;
pub mod host;
pub mod post;
pub mod proposals;
pub mod registry;
pub mod route;
pub mod session;
pub mod tables;
