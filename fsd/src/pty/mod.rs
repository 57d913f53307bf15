//! Terminals below the session: a program on a pty (`proc`), its output
//! read without blocking anyone (`output`), and the VT emulator that turns
//! it into a grid (`emulator`). The driver above them, which appends the
//! term shards, and `terms/N/ctl`'s language are `term`.

pub mod emulator;
pub mod output;
pub mod proc;
