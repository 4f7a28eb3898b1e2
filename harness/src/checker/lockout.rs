//! `no-lockout`: after a quiet period of at least one window, an identity is admitted again.
//!
//! A fixed-window key's TTL never exceeds the window, so once an identity has sent nothing
//! for a whole window (plus the declared TTL slack), its key must be gone and its next
//! request admitted. A rejection there is a lockout: the identity is refused for traffic
//! it did not send.

use std::collections::BTreeMap;

use super::{Anomaly, CheckInput, CheckResult, Verdict, ms};
use crate::history::{HistoryIndex, Outcome, Request};
use crate::scenario::Invariant;

/// Slack on "a whole window": expiry is exact to the millisecond, the harness's clock is not.
const QUIET_SLACK_US: u64 = 20_000;

pub fn no_lockout(input: &CheckInput<'_>) -> CheckResult {
    let quiet_us = (input.limit.window_ms + input.config.ttl_slack_ms) * 1000 + QUIET_SLACK_US;
    let rule = format!(
        "the first request after at least {} without requests from the same identity is admitted",
        ms(quiet_us)
    );
    let mut per_identity: BTreeMap<u32, Vec<&Request>> = BTreeMap::new();
    for r in &input.history.requests {
        per_identity.entry(r.identity).or_default().push(r);
    }
    let mut anomalies = Vec::new();
    let mut judged = 0usize;
    let mut undecided = Vec::new();
    for (identity, requests) in &per_identity {
        for (after_quiet, gap_us) in after_quiet_periods(requests, quiet_us) {
            match after_quiet.outcome {
                Some(Outcome::Allowed) => judged += 1,
                Some(Outcome::Rejected) => {
                    judged += 1;
                    anomalies.push(lockout(
                        input.history,
                        *identity,
                        requests,
                        after_quiet,
                        gap_us,
                        input.limit.window_ms,
                    ));
                }
                _ => undecided.push(after_quiet.id),
            }
        }
    }
    let otherwise = if judged == 0 && undecided.is_empty() {
        (
            Verdict::Unknown,
            format!(
                "no identity sent a request after a quiet period of {}: add a quiet phase followed by traffic",
                ms(quiet_us)
            ),
        )
    } else if !undecided.is_empty() && judged == 0 {
        (
            Verdict::Unknown,
            format!("the requests after quiet periods got no decision (requests {undecided:?})"),
        )
    } else {
        (
            Verdict::Valid,
            format!("all {judged} request(s) after a quiet period of a window were admitted"),
        )
    };
    CheckResult::from_anomalies(Invariant::NoLockout, anomalies, otherwise).with_rule(rule)
}

/// Requests sent at least `quiet_us` after every earlier request of the identity finished.
fn after_quiet_periods<'a>(requests: &[&'a Request], quiet_us: u64) -> Vec<(&'a Request, u64)> {
    let mut last_end: Option<u64> = None;
    let mut found = Vec::new();
    for &r in requests {
        if let Some(end) = last_end
            && end != u64::MAX
            && r.invoke_us >= end + quiet_us
        {
            found.push((r, r.invoke_us - end));
        }
        last_end = Some(last_end.map_or(r.end_us(), |e| e.max(r.end_us())));
    }
    found
}

fn lockout(
    history: &HistoryIndex,
    identity: u32,
    requests: &[&Request],
    first: &Request,
    gap_us: u64,
    window_ms: u64,
) -> Anomaly {
    let later: Vec<&&Request> = requests.iter().filter(|r| r.invoke_us >= first.invoke_us).collect();
    let rejected = later.iter().filter(|r| r.outcome == Some(Outcome::Rejected)).count();
    // The last sampled PTTL of the keys the rejected request worked on (a key without a TTL
    // first: that is the usual cause).
    let pttl = history.samples.iter().rev().find_map(|s| {
        let mine = s.keys.iter().filter(|k| first.touched(&k.key));
        mine.min_by_key(|k| (k.pttl_ms != -1, k.key.clone()))
            .map(|k| (k.key.clone(), k.pttl_ms))
    });
    let mut seen = vec![
        format!("quiet for {}", ms(gap_us)),
        format!(
            "rejected with count {}",
            first.count.map_or("?".into(), |c| c.to_string())
        ),
        format!("{rejected} of {} later request(s) rejected", later.len()),
    ];
    let mut because = format!(
        "identity {identity} was rejected after {} without requests, longer than its {window_ms} ms window",
        ms(gap_us)
    );
    if let Some((key, pttl)) = pttl {
        seen.push(format!("last sampled PTTL of {key} was {pttl}"));
        if pttl == -1 {
            because.push_str(&format!(": {key} has no TTL and will never expire"));
        }
    }
    Anomaly {
        kind: "lockout".into(),
        key: first.key_label(),
        requests: vec![first.id],
        seen,
        t_us: first.invoke_us,
        because,
    }
}
