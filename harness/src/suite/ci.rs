//! `ci`: choose a suite's cells (`--cells`, `--scenarios`, `--limiters`, `--shard`, less the
//! suite's `[[skip]]`s), run them, run again those that differ from their baseline (runs that
//! disagree are flaky), set each against its baseline and, with `--accept`, record what they
//! gave: the same bytes for a stable cell, a flaky record for one whose runs disagree.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use futures::future::LocalBoxFuture;
use tokio_util::sync::CancellationToken;

use super::SuiteError;
use super::baseline::{self, Judged, Recorded, Standing};
use super::outcome::{CellResult, CiReport, TableState, cell_name};
use super::resolve::Suite;
use super::shard::Shard;
use super::summary::verdict_words;
use crate::backend::Backend;
use crate::checker::Verdict;
use crate::error::SetupError;
use crate::matrix::{
    Cell, MatrixConfig, MatrixLimiter, MatrixServer, TableContext, expected_ms, glob_match, render_table, run_matrix,
    sanitize,
};
use crate::report::render_snapshot;
use crate::scenario::Scenario;

/// How `ci` runs beyond what the suite file says.
#[derive(Debug, Clone, Default)]
pub struct CiOptions {
    /// Record what the cells give as their baseline (and the table): each cell then runs
    /// 1 + `reruns` times, so that a flaky one is recorded as flaky.
    pub accept: bool,
    /// Overrides the suite's `jobs`.
    pub jobs: Option<usize>,
    /// Overrides the suite's `reruns`.
    pub reruns: Option<u32>,
    pub selection: Selection,
    pub show_progress: bool,
    /// Cancelled (Ctrl-C): no further cell starts.
    pub cancel: CancellationToken,
}

/// Which of the suite's cells a run takes.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Selection {
    /// Globs over `SCENARIO--LIMITER`.
    pub cells: Vec<String>,
    /// Globs over scenario names.
    pub scenarios: Vec<String>,
    /// Globs over the suite's limiter names.
    pub limiters: Vec<String>,
    pub shard: Option<Shard>,
}

impl Selection {
    /// Whether it takes every cell.
    pub fn is_whole(&self) -> bool {
        *self == Self::default()
    }

    fn admits(&self, scenario: &str, limiter: &str) -> bool {
        let any = |globs: &[String], name: &str| globs.is_empty() || globs.iter().any(|g| glob_match(g, name));
        any(&self.cells, &cell_name(scenario, limiter))
            && any(&self.scenarios, scenario)
            && any(&self.limiters, limiter)
    }

    /// The flags that narrowed it, e.g. "--cells '*--api'" (the shard aside).
    fn describe(&self) -> Option<String> {
        let mut parts = Vec::new();
        for (flag, globs) in [
            ("--cells", &self.cells),
            ("--scenarios", &self.scenarios),
            ("--limiters", &self.limiters),
        ] {
            if !globs.is_empty() {
                parts.push(format!("{flag} {}", crate::shell::quote(&globs.join(","))));
            }
        }
        (!parts.is_empty()).then(|| parts.join(" "))
    }
}

/// Each shard's cells: the scenarios ranked by how long they wait (longest first, then table
/// order), and the cell of the scenario ranked `r` and the `j`-th limiter dealt to shard
/// `(r + j) mod N` — disjoint, covering, deterministic for a suite, about even in time (every
/// scenario's cells spread over the shards), and every limiter met on every shard that has
/// enough scenarios: with N = 2 a checkerboard, so two shards on two backends run each
/// scenario and each limiter on both.
fn shard_cells(cells: &[(String, String)], scenarios: &[Scenario], shard: Shard) -> Vec<(String, String)> {
    let wait = |name: &str| scenarios.iter().find(|s| s.name == name).map_or(0, expected_ms);
    fn distinct<'a>(names: impl Iterator<Item = &'a str>) -> Vec<&'a str> {
        let mut seen: Vec<&str> = Vec::new();
        for name in names {
            if !seen.contains(&name) {
                seen.push(name);
            }
        }
        seen
    }
    let mut ranked = distinct(cells.iter().map(|(s, _)| s.as_str()));
    ranked.sort_by_key(|s| std::cmp::Reverse(wait(s))); // stable: table order among equals
    let limiters = distinct(cells.iter().map(|(_, l)| l.as_str()));
    let rank = |s: &str| ranked.iter().position(|x| *x == s).unwrap_or(0);
    let column = |l: &str| limiters.iter().position(|x| *x == l).unwrap_or(0);
    cells
        .iter()
        .filter(|(s, l)| (rank(s) + column(l)) as u32 % shard.count == shard.index - 1)
        .cloned()
        .collect()
}

