//! What each subcommand does.

use std::io::{IsTerminal, Write};
use std::sync::Arc;

use rand::RngExt;

use super::args::{BackendArgs, Format, ImageArgs, MatrixArgs, RunArgs, ScenarioArgs};
use super::exit::ExitCode;
use crate::backend::{self, Backend};
use crate::error::SetupError;
use crate::limiter::{BUILTIN_NAMES, BUILTINS, Builtin};
use crate::matrix::{self, MatrixConfig, render_table};
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
    backend::select_backend(&args.options()).await
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
    let outcome = runner::run_on_own_thread(RunConfig {
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

/// `auto` for many cells: a local server process per cell when the server binary is here.
pub(super) fn prefer_processes(mut server: BackendArgs) -> BackendArgs {
    server.backend = server.options().preferring_processes().choice;
    server
}

/// The exit code of a finished matrix.
fn matrix_exit(cells: &[matrix::Cell]) -> ExitCode {
    match matrix::outcome(cells) {
        matrix::MatrixOutcome::SetupFailed => ExitCode::Setup,
        matrix::MatrixOutcome::Differs => ExitCode::Invalid,
        matrix::MatrixOutcome::Unknown => ExitCode::Unknown,
        matrix::MatrixOutcome::AsExpected => ExitCode::Valid,
    }
}

pub async fn matrix(args: MatrixArgs) -> Result<ExitCode, SetupError> {
    let scenarios = matrix::select_scenarios(&args.scenarios, &args.adjust.to_adjust())?;
    let names: Vec<String> = if args.limiters.is_empty() {
        BUILTIN_NAMES.iter().map(|n| (*n).to_owned()).collect()
    } else {
        args.limiters.clone()
    };
    let limiters = names
        .iter()
        .map(|n| crate::limiter::resolve(n).map(matrix::MatrixLimiter::plain))
        .collect::<Result<Vec<_>, _>>()?;
    // The matrix prefers local processes: one fresh server per cell either way.
    let server = prefer_processes(args.server.clone());
    let (servers, versions) = matrix::select_servers(&args.servers, &server.options()).await?;
    let backend = Arc::clone(&servers[0].backend);
    let jobs = matrix::jobs_for(args.jobs, backend.as_ref());
    let runs_dir = args.out.join("runs/matrix");
    let context = matrix::table_context(&args.servers, backend.as_ref(), &runs_dir, versions);
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
        runs_dir,
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
