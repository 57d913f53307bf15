//! Why apex-ui could not start or go on: each says what failed and, where
//! the user can do something, what.

use std::path::PathBuf;

#[derive(Debug, thiserror::Error)]
pub enum UiError {
    #[error("no display: {0} (set DISPLAY or WAYLAND_DISPLAY, or run apexd alone)")]
    NoDisplay(winit::error::EventLoopError),
    #[error("cannot open a window: {0}")]
    Window(String),
    #[error("the window's event loop stopped: {0}")]
    EventLoop(winit::error::EventLoopError),
    /// The daemon this UI started did not start, or did not answer.
    #[error(transparent)]
    StartDaemon(#[from] apex_sys::daemon::StartError),
    #[error("-{flag}: {why}")]
    Font { flag: char, why: FontError },
    /// `-r`: the import did not come up.
    #[error("-r: {0}")]
    Remote(#[from] apex_sys::remote::RemoteError),
    #[error("dial {address}: {why}")]
    Dial { address: String, why: String },
    #[error("{0}")]
    Namespace(apex_ninep::ns::NsError),
    #[error("{session}: {why}")]
    Attach { session: String, why: apex_link::LinkError },
    #[error("{0}: the layout's lease did not come (another UI holds it and does not answer)")]
    NoLease(String),
    #[error("cannot start the runtime: {0}")]
    Runtime(std::io::Error),
    #[error("the current directory: {0}")]
    Cwd(std::io::Error),
    #[error(transparent)]
    Exec(#[from] apex_core::exec::ExecError),
}

/// Why a font named with `-f` or `-F` cannot be drawn with.
#[derive(Debug, thiserror::Error)]
pub enum FontError {
    #[error("{}: {source}", path.display())]
    Read { path: PathBuf, source: std::io::Error },
    #[error("{0}: not a font file fontdue reads (TrueType or OpenType)")]
    NotAFont(String),
    #[error("{0:?}: no such font, and no fontconfig to look for one: name a font file, or 'Go Regular SIZE'")]
    NoSuchFont(String),
}
