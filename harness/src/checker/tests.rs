//! The checkers on hand-written histories: for each invariant a Valid, an Invalid and an
//! Unknown history, and the edge cases each rule's doc comment promises.

use super::fixtures::{HistoryBuilder, config, key, limit, us};
use super::{Anomaly, CheckResult, Verdict};
use crate::history::Outcome;
use crate::scenario::Algorithm;
use crate::scenario::FaultKind;
use crate::scenario::Invariant::{
    self, AdmitsUpToLimit, AdmittedWithinLimit, ErrorsSurfaced, FailsAsDeclared, NoCounterReset, NoDoubleCount,
    NoLeakedKeys, NoLockout, TtlBounded, TtlPresent,
};

/// The one anomaly of an Invalid result.
fn sole_anomaly(result: &CheckResult) -> &Anomaly {
    assert_eq!(result.verdict, Verdict::Invalid, "{result:#?}");
    assert_eq!(result.anomalies_total, 1, "{result:#?}");
    &result.anomalies[0]
}

fn assert_verdict(result: &CheckResult, verdict: Verdict) {
    assert_eq!(result.verdict, verdict, "{result:#?}");
    if verdict != Verdict::Invalid {
        assert!(result.anomalies.is_empty(), "{result:#?}");
        assert_eq!(result.anomalies_total, 0, "{result:#?}");
    }
}

fn assert_summary_has(result: &CheckResult, text: &str) {
    assert!(
        result.summary.contains(text),
        "summary {:?} lacks {text:?}",
        result.summary
    );
}

fn assert_note_has(result: &CheckResult, text: &str) {
    assert!(
        result.notes.iter().any(|n| n.contains(text)),
        "notes {:?} lack {text:?}",
        result.notes
    );
}

/// Identity 0's three requests at 0, 10 and 20 ms, counts 1 to 3.
fn three_requests() -> HistoryBuilder {
    HistoryBuilder::new()
        .allowed(1, 0, 0, 2, 1)
        .allowed(2, 0, 10, 12, 2)
        .allowed(3, 0, 20, 22, 3)
}

// ---- ttl-present -------------------------------------------------------------------------

#[test]
fn ttl_present_valid_when_every_sampled_key_has_an_expiry() {
    let result = three_requests()
        .sample(50, false, &[("rl:0", 950, Some("3"))])
        .sample(3000, true, &[("rl:1", 400, Some("1"))])
        .check_one(TtlPresent);
    assert_verdict(&result, Verdict::Valid);
    assert_summary_has(&result, "1 keys at the final audit");
    assert!(result.notes.is_empty(), "{result:#?}");
}

#[test]
fn ttl_present_invalid_names_the_immortal_key_its_creator_and_the_fault() {
    let result = HistoryBuilder::new()
        .request(1, 0, 0, 2, Outcome::Allowed, Some(1), &["GET", "INCR"])
        .fault(1, FaultKind::ExpireBetweenRoundTrips, Some(1), Some("rl:0"))
        .allowed(2, 1, 0, 2, 1)
        .sample(500, false, &[("rl:0", -1, Some("1")), ("rl:1", 500, Some("1"))])
        .sample(3000, true, &[("rl:0", -1, Some("1"))])
        .check_one(TtlPresent);
    let anomaly = sole_anomaly(&result);
    assert_eq!(anomaly.kind, "immortal-key");
    assert_eq!(anomaly.key, "rl:0");
    assert_eq!(anomaly.requests, vec![1]);
    assert_eq!(anomaly.t_us, us(500), "the first sample that saw it");
    assert_eq!(
        anomaly.seen,
        vec!["PTTL -1 (2 sample(s))".to_owned(), "value 1".to_owned()]
    );
    assert!(
        anomaly
            .because
            .contains("request #1 recreated it with round trips [GET | INCR]"),
        "{anomaly:#?}"
    );
    assert!(
        anomaly
            .because
            .contains("the nemesis expired it just before (request #1)"),
        "{anomaly:#?}"
    );
}

#[test]
fn ttl_present_excuses_pttl_minus_one_while_a_request_on_that_key_is_in_flight() {
    // Request 2 is between INCR and EXPIRE (100..104 ms) while the sample (101..102 ms) runs.
    let result = HistoryBuilder::new()
        .allowed(1, 0, 0, 2, 1)
        .allowed(2, 0, 100, 104, 2)
        .sample(101, false, &[("rl:0", -1, Some("2"))])
        .empty_final_audit(3000)
        .check_one(TtlPresent);
    assert_verdict(&result, Verdict::Valid);
    assert_note_has(&result, "1 PTTL -1 observation(s) excused");
}

#[test]
fn ttl_present_does_not_excuse_a_request_in_flight_on_another_key() {
    let result = HistoryBuilder::new()
        .allowed(1, 0, 0, 2, 1)
        .allowed(2, 1, 100, 104, 1)
        .sample(101, false, &[("rl:0", -1, Some("1"))])
        .empty_final_audit(3000)
        .check_one(TtlPresent);
    let anomaly = sole_anomaly(&result);
    assert_eq!(anomaly.key, "rl:0");
    assert_eq!(anomaly.requests, vec![1]);
    assert!(result.notes.is_empty(), "{result:#?}");
}

#[test]
fn ttl_present_does_not_excuse_the_final_audit_even_with_a_request_in_flight() {
    let result = HistoryBuilder::new()
        .allowed(1, 0, 0, 2, 1)
        .allowed(2, 0, 2999, 3005, 2)
        .sample(3000, true, &[("rl:0", -1, Some("2"))])
        .check_one(TtlPresent);
    let anomaly = sole_anomaly(&result);
    assert_eq!(anomaly.kind, "immortal-key");
    assert_eq!(anomaly.key, "rl:0");
    assert_eq!(anomaly.requests, vec![1]);
    assert_eq!(anomaly.seen[0], "PTTL -1 (1 sample(s), final audit)");
}

#[test]
fn ttl_present_excuses_a_key_whose_request_was_never_answered() {
    // The run was cut short with request 2 between its round trips.
    let result = HistoryBuilder::new()
        .allowed(1, 0, 0, 2, 1)
        .unanswered(2, 0, 100)
        .sample(200, false, &[("rl:0", -1, Some("2"))])
        .empty_final_audit(3000)
        .check_one(TtlPresent);
    assert_verdict(&result, Verdict::Valid);
    assert_note_has(&result, "1 PTTL -1 observation(s) excused");
}

#[test]
fn ttl_present_excuses_a_planted_key_until_a_window_after_the_limiters_first_answer() {
    // The scenario planted an exhausted counter without TTL; the limiter's first answer on
    // it comes at 102 ms, and request 2 heals it (sets the TTL) at 1000 ms.
    let result = HistoryBuilder::new()
        .setup(0, "rl:0", "SET rl:0 20 (no TTL)")
        .sample(50, false, &[("rl:0", -1, Some("20"))])
        .rejected(1, 0, 100, 102, 21)
        .sample(1101, false, &[("rl:0", -1, Some("21"))])
        .request(2, 0, 1150, 1152, Outcome::Rejected, Some(22), &["INCR", "PEXPIRE"])
        .sample(1200, false, &[("rl:0", 950, Some("22"))])
        .empty_final_audit(3000)
        .check_one(TtlPresent);
    assert_verdict(&result, Verdict::Valid);
    assert_eq!(
        result.notes,
        vec![
            "2 PTTL -1 observation(s) of keys the scenario planted without a TTL, before the limiter answered its first request on them a window after its first answer (its time to heal them)".to_owned()
        ],
        "excused as planted, not as in flight"
    );
}

#[test]
fn ttl_present_a_planted_key_still_without_ttl_a_window_after_the_first_answer_is_immortal() {
    // First answer at 102 ms; the first request a window later (sent at 1150 ms) is answered
    // at 1152 ms: from then on the key is due. A limiter that only sets the TTL on count 1
    // never heals it.
    let history = |planted: bool| {
        let history = if planted {
            HistoryBuilder::new().setup(0, "rl:0", "SET rl:0 20 (no TTL)")
        } else {
            HistoryBuilder::new()
        };
        history
            .sample(50, false, &[("rl:0", -1, Some("20"))])
            .rejected(1, 0, 100, 102, 21)
            .sample(1101, false, &[("rl:0", -1, Some("21"))])
            .rejected(2, 0, 1150, 1152, 22)
            .sample(1153, false, &[("rl:0", -1, Some("22"))])
            .sample(3000, true, &[("rl:0", -1, Some("22"))])
    };
    let result = history(true).check_one(TtlPresent);
    let anomaly = sole_anomaly(&result);
    assert_eq!(anomaly.kind, "immortal-key");
    assert_eq!(anomaly.key, "rl:0");
    assert_eq!(anomaly.requests, Vec::<u64>::new(), "no request created it");
    assert_eq!(
        anomaly.t_us,
        us(1153),
        "the first sample after the first answer a window later"
    );
    assert_eq!(
        anomaly.seen,
        vec!["PTTL -1 (2 sample(s))".to_owned(), "value 22".to_owned()]
    );
    assert_eq!(
        anomaly.because,
        "rl:0 exists with no expiry (PTTL -1): it will never expire"
    );
    assert_note_has(&result, "2 PTTL -1 observation(s) of keys the scenario planted");
    // The excuse is for planted keys only: unplanted, the first sample already counts.
    let result = history(false).check_one(TtlPresent);
    let anomaly = sole_anomaly(&result);
    assert_eq!(anomaly.t_us, us(50));
    assert_eq!(anomaly.seen[0], "PTTL -1 (4 sample(s))");
    assert!(result.notes.is_empty(), "{result:#?}");
}

#[test]
fn ttl_present_unknown_without_samples() {
    let result = three_requests().check_one(TtlPresent);
    assert_verdict(&result, Verdict::Unknown);
    assert_summary_has(&result, "took no sample");
}

#[test]
fn ttl_present_unknown_without_a_final_audit() {
    let result = three_requests()
        .sample(50, false, &[("rl:0", 950, Some("3"))])
        .check_one(TtlPresent);
    assert_verdict(&result, Verdict::Unknown);
    assert_summary_has(&result, "final audit");
}

#[test]
fn ttl_present_invalid_from_a_mid_run_sample_even_without_a_final_audit() {
    // The run was lost before its final audit, but an immortal key was already seen.
    let result = three_requests()
        .sample(500, false, &[("rl:0", -1, Some("3"))])
        .problem(true)
        .check_one(TtlPresent);
    let anomaly = sole_anomaly(&result);
    assert_eq!(anomaly.kind, "immortal-key");
    assert_eq!(anomaly.key, "rl:0");
}

// ---- ttl-bounded -------------------------------------------------------------------------

#[test]
fn ttl_bounded_valid_at_exactly_the_window() {
    let result = three_requests()
        .sample(50, false, &[("rl:0", 1000, Some("3"))])
        .sample(3000, true, &[("rl:0", -2, None)])
        .check_one(TtlBounded);
    assert_verdict(&result, Verdict::Valid);
    assert_summary_has(&result, "longest 1000 ms");
    assert_eq!(
        result.rule.as_deref(),
        Some("PTTL <= window_ms + ttl_slack_ms = 1000 + 0 = 1000 ms")
    );
}

