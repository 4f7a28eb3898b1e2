//! JUnit XML for CI dashboards: one testcase per cell. A cell that fails the gate is a
//! failure whose type says which way it changed (regression, improvement, changed, new,
//! flaky) and whose message names what changed, the broken invariants with their first
//! evidence line, and the reproduce command (the body is the diff); a cell that could not
//! run is an error; a cell the suite skips is skipped, with its reason; a cell as in its
//! baseline passes, whatever its verdict, since the baseline is what the team reviewed.

use std::fmt::Write;

use super::baseline::Standing;
use super::outcome::{CellResult, CiReport};
use super::summary::next_step;
use crate::xml::escape;

/// The JUnit XML document of a `ci` run (or of merged shards).
pub fn render_junit(report: &CiReport) -> String {
    let failures = report.cells.iter().filter(|c| c.fails(report.flaky)).count();
    let errors = report.standing(Standing::Error).count();
    let skipped = report.standing(Standing::Skipped).count();
    let seconds: f64 = report.cells.iter().map(|c| c.wall_ms as f64 / 1000.0).sum();
    let mut out = String::from("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n");
    let counts = format!(
        "tests=\"{}\" failures=\"{failures}\" errors=\"{errors}\" time=\"{seconds:.3}\"",
        report.cells.len()
    );
    let _ = writeln!(out, "<testsuites name=\"limiter-harness\" {counts}>");
    let _ = writeln!(
        out,
        "  <testsuite name=\"{}\" {counts} skipped=\"{skipped}\">",
        escape(&report.suite)
    );
    for cell in &report.cells {
        testcase(&mut out, cell, report);
    }
    out.push_str("  </testsuite>\n</testsuites>\n");
    out
}

fn testcase(out: &mut String, cell: &CellResult, report: &CiReport) {
    let _ = writeln!(
        out,
        "    <testcase classname=\"limiter-harness.{}\" name=\"{}\" time=\"{:.3}\">",
        escape(&cell.limiter),
        escape(&cell.scenario),
        cell.wall_ms as f64 / 1000.0
    );
    match cell.standing {
        Standing::Skipped => {
            let _ = writeln!(
                out,
                "      <skipped message=\"{}\"/>",
                escape(cell.skipped.as_deref().unwrap_or_default())
            );
        }
        Standing::Error => {
            let error = cell.error.as_deref().unwrap_or_default();
            let _ = writeln!(
                out,
                "      <error type=\"setup\" message=\"{}\">{}</error>",
                escape(error.lines().next().unwrap_or_default()),
                escape(error)
            );
        }
        _ if cell.fails(report.flaky) => {
            let _ = writeln!(
                out,
                "      <failure type=\"{}\" message=\"{}\">{}</failure>",
                failure_type(cell.standing),
                escape(&message(cell, report)),
                escape(&cell.diff)
            );
        }
        _ => {}
    }
    if !cell.details.is_empty() {
        let _ = writeln!(out, "      <system-out>{}</system-out>", escape(&cell.details));
    }
    out.push_str("    </testcase>\n");
}

fn failure_type(standing: Standing) -> &'static str {
    match standing {
        Standing::Regression => "regression",
        Standing::Improvement => "improvement",
        Standing::New => "new",
        Standing::Flaky => "flaky",
        _ => "changed",
    }
}

/// The failure's message: what changed and which way, the broken invariants, the next
/// step, how to reproduce.
fn message(cell: &CellResult, report: &CiReport) -> String {
    let mut parts: Vec<String> = Vec::new();
    if !cell.runs.is_empty() {
        parts.push(format!("flaky: {}", cell.runs.join("; ")));
    }
    if !cell.changes.is_empty() {
        let changes: Vec<String> = cell
            .changes
            .iter()
            .map(|c| format!("{}: {}", c.label.word(), c.text))
            .collect();
        parts.push(changes.join("; "));
    }
    if !cell.broken.is_empty() {
        parts.push(format!("Broken: {}", cell.broken.join("; ")));
    }
    parts.push(next_step(cell, report.flaky));
    if let Some(reproduce) = &cell.reproduce {
        parts.push(format!("Reproduce: {reproduce}"));
    }
    let parts: Vec<&str> = parts.iter().map(|p| p.trim_end_matches('.')).collect();
    parts.join(". ")
}
