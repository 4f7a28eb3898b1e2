//! What `ci` tells people: the verdict table with each cell's standing against the baseline,
//! then every difference by kind — regressions, flaky cells, other changes, new cells,
//! improvements — with what changed, the reproduce command and the diff (Markdown, for
//! `--summary` and GitHub's step summary); and one matrix cell as JSON (`matrix --format json`).

use std::fmt::Write;

use serde::Serialize;

use super::baseline::Standing;
use super::outcome::{CellResult, CiReport};
use super::resolve::FlakyPolicy;
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
        Verdict::Unknown if cell.needs_newer_server().is_some() => "unknown: server too old".into(),
        Verdict::Unknown => format!("unknown: {}", labels(Verdict::Unknown)),
    }
}

/// The Markdown summary: the table, then every difference with its evidence.
pub fn render_summary(report: &CiReport) -> String {
    crate::report::printable(&summary(report))
}

fn summary(report: &CiReport) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "## limiter-harness ci: {}\n", report.suite);
    let _ = writeln!(out, "{}\n", headline(report));
    grid(&mut out, &report.scenarios, &report.limiters, |s, l| {
        let cell = report.cells.iter().find(|c| c.scenario == s && c.limiter == l)?;
        Some(match &cell.skipped {
            Some(_) => "skipped".to_owned(),
            None => format!("{}{}", cell.words, cell.standing.mark()),
        })
    });
    let sections: [(Standing, &str); 8] = [
        (Standing::Regression, "Regressions"),
        (Standing::Flaky, "Flaky"),
        (Standing::KeysVary, "Keys vary from run to run, verdicts as recorded"),
        (Standing::Changed, "Other changes"),
        (Standing::New, "New cells (no baseline yet)"),
        (Standing::Improvement, "Improvements"),
        (Standing::Error, "Could not run"),
        (Standing::Skipped, "Skipped by the suite"),
    ];
    for (standing, title) in sections {
        let cells: Vec<&CellResult> = report.standing(standing).collect();
        if cells.is_empty() {
            continue;
        }
        let _ = writeln!(out, "\n### {title} ({})\n", cells.len());
        for cell in cells {
            difference(&mut out, cell, report.flaky);
        }
    }
    for stale in &report.stale {
        let _ = writeln!(
            out,
            "\n- stale baseline file `{stale}`: no cell of the suite has it (`ci --accept` removes it)"
        );
    }
    if let Some(t) = report.table.as_ref().filter(|t| !t.same) {
        let _ = writeln!(out, "\n- the table `{}` differs from what the cells give now", t.path);
    }
    out
}

/// "46 cell(s), every one as in the baseline." or what differs, by kind.
fn headline(report: &CiReport) -> String {
    let ran = report.cells.iter().filter(|c| c.standing != Standing::Skipped).count();
    let skipped = report.cells.len() - ran;
    let of = if report.selection.is_some() || report.shard.is_some() {
        format!(" of the suite's {}", report.cells_in_suite)
    } else {
        String::new()
    };
    let skipped = match skipped {
        0 => String::new(),
        n => format!(" ({n} skipped by the suite)"),
    };
    let counts: Vec<String> = [
        (Standing::Regression, "regression(s)"),
        (Standing::Flaky, "flaky"),
        (Standing::Changed, "changed"),
        (Standing::New, "new"),
        (Standing::Improvement, "improvement(s)"),
        (Standing::Error, "could not run"),
    ]
    .into_iter()
    .filter_map(|(standing, word)| match report.standing(standing).count() {
        0 => None,
        n => Some(format!("{n} {word}")),
    })
    .collect();
    let status = if counts.is_empty() {
        "every one as in the baseline".to_owned()
    } else {
        format!("**{}**", counts.join(", "))
    };
    let keys_vary = match report.standing(Standing::KeysVary).count() {
        0 => String::new(),
        n => format!(" In {n}, which keys the anomalies name varies from run to run (they pass)."),
    };
    format!("{ran} cell(s){of}{skipped}: {status}.{keys_vary}")
}

/// One cell's difference: what changed and which way, what to run next, the diff.
fn difference(out: &mut String, cell: &CellResult, flaky: FlakyPolicy) {
    let _ = writeln!(out, "#### {} × {}\n", cell.scenario, cell.limiter);
    match cell.standing {
        Standing::Error => {
            let _ = writeln!(out, "```\n{}\n```", cell.error.as_deref().unwrap_or_default());
            return;
        }
        Standing::Skipped => {
            let _ = writeln!(out, "{}", cell.skipped.as_deref().unwrap_or_default());
            return;
        }
        _ => {}
    }
    for line in &cell.runs {
        let _ = writeln!(out, "- {line}");
    }
    let which = if matches!(cell.standing, Standing::Flaky | Standing::KeysVary) {
        "the run that differed: "
    } else {
        ""
    };
    for change in &cell.changes {
        // Keys that vary pass: no label that reads like a change to act on.
        let _ = match cell.standing {
            Standing::KeysVary => writeln!(out, "- {which}{}", change.text),
            _ => writeln!(out, "- {which}{}: {}", change.label.word(), change.text),
        };
    }
    let _ = writeln!(out, "\n{}", next_step(cell, flaky));
    if let Some(reproduce) = &cell.reproduce {
        let which = if matches!(cell.standing, Standing::Flaky | Standing::KeysVary) {
            " (the run that differed)"
        } else {
            ""
        };
        let _ = writeln!(out, "\nreproduce{which}: `{reproduce}`");
    }
    if let Some(report) = &cell.report {
        let _ = writeln!(out, "report: `{report}`");
    }
    if !cell.diff.is_empty() {
        let _ = writeln!(out, "\n```diff\n{}```", cell.diff);
    }
    out.push('\n');
}

/// What the team does about a differing cell, in one sentence.
pub fn next_step(cell: &CellResult, flaky: FlakyPolicy) -> String {
    let accept = format!("`{}`", cell.accept_command());
    match cell.standing {
        Standing::Regression => format!("A regression: fix it; if it is intended, accept it with {accept}."),
        Standing::Improvement => format!("Improved: accept with {accept} so the baseline keeps it."),
        Standing::Changed => format!("Changed: if it is intended, accept it with {accept}."),
        Standing::New => format!("No baseline yet: review the run, then record it with {accept}."),
        Standing::Flaky => {
            let gate = match flaky {
                FlakyPolicy::Fail => "it fails the gate (the suite's `flaky = \"fail\"`)",
                FlakyPolicy::Pass => "the suite's `flaky = \"pass\"` lets it pass",
            };
            format!(
                "Flaky: its {} runs disagree, and the baseline does not record that; {gate}. Record it as flaky with {accept}, or fix the race.",
                cell.run_count
            )
        }
        Standing::KeysVary => format!(
            "Passes: each of its {} runs has the baseline's verdicts, anomaly kinds and other lines; only which keys the anomalies name varies (which key a race or an eviction hits is timing's, not the seed's). The baseline stays as it is.",
            cell.run_count
        ),
        _ => String::new(),
    }
}

/// One cell, for `matrix --format json`.
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
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reproduce: Option<String>,
    pub wall_ms: u64,
}

impl CellJson {
    pub fn new(cell: &Cell) -> Self {
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
                Err(e) => ("error".to_owned(), Default::default(), None, Some(e.to_string())),
            };
        Self {
            scenario: cell.scenario.clone(),
            limiter: cell.limiter.clone(),
            server: cell.server.clone(),
            verdict,
            invariants,
            error,
            reproduce,
            wall_ms: cell.wall_ms,
        }
    }
}
