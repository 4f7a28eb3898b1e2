//! `ci`: run a suite's cells and compare them with its reviewed baseline.

use std::path::PathBuf;
use std::sync::Arc;

use tokio_util::sync::CancellationToken;

use super::baseline::{self, Comparison};
use super::resolve::Suite;
use crate::backend::Backend;
use crate::error::SetupError;
use crate::matrix::{Cell, MatrixConfig, MatrixLimiter, MatrixServer, TableContext, render_table, run_matrix};
use crate::scenario::Scenario;

/// How `ci` runs beyond what the suite file says.
#[derive(Debug, Clone, Default)]
pub struct CiOptions {
    /// Rewrite the baseline (and the table) with what the cells give now.
    pub accept: bool,
    /// Overrides the suite's `jobs`.
    pub jobs: Option<usize>,
    pub show_progress: bool,
    /// Cancelled (Ctrl-C): no further cell starts.
    pub cancel: CancellationToken,
}

/// The suite's table kept with the baseline (`[suite] table`), against what the cells give.
#[derive(Debug, Clone)]
pub struct TableCheck {
    pub path: PathBuf,
    pub now: String,
    pub same: bool,
}

/// A finished `ci` run.
#[derive(Debug)]
pub struct CiRun {
    pub scenarios: Vec<Scenario>,
    /// Column names, in the suite's order.
    pub limiters: Vec<String>,
    pub cells: Vec<Cell>,
    pub comparison: Comparison,
    pub table: Option<TableCheck>,
    /// What `--accept` wrote or removed.
    pub accepted: Vec<String>,
    pub interrupted: bool,
}

impl CiRun {
    /// Whether every cell (and the table) is as in the baseline.
    pub fn identical(&self) -> bool {
        self.comparison.identical() && self.table.as_ref().is_none_or(|t| t.same)
    }
}

/// Run every cell of `suite` on `backend` and compare it with the baseline. Paths in the
/// suite are taken relative to the current directory (`ci` runs in the suite's directory).
pub async fn run_ci(suite: &Suite, backend: Arc<dyn Backend>, options: &CiOptions) -> Result<CiRun, SetupError> {
    let scenarios = suite.load_scenarios()?;
    let limiters = suite
        .limiters
        .iter()
        .map(|l| {
            Ok(MatrixLimiter {
                name: l.name.clone(),
                limiter: crate::limiter::resolve(&l.spec)?,
                adjust: l.adjust.clone(),
            })
        })
        .collect::<Result<Vec<_>, SetupError>>()?;
    let names: Vec<String> = limiters.iter().map(|l| l.name.clone()).collect();
    let mut jobs = options.jobs.unwrap_or(suite.jobs);
    if !backend.owns_servers() {
        // Cells on one server share its keys and settings: one at a time.
        jobs = 1;
    }
    let runs_dir = suite.report_dir.join("runs");
    let cells = run_matrix(MatrixConfig {
        scenarios: scenarios.clone(),
        limiters,
        servers: vec![MatrixServer::only(backend)],
        jobs,
        runs_dir: runs_dir.clone(),
        seed: suite.seed,
        via_proxy: suite.server.via_proxy,
        allow_reconfigure: suite.server.allow_reconfigure,
        cancel: options.cancel.clone(),
        show_progress: options.show_progress,
    })
    .await;
    let interrupted = options.cancel.is_cancelled();
    let comparison = baseline::compare(&suite.baseline, &cells);
    let table = suite.table.as_ref().map(|path| {
        let context = TableContext {
            backend: None,
            regenerate: "limiter-harness ci --accept".into(),
            runs: runs_dir.display().to_string(),
            baseline: Some(suite.baseline.display().to_string()),
            servers: Vec::new(),
        };
        let now = render_table(&scenarios, &names, &cells, &context);
        let same = std::fs::read_to_string(path).is_ok_and(|t| t == now);
        TableCheck {
            path: path.clone(),
            now,
            same,
        }
    });
    let mut accepted = Vec::new();
    if options.accept && !interrupted {
        accepted = baseline::accept(&suite.baseline, &comparison)?;
        if let Some(t) = table.as_ref().filter(|t| !t.same) {
            std::fs::write(&t.path, &t.now).map_err(|e| SetupError::io("cannot write", &t.path, e))?;
            accepted.push(format!("wrote {}", t.path.display()));
        }
    }
    Ok(CiRun {
        scenarios,
        limiters: names,
        cells,
        comparison,
        table,
        accepted,
        interrupted,
    })
}
