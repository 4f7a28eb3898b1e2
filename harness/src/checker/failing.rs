//! `fails-as-declared`: while the server cannot answer, a request ends as the scenario
//! declares (`[check] on_server_error`): an error the caller is told of, a rejection
//! (fail-closed) or an admission (fail-open).
//!
//! Judged on the requests invoked and completed within one outage (a pause, a restart):
//! they cannot have had an answer from the server, so whatever they ended as, the limiter
//! decided it without the server. Requests that straddle an outage's end may have been
//! answered once it was over, and are not judged.

use super::{Anomaly, CheckInput, CheckResult, Verdict, ms};
use crate::history::{Outage, Outcome, Request};
use crate::scenario::{Invariant, ServerErrorPolicy};

pub fn fails_as_declared(input: &CheckInput<'_>) -> CheckResult {
    let h = input.history;
    let policy = input.config.on_server_error;
    // A failover's outage (a hold or a write pause before the promotion) is a time the
    // primary still answered: not judged here.
    let outages: Vec<&Outage> = h.outages.iter().filter(|o| !o.kind.fails_over()).collect();
    if outages.is_empty() {
        return CheckResult::unknown(
            Invariant::FailsAsDeclared,
            "no server fault left the server unable to answer (server-pause, server-restart): nothing to judge",
        );
    }
    let mut anomalies = Vec::new();
    let mut judged = 0usize;
    for outage in &outages {
        for request in h.requests.iter().filter(|r| inside(r, outage)) {
            let Some(outcome) = request.outcome else { continue };
            judged += 1;
            if !as_declared(policy, outcome) {
                anomalies.push(anomaly(request, outcome, outage, policy));
            }
        }
    }
    let otherwise = if judged == 0 {
        (
            Verdict::Unknown,
            format!(
                "no request was sent and ended while the server could not answer ({} outage(s)): nothing to judge",
                outages.len()
            ),
        )
    } else {
        (
            Verdict::Valid,
            format!(
                "all {judged} request(s) sent and ended while the server could not answer ended as declared ({})",
                expected(policy)
            ),
        )
    };
    CheckResult::from_anomalies(Invariant::FailsAsDeclared, anomalies, otherwise).with_rule(format!(
        "a request invoked and completed while the server could not answer (from the fault's strike until the server answered again) ends {} (`[check] on_server_error = \"{}\"`)",
        expected(policy),
        policy.name()
    ))
}

fn inside(request: &Request, outage: &Outage) -> bool {
    request.invoke_us >= outage.start_us && request.complete_us.is_some_and(|c| c <= outage.end_us)
}

fn as_declared(policy: ServerErrorPolicy, outcome: Outcome) -> bool {
    match policy {
        ServerErrorPolicy::Error => matches!(outcome, Outcome::Error | Outcome::Indeterminate),
        ServerErrorPolicy::FailClosed => outcome == Outcome::Rejected,
        ServerErrorPolicy::FailOpen => outcome == Outcome::Allowed,
    }
}

fn expected(policy: ServerErrorPolicy) -> &'static str {
    match policy {
        ServerErrorPolicy::Error => "as an error its caller is told of",
        ServerErrorPolicy::FailClosed => "rejected (fail-closed)",
        ServerErrorPolicy::FailOpen => "admitted (fail-open)",
    }
}

fn anomaly(request: &Request, outcome: Outcome, outage: &Outage, policy: ServerErrorPolicy) -> Anomaly {
    let (kind, what) = match outcome {
        Outcome::Allowed => ("failed-open", "admitted"),
        Outcome::Rejected => ("failed-closed", "rejected"),
        Outcome::Error | Outcome::Indeterminate => ("failed-with-error", "ended as an error"),
    };
    let id = request.id;
    Anomaly {
        kind: kind.into(),
        key: request.key_label(),
        requests: vec![id],
        seen: vec![
            format!(
                "fault {} ({}): the server could not answer for {}",
                outage.fault,
                outage.kind,
                ms(outage.end_us.saturating_sub(outage.start_us))
            ),
            format!(
                "request #{id} {what} {} after it was sent, before the server answered again",
                ms(request
                    .complete_us
                    .unwrap_or(request.invoke_us)
                    .saturating_sub(request.invoke_us))
            ),
        ],
        t_us: request.invoke_us,
        because: format!(
            "request #{id} was {what} while the server could not answer ({}), but the scenario declares it ends {}",
            outage.kind,
            expected(policy)
        ),
    }
}
