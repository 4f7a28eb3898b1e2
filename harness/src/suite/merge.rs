//! `ci merge DIR…`: the results of a suite's shards (`ci --shard K/N` on N CI runners, each
//! writing its `ci.json`) as one run — one summary, one JUnit file, one exit code. The CI
//! system's job matrix is the distributed engine; this only puts the pieces together, and
//! refuses pieces that do not fit (another suite, a shard missing or given twice).

use std::collections::BTreeSet;

use super::outcome::CiReport;
use super::{RunShape, Shard, SuiteError};

/// One report of the shards' `reports` (each a whole `ci.json`), or why they do not make one.
pub fn merge_reports(reports: &[CiReport]) -> Result<CiReport, SuiteError> {
    let Some(first) = reports.first().cloned() else {
        return Err(SuiteError::NothingToMerge);
    };
    for other in &reports[1..] {
        if (
            &other.suite,
            &other.scenarios,
            &other.limiters,
            other.flaky,
            &other.selection,
        ) != (
            &first.suite,
            &first.scenarios,
            &first.limiters,
            first.flaky,
            &first.selection,
        ) {
            return Err(SuiteError::NotOneRun {
                first: Box::new(RunShape::of(&first)),
                other: Box::new(RunShape::of(other)),
            });
        }
    }
    let shards = shard_set(reports)?;
    let mut seen = BTreeSet::new();
    let mut cells = Vec::new();
    for cell in reports.iter().flat_map(|r| r.cells.iter()) {
        if !seen.insert(cell.name()) {
            if cell.skipped.is_some() {
                continue; // every shard lists the suite's skipped cells
            }
            return Err(SuiteError::CellTwice { cell: cell.name() });
        }
        cells.push(cell.clone());
    }
    let position = |s: &str, l: &str| {
        (
            first.scenarios.iter().position(|x| x == s),
            first.limiters.iter().position(|x| x == l),
        )
    };
    cells.sort_by_key(|c| position(&c.scenario, &c.limiter));
    Ok(CiReport {
        cells,
        shard: shards,
        stale: union(reports.iter().map(|r| &r.stale)),
        table: None,
        accepted: union(reports.iter().map(|r| &r.accepted)),
        interrupted: reports.iter().any(|r| r.interrupted),
        ..first
    }
    .settle())
}

/// The shards the reports are: none of them a shard (plain runs of other cells), or every
/// shard 1..N of one N exactly once — then the merge is whole and says no shard.
fn shard_set(reports: &[CiReport]) -> Result<Option<String>, SuiteError> {
    let shards: Vec<Shard> = reports
        .iter()
        .filter_map(|r| r.shard.as_deref())
        .filter_map(|s| s.parse::<Shard>().ok())
        .collect();
    if shards.is_empty() {
        return Ok(None);
    }
    if shards.len() != reports.len() {
        return Err(SuiteError::MixedShards);
    }
    let count = shards[0].count;
    let indices: BTreeSet<u32> = shards.iter().map(|s| s.index).collect();
    if shards.iter().any(|s| s.count != count) || indices.len() != shards.len() {
        return Err(SuiteError::ShardsDoNotFit { shards });
    }
    let missing: Vec<Shard> = (1..=count)
        .filter(|k| !indices.contains(k))
        .map(|index| Shard { index, count })
        .collect();
    if !missing.is_empty() {
        return Err(SuiteError::ShardsMissing { missing });
    }
    Ok(None)
}

fn union<'a>(lists: impl Iterator<Item = &'a Vec<String>>) -> Vec<String> {
    lists.flatten().cloned().collect::<BTreeSet<_>>().into_iter().collect()
}

impl RunShape {
    /// What `report` ran.
    pub fn of(report: &CiReport) -> Self {
        Self {
            suite: report.suite.clone(),
            scenarios: report.scenarios.len(),
            limiters: report.limiters.len(),
            selection: report.selection.as_deref().unwrap_or("every cell").to_owned(),
        }
    }
}
