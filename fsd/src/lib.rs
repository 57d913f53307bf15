//! apex-fsd: the apex daemon, `apexd`, serving sessions as a 9P2000 file
//! system.
//!
//! # Brief overview
//!
//! - [`fsys`]: [`fsys::Fsys`], the file tree, a `ninep::srv::Serve`:
//!   fids, walks, stats, opens, each request handed to its family's
//!   `files` (`registry::files`, `session::files`, `shards::files`,
//!   `buffers::files`, `acme::files`, `term::files`), which build on
//!   `fsys::tree`; `fsys::place` names every file, `fsys::fid` is what a
//!   fid holds, `fsys::error` why a file refuses, `fsys::ctl` the one
//!   shape of every ctl file's language (a verb table), `fsys::post` the
//!   namespace directory and the posted Unix socket, as plan9port
//!   services do it.
//! - [`daemon`]: [`daemon::Daemon`], the daemon apart from its files: the
//!   registry of sessions (each behind its own lock), reached through two
//!   verbs (`read`, `change`), the clock, wake-ups, waiting for a
//!   proposal's outcome.
//! - [`attach`]: the attach protocol's daemon side (hub data, protocol,
//!   leases, what each connection reads) and [`attach::route`], where a
//!   proposal goes, for every writer.
//! - [`host`]: get, put and exec on the daemon's machine, and
//!   [`host::headless`], the daemon as core's `exec::Host`.
//! - [`registry`]: the daemon's sessions and the registry log that makes
//!   them; `/ctl`'s commands.
//! - [`session`]: one session: its view node over the authoritative log,
//!   its hub, proposal outcomes, each buffer's addr; its `ctl` language
//!   ([`session::ctl`]) and the `proposals` file's ([`session::proposals`]).
//! - [`error`]: the daemon's typed errors.
//! - [`persist`]: the state directory: each session's write-ahead log
//!   and snapshots, the registry's log.
//! - [`buffers`]: the meaning of `buffers/N/` files.
//! - [`acme`]: the acme(4) tree's meaning: index and ctl fields, ctl
//!   messages, events, looking things up.
//! - [`shards`]: entries as lossless text lines, and the text tables of
//!   `meta/`, leases and outcomes.
//! - [`pty`]: terminals below the session: the pty, its output, the VT
//!   emulator; [`term`]: above it, the driver appending their term shards,
//!   and `terms/N/ctl`.
//! - [`plumb`]: the session's plumber: its ports, its rules into the
//!   metalog, sending, and plumber(4)'s files.
//! - [`access`]: who may do what over TCP: TLS (`access::tls`), tokens and
//!   9P's Tauth that proves one (`access::tokens`), and the scope a token
//!   grants each request; [`listen`]: the TCP listeners (TLS, or plain
//!   9P on loopback with `--insecure`).
//! - [`stdio`]: `apexd --stdio`, 9P on standard input and output relayed
//!   to the user's daemon (what ssh runs); [`import`]: `apex import
//!   ssh!HOST`, that relay's connection posted here and shared by every
//!   local client.
//!
//! The binary `apexd` (`src/bin/apexd.rs`) posts the socket, makes the
//! session `main`, and serves every connection with
//! `apex_ninep::srv::serve_conn` over a shared `Fsys`.
//!
//! ```
//! use apex_fsd::registry::{parse_ctl, Command};
//! assert_eq!(parse_ctl("new work\n").unwrap(), vec![Command::New(Some("work".into()))]);
//! assert!(parse_ctl("nwe work").unwrap_err().to_string().contains("expected"));
//! ```

pub mod access;
pub mod acme;
pub mod attach;
pub mod buffers;
pub mod daemon;
pub mod error;
pub mod fsys;
pub mod host;
pub mod import;
pub mod listen;
pub mod persist;
pub mod plumb;
pub mod pty;
pub mod registry;
pub mod session;
pub mod shards;
pub mod stdio;
pub mod term;
pub mod tls;
