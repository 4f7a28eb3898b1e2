//! Limiters the harness does not contain: Lua scripts from files (`lua:PATH`, with and
//! without a sidecar convention) and exec adapters in Python (`exec:COMMAND`) speaking
//! protocol 1 through the fault proxy — the examples in `examples/`, against real servers.
//! The Python examples need redis-py (`just test` installs it).

use limiter_harness::checker::Verdict;
use limiter_harness::history::{Event, Outcome, ProblemSource, read_history};
use limiter_harness::keys::{KeyLayout, LayoutSource};
use limiter_harness::report::Report;
use limiter_harness::scenario::{FaultKind, Invariant};
use limiter_harness_tests::{Kind, example, run_spec, scenario};

fn verdict_of(report: &Report, invariant: Invariant) -> Verdict {
    report
        .invariants
        .iter()
        .find(|c| c.invariant == invariant)
        .unwrap_or_else(|| panic!("{invariant} is checked"))
        .verdict
}

fn anomaly_kinds(report: &Report, invariant: Invariant) -> Vec<String> {
    report
        .invariants
        .iter()
        .filter(|c| c.invariant == invariant)
        .flat_map(|c| c.anomalies.iter().map(|a| a.kind.clone()))
        .collect()
}

fn python(example_name: &str) -> String {
    assert!(
        std::process::Command::new("python3")
            .args(["-c", "import redis"])
            .status()
            .is_ok_and(|s| s.success()),
        "the Python examples need python3 with redis-py: `python3 -m pip install redis` (just test does it)"
    );
    format!(
        "exec:python3 {}",
        example(&format!("python/{example_name}.py")).display()
    )
}

