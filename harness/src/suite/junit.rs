//! JUnit XML for CI dashboards: one testcase per cell. A cell fails when it differs from
//! its baseline (the message names what changed, the broken invariants with their first
//! evidence line, and the reproduce command; the body is the diff); a cell that could not
//! run is an error; a cell identical to its baseline passes, whatever its verdict, since the
//! baseline is what the team reviewed.

use std::fmt::Write;

use super::baseline::{Compared, Status};
use crate::checker::Verdict;
use crate::matrix::Cell;
use crate::xml::escape;

/// The JUnit XML document for a suite's cells and their comparison with the baseline.
pub fn render_junit(suite: &str, cells: &[Cell], compared: &[Compared]) -> String {
    let failures = compared.iter().filter(|c| c.differs()).count();
    let errors = compared.iter().filter(|c| matches!(c.status, Status::Error(_))).count();
    let seconds: f64 = cells.iter().map(|c| c.wall_ms as f64 / 1000.0).sum();
    let mut out = String::from("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n");
    let counts = format!(
        "tests=\"{}\" failures=\"{failures}\" errors=\"{errors}\" time=\"{seconds:.3}\"",
        cells.len()
    );
    let _ = writeln!(out, "<testsuites name=\"limiter-harness\" {counts}>");
    let _ = writeln!(out, "  <testsuite name=\"{}\" {counts} skipped=\"0\">", escape(suite));
    for (cell, cmp) in cells.iter().zip(compared) {
        testcase(&mut out, cell, cmp);
    }
    out.push_str("  </testsuite>\n</testsuites>\n");
    out
}

fn testcase(out: &mut String, cell: &Cell, cmp: &Compared) {
    let _ = writeln!(
        out,
        "    <testcase classname=\"limiter-harness.{}\" name=\"{}\" time=\"{:.3}\">",
        escape(&cell.limiter),
        escape(&cell.scenario),
        cell.wall_ms as f64 / 1000.0
    );
    match (&cmp.status, &cell.outcome) {
        (Status::Error(e), _) => {
            let _ = writeln!(
                out,
                "      <error type=\"setup\" message=\"{}\">{}</error>",
                escape(e.lines().next().unwrap_or_default()),
                escape(e)
            );
        }
        (_, Ok(report)) if cmp.differs() => {
            let mut message = format!("differs from the baseline: {}", cmp.changes.join("; "));
            let broken: Vec<String> = report
                .invariants
                .iter()
                .filter(|c| c.verdict == Verdict::Invalid)
                .map(|c| format!("{}: {}", c.invariant.name(), c.summary))
                .collect();
            if !broken.is_empty() {
                let _ = write!(message, ". Broken: {}", broken.join("; "));
            }
            let _ = write!(message, ". Reproduce: {}", report.reproduce);
            let _ = writeln!(
                out,
                "      <failure type=\"baseline\" message=\"{}\">{}</failure>",
                escape(&message),
                escape(&cmp.diff())
            );
        }
        _ => {}
    }
    if let Ok(report) = &cell.outcome {
        let mut text = format!("{} × {}: {}\n", cell.scenario, cell.limiter, report.verdict.name());
        for c in &report.invariants {
            let _ = writeln!(
                text,
                "  {:<22} {:<8} {}",
                c.invariant.name(),
                c.verdict.name(),
                c.summary
            );
        }
        let _ = writeln!(text, "reproduce: {}", report.reproduce);
        let _ = writeln!(out, "      <system-out>{}</system-out>", escape(&text));
    }
    out.push_str("    </testcase>\n");
}
