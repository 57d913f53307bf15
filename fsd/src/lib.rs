//! apex-fsd: the apex daemon, `apexd`, serving sessions as a 9P2000 file
//! system.
//!
//! # Brief overview
//!
//! - [`post`]: the namespace directory and the posted Unix socket, as
//!   plan9port services do it.
//! - [`session`]: one session: its view node over the authoritative log.
//! - [`registry`]: the daemon's sessions by name, and `/ctl`'s commands.
//! - [`tree`]: [`tree::Tree`], the file tree, a `ninep::srv::Serve`.
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

pub mod post;
pub mod registry;
pub mod session;
pub mod tree;
