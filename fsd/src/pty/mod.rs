//! Terminals below the session: a program on a pty (`proc`), its output
//! read without blocking anyone (`output`), and the VT emulator that turns
//! it into a grid (`emulator`); the program and its pty are held by a
//! keeper process (`keeper`, which hands the pty over by `fdpass`), so a
//! terminal outlives the daemon that started it. The driver above them, which appends the
//! term shards, and `terms/N/ctl`'s language are `term`.

pub mod cwd;
pub mod emulator;
pub mod fdpass;
pub mod keeper;
pub mod output;
pub mod proc;
pub mod repaint;
