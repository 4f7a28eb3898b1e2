//! `no-double-count`: the server never counts one request twice.
//!
//! A lost reply is ambiguous: the command may have run. A client that retries it counts the
//! request twice, and the identity is refused early. For a fixed-window counter, take two
//! requests A then B of one key that did not overlap anything else on it: B's count can
//! exceed A's by at most one for B plus one for each request between them with no definite
//! answer (an error or a lost reply may or may not have counted). More is a double count.
//! Only fixed-window limiters reporting counts are judged that way. A request of the same
//! identity whose keys were never learned (through the proxy, with two of an identity's
//! requests in flight, both requests' round trips go to the older) counts as on the key: it
//! may have counted there.
//!
//! Through the fault proxy there is direct evidence too, for every algorithm: after a
//! `drop-reply` fault let a request's write execute and dropped its reply, the same request
//! sending the same write again is a retry the server counts a second time — unless another
//! request of the identity was in flight when the write was sent or when it was seen again:
//! either may have been that one's.

use super::unseen::keys_unseen;
use super::{Anomaly, CheckInput, CheckResult, Verdict};
use crate::history::{Outcome, Request};
use crate::scenario::FaultKind;
use crate::scenario::Invariant;

/// Commands that change a limiter's state: sent twice, they count twice.
const WRITES: [&str; 16] = [
    "INCR",
    "INCRBY",
    "INCRBYFLOAT",
    "DECR",
    "DECRBY",
    "HINCRBY",
    "HINCRBYFLOAT",
    "ZADD",
    "EVAL",
    "EVALSHA",
    "FCALL",
    "EXEC",
    "SET",
    "SETNX",
    "LPUSH",
    "RPUSH",
];

pub fn no_double_count(input: &CheckInput<'_>) -> CheckResult {
    // Long: two detections (a write retried after a lost reply, a count jump) share one walk over each key's requests.
    let h = input.history;
    let (mut anomalies, lost_replies) = retried_writes(input);
    let mut pairs = 0usize;
    let counts = input.algorithm.counts_only_grow();
    for key in h.by_key.keys().filter(|_| counts) {
        let requests: Vec<&Request> = h.requests_maybe_on(key);
        let mut last: Option<(usize, i64)> = None;
        let mut ends_before = 0u64;
        for (i, r) in requests.iter().enumerate() {
            // A request overlapping any other on the key breaks the chain: its increment
            // may land anywhere among theirs.
            let overlaps_earlier = ends_before > r.invoke_us;
            let overlaps_later = requests.get(i + 1).is_some_and(|next| r.end_us() > next.invoke_us);
            ends_before = ends_before.max(r.end_us());
            if overlaps_earlier || overlaps_later {
                last = None;
                continue;
            }
            // A count is the key's only when the request worked on that key alone.
            let decided = matches!(r.outcome, Some(Outcome::Allowed | Outcome::Rejected));
            let Some(count) = r.count.filter(|_| decided && r.sole_key() == Some(key.as_str())) else {
                continue;
            };
            if let Some((a, count_a)) = last {
                let between = &requests[a + 1..i];
                let bound = count_a + 1 + between.len() as i64;
                let expired = h
                    .keyspace_between(key, requests[a].invoke_us, r.end_us())
                    .any(|(_, e)| matches!(e.as_str(), "expired" | "evicted" | "del" | "unlink"));
                if count > count_a && !expired {
                    pairs += 1;
                    if count > bound {
                        let mut witnesses = vec![requests[a].id];
                        witnesses.extend(between.iter().map(|b| b.id));
                        witnesses.push(r.id);
                        anomalies.push(Anomaly {
                            kind: "double-count".into(),
                            key: key.clone(),
                            requests: witnesses,
                            seen: vec![
                                format!("request #{} saw count {count_a}", requests[a].id),
                                format!(
                                    "{} request(s) in between: {}",
                                    between.len(),
                                    between
                                        .iter()
                                        .map(|b| format!(
                                            "#{} {}",
                                            b.id,
                                            b.outcome.map_or("unanswered", outcome_name)
                                        ))
                                        .collect::<Vec<_>>()
                                        .join(", ")
                                ),
                                format!("request #{} saw count {count}", r.id),
                            ],
                            t_us: r.invoke_us,
                            because: format!(
                                "the count went from {count_a} to {count} over {} request(s): the server counted {} more than were sent (a retried command after a lost reply?)",
                                between.len() + 1,
                                count - bound
                            ),
                        });
                    }
                }
            }
            last = Some((i, count));
        }
    }
    let otherwise = match (pairs, lost_replies) {
        (0, 0) if let Some(hint) = keys_unseen(input) => (Verdict::Unknown, hint),
        (0, 0) if counts => (
            Verdict::Unknown,
            "no lost reply to judge a retry by, and no two requests of one key, one after the other within a window, reported counts".to_owned(),
        ),
        (0, 0) => (
            Verdict::Unknown,
            format!(
                "no lost reply to judge a retry by (a {} is not judged by its counts)",
                input.algorithm.name()
            ),
        ),
        (pairs, lost) => (
            Verdict::Valid,
            format!(
                "{lost} lost repl(ies) not retried; {pairs} successive pair(s) of counts, none grew by more than the requests sent"
            ),
        ),
    };
    CheckResult::from_anomalies(Invariant::NoDoubleCount, anomalies, otherwise).with_rule(
        "a write whose reply was lost is not sent again for the same request; and, for fixed-window counters, between two non-overlapping requests on one key in the same window the count grows by at most one per request sent (requests with no definite answer may count once)",
    )
}

