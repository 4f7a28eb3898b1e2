//! The shipped scenarios end to end against real servers, on both backends that start
//! their own: the verdicts the core issue promises, with the evidence that backs them.

use limiter_harness::checker::{CheckResult, Verdict};
use limiter_harness::history::{Event, read_history};
use limiter_harness::report::Report;
use limiter_harness::scenario::Invariant;
use limiter_harness_tests::{Kind, run, scenario};

fn result(report: &Report, invariant: Invariant) -> &CheckResult {
    report
        .invariants
        .iter()
        .find(|c| c.invariant == invariant)
        .expect("invariant checked")
}

fn kinds(report: &Report, invariant: Invariant) -> Vec<String> {
    result(report, invariant)
        .anomalies
        .iter()
        .map(|a| a.kind.clone())
        .collect()
}

async fn immortal_counter(kind: Kind) {
    let Some((bad, _dir)) = run(scenario("immortal-counter"), "get-then-incr", kind).await else {
        return;
    };
    assert_eq!(bad.verdict, Verdict::Invalid);
    assert_eq!(kinds(&bad, Invariant::TtlPresent), ["immortal-key"]);
    let immortal = &result(&bad, Invariant::TtlPresent).anomalies[0];
    assert_eq!(immortal.key, "rl:0");
    assert!(immortal.seen[0].starts_with("PTTL -1"), "{:?}", immortal.seen);
    assert_eq!(kinds(&bad, Invariant::NoLockout), ["lockout"]);
    assert_eq!(bad.faults[0].fired, 1);

    for good in ["multi-incr-expire-nx", "lua-fixed-window"] {
        let (report, _dir) = run(scenario("immortal-counter"), good, kind)
            .await
            .expect("backend available");
        assert_eq!(report.verdict, Verdict::Valid, "{good}: {:#?}", report.invariants);
        assert_eq!(report.faults[0].fired, 0);
        assert!(
            report.faults[0].outcome.contains("no gap"),
            "{}",
            report.faults[0].outcome
        );
    }
}

async fn shared_cache_eviction(kind: Kind) {
    let Some((shared, _dir)) = run(scenario("shared-cache-eviction"), "incr-then-expire", kind).await else {
        return;
    };
    assert_eq!(shared.verdict, Verdict::Invalid);
    let resets = kinds(&shared, Invariant::NoCounterReset);
    assert!(
        !resets.is_empty() && resets.iter().all(|k| k == "reset-by-eviction"),
        "{resets:?}"
    );
    assert_eq!(kinds(&shared, Invariant::AdmittedWithinLimit), ["over-admission"]);
    let cap = scenario("shared-cache-eviction").limit.requests_max;
    assert!(
        shared.observed.counts.allowed > 2 * cap,
        "admitted {} against a cap of {cap}",
        shared.observed.counts.allowed
    );
    assert!(shared.observed.limiter_server_evicted_keys > 0);

    let (dedicated, _dir) = run(scenario("dedicated-noeviction"), "incr-then-expire", kind)
        .await
        .expect("backend available");
    assert_eq!(dedicated.verdict, Verdict::Valid, "{:#?}", dedicated.invariants);
    assert_eq!(dedicated.observed.counts.allowed, cap, "the cap holds exactly");
    assert_eq!(dedicated.observed.limiter_server_evicted_keys, 0);
    assert!(
        dedicated.observed.cache_server_evicted_keys.unwrap_or(0) > 0,
        "the cache server still evicts: the same import"
    );
}

