//! What each subcommand does.

use std::io::{IsTerminal, Write};
use std::sync::Arc;

use rand::RngExt;

use super::args::{BackendArgs, Format, ImageArgs, MatrixArgs, RunArgs, ScenarioArgs};
use super::exit::ExitCode;
use crate::backend::{self, Backend, BackendChoice, BackendOptions};
use crate::checker::Verdict;
use crate::error::SetupError;
use crate::limiter::{BUILTIN_NAMES, BUILTINS, Builtin};
use crate::matrix::{self, MatrixConfig, glob_match, render_table};
use crate::report::Report;
use crate::runner::{self, RunConfig};
use crate::scenario::{Scenario, list_scenarios, open_scenario};
use crate::suite::CellJson;

/// Print to stdout; a closed pipe (`| head`) ends the output quietly instead of panicking.
pub(super) fn say(text: &str) {
    let mut out = std::io::stdout().lock();
    let _ = out.write_all(text.as_bytes()).and_then(|()| out.write_all(b"\n"));
}

pub(super) async fn backend_for(args: &BackendArgs) -> Result<Arc<dyn Backend>, SetupError> {
    backend::select_backend(&BackendOptions {
        choice: args.backend,
        url: args.url.clone(),
        image: args.image.clone(),
        server: args.server.clone(),
        allow_reconfigure: args.allow_reconfigure,
    })
    .await
}

/// Apply `--keys` and `--window-ms` to a loaded scenario.
fn adjust(scenario: &mut Scenario, args: &ScenarioArgs) -> Result<(), SetupError> {
    scenario.adjust(&args.to_adjust()).map_err(SetupError::usage)
}

pub async fn run(args: RunArgs) -> Result<ExitCode, SetupError> {
    let mut scenario = open_scenario(&args.scenario)?;
    adjust(&mut scenario, &args.adjust)?;
    let limiter = crate::limiter::resolve(&args.limiter)?;
    let seed = scenario.seed_or(args.seed, || rand::rng().random());
    eprintln!(
        "limiter-harness: scenario {} × limiter {} — seed {seed}",
        scenario.name,
        limiter.name()
    );
    let backend = backend_for(&args.server).await?;
    let reproduce = runner::reproduce_line(
        &scenario.reproduce_arg(),
        limiter.name(),
        seed,
        backend.as_ref(),
        args.server.allow_reconfigure,
        args.server.via_proxy,
        &scenario.adjusted.flags(),
    );
    let report_dir = args.report_dir.clone().unwrap_or_else(|| {
        crate::report_dir::default_report_root(std::path::Path::new(""))
            .join("runs")
            .join(&scenario.name)
            .join(matrix::sanitize(limiter.name()))
    });
    let outcome = runner::run(RunConfig {
        scenario,
        limiter,
        backend,
        seed,
        report_dir,
        allow_reconfigure: args.server.allow_reconfigure,
        via_proxy: args.server.via_proxy,
        show_progress: !args.no_progress && std::io::stderr().is_terminal(),
        reproduce,
    })
    .await?;
    print_summary(&outcome.report);
    say(&format!(
        "report:    {}",
        outcome.report_dir.join("report.md").display()
    ));
    if let Some(e) = &outcome.history_error {
        eprintln!("warning: the history is incomplete: {e}");
    }
    for leftover in &outcome.leftovers {
        eprintln!("warning: could not stop {leftover}; run `limiter-harness clean`");
    }
    Ok(outcome.report.verdict.into())
}

/// `check RUN_DIR`: the run judged again from its history, the report rewritten, and the
/// verdict said, with what it was before when it changed.
pub fn check(dir: &std::path::Path) -> Result<ExitCode, SetupError> {
    let before = previous_verdict(dir);
    let judged = runner::recheck(dir)?;
    let report = &judged.report;
    print_summary(report);
    let now = report.verdict.name();
    match before {
        Some(before) if before != now => say(&format!(
            "re-checked: the verdict was {before}, it is now {now} (report.md, report.json and timeline.svg rewritten)"
        )),
        _ => say(&format!(
            "re-checked from the history: {now} (report.md, report.json and timeline.svg rewritten)"
        )),
    }
    Ok(report.verdict.into())
}

/// The verdict a run directory's report.json holds, if it has one.
fn previous_verdict(dir: &std::path::Path) -> Option<String> {
    let dir = if dir.is_file() { dir.parent()? } else { dir };
    let text = std::fs::read_to_string(dir.join("report.json")).ok()?;
    let json: serde_json::Value = serde_json::from_str(&text).ok()?;
    json.get("verdict")?.as_str().map(str::to_owned)
}

