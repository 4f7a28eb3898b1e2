//! `ci merge DIR…`: the results of a suite's shards (`ci --shard K/N` on N CI runners, each
//! writing its `ci.json`) as one run — one summary, one JUnit file, one exit code. The CI
//! system's job matrix is the distributed engine; this only puts the pieces together, and
//! refuses pieces that do not fit (another suite, a shard missing or given twice).

use std::collections::BTreeSet;

use super::outcome::CiReport;

/// One report of the shards' `reports` (each a whole `ci.json`), or why they do not make one.
pub fn merge_reports(reports: &[CiReport]) -> Result<CiReport, String> {
    let Some(first) = reports.first().cloned() else {
        return Err("nothing to merge: give the report directories (or ci.json files) of the shards".into());
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
            return Err(format!(
                "these are not shards of one run: suite `{}` ({} scenarios × {} limiters, {}) and suite `{}` ({} × {}, {})",
                first.suite,
                first.scenarios.len(),
                first.limiters.len(),
                first.selection.as_deref().unwrap_or("every cell"),
                other.suite,
                other.scenarios.len(),
                other.limiters.len(),
                other.selection.as_deref().unwrap_or("every cell"),
            ));
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
            return Err(format!("cell {} is in two of the reports", cell.name()));
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
fn shard_set(reports: &[CiReport]) -> Result<Option<String>, String> {
    let shards: Vec<(u32, u32)> = reports
        .iter()
        .filter_map(|r| r.shard.as_deref())
        .filter_map(|s| s.parse::<super::Shard>().ok())
        .map(|s| (s.index, s.count))
        .collect();
    if shards.is_empty() {
        return Ok(None);
    }
    if shards.len() != reports.len() {
        return Err("some reports are shards (--shard K/N) and some are not".into());
    }
    let count = shards[0].1;
    let indices: BTreeSet<u32> = shards.iter().map(|s| s.0).collect();
    if shards.iter().any(|s| s.1 != count) || indices.len() != shards.len() {
        return Err(format!(
            "the shards do not fit: {}",
            shards
                .iter()
                .map(|(k, n)| format!("{k}/{n}"))
                .collect::<Vec<_>>()
                .join(", ")
        ));
    }
    let missing: Vec<String> = (1..=count)
        .filter(|k| !indices.contains(k))
        .map(|k| format!("{k}/{count}"))
        .collect();
    if !missing.is_empty() {
        return Err(format!(
            "shard(s) {} missing: a merge of part of the suite would pass cells it never ran",
            missing.join(", ")
        ));
    }
    Ok(None)
}

fn union<'a>(lists: impl Iterator<Item = &'a Vec<String>>) -> Vec<String> {
    lists.flatten().cloned().collect::<BTreeSet<_>>().into_iter().collect()
}
