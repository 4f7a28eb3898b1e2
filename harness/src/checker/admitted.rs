//! `admitted-within-limit`: no identity is admitted more often than its algorithm allows.
//!
//! The bound per interval of `window_ms` depends on the algorithm:
//! - fixed window: a window admits at most `requests_max`, and any interval of `window_ms`
//!   overlaps at most two windows, so 2 × requests_max (legitimately reached across a
//!   boundary, never more). Also, no request may be admitted with a count above
//!   `requests_max`: the limiter's own counter then says the window was already full;
//! - sliding log: requests_max (the log counts exactly the last window);
//! - token bucket and GCRA: a full burst of requests_max plus requests_max refilled over
//!   the window, 2 × requests_max.
//!
//! An admission counts in an interval when the request was both sent and answered inside it.

use std::collections::BTreeMap;

use super::unseen::keys_unseen;
use super::{Anomaly, CheckInput, CheckResult, Verdict, ms, window};
use crate::history::Request;
use crate::scenario::Algorithm;
use crate::scenario::Invariant;

/// The most admissions inside one interval starting at a request's invocation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Densest {
    admitted: usize,
    /// Positions (into the slice given) of the first and last request in that interval.
    first: usize,
    last: usize,
}

pub fn admitted_within_limit(input: &CheckInput<'_>) -> CheckResult {
    // Long: each algorithm's window rule and its evidence are one judgement; split, the window state would travel through every helper.
    let (bound, rule) = bound(input);
    let window_us = input.limit.window_ms * 1000;
    let mut anomalies = Vec::new();
    let mut unknown = Vec::new();
    let mut most = 0usize;
    let mut per_identity: BTreeMap<u32, Vec<&Request>> = BTreeMap::new();
    for r in &input.history.requests {
        per_identity.entry(r.identity).or_default().push(r);
    }
    let mut notes = Vec::new();
    // The per-window rule needs the windows of the limiter's keys.
    let mut windows_unseen = None;
    if input.algorithm == Algorithm::FixedWindow {
        anomalies.extend(window::over_count(&per_identity, input.limit.requests_max));
        let admitted: Vec<&Request> = input.history.requests.iter().filter(|r| r.allowed()).collect();
        let several = admitted.iter().filter(|r| r.keys.len() > 1).count();
        let on_one = admitted.iter().filter(|r| r.sole_key().is_some()).count();
        if let Some(hint) = keys_unseen(input) {
            windows_unseen = Some(hint);
        } else if on_one == 0 && !admitted.is_empty() {
            windows_unseen = Some(format!(
                "none of the {} admitted requests worked on exactly one limiter key ({several} on several, {} on none of {}): which key's windows count them cannot be told — describe only the counter's key with `keys`",
                admitted.len(),
                admitted.len() - several,
                input.layout.describe()
            ));
        } else if input.history.keyspace_complete {
            anomalies.extend(window::over_window(input.history, input.limit.requests_max));
        } else {
            notes.push(
                "without keyspace notifications the windows' ends are unknown: admissions per window were not counted"
                    .to_owned(),
            );
        }
    }
    for (identity, requests) in per_identity {
        let definite: Vec<&Request> = requests.iter().copied().filter(|r| r.allowed()).collect();
        let maybe: Vec<&Request> = requests.iter().copied().filter(|r| r.maybe_allowed()).collect();
        let Some(dense) = densest(&definite, window_us) else {
            continue;
        };
        most = most.max(dense.admitted);
        if dense.admitted as u64 > bound {
            anomalies.push(over_admission(identity, &definite, dense, bound, input.limit.window_ms));
        } else if densest(&maybe, window_us).is_some_and(|d| d.admitted as u64 > bound) {
            unknown.push(identity);
        }
    }
    let otherwise = if let Some(hint) = windows_unseen {
        (
            Verdict::Unknown,
            format!(
                "at most {most} admitted per identity in any {} ms (bound {bound}), but the windows of the limiter's keys could not be judged: {hint}",
                input.limit.window_ms
            ),
        )
    } else if unknown.is_empty() {
        (
            Verdict::Valid,
            format!(
                "at most {most} admitted per identity in any {} ms (bound {bound})",
                input.limit.window_ms
            ),
        )
    } else {
        (
            Verdict::Unknown,
            format!(
                "identities {unknown:?} stay within {bound} only if their unanswered requests were rejected; the run cannot tell"
            ),
        )
    };
    let several = input
        .history
        .requests
        .iter()
        .filter(|r| r.allowed() && r.keys.len() > 1)
        .count();
    if input.algorithm == Algorithm::FixedWindow && several > 0 {
        notes.push(format!(
            "{several} admitted request(s) worked on several limiter keys: the per-window rule counts only requests that worked on one"
        ));
    }
    let mut result = CheckResult::from_anomalies(Invariant::AdmittedWithinLimit, anomalies, otherwise).with_rule(rule);
    result.notes.extend(notes);
    result
}

