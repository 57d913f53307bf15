//! Event messages (acme-fs.md §4), for `acme/N/event` and
//! `buffers/N/event` alike: `C1C2q0 q1 flag nr text\n` for every change a
//! buffer's entries make (`I`, `D`) and every B2/B3 action (`X`, `L`) with
//! its expansion and chord lines; lower case for a window's tag. And the
//! messages a client writes back to have an action carried out.

use apex_core::error::acme::EBADEVENT;
use apex_core::{Action, AttachmentId, Buffer, BufferOp, Entry, Op};
use std::fmt::Write;

/// Text carried in an event message at most (acme's 256 runes).
pub const EVENT_TEXT_MAX: usize = 256;

/// Appends one message; text over 256 runes is left out (nr 0) and the
/// reader takes it from `data`.
fn message(out: &mut String, c1: char, c2: char, q0: u64, q1: u64, flags: u32, text: &str) {
    let nr = text.chars().count();
    let (nr, text) = if nr <= EVENT_TEXT_MAX { (nr, text) } else { (0, "") };
    let _ = writeln!(out, "{c1}{c2}{q0} {q1} {flags} {nr} {text}");
}

/// The text of runes `q0..q1` of `buffer` for an event message: none when
/// it is longer than a message carries (the reader asks `data`), made
/// only when it is not, so a long action's or undo's text is not copied
/// out of the rope to be dropped.
fn event_text(buffer: &Buffer, q0: u64, q1: u64) -> String {
    match q1.saturating_sub(q0) <= EVENT_TEXT_MAX as u64 {
        true => buffer.slice(q0, q1).unwrap_or_default(),
        false => String::new(),
    }
}

/// The event messages for one entry of a buffer's log; `tag` makes the
/// type letters lower case (a window's tag).
/// `written` says it as a write (`E`) where it would say typing (`K`,
/// `M`): an entry of an attachment short of a full token.
pub fn event_lines(buffer: &Buffer, entry: &Entry, tag: bool, written: bool) -> String {
    let mut out = String::new();
    let case = |c: char| if tag { c.to_ascii_lowercase() } else { c };
    match &entry.op {
        Op::Buffer(BufferOp::Splice { q0, q1, text, origin }) => {
            let c1 = as_written(origin.acme_char(), written);
            if q1 > q0 {
                message(&mut out, c1, case('D'), *q0, *q1, 0, "");
            }
            if !text.is_empty() {
                message(&mut out, c1, case('I'), *q0, q0 + text.chars().count() as u64, 0, text);
            }
        }
        Op::Buffer(BufferOp::Splices { spots, text, origin }) => {
            // As acme reports an Edit's changes: each one, the last first,
            // so every message's runes are the text's as it was then.
            let c1 = as_written(origin.acme_char(), written);
            let pieces: Vec<_> = spots.with_texts(text).collect();
            for (s, piece) in pieces.into_iter().rev() {
                if s.q1 > s.q0 {
                    message(&mut out, c1, case('D'), s.q0, s.q1, 0, "");
                }
                if s.inserted > 0 {
                    message(&mut out, c1, case('I'), s.q0, s.q0 + s.inserted, 0, piece);
                }
            }
        }
        Op::Buffer(op @ (BufferOp::ExecAt(a) | BufferOp::LookAt(a))) => {
            let exec = matches!(op, BufferOp::ExecAt(_));
            // acme drops the whole event when the chord's argument is long.
            if a.arg.as_ref().is_some_and(|arg| arg.len() > EVENT_TEXT_MAX) {
                return out;
            }
            let c2 = case(if exec { 'X' } else { 'L' });
            let c1 = a.origin.acme_char();
            // The text is the buffer's only while it is still at the
            // action's version; otherwise the reader asks `data`.
            let text_of = |q0: u64, q1: u64| match a.version == buffer.version {
                true => event_text(buffer, q0, q1),
                false => String::new(),
            };
            // apex's own bit is no reader's business.
            let flags = a.flags & !Action::LIMITED;
            message(&mut out, c1, c2, a.q0, a.q1, flags, &text_of(a.q0, a.q1));
            if flags & 2 != 0 {
                let (e0, e1) = a.expansion.unwrap_or((a.q0, a.q1));
                let flags = if exec { 0 } else { flags & !2 };
                message(&mut out, c1, c2, e0, e1, flags, &text_of(e0, e1));
            }
            if exec && a.flags & 8 != 0 {
                message(&mut out, c1, c2, 0, 0, 0, a.arg.as_deref().unwrap_or_default());
                // Where the argument came from is not recorded: nr 0.
                message(&mut out, c1, c2, 0, 0, 0, "");
            }
        }
        _ => {}
    }
    out
}

