//! `MATRIX.md`: the verdict table. Only verdicts and what the scenarios expect: it is
//! reviewed in pull requests, so nothing in it varies from run to run.

use std::fmt::Write;

use super::{Cell, Expectation};
use crate::checker::Verdict;
use crate::scenario::{Invariant, Scenario};

/// A word or two for a broken invariant, for table cells.
pub fn short_label(invariant: Invariant) -> &'static str {
    match invariant {
        Invariant::TtlPresent => "no TTL",
        Invariant::TtlBounded => "TTL > window",
        Invariant::NoCounterReset => "reset",
        Invariant::AdmittedWithinLimit => "over limit",
        Invariant::NoLockout => "lockout",
        Invariant::AdmitsUpToLimit => "starved",
        Invariant::NoLeakedKeys => "leaked keys",
        Invariant::NoDoubleCount => "double count",
        Invariant::ErrorsSurfaced => "error swallowed",
        Invariant::FailsAsDeclared => "fails wrongly",
        Invariant::RecoversAfterFault => "never recovers",
    }
}

fn cell_text(cell: &Cell) -> String {
    let report = match &cell.outcome {
        Ok(r) => r,
        Err(_) => return "error".into(),
    };
    let broken = |v: Verdict| -> Vec<&str> {
        report
            .invariants
            .iter()
            .filter(|c| c.verdict == v)
            .map(|c| short_label(c.invariant))
            .collect()
    };
    let text = match report.verdict {
        // Its commands fail on this server: the invariants could not be observed.
        Verdict::Unknown if cell.needs_newer_server().is_some() => "unknown: server too old".to_owned(),
        Verdict::Valid => "pass".to_owned(),
        Verdict::Invalid => format!("**{}**", broken(Verdict::Invalid).join(", ")),
        Verdict::Unknown => format!("unknown: {}", broken(Verdict::Unknown).join(", ")),
    };
    if cell.as_expected() {
        text
    } else {
        format!("{text} †")
    }
}

/// A scenario × limiter grid in Markdown, each cell's text from `text` (given the scenario
/// and limiter names); "–" where it gives none (no such cell ran).
pub fn grid(out: &mut String, scenarios: &[String], limiters: &[String], text: impl Fn(&str, &str) -> Option<String>) {
    let _ = writeln!(out, "| scenario | {} |", limiters.join(" | "));
    let _ = writeln!(out, "|---|{}", "---|".repeat(limiters.len()));
    for scenario in scenarios {
        let row: Vec<String> = limiters
            .iter()
            .map(|l| text(scenario, l).unwrap_or_else(|| "–".to_owned()))
            .collect();
        let _ = writeln!(out, "| {scenario} | {} |", row.join(" | "));
    }
}

/// The text of the cell `scenario × limiter` (on `server`) among `cells`.
fn cell_at(
    cells: &[Cell],
    server: Option<&str>,
    scenario: &str,
    limiter: &str,
    context: &TableContext,
) -> Option<String> {
    let cell = cells
        .iter()
        .find(|c| c.scenario == scenario && c.limiter == limiter && c.server.as_deref() == server)?;
    Some(if context.is_flaky(cell) {
        "flaky".to_owned()
    } else {
        cell_text(cell)
    })
}

/// Where a table's readers find more, and how it was made.
#[derive(Debug, Clone)]
pub struct TableContext {
    /// e.g. "`--backend process`"; none when the table must read the same on every backend
    /// (a suite's reviewed table: processes and containers give the same verdicts).
    pub backend: Option<String>,
    /// The command that regenerates it.
    pub regenerate: String,
    /// Where each cell's full report is, e.g. `.limiter-harness/reports/runs`.
    pub runs: String,
    /// Where the cells' reviewed snapshots are, when there is a baseline.
    pub baseline: Option<String>,
    /// The servers of `--servers`, as (name, what it says it is: "redis 6.2.14"), in order:
    /// one table each. Empty: one table, no server dimension.
    pub servers: Vec<(String, String)>,
    /// The cells (scenario, limiter) a suite's baseline records as flaky, or this run found
    /// flaky (an accept records them so): their verdict is chance's, so the table says
    /// `flaky` for them, whatever this run gave, and judges them against no expectation.
    pub flaky: Vec<(String, String)>,
}

impl TableContext {
    fn is_flaky(&self, cell: &Cell) -> bool {
        self.flaky
            .iter()
            .any(|(s, l)| *s == cell.scenario && *l == cell.limiter)
    }
}

/// The whole table with its legend, differences from expectations and notes.
pub fn render_table(scenarios: &[Scenario], limiters: &[String], cells: &[Cell], context: &TableContext) -> String {
    crate::report::printable(&table(scenarios, limiters, cells, context))
}

