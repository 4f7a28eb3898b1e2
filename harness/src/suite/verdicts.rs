//! What a cell's snapshot says, read back: its verdict per invariant with the anomalies'
//! kinds and keys, and the lines outside the table. From two snapshots, what changed — each
//! change labelled a regression (a verdict worse, new anomaly kinds) or an improvement (the
//! reverse); from several runs of one cell, whether they agree, what each invariant gave
//! (`ttl-present: invalid 1 of 3`), and the record of a flaky cell: every verdict, anomaly
//! kind and other line its runs showed.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write;

use serde::{Deserialize, Serialize};

/// One invariant's row: its verdict and its anomalies ("kind: keys; kind: keys").
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Row {
    pub verdict: String,
    pub anomalies: String,
}

impl Row {
    /// The anomalies' kinds, without their keys.
    pub fn kinds(&self) -> BTreeSet<String> {
        anomaly_kinds(&self.anomalies)
    }
}

fn anomaly_kinds(anomalies: &str) -> BTreeSet<String> {
    anomalies
        .split("; ")
        .filter(|a| !a.is_empty())
        .map(|a| a.split_once(": ").map_or(a, |(kind, _)| kind).to_owned())
        .collect()
}

/// The rows of a snapshot's table `| invariant | verdict | anomalies (kind: keys) |`.
pub fn rows(snapshot: &str) -> BTreeMap<String, Row> {
    snapshot
        .lines()
        .skip_while(|l| !l.starts_with("| invariant |"))
        .skip(2)
        .take_while(|l| l.starts_with("| "))
        .filter_map(|l| {
            let cols: Vec<&str> = l.trim_matches('|').split(" | ").map(str::trim).collect();
            let (invariant, verdict, anomalies) = match cols.as_slice() {
                [invariant, verdict, anomalies] => (*invariant, *verdict, *anomalies),
                [invariant, verdict] => (*invariant, *verdict, ""),
                _ => return None,
            };
            Some((
                invariant.to_owned(),
                Row {
                    verdict: verdict.to_owned(),
                    anomalies: anomalies.to_owned(),
                },
            ))
        })
        .collect()
}

/// The verdict of each invariant, without the anomalies.
pub fn verdicts(snapshot: &str) -> BTreeMap<String, String> {
    rows(snapshot).into_iter().map(|(i, r)| (i, r.verdict)).collect()
}

/// The snapshot's lines outside its title and its table: the header, the faults, the rules.
pub fn other_lines(snapshot: &str) -> Vec<String> {
    snapshot
        .lines()
        .filter(|l| !l.starts_with("| ") && !l.starts_with("# ") && !l.is_empty())
        .map(str::to_owned)
        .collect()
}

/// Whether `b` says what `a` says but for which keys its anomalies name: the same invariants,
/// each with the same verdict and the same anomaly kinds, and the same other lines.
pub fn same_but_keys(a: &str, b: &str) -> bool {
    let (ra, rb) = (rows(a), rows(b));
    ra.len() == rb.len()
        && ra.iter().all(|(invariant, row)| {
            rb.get(invariant)
                .is_some_and(|other| other.verdict == row.verdict && other.kinds() == row.kinds())
        })
        && other_lines(a) == other_lines(b)
}

/// Which way a change goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Label {
    /// A verdict worse (valid → unknown → invalid), or anomaly kinds not seen before.
    Regression,
    /// The reverse: a verdict better, anomaly kinds gone.
    Improvement,
    /// Neither: other keys under the same kinds, a fault's outcome, a rule, an invariant
    /// checked or no longer checked.
    Changed,
}

impl Label {
    pub fn word(self) -> &'static str {
        match self {
            Self::Regression => "regression",
            Self::Improvement => "improvement",
            Self::Changed => "changed",
        }
    }
}

/// One change of a cell, e.g. regression "ttl-present: valid → invalid (immortal-key: rl:0)".
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Change {
    pub label: Label,
    pub text: String,
}

impl Change {
    fn new(label: Label, text: String) -> Self {
        Self { label, text }
    }
}

/// How bad a verdict is: valid, unknown, invalid.
fn rank(verdict: &str) -> u8 {
    match verdict {
        "valid" => 0,
        "unknown" => 1,
        _ => 2,
    }
}

