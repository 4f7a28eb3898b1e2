//! `admits-up-to-limit`: while an identity sends above its limit, it is still admitted at
//! least the limit per window.
//!
//! Each identity's requests split into busy periods (no gap of a window or more). Each
//! busy period is cut into consecutive spans of two windows from its first request; a
//! span counts when the identity sent at least 2 × requests_max requests in it. A correct
//! limiter of any of the algorithms here admits at least requests_max in such a span (a
//! fixed window that began before the span may have spent its budget, but the next one
//! starts inside it), so fewer than requests_max − tolerance admissions (tolerance: 10 %
//! of the limit, at least 1) is a violation. It catches counters that never expire and
//! windows that traffic keeps extending, before any quiet period. A span whose requests all
//! ended in errors, with no fault struck by then and no fatal problem or too old a server to
//! explain them, is a violation too (`never-decided`: a
//! limiter whose commands the server refuses, such as CROSSSLOT on a cluster); errors after
//! a fault, and lost replies, leave a span unjudged — but a CROSSSLOT refusal, which the
//! command's keys decide, is explained by no fault except an injected error.

use std::collections::BTreeMap;

use super::{Anomaly, CheckInput, CheckResult, Verdict, ms};
use crate::history::{FaultRecord, HistoryIndex, Outcome, ProblemSource, Request};
use crate::scenario::{FaultKind, Invariant};

pub fn admits_up_to_limit(input: &CheckInput<'_>) -> CheckResult {
    let max = input.limit.requests_max;
    let tolerance = (max / 10).max(1);
    let need = max.saturating_sub(tolerance);
    let span_us = 2 * input.limit.window_ms * 1000;
    let rule = format!(
        "in every span of 2 × {} ms in which an identity sent at least {} requests, at least {need} admitted (requests_max {max} − tolerance {tolerance})",
        input.limit.window_ms,
        2 * max
    );
    let mut per_identity: BTreeMap<u32, Vec<&Request>> = BTreeMap::new();
    for r in &input.history.requests {
        per_identity.entry(r.identity).or_default().push(r);
    }
    let mut judged = 0usize;
    let mut undecided = 0usize;
    let mut anomalies = Vec::new();
    for (identity, requests) in &per_identity {
        for span in spans(requests, input.limit.window_ms * 1000, span_us) {
            if (span.len() as u64) < 2 * max {
                continue;
            }
            let admitted = span.iter().filter(|r| r.allowed()).count() as u64;
            let unanswered = span
                .iter()
                .filter(|r| !matches!(r.outcome, Some(Outcome::Allowed | Outcome::Rejected)))
                .count() as u64;
            if admitted >= need {
                judged += 1;
            } else if let Some(anomaly) = never_decided(input.history, *identity, &span) {
                judged += 1;
                anomalies.push(anomaly);
            } else if admitted + unanswered >= need {
                undecided += 1;
            } else {
                judged += 1;
                anomalies.push(starved(input.history, *identity, &span, admitted, need, span_us));
            }
        }
    }
    let otherwise = if judged == 0 && undecided == 0 {
        (
            Verdict::Unknown,
            format!(
                "no identity sent {} or more requests over two windows: nothing to judge",
                2 * max
            ),
        )
    } else if undecided > 0 {
        (
            Verdict::Unknown,
            format!("{undecided} span(s) reach {need} admissions only if their unanswered requests were admitted"),
        )
    } else {
        (
            Verdict::Valid,
            format!("every identity above its limit was admitted at least {need} per two windows ({judged} span(s))"),
        )
    };
    CheckResult::from_anomalies(Invariant::AdmitsUpToLimit, anomalies, otherwise).with_rule(rule)
}

/// A span in which the limiter decided nothing — every request ended in an error, with no
/// fault struck by then to explain it (a refused command: `CROSSSLOT` from a cluster, a
/// script that does not run) — breaks a promise whichever way its caller takes the error:
/// failing closed, the identity is admitted nothing; failing open, every request, more than
/// any algorithm's bound. Lost replies (indeterminate) stay unjudged.
fn never_decided(history: &HistoryIndex, identity: u32, span: &[&Request]) -> Option<Anomaly> {
    let (first, last) = (span[0], span[span.len() - 1]);
    let errors = span.iter().all(|r| r.outcome == Some(Outcome::Error));
    let end_us = last.end_us();
    // The run's own explanations of the errors: a fatal problem (an adapter declared dead or
    // breaking the protocol) makes the run unknown; a server too old for the limiter is the
    // deployment's, not the limiter's.
    let explained = history
        .problems
        .iter()
        .any(|p| p.fatal || p.source == ProblemSource::ServerVersion);
    let keyed_refusals = errors
        && span
            .iter()
            .all(|r| r.error.as_deref().is_some_and(refused_for_its_keys));
    // A fault struck by then explains the errors, unless they are refusals of the command's
    // keys that only an injected error makes.
    let fault_explains = |f: &FaultRecord| f.t_us <= end_us && (f.kind == FaultKind::InjectError || !keyed_refusals);
    if !errors || explained || history.faults.iter().any(fault_explains) {
        return None;
    }
    let mut messages: BTreeMap<&str, usize> = BTreeMap::new();
    for r in span {
        *messages.entry(r.error.as_deref().unwrap_or("an error")).or_default() += 1;
    }
    let (message, times) = messages.iter().max_by_key(|(m, n)| (**n, std::cmp::Reverse(**m)))?;
    Some(Anomaly {
        kind: "never-decided".into(),
        key: first.key_label(),
        requests: vec![first.id, last.id],
        seen: vec![
            format!(
                "{} requests sent from {} to {}, every one ended in an error, {}",
                span.len(),
                ms(first.invoke_us),
                ms(last.invoke_us),
                if history.faults.iter().any(|f| f.t_us <= end_us) {
                    "a refusal its keys decide, which no fault makes but an injected error"
                } else {
                    "no fault struck"
                }
            ),
            format!("{times} of them: {message}"),
        ],
        t_us: first.invoke_us,
        because: format!(
            "identity {identity} sent {} requests over two windows and the limiter decided none (`{message}`): failing closed its caller admits nothing, failing open it admits all {}, beyond the bound",
            span.len(),
            span.len()
        ),
    })
}