#[test]
fn ttl_bounded_invalid_reports_the_longest_ttl_of_each_key() {
    let result = three_requests()
        .sample(100, false, &[("rl:0", 1500, Some("3")), ("rl:1", 900, Some("1"))])
        .sample(200, false, &[("rl:0", 1800, Some("3"))])
        .sample(3000, true, &[("rl:0", 1001, Some("3"))])
        .check_one(TtlBounded);
    let anomaly = sole_anomaly(&result);
    assert_eq!(anomaly.kind, "ttl-above-window");
    assert_eq!(anomaly.key, "rl:0");
    assert_eq!(anomaly.requests, vec![1], "the request that created the key");
    assert_eq!(anomaly.t_us, us(200), "the sample with the longest TTL");
    assert_eq!(
        anomaly.seen,
        vec!["PTTL 1800 ms (above the bound in 3 sample(s))".to_owned()]
    );
}

#[test]
fn ttl_bounded_says_when_a_ttl_looks_like_seconds_taken_for_milliseconds() {
    // `EXPIRE key ARGV[window_ms]`: 1000 s against a 1000 ms window.
    let result = three_requests()
        .sample(100, false, &[("rl:0", 999_874, Some("3"))])
        .empty_final_audit(3000)
        .check_one(TtlBounded);
    let anomaly = sole_anomaly(&result);
    assert!(
        anomaly
            .because
            .contains("probably takes seconds where the harness passes milliseconds"),
        "{anomaly:#?}"
    );
    assert!(anomaly.because.contains("`{window_s}`"), "{anomaly:#?}");
    // A TTL merely too long says nothing of the sort.
    let result = three_requests()
        .sample(100, false, &[("rl:0", 1500, Some("3"))])
        .empty_final_audit(3000)
        .check_one(TtlBounded);
    assert!(!sole_anomaly(&result).because.contains("seconds"), "{result:#?}");
}

#[test]
fn ttl_bounded_takes_a_ttl_declared_for_the_limiter_in_ms() {
    // A daily cap's EXPIRE 26 h, declared for it by the run (a suite's [[limiter]] ttl_max_ms).
    let history = three_requests()
        .sample(100, false, &[("rl:0", 93_599_000, Some("3"))])
        .empty_final_audit(3000);
    let mut config = config(&[TtlBounded]);
    config.ttl_declared = Some(crate::scenario::TtlMax::Ms(93_600_000));
    let result = history.check_with(&limit(), &config).remove(0);
    assert_verdict(&result, Verdict::Valid);
    assert!(
        result
            .rule
            .as_deref()
            .is_some_and(|r| r.contains("93600000 ms, declared for the limiter by the run")),
        "{result:#?}"
    );
}

#[test]
fn ttl_bounded_allows_the_declared_slack() {
    let history = three_requests()
        .sample(100, false, &[("rl:0", 1500, Some("3"))])
        .empty_final_audit(3000);
    let mut config = config(&[TtlBounded]);
    config.ttl_slack_ms = 500;
    let result = history.check_with(&limit(), &config).remove(0);
    assert_verdict(&result, Verdict::Valid);
    config.ttl_slack_ms = 499;
    let result = history.check_with(&limit(), &config).remove(0);
    assert_eq!(sole_anomaly(&result).key, "rl:0");
}

#[test]
fn ttl_bounded_unknown_without_a_final_audit() {
    let result = three_requests()
        .sample(100, false, &[("rl:0", 900, Some("3"))])
        .check_one(TtlBounded);
    assert_verdict(&result, Verdict::Unknown);
    assert_summary_has(&result, "final audit");
    assert!(result.rule.is_some(), "the rule is stated even when Unknown");
}

#[test]
fn ttl_bounded_invalid_from_a_mid_run_sample_even_without_a_final_audit() {
    let result = three_requests()
        .sample(100, false, &[("rl:0", 5000, Some("3"))])
        .problem(true)
        .check_one(TtlBounded);
    let anomaly = sole_anomaly(&result);
    assert_eq!(anomaly.kind, "ttl-above-window");
    assert_eq!(anomaly.key, "rl:0");
}

// ---- no-counter-reset --------------------------------------------------------------------

#[test]
fn no_counter_reset_valid_while_counts_only_grow() {
    let result = three_requests()
        .allowed(4, 0, 30, 32, 4)
        .sample(50, false, &[("rl:0", 970, Some("4"))])
        .check_one(NoCounterReset);
    assert_verdict(&result, Verdict::Valid);
    assert!(result.notes.is_empty(), "{result:#?}");
}

#[test]
fn no_counter_reset_concurrent_requests_may_see_counts_in_any_order() {
    // Request 2 is sent after request 1 but answered first: it may see the lower count.
    let result = HistoryBuilder::new()
        .allowed(1, 0, 0, 50, 2)
        .allowed(2, 0, 1, 3, 1)
        .allowed(3, 0, 100, 102, 3)
        .check_one(NoCounterReset);
    assert_verdict(&result, Verdict::Valid);
}

#[test]
fn no_counter_reset_a_drop_explained_by_expiry_is_not_a_reset() {
    let result = three_requests()
        .keyspace(1000, "rl:0", "expired")
        .allowed(4, 0, 1100, 1102, 1)
        .check_one(NoCounterReset);
    assert_verdict(&result, Verdict::Valid);
    assert_note_has(&result, "1 window(s) ended by expiry");
}

#[test]
fn no_counter_reset_eviction_of_a_live_key_is_a_reset() {
    let result = three_requests()
        .sample(50, false, &[("rl:0", 970, Some("3"))])
        .keyspace(100, "rl:0", "evicted")
        .allowed(4, 0, 200, 202, 1)
        .check_one(NoCounterReset);
    // Reported once, from the notification, not again as a drop.
    let anomaly = sole_anomaly(&result);
    assert_eq!(anomaly.kind, "reset-by-eviction");
    assert_eq!(anomaly.key, "rl:0");
    assert_eq!(
        anomaly.requests,
        vec![3, 4],
        "the last count before and the first after"
    );
    assert_eq!(anomaly.t_us, us(100));
    assert!(anomaly.seen.contains(&"count 3 -> 1".to_owned()), "{anomaly:#?}");
}

#[test]
fn no_counter_reset_eviction_after_the_window_ended_is_not_a_reset() {
    // Sampled at 50..51 ms with 970 ms left: the window ended by ~1021 ms (+20 ms slack).
    let result = three_requests()
        .sample(50, false, &[("rl:0", 970, Some("3"))])
        .keyspace(1500, "rl:0", "evicted")
        .allowed(4, 0, 1600, 1602, 1)
        .check_one(NoCounterReset);
    assert_verdict(&result, Verdict::Valid);
    assert_note_has(&result, "1 eviction(s) of keys whose window had already ended");
}

#[test]
fn no_counter_reset_a_drop_with_a_del_is_a_reset_by_del() {
    let result = three_requests()
        .keyspace(500, "rl:0", "del")
        .allowed(4, 0, 600, 602, 1)
        .check_one(NoCounterReset);
    let anomaly = sole_anomaly(&result);
    assert_eq!(anomaly.kind, "reset-by-del");
    assert_eq!(anomaly.key, "rl:0");
    assert_eq!(anomaly.requests, vec![3, 4]);
    assert_eq!(anomaly.t_us, us(600));
    assert_eq!(anomaly.seen, vec!["count 3 (request #3) -> 1 (request #4)".to_owned()]);
}

/// The nemesis's `PEXPIRE key 1` is executed as a DEL (notified `del`) when the server finds
/// the millisecond already past (Redis before 7.2, on a loaded machine): the expiry the
/// fault meant, not a reset. A `del` outside the struck request, or with no strike, stays one.
#[test]
fn no_counter_reset_a_del_caused_by_the_expire_fault_is_its_expiry() {
    let struck = |del_ms: u64| {
        three_requests()
            .keyspace(del_ms, "rl:0", "del")
            .fault(36, FaultKind::ExpireBetweenRoundTrips, Some(4), Some("rl:0"))
            .allowed(4, 0, 30, 40, 1)
            .check_one(NoCounterReset)
    };
    let expired = struck(35);
    assert_verdict(&expired, Verdict::Valid);
    assert_note_has(&expired, "1 window(s) ended by expiry");
    // Before the struck request began: a deletion the fault did not make.
    assert_eq!(sole_anomaly(&struck(25)).kind, "reset-by-del");
    let unstruck = three_requests()
        .keyspace(35, "rl:0", "del")
        .allowed(4, 0, 30, 40, 1)
        .check_one(NoCounterReset);
    assert_eq!(sole_anomaly(&unstruck).kind, "reset-by-del");
}

/// A key `MIGRATE`d between a cluster's nodes is notified `restore` (where it arrives) and `del`
/// (where it left): a move, not an end. A count that goes on after it is no reset; one that
/// drops after it is a reset the `del` does not explain.
#[test]
fn no_counter_reset_a_migration_is_not_a_del() {
    let resharded = || three_requests().fault(400, FaultKind::Reshard, None, None);
    let moved = resharded()
        .keyspace(500, "rl:0", "restore")
        .keyspace(500, "rl:0", "del")
        .allowed(4, 0, 510, 512, 4)
        .check_one(NoCounterReset);
    assert_verdict(&moved, Verdict::Valid);
    let lost = resharded()
        .keyspace(500, "rl:0", "del")
        .keyspace(501, "rl:0", "restore")
        .allowed(4, 0, 600, 602, 1)
        .check_one(NoCounterReset);
    assert_eq!(sole_anomaly(&lost).kind, "reset-unexplained");
    // A `del` far from any restore, or in a run without a reshard, is a deletion.
    for history in [
        resharded()
            .keyspace(500, "rl:0", "del")
            .keyspace(560, "rl:0", "restore"),
        three_requests()
            .keyspace(500, "rl:0", "del")
            .keyspace(500, "rl:0", "restore"),
    ] {
        let result = history.allowed(4, 0, 600, 602, 1).check_one(NoCounterReset);
        assert_eq!(sole_anomaly(&result).kind, "reset-by-del");
    }
}

#[test]
fn no_counter_reset_a_drop_without_any_notification_is_unexplained() {
    let result = three_requests()
        .allowed(4, 1, 300, 302, 1)
        .allowed(5, 0, 600, 602, 1)
        .check_one(NoCounterReset);
    let anomaly = sole_anomaly(&result);
    assert_eq!(anomaly.kind, "reset-unexplained");
    assert_eq!(anomaly.key, "rl:0");
    assert_eq!(anomaly.requests, vec![3, 5]);
}

#[test]
fn no_counter_reset_an_expiry_notified_late_is_still_an_expiry() {
    // A loaded machine: the key expired before request 4 (count 1), but its `expired` was
    // seen 300 ms after request 4's answer. It came before the `expire` that gave request 4's
    // new counter its TTL (notifications keep the server's order), so it ended the old one.
    let result = three_requests()
        .allowed(4, 0, 1100, 1102, 1)
        .keyspace(1402, "rl:0", "expired")
        .keyspace(1402, "rl:0", "expire")
        .check_one(NoCounterReset);
    assert_verdict(&result, Verdict::Valid);
    assert_note_has(&result, "1 window(s) ended by expiry");
}

