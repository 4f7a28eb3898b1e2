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

/// `text` with every control character but newline and tab written as an escape (`\u{1b}`):
/// a scenario's `about`, a key or an adapter's message may hold any bytes, and a report,
/// a snapshot or a summary read in a terminal or a review must show them, not obey them.
pub fn printable(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        if c.is_control() && c != '\n' && c != '\t' {
            out.push_str(&format!("\\u{{{:x}}}", c as u32));
        } else {
            out.push(c);
        }
    }
    out
}

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

#[cfg(test)]
mod printable_tests {
    #[test]
    fn control_characters_are_written_as_escapes() {
        assert_eq!(
            super::printable("a\u{1b}[31mred\r\n\tb\u{7f}"),
            "a\\u{1b}[31mred\\u{d}\n\tb\\u{7f}"
        );
    }
}
