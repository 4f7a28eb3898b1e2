//! Bounds: nothing a scenario, a limiter or a server does makes a run hang or grow without
//! limit. A run that cannot finish stops at its deadline and ends unknown with what it saw.

use std::time::{Duration, Instant};

use limiter_harness::checker::Verdict;
use limiter_harness::scenario::parse_scenario;
use limiter_harness_tests::{Kind, run};

/// A stall far longer than the scenario's deadline: the run is stopped at the deadline,
/// its verdict is unknown, and the history says why.
#[tokio::test(flavor = "multi_thread")]
async fn a_run_that_cannot_finish_stops_at_its_deadline_unknown() {
    let scenario = parse_scenario(
        std::path::Path::new("deadline.toml"),
        r#"
name = "deadline"
[limit]
requests_max = 5
window_ms = 500
identities = 1
[[phase]]
kind = "steady"
rate_per_s = 20
duration_ms = 1000
[[fault]]
kind = "stall-between-round-trips"
identity = 0
request = 2
before_command = ["INCR", "INCRBY"]
stall_ms = 60000
[check]
invariants = ["admitted-within-limit"]
deadline_ms = 2000
"#,
    )
    .unwrap();
    assert_eq!(scenario.deadline(), Duration::from_secs(2));
    let started = Instant::now();
    let (report, dir) = run(scenario, "get-then-incr", Kind::Process)
        .await
        .expect("a process server");
    let took = started.elapsed();
    assert!(
        took < Duration::from_secs(20),
        "the run took {took:?}, past its 2 s deadline"
    );
    assert_eq!(report.verdict, Verdict::Unknown, "{:?}", report.problems);
    assert!(
        report.problems.iter().any(|p| p.contains("deadline")),
        "{:?}",
        report.problems
    );
    let history = std::fs::read_to_string(dir.path().join("history.jsonl")).unwrap();
    assert!(history.contains("\"type\":\"invoke\""), "the history was saved");
}

/// A history that cannot be written (a full disk: the history file is /dev/full) ends the
/// run at once, unknown, naming the write error; the run does not go on unrecorded.
#[tokio::test(flavor = "multi_thread")]
async fn a_run_whose_history_cannot_be_written_stops_at_once_unknown() {
    use limiter_harness::limiter::resolve;
    use limiter_harness::runner::{self, RunConfig};
    let scenario = limiter_harness_tests::scenario("steady-control");
    let dir = tempfile::tempdir().unwrap();
    std::os::unix::fs::symlink("/dev/full", dir.path().join("history.jsonl")).unwrap();
    let started = Instant::now();
    let outcome = runner::run(RunConfig {
        scenario,
        limiter: resolve("lua-fixed-window").unwrap(),
        backend: limiter_harness_tests::backend(Kind::Process).await.unwrap(),
        seed: 1,
        report_dir: dir.path().to_owned(),
        allow_reconfigure: false,
        via_proxy: false,
        show_progress: false,
        reproduce: "(test)".into(),
    })
    .await
    .expect("the run starts");
    assert!(
        started.elapsed() < Duration::from_secs(3),
        "it went on for {:?} (the scenario's traffic takes 3.7 s)",
        started.elapsed()
    );
    assert_eq!(
        outcome.report.verdict,
        Verdict::Unknown,
        "{:?}",
        outcome.report.problems
    );
    assert!(
        outcome
            .report
            .problems
            .iter()
            .any(|p| p.contains("the history could not be written") && p.contains("history.jsonl")),
        "{:?}",
        outcome.report.problems
    );
    assert!(outcome.history_error.is_some());
}
