//! What each subcommand does.

use std::io::IsTerminal;
use std::path::PathBuf;
use std::sync::Arc;

use rand::RngExt;

use super::args::{ImageArgs, RunArgs};
use super::exit::ExitCode;
use crate::backend::{self, BackendOptions};
use crate::error::SetupError;
use crate::limiter::{BUILTIN_NAMES, Limiter, builtin};
use crate::report::Report;
use crate::runner::{self, RunConfig};
use crate::scenario::{find_scenario, list_scenarios, load_scenario};

pub async fn run(args: RunArgs) -> Result<ExitCode, SetupError> {
    let path = find_scenario(&args.scenario)?;
    let scenario = load_scenario(&path)?;
    let limiter = resolve_limiter(&args.limiter)?;
    let seed = args.seed.or(scenario.seed).unwrap_or_else(|| rand::rng().random());
    eprintln!(
        "limiter-harness: scenario {} × limiter {} — seed {seed}",
        scenario.name,
        limiter.name()
    );
    let options = BackendOptions {
        choice: args.backend,
        url: args.url.clone(),
        image: args.image.clone(),
        redis_server: args.redis_server.clone(),
        allow_reconfigure: args.allow_reconfigure,
    };
    let backend = backend::select_backend(&options).await?;
    let mut reproduce = format!(
        "limiter-harness run {} --limiter {} --seed {seed} {}",
        path.display(),
        limiter.name(),
        backend.reproduce_flags()
    );
    if args.allow_reconfigure {
        reproduce.push_str(" --allow-reconfigure");
    }
    let report_dir = args.report_dir.clone().unwrap_or_else(|| {
        PathBuf::from("reports/runs")
            .join(&scenario.name)
            .join(sanitize(limiter.name()))
    });
    let outcome = runner::run(RunConfig {
        scenario,
        limiter,
        backend,
        seed,
        report_dir,
        allow_reconfigure: args.allow_reconfigure,
        show_progress: !args.no_progress && std::io::stderr().is_terminal(),
        reproduce,
    })
    .await?;
    print_summary(&outcome.report);
    println!("report:    {}", outcome.report_dir.join("report.md").display());
    if let Some(e) = &outcome.history_error {
        eprintln!("warning: the history is incomplete: {e}");
    }
    for leftover in &outcome.leftovers {
        eprintln!("warning: could not stop {leftover}; run `limiter-harness clean`");
    }
    Ok(outcome.report.verdict.into())
}

fn resolve_limiter(name: &str) -> Result<Arc<dyn Limiter>, SetupError> {
    builtin(name).ok_or_else(|| SetupError::UnknownLimiter {
        name: name.to_owned(),
        known: BUILTIN_NAMES.join(", "),
    })
}

fn sanitize(name: &str) -> String {
    name.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                c
            } else {
                '_'
            }
        })
        .collect()
}

fn print_summary(report: &Report) {
    println!(
        "{} × {} on {} ({}): {}",
        report.scenario,
        report.limiter.name,
        report.server.version,
        report.server.backend,
        report.verdict.name().to_uppercase()
    );
    for c in &report.invariants {
        println!("  {:<22} {:<8} {}", c.invariant.name(), c.verdict.name(), c.summary);
    }
    for f in &report.faults {
        println!("  fault {} {}: {}", f.index, f.kind, f.outcome);
    }
    for p in &report.problems {
        println!("  problem: {p}");
    }
    let c = &report.observed.counts;
    println!(
        "  {} requests: {} allowed, {} rejected, {} errors, {} indeterminate; {} ms",
        c.requests, c.allowed, c.rejected, c.errors, c.indeterminate, report.observed.wall_ms
    );
    println!("reproduce: {}", report.reproduce);
}

pub fn list() -> Result<ExitCode, SetupError> {
    println!("Scenarios:");
    for (name, path) in list_scenarios() {
        let about = load_scenario(&path)
            .map(|s| s.about)
            .unwrap_or_else(|e| format!("(invalid: {})", e.to_string().lines().next().unwrap_or_default()));
        println!("  {name:<30} {}", about.lines().next().unwrap_or_default());
    }
    println!("\nLimiters (--limiter NAME):");
    for name in BUILTIN_NAMES {
        let limiter = builtin(name).expect("built-in names resolve");
        println!("  {name}  (up to {} round trip(s))", limiter.round_trips_max());
        for line in limiter.commands().lines() {
            println!("      {line}");
        }
    }
    Ok(ExitCode::Valid)
}

pub async fn clean(all: bool) -> Result<ExitCode, SetupError> {
    let summary = backend::clean(all).await;
    println!(
        "removed {} container(s){}, killed {} process(es){}",
        summary.containers_removed.len(),
        if summary.containers_removed.is_empty() {
            String::new()
        } else {
            format!(" ({})", summary.containers_removed.join(", "))
        },
        summary.processes_killed.len(),
        if summary.processes_killed.is_empty() {
            String::new()
        } else {
            format!(
                " ({})",
                summary
                    .processes_killed
                    .iter()
                    .map(u32::to_string)
                    .collect::<Vec<_>>()
                    .join(", ")
            )
        }
    );
    if summary.in_use > 0 {
        println!(
            "left {} server(s) of runs still in progress alone (`clean --all` removes them too)",
            summary.in_use
        );
    }
    for p in &summary.problems {
        eprintln!("note: {p}");
    }
    Ok(ExitCode::Valid)
}

pub async fn image(args: ImageArgs) -> Result<ExitCode, SetupError> {
    backend::docker_ping().await?;
    let redis = backend::local_redis(&args.redis_server)?;
    let (name, tag) = backend::ensure_image(&redis).await?;
    println!("{name}:{tag} (from {})", redis.binary.display());
    Ok(ExitCode::Valid)
}
