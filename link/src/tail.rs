//! A fenced tail: what a replica typed that the daemon never stored,
//! when another's changes came after it. It is put back as pieces a
//! person can place (typing and its backspaces folded together) in a
//! `+Recovered` window, with the whole text as it was; a tail nobody
//! else's changes came after goes on as proposals (`Replay`).

use apex_core::{AttachmentId, BufferId, Epoch, Op, Origin};

/// A fenced buffer tail that conflicts with another's changes, waiting
/// to be recovered into a window of its own.
#[derive(Clone, Debug)]
pub(crate) struct Tail {
    pub(crate) from: AttachmentId,
    pub(crate) epoch: Epoch,
    pub(crate) buffer: BufferId,
    pub(crate) name: String,
    /// The buffer's text as this replica had it, the tail applied.
    pub(crate) text: String,
    /// What the tail changed, in the text of its time: where, what was
    /// put in and how many runes were taken out.
    pub(crate) pieces: Vec<Piece>,
    /// The daemon no longer has the buffer (started anew, or it was
    /// deleted), rather than another having changed it.
    pub(crate) gone: bool,
    pub(crate) entries: usize,
}

/// One run of a tail's edits: typing and its backspaces folded together.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Piece {
    pub(crate) at: u64,
    pub(crate) inserted: String,
    pub(crate) deleted: u64,
}

/// A tail nobody else's changes came after, to go on as proposals (this
/// replica does not lead its buffer now): its splices from `version`.
#[derive(Clone, Debug)]
pub(crate) struct Replay {
    pub(crate) buffer: BufferId,
    pub(crate) version: u64,
    pub(crate) splices: Vec<(u64, u64, String, Origin)>,
}

/// Where a conflicting tail of the buffer named `name` is recovered: a
/// window named after its file (`FILE+Recovered`, in the file's
/// directory), one per buffer; `+Recovered` for an unnamed one.
pub fn recovered_name(name: &str) -> String {
    format!("{name}+Recovered")
}

/// Whether an op of a tail that goes on by proposals is carried by them:
/// its splices are proposed; selections, origins and undo marks are the
/// leader's to make again.
pub(crate) fn proposable(op: &Op) -> bool {
    use apex_core::BufferOp as B;
    matches!(
        op,
        Op::Buffer(B::Splice { .. } | B::Splices { .. } | B::Select { .. } | B::SetOrigin { .. } | B::Mark { .. })
    )
}

/// An entry's op as the splices it made, in the order made (a
/// many-change entry's last first, each in the text as it was then).
pub(crate) fn splices_of(op: &Op) -> Vec<(u64, u64, String, Origin)> {
    match op {
        Op::Buffer(apex_core::BufferOp::Splice { q0, q1, text, origin }) => vec![(*q0, *q1, text.clone(), *origin)],
        Op::Buffer(apex_core::BufferOp::Splices { spots, text, origin }) => {
            let mut out: Vec<_> =
                spots.with_texts(text).map(|(s, put)| (s.q0, s.q1, put.to_string(), *origin)).collect();
            out.reverse();
            out
        }
        _ => Vec::new(),
    }
}

/// A tail's splices as the pieces a person puts back: typing at one
/// place runs on into one piece, and a backspace takes back what that
/// piece put in before it takes out what was there.
pub(crate) fn pieces(splices: &[(u64, u64, String, Origin)]) -> Vec<Piece> {
    let mut out: Vec<Piece> = Vec::new();
    for (q0, q1, text, _) in splices {
        if let Some(last) = out.last_mut() {
            let end = last.at + last.inserted.chars().count() as u64;
            if q0 == q1 && *q0 == end {
                last.inserted.push_str(text);
                continue;
            }
            if q0 == q1 && *q0 == last.at && last.deleted == 0 {
                last.inserted.insert_str(0, text);
                continue;
            }
            if text.is_empty() && *q1 == end && *q0 >= last.at {
                let keep = (q0 - last.at) as usize;
                last.inserted = last.inserted.chars().take(keep).collect();
                continue;
            }
        }
        out.push(Piece { at: *q0, inserted: text.clone(), deleted: q1 - q0 });
    }
    out.retain(|p| !p.inserted.is_empty() || p.deleted > 0);
    out
}

