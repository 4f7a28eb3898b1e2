//! `no-counter-reset`: a counter never disappears or drops while its window is live.
//!
//! Two kinds of evidence: every `evicted` notification for a limiter key whose window was
//! still live is a reset; and every drop in the counts the limiter saw on one key (a request
//! that started after another finished saw a lower count) must be explained by the key's
//! expiry. A drop with a DEL, or with no notification at all, is a reset by something else.
//! A key's window is over once its TTL ran out, or once its identity's requests moved on to
//! other keys (a key per window).

use std::collections::BTreeMap;

use super::unseen::keys_unseen;
use super::{Anomaly, CheckInput, CheckResult, Verdict, ms};
use crate::history::{HistoryIndex, Outage, Outcome, Request};
use crate::scenario::{FaultKind, Invariant};

/// Keyspace notifications arrive on their own connection: how late one may be seen after
/// the reply to the request that triggered it.
const NOTIFY_DELAY_US: u64 = 50_000;
/// Slack on a key's deadline (server and harness clocks, expiry cycles).
const DEADLINE_SLACK_US: u64 = 20_000;

pub fn no_counter_reset(input: &CheckInput<'_>) -> CheckResult {
    // Long: one walk per key, each window end classified where it is found (expiry, eviction, deletion, a new key).
    let history = input.history;
    let mut anomalies = Vec::new();
    let mut notes = Vec::new();
    let mut stale_evictions = 0usize;
    for (key, events) in &history.keyspace {
        for &(t_us, _) in events.iter().filter(|(_, e)| e == "evicted") {
            if window_over(input, key, t_us) {
                stale_evictions += 1;
            } else {
                anomalies.push(eviction(history, key, t_us));
            }
        }
    }
    anomalies.extend(restart_losses(input));
    let mut drops = Drops::default();
    if input.algorithm.counts_only_grow() {
        for key in history.by_key.keys() {
            find_drops(history, key, &mut drops, &mut anomalies);
        }
    }
    // Evictions are watched only when notifications were on; drops only when counts were
    // compared. A run with neither had nothing to judge a reset by.
    let watched = history.keyspace_complete;
    if stale_evictions > 0 {
        notes.push(format!(
            "{stale_evictions} eviction(s) of keys whose window had already ended (not resets)"
        ));
    }
    if drops.expired > 0 {
        notes.push(format!("{} window(s) ended by expiry, as they should", drops.expired));
    }
    if input.algorithm.counts_only_grow() && drops.compared == 0 && watched {
        notes.push(
            "no two counts on one key were compared (the limiter reports no count, or no request worked on exactly one limiter key): only evictions were judged".to_owned(),
        );
    }
    let otherwise = if let Some(hint) = keys_unseen(input) {
        (Verdict::Unknown, hint)
    } else if !watched && !input.algorithm.counts_only_grow() {
        (
            Verdict::Unknown,
            format!(
                "keyspace notifications were not available, so evictions cannot be seen, and a {}'s counts are not judged: nothing to judge a reset by",
                input.algorithm.name()
            ),
        )
    } else if !watched && drops.compared == 0 {
        (
            Verdict::Unknown,
            "keyspace notifications were not available, so evictions cannot be seen, and no two counts on one key could be compared (does the limiter report its count?): nothing to judge a reset by".to_owned(),
        )
    } else if !drops.late.is_empty() {
        (
            Verdict::Unknown,
            format!(
                "{} count drop(s) whose end was notified too late to tell an expiry from a reset: {}",
                drops.late.len(),
                drops.late.first().map(String::as_str).unwrap_or_default()
            ),
        )
    } else if drops.unexplained_blind > 0 {
        (
            Verdict::Unknown,
            format!(
                "{} count drop(s) could not be attributed: keyspace notifications were not available, so a reset cannot be told from an expiry",
                drops.unexplained_blind
            ),
        )
    } else {
        (
            Verdict::Valid,
            "no counter dropped while its window was live".to_owned(),
        )
    };
    let rule = if input.algorithm.counts_only_grow() {
        "an `evicted` notification for a live key, or a count lower than one an earlier finished request saw without an `expired` notification in between, is a reset"
    } else {
        "an `evicted` notification for a live key is a reset (this algorithm's count falls as time passes, so drops in it are not judged)"
    };
    let mut result = CheckResult::from_anomalies(Invariant::NoCounterReset, anomalies, otherwise).with_rule(rule);
    result.notes.extend(notes);
    result
}