/// What changed between two snapshots, per invariant; then the lines outside the table.
pub fn changes(old: &str, new: &str) -> Vec<Change> {
    let (before, after) = (rows(old), rows(new));
    let mut out = Vec::new();
    for (invariant, now) in &after {
        let Some(was) = before.get(invariant) else {
            out.push(Change::new(
                Label::Changed,
                format!("{invariant}: newly checked, {}{}", now.verdict, paren(&now.anomalies)),
            ));
            continue;
        };
        if was.verdict != now.verdict {
            let label = if rank(&now.verdict) > rank(&was.verdict) {
                Label::Regression
            } else {
                Label::Improvement
            };
            out.push(Change::new(
                label,
                format!(
                    "{invariant}: {} → {}{}",
                    was.verdict,
                    now.verdict,
                    paren(&now.anomalies)
                ),
            ));
        } else if was.anomalies != now.anomalies {
            let (old_kinds, new_kinds) = (was.kinds(), now.kinds());
            let label = if !new_kinds.is_subset(&old_kinds) {
                Label::Regression
            } else if new_kinds != old_kinds {
                Label::Improvement
            } else {
                Label::Changed
            };
            out.push(Change::new(
                label,
                format!(
                    "{invariant}: still {}, other anomalies: {} (was {})",
                    now.verdict,
                    or_none(&now.anomalies),
                    or_none(&was.anomalies)
                ),
            ));
        }
    }
    for (invariant, was) in &before {
        if !after.contains_key(invariant) {
            out.push(Change::new(
                Label::Changed,
                format!("{invariant}: no longer checked (was {})", was.verdict),
            ));
        }
    }
    // The title's verdict is the rows' merged: a change there is already said above.
    if other_lines(old) != other_lines(new) {
        out.push(Change::new(
            Label::Changed,
            "other lines changed (the header, a fault's outcome or a rule): see the diff".into(),
        ));
    }
    out
}

/// The cell's label from its changes: a regression if any change is one, else an
/// improvement if any is one, else changed.
pub fn overall(changes: &[Change]) -> Label {
    changes.iter().map(|c| c.label).min().unwrap_or(Label::Changed)
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

/// What several runs of one cell gave, per invariant whose runs disagree:
/// "ttl-present: invalid 1 of 3, valid 2 of 3". Runs are snapshots; an empty one could not
/// run. Other differences (anomalies, faults) are named once each.
pub fn tally(runs: &[String]) -> Vec<String> {
    let n = runs.len();
    let per_run: Vec<BTreeMap<String, Row>> = runs.iter().map(|r| rows(r)).collect();
    let invariants: BTreeSet<&String> = per_run.iter().flat_map(|r| r.keys()).collect();
    let mut out = Vec::new();
    for invariant in invariants {
        let mut counts: BTreeMap<&str, usize> = BTreeMap::new();
        for run in &per_run {
            *counts
                .entry(run.get(invariant).map_or("not checked", |r| r.verdict.as_str()))
                .or_default() += 1;
        }
        if counts.len() > 1 {
            let parts: Vec<String> = counts.iter().map(|(v, c)| format!("{v} {c} of {n}")).collect();
            out.push(format!("{invariant}: {}", parts.join(", ")));
        } else {
            let variants: BTreeSet<&str> = per_run
                .iter()
                .filter_map(|r| r.get(invariant).map(|row| row.anomalies.as_str()))
                .collect();
            if variants.len() > 1 {
                out.push(format!("{invariant}: other anomalies from run to run"));
            }
        }
    }
    let errors = runs.iter().filter(|r| r.is_empty()).count();
    if errors > 0 {
        out.push(format!("could not run {errors} of {n}"));
    }
    let others: BTreeSet<Vec<String>> = runs.iter().filter(|r| !r.is_empty()).map(|r| other_lines(r)).collect();
    if out.is_empty() && others.len() > 1 {
        out.push("a fault's outcome or another line differs from run to run".into());
    }
    out
}

/// The record of a flaky cell: every verdict and anomaly kind each invariant showed, and
/// every other line, over the runs `ci --accept` saw disagree. A later run passes while it
/// shows nothing else. The anomalies' keys are not kept: which key a race hits is timing's.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FlakyRecord {
    pub invariants: BTreeMap<String, Seen>,
    pub other: BTreeSet<String>,
}

/// What one invariant showed over a flaky cell's runs.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Seen {
    pub verdicts: BTreeSet<String>,
    pub kinds: BTreeSet<String>,
}

/// The title's mark of a flaky record (a snapshot's title ends with its verdict).
const FLAKY_TITLE: &str = ": FLAKY";

impl FlakyRecord {
    /// The record of these runs (snapshots; ones that could not run are left out).
    pub fn of(runs: &[String]) -> Self {
        let mut record = Self {
            invariants: BTreeMap::new(),
            other: BTreeSet::new(),
        };
        for run in runs.iter().filter(|r| !r.is_empty()) {
            for (invariant, row) in rows(run) {
                let seen = record.invariants.entry(invariant).or_default();
                seen.verdicts.insert(row.verdict.clone());
                seen.kinds.extend(row.kinds());
            }
            record.other.extend(other_lines(run));
        }
        record
    }

