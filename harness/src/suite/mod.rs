//! A team's suite (`limiter-harness.toml` in their repository): their limiters × the
//! scenarios they pick, run by `limiter-harness ci` and compared with a reviewed baseline
//! committed beside it; JUnit XML, a Markdown summary and JSON for CI dashboards.

mod baseline;
mod ci;
mod file;
mod init;
mod junit;
mod resolve;
mod summary;

pub use baseline::{Compared, Comparison, Status, baseline_file, changes, compare};
pub use ci::{CiOptions, CiRun, TableCheck, run_ci};
pub use init::{starter_suite, write_starter};
pub use junit::render_junit;
pub use resolve::{
    DEFAULT_BASELINE, SUITE_FILE, Suite, SuiteLimiter, SuiteServer, discover_suite, load_suite, parse_suite,
};
pub use summary::{CellJson, render_summary, verdict_words};

#[cfg(test)]
mod tests;
