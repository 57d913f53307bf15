//! Text tables: how the metalog's state, leases and proposal outcomes read
//! as files, one line per item, fields separated by blanks, free text last
//! so `awk` and `cut` work on every line.

use crate::session::{Session, Verdict};
use apex_core::{AttachmentKind, Lease, Reject, Shard, State};
use std::fmt::Write;

/// The files of `meta/`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum MetaTable {
    Attachments,
    Leases,
    Rules,
    Notifications,
    Processes,
    Settings,
    Windows,
}

impl MetaTable {
    pub const ALL: [(&'static str, MetaTable); 7] = [
        ("attachments", MetaTable::Attachments),
        ("leases", MetaTable::Leases),
        ("rules", MetaTable::Rules),
        ("notifications", MetaTable::Notifications),
        ("processes", MetaTable::Processes),
        ("settings", MetaTable::Settings),
        ("windows", MetaTable::Windows),
    ];

    pub fn name(self) -> &'static str {
        MetaTable::ALL.iter().find(|(_, t)| *t == self).map_or("", |(n, _)| n)
    }
}

/// A lease as `HOLDER EPOCH BASE STATE`, STATE being `held`,
/// `requested-by A` or `released-at SEQ`.
pub fn lease_fields(lease: &Lease) -> String {
    let state = match (lease.released, lease.requested) {
        (Some(seq), _) => format!("released-at {seq}"),
        (None, Some(by)) => format!("requested-by {by}"),
        (None, None) => "held".to_string(),
    };
    format!("{} {} {} {state}", lease.holder, lease.epoch, lease.base)
}

/// One `meta/` table.
pub fn meta_table(state: &State, table: MetaTable) -> String {
    let m = &state.meta;
    let mut out = String::new();
    match table {
        MetaTable::Attachments => {
            for (id, a) in &m.attachments {
                let kind = match a.kind {
                    AttachmentKind::Ui => "ui",
                    AttachmentKind::Tool => "tool",
                };
                let _ = writeln!(out, "{id} {kind} {}", a.name);
            }
        }
        MetaTable::Leases => {
            for (shard, lease) in &m.leases.0 {
                let _ = writeln!(out, "{shard} {}", lease_fields(lease));
            }
        }
        MetaTable::Rules => {
            for (id, r) in &m.rules {
                let _ = writeln!(out, "{} {} {}", id.0, r.owner, r.text.replace('\n', "\\n"));
            }
        }
        MetaTable::Notifications => {
            for (id, n) in &m.notifications {
                let _ = writeln!(out, "{id} {} {}", n.from, n.text.replace('\n', "\\n"));
            }
        }
        MetaTable::Processes => {
            for (pid, p) in &m.processes {
                let window = p.window.map_or("-".to_string(), |w| w.0.to_string());
                let _ = writeln!(out, "{pid} {} {window} {} {}", p.owner, p.dir, p.command.replace('\n', "\\n"));
            }
        }
        MetaTable::Settings => {
            for (key, s) in &m.settings {
                let _ = writeln!(out, "{key} {} {}", s.owner, s.value.replace('\n', "\\n"));
            }
        }
        MetaTable::Windows => {
            // By acme number: a window's number, its body buffer (the N of
            // buffers/N/), the window and tag ids, and the body's name.
            let mut rows: Vec<_> = state.layout.numbers.iter().map(|(w, n)| (n.0, *w)).collect();
            rows.sort_unstable();
            for (number, id) in rows {
                let Ok(w) = state.window(id) else { continue };
                let name = state.buffer(w.body).map(|b| b.name.replace('\n', "\\n")).unwrap_or_default();
                let _ = writeln!(out, "{number} {} {} {} {name}", w.body.0, id.0, w.tag.0);
            }
        }
    }
    out
}

/// `shards/SHARD/info`: what the log retains of the shard.
pub fn shard_info(session: &Session, shard: Shard) -> Result<String, Reject> {
    let log = session.view().log.shard(shard)?;
    Ok(format!("base {}\nlast {}\n", log.base, log.last()))
}

/// `proposals` when read: recent outcomes, oldest first, whether the view
/// node or a leading UI applied them (a routed proposal is recorded when
/// its holder answers).
pub fn outcomes(session: &Session) -> String {
    let mut out = String::new();
    for o in session.outcomes() {
        match &o.verdict {
            Verdict::Made(made) => {
                let _ = writeln!(out, "{} ok {} -> {made}", o.id, o.request);
            }
            Verdict::Refused(why) => {
                let _ = writeln!(out, "{} refused {} -> {why}", o.id, o.request);
            }
        }
    }
    out
}
