//! Running an acme `Edit` command (`Edit ...` executed in a window through
//! its event file): the texts of every window are taken as they are, the
//! command runs on them off the async threads (its pipes run processes),
//! and its changes come back as one `Splices` proposal per buffer at the
//! version it saw, so edits made meanwhile move them instead of being
//! overwritten; then the new dots, any `u`, and what it printed, which goes
//! to the window directory's `+Errors` as in acme.

use super::acme::Win;
use super::{gone, Tree};
use crate::host::{self, ShellPipes};
use apex_core::ecmd::{self, EditFile};
use apex_core::{BufferId, Origin, Proposal, ViewId, WindowId};
use apex_ninep::srv;

/// A window as the command sees it, and the version it saw.
struct Seen {
    window: WindowId,
    body: BufferId,
    version: u64,
}

impl Tree {
    /// Runs `command` (the text after `Edit`) in window `w`.
    pub(super) async fn run_edit(&self, n: u64, w: &Win, command: &str) -> srv::Result<()> {
        let (files, seen, current) = {
            let reg = self.reg();
            let s = reg.get(n).ok_or_else(gone)?;
            let state = &s.view.state;
            let mut files = Vec::new();
            let mut seen = Vec::new();
            let mut current = 0;
            for column in &state.layout.columns {
                for placed in &column.windows {
                    let Ok(win) = state.window(placed.window) else { continue };
                    let Ok(b) = state.buffer(win.body) else { continue };
                    let dot = b.views.get(&ViewId::WindowBody(placed.window)).map_or_else(Default::default, |v| {
                        apex_core::addr::Range::new(v.q0.min(b.len()), v.q1.min(b.len()))
                    });
                    if placed.window == w.id {
                        current = files.len();
                    }
                    files.push(EditFile { name: b.name.clone(), text: b.text.rope().clone(), dot, dirty: b.dirty });
                    seen.push(Seen { window: placed.window, body: win.body, version: b.version });
                }
            }
            (files, seen, current)
        };
        let name = files.get(current).map(|f| f.name.clone()).unwrap_or_default();
        let command = command.to_string();
        let outcome = tokio::task::spawn_blocking(move || ecmd::run(&command, &files, current, &mut ShellPipes))
            .await
            .map_err(|e| format!("Edit: {e}"))?
            .map_err(|e| e.to_string())?;
        for (f, changes) in &outcome.changes {
            let s = &seen[*f];
            let changes = changes.iter().map(|c| (c.q0, c.q1, c.text.clone())).collect();
            let p = Proposal::Splices { buffer: s.body, version: s.version, changes, origin: Origin::OtherFile };
            self.propose(n, "Edit", p).await?;
        }
        for (f, dot) in &outcome.dots {
            let s = &seen[*f];
            let version =
                self.reg().get(n).ok_or_else(gone)?.view.state.buffer(s.body).map_err(|e| e.to_string())?.version;
            // The dot is in the text as the Edit left it, which is the
            // version now unless someone typed meanwhile.
            let p = Proposal::Select {
                buffer: s.body,
                view: ViewId::WindowBody(s.window),
                version,
                q0: dot.q0,
                q1: dot.q1,
            };
            let _ = self.propose(n, "Edit dot", p).await;
        }
        for (f, count) in &outcome.undo {
            let b = seen[*f].body;
            for _ in 0..count.unsigned_abs() {
                let p = if *count > 0 { Proposal::Undo { buffer: b } } else { Proposal::Redo { buffer: b } };
                self.propose(n, "Edit u", p).await?;
            }
        }
        if !outcome.printed.is_empty() {
            let (_, b) = host::errors_window(self, n, &host::errors_for(&name)).await?;
            host::append_output(self, n, b, &outcome.printed).await;
        }
        Ok(())
    }
}
