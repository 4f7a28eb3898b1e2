//! Reports: what ran, the verdict per invariant with its evidence, what the nemesis did,
//! and the command that reproduces the run — as `report.json` and `report.md`.

mod markdown;
mod model;
mod snapshot;
mod timeline;

pub use markdown::render_markdown;
pub use model::{Counts, FaultSummary, KeysSummary, LimiterSummary, Observed, Report, ServerSummary, WireTrace};
pub use snapshot::render_snapshot;
pub use timeline::{TIMELINE_FILE, TimelineLimits, render_timeline, write_timeline};

use std::path::Path;

use crate::error::SetupError;

/// Write `report.json` and `report.md` into `dir`.
pub fn write_report(report: &Report, dir: &Path) -> Result<(), SetupError> {
    std::fs::create_dir_all(dir).map_err(|e| SetupError::io("cannot create", dir, e))?;
    let json = serde_json::to_string_pretty(report).expect("a report always serializes");
    let json_path = dir.join("report.json");
    std::fs::write(&json_path, json + "\n").map_err(|e| SetupError::io("cannot write", json_path, e))?;
    let md_path = dir.join("report.md");
    std::fs::write(&md_path, render_markdown(report)).map_err(|e| SetupError::io("cannot write", md_path, e))?;
    Ok(())
}
