//! Shrinking on real servers: proptest's [`ValueTree`] proposes a smaller candidate
//! (`simplify`) or backs off (`complicate`); each proposal is run `confirm` times on fresh
//! servers and kept only when every run breaks the same invariant the same way, so a flaky
//! step never ends in a scenario that does not reproduce.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use proptest::strategy::ValueTree;

use super::candidate::{Candidate, PhaseSpec, Target};
use super::strategy::WORST_CASE_MS_MAX;
use super::trial::{Finding, Trials};

/// How far shrinking went.
#[derive(Debug, Clone)]
pub struct Shrunk {
    /// The smallest candidate that reproduced `confirm` of `confirm` times.
    pub minimal: Candidate,
    /// Proposals tried (each run `confirm` times), and how many of them were kept.
    pub steps_tried: usize,
    pub steps_kept: usize,
    /// Why it stopped: nothing smaller to try, or a limit.
    pub stopped: String,
    /// A report of the minimal candidate's last confirming run.
    pub report_dir: Option<PathBuf>,
    /// The evidence of that run.
    pub evidence: Vec<String>,
}

/// The limits of one shrink.
#[derive(Debug, Clone, Copy)]
pub struct ShrinkLimits {
    /// Runs per proposal, all of which must reproduce.
    pub confirm: usize,
    pub steps_max: usize,
    pub time_max: Duration,
}

/// Shrink `tree` (whose current value reproduced `target`) as far as the limits allow:
/// proptest's shrinking first, then a greedy pass over [`reductions`] of what it left (a
/// value tree stops at the first proposal its components cannot back off from, which on a
/// timing race can be after a handful of steps); `on_step(tried, kept)` is told after every
/// proposal.
pub async fn shrink<T: ValueTree<Value = Candidate> + ?Sized>(
    tree: &mut T,
    target: &Finding,
    limits: ShrinkLimits,
    trials: &dyn Trials,
    on_step: &(dyn Fn(usize, usize) + Sync),
    cancel: &tokio_util::sync::CancellationToken,
) -> Shrunk {
    let mut step = Step {
        started: Instant::now(),
        target,
        limits,
        trials,
        on_step,
        cancel,
        shrunk: Shrunk {
            minimal: tree.current(),
            steps_tried: 0,
            steps_kept: 0,
            stopped: "nothing smaller reproduces".into(),
            report_dir: None,
            evidence: Vec::new(),
        },
    };
    if tree.simplify() {
        loop {
            let Some(kept) = step.try_proposal(tree.current()).await else {
                return step.shrunk;
            };
            let more = if kept { tree.simplify() } else { tree.complicate() };
            if !more {
                break;
            }
        }
    }
    // The greedy pass: the first reduction that reproduces is kept and the pass starts
    // again from it, until no reduction of the minimal candidate reproduces.
    'pass: loop {
        for proposal in reductions(&step.shrunk.minimal) {
            match step.try_proposal(proposal).await {
                None => break 'pass,
                Some(true) => continue 'pass,
                Some(false) => {}
            }
        }
        break;
    }
    step.shrunk
}

/// One shrink in progress: its limits, and what it kept so far.
struct Step<'a> {
    started: Instant,
    target: &'a Finding,
    limits: ShrinkLimits,
    trials: &'a dyn Trials,
    on_step: &'a (dyn Fn(usize, usize) + Sync),
    cancel: &'a tokio_util::sync::CancellationToken,
    shrunk: Shrunk,
}

impl Step<'_> {
    /// Run `proposal` `confirm` times and keep it when every run reproduces the target:
    /// whether it was kept, or `None` when a limit (or Ctrl-C) ends the shrink first.
    async fn try_proposal(&mut self, proposal: Candidate) -> Option<bool> {
        let shrunk = &mut self.shrunk;
        if shrunk.steps_tried >= self.limits.steps_max {
            shrunk.stopped = format!("stopped at the step limit ({} proposals)", self.limits.steps_max);
            return None;
        }
        if self.started.elapsed() >= self.limits.time_max {
            shrunk.stopped = format!("stopped at the time limit ({} s)", self.limits.time_max.as_secs());
            return None;
        }
        if self.cancel.is_cancelled() {
            shrunk.stopped = "interrupted".into();
            return None;
        }
        let runs = self
            .trials
            .run(&vec![proposal.clone(); self.limits.confirm.max(1)])
            .await;
        shrunk.steps_tried += 1;
        let kept = runs.iter().all(|r| r.reproduces(self.target));
        if kept {
            shrunk.steps_kept += 1;
            shrunk.minimal = proposal;
            let last = runs.last().expect("at least one run");
            shrunk.report_dir = last.report_dir.clone();
            shrunk.evidence = last.evidence.clone();
        }
        (self.on_step)(shrunk.steps_tried, shrunk.steps_kept);
        Some(kept)
    }
}

/// Candidates one change smaller than `c`, the most drastic first: without one of its phases
/// or faults, one identity and one instance, each phase halved (a steady phase's duration or
/// rate, a burst's requests, a quiet phase), each fault striking once and from the first
/// request. Only changes that make a difference, and none that could run longer than
/// [`WORST_CASE_MS_MAX`].
pub fn reductions(c: &Candidate) -> Vec<Candidate> {
    // Long: one list of every kind of reduction, in the order they are tried.
    let mut out = Vec::new();
    let mut push = |changed: Candidate| {
        if changed != *c && !out.contains(&changed) && super::render::worst_case_ms(&changed) <= WORST_CASE_MS_MAX {
            out.push(changed);
        }
    };
    for i in 0..c.phases.len() {
        if c.phases.len() > 1 {
            let mut fewer = c.clone();
            fewer.phases.remove(i);
            push(fewer);
        }
    }
    for i in 0..c.faults.len() {
        let mut fewer = c.clone();
        fewer.faults.remove(i);
        push(fewer);
    }
    push(Candidate {
        identities: 1,
        ..c.clone()
    });
    push(Candidate {
        instances: 1,
        ..c.clone()
    });
    for i in 0..c.phases.len() {
        for half in halves(&c.phases[i]) {
            let mut smaller = c.clone();
            smaller.phases[i] = half;
            push(smaller);
        }
    }
    for i in 0..c.faults.len() {
        if let Some(target) = c.faults[i].target() {
            for aimed in [
                Target {
                    times: Some(1),
                    ..target
                },
                Target { request: 1, ..target },
            ] {
                let mut smaller = c.clone();
                smaller.faults[i].set_target(aimed);
                push(smaller);
            }
        }
    }
    out
}

/// A phase with half its traffic or length (never below the strategy's smallest values).
fn halves(phase: &PhaseSpec) -> Vec<PhaseSpec> {
    let half_ms = |ms: u64| (ms / 2 / 100 * 100).max(100);
    match *phase {
        PhaseSpec::Steady {
            rate_per_s,
            duration_ms,
            round_robin,
            even,
        } => vec![
            PhaseSpec::Steady {
                rate_per_s,
                duration_ms: half_ms(duration_ms),
                round_robin,
                even,
            },
            PhaseSpec::Steady {
                rate_per_s: (rate_per_s / 2).max(10),
                duration_ms,
                round_robin,
                even,
            },
        ],
        PhaseSpec::Burst { requests, concurrency } => vec![PhaseSpec::Burst {
            requests: (requests / 2).max(5),
            concurrency,
        }],
        PhaseSpec::Quiet { duration_ms } => vec![PhaseSpec::Quiet {
            duration_ms: half_ms(duration_ms),
        }],
    }
}
