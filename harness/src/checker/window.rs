//! Fixed-window rules that look inside one window of a key: no admission with a count
//! above the limit, and no more than the limit between two ends of the key.

use std::collections::BTreeMap;

use super::{Anomaly, ms};
use crate::history::{HistoryIndex, Request};

/// Notifications are seen a little after the fact: requests this close to a window's end
/// are not counted in either window.
const BOUNDARY_US: u64 = 50_000;

/// Fixed window: admissions whose own count says the window was full (a race between the
/// limiter's read and its write), one anomaly per key.
pub(super) fn over_count(per_identity: &BTreeMap<u32, Vec<&Request>>, max: u64) -> Vec<Anomaly> {
    per_identity
        .values()
        .filter_map(|requests| {
            let over: Vec<&&Request> =
                requests.iter().filter(|r| r.allowed() && r.count.is_some_and(|c| c > max as i64)).collect();
            let first = over.first()?;
            let highest = over.iter().filter_map(|r| r.count).max().unwrap_or_default();
            Some(Anomaly {
                kind: "admitted-over-count".into(),
                key: first.key_label(),
                requests: over.iter().take(5).map(|r| r.id).collect(),
                seen: vec![format!("{} admission(s) with a count above {max}, the highest {highest}", over.len())],
                t_us: first.invoke_us,
                because: format!(
                    "request #{} was admitted with count {} > requests_max {max}: the limiter's own counter said the window was full (its read and its write raced)",
                    first.id,
                    first.count.unwrap_or_default()
                ),
            })
        })
        .collect()
}

/// Why a key's window admitted more than it should: a failover in between lost the
/// earlier admissions' writes, or concurrent requests saw the same count.
fn why_over(history: &HistoryIndex, first: &Request, last: &Request) -> String {
    match history
        .outages
        .iter()
        .find(|o| o.fails_over_between(first.invoke_us, last.end_us()))
    {
        Some(o) => format!(
            "a failover in between (fault {}): the promoted replica had not received the earlier admissions",
            o.fault
        ),
        None => "lost updates: concurrent requests saw the same count".to_owned(),
    }
}

/// Admissions between two ends (expired, evicted, del) of each limiter key, among the
/// requests that worked on that key alone, each at most `max`. A key per window needs
/// nothing more: the next window's requests work on another key.
pub(super) fn over_window(history: &HistoryIndex, max: u64) -> Vec<Anomaly> {
    let mut anomalies = Vec::new();
    for key in history.by_key.keys() {
        let key = key.as_str();
        let requests: Vec<&Request> = history.requests_on(key).filter(|r| r.sole_key() == Some(key)).collect();
        let ends: Vec<u64> = history
            .keyspace
            .get(key)
            .into_iter()
            .flatten()
            .filter(|(_, e)| matches!(e.as_str(), "expired" | "evicted" | "del"))
            .map(|(t, _)| *t)
            .collect();
        let mut from = 0u64;
        for to in ends.iter().copied().chain(std::iter::once(u64::MAX)) {
            let between: Vec<&Request> = requests
                .iter()
                .copied()
                .filter(|r| from == 0 || r.invoke_us > from + BOUNDARY_US)
                .filter(|r| to == u64::MAX || r.end_us() + BOUNDARY_US < to)
                .collect();
            // A server fault in between (a failover, a restart) rolls counters back for real:
            // its drops stay inside the window.
            let faulted = history.outages.iter().any(|o| o.start_us <= to && o.end_us >= from);
            let counters = if faulted {
                vec![between]
            } else {
                split_at_drops(&between)
            };
            for counter in counters {
                let inside: Vec<&Request> = counter.iter().copied().filter(|r| r.allowed()).collect();
                if inside.len() as u64 <= max {
                    continue;
                }
                let (first, last) = (inside[0], inside[inside.len() - 1]);
                anomalies.push(Anomaly {
                    kind: "over-admission-in-window".into(),
                    key: key.to_owned(),
                    requests: vec![first.id, last.id],
                    seen: vec![format!(
                        "{} admitted from {} to {} with no expiry of {key} in between",
                        inside.len(),
                        ms(first.invoke_us),
                        ms(last.end_us())
                    )],
                    t_us: first.invoke_us,
                    because: format!(
                        "{} requests were admitted within one window of {key}, more than requests_max {max} ({})",
                        inside.len(),
                        why_over(history, first, last)
                    ),
                });
            }
            from = to;
        }
    }
    anomalies
}