/// `c1`, or `E` for typing (`K`, `M`) when `written`.
pub fn as_written(c1: char, written: bool) -> char {
    match (c1, written) {
        ('K' | 'M', true) => 'E',
        _ => c1,
    }
}

/// What decides an event's origin letter beside the entry: the letter
/// noted for an undo or redo the daemon made for an event written back
/// (`Acme::note_origin`), and whether an attachment is short of a full
/// token (`Hub::limited`: its typing is said as a write).
pub struct Origins<'a> {
    pub noted: &'a dyn Fn(apex_core::Seq) -> Option<char>,
    pub limited: &'a dyn Fn(AttachmentId) -> bool,
}

/// A reader's place in one buffer's events: the buffer version after the
/// last entry formatted, which undo and redo need (their entries do not say
/// what they changed; the buffer's history does, an op's changes marked by
/// `Edit::continues`). `None` once the history no longer reaches back.
pub type Version = Option<u64>;

/// Formats `entries` (those after the reader's last, in order) until `out`
/// holds `limit` bytes; returns how many were formatted. Undo and redo are
/// reported as the deletions and insertions they made, an insertion with
/// its text while that is still the buffer's (nothing changed it since).
/// `origins` gives the letters beside the entries' own.
pub fn follow(
    buffer: &Buffer,
    entries: &[&Entry],
    version: &mut Version,
    tag: bool,
    origins: &Origins<'_>,
    out: &mut Vec<u8>,
    limit: usize,
) -> usize {
    let Origins { noted: origin, limited } = origins;
    let case = |c: char| if tag { c.to_ascii_lowercase() } else { c };
    for (i, e) in entries.iter().enumerate() {
        if out.len() >= limit {
            return i;
        }
        match &e.op {
            Op::Buffer(BufferOp::Splice { .. } | BufferOp::Splices { .. }) => *version = version.map(|v| v + 1),
            Op::Buffer(BufferOp::Undo | BufferOp::Redo) => {
                let Some(from) = *version else { continue };
                let Some(mut history) = buffer.edits_since(from) else {
                    *version = None;
                    continue;
                };
                let mut edits = Vec::new();
                if let Some(first) = history.next() {
                    edits.push(first.clone());
                    edits.extend(history.take_while(|e| e.continues).cloned());
                }
                let after = from + edits.len() as u64;
                let c1 = origin(e.seq).unwrap_or(if e.attachment == AttachmentId::SERVER { 'F' } else { 'M' });
                let c1 = as_written(c1, limited(e.attachment));
                let mut text = String::new();
                for (k, edit) in edits.iter().enumerate() {
                    if edit.deleted > 0 {
                        message(&mut text, c1, case('D'), edit.q0, edit.q0 + edit.deleted, 0, "");
                    }
                    if edit.inserted > 0 {
                        // The text is known while nothing came after it.
                        let current = after == buffer.version && k + 1 == edits.len();
                        let t = match current {
                            true => event_text(buffer, edit.q0, edit.q0 + edit.inserted),
                            false => String::new(),
                        };
                        // Without the text, nr is 0 and the reader asks data.
                        message(&mut text, c1, case('I'), edit.q0, edit.q0 + edit.inserted, 0, &t);
                    }
                }
                out.extend_from_slice(text.as_bytes());
                *version = Some(after);
                continue;
            }
            _ => {}
        }
        out.extend_from_slice(event_lines(buffer, e, tag, limited(e.attachment)).as_bytes());
    }
    entries.len()
}

/// What a written-back event asks for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Act {
    Execute,
    Look,
}

/// One written-back event: `C1C2q0 q1`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WriteBack {
    pub origin: char,
    pub act: Act,
    /// Lower case: the tag; upper case: the body.
    pub tag: bool,
    pub q0: u64,
    pub q1: u64,
}

