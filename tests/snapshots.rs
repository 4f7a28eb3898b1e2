//! The reviewed snapshots: the whole shipped matrix (every scenario × every built-in
//! limiter, a fresh local server per cell) against `reports/snapshots/*.snap`, and the
//! verdict table against `reports/MATRIX.md`. A changed verdict, anomaly kind, rule or
//! fault outcome fails here until the new snapshot is reviewed and accepted
//! (`cargo insta review`, or `INSTA_UPDATE=always just snapshots` and read the diff).

use std::path::PathBuf;

use limiter_harness::limiter::{BUILTIN_NAMES, builtin};
use limiter_harness::matrix::{MatrixConfig, render_table, run_matrix};
use limiter_harness::report::render_snapshot;
use limiter_harness::scenario::list_scenarios;
use limiter_harness_tests::{Kind, backend};

fn reports() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../reports")
}

#[tokio::test(flavor = "multi_thread")]
async fn the_shipped_matrix_matches_its_reviewed_snapshots() {
    let scenarios: Vec<_> = list_scenarios().into_iter().map(|(_, p)| p.load().unwrap()).collect();
    let names: Vec<String> = BUILTIN_NAMES.iter().map(|n| (*n).to_owned()).collect();
    let runs = tempfile::tempdir().unwrap();
    let cells = run_matrix(MatrixConfig {
        scenarios: scenarios.clone(),
        limiters: names.iter().map(|n| builtin(n).unwrap()).collect(),
        backend: backend(Kind::Process)
            .await
            .expect("the process backend needs no opt-out"),
        // Six cells at a time rather than the CLI's eight: the catalog's steady phases leave
        // 10 ms between a window's end and the nearest request, and on a loaded 2-core
        // machine fewer cells at once make a scheduling hiccup that long rarer.
        jobs: 6,
        runs_dir: runs.path().to_owned(),
        seed: None,
        via_proxy: false,
        allow_reconfigure: false,
        adjust_flags: String::new(),
        cancel: Default::default(),
        show_progress: false,
    })
    .await;

    let mut settings = insta::Settings::clone_current();
    settings.set_snapshot_path(reports().join("snapshots"));
    settings.set_prepend_module_to_snapshot(false);
    settings.set_omit_expression(true);
    let mut mismatched = Vec::new();
    settings.bind(|| {
        for cell in &cells {
            let name = format!("{}--{}", cell.scenario, cell.limiter);
            let text = match &cell.outcome {
                Ok(report) => render_snapshot(report),
                Err(e) => format!("the cell could not run: {e}"),
            };
            let outcome = std::panic::catch_unwind(|| insta::assert_snapshot!(name.clone(), text));
            if outcome.is_err() {
                mismatched.push(name);
            }
        }
    });
    assert!(
        mismatched.is_empty(),
        "{} cell snapshot(s) differ from the reviewed ones: {mismatched:?}",
        mismatched.len()
    );

    let table = render_table(&scenarios, &names, &cells, "`--backend process`");
    let committed = std::fs::read_to_string(reports().join("MATRIX.md")).unwrap_or_default();
    assert!(
        committed == table,
        "reports/MATRIX.md is not what the matrix gives now: run `limiter-harness matrix` and review the diff\n--- now ---\n{table}"
    );
}