fn print_summary(report: &Report) {
    say(&format!(
        "{} × {} on {} ({}): {}",
        report.scenario,
        report.limiter.name,
        report.server.version,
        report.server.backend,
        report.verdict.name().to_uppercase()
    ));
    for c in &report.invariants {
        // The hint about keys never seen is said once, at the end.
        let summary = match &report.keys.unseen {
            Some(hint) => c
                .summary
                .replace(hint.as_str(), "no limiter key was ever seen (see `keys:` below)"),
            None => c.summary.clone(),
        };
        say(&format!(
            "  {:<22} {:<8} {summary}",
            c.invariant.name(),
            c.verdict.name()
        ));
    }
    for f in &report.faults {
        say(&format!("  fault {} {}: {}", f.index, f.kind, f.outcome));
    }
    for p in &report.problems {
        say(&format!("  problem: {p}"));
    }
    let c = &report.observed.counts;
    say(&format!(
        "  {} requests: {} allowed, {} rejected, {} errors, {} indeterminate; {} ms",
        c.requests, c.allowed, c.rejected, c.errors, c.indeterminate, report.observed.wall_ms
    ));
    if let Some(hint) = &report.keys.unseen {
        say(&format!("keys:      {hint}"));
    }
    say(&format!("reproduce: {}", report.reproduce));
}

/// The scenarios `--scenarios` selects, loaded and adjusted by `--keys`/`--window-ms`.
fn matrix_scenarios(args: &MatrixArgs) -> Result<Vec<Scenario>, SetupError> {
    let mut scenarios: Vec<_> = list_scenarios()
        .into_iter()
        .filter(|(name, _)| args.scenarios.split(',').any(|glob| glob_match(glob.trim(), name)))
        .map(|(_, source)| source.load())
        .collect::<Result<_, _>>()?;
    for scenario in &mut scenarios {
        adjust(scenario, &args.adjust)?;
    }
    if scenarios.is_empty() {
        return Err(SetupError::Usage(format!(
            "no scenario matches `{}` (see `limiter-harness list`)",
            args.scenarios
        )));
    }
    Ok(scenarios)
}

/// The matrix prefers local processes: one fresh server per cell either way, the same
/// binary the image is built from, and cheaper to start than a container.
fn matrix_server(args: &MatrixArgs) -> BackendArgs {
    prefer_processes(args.server.clone())
}

/// `auto` for many cells: a local server process per cell when the server binary is here.
pub(super) fn prefer_processes(mut server: BackendArgs) -> BackendArgs {
    if server.backend == BackendChoice::Auto
        && server.url.is_none()
        && server.image.is_none()
        && crate::servers::resolve_server(server.server.as_deref()).is_ok()
    {
        server.backend = BackendChoice::Process;
    }
    server
}

/// The matrix's servers: the one `--server` (or the default) names, without a dimension;
/// or each of `--servers`, named in the table by its catalog name (or product-version for a
/// path), with what it says it is.
async fn matrix_servers(
    args: &MatrixArgs,
    server: &BackendArgs,
) -> Result<(Vec<matrix::MatrixServer>, Vec<(String, String)>), SetupError> {
    if args.servers.is_empty() {
        let backend = backend_for(server).await?;
        return Ok((vec![matrix::MatrixServer::only(backend)], Vec::new()));
    }
    if server.url.is_some() || server.backend == BackendChoice::Url || server.image.is_some() {
        return Err(SetupError::Usage(
            "--servers starts each server itself: it does not go with --url or --image".into(),
        ));
    }
    let (mut servers, mut versions) = (Vec::new(), Vec::<(String, String)>::new());
    for spec in &args.servers {
        let found = crate::servers::resolve_server(Some(spec))?;
        let name = match crate::servers::known(spec) {
            Some(known) => known.name.to_owned(),
            None => format!("{}-{}", found.product.name(), found.version),
        };
        if versions.iter().any(|(n, _)| *n == name) {
            return Err(SetupError::Usage(format!(
                "--servers names {name} twice: give each server once"
            )));
        }
        let mut args = server.clone();
        args.server = Some(spec.clone());
        let backend = backend_for(&prefer_processes(args)).await?;
        versions.push((name.clone(), found.describe()));
        servers.push(matrix::MatrixServer {
            name: Some(name),
            backend,
        });
    }
    Ok((servers, versions))
}

/// What `MATRIX.md` says about how it was made and where the reports are.
fn matrix_context(args: &MatrixArgs, backend: &dyn Backend, servers: Vec<(String, String)>) -> matrix::TableContext {
    matrix::TableContext {
        backend: Some(format!("`--backend {}`", backend.name())),
        regenerate: match args.servers.as_slice() {
            [] => "limiter-harness matrix".into(),
            named => format!(
                "limiter-harness matrix --servers {}",
                crate::shell::quote(&named.join(","))
            ),
        },
        runs: crate::shell::relative(&args.out.join("runs/matrix"))
            .display()
            .to_string(),
        baseline: None,
        servers,
    }
}

