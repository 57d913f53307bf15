//! The row's Dump and Load (acme's `rowdump` and `rowload`): the whole
//! session's columns and windows written to a dump file ([`crate::dump`]
//! is its format) and made again from one, through core's built-ins'
//! [`Host`].

use super::{resolve, select_and_show, settings, ExecError, Host, Result, Win};
use crate::addr::Range;
use crate::cols;
use crate::dump::{self, Dump, Kind, WindowRecord};
use crate::id::{BufferId, ColumnId};
use crate::look;
use crate::op::Origin;
use crate::propose::{Created, Proposal};
use crate::shard::ViewId;

/// The dump file: the one named, else `$HOME/apex.dump`.
pub(crate) fn dump_file<H: Host>(h: &H, arg: Option<&str>) -> Result<String> {
    match arg {
        Some(a) => Ok(resolve(Some(&h.cwd()), a)),
        None => h
            .home()
            .map(|home| format!("{}/apex.dump", home.trim_end_matches('/')))
            .ok_or_else(|| ExecError::Host("can't find file for dump: $HOME not defined".into())),
    }
}

/// The session as a dump (acme's `rowdump`).
pub fn dump_state<H: Host>(h: &mut H) -> Result<Dump> {
    let st = h.state()?;
    let line = |b: Option<BufferId>| b.and_then(|b| st.buffer(b).ok()).map(|b| b.text.to_string()).unwrap_or_default();
    let mut d = Dump {
        dir: h.cwd(),
        fonts: [dump::FONT_VAR.to_string(), dump::FONT_FIX.to_string()],
        columns: st.layout.columns.iter().map(|c| c.x).collect(),
        row_tag: line(st.layout.row_tag),
        column_tags: st.layout.columns.iter().enumerate().map(|(i, c)| (i, line(Some(c.tag)))).collect(),
        windows: Vec::new(),
    };
    let mut dumped: Vec<(BufferId, u64)> = Vec::new();
    let mut records = Vec::new();
    for (ci, col) in st.layout.columns.iter().enumerate() {
        for placed in &col.windows {
            let Ok(w) = st.window(placed.window) else { continue };
            let Ok(b) = st.buffer(w.body) else { continue };
            let number = st.layout.numbers.get(&placed.window).map_or(0, |n| n.0 as u64);
            // Windows a tool owns come back only through their dump command.
            if w.event_reader.is_some() && w.flags.dump.is_none() {
                continue;
            }
            let v = b.views.get(&ViewId::WindowBody(placed.window)).copied().unwrap_or_default();
            let mut r = WindowRecord {
                kind: Kind::File,
                column: ci,
                id: number,
                q0: v.q0,
                q1: v.q1,
                y: placed.y,
                font: w.flags.font.clone().unwrap_or_default(),
                tag: line(Some(w.tag)),
                text: String::new(),
                dir: String::new(),
                command: String::new(),
            };
            if let Some((_, id)) = dumped.iter().find(|(body, _)| *body == w.body) {
                r.kind = Kind::Zerox;
                r.id = *id;
            } else if let Some(command) = &w.flags.dump {
                r.kind = Kind::Command;
                r.dir = w.flags.dumpdir.clone().unwrap_or_default();
                r.command = command.clone();
            } else {
                // The text is taken (its rope shared) and made a string
                // after the state is let go.
                records.push((b.name.clone(), b.dirty, look::is_dir(&b.name), b.text.clone()));
                dumped.push((w.body, number));
            }
            d.windows.push(r);
        }
    }
    drop(st);
    // Clean files that exist come back from disk; the rest carry their text.
    let mut texts = records.into_iter();
    for r in d.windows.iter_mut().filter(|r| r.kind == Kind::File) {
        let Some((name, dirty, dir, text)) = texts.next() else { break };
        let from_disk = dir || (!dirty && !name.is_empty() && h.exists(&name));
        if !from_disk {
            r.kind = Kind::Text;
            r.text = text.to_string();
        }
    }
    Ok(d)
}

/// Makes the windows of a dump (acme's `rowload`): columns beyond the ones
/// there at their edges, then each window where it was, with its text,
/// selection and tag.
pub fn load<H: Host>(h: &mut H, d: &Dump) -> Result<()> {
    let have = h.state()?.layout.columns.len();
    for x in d.columns.iter().skip(have) {
        h.propose(Proposal::CreateColumn { x: Some(*x) })?;
    }
    let columns: Vec<ColumnId> = h.state()?.layout.columns.iter().map(|c| c.id).collect();
    let mut made: Vec<(u64, BufferId)> = Vec::new();
    for r in &d.windows {
        let column = columns.get(r.column.min(columns.len().saturating_sub(1))).copied();
        if r.kind == Kind::Command {
            h.start(Some(&r.dir).filter(|d| !d.is_empty()).map(|s| s.as_str()), &r.command, None)?;
            continue;
        }
        let name = r.tag.split([' ', '\t', '\n']).next().unwrap_or_default().to_string();
        let body = match r.kind {
            Kind::Zerox => made.iter().find(|(id, _)| *id == r.id).map(|(_, b)| *b),
            _ => None,
        };
        if r.kind == Kind::Zerox && body.is_none() {
            continue;
        }
        let Created::Window(w) =
            h.propose(Proposal::CreateWindow { body, column, name: name.clone(), near: None })?.created
        else {
            continue;
        };
        match r.kind {
            Kind::Text if !r.text.is_empty() => {
                let p = Proposal::Insert {
                    buffer: w.body,
                    version: 0,
                    q0: 0,
                    text: r.text.clone(),
                    origin: Origin::OtherFile,
                };
                h.propose(p)?;
                h.propose(Proposal::Dirty { buffer: w.body })?;
            }
            Kind::File if !look::is_scratch(&name) => h.get(w.body, None)?,
            _ => {}
        }
        made.push((r.id, w.body));
        if let Some(column) = column {
            let y = {
                let st = h.state()?;
                let col = st.layout.columns.iter().find(|c| c.id == column).expect("the column was listed");
                cols::drop_y(col, Some(w.window), r.y)
            };
            h.propose(Proposal::MoveWindow { window: w.window, column, y })?;
        }
        let after_bar = r.tag.split_once('|').map(|(_, rest)| rest.to_string()).unwrap_or_default();
        if !after_bar.is_empty() {
            let (len, version) = {
                let st = h.state()?;
                let t = st.buffer(w.tag)?;
                (t.len(), t.version)
            };
            let q0 = look::cleartag_range(h.state()?.buffer(w.tag)?).map_or(len, |(q0, _)| q0);
            let p =
                Proposal::Replace { buffer: w.tag, version, q0, q1: len, text: after_bar, origin: Origin::OtherFile };
            h.propose(p)?;
        }
        let (len, version) = {
            let st = h.state()?;
            let b = st.buffer(w.body)?;
            (b.len(), b.version)
        };
        let (q0, q1) = if r.q0 <= r.q1 && r.q1 <= len { (r.q0, r.q1) } else { (0, 0) };
        let _ = select_and_show(h, w.window, w.body, version, Range::new(q0, q1));
        if !r.font.is_empty() {
            let font = r.font.clone();
            settings(h, Some(Win { id: w.window, body: w.body }), |f| f.font = Some(font.clone()))?;
        }
    }
    Ok(())
}
