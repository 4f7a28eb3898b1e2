//! The checkers on hand-written histories: for each invariant a Valid, an Invalid and an
//! Unknown history, and the edge cases each rule's doc comment promises.

use super::fixtures::{HistoryBuilder, config, limit, us};
use super::{Anomaly, CheckResult, Verdict};
use crate::history::Outcome;
use crate::scenario::Invariant::{self, AdmittedWithinLimit, NoCounterReset, NoLockout, TtlBounded, TtlPresent};

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
        .fault(1, "expire-between-round-trips", Some(1), Some("rl:0"))
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

#[test]
fn admitted_within_limit_valid_at_exactly_twice_the_limit_across_a_window_boundary() {
    // 10 admitted at the end of one window, 10 rejected, 10 admitted at the start of the next:
    // 20 admissions within 110 ms, which a correct fixed window allows.
    let history = run_of(HistoryBuilder::new(), Outcome::Allowed, 0, 1, 900, 10, 1);
    let history = run_of(history, Outcome::Rejected, 0, 11, 910, 10, 11);
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
}

#[test]
fn admitted_within_limit_invalid_at_twice_the_limit_plus_one_in_one_window() {
    let result = run_of(HistoryBuilder::new(), Outcome::Allowed, 0, 1, 0, 21, 1).check_one(AdmittedWithinLimit);
    let anomaly = sole_anomaly(&result);
    assert_eq!(anomaly.kind, "over-admission");
    assert_eq!(anomaly.key, "rl:0");
    assert_eq!(
        anomaly.requests,
        vec![1, 21],
        "first and last admission of the interval"
    );
    assert_eq!(anomaly.t_us, 0);
    assert_eq!(anomaly.seen[0], "21 admitted from request #1 to request #21");
    assert!(
        anomaly
            .because
            .contains("identity 0 was admitted 21 times within 1000 ms"),
        "{anomaly:#?}"
    );
}

#[test]
fn admitted_within_limit_names_the_identity_over_its_bound() {
    let history = run_of(HistoryBuilder::new(), Outcome::Allowed, 0, 1, 0, 20, 1);
    let result = run_of(history, Outcome::Allowed, 1, 101, 0, 21, 1).check_one(AdmittedWithinLimit);
    let anomaly = sole_anomaly(&result);
    assert_eq!(anomaly.key, "rl:1");
    assert_eq!(anomaly.requests, vec![101, 121]);
}

#[test]
fn admitted_within_limit_counts_each_identity_separately() {
    let history = run_of(HistoryBuilder::new(), Outcome::Allowed, 0, 1, 0, 15, 1);
    let result = run_of(history, Outcome::Allowed, 1, 101, 0, 15, 1).check_one(AdmittedWithinLimit);
    assert_verdict(&result, Verdict::Valid);
}

#[test]
fn admitted_within_limit_valid_when_the_extra_admission_falls_outside_the_interval() {
    // 20 admitted at 0..20 ms, the 21st answered exactly one window after the 2nd was sent.
    let history = run_of(HistoryBuilder::new(), Outcome::Allowed, 0, 1, 0, 20, 1);
    let result = history
        .request(21, 0, 1000, 1001, Outcome::Allowed, Some(1), &["INCR"])
        .check_one(AdmittedWithinLimit);
    assert_verdict(&result, Verdict::Valid);
}

#[test]
fn admitted_within_limit_unknown_when_an_indeterminate_request_could_exceed_the_bound() {
    let history = run_of(HistoryBuilder::new(), Outcome::Allowed, 0, 1, 0, 20, 1);
    let result = history
        .request(21, 0, 30, 40, Outcome::Indeterminate, None, &["INCR"])
        .check_one(AdmittedWithinLimit);
    assert_verdict(&result, Verdict::Unknown);
    assert_summary_has(&result, "identities [0]");
}

#[test]
fn admitted_within_limit_errors_decided_nothing() {
    let history = run_of(HistoryBuilder::new(), Outcome::Allowed, 0, 1, 0, 20, 1);
    let result = history
        .request(21, 0, 30, 40, Outcome::Error, None, &["INCR"])
        .check_one(AdmittedWithinLimit);
    assert_verdict(&result, Verdict::Valid);
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

// ---- all checkers ------------------------------------------------------------------------

#[test]
fn results_follow_the_scenarios_order() {
    let order = [NoLockout, TtlPresent, AdmittedWithinLimit, NoCounterReset, TtlBounded];
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
        .empty_final_audit(3000)
        .problem_from("sampler", false)
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
