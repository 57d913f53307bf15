//! Get and Put's files: a file name made absolute or taken from the
//! buffer, and what a Get that read a file proposes (acme's `get`: the
//! text replaced, the buffer named and cleaned, each window kept where
//! it was by lines and runes), with how its host tells the parts apart.

use super::ExecError;
use crate::buf::Buffer;
use crate::id::BufferId;
use crate::op::Origin;
use crate::propose::{Applied, Proposal};
use crate::shard::ViewId;
use crate::show;

/// Refuses a relative `file` for `what` (`get`, `put`, `exec`): whoever
/// reads or writes it may run in another directory than the one asking.
pub fn absolute(what: &'static str, file: &str) -> Result<(), ExecError> {
    match std::path::Path::new(file).is_absolute() {
        true => Ok(()),
        false => Err(ExecError::NotAbsolute { what, file: file.to_string() }),
    }
}

/// The file a `get` or `put` uses: `file` if given, else the buffer's
/// `name`; absolute either way.
pub fn file_or_name(what: &'static str, file: Option<String>, name: &str) -> Result<String, ExecError> {
    let file = match file {
        Some(f) => f,
        None if name.is_empty() => return Err(ExecError::Unnamed(what)),
        None => name.to_string(),
    };
    absolute(what, &file)?;
    Ok(file)
}

/// What a Get that read the text of `pieces` (in order: a file read a
/// piece at a time, each at most [`crate::op::SPLICE_MAX`] bytes, or its
/// text in one) from `file` into buffer `b` proposes, in order (acme's
/// `get`): the text replaced unless it is already the same, the buffer
/// named `file` if the Get named one, marked clean, and its undo history
/// forgotten; a Get of its own file then puts each window's selection
/// and origin back by lines and runes, as acme's does, so the window
/// stays where it was. Whoever read the file (the daemon, or a UI on its
/// machine) proposes these. A text of more than one piece is replaced
/// with `ReplacePieces`, its pieces becoming the entries as they are.
pub fn get_proposals(buf: &Buffer, b: BufferId, file: &str, named: bool, pieces: Vec<String>) -> Vec<Proposal> {
    // As the entries will be (`edit` packs them the same way), so that
    // the places below are given at the version the text ends at.
    let mut pieces = crate::op::packed(pieces);
    let size: usize = pieces.iter().map(String::len).sum();
    let read = || pieces.iter().map(String::as_str);
    // Compared piece by piece: no second copy of a big file. A piece's
    // end that falls inside one of the old text's runes is a difference.
    let rope = buf.text.rope();
    let same = rope.len_bytes() == size && {
        let mut at = 0;
        read().all(|p| {
            at += p.len();
            rope.get_byte_slice(at - p.len()..at).is_some_and(|old| old == p)
        })
    };
    let (version, len) = (buf.version, buf.len());
    let origin = Origin::OtherFile;
    let renamed = named && buf.name != file;
    // Each window's selection and origin in the new text, at the same
    // lines and runes (acme's get, for a file read again under its name).
    let kept: Vec<(ViewId, u64, u64, u64)> = match (same, renamed) {
        // From or to an empty text everything is at the start.
        (false, false) if len > 0 && size > 0 => {
            let t = &buf.text;
            let windows = buf.views.iter().filter(|(v, _)| matches!(v, ViewId::WindowBody(_)));
            windows
                .map(|(v, at)| {
                    let q0 = show::line_pos_in(read(), 0, show::line_place(t, 0, at.q0));
                    let q1 = show::line_pos_in(read(), q0, show::line_place(t, at.q0, at.q1));
                    let org = show::line_pos_in(read(), 0, show::line_place(t, 0, at.org));
                    (*v, q0, q1, show::next_line_start(read(), org))
                })
                .collect()
        }
        _ => Vec::new(),
    };
    // The places are of the text just read: the version after its
    // replacement, an entry a piece of it (`Node::append_splice`).
    let entries: usize = read().map(|p| crate::op::pieces(p).len()).sum();
    let read = version + entries.max(1) as u64;
    let mut out = Vec::with_capacity(3);
    if !same {
        out.push(match (len, size, pieces.len()) {
            (_, _, 2..) => Proposal::ReplacePieces { buffer: b, version, q0: 0, q1: len, pieces, origin },
            (_, 0, _) => Proposal::Delete { buffer: b, version, q0: 0, q1: len, origin },
            (0, _, _) => Proposal::Insert { buffer: b, version, q0: 0, text: pieces.pop().unwrap_or_default(), origin },
            _ => {
                Proposal::Replace { buffer: b, version, q0: 0, q1: len, text: pieces.pop().unwrap_or_default(), origin }
            }
        });
    }
    if renamed {
        out.push(Proposal::Name { buffer: b, name: file.to_string() });
    }
    out.push(Proposal::Clean { buffer: b });
    // acme's get starts the file afresh (textreset): no Undo across it.
    if !same || renamed || buf.can_undo() || buf.can_redo() {
        out.push(Proposal::ForgetUndo { buffer: b });
    }
    for (view, q0, q1, org) in kept {
        out.push(Proposal::Select { buffer: b, view, version: read, q0, q1 });
        out.push(Proposal::SetOrigin { buffer: b, view, version: read, org });
    }
    out
}

/// Whether `p` is one of the proposals [`get_proposals`] makes to put a
/// window's selection or origin back: one refused (an edit came between
/// and moved it past the text) leaves the Get done all the same.
pub fn keeps_place(p: &Proposal) -> bool {
    matches!(p, Proposal::Select { .. } | Proposal::SetOrigin { .. })
}

/// Whether `p` is the proposal of [`get_proposals`] that replaces the
/// text.
pub fn replaces_text(p: &Proposal) -> bool {
    matches!(
        p,
        Proposal::Insert { .. } | Proposal::Replace { .. } | Proposal::ReplacePieces { .. } | Proposal::Delete { .. }
    )
}

/// Whether a Get's replacement of buffer `b`'s text (`applied`) came
/// right after the entry its shard ended with when the Get read the
/// buffer (`last`). The places [`get_proposals`] made are of the text
/// then, at the version the replacement was to end at: with another's
/// change between, they would land wrong, and a host proposes none.
pub fn replaced_as_read(applied: &Applied, b: BufferId, last: crate::id::Seq) -> bool {
    let shard = crate::shard::Shard::Buffer(b);
    applied.entries.iter().find(|r| r.shard == shard).is_some_and(|r| r.first == last + 1)
}