#[test]
fn no_counter_reset_a_late_end_that_may_be_the_new_counters_is_unknown_not_a_reset() {
    // The TTL of request 4's counter was set (`expire`) before the only `expired` came: that
    // may be the new counter's own end, and the old one may have vanished unnotified.
    let late = three_requests()
        .allowed(4, 0, 1100, 1102, 1)
        .keyspace(1101, "rl:0", "expire")
        .keyspace(1402, "rl:0", "expired");
    let result = late.check_one(NoCounterReset);
    assert_verdict(&result, Verdict::Unknown);
    assert_summary_has(&result, "notified too late to tell an expiry from a reset");
    assert_summary_has(&result, "rl:0: its counter fell from 3 (request #3) to 1 (request #4)");
    // A request sent after that notification still counting on from request 4 shows request
    // 4's counter was alive then: the end was the old counter's.
    let result = late.allowed(5, 0, 1500, 1502, 2).check_one(NoCounterReset);
    assert_verdict(&result, Verdict::Valid);
    // But not when a new counter began in between (request 5 counted 1 again).
    let result = three_requests()
        .allowed(4, 0, 1100, 1102, 1)
        .keyspace(1101, "rl:0", "expire")
        .allowed(5, 0, 1300, 1302, 1)
        .keyspace(1402, "rl:0", "expired")
        .allowed(6, 0, 1500, 1502, 2)
        .check_one(NoCounterReset);
    assert_verdict(&result, Verdict::Unknown);
}

#[test]
fn admitted_within_limit_a_late_expiry_does_not_join_two_windows() {
    // Counts 1..8, the key expires, counts 1..8 again, and the `expired` is seen only after
    // all of them: 16 admissions "between two ends", but two counters of 8.
    let history = (0..8).fold(HistoryBuilder::new(), |h, i| {
        h.allowed(i + 1, 0, i * 100, i * 100 + 2, i as i64 + 1)
    });
    let history = (0..8).fold(history, |h, i| {
        h.allowed(9 + i, 0, 1000 + i * 50, 1002 + i * 50, i as i64 + 1)
    });
    let result = history.keyspace(1600, "rl:0", "expired").check_one(AdmittedWithinLimit);
    let kinds: Vec<&str> = anomalies(&result).iter().map(|(kind, ..)| *kind).collect();
    assert!(!kinds.contains(&"over-admission-in-window"), "{result:#?}");
}

#[test]
fn no_counter_reset_unknown_when_notifications_were_lost_and_a_drop_is_unexplained() {
    let result = three_requests()
        .keyspace_lost()
        .allowed(4, 0, 600, 602, 1)
        .check_one(NoCounterReset);
    assert_verdict(&result, Verdict::Unknown);
    assert_summary_has(&result, "1 count drop(s) could not be attributed");
}

#[test]
fn no_counter_reset_lost_notifications_do_not_hide_a_seen_eviction() {
    let result = three_requests()
        .keyspace_lost()
        .sample(50, false, &[("rl:0", 970, Some("3"))])
        .keyspace(100, "rl:0", "evicted")
        .allowed(4, 0, 200, 202, 1)
        .check_one(NoCounterReset);
    assert_eq!(sole_anomaly(&result).kind, "reset-by-eviction");
}

#[test]
fn no_counter_reset_requests_racing_after_an_expiry_are_not_a_reset() {
    // The window of counts 1..3 expired (active expiry, before anyone touched the key).
    // Requests 4 and 5 race: 5 is sent 1 ms after 4 but its INCR lands first (count 1),
    // so 4 sees 2. Neither finished before the other started: no drop between them.
    let result = three_requests()
        .keyspace(1000, "rl:0", "expired")
        .allowed(4, 0, 1100, 1120, 2)
        .allowed(5, 0, 1101, 1105, 1)
        .allowed(6, 0, 1200, 1202, 3)
        .check_one(NoCounterReset);
    assert_verdict(&result, Verdict::Valid);
    assert_note_has(&result, "window(s) ended by expiry");
}

#[test]
fn no_counter_reset_still_sees_a_reset_in_the_window_after_a_race() {
    let result = three_requests()
        .keyspace(1000, "rl:0", "expired")
        .allowed(4, 0, 1100, 1120, 2)
        .allowed(5, 0, 1101, 1105, 1)
        .allowed(6, 0, 1200, 1202, 3)
        .keyspace(1300, "rl:0", "del")
        .allowed(7, 0, 1400, 1402, 1)
        .check_one(NoCounterReset);
    let anomaly = sole_anomaly(&result);
    assert_eq!(anomaly.kind, "reset-by-del");
    assert_eq!(anomaly.requests, vec![6, 7]);
}

#[test]
fn no_counter_reset_does_not_judge_count_drops_of_algorithms_whose_count_falls() {
    // Identity 0's count falls from 3 to 1 with no notification: a reset for a fixed window.
    let history = three_requests().allowed(4, 1, 300, 302, 1).allowed(5, 0, 600, 602, 1);
    let fixed = history.check_one(NoCounterReset);
    assert_eq!(sole_anomaly(&fixed).kind, "reset-unexplained");
    assert!(
        fixed
            .rule
            .as_deref()
            .is_some_and(|r| r.contains("a count lower than one an earlier finished request saw")),
        "{fixed:#?}"
    );
    for algorithm in [
        Algorithm::SlidingLog,
        Algorithm::TokenBucket,
        Algorithm::Gcra,
        Algorithm::SlidingWindowCounter,
    ] {
        let result = history.check_one_as(algorithm, NoCounterReset);
        assert_verdict(&result, Verdict::Valid);
        assert_eq!(
            result.rule.as_deref(),
            Some(
                "an `evicted` notification for a live key is a reset (this algorithm's count falls as time passes, so drops in it are not judged)"
            ),
            "{algorithm:?}"
        );
    }
}

#[test]
fn no_counter_reset_sliding_log_still_reports_an_eviction_of_a_live_key() {
    let result = three_requests()
        .sample(50, false, &[("rl:0", 970, None)])
        .keyspace(100, "rl:0", "evicted")
        .allowed(4, 0, 200, 202, 1)
        .check_one_as(Algorithm::SlidingLog, NoCounterReset);
    let anomaly = sole_anomaly(&result);
    assert_eq!(anomaly.kind, "reset-by-eviction");
    assert_eq!(anomaly.key, "rl:0");
    assert_eq!(anomaly.requests, vec![3, 4]);
    assert_eq!(anomaly.t_us, us(100));
    assert_eq!(
        anomaly.seen,
        vec!["keyspace event: evicted".to_owned(), "count 3 -> 1".to_owned()]
    );
    assert!(
        anomaly
            .because
            .starts_with("the server evicted rl:0 while its window was live"),
        "{anomaly:#?}"
    );
}

// ---- admitted-within-limit ---------------------------------------------------------------

/// `n` requests by `identity` with ids from `first_id`, one per ms from `start_ms`, each
/// answered 1 ms later, seeing counts from `first_count`.
fn run_of(
    mut history: HistoryBuilder,
    outcome: Outcome,
    identity: u32,
    first_id: u64,
    start_ms: u64,
    n: u64,
    first_count: i64,
) -> HistoryBuilder {
    for i in 0..n {
        let t = start_ms + i;
        history = history.request(
            first_id + i,
            identity,
            t,
            t + 1,
            outcome,
            Some(first_count + i as i64),
            &["INCR"],
        );
    }
    history
}

/// Identity `identity` on a correct fixed window: 10 admitted (ids from `first_id`, one per
/// ms from 900 ms, counts 1 to 10) at the end of a window whose key expires at 1000 ms, then
/// `then` admitted at the start of the next window (one per ms from 1000 ms, counts from 1).
fn across_a_boundary(history: HistoryBuilder, identity: u32, first_id: u64, then: u64) -> HistoryBuilder {
    let history =
        run_of(history, Outcome::Allowed, identity, first_id, 900, 10, 1).keyspace(1000, &key(identity), "expired");
    run_of(history, Outcome::Allowed, identity, first_id + 10, 1000, then, 1)
}

/// (kind, key, requests) of every anomaly, in the result's order (all of them shown).
fn anomalies(result: &CheckResult) -> Vec<(&str, &str, Vec<u64>)> {
    assert_eq!(result.anomalies.len(), result.anomalies_total, "{result:#?}");
    result
        .anomalies
        .iter()
        .map(|a| (a.kind.as_str(), a.key.as_str(), a.requests.clone()))
        .collect()
}

#[test]
fn admitted_within_limit_valid_at_exactly_twice_the_limit_across_a_window_boundary() {
    // 10 admitted at the end of one window, 10 rejected, the key expires, 10 admitted at the
    // start of the next: 20 admissions within 110 ms, which a correct fixed window allows.
    let history = run_of(HistoryBuilder::new(), Outcome::Allowed, 0, 1, 900, 10, 1);
    let history = run_of(history, Outcome::Rejected, 0, 11, 910, 10, 11).keyspace(1000, "rl:0", "expired");
    let result = run_of(history, Outcome::Allowed, 0, 21, 1000, 10, 1).check_one(AdmittedWithinLimit);
    assert_verdict(&result, Verdict::Valid);
    assert_summary_has(&result, "at most 20 admitted per identity in any 1000 ms (bound 20)");
    assert!(
        result
            .rule
            .as_deref()
            .is_some_and(|r| r.contains("2 × requests_max = 20")),
        "{result:#?}"
    );
    assert!(result.notes.is_empty(), "{result:#?}");
}

#[test]
fn admitted_within_limit_invalid_at_twice_the_limit_plus_one_in_one_window() {
    // All 21 in one window of the key, each admitted with the count the limiter saw: over
    // the 2× bound, over the limit within the window, and over the limit by its own count.
    let result = run_of(HistoryBuilder::new(), Outcome::Allowed, 0, 1, 0, 21, 1).check_one(AdmittedWithinLimit);
    assert_eq!(result.verdict, Verdict::Invalid);
    assert_eq!(
        anomalies(&result),
        vec![
            ("over-admission-in-window", "rl:0", vec![1, 21]),
            ("over-admission", "rl:0", vec![1, 21]),
            ("admitted-over-count", "rl:0", vec![11, 12, 13, 14, 15]),
        ]
    );
    let anomaly = &result.anomalies[1];
    assert_eq!(anomaly.t_us, 0);
    assert_eq!(anomaly.seen[0], "21 admitted from request #1 to request #21");
    assert!(
        anomaly
            .because
            .contains("identity 0 was admitted 21 times within 1000 ms"),
        "{anomaly:#?}"
    );
    let in_window = &result.anomalies[0];
    assert_eq!(in_window.t_us, 0);
    assert_eq!(
        in_window.seen,
        vec!["21 admitted from 0.0 ms to 21.0 ms with no expiry of rl:0 in between".to_owned()]
    );
    let over_count = &result.anomalies[2];
    assert_eq!(over_count.t_us, us(10), "the first admission above the limit");
    assert_eq!(
        over_count.seen,
        vec!["11 admission(s) with a count above 10, the highest 21".to_owned()]
    );
}

