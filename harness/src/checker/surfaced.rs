//! `errors-surfaced`: an error the fault proxy injected reaches the limiter's caller.
//!
//! A request whose command was answered with an injected error (`OOM`, `NOSCRIPT`, …) must
//! end as an error (or indeterminate) — unless the limiter recovered on the wire (it sent
//! the struck command again for the request, e.g. EVALSHA after SCRIPT LOAD following
//! NOSCRIPT). Admitted or rejected with no further command means the error was swallowed:
//! a silent fail-open admits traffic the limiter never counted, a silent fail-closed
//! rejects traffic with no one told why.

use super::{Anomaly, CheckInput, CheckResult, Verdict};
use crate::history::{FaultRecord, Outcome, Request};
use crate::scenario::FaultKind;
use crate::scenario::Invariant;

pub fn errors_surfaced(input: &CheckInput<'_>) -> CheckResult {
    // Long: each injected error is matched to the request it struck, with its evidence built in place.
    let h = input.history;
    let injected: Vec<_> = h.faults.iter().filter(|f| f.kind == FaultKind::InjectError).collect();
    if injected.is_empty() {
        return CheckResult::unknown(
            Invariant::ErrorsSurfaced,
            "no error was injected (no inject-error fault struck): nothing to judge",
        );
    }
    let mut anomalies = Vec::new();
    let (mut surfaced, mut recovered, mut undecided, mut shared) = (0usize, 0usize, 0usize, 0usize);
    for fault in &injected {
        let Some(id) = fault.request else { continue };
        let Some(request) = h.request(id) else {
            undecided += 1;
            continue;
        };
        // Recovered: the request sent the struck command again (e.g. EVALSHA after a
        // SCRIPT LOAD that followed NOSCRIPT) and got its decision from that.
        let struck = fault.command.clone().unwrap_or_default();
        let sent_again = |r: &Request| {
            h.wire_of(r.id).any(|w| {
                w.t_us > fault.t_us
                    && w.commands
                        .iter()
                        .any(|c| c.split(' ').next().is_some_and(|n| n.eq_ignore_ascii_case(&struck)))
            })
        };
        // With other requests of the identity in flight, the proxy may have put the struck
        // command down to this one (the oldest) when another sent it: the error went to one
        // of them. Swallowed only if every one of them was decided with no error and sent
        // no further such command; otherwise it is not judged.
        let mut struck_by = h.in_flight(request.identity, fault.t_us);
        if !struck_by.iter().any(|r| r.id == id) {
            // The proxy put the command down to a request whose completion the history holds
            // a moment before the strike (recorded before the proxy forgot it, while the next
            // request already sent its command): the error went to it or to one in flight then.
            struck_by.push(request);
        }
        if struck_by.len() > 1 {
            if struck_by.iter().any(|r| !decided(r) || sent_again(r)) {
                shared += 1;
            } else {
                anomalies.push(swallowed(fault, request, &struck_by));
            }
            continue;
        }
        match request.outcome {
            Some(Outcome::Error | Outcome::Indeterminate) => surfaced += 1,
            None => undecided += 1,
            Some(_) if sent_again(request) => recovered += 1,
            Some(_) => anomalies.push(swallowed(fault, request, &struck_by)),
        }
    }
    let otherwise = if surfaced + recovered == 0 {
        (
            Verdict::Unknown,
            format!("no request struck by an injected error got a decision ({undecided} undecided)"),
        )
    } else {
        (
            Verdict::Valid,
            format!("{surfaced} injected error(s) reached the caller, {recovered} recovered from on the wire"),
        )
    };
    let otherwise = if shared > 0 {
        (
            otherwise.0,
            format!(
                "{}; {shared} not judged: struck while other requests of the identity were in flight, one of which got an error or sent the command again",
                otherwise.1
            ),
        )
    } else {
        otherwise
    };
    CheckResult::from_anomalies(Invariant::ErrorsSurfaced, anomalies, otherwise).with_rule(
        "a request answered with an injected error ends as an error, or the limiter sends the struck command again for it (a recovery such as EVALSHA after SCRIPT LOAD following NOSCRIPT)",
    )
}

/// Whether the request ended with a decision: admitted or rejected, not an error.
fn decided(r: &Request) -> bool {
    matches!(r.outcome, Some(Outcome::Allowed | Outcome::Rejected))
}

/// The anomaly of an injected error that no request it may have struck reported:
/// `struck_by` the requests of the identity in flight when it struck (`request`, the one the
/// proxy put it down to, among them).
fn swallowed(fault: &FaultRecord, request: &Request, struck_by: &[&Request]) -> Anomaly {
    let told = |r: &Request| if r.allowed() { "admitted" } else { "rejected" };
    let kind = if struck_by.iter().any(|r| r.allowed()) {
        "error-admitted"
    } else {
        "error-rejected"
    };
    let mut seen = vec![fault.effect.clone()];
    seen.extend(struck_by.iter().map(|r| {
        format!(
            "request #{} {} (count {}) with no error and no further command",
            r.id,
            told(r),
            r.count.map_or("none".into(), |c| c.to_string())
        )
    }));
    let because = if let [only] = struck_by {
        format!(
            "request #{} got an injected error from the server but its caller was told `{}`: the error was swallowed",
            only.id,
            told(only)
        )
    } else {
        let ids: Vec<String> = struck_by.iter().map(|r| format!("#{}", r.id)).collect();
        format!(
            "one of requests {} (in flight together) got an injected error from the server, and every one of them was decided with no error: the error was swallowed",
            ids.join(", ")
        )
    };
    Anomaly {
        kind: kind.into(),
        key: fault.key.clone().unwrap_or_else(|| request.key_label()),
        requests: struck_by.iter().map(|r| r.id).collect(),
        seen,
        t_us: fault.t_us,
        because,
    }
}
