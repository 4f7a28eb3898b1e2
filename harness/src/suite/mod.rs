//! A team's suite (`limiter-harness.toml` in their repository): their limiters × the
//! scenarios they pick, run by `limiter-harness ci` and compared with a reviewed baseline
//! committed beside it — every cell, a chosen few (`--cells`), or a shard of them on one of
//! several CI runners (`--shard K/N`, then `ci merge`); JUnit XML, a Markdown summary and
//! JSON for CI dashboards.

mod baseline;
mod ci;
mod error;
mod file;
mod init;
mod junit;
mod merge;
mod outcome;
mod resolve;
mod shard;
mod summary;
mod verdicts;

pub use baseline::{Recorded, Standing, baseline_file, stale as stale_baseline_files};
pub use ci::{CiOptions, CiRun, Selection, run_ci, suite_table};
pub use error::{RunShape, SuiteError};
pub use init::{
    AdapterLanguage, CiSystem, GITHUB_WORKFLOW, starter_suite, write_adapter_helper, write_starter, write_workflow,
};
pub use junit::render_junit;
pub use merge::merge_reports;
pub use outcome::{CellResult, CiReport, TableState, cell_name};
pub use resolve::{
    DEFAULT_BASELINE, DEFAULT_RERUNS, FlakyPolicy, SUITE_FILE, Skip, Suite, SuiteLimiter, SuiteServer, discover_suite,
    load_suite, parse_suite,
};
pub use shard::{BadShard, Shard};
pub use summary::{CellJson, render_summary, verdict_words};
pub use verdicts::{Change, FlakyRecord, Label};

#[cfg(test)]
mod tests;
