//! `ci` and `init`: a team's suite, run against its reviewed baseline.

use std::io::IsTerminal;
use std::path::{Path, PathBuf};

use super::args::{BackendArgs, CiArgs, Format, InitArgs};
use super::commands::{backend_for, prefer_processes, say};
use super::exit::ExitCode;
use crate::error::SetupError;
use crate::limiter::BUILTIN_NAMES;
use crate::suite::{self, CellJson, CiOptions, CiRun, Status, Suite};

pub fn init(args: &InitArgs) -> Result<ExitCode, SetupError> {
    let name = args.name.clone().unwrap_or_else(|| {
        if BUILTIN_NAMES.contains(&args.limiter.as_str()) {
            args.limiter.clone()
        } else {
            "app".to_owned()
        }
    });
    // The starter must load as written: a name or spec it cannot take is an error now.
    let text = suite::starter_suite(&name, &args.limiter);
    suite::parse_suite(Path::new(suite::SUITE_FILE), &text)?;
    let path = suite::write_starter(Path::new("."), &name, &args.limiter, args.force)?;
    say(&format!(
        "wrote {}: limiter `{name}` ({}) × every shipped scenario\nnext:\n  limiter-harness ci --accept   # run it and record the baseline in {}/\n  git add {} {}/              # commit both; CI then runs `limiter-harness ci`",
        path.display().to_string().trim_start_matches("./"),
        args.limiter,
        suite::DEFAULT_BASELINE,
        suite::SUITE_FILE,
        suite::DEFAULT_BASELINE
    ));
    Ok(ExitCode::Valid)
}

/// The suite file `ci` runs: `--suite`, else the nearest limiter-harness.toml upward.
fn suite_path(args: &CiArgs) -> Result<PathBuf, SetupError> {
    let cwd = std::env::current_dir().map_err(|e| SetupError::io("cannot read", ".", e))?;
    let found = match &args.suite {
        Some(path) => Some(cwd.join(path)),
        None => suite::discover_suite(&cwd),
    };
    match found {
        Some(path) if path.is_file() => Ok(path),
        Some(path) => Err(SetupError::Usage(format!("no suite file at {}", path.display()))),
        None => Err(SetupError::Usage(format!(
            "no {} in {} or any parent directory\n  help: write one with `limiter-harness init --limiter SPEC` (SPEC: a built-in, lua:PATH or exec:COMMAND)",
            suite::SUITE_FILE,
            cwd.display()
        ))),
    }
}

pub async fn ci(mut args: CiArgs) -> Result<ExitCode, SetupError> {
    let path = suite_path(&args)?;
    let suite = suite::load_suite(&path)?;
    // Files named on the command line are the caller's, relative to where they stand.
    if let Ok(cwd) = std::env::current_dir() {
        for file in [&mut args.junit, &mut args.summary].into_iter().flatten() {
            *file = cwd.join(&*file);
        }
    }
    enter_suite_dir(&suite)?;
    let backend = backend_for(&suite_backend(&suite, args.backend)).await?;
    eprintln!(
        "limiter-harness ci: suite `{}` ({}): {} limiter(s) × {} scenario(s) on {}, baseline {}/",
        suite.name,
        crate::shell::relative(&suite.path).display(),
        suite.limiters.len(),
        suite.scenarios.len(),
        backend.name(),
        suite.baseline.display()
    );
    let _guard = crate::signals::guard();
    let options = CiOptions {
        accept: args.accept,
        jobs: args.jobs,
        show_progress: !args.no_progress && std::io::stderr().is_terminal(),
        cancel: crate::signals::token().child_token(),
    };
    let run = suite::run_ci(&suite, backend, &options).await?;
    write_outputs(&args, &suite, &run)?;
    match args.format {
        Format::Json => say(&serde_json::to_string_pretty(&json(&suite, &run)).expect("serializes")),
        Format::Text => print_text(&suite, &run),
    }
    Ok(exit(&args, &run))
}

/// `ci` runs in the suite's directory: every path in it is relative to the file.
fn enter_suite_dir(suite: &Suite) -> Result<(), SetupError> {
    let dir = if suite.dir.as_os_str().is_empty() {
        Path::new(".")
    } else {
        suite.dir.as_path()
    };
    let cwd = std::env::current_dir().ok();
    if cwd.as_deref().and_then(|c| c.canonicalize().ok()) != dir.canonicalize().ok() {
        eprintln!(
            "limiter-harness ci: running in {} (the suite's directory): paths below are relative to it",
            dir.display()
        );
    }
    std::env::set_current_dir(dir).map_err(|e| SetupError::io("cannot enter the suite's directory", dir, e))
}

/// The suite's `[server]`, with `--backend` over its `backend` when given.
fn suite_backend(suite: &Suite, choice: Option<crate::backend::BackendChoice>) -> BackendArgs {
    let s = &suite.server;
    prefer_processes(BackendArgs {
        backend: choice.unwrap_or(s.backend),
        url: s.url.clone(),
        image: s.image.clone(),
        server: s.server.clone(),
        allow_reconfigure: s.allow_reconfigure,
        via_proxy: s.via_proxy,
    })
}

