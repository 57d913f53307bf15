//! `Meta`: the state of the metalog, the session's authority: which shards
//! exist, who leads each (leases), who is attached, plumbing rules,
//! notifications, processes and settings.
//!
//! Only the daemon appends to the metalog (as SERVER, epoch 0). The lease
//! table and the fencing rule are `lease.rs`'s; this file keeps the rest.

use crate::error::{Reject, Result};
use crate::id::{AttachmentId, RuleId, SessionUuid};
use crate::lease::Leases;
use crate::op::{AttachmentKind, MetaOp};
use crate::shard::Shard;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Attachment {
    pub kind: AttachmentKind,
    pub name: String,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Rule {
    pub owner: AttachmentId,
    pub text: String,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Notification {
    pub from: AttachmentId,
    pub text: String,
}

pub use crate::op::Process;

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Setting {
    pub owner: AttachmentId,
    pub value: String,
}

/// The metalog's state.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Meta {
    pub uuid: Option<SessionUuid>,
    pub label: String,
    pub leases: Leases,
    pub attachments: BTreeMap<AttachmentId, Attachment>,
    /// Past every attachment id ever seen, so ids are never reused.
    pub next_attachment: u64,
    pub rules: BTreeMap<RuleId, Rule>,
    /// Past every rule id ever seen.
    pub next_rule: u64,
    pub notifications: BTreeMap<u64, Notification>,
    pub next_notification: u64,
    /// Running processes by pid.
    pub processes: BTreeMap<u64, Process>,
    pub settings: BTreeMap<String, Setting>,
}

impl Default for Meta {
    fn default() -> Meta {
        Meta {
            uuid: None,
            label: String::new(),
            leases: Leases::default(),
            attachments: BTreeMap::new(),
            next_attachment: 1,
            rules: BTreeMap::new(),
            next_rule: 1,
            notifications: BTreeMap::new(),
            next_notification: 1,
            processes: BTreeMap::new(),
            settings: BTreeMap::new(),
        }
    }
}

impl Meta {
    /// Every shard that exists, the metalog first: those with a lease.
    pub fn shards(&self) -> impl Iterator<Item = Shard> + '_ {
        self.leases.0.keys().copied()
    }

    /// Whether `shard` exists.
    pub fn has_shard(&self, shard: Shard) -> bool {
        self.leases.0.contains_key(&shard)
    }

    /// Checks `op` without changing anything.
    pub fn check(&self, op: &MetaOp) -> Result<()> {
        self.leases.check(op)?;
        match op {
            MetaOp::Identity { .. } if self.uuid.is_some() => Err(Reject::IdentitySet),
            MetaOp::Attach { attachment, .. } => match self.attachments.contains_key(attachment) {
                true => Err(Reject::AttachmentExists(*attachment)),
                false => Ok(()),
            },
            MetaOp::Detach { attachment } => match self.attachments.contains_key(attachment) {
                true => Ok(()),
                false => Err(Reject::NoAttachment(*attachment)),
            },
            MetaOp::RuleAdd { rule, .. } if self.rules.contains_key(rule) => Err(Reject::RuleExists(*rule)),
            MetaOp::RuleDel { rule } if !self.rules.contains_key(rule) => Err(Reject::NoRule(*rule)),
            MetaOp::NotifyDel { id } if !self.notifications.contains_key(id) => Err(Reject::NoNotification(*id)),
            MetaOp::ProcessStart { pid, .. } if self.processes.contains_key(pid) => Err(Reject::ProcessExists(*pid)),
            MetaOp::ProcessExit { pid, .. } if !self.processes.contains_key(pid) => Err(Reject::NoProcess(*pid)),
            _ => Ok(()),
        }
    }

    /// Applies `op` to the metalog's own state. The state removes a deleted
    /// shard's other parts (`State::apply`). On error nothing changes.
    pub fn apply(&mut self, op: &MetaOp) -> Result<()> {
        self.check(op)?;
        self.leases.apply(op)?;
        match op {
            MetaOp::Identity { uuid } => self.uuid = Some(*uuid),
            MetaOp::Label { label } => self.label.clone_from(label),
            MetaOp::Attach { attachment, kind, name } => {
                self.attachments.insert(*attachment, Attachment { kind: *kind, name: name.clone() });
                self.next_attachment = self.next_attachment.max(attachment.0.saturating_add(1));
            }
            MetaOp::Detach { attachment } => {
                let gone = self.attachments.remove(attachment).expect("checked");
                self.rules.retain(|_, r| r.owner != *attachment);
                self.settings.retain(|_, s| s.owner != *attachment);
                if gone.kind == AttachmentKind::Tool {
                    self.notifications.retain(|_, n| n.from != *attachment);
                }
            }
            MetaOp::RuleAdd { rule, owner, text } => {
                self.rules.insert(*rule, Rule { owner: *owner, text: text.clone() });
                self.next_rule = self.next_rule.max(rule.0.saturating_add(1));
            }
            MetaOp::RuleDel { rule } => {
                self.rules.remove(rule);
            }
            MetaOp::Notify { from, text } => {
                self.notifications.insert(self.next_notification, Notification { from: *from, text: text.clone() });
                self.next_notification = self.next_notification.saturating_add(1);
            }
            MetaOp::NotifyDel { id } => {
                self.notifications.remove(id);
            }
            MetaOp::ProcessStart { pid, process } => {
                self.processes.insert(*pid, (**process).clone());
            }
            MetaOp::ProcessExit { pid, .. } => {
                self.processes.remove(pid);
            }
            MetaOp::Setting { owner, key, value } => match value {
                Some(v) => {
                    self.settings.insert(key.clone(), Setting { owner: *owner, value: v.clone() });
                }
                None => {
                    self.settings.remove(key);
                }
            },
            // Shards exist exactly while they have a lease: changed above.
            MetaOp::ShardNew { .. }
            | MetaOp::ShardDel { .. }
            | MetaOp::LeaseGrant { .. }
            | MetaOp::LeaseRequest { .. }
            | MetaOp::LeaseRelease { .. }
            | MetaOp::LeaseReclaim { .. } => {}
        }
        Ok(())
    }
}