/// Whether an event written back runs with the scope of a client short
/// of a full token: the action it names (the latest B2, or B3, at those
/// runes of the buffer's `entries`, clicked or expanded to) was noted so
/// ([`Action::LIMITED`]) or made by such an attachment (`limited`); or,
/// where such clients share the session (`shared`, the buffer), the text
/// at or before its runes changed since it was made, so what runs is not
/// what was clicked and may be theirs. Win sends a built-in's event
/// straight back, and acme executes what is at those runes then. (A
/// reader of a buffer's events keeps its entries from being compacted, so
/// the action is there to be found; a write-back that names none, a
/// script's, has its writer's scope.)
pub fn written_back_limited<'a>(
    entries: impl DoubleEndedIterator<Item = &'a Entry>,
    back: &WriteBack,
    limited: impl Fn(AttachmentId) -> bool,
    shared: Option<&Buffer>,
) -> bool {
    let named = entries.rev().find_map(|e| {
        match &e.op {
            Op::Buffer(BufferOp::ExecAt(a)) if back.act == Act::Execute => Some((e, a)),
            Op::Buffer(BufferOp::LookAt(a)) if back.act == Act::Look => Some((e, a)),
            _ => None,
        }
        // The click, or the range it was expanded to, which some readers
        // write back instead (the Go acme package).
        .filter(|(_, a)| (a.q0, a.q1) == (back.q0, back.q1) || a.expansion == Some((back.q0, back.q1)))
    });
    named.is_some_and(|(e, a)| {
        a.flags & Action::LIMITED != 0 || limited(e.attachment) || shared.is_some_and(|b| changed_since(b, a))
    })
}

/// Whether `buffer`'s text at or before `a`'s runes (its expansion's, or
/// all of it for a click the daemon is to expand) changed since `a`'s
/// version; so when that history is no longer kept.
fn changed_since(buffer: &Buffer, a: &Action) -> bool {
    let reach = match (a.q0 == a.q1, a.expansion) {
        (_, Some((_, e1))) => e1.max(a.q1),
        (true, None) => u64::MAX,
        (false, None) => a.q1,
    };
    // Edits after the runes leave them where they were, so the first one
    // at or before them is the one that counts.
    match buffer.edits_since(a.version) {
        Some(mut edits) => edits.any(|e| e.q0 < reach),
        None => true,
    }
}

/// How to write an event, after acme's `bad event syntax`.
const SYNTAX: &str = "write C1C2Q0 Q1 lines, C2 one of x X l L r R, 0 <= Q0 <= Q1 <= the text's length";

/// Parses a write to `event`: any number of `C1C2q0 q1` lines, blanks
/// allowed before each number and before the newline. `lengths` are the
/// tag's and the body's, in runes. All or nothing.
pub fn parse_writeback(text: &str, lengths: (u64, u64)) -> Result<Vec<WriteBack>, EventError> {
    let mut out = Vec::new();
    for line in text.split_inclusive('\n') {
        let Some(line) = line.strip_suffix('\n') else {
            return Err(EventError::NoNewline(line.to_string()));
        };
        let mut chars = line.chars();
        let (Some(origin), Some(c2)) = (chars.next(), chars.next()) else {
            return Err(EventError::Syntax(line.to_string()));
        };
        let (act, tag) = match c2 {
            'x' => (Act::Execute, true),
            'X' => (Act::Execute, false),
            'l' | 'r' => (Act::Look, true),
            'L' | 'R' => (Act::Look, false),
            _ => return Err(EventError::Kind(c2)),
        };
        let numbers: Vec<&str> = chars.as_str().split_ascii_whitespace().collect();
        let parse = |s: &str| s.parse::<u64>().map_err(|_| EventError::NotANumber(s.to_string()));
        let [q0, q1] = numbers.as_slice() else { return Err(EventError::Syntax(line.to_string())) };
        let (q0, q1) = (parse(q0)?, parse(q1)?);
        let len = if tag { lengths.0 } else { lengths.1 };
        if q0 > q1 || q1 > len {
            return Err(EventError::Outside { q0, q1, len });
        }
        out.push(WriteBack { origin, act, tag, q0, q1 });
    }
    Ok(out)
}

/// Why a write to `event` is not one (acme's `bad event syntax`, with what
/// was wrong).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum EventError {
    #[error("{EBADEVENT}: {SYNTAX}; {0:?} has no newline")]
    NoNewline(String),
    #[error("{EBADEVENT}: {SYNTAX}; got {0:?}")]
    Syntax(String),
    #[error("{EBADEVENT}: {SYNTAX}; {0:?} is not one of them")]
    Kind(char),
    #[error("{EBADEVENT}: {SYNTAX}; {0:?} is not a number")]
    NotANumber(String),
    #[error("{EBADEVENT}: {SYNTAX}; #{q0},#{q1} is not within the {len} runes there")]
    Outside { q0: u64, q1: u64, len: u64 },
}

#[cfg(test)]
mod tests {
    use super::*;
    use apex_core::{Action, AttachmentId, Origin};

