//! Shrinking on real servers: proptest's [`ValueTree`] proposes a smaller candidate
//! (`simplify`) or backs off (`complicate`); each proposal is run `confirm` times on fresh
//! servers and kept only when every run breaks the same invariant the same way, so a flaky
//! step never ends in a scenario that does not reproduce.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use proptest::strategy::ValueTree;

use super::strategy::Candidate;
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

/// Shrink `tree` (whose current value reproduced `target`) as far as the limits allow;
/// `on_step(tried, kept)` is told after every proposal.
pub async fn shrink<T: ValueTree<Value = Candidate> + ?Sized>(
    tree: &mut T,
    target: &Finding,
    limits: ShrinkLimits,
    trials: &dyn Trials,
    on_step: &(dyn Fn(usize, usize) + Sync),
    cancel: &tokio_util::sync::CancellationToken,
) -> Shrunk {
    let started = Instant::now();
    let mut shrunk = Shrunk {
        minimal: tree.current(),
        steps_tried: 0,
        steps_kept: 0,
        stopped: "nothing smaller reproduces".into(),
        report_dir: None,
        evidence: Vec::new(),
    };
    if !tree.simplify() {
        return shrunk;
    }
    loop {
        if shrunk.steps_tried >= limits.steps_max {
            shrunk.stopped = format!("stopped at the step limit ({} proposals)", limits.steps_max);
            break;
        }
        if started.elapsed() >= limits.time_max {
            shrunk.stopped = format!("stopped at the time limit ({} s)", limits.time_max.as_secs());
            break;
        }
        if cancel.is_cancelled() {
            shrunk.stopped = "interrupted".into();
            break;
        }
        let proposal = tree.current();
        let runs = trials.run(&vec![proposal.clone(); limits.confirm.max(1)]).await;
        shrunk.steps_tried += 1;
        let kept = runs.iter().all(|r| r.reproduces(target));
        if kept {
            shrunk.steps_kept += 1;
            shrunk.minimal = proposal;
            let last = runs.last().expect("at least one run");
            shrunk.report_dir = last.report_dir.clone();
            shrunk.evidence = last.evidence.clone();
        }
        on_step(shrunk.steps_tried, shrunk.steps_kept);
        let more = if kept { tree.simplify() } else { tree.complicate() };
        if !more {
            break;
        }
    }
    shrunk
}