/// Whether the key's window had ended by `t_us`: its identity's requests had moved on to
/// other keys (before, or with the next request after), the last PTTL sampled before says it
/// had run out, or — for a fixed window — a whole window had passed since the first request
/// of the key's current incarnation (a key per window may be kept longer than its window).
fn window_over(input: &CheckInput<'_>, key: &str, t_us: u64) -> bool {
    let history = input.history;
    if moved_on(history, key, t_us) {
        return true;
    }
    if input.algorithm.counts_only_grow() && window_elapsed(history, key, t_us, input.limit.window_ms * 1000) {
        return true;
    }
    let deadline = history
        .samples
        .iter()
        .filter(|s| s.t_end_us <= t_us)
        .filter_map(|s| s.keys.iter().find(|k| k.key == key).map(|k| (s, k.pttl_ms)))
        .next_back();
    match deadline {
        Some((sample, pttl)) if pttl >= 0 => sample.t_end_us + pttl as u64 * 1000 + DEADLINE_SLACK_US < t_us,
        _ => false,
    }
}

/// Whether the identity whose key this is worked on other keys and not on this one in its
/// last request before `t_us`, or in its next one after (a key per window: the window of
/// `key` is over).
fn moved_on(history: &HistoryIndex, key: &str, t_us: u64) -> bool {
    let Some(identity) = history.requests_on(key).next().map(|r| r.identity) else {
        return false;
    };
    history.last_with_keys(identity, t_us).is_some_and(|r| !r.touched(key))
        || history.next_with_keys(identity, t_us).is_some_and(|r| !r.touched(key))
}

/// Whether more than a window (and the slack) has passed since the first request on `key`
/// after its last end (expired, evicted, del) before `t_us`.
fn window_elapsed(history: &HistoryIndex, key: &str, t_us: u64, window_us: u64) -> bool {
    let events = history.keyspace.get(key).map(Vec::as_slice).unwrap_or_default();
    let before = events.partition_point(|(t, _)| *t < t_us);
    let last_end = events[..before]
        .iter()
        .rev()
        .find(|(_, e)| matches!(e.as_str(), "expired" | "evicted" | "del"))
        .map_or(0, |(t, _)| *t);
    history
        .first_on_after(key, last_end)
        .filter(|first| first.invoke_us <= t_us)
        .is_some_and(|first| t_us > first.invoke_us + window_us + DEADLINE_SLACK_US)
}

fn eviction(history: &HistoryIndex, key: &str, t_us: u64) -> Anomaly {
    let before = history
        .requests_on(key)
        .filter(|r| r.complete_us.is_some_and(|c| c <= t_us) && r.count.is_some())
        .max_by_key(|r| r.complete_us);
    // The notification is seen a little after the eviction: the restart shows as the
    // lowest count answered around it, else as the next request's count.
    let restarted = before.and_then(|b| {
        history
            .requests_on(key)
            .filter(|r| r.invoke_us >= b.end_us() && r.end_us() <= t_us.saturating_add(NOTIFY_DELAY_US))
            .filter(|r| r.count.is_some_and(|c| Some(c) < b.count))
            .min_by_key(|r| (r.count, r.complete_us))
    });
    let after = restarted.or_else(|| {
        history
            .requests_on(key)
            .find(|r| r.invoke_us >= t_us && r.count.is_some())
    });
    let count = |r: Option<&Request>| r.and_then(|r| r.count).map_or("?".to_owned(), |c| c.to_string());
    Anomaly {
        kind: "reset-by-eviction".into(),
        key: key.to_owned(),
        requests: before.iter().chain(after.iter()).map(|r| r.id).collect(),
        seen: vec![
            "keyspace event: evicted".into(),
            format!("count {} -> {}", count(before), count(after)),
        ],
        t_us,
        because: format!(
            "the server evicted {key} while its window was live (maxmemory-policy): the counter restarted (count {} -> {})",
            count(before),
            count(after)
        ),
    }
}