/// A finished `ci` run.
#[derive(Debug)]
pub struct CiRun {
    pub report: CiReport,
    /// The suite's scenarios.
    pub scenarios: Vec<Scenario>,
    /// The first run of every cell that ran.
    pub cells: Vec<Cell>,
}

/// Run the selected cells of `suite` on `backend` and set them against the baseline. Paths
/// in the suite are taken relative to the current directory (`ci` runs in the suite's
/// directory). The stages: choose the cells, run them, run again those that differ, judge
/// each against its file, then record (`--accept`) and report.
pub fn run_ci<'a>(
    suite: &'a Suite,
    backend: Arc<dyn Backend>,
    options: &'a CiOptions,
) -> LocalBoxFuture<'a, Result<CiRun, SetupError>> {
    Box::pin(run_ci_unboxed(suite, backend, options))
}

async fn run_ci_unboxed(suite: &Suite, backend: Arc<dyn Backend>, options: &CiOptions) -> Result<CiRun, SetupError> {
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
    let plan = Plan {
        scenarios: &scenarios,
        limiters: &limiters,
        backend,
        suite,
        options,
    };
    let all: Vec<(String, String)> = scenarios
        .iter()
        .flat_map(|s| limiters.iter().map(move |l| (s.name.clone(), l.name.clone())))
        .collect();
    let selected = plan.select(&all);
    let first = plan.run(&selected, 0).await;
    let recorded: BTreeMap<(String, String), Result<Recorded, SuiteError>> = selected
        .iter()
        .map(|(s, l)| {
            let file = baseline::baseline_file(&suite.baseline, s, l);
            ((s.clone(), l.clone()), baseline::read(&file))
        })
        .collect();
    let reruns = plan.run_again(&first, &recorded).await;
    let (results, records) = plan.judge_all(&all, &first, &reruns, &recorded);
    let report = plan.finish(&all, &first, results, &records)?;
    Ok(CiRun {
        report,
        scenarios,
        cells: first,
    })
}

/// What every run of the cells needs.
struct Plan<'a> {
    scenarios: &'a [Scenario],
    limiters: &'a [MatrixLimiter],
    backend: Arc<dyn Backend>,
    suite: &'a Suite,
    options: &'a CiOptions,
}