    fn entry(op: BufferOp) -> Entry {
        Entry { seq: 1, attachment: AttachmentId(1), epoch: 1, op: Op::Buffer(op) }
    }

    /// What a reader at `version` makes of `entries`: how many it used,
    /// the event lines, and the version it is at after.
    fn read_events(b: &Buffer, entries: &[&Entry], mut version: Version) -> (usize, String, Version) {
        let mut out = Vec::new();
        let origins = Origins { noted: &|_| None, limited: &|_| false };
        let used = follow(b, entries, &mut version, false, &origins, &mut out, 1 << 20);
        (used, String::from_utf8(out).unwrap(), version)
    }

    /// A many-change entry (a whole-file Edit's) is reported as acme
    /// reports an Edit: each change, the last first, as the same changes
    /// made one at a time from the last would be.
    #[test]
    fn many_changes_at_once_as_acme_reports_an_edit() {
        use apex_core::spots::{Spot, Spots};
        let b = crate::acme::test_buffer("hello world");
        let changes = [(0u64, 1u64, "J"), (2, 4, ""), (5, 5, "é!"), (6, 11, &*"x".repeat(300))];
        let spots = Spots::pack(changes.iter().map(|(q0, q1, t)| Spot {
            q0: *q0,
            q1: *q1,
            inserted: t.chars().count() as u64,
        }))
        .unwrap();
        let text: String = changes.iter().map(|c| c.2).collect();
        let many = event_lines(&b, &entry(BufferOp::Splices { spots, text, origin: Origin::OtherFile }), false, false);
        let one_at_a_time: String = changes
            .iter()
            .rev()
            .map(|(q0, q1, t)| {
                let op = BufferOp::Splice { q0: *q0, q1: *q1, text: t.to_string(), origin: Origin::OtherFile };
                event_lines(&b, &entry(op), false, false)
            })
            .collect();
        assert_eq!(many, one_at_a_time);
        assert!(many.starts_with("FD6 11 0 0 \nFI6 306 0 0 \nFI5 7 0 2 é!\n"), "{many}");
    }

    #[test]
    fn changes_and_actions_as_acme_writes_them() {
        let b = crate::acme::test_buffer("hello world");
        let splice = |q0, q1, text: &str| {
            event_lines(
                &b,
                &entry(BufferOp::Splice { q0, q1, text: text.into(), origin: Origin::Keyboard }),
                false,
                false,
            )
        };
        assert_eq!(splice(0, 0, "ab"), "KI0 2 0 2 ab\n");
        assert_eq!(splice(3, 5, ""), "KD3 5 0 0 \n");
        assert_eq!(splice(3, 5, "x"), "KD3 5 0 0 \nKI3 4 0 1 x\n");
        // Typed by an attachment short of a full token: said as a write,
        // which win does not send to its shell.
        let written = event_lines(
            &b,
            &entry(BufferOp::Splice { q0: 0, q1: 0, text: "ls\n".into(), origin: Origin::Keyboard }),
            false,
            true,
        );
        assert_eq!(written, "EI0 3 0 3 ls\n\n");
        let long = "é".repeat(257);
        assert_eq!(splice(0, 0, &long), "KI0 257 0 0 \n");
        let tag = event_lines(
            &b,
            &entry(BufferOp::Splice { q0: 0, q1: 0, text: "x".into(), origin: Origin::FileWrite }),
            true,
            false,
        );
        assert_eq!(tag, "Ei0 1 0 1 x\n");
        let action = |flags, expansion, arg: Option<&str>| Action {
            view: None,
            version: b.version,
            q0: 6,
            q1: if flags & 2 != 0 { 6 } else { 11 },
            expansion,
            arg: arg.map(String::from),
            flags,
            origin: Origin::Mouse,
        };
        let x = |a| event_lines(&b, &entry(BufferOp::ExecAt(Box::new(a))), false, false);
        assert_eq!(x(action(0, None, None)), "MX6 11 0 5 world\n");
        assert_eq!(x(action(2, Some((6, 11)), None)), "MX6 6 2 0 \nMX6 11 0 5 world\n");
        assert_eq!(x(action(1 | 8, None, Some("arg"))), "MX6 11 9 5 world\nMX0 0 0 3 arg\nMX0 0 0 0 \n");
        let long = "x".repeat(EVENT_TEXT_MAX + 1);
        assert_eq!(x(action(8, None, Some(&long))), "", "a long chord argument drops the event");
        let l =
            event_lines(&b, &entry(BufferOp::LookAt(Box::new(action(1 | 2 | 4, Some((6, 11)), None)))), true, false);
        assert_eq!(l, "Ml6 6 7 0 \nMl6 11 5 5 world\n");
        // apex's own note of a limited client's action is not shown.
        assert_eq!(x(action(1 | Action::LIMITED, None, None)), "MX6 11 1 5 world\n");
    }

