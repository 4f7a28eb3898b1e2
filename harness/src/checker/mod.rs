//! Checkers: judge a history against the scenario's invariants. Pure functions of the
//! history (no Redis), tested on hand-written histories. A checker never aborts the run:
//! a panic inside one becomes an Unknown verdict that says so.

mod admitted;
mod bound;
mod double;
mod failing;
mod leaks;
mod liveness;
mod lockout;
mod recovery;
mod reset;
mod surfaced;
mod ttl;
mod unseen;
mod verdict;
mod window;

use std::panic::{AssertUnwindSafe, catch_unwind};

pub use bound::TtlBound;
pub use unseen::layout_hint;
pub use verdict::{ANOMALIES_SHOWN, Anomaly, CheckResult, Verdict};

use crate::history::{HistoryIndex, Outcome, Problem, Request};
use crate::keys::KeyLayout;
use crate::scenario::Algorithm;
use crate::scenario::{CheckConfig, Invariant, Limit};

/// What the checkers judge against.
#[derive(Debug, Clone, Copy)]
pub struct CheckInput<'a> {
    pub limit: &'a Limit,
    pub config: &'a CheckConfig,
    pub algorithm: Algorithm,
    /// Which keys are the limiter's, and whose.
    pub layout: &'a KeyLayout,
    /// How long a limiter key may live.
    pub ttl: &'a TtlBound,
    pub history: &'a HistoryIndex,
}

/// Judge every invariant the scenario lists, in its order.
pub fn check(input: &CheckInput<'_>) -> Vec<CheckResult> {
    input
        .config
        .invariants
        .iter()
        .map(|&invariant| {
            let result = catch_unwind(AssertUnwindSafe(|| check_one(invariant, input))).unwrap_or_else(|panic| {
                let why = panic
                    .downcast_ref::<String>()
                    .cloned()
                    .or_else(|| panic.downcast_ref::<&str>().map(|s| (*s).to_owned()))
                    .unwrap_or_default();
                CheckResult::unknown(invariant, format!("the checker failed (a harness bug): {why}"))
            });
            downgrade_if_blind(result, input.history)
        })
        .collect()
}

fn check_one(invariant: Invariant, input: &CheckInput<'_>) -> CheckResult {
    match invariant {
        Invariant::TtlPresent => ttl::ttl_present(input),
        Invariant::TtlBounded => ttl::ttl_bounded(input),
        Invariant::NoCounterReset => reset::no_counter_reset(input),
        Invariant::AdmittedWithinLimit => admitted::admitted_within_limit(input),
        Invariant::NoLockout => lockout::no_lockout(input),
        Invariant::AdmitsUpToLimit => liveness::admits_up_to_limit(input),
        Invariant::NoLeakedKeys => leaks::no_leaked_keys(input),
        Invariant::NoDoubleCount => double::no_double_count(input),
        Invariant::ErrorsSurfaced => surfaced::errors_surfaced(input),
        Invariant::FailsAsDeclared => failing::fails_as_declared(input),
        Invariant::RecoversAfterFault => recovery::recovers_after_fault(input),
    }
}

/// A Valid verdict from a run that lost what it needed to see is Unknown; so is one from a
/// run that sent no request, or in which the limiter decided nothing (every request an error
/// or unanswered): there was no behaviour to judge — except for `errors-surfaced`, where
/// errors are the point.
fn downgrade_if_blind(mut result: CheckResult, history: &HistoryIndex) -> CheckResult {
    if result.verdict != Verdict::Valid {
        return result;
    }
    if let Some(Problem { source, detail, .. }) = history.fatal_problem() {
        result.verdict = Verdict::Unknown;
        result.summary = format!("no violation seen, but the run could not finish observing ({source}: {detail})");
    } else if history.requests.is_empty() {
        result.verdict = Verdict::Unknown;
        result.summary = "the run sent no request: there was no behaviour to judge".to_owned();
    } else if !matches!(
        result.invariant,
        Invariant::ErrorsSurfaced | Invariant::FailsAsDeclared | Invariant::RecoversAfterFault
    ) && !history.requests.is_empty()
        && !history
            .requests
            .iter()
            .any(|r| matches!(r.outcome, Some(Outcome::Allowed | Outcome::Rejected)))
    {
        result.verdict = Verdict::Unknown;
        result.summary = format!(
            "no violation seen, but none of the {} requests got a decision (all errors or unanswered)",
            history.requests.len()
        );
    }
    result
}

/// The request that started the current incarnation of `key` before `t_us`: the last
/// request completing before `t_us` that saw count 1.
pub(crate) fn creator_before<'a>(history: &'a HistoryIndex, key: &str, t_us: u64) -> Option<&'a Request> {
    history
        .requests_on(key)
        .filter(|r| r.complete_us.is_some_and(|c| c <= t_us) && r.count == Some(1))
        .max_by_key(|r| r.complete_us)
}

/// "ms" with one decimal for evidence lines.
pub(crate) fn ms(us: u64) -> String {
    format!("{:.1} ms", us as f64 / 1000.0)
}

#[cfg(test)]
pub(crate) mod fixtures;
#[cfg(test)]
mod layout_tests;
#[cfg(test)]
mod tests;
