//! Running candidates: each on a fresh server of its own, on a thread and runtime of its
//! own (as the matrix runs a cell), several at a time; and what a run found, as values the
//! search and the shrinker compare.

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use futures::StreamExt;

use super::candidate::Candidate;
use super::render;
use crate::backend::Backend;
use crate::checker::Verdict;
use crate::limiter::Limiter;
use crate::report::Report;
use crate::runner::RunConfig;
use crate::scenario::Invariant;

/// One broken invariant and the kind of anomaly that broke it: "the same way".
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Finding {
    pub invariant: Invariant,
    pub anomaly: String,
}

impl std::fmt::Display for Finding {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} ({})", self.invariant, self.anomaly)
    }
}

/// What one run of a candidate gave.
#[derive(Debug, Clone, Default)]
pub struct TrialResult {
    /// Every broken invariant with each anomaly kind, sorted.
    pub findings: Vec<Finding>,
    /// The first line of each broken invariant's summary (its evidence), in invariant order.
    pub evidence: Vec<String>,
    /// Why the run could not be judged (a setup error), if it could not.
    pub error: Option<String>,
    pub report_dir: Option<PathBuf>,
    pub unknown: bool,
}

impl TrialResult {
    pub fn from_report(report: &Report, report_dir: PathBuf) -> Self {
        let mut findings = Vec::new();
        let mut evidence = Vec::new();
        for check in report.invariants.iter().filter(|c| c.verdict == Verdict::Invalid) {
            evidence.push(format!("{}: {}", check.invariant, check.summary));
            for anomaly in &check.anomalies {
                findings.push(Finding {
                    invariant: check.invariant,
                    anomaly: anomaly.kind.clone(),
                });
            }
        }
        findings.sort();
        findings.dedup();
        Self {
            findings,
            evidence,
            error: None,
            report_dir: Some(report_dir),
            unknown: report.verdict == Verdict::Unknown,
        }
    }

    /// The finding the explorer chases: the first broken invariant (in the order of
    /// [`Invariant::ALL`]) with its first anomaly kind.
    pub fn primary(&self) -> Option<&Finding> {
        self.findings.first()
    }

    /// Whether this run broke `target`'s invariant with an anomaly of the same kind.
    pub fn reproduces(&self, target: &Finding) -> bool {
        self.findings.contains(target)
    }
}

/// Runs candidates: real servers ([`ServerTrials`]) or, in tests, a function.
#[async_trait::async_trait]
pub trait Trials: Send + Sync {
    /// Run every candidate once, each on a fresh server, several at a time; results in order.
    async fn run(&self, batch: &[Candidate]) -> Vec<TrialResult>;
}

/// Candidates on fresh servers of a backend, through the ordinary runner.
pub struct ServerTrials {
    pub limiter: Arc<dyn Limiter>,
    pub backend: Arc<dyn Backend>,
    pub seed: u64,
    /// Where each trial's report goes (`trial-<n>/`); passing trials' are removed.
    pub dir: PathBuf,
    pub jobs: usize,
    pub via_proxy: bool,
    pub counter: AtomicU64,
}

impl ServerTrials {
    async fn one(&self, candidate: &Candidate) -> TrialResult {
        let n = self.counter.fetch_add(1, Ordering::Relaxed);
        let report_dir = self.dir.join(format!("trial-{n}"));
        let text = render::to_toml(
            candidate,
            "explore-candidate",
            "a candidate of `limiter-harness explore`",
            self.seed,
            &[],
        );
        let scenario = match render::to_scenario(&text, &self.dir.join("candidate.toml")) {
            Ok(s) => s,
            Err(e) => {
                return TrialResult {
                    error: Some(format!("a candidate the parser refuses (a harness bug): {e}")),
                    ..TrialResult::default()
                };
            }
        };
        let run = RunConfig {
            scenario,
            limiter: Arc::clone(&self.limiter),
            backend: Arc::clone(&self.backend),
            seed: self.seed,
            report_dir: report_dir.clone(),
            allow_reconfigure: false,
            via_proxy: self.via_proxy,
            show_progress: false,
            reproduce: String::new(),
        };
        match crate::runner::run_on_own_thread(run).await.map(|o| o.report) {
            Ok(report) => {
                let result = TrialResult::from_report(&report, report_dir.clone());
                if result.findings.is_empty() {
                    let _ = std::fs::remove_dir_all(&report_dir);
                }
                result
            }
            Err(e) => TrialResult {
                error: Some(e.to_string()),
                ..TrialResult::default()
            },
        }
    }
}

#[async_trait::async_trait]
impl Trials for ServerTrials {
    async fn run(&self, batch: &[Candidate]) -> Vec<TrialResult> {
        let runs: Vec<_> = batch.iter().map(|c| Box::pin(self.one(c))).collect();
        futures::stream::iter(runs).buffered(self.jobs.max(1)).collect().await
    }
}
