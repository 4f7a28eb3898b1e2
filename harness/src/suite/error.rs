//! Why a cell's baseline file cannot be read or written, a `--shard` is no shard, or shards'
//! reports do not merge into one run.

use std::path::PathBuf;

use super::shard::Shard;
use crate::text::joined;

/// A suite's baseline, shard or merge that cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum SuiteError {
    /// A baseline file that is a symbolic link (never read or written through).
    #[error(
        "the baseline file {file} is a symbolic link: a baseline is read and written only as plain files (replace the link with the file)"
    )]
    Symlink { file: PathBuf },
    /// A baseline file that exists but cannot be read (or is not UTF-8).
    #[error("cannot read the baseline file {file}: {source}")]
    Read { file: PathBuf, source: std::io::Error },
    /// A baseline file that cannot be written.
    #[error("cannot write {file}: {source}")]
    Write { file: PathBuf, source: std::io::Error },
    /// `ci merge` without a report.
    #[error("nothing to merge: give the report directories (or ci.json files) of the shards")]
    NothingToMerge,
    /// Reports of different suites, or of different selections of one.
    #[error(
        "these are not shards of one run: suite `{}` ({} scenarios × {} limiters, {}) and suite `{}` ({} × {}, {})",
        .first.suite, .first.scenarios, .first.limiters, .first.selection,
        .other.suite, .other.scenarios, .other.limiters, .other.selection
    )]
    NotOneRun { first: Box<RunShape>, other: Box<RunShape> },
    /// A cell (not a skipped one) in two reports.
    #[error("cell {cell} is in two of the reports")]
    CellTwice { cell: String },
    /// Some reports are shards and some are not.
    #[error("some reports are shards (--shard K/N) and some are not")]
    MixedShards,
    /// Shards of different counts, or one shard given twice.
    #[error("the shards do not fit: {}", joined(.shards, ", "))]
    ShardsDoNotFit { shards: Vec<Shard> },
    /// Shards missing from a merge.
    #[error(
        "shard(s) {} missing: a merge of part of the suite would pass cells it never ran",
        joined(.missing, ", ")
    )]
    ShardsMissing { missing: Vec<Shard> },
}

/// What a `ci` report ran: its suite and the cells it chose from (shards of one run agree).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunShape {
    pub suite: String,
    pub scenarios: usize,
    pub limiters: usize,
    /// The flags that narrowed the selection, or "every cell".
    pub selection: String,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn merge_errors_read_as_before() {
        let shape = |suite: &str, selection: &str| {
            Box::new(RunShape {
                suite: suite.into(),
                scenarios: 3,
                limiters: 2,
                selection: selection.into(),
            })
        };
        let apart = SuiteError::NotOneRun {
            first: shape("a", "every cell"),
            other: shape("b", "--cells x"),
        };
        assert_eq!(
            apart.to_string(),
            "these are not shards of one run: suite `a` (3 scenarios × 2 limiters, every cell) and suite `b` (3 × 2, --cells x)"
        );
        let shards = vec![Shard { index: 1, count: 2 }, Shard { index: 1, count: 3 }];
        assert_eq!(
            SuiteError::ShardsDoNotFit { shards }.to_string(),
            "the shards do not fit: 1/2, 1/3"
        );
        let missing = vec![Shard { index: 2, count: 3 }, Shard { index: 3, count: 3 }];
        assert_eq!(
            SuiteError::ShardsMissing { missing }.to_string(),
            "shard(s) 2/3, 3/3 missing: a merge of part of the suite would pass cells it never ran"
        );
    }
}
