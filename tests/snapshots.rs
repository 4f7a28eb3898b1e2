//! The reviewed snapshots: the harness's own suite (`limiter-harness.toml` at the top of the
//! repository: the shipped catalog × every built-in limiter, a fresh local server per cell)
//! run by the same `ci` mechanism a team runs on its own limiters, against the baseline in
//! `reports/snapshots/` and the table `reports/MATRIX.md`. A changed verdict, anomaly kind,
//! rule or fault outcome fails here until the change is accepted (`just snapshots`, i.e.
//! `limiter-harness ci --accept`) and its diff reviewed. Under `CI=true` nothing is written.

use std::path::PathBuf;

use limiter_harness::suite::{CiOptions, load_suite, render_summary, run_ci};
use limiter_harness_tests::{Kind, backend};

#[tokio::test(flavor = "multi_thread")]
async fn the_harness_suite_matches_its_reviewed_baseline() {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("..")
        .canonicalize()
        .unwrap();
    let suite = load_suite(&root.join("limiter-harness.toml")).expect("the harness's own suite loads");
    // `ci` runs in the suite's directory (the only test of this binary changes it).
    std::env::set_current_dir(&root).unwrap();
    let backend = backend(Kind::Process)
        .await
        .expect("the process backend needs no opt-out");
    let run = run_ci(&suite, backend, &CiOptions::default())
        .await
        .expect("the suite runs");
    let scenarios: Vec<String> = run.scenarios.iter().map(|s| s.name.clone()).collect();
    let summary = render_summary(
        &suite.name,
        &scenarios,
        &run.limiters,
        &run.cells,
        &run.comparison.cells,
    );
    assert_eq!(run.cells.len(), 154, "14 scenarios × 11 built-ins");
    assert!(
        run.identical(),
        "the suite differs from its reviewed baseline (stale files: {:?}; table same: {:?}); if intended, run `just snapshots` and review `git diff reports/`\n{summary}",
        run.comparison.stale,
        run.table.as_ref().map(|t| t.same)
    );
}