/// Requests whose write ran, lost its reply (a `drop-reply` fault) and was sent again by
/// the same request; and how many lost replies there were to judge.
fn retried_writes(input: &CheckInput<'_>) -> (Vec<Anomaly>, usize) {
    let h = input.history;
    let mut anomalies = Vec::new();
    let mut judged = 0;
    for fault in h.faults.iter().filter(|f| f.kind == FaultKind::DropReply) {
        let Some(id) = fault.request else { continue };
        let trips: Vec<_> = h.wire_of(id).collect();
        let Some(dropped) = trips.iter().rev().find(|w| w.t_us <= fault.t_us) else {
            continue;
        };
        let identity = h.request(id).map(|r| r.identity);
        let writes: Vec<String> = dropped
            .commands
            .iter()
            .map(|c| command_name(c))
            .filter(|n| WRITES.contains(&n.as_str()))
            .collect();
        let again = trips
            .iter()
            .filter(|w| w.t_us > fault.t_us)
            .find(|w| w.commands.iter().any(|c| writes.contains(&command_name(c))));
        // With another request of the identity in flight when the write was sent, or when it
        // was seen again, either may be that one's (the proxy puts a round trip down to the
        // oldest request in flight): not a retry to judge.
        if let Some(identity) = identity
            && std::iter::once(dropped)
                .chain(again)
                .any(|trip| h.another_in_flight(identity, id, trip.t_us))
        {
            continue;
        }
        judged += 1;
        if let Some(again) = again {
            anomalies.push(Anomaly {
                kind: "retried-after-lost-reply".into(),
                key: fault.key.clone().unwrap_or_default(),
                requests: vec![id],
                seen: vec![
                    format!("sent: {} ({})", dropped.commands.join(" | "), dropped.on()),
                    fault.effect.clone(),
                    format!("sent again: {} ({})", again.commands.join(" | "), again.on()),
                ],
                t_us: again.t_us,
                because: format!(
                    "request #{id}'s {} ran, its reply was lost, and the client sent it again: the server counted the request twice",
                    writes.join("/")
                ),
            });
        }
    }
    (anomalies, judged)
}

fn command_name(display: &str) -> String {
    display.split(' ').next().unwrap_or_default().to_uppercase()
}

fn outcome_name(o: Outcome) -> &'static str {
    match o {
        Outcome::Allowed => "allowed",
        Outcome::Rejected => "rejected",
        Outcome::Error => "error",
        Outcome::Indeterminate => "indeterminate",
    }
}