/// Every limiter key live when the server restarted without persistence was lost with it:
/// a reset, whatever the algorithm, attributed to the restart. A key is live if the last
/// sample before the restart saw it with time to live left, or a request completed on it
/// within the window before.
fn restart_losses(input: &CheckInput<'_>) -> Vec<Anomaly> {
    let history = input.history;
    let window_us = input.limit.window_ms * 1000;
    let mut anomalies = Vec::new();
    for outage in history
        .outages
        .iter()
        .filter(|o| o.kind == FaultKind::ServerRestart && !o.keys_kept)
    {
        let mut live: BTreeMap<String, String> = BTreeMap::new();
        if let Some(sample) = history.samples.iter().rfind(|s| s.t_end_us <= outage.start_us) {
            for k in sample.keys.iter().filter(|k| {
                k.pttl_ms == -1 || (k.pttl_ms >= 0 && sample.t_end_us + k.pttl_ms as u64 * 1000 > outage.start_us)
            }) {
                live.insert(
                    k.key.clone(),
                    format!(
                        "sampled {} before the restart with PTTL {} ms",
                        ms(outage.start_us - sample.t_end_us),
                        k.pttl_ms
                    ),
                );
            }
        }
        for r in history.requests.iter().filter(|r| {
            r.complete_us
                .is_some_and(|c| c <= outage.start_us && c + window_us > outage.start_us)
                && matches!(r.outcome, Some(Outcome::Allowed | Outcome::Rejected))
        }) {
            for key in &r.keys {
                live.entry(key.clone()).or_insert_with(|| {
                    format!(
                        "request #{} used it {} before the restart",
                        r.id,
                        ms(outage.start_us - r.complete_us.unwrap_or_default())
                    )
                });
            }
        }
        for (key, seen) in live {
            anomalies.push(Anomaly {
                kind: "reset-by-restart".into(),
                key: key.clone(),
                requests: Vec::new(),
                seen: vec![seen, format!("fault {}: server-restart without persistence", outage.fault)],
                t_us: outage.start_us,
                because: format!(
                    "the server restarted without persistence (fault {}) while {key}'s window was live: its state was lost",
                    outage.fault
                ),
            });
        }
    }
    anomalies
}

/// Whether `key`'s TTL, as last sampled before the outage, ran out before request `b` (its
/// expiry while the server was down, or loading its file, goes unnotified).
fn outage_outlived(history: &HistoryIndex, key: &str, outage: &Outage, b: &Request) -> bool {
    history
        .samples
        .iter()
        .filter(|s| s.t_end_us <= outage.start_us)
        .filter_map(|s| s.keys.iter().find(|k| k.key == key).map(|k| (s, k.pttl_ms)))
        .next_back()
        .is_some_and(|(s, pttl)| pttl >= 0 && s.t_end_us + pttl as u64 * 1000 <= b.invoke_us + DEADLINE_SLACK_US)
}

/// Whether the key `a` counted on had, by its last sample before `b`, a TTL that ran out
/// before `b` was sent (its incarnation is the one created by the last count-1 request
/// before `a`; samples of an older one do not count).
fn expired_by(history: &HistoryIndex, key: &str, a: &Request, b: &Request) -> bool {
    let born_us = super::creator_before(history, key, a.end_us())
        .map(|c| c.invoke_us)
        .unwrap_or(a.invoke_us);
    history
        .samples
        .iter()
        .filter(|s| s.t_start_us >= born_us && s.t_end_us <= b.invoke_us)
        .filter_map(|s| s.keys.iter().find(|k| k.key == key).map(|k| (s, k.pttl_ms)))
        .next_back()
        .is_some_and(|(s, pttl)| pttl >= 0 && s.t_end_us + pttl as u64 * 1000 <= b.invoke_us + DEADLINE_SLACK_US)
}

#[derive(Default)]
struct Drops {
    expired: usize,
    /// Drops whose only end was notified too late to place (one line per drop, with why).
    late: Vec<String>,
    /// Per key, the arrival of the last notification a late drop took as its end.
    consumed_us: BTreeMap<String, u64>,
    unexplained_blind: usize,
    /// Counts compared with an earlier one of the same window.
    compared: usize,
}

/// Walk one key's requests in invocation order, tracking the highest count seen by a
/// request of the current window that finished before the next one started.
fn find_drops(history: &HistoryIndex, key: &str, drops: &mut Drops, anomalies: &mut Vec<Anomaly>) {
    let maybe_on = history.requests_maybe_on(key);
    let requests: Vec<&Request> = history
        .requests_on(key)
        .filter(|r| r.count.is_some() && r.complete_us.is_some() && r.sole_key() == Some(key))
        .filter(|r| count_possible(history, key, &maybe_on, r))
        .collect();
    let mut by_completion = requests.clone();
    by_completion.sort_by_key(|r| r.complete_us);
    let mut folded = 0usize;
    let mut epoch_start_us = 0u64;
    let mut best: Option<&Request> = None;
    for &b in &requests {
        while folded < by_completion.len() && by_completion[folded].end_us() < b.invoke_us {
            let r = by_completion[folded];
            if r.invoke_us >= epoch_start_us && best.is_none_or(|m| r.count > m.count) {
                best = Some(r);
            }
            folded += 1;
        }
        let Some(a) = best else { continue };
        drops.compared += 1;
        if b.count >= a.count {
            continue;
        }
        explain_drop(history, key, a, b, drops, anomalies);
        // A new window began by `b`: compare later requests only with ones of this window
        // that finished before they started (`b` itself is folded in once it has finished).
        epoch_start_us = b.invoke_us;
        best = None;
    }
}

