//! What `ci` hands CI systems, from a hand-written history judged as a run's would be: the
//! JUnit XML and the Markdown summary of a cell that regressed against its baseline, kept
//! as reviewed snapshots (`harness/src/suite/snapshots/`, insta).

use std::path::PathBuf;

use super::baseline::{self, Standing};
use super::ci::cell_result;
use super::outcome::CiReport;
use super::resolve::FlakyPolicy;
use super::{render_junit, render_summary};
use crate::checker::fixtures::HistoryBuilder;
use crate::history::{Event, LimiterFacts};
use crate::keys::LayoutSource;
use crate::matrix::Cell;
use crate::runner::judge_history;
use crate::scenario::{Adjust, Algorithm};

const SCENARIO: &str = r#"name = "tiny"
about = "Two requests and a final audit."
seed = 3

[limit]
requests_max = 10
window_ms = 1000

[[phase]]
kind = "steady"
rate_per_s = 10
duration_ms = 200

[check]
invariants = ["ttl-present", "ttl-bounded"]
"#;

/// A judged cell whose final audit found its key without a TTL (`immortal`), or with one.
fn tiny_cell(immortal: bool) -> Cell {
    tiny_cell_with(immortal, &[])
}

/// [`tiny_cell`], its first anomaly found on `more` keys too.
fn tiny_cell_with(immortal: bool, more: &[&str]) -> Cell {
    let header = Event::Run {
        scenario: "tiny".into(),
        limiter: "exec:python3 ratelimit.py".into(),
        seed: 3,
        backend: "process".into(),
        reproduce:
            "limiter-harness run scenarios/tiny.toml --limiter 'exec:python3 ratelimit.py' --seed 3 --backend process"
                .into(),
        scenario_file: "scenarios/tiny.toml".into(),
        scenario_text: SCENARIO.into(),
        shipped: false,
        adjust: Adjust::default(),
    };
    let limiter = Event::Limiter {
        t_us: 0,
        limiter: LimiterFacts {
            name: "api".into(),
            algorithm: Algorithm::FixedWindow,
            round_trips_max: 2,
            commands: "INCR; EXPIRE".into(),
            ttl_max_windows: None,
            ttl_max_ms: None,
            keys: vec!["rl:{identity}".into()],
            keys_from: LayoutSource::Default,
            keys_note: None,
            proxy: None,
        },
    };
    let body = HistoryBuilder::new()
        .allowed(1, 0, 0, 1, 1)
        .sample(50, false, &[("rl:0", 900, Some("1"))])
        .allowed(2, 0, 100, 101, 2)
        .sample(300, true, &[("rl:0", if immortal { -1 } else { 700 }, Some("2"))]);
    let mut events = vec![header, limiter];
    events.extend(body.events().iter().cloned());
    let mut report = judge_history(events).expect("a whole history").report;
    // The same anomaly on other keys too, as a race that hits another key would give.
    if let Some(check) = report.invariants.iter_mut().find(|c| !c.anomalies.is_empty()) {
        let first = check.anomalies[0].clone();
        for key in more {
            let mut other = first.clone();
            other.key = (*key).into();
            check.anomalies.push(other);
        }
    }
    Cell {
        scenario: "tiny".into(),
        limiter: "api".into(),
        server: None,
        expected: crate::matrix::Expectation::Unstated,
        note: None,
        outcome: Ok(report),
        wall_ms: 1234,
    }
}

/// The cells' `ci` report against a baseline holding `tiny--api.md` = the passing cell's
/// snapshot; the baseline's place on this machine replaced by the one a team would see.
fn report_against_passing_baseline(runs: &[&Cell], flaky: FlakyPolicy) -> CiReport {
    report_against(&tiny_cell(false), runs, flaky)
}

