//! apex-ui's tests, in one binary: the headless renderer queried pixel by
//! pixel over a real session state (two columns, a Zerox copy, a
//! selection, a long wrapped line, a dirty window).

mod input;
mod render;
