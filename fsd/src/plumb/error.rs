//! Why the session's plumber refused a message or rules.

use crate::plumb::ports::{MESSAGE_MAX, RULES_MAX};
use apex_core::plumb::route::RouteError;
use apex_core::plumb::RuleError;

/// Why the plumber refused.
#[derive(Debug, PartialEq, thiserror::Error)]
pub enum PlumbFsError {
    /// The request's token does not allow it.
    #[error(transparent)]
    Access(#[from] crate::access::AccessError),
    #[error(transparent)]
    Message(#[from] apex_core::plumb::PlumbError),
    #[error(transparent)]
    Route(#[from] RouteError),
    #[error(transparent)]
    Rules(#[from] RuleError),
    #[error("plumb message over {MESSAGE_MAX} bytes")]
    TooLong,
    #[error("rules over {RULES_MAX} bytes")]
    RulesTooLong,
    #[error("no such plumb port {0:?}")]
    NoPort(String),
    #[error("couldn't find destination for message: no rule names a port and none starts a program")]
    NoDestination,
    #[error("nobody reads port {0}, and the rule that took the message starts no program (plumb start or client)")]
    NoReader(String),
    #[error("no port for \"client\" rule: a rule with plumb client needs plumb to PORT")]
    ClientWithoutPort,
    #[error("plumb start {program}: {err}")]
    Start { program: String, err: String },
    #[error("rules: in use: another writes the rules now; write them once it closes them")]
    RulesInUse,
    #[error("plumb start: the command is empty")]
    EmptyCommand,
    /// The metalog refused the rules' entries.
    #[error(transparent)]
    Rejected(#[from] apex_core::Reject),
}
