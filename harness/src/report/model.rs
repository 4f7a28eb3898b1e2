//! The report's content. Everything outside [`Observed`] is decided by the scenario, the
//! limiter and the seed; [`Observed`] holds figures that vary from run to run.

use crate::scenario::FaultKind;
use serde::Serialize;

use crate::checker::{CheckResult, TtlBound, Verdict};
use crate::keys::KeyLayout;
use crate::scenario::Algorithm;

#[derive(Debug, Clone, Serialize)]
pub struct Report {
    pub scenario: String,
    pub about: String,
    pub scenario_file: String,
    pub seed: u64,
    pub limiter: LimiterSummary,
    pub server: ServerSummary,
    /// The limiter's keys as the run took them, and how long they may live.
    pub keys: KeysSummary,
    /// The merged verdict: Invalid beats Unknown beats Valid.
    pub verdict: Verdict,
    pub invariants: Vec<CheckResult>,
    pub faults: Vec<FaultSummary>,
    /// Requests the schedule sent (fixed by the seed).
    pub requests_scheduled: u64,
    /// The command that reproduces this run.
    pub reproduce: String,
    /// Problems that limited what the run could see.
    pub problems: Vec<String>,
    /// The picture of the run beside the report (`timeline.svg`), once it is written.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub timeline: Option<String>,
    pub observed: Observed,
}

#[derive(Debug, Clone, Serialize)]
pub struct LimiterSummary {
    pub name: String,
    pub algorithm: Algorithm,
    pub round_trips_max: u32,
    pub commands: String,
}

impl LimiterSummary {
    /// "up to 2 round trip(s)", or what an adapter that did not say is allowed.
    pub fn trips_text(&self) -> String {
        match self.round_trips_max {
            u32::MAX => "any number of round trips".to_owned(),
            n => format!("up to {n} round trip(s)"),
        }
    }
}

/// Which keys the run judged as the limiter's, who said so, and the TTL bound applied.
#[derive(Debug, Clone, Serialize)]
pub struct KeysSummary {
    /// Key templates, e.g. `rl:{identity}` or `geocode:calls:{identity}:*`.
    pub templates: Vec<String>,
    /// Who described them (the default, the scenario, --keys, the limiter).
    pub from: String,
    /// When the scenario's description overrode the limiter's own.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
    pub ttl_bound: TtlBound,
    /// When the run saw none of the keys described: what the limiter touched instead, and a
    /// layout that would fit them.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub unseen: Option<String>,
}

impl KeysSummary {
    pub fn new(layout: &KeyLayout, note: Option<String>, ttl_bound: TtlBound, unseen: Option<String>) -> Self {
        Self {
            templates: layout.texts(),
            from: layout.source.to_string(),
            note,
            ttl_bound,
            unseen,
        }
    }
}

#[derive(Debug, Clone, Serialize)]
pub struct ServerSummary {
    /// e.g. "redis 7.0.15".
    pub version: String,
    pub backend: String,
    /// A Redis Cluster's shape, e.g. "a cluster of 3 primaries, 0 replicas each"; absent for
    /// one server.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub topology: Option<String>,
    /// Settings applied with CONFIG SET, as "name value".
    pub settings: Vec<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cache_server: Option<String>,
}

#[derive(Debug, Clone, Serialize)]
pub struct FaultSummary {
    pub index: usize,
    pub kind: FaultKind,
    /// The fault as the scenario states it.
    pub spec: String,
    pub fired: u64,
    /// The fault strikes every match (`times = 0`): how many times it struck then depends on
    /// how many round trips the run made, which timing decides (a window more or less), so
    /// the reviewed snapshot says that it struck, not how often.
    pub fired_every_match: bool,
    /// What happened, in plain words (e.g. why it never fired).
    pub outcome: String,
}

/// Figures that depend on timing, the server's eviction sampling and the machine.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Observed {
    pub wall_ms: u64,
    pub counts: Counts,
    pub samples: usize,
    pub keyspace_events: usize,
    pub limiter_server_evicted_keys: u64,
    pub limiter_server_expired_keys: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cache_server_evicted_keys: Option<u64>,
    pub cache_writes_ok: u64,
    pub cache_writes_failed: u64,
    /// Where the servers ran (container ids, ports).
    pub servers: Vec<String>,
    /// The harness process's peak resident memory (VmHWM) when the run ended: the whole
    /// process's so far, so in a matrix or `ci` the largest of the runs before it too.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub resident_peak_bytes: Option<u64>,
    /// On a cluster: per primary, the redirections and cluster errors it replied (e.g.
    /// "127.0.0.1:7000: ASK 12, MOVED 3").
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub cluster_replies: Vec<String>,
    /// How the limiter's traffic reached the server, when through the fault proxy.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub proxy: Option<String>,
    /// The commands the proxy saw for the requests behind the first anomalies.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub wire: Vec<WireTrace>,
}

/// The commands sent for the requests witnessing one anomaly, as the fault proxy saw them.
#[derive(Debug, Clone, Serialize)]
pub struct WireTrace {
    pub key: String,
    pub anomaly: String,
    /// "12.345 s conn 3 request #17: GET rl:0"
    pub lines: Vec<String>,
}

#[derive(Debug, Clone, Default, Serialize)]
pub struct Counts {
    pub requests: u64,
    pub allowed: u64,
    pub rejected: u64,
    pub errors: u64,
    pub indeterminate: u64,
    /// Error replies by their code (e.g. "OOM"), for requests that got no decision.
    pub errors_by_code: std::collections::BTreeMap<String, u64>,
}
