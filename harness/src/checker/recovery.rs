//! `recovers-after-fault`: once the server faults are over (a restart, a pause, a script
//! flush, killed connections, a failover, a reshard), the limiter decides requests again.
//!
//! Judged per limiter instance on the requests it was sent after the last server fault was
//! over: when it was sent at least [`TAIL`] of them and the last [`TAIL`] all ended as
//! errors or unanswered, it never recovered — a script it does not reload (`NOSCRIPT`), a
//! connection left on a demoted node (`READONLY`), a connection it never reopens. A few
//! errors right after the fault, then decisions again, are a recovery. An instance that
//! recovered is judged per identity too: a fault may break some keys only (a reshard moves
//! one slot), and an identity whose own last [`TAIL`] requests all failed never recovered.

use std::collections::BTreeMap;

use super::{Anomaly, CheckInput, CheckResult, Verdict, ms};
use crate::history::{FaultRecord, HistoryIndex, Outcome, Request};
use crate::scenario::{FaultKind, Invariant};

/// How many of an instance's last requests must all have failed for it to count as never
/// having recovered.
pub const TAIL: usize = 5;

pub fn recovers_after_fault(input: &CheckInput<'_>) -> CheckResult {
    let h = input.history;
    let Some((fault, over_us)) = last_server_fault(h) else {
        return CheckResult::unknown(
            Invariant::RecoversAfterFault,
            "no server fault struck (server-restart, server-pause, script-flush, client-kill, failover, reshard): nothing to judge",
        );
    };
    let mut per_instance: BTreeMap<u32, Vec<&Request>> = BTreeMap::new();
    for r in h.requests.iter().filter(|r| r.invoke_us > over_us) {
        per_instance.entry(r.instance).or_default().push(r);
    }
    let mut judged = 0usize;
    let mut anomalies = Vec::new();
    for (instance, requests) in &per_instance {
        if requests.len() < TAIL {
            continue;
        }
        judged += 1;
        let tail = &requests[requests.len() - TAIL..];
        if tail.iter().all(|r| !decided(r)) {
            anomalies.push(never_recovered(*instance, None, requests, tail, fault, over_us));
        } else {
            // The instance decides again, but a fault may have broken some keys only (a
            // reshard moves one slot): each identity it was sent must recover too.
            anomalies.extend(identities_never_recovered(*instance, requests, fault, over_us));
        }
    }
    let otherwise = if judged == 0 {
        (
            Verdict::Unknown,
            format!(
                "no limiter instance was sent {TAIL} or more requests after the last server fault was over ({}): nothing to judge",
                ms(over_us)
            ),
        )
    } else {
        (
            Verdict::Valid,
            format!(
                "every limiter instance ({judged}) decided requests again after the last server fault ({}) was over",
                fault.kind
            ),
        )
    };
    CheckResult::from_anomalies(Invariant::RecoversAfterFault, anomalies, otherwise).with_rule(format!(
        "after the last server fault is over, no limiter instance's last {TAIL} requests, and no identity's last {TAIL} on an instance that recovered, all end as errors or unanswered"
    ))
}

/// The last server fault that struck, and when it was over (the server answered again).
fn last_server_fault(h: &HistoryIndex) -> Option<(&FaultRecord, u64)> {
    let fault = h
        .faults
        .iter()
        .filter(|f| is_server_fault(f.kind))
        .max_by_key(|f| f.t_us)?;
    let back_us = h
        .outages
        .iter()
        .filter(|o| o.fault == fault.fault)
        .map(|o| o.back_us)
        .max()
        .unwrap_or(fault.t_us);
    Some((fault, back_us.max(fault.t_us)))
}

fn is_server_fault(kind: FaultKind) -> bool {
    match kind {
        FaultKind::ServerRestart
        | FaultKind::ServerPause
        | FaultKind::ScriptFlush
        | FaultKind::ClientKill
        | FaultKind::Failover
        | FaultKind::Reshard
        | FaultKind::NodeFailover
        | FaultKind::NodePause => true,
        FaultKind::ExpireBetweenRoundTrips
        | FaultKind::StallBetweenRoundTrips
        | FaultKind::ClientDiesBetweenRoundTrips
        | FaultKind::MemoryPressure
        | FaultKind::DelayReply
        | FaultKind::DropReply
        | FaultKind::InjectError
        | FaultKind::ResetConnection
        | FaultKind::ClockSkew => false,
    }
}

fn decided(r: &Request) -> bool {
    matches!(r.outcome, Some(Outcome::Allowed | Outcome::Rejected))
}

/// The identities of a recovered instance whose own last [`TAIL`] requests all failed.
fn identities_never_recovered(instance: u32, requests: &[&Request], fault: &FaultRecord, over_us: u64) -> Vec<Anomaly> {
    let mut per_identity: BTreeMap<u32, Vec<&Request>> = BTreeMap::new();
    for r in requests {
        per_identity.entry(r.identity).or_default().push(r);
    }
    per_identity
        .iter()
        .filter(|(_, sent)| sent.len() >= TAIL && sent[sent.len() - TAIL..].iter().all(|r| !decided(r)))
        .map(|(identity, sent)| {
            never_recovered(
                instance,
                Some(*identity),
                sent,
                &sent[sent.len() - TAIL..],
                fault,
                over_us,
            )
        })
        .collect()
}

/// `identity`: an identity of an instance that recovered otherwise; `None`: the whole instance.
fn never_recovered(
    instance: u32,
    identity: Option<u32>,
    after: &[&Request],
    tail: &[&Request],
    fault: &FaultRecord,
    over_us: u64,
) -> Anomaly {
    let failed = after.iter().filter(|r| !decided(r)).count();
    let first = tail[0];
    let error = tail.iter().find_map(|r| r.error.as_deref()).unwrap_or("no answer");
    // (key, who was sent, who decided nothing): an instance's words as they always were.
    let (key, sent, whose) = match identity {
        None => (
            format!("instance {instance}"),
            format!("instance {instance}"),
            format!("limiter instance {instance}"),
        ),
        Some(id) => {
            let who = format!("identity {id} on limiter instance {instance}");
            (
                format!("instance {instance} identity {id}"),
                who.clone(),
                format!("{who} (which decided other identities' requests)"),
            )
        }
    };
    Anomaly {
        kind: "never-recovered".into(),
        key,
        requests: tail.iter().map(|r| r.id).collect(),
        seen: vec![
            format!(
                "fault {} ({}) struck at {} and was over at {}",
                fault.fault,
                fault.kind,
                ms(fault.t_us),
                ms(over_us)
            ),
            format!(
                "{sent} was sent {} request(s) after it; {failed} ended without a decision, the last {TAIL} among them (from request #{} at {}): {error}",
                after.len(),
                first.id,
                ms(first.invoke_us)
            ),
        ],
        t_us: first.invoke_us,
        because: format!(
            "{whose} still decided nothing {} after the {} was over: it never recovered",
            ms(tail[TAIL - 1].invoke_us.saturating_sub(over_us)),
            fault.kind
        ),
    }
}
