//! The system clipboard beside the session's snarf buffer: what Snarf,
//! Cut, ^C and ^X put in the session's snarf buffer goes to the clipboard
//! (X11 or Wayland, through arboard), and a Paste takes the clipboard
//! first if something outside apex changed it since.

/// The clipboard, and the text apex last put there or took from it.
pub struct Clip {
    system: arboard::Clipboard,
    seen: String,
}

impl Clip {
    /// The display's clipboard (none without a display), with the
    /// session's snarf buffer as it is now: only changes from here on go
    /// to the clipboard, so starting a UI leaves the clipboard alone.
    pub fn open(snarf: &str) -> Option<Clip> {
        arboard::Clipboard::new().ok().map(|system| Clip { system, seen: snarf.to_string() })
    }

    /// The session's snarf buffer is `snarf`: the clipboard gets it if it
    /// is new.
    pub fn publish(&mut self, snarf: &str) {
        if snarf.is_empty() || snarf == self.seen {
            return;
        }
        if self.system.set_text(snarf).is_ok() {
            self.seen = snarf.to_string();
        }
    }

    /// The clipboard's text if something else put it there since apex last
    /// looked.
    pub fn take(&mut self) -> Option<String> {
        let text = self.system.get_text().ok().filter(|t| !t.is_empty() && *t != self.seen)?;
        self.seen = text.clone();
        Some(text)
    }
}
