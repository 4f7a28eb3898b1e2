//! What a matrix runs and what it adds up to, from the choices on its command line: the
//! scenarios a list of globs selects, the servers (the one the options name, or each of
//! `--servers` by name), how many cells at once, what `MATRIX.md` says about how it was
//! made, and the outcome of its cells. The CLI parses arguments and prints; this decides.

use std::path::Path;

use super::{Cell, Expectation, MatrixServer, TableContext, glob_match};
use crate::backend::{Backend, BackendChoice, BackendOptions, select_backend};
use crate::checker::Verdict;
use crate::error::SetupError;
use crate::scenario::{Adjust, Scenario, list_scenarios};

/// The catalog's scenarios whose names match one of the comma-separated `globs`, loaded and
/// adjusted (`--keys`, `--window-ms`, the TTL bound); none matching is an error.
pub fn select_scenarios(globs: &str, adjust: &Adjust) -> Result<Vec<Scenario>, SetupError> {
    let mut scenarios: Vec<_> = list_scenarios()
        .into_iter()
        .filter(|(name, _)| globs.split(',').any(|glob| glob_match(glob.trim(), name)))
        .map(|(_, source)| source.load())
        .collect::<Result<_, _>>()?;
    for scenario in &mut scenarios {
        scenario.adjust(adjust).map_err(SetupError::usage)?;
    }
    if scenarios.is_empty() {
        return Err(SetupError::Usage(format!(
            "no scenario matches `{globs}` (see `limiter-harness list`)"
        )));
    }
    Ok(scenarios)
}

/// The matrix's servers: the one `options` names, without a dimension; or each of `specs`
/// (`--servers`), named in the table by its catalog name (or product-version for a path),
/// with what it says it is (the pairs for the table's header).
pub async fn select_servers(
    specs: &[String],
    options: &BackendOptions,
) -> Result<(Vec<MatrixServer>, Vec<(String, String)>), SetupError> {
    if specs.is_empty() {
        let backend = select_backend(options).await?;
        return Ok((vec![MatrixServer::only(backend)], Vec::new()));
    }
    if options.url.is_some() || options.choice == BackendChoice::Url || options.image.is_some() {
        return Err(SetupError::Usage(
            "--servers starts each server itself: it does not go with --url or --image".into(),
        ));
    }
    let (mut servers, mut versions) = (Vec::new(), Vec::<(String, String)>::new());
    for spec in specs {
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
        let mut one = options.clone();
        one.server = Some(spec.clone());
        let backend = select_backend(&one.preferring_processes()).await?;
        versions.push((name.clone(), found.describe()));
        servers.push(MatrixServer {
            name: Some(name),
            backend,
        });
    }
    Ok((servers, versions))
}

/// The matrix's cells at once when `--jobs` is not given. Measured on 2 cores
/// (docs/performance.md): processes at 16 give the reviewed verdicts in about 51 s; containers at 16
/// load the machine enough (Docker's own work per container start and removal) that a
/// request now and then stalls past a window end and races its key's expiry, at 12 they
/// did not (4 runs of the matrix, 78 s each).
pub fn default_jobs(backend: &str) -> usize {
    match backend {
        "container" => 12,
        _ => 16,
    }
}

/// How many cells run at once: `jobs` if given, else [`default_jobs`]; one on a server the
/// harness did not start (cells there share its keys and settings), said on stderr.
pub fn jobs_for(jobs: Option<usize>, backend: &dyn Backend) -> usize {
    let jobs = jobs.unwrap_or_else(|| default_jobs(backend.name()));
    if !backend.owns_servers() && jobs > 1 {
        eprintln!("limiter-harness matrix: one server for every cell (--backend url): running one cell at a time");
        return 1;
    }
    jobs
}

/// What `MATRIX.md` says about how it was made (`specs`: `--servers`) and where the reports
/// are (`runs_dir`).
pub fn table_context(
    specs: &[String],
    backend: &dyn Backend,
    runs_dir: &Path,
    servers: Vec<(String, String)>,
) -> TableContext {
    TableContext {
        backend: Some(format!("`--backend {}`", backend.name())),
        regenerate: match specs {
            [] => "limiter-harness matrix".into(),
            named => format!(
                "limiter-harness matrix --servers {}",
                crate::shell::quote(&named.join(","))
            ),
        },
        runs: crate::shell::relative(runs_dir).display().to_string(),
        baseline: None,
        servers,
        flaky: Vec::new(),
    }
}

/// What a finished matrix adds up to, worst first.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MatrixOutcome {
    /// A cell could not start.
    SetupFailed,
    /// A cell judged otherwise than its scenario expects (or, for a limiter the scenarios
    /// have no expectation of, broke an invariant).
    Differs,
    /// A cell is unknown (but for a limiter on a server older than it needs: that its
    /// commands fail there is what is expected).
    Unknown,
    AsExpected,
}

/// The outcome of `cells`: setup errors first, then cells that differ from what their
/// scenario expects, then unknown cells.
pub fn outcome(cells: &[Cell]) -> MatrixOutcome {
    let mismatched = cells.iter().filter(|c| {
        let verdict = c.verdict();
        (verdict.is_some_and(|v| v != Verdict::Unknown) && !c.as_expected())
            || (c.expected == Expectation::Unstated && verdict == Some(Verdict::Invalid))
    });
    if cells.iter().any(|c| c.outcome.is_err()) {
        MatrixOutcome::SetupFailed
    } else if mismatched.count() > 0 {
        MatrixOutcome::Differs
    } else if cells
        .iter()
        .any(|c| c.verdict() == Some(Verdict::Unknown) && c.needs_newer_server().is_none())
    {
        MatrixOutcome::Unknown
    } else {
        MatrixOutcome::AsExpected
    }
}