    /// Whether `snapshot` shows nothing the record has not seen (the same invariants).
    pub fn admits(&self, snapshot: &str) -> bool {
        self.outside(snapshot).is_empty()
    }

    /// What `snapshot` shows that the record has not seen, labelled.
    pub fn outside(&self, snapshot: &str) -> Vec<Change> {
        let now = rows(snapshot);
        let mut out = Vec::new();
        for (invariant, row) in &now {
            let Some(seen) = self.invariants.get(invariant) else {
                out.push(Change::new(
                    Label::Changed,
                    format!("{invariant}: newly checked, {}", row.verdict),
                ));
                continue;
            };
            if !seen.verdicts.contains(&row.verdict) {
                let worst = seen.verdicts.iter().map(|v| rank(v)).max().unwrap_or(0);
                let best = seen.verdicts.iter().map(|v| rank(v)).min().unwrap_or(0);
                let label = match rank(&row.verdict) {
                    r if r > worst => Label::Regression,
                    r if r < best => Label::Improvement,
                    _ => Label::Changed,
                };
                out.push(Change::new(
                    label,
                    format!(
                        "{invariant}: {} (recorded flaky: {}){}",
                        row.verdict,
                        join(&seen.verdicts),
                        paren(&row.anomalies)
                    ),
                ));
            } else if !row.kinds().is_subset(&seen.kinds) {
                out.push(Change::new(
                    Label::Regression,
                    format!(
                        "{invariant}: anomalies not seen before: {} (recorded flaky: {})",
                        row.anomalies,
                        join(&seen.kinds)
                    ),
                ));
            }
        }
        for invariant in self.invariants.keys().filter(|i| !now.contains_key(*i)) {
            out.push(Change::new(Label::Changed, format!("{invariant}: no longer checked")));
        }
        if other_lines(snapshot).iter().any(|l| !self.other.contains(l)) {
            out.push(Change::new(
                Label::Changed,
                "other lines not seen before (the header, a fault's outcome or a rule): see the diff".into(),
            ));
        }
        out
    }

    /// The record as its baseline file, for a cell `scenario × limiter`.
    pub fn render(&self, scenario: &str, limiter: &str) -> String {
        let mut out = String::new();
        let _ = writeln!(out, "# {scenario} × {limiter}{FLAKY_TITLE}\n");
        let _ = writeln!(
            out,
            "Its runs disagreed when `limiter-harness ci --accept` recorded it. A run passes while each invariant's verdict and anomaly kinds are among those seen here, and its other lines too.\n"
        );
        let _ = writeln!(out, "| invariant | verdicts seen | anomaly kinds seen |\n|---|---|---|");
        for (invariant, seen) in &self.invariants {
            let _ = writeln!(
                out,
                "| {invariant} | {} | {} |",
                join(&seen.verdicts),
                join(&seen.kinds)
            );
        }
        let _ = writeln!(out, "\nOther lines seen:\n");
        for line in &self.other {
            let _ = writeln!(out, "{line}");
        }
        out
    }

    /// A baseline file's text as a flaky record, if it is one.
    pub fn parse(text: &str) -> Option<Self> {
        let title = text.lines().next()?;
        if !(title.starts_with("# ") && title.ends_with(FLAKY_TITLE)) {
            return None;
        }
        let split =
            |s: &str| -> BTreeSet<String> { s.split(", ").filter(|x| !x.is_empty()).map(str::to_owned).collect() };
        let invariants = rows(&text.replace("| invariant | verdicts seen |", "| invariant | verdict |"))
            .into_iter()
            .map(|(invariant, row)| {
                let seen = Seen {
                    verdicts: split(&row.verdict),
                    kinds: split(&row.anomalies),
                };
                (invariant, seen)
            })
            .collect();
        let other = text
            .lines()
            .skip_while(|l| *l != "Other lines seen:")
            .skip(1)
            .filter(|l| !l.is_empty())
            .map(str::to_owned)
            .collect();
        Some(Self { invariants, other })
    }
}