#[tokio::test(flavor = "multi_thread")]
async fn incident_one_in_python_fails_through_the_proxy_and_its_fix_passes() {
    let (buggy, dir) = run_spec(
        scenario("immortal-counter"),
        &python("fixed_window_buggy"),
        Kind::Container,
        false,
    )
    .await
    .expect("Docker");
    assert_eq!(buggy.verdict, Verdict::Invalid, "{buggy:#?}");
    assert_eq!(verdict_of(&buggy, Invariant::TtlPresent), Verdict::Invalid);
    assert!(anomaly_kinds(&buggy, Invariant::TtlPresent).contains(&"immortal-key".to_owned()));
    assert!(
        buggy.faults[0].fired >= 1,
        "the expiry struck in the proxy: {:?}",
        buggy.faults
    );
    // The report shows the commands the adapter actually sent for the immortal key.
    let trace = buggy.observed.wire.first().expect("a wire trace for the anomaly");
    assert_eq!(trace.key, "rl:0");
    assert!(trace.lines.iter().any(|l| l.contains("INCRBY rl:0")), "{trace:#?}");
    let history = read_history(&dir.path().join("history.jsonl")).unwrap();
    assert!(
        history
            .iter()
            .any(|e| matches!(e, Event::Wire { request: Some(_), .. }))
    );

    let (fixed, _dir) = run_spec(
        scenario("immortal-counter"),
        &python("fixed_window_fixed"),
        Kind::Container,
        false,
    )
    .await
    .expect("Docker");
    assert_eq!(fixed.verdict, Verdict::Valid, "{fixed:#?}");
    assert!(
        fixed.limiter.name.contains("fixed-window-fixed"),
        "the adapter's hello names it"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_retrying_client_counts_a_lost_reply_twice() {
    let (report, _dir) = run_spec(
        scenario("lost-reply"),
        &python("fixed_window_retrying"),
        Kind::Process,
        false,
    )
    .await
    .unwrap();
    assert_eq!(
        verdict_of(&report, Invariant::NoDoubleCount),
        Verdict::Invalid,
        "{report:#?}"
    );
    assert!(anomaly_kinds(&report, Invariant::NoDoubleCount).contains(&"retried-after-lost-reply".to_owned()));

    let (report, _dir) = run_spec(
        scenario("lost-reply"),
        &python("fixed_window_fixed"),
        Kind::Process,
        false,
    )
    .await
    .unwrap();
    assert_eq!(
        verdict_of(&report, Invariant::NoDoubleCount),
        Verdict::Valid,
        "{report:#?}"
    );
    assert!(
        report.observed.counts.indeterminate >= 1,
        "the lost replies are indeterminate"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_silent_fail_open_swallows_injected_errors() {
    let (report, _dir) = run_spec(
        scenario("injected-errors"),
        &python("fixed_window_fail_open"),
        Kind::Process,
        false,
    )
    .await
    .unwrap();
    assert_eq!(
        verdict_of(&report, Invariant::ErrorsSurfaced),
        Verdict::Invalid,
        "{report:#?}"
    );
    assert!(anomaly_kinds(&report, Invariant::ErrorsSurfaced).contains(&"error-admitted".to_owned()));

    let (report, _dir) = run_spec(
        scenario("injected-errors"),
        &python("fixed_window_fixed"),
        Kind::Process,
        false,
    )
    .await
    .unwrap();
    assert_eq!(
        verdict_of(&report, Invariant::ErrorsSurfaced),
        Verdict::Valid,
        "{report:#?}"
    );
    assert!(report.observed.counts.errors >= 3, "{:?}", report.observed.counts);
}

#[tokio::test(flavor = "multi_thread")]
async fn lua_scripts_from_files_in_both_conventions() {
    let own = format!("lua:{}", example("lua/fixed_window.lua").display());
    let (report, _dir) = run_spec(scenario("immortal-counter"), &own, Kind::Process, false)
        .await
        .unwrap();
    assert_eq!(report.verdict, Verdict::Valid, "{report:#?}");
    assert!(report.limiter.commands.contains("EVALSHA"));
    assert!(report.observed.counts.allowed > 0 && report.observed.counts.rejected > 0);

    // Another library's script, unchanged, called by its sidecar convention.
    let other = format!("lua:{}", example("lua/rate_limit_redis.lua").display());
    let (report, _dir) = run_spec(scenario("steady-control"), &other, Kind::Process, false)
        .await
        .unwrap();
    assert_eq!(report.verdict, Verdict::Valid, "{report:#?}");
    assert!(
        report.limiter.commands.contains("rate-limit-redis"),
        "{}",
        report.limiter.commands
    );
    assert!(
        report.observed.counts.rejected > 0,
        "the limit bites: {:?}",
        report.observed.counts
    );

    // Recovering from an injected NOSCRIPT (SCRIPT LOAD and EVALSHA again) surfaces nothing.
    let (report, _dir) = run_spec(scenario("injected-errors"), &own, Kind::Process, false)
        .await
        .unwrap();
    assert_eq!(
        verdict_of(&report, Invariant::ErrorsSurfaced),
        Verdict::Valid,
        "{report:#?}"
    );
    assert!(
        report.invariants[0].summary.contains("recovered"),
        "{}",
        report.invariants[0].summary
    );
}

fn adapter(dir: &std::path::Path, name: &str, source: &str) -> String {
    let path = dir.join(name);
    std::fs::write(&path, source).unwrap();
    format!("exec:python3 {}", path.display())
}

/// The adapter's problems in a run's history: (detail, fatal).
fn adapter_problems(run_dir: &std::path::Path) -> Vec<(String, bool)> {
    read_history(&run_dir.join("history.jsonl"))
        .unwrap()
        .into_iter()
        .filter_map(|e| match e {
            Event::Problem {
                source: ProblemSource::ExecAdapter,
                detail,
                fatal,
                ..
            } => Some((detail, fatal)),
            _ => None,
        })
        .collect()
}

fn has_problem(problems: &[(String, bool)], needle: &str, fatal: bool) -> bool {
    problems.iter().any(|(p, f)| p.contains(needle) && *f == fatal)
}

#[tokio::test(flavor = "multi_thread")]
async fn protocol_violations_are_reported_never_admitted() {
    let dir = tempfile::tempdir().unwrap();
    // Answers a malformed reply to every third request, an unknown id (then its real reply)
    // to every fifth, and nothing to the seventh: each a violation, none fatal on its own.
    let bad = adapter(
        dir.path(),
        "bad.py",
        r#"
import json, sys
print(json.dumps({"protocol": 1}), flush=True)
for n, line in enumerate(sys.stdin, 1):
    req = json.loads(line)
    if n % 3 == 0:
        print(json.dumps({"id": req["id"], "allowed": "yes"}), flush=True)
        continue
    if n % 5 == 0:
        print(json.dumps({"id": 999999, "allowed": True}), flush=True)
    if n != 7:
        print(json.dumps({"id": req["id"], "allowed": False, "count": 0}), flush=True)
"#,
    );
    let (report, run_dir) = run_spec(scenario("steady-control"), &bad, Kind::Process, false)
        .await
        .unwrap();
    let counts = &report.observed.counts;
    assert_eq!(counts.allowed, 0, "no violation counts as an admission: {counts:?}");
    assert!(counts.indeterminate >= 1 && counts.errors > 100, "{counts:?}");
    let problems = adapter_problems(run_dir.path());
    for needle in [
        "a malformed reply (invalid type: string \"yes\", expected a boolean",
        "unknown or finished request id 999999",
        "no reply within 5000 ms to request",
    ] {
        assert!(has_problem(&problems, needle, false), "{needle}: {problems:#?}");
    }
    // A third of the replies broke the protocol: far more than 1%, so the run cannot pass.
    assert!(
        has_problem(&problems, "replies were protocol violations (more than 1%)", true),
        "{problems:#?}"
    );
    assert!(!has_problem(&problems, "declared dead", true), "{problems:#?}");
    // (Invalid rather than unknown: it rejects everything, and no-lockout sees that.)
    assert_ne!(report.verdict, Verdict::Valid, "{report:#?}");
    assert!(
        report.problems.iter().any(|p| p.contains("more than 1%")),
        "{:?}",
        report.problems
    );
    let history = read_history(&run_dir.path().join("history.jsonl")).unwrap();
    assert!(history.iter().any(|e| matches!(
        e,
        Event::Complete { outcome: Outcome::Indeterminate, error: Some(err), .. } if err.contains("no reply within")
    )));
}

#[tokio::test(flavor = "multi_thread")]
async fn an_adapter_that_exits_or_never_says_hello_cannot_pass() {
    let dir = tempfile::tempdir().unwrap();
    // Exits at the fortieth request: a fatal problem; the requests after it are refused.
    let exits = adapter(
        dir.path(),
        "exits.py",
        r#"
import json, sys
print(json.dumps({"protocol": 1}), flush=True)
for n, line in enumerate(sys.stdin, 1):
    if n == 40:
        sys.exit("lost my nerve at request 40")
    print(json.dumps({"id": json.loads(line)["id"], "allowed": False, "count": 0}), flush=True)
"#,
    );
    let (report, run_dir) = run_spec(scenario("steady-control"), &exits, Kind::Process, false)
        .await
        .unwrap();
    let counts = &report.observed.counts;
    assert!(counts.indeterminate > 0 && counts.errors > 0, "{counts:?}");
    let problems = adapter_problems(run_dir.path());
    assert!(
        has_problem(&problems, "closed its stdout (exited?) during the run", true),
        "{problems:#?}"
    );
    // Its last words, quoted from its stderr, say why it went.
    assert!(
        has_problem(&problems, "ending with:\n    lost my nerve at request 40", true),
        "{problems:#?}"
    );
    assert_ne!(report.verdict, Verdict::Valid, "{report:#?}");

    // No hello: a setup error that says what the adapter must print, before any traffic.
    let mute = adapter(dir.path(), "mute.py", "import sys\nsys.exit(0)\n");
    let err = limiter_harness_tests::try_run_spec(scenario("steady-control"), &mute, Kind::Process)
        .await
        .expect_err("an adapter without hello cannot run");
    let text = err.to_string();
    assert!(
        text.contains("exited before its hello line") && text.contains("adapter.stderr.log"),
        "{text}"
    );
}

// ---- adapters that must not hold a run up, nor pass it ------------------------------------

/// Run steady-control (3.7 s of traffic, ~600 requests) against `spec`, failing if it takes
/// `secs` or more: an adapter that answers nothing would take ~600 × 5 s / 4 identities if
/// every request waited for its own reply timeout.
async fn run_within(spec: &str, secs: u64) -> (Report, tempfile::TempDir) {
    let started = std::time::Instant::now();
    let run = run_spec(scenario("steady-control"), spec, Kind::Process, false);
    let (report, dir) = tokio::time::timeout(std::time::Duration::from_secs(secs), run)
        .await
        .unwrap_or_else(|_| panic!("the run of {spec} did not end within {secs} s"))
        .unwrap();
    let elapsed = started.elapsed();
    assert!(elapsed.as_secs() < secs, "{elapsed:?}");
    assert!(report.observed.wall_ms < secs * 1000, "{}", report.observed.wall_ms);
    (report, dir)
}

#[tokio::test(flavor = "multi_thread")]
async fn a_hung_adapter_is_declared_dead_and_the_run_ends_unknown_at_once() {
    let dir = tempfile::tempdir().unwrap();
    // Says hello, reads every request, answers none.
    let hung = adapter(
        dir.path(),
        "hung.py",
        "import json, sys\nprint(json.dumps({'protocol': 1}), flush=True)\nfor line in sys.stdin:\n    pass\n",
    );
    let (report, run_dir) = run_within(&hung, 40).await;
    assert_eq!(report.verdict, Verdict::Unknown, "{report:#?}");
    let counts = &report.observed.counts;
    assert_eq!(counts.allowed + counts.rejected, 0, "{counts:?}");
    assert!(counts.requests > 500, "every request completed: {counts:?}");
    let problems = adapter_problems(run_dir.path());
    assert!(
        has_problem(
            &problems,
            "the adapter is declared dead: it missed 3 replies in a row (none within 5000 ms)",
            true
        ),
        "{problems:#?}"
    );
    assert!(
        report.problems.iter().any(|p| p.contains("declared dead")),
        "{:?}",
        report.problems
    );
    // Declared dead at the first timeouts (~5 s in): what waited failed then, and the rest
    // was refused at once rather than waiting 5 s each.
    let history = read_history(&run_dir.path().join("history.jsonl")).unwrap();
    let refused = history
        .iter()
        .filter(|e| matches!(e, Event::Complete { error: Some(err), .. } if err.contains("not running")))
        .count();
    assert!(refused > 400, "{refused} refused: {counts:?}");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_line_over_one_mib_declares_the_adapter_dead() {
    let dir = tempfile::tempdir().unwrap();
    // Answers ten requests, then prints 8 MiB without a newline and waits.
    let endless = adapter(
        dir.path(),
        "endless.py",
        r#"
import json, sys
print(json.dumps({"protocol": 1}), flush=True)
for n, line in enumerate(sys.stdin, 1):
    if n <= 10:
        print(json.dumps({"id": json.loads(line)["id"], "allowed": False, "count": 0}), flush=True)
    elif n == 11:
        sys.stdout.write("x" * (8 << 20))
        sys.stdout.flush()
"#,
    );
    let (report, run_dir) = run_within(&endless, 40).await;
    assert_eq!(report.verdict, Verdict::Unknown, "{report:#?}");
    let problems = adapter_problems(run_dir.path());
    assert!(
        has_problem(
            &problems,
            "the adapter is declared dead: it printed a line longer than 1 MiB, the cap on a line",
            true
        ),
        "{problems:#?}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_hello_over_one_mib_is_a_start_error() {
    let dir = tempfile::tempdir().unwrap();
    // A hello of 2 MiB, a valid JSON object otherwise.
    let big_hello = adapter(
        dir.path(),
        "big_hello.py",
        r#"
import json, sys
sys.stderr.write("about to say a long hello\n")
print(json.dumps({"protocol": 1, "name": "x" * (2 << 20)}), flush=True)
sys.stdin.readline()
"#,
    );
    let text = match limiter_harness_tests::try_run_spec(scenario("steady-control"), &big_hello, Kind::Process).await {
        Ok(report) => panic!("a hello over the cap started a run (verdict {})", report.verdict.name()),
        Err(e) => e.to_string(),
    };
    for needle in [
        "its first line exceeds 1 MiB",
        "adapter.stderr.log",
        "about to say a long hello",
    ] {
        assert!(text.contains(needle), "{needle}: {text}");
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn json_arrays_are_never_admissions() {
    let dir = tempfile::tempdir().unwrap();
    // A JSON array a struct could be read from field by field: id, allowed, count, ...
    let arrays = adapter(
        dir.path(),
        "arrays.py",
        r#"
import json, sys
print(json.dumps({"protocol": 1}), flush=True)
for line in sys.stdin:
    print(json.dumps([json.loads(line)["id"], True, 3, None, False, None]), flush=True)
"#,
    );
    let (report, run_dir) = run_within(&arrays, 40).await;
    assert_eq!(report.observed.counts.allowed, 0, "{:?}", report.observed.counts);
    assert_eq!(report.verdict, Verdict::Unknown, "{report:#?}");
    let problems = adapter_problems(run_dir.path());
    assert!(
        has_problem(
            &problems,
            "the adapter is declared dead: it printed a line that is not a reply line (a JSON array, not an object)",
            true
        ),
        "{problems:#?}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn negative_counts_are_never_admissions() {
    let dir = tempfile::tempdir().unwrap();
    let negative = adapter(
        dir.path(),
        "negative.py",
        r#"
import json, sys
print(json.dumps({"protocol": 1}), flush=True)
for line in sys.stdin:
    print(json.dumps({"id": json.loads(line)["id"], "allowed": True, "count": -1}), flush=True)
"#,
    );
    let (report, run_dir) = run_within(&negative, 40).await;
    let counts = &report.observed.counts;
    assert_eq!(counts.allowed, 0, "{counts:?}");
    assert_eq!(counts.errors, counts.requests, "{counts:?}");
    assert_eq!(report.verdict, Verdict::Unknown, "{report:#?}");
    let problems = adapter_problems(run_dir.path());
    assert!(
        has_problem(&problems, "a negative `count` (-1)", false),
        "{problems:#?}"
    );
    let share = format!(
        "{0} of {0} replies were protocol violations (more than 1%)",
        counts.requests
    );
    assert!(has_problem(&problems, &share, true), "{share}: {problems:#?}");
}

/// A correct fixed window (examples/python/fixed_window_fixed.py) deciding one request in
/// ten; the other nine get `malformed` (with `%d` for the id) and never reach Redis.
fn nine_in_ten(dir: &std::path::Path, name: &str, malformed: &str) -> String {
    let source = format!(
        r#"
import json, os, sys
sys.path.insert(0, {examples:?})
import redis
from adapter import Request, limit_and_window
from fixed_window_fixed import decide
client = redis.Redis.from_url(os.environ["REDIS_URL"], socket_timeout=2)
limit, window_ms = limit_and_window()
print(json.dumps({{"protocol": 1}}), flush=True)
for n, line in enumerate(sys.stdin, 1):
    m = json.loads(line)
    if n % 10:
        print({malformed:?} % m["id"], flush=True)
        continue
    allowed, count = decide(client, Request(m["id"], m["identity"], m["key"]), limit, window_ms)
    print(json.dumps({{"id": m["id"], "allowed": allowed, "count": count}}), flush=True)
"#,
        examples = example("python").display().to_string(),
    );
    python("fixed_window_fixed"); // asserts redis-py is installed
    adapter(dir, name, &source)
}

#[tokio::test(flavor = "multi_thread")]
async fn an_adapter_answering_nine_in_ten_with_malformed_lines_is_unknown_not_valid() {
    let dir = tempfile::tempdir().unwrap();
    // Malformed objects that name their request: each fails at once as an error.
    let spec = nine_in_ten(dir.path(), "nine_malformed.py", r#"{"id": %d, "allowed": "yes"}"#);
    let (report, run_dir) = run_within(&spec, 40).await;
    let counts = &report.observed.counts;
    assert!(counts.allowed > 0, "the tenth requests were decided: {counts:?}");
    assert!(counts.errors * 10 >= counts.requests * 8, "{counts:?}");
    // Nothing the checks saw was wrong: only the share of violations keeps it from passing.
    assert_eq!(report.verdict, Verdict::Unknown, "{report:#?}");
    assert!(
        report.invariants.iter().all(|c| c.verdict == Verdict::Unknown),
        "{report:#?}"
    );
    let share = "replies were protocol violations (more than 1%)";
    assert!(
        report.invariants.iter().any(|c| c.summary.contains(share)),
        "{report:#?}"
    );
    assert!(
        report.problems.iter().any(|p| p.contains(share)),
        "{:?}",
        report.problems
    );
    let problems = adapter_problems(run_dir.path());
    assert!(!has_problem(&problems, "declared dead", true), "{problems:#?}");

    // Lines that are not JSON at all: declared dead at the first.
    let spec = nine_in_ten(dir.path(), "nine_garbage.py", "{\"id\": %d, \"allowed\": tru");
    let (report, run_dir) = run_within(&spec, 40).await;
    assert_eq!(report.verdict, Verdict::Unknown, "{report:#?}");
    let problems = adapter_problems(run_dir.path());
    assert!(
        has_problem(
            &problems,
            "the adapter is declared dead: it printed a line that is not a reply line (not JSON",
            true
        ),
        "{problems:#?}"
    );
}

// ---- real limiters with their own keys ----------------------------------------------------

/// A shipped scenario with a window of `window_ms`, everything else scaled with it.
fn rescaled(name: &str, window_ms: u64) -> limiter_harness::scenario::Scenario {
    let mut s = scenario(name);
    s.rescale_window(window_ms).expect("rescaled");
    s
}

fn limits_installed() {
    assert!(
        std::process::Command::new("python3")
            .args(["-c", "import limits"])
            .status()
            .is_ok_and(|s| s.success()),
        "the `limits` examples need python3 with limits 5.8: `python3 -m pip install 'limits[redis]==5.8.0'` (just test-deps does it)"
    );
}

fn keys_of(report: &Report) -> Vec<String> {
    report
        .invariants
        .iter()
        .flat_map(|c| c.anomalies.iter().map(|a| a.key.clone()))
        .collect()
}

#[tokio::test(flavor = "multi_thread")]
async fn correct_limiters_with_their_own_keys_pass_steady_control() {
    // Long: one run per real limiter layout, asserted the same way, in a row.
    limits_installed();
    let two_key = format!("lua:{}", example("lua/two_key_token_bucket.lua").display());
    let cases = [
        // Prefixed and suffixed: LIMITS:LIMITER/api/<identity>/10/1/second.
        (
            python("limits_fixed_window"),
            1000,
            "LIMITS:LIMITER/api/{identity}/10/1/second",
        ),
        (
            python("limits_moving_window"),
            1000,
            "LIMITS:LIMITER/api/{identity}/10/1/second",
        ),
        // Two counters, the current window's (a hash tag) and the previous one's (`/-1`),
        // rotated by RENAME and SET 0: a sliding window counter, no reset, two windows' TTL.
        (
            python("limits_sliding_window_counter"),
            1000,
            "LIMITS:{{LIMITER/api/{identity}/10/1/second}}",
        ),
        // A key per window: geocode:calls:<identity>:<window number>.
        (python("daily_cap"), 510, "geocode:calls:{identity}:*"),
        // Two keys per identity, kept two refill periods.
        (two_key, 510, "request_rate_limiter.{{{identity}}}.tokens"),
    ];
    for (spec, window_ms, template) in cases {
        let (report, dir) = run_spec(rescaled("steady-control", window_ms), &spec, Kind::Process, false)
            .await
            .unwrap();
        assert_eq!(report.verdict, Verdict::Valid, "{spec}: {report:#?}");
        assert_eq!(report.keys.templates[0], template, "{spec}");
        // Every decided request's keys were learned from the wire, and are the layout's.
        let layout = KeyLayout::parse(&report.keys.templates, 4, LayoutSource::Scenario).unwrap();
        let history = read_history(&dir.path().join("history.jsonl")).unwrap();
        let learned: Vec<&Vec<String>> = history
            .iter()
            .filter_map(|e| match e {
                Event::Complete { keys, outcome, .. } if *outcome != Outcome::Error => Some(keys),
                _ => None,
            })
            .collect();
        assert!(learned.len() > 100, "{spec}");
        for keys in &learned {
            assert_eq!(
                keys.len(),
                layout.templates.len(),
                "{spec}: one key per template: {keys:?}"
            );
            assert!(
                keys.iter().all(|k| layout.identity_of(k.as_bytes()).is_some()),
                "{spec}: {keys:?}"
            );
        }
        assert!(
            report.keys.from.contains("declared by the limiter"),
            "{spec}: {}",
            report.keys.from
        );
        assert!(report.observed.counts.rejected > 0, "{spec}: the limit bites");
        let ttl = verdict_of(&report, Invariant::TtlBounded);
        assert_eq!(ttl, Verdict::Valid, "{spec}: TTLs were seen and bounded");
    }
    // A catalog scenario whose window is a whole second already: requests bunched at the
    // window's edge, which a fixed window may admit twice over and a moving window may not.
    for example in ["limits_fixed_window", "limits_moving_window"] {
        let (report, _dir) = run_spec(
            scenario("window-boundary-burst"),
            &python(example),
            Kind::Process,
            false,
        )
        .await
        .unwrap();
        assert_eq!(report.verdict, Verdict::Valid, "{example}: {report:#?}");
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_first_run_with_a_layout_that_matches_nothing_ends_with_a_hint_not_a_verdict() {
    limits_installed();
    let mut s = rescaled("steady-control", 1000);
    // What a new user gets with the default layout: limits never touches rl:0.
    s.override_keys(&["rl:{identity}".to_owned()]).unwrap();
    let (report, _dir) = run_spec(s, &python("limits_fixed_window"), Kind::Process, false)
        .await
        .unwrap();
    assert_eq!(report.verdict, Verdict::Unknown, "{report:#?}");
    let ttl = report
        .invariants
        .iter()
        .find(|c| c.invariant == Invariant::TtlPresent)
        .unwrap();
    assert_eq!(ttl.verdict, Verdict::Unknown);
    for needle in [
        "no key matching `rl:{identity}`",
        "LIMITS:LIMITER/api/",
        "--keys 'LIMITS:LIMITER/api/{identity}/10/1/second'",
    ] {
        assert!(ttl.summary.contains(needle), "{needle}: {}", ttl.summary);
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn limits_fixed_window_stays_locked_out_on_its_own_preexisting_key() {
    limits_installed();
    let (report, dir) = run_spec(
        rescaled("preexisting-immortal-key", 1000),
        &python("limits_fixed_window"),
        Kind::Process,
        false,
    )
    .await
    .unwrap();
    assert_eq!(report.verdict, Verdict::Invalid, "{report:#?}");
    for invariant in [Invariant::TtlPresent, Invariant::NoLockout] {
        assert_eq!(verdict_of(&report, invariant), Verdict::Invalid, "{invariant}");
    }
    assert!(anomaly_kinds(&report, Invariant::TtlPresent).contains(&"immortal-key".to_owned()));
    let real = "LIMITS:LIMITER/api/0/10/1/second";
    assert!(keys_of(&report).iter().all(|k| k == real), "{:?}", keys_of(&report));
    // The adapter planted it in its own representation, and the history says which key.
    let history = read_history(&dir.path().join("history.jsonl")).unwrap();
    assert!(
        history
            .iter()
            .any(|e| matches!(e, Event::Setup { key, .. } if key == real))
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn incident_two_daily_cap_fails_on_the_shared_cache_and_holds_on_its_own_server() {
    let (shared, dir) = run_spec(
        scenario("shared-cache-eviction"),
        &python("daily_cap"),
        Kind::Process,
        false,
    )
    .await
    .unwrap();
    let history = read_history(&dir.path().join("history.jsonl")).unwrap();
    assert!(
        history.iter().any(|e| matches!(
            e,
            Event::Complete { keys, .. } if keys.iter().any(|k| k.starts_with("geocode:calls:0:"))
        )),
        "the daily key was learned from the wire"
    );
    assert_eq!(
        verdict_of(&shared, Invariant::NoCounterReset),
        Verdict::Invalid,
        "{shared:#?}"
    );
    assert!(anomaly_kinds(&shared, Invariant::NoCounterReset).contains(&"reset-by-eviction".to_owned()));
    assert!(
        keys_of(&shared).iter().any(|k| k.starts_with("geocode:calls:0:")),
        "the real key is named: {:?}",
        keys_of(&shared)
    );
    let (dedicated, _dir) = run_spec(
        scenario("dedicated-noeviction"),
        &python("daily_cap"),
        Kind::Process,
        false,
    )
    .await
    .unwrap();
    assert_eq!(dedicated.verdict, Verdict::Valid, "{dedicated:#?}");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_scenario_that_needs_a_planted_key_is_unknown_for_an_adapter_that_cannot_plant() {
    let dir = tempfile::tempdir().unwrap();
    let no_plant = adapter(
        dir.path(),
        "no_plant.py",
        &format!(
            "import sys\nsys.path.insert(0, {:?})\nfrom fixed_window_fixed import decide\nfrom adapter import serve\nserve(decide, 'no plant')\n",
            example("python").display().to_string()
        ),
    );
    let (report, _dir) = run_spec(scenario("preexisting-immortal-key"), &no_plant, Kind::Process, false)
        .await
        .unwrap();
    assert_eq!(report.verdict, Verdict::Unknown, "{report:#?}");
    assert!(
        report.problems.iter().any(|p| p.contains("does not offer `plant`")),
        "{:?}",
        report.problems
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_commands_setup_plants_on_the_limiters_own_keys() {
    limits_installed();
    let path = limiter_harness_tests::scenario_path("preexisting-immortal-key");
    let text = std::fs::read_to_string(&path).unwrap().replace(
        "kind = \"exhausted-key\"\nidentity = 0",
        "kind = \"commands\"\nidentity = 0\ncommands = [\"SET LIMITS:LIMITER/api/{identity}/10/1/second 99\"]",
    );
    assert!(text.contains("kind = \"commands\""), "the setup was rewritten");
    let mut s = limiter_harness::scenario::parse_scenario(&path, &text).unwrap();
    s.rescale_window(1000).expect("rescaled");
    let (report, dir) = run_spec(s, &python("limits_fixed_window"), Kind::Process, false)
        .await
        .unwrap();
    assert_eq!(
        verdict_of(&report, Invariant::NoLockout),
        Verdict::Invalid,
        "{report:#?}"
    );
    let history = read_history(&dir.path().join("history.jsonl")).unwrap();
    assert!(history.iter().any(|e| matches!(
        e,
        Event::Setup { key, detail, .. } if key == "LIMITS:LIMITER/api/0/10/1/second" && detail.contains("SET LIMITS:LIMITER/api/0/10/1/second 99")
    )));
}

/// The instances of a run that requests went to, from its history.
fn instances_used(run_dir: &std::path::Path) -> std::collections::BTreeSet<u32> {
    read_history(&run_dir.join("history.jsonl"))
        .unwrap()
        .into_iter()
        .filter_map(|e| match e {
            Event::Invoke { instance, .. } => Some(instance),
            _ => None,
        })
        .collect()
}

/// The Python adapters as two app instances (two adapter processes, requests spread over
/// both) and with instance 1's clock 2 s ahead. Incident 2's daily cap
/// (examples/python/daily_cap.py) names its key by the window of the request's `now_ms`, so
/// with agreeing clocks it stays within its limit, and with the skew the two instances count
/// in different "days" and admit one identity more than its bound. Incident 1's fix
/// (examples/python/fixed_window_fixed.py) sets a relative TTL: the server's clock decides,
/// and the skew changes nothing.
#[tokio::test(flavor = "multi_thread")]
async fn python_adapters_run_as_two_instances_and_get_the_skewed_clock() {
    let cap = format!("exec:python3 {}", example("python/daily_cap.py").display());
    let fixed = python("fixed_window_fixed"); // asserts redis-py is installed

    let skewed = scenario("clock-skew-two-instances");
    assert_eq!(skewed.limit.instances, 2);
    assert_eq!(skewed.faults.len(), 1, "the scenario's one fault is the clock skew");
    let mut agreeing = skewed.clone();
    agreeing.faults.clear();
    let cases = [
        (&cap, agreeing, Verdict::Valid),
        (&cap, skewed.clone(), Verdict::Invalid),
        (&fixed, skewed, Verdict::Valid),
    ];
    for (limiter, s, admitted) in cases {
        let skew = !s.faults.is_empty();
        let (report, dir) = run_spec(s, limiter, Kind::Process, false).await.unwrap();
        let case = format!("{limiter}, skew: {skew}");
        assert_eq!(
            instances_used(dir.path()),
            [0, 1].into(),
            "both instances served requests ({case})"
        );
        assert_eq!(
            verdict_of(&report, Invariant::AdmittedWithinLimit),
            admitted,
            "{case}: {report:#?}"
        );
        assert_eq!(
            verdict_of(&report, Invariant::TtlPresent),
            Verdict::Valid,
            "{case}: {report:#?}"
        );
        if admitted == Verdict::Valid {
            assert_eq!(report.verdict, Verdict::Valid, "{case}: {report:#?}");
        }
    }
}

/// Instances of an adapter that lingers after its stdin closes (it finishes a flush,
/// say): stopping the first waits for it, then ends every process of the run — the second
/// instance's adapter too. That is the run ending, not the others dying during it:
/// no problem, and the verdict stands.
#[tokio::test(flavor = "multi_thread")]
async fn stopping_one_instance_of_a_lingering_adapter_is_not_the_others_death() {
    python("fixed_window_fixed"); // asserts redis-py is installed
    let dir = tempfile::tempdir().unwrap();
    let script = dir.path().join("lingering.py");
    std::fs::write(
        &script,
        format!(
            "import sys, time\nsys.path.insert(0, {:?})\nfrom adapter import serve\nfrom fixed_window_fixed import decide\nserve(decide, \"lingering\")\ntime.sleep(30)\n",
            example("python").display().to_string()
        ),
    )
    .unwrap();
    // Four instances: each of the three after the first is a chance for the race to show.
    let mut four = scenario("clock-skew-two-instances");
    four.faults.clear();
    four.limit.instances = 4;
    let spec = format!("exec:python3 {}", script.display());
    let (report, _dir) = run_spec(four, &spec, Kind::Process, false).await.unwrap();
    assert!(report.problems.is_empty(), "{:?}", report.problems);
    assert_eq!(report.verdict, Verdict::Valid, "{report:#?}");
}

/// `failover-readonly`'s point, on Python adapters: incident 1's fix keeps its connections
/// on the demoted node and fails every request after the failover (never-recovered); the
/// same transaction with a reconnect on READONLY (examples/python/fixed_window_reconnecting.py)
/// recovers through the endpoint and passes, no counter reset and every key with a TTL.
#[tokio::test(flavor = "multi_thread")]
async fn a_client_that_reconnects_on_readonly_recovers_from_a_failover() {
    let (report, _dir) = run_spec(
        scenario("failover-readonly"),
        &python("fixed_window_fixed"),
        Kind::Process,
        false,
    )
    .await
    .unwrap();
    assert_eq!(
        verdict_of(&report, Invariant::RecoversAfterFault),
        Verdict::Invalid,
        "{report:#?}"
    );

    let (report, _dir) = run_spec(
        scenario("failover-readonly"),
        &python("fixed_window_reconnecting"),
        Kind::Process,
        false,
    )
    .await
    .unwrap();
    assert_eq!(report.verdict, Verdict::Valid, "{report:#?}");
    assert!(
        report
            .faults
            .iter()
            .any(|f| f.kind == FaultKind::Failover && f.fired == 1),
        "the failover struck: {:?}",
        report.faults
    );
}

/// A serial adapter (one request at a time, redis-py with a 2 s socket timeout) through a
/// server pause longer than the harness's 5 s reply timeout (`server-pause-timeouts` at a
/// 1000 ms window: a 9.8 s pause): every request queued behind the paused one waits the
/// pause out. The reply timeout stretches by the scenario's longest fault hold-up, so the
/// adapter is not declared dead and the run judges how it failed (before: unknown, "missed
/// 3 replies in a row").
#[tokio::test(flavor = "multi_thread")]
async fn a_serial_adapter_waits_out_a_server_pause_longer_than_the_reply_timeout() {
    let mut s = scenario("server-pause-timeouts");
    s.rescale_window(1000).expect("rescaled");
    assert!(s.hold_up_ms_max() > 9_000, "the pause outlasts the 5 s reply timeout");
    let (report, _dir) = run_spec(s, &python("fixed_window_fixed"), Kind::Process, false)
        .await
        .unwrap();
    assert!(
        !report.problems.iter().any(|p| p.contains("declared dead")),
        "{:?}",
        report.problems
    );
    assert_eq!(
        verdict_of(&report, Invariant::FailsAsDeclared),
        Verdict::Valid,
        "{report:#?}"
    );
}
