//! The checkers on limiters' own key layouts (prefixed, several keys, a key per window), and
//! no pass on nothing: a check whose subject was never observed is unknown, saying why.

use super::fixtures::{HistoryBuilder, config, limit, limit_with_keys, run, run_declared, us};
use super::{CheckResult, Verdict};
use crate::history::Outcome;
use crate::scenario::Algorithm;
use crate::scenario::Invariant::{
    self, AdmitsUpToLimit, AdmittedWithinLimit, ErrorsSurfaced, NoCounterReset, NoDoubleCount, NoLeakedKeys, NoLockout,
    TtlBounded, TtlPresent,
};

const LIMITS_KEY: &str = "LIMITS:LIMITER/api/0/10/1/second";

fn judge(history: &HistoryBuilder, templates: &[&str], invariant: Invariant) -> CheckResult {
    let limit = limit_with_keys(templates);
    run(history.events(), &limit, &config(&[invariant]), Algorithm::FixedWindow).remove(0)
}

fn assert_unknown_saying(result: &CheckResult, text: &str) {
    assert_eq!(result.verdict, Verdict::Unknown, "{result:#?}");
    assert!(
        result.summary.contains(text),
        "summary {:?} lacks {text:?}",
        result.summary
    );
}

/// `python limits`' key for identity 0: ten requests a second, admitted then rejected, the
/// key sampled with its TTL, and the final audit after it expired.
fn limits_history(keys_on_the_wire: &[&str]) -> HistoryBuilder {
    let mut history = HistoryBuilder::new();
    for i in 0..12u64 {
        let outcome = if i < 10 { Outcome::Allowed } else { Outcome::Rejected };
        history = history.request_on(
            i,
            0,
            (us(i * 20), us(i * 20 + 2)),
            outcome,
            None,
            &["EVALSHA"],
            keys_on_the_wire,
        );
    }
    history
        .sample(100, false, &[(LIMITS_KEY, 900, Some("5"))])
        .keyspace(1000, LIMITS_KEY, "expired")
        .empty_final_audit(3000)
}

// ---- real layouts -----------------------------------------------------------------------

/// A key per window (a daily cap) in a burst through the proxy: request 3 counted 50 on
/// yesterday's key, but the proxy put today's first command (request 4's) down to it, so it
/// is recorded on today's key, where request 5 then counts 2. A count of 50 on a key no more
/// than 4 requests can have reached is impossible: it is not compared, and there is no
/// reset. The same drop from a count the key could have reached is one.
#[test]
fn a_count_its_key_could_not_have_reached_is_not_compared() {
    let with = |count_3: i64| {
        let history = HistoryBuilder::new()
            .request_on(
                1,
                0,
                (us(0), us(1)),
                Outcome::Allowed,
                Some(48),
                &["INCR"],
                &["day:0:1"],
            )
            .request_on(
                2,
                0,
                (us(10), us(11)),
                Outcome::Allowed,
                Some(49),
                &["INCR"],
                &["day:0:1"],
            )
            .request_on(
                3,
                0,
                (us(20), us(21)),
                Outcome::Allowed,
                Some(count_3),
                &["INCR"],
                &["day:0:2"],
            )
            .request_on(4, 0, (us(20), us(30)), Outcome::Allowed, Some(1), &[], &[])
            .request_on(
                5,
                0,
                (us(40), us(41)),
                Outcome::Allowed,
                Some(2),
                &["INCR"],
                &["day:0:2"],
            );
        judge(&history, &["day:{identity}:*"], NoCounterReset)
    };
    let impossible = with(50);
    assert!(impossible.anomalies.is_empty(), "{impossible:#?}");
    let possible = with(4);
    let kinds: Vec<&str> = possible.anomalies.iter().map(|a| a.kind.as_str()).collect();
    assert_eq!(kinds, ["reset-unexplained"], "{possible:#?}");
}

#[test]
fn a_limiter_with_its_own_key_is_judged_on_that_key() {
    let history = limits_history(&[LIMITS_KEY]);
    let layout = ["LIMITS:LIMITER/api/{identity}/10/1/second"];
    for invariant in [TtlPresent, TtlBounded, NoCounterReset, AdmittedWithinLimit] {
        let result = judge(&history, &layout, invariant);
        assert_eq!(result.verdict, Verdict::Valid, "{invariant}: {result:#?}");
    }
}

