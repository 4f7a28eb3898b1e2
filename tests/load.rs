//! A loaded machine never turns into a false INVALID: at the scale where late keyspace
//! notifications were seen (200,000 identities, 50,000 requests/s), correct limiters are
//! judged valid — or unknown where timing cannot tell — and never invalid. (The same beside two
//! CPU hogs, over the whole catalog, is `just loaded`: timing tests do not belong in `just test`.)

use limiter_harness::checker::Verdict;
use limiter_harness::scenario::{Invariant, load_scenario};
use limiter_harness_tests::{Kind, example, run};

#[tokio::test(flavor = "multi_thread")]
async fn correct_limiters_are_never_invalid_at_200k_identities_and_50k_requests_per_s() {
    let scenario = load_scenario(&example("scenarios/scale-200k.toml")).expect("the scenario parses");
    let (report, _dir) = run(scenario, "lua-fixed-window", Kind::Process)
        .await
        .expect("a process server");
    let broken: Vec<String> = report
        .invariants
        .iter()
        .filter(|c| c.verdict == Verdict::Invalid)
        .map(|c| format!("{}: {}", c.invariant.name(), c.summary))
        .collect();
    assert!(broken.is_empty(), "a correct limiter judged invalid: {broken:#?}");
    let reset = report
        .invariants
        .iter()
        .find(|c| c.invariant == Invariant::NoCounterReset)
        .expect("checked");
    // Not vacuous: windows ended and their drops were judged.
    assert!(
        reset.notes.iter().any(|n| n.contains("window(s) ended by expiry")),
        "no window ended by expiry was judged: {reset:#?}"
    );
    assert_eq!(
        report.observed.counts.allowed, 200_000,
        "every request admitted: at most 5 per window"
    );
}