impl Plan<'_> {
    /// Why the suite skips `cell`, when it does.
    fn skip_reason(&self, (scenario, limiter): &(String, String)) -> Option<String> {
        let name = cell_name(scenario, limiter);
        self.suite
            .skips
            .iter()
            .find(|s| glob_match(&s.cells, &name))
            .map(|s| s.reason.clone())
    }

    /// The cells this run takes: not skipped, admitted by the selection, in its shard.
    fn select(&self, all: &[(String, String)]) -> Vec<(String, String)> {
        let selection = &self.options.selection;
        let selected: Vec<(String, String)> = all
            .iter()
            .filter(|c| self.skip_reason(c).is_none() && selection.admits(&c.0, &c.1))
            .cloned()
            .collect();
        match selection.shard {
            Some(shard) => shard_cells(&selected, self.scenarios, shard),
            None => selected,
        }
    }

    /// The reruns: every cell again under `--accept` (a flaky one is then recorded as such),
    /// else the cells that differ from their baseline; up to `reruns` more runs each.
    async fn run_again(
        &self,
        first: &[Cell],
        recorded: &BTreeMap<(String, String), Result<Recorded, SuiteError>>,
    ) -> Vec<Vec<Cell>> {
        let accept = self.options.accept;
        let again: Vec<(String, String)> = first
            .iter()
            .filter(|c| {
                let Ok(report) = &c.outcome else { return false };
                match recorded.get(&(c.scenario.clone(), c.limiter.clone())) {
                    _ if accept => true,
                    Some(Ok(Recorded::Stable(old))) => render_snapshot(report) != *old,
                    Some(Ok(Recorded::Flaky(record))) => !record.admits(&render_snapshot(report)),
                    _ => false,
                }
            })
            .map(|c| (c.scenario.clone(), c.limiter.clone()))
            .collect();
        let count = self.options.reruns.unwrap_or(self.suite.reruns);
        let mut reruns = Vec::new();
        for k in 1..=count {
            if again.is_empty() || self.options.cancel.is_cancelled() {
                break;
            }
            eprintln!(
                "limiter-harness ci: run {} of {}: {} cell(s) again{}",
                k + 1,
                count + 1,
                again.len(),
                if accept {
                    " (--accept runs every cell again: a flaky one is recorded as flaky)"
                } else {
                    " (they differ from their baseline: runs that disagree are flaky)"
                }
            );
            reruns.push(self.run(&again, k as usize).await);
        }
        reruns
    }

    /// Every cell's result (skipped ones too), in table order; and the records `--accept`
    /// writes, by file.
    fn judge_all(
        &self,
        all: &[(String, String)],
        first: &[Cell],
        reruns: &[Vec<Cell>],
        recorded: &BTreeMap<(String, String), Result<Recorded, SuiteError>>,
    ) -> (Vec<CellResult>, Vec<(PathBuf, String)>) {
        let mut results: Vec<CellResult> = all
            .iter()
            .filter_map(|cell| Some(skipped(self.suite, cell, self.skip_reason(cell)?)))
            .collect();
        let mut records = Vec::new();
        let missing = Ok(Recorded::Missing);
        for cell in first {
            let key = (cell.scenario.clone(), cell.limiter.clone());
            let runs: Vec<(usize, &Cell)> = std::iter::once((0, cell))
                .chain(reruns.iter().enumerate().filter_map(|(k, cells)| {
                    cells
                        .iter()
                        .find(|c| c.scenario == cell.scenario && c.limiter == cell.limiter)
                        .map(|c| (k + 1, c))
                }))
                .collect();
            let recorded = recorded.get(&key).unwrap_or(&missing);
            let (result, record) = self.judge(&runs, recorded);
            if let Some(record) = record {
                records.push((baseline::baseline_file(&self.suite.baseline, &key.0, &key.1), record));
            }
            results.push(result);
        }
        results.sort_by_key(|r| all.iter().position(|(s, l)| *s == r.scenario && *l == r.limiter));
        (results, records)
    }

    /// The stale files and the table (whole runs only), what `--accept` wrote, the report.
    fn finish(
        &self,
        all: &[(String, String)],
        first: &[Cell],
        results: Vec<CellResult>,
        records: &[(PathBuf, String)],
    ) -> Result<CiReport, SetupError> {
        let (suite, options) = (self.suite, self.options);
        let interrupted = options.cancel.is_cancelled();
        let whole = options.selection.is_whole();
        let stale = if whole {
            baseline::stale(&suite.baseline, all)
        } else {
            Vec::new()
        };
        let table = if whole {
            table(suite, self.scenarios, self.limiters, first, &results)
        } else {
            None
        };
        let mut accepted = Vec::new();
        if options.accept && !interrupted {
            accepted = accept(&suite.baseline, records, &stale)?;
            if let Some((path, _, now)) = table.as_ref().filter(|(_, t, _)| !t.same) {
                std::fs::write(path, now).map_err(|e| SetupError::io("cannot write", path, e))?;
                accepted.push(format!("wrote {}", path.display()));
            }
        }
        Ok(CiReport {
            suite: suite.name.clone(),
            baseline: suite.baseline.display().to_string(),
            scenarios: self.scenarios.iter().map(|s| s.name.clone()).collect(),
            limiters: self.limiters.iter().map(|l| l.name.clone()).collect(),
            cells: results,
            cells_in_suite: all.len(),
            selection: options.selection.describe(),
            shard: options.selection.shard.map(|s| s.to_string()),
            stale: stale.iter().map(|p| p.display().to_string()).collect(),
            table: table.map(|(_, t, _)| t),
            flaky: suite.flaky,
            accepted,
            interrupted,
            identical: false,
            passed: false,
        }
        .settle())
    }

    /// Where the reports of run `k` go (0: the first).
    fn runs_dir(&self, k: usize) -> PathBuf {
        match k {
            0 => self.suite.report_dir.join("runs"),
            k => self.suite.report_dir.join("runs").join(format!("rerun-{k}")),
        }
    }

    async fn run(&self, cells: &[(String, String)], k: usize) -> Vec<Cell> {
        let mut jobs = self.options.jobs.unwrap_or(self.suite.jobs);
        if !self.backend.owns_servers() {
            // Cells on one server share its keys and settings: one at a time.
            jobs = 1;
        }
        run_matrix(MatrixConfig {
            scenarios: self.scenarios.to_vec(),
            limiters: self.limiters.to_vec(),
            servers: vec![MatrixServer::only(Arc::clone(&self.backend))],
            jobs,
            runs_dir: self.runs_dir(k),
            seed: self.suite.seed,
            via_proxy: self.suite.server.via_proxy,
            allow_reconfigure: self.suite.server.allow_reconfigure,
            cancel: self.options.cancel.clone(),
            show_progress: self.options.show_progress,
            only: Some(cells.iter().cloned().collect::<BTreeSet<_>>()),
        })
        .await
    }

    /// One cell's result from its runs (`k`, cell) and its baseline; and what `--accept`
    /// writes to its file, when that changes.
    fn judge(&self, runs: &[(usize, &Cell)], recorded: &Result<Recorded, SuiteError>) -> (CellResult, Option<String>) {
        cell_result(runs, recorded, &self.suite.baseline, |k| self.runs_dir(k))
    }
}