#[test]
fn an_unknown_layout_ends_with_a_hint_naming_the_keys_touched_and_a_layout_for_them() {
    // The default layout `rl:{identity}` matches nothing the limiter used.
    let history = HistoryBuilder::new()
        .request_on(1, 0, (0, 2000), Outcome::Allowed, None, &["EVALSHA"], &[LIMITS_KEY])
        .request_on(
            2,
            1,
            (5000, 7000),
            Outcome::Allowed,
            None,
            &["EVALSHA"],
            &["LIMITS:LIMITER/api/1/10/1/second"],
        )
        .empty_final_audit(3000);
    for invariant in [
        TtlPresent,
        TtlBounded,
        NoCounterReset,
        AdmittedWithinLimit,
        NoLeakedKeys,
    ] {
        let result = history.check_one(invariant);
        assert_unknown_saying(
            &result,
            "no key matching `rl:{identity}` (the default: key_prefix + identity) was ever seen",
        );
        assert!(
            result
                .summary
                .contains(&format!("keys the limiter touched: `{LIMITS_KEY}`"))
                && result
                    .summary
                    .contains("--keys 'LIMITS:LIMITER/api/{identity}/10/1/second'"),
            "{invariant}: {}",
            result.summary
        );
    }
}

/// `ttl-present` is unknown, naming `app:0:w` and `app:1:w` and suggesting their layout.
fn assert_suggests_app_keys(history: &HistoryBuilder) {
    let result = history.check_one(TtlPresent);
    assert_unknown_saying(&result, "keys the limiter touched: `app:0:w`, `app:1:w`");
    assert!(
        result.summary.contains("--keys 'app:{identity}:w'"),
        "{}",
        result.summary
    );
}

/// A key first seen while two identities' requests were in flight tells no identity; a later
/// sighting, with one identity in flight, does (a loaded machine overlaps the requests).
#[test]
fn a_key_first_seen_with_several_identities_in_flight_is_named_by_a_later_sighting() {
    let history = HistoryBuilder::new()
        .request_on(1, 0, (us(0), us(10)), Outcome::Allowed, None, &[], &[])
        .request_on(2, 1, (us(1), us(11)), Outcome::Allowed, None, &[], &[])
        .unattributed(5, &["app:0:w", "app:1:w"])
        .request_on(3, 0, (us(20), us(30)), Outcome::Allowed, None, &[], &[])
        .unattributed(25, &["app:0:w"])
        .request_on(4, 1, (us(40), us(50)), Outcome::Allowed, None, &[], &[])
        .unattributed(45, &["app:1:w"])
        .empty_final_audit(3000);
    assert_suggests_app_keys(&history);
}

#[test]
fn keys_the_proxy_could_not_attribute_are_named_with_the_identity_in_flight() {
    // An exec adapter's commands did not match the layout: the proxy gave them to no request,
    // but request 1 was the only one in flight.
    let history = HistoryBuilder::new()
        .request_on(1, 0, (us(0), us(10)), Outcome::Allowed, None, &[], &[])
        .unattributed(5, &["app:0:w"])
        .request_on(2, 1, (us(20), us(30)), Outcome::Allowed, None, &[], &[])
        .unattributed(25, &["app:1:w"])
        .empty_final_audit(3000);
    assert_suggests_app_keys(&history);
}

