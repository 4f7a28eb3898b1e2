//! Running the cells.

use std::path::PathBuf;
use std::sync::Arc;

use std::time::Instant;
use tokio_util::sync::CancellationToken;

use futures::StreamExt;
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

use crate::backend::Backend;
use crate::checker::Verdict;
use crate::error::SetupError;
use crate::limiter::Limiter;
use crate::report::Report;
use crate::runner::{self, RunConfig};
use crate::scenario::{Adjust, AdjustError, Scenario};

/// A limiter of the matrix: its column's name, and what it changes in every scenario.
#[derive(Clone)]
pub struct MatrixLimiter {
    /// The column's name (a suite's short name, else the limiter's own).
    pub name: String,
    pub limiter: Arc<dyn Limiter>,
    /// What this limiter needs changed in every scenario (`--keys`, `--window-ms`).
    pub adjust: Adjust,
}

impl MatrixLimiter {
    /// A limiter under its own name, changing nothing.
    pub fn plain(limiter: Arc<dyn Limiter>) -> Self {
        Self {
            name: limiter.name().to_owned(),
            limiter,
            adjust: Adjust::default(),
        }
    }
}

/// A server of the matrix: the backend that starts it, and its name in the table.
#[derive(Clone)]
pub struct MatrixServer {
    /// The table's name for it (`redis-6.2`); `None` when the matrix has no server
    /// dimension (one server, as `run` would pick it).
    pub name: Option<String>,
    pub backend: Arc<dyn Backend>,
}

impl MatrixServer {
    /// The one server of a matrix without a server dimension.
    pub fn only(backend: Arc<dyn Backend>) -> Self {
        Self { name: None, backend }
    }
}

/// What the matrix runs.
pub struct MatrixConfig {
    pub scenarios: Vec<Scenario>,
    pub limiters: Vec<MatrixLimiter>,
    /// Every cell runs on each of them (each cell on a fresh server of its own).
    pub servers: Vec<MatrixServer>,
    /// Cells running at once.
    pub jobs: usize,
    /// Where each cell's full report goes: `<runs_dir>/[<server>/]<scenario>/<limiter>/`.
    pub runs_dir: PathBuf,
    /// Overrides every scenario's seed.
    pub seed: Option<u64>,
    /// Route every limiter's traffic through the fault proxy.
    pub via_proxy: bool,
    /// The user allowed reconfiguring a server the harness did not start (`--backend url`).
    pub allow_reconfigure: bool,
    /// Cancelled (Ctrl-C): no further cell starts; the running ones stop themselves (each
    /// run handles the signal) and end unknown.
    pub cancel: CancellationToken,
    pub show_progress: bool,
    /// Only these cells, as (scenario, limiter column) names; `None`: every one.
    pub only: Option<std::collections::BTreeSet<(String, String)>>,
}

/// What a cell's scenario expects of its limiter (`[expect]`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Expectation {
    Pass,
    Fail,
    /// The scenario's `[expect]` speaks of the harness's built-ins only: a team's own
    /// limiter (an exec adapter, a Lua script) has no expectation, only its baseline.
    Unstated,
}

impl Expectation {
    /// What `scenario` expects of `limiter`: a built-in listed under `fail` fails, any other
    /// built-in passes.
    pub fn of(scenario: &Scenario, limiter: &dyn Limiter) -> Self {
        let name = limiter.name();
        if !crate::limiter::BUILTIN_NAMES.contains(&name) {
            Self::Unstated
        } else if scenario.expect.fail.iter().any(|f| f == name) {
            Self::Fail
        } else {
            Self::Pass
        }
    }
}

/// One scenario × limiter (× server).
#[derive(Debug)]
pub struct Cell {
    pub scenario: String,
    pub limiter: String,
    /// The server's name when the matrix has a server dimension (`--servers`).
    pub server: Option<String>,
    /// What the scenario expects of this limiter.
    pub expected: Expectation,
    pub note: Option<String>,
    /// The report, or why the cell could not run.
    pub outcome: Result<Report, CellError>,
    pub wall_ms: u64,
}

/// Why a cell has no report.
#[derive(Debug, thiserror::Error)]
pub enum CellError {
    /// The limiter's changes to the scenario do not apply to it.
    #[error("limiter `{limiter}`: {source}")]
    Adjust { limiter: String, source: AdjustError },
    /// The run could not start, or could not go on.
    #[error(transparent)]
    Run(#[from] Box<SetupError>),
    /// The matrix was interrupted before the cell started.
    #[error("not run: the matrix was interrupted")]
    NotRun,
}

impl CellError {
    /// The first line of the message, for a line of progress or a table's cell.
    pub fn headline(&self) -> String {
        crate::text::first_line(&self.to_string()).to_owned()
    }
}

impl Cell {
    pub fn verdict(&self) -> Option<Verdict> {
        self.outcome.as_ref().ok().map(|r| r.verdict)
    }

