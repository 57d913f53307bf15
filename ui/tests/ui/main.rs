//! apex-ui's tests, in one binary: the headless renderer queried pixel by
//! pixel over a real session state (two columns, a Zerox copy, a
//! selection, a long wrapped line, a dirty window); the input layer's
//! scripted sequences; and the real program under Xvfb.

mod bigfile;
mod fonts;
mod input;
mod longedit;
mod plumber;
mod plumbing;
mod reconnect;
mod reflexes;
mod remote;
mod render;
mod session;
mod start;
mod support;
mod terminal;
mod termwin;
mod windows;
mod xvfb;