#[test]
fn a_key_per_window_ends_a_window_by_moving_to_the_next_key() {
    // Ten admitted on day:0:1, then ten on day:0:2 within a second and no expiry: two windows,
    // not twenty in one.
    let mut history = HistoryBuilder::new();
    for i in 0..20u64 {
        let key = if i < 10 { "day:0:1" } else { "day:0:2" };
        history = history.allowed_on(i, 0, (i * 30, i * 30 + 2), Some((i % 10 + 1) as i64), &[key]);
    }
    let history = history
        .sample(100, false, &[("day:0:1", 1050, Some("3"))])
        .empty_final_audit(4000);
    let layout = ["day:{identity}:*"];
    let result = judge(&history, &layout, AdmittedWithinLimit);
    assert_eq!(result.verdict, Verdict::Valid, "{result:#?}");
    let reset = judge(&history, &layout, NoCounterReset);
    assert_eq!(
        reset.verdict,
        Verdict::Valid,
        "the count restarting on the new key is no reset: {reset:#?}"
    );

    // A broken one admits fifteen on one day's key: named.
    let mut broken = HistoryBuilder::new();
    for i in 0..15u64 {
        broken = broken.allowed_on(i, 0, (i * 30, i * 30 + 2), Some(1), &["day:0:1"]);
    }
    let result = judge(&broken.empty_final_audit(4000), &layout, AdmittedWithinLimit);
    assert_eq!(result.verdict, Verdict::Invalid, "{result:#?}");
    assert_eq!(result.anomalies[0].kind, "over-admission-in-window");
    assert_eq!(result.anomalies[0].key, "day:0:1");
}

#[test]
fn evicting_a_window_key_the_identity_has_moved_on_from_is_no_reset() {
    let layout = ["day:{identity}:*"];
    let history = HistoryBuilder::new()
        .allowed_on(1, 0, (0, 2), Some(1), &["day:0:1"])
        .allowed_on(2, 0, (1100, 1102), Some(1), &["day:0:2"])
        .keyspace(1500, "day:0:1", "evicted")
        .empty_final_audit(3000);
    let result = judge(&history, &layout, NoCounterReset);
    assert_eq!(result.verdict, Verdict::Valid, "{result:#?}");
    assert!(
        result.notes.iter().any(|n| n.contains("window had already ended")),
        "{result:#?}"
    );
    let live = HistoryBuilder::new()
        .allowed_on(1, 0, (0, 2), Some(1), &["day:0:2"])
        .keyspace(500, "day:0:2", "evicted")
        .empty_final_audit(3000);
    let result = judge(&live, &layout, NoCounterReset);
    assert_eq!(result.verdict, Verdict::Invalid, "{result:#?}");
    assert_eq!(
        (result.anomalies[0].kind.as_str(), result.anomalies[0].key.as_str()),
        ("reset-by-eviction", "day:0:2")
    );
}

#[test]
fn a_bucket_kept_for_its_declared_multiple_of_the_window_is_within_its_bound() {
    // Two keys per identity, SETEX'd for two refill periods (Spring Cloud Gateway's design).
    let layout = ["b.{{{identity}}}.tokens", "b.{{{identity}}}.ts"];
    let history = HistoryBuilder::new()
        .allowed_on(1, 0, (0, 2), Some(1), &["b.{0}.tokens", "b.{0}.ts"])
        .sample(
            10,
            false,
            &[("b.{0}.tokens", 1999, Some("9")), ("b.{0}.ts", 1999, Some("0"))],
        )
        .empty_final_audit(3000);
    let limit = limit_with_keys(&layout);
    let declared = |windows| {
        run_declared(
            history.events(),
            &limit,
            &config(&[TtlBounded]),
            Algorithm::TokenBucket,
            windows,
        )
        .remove(0)
    };
    let result = declared(Some(2.0));
    assert_eq!(result.verdict, Verdict::Valid, "{result:#?}");
    assert!(
        result
            .rule
            .as_deref()
            .is_some_and(|r| r.contains("2 × window_ms, declared by the limiter"))
    );
    let undeclared = declared(None);
    assert_eq!(undeclared.verdict, Verdict::Invalid, "{undeclared:#?}");
    assert_eq!(undeclared.anomalies_total, 2, "both keys named");
}

#[test]
fn a_key_per_window_is_not_leaked_while_its_declared_ttl_runs() {
    let layout = ["day:{identity}:*"];
    let history = HistoryBuilder::new()
        .allowed_on(1, 0, (0, 2), Some(1), &["day:0:1"])
        .allowed_on(2, 0, (1000, 1002), Some(1), &["day:0:2"])
        .sample(2050, true, &[("day:0:2", 30, Some("1"))]);
    let limit = limit_with_keys(&layout);
    let leaks = |windows| {
        run_declared(
            history.events(),
            &limit,
            &config(&[NoLeakedKeys]),
            Algorithm::FixedWindow,
            windows,
        )
        .remove(0)
    };
    assert_eq!(
        leaks(Some(26.0 / 24.0)).verdict,
        Verdict::Valid,
        "{:#?}",
        leaks(Some(26.0 / 24.0))
    );
    assert_eq!(leaks(None).verdict, Verdict::Invalid, "one window: day:0:2 outlived it");
}