#[test]
fn admitted_within_limit_names_the_identity_over_its_bound() {
    // Both identities get 10 + 10 across a window boundary; identity 1 gets a 21st in the
    // second window (its count, 11, says the window was full).
    let history = across_a_boundary(HistoryBuilder::new(), 0, 1, 10);
    let result = across_a_boundary(history, 1, 101, 11).check_one(AdmittedWithinLimit);
    assert_eq!(result.verdict, Verdict::Invalid);
    assert_eq!(
        anomalies(&result),
        vec![
            ("over-admission", "rl:1", vec![101, 121]),
            ("admitted-over-count", "rl:1", vec![121]),
        ]
    );
    assert!(
        result.anomalies[0]
            .because
            .contains("identity 1 was admitted 21 times within 1000 ms"),
        "{result:#?}"
    );
}

#[test]
fn admitted_within_limit_counts_each_identity_separately() {
    // 15 per identity within 110 ms (10 + 5 across a boundary); 30 together.
    let history = across_a_boundary(HistoryBuilder::new(), 0, 1, 5);
    let result = across_a_boundary(history, 1, 101, 5).check_one(AdmittedWithinLimit);
    assert_verdict(&result, Verdict::Valid);
    assert_summary_has(&result, "at most 15 admitted per identity");
}

#[test]
fn admitted_within_limit_valid_when_the_extra_admission_falls_outside_the_interval() {
    // 20 admitted at 0..20 ms, the 21st answered exactly one window after the 1st was sent:
    // the interval [0, 1000 ms) holds 20, as does [1 ms, 1001 ms). Judged as a token bucket,
    // whose only rule is this bound (a fixed window's counts would put all 21 in one window).
    let history = run_of(HistoryBuilder::new(), Outcome::Allowed, 0, 1, 0, 20, 1);
    let result = history
        .request(21, 0, 999, 1000, Outcome::Allowed, Some(1), &["INCR"])
        .check_one_as(Algorithm::TokenBucket, AdmittedWithinLimit);
    assert_verdict(&result, Verdict::Valid);
    assert_summary_has(&result, "at most 20 admitted per identity in any 1000 ms (bound 20)");
}

#[test]
fn admitted_within_limit_unknown_when_an_indeterminate_request_could_exceed_the_bound() {
    let history = across_a_boundary(HistoryBuilder::new(), 0, 1, 10);
    let result = history
        .request(21, 0, 1030, 1040, Outcome::Indeterminate, None, &["INCR"])
        .check_one(AdmittedWithinLimit);
    assert_verdict(&result, Verdict::Unknown);
    assert_summary_has(&result, "identities [0]");
}

#[test]
fn admitted_within_limit_errors_decided_nothing() {
    let history = across_a_boundary(HistoryBuilder::new(), 0, 1, 10);
    let result = history
        .request(21, 0, 1030, 1040, Outcome::Error, None, &["INCR"])
        .check_one(AdmittedWithinLimit);
    assert_verdict(&result, Verdict::Valid);
}

/// Identity 0's 12 requests in pairs sent 1 ms apart every 100 ms from 0 ms, each pair
/// answered after 5 ms with the same count (a read-then-write limiter losing updates), all
/// admitted; the key expires at 1000 ms.
fn lost_updates() -> HistoryBuilder {
    let mut history = HistoryBuilder::new();
    for pair in 0..6u64 {
        let t = pair * 100;
        let count = pair as i64 + 1;
        history = history
            .request(
                2 * pair + 1,
                0,
                t,
                t + 5,
                Outcome::Allowed,
                Some(count),
                &["GET", "SET"],
            )
            .request(
                2 * pair + 2,
                0,
                t + 1,
                t + 6,
                Outcome::Allowed,
                Some(count),
                &["GET", "SET"],
            );
    }
    history.keyspace(1000, "rl:0", "expired")
}

#[test]
fn admitted_within_limit_fixed_window_invalid_over_the_limit_within_one_window() {
    let result = lost_updates().check_one(AdmittedWithinLimit);
    let anomaly = sole_anomaly(&result);
    assert_eq!(anomaly.kind, "over-admission-in-window");
    assert_eq!(anomaly.key, "rl:0");
    assert_eq!(anomaly.requests, vec![1, 12], "first and last admission of the window");
    assert_eq!(anomaly.t_us, 0);
    assert_eq!(
        anomaly.seen,
        vec!["12 admitted from 0.0 ms to 506.0 ms with no expiry of rl:0 in between".to_owned()]
    );
    assert!(
        anomaly
            .because
            .starts_with("12 requests were admitted within one window of rl:0, more than requests_max 10"),
        "{anomaly:#?}"
    );
    assert!(
        result
            .rule
            .as_deref()
            .is_some_and(|r| r.contains("at most 10 within one window of a key")),
        "{result:#?}"
    );
}

#[test]
fn admitted_within_limit_over_the_limit_within_one_window_is_not_judged_without_keyspace_notifications() {
    let result = lost_updates().keyspace_lost().check_one(AdmittedWithinLimit);
    assert_verdict(&result, Verdict::Valid);
    assert_note_has(
        &result,
        "without keyspace notifications the windows' ends are unknown: admissions per window were not counted",
    );
}

#[test]
fn admitted_within_limit_ignores_requests_close_to_a_window_end() {
    // The key expires at 1000 ms but its notification is seen at 1040 ms: request 11, at
    // 1010 ms, already belongs to the next window (count 1), which then admits 9 more.
    let history = (0..10).fold(HistoryBuilder::new(), |h, i| {
        h.allowed(i + 1, 0, i * 50, i * 50 + 2, i as i64 + 1)
    });
    let history = history.allowed(11, 0, 1010, 1012, 1).keyspace(1040, "rl:0", "expired");
    let history = (1..10).fold(history, |h, i| {
        h.allowed(11 + i, 0, 1050 + i * 50, 1052 + i * 50, i as i64 + 1)
    });
    let result = history.check_one(AdmittedWithinLimit);
    assert_verdict(&result, Verdict::Valid);
    // The exclusion is only near the end: an 11th admission well inside the first window
    // (a lost update, count 10 again) is one too many.
    let result = history.allowed(21, 0, 900, 902, 10).check_one(AdmittedWithinLimit);
    let anomaly = sole_anomaly(&result);
    assert_eq!(anomaly.kind, "over-admission-in-window");
    assert_eq!(anomaly.requests, vec![1, 21]);
}

#[test]
fn admitted_within_limit_fixed_window_invalid_when_admitted_with_a_count_above_the_limit() {
    // Requests 10 and 11 race: both read 9, both are admitted, their writes make 10 and 11.
    let history = run_of(HistoryBuilder::new(), Outcome::Allowed, 0, 1, 0, 9, 1)
        .request(10, 0, 450, 460, Outcome::Allowed, Some(10), &["GET", "INCR"])
        .request(11, 0, 451, 461, Outcome::Allowed, Some(11), &["GET", "INCR"])
        .rejected(12, 0, 600, 601, 12)
        .keyspace(1000, "rl:0", "expired");
    let result = history.check_one(AdmittedWithinLimit);
    assert_eq!(result.verdict, Verdict::Invalid);
    assert_eq!(
        anomalies(&result),
        vec![
            ("over-admission-in-window", "rl:0", vec![1, 11]),
            ("admitted-over-count", "rl:0", vec![11]),
        ]
    );
    let over_count = &result.anomalies[1];
    assert_eq!(over_count.t_us, us(451));
    assert_eq!(
        over_count.seen,
        vec!["1 admission(s) with a count above 10, the highest 11".to_owned()]
    );
    assert!(
        over_count
            .because
            .starts_with("request #11 was admitted with count 11 > requests_max 10"),
        "{over_count:#?}"
    );
    // The count needs no notification: it is judged even when they were lost.
    let result = history.keyspace_lost().check_one(AdmittedWithinLimit);
    assert_eq!(sole_anomaly(&result).kind, "admitted-over-count");
    assert_note_has(&result, "admissions per window were not counted");
}

#[test]
fn admitted_within_limit_sliding_log_bound_is_the_limit_itself() {
    // 10 admitted at 0..10 ms and an 11th at 100 ms, no expiry notification.
    let ten = run_of(HistoryBuilder::new(), Outcome::Allowed, 0, 1, 0, 10, 1);
    let result = ten.check_one_as(Algorithm::SlidingLog, AdmittedWithinLimit);
    assert_verdict(&result, Verdict::Valid);
    assert_summary_has(&result, "at most 10 admitted per identity in any 1000 ms (bound 10)");
    let eleven = ten.allowed(11, 0, 100, 101, 11);
    let result = eleven.check_one_as(Algorithm::SlidingLog, AdmittedWithinLimit);
    let anomaly = sole_anomaly(&result);
    assert_eq!(anomaly.kind, "over-admission");
    assert_eq!(anomaly.key, "rl:0");
    assert_eq!(anomaly.requests, vec![1, 11]);
    assert_eq!(anomaly.seen[0], "11 admitted from request #1 to request #11");
    assert!(
        anomaly
            .because
            .contains("identity 0 was admitted 11 times within 1000 ms, 1.1× the bound of 10"),
        "{anomaly:#?}"
    );
    assert!(
        result
            .rule
            .as_deref()
            .is_some_and(|r| r.starts_with("at most requests_max = 10 admitted per identity in any 1000 ms")),
        "{result:#?}"
    );
    assert!(result.notes.is_empty(), "no fixed-window rule applies: {result:#?}");
    // A token bucket or GCRA may admit a burst plus a window's refill: 11 is fine, and the
    // fixed window's per-window and per-count rules do not apply to them.
    for algorithm in [Algorithm::TokenBucket, Algorithm::Gcra] {
        let result = eleven.check_one_as(algorithm, AdmittedWithinLimit);
        assert_verdict(&result, Verdict::Valid);
        assert_summary_has(&result, "at most 11 admitted per identity in any 1000 ms (bound 20)");
        assert!(result.notes.is_empty(), "{result:#?}");
    }
}

#[test]
fn admitted_within_limit_token_bucket_and_gcra_bound_is_twice_the_limit() {
    let history = run_of(HistoryBuilder::new(), Outcome::Allowed, 0, 1, 0, 21, 1);
    for (algorithm, name) in [(Algorithm::TokenBucket, "token bucket"), (Algorithm::Gcra, "GCRA")] {
        let result = history.check_one_as(algorithm, AdmittedWithinLimit);
        let anomaly = sole_anomaly(&result);
        assert_eq!(anomaly.kind, "over-admission");
        assert_eq!(anomaly.requests, vec![1, 21]);
        assert!(
            anomaly
                .because
                .contains("21 times within 1000 ms, 1.1× the bound of 20"),
            "{anomaly:#?}"
        );
        let rule = result.rule.as_deref().unwrap_or_default();
        assert!(
            rule.starts_with("at most 2 × requests_max = 20") && rule.ends_with(&format!("({name})")),
            "{rule}"
        );
    }
}

#[test]
fn admitted_within_limit_sliding_window_counter_bound_is_two_of_its_windows() {
    // 20 admitted in one window: both of the counter's windows full — at the bound, and no
    // fixed-window rule (the count is the weighted sum, not one counter's).
    let twenty = run_of(HistoryBuilder::new(), Outcome::Allowed, 0, 1, 0, 20, 1);
    let result = twenty.check_one_as(Algorithm::SlidingWindowCounter, AdmittedWithinLimit);
    assert_verdict(&result, Verdict::Valid);
    assert!(result.notes.is_empty(), "{result:#?}");
    let rule = result.rule.as_deref().unwrap_or_default();
    assert!(rule.starts_with("at most 2 × requests_max = 20"), "{rule}");
    let history = run_of(HistoryBuilder::new(), Outcome::Allowed, 0, 1, 0, 21, 1);
    let result = history.check_one_as(Algorithm::SlidingWindowCounter, AdmittedWithinLimit);
    assert_eq!(sole_anomaly(&result).kind, "over-admission");
}

