//! The `proposals` file's language: one proposal per write.
//!
//! The first line is `VERB BUFFER VERSION ARGS...`; the text, where a verb
//! takes one, is everything after the first newline, byte for byte:
//!
//! ```text
//! insert BUFFER VERSION Q          text follows
//! delete BUFFER VERSION Q0 Q1
//! replace BUFFER VERSION Q0 Q1     text follows
//! select BUFFER VERSION Q0 Q1 [VIEW]
//! origin BUFFER VERSION ORG [VIEW]
//! exec BUFFER VERSION Q0 Q1        (a B2 action on that text)
//! look BUFFER VERSION Q0 Q1        (a B3 action on that text)
//! name BUFFER NAME                 (or the name as the text)
//! clean BUFFER | dirty BUFFER | undo BUFFER | redo BUFFER
//! buffer [NAME]                    a new buffer; its text follows
//! window [BUFFER]                  a window on BUFFER, or on a new buffer
//!                                  named by the text
//! delwindow N                      delete the window numbered N (acme's id)
//! ```
//!
//! Positions are runes; VERSION is the buffer version the positions were
//! read at (`buffers/N/ctl` shows it), and the leader rebases them through
//! every edit since. VIEW names a selection (`body.W`, `tag.W`, `coltag.C`,
//! `row`); without one, the buffer must have exactly one view.

use apex_core::shard::BadViewName;
use apex_core::{AcmeNumber, Action, BufferId, Origin, Proposal, State, ViewId};

/// The verbs, for error messages.
pub const VERBS: &str =
    "insert|delete|replace|select|origin|exec|look|name|clean|dirty|undo|redo|buffer|window|delwindow";

/// Why a write to `proposals` is not a proposal; each says the form.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ProposalError {
    #[error("proposals: empty proposal; expected one of {VERBS}, then its arguments")]
    Empty,
    #[error("proposals: unknown verb {0:?}; expected {VERBS}")]
    UnknownVerb(String),
    /// The arguments do not match the verb's form.
    #[error("proposals: {verb} wants \"{form}\", got {line:?}")]
    Form { verb: String, form: String, line: String },
    #[error("proposals: no buffer {0} (see buffers/)")]
    NoBuffer(u64),
    #[error("proposals: {0}")]
    View(#[from] BadViewName),
    /// A selection without a view, in a buffer that has other than one.
    #[error("proposals: buffer {buffer} has {views} views; name one: {usage}")]
    WhichView { buffer: u64, views: usize, usage: Box<ProposalError> },
    #[error("proposals: delete takes no text; use replace to put {0} bytes in")]
    DeleteText(usize),
    #[error("proposals: no window {0}")]
    NoWindow(u32),
}