#[test]
fn keys_of_the_limiter_left_out_of_the_layout_are_noted() {
    let history = HistoryBuilder::new()
        .allowed_on(1, 0, (0, 2), Some(1), &["b.{0}.tokens", "b.{0}.ts"])
        .sample(10, false, &[("b.{0}.tokens", 900, Some("9"))])
        .empty_final_audit(3000);
    let result = judge(&history, &["b.{{{identity}}}.tokens"], TtlPresent);
    assert_eq!(result.verdict, Verdict::Valid, "{result:#?}");
    assert!(
        result
            .notes
            .iter()
            .any(|n| n.contains("`b.{0}.ts`") && n.contains("add `b.{{{identity}}}.ts` to `keys`")),
        "{:#?}",
        result.notes
    );
}

// ---- no pass on nothing, checker by checker ---------------------------------------------

/// Decided requests that named no key, a sampler that found none.
fn nothing_seen() -> HistoryBuilder {
    HistoryBuilder::new()
        .request_on(1, 0, (0, 2000), Outcome::Allowed, Some(1), &["EVALSHA"], &[])
        .request_on(2, 0, (us(10), us(12)), Outcome::Rejected, Some(11), &["EVALSHA"], &[])
        .sample(5, false, &[])
        .empty_final_audit(3000)
}

#[test]
fn every_checker_is_unknown_about_what_it_never_observed() {
    let cases: [(Invariant, &str); 9] = [
        (TtlPresent, "was ever seen"),
        (TtlBounded, "was ever seen"),
        (NoCounterReset, "was ever seen"),
        (AdmittedWithinLimit, "could not be judged"),
        (NoLeakedKeys, "was ever seen"),
        (NoLockout, "no identity sent a request after a quiet period"),
        (AdmitsUpToLimit, "nothing to judge"),
        (NoDoubleCount, "was ever seen"),
        (ErrorsSurfaced, "no error was injected"),
    ];
    for (invariant, why) in cases {
        let result = nothing_seen().check_one(invariant);
        assert_unknown_saying(&result, why);
    }
}

#[test]
fn keys_sampled_only_without_a_ttl_bound_nothing() {
    let result = HistoryBuilder::new()
        .allowed(1, 0, 0, 2, 1)
        .sample(10, false, &[("rl:0", -1, Some("1"))])
        .empty_final_audit(3000)
        .check_one(TtlBounded);
    assert_unknown_saying(&result, "no sampled limiter key had a TTL");
}

#[test]
fn keys_the_sampler_never_caught_are_not_a_pass_on_ttls() {
    let result = HistoryBuilder::new()
        .allowed(1, 0, 0, 2, 1)
        .sample(10, false, &[])
        .empty_final_audit(3000)
        .check_one(TtlPresent);
    assert_unknown_saying(&result, "none of the 2 sample(s) found a key matching `rl:{identity}`");
}

#[test]
fn resets_are_unknown_without_notifications_or_counts_to_compare() {
    // An adapter that reports no count, on a server without keyspace notifications.
    let history = HistoryBuilder::new()
        .request(1, 0, 0, 2, Outcome::Allowed, None, &["INCR"])
        .request(2, 0, 10, 12, Outcome::Allowed, None, &["INCR"])
        .sample(5, false, &[("rl:0", 900, None)])
        .keyspace_lost();
    assert_unknown_saying(
        &history.check_one(NoCounterReset),
        "no two counts on one key could be compared",
    );
}

#[test]
fn a_run_without_requests_passes_nothing() {
    let history = HistoryBuilder::new()
        .sample(5, false, &[("rl:0", 900, None)])
        .empty_final_audit(3000);
    let all = [
        TtlPresent,
        TtlBounded,
        NoCounterReset,
        AdmittedWithinLimit,
        NoLeakedKeys,
    ];
    for result in run(history.events(), &limit(), &config(&all), Algorithm::FixedWindow) {
        assert_eq!(result.verdict, Verdict::Unknown, "{result:#?}");
    }
}