/// One cell's result from its runs (`k`: 0 for the first run, then the reruns; the cell),
/// its baseline as `dir` records it, and where run `k`'s reports are; and what `--accept`
/// writes to its file, when that changes.
pub(super) fn cell_result(
    runs: &[(usize, &Cell)],
    recorded: &Result<Recorded, SuiteError>,
    dir: &Path,
    runs_dir: impl Fn(usize) -> PathBuf,
) -> (CellResult, Option<String>) {
    let (_, first) = runs[0];
    let file = baseline::baseline_file(dir, &first.scenario, &first.limiter);
    let mut result = CellResult {
        run_count: runs.len(),
        wall_ms: runs.iter().map(|(_, c)| c.wall_ms).sum(),
        ..CellResult::new(
            &first.scenario,
            &first.limiter,
            Standing::Error,
            first.verdict().map_or("error", Verdict::name),
            verdict_words(first),
            file.display().to_string(),
        )
    };
    let recorded = match (&first.outcome, recorded) {
        (Err(e), _) => {
            result.error = Some(e.to_string());
            return (result, None);
        }
        (Ok(_), Err(e)) => {
            result.error = Some(e.to_string());
            return (result, None);
        }
        (Ok(_), Ok(recorded)) => recorded,
    };
    let snapshots: Vec<String> = runs
        .iter()
        .map(|(_, c)| c.outcome.as_ref().map(render_snapshot).unwrap_or_default())
        .collect();
    let judged = baseline::judge(&first.scenario, &first.limiter, recorded, &snapshots);
    let shown = judged.differing_run.unwrap_or(0);
    let (k, shown_cell) = runs[shown];
    describe_run(&mut result, shown_cell, &runs_dir(k));
    result.diff = match recorded {
        // A new cell's record is the whole snapshot: its file, not a diff, is what to review.
        Recorded::Stable(old) if judged.differing_run.is_some() => baseline::diff(&file, old, &snapshots[shown]),
        _ => String::new(),
    };
    let Judged {
        standing,
        changes,
        tally,
        record,
        ..
    } = judged;
    result.standing = standing;
    result.changes = changes;
    result.runs = tally;
    (result, record)
}

