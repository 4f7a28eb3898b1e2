//! `errors-surfaced`: an error the fault proxy injected reaches the limiter's caller.
//!
//! A request whose command was answered with an injected error (`OOM`, `NOSCRIPT`, …) must
//! end as an error (or indeterminate) — unless the limiter recovered on the wire (it sent
//! the struck command again for the request, e.g. EVALSHA after SCRIPT LOAD following
//! NOSCRIPT). Admitted or rejected with no further command means the error was swallowed:
//! a silent fail-open admits traffic the limiter never counted, a silent fail-closed
//! rejects traffic with no one told why.

use super::{Anomaly, CheckInput, CheckResult, Verdict};
use crate::history::Outcome;
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
    let (mut surfaced, mut recovered, mut undecided) = (0usize, 0usize, 0usize);
    for fault in &injected {
        let Some(id) = fault.request else { continue };
        let Some(request) = h.requests.iter().find(|r| r.id == id) else {
            undecided += 1;
            continue;
        };
        // Recovered: the request sent the struck command again (e.g. EVALSHA after a
        // SCRIPT LOAD that followed NOSCRIPT) and got its decision from that.
        let struck = fault.command.clone().unwrap_or_default();
        let later_trips = h
            .wire
            .iter()
            .filter(|w| w.request == Some(id) && w.t_us > fault.t_us)
            .filter(|w| {
                w.commands
                    .iter()
                    .any(|c| c.split(' ').next().is_some_and(|n| n.eq_ignore_ascii_case(&struck)))
            })
            .count();
        match request.outcome {
            Some(Outcome::Error | Outcome::Indeterminate) => surfaced += 1,
            None => undecided += 1,
            Some(_) if later_trips > 0 => recovered += 1,
            Some(outcome) => {
                let (kind, what) = if outcome == Outcome::Allowed {
                    ("error-admitted", "admitted")
                } else {
                    ("error-rejected", "rejected")
                };
                anomalies.push(Anomaly {
                    kind: kind.into(),
                    key: fault.key.clone().unwrap_or_else(|| request.key_label()),
                    requests: vec![id],
                    seen: vec![
                        fault.effect.clone(),
                        format!(
                            "request #{id} {what} (count {}) with no error and no further command",
                            request.count.map_or("none".into(), |c| c.to_string())
                        ),
                    ],
                    t_us: fault.t_us,
                    because: format!(
                        "request #{id} got an injected error from the server but its caller was told `{what}`: the error was swallowed"
                    ),
                });
            }
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
    CheckResult::from_anomalies(Invariant::ErrorsSurfaced, anomalies, otherwise).with_rule(
        "a request answered with an injected error ends as an error, or the limiter sends the struck command again for it (a recovery such as EVALSHA after SCRIPT LOAD following NOSCRIPT)",
    )
}