fn summary(suite: &Suite, run: &CiRun) -> String {
    let scenarios: Vec<String> = run.scenarios.iter().map(|s| s.name.clone()).collect();
    let mut text = suite::render_summary(
        &suite.name,
        &scenarios,
        &run.limiters,
        &run.cells,
        &run.comparison.cells,
    );
    for stale in &run.comparison.stale {
        text.push_str(&format!(
            "\n- stale baseline file `{}`: no cell of the suite has it (`ci --accept` removes it)\n",
            stale.display()
        ));
    }
    if let Some(t) = run.table.as_ref().filter(|t| !t.same) {
        text.push_str(&format!(
            "\n- the table `{}` differs from what the cells give now\n",
            t.path.display()
        ));
    }
    text
}

/// The summary and result in the report directory, and the files CI asked for.
fn write_outputs(args: &CiArgs, suite: &Suite, run: &CiRun) -> Result<(), SetupError> {
    let write = |path: &Path, text: &str| -> Result<(), SetupError> {
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            crate::scratch::create_report_dir(dir)?;
        }
        std::fs::write(path, text).map_err(|e| SetupError::io("cannot write", path, e))
    };
    let summary = summary(suite, run);
    write(&suite.report_dir.join("SUMMARY.md"), &summary)?;
    let json = serde_json::to_string_pretty(&json(suite, run)).expect("serializes") + "\n";
    write(&suite.report_dir.join("ci.json"), &json)?;
    if let Some(path) = &args.summary {
        write(path, &summary)?;
    }
    if let Some(path) = &args.junit {
        write(
            path,
            &suite::render_junit(&suite.name, &run.cells, &run.comparison.cells),
        )?;
    }
    if let Some(step) = std::env::var_os("GITHUB_STEP_SUMMARY").filter(|v| !v.is_empty()) {
        use std::io::Write;
        let path = PathBuf::from(step);
        std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&path)
            .and_then(|mut f| f.write_all(summary.as_bytes()))
            .map_err(|e| SetupError::io("cannot append to $GITHUB_STEP_SUMMARY", &path, e))?;
    }
    Ok(())
}

#[derive(serde::Serialize)]
struct CiJson {
    suite: String,
    baseline: String,
    identical: bool,
    cells: Vec<CellJson>,
    stale: Vec<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    table_same: Option<bool>,
    accepted: Vec<String>,
    interrupted: bool,
}

fn json(suite: &Suite, run: &CiRun) -> CiJson {
    CiJson {
        suite: suite.name.clone(),
        baseline: suite.baseline.display().to_string(),
        identical: run.identical(),
        cells: run
            .cells
            .iter()
            .zip(&run.comparison.cells)
            .map(|(c, cmp)| CellJson::new(c, Some(cmp)))
            .collect(),
        stale: run.comparison.stale.iter().map(|p| p.display().to_string()).collect(),
        table_same: run.table.as_ref().map(|t| t.same),
        accepted: run.accepted.clone(),
        interrupted: run.interrupted,
    }
}

fn print_text(suite: &Suite, run: &CiRun) {
    say(&summary(suite, run));
    for line in &run.accepted {
        say(line);
    }
    let differing: Vec<String> = run
        .comparison
        .cells
        .iter()
        .filter(|c| c.differs())
        .map(|c| format!("{} × {}", c.scenario, c.limiter))
        .collect();
    let errors = run
        .comparison
        .cells
        .iter()
        .filter(|c| matches!(c.status, Status::Error(_)))
        .count();
    let baseline = suite.baseline.display();
    let line = if run.interrupted {
        "ci: interrupted; the baseline was left as it was".to_owned()
    } else if !run.accepted.is_empty() {
        format!(
            "ci: baseline updated ({} change(s), listed above): review them with `git diff` and commit them",
            run.accepted.len()
        )
    } else if run.identical() {
        format!(
            "ci: {} cell(s), every one as in the baseline ({baseline}/)",
            run.cells.len()
        )
    } else {
        let mut parts = Vec::new();
        if !differing.is_empty() {
            parts.push(format!(
                "{} cell(s) differ from the baseline: {}",
                differing.len(),
                differing.join(", ")
            ));
        }
        if errors > 0 {
            parts.push(format!("{errors} cell(s) could not run"));
        }
        if !run.comparison.stale.is_empty() {
            parts.push(format!("{} stale baseline file(s)", run.comparison.stale.len()));
        }
        if run.table.as_ref().is_some_and(|t| !t.same) {
            parts.push("the table differs".into());
        }
        format!(
            "ci: {}\n  help: if the change is intended, `limiter-harness ci --accept` rewrites the baseline; commit it so the pull request shows the change",
            parts.join("; ")
        )
    };
    say(&line);
}

/// Interrupted: unknown. A cell that could not run: setup error. Any difference from the
/// baseline (unless accepted): 1.
fn exit(args: &CiArgs, run: &CiRun) -> ExitCode {
    if run.interrupted {
        ExitCode::Unknown
    } else if run
        .comparison
        .cells
        .iter()
        .any(|c| matches!(c.status, Status::Error(_)))
    {
        ExitCode::Setup
    } else if args.accept || run.identical() {
        ExitCode::Valid
    } else {
        ExitCode::Invalid
    }
}