    /// A write-back runs limited when the latest B2 (B3) at its runes was
    /// noted so or made by a limited attachment; a later full one at the
    /// same runes, or one at other runes, decides otherwise.
    #[test]
    fn a_write_back_is_limited_by_the_action_it_names() {
        let at = |q0, q1, flags, attachment, exec: bool| {
            let a = Box::new(Action {
                view: None,
                version: 0,
                q0,
                q1,
                expansion: None,
                arg: None,
                flags,
                origin: Origin::Mouse,
            });
            let op = if exec { BufferOp::ExecAt(a) } else { BufferOp::LookAt(a) };
            Entry { seq: 1, attachment: AttachmentId(attachment), epoch: 1, op: Op::Buffer(op) }
        };
        let back = |act, q0, q1| WriteBack { origin: 'M', act, tag: false, q0, q1 };
        let limited = |a: AttachmentId| a == AttachmentId(7);
        let judge = |entries: &[Entry], b: WriteBack| written_back_limited(entries.iter(), &b, limited, None);
        let noted = at(0, 3, 1 | Action::LIMITED, 1, true);
        let by_limited = at(0, 3, 1, 7, true);
        let full = at(0, 3, 1, 1, true);
        assert!(judge(std::slice::from_ref(&noted), back(Act::Execute, 0, 3)));
        assert!(judge(std::slice::from_ref(&by_limited), back(Act::Execute, 0, 3)));
        assert!(!judge(std::slice::from_ref(&full), back(Act::Execute, 0, 3)));
        assert!(!judge(&[noted.clone(), full.clone()], back(Act::Execute, 0, 3)), "the latest decides");
        assert!(judge(&[full.clone(), noted.clone()], back(Act::Execute, 0, 3)));
        assert!(judge(&[noted.clone(), at(4, 5, 1, 1, true)], back(Act::Execute, 0, 3)), "other runes pass by");
        assert!(!judge(std::slice::from_ref(&noted), back(Act::Execute, 0, 4)), "none named: the writer's");
        assert!(!judge(std::slice::from_ref(&noted), back(Act::Look, 0, 3)), "a look names looks");
        assert!(judge(&[at(0, 3, Action::LIMITED, 1, false)], back(Act::Look, 0, 3)));
        // A reader may write back the range the click was expanded to.
        let mut expanded = at(2, 2, 1 | 2, 7, true);
        if let Op::Buffer(BufferOp::ExecAt(a)) = &mut expanded.op {
            a.expansion = Some((0, 9));
        }
        assert!(judge(std::slice::from_ref(&expanded), back(Act::Execute, 0, 9)));
        assert!(judge(std::slice::from_ref(&expanded), back(Act::Execute, 2, 2)));
    }

    /// Where clients short of a full token share the session, a full
    /// user's action runs limited once the text at or before its runes
    /// changed since (what runs then is not what was clicked); output
    /// after them changes nothing, and without such clients acme's rule
    /// stands.
    #[test]
    fn a_full_action_whose_runes_changed_since_runs_limited_beside_limited_clients() {
        let mut b = crate::acme::test_buffer("echo hi\nDel\n");
        let action = |q0, q1, expansion| Action {
            view: None,
            version: b.version,
            q0,
            q1,
            expansion,
            arg: None,
            flags: 1,
            origin: Origin::Mouse,
        };
        let (swept, click) = (entry(BufferOp::ExecAt(Box::new(action(8, 11, None)))), action(9, 9, None));
        let click = entry(BufferOp::ExecAt(Box::new(click)));
        let expanded = entry(BufferOp::ExecAt(Box::new(action(9, 9, Some((8, 11))))));
        let judge = |e: &Entry, q0, q1, b: &Buffer, shared: bool| {
            let back = WriteBack { origin: 'M', act: Act::Execute, tag: false, q0, q1 };
            written_back_limited(std::iter::once(e), &back, |_| false, shared.then_some(b))
        };
        assert!(!judge(&swept, 8, 11, &b, true), "nothing changed");
        let splice = |q0, q1, text: &str| BufferOp::Splice { q0, q1, text: text.into(), origin: Origin::FileWrite };
        b.apply(&splice(12, 12, "out\n")).unwrap();
        assert!(!judge(&swept, 8, 11, &b, true), "output after the runes");
        assert!(!judge(&expanded, 8, 11, &b, true));
        assert!(judge(&click, 9, 9, &b, true), "a click the daemon expands: any change");
        b.apply(&splice(0, 4, "rm")).unwrap();
        assert!(judge(&swept, 8, 11, &b, true), "text before the runes changed");
        assert!(judge(&expanded, 8, 11, &b, true));
        assert!(!judge(&swept, 8, 11, &b, false), "no limited client: acme's rule");
    }

