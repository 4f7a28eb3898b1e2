//! The reviewed snapshots: the harness's own suite (`limiter-harness.toml` at the top of the
//! repository: the shipped catalog × every built-in limiter, a fresh server per cell) run by
//! the same `ci` mechanism a team runs on its own limiters, against the baseline in
//! `reports/snapshots/` and the table `reports/MATRIX.md` — a quarter of its cells in
//! containers and the rest on local `redis-server` processes, the quarter chosen so that every
//! scenario and every built-in runs on both, which must give the same verdicts — and the other
//! server versions' suites (`reports/servers/NAME/`). A changed verdict, anomaly kind, rule or
//! fault outcome fails here until the change is accepted (`just snapshots`, i.e.
//! `limiter-harness ci --accept`) and its diff reviewed. Nothing is written.
//!
//! `ci` runs in the suite's directory, the process's working directory: the tests of this
//! binary take turns within one process (`just test` runs each in a process of its own).

use std::path::{Path, PathBuf};
use std::sync::Arc;

use limiter_harness::backend::Backend;

use std::collections::BTreeSet;

use limiter_harness::matrix::Cell;
use limiter_harness::suite::{
    CiOptions, CiRun, Selection, Shard, Standing, Suite, cell_name, load_suite, render_summary, run_ci,
    stale_baseline_files, suite_table,
};
use limiter_harness_tests::{Kind, backend};

/// One test at a time in a process: each moves the working directory.
static TURN: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("..")
        .canonicalize()
        .unwrap()
}

