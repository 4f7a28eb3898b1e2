//! `explore`: the search, the found scenario and the summary, with exit codes 1 found,
//! 0 nothing found within the budget, 2 interrupted, 3 setup error.

use std::io::IsTerminal;
use std::sync::Arc;
use std::sync::atomic::AtomicU64;

use rand::RngExt;

use super::args::ExploreArgs;
use super::commands::{backend_for, prefer_processes, say};
use super::exit::ExitCode;
use crate::error::SetupError;
use crate::explore::{self, SearchConfig, ServerTrials, ShrinkLimits, Vocabulary};
use crate::scenario::FaultKind;

/// The fault kinds `--faults` names (every kind when empty; `none` for none).
fn fault_kinds(names: &[String]) -> Result<Vec<FaultKind>, SetupError> {
    match names {
        [] => Ok(FaultKind::ALL.to_vec()),
        [none] if none == "none" => Ok(Vec::new()),
        names => names
            .iter()
            .map(|n| {
                FaultKind::ALL
                    .into_iter()
                    .find(|k| k.name() == n.trim())
                    .ok_or_else(|| {
                        let known: Vec<_> = FaultKind::ALL.iter().map(|k| k.name()).collect();
                        SetupError::Usage(format!(
                            "--faults: unknown fault kind `{n}`; one of: {}, or `none`",
                            known.join(", ")
                        ))
                    })
            })
            .collect(),
    }
}

fn search_config(args: &ExploreArgs, seed: u64) -> Result<SearchConfig, SetupError> {
    Ok(SearchConfig {
        seed,
        budget: args.budget,
        jobs: args.jobs.max(1),
        vocabulary: Vocabulary {
            kinds: fault_kinds(&args.faults)?,
            eviction: args.eviction,
            state_loss: args.state_loss,
        },
        shrink: ShrinkLimits {
            confirm: args.confirm as usize,
            steps_max: args.shrink_steps,
            time_max: args.shrink_budget,
        },
        findings_max: args.stop_after,
        show_progress: !args.no_progress && std::io::stderr().is_terminal(),
    })
}

/// The command line that runs the same search again: the seed and every flag that decides
/// which candidates are drawn and kept (the defaults left out).
fn search_again(args: &ExploreArgs, seed: u64) -> String {
    let mut line = format!(
        "limiter-harness explore --limiter {} --seed {seed}",
        crate::shell::quote(&args.limiter)
    );
    let parsed = <super::args::Cli as clap::Parser>::parse_from(["limiter-harness", "explore", "--limiter", "x"]);
    let super::args::Command::Explore(defaults) = parsed.command else {
        unreachable!("`explore` parses as explore")
    };
    if args.budget != defaults.budget {
        line.push_str(&format!(" --budget {}s", args.budget.as_secs()));
    }
    if !args.faults.is_empty() {
        line.push_str(&format!(" --faults {}", crate::shell::quote(&args.faults.join(","))));
    }
    for (on, flag) in [(args.eviction, "--eviction"), (args.state_loss, "--state-loss")] {
        if on {
            line.push(' ');
            line.push_str(flag);
        }
    }
    if args.stop_after != defaults.stop_after {
        line.push_str(&format!(" --stop-after {}", args.stop_after));
    }
    if args.jobs != defaults.jobs {
        line.push_str(&format!(" --jobs {}", args.jobs));
    }
    if args.confirm != defaults.confirm {
        line.push_str(&format!(" --confirm {}", args.confirm));
    }
    if args.shrink_steps != defaults.shrink_steps {
        line.push_str(&format!(" --shrink-steps {}", args.shrink_steps));
    }
    if args.shrink_budget != defaults.shrink_budget {
        line.push_str(&format!(" --shrink-budget {}s", args.shrink_budget.as_secs()));
    }
    line
}

pub async fn explore(args: ExploreArgs) -> Result<ExitCode, SetupError> {
    let seed = args.seed.unwrap_or_else(|| rand::rng().random());
    let config = search_config(&args, seed)?;
    let limiter = crate::limiter::resolve(&args.limiter)?;
    eprintln!(
        "limiter-harness explore: limiter {} — seed {seed}, budget {} s",
        limiter.name(),
        args.budget.as_secs()
    );
    let backend = backend_for(&prefer_processes(args.server.clone())).await?;
    if !backend.owns_servers() {
        return Err(SetupError::Usage(
            "explore runs every candidate on a fresh server of its own: use --backend process or container".into(),
        ));
    }
    let root = crate::report_dir::default_report_root(std::path::Path::new(""));
    let dir = root
        .join("runs/explore")
        .join(crate::matrix::sanitize(limiter.name()))
        .join(seed.to_string());
    let _ = std::fs::remove_dir_all(&dir);
    crate::report_dir::create_report_dir(&dir)?;
    let trials = ServerTrials {
        limiter: Arc::clone(&limiter),
        backend,
        seed,
        dir,
        jobs: config.jobs,
        via_proxy: args.server.via_proxy,
        counter: AtomicU64::new(0),
    };
    let _guard = crate::signals::guard();
    let cancel = crate::signals::token().child_token();
    let out = explore::search(&config, &trials, &cancel).await;
    if out.candidates_run > 0 && out.errors.len() as u64 == out.candidates_run {
        return Err(SetupError::Usage(format!(
            "no candidate could run: {}",
            out.errors[0].lines().next().unwrap_or_default()
        )));
    }
    let again = search_again(&args, seed);
    let written = out
        .found
        .iter()
        .map(|found| explore::write(&args.out, &args.limiter, found, seed, config.shrink.confirm, &again))
        .collect::<Result<Vec<_>, _>>()?;
    for line in explore::summary(&args.limiter, &config, &out, &written) {
        say(&line);
    }
    Ok(if !out.found.is_empty() {
        ExitCode::Invalid
    } else if out.interrupted {
        ExitCode::Unknown
    } else {
        ExitCode::Valid
    })
}
