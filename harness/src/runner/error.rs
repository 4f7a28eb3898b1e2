//! The runner's errors below the user-facing tier: why a history cannot be judged, and why a
//! scenario's `[[setup]]` command may not be sent to a server the harness did not start.

use crate::keys::KeyError;
use crate::scenario::{AdjustError, ScenarioError};

/// What a history lacks to be judged again (it becomes [`crate::SetupError::BadHistory`]).
#[derive(Debug, thiserror::Error)]
pub enum JudgeError {
    /// The first line is not the run's header.
    #[error("its first line is not the run's header (`\"type\":\"run\"`)")]
    NoHeader,
    /// The header carries no scenario text (an older harness wrote it).
    #[error("its header does not carry the scenario's text (written by an older limiter-harness)")]
    NoScenarioText,
    /// The scenario text in the header does not parse.
    #[error("the scenario it records does not parse: {0}")]
    Scenario(#[source] Box<ScenarioError>),
    /// The changes the run made to its scenario no longer apply.
    #[error(transparent)]
    Adjust(#[from] AdjustError),
    /// No `limiter` line.
    #[error("it never says which limiter ran (no `\"type\":\"limiter\"` line)")]
    NoLimiter,
    /// The recorded key layout does not parse.
    #[error("the key layout it records does not parse: {0}")]
    Layout(#[source] KeyError),
}

/// Why a `[[setup]]` command may not be sent to a server the harness did not start.
#[derive(Debug, thiserror::Error)]
pub enum SetupRefused {
    /// A command that acts on the whole server (or on keys a script picks).
    #[error("{command} acts on the whole server (or on keys a script picks)")]
    ServerWide { command: String },
    /// `COMMAND GETKEYS` failed: the server cannot say which keys it names.
    #[error("the server names no key of it ({0})")]
    KeysUnknown(#[source] redis::RedisError),
    /// It names no key at all.
    #[error("it names no key")]
    NoKey,
    /// It names a key that is not the identity's.
    #[error("it names `{key}`, which is not one of identity {identity}'s keys")]
    OtherKey { key: String, identity: u32 },
}