/// The exit code of a finished matrix: setup errors first, then cells that judged
/// otherwise than their scenario expects (or, for a limiter the scenarios have no
/// expectation of, broke an invariant), then unknown cells (but for a limiter on a server
/// older than it needs: that its commands fail there is what is expected).
fn matrix_exit(cells: &[matrix::Cell]) -> ExitCode {
    let mismatched = cells.iter().filter(|c| {
        let verdict = c.verdict();
        (verdict.is_some_and(|v| v != Verdict::Unknown) && !c.as_expected())
            || (c.expected == matrix::Expectation::Unstated && verdict == Some(Verdict::Invalid))
    });
    if cells.iter().any(|c| c.outcome.is_err()) {
        ExitCode::Setup
    } else if mismatched.count() > 0 {
        ExitCode::Invalid
    } else if cells
        .iter()
        .any(|c| c.verdict() == Some(Verdict::Unknown) && c.needs_newer_server().is_none())
    {
        ExitCode::Unknown
    } else {
        ExitCode::Valid
    }
}

/// The matrix's cells at once when `--jobs` is not given. Measured on 2 cores
/// (docs/performance.md): processes at 16 give the reviewed verdicts in about 51 s; containers at 16
/// load the machine enough (Docker's own work per container start and removal) that a
/// request now and then stalls past a window end and races its key's expiry, at 12 they
/// did not (4 runs of the matrix, 78 s each).
fn default_matrix_jobs(backend: &str) -> usize {
    match backend {
        "container" => 12,
        _ => 16,
    }
}

pub async fn matrix(args: MatrixArgs) -> Result<ExitCode, SetupError> {
    let scenarios = matrix_scenarios(&args)?;
    let names: Vec<String> = if args.limiters.is_empty() {
        BUILTIN_NAMES.iter().map(|n| (*n).to_owned()).collect()
    } else {
        args.limiters.clone()
    };
    let limiters = names
        .iter()
        .map(|n| crate::limiter::resolve(n).map(matrix::MatrixLimiter::plain))
        .collect::<Result<Vec<_>, _>>()?;
    let server = matrix_server(&args);
    let (servers, versions) = matrix_servers(&args, &server).await?;
    let backend = Arc::clone(&servers[0].backend);
    let mut jobs = args.jobs.unwrap_or_else(|| default_matrix_jobs(backend.name()));
    if !backend.owns_servers() && jobs > 1 {
        // Cells on one server share its keys and settings: one at a time.
        eprintln!("limiter-harness matrix: one server for every cell (--backend url): running one cell at a time");
        jobs = 1;
    }
    let context = matrix_context(&args, backend.as_ref(), versions);
    let started = std::time::Instant::now();
    let on = match servers.len() {
        1 => String::new(),
        n => format!(" × {n} servers"),
    };
    eprintln!(
        "limiter-harness matrix: {} scenario(s) × {} limiter(s){on}, {} at a time",
        scenarios.len(),
        limiters.len(),
        jobs
    );
    // SIGINT or SIGTERM: no further cell starts, the running ones stop as interrupted.
    let _guard = crate::signals::guard();
    let cancel = crate::signals::token().child_token();
    let cells = matrix::run_matrix(MatrixConfig {
        scenarios: scenarios.clone(),
        limiters,
        servers,
        jobs,
        runs_dir: args.out.join("runs/matrix"),
        seed: args.seed,
        via_proxy: server.via_proxy,
        allow_reconfigure: server.allow_reconfigure,
        cancel: cancel.clone(),
        show_progress: !args.no_progress && std::io::stderr().is_terminal(),
        only: None,
    })
    .await;
    if cancel.is_cancelled() {
        eprintln!(
            "limiter-harness matrix: interrupted after {:.1} s; {} was left as it was (the cells that ran have their reports under {})",
            started.elapsed().as_secs_f64(),
            args.out.join("MATRIX.md").display(),
            args.out.join("runs/matrix").display()
        );
        return Ok(ExitCode::Unknown);
    }
    let table = render_table(&scenarios, &names, &cells, &context);
    matrix_output(&args, &table, &cells, started)?;
    Ok(matrix_exit(&cells))
}