// ---- no-lockout --------------------------------------------------------------------------

#[test]
fn no_lockout_valid_when_the_first_request_after_a_quiet_window_is_admitted() {
    let result = HistoryBuilder::new()
        .allowed(1, 0, 0, 2, 1)
        .allowed(2, 0, 1500, 1502, 1)
        .check_one(NoLockout);
    assert_verdict(&result, Verdict::Valid);
    assert_summary_has(&result, "all 1 request(s) after a quiet period");
}

#[test]
fn no_lockout_invalid_when_the_first_request_after_a_quiet_window_is_rejected() {
    let result = HistoryBuilder::new()
        .allowed(1, 0, 0, 2, 1)
        .sample(800, false, &[("rl:0", -1, Some("11"))])
        .rejected(2, 0, 1500, 1502, 12)
        .rejected(3, 0, 1510, 1512, 13)
        .check_one(NoLockout);
    let anomaly = sole_anomaly(&result);
    assert_eq!(anomaly.kind, "lockout");
    assert_eq!(anomaly.key, "rl:0");
    assert_eq!(anomaly.requests, vec![2]);
    assert_eq!(anomaly.t_us, us(1500));
    assert_eq!(
        anomaly.seen,
        vec![
            "quiet for 1498.0 ms".to_owned(),
            "rejected with count 12".to_owned(),
            "2 of 2 later request(s) rejected".to_owned(),
            "last sampled PTTL of rl:0 was -1".to_owned(),
        ]
    );
    assert!(
        anomaly.because.contains("rl:0 has no TTL and will never expire"),
        "{anomaly:#?}"
    );
}

#[test]
fn no_lockout_another_identity_does_not_end_the_quiet_period() {
    let result = HistoryBuilder::new()
        .allowed(1, 0, 0, 2, 1)
        .allowed(2, 1, 500, 502, 1)
        .allowed(3, 1, 1000, 1002, 2)
        .rejected(4, 0, 1500, 1502, 11)
        .check_one(NoLockout);
    let anomaly = sole_anomaly(&result);
    assert_eq!(anomaly.key, "rl:0");
    assert_eq!(anomaly.requests, vec![4]);
}

#[test]
fn no_lockout_unknown_without_a_quiet_period() {
    let mut history = HistoryBuilder::new();
    for i in 0..20 {
        history = history.rejected(i + 1, 0, i * 100, i * 100 + 2, 11);
    }
    let result = history.check_one(NoLockout);
    assert_verdict(&result, Verdict::Unknown);
    assert_summary_has(&result, "no identity sent a request after a quiet period of 1020.0 ms");
}

#[test]
fn no_lockout_a_gap_of_exactly_one_window_is_not_enough() {
    // Quiet must be window + ttl_slack + 20 ms = 1020 ms, measured from the last answer.
    let result = HistoryBuilder::new()
        .allowed(1, 0, 0, 2, 1)
        .rejected(2, 0, 1002, 1004, 2)
        .check_one(NoLockout);
    assert_verdict(&result, Verdict::Unknown);
}

#[test]
fn no_lockout_measures_the_gap_from_the_last_answer() {
    // Sent 1500 ms apart, but the first answer came at 600 ms: quiet for only 900 ms.
    let result = HistoryBuilder::new()
        .allowed(1, 0, 0, 600, 1)
        .rejected(2, 0, 1500, 1502, 2)
        .check_one(NoLockout);
    assert_verdict(&result, Verdict::Unknown);
}

#[test]
fn no_lockout_quiet_period_includes_the_ttl_slack() {
    let history = HistoryBuilder::new()
        .allowed(1, 0, 0, 2, 1)
        .rejected(2, 0, 1500, 1502, 2);
    let mut config = config(&[NoLockout]);
    config.ttl_slack_ms = 600;
    let result = history.check_with(&limit(), &config).remove(0);
    assert_verdict(&result, Verdict::Unknown);
    config.ttl_slack_ms = 0;
    let result = history.check_with(&limit(), &config).remove(0);
    assert_eq!(sole_anomaly(&result).kind, "lockout");
}

#[test]
fn no_lockout_unknown_when_the_request_after_quiet_got_no_decision() {
    let result = HistoryBuilder::new()
        .allowed(1, 0, 0, 2, 1)
        .request(2, 0, 1500, 1600, Outcome::Indeterminate, None, &["INCR"])
        .check_one(NoLockout);
    assert_verdict(&result, Verdict::Unknown);
    assert_summary_has(&result, "got no decision (requests [2])");
}

// ---- admits-up-to-limit -----------------------------------------------------------------

/// Identity `identity`'s requests at `times_ms` (ids from `first_id`, each answered 1 ms
/// later) to a correct fixed window: a window opens with the first request after the last
/// one ended, its key's `expired` notification arrives at the window's end, and a request
/// is admitted while its count is within the limit.
fn fixed_window(
    mut history: HistoryBuilder,
    identity: u32,
    first_id: u64,
    times_ms: impl IntoIterator<Item = u64>,
) -> HistoryBuilder {
    let (max, window_ms) = (limit().requests_max as i64, limit().window_ms);
    let mut opened: Option<u64> = None;
    let mut count = 0;
    for (id, t) in (first_id..).zip(times_ms) {
        if let Some(start) = opened
            && t >= start + window_ms
        {
            history = history.keyspace(start + window_ms, &key(identity), "expired");
            opened = None;
        }
        if opened.is_none() {
            opened = Some(t);
            count = 0;
        }
        count += 1;
        history = if count <= max {
            history.allowed(id, identity, t, t + 1, count)
        } else {
            history.rejected(id, identity, t, t + 1, count)
        };
    }
    history
}

/// Identity 0 sends every 50 ms from 0 to 2000 ms (41 requests, one full span of two
/// windows holding the first 40) against a key planted at 20 whose TTL ends at
/// `expires_ms`: refused until then, then a fresh window admits up to the limit.
fn refused_until(expires_ms: u64) -> HistoryBuilder {
    let mut history = HistoryBuilder::new().setup(0, "rl:0", &format!("SET rl:0 20 PX {expires_ms}"));
    let mut expired = false;
    let mut count = 20;
    for (id, t) in (1..).zip((0..=2000).step_by(50)) {
        if !expired && t >= expires_ms {
            history = history.keyspace(expires_ms, "rl:0", "expired");
            expired = true;
            count = 0;
        }
        count += 1;
        history = if count <= 10 {
            history.allowed(id, 0, t, t + 1, count)
        } else {
            history.rejected(id, 0, t, t + 1, count)
        };
    }
    history
}

#[test]
fn admits_up_to_limit_valid_when_a_busy_identity_gets_the_limit_each_window() {
    // Identity 0 sends every 50 ms for two windows and gets 10 per window; identity 1 sends
    // too little to be judged.
    let history = fixed_window(HistoryBuilder::new(), 0, 1, (0..=2000).step_by(50));
    let result = fixed_window(history, 1, 101, [0, 500, 1000]).check_one(AdmitsUpToLimit);
    assert_verdict(&result, Verdict::Valid);
    assert_summary_has(&result, "admitted at least 9 per two windows (1 span(s))");
    assert_eq!(
        result.rule.as_deref(),
        Some(
            "in every span of 2 × 1000 ms in which an identity sent at least 20 requests, at least 9 admitted (requests_max 10 − tolerance 1)"
        )
    );
}

#[test]
fn admits_up_to_limit_invalid_when_a_key_without_ttl_refuses_everything() {
    let mut history = HistoryBuilder::new().setup(0, "rl:0", "SET rl:0 20 (no TTL)");
    for (id, t) in (1..).zip((0..=2000).step_by(50)) {
        history = history.rejected(id, 0, t, t + 1, 20 + id as i64);
    }
    let result = history
        .sample(1000, false, &[("rl:0", -1, Some("41"))])
        .check_one(AdmitsUpToLimit);
    let anomaly = sole_anomaly(&result);
    assert_eq!(anomaly.kind, "starved");
    assert_eq!(anomaly.key, "rl:0");
    assert_eq!(anomaly.requests, vec![1, 40], "first and last request of the span");
    assert_eq!(anomaly.t_us, 0);
    assert_eq!(
        anomaly.seen,
        vec![
            "40 requests sent, 0 admitted, from 0.0 ms to 1950.0 ms".to_owned(),
            "0 expiry/eviction notification(s) for rl:0 in the span".to_owned(),
            "last sampled PTTL in the span: -1".to_owned(),
        ]
    );
    assert_eq!(
        anomaly.because,
        "identity 0 sent 40 requests over two windows but was admitted 0 times, fewer than 9: rl:0 has no TTL: it never expires"
    );
}

#[test]
fn admits_up_to_limit_invalid_when_traffic_keeps_extending_the_window() {
    // Every request pushes the TTL back: the first window admits 10 and never ends. The
    // first span (0..2000 ms) got its 10; the second (2000..4000 ms) got none.
    let mut history = HistoryBuilder::new();
    for (id, t) in (1..).zip((0..=4000).step_by(50)) {
        let count = id as i64;
        let outcome = if count <= 10 {
            Outcome::Allowed
        } else {
            Outcome::Rejected
        };
        history = history.request(id, 0, t, t + 1, outcome, Some(count), &["INCR", "PEXPIRE"]);
    }
    let result = history
        .sample(3020, false, &[("rl:0", 980, Some("61"))])
        .check_one(AdmitsUpToLimit);
    let anomaly = sole_anomaly(&result);
    assert_eq!(anomaly.kind, "starved");
    assert_eq!(anomaly.key, "rl:0");
    assert_eq!(anomaly.requests, vec![41, 80]);
    assert_eq!(anomaly.t_us, us(2000));
    assert_eq!(
        anomaly.seen,
        vec![
            "40 requests sent, 0 admitted, from 2000.0 ms to 3950.0 ms".to_owned(),
            "0 expiry/eviction notification(s) for rl:0 in the span".to_owned(),
            "last sampled PTTL in the span: 980".to_owned(),
        ]
    );
    assert!(
        anomaly
            .because
            .ends_with("rl:0 never expired during the span: the window keeps being extended or never ends"),
        "{anomaly:#?}"
    );
}

#[test]
fn admits_up_to_limit_tolerates_one_admission_short_of_the_limit() {
    // Expiring at 1510 ms leaves 9 admissions in the span (1550..1950 ms): the limit less
    // the tolerance of 1. Expiring at 1560 ms leaves 8.
    assert_verdict(&refused_until(1510).check_one(AdmitsUpToLimit), Verdict::Valid);
    let result = refused_until(1560).check_one(AdmitsUpToLimit);
    let anomaly = sole_anomaly(&result);
    assert_eq!(anomaly.kind, "starved");
    assert_eq!(anomaly.key, "rl:0");
    assert_eq!(anomaly.requests, vec![1, 40]);
    assert_eq!(
        anomaly.seen,
        vec![
            "40 requests sent, 8 admitted, from 0.0 ms to 1950.0 ms".to_owned(),
            "1 expiry/eviction notification(s) for rl:0 in the span".to_owned(),
        ]
    );
    assert_eq!(
        anomaly.because,
        "identity 0 sent 40 requests over two windows but was admitted 8 times, fewer than 9: rl:0 expired 1 time(s) but the identity was still refused"
    );
}

