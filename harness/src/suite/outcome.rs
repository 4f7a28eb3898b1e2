//! A `ci` run's result as data: every cell's standing against its baseline with the evidence
//! a reviewer needs (what changed and which way, what each run gave, the diff, the reproduce
//! command). It is written as `ci.json`; `ci merge` reads shards' files back; the Markdown
//! summary, the JUnit XML and the exit code are functions of it alone.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::baseline::Standing;
use super::resolve::FlakyPolicy;
use super::verdicts::Change;

/// One cell of a `ci` run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CellResult {
    pub scenario: String,
    pub limiter: String,
    pub standing: Standing,
    /// The first run's verdict: valid, invalid, unknown; error (it could not run); skipped.
    pub verdict: String,
    /// The verdict in a word or two for the table: `pass`, the broken invariants, `unknown: ...`.
    pub words: String,
    /// The first run's verdict per invariant.
    #[serde(default)]
    pub invariants: BTreeMap<String, String>,
    /// What differs from the baseline, labelled (regression, improvement, changed).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub changes: Vec<Change>,
    /// For runs that disagree: what each invariant gave ("ttl-present: invalid 1 of 3").
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub runs: Vec<String>,
    /// How many times it ran.
    pub run_count: usize,
    /// The diff from its baseline file to the run that differs (empty when none does).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub diff: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reproduce: Option<String>,
    /// Where the full report of the run that differs is (else the first run's).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub report: Option<String>,
    /// The broken invariants of that run, with their first evidence: "ttl-present: ...".
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub broken: Vec<String>,
    /// Every invariant of that run, a line each (JUnit's system-out).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub details: String,
    /// Why it could not run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// Why the suite skips it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub skipped: Option<String>,
    /// Its baseline file, relative to the suite.
    pub baseline_file: String,
    pub wall_ms: u64,
}

impl CellResult {
    /// A cell's result with its standing and verdict, and nothing else found yet.
    pub fn new(
        scenario: &str,
        limiter: &str,
        standing: Standing,
        verdict: &str,
        words: String,
        baseline_file: String,
    ) -> Self {
        Self {
            scenario: scenario.to_owned(),
            limiter: limiter.to_owned(),
            standing,
            verdict: verdict.to_owned(),
            words,
            invariants: BTreeMap::new(),
            changes: Vec::new(),
            runs: Vec::new(),
            run_count: 0,
            diff: String::new(),
            reproduce: None,
            report: None,
            broken: Vec::new(),
            details: String::new(),
            error: None,
            skipped: None,
            baseline_file,
            wall_ms: 0,
        }
    }

    /// `SCENARIO--LIMITER`: its baseline file's stem, and what `--cells` matches.
    pub fn name(&self) -> String {
        cell_name(&self.scenario, &self.limiter)
    }

    /// Whether it fails the gate (a flaky cell as the suite's policy says).
    pub fn fails(&self, flaky: FlakyPolicy) -> bool {
        match self.standing {
            Standing::Flaky => flaky == FlakyPolicy::Fail,
            standing => standing.differs(),
        }
    }

    /// The command that records this cell's runs as its baseline.
    pub fn accept_command(&self) -> String {
        format!(
            "limiter-harness ci --accept --cells {}",
            crate::shell::quote(&self.name())
        )
    }
}

/// `SCENARIO--LIMITER`.
pub fn cell_name(scenario: &str, limiter: &str) -> String {
    format!("{scenario}--{limiter}")
}

/// The suite's table kept with the baseline (`[suite] table`), against what the cells give.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TableState {
    pub path: String,
    pub same: bool,
}

/// A whole `ci` run (or the merge of shards' runs).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CiReport {
    pub suite: String,
    pub baseline: String,
    /// Every scenario and limiter of the suite, in its order (the table's rows and columns).
    pub scenarios: Vec<String>,
    pub limiters: Vec<String>,
    /// The cells this run ran or skipped, in table order.
    pub cells: Vec<CellResult>,
    /// How many cells the suite has in all (a partial run holds fewer).
    pub cells_in_suite: usize,
    /// What the run was limited to (`--cells`, `--scenarios`, `--limiters`), when it was.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub selection: Option<String>,
    /// `K/N` of `--shard`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shard: Option<String>,
    /// Baseline files no cell of the suite has (judged on whole runs only).
    #[serde(default)]
    pub stale: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub table: Option<TableState>,
    pub flaky: FlakyPolicy,
    /// What `--accept` wrote or removed.
    #[serde(default)]
    pub accepted: Vec<String>,
    pub interrupted: bool,
    /// Whether every cell is as in its baseline (skipped cells aside).
    pub identical: bool,
    /// Whether the gate passes: nothing fails, no stale file, the table the same.
    pub passed: bool,
}

impl CiReport {
    /// Fill in `identical` and `passed` from the cells.
    pub fn settle(mut self) -> Self {
        let quiet = self.stale.is_empty() && self.table.as_ref().is_none_or(|t| t.same);
        self.identical = quiet
            && !self
                .cells
                .iter()
                .any(|c| c.standing.differs() || c.standing == Standing::Error);
        self.passed = quiet
            && !self.interrupted
            && !self
                .cells
                .iter()
                .any(|c| c.fails(self.flaky) || c.standing == Standing::Error);
        self
    }

    /// The cells standing so.
    pub fn standing(&self, standing: Standing) -> impl Iterator<Item = &CellResult> {
        self.cells.iter().filter(move |c| c.standing == standing)
    }
}