    /// Whether the verdict is what the scenario expects (an unknown or an error never is,
    /// unless the limiter needs a newer server than the cell's: then its commands failing is
    /// what is expected). A cell without an expectation is as expected once it ran.
    pub fn as_expected(&self) -> bool {
        if self.needs_newer_server().is_some() {
            return true;
        }
        match (self.expected, self.verdict()) {
            (Expectation::Unstated, verdict) => verdict.is_some(),
            (Expectation::Fail, Some(Verdict::Invalid)) | (Expectation::Pass, Some(Verdict::Valid)) => true,
            _ => false,
        }
    }

    /// The run's note that its limiter needs a newer server than the cell's (its commands
    /// fail there), without its prefix.
    pub fn needs_newer_server(&self) -> Option<&str> {
        let report = self.outcome.as_ref().ok()?;
        report
            .problems
            .iter()
            .find_map(|p| p.strip_prefix(crate::runner::NEEDS_NEWER_SERVER))
    }
}

/// Run every cell, `jobs` at a time; cells come back in table order (server, then
/// scenario, then limiter).
pub async fn run_matrix(config: MatrixConfig) -> Vec<Cell> {
    // Table order is scenario-major; the start order is `spread`'s.
    let width = config.limiters.len();
    let per_server = width * config.scenarios.len();
    let (scenarios, limiters) = (&config.scenarios, &config.limiters);
    let plan: Vec<(usize, &MatrixServer, &Scenario, &MatrixLimiter)> = config
        .servers
        .iter()
        .enumerate()
        .flat_map(|(vi, v)| {
            limiters.iter().enumerate().flat_map(move |(li, l)| {
                scenarios
                    .iter()
                    .enumerate()
                    .map(move |(si, s)| (vi * per_server + si * width + li, v, s, l))
            })
        })
        .filter(|(_, _, s, l)| {
            config
                .only
                .as_ref()
                .is_none_or(|only| only.contains(&(s.name.clone(), l.name.clone())))
        })
        .collect();
    let plan = spread(
        plan,
        |(_, _, scenario, _)| busy(scenario),
        |(_, _, scenario, _)| expected_ms(scenario),
    );
    let bar = progress(plan.len() as u64, config.show_progress);
    let mut cells: Vec<(usize, Cell)> = futures::stream::iter(plan)
        .map(|(i, server, scenario, limiter)| {
            let (bar, config) = (bar.clone(), &config);
            async move {
                if config.cancel.is_cancelled() {
                    return (i, not_run(server, scenario, limiter));
                }
                let cell = run_cell(config, server, scenario, limiter).await;
                let verdict = match &cell.outcome {
                    Ok(r) => r.verdict.name().to_uppercase(),
                    Err(e) => format!("ERROR ({})", e.headline()),
                };
                let mark = if cell.as_expected() {
                    ""
                } else {
                    "  (differs from the expectation)"
                };
                let on = cell.server.as_ref().map(|s| format!("{s}: ")).unwrap_or_default();
                let line = format!(
                    "{on}{} × {}: {verdict} in {:.1} s{mark}",
                    cell.scenario,
                    cell.limiter,
                    cell.wall_ms as f64 / 1000.0
                );
                if bar.is_hidden() {
                    eprintln!("{line}");
                } else {
                    bar.println(line);
                }
                bar.inc(1);
                (i, cell)
            }
        })
        .buffer_unordered(config.jobs.max(1))
        .collect()
        .await;
    bar.finish_and_clear();
    cells.sort_by_key(|(i, _)| *i);
    cells.into_iter().map(|(_, c)| c).collect()
}

/// About how long a cell of this scenario waits: its timed phases (the order in which cells
/// start depends on this, never a verdict).
pub fn expected_ms(scenario: &Scenario) -> u64 {
    scenario.phases.iter().filter_map(|p| p.kind.planned_ms()).sum()
}

/// Whether a cell of this scenario keeps a core busy: a burst of thousands of requests, sent
/// as fast as the server answers.
fn busy(scenario: &Scenario) -> bool {
    scenario
        .phases
        .iter()
        .any(|p| p.kind.planned_ms().is_none() && p.kind.planned_requests() >= BUSY_BURST_REQUESTS)
}

/// A burst this long keeps a core busy for about a second.
const BUSY_BURST_REQUESTS: u64 = 1000;

/// The order cells start in. Most cells wait out their phases, so the matrix takes about the
/// sum of their times over `jobs`, plus whatever runs last: the ones that wait longest start
/// first (a stable sort: within one length the limiters take turns). The busy ones are spread
/// evenly between them, so that about one at a time floods a server from start to end,
/// rather than several at once at the end, each slowed by the others.
fn spread<T>(cells: Vec<T>, is_busy: impl Fn(&T) -> bool, wait_ms: impl Fn(&T) -> u64) -> Vec<T> {
    let (busy, mut timed): (Vec<T>, Vec<T>) = cells.into_iter().partition(|c| is_busy(c));
    timed.sort_by_key(|c| std::cmp::Reverse(wait_ms(c)));
    let (n_busy, n_timed) = (busy.len(), timed.len());
    let mut out = Vec::with_capacity(n_busy + n_timed);
    let mut busy = busy.into_iter();
    for (i, cell) in timed.into_iter().enumerate() {
        // Busy cell k goes before timed cell i once k × n_timed <= i × n_busy.
        while out.len() - i < n_busy && (out.len() - i) * n_timed <= i * n_busy {
            out.extend(busy.next());
        }
        out.push(cell);
    }
    out.extend(busy);
    out
}

async fn run_cell(config: &MatrixConfig, server: &MatrixServer, scenario: &Scenario, limiter: &MatrixLimiter) -> Cell {
    let started = Instant::now();
    let name = limiter.name.clone();
    let mut cell = Cell {
        scenario: scenario.name.clone(),
        server: server.name.clone(),
        expected: Expectation::of(scenario, limiter.limiter.as_ref()),
        note: scenario.expect.notes.get(&name).cloned(),
        limiter: name,
        outcome: Err(CellError::NotRun),
        wall_ms: 0,
    };
    let mut scenario = scenario.clone();
    if let Err(source) = scenario.adjust(&limiter.adjust) {
        cell.outcome = Err(CellError::Adjust {
            limiter: limiter.name.clone(),
            source,
        });
        return cell;
    }
    let seed = scenario.seed_or(config.seed, || 0);
    let reproduce = crate::runner::reproduce_line(
        &scenario.reproduce_arg(),
        limiter.limiter.name(),
        seed,
        server.backend.as_ref(),
        config.allow_reconfigure,
        config.via_proxy,
        &scenario.adjusted.flags(),
    );
    let runs_dir = match &server.name {
        Some(name) => config.runs_dir.join(server_dir_name(name)),
        None => config.runs_dir.clone(),
    };
    let report_dir = runs_dir.join(&scenario.name).join(sanitize(&limiter.name));
    let run = RunConfig {
        scenario,
        limiter: Arc::clone(&limiter.limiter),
        backend: Arc::clone(&server.backend),
        seed,
        report_dir,
        allow_reconfigure: config.allow_reconfigure,
        via_proxy: config.via_proxy,
        show_progress: false,
        reproduce,
    };
    cell.outcome = runner::run_on_own_thread(run)
        .await
        .map(|o| o.report)
        .map_err(|e| CellError::Run(Box::new(e)));
    cell.wall_ms = started.elapsed().as_millis() as u64;
    cell
}

fn not_run(server: &MatrixServer, scenario: &Scenario, limiter: &MatrixLimiter) -> Cell {
    let name = limiter.name.clone();
    Cell {
        scenario: scenario.name.clone(),
        server: server.name.clone(),
        expected: Expectation::of(scenario, limiter.limiter.as_ref()),
        note: None,
        limiter: name,
        outcome: Err(CellError::NotRun),
        wall_ms: 0,
    }
}

/// A server's name as a directory name: `redis-6.2` stays as it is (never `.` or `..`).
pub fn server_dir_name(name: &str) -> String {
    let dir: String = name
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.') {
                c
            } else {
                '_'
            }
        })
        .collect();
    if dir.chars().all(|c| c == '.') {
        "_".repeat(dir.len().max(1))
    } else {
        dir
    }
}