#[test]
fn admits_up_to_limit_unknown_when_no_span_has_enough_traffic() {
    // Refused throughout by a key without TTL, but only 19 requests in the one full span
    // (every 105 ms from 0 to 1890 ms, then one at 2000 ms): below 2 × the limit.
    let mut history = HistoryBuilder::new().setup(0, "rl:0", "SET rl:0 20 (no TTL)");
    let times = (0..19).map(|i| i * 105).chain([2000]);
    for (id, t) in (1..).zip(times) {
        history = history.rejected(id, 0, t, t + 1, 20 + id as i64);
    }
    let result = history.check_one(AdmitsUpToLimit);
    assert_verdict(&result, Verdict::Unknown);
    assert_summary_has(
        &result,
        "no identity sent 20 or more requests over two windows: nothing to judge",
    );
}

#[test]
fn admits_up_to_limit_spans_do_not_cross_a_quiet_window() {
    // 21 refused requests within 0..2000 ms, but split by a quiet window (450 -> 1450 ms):
    // two busy periods, neither two windows long. (The refusal after the quiet window is
    // no-lockout's to report.)
    let mut history = HistoryBuilder::new().setup(0, "rl:0", "SET rl:0 20 (no TTL)");
    let times = (0..=450).step_by(50).chain((1450..=2000).step_by(50));
    for (id, t) in (1..).zip(times) {
        history = history.rejected(id, 0, t, t + 1, 20 + id as i64);
    }
    let result = history.check_one(AdmitsUpToLimit);
    assert_verdict(&result, Verdict::Unknown);
    assert_summary_has(&result, "nothing to judge");
}

#[test]
fn admits_up_to_limit_unknown_when_unanswered_requests_could_reach_the_bound() {
    // The server stops answering at 250 ms: 5 admitted, 35 timed out in the span.
    let history = fixed_window(HistoryBuilder::new(), 0, 1, (0..250).step_by(50));
    let history = (6..).zip((250..=2000).step_by(50)).fold(history, |h, (id, t)| {
        h.request(id, 0, t, t + 100, Outcome::Indeterminate, None, &["INCR"])
    });
    let result = history.check_one(AdmitsUpToLimit);
    assert_verdict(&result, Verdict::Unknown);
    assert_summary_has(
        &result,
        "1 span(s) reach 9 admissions only if their unanswered requests were admitted",
    );
}

/// A limiter whose every request is refused (CROSSSLOT on a cluster) decides nothing: its
/// caller either admits nothing or everything, whatever fault struck first but an injected
/// error. Other errors after a fault may be the fault's.
#[test]
fn admits_up_to_limit_invalid_when_the_limiter_decides_nothing_without_a_fault() {
    const CROSSSLOT: &str = "CrossSlot: Keys in request don't hash to the same slot";
    let refused = |history: HistoryBuilder| {
        (1..)
            .zip((0..=2000).step_by(50))
            .fold(history, |h, (id, t)| h.failed(id, 0, (t, t + 1), CROSSSLOT))
    };
    let result = refused(HistoryBuilder::new()).check_one(AdmitsUpToLimit);
    let anomaly = sole_anomaly(&result);
    assert_eq!(anomaly.kind, "never-decided");
    assert!(anomaly.because.contains(CROSSSLOT), "{}", anomaly.because);
    assert!(
        anomaly.seen[1].starts_with("40 of them: CrossSlot"),
        "{:?}",
        anomaly.seen
    );
    // A refusal its keys decide is no fault's doing (a reshard, a pause struck first): still
    // never-decided, and said so. Only an injected error makes one.
    for kind in [FaultKind::Reshard, FaultKind::ServerPause, FaultKind::NodePause] {
        let faulted = refused(HistoryBuilder::new().fault(0, kind, None, None)).check_one(AdmitsUpToLimit);
        let anomaly = sole_anomaly(&faulted);
        assert!(anomaly.seen[0].contains("which no fault makes"), "{:?}", anomaly.seen);
    }
    let injected = refused(HistoryBuilder::new().fault(0, FaultKind::InjectError, None, None));
    assert_verdict(&injected.check_one(AdmitsUpToLimit), Verdict::Unknown);
    // Other errors after a fault may be the fault's: unknown.
    let lost = (1..).zip((0..=2000).step_by(50)).fold(
        HistoryBuilder::new().fault(0, FaultKind::ServerPause, None, None),
        |h, (id, t)| h.failed(id, 0, (t, t + 1), "timed out waiting for the reply"),
    );
    assert_verdict(&lost.check_one(AdmitsUpToLimit), Verdict::Unknown);
    assert!(
        sole_anomaly(&refused(HistoryBuilder::new()).check_one(AdmitsUpToLimit)).seen[0].contains("no fault struck")
    );
    // One decision in the span: the limiter works; the errors leave the span undecided.
    let decided = refused(HistoryBuilder::new()).rejected(100, 0, 1000, 1001, 20);
    assert_verdict(&decided.check_one(AdmitsUpToLimit), Verdict::Unknown);
    // The run explains the errors itself: an adapter declared dead (a fatal problem), or a
    // server too old for the limiter's commands. Unknown, as before.
    let dead = refused(HistoryBuilder::new()).problem(true);
    assert_verdict(&dead.check_one(AdmitsUpToLimit), Verdict::Unknown);
    let old = refused(HistoryBuilder::new()).problem_from(crate::history::ProblemSource::ServerVersion, false);
    assert_verdict(&old.check_one(AdmitsUpToLimit), Verdict::Unknown);
}

// ---- no-leaked-keys ----------------------------------------------------------------------

#[test]
fn no_leaked_keys_valid_when_only_recently_used_keys_remain() {
    // rl:0 went quiet at 22 ms and is gone; rl:1 was used at 2500 ms and is still live.
    let result = three_requests()
        .allowed(4, 1, 2498, 2500, 1)
        .sample(3000, true, &[("rl:1", 498, Some("1"))])
        .check_one(NoLeakedKeys);
    assert_verdict(&result, Verdict::Valid);
    assert_summary_has(
        &result,
        "1 limiter key(s) at the final audit, none idle longer than 1020.0 ms (1 key(s) of quiet identities judged)",
    );
    assert_eq!(
        result.rule.as_deref(),
        Some(
            "at the final audit, no limiter key whose identity's last request was answered more than 1020.0 ms earlier"
        )
    );
}

#[test]
fn no_leaked_keys_allows_a_window_and_the_slack_of_idleness() {
    let history = |answered_ms: u64| {
        HistoryBuilder::new()
            .allowed(1, 0, answered_ms - 2, answered_ms, 1)
            .sample(3000, true, &[("rl:0", -1, Some("1"))])
    };
    // Exactly a window and the slack idle: not a leak (and not yet judged either).
    let boundary = history(1980).check_one(NoLeakedKeys);
    assert!(boundary.anomalies.is_empty(), "{boundary:#?}");
    assert_ne!(boundary.verdict, Verdict::Invalid);
    let result = history(1979).check_one(NoLeakedKeys);
    let anomaly = sole_anomaly(&result);
    assert_eq!(anomaly.kind, "leaked-key");
    assert_eq!(anomaly.seen[1], "idle for 1021.0 ms");
}

#[test]
fn no_leaked_keys_invalid_names_each_key_still_there_long_after_its_last_request() {
    // rl:0 has no TTL; rl:1 has one that something keeps pushing back.
    let result = three_requests()
        .allowed(4, 1, 100, 102, 1)
        .sample(3000, true, &[("rl:0", -1, Some("3")), ("rl:1", 800, Some("1"))])
        .check_one(NoLeakedKeys);
    assert_eq!(result.verdict, Verdict::Invalid);
    assert_eq!(
        anomalies(&result),
        vec![("leaked-key", "rl:0", vec![3]), ("leaked-key", "rl:1", vec![4])]
    );
    let (no_ttl, pushed_back) = (&result.anomalies[0], &result.anomalies[1]);
    assert_eq!(no_ttl.t_us, us(3000));
    assert_eq!(
        no_ttl.seen,
        vec!["PTTL -1 at the final audit".to_owned(), "idle for 2978.0 ms".to_owned()]
    );
    assert_eq!(
        no_ttl.because,
        "rl:0 is still there 2978.0 ms after its last request (it may live 1000 ms): it has no TTL"
    );
    assert_eq!(
        pushed_back.seen,
        vec![
            "PTTL 800 at the final audit".to_owned(),
            "idle for 2898.0 ms".to_owned()
        ]
    );
    assert_eq!(
        pushed_back.because,
        "rl:1 is still there 2898.0 ms after its last request (it may live 1000 ms)"
    );
}

#[test]
fn no_leaked_keys_a_planted_key_no_request_touched_is_leaked() {
    // rl:1 was planted and never used; rl:7 is a key no identity of the run uses.
    let result = three_requests()
        .setup(0, "rl:1", "SET rl:1 20 (no TTL)")
        .sample(3000, true, &[("rl:1", -1, Some("20")), ("rl:7", -1, Some("1"))])
        .check_one(NoLeakedKeys);
    let anomaly = sole_anomaly(&result);
    assert_eq!(anomaly.kind, "leaked-key");
    assert_eq!(anomaly.key, "rl:1");
    assert_eq!(anomaly.requests, Vec::<u64>::new());
    assert_eq!(anomaly.seen[1], "idle for 3000.0 ms");
}

#[test]
fn no_leaked_keys_unknown_without_a_final_audit() {
    // A mid-run sample that shows an idle key is not the audit.
    let result = three_requests()
        .sample(3000, false, &[("rl:0", -1, Some("3"))])
        .check_one(NoLeakedKeys);
    assert_verdict(&result, Verdict::Unknown);
    assert_summary_has(&result, "the final audit of the limiter's keys did not happen");
    assert!(result.rule.is_some(), "the rule is stated even when Unknown");
}

// ---- all checkers ------------------------------------------------------------------------

#[test]
fn results_follow_the_scenarios_order() {
    let order = [
        NoLeakedKeys,
        NoLockout,
        TtlPresent,
        AdmitsUpToLimit,
        AdmittedWithinLimit,
        NoCounterReset,
        TtlBounded,
    ];
    let results = three_requests().empty_final_audit(3000).check(&order);
    let judged: Vec<Invariant> = results.iter().map(|r| r.invariant).collect();
    assert_eq!(judged, order);
}

#[test]
fn a_fatal_problem_turns_valid_into_unknown() {
    let history = three_requests()
        .sample(50, false, &[("rl:0", 950, Some("3"))])
        .empty_final_audit(3000);
    assert_verdict(&history.check_one(TtlPresent), Verdict::Valid);
    let result = history.problem(true).check_one(TtlPresent);
    assert_verdict(&result, Verdict::Unknown);
    assert_summary_has(
        &result,
        "could not finish observing (final-audit: final-audit went away)",
    );
}

#[test]
fn a_non_fatal_problem_leaves_valid_alone() {
    let result = three_requests()
        .sample(50, false, &[("rl:0", 950, Some("3"))])
        .empty_final_audit(3000)
        .problem_from(crate::history::ProblemSource::Sampler, false)
        .check_one(TtlPresent);
    assert_verdict(&result, Verdict::Valid);
}