// ---- several keys per request, windows ended by time, partial observation --------------------

/// A fixed window that reads a flag key on every request besides its counter: 10 admitted
/// per window on `c:0` (expiring at 1000 ms), the flag `f:0` never expiring, then 10 more.
fn counter_and_flag() -> HistoryBuilder {
    let mut history = HistoryBuilder::new();
    for i in 0..20u64 {
        let at = if i < 10 { i * 20 } else { 1100 + (i - 10) * 20 };
        let count = (i % 10 + 1) as i64;
        history = history.allowed_on(i, 0, (at, at + 2), Some(count), &["c:0", "f:0"]);
    }
    history
        .keyspace(1000, "c:0", "expired")
        .sample(50, false, &[("c:0", 950, Some("3")), ("f:0", 60000, Some("0"))])
        .empty_final_audit(3000)
}

#[test]
fn a_key_read_beside_the_counter_gives_no_false_violation() {
    let history = counter_and_flag();
    let both = ["c:{identity}", "f:{identity}"];
    for invariant in [NoCounterReset, NoDoubleCount] {
        let result = judge(&history, &both, invariant);
        assert_ne!(result.verdict, Verdict::Invalid, "{invariant}: {result:#?}");
    }
    // Whose windows count the admissions cannot be told: unknown, saying how to fix it.
    assert_unknown_saying(
        &judge(&history, &both, AdmittedWithinLimit),
        "describe only the counter's key",
    );
    // Described as the counter alone, it is judged on its counter, and the flag is named.
    let result = judge(&history, &["c:{identity}"], AdmittedWithinLimit);
    assert_eq!(result.verdict, Verdict::Valid, "{result:#?}");
    let ttl = judge(&history, &["c:{identity}"], TtlPresent);
    assert!(ttl.notes.iter().any(|n| n.contains("`f:0`")), "{:#?}", ttl.notes);
}

#[test]
fn evicting_a_window_key_just_before_the_identity_moves_on_is_no_reset() {
    let layout = ["day:{identity}:*"];
    let history = HistoryBuilder::new()
        .allowed_on(1, 0, (0, 2), Some(1), &["day:0:1"])
        .keyspace(1050, "day:0:1", "evicted")
        .allowed_on(2, 0, (1100, 1102), Some(1), &["day:0:2"])
        .empty_final_audit(3000);
    let result = judge(&history, &layout, NoCounterReset);
    assert_eq!(result.verdict, Verdict::Valid, "the next request moved on: {result:#?}");
}

#[test]
fn a_fixed_window_key_kept_past_its_window_is_over_when_the_window_is() {
    // The identity never comes back; its key lives 26/24 windows by design.
    let layout = ["day:{identity}:*"];
    let evicted_at = |t_ms| {
        HistoryBuilder::new()
            .allowed_on(1, 0, (0, 2), Some(1), &["day:0:1"])
            .sample(10, false, &[("day:0:1", 1080, Some("1"))])
            .keyspace(t_ms, "day:0:1", "evicted")
            .empty_final_audit(3000)
    };
    assert_eq!(
        judge(&evicted_at(1050), &layout, NoCounterReset).verdict,
        Verdict::Valid
    );
    assert_eq!(
        judge(&evicted_at(500), &layout, NoCounterReset).verdict,
        Verdict::Invalid,
        "mid-window"
    );
}

#[test]
fn keys_seen_by_the_sampler_but_named_by_no_request_leave_windows_unjudged() {
    // A script that builds its key inside: the wire shows only `rl:0`, the layout says `rl:{identity}:n`.
    let mut history = HistoryBuilder::new();
    for i in 0..12u64 {
        history = history.allowed_on(i, 0, (i * 20, i * 20 + 2), Some(1), &["rl:0"]);
    }
    let history = history
        .sample(50, false, &[("rl:0:n", 900, Some("3"))])
        .empty_final_audit(3000);
    let result = judge(&history, &["rl:{identity}:n"], AdmittedWithinLimit);
    assert_unknown_saying(
        &result,
        "none of the 12 admitted requests worked on exactly one limiter key",
    );
}