/// The requests between two notified ends of a key, cut where a counter began anew: a request
/// that counted lower than one that had finished before it was sent. An expiry a loaded
/// machine notified late must not join two counters into one window.
///
/// One sweep in invocation order (`requests` come sorted so): the current counter's requests
/// wait in a heap by completion until one is sent after they finished, then only the highest
/// count among the finished is kept — O(n log n) for a burst of 200,000 on one key.
fn split_at_drops<'a>(requests: &[&'a Request]) -> Vec<Vec<&'a Request>> {
    use std::cmp::Reverse;
    use std::collections::BinaryHeap;
    let mut counters: Vec<Vec<&Request>> = vec![Vec::new()];
    // The current counter's counted requests not yet finished before the sweep's point, and
    // the highest count among those that have.
    let mut pending: BinaryHeap<Reverse<(u64, i64)>> = BinaryHeap::new();
    let mut finished_max: Option<i64> = None;
    for &r in requests {
        while let Some(&Reverse((end_us, count))) = pending.peek() {
            if end_us >= r.invoke_us {
                break;
            }
            pending.pop();
            finished_max = finished_max.max(Some(count));
        }
        let dropped = r.count.is_some_and(|n| finished_max.is_some_and(|m| m > n));
        if dropped {
            counters.push(vec![r]);
            pending.clear();
            finished_max = None;
        } else {
            counters.last_mut().expect("never empty").push(r);
        }
        if let Some(n) = r.count {
            pending.push(Reverse((r.end_us(), n)));
        }
    }
    counters
}

#[cfg(test)]
mod tests {
    use super::*;

    fn req(id: u64, invoke_us: u64, complete_us: u64, count: Option<i64>) -> Request {
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
            count,
            trips: vec![],
            error: None,
        }
    }

    /// The rule as first written: a request starts a new counter when it counted lower than
    /// one of the current counter's requests that had finished before it was sent.
    fn brute(requests: &[&Request]) -> Vec<Vec<u64>> {
        let mut counters: Vec<Vec<&Request>> = vec![Vec::new()];
        for &r in requests {
            let current = counters.last_mut().unwrap();
            let dropped = r.count.is_some_and(|n| {
                current
                    .iter()
                    .any(|q| q.end_us() < r.invoke_us && q.count.is_some_and(|m| m > n))
            });
            if dropped {
                counters.push(vec![r]);
            } else {
                current.push(r);
            }
        }
        counters.iter().map(|c| c.iter().map(|r| r.id).collect()).collect()
    }

    #[test]
    fn the_sweep_splits_as_the_rule_says() {
        let mut seed = 7u64;
        let mut next = |n: u64| {
            seed = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            (seed >> 33) % n
        };
        for _ in 0..300 {
            let len = next(40) as usize;
            let mut t = 0;
            let requests: Vec<Request> = (0..len as u64)
                .map(|id| {
                    t += next(5);
                    let count = (next(6) > 0).then(|| next(8) as i64);
                    req(id, t, t + next(12), count)
                })
                .collect();
            let refs: Vec<&Request> = requests.iter().collect();
            let swept: Vec<Vec<u64>> = split_at_drops(&refs)
                .iter()
                .map(|c| c.iter().map(|r| r.id).collect())
                .collect();
            assert_eq!(swept, brute(&refs));
        }
    }

    #[test]
    fn a_burst_of_200000_on_one_key_is_split_in_one_sweep() {
        let requests: Vec<Request> = (0..200_000u64)
            .map(|i| req(i, i * 5, i * 5 + 400, Some((i % 50_000) as i64 + 1)))
            .collect();
        let refs: Vec<&Request> = requests.iter().collect();
        let counters = split_at_drops(&refs);
        assert_eq!(counters.len(), 4, "the count dropped three times");
        assert_eq!(counters.iter().map(Vec::len).sum::<usize>(), 200_000);
    }
}