#[test]
fn a_fatal_problem_leaves_invalid_invalid() {
    let results = three_requests()
        .keyspace(500, "rl:0", "del")
        .allowed(4, 0, 600, 602, 1)
        .sample(3000, true, &[("rl:0", -1, Some("1"))])
        .problem(true)
        .check(&[TtlPresent, NoCounterReset]);
    assert_eq!(sole_anomaly(&results[0]).kind, "immortal-key");
    assert_eq!(sole_anomaly(&results[1]).kind, "reset-by-del");
}

// --- no-double-count ---

#[test]
fn a_write_sent_again_after_its_reply_was_lost_is_a_double_count() {
    let history = HistoryBuilder::new()
        .allowed(1, 0, 0, 1, 1)
        .request(2, 0, 10, 20, Outcome::Allowed, Some(3), &["MULTI INCR PEXPIRE EXEC"])
        .wire(11, 2, &["MULTI", "INCR rl:0", "PEXPIRE rl:0 1000 NX", "EXEC"])
        .command_fault(11, FaultKind::DropReply, 2, "EXEC")
        .wire(15, 2, &["MULTI", "INCR rl:0", "PEXPIRE rl:0 1000 NX", "EXEC"]);
    let result = history.check_one(NoDoubleCount);
    assert_verdict(&result, Verdict::Invalid);
    let kinds: Vec<&str> = result.anomalies.iter().map(|a| a.kind.as_str()).collect();
    assert!(kinds.contains(&"retried-after-lost-reply"), "{kinds:?}");
    assert!(
        kinds.contains(&"double-count"),
        "count 1 -> 3 over one request: {kinds:?}"
    );
}

#[test]
fn a_lost_reply_counted_once_is_no_double_count() {
    let result = HistoryBuilder::new()
        .allowed(1, 0, 0, 1, 1)
        .request(2, 0, 10, 20, Outcome::Indeterminate, None, &["INCR"])
        .wire(11, 2, &["INCR rl:0"])
        .command_fault(11, FaultKind::DropReply, 2, "INCR")
        .allowed(3, 0, 30, 31, 3)
        .check_one(NoDoubleCount);
    assert_verdict(&result, Verdict::Valid);
}

#[test]
fn overlapping_requests_are_not_compared() {
    // Request 2 overlaps request 3 and 4: its increment may land after 3's answer, so 3 -> 4
    // jumping by two is not evidence.
    let result = HistoryBuilder::new()
        .allowed(1, 0, 0, 1, 1)
        .allowed(2, 0, 5, 40, 3)
        .allowed(3, 0, 10, 11, 2)
        .allowed(4, 0, 20, 21, 4)
        .check_one(NoDoubleCount);
    assert_ne!(result.verdict, Verdict::Invalid, "{result:#?}");
}

/// Two requests of one identity in flight through the proxy: both transactions are put down
/// to the older (12), the younger (13) learns no key. 12 and 21 look like neighbours on the
/// key with the count jumping by two, but 13 overlapped 12 and may have counted in between
/// (seen on a correct MULTI INCR/PEXPIRE NX adapter under a burst).
#[test]
fn a_request_whose_keys_went_to_a_concurrent_one_breaks_the_chain() {
    let history = HistoryBuilder::new()
        .allowed(6, 1, 0, 1, 4)
        .request(
            12,
            1,
            10,
            16,
            Outcome::Allowed,
            Some(5),
            &["MULTI INCRBY PEXPIRE EXEC"; 2],
        )
        .request_on(13, 1, (us(11), us(17)), Outcome::Allowed, Some(6), &[], &[])
        .allowed(21, 1, 20, 21, 7);
    let result = history.check_one(NoDoubleCount);
    assert_ne!(result.verdict, Verdict::Invalid, "{result:#?}");
    // Without the concurrent request the same jump is a double count.
    let alone = HistoryBuilder::new()
        .allowed(6, 1, 0, 1, 4)
        .allowed(12, 1, 10, 16, 5)
        .allowed(21, 1, 20, 21, 7)
        .check_one(NoDoubleCount);
    assert_verdict(&alone, Verdict::Invalid);
}

/// A write seen again after a lost reply while another request of the identity was in
/// flight may be that one's: not judged a retry. So is a lost reply whose write was sent
/// while another was in flight (the proxy puts concurrent round trips down to the oldest
/// request: the write and its lost reply may have been the other's, and the "again" the
/// request's own first; seen on `incr-then-expire`, which never retries, in a burst with a
/// reply dropped on every INCR). Alone, it is one.
#[test]
fn a_write_seen_again_while_another_request_was_in_flight_is_not_a_retry() {
    let with = |concurrent: Option<(u64, u64)>| {
        let mut h = HistoryBuilder::new()
            .request(2, 0, 10, 20, Outcome::Allowed, Some(2), &["INCR", "INCR"])
            .wire(11, 2, &["INCR rl:0"])
            .command_fault(11, FaultKind::DropReply, 2, "INCR")
            .wire(15, 2, &["INCR rl:0"]);
        if let Some((from, to)) = concurrent {
            h = h.request_on(3, 0, (from, to), Outcome::Allowed, Some(1), &[], &[]);
        }
        h.check_one(NoDoubleCount)
    };
    let retried = |r: &CheckResult| {
        r.anomalies
            .iter()
            .any(|a| a.kind.as_str() == "retried-after-lost-reply")
    };
    assert!(retried(&with(None)), "alone: a retry");
    let at_the_retry = with(Some((us(12), us(18))));
    assert!(!retried(&at_the_retry), "{at_the_retry:#?}");
    let at_the_drop = with(Some((us(9), us(13))));
    assert!(!retried(&at_the_drop), "{at_the_drop:#?}");
}

#[test]
fn double_count_needs_something_to_judge() {
    let result = HistoryBuilder::new().allowed(1, 0, 0, 1, 1).check_one(NoDoubleCount);
    assert_verdict(&result, Verdict::Unknown);
    let log = HistoryBuilder::new()
        .allowed(1, 0, 0, 1, 1)
        .allowed(2, 0, 10, 11, 2)
        .check_one_as(Algorithm::SlidingLog, NoDoubleCount);
    assert_verdict(&log, Verdict::Unknown);
}

// --- errors-surfaced ---

#[test]
fn a_swallowed_injected_error_is_reported() {
    let history = HistoryBuilder::new()
        .allowed(1, 0, 0, 2, 1)
        .wire(1, 1, &["INCR rl:0"])
        .command_fault(1, FaultKind::InjectError, 1, "INCR");
    let result = history.check_one(ErrorsSurfaced);
    assert_verdict(&result, Verdict::Invalid);
    assert_eq!(sole_anomaly(&result).kind, "error-admitted");
}

#[test]
fn another_command_after_the_error_is_no_recovery_but_the_same_one_is() {
    let swallowed = HistoryBuilder::new()
        .allowed(1, 0, 0, 5, 1)
        .wire(1, 1, &["GET rl:0"])
        .command_fault(1, FaultKind::InjectError, 1, "GET")
        .wire(2, 1, &["SET rl:0 1 PX 1000"])
        .check_one(ErrorsSurfaced);
    assert_verdict(&swallowed, Verdict::Invalid);
    let recovered = HistoryBuilder::new()
        .allowed(1, 0, 0, 5, 1)
        .wire(1, 1, &["EVALSHA abc 1 rl:0"])
        .command_fault(1, FaultKind::InjectError, 1, "EVALSHA")
        .wire(2, 1, &["SCRIPT LOAD ..."])
        .wire(3, 1, &["EVALSHA abc 1 rl:0"])
        .check_one(ErrorsSurfaced);
    assert_verdict(&recovered, Verdict::Valid);
    assert_summary_has(&recovered, "1 recovered");
}

/// Two requests of one identity in flight: the proxy puts the younger's INCR down to the
/// older (the oldest in flight) and the error goes to the younger. The older, admitted with
/// no error, is no swallowed error when the younger reported one (seen on `incr-then-expire`
/// in a burst: a false `error-admitted` in 4 of 5 runs); when both were decided with no
/// error, whichever got it swallowed it.
#[test]
fn an_error_struck_while_another_request_was_in_flight_is_judged_on_both() {
    let with = |younger: Outcome| {
        HistoryBuilder::new()
            .allowed(1, 0, 0, 5, 1)
            .request(2, 0, 1, 4, younger, None, &["INCR"])
            .wire(1, 1, &["INCR rl:0"])
            .wire(2, 1, &["INCR rl:0"])
            .command_fault(2, FaultKind::InjectError, 1, "INCR")
            .check_one(ErrorsSurfaced)
    };
    let reported = with(Outcome::Error);
    assert!(reported.anomalies.is_empty(), "{reported:#?}");
    assert_summary_has(&reported, "1 not judged");
    let swallowed = with(Outcome::Rejected);
    assert_verdict(&swallowed, Verdict::Invalid);
    let anomaly = sole_anomaly(&swallowed);
    assert_eq!(anomaly.kind, "error-admitted");
    assert_eq!(anomaly.requests, [1, 2]);
}

/// The proxy puts the younger's INCR down to the older, whose completion was recorded a moment
/// before (the proxy forgets a request only after that): the history shows the older finished
/// when the error struck. Not a swallowed error while the younger, in flight then, reported
/// one (seen on `incr-then-expire` in a one-identity burst on a loaded machine).
#[test]
fn an_error_put_down_to_a_request_just_finished_is_judged_with_those_in_flight() {
    let result = HistoryBuilder::new()
        .allowed(1, 0, 0, 3, 1)
        .request(2, 0, 2, 8, Outcome::Error, None, &["INCR"])
        .wire(4, 1, &["INCR rl:0"])
        .command_fault(4, FaultKind::InjectError, 1, "INCR")
        .check_one(ErrorsSurfaced);
    assert!(result.anomalies.is_empty(), "{result:#?}");
    assert_summary_has(&result, "1 not judged");
}

#[test]
fn a_surfaced_error_is_valid_and_no_injection_is_unknown() {
    let surfaced = HistoryBuilder::new()
        .request(1, 0, 0, 2, Outcome::Error, None, &["INCR"])
        .command_fault(1, FaultKind::InjectError, 1, "INCR")
        .check_one(ErrorsSurfaced);
    assert_verdict(&surfaced, Verdict::Valid);
    let nothing = HistoryBuilder::new().allowed(1, 0, 0, 2, 1).check_one(ErrorsSurfaced);
    assert_verdict(&nothing, Verdict::Unknown);
}

#[test]
fn a_run_in_which_nothing_was_decided_is_unknown() {
    let result = HistoryBuilder::new()
        .request(1, 0, 0, 2, Outcome::Error, None, &["INCR"])
        .request(2, 0, 10, 12, Outcome::Indeterminate, None, &["INCR"])
        .sample(50, false, &[("rl:0", 950, Some("2"))])
        .empty_final_audit(3000)
        .check_one(TtlPresent);
    assert_verdict(&result, Verdict::Unknown);
    assert_summary_has(&result, "none of the 2 requests got a decision");
}