/// The cells' `ci` report against a baseline holding `baseline`'s snapshot as `tiny--api.md`.
fn report_against(baseline: &Cell, runs: &[&Cell], flaky: FlakyPolicy) -> CiReport {
    let dir = tempfile::tempdir().unwrap();
    let snapshot = crate::report::render_snapshot(baseline.outcome.as_ref().unwrap());
    std::fs::write(dir.path().join("tiny--api.md"), snapshot).unwrap();
    let file = baseline::baseline_file(dir.path(), "tiny", "api");
    let numbered: Vec<(usize, &Cell)> = runs.iter().copied().enumerate().collect();
    let (mut result, _) = cell_result(&numbered, &baseline::read(&file), dir.path(), |k| {
        PathBuf::from(format!(".limiter-harness/reports/runs/{k}"))
    });
    let here = dir.path().display().to_string();
    result.baseline_file = result.baseline_file.replace(&here, "limiter-harness/baseline");
    result.diff = result.diff.replace(&here, "limiter-harness/baseline");
    CiReport {
        suite: "service".into(),
        baseline: "limiter-harness/baseline".into(),
        scenarios: vec!["tiny".into()],
        limiters: vec!["api".into()],
        cells: vec![result],
        cells_in_suite: 1,
        selection: None,
        shard: None,
        stale: Vec::new(),
        table: None,
        flaky,
        accepted: Vec::new(),
        interrupted: false,
        identical: false,
        passed: false,
    }
    .settle()
}

#[test]
fn a_regressed_cell_as_junit_and_summary() {
    let cell = tiny_cell(true);
    let snapshot = crate::report::render_snapshot(cell.outcome.as_ref().unwrap());
    assert!(
        snapshot.contains("| ttl-present | invalid | immortal-key: rl:0 |"),
        "{snapshot}"
    );
    let report = report_against_passing_baseline(&[&cell, &cell, &cell], FlakyPolicy::Fail);
    let result = &report.cells[0];
    assert_eq!(result.standing, Standing::Regression);
    assert_eq!(
        result.changes[0].text,
        "ttl-present: valid → invalid (immortal-key: rl:0)"
    );
    assert!(!report.passed);
    insta::assert_snapshot!("junit", render_junit(&report));
    insta::assert_snapshot!("summary", render_summary(&report));
}

#[test]
fn a_flaky_cell_says_what_each_run_gave_and_fails_as_the_suite_says() {
    let (bad, good) = (tiny_cell(true), tiny_cell(false));
    let report = report_against_passing_baseline(&[&good, &bad, &good], FlakyPolicy::Fail);
    let result = &report.cells[0];
    assert_eq!(result.standing, Standing::Flaky);
    assert_eq!(result.runs, vec!["ttl-present: invalid 1 of 3, valid 2 of 3"]);
    assert_eq!(
        result.report.as_deref(),
        Some(".limiter-harness/reports/runs/1/tiny/api/report.md"),
        "the report of the run that differed"
    );
    assert!(!report.passed);
    insta::assert_snapshot!("flaky-junit", render_junit(&report));
    insta::assert_snapshot!("flaky-summary", render_summary(&report));
    // The suite's policy may let it pass, reported.
    let lenient = report_against_passing_baseline(&[&good, &bad, &good], FlakyPolicy::Pass);
    assert!(lenient.passed);
    assert!(render_summary(&lenient).contains("`flaky = \"pass\"` lets it pass"));
}

#[test]
fn a_cell_whose_runs_name_other_keys_with_the_same_verdicts_passes_and_says_so() {
    let (one, two) = (tiny_cell(true), tiny_cell_with(true, &["rl:1"]));
    let snapshot = crate::report::render_snapshot(two.outcome.as_ref().unwrap());
    assert!(snapshot.contains("immortal-key: rl:0, rl:1"), "{snapshot}");
    let report = report_against(&one, &[&two, &one, &one], FlakyPolicy::Fail);
    let result = &report.cells[0];
    assert_eq!(result.standing, Standing::KeysVary);
    assert_eq!(result.runs, vec!["ttl-present: other anomalies from run to run"]);
    assert!(report.passed && report.identical);
    let summary = render_summary(&report);
    assert!(
        summary.contains("In 1, which keys the anomalies name varies"),
        "{summary}"
    );
    insta::assert_snapshot!("keys-vary-summary", summary);
    assert!(!render_junit(&report).contains("<failure"));
    // Every run on the other keys: the keys moved for good, a change that fails the gate.
    let moved = report_against(&one, &[&two, &two, &two], FlakyPolicy::Fail);
    assert_eq!(moved.cells[0].standing, Standing::Changed);
    assert!(!moved.passed);
    // Another verdict among the runs is flaky, keys or not.
    let flaky = report_against(&one, &[&two, &tiny_cell(false), &one], FlakyPolicy::Fail);
    assert_eq!(flaky.cells[0].standing, Standing::Flaky);
}