/// Parses one proposal written to `proposals`.
pub fn parse(text: &str, state: &State) -> Result<Proposal, ProposalError> {
    let (line, body) = match text.split_once('\n') {
        Some((l, b)) => (l, b),
        None => (text, ""),
    };
    let words: Vec<&str> = line.split_whitespace().collect();
    let Some((&verb, args)) = words.split_first() else {
        return Err(ProposalError::Empty);
    };
    let usage =
        |form: &str| ProposalError::Form { verb: verb.to_string(), form: form.to_string(), line: line.to_string() };
    let num = |i: usize, form: &str| -> Result<u64, ProposalError> {
        args.get(i).and_then(|w| w.parse().ok()).ok_or_else(|| usage(form))
    };
    let count = |n: usize, form: &str| match args.len() == n {
        true => Ok(()),
        false => Err(usage(form)),
    };
    let buffer = |form: &str| -> Result<BufferId, ProposalError> {
        let b = BufferId(num(0, form)?);
        state.buffer(b).map_err(|_| ProposalError::NoBuffer(b.0))?;
        Ok(b)
    };
    let view = |b: BufferId, i: usize, form: &str| -> Result<ViewId, ProposalError> {
        if let Some(w) = args.get(i) {
            return Ok(w.parse::<ViewId>()?);
        }
        let views = &state.buffer(b).map_err(|_| ProposalError::NoBuffer(b.0))?.views;
        match views.keys().collect::<Vec<_>>().as_slice() {
            [v] => Ok(**v),
            _ => Err(ProposalError::WhichView { buffer: b.0, views: views.len(), usage: Box::new(usage(form)) }),
        }
    };
    let origin = Origin::OtherFile;
    let action = |form: &str, exec: bool| -> Result<(BufferId, Action), ProposalError> {
        count(4, form)?;
        let b = buffer(form)?;
        let (q0, q1) = (num(2, form)?, num(3, form)?);
        let version = num(1, form)?;
        // Flagged a built-in as acme flags a B2's event: by its text, here
        // what is at those runes now.
        // (Its first word decides; a long range is not copied out.)
        let first = |t: &apex_core::Buffer| t.slice(q0, q1.min(q0.saturating_add(256))).ok();
        let text = state.buffer(b).ok().filter(|_| exec).and_then(first).unwrap_or_default();
        let flags = u32::from(apex_core::exec::is_builtin(&text));
        Ok((b, Action { view: None, version, q0, q1, expansion: None, arg: None, flags, origin }))
    };
    Ok(match verb {
        "insert" => {
            let form = "insert BUFFER VERSION Q\\nTEXT";
            count(3, form)?;
            Proposal::Insert {
                buffer: buffer(form)?,
                version: num(1, form)?,
                q0: num(2, form)?,
                text: body.into(),
                origin,
            }
        }
        "delete" => {
            let form = "delete BUFFER VERSION Q0 Q1";
            count(4, form)?;
            if !body.is_empty() {
                return Err(ProposalError::DeleteText(body.len()));
            }
            Proposal::Delete {
                buffer: buffer(form)?,
                version: num(1, form)?,
                q0: num(2, form)?,
                q1: num(3, form)?,
                origin,
            }
        }
        "replace" => {
            let form = "replace BUFFER VERSION Q0 Q1\\nTEXT";
            count(4, form)?;
            let (q0, q1) = (num(2, form)?, num(3, form)?);
            Proposal::Replace { buffer: buffer(form)?, version: num(1, form)?, q0, q1, text: body.into(), origin }
        }
        "select" => {
            let form = "select BUFFER VERSION Q0 Q1 [VIEW]";
            if !(4..=5).contains(&args.len()) {
                return Err(usage(form));
            }
            let b = buffer(form)?;
            Proposal::Select {
                buffer: b,
                view: view(b, 4, form)?,
                version: num(1, form)?,
                q0: num(2, form)?,
                q1: num(3, form)?,
            }
        }
        "origin" => {
            let form = "origin BUFFER VERSION ORG [VIEW]";
            if !(3..=4).contains(&args.len()) {
                return Err(usage(form));
            }
            let b = buffer(form)?;
            Proposal::SetOrigin { buffer: b, view: view(b, 3, form)?, version: num(1, form)?, org: num(2, form)? }
        }
        "exec" => {
            let (buffer, action) = action("exec BUFFER VERSION Q0 Q1", true)?;
            Proposal::Exec { buffer, action }
        }
        "look" => {
            let (buffer, action) = action("look BUFFER VERSION Q0 Q1", false)?;
            Proposal::Look { buffer, action }
        }
        "name" => {
            let form = "name BUFFER NAME";
            let b = buffer(form)?;
            let name = match args.len() {
                1 => body.trim_end_matches('\n').to_string(),
                _ => line.split_whitespace().skip(2).collect::<Vec<_>>().join(" "),
            };
            Proposal::Name { buffer: b, name }
        }
        "clean" | "dirty" | "undo" | "redo" => {
            let form = format!("{verb} BUFFER");
            count(1, &form)?;
            let buffer = buffer(&form)?;
            match verb {
                "clean" => Proposal::Clean { buffer },
                "dirty" => Proposal::Dirty { buffer },
                "undo" => Proposal::Undo { buffer },
                _ => Proposal::Redo { buffer },
            }
        }
        "buffer" => {
            if args.len() > 1 {
                return Err(usage("buffer [NAME]\\nTEXT"));
            }
            Proposal::CreateBuffer { name: args.first().unwrap_or(&"").to_string(), text: body.into() }
        }
        "window" => match args.len() {
            0 => Proposal::CreateWindow {
                body: None,
                column: None,
                name: body.trim_end_matches('\n').into(),
                near: None,
            },
            1 => Proposal::CreateWindow {
                body: Some(buffer("window [BUFFER]")?),
                column: None,
                name: String::new(),
                near: None,
            },
            _ => return Err(usage("window [BUFFER]")),
        },
        "delwindow" => {
            let form = "delwindow N";
            count(1, form)?;
            let n = u32::try_from(num(0, form)?).map_err(|_| usage(form))?;
            let window = state.layout.window_numbered(AcmeNumber(n)).ok_or(ProposalError::NoWindow(n))?;
            Proposal::DeleteWindow { window }
        }
        _ => return Err(ProposalError::UnknownVerb(verb.to_string())),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use apex_core::Node;

    /// An exec is flagged a built-in as acme flags a B2's event, by the
    /// first word at its runes; a look never is.
    #[test]
    fn an_exec_of_a_built_in_is_flagged_so() {
        let mut node = Node::server();
        let b = node.create_buffer_as("x").unwrap();
        let text = "Del now\nls -l\n".into();
        let insert = Proposal::Insert { buffer: b, version: 0, q0: 0, text, origin: Origin::OtherFile };
        apex_core::propose::apply(&mut node, &insert).unwrap();
        let flags = |line: &str| match parse(line, &node.state) {
            Ok(Proposal::Exec { action, .. } | Proposal::Look { action, .. }) => action.flags,
            other => panic!("{line}: {other:?}"),
        };
        let n = b.0;
        assert_eq!(flags(&format!("exec {n} 1 0 7")), 1);
        assert_eq!(flags(&format!("exec {n} 1 8 13")), 0);
        assert_eq!(flags(&format!("look {n} 1 0 7")), 0);
    }

    #[test]
    fn parses_every_verb_and_explains_mistakes() {
        let mut node = Node::server();
        let b = node.create_buffer_as("x").unwrap();
        let s = &node.state;
        let n = b.0;
        assert_eq!(
            parse(&format!("insert {n} 0 0\nhi\nthere"), s),
            Ok(Proposal::Insert { buffer: b, version: 0, q0: 0, text: "hi\nthere".into(), origin: Origin::OtherFile })
        );
        assert!(matches!(parse(&format!("delete {n} 0 0 1"), s), Ok(Proposal::Delete { q1: 1, .. })));
        assert!(matches!(parse(&format!("replace {n} 0 0 1\nz"), s), Ok(Proposal::Replace { .. })));
        assert!(matches!(parse(&format!("name {n} a b"), s), Ok(Proposal::Name { name, .. }) if name == "a b"));
        assert!(
            matches!(parse(&format!("name {n}\n/tmp/f\n"), s), Ok(Proposal::Name { name, .. }) if name == "/tmp/f")
        );
        assert!(matches!(parse(&format!("undo {n}"), s), Ok(Proposal::Undo { .. })));
        assert!(matches!(parse("buffer notes\ntext", s), Ok(Proposal::CreateBuffer { .. })));
        assert!(matches!(parse("window\n/tmp/x", s), Ok(Proposal::CreateWindow { body: None, .. })));
        assert!(matches!(parse(&format!("exec {n} 0 0 0"), s), Ok(Proposal::Exec { .. })));
        assert!(matches!(parse(&format!("select {n} 0 0 0 body.5"), s), Ok(Proposal::Select { .. })));
        for (bad, says) in [
            ("insrt 1 0 0", "unknown verb \"insrt\"; expected insert|"),
            ("", "empty proposal"),
            (&format!("insert {n} 0"), "insert wants \"insert BUFFER VERSION Q"),
            (&format!("insert {n} zero 0\nx"), "insert wants"),
            ("insert 999 0 0\nx", "no buffer 999"),
            (&format!("delete {n} 0 0 1\nx"), "delete takes no text"),
            (&format!("select {n} 0 0 0"), "has 0 views"),
            (&format!("select {n} 0 0 0 pane"), "bad view name"),
            ("delwindow 77", "no window 77"),
        ] {
            let e = parse(bad, s).unwrap_err().to_string();
            assert!(e.contains(says), "{bad:?}: {e}");
        }
    }
}
