//! Keys as xterm sends them to the program in a terminal: text as UTF-8
//! (Enter a carriage return), Backspace as DEL, Ctrl and Alt combinations,
//! the cursor keys in the mode the program asked for (`ESC [ A`, or
//! `ESC O A` in application cursor mode), the editing and function keys;
//! a paste bracketed when the program asked for it.

use super::Key;
use apex_core::grid::mode;

/// Typed text: Enter (the UI's newline) is the carriage return a
/// terminal's Enter sends.
pub fn text(s: &str) -> Vec<u8> {
    s.replace('\n', "\r").into_bytes()
}

/// A pasted text: bracketed (`ESC [200~ ... ESC [201~`) when the
/// program asked for it, so a shell or an editor takes it as one paste.
pub fn paste(s: &str, modes: u32) -> Vec<u8> {
    let body = text(s);
    match modes & mode::BRACKETED_PASTE != 0 {
        true => [b"\x1b[200~".as_slice(), &body, b"\x1b[201~"].concat(),
        false => body,
    }
}

/// What `k` sends, in the terminal's `modes`.
pub fn key(k: Key, modes: u32) -> Option<Vec<u8>> {
    let app = modes & mode::APP_CURSOR != 0;
    let cursor = |c: u8| match app {
        true => vec![0x1b, b'O', c],
        false => vec![0x1b, b'[', c],
    };
    let tilde = |n: &str| format!("\x1b[{n}~").into_bytes();
    Some(match k {
        Key::Backspace => vec![0x7f],
        Key::Delete => tilde("3"),
        Key::Insert => tilde("2"),
        Key::PageUp => tilde("5"),
        Key::PageDown => tilde("6"),
        Key::Up => cursor(b'A'),
        Key::Down => cursor(b'B'),
        Key::Right => cursor(b'C'),
        Key::Left => cursor(b'D'),
        Key::Home => cursor(b'H'),
        Key::End => cursor(b'F'),
        Key::Escape => vec![0x1b],
        Key::Ctrl(c) => vec![control(c)?],
        Key::Alt(c) => {
            let mut b = vec![0x1b];
            b.extend_from_slice(c.to_string().as_bytes());
            b
        }
        Key::F(n @ 1..=4) => vec![0x1b, b'O', b"PQRS"[n as usize - 1]],
        Key::F(n @ 5..=12) => tilde(["15", "17", "18", "19", "20", "21", "23", "24"][n as usize - 5]),
        Key::F(_) => return None,
    })
}

/// Ctrl with `c`: the control character xterm sends (Ctrl-A is 1,
/// Ctrl-Space and Ctrl-@ are NUL, Ctrl-[ is ESC, Ctrl-? is DEL).
fn control(c: char) -> Option<u8> {
    match c.to_ascii_lowercase() {
        c @ 'a'..='z' => Some(c as u8 - b'a' + 1),
        ' ' | '@' | '2' => Some(0),
        '[' | '3' => Some(0x1b),
        '\\' | '4' => Some(0x1c),
        ']' | '5' => Some(0x1d),
        '^' | '6' => Some(0x1e),
        '_' | '7' | '/' => Some(0x1f),
        '?' | '8' => Some(0x7f),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_are_what_xterm_sends() {
        assert_eq!(text("ls\n"), b"ls\r");
        assert_eq!(key(Key::Backspace, 0), Some(vec![0x7f]));
        assert_eq!(key(Key::Ctrl('c'), 0), Some(vec![3]));
        assert_eq!(key(Key::Ctrl('['), 0), Some(vec![0x1b]));
        assert_eq!(key(Key::Alt('b'), 0), Some(b"\x1bb".to_vec()));
        assert_eq!(key(Key::Up, 0), Some(b"\x1b[A".to_vec()));
        assert_eq!(key(Key::Up, mode::APP_CURSOR), Some(b"\x1bOA".to_vec()), "vi's keys");
        assert_eq!(key(Key::Delete, 0), Some(b"\x1b[3~".to_vec()));
        assert_eq!(key(Key::F(1), 0), Some(b"\x1bOP".to_vec()));
        assert_eq!(key(Key::F(12), 0), Some(b"\x1b[24~".to_vec()));
        assert_eq!(paste("a\nb", mode::BRACKETED_PASTE), b"\x1b[200~a\rb\x1b[201~");
        assert_eq!(paste("a", 0), b"a");
    }
}
