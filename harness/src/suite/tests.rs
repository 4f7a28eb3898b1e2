//! What `ci` hands CI systems, from a hand-written history judged as a run's would be: the
//! JUnit XML and the Markdown summary of a cell that regressed against its baseline, kept
//! as reviewed snapshots (`harness/src/suite/snapshots/`, insta).

use std::path::Path;

use super::{compare, render_junit, render_summary};
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

/// A judged cell whose final audit found its key without a TTL.
fn regressed_cell() -> Cell {
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
        .sample(300, true, &[("rl:0", -1, Some("2"))]);
    let mut events = vec![header, limiter];
    events.extend(body.events().iter().cloned());
    let judged = judge_history(events).expect("a whole history");
    Cell {
        scenario: "tiny".into(),
        limiter: "api".into(),
        server: None,
        expected_fail: false,
        note: None,
        outcome: Ok(judged.report),
        wall_ms: 1234,
    }
}

#[test]
fn a_regressed_cell_as_junit_and_summary() {
    let cell = regressed_cell();
    let snapshot = crate::report::render_snapshot(cell.outcome.as_ref().unwrap());
    assert!(
        snapshot.contains("| ttl-present | invalid | immortal-key: rl:0 |"),
        "{snapshot}"
    );
    let dir = tempfile::tempdir().unwrap();
    let baseline = dir.path().join("baseline");
    std::fs::create_dir_all(&baseline).unwrap();
    let old = snapshot
        .replace(
            "| ttl-present | invalid | immortal-key: rl:0 |",
            "| ttl-present | valid |  |",
        )
        .replace(": INVALID", ": VALID");
    std::fs::write(baseline.join("tiny--api.md"), old).unwrap();
    let cells = [cell];
    let mut comparison = compare(&baseline, &cells);
    // The file's place on this machine is not part of what is reviewed.
    comparison.cells[0].file = Path::new("limiter-harness/baseline/tiny--api.md").to_owned();
    assert_eq!(
        comparison.cells[0].changes,
        vec!["ttl-present: valid → invalid (immortal-key: rl:0)"]
    );
    insta::assert_snapshot!("junit", render_junit("service", &cells, &comparison.cells));
    insta::assert_snapshot!(
        "summary",
        render_summary("service", &["tiny".into()], &["api".into()], &cells, &comparison.cells)
    );
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