/// A limiter name as a directory name.
pub fn sanitize(name: &str) -> String {
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

fn progress(total: u64, visible: bool) -> ProgressBar {
    let target = if visible {
        ProgressDrawTarget::stderr_with_hz(5)
    } else {
        ProgressDrawTarget::hidden()
    };
    let bar = ProgressBar::with_draw_target(Some(total), target);
    bar.set_style(
        ProgressStyle::with_template("{spinner} [{elapsed_precise}] {bar:30} {pos}/{len} cells")
            .expect("valid template"),
    );
    bar.enable_steady_tick(std::time::Duration::from_millis(200));
    bar
}

#[cfg(test)]
mod order_tests {
    use super::spread;

    #[test]
    fn the_longest_waits_start_first_and_the_busy_cells_are_spread_between_them() {
        // (name, busy, wait_ms)
        let cells = vec![
            ("a", false, 1000),
            ("B1", true, 0),
            ("b", false, 3000),
            ("c", false, 2000),
            ("B2", true, 0),
            ("d", false, 2000),
        ];
        let order: Vec<&str> = spread(cells, |c| c.1, |c| c.2).into_iter().map(|c| c.0).collect();
        // Timed by wait, longest first (c before d: a stable sort); a busy one before the
        // first timed cell and one halfway.
        assert_eq!(order, ["B1", "b", "c", "B2", "d", "a"]);
    }

    #[test]
    fn only_busy_or_only_timed_cells_keep_their_order_or_sort_by_wait() {
        let busy: Vec<u32> = spread(vec![1, 2, 3], |_| true, |_| 0);
        assert_eq!(busy, [1, 2, 3]);
        let timed: Vec<u32> = spread(vec![1, 3, 2], |_| false, |&c| u64::from(c));
        assert_eq!(timed, [3, 2, 1]);
    }
}
