//! Keyboard focus on an X display that has no window manager (a bare
//! Xvfb, a kiosk): there nothing gives a new window the focus, the
//! server's focus follows the pointer, and winit takes no key before it
//! is told its window has the focus. acme takes keys there, so the UI
//! takes the focus itself when it is mapped and when the pointer comes
//! in, as a window manager would; where a window manager runs, focus
//! stays its business.

use x11rb::connection::Connection;
use x11rb::protocol::xproto::{AtomEnum, ConnectionExt as _, InputFocus, Window};
use x11rb::rust_connection::RustConnection;
use x11rb::CURRENT_TIME;

/// A connection of the UI's own to its X display, for what winit does
/// not offer.
pub struct X11Focus {
    conn: RustConnection,
    root: Window,
    window: Window,
    /// A window manager ran when the window was made: focus is its.
    managed: bool,
}

impl X11Focus {
    /// Connects to `$DISPLAY` for `window` (an X11 window id); `None` on
    /// any other display system, or when the server cannot be reached.
    pub fn open(window: u32) -> Option<X11Focus> {
        let (conn, screen) = x11rb::connect(None).ok()?;
        let root = conn.setup().roots.get(screen)?.root;
        let mut focus = X11Focus { conn, root, window, managed: false };
        focus.managed = focus.window_manager();
        Some(focus)
    }

    /// Whether a window manager runs: one that follows the EWMH names a
    /// window of its own on the root (`_NET_SUPPORTING_WM_CHECK`).
    pub fn window_manager(&self) -> bool {
        let check = || -> Option<bool> {
            let atom = self.conn.intern_atom(true, b"_NET_SUPPORTING_WM_CHECK").ok()?.reply().ok()?.atom;
            if atom == 0 {
                return Some(false);
            }
            let reply = self.conn.get_property(false, self.root, atom, AtomEnum::WINDOW, 0, 1).ok()?.reply().ok()?;
            Some(reply.value_len > 0)
        };
        check().unwrap_or(false)
    }

    /// Gives the window the keyboard focus when no window manager does
    /// and no other window holds it; when the window goes, the focus
    /// goes back to following the pointer.
    pub fn take(&self) {
        if self.managed {
            return;
        }
        let Some(now) = self.conn.get_input_focus().ok().and_then(|c| c.reply().ok()) else { return };
        // 0 is None, 1 PointerRoot: nobody holds it; the root too.
        let free = now.focus == 0 || now.focus == 1 || now.focus == self.root || now.focus == self.window;
        if free && now.focus != self.window {
            let _ = self.conn.set_input_focus(InputFocus::POINTER_ROOT, self.window, CURRENT_TIME);
            let _ = self.conn.flush();
        }
    }
}