fn table(scenarios: &[Scenario], limiters: &[String], cells: &[Cell], context: &TableContext) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "# Limiter matrix\n");
    let baseline = context
        .baseline
        .as_ref()
        .map(|b| format!(" and its reviewed snapshot in `{b}/SCENARIO--LIMITER.md`"))
        .unwrap_or_default();
    let (every, layout) = if context.servers.is_empty() {
        ("", "SCENARIO/LIMITER")
    } else {
        (" × every server (one table each)", "SERVER/SCENARIO/LIMITER")
    };
    let _ = writeln!(
        out,
        "Every scenario × every limiter{every}, one fresh server per cell{}. A cell says `pass`, or which \
         invariants broke; **†** marks a verdict that differs from what the scenario file expects (`[expect]`), \
         explained under Findings. Regenerate with `{}`; each cell's full report is in \
         `{}/{layout}/report.md`{baseline}.\n",
        context.backend.as_ref().map(|b| format!(" ({b})")).unwrap_or_default(),
        context.regenerate,
        context.runs
    );
    let names: Vec<String> = scenarios.iter().map(|s| s.name.clone()).collect();
    if context.servers.is_empty() {
        grid(&mut out, &names, limiters, |s, l| cell_at(cells, None, s, l, context));
    }
    for (i, (server, version)) in context.servers.iter().enumerate() {
        if i > 0 {
            let _ = writeln!(out);
        }
        let _ = writeln!(out, "## {server} ({version})\n");
        grid(&mut out, &names, limiters, |s, l| {
            cell_at(cells, Some(server), s, l, context)
        });
    }
    let legend: Vec<String> = Invariant::ALL
        .iter()
        .map(|i| format!("{} = `{}`", short_label(*i), i.name()))
        .collect();
    let _ = writeln!(out, "\nLegend: {}.\n", legend.join(", "));
    let (flaky, judged): (Vec<&Cell>, Vec<&Cell>) = cells.iter().partition(|c| context.is_flaky(c));
    findings(&mut out, &judged);
    flaky_cells(&mut out, &flaky);
    notes(&mut out, &judged);
    out
}

fn findings(out: &mut String, cells: &[&Cell]) {
    let differing: Vec<&Cell> = cells.iter().copied().filter(|c| !c.as_expected()).collect();
    let _ = writeln!(out, "## Findings\n");
    if differing.is_empty() {
        let _ = writeln!(out, "Every cell is what its scenario expects.\n");
        return;
    }
    for cell in differing {
        let expected = match cell.expected {
            Expectation::Fail => "expected to fail",
            _ => "expected to pass",
        };
        let got = match &cell.outcome {
            Ok(r) => r.verdict.name().to_owned(),
            Err(e) => format!("error: {}", e.headline()),
        };
        // On an older server, the limiter's failing commands are the reason, whatever the
        // scenario's note (written for a server that has them) says.
        let why = version_note(cell)
            .or_else(|| cell.note.clone())
            .unwrap_or_else(|| "not explained yet: read the cell's report".into());
        let on = cell.server.as_ref().map(|s| format!("{s}: ")).unwrap_or_default();
        let _ = writeln!(
            out,
            "- **{on}{} × {}** ({expected}, got {got}): {why}",
            cell.scenario, cell.limiter
        );
    }
    let _ = writeln!(out);
}

/// The run's note that its limiter needs a newer server than the cell's (its commands
/// fail there), as a finding's reason.
fn version_note(cell: &Cell) -> Option<String> {
    let note = cell.needs_newer_server()?;
    Some(format!("the limiter {}", note.trim().trim_start_matches("limiter ")))
}

/// The cells a suite's baseline records as flaky, which the table shows without a verdict.
fn flaky_cells(out: &mut String, cells: &[&Cell]) {
    if cells.is_empty() {
        return;
    }
    let _ = writeln!(
        out,
        "## Flaky cells
"
    );
    for cell in cells {
        let _ = writeln!(
            out,
            "- {} × {}: recorded flaky in its baseline file (its runs disagree; the file lists every verdict seen), so the table shows no verdict for it.",
            cell.scenario, cell.limiter
        );
    }
    let _ = writeln!(out);
}

/// The notes of cells as expected: the scenario's note on the limiter, or — on a server
/// older than the limiter needs, where its commands failing is what is expected — why.
fn notes(out: &mut String, cells: &[&Cell]) {
    let noted: Vec<(&Cell, String)> = cells
        .iter()
        .copied()
        .filter(|c| c.as_expected())
        .filter_map(|c| Some((c, version_note(c).or_else(|| c.note.clone())?)))
        .collect();
    if noted.is_empty() {
        return;
    }
    let _ = writeln!(out, "## Notes\n");
    for (cell, note) in noted {
        let on = cell.server.as_ref().map(|s| format!("{s}: ")).unwrap_or_default();
        let _ = writeln!(out, "- {on}{} × {}: {note}", cell.scenario, cell.limiter);
    }
    let _ = writeln!(out);
}