/// A `+Recovered` window's text: what happened, how to merge, each piece
/// and where it was, then the whole text as this replica had it.
pub(crate) fn recovery_text(tail: &Tail) -> String {
    let name = if tail.name.is_empty() { "an unnamed buffer" } else { tail.name.as_str() };
    let why = match tail.gone {
        true => "the daemon no longer has that text (it was started anew, or the window deleted)",
        false => "another changed the text since",
    };
    let mut t = format!(
        "{name}: attachment {} typed this at epoch {}, and the daemon never stored it; {why},\n\
         so it was not put back by itself. To merge, put each piece back where it belongs (an address\n\
         is where it was in the text of that time), then Del this window.\n\n",
        tail.from, tail.epoch
    );
    for p in &tail.pieces {
        let what = match (p.deleted, p.inserted.is_empty()) {
            (0, _) => "insert".to_string(),
            (n, true) => format!("delete {n} runes"),
            (n, false) => format!("replace {n} runes with"),
        };
        t += &format!("#{}: {what}\n", p.at);
        for line in p.inserted.split_inclusive('\n') {
            t += &format!("\t{}", line);
        }
        if !p.inserted.is_empty() && !p.inserted.ends_with('\n') {
            t.push('\n');
        }
    }
    t += "\nThe whole text as it was here, with them:\n\n";
    t += &tail.text;
    t
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_many_change_entry_is_its_splices_in_the_order_made() {
        use apex_core::spots::{Spot, Spots};
        let spots = Spots::pack([Spot { q0: 1, q1: 2, inserted: 2 }, Spot { q0: 5, q1: 5, inserted: 1 }]).unwrap();
        let op = Op::Buffer(apex_core::BufferOp::Splices { spots, text: "éxy".into(), origin: Origin::OtherFile });
        let o = Origin::OtherFile;
        assert_eq!(splices_of(&op), [(5, 5, "y".to_string(), o), (1, 2, "éx".to_string(), o)]);
        assert!(proposable(&op));
    }

    #[test]
    fn a_tail_s_typing_and_backspaces_fold_into_the_pieces_a_person_puts_back() {
        let k = Origin::Keyboard;
        let splice = |q0: u64, q1: u64, t: &str| (q0, q1, t.to_string(), k);
        // "hello" typed at 10, two backspaces, "p!" typed; then a word
        // deleted at 40 and a line replaced at 3.
        let mut s: Vec<_> =
            "hello".chars().enumerate().map(|(i, c)| splice(10 + i as u64, 10 + i as u64, &c.to_string())).collect();
        s.extend([splice(14, 15, ""), splice(13, 14, ""), splice(13, 13, "p"), splice(14, 14, "!")]);
        s.extend([splice(40, 45, ""), splice(3, 8, "new\n")]);
        assert_eq!(
            pieces(&s),
            [
                Piece { at: 10, inserted: "help!".into(), deleted: 0 },
                Piece { at: 40, inserted: String::new(), deleted: 5 },
                Piece { at: 3, inserted: "new\n".into(), deleted: 5 },
            ]
        );
        // Typed and all erased: nothing to put back.
        assert!(pieces(&[splice(0, 0, "x"), splice(0, 1, "")]).is_empty());
        assert_eq!(recovered_name("/tmp/notes"), "/tmp/notes+Recovered");
        // Proposed again, plain typing only: an undo in the tail is no
        // splice, so such a tail is recovered instead.
        let splice = Op::Buffer(apex_core::BufferOp::Splice { q0: 0, q1: 0, text: "x".into(), origin: k });
        assert!(proposable(&splice));
        assert!(!proposable(&Op::Buffer(apex_core::BufferOp::Undo)));
    }
}