fn suite_at(path: &Path) -> Suite {
    load_suite(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// The harness's own suite (`limiter-harness.toml` at the top), a quarter of its cells in
/// containers and the rest in local `redis-server` processes: `ci --shard 1/4`, whose cells
/// include every scenario and every limiter, then the other cells. Each part must match the
/// reviewed baseline, the two together the table, and no baseline file may be left without
/// its cell. (`just snapshots-both` runs every cell on both backends.) A quarter, not a half:
/// a container's start and removal cost the Docker engine about a second of CPU, a third of
/// the machine's work in a container cell (docs/performance.md).
#[tokio::test(flavor = "multi_thread")]
async fn the_harness_suite_matches_its_reviewed_baseline_and_table_a_quarter_in_containers_the_rest_in_processes() {
    let _turn = TURN.lock().await;
    let suite = suite_at(&root().join("limiter-harness.toml"));
    assert_eq!(
        suite.limiters.len(),
        limiter_harness::limiter::BUILTIN_NAMES.len(),
        "every built-in is in the suite `{}`",
        suite.name
    );
    let processes = backend(Kind::Process).await.expect("redis-server");
    let containers = match backend(Kind::Container).await {
        Some(b) => b,
        None => {
            eprintln!("no Docker (LIMITER_HARNESS_NO_DOCKER=1): the containers' quarter runs in processes too");
            processes.clone()
        }
    };
    std::env::set_current_dir(&suite.dir).unwrap();
    // 8 cells at once in containers, whose starts and removals load the machine more; the
    // suite's `jobs` (12) in processes (docs/performance.md, "The snapshot suites at twelve
    // cells at once").
    let quarter = Selection {
        shard: Some(Shard { index: 1, count: 4 }),
        ..Selection::default()
    };
    let in_containers = check_part(&suite, quarter, containers, Some(8)).await;
    let taken: BTreeSet<String> = in_containers
        .cells
        .iter()
        .map(|c| cell_name(&c.scenario, &c.limiter))
        .collect();
    let rest = Selection {
        cells: suite
            .scenarios
            .iter()
            .flat_map(|s| suite.limiters.iter().map(move |l| cell_name(&s.name(), &l.name)))
            .filter(|name| !taken.contains(name))
            .collect(),
        ..Selection::default()
    };
    let in_processes = check_part(&suite, rest, processes, None).await;
    check_table_of_parts(&suite, vec![in_processes, in_containers]);
}

/// The cells `selection` takes, on `backend`, `jobs` at once (`None`: the suite's): every
/// scenario and every limiter among them, every cell as in the baseline.
async fn check_part(suite: &Suite, selection: Selection, backend: Arc<dyn Backend>, jobs: Option<usize>) -> CiRun {
    let kind = backend.name().to_owned();
    let options = CiOptions {
        selection,
        jobs,
        ..CiOptions::default()
    };
    let run = run_ci(suite, backend, &options).await.expect("the suite runs");
    let limiters: BTreeSet<&str> = run.cells.iter().map(|c| c.limiter.as_str()).collect();
    let scenarios: BTreeSet<&str> = run.cells.iter().map(|c| c.scenario.as_str()).collect();
    assert_eq!(
        (limiters.len(), scenarios.len()),
        (suite.limiters.len(), suite.scenarios.len()),
        "the cells in {kind} take every limiter and every scenario"
    );
    if !run.report.identical {
        let kept = keep_reports(suite, &kind);
        panic!(
            "{kind}: suite `{}` ({} cells) differs from its reviewed baseline; if intended, run `just snapshots` and review `git diff reports/`{kept}\n{}",
            suite.name,
            run.cells.len(),
            render_summary(&run.report)
        );
    }
    run
}

/// The parts together: every cell of the suite, no baseline file without its cell, and the
/// suite's table as they give it.
fn check_table_of_parts(suite: &Suite, runs: Vec<CiRun>) {
    let (scenarios, names) = (runs[0].scenarios.clone(), runs[0].report.limiters.clone());
    // As `ci` does on a whole run: a cell recorded flaky says `flaky` in the table.
    let flaky: Vec<(String, String)> = runs
        .iter()
        .flat_map(|r| &r.report.cells)
        .filter(|c| c.standing == Standing::SameFlaky)
        .map(|c| (c.scenario.clone(), c.limiter.clone()))
        .collect();
    let mut cells: Vec<Cell> = runs.into_iter().flat_map(|r| r.cells).collect();
    let position = |c: &Cell| {
        (
            scenarios.iter().position(|s| s.name == c.scenario),
            names.iter().position(|l| *l == c.limiter),
        )
    };
    cells.sort_by_key(position); // table order, as one whole run gives them
    assert_eq!(
        cells.len(),
        suite.scenarios.len() * suite.limiters.len(),
        "the parts cover the suite"
    );
    let all: Vec<(String, String)> = cells.iter().map(|c| (c.scenario.clone(), c.limiter.clone())).collect();
    let stale = stale_baseline_files(&suite.baseline, &all);
    assert!(stale.is_empty(), "baseline files without a cell: {stale:?}");
    let now = suite_table(suite, &scenarios, &names, &cells, flaky);
    let table = suite.table.as_ref().expect("the suite has a table");
    let recorded = std::fs::read_to_string(table).unwrap();
    let first_difference = recorded
        .lines()
        .zip(now.lines())
        .find(|(a, b)| a != b)
        .map(|(a, b)| format!("recorded: {a}\nnow:      {b}"));
    assert!(
        now == recorded,
        "the table {} differs from what the cells give: run `just snapshots` and review `git diff reports/`\n{}",
        table.display(),
        first_difference.unwrap_or_else(|| "(one is longer)".into())
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn the_redis_6_2_suite_matches_its_reviewed_baseline() {
    check_server_suite("redis-6.2").await;
}

#[tokio::test(flavor = "multi_thread")]
async fn the_valkey_9_1_suite_matches_its_reviewed_baseline() {
    check_server_suite("valkey-9.1").await;
}

/// The suite of server `name` (`reports/servers/NAME/`): a subset of the catalog, in
/// processes, the server installed into the cache when missing.
async fn check_server_suite(name: &str) {
    let _turn = TURN.lock().await;
    let suite = suite_at(&root().join("reports/servers").join(name).join("limiter-harness.toml"));
    check_on(&suite, limiter_harness_tests::installed_backend(name).await).await;
}

/// `ci` on `suite` in its directory: every cell as in the baseline (and the table, if the
/// suite has one, unchanged).
async fn check_on(suite: &Suite, backend: Arc<dyn Backend>) {
    std::env::set_current_dir(&suite.dir).unwrap();
    let kind = backend.name().to_owned();
    let run = run_ci(suite, backend, &CiOptions::default())
        .await
        .expect("the suite runs");
    let summary = render_summary(&run.report);
    assert_eq!(
        suite.limiters.len(),
        limiter_harness::limiter::BUILTIN_NAMES.len(),
        "every built-in is in the suite `{}`",
        suite.name
    );
    assert_eq!(run.cells.len(), suite.scenarios.len() * suite.limiters.len());
    let kept = if run.report.identical {
        String::new()
    } else {
        keep_reports(suite, &kind)
    };
    assert!(
        run.report.identical,
        "{kind}: suite `{}` differs from its reviewed baseline (stale files: {:?}; table same: {:?}); if intended, run `just snapshots` and review `git diff reports/`{kept}\n{summary}",
        suite.name,
        run.report.stale,
        run.report.table.as_ref().map(|t| t.same)
    );
}

/// The reports of a suite that differed, copied where the next suite's run (which writes the
/// same report directory) leaves them alone: `target/test-logs/snapshots-KIND-SUITE/`. Says
/// where, for the failure message.
fn keep_reports(suite: &Suite, kind: &str) -> String {
    let to = root()
        .join("target/test-logs")
        .join(format!("snapshots-{kind}-{}", suite.name));
    let _ = std::fs::remove_dir_all(&to);
    match copy_tree(&suite.report_dir, &to) {
        Ok(()) => format!("; its reports (histories included) are kept in {}", to.display()),
        Err(e) => format!("; its reports could not be kept in {}: {e}", to.display()),
    }
}

fn copy_tree(from: &Path, to: &Path) -> std::io::Result<()> {
    std::fs::create_dir_all(to)?;
    for entry in std::fs::read_dir(from)? {
        let entry = entry?;
        let target = to.join(entry.file_name());
        if entry.file_type()?.is_dir() {
            copy_tree(&entry.path(), &target)?;
        } else {
            std::fs::copy(entry.path(), target)?;
        }
    }
    Ok(())
}
