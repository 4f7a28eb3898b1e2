//! What `ci` tells people: the verdict table with each cell's standing against the
//! baseline and the differences (Markdown, for `--summary` and GitHub's step summary), and
//! the same as JSON (`--format json`).

use std::fmt::Write;

use serde::Serialize;

use super::baseline::{Compared, Status};
use crate::checker::Verdict;
use crate::matrix::{Cell, grid, short_label};

/// A word or two for a cell: `pass`, the broken invariants, or `unknown: ...`.
pub fn verdict_words(cell: &Cell) -> String {
    let Ok(report) = &cell.outcome else {
        return "error".into();
    };
    let labels = |v: Verdict| -> String {
        report
            .invariants
            .iter()
            .filter(|c| c.verdict == v)
            .map(|c| short_label(c.invariant))
            .collect::<Vec<_>>()
            .join(", ")
    };
    match report.verdict {
        Verdict::Valid => "pass".into(),
        Verdict::Invalid => format!("**{}**", labels(Verdict::Invalid)),
        Verdict::Unknown => format!("unknown: {}", labels(Verdict::Unknown)),
    }
}

fn standing(cmp: &Compared) -> &'static str {
    match cmp.status {
        Status::Same => "",
        Status::Changed { .. } => " ⚠ changed",
        Status::New => " ⚠ new",
        Status::Error(_) => " ⚠ could not run",
    }
}

/// The Markdown summary: the table, then every difference with its diff and reproduce line.
pub fn render_summary(
    suite: &str,
    scenarios: &[String],
    limiters: &[String],
    cells: &[Cell],
    compared: &[Compared],
) -> String {
    let mut out = String::new();
    let differing = compared
        .iter()
        .filter(|c| c.differs() || matches!(c.status, Status::Error(_)))
        .count();
    let _ = writeln!(
        out,
        "## limiter-harness ci: {suite}\n\n{} cell(s), {}.\n",
        cells.len(),
        if differing == 0 {
            "every one as in the baseline".to_owned()
        } else {
            format!("**{differing} differ from the baseline**")
        }
    );
    grid(&mut out, scenarios, limiters, cells, None, |i| {
        format!("{}{}", verdict_words(&cells[i]), standing(&compared[i]))
    });
    if differing == 0 {
        return out;
    }
    let _ = writeln!(out, "\n### Differences from the baseline\n");
    for (cell, cmp) in cells.iter().zip(compared) {
        if let Status::Error(e) = &cmp.status {
            let _ = writeln!(
                out,
                "#### {} × {}: could not run\n\n```\n{e}\n```\n",
                cell.scenario, cell.limiter
            );
            continue;
        }
        if !cmp.differs() {
            continue;
        }
        let _ = writeln!(out, "#### {} × {}\n", cell.scenario, cell.limiter);
        for change in &cmp.changes {
            let _ = writeln!(out, "- {change}");
        }
        if let Ok(report) = &cell.outcome {
            let _ = writeln!(out, "\nreproduce: `{}`", report.reproduce);
        }
        let _ = writeln!(out, "\n```diff\n{}```\n", cmp.diff());
    }
    out
}

/// One cell, for `--format json`.
#[derive(Debug, Serialize)]
pub struct CellJson {
    pub scenario: String,
    pub limiter: String,
    /// The server's name, in a matrix over `--servers`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub server: Option<String>,
    /// valid, invalid, unknown, or error (the cell could not run).
    pub verdict: String,
    /// Verdict per invariant.
    pub invariants: std::collections::BTreeMap<String, String>,
    /// same, changed, new, or error; absent for a plain matrix.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub baseline: Option<String>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub changes: Vec<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reproduce: Option<String>,
    pub wall_ms: u64,
}

impl CellJson {
    pub fn new(cell: &Cell, compared: Option<&Compared>) -> Self {
        let (verdict, invariants, reproduce, error): (String, std::collections::BTreeMap<String, String>, _, _) =
            match &cell.outcome {
                Ok(r) => (
                    r.verdict.name().to_owned(),
                    r.invariants
                        .iter()
                        .map(|c| (c.invariant.name().to_owned(), c.verdict.name().to_owned()))
                        .collect(),
                    Some(r.reproduce.clone()),
                    None,
                ),
                Err(e) => ("error".to_owned(), Default::default(), None, Some(e.clone())),
            };
        Self {
            scenario: cell.scenario.clone(),
            limiter: cell.limiter.clone(),
            server: cell.server.clone(),
            verdict,
            invariants,
            baseline: compared.map(|c| {
                match c.status {
                    Status::Same => "same",
                    Status::Changed { .. } => "changed",
                    Status::New => "new",
                    Status::Error(_) => "error",
                }
                .to_owned()
            }),
            changes: compared.map(|c| c.changes.clone()).unwrap_or_default(),
            error,
            reproduce,
            wall_ms: cell.wall_ms,
        }
    }
}
