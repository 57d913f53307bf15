//! What a B2 or B3 action acts on, as acme decides it: a null click
//! expands to the command or file name around it; the first word names a
//! built-in or a command to run; looked-up text is a file to open or text
//! to find.

use apex_core::Buffer;

/// acme's built-in commands (event flag 1), matched on the first word.
pub const BUILTINS: &[&str] = &[
    "Abort", "Cut", "Del", "Delcol", "Delete", "Dump", "Edit", "Exit", "Font", "Get", "ID", "Incl", "Indent", "Kill",
    "Load", "Local", "Look", "New", "Newcol", "Paste", "Put", "Putall", "Redo", "Send", "Snarf", "Sort", "Tab", "Undo",
    "Zerox",
];

/// Characters of a file name (acme's `isfilec`).
pub fn is_file_char(c: char) -> bool {
    c.is_alphanumeric() || ".-+/:@_~,".contains(c) || c as u32 > 0x7f
}

/// Characters of a command to execute (acme's `isexecc`).
fn is_exec_char(c: char) -> bool {
    is_file_char(c) || "<|>".contains(c)
}

/// The range a null click at `q` acts on: the run of command (`exec`) or
/// file-name characters around it. Returns `q..q` when there is none.
pub fn expand(buffer: &Buffer, q: u64, exec: bool) -> (u64, u64) {
    let len = buffer.len();
    let keep = |c: char| if exec { is_exec_char(c) && c != ':' } else { is_file_char(c) };
    let (mut q0, mut q1) = (q.min(len), q.min(len));
    while q1 < len && keep(buffer.text.char(q1 as usize)) {
        q1 += 1;
    }
    while q0 > 0 && keep(buffer.text.char(q0 as usize - 1)) {
        q0 -= 1;
    }
    (q0, q1)
}

/// The first word of a command and the rest (the argument), trimmed.
pub fn split_command(text: &str) -> (&str, &str) {
    let text = text.trim();
    match text.find(char::is_whitespace) {
        Some(i) => (&text[..i], text[i..].trim()),
        None => (text, ""),
    }
}

/// Whether `command`'s first word is a built-in.
pub fn is_builtin(command: &str) -> bool {
    BUILTINS.contains(&split_command(command).0)
}

/// The next occurrence of `needle` after rune `from`, wrapping to the
/// start (acme's B3 search of plain text).
pub fn find_next(buffer: &Buffer, needle: &str, from: u64) -> Option<(u64, u64)> {
    if needle.is_empty() {
        return None;
    }
    let text = buffer.text.to_string();
    let start = buffer.text.char_to_byte(from.min(buffer.len()) as usize);
    let at = text[start..].find(needle).map(|i| i + start).or_else(|| text.find(needle))?;
    let q0 = buffer.text.byte_to_char(at) as u64;
    Some((q0, q0 + needle.chars().count() as u64))
}

/// A looked-up text as a file name and an optional address after `:`
/// (`file.c:12`, `file.c:/main/`).
pub fn file_and_addr(text: &str) -> (&str, Option<&str>) {
    match text.find(':') {
        Some(i) if i > 0 => (&text[..i], Some(&text[i + 1..]).filter(|a| !a.is_empty())),
        _ => (text, None),
    }
}

/// The directory a window's commands run in: its name's directory (the
/// name itself for a directory window).
pub fn window_dir(name: &str) -> Option<String> {
    if !name.starts_with('/') {
        return None;
    }
    if name.ends_with('/') {
        return Some(name.trim_end_matches('/').to_string()).map(|d| if d.is_empty() { "/".into() } else { d });
    }
    let dir = &name[..name.rfind('/').unwrap_or(0)];
    Some(if dir.is_empty() { "/".into() } else { dir.to_string() })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn null_clicks_expand_to_a_command_or_a_file_name() {
        let b = crate::acme::test_buffer("run ls|wc here /etc/passwd:3 x");
        assert_eq!(expand(&b, 5, true), (4, 9)); // ls|wc
        assert_eq!(expand(&b, 5, false), (4, 6)); // ls
        assert_eq!(expand(&b, 18, false), (15, 28)); // /etc/passwd:3
        assert_eq!(expand(&b, 18, true), (15, 26)); // exec stops at ':'
        assert_eq!(expand(&b, 3, true), (0, 3));
        let blank = crate::acme::test_buffer("a  b");
        assert_eq!(expand(&blank, 2, true), (2, 2));
    }

    #[test]
    fn commands_names_and_searches() {
        assert_eq!(split_command("  Look foo bar \n"), ("Look", "foo bar"));
        assert!(is_builtin("Del"));
        assert!(is_builtin("Edit ,d"));
        assert!(!is_builtin("ls -l"));
        let b = crate::acme::test_buffer("one two one two");
        assert_eq!(find_next(&b, "two", 0), Some((4, 7)));
        assert_eq!(find_next(&b, "two", 7), Some((12, 15)));
        assert_eq!(find_next(&b, "one", 9), Some((0, 3)));
        assert_eq!(find_next(&b, "six", 0), None);
        assert_eq!(file_and_addr("/etc/passwd:3"), ("/etc/passwd", Some("3")));
        assert_eq!(file_and_addr("/etc/passwd"), ("/etc/passwd", None));
        assert_eq!(window_dir("/home/u/f.c").as_deref(), Some("/home/u"));
        assert_eq!(window_dir("/home/u/").as_deref(), Some("/home/u"));
        assert_eq!(window_dir("/f").as_deref(), Some("/"));
        assert_eq!(window_dir("+Errors"), None);
    }
}
