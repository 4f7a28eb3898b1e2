//! The reviewed baseline: one file per cell holding its deterministic snapshot (the verdict
//! per invariant, the anomaly kinds and keys, what each fault did, the rules), committed in
//! the team's repository. `ci` compares every cell with its file; any difference — a
//! regression or an improvement — is reported per cell and per invariant, and `--accept`
//! rewrites the files so the change is reviewed in the pull request's diff.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use crate::error::SetupError;
use crate::matrix::Cell;
use crate::report::render_snapshot;

/// How a cell compares with its baseline.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Status {
    /// The snapshot is the baseline's, byte for byte.
    Same,
    /// It differs: `changes` says how, per invariant.
    Changed { old: String },
    /// No baseline file for this cell yet.
    New,
    /// The cell could not run (a setup error): nothing to compare.
    Error(String),
}

/// One cell against its baseline file.
#[derive(Debug, Clone)]
pub struct Compared {
    pub scenario: String,
    pub limiter: String,
    pub file: PathBuf,
    pub status: Status,
    /// The cell's snapshot now (empty when it could not run).
    pub snapshot: String,
    /// What changed, one line each: "ttl-bounded: valid → invalid (ttl-too-long: rl:0)".
    pub changes: Vec<String>,
}

impl Compared {
    pub fn differs(&self) -> bool {
        matches!(self.status, Status::Changed { .. } | Status::New)
    }

    /// A unified diff from the baseline to now (empty when the same).
    pub fn diff(&self) -> String {
        let old = match &self.status {
            Status::Changed { old } => old.as_str(),
            Status::New => "",
            _ => return String::new(),
        };
        similar::TextDiff::from_lines(old, self.snapshot.as_str())
            .unified_diff()
            .context_radius(2)
            .header(&self.file.display().to_string(), "now")
            .to_string()
    }
}

/// Every cell against the baseline in `dir`, and the baseline files no cell has (stale).
#[derive(Debug, Clone)]
pub struct Comparison {
    pub cells: Vec<Compared>,
    pub stale: Vec<PathBuf>,
}

impl Comparison {
    pub fn differing(&self) -> impl Iterator<Item = &Compared> {
        self.cells.iter().filter(|c| c.differs())
    }

    /// Whether every cell ran and is its baseline, and no baseline file is stale.
    pub fn identical(&self) -> bool {
        self.differing().next().is_none()
            && self.stale.is_empty()
            && !self.cells.iter().any(|c| matches!(c.status, Status::Error(_)))
    }
}

/// The baseline file of a cell.
pub fn baseline_file(dir: &Path, scenario: &str, limiter: &str) -> PathBuf {
    dir.join(format!("{scenario}--{limiter}.md"))
}

/// Compare every cell with its file in `dir`.
pub fn compare(dir: &Path, cells: &[Cell]) -> Comparison {
    let compared: Vec<Compared> = cells.iter().map(|cell| compare_cell(dir, cell)).collect();
    let stale = std::fs::read_dir(dir)
        .map(|entries| {
            let mut stale: Vec<PathBuf> = entries
                .filter_map(|e| e.ok().map(|e| e.path()))
                .filter(|p| {
                    p.extension().is_some_and(|x| x == "md")
                        && p.file_stem().is_some_and(|s| s.to_string_lossy().contains("--"))
                })
                .filter(|p| !compared.iter().any(|c| c.file == *p))
                .collect();
            stale.sort();
            stale
        })
        .unwrap_or_default();
    Comparison { cells: compared, stale }
}

fn compare_cell(dir: &Path, cell: &Cell) -> Compared {
    let file = baseline_file(dir, &cell.scenario, &cell.limiter);
    let (status, snapshot) = match &cell.outcome {
        Err(e) => (Status::Error(e.clone()), String::new()),
        Ok(report) => {
            let now = render_snapshot(report);
            let status = match std::fs::read_to_string(&file) {
                Ok(old) if old == now => Status::Same,
                Ok(old) => Status::Changed { old },
                Err(_) => Status::New,
            };
            (status, now)
        }
    };
    let changes = match &status {
        Status::Changed { old } => changes(old, &snapshot),
        Status::New => vec!["no baseline yet".to_owned()],
        _ => Vec::new(),
    };
    Compared {
        scenario: cell.scenario.clone(),
        limiter: cell.limiter.clone(),
        file,
        status,
        snapshot,
        changes,
    }
}

