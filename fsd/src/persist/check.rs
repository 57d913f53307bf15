//! `apexd --check`: reads a state directory as a restart would and says,
//! per session, what it found, changing nothing.

use super::{load_registry, replay, session_dir, Repair};
use std::fmt::Write;
use std::path::Path;

/// The report, a line or more per session, and whether every session
/// would start.
pub fn check(root: &Path) -> (String, bool) {
    let mut out = String::new();
    let registry = match load_registry(root) {
        Ok(Some(r)) => r,
        Ok(None) => {
            let _ = writeln!(out, "{}: no registry: nothing has been kept here", root.display());
            return (out, true);
        }
        Err(e) => {
            let _ = writeln!(out, "{e}");
            return (out, false);
        }
    };
    let mut all_ok = true;
    for (number, info) in &registry.sessions {
        let uuid = info.uuid.0;
        let dir = session_dir(root, uuid);
        let _ = write!(out, "session {number} {:?} ({}): ", info.name, info.uuid);
        // Replaying for a check also verifies the snapshot's stored hash.
        match replay(&dir, uuid, Repair::Nothing) {
            Ok((state, r)) => {
                let snap_said = match r.snapshot {
                    Some(hash) => format!("snapshot from segment {} hash {}", r.from_segment, hex(&hash)),
                    None => "no snapshot".to_string(),
                };
                let _ = writeln!(
                    out,
                    "ok: {snap_said}, {} segment(s), {} entries replayed, state hash {}",
                    r.segments,
                    r.entries,
                    apex_sys::statehash::state_hash(&state)
                );
                for said in r.repairs {
                    let _ = writeln!(out, "    a restart would do this: {said}");
                }
            }
            Err(e) => {
                all_ok = false;
                let _ = writeln!(out, "DAMAGED: {e}");
            }
        }
    }
    (out, all_ok)
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}