/// A cell of `tiny` with one `delay-reply` fault (`times` as given, `None`: every match)
/// that struck `strikes` times, judged from a hand-written history.
fn delayed_cell_snapshot(times: Option<u64>, strikes: u64) -> String {
    let times_line = times
        .map(|t| format!("times = {t}\n"))
        .unwrap_or_else(|| "times = 0\n".into());
    let scenario = format!("{SCENARIO}\n[[fault]]\nkind = \"delay-reply\"\ndelay_ms = 1\n{times_line}");
    let header = Event::Run {
        scenario: "tiny".into(),
        limiter: "incr-then-expire".into(),
        seed: 3,
        backend: "process".into(),
        reproduce: "limiter-harness run scenarios/tiny.toml --limiter incr-then-expire --seed 3".into(),
        scenario_file: "scenarios/tiny.toml".into(),
        scenario_text: scenario,
        shipped: false,
        adjust: Adjust::default(),
    };
    let limiter = Event::Limiter {
        t_us: 0,
        limiter: LimiterFacts {
            name: "incr-then-expire".into(),
            algorithm: Algorithm::FixedWindow,
            round_trips_max: 2,
            commands: "INCR; PEXPIRE".into(),
            ttl_max_windows: None,
            ttl_max_ms: None,
            keys: vec!["rl:{identity}".into()],
            keys_from: LayoutSource::Default,
            keys_note: None,
            proxy: None,
        },
    };
    let mut body = HistoryBuilder::new().allowed(1, 0, 0, 10, 1);
    for n in 0..strikes {
        body = body.command_fault(1 + n, crate::scenario::FaultKind::DelayReply, 1, "INCR");
    }
    let body = body.sample(300, true, &[("rl:0", 700, Some("1"))]);
    let mut events = vec![header, limiter];
    events.extend(body.events().iter().cloned());
    let judged = judge_history(events).expect("a whole history");
    crate::report::render_snapshot(&judged.report)
}

#[test]
fn a_fault_that_strikes_every_match_is_snapshotted_without_its_count() {
    // How often a `times = 0` fault strikes follows the round trips the run made, which
    // timing decides (e.g. one PEXPIRE per window): the reviewed snapshot must not change
    // with it, while report.md keeps the count.
    let three = delayed_cell_snapshot(None, 3);
    let five = delayed_cell_snapshot(None, 5);
    assert_eq!(three, five);
    assert!(
        three.contains("— struck at every match (how often: report.md)"),
        "{three}"
    );
    // A bounded fault's count is the seed's: it stays in the snapshot.
    let bounded = delayed_cell_snapshot(Some(2), 2);
    assert!(bounded.contains("— struck 2 time(s)"), "{bounded}");
}