/// Whether `r`'s count could have been reached on `key`. A counter grows by one per request
/// (the harness asks for a cost of 1), so by the time `r` completed it cannot exceed the
/// requests of its identity that may have counted there: those on the key, those whose keys
/// were never learned, and those in flight beside `r`. A higher count was another key's: with
/// several of an identity's requests in flight the fault proxy can put a round trip down to
/// a neighbour (a serial adapter's next command arriving before its reply is read), so a
/// daily cap's request that counted 6,238 on yesterday's key was once recorded on today's,
/// where the next counted 32: a false reset. A planted key may start anywhere.
fn count_possible(history: &HistoryIndex, key: &str, maybe_on: &[&Request], r: &Request) -> bool {
    if history.planted.contains_key(key) {
        return true;
    }
    let Some(count) = r.count else { return true };
    let before = maybe_on.partition_point(|q| q.invoke_us <= r.end_us());
    let beside = history.in_flight(r.identity, r.invoke_us).len();
    count <= (before + beside) as i64
}

/// Why `b` counted lower than `a` on `key`: an expiry, an eviction or a restart that lost
/// every key (each reported elsewhere), or an anomaly of its own.
fn explain_drop(
    history: &HistoryIndex,
    key: &str,
    a: &Request,
    b: &Request,
    drops: &mut Drops,
    anomalies: &mut Vec<Anomaly>,
) {
    let window = history.keyspace_between(key, a.invoke_us, b.end_us().saturating_add(NOTIFY_DELAY_US));
    let kinds: Vec<&str> = window.map(|(_, e)| e.as_str()).collect();
    let restart = history
        .outages
        .iter()
        .find(|o| o.kind == FaultKind::ServerRestart && o.within(a.invoke_us, b.end_us()));
    if kinds.contains(&"evicted") {
        // Reported from the notification itself.
    } else if restart.is_some_and(|o| !o.keys_kept) {
        // Reported from the restart: every live key was lost with it.
    } else if kinds.contains(&"expired") {
        drops.expired += 1;
    } else if let Some(outage) = failover_between(history, a, b) {
        // The promoted replica had an older value, or none: unless the key `a` counted on
        // would have expired by `b` anyway, the failover lost the writes in between.
        let how = format!(
            "the replica promoted by fault {} had not received the writes before it",
            outage.fault
        );
        let outlived = expired_by(history, key, a, b);
        lost_or_expired(outlived, (key, a, b), "reset-by-failover", &how, drops, anomalies);
    } else if kinds.contains(&"del") {
        anomalies.push(drop_anomaly(
            key,
            a,
            b,
            "reset-by-del",
            "a DEL removed it while its window was live",
        ));
    } else if let Some(outage) = restart {
        // The server kept its keys (an append-only file): unless the key's TTL ran out
        // while it was down (its expiry then goes unnotified), the restart lost it.
        let how = format!(
            "the server restarted with its append-only file (fault {}) and came back without it",
            outage.fault
        );
        let outlived = outage_outlived(history, key, outage, b);
        lost_or_expired(outlived, (key, a, b), "reset-by-restart", &how, drops, anomalies);
    } else if history.keyspace_complete {
        late_end(history, key, a, b, drops, anomalies);
    } else {
        drops.unexplained_blind += 1;
    }
}

