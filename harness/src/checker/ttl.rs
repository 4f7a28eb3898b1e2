//! `ttl-present` and `ttl-bounded`: what the observer saw of the keys' expiries.

use crate::scenario::FaultKind;
use std::collections::BTreeMap;

use super::unseen::{keys_unseen, unobserved_keys_note};
use super::{Anomaly, CheckInput, CheckResult, Verdict, creator_before};
use crate::history::{HistoryIndex, Sample};
use crate::scenario::Invariant;

/// No limiter key exists without an expiry. A PTTL of -1 seen while a request on that key
/// was in flight is excused (e.g. between INCR and EXPIRE); one seen with nothing in
/// flight, or by the final audit, is a key that will never expire.
pub fn ttl_present(input: &CheckInput<'_>) -> CheckResult {
    let history = input.history;
    let mut first_seen: BTreeMap<&str, (&Sample, Option<String>, usize)> = BTreeMap::new();
    let mut excused = 0usize;
    let mut untouched = 0usize;
    // Planted keys still without a TTL at the final audit that the limiter never had its
    // chance to heal: nothing can be said of them.
    let mut never_due: Vec<&str> = Vec::new();
    for sample in &history.samples {
        for ks in sample.keys.iter().filter(|k| k.pttl_ms == -1) {
            if planted_not_yet_due(history, &ks.key, sample, input.limit.window_ms) {
                untouched += 1;
                if sample.final_audit {
                    never_due.push(&ks.key);
                }
                continue;
            }
            if !sample.final_audit && in_flight(history, &ks.key, sample) {
                excused += 1;
                continue;
            }
            first_seen
                .entry(ks.key.as_str())
                .and_modify(|e| e.2 += 1)
                .or_insert((sample, ks.value.clone(), 1));
        }
    }
    let anomalies = first_seen
        .into_iter()
        .map(|(key, (sample, value, times))| immortal(history, key, sample, value, times))
        .collect();
    // An immortal key seen is a violation even if the run could not finish observing.
    let otherwise = match blind(input) {
        Some(why) => (Verdict::Unknown, why),
        None if !never_due.is_empty() => (
            Verdict::Unknown,
            format!(
                "planted key(s) {} still have no TTL, but the limiter was never asked to decide on them a window after its first answer: send traffic to them for longer",
                never_due.join(", ")
            ),
        ),
        None => (
            Verdict::Valid,
            format!(
                "every sampled key had an expiry ({} keys at the final audit)",
                audited_keys(history)
            ),
        ),
    };
    let mut result = CheckResult::from_anomalies(Invariant::TtlPresent, anomalies, otherwise);
    if excused > 0 {
        result = result.with_note(format!(
            "{excused} PTTL -1 observation(s) excused: a request on that key was in flight (e.g. between INCR and EXPIRE)"
        ));
    }
    if untouched > 0 {
        result = result.with_note(format!(
            "{untouched} PTTL -1 observation(s) of keys the scenario planted without a TTL, before the limiter answered its first request on them a window after its first answer (its time to heal them)"
        ));
    }
    with_unobserved_note(result, input)
}

fn with_unobserved_note(result: CheckResult, input: &CheckInput<'_>) -> CheckResult {
    match unobserved_keys_note(input) {
        Some(note) => result.with_note(note),
        None => result,
    }
}

/// A key the scenario planted without a TTL is the limiter's to repair: by the end of its
/// first request on the key that starts a window or more after its first answer there
/// (a limiter that sets the TTL only when it admits may have to wait out the planted
/// state). Until then a -1 on it is the scenario's doing.
fn planted_not_yet_due(history: &HistoryIndex, key: &str, sample: &Sample, window_ms: u64) -> bool {
    if !history.planted.contains_key(key) {
        return false;
    }
    let Some(first) = history.first_answer_on(key) else {
        return true;
    };
    let due = history
        .requests_on(key)
        .find(|r| r.invoke_us >= first + window_ms * 1000)
        .map(|r| r.end_us());
    due.is_none_or(|due| sample.t_start_us < due)
}

fn immortal(history: &HistoryIndex, key: &str, sample: &Sample, value: Option<String>, times: usize) -> Anomaly {
    let creator = creator_before(history, key, sample.t_start_us);
    let fault = history.faults.iter().rfind(|f| {
        f.key.as_deref() == Some(key) && f.t_us <= sample.t_start_us && f.kind == FaultKind::ExpireBetweenRoundTrips
    });
    let mut because = format!("{key} exists with no expiry (PTTL -1): it will never expire");
    if let Some(c) = creator {
        because.push_str(&format!(
            "; request #{} recreated it with round trips [{}] and count 1",
            c.id,
            c.trips.join(" | ")
        ));
    }
    if let Some(f) = fault {
        because.push_str(&format!(
            "; the nemesis expired it just before (request #{})",
            f.request.unwrap_or_default()
        ));
    }
    let mut seen = vec![format!(
        "PTTL -1 ({times} sample(s){})",
        if sample.final_audit { ", final audit" } else { "" }
    )];
    if let Some(v) = value {
        seen.push(format!("value {v}"));
    }
    Anomaly {
        kind: "immortal-key".into(),
        key: key.to_owned(),
        requests: creator.map(|c| vec![c.id]).unwrap_or_default(),
        seen,
        t_us: sample.t_start_us,
        because,
    }
}