/// The snapshot of a key-per-window limiter whose two windows' keys (named after the
/// window's epoch second, from `epoch_s`) the final audit found without a TTL.
fn key_per_window_snapshot(epoch_s: u64) -> String {
    let header = Event::Run {
        scenario: "tiny".into(),
        limiter: "lua:fixed_window.lua".into(),
        seed: 3,
        backend: "process".into(),
        reproduce: "limiter-harness run scenarios/tiny.toml --limiter lua:fixed_window.lua --seed 3".into(),
        scenario_file: "scenarios/tiny.toml".into(),
        scenario_text: SCENARIO.into(),
        shipped: false,
        adjust: Adjust::default(),
    };
    let limiter = Event::Limiter {
        t_us: 0,
        limiter: LimiterFacts {
            name: "lua:fixed_window.lua".into(),
            algorithm: Algorithm::FixedWindow,
            round_trips_max: 1,
            commands: "EVALSHA".into(),
            ttl_max_windows: None,
            ttl_max_ms: None,
            keys: vec!["api:rl:{identity}:*".into()],
            keys_from: LayoutSource::Limiter("the Lua sidecar".into()),
            keys_note: None,
            proxy: None,
        },
    };
    let (first, second) = (format!("api:rl:0:{epoch_s}"), format!("api:rl:0:{}", epoch_s + 1));
    let body = HistoryBuilder::new()
        .allowed_on(1, 0, (0, 1), Some(1), &[&first])
        .allowed_on(2, 0, (1000, 1001), Some(1), &[&second])
        .sample(1300, true, &[(&first, -1, Some("1")), (&second, -1, Some("1"))]);
    let mut events = vec![header, limiter];
    events.extend(body.events().iter().cloned());
    let judged = judge_history(events).expect("a whole history");
    crate::report::render_snapshot(&judged.report)
}

#[test]
fn a_key_per_window_is_snapshotted_without_what_the_clock_decides() {
    // The same limiter run today and tomorrow names other keys; its snapshot is the same.
    let today = key_per_window_snapshot(1_796_412_344);
    let tomorrow = key_per_window_snapshot(1_796_412_344 + 86_400);
    assert_eq!(today, tomorrow);
    assert!(
        today.contains("| ttl-present | invalid | immortal-key: api:rl:0:<window> |"),
        "{today}"
    );
    assert!(!today.contains("1796412"), "{today}");
}

/// A cell the baseline records as flaky reads `flaky` in the suite's table, is listed as
/// such and judged against no expectation: the table is the same whichever way its run went,
/// so it stays compared on a suite with a flaky cell.
#[test]
fn a_flaky_cell_reads_the_same_in_the_table_whatever_its_run_gave() {
    let suite = super::resolve::parse_suite(
        std::path::Path::new("/team/limiter-harness.toml"),
        "[suite]\nname = \"team\"\nscenarios = [\"*\"]\ntable = \"MATRIX.md\"\n\n[[limiter]]\nname = \"api\"\nspec = \"exec:python3 ratelimit.py\"\n",
    )
    .unwrap();
    let scenario = crate::scenario::parse_scenario(std::path::Path::new("tiny.toml"), SCENARIO).unwrap();
    let names = vec!["api".to_owned()];
    let flaky = vec![("tiny".to_owned(), "api".to_owned())];
    let mut failing = tiny_cell(true);
    failing.expected = crate::matrix::Expectation::Pass;
    let mut passing = tiny_cell(false);
    passing.expected = crate::matrix::Expectation::Pass;
    let table = |cell: Cell, flaky: Vec<(String, String)>| {
        super::ci::suite_table(&suite, std::slice::from_ref(&scenario), &names, &[cell], flaky)
    };
    let as_failed = table(failing, flaky.clone());
    assert_eq!(as_failed, table(passing, flaky));
    assert!(as_failed.contains("| tiny | flaky |"), "{as_failed}");
    assert!(
        as_failed.contains("Every cell is what its scenario expects."),
        "{as_failed}"
    );
    assert!(
        as_failed.contains("## Flaky cells\n\n- tiny × api: recorded flaky"),
        "{as_failed}"
    );
    // Not recorded flaky: the run's verdict, against the expectation.
    let judged = table(tiny_cell_expecting_pass(), Vec::new());
    assert!(judged.contains("| tiny | **no TTL** † |"), "{judged}");
}

fn tiny_cell_expecting_pass() -> Cell {
    let mut cell = tiny_cell(true);
    cell.expected = crate::matrix::Expectation::Pass;
    cell
}
