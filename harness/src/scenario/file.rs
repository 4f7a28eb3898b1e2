//! The scenario file as written: serde mirrors of the TOML, no validation and no I/O.
//! Every value that [`super::resolve`] validates keeps its span for error messages.

use std::collections::BTreeMap;

use serde::Deserialize;
use toml::Spanned;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ScenarioFile {
    pub name: Spanned<String>,
    #[serde(default)]
    pub about: String,
    pub seed: Option<u64>,
    #[serde(default)]
    pub server: Option<Spanned<ServerFile>>,
    pub cache_server: Option<Spanned<ServerFile>>,
    pub limit: Spanned<LimitFile>,
    #[serde(rename = "phase", default)]
    pub phases: Vec<Spanned<PhaseFile>>,
    #[serde(rename = "fault", default)]
    pub faults: Vec<Spanned<FaultFile>>,
    #[serde(rename = "setup", default)]
    pub setup: Vec<Spanned<SetupFile>>,
    pub check: Spanned<CheckFile>,
    pub expect: Option<Spanned<ExpectFile>>,
}

/// What the matrix expects of each limiter on this scenario.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ExpectFile {
    /// Limiters expected to fail (every other limiter is expected to pass).
    #[serde(default)]
    pub fail: Vec<Spanned<String>>,
    /// Explanations of cells, by limiter name (e.g. why a verdict differs from a naive guess).
    #[serde(default)]
    pub notes: BTreeMap<String, String>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ServerFile {
    pub maxmemory: Option<Spanned<String>>,
    pub maxmemory_policy: Option<Spanned<String>>,
    /// `single` (the default) or `cluster`.
    pub topology: Option<Spanned<String>>,
    /// A cluster's primaries (default 3).
    pub primaries: Option<Spanned<i64>>,
    /// A cluster's replicas per primary (default 0).
    pub replicas: Option<Spanned<i64>>,
    /// Any other parameter `CONFIG SET` takes, by its Redis name.
    #[serde(default)]
    pub config: BTreeMap<Spanned<String>, Spanned<String>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LimitFile {
    pub requests_max: Spanned<i64>,
    pub window_ms: Spanned<i64>,
    pub identities: Option<Spanned<i64>>,
    /// Limiter instances sharing the server.
    pub instances: Option<Spanned<i64>>,
    pub key_prefix: Option<Spanned<String>>,
    /// Templates of the keys the limiter keeps per identity, e.g. `["app:{identity}:*"]`.
    pub keys: Option<Spanned<Vec<Spanned<String>>>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PhaseFile {
    pub kind: Spanned<String>,
    pub name: Option<Spanned<String>>,
    pub rate_per_s: Option<Spanned<f64>>,
    pub duration_ms: Option<Spanned<i64>>,
    pub requests: Option<Spanned<i64>>,
    pub concurrency: Option<Spanned<i64>>,
    pub connections: Option<Spanned<i64>>,
    pub identities: Option<Spanned<Vec<i64>>>,
    pub pick: Option<Spanned<String>>,
    pub spacing: Option<Spanned<String>>,
    pub clear_of_expiry_ms: Option<Spanned<i64>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FaultFile {
    pub kind: Spanned<String>,
    pub identity: Option<Spanned<i64>>,
    pub request: Option<Spanned<i64>>,
    pub before_command: Option<Spanned<OneOrMany>>,
    pub command: Option<Spanned<OneOrMany>>,
    pub times: Option<Spanned<i64>>,
    pub stall_ms: Option<Spanned<i64>>,
    pub delay_ms: Option<Spanned<i64>>,
    pub error: Option<Spanned<String>>,
    pub phase: Option<Spanned<String>>,
    pub value_bytes: Option<Spanned<i64>>,
    pub ttl_s: Option<Spanned<i64>>,
    pub writes_per_request: Option<Spanned<i64>>,
    pub target: Option<Spanned<String>>,
    /// Server faults: when, from the start of `phase`.
    pub after_ms: Option<Spanned<i64>>,
    /// `server-pause`: how long the server is stopped.
    pub pause_ms: Option<Spanned<i64>>,
    /// `server-restart`: `none` (every key lost) or `aof` (kept, fsync on every write).
    pub persistence: Option<Spanned<String>>,
    /// `reshard`: how long the slot stays migrating, its keys already moved (clients get `ASK`).
    pub migrating_ms: Option<Spanned<i64>>,
    /// `reshard`: `migrate` (`SETSLOT` and `MIGRATE`, the default) or `atomic` (Valkey 9's
    /// `CLUSTER MIGRATESLOTS`).
    pub method: Option<Spanned<String>>,
    /// `failover`: how long replication is held back before the replica is promoted.
    pub lose_writes_ms: Option<Spanned<i64>>,
    /// `failover`: `stay` (open connections stay with the demoted node) or `move` (closed).
    pub connections: Option<Spanned<String>>,
    /// `clock-skew`: the limiter instance whose clock is off.
    pub instance: Option<Spanned<i64>>,
    /// `clock-skew`: how far ahead (positive) or behind (negative) its clock is.
    pub offset_ms: Option<Spanned<i64>>,
    /// `clock-skew`: how much further it drifts every second of the run.
    pub drift_ms_per_s: Option<Spanned<f64>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CheckFile {
    pub invariants: Spanned<Vec<Spanned<String>>>,
    pub sample_interval_ms: Option<Spanned<i64>>,
    pub ttl_slack_ms: Option<Spanned<i64>>,
    pub ttl_max_ms: Option<Spanned<i64>>,
    pub deadline_ms: Option<Spanned<i64>>,
    /// What the limiter should answer while the server cannot: `error`, `fail-closed`, `fail-open`.
    pub on_server_error: Option<Spanned<String>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SetupFile {
    pub kind: Spanned<String>,
    pub identity: Spanned<i64>,
    /// `kind = "commands"`: the commands to send, each a string split on spaces.
    pub commands: Option<Spanned<Vec<Spanned<String>>>>,
}

/// A string or an array of strings (`before_command = "INCR"` or `["INCR", "INCRBY"]`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OneOrMany(pub Vec<String>);

impl<'de> Deserialize<'de> for OneOrMany {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Visitor;
        impl<'de> serde::de::Visitor<'de> for Visitor {
            type Value = OneOrMany;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a command name or an array of command names")
            }
            fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<OneOrMany, E> {
                Ok(OneOrMany(vec![v.to_owned()]))
            }
            fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut seq: A) -> Result<OneOrMany, A::Error> {
                let mut all = Vec::new();
                while let Some(item) = seq.next_element::<String>()? {
                    all.push(item);
                }
                Ok(OneOrMany(all))
            }
        }
        deserializer.deserialize_any(Visitor)
    }
}