fn bound(input: &CheckInput<'_>) -> (u64, String) {
    let max = input.limit.requests_max;
    let window = input.limit.window_ms;
    match input.algorithm {
        Algorithm::FixedWindow => (
            2 * max,
            format!(
                "at most 2 × requests_max = {} admitted per identity in any {window} ms (a fixed window admits up to {max} on each side of a window boundary); at most {max} within one window of a key (between its expiries); and no admission with a count above {max}",
                2 * max
            ),
        ),
        Algorithm::SlidingLog => (
            max,
            format!(
                "at most requests_max = {max} admitted per identity in any {window} ms: the log admits only while fewer than {max} fall within the last window"
            ),
        ),
        Algorithm::SlidingWindowCounter => (
            2 * max,
            format!(
                "at most 2 × requests_max = {} admitted per identity in any {window} ms: each of the counter's windows admits at most {max} (the weighted previous count only lowers what the current one may admit), and an interval of one window overlaps two of them",
                2 * max
            ),
        ),
        Algorithm::TokenBucket | Algorithm::Gcra => (
            2 * max,
            format!(
                "at most 2 × requests_max = {} admitted per identity in any {window} ms: a full burst of {max} plus {max} refilled over the window ({})",
                2 * max,
                input.algorithm.name()
            ),
        ),
    }
}

/// The interval [t, t + window) starting at some request's invocation that holds the most
/// requests sent and answered inside it. O(n log n): a request answered by the interval's
/// end was necessarily sent before it, so only invocation >= t and completion < t + window
/// need counting, which a Fenwick tree over completion times does in one backward sweep.
fn densest(requests: &[&Request], window_us: u64) -> Option<Densest> {
    if requests.is_empty() {
        return None;
    }
    let mut order: Vec<usize> = (0..requests.len()).collect();
    order.sort_by_key(|&i| (requests[i].invoke_us, requests[i].id));
    let mut completions: Vec<u64> = requests.iter().map(|r| r.end_us()).collect();
    completions.sort_unstable();
    let mut tree = vec![0usize; completions.len() + 1];
    let mut best: Option<(usize, usize)> = None;
    for (rank, &i) in order.iter().enumerate().rev() {
        let done = completions.partition_point(|&c| c < requests[i].end_us());
        add(&mut tree, done);
        let end = requests[i].invoke_us.saturating_add(window_us);
        let inside = count_upto(&tree, completions.partition_point(|&c| c < end));
        // Backwards, so on a tie the earlier interval wins.
        if best.is_none_or(|(admitted, _)| inside >= admitted) {
            best = Some((inside, rank));
        }
    }
    let (admitted, rank) = best?;
    let first = order[rank];
    let end = requests[first].invoke_us.saturating_add(window_us);
    let last = order[rank..]
        .iter()
        .copied()
        .filter(|&j| requests[j].end_us() < end)
        .max_by_key(|&j| requests[j].end_us())
        .unwrap_or(first);
    Some(Densest { admitted, first, last })
}

fn add(tree: &mut [usize], position: usize) {
    let mut i = position + 1;
    while i < tree.len() {
        tree[i] += 1;
        i += i & i.wrapping_neg();
    }
}

/// How many added positions are < `upto`.
fn count_upto(tree: &[usize], upto: usize) -> usize {
    let mut i = upto;
    let mut total = 0;
    while i > 0 {
        total += tree[i];
        i -= i & i.wrapping_neg();
    }
    total
}

fn over_admission(identity: u32, requests: &[&Request], dense: Densest, bound: u64, window_ms: u64) -> Anomaly {
    let (first, last) = (requests[dense.first], requests[dense.last]);
    let span_us = last.end_us().saturating_sub(first.invoke_us);
    Anomaly {
        kind: "over-admission".into(),
        key: first.key_label(),
        requests: vec![first.id, last.id],
        seen: vec![
            format!(
                "{} admitted from request #{} to request #{}",
                dense.admitted, first.id, last.id
            ),
            format!("within {} (window {window_ms} ms)", ms(span_us)),
        ],
        t_us: first.invoke_us,
        because: format!(
            "identity {identity} was admitted {} times within {window_ms} ms, {:.1}× the bound of {bound}",
            dense.admitted,
            dense.admitted as f64 / bound as f64
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn req(id: u64, invoke_us: u64, complete_us: u64) -> Request {
        Request {
            id,
            identity: 0,
            ordinal: id + 1,
            harness_key: "rl:0".into(),
            keys: vec!["rl:0".into()],
            other_keys: vec![],
            phase: 0,
            instance: 0,
            invoke_us,
            complete_us: Some(complete_us),
            outcome: Some(crate::history::Outcome::Allowed),
            count: None,
            trips: vec![],
            error: None,
        }
    }

    /// The obvious quadratic version, to compare with.
    fn brute(requests: &[&Request], window_us: u64) -> usize {
        requests
            .iter()
            .map(|a| {
                let end = a.invoke_us + window_us;
                requests
                    .iter()
                    .filter(|b| b.invoke_us >= a.invoke_us && b.end_us() < end)
                    .count()
            })
            .max()
            .unwrap_or(0)
    }

    #[test]
    fn densest_matches_brute_force() {
        let mut seed = 12345u64;
        let mut next = || {
            seed = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            seed >> 33
        };
        for _ in 0..50 {
            let owned: Vec<Request> = (0..60)
                .map(|id| {
                    let invoke = next() % 5000;
                    req(id, invoke, invoke + next() % 700)
                })
                .collect();
            let refs: Vec<&Request> = owned.iter().collect();
            let fast = densest(&refs, 1000).unwrap();
            assert_eq!(fast.admitted, brute(&refs, 1000));
            let (first, last) = (refs[fast.first], refs[fast.last]);
            assert!(last.end_us() < first.invoke_us + 1000);
        }
    }
}