/// Every limiter passes the control. `get-then-incr` races its key's expiry between its two
/// round trips; the hold keeps its requests from starting near a window's end, so it may
/// lose the race only by a request stalled for longer than the hold (a loaded machine): then
/// its key is immortal (and its identity locked out), and nothing else is wrong.
async fn steady_control(kind: Kind) {
    let margin_us = hold_us(&scenario("steady-control"));
    for limiter in [
        "get-then-incr",
        "incr-then-expire",
        "multi-incr-expire-nx",
        "lua-fixed-window",
    ] {
        let Some((report, dir)) = run(scenario("steady-control"), limiter, kind).await else {
            return;
        };
        let ttl_present = result(&report, Invariant::TtlPresent);
        if limiter == "get-then-incr" && ttl_present.verdict == Verdict::Invalid {
            only_stalled_requests_raced(&dir, ttl_present, margin_us);
            let others_valid = report
                .invariants
                .iter()
                .filter(|c| !matches!(c.invariant, Invariant::TtlPresent | Invariant::NoLockout))
                .all(|c| c.verdict == Verdict::Valid);
            assert!(others_valid, "{limiter}: {:#?}", report.invariants);
        } else {
            assert_eq!(report.verdict, Verdict::Valid, "{limiter}: {:#?}", report.invariants);
        }
        assert!(
            report.observed.counts.rejected > 0,
            "{limiter}: the traffic is above the limit"
        );
    }
}

/// The hold of a scenario's held steady phases (`clear_of_expiry_ms`), in µs.
fn hold_us(scenario: &limiter_harness::scenario::Scenario) -> u64 {
    scenario
        .phases
        .iter()
        .filter_map(|p| match &p.kind {
            limiter_harness::scenario::PhaseKind::Steady { clear_of_expiry_ms, .. } => Some(*clear_of_expiry_ms),
            _ => None,
        })
        .max()
        .expect("a held steady phase")
        * 1000
}