    #[test]
    fn undo_and_redo_are_reported_as_the_changes_they_made() {
        let mut b = Buffer::new(String::new());
        let mut log = Vec::new();
        let mut seq = 0;
        let mut push = |b: &mut Buffer, op: BufferOp, attachment: u64| {
            b.apply(&op).unwrap();
            seq += 1;
            log.push(Entry { seq, attachment: AttachmentId(attachment), epoch: 1, op: Op::Buffer(op) });
        };
        push(&mut b, BufferOp::Splice { q0: 0, q1: 0, text: "hello".into(), origin: Origin::Keyboard }, 1);
        let at_open = Some(b.version);
        push(&mut b, BufferOp::Undo, 1);
        push(&mut b, BufferOp::Redo, 0);
        // A reader that saw "hello" typed, then the undo and the redo.
        let all: Vec<&Entry> = log.iter().skip(1).collect();
        let (used, text, version) = read_events(&b, &all, at_open);
        assert_eq!(used, 2);
        // The undo's deletion; the redo's insertion, with its text (last).
        assert_eq!(text, "MD0 5 0 0 \nFI0 5 0 5 hello\n");
        assert_eq!(version, Some(b.version));
        // Read one at a time: the undo's deletion; its insertion, later
        // changed by the redo... here the undo only deleted.
        let (_, text, version) = read_events(&b, &all[..1], at_open);
        assert_eq!(text, "MD0 5 0 0 \n");
        assert_eq!(version, Some(b.version - 1));
    }

    #[test]
    fn an_undone_rename_is_no_change_of_text_and_the_next_undo_is_still_right() {
        let mut b = Buffer::new(String::new());
        let mut log = Vec::new();
        let mut seq = 0;
        let mut push = |b: &mut Buffer, op: BufferOp| {
            b.apply(&op).unwrap();
            seq += 1;
            log.push(Entry { seq, attachment: AttachmentId(1), epoch: 1, op: Op::Buffer(op) });
        };
        push(&mut b, BufferOp::Splice { q0: 0, q1: 0, text: "hello".into(), origin: Origin::Keyboard });
        let at_open = Some(b.version);
        push(&mut b, BufferOp::Rename { name: "/a".into() });
        push(&mut b, BufferOp::Undo);
        push(&mut b, BufferOp::Undo);
        // A reader behind all three: the rename and its undo say nothing,
        // the text's undo is the deletion it made.
        let all: Vec<&Entry> = log.iter().skip(1).collect();
        let (used, text, version) = read_events(&b, &all, at_open);
        assert_eq!(used, 3);
        assert_eq!(text, "MD0 5 0 0 \n");
        assert_eq!(version, Some(b.version));
        // Read up to the rename's undo only: nothing yet.
        let (_, text, version) = read_events(&b, &all[..2], at_open);
        assert_eq!(text, "");
        assert_eq!(version, Some(b.version - 1));
    }

    #[test]
    fn write_back_parses_every_client_format_or_says_what_is_wrong() {
        let w = |text| parse_writeback(text, (20, 100));
        let got = w("MX12 15\nMx1 2 \nML 3  4\nMr0 0\n").unwrap();
        assert_eq!(got.len(), 4);
        assert_eq!(got[0], WriteBack { origin: 'M', act: Act::Execute, tag: false, q0: 12, q1: 15 });
        assert_eq!(got[1], WriteBack { origin: 'M', act: Act::Execute, tag: true, q0: 1, q1: 2 });
        assert_eq!(got[3].act, Act::Look);
        for bad in ["MX1 2", "MI1 2\n", "MX2 1\n", "Mx1 21\n", "MX1\n", "MXa b\n", "M\n", "MX1 2 3\n"] {
            let e = w(bad).unwrap_err().to_string();
            assert!(e.starts_with("bad event syntax"), "{bad:?}: {e}");
        }
    }
}
