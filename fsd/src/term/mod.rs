//! Terminals: real ptys in the daemon, like tmux panes. They outlive
//! every client; their screen and scrollback are a term shard the daemon
//! leads, replicated like everything else.
//!
//! - [`proc`]: the pty, the program, and the threads moving its bytes;
//!   what a session holds of a running terminal ([`proc::Running`]).
//! - [`emulator`]: `alacritty_terminal`, run here only, and the updates
//!   (core's `TermUpdate`) made of it.
//! - [`drive`]: the thread appending those updates, and starting one.
//! - [`output`]: the raw output for `cons` readers.
//! - [`ctl`]: the `terms/N/ctl` language.

pub mod ctl;
pub mod drive;
pub mod files;