fn join(set: &BTreeSet<String>) -> String {
    set.iter().cloned().collect::<Vec<_>>().join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;

    const OLD: &str = "# s × l: INVALID\n\n| invariant | verdict | anomalies (kind: keys) |\n|---|---|---|\n| ttl-present | valid |  |\n| no-counter-reset | invalid | reset-by-eviction: rl:0 |\n\nRules:\n- x\n";

    fn texts(changes: &[Change]) -> Vec<(Label, &str)> {
        changes.iter().map(|c| (c.label, c.text.as_str())).collect()
    }

    #[test]
    fn a_new_broken_invariant_is_a_regression_even_in_a_cell_that_already_failed() {
        let new = OLD.replace(
            "| ttl-present | valid |  |",
            "| ttl-present | invalid | immortal-key: rl:0 |",
        );
        let changes = changes(OLD, &new);
        assert_eq!(
            texts(&changes),
            vec![(Label::Regression, "ttl-present: valid → invalid (immortal-key: rl:0)")]
        );
        assert_eq!(overall(&changes), Label::Regression);
    }

    #[test]
    fn the_reverse_is_an_improvement() {
        let new = OLD.replace(
            "| no-counter-reset | invalid | reset-by-eviction: rl:0 |",
            "| no-counter-reset | valid |  |",
        );
        let changes = changes(OLD, &new);
        assert_eq!(
            texts(&changes),
            vec![(Label::Improvement, "no-counter-reset: invalid → valid")]
        );
        assert_eq!(overall(&changes), Label::Improvement);
        // valid → unknown is a regression too; unknown → valid an improvement.
        let unknown = OLD.replace("| ttl-present | valid |  |", "| ttl-present | unknown |  |");
        assert_eq!(overall(&super::changes(OLD, &unknown)), Label::Regression);
        assert_eq!(overall(&super::changes(&unknown, OLD)), Label::Improvement);
    }

    #[test]
    fn anomaly_kinds_added_or_gone_and_other_keys() {
        let more = OLD.replace("reset-by-eviction: rl:0", "reset-by-eviction: rl:0; reset-by-del: rl:1");
        assert_eq!(overall(&changes(OLD, &more)), Label::Regression);
        assert_eq!(overall(&changes(&more, OLD)), Label::Improvement);
        let keys = OLD
            .replace("reset-by-eviction: rl:0", "reset-by-eviction: rl:0, rl:1")
            .replace("- x", "- y");
        assert_eq!(
            texts(&changes(OLD, &keys)),
            vec![
                (
                    Label::Changed,
                    "no-counter-reset: still invalid, other anomalies: reset-by-eviction: rl:0, rl:1 (was reset-by-eviction: rl:0)"
                ),
                (
                    Label::Changed,
                    "other lines changed (the header, a fault's outcome or a rule): see the diff"
                )
            ]
        );
        assert!(changes(OLD, OLD).is_empty());
        // A regression anywhere makes the cell one.
        let mixed = more.replace(
            "| ttl-present | valid |  |",
            "| ttl-present | invalid | immortal-key: rl:0 |",
        );
        assert_eq!(overall(&changes(&keys, &mixed)), Label::Regression);
    }

    #[test]
    fn runs_that_disagree_are_tallied_per_invariant() {
        let bad = OLD.replace(
            "| ttl-present | valid |  |",
            "| ttl-present | invalid | immortal-key: rl:0 |",
        );
        let runs = vec![OLD.to_owned(), bad, OLD.to_owned()];
        assert_eq!(tally(&runs), vec!["ttl-present: invalid 1 of 3, valid 2 of 3"]);
        assert!(tally(&[OLD.to_owned(), OLD.to_owned()]).is_empty());
    }

    #[test]
    fn a_flaky_record_admits_what_it_saw_and_reads_back_as_written() {
        let bad = OLD.replace(
            "| ttl-present | valid |  |",
            "| ttl-present | invalid | immortal-key: rl:7 |",
        );
        let record = FlakyRecord::of(&[OLD.to_owned(), bad.clone()]);
        assert!(record.admits(OLD));
        // Another key under a kind seen: still within (which key a race hits is timing's).
        assert!(record.admits(&bad.replace("rl:7", "rl:3")));
        let text = record.render("s", "l");
        assert!(text.starts_with("# s × l: FLAKY\n"), "{text}");
        assert!(
            text.contains("| ttl-present | invalid, valid | immortal-key |"),
            "{text}"
        );
        assert_eq!(FlakyRecord::parse(&text), Some(record.clone()));
        assert_eq!(FlakyRecord::parse(OLD), None, "a snapshot is no flaky record");
        // What it never saw: a verdict, an anomaly kind, another line.
        let worse = OLD.replace(
            "| no-counter-reset | invalid | reset-by-eviction: rl:0 |",
            "| no-counter-reset | invalid | reset-by-del: rl:0 |",
        );
        assert_eq!(overall(&record.outside(&worse)), Label::Regression);
        let better = OLD.replace(
            "| no-counter-reset | invalid | reset-by-eviction: rl:0 |",
            "| no-counter-reset | valid |  |",
        );
        assert_eq!(overall(&record.outside(&better)), Label::Improvement);
        assert!(!record.admits(&OLD.replace("- x", "- z")));
    }
}
