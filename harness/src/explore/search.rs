//! The budgeted search: candidates drawn from one seeded proptest runner, run a batch at a
//! time. A candidate that breaks an invariant no earlier finding broke is confirmed
//! `confirm` times and set aside; the search goes on for other invariants until the budget
//! (or `findings_max`), then each finding is shrunk.

use std::time::{Duration, Instant};

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use proptest::strategy::{Strategy, ValueTree};
use proptest::test_runner::{Config, RngAlgorithm, TestRng, TestRunner};
use tokio_util::sync::CancellationToken;

use super::candidate::Candidate;
use super::shrink::{ShrinkLimits, Shrunk, shrink};
use super::strategy::{Vocabulary, strata};
use super::trial::{Finding, TrialResult, Trials};

/// What the search may do.
#[derive(Debug, Clone)]
pub struct SearchConfig {
    pub seed: u64,
    /// No new batch starts after this long (shrinking has limits of its own).
    pub budget: Duration,
    /// Candidates run at once.
    pub jobs: usize,
    pub vocabulary: Vocabulary,
    pub shrink: ShrinkLimits,
    /// Stop searching once this many distinct invariants are found broken (0: search the
    /// whole budget).
    pub findings_max: usize,
    pub show_progress: bool,
}

/// What the search found, if anything, and how much it explored.
#[derive(Debug, Default)]
pub struct Exploration {
    pub candidates_run: u64,
    pub requests_planned: u64,
    /// Candidates that broke an invariant but did not reproduce `confirm` of `confirm` times.
    pub flaky: Vec<Finding>,
    /// Candidates whose run was unknown (it could not observe enough).
    pub unknown: u64,
    /// Candidates that could not run, with why.
    pub errors: Vec<String>,
    /// One confirmed, shrunk failure per broken invariant, in the order they were found.
    pub found: Vec<Found>,
    pub interrupted: bool,
    pub elapsed: Duration,
}

/// A confirmed failure and its shrunk form.
#[derive(Debug)]
pub struct Found {
    /// Which candidate of the search it was (counting from 1).
    pub candidate: u64,
    pub original: Candidate,
    pub target: Finding,
    /// Everything the original's run broke.
    pub findings: Vec<Finding>,
    pub shrunk: Shrunk,
    /// The seconds into the search when it was first seen.
    pub seen_after: Duration,
}

/// The proptest runner the seed decides: ChaCha, so the candidates are the same on every
/// machine and every run.
pub fn seeded_runner(seed: u64) -> TestRunner {
    let mut bytes = [0u8; 32];
    bytes[..8].copy_from_slice(&seed.to_le_bytes());
    TestRunner::new_with_rng(Config::default(), TestRng::from_seed(RngAlgorithm::ChaCha, &bytes))
}

/// A confirmed failure waiting to be shrunk: its value tree, where the search left it.
struct Pending<T> {
    candidate: u64,
    original: Candidate,
    tree: T,
    target: Finding,
    findings: Vec<Finding>,
    seen_after: Duration,
    confirming: TrialResult,
}

impl SearchConfig {
    fn enough(&self, found: usize) -> bool {
        self.findings_max > 0 && found >= self.findings_max
    }
}

/// Search until the budget runs out, `findings_max` invariants are found broken, or
/// `cancel`; then shrink each finding.
pub async fn search(config: &SearchConfig, trials: &dyn Trials, cancel: &CancellationToken) -> Exploration {
    let started = Instant::now();
    let mut runner = seeded_runner(config.seed);
    let strata = strata(&config.vocabulary);
    let bar = progress(config.show_progress);
    let mut out = Exploration::default();
    let mut pending = Vec::new();
    while started.elapsed() < config.budget && !config.enough(pending.len()) {
        if cancel.is_cancelled() {
            out.interrupted = true;
            break;
        }
        let trees = draw(&strata, out.candidates_run, &mut runner, config.jobs.max(1));
        let batch: Vec<Candidate> = trees.iter().map(|t| t.current()).collect();
        let results = trials.run(&batch).await;
        let first = out.candidates_run;
        tally(&mut out, &batch, &results);
        show(&bar, &out, None);
        if first == 0 && results.iter().all(|r| r.error.is_some()) {
            break;
        }
        let mut trees: Vec<_> = trees.into_iter().map(Some).collect();
        for (i, result) in results.iter().enumerate() {
            if config.enough(pending.len()) || cancel.is_cancelled() {
                break;
            }
            let Some(target) = next_target(result, &pending) else {
                continue;
            };
            let index = first + i as u64 + 1;
            let k = config.shrink.confirm;
            note(
                &bar,
                &format!("candidate {index} broke {target}: running it {k} more times"),
            );
            let Some(confirming) = confirmed(trials, &batch[i], &target, k).await else {
                note(
                    &bar,
                    &format!("candidate {index}: not {k} of {k}, a flaky finding; searching on"),
                );
                out.flaky.push(target);
                continue;
            };
            let seen_after = started.elapsed();
            note(
                &bar,
                &format!("candidate {index}: {k} of {k}; set aside to shrink when the search ends"),
            );
            pending.push(Pending {
                candidate: index,
                original: batch[i].clone(),
                tree: trees[i].take().expect("each tree is taken once"),
                target,
                findings: result.findings.clone(),
                seen_after,
                confirming,
            });
        }
    }
    out.interrupted |= cancel.is_cancelled();
    out.found = shrink_each(pending, config, trials, &bar, cancel).await;
    out.interrupted |= cancel.is_cancelled();
    bar.finish_and_clear();
    out.elapsed = started.elapsed();
    out
}