#[test]
fn no_counter_reset_is_unknown_for_a_log_without_keyspace_notifications() {
    let history = HistoryBuilder::new()
        .allowed(1, 0, 0, 1, 1)
        .allowed(2, 0, 10, 11, 2)
        .keyspace_lost();
    assert_verdict(
        &history.check_one_as(Algorithm::SlidingLog, NoCounterReset),
        Verdict::Unknown,
    );
    assert_verdict(
        &history.check_one_as(Algorithm::FixedWindow, NoCounterReset),
        Verdict::Valid,
    );
}

#[test]
fn ttl_present_is_unknown_when_a_planted_key_never_came_due() {
    // Planted without a TTL, answered once, and the run ended before a window had passed.
    let result = HistoryBuilder::new()
        .setup(0, "rl:0", "SET rl:0 20 (no TTL)")
        .rejected(1, 0, 10, 11, 20)
        .sample(100, true, &[("rl:0", -1, Some("20"))])
        .check_one(TtlPresent);
    assert_verdict(&result, Verdict::Unknown);
    assert_summary_has(&result, "never asked to decide on them");
}

#[test]
fn no_leaked_keys_is_unknown_when_no_identity_went_quiet_before_the_audit() {
    // The last request was answered 100 ms before the audit: a leak could not show yet.
    let busy = HistoryBuilder::new()
        .allowed(1, 0, 0, 1, 1)
        .allowed(2, 0, 1900, 1901, 2)
        .sample(2000, true, &[("rl:0", 400, Some("2"))])
        .check_one(NoLeakedKeys);
    assert_verdict(&busy, Verdict::Unknown);
    let quiet = HistoryBuilder::new()
        .allowed(1, 0, 0, 1, 1)
        .empty_final_audit(3000)
        .check_one(NoLeakedKeys);
    assert_verdict(&quiet, Verdict::Valid);
}

#[test]
fn requests_ended_while_the_server_was_down_must_end_as_declared() {
    use crate::scenario::ServerErrorPolicy;
    let history = HistoryBuilder::new()
        .allowed(1, 0, 0, 1, 1)
        // Sent and answered inside the outage: decided without the server.
        .request(2, 0, 110, 2110, Outcome::Indeterminate, None, &["GET"])
        .allowed(3, 1, 120, 130, 1)
        // Straddles the outage's end: it may have had an answer; not judged.
        .rejected(4, 2, 2900, 3100, 11)
        .outage(100, 3000, FaultKind::ServerPause, true);
    let judge = |policy: ServerErrorPolicy| {
        let mut config = config(&[FailsAsDeclared]);
        config.on_server_error = policy;
        history.check_with(&limit(), &config).remove(0)
    };
    let error = judge(ServerErrorPolicy::Error);
    assert_verdict(&error, Verdict::Invalid);
    assert_eq!(error.anomalies.len(), 1, "{error:?}");
    assert_eq!(error.anomalies[0].kind, "failed-open");
    assert_eq!(error.anomalies[0].requests, vec![3]);
    let open = judge(ServerErrorPolicy::FailOpen);
    assert_verdict(&open, Verdict::Invalid);
    assert_eq!(open.anomalies[0].kind, "failed-with-error");
    assert_eq!(open.anomalies[0].requests, vec![2]);
    let closed = HistoryBuilder::new()
        .allowed(1, 0, 0, 1, 1)
        .rejected(2, 0, 200, 210, 0)
        .outage(100, 3000, FaultKind::ServerRestart, false);
    let mut config = config(&[FailsAsDeclared]);
    config.on_server_error = ServerErrorPolicy::FailClosed;
    let verdict = closed.check_with(&limit(), &config).remove(0);
    assert_verdict(&verdict, Verdict::Valid);
    assert_summary_has(&verdict, "all 1 request(s)");
}

#[test]
fn fails_as_declared_is_unknown_without_an_outage_or_a_request_inside_one() {
    let none = HistoryBuilder::new().allowed(1, 0, 0, 1, 1).check_one(FailsAsDeclared);
    assert_verdict(&none, Verdict::Unknown);
    let empty = HistoryBuilder::new()
        .allowed(1, 0, 0, 1, 1)
        .outage(100, 200, FaultKind::ServerPause, true)
        .check_one(FailsAsDeclared);
    assert_verdict(&empty, Verdict::Unknown);
    assert_summary_has(&empty, "nothing to judge");
}

#[test]
fn a_restart_without_persistence_resets_every_live_key_and_says_so() {
    // Identity 0 used its key 600 ms before the restart; identity 1 a window and a half before.
    let history = HistoryBuilder::new()
        .allowed(1, 0, 900, 901, 5)
        .allowed(2, 1, 0, 1, 1)
        .outage(1500, 1550, FaultKind::ServerRestart, false)
        .allowed(3, 0, 1600, 1601, 1);
    let lost = history.check_one(NoCounterReset);
    assert_verdict(&lost, Verdict::Invalid);
    let kinds: Vec<(&str, &str)> = lost
        .anomalies
        .iter()
        .map(|a| (a.kind.as_str(), a.key.as_str()))
        .collect();
    // Once per live key, from the restart, not again as a drop of its count.
    assert_eq!(kinds, vec![("reset-by-restart", "rl:0")], "{lost:?}");
    assert!(
        lost.summary.contains("restarted without persistence"),
        "{}",
        lost.summary
    );
    // The same drop across a restart that kept its keys, with no TTL run out: still a reset,
    // attributed to the restart.
    let kept = HistoryBuilder::new()
        .allowed(0, 0, 800, 801, 1)
        .allowed(1, 0, 900, 901, 2)
        .outage(1000, 1050, FaultKind::ServerRestart, true)
        .allowed(3, 0, 1100, 1101, 1)
        .check_one(NoCounterReset);
    assert_verdict(&kept, Verdict::Invalid);
    assert_eq!(kept.anomalies[0].kind, "reset-by-restart");
    // Its TTL ran out while the server was down: an expiry nobody was notified of.
    let expired = HistoryBuilder::new()
        .allowed(1, 0, 900, 901, 5)
        .sample(950, false, &[("rl:0", 20, Some("5"))])
        .outage(1000, 1050, FaultKind::ServerRestart, true)
        .allowed(3, 0, 1100, 1101, 1)
        .check_one(NoCounterReset);
    assert_verdict(&expired, Verdict::Valid);
}

#[test]
fn recovers_after_fault_flags_an_instance_whose_last_requests_all_fail_after_the_fault() {
    use crate::scenario::Invariant::RecoversAfterFault;
    let before = HistoryBuilder::new()
        .allowed(1, 0, 0, 1, 1)
        .fault(100, FaultKind::Failover, None, None)
        .outage(100, 150, FaultKind::Failover, true);
    // Every request after the failover is an error (READONLY on a demoted node).
    let mut stuck = before;
    for id in 2..9 {
        stuck = stuck.request(id, 0, 200 + id * 10, 201 + id * 10, Outcome::Error, None, &["INCR"]);
    }
    let result = stuck.check_one(RecoversAfterFault);
    let anomaly = sole_anomaly(&result);
    assert_eq!(anomaly.kind, "never-recovered");
    assert_eq!(anomaly.key, "instance 0");
    assert_eq!(anomaly.requests, vec![4, 5, 6, 7, 8]);
    // A few errors right after the fault, then decisions: recovered.
    let mut recovered = HistoryBuilder::new()
        .allowed(1, 0, 0, 1, 1)
        .fault(100, FaultKind::ClientKill, None, None)
        .request(2, 0, 200, 201, Outcome::Indeterminate, None, &["INCR"]);
    for id in 3..9 {
        recovered = recovered.allowed(id, 0, 200 + id * 10, 201 + id * 10, 2);
    }
    assert_verdict(&recovered.check_one(RecoversAfterFault), Verdict::Valid);
}

/// A fault may break some keys only (a reshard moves one slot): an identity whose requests all
/// fail after it never recovered, though its instance decides the others'.
#[test]
fn recovers_after_fault_flags_an_identity_that_never_recovers_on_an_instance_that_did() {
    use crate::scenario::Invariant::RecoversAfterFault;
    let mut history = HistoryBuilder::new()
        .allowed(1, 0, 0, 1, 1)
        .fault(100, FaultKind::Reshard, None, None);
    for n in 0..6 {
        let t_ms = 200 + n * 20;
        history = history
            .request(10 + n, 0, t_ms, t_ms + 1, Outcome::Error, None, &["EXEC"])
            .allowed(20 + n, 1, t_ms + 10, t_ms + 11, 1);
    }
    let result = history.check_one(RecoversAfterFault);
    let anomaly = sole_anomaly(&result);
    assert_eq!(anomaly.key, "instance 0 identity 0");
    assert_eq!(anomaly.requests, vec![11, 12, 13, 14, 15]);
    assert!(anomaly.because.contains("identity 0"), "{}", anomaly.because);
}

#[test]
fn recovers_after_fault_is_unknown_without_a_server_fault_or_enough_requests_after_it() {
    use crate::scenario::Invariant::RecoversAfterFault;
    let none = HistoryBuilder::new()
        .allowed(1, 0, 0, 1, 1)
        .check_one(RecoversAfterFault);
    assert_verdict(&none, Verdict::Unknown);
    // A gap fault is not a server fault.
    let gap = HistoryBuilder::new()
        .allowed(1, 0, 0, 1, 1)
        .fault(10, FaultKind::ExpireBetweenRoundTrips, Some(1), Some("rl:0"))
        .check_one(RecoversAfterFault);
    assert_verdict(&gap, Verdict::Unknown);
    let few = HistoryBuilder::new()
        .fault(100, FaultKind::ScriptFlush, None, None)
        .request(1, 0, 200, 201, Outcome::Error, None, &["EVALSHA"])
        .check_one(RecoversAfterFault);
    assert_verdict(&few, Verdict::Unknown);
    assert_summary_has(&few, "nothing to judge");
}

#[test]
fn a_count_lower_after_a_failover_is_a_reset_by_failover_unless_the_key_had_expired() {
    // Count 3 was written while replication was held; the promoted replica had 2.
    let rolled_back = HistoryBuilder::new()
        .allowed(1, 0, 0, 1, 1)
        .allowed(2, 0, 100, 101, 2)
        .allowed(3, 0, 300, 301, 3)
        .outage(200, 400, FaultKind::Failover, true)
        .allowed(4, 0, 500, 501, 2)
        .check_one(NoCounterReset);
    assert_eq!(sole_anomaly(&rolled_back).kind, "reset-by-failover");
    // The key's TTL (sampled after its creation) ran out before the request after the failover.
    let expired = HistoryBuilder::new()
        .allowed(1, 0, 0, 1, 1)
        .sample(100, false, &[("rl:0", 50, None)])
        .allowed(2, 0, 120, 121, 2)
        .outage(130, 140, FaultKind::Failover, true)
        .allowed(3, 0, 300, 301, 1)
        .check_one(NoCounterReset);
    assert_verdict(&expired, Verdict::Valid);
}

#[test]
fn fails_as_declared_does_not_judge_a_failover_the_primary_answered_through() {
    let history = HistoryBuilder::new()
        .allowed(1, 0, 0, 1, 1)
        .allowed(2, 0, 150, 160, 2)
        .outage(100, 300, FaultKind::Failover, true)
        .check_one(FailsAsDeclared);
    assert_verdict(&history, Verdict::Unknown);
}
