//! `no-leaked-keys`: once an identity goes quiet for a window, its key is gone.
//!
//! Judged at the final audit (after the last phase, nothing in flight): a limiter key whose
//! last request was answered longer ago than the key may live (the TTL bound plus the slack,
//! +20 ms) should have expired. One that is still there is leaked: without a TTL, or with
//! one that something keeps pushing back.

use super::unseen::keys_unseen;
use super::{Anomaly, CheckInput, CheckResult, Verdict, ms};
use crate::scenario::Invariant;

const SLACK_US: u64 = 20_000;

pub fn no_leaked_keys(input: &CheckInput<'_>) -> CheckResult {
    // Long: the cases that make it unknown (no quiet identity, no final audit, no key seen) are spelled out before the judgement.
    let history = input.history;
    let grace_us = input.ttl.bound_ms().saturating_mul(1000).saturating_add(SLACK_US);
    let rule = format!(
        "at the final audit, no limiter key whose identity's last request was answered more than {} earlier",
        ms(grace_us)
    );
    let Some(audit) = history.samples.iter().rev().find(|s| s.final_audit) else {
        return CheckResult::unknown(
            Invariant::NoLeakedKeys,
            "the final audit of the limiter's keys did not happen",
        )
        .with_rule(rule);
    };
    let mut anomalies = Vec::new();
    for ks in &audit.keys {
        let last = history
            .requests_on(&ks.key)
            .filter_map(|r| r.complete_us.map(|c| (c, r.id)))
            .max();
        let idle_us = match last {
            Some((answered, _)) => audit.t_start_us.saturating_sub(answered),
            None if history.planted.contains_key(&ks.key) => audit.t_start_us,
            None => continue,
        };
        if idle_us <= grace_us {
            continue;
        }
        anomalies.push(Anomaly {
            kind: "leaked-key".into(),
            key: ks.key.clone(),
            requests: last.map(|(_, id)| vec![id]).unwrap_or_default(),
            seen: vec![
                format!("PTTL {} at the final audit", ks.pttl_ms),
                format!("idle for {}", ms(idle_us)),
            ],
            t_us: audit.t_start_us,
            because: format!(
                "{} is still there {} after its last request (it may live {} ms){}",
                ks.key,
                ms(idle_us),
                input.ttl.bound_ms(),
                if ks.pttl_ms == -1 { ": it has no TTL" } else { "" }
            ),
        });
    }
    // Judged: the keys whose identity had been quiet for longer than a window at the audit.
    // With none, a leak could not have shown.
    let quiet = history
        .by_key
        .keys()
        .filter(|key| {
            history
                .requests_on(key)
                .filter_map(|r| r.complete_us)
                .max()
                .is_some_and(|answered| audit.t_start_us.saturating_sub(answered) > grace_us)
        })
        .count();
    let otherwise = if let Some(hint) = keys_unseen(input) {
        (Verdict::Unknown, hint)
    } else if quiet == 0 && anomalies.is_empty() {
        (
            Verdict::Unknown,
            format!(
                "no limiter key had been left alone for {} at the final audit: end the scenario with a quiet phase as long as a key may live",
                ms(grace_us)
            ),
        )
    } else {
        (
            Verdict::Valid,
            format!(
                "{} limiter key(s) at the final audit, none idle longer than {} ({quiet} key(s) of quiet identities judged)",
                audit.keys.len(),
                ms(grace_us)
            ),
        )
    };
    CheckResult::from_anomalies(Invariant::NoLeakedKeys, anomalies, otherwise).with_rule(rule)
}
