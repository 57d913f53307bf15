//! apex-ui: the acme-like window onto an apex session.
//!
//! Built the way the issue lays it out, model apart from the window:
//!
//! - [`geom`]: the screen model's geometry, from the layout shard and the
//!   font: the row tag, columns and windows with their tags, layout boxes,
//!   scroll bars and bodies.
//! - [`rect`]: `Rect`, the half-open rectangle of pixels.
//! - [`frame`]: laying a text out in a rectangle (wrapping, tabs), runes to
//!   points and back, as acme's libframe.
//! - [`font`]: the two faces (the embedded Go fonts, or those `-f` and
//!   `-F` name) and their glyph caches.
//! - [`fontconfig`]: the system's fonts, through fontconfig loaded at run
//!   time.
//! - [`palette`]: acme's colours.
//! - [`render`]: the headless renderer, drawing the model into a
//!   [`canvas`] (a pixel buffer), part by part.
//! - [`damage`]: what changed since the last frame, so only that is drawn
//!   and presented.
//! - [`input`]: mouse and keyboard events made edits of the led replica
//!   (typing, selecting, double-clicks, scrolling, acme's control keys)
//!   and B2/B3 actions for the caller.
//!
//! - [`host`]: the UI as core's built-ins' host (its replica, the daemon's
//!   files for get, put and commands); [`editjob`]: an Edit run on a
//!   thread of its own, which `Kill Edit` ends.
//! - [`clip`]: the system clipboard beside the session's snarf buffer.
//! - [`app`]: the UI without its window: events in, B2/B3 carried out,
//!   frames painted, one flush a frame; what tests drive headless.
//! - [`cursor`]: acme's arrow and box pointers as pictures.
//! - [`focus`]: taking the keyboard focus on an X display with no window
//!   manager.
//! - [`error`]: why the UI could not start or go on.
//! - [`termdraw`]: a terminal's grid drawn in a window's body;
//!   [`terms`]: what is typed into it and the size it is given, sent to
//!   the daemon's `terms/N/` files; [`termview`]: how far back a window is
//!   scrolled in its terminal and what is selected there.
//! - [`shell`]: the winit window, drawn with softbuffer, woken by the
//!   link's change subscription.
//!
//! It attaches with apex-link and takes acme's rules from apex-core; it
//! never depends on the daemon (`tests/tidy.rs` checks).

pub mod app;
pub mod canvas;
pub mod clip;
pub mod cursor;
pub mod damage;
pub mod editjob;
pub mod error;
pub mod focus;
pub mod font;
pub mod fontconfig;
pub mod frame;
pub mod geom;
pub mod host;
pub mod input;
pub mod palette;
pub mod rect;
pub mod render;
pub mod shell;
pub mod termdraw;
pub mod terms;
pub mod termview;
