//! The suite file as written (`limiter-harness.toml`): serde mirrors of the TOML, no
//! validation and no I/O. Values that [`super::resolve`] checks keep their spans.

use serde::Deserialize;
use toml::Spanned;

use crate::backend::BackendChoice;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SuiteFile {
    #[serde(default)]
    pub suite: Option<Spanned<SuiteSection>>,
    #[serde(default)]
    pub server: Option<ServerSection>,
    #[serde(rename = "limiter", default)]
    pub limiters: Vec<Spanned<LimiterEntry>>,
    /// Cells the suite leaves out, each with its reason.
    #[serde(rename = "skip", default)]
    pub skips: Vec<Spanned<SkipEntry>>,
}

/// `[[skip]]`: cells not run, with why (the summary shows it).
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SkipEntry {
    /// `SCENARIO--LIMITER` names, or globs over them (`server-pause-*--daily-cap`).
    pub cells: Spanned<String>,
    pub reason: Spanned<String>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SuiteSection {
    pub name: Option<String>,
    /// Shipped scenario names and globs over names, scenario files, globs of files, directories.
    pub scenarios: Option<Spanned<Vec<Spanned<String>>>>,
    /// Names or globs over names to leave out.
    #[serde(default)]
    pub exclude: Vec<String>,
    pub baseline: Option<Spanned<String>>,
    pub report_dir: Option<Spanned<String>>,
    /// A reviewed verdict table kept with the baseline (compared and rewritten like it).
    pub table: Option<Spanned<String>>,
    pub jobs: Option<Spanned<usize>>,
    pub seed: Option<u64>,
    /// How many more times a cell that differs from its baseline is run before it is
    /// reported (default 2): runs that disagree make it flaky.
    pub reruns: Option<Spanned<u32>>,
    /// What a flaky cell the baseline does not record as flaky does to the gate: "fail"
    /// (the default) or "pass" (reported, not failing).
    pub flaky: Option<Spanned<String>>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ServerSection {
    pub backend: Option<BackendChoice>,
    pub url: Option<String>,
    /// `--server`: an installed server's name or a binary's path (`redis_server`, its old name).
    #[serde(alias = "redis_server")]
    pub server: Option<String>,
    pub image: Option<String>,
    #[serde(default)]
    pub via_proxy: bool,
    #[serde(default)]
    pub allow_reconfigure: bool,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LimiterEntry {
    /// A short name: the cell's column and its baseline file (default: `spec` when that is a
    /// built-in's name).
    pub name: Option<Spanned<String>>,
    /// Any `--limiter` spec: a built-in, `lua:PATH`, `exec:COMMAND`.
    pub spec: Spanned<String>,
    /// The limiter's keys (`--keys`), when it does not declare them itself.
    #[serde(default)]
    pub keys: Vec<String>,
    /// Run every scenario with this window (`--window-ms`): for whole-second limiters.
    pub window_ms: Option<Spanned<u64>>,
    /// How long its keys may live, in ms, whatever the window (`--ttl-max-ms`)…
    pub ttl_max_ms: Option<Spanned<u64>>,
    /// …or in windows (`--ttl-max-windows`).
    pub ttl_max_windows: Option<Spanned<f64>>,
}