/// The evidence of one run of a cell: its verdicts, broken invariants, reproduce command and
/// where its report is.
fn describe_run(result: &mut CellResult, cell: &Cell, runs_dir: &Path) {
    let Ok(report) = &cell.outcome else {
        return;
    };
    result.invariants = report
        .invariants
        .iter()
        .map(|c| (c.invariant.name().to_owned(), c.verdict.name().to_owned()))
        .collect();
    result.broken = report
        .invariants
        .iter()
        .filter(|c| c.verdict == Verdict::Invalid)
        .map(|c| format!("{}: {}", c.invariant.name(), c.summary))
        .collect();
    let mut details = format!("{} × {}: {}\n", cell.scenario, cell.limiter, report.verdict.name());
    for c in &report.invariants {
        details.push_str(&format!(
            "  {:<22} {:<8} {}\n",
            c.invariant.name(),
            c.verdict.name(),
            c.summary
        ));
    }
    details.push_str(&format!("reproduce: {}\n", report.reproduce));
    result.details = details;
    result.reproduce = Some(report.reproduce.clone());
    result.report = Some(
        runs_dir
            .join(&cell.scenario)
            .join(sanitize(&cell.limiter))
            .join("report.md")
            .display()
            .to_string(),
    );
}

fn skipped(suite: &Suite, (scenario, limiter): &(String, String), reason: String) -> CellResult {
    let file = baseline::baseline_file(&suite.baseline, scenario, limiter);
    CellResult {
        skipped: Some(reason),
        ..CellResult::new(
            scenario,
            limiter,
            Standing::Skipped,
            "skipped",
            "skipped".into(),
            file.display().to_string(),
        )
    }
}

/// The suite's table (`[suite] table`) against what the first runs give. A cell recorded
/// flaky, or found flaky now, says `flaky` there (its first run's verdict is chance's).
fn table(
    suite: &Suite,
    scenarios: &[Scenario],
    limiters: &[MatrixLimiter],
    cells: &[Cell],
    results: &[CellResult],
) -> Option<(PathBuf, TableState, String)> {
    let path = suite.table.as_ref()?;
    let flaky: Vec<(String, String)> = results
        .iter()
        .filter(|r| matches!(r.standing, Standing::Flaky | Standing::SameFlaky))
        .map(|r| (r.scenario.clone(), r.limiter.clone()))
        .collect();
    let names: Vec<String> = limiters.iter().map(|l| l.name.clone()).collect();
    let now = suite_table(suite, scenarios, &names, cells, flaky);
    let same = std::fs::read_to_string(path).is_ok_and(|t| t == now);
    Some((
        path.clone(),
        TableState {
            path: path.display().to_string(),
            same,
        },
        now,
    ))
}