/// A drop with no end of `key` notified in time. Notifications come in the order the
/// server sent them, so the first end notified after `a` is the end of `a`'s counter when it
/// had one — however late a loaded machine delivers it — unless that counter vanished without
/// one and what came is the end of `b`'s own counter. It is not `b`'s when `b`'s counter got
/// no TTL before it (setting one is notified, `expire`, and would have come first), or when a
/// later request, sent after it was seen, still counted on from `b` (no drop in between):
/// `b`'s counter was alive then. When neither tells, the key is unknown, never a reset; with
/// no end notified at all, the counter vanished unnotified: a reset.
fn late_end(
    history: &HistoryIndex,
    key: &str,
    a: &Request,
    b: &Request,
    drops: &mut Drops,
    anomalies: &mut Vec<Anomaly>,
) {
    let events = history.keyspace.get(key).map(Vec::as_slice).unwrap_or_default();
    let from_us = a.invoke_us.max(drops.consumed_us.get(key).map_or(0, |t| t + 1));
    let first = events.partition_point(|(t, _)| *t < from_us);
    let Some(at) = events[first..]
        .iter()
        .position(|(_, e)| matches!(e.as_str(), "expired" | "evicted" | "del"))
        .map(|i| first + i)
    else {
        anomalies.push(drop_anomaly(
            key,
            a,
            b,
            "reset-unexplained",
            "it vanished with no expired, evicted or del notification, and no server fault in between (a restart, FLUSHALL or failover?)",
        ));
        return;
    };
    let (t_us, event) = (&events[at].0, &events[at].1);
    drops.consumed_us.insert(key.to_owned(), *t_us);
    let late = ms(t_us.saturating_sub(b.end_us()));
    let continued = history
        .requests_on(key)
        .find(|c| c.invoke_us >= *t_us && c.count.is_some() && c.complete_us.is_some() && c.sole_key() == Some(key));
    // In the order they came, not by when they were seen: several can be seen at once.
    let since_b = events.partition_point(|(t, _)| *t < b.invoke_us);
    let no_ttl_before = !events[since_b.min(at)..at].iter().any(|(_, e)| e == "expire");
    let proven = no_ttl_before || continued.is_some_and(|c| c.count > b.count && !dropped_between(history, key, b, c));
    match (proven, event.as_str()) {
        (true, "expired") => drops.expired += 1,
        (true, "del") => anomalies.push(drop_anomaly(
            key,
            a,
            b,
            "reset-by-del",
            &format!("a DEL removed it while its window was live (notified {late} after request #{})", b.id),
        )),
        // An eviction is reported from its own notification.
        (true, _) => {}
        (false, _) => drops.late.push(format!(
            "{key}: its counter fell from {} (request #{}) to {} (request #{}) and the first end notified after it, `{event}`, came {late} after #{} was answered; whether it ended before #{} cannot be told on a machine that delivered it that late",
            a.count.unwrap_or_default(),
            a.id,
            b.count.unwrap_or_default(),
            b.id,
            b.id,
            b.id
        )),
    }
}

/// Whether a request on `key` sent after `b` was answered and before `c` counted no higher
/// than `b` did (a new counter began in between).
fn dropped_between(history: &HistoryIndex, key: &str, b: &Request, c: &Request) -> bool {
    history.requests_on(key).any(|r| {
        r.invoke_us > b.end_us()
            && r.invoke_us < c.invoke_us
            && r.sole_key() == Some(key)
            && r.count.is_some()
            && r.count <= b.count
    })
}

/// A drop across a server event that kept the keys: an expiry when the key had outlived its
/// TTL anyway, else a reset of `kind`.
fn lost_or_expired(
    outlived: bool,
    (key, a, b): (&str, &Request, &Request),
    kind: &str,
    how: &str,
    drops: &mut Drops,
    anomalies: &mut Vec<Anomaly>,
) {
    if outlived {
        drops.expired += 1;
    } else {
        anomalies.push(drop_anomaly(key, a, b, kind, how));
    }
}

/// A failover whose promotion came after `a` was sent and before `b` ended.
fn failover_between<'h>(history: &'h HistoryIndex, a: &Request, b: &Request) -> Option<&'h Outage> {
    history
        .outages
        .iter()
        .find(|o| o.fails_over_between(a.invoke_us, b.end_us()))
}

fn drop_anomaly(key: &str, a: &Request, b: &Request, kind: &str, how: &str) -> Anomaly {
    let (ca, cb) = (a.count.unwrap_or_default(), b.count.unwrap_or_default());
    Anomaly {
        kind: kind.into(),
        key: key.to_owned(),
        requests: vec![a.id, b.id],
        seen: vec![format!("count {ca} (request #{}) -> {cb} (request #{})", a.id, b.id)],
        t_us: b.invoke_us,
        because: format!(
            "{key}'s counter fell from {ca} to {cb} within {}: {how}",
            ms(b.invoke_us.saturating_sub(a.complete_us.unwrap_or(a.invoke_us)))
        ),
    }
}