/// Write every cell that differs, remove the stale files; returns what was written or removed.
pub fn accept(dir: &Path, comparison: &Comparison) -> Result<Vec<String>, SetupError> {
    std::fs::create_dir_all(dir).map_err(|e| SetupError::io("cannot create the baseline directory", dir, e))?;
    let mut done = Vec::new();
    for cell in comparison.differing() {
        std::fs::write(&cell.file, &cell.snapshot).map_err(|e| SetupError::io("cannot write", &cell.file, e))?;
        done.push(format!("wrote {}", cell.file.display()));
    }
    for file in &comparison.stale {
        std::fs::remove_file(file).map_err(|e| SetupError::io("cannot remove", file, e))?;
        done.push(format!("removed {} (no such cell in the suite)", file.display()));
    }
    Ok(done)
}

/// One row of a snapshot's verdict table: (verdict, anomalies "kind: keys; ...").
type Rows = BTreeMap<String, (String, String)>;

/// The rows of a snapshot's table `| invariant | verdict | anomalies (kind: keys) |`.
fn rows(snapshot: &str) -> Rows {
    snapshot
        .lines()
        .skip_while(|l| !l.starts_with("| invariant |"))
        .skip(2)
        .take_while(|l| l.starts_with("| "))
        .filter_map(|l| {
            let cols: Vec<&str> = l.trim_matches('|').split(" | ").map(str::trim).collect();
            match cols.as_slice() {
                [invariant, verdict, anomalies] => Some((
                    (*invariant).to_owned(),
                    ((*verdict).to_owned(), (*anomalies).to_owned()),
                )),
                [invariant, verdict] => Some(((*invariant).to_owned(), ((*verdict).to_owned(), String::new()))),
                _ => None,
            }
        })
        .collect()
}

/// What changed between two snapshots, per invariant; then the lines outside the table.
pub fn changes(old: &str, new: &str) -> Vec<String> {
    let (before, after) = (rows(old), rows(new));
    let mut out = Vec::new();
    for (invariant, (verdict, anomalies)) in &after {
        match before.get(invariant) {
            None => out.push(format!("{invariant}: newly checked, {verdict}{}", paren(anomalies))),
            Some((was, _)) if was != verdict => out.push(format!("{invariant}: {was} → {verdict}{}", paren(anomalies))),
            Some((_, was)) if was != anomalies => out.push(format!(
                "{invariant}: still {verdict}, other anomalies: {} (was {})",
                or_none(anomalies),
                or_none(was)
            )),
            Some(_) => {}
        }
    }
    for (invariant, (verdict, _)) in &before {
        if !after.contains_key(invariant) {
            out.push(format!("{invariant}: no longer checked (was {verdict})"));
        }
    }
    // The title's verdict is the rows' merged: a change there is already said above.
    let outside = |s: &str| -> Vec<String> {
        s.lines()
            .filter(|l| !l.starts_with("| ") && !l.starts_with("# "))
            .map(str::to_owned)
            .collect()
    };
    if outside(old) != outside(new) {
        out.push("other lines changed (the header, a fault's outcome or a rule): see the diff".into());
    }
    out
}

fn paren(anomalies: &str) -> String {
    if anomalies.is_empty() {
        String::new()
    } else {
        format!(" ({anomalies})")
    }
}

fn or_none(anomalies: &str) -> &str {
    if anomalies.is_empty() { "none" } else { anomalies }
}

#[cfg(test)]
mod tests {
    use super::*;

    const OLD: &str = "# s × l: INVALID\n\n| invariant | verdict | anomalies (kind: keys) |\n|---|---|---|\n| ttl-present | valid |  |\n| no-counter-reset | invalid | reset-by-eviction: rl:0 |\n\nRules:\n- x\n";

    #[test]
    fn a_new_broken_invariant_is_named_even_in_a_cell_that_already_failed() {
        let new = OLD.replace(
            "| ttl-present | valid |  |",
            "| ttl-present | invalid | immortal-key: rl:0 |",
        );
        assert_eq!(
            changes(OLD, &new),
            vec!["ttl-present: valid → invalid (immortal-key: rl:0)"]
        );
    }

    #[test]
    fn other_anomalies_under_the_same_verdict_and_other_lines_are_changes_too() {
        let new = OLD
            .replace("reset-by-eviction: rl:0", "reset-by-eviction: rl:0, rl:1")
            .replace("- x", "- y");
        assert_eq!(
            changes(OLD, &new),
            vec![
                "no-counter-reset: still invalid, other anomalies: reset-by-eviction: rl:0, rl:1 (was reset-by-eviction: rl:0)",
                "other lines changed (the header, a fault's outcome or a rule): see the diff"
            ]
        );
        assert!(changes(OLD, OLD).is_empty());
    }

    #[test]
    fn an_improvement_is_a_change() {
        let new = OLD.replace(
            "| no-counter-reset | invalid | reset-by-eviction: rl:0 |",
            "| no-counter-reset | valid |  |",
        );
        assert_eq!(changes(OLD, &new), vec!["no-counter-reset: invalid → valid"]);
    }
}