/// Whether a request on `key` overlapped the sample.
fn in_flight(history: &HistoryIndex, key: &str, sample: &Sample) -> bool {
    history
        .requests_on(key)
        .any(|r| r.invoke_us <= sample.t_end_us && r.end_us() >= sample.t_start_us)
}

fn audited_keys(history: &HistoryIndex) -> usize {
    history
        .samples
        .iter()
        .filter(|s| s.final_audit)
        .map(|s| s.keys.len())
        .next_back()
        .unwrap_or(0)
}

/// Why the samples cannot support a Valid verdict, if they cannot: no sample, no final
/// audit, or no limiter key in any sample (nothing was observed to have a TTL or not).
fn blind(input: &CheckInput<'_>) -> Option<String> {
    let history = input.history;
    if let Some(hint) = keys_unseen(input) {
        return Some(hint);
    }
    if history.samples.is_empty() {
        return Some("the observer took no sample of the limiter's keys".into());
    }
    if !history.samples.iter().any(|s| s.final_audit) {
        return Some("the final audit of the limiter's keys did not happen".into());
    }
    if history.samples.iter().all(|s| s.keys.is_empty()) {
        return Some(format!(
            "none of the {} sample(s) found a key matching {}: no key was observed with or without a TTL (keys that live shorter than the sample interval of {} ms are missed; lower [check] sample_interval_ms)",
            history.samples.len(),
            input.layout.describe(),
            input.config.sample_interval_ms
        ));
    }
    None
}

/// A hint when a TTL is about a thousand times the window: the limiter took the window the
/// harness passes in milliseconds for seconds (`EXPIRE key window_ms`).
fn seconds_for_ms(pttl_ms: i64, window_ms: u64) -> String {
    let ratio = pttl_ms as f64 / window_ms.max(1) as f64;
    if (500.0..=1100.0).contains(&ratio) {
        format!(
            " — about {ratio:.0} × the {window_ms} ms window: the limiter probably takes seconds where the harness passes milliseconds (pass `{{window_s}}` in a Lua sidecar's args, or LIMIT_WINDOW_MS / 1000 in an adapter; a TTL meant to be this long is declared with `ttl_max_ms`)"
        )
    } else {
        String::new()
    }
}

/// No limiter key's TTL exceeds its bound (see [`super::TtlBound`]) plus the declared slack.
pub fn ttl_bounded(input: &CheckInput<'_>) -> CheckResult {
    let history = input.history;
    let bound_ms = input.ttl.bound_ms();
    let rule = input.ttl.rule();
    let mut worst: BTreeMap<&str, (i64, &Sample, usize)> = BTreeMap::new();
    let mut max_seen = -1i64;
    for sample in &history.samples {
        for ks in &sample.keys {
            max_seen = max_seen.max(ks.pttl_ms);
            if ks.pttl_ms > bound_ms as i64 {
                let entry = worst.entry(ks.key.as_str()).or_insert((ks.pttl_ms, sample, 0));
                entry.2 += 1;
                if ks.pttl_ms > entry.0 {
                    entry.0 = ks.pttl_ms;
                    entry.1 = sample;
                }
            }
        }
    }
    let window_ms = input.limit.window_ms;
    let because = |key: &str, pttl: i64| {
        let mut text = if input.ttl.default {
            format!(
                "{key} had PTTL {pttl} ms, longer than the {bound_ms} ms the window allows: the window is being extended"
            )
        } else {
            format!(
                "{key} had PTTL {pttl} ms, longer than its bound of {bound_ms} ms ({}): the key outlives what the limiter needs",
                input.ttl.from
            )
        };
        text.push_str(&seconds_for_ms(pttl, window_ms));
        text
    };
    let anomalies = worst
        .into_iter()
        .map(|(key, (pttl, sample, times))| Anomaly {
            kind: "ttl-above-window".into(),
            key: key.to_owned(),
            requests: creator_before(history, key, sample.t_start_us)
                .map(|c| vec![c.id])
                .unwrap_or_default(),
            seen: vec![format!("PTTL {pttl} ms (above the bound in {times} sample(s))")],
            t_us: sample.t_start_us,
            because: because(key, pttl),
        })
        .collect();
    let otherwise = match blind(input) {
        Some(why) => (Verdict::Unknown, why),
        None if max_seen < 0 => (
            Verdict::Unknown,
            "no sampled limiter key had a TTL (every one was at PTTL -1): there was no TTL to bound".to_owned(),
        ),
        None => (
            Verdict::Valid,
            format!(
                "every sampled TTL was within {bound_ms} ms (longest {max_seen} ms; bound: {})",
                input.ttl.from
            ),
        ),
    };
    let result = CheckResult::from_anomalies(Invariant::TtlBounded, anomalies, otherwise).with_rule(rule);
    with_unobserved_note(result, input)
}