/// `MATRIX.md` under `--out`, and the table (or the cells as JSON) on stdout.
fn matrix_output(
    args: &MatrixArgs,
    table: &str,
    cells: &[matrix::Cell],
    started: std::time::Instant,
) -> Result<(), SetupError> {
    crate::report_dir::create_report_dir(&args.out)?;
    let path = args.out.join("MATRIX.md");
    std::fs::write(&path, table).map_err(|e| SetupError::io("cannot write", &path, e))?;
    let differing = cells.iter().filter(|c| !c.as_expected()).count();
    let line = format!(
        "{} cells in {:.1} s; {differing} differ from their scenario's expectation; table: {}",
        cells.len(),
        started.elapsed().as_secs_f64(),
        path.display()
    );
    match args.format {
        Format::Text => {
            say(table);
            say(&line);
        }
        Format::Json => {
            let json: Vec<CellJson> = cells.iter().map(CellJson::new).collect();
            say(&serde_json::to_string_pretty(&json).expect("cells serialize"));
            eprintln!("{line}");
        }
    }
    Ok(())
}

pub fn export_scenarios(dir: &std::path::Path, force: bool) -> Result<ExitCode, SetupError> {
    let written = crate::scenario::export_catalog(dir, force)?;
    say(&format!(
        "wrote {} scenarios to {}; `limiter-harness run NAME` now runs ./scenarios/NAME.toml when it exists",
        written.len(),
        dir.display()
    ));
    Ok(ExitCode::Valid)
}

pub fn list() -> Result<ExitCode, SetupError> {
    say("Scenarios:");
    for (name, source) in list_scenarios() {
        let about = source
            .load()
            .map(|s| s.about)
            .unwrap_or_else(|e| format!("(invalid: {})", e.to_string().lines().next().unwrap_or_default()));
        let from = match &source {
            crate::scenario::ScenarioRef::Shipped(_) => String::new(),
            crate::scenario::ScenarioRef::File(path) => format!(" [{}]", path.display()),
        };
        say(&format!(
            "  {name:<30} {}{from}",
            about.lines().next().unwrap_or_default()
        ));
    }
    say("\nLimiters (--limiter NAME):");
    for Builtin { name, make } in BUILTINS {
        let limiter = make();
        say(&format!(
            "  {name}  ({}, up to {} round trip(s))",
            limiter.algorithm().name(),
            limiter.round_trips_max()
        ));
        for line in limiter.commands().lines() {
            say(&format!("      {line}"));
        }
        let ttl = match limiter.ttl_max() {
            Some(declared) => format!("{} (declared)", declared.describe()),
            None => format!("one window ({})", limiter.algorithm().ttl_default_reason()),
        };
        say(&format!(
            "      keys: <key_prefix><identity>, one per identity (e.g. rl:0); TTL bound: {ttl}"
        ));
    }
    say("\nYour own limiter:");
    say(
        "  lua:PATH      a Lua script, SCRIPT LOADed and called with EVALSHA (NAME.toml beside it maps another convention)",
    );
    say("  exec:COMMAND  an adapter process speaking JSON lines (docs/exec-protocol.md), through the fault proxy");
    say("  keys of its own: --keys 'app:{identity}:*', [limit] keys, or the adapter's hello (\"keys\": [...])");
    say("  see docs/limiters.md");
    Ok(ExitCode::Valid)
}

pub async fn clean(all: bool) -> Result<ExitCode, SetupError> {
    let summary = backend::clean(all).await;
    let list = |items: Vec<String>| {
        if items.is_empty() {
            String::new()
        } else {
            format!(" ({})", items.join(", "))
        }
    };
    say(&format!(
        "removed {} container(s){}, killed {} server process(es){} and {} adapter process(es){}, removed {} temp dir(s)",
        summary.containers_removed.len(),
        list(summary.containers_removed.clone()),
        summary.processes_killed.len(),
        list(summary.processes_killed.iter().map(u32::to_string).collect()),
        summary.adapters_killed.len(),
        list(summary.adapters_killed.iter().map(u32::to_string).collect()),
        summary.temp_dirs_removed
    ));
    for restored in &summary.settings_restored {
        say(&format!("restored the settings a killed run changed on {restored}"));
    }
    if summary.in_use > 0 {
        say(&format!(
            "left {} server(s) of runs still in progress alone (`clean --all` removes them too)",
            summary.in_use
        ));
    }
    for p in &summary.problems {
        eprintln!("note: {p}");
    }
    Ok(ExitCode::Valid)
}

pub async fn image(args: ImageArgs) -> Result<ExitCode, SetupError> {
    backend::docker_ping().await?;
    let server = crate::servers::resolve_server(args.server.as_deref())?;
    let (name, tag) = backend::ensure_image(&server).await?;
    say(&format!(
        "{name}:{tag} (from {}, {})",
        server.binary.display(),
        server.describe()
    ));
    Ok(ExitCode::Valid)
}