/// The value trees of the `n` candidates after the first `drawn`, each from the stratum
/// whose turn it is.
fn draw<S: Strategy>(strata: &[S], drawn: u64, runner: &mut TestRunner, n: usize) -> Vec<S::Tree> {
    (0..n as u64)
        .map(|i| {
            strata[((drawn + i) % strata.len() as u64) as usize]
                .new_tree(runner)
                .expect("the candidate strategy rejects nothing")
        })
        .collect()
}

/// The first invariant `result` broke that no earlier finding broke.
fn next_target<T>(result: &TrialResult, pending: &[Pending<T>]) -> Option<Finding> {
    result
        .findings
        .iter()
        .find(|f| !pending.iter().any(|p| p.target.invariant == f.invariant))
        .cloned()
}

/// Shrink every confirmed finding, in the order they were found.
async fn shrink_each<T: ValueTree<Value = Candidate>>(
    pending: Vec<Pending<T>>,
    config: &SearchConfig,
    trials: &dyn Trials,
    bar: &ProgressBar,
    cancel: &CancellationToken,
) -> Vec<Found> {
    let mut found = Vec::new();
    for mut p in pending {
        note(bar, &format!("shrinking {} (candidate {})", p.target, p.candidate));
        let target = p.target.clone();
        let on_step = |tried: usize, kept: usize| {
            bar.set_message(format!("shrinking {target}: {tried} steps tried, {kept} kept"));
        };
        let mut shrunk = shrink(&mut p.tree, &p.target, config.shrink, trials, &on_step, cancel).await;
        if shrunk.report_dir.is_none() {
            shrunk.report_dir = p.confirming.report_dir;
            shrunk.evidence = p.confirming.evidence;
        }
        found.push(Found {
            candidate: p.candidate,
            original: p.original,
            findings: p.findings,
            target: p.target,
            shrunk,
            seen_after: p.seen_after,
        });
    }
    found
}

fn tally(out: &mut Exploration, batch: &[Candidate], results: &[TrialResult]) {
    for (candidate, result) in batch.iter().zip(results) {
        out.candidates_run += 1;
        out.requests_planned += super::render::requests(candidate);
        if let Some(e) = &result.error {
            out.errors.push(e.clone());
        } else if result.unknown && result.findings.is_empty() {
            out.unknown += 1;
        }
    }
}

/// The last of `k` fresh runs of `candidate` when every one breaks `target`.
async fn confirmed(trials: &dyn Trials, candidate: &Candidate, target: &Finding, k: usize) -> Option<TrialResult> {
    let runs = trials.run(&vec![candidate.clone(); k.max(1)]).await;
    if runs.iter().all(|r| r.reproduces(target)) {
        runs.into_iter().last()
    } else {
        None
    }
}

fn progress(visible: bool) -> ProgressBar {
    let target = if visible {
        ProgressDrawTarget::stderr_with_hz(5)
    } else {
        ProgressDrawTarget::hidden()
    };
    let bar = ProgressBar::with_draw_target(None, target);
    bar.set_style(ProgressStyle::with_template("{spinner} [{elapsed_precise}] {msg}").expect("valid template"));
    bar.enable_steady_tick(Duration::from_millis(200));
    bar
}

fn show(bar: &ProgressBar, out: &Exploration, extra: Option<&str>) {
    bar.set_message(format!(
        "{} candidates run ({} requests planned), {} flaky, {} unknown{}",
        out.candidates_run,
        out.requests_planned,
        out.flaky.len(),
        out.unknown,
        extra.map(|e| format!("; {e}")).unwrap_or_default()
    ));
}

/// A line above the progress bar, or on stderr when there is none.
fn note(bar: &ProgressBar, line: &str) {
    if bar.is_hidden() {
        eprintln!("limiter-harness explore: {line}");
    } else {
        bar.println(line);
    }
}