#[tokio::test(flavor = "multi_thread")]
async fn immortal_counter_in_a_container() {
    immortal_counter(Kind::Container).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn immortal_counter_in_a_process() {
    immortal_counter(Kind::Process).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn shared_cache_eviction_in_a_container() {
    shared_cache_eviction(Kind::Container).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn shared_cache_eviction_in_a_process() {
    shared_cache_eviction(Kind::Process).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn steady_control_in_a_container() {
    steady_control(Kind::Container).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn steady_control_in_a_process() {
    steady_control(Kind::Process).await;
}

/// A failover to a replica held back 1 s rolls the counters back (attributed to it); a
/// clean one leaves the old connections on the demoted node, answering READONLY.
async fn failovers(kind: Kind) {
    let Some((lost, _dir)) = run(scenario("failover-lost-writes"), "multi-incr-expire-nx", kind).await else {
        return;
    };
    let resets = kinds(&lost, Invariant::NoCounterReset);
    assert!(
        !resets.is_empty() && resets.iter().all(|k| k == "reset-by-failover"),
        "{resets:?}"
    );
    assert_eq!(result(&lost, Invariant::RecoversAfterFault).verdict, Verdict::Valid);
    assert!(
        lost.faults[0].outcome.contains("held back"),
        "{}",
        lost.faults[0].outcome
    );

    let (stuck, _dir) = run(scenario("failover-readonly"), "lua-fixed-window", kind)
        .await
        .expect("backend available");
    assert_eq!(kinds(&stuck, Invariant::RecoversAfterFault), ["never-recovered"]);
    let seen = &result(&stuck, Invariant::RecoversAfterFault).anomalies[0].seen;
    assert!(seen.iter().any(|s| s.contains("read only replica")), "{seen:?}");
    // Nothing was lost: writes were paused until the replica had them all.
    assert_eq!(result(&stuck, Invariant::NoCounterReset).verdict, Verdict::Valid);
}

#[tokio::test(flavor = "multi_thread")]
async fn failovers_in_a_container() {
    failovers(Kind::Container).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn failovers_in_a_process() {
    failovers(Kind::Process).await;
}

/// `clear_of_expiry_ms`: every EXISTS reply held 45 ms makes `exists-then-incr` race its
/// key's expiry at a window's end (the key is made 45 ms after its request was sent, so the
/// window ends 5 ms after a later request's EXISTS saw the key, and its INCRBY 45 ms later
/// recreates it without a TTL) — unless the driver holds an identity's request while its
/// key is due to expire, which a steady phase with `clear_of_expiry_ms = 250` does. The hold
/// keeps a request from *starting* within the margin; a request that then takes longer than
/// the margin (a test machine loaded enough to hold an INCRBY 437 ms between the limiter and
/// the server was seen) can still race, and only such a request may.
async fn clear_of_expiry(kind: Kind) {
    let text = |clear: &str| {
        format!(
            r#"
name = "slow-exists"
seed = 5
[limit]
requests_max = 100
window_ms = 510
identities = 1
[[phase]]
name = "traffic"
kind = "steady"
rate_per_s = 20
duration_ms = 2600
pick = "round-robin"
spacing = "even"
{clear}
[[fault]]
kind = "delay-reply"
command = "EXISTS"
times = 0
delay_ms = 45
[check]
invariants = ["ttl-present"]
"#
        )
    };
    let parse = |clear: &str| {
        limiter_harness::scenario::parse_scenario(std::path::Path::new("slow-exists.toml"), &text(clear)).unwrap()
    };
    let Some((racing, _dir)) = run(parse(""), "exists-then-incr", kind).await else {
        return;
    };
    assert_eq!(
        result(&racing, Invariant::TtlPresent).verdict,
        Verdict::Invalid,
        "without the margin the delayed EXISTS races the expiry: {:?}",
        result(&racing, Invariant::TtlPresent)
    );
    let held_scenario = parse("clear_of_expiry_ms = 250");
    let margin_us = hold_us(&held_scenario);
    let (held, dir) = run(held_scenario, "exists-then-incr", kind)
        .await
        .expect("the same backend");
    let ttl_present = result(&held, Invariant::TtlPresent);
    if ttl_present.verdict == Verdict::Valid {
        return;
    }
    only_stalled_requests_raced(&dir, ttl_present, margin_us);
}

/// Each request that recreated a key (`ttl_present`'s anomalies) took longer than
/// `margin_us` from invoke to completion (a stalled machine), never one the hold let start
/// within the margin and that ran as scheduled.
fn only_stalled_requests_raced(dir: &tempfile::TempDir, ttl_present: &CheckResult, margin_us: u64) {
    let history = read_history(&dir.path().join("history.jsonl")).unwrap();
    let took_us = |id: u64| {
        let invoked = history.iter().find_map(|e| match e {
            Event::Invoke { id: i, t_us, .. } if *i == id => Some(*t_us),
            _ => None,
        });
        let completed = history.iter().find_map(|e| match e {
            Event::Complete { id: i, t_us, .. } if *i == id => Some(*t_us),
            _ => None,
        });
        completed.zip(invoked).map(|(end, start)| end.saturating_sub(start))
    };
    for anomaly in &ttl_present.anomalies {
        assert!(
            !anomaly.requests.is_empty(),
            "an anomaly names the request that recreated the key: {ttl_present:?}"
        );
        for &id in &anomaly.requests {
            let took = took_us(id);
            assert!(
                took.is_some_and(|t| t > margin_us),
                "with the margin, request #{id} raced the expiry in {took:?} µs (under the margin): {ttl_present:?}"
            );
        }
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn clear_of_expiry_keeps_requests_out_of_a_window_end_in_a_process() {
    clear_of_expiry(Kind::Process).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn clear_of_expiry_keeps_requests_out_of_a_window_end_in_a_container() {
    clear_of_expiry(Kind::Container).await;
}

/// `clear_of_expiry_ms` holds only a limiter with a gap between round trips. A GCRA's key
/// expires when it may admit again: held until then, an identity sending 2.5 times its rate
/// was sent at the limiter's own pace, every request admitted, the run 2.6 times as long
/// (the hold shaped the traffic the scenario asked for). A GCRA in one round trip, built-in
/// or an exec adapter's (its round trips learned from its requests), sends as scheduled and
/// is refused more than a third of the time.
async fn one_round_trip_is_not_held(spec: &str) {
    let scenario = limiter_harness::scenario::parse_scenario(
        std::path::Path::new("one-trip-held.toml"),
        r#"
name = "one-trip-held"
seed = 3
[limit]
requests_max = 10
window_ms = 510
identities = 1
[[phase]]
name = "traffic"
kind = "steady"
rate_per_s = 50
duration_ms = 3000
pick = "round-robin"
spacing = "even"
clear_of_expiry_ms = 250
[check]
invariants = ["admits-up-to-limit", "admitted-within-limit"]
"#,
    )
    .unwrap();
    let (report, _dir) = limiter_harness_tests::run_spec(scenario, spec, Kind::Process, false)
        .await
        .expect("a local redis-server");
    let counts = &report.observed.counts;
    assert_eq!(counts.requests, 150, "{counts:?}");
    assert!(
        counts.rejected > 50,
        "{spec}: sent as scheduled, refused above its rate: {counts:?}"
    );
    assert_eq!(
        result(&report, Invariant::AdmitsUpToLimit).verdict,
        Verdict::Valid,
        "{report:#?}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn clear_of_expiry_does_not_hold_a_builtin_of_one_round_trip() {
    one_round_trip_is_not_held("gcra-lua").await;
}

#[tokio::test(flavor = "multi_thread")]
async fn clear_of_expiry_does_not_hold_an_adapter_whose_requests_take_one_round_trip() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("gcra.py");
    let examples = limiter_harness_tests::example("python");
    std::fs::write(
        &path,
        format!(
            r#"import sys
sys.path.insert(0, {examples:?})
from adapter import serve

GCRA = """
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + tonumber(t[2]) / 1000
local window = tonumber(ARGV[1])
local interval = window / tonumber(ARGV[2])
local tat = math.max(tonumber(redis.call('GET', KEYS[1]) or '0'), now)
if tat + interval - now > window then
  return {{0, tonumber(ARGV[2])}}
end
redis.call('SET', KEYS[1], string.format('%.3f', tat + interval), 'PX', math.max(1, math.ceil(tat + interval - now)))
return {{1, math.ceil((tat + interval - now) / interval)}}
"""


def decide(r, request, limit, window_ms):
    allowed, count = r.eval(GCRA, 1, request.key, window_ms, limit)
    return allowed == 1, count


if __name__ == "__main__":
    serve(decide, "gcra in one EVAL", algorithm="gcra")
"#,
            examples = examples.display().to_string()
        ),
    )
    .unwrap();
    one_round_trip_is_not_held(&format!("exec:python3 {}", path.display())).await;
}

/// `--window-ms` moves a server fault with the windows: `restart-without-persistence` (a
/// 2010 ms window, the restart 3000 ms into a 6000 ms phase) at a 1000 ms window restarts
/// the server 1493 ms into its 2985 ms phase, and the restart still resets the counters.
#[tokio::test(flavor = "multi_thread")]
async fn a_rescaled_window_moves_the_server_restart_with_it() {
    let mut rescaled = scenario("restart-without-persistence");
    rescaled.rescale_window(1000).unwrap();
    let (report, _dir) = run(rescaled, "multi-incr-expire-nx", Kind::Process)
        .await
        .expect("backend available");
    assert_eq!(report.faults[0].fired, 1, "{}", report.faults[0].outcome);
    assert!(
        report.faults[0].spec.contains("1493 ms into phase"),
        "{}",
        report.faults[0].spec
    );
    let resets = kinds(&report, Invariant::NoCounterReset);
    assert!(
        !resets.is_empty() && resets.iter().all(|k| k == "reset-by-restart"),
        "{resets:?}"
    );
}

/// A burst of one identity, 4 requests in flight at once, with `fault` on its INCRs.
fn burst_of_one_identity(requests: u64, fault: &str, invariant: &str) -> limiter_harness::scenario::Scenario {
    let text = format!(
        "name = \"one-identity-burst\"\nseed = 1\n[limit]\nrequests_max = 1000000\nwindow_ms = 60000\nidentities = 1\n\
         [[phase]]\nname = \"flood\"\nkind = \"burst\"\nrequests = {requests}\nconcurrency = 4\nconnections = 4\n\
         [[fault]]\n{fault}\nidentity = 0\ncommand = \"INCR\"\n\
         [check]\ninvariants = [\"{invariant}\"]\n"
    );
    limiter_harness::scenario::parse_scenario(std::path::Path::new("inline.toml"), &text).unwrap()
}

/// `incr-then-expire` never sends a write twice and reports every error, but the proxy puts
/// concurrent round trips down to the oldest request in flight: a request's "lost" write and
/// its "retry" may be two requests' first INCRs, and an error injected into "its" INCR may
/// have gone to another. Neither may be judged against it. (Before the checkers set such
/// faults aside, the dropped replies ended with a false `retried-after-lost-reply` in 2 of 3
/// runs, the injected errors with a false `error-admitted` in 4 of 5; the interleaving is
/// the server's, so the checkers' unit tests are the deterministic ones.)
#[tokio::test(flavor = "multi_thread")]
async fn concurrent_requests_of_one_identity_are_not_taken_for_a_retry_or_a_swallowed_error() {
    let dropped = burst_of_one_identity(
        20_000,
        "kind = \"drop-reply\"\nrequest = 1\ntimes = 1000000",
        "no-double-count",
    );
    let (report, _dir) = run(dropped, "incr-then-expire", Kind::Process)
        .await
        .expect("a process server");
    assert!(report.faults[0].fired >= 100, "{:?}", report.faults);
    assert!(
        !kinds(&report, Invariant::NoDoubleCount).contains(&"retried-after-lost-reply".to_owned()),
        "{report:#?}"
    );

    let errors = burst_of_one_identity(
        2000,
        "kind = \"inject-error\"\nerror = \"OOM\"\nrequest = 5\ntimes = 200",
        "errors-surfaced",
    );
    let (report, _dir) = run(errors, "incr-then-expire", Kind::Process)
        .await
        .expect("a process server");
    assert!(report.faults[0].fired >= 100, "{:?}", report.faults);
    assert!(kinds(&report, Invariant::ErrorsSurfaced).is_empty(), "{report:#?}");
}

/// A burst that ends within one sample interval is still sampled in its middle: the driver
/// asks for a sample at a quarter, half and three quarters of a phase's requests. (Before,
/// a burst this short was sampled only around its edges — on a fast machine, the catalog's
/// `shared-cache-eviction` then found its evicted-again-and-again counter gone at each of
/// them, and `ttl-bounded` flipped to unknown: 2 runs in 6 of its `ci` cells.)
#[tokio::test(flavor = "multi_thread")]
async fn a_burst_inside_one_sample_interval_is_sampled_in_its_middle() {
    let text = "name = \"one-burst\"\nseed = 1\n[limit]\nrequests_max = 100\nwindow_ms = 60000\nidentities = 1\n\
                [[phase]]\nname = \"burst\"\nkind = \"burst\"\nrequests = 4000\nconcurrency = 4\n\
                [check]\ninvariants = [\"ttl-bounded\"]\nsample_interval_ms = 60000\n";
    let s = limiter_harness::scenario::parse_scenario(std::path::Path::new("inline.toml"), text).unwrap();
    let (report, dir) = run(s, "lua-fixed-window", Kind::Process)
        .await
        .expect("a process server");
    let history = read_history(&dir.path().join("history.jsonl")).unwrap();
    let seen: Vec<u64> = history
        .iter()
        .filter_map(|e| match e {
            Event::Sample {
                t_start_us,
                final_audit: false,
                keys,
                ..
            } if !keys.is_empty() => Some(*t_start_us),
            _ => None,
        })
        .collect();
    // The interval's own first tick comes before the traffic, and the phase's end asks for
    // one more: without the marks, at most two samples could find the key.
    assert!(seen.len() >= 3, "samples that found the key at {seen:?} µs");
    assert_eq!(result(&report, Invariant::TtlBounded).verdict, Verdict::Valid);
}
