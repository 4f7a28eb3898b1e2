//! `ci`, `ci merge` and `init`: a team's suite, run against its reviewed baseline.

use std::io::IsTerminal;
use std::path::{Path, PathBuf};

use super::args::{BackendArgs, CiArgs, CiCommand, CiOutputs, Format, InitArgs, MergeArgs};
use super::commands::{backend_for, prefer_processes, say};
use super::exit::ExitCode;
use crate::error::SetupError;
use crate::limiter::BUILTIN_NAMES;
use crate::suite::{self, CiOptions, CiReport, Selection, Standing, Suite};

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
    let mut written = vec![suite::write_starter(Path::new("."), &name, &args.limiter, args.force)?];
    if let Some(adapter) = args.adapter {
        written.push(suite::write_adapter_helper(Path::new("."), adapter, args.force)?);
    }
    if let Some(ci) = args.ci {
        written.push(suite::write_workflow(Path::new("."), ci, args.force)?);
    }
    let files: Vec<String> = written
        .iter()
        .map(|p| p.display().to_string().trim_start_matches("./").to_owned())
        .collect();
    say(&format!(
        "wrote {}: limiter `{name}` ({}) × every shipped scenario\nnext:\n  limiter-harness ci --accept   # run it and record the baseline in {}/\n  git add {} {}/              # commit them; CI then runs `limiter-harness ci`",
        files.join(", "),
        args.limiter,
        suite::DEFAULT_BASELINE,
        files.join(" "),
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
    if let Some(CiCommand::Merge(merge_args)) = args.command.take() {
        return merge(&merge_args);
    }
    let path = suite_path(&args)?;
    let suite = suite::load_suite(&path)?;
    // Files named on the command line are the caller's, relative to where they stand.
    if let Ok(cwd) = std::env::current_dir() {
        for file in [&mut args.outputs.junit, &mut args.outputs.summary]
            .into_iter()
            .flatten()
        {
            *file = cwd.join(&*file);
        }
    }
    enter_suite_dir(&suite)?;
    let backend = backend_for(&suite_backend(&suite, args.backend)).await?;
    let selection = Selection {
        cells: args.cells.clone(),
        scenarios: args.scenarios.clone(),
        limiters: args.limiters.clone(),
        shard: args.shard,
    };
    check_selection(&suite, &selection)?;
    eprintln!(
        "limiter-harness ci: suite `{}` ({}): {} limiter(s) × {} scenario(s) on {}, baseline {}/{}",
        suite.name,
        crate::shell::relative(&suite.path).display(),
        suite.limiters.len(),
        suite.scenarios.len(),
        backend.name(),
        suite.baseline.display(),
        args.shard.map(|s| format!(", shard {s}")).unwrap_or_default()
    );
    let _guard = crate::signals::guard();
    let options = CiOptions {
        accept: args.accept,
        jobs: args.jobs,
        reruns: args.reruns,
        selection,
        show_progress: !args.no_progress && std::io::stderr().is_terminal(),
        cancel: crate::signals::token().child_token(),
    };
    let run = suite::run_ci(&suite, backend, &options).await?;
    write_outputs(&args.outputs, Some(&suite.report_dir), &run.report)?;
    Ok(exit(&run.report, args.accept))
}

/// `ci merge`: the shards' ci.json files as one run.
fn merge(args: &MergeArgs) -> Result<ExitCode, SetupError> {
    let mut reports = Vec::new();
    for given in &args.reports {
        let file = if given.is_dir() {
            given.join("ci.json")
        } else {
            given.clone()
        };
        let text =
            std::fs::read_to_string(&file).map_err(|e| SetupError::io("cannot read a shard's result", &file, e))?;
        let report: CiReport = serde_json::from_str(&text).map_err(|e| {
            SetupError::Usage(format!(
                "{} is not a `limiter-harness ci` result (ci.json): {e}",
                file.display()
            ))
        })?;
        reports.push(report);
    }
    let merged = suite::merge_reports(&reports).map_err(SetupError::usage)?;
    write_outputs(&args.outputs, None, &merged)?;
    Ok(exit(&merged, false))
}

/// A selection that names nothing of the suite is a mistake, not an empty pass.
fn check_selection(suite: &Suite, selection: &Selection) -> Result<(), SetupError> {
    let limiters: Vec<&str> = suite.limiters.iter().map(|l| l.name.as_str()).collect();
    for glob in &selection.limiters {
        if !limiters.iter().any(|l| crate::matrix::glob_match(glob, l)) {
            return Err(SetupError::Usage(format!(
                "--limiters {glob}: the suite has no such limiter (it has: {})",
                limiters.join(", ")
            )));
        }
    }
    Ok(())
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

/// The summary and result in the report directory (a `ci` run's), the files CI asked for,
/// GitHub's step summary, and the result on stdout.
fn write_outputs(outputs: &CiOutputs, report_dir: Option<&Path>, report: &CiReport) -> Result<(), SetupError> {
    let write = |path: &Path, text: &str| -> Result<(), SetupError> {
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            crate::report_dir::create_report_dir(dir)?;
        }
        std::fs::write(path, text).map_err(|e| SetupError::io("cannot write", path, e))
    };
    let summary = suite::render_summary(report);
    let json = serde_json::to_string_pretty(report).expect("serializes") + "\n";
    if let Some(dir) = report_dir {
        write(&dir.join("SUMMARY.md"), &summary)?;
        write(&dir.join("ci.json"), &json)?;
    }
    if let Some(path) = &outputs.summary {
        write(path, &summary)?;
    }
    if let Some(path) = &outputs.junit {
        write(path, &suite::render_junit(report))?;
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
    match outputs.format {
        Format::Json => say(json.trim_end()),
        Format::Text => {
            say(&summary);
            for line in &report.accepted {
                say(line);
            }
            say(&final_line(report));
        }
    }
    Ok(())
}

/// The last line: what the run comes to, and what to do next.
fn final_line(report: &CiReport) -> String {
    if report.interrupted {
        return "ci: interrupted; the baseline was left as it was".to_owned();
    }
    if !report.accepted.is_empty() {
        return format!(
            "ci: baseline updated ({} file(s), listed above): review them with `git diff` and commit them",
            report.accepted.len()
        );
    }
    let names = |standing: Standing| -> Vec<String> {
        report
            .standing(standing)
            .map(|c| format!("{} × {}", c.scenario, c.limiter))
            .collect()
    };
    let ran = report.cells.iter().filter(|c| c.standing != Standing::Skipped).count();
    if report.identical {
        let vary = names(Standing::KeysVary);
        let vary = if vary.is_empty() {
            String::new()
        } else {
            format!("; keys vary from run to run, verdicts as recorded: {}", vary.join(", "))
        };
        return format!(
            "ci: {ran} cell(s), every one as in the baseline ({}/){vary}",
            report.baseline
        );
    }
    let mut parts = Vec::new();
    for (standing, what) in [
        (Standing::Regression, "regression(s)"),
        (Standing::Flaky, "flaky"),
        (Standing::Changed, "changed"),
        (Standing::New, "new, no baseline yet"),
        (Standing::Improvement, "improved (accept them to keep them)"),
        (Standing::Error, "could not run"),
    ] {
        let cells = names(standing);
        if !cells.is_empty() {
            parts.push(format!("{} {what}: {}", cells.len(), cells.join(", ")));
        }
    }
    if !report.stale.is_empty() {
        parts.push(format!("{} stale baseline file(s)", report.stale.len()));
    }
    if report.table.as_ref().is_some_and(|t| !t.same) {
        parts.push("the table differs".into());
    }
    let verdict = if report.passed { "passes" } else { "fails" };
    format!(
        "ci: {verdict}: {}\n  help: an intended change is recorded with `limiter-harness ci --accept --cells SCENARIO--LIMITER` (or the whole suite with `ci --accept`); commit the baseline so the pull request shows it",
        parts.join("; ")
    )
}

/// Interrupted: unknown. A cell that could not run: setup error. Anything failing the gate
/// (unless accepted): 1.
fn exit(report: &CiReport, accepted: bool) -> ExitCode {
    if report.interrupted {
        ExitCode::Unknown
    } else if report.standing(Standing::Error).next().is_some() {
        ExitCode::Setup
    } else if accepted || report.passed {
        ExitCode::Valid
    } else {
        ExitCode::Invalid
    }
}
