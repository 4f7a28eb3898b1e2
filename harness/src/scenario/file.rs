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
    pub check: Spanned<CheckFile>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ServerFile {
    pub maxmemory: Option<Spanned<String>>,
    pub maxmemory_policy: Option<Spanned<String>>,
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
    pub key_prefix: Option<Spanned<String>>,
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
    pub identities: Option<Spanned<Vec<i64>>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FaultFile {
    pub kind: Spanned<String>,
    pub identity: Option<Spanned<i64>>,
    pub request: Option<Spanned<i64>>,
    pub before_command: Option<Spanned<String>>,
    pub times: Option<Spanned<i64>>,
    pub stall_ms: Option<Spanned<i64>>,
    pub phase: Option<Spanned<String>>,
    pub value_bytes: Option<Spanned<i64>>,
    pub ttl_s: Option<Spanned<i64>>,
    pub writes_per_request: Option<Spanned<i64>>,
    pub target: Option<Spanned<String>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CheckFile {
    pub invariants: Spanned<Vec<Spanned<String>>>,
    pub sample_interval_ms: Option<Spanned<i64>>,
    pub ttl_slack_ms: Option<Spanned<i64>>,
}
