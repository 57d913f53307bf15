//! Shards and views: the names of the independently replicated logs, and of
//! the texts whose selections live in buffers.
//!
//! A shard is one log plus the part of the state it drives. Each has its own
//! sequence numbers, so leadership is decided shard by shard. `Term` and
//! `Meta` are pinned: only the host can produce a terminal's grid, and the
//! metalog records who leads what, so the daemon always leads them.

use crate::id::{BufferId, ColumnId, TermId, WindowId};
use serde::{Deserialize, Serialize};
use std::fmt;
use std::str::FromStr;

/// One replicated log of a session.
///
/// The derived order puts `Meta` first, so iterating a `BTreeMap<Shard, _>`
/// visits the metalog before everything else: "metalog first" falls out of
/// the type.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum Shard {
    /// The session's metalog: shards, attachments, leases, rules, ...
    Meta,
    /// Columns, window placement and order, focus, acme numbers.
    Layout,
    /// One window: its tag and body buffers and its flags.
    Window(WindowId),
    /// One text with its views, history and undo.
    Buffer(BufferId),
    /// One terminal's grid.
    Term(TermId),
}

impl Shard {
    /// Pinned shards never lease out; the server always leads them.
    pub fn is_pinned(&self) -> bool {
        matches!(self, Shard::Term(_) | Shard::Meta)
    }

    /// The attachment whose id range the shard's id is in (whose node
    /// made it); none for the layout and the metalog.
    pub fn issuer(&self) -> Option<crate::id::AttachmentId> {
        match self {
            Shard::Buffer(b) => Some(b.issuer()),
            Shard::Window(w) => Some(w.issuer()),
            Shard::Term(t) => Some(t.issuer()),
            Shard::Layout | Shard::Meta => None,
        }
    }

    /// The kind of shard, for messages and `Op::fits`.
    pub fn kind(&self) -> ShardKind {
        match self {
            Shard::Meta => ShardKind::Meta,
            Shard::Layout => ShardKind::Layout,
            Shard::Window(_) => ShardKind::Window,
            Shard::Buffer(_) => ShardKind::Buffer,
            Shard::Term(_) => ShardKind::Term,
        }
    }
}

/// The kind of a shard, without its id.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum ShardKind {
    Meta,
    Layout,
    Window,
    Buffer,
    Term,
}

impl fmt::Display for ShardKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            ShardKind::Meta => "meta",
            ShardKind::Layout => "layout",
            ShardKind::Window => "window",
            ShardKind::Buffer => "buffer",
            ShardKind::Term => "term",
        })
    }
}

/// The file-tree spelling: `meta`, `layout`, `window.N`, `buffer.N`, `term.N`.
impl fmt::Display for Shard {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Shard::Meta => f.write_str("meta"),
            Shard::Layout => f.write_str("layout"),
            Shard::Window(w) => write!(f, "window.{}", w.0),
            Shard::Buffer(b) => write!(f, "buffer.{}", b.0),
            Shard::Term(t) => write!(f, "term.{}", t.0),
        }
    }
}

/// A shard name that does not parse.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("bad shard name {0:?}: want meta, layout, window.N, buffer.N or term.N")]
pub struct BadShardName(pub String);

impl FromStr for Shard {
    type Err = BadShardName;

    fn from_str(s: &str) -> Result<Shard, BadShardName> {
        let bad = || BadShardName(s.to_string());
        match s {
            "meta" => return Ok(Shard::Meta),
            "layout" => return Ok(Shard::Layout),
            _ => {}
        }
        let (kind, n) = s.split_once('.').ok_or_else(bad)?;
        if n.is_empty() || !n.bytes().all(|b| b.is_ascii_digit()) {
            return Err(bad());
        }
        let n: u64 = n.parse().map_err(|_| bad())?;
        match kind {
            "window" => Ok(Shard::Window(WindowId(n))),
            "buffer" => Ok(Shard::Buffer(BufferId(n))),
            "term" => Ok(Shard::Term(TermId(n))),
            _ => Err(bad()),
        }
    }
}

/// One text's place on screen: acme's `Text`. Its selection and scroll
/// origin live in the buffer shard (see [`crate::view`]), because every edit
/// moves every view on the buffer and the two must share one sequence.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum ViewId {
    /// A window's tag line.
    WindowTag(WindowId),
    /// A window's body.
    WindowBody(WindowId),
    /// A column's tag line.
    ColumnTag(ColumnId),
    /// The tag of the top row.
    TopRow,
}

impl fmt::Display for ViewId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ViewId::WindowTag(w) => write!(f, "tag.{}", w.0),
            ViewId::WindowBody(w) => write!(f, "body.{}", w.0),
            ViewId::ColumnTag(c) => write!(f, "coltag.{}", c.0),
            ViewId::TopRow => f.write_str("row"),
        }
    }
}

/// A view name that does not parse.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("bad view name {0:?}: want body.W, tag.W, coltag.C or row")]
pub struct BadViewName(pub String);

impl FromStr for ViewId {
    type Err = BadViewName;

    fn from_str(s: &str) -> Result<ViewId, BadViewName> {
        let bad = || BadViewName(s.to_string());
        if s == "row" {
            return Ok(ViewId::TopRow);
        }
        let (kind, n) = s.split_once('.').ok_or_else(bad)?;
        if n.is_empty() || !n.bytes().all(|b| b.is_ascii_digit()) {
            return Err(bad());
        }
        let n: u64 = n.parse().map_err(|_| bad())?;
        match kind {
            "body" => Ok(ViewId::WindowBody(WindowId(n))),
            "tag" => Ok(ViewId::WindowTag(WindowId(n))),
            "coltag" => Ok(ViewId::ColumnTag(ColumnId(n))),
            _ => Err(bad()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shard_names_round_trip() {
        for s in [
            Shard::Meta,
            Shard::Layout,
            Shard::Window(WindowId(7)),
            Shard::Buffer(BufferId(1 << 41)),
            Shard::Term(TermId(2)),
        ] {
            assert_eq!(s.to_string().parse::<Shard>(), Ok(s));
        }
        for bad in ["", "buffer", "buffer.", "buffer.x", "pane.1", "buffer.-1", "meta.1"] {
            assert!(bad.parse::<Shard>().is_err(), "{bad:?} parsed");
        }
        for v in [
            ViewId::TopRow,
            ViewId::WindowBody(WindowId(3)),
            ViewId::WindowTag(WindowId(4)),
            ViewId::ColumnTag(ColumnId(5)),
        ] {
            assert_eq!(v.to_string().parse::<ViewId>(), Ok(v));
        }
        assert!("body.".parse::<ViewId>().is_err() && "win.1".parse::<ViewId>().is_err());
    }

    #[test]
    fn meta_sorts_first_and_pinning() {
        let mut v = [Shard::Buffer(BufferId(0)), Shard::Layout, Shard::Meta];
        v.sort();
        assert_eq!(v[0], Shard::Meta);
        assert!(Shard::Meta.is_pinned() && Shard::Term(TermId(1)).is_pinned());
        assert!(!Shard::Layout.is_pinned() && !Shard::Buffer(BufferId(1)).is_pinned());
    }
}