/// The suite's table (`[suite] table`) as `cells` give it: the scenarios' rows, the
/// `limiters`' columns (a whole run's cells, or the cells of every shard together), the
/// `flaky` cells (scenario, limiter) without a verdict.
pub fn suite_table(
    suite: &Suite,
    scenarios: &[Scenario],
    limiters: &[String],
    cells: &[Cell],
    flaky: Vec<(String, String)>,
) -> String {
    let context = TableContext {
        backend: None,
        regenerate: "limiter-harness ci --accept".into(),
        runs: suite.report_dir.join("runs").display().to_string(),
        baseline: Some(suite.baseline.display().to_string()),
        servers: Vec::new(),
        flaky,
    };
    render_table(scenarios, limiters, cells, &context)
}

/// Write the records of the cells that changed; remove the stale files. Returns what was
/// written or removed.
fn accept(dir: &Path, records: &[(PathBuf, String)], stale: &[PathBuf]) -> Result<Vec<String>, SetupError> {
    std::fs::create_dir_all(dir).map_err(|e| SetupError::io("cannot create the baseline directory", dir, e))?;
    let mut done = Vec::new();
    for (file, text) in records {
        baseline::write(file, text).map_err(SetupError::usage)?;
        done.push(format!("wrote {}", file.display()));
    }
    for file in stale {
        std::fs::remove_file(file).map_err(|e| SetupError::io("cannot remove", file, e))?;
        done.push(format!("removed {} (no such cell in the suite)", file.display()));
    }
    Ok(done)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shards_are_disjoint_cover_the_cells_and_parse_from_k_of_n() {
        let cells: Vec<(String, String)> = (0..7)
            .flat_map(|s| ["a", "b"].map(|l| (format!("s{s}"), l.to_owned())))
            .collect();
        let parts: Vec<Vec<(String, String)>> = (1..=3)
            .map(|index| shard_cells(&cells, &[], Shard { index, count: 3 }))
            .collect();
        let mut all: Vec<(String, String)> = parts.concat();
        all.sort();
        let mut expected = cells.clone();
        expected.sort();
        assert_eq!(all, expected, "disjoint and covering");
        assert!(parts.iter().all(|p| p.len() >= 4), "about even: {parts:?}");
        // Two shards of 7 scenarios × 2 limiters: a checkerboard — each shard has every
        // scenario once and each limiter on 3 or 4 scenarios.
        let halves: Vec<Vec<(String, String)>> = (1..=2)
            .map(|index| shard_cells(&cells, &[], Shard { index, count: 2 }))
            .collect();
        for half in &halves {
            assert_eq!(half.len(), 7, "{half:?}");
            for s in 0..7 {
                assert_eq!(
                    half.iter().filter(|(x, _)| *x == format!("s{s}")).count(),
                    1,
                    "{half:?}"
                );
            }
            for l in ["a", "b"] {
                assert!(half.iter().filter(|(_, x)| x == l).count() >= 3, "{half:?}");
            }
        }
        assert_eq!(
            parts[0],
            shard_cells(&cells, &[], Shard { index: 1, count: 3 }),
            "deterministic"
        );
        assert_eq!("2/3".parse::<Shard>().unwrap(), Shard { index: 2, count: 3 });
        for bad in ["0/2", "3/2", "1", "a/b", "1/0"] {
            assert!(bad.parse::<Shard>().is_err(), "{bad}");
        }
    }

    #[test]
    fn a_selection_takes_cells_by_name_scenario_and_limiter() {
        let pick = Selection {
            cells: vec!["*--api".into()],
            ..Selection::default()
        };
        assert!(pick.admits("immortal-counter", "api"));
        assert!(!pick.admits("immortal-counter", "daily-cap"));
        let both = Selection {
            scenarios: vec!["immortal-*".into()],
            limiters: vec!["daily-cap".into()],
            ..Selection::default()
        };
        assert!(both.admits("immortal-counter", "daily-cap"));
        assert!(!both.admits("steady-control", "daily-cap"));
        assert_eq!(
            both.describe().as_deref(),
            Some("--scenarios 'immortal-*' --limiters daily-cap")
        );
        assert!(Selection::default().is_whole());
    }
}