/// A refusal the command's keys decide, whatever the server's state: `CROSSSLOT` (keys of
/// several hash slots in one command), as redis-rs words it (`CrossSlot: …`) or as the server
/// does. No fault but an injected error makes one, so a reshard, a failover or a pause struck
/// by then does not explain it.
fn refused_for_its_keys(error: &str) -> bool {
    error
        .trim_start_matches('-')
        .get(..9)
        .is_some_and(|head| head.eq_ignore_ascii_case("crossslot"))
}

/// Consecutive full spans of `span_us` from the start of each busy period.
fn spans<'a>(requests: &[&'a Request], gap_us: u64, span_us: u64) -> Vec<Vec<&'a Request>> {
    let mut periods: Vec<Vec<&Request>> = Vec::new();
    for &r in requests {
        match periods.last_mut() {
            Some(period) if r.invoke_us < period.last().expect("non-empty").invoke_us + gap_us => period.push(r),
            _ => periods.push(vec![r]),
        }
    }
    let mut spans = Vec::new();
    for period in periods {
        let start = period[0].invoke_us;
        let end = period.last().expect("non-empty").invoke_us;
        let mut from = start;
        while from + span_us <= end {
            spans.push(
                period
                    .iter()
                    .copied()
                    .filter(|r| r.invoke_us >= from && r.invoke_us < from + span_us)
                    .collect(),
            );
            from += span_us;
        }
    }
    spans
}

fn starved(
    history: &HistoryIndex,
    identity: u32,
    span: &[&Request],
    admitted: u64,
    need: u64,
    span_us: u64,
) -> Anomaly {
    // Long: one walk over the quiet periods, each reason a period cannot count named where it is decided.
    let (first, last) = (span[0], span[span.len() - 1]);
    let end_us = first.invoke_us + span_us;
    let mut keys: Vec<&str> = Vec::new();
    for r in span {
        for k in &r.keys {
            if !keys.contains(&k.as_str()) {
                keys.push(k);
            }
        }
    }
    let expiries: usize = keys
        .iter()
        .map(|key| {
            history
                .keyspace_between(key, first.invoke_us, end_us)
                .filter(|(_, e)| e == "expired" || e == "evicted" || e == "del")
                .count()
        })
        .sum();
    // The last sampled PTTL in the span of the keys it worked on (a key without a TTL first).
    let pttl = history
        .samples
        .iter()
        .filter(|s| s.t_start_us >= first.invoke_us && s.t_end_us <= end_us)
        .filter_map(|s| {
            s.keys
                .iter()
                .filter(|k| keys.contains(&k.key.as_str()))
                .min_by_key(|k| (k.pttl_ms != -1, k.key.clone()))
                .map(|k| (k.key.clone(), k.pttl_ms))
        })
        .next_back();
    let key = first.key_label();
    let named = if keys.is_empty() { key.clone() } else { keys.join(", ") };
    let why = match (&pttl, expiries) {
        (Some((k, -1)), _) => format!("{k} has no TTL: it never expires"),
        (_, 0) => format!("{named} never expired during the span: the window keeps being extended or never ends"),
        _ => format!("{named} expired {expiries} time(s) but the identity was still refused"),
    };
    let mut seen = vec![
        format!(
            "{} requests sent, {admitted} admitted, from {} to {}",
            span.len(),
            ms(first.invoke_us),
            ms(last.invoke_us)
        ),
        format!("{expiries} expiry/eviction notification(s) for {named} in the span"),
    ];
    if let Some((_, p)) = pttl {
        seen.push(format!("last sampled PTTL in the span: {p}"));
    }
    Anomaly {
        kind: "starved".into(),
        key,
        requests: vec![first.id, last.id],
        seen,
        t_us: first.invoke_us,
        because: format!(
            "identity {identity} sent {} requests over two windows but was admitted {admitted} times, fewer than {need}: {why}",
            span.len()
        ),
    }
}
