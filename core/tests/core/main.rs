//! apex-core's integration tests, in one binary: the simulation harness and
//! the suites that use it.

mod apply;
mod cols;
mod edits;
mod exec;
mod fencing;
mod get;
mod plumbing;
mod proposals;
mod props;
mod sim;
mod text;
mod trace;
mod traces;
mod undo;
mod views;
