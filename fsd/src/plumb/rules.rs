//! Rules into the metalog: checked whole first, then the owner's old
//! texts deleted and the new one added; and the rules a session starts
//! with.

use crate::plumb::error::PlumbFsError;
use crate::plumb::ports::{plan9_vars, read_rules, HostIncludes, RULES_MAX};
use crate::session::Session;
use apex_core::meta::Meta;
use apex_core::plumb::rules::Verb;
use apex_core::plumb::{Rules, DEFAULT_RULES};
use apex_core::{AttachmentId, MetaOp, Reject, RuleId};
use std::path::PathBuf;

/// Reads `text` as the rules of `owner` would be read, to refuse it
/// whole before anything changes.
pub fn check_rules(meta: Option<&Meta>, owner: AttachmentId, text: &str) -> Result<(), PlumbFsError> {
    if text.len() > RULES_MAX {
        return Err(PlumbFsError::RulesTooLong);
    }
    let mut includes = HostIncludes::new();
    let mut vars = plan9_vars();
    if owner != AttachmentId::SERVER {
        let own = meta.into_iter().flat_map(|m| m.rules.values()).filter(|r| r.owner == AttachmentId::SERVER);
        for rule in own {
            if let Ok(r) = Rules::parse("rules", &rule.text, &mut includes, &vars) {
                vars = r.vars;
            }
        }
    }
    let name = match owner {
        AttachmentId::SERVER => "rules".to_string(),
        a => format!("attachment {}", a.0),
    };
    let includes_files = text.lines().any(|l| l.split_whitespace().next() == Some("include"));
    if includes_files {
        // An include reads a file of the daemon's machine.
        crate::access::require_full("a plumbing rule's include")?;
    }
    let rules = Rules::parse(&name, text, &mut includes, &vars)?;
    let starts = rules.sets.iter().flat_map(|s| &s.actions).any(|r| matches!(r.verb, Verb::Start | Verb::Client));
    if starts {
        crate::access::require_full("a plumbing rule that starts a program")?;
    }
    Ok(())
}

/// Replaces `owner`'s rules with `text` (none if empty), checked first.
/// The one way rules enter the metalog.
pub(crate) fn replace_rules(s: &mut Session, owner: AttachmentId, text: &str) -> Result<(), PlumbFsError> {
    check_rules(Some(&s.view().state.meta), owner, text)?;
    let old: Vec<RuleId> =
        s.view().state.meta.rules.iter().filter(|(_, r)| r.owner == owner).map(|(id, _)| *id).collect();
    for rule in old {
        s.view_mut().push_meta(MetaOp::RuleDel { rule })?;
    }
    if !text.trim().is_empty() {
        let rule = s.view_mut().log.next_rule();
        s.view_mut().push_meta(MetaOp::RuleAdd { rule, owner, text: text.to_string() })?;
    }
    Ok(())
}

/// The rules a new session starts with: `$HOME/lib/plumbing` where it
/// exists and reads, else apex's basic set, with why that file was not
/// taken.
pub fn starting_rules() -> (String, Option<String>) {
    let basic = || DEFAULT_RULES.to_string();
    let Some(home) = std::env::var_os("HOME").filter(|h| !h.is_empty()) else { return (basic(), None) };
    let path = PathBuf::from(home).join("lib/plumbing");
    if !path.exists() {
        return (basic(), None);
    }
    let read = read_rules(&path).map_err(|e| e.to_string()).and_then(|text| {
        let mut includes = HostIncludes::new();
        Rules::parse(&path.display().to_string(), &text, &mut includes, &plan9_vars()).map_err(|e| e.to_string())?;
        Ok(text)
    });
    match read {
        Ok(text) => (text, None),
        Err(e) => {
            let why = format!("plumbing: {e}: the session starts with apex's basic rules (see plumb/rules)");
            tracing::warn!("{why}");
            (basic(), Some(why))
        }
    }
}

/// Gives a session its starting rules where it has never had any (made
/// before sessions had plumbing, or just made).
pub(crate) fn give_starting_rules(s: &mut Session) -> Result<(), Reject> {
    if s.view().state.meta.next_rule > 1 {
        return Ok(());
    }
    let (text, why) = starting_rules();
    let rule = s.view_mut().log.next_rule();
    s.view_mut().push_meta(MetaOp::RuleAdd { rule, owner: AttachmentId::SERVER, text })?;
    // Said where the user looks: a notification in the session.
    if let Some(text) = why {
        s.view_mut().push_meta(MetaOp::Notify { from: AttachmentId::SERVER, text })?;
    }
    Ok(())
}
