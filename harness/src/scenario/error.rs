//! The scenario's errors: a file's ([`ScenarioError`], pointing at file, line and column and
//! saying how to fix it), and a run's changes to a loaded scenario ([`AdjustError`]).

use std::fmt;
use std::ops::Range;
use std::path::{Path, PathBuf};

use crate::keys::KeyError;
use crate::text::joined;

/// A malformed or invalid scenario. Displays as `file:line:column: message`, the offending
/// line with a caret, and a help line when there is something specific to suggest.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScenarioError {
    pub path: PathBuf,
    pub line: usize,
    pub column: usize,
    pub message: String,
    pub help: Option<String>,
    source_line: String,
}

impl ScenarioError {
    /// An error at byte range `span` of `source` (the whole file's text).
    pub fn at(path: &Path, source: &str, span: Option<Range<usize>>, message: impl Into<String>) -> Self {
        let offset = span.map_or(0, |s| s.start.min(source.len()));
        let before = &source[..offset];
        let line = before.matches('\n').count() + 1;
        let line_start = before.rfind('\n').map_or(0, |i| i + 1);
        let column = source[line_start..offset].chars().count() + 1;
        let source_line = source[line_start..].lines().next().unwrap_or_default().to_owned();
        Self {
            path: path.to_owned(),
            line,
            column,
            message: message.into(),
            help: None,
            source_line,
        }
    }

    pub fn with_help(mut self, help: impl Into<String>) -> Self {
        self.help = Some(help.into());
        self
    }
}

impl fmt::Display for ScenarioError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "{}:{}:{}: {}",
            self.path.display(),
            self.line,
            self.column,
            self.message
        )?;
        if !self.source_line.is_empty() {
            let gutter = self.line.to_string().len();
            writeln!(f, "{:gutter$} |", "")?;
            writeln!(f, "{} | {}", self.line, self.source_line)?;
            let pad: String = self
                .source_line
                .chars()
                .take(self.column.saturating_sub(1))
                .map(|c| if c == '\t' { '\t' } else { ' ' })
                .collect();
            write!(f, "{:gutter$} | {pad}^", "")?;
        }
        if let Some(help) = &self.help {
            write!(f, "\n  help: {help}")?;
        }
        Ok(())
    }
}

impl std::error::Error for ScenarioError {}

/// Why a run's change to its scenario ([`super::Adjust`]: `--keys`, `--window-ms`,
/// `--ttl-max-ms`/`--ttl-max-windows`) is refused: names the flag at fault.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum AdjustError {
    /// `--keys` is no key layout.
    #[error("--keys: {0}")]
    Keys(#[source] KeyError),
    /// `--window-ms` would scale a value out of its range.
    #[error("--window-ms: {0}")]
    Window(#[source] RescaleError),
    /// `--ttl-max-ms`/`--ttl-max-windows` is no TTL declaration.
    #[error("--ttl-max-ms/--ttl-max-windows: {0}")]
    TtlMax(#[source] TtlMaxError),
}

/// Why [`super::Scenario::rescale_window`] refused a window: the values it would scale out of the
/// range the scenario file allows.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error(
    "a window of {window_ms} ms scales `{scenario}` by {factor:.2}: {}",
    joined(.too_long, "; ")
)]
pub struct RescaleError {
    pub window_ms: u64,
    /// The scenario's name.
    pub scenario: String,
    pub factor: f64,
    pub too_long: Vec<OutOfRange>,
}

/// One value a rescaled window would take past its maximum.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{what} would be {to_ms} ms (at most {max_ms})")]
pub struct OutOfRange {
    /// What the value is, e.g. "fault 2's pause_ms".
    pub what: String,
    pub to_ms: u64,
    pub max_ms: u64,
}

/// What is wrong with a TTL declaration (`ttl_max_windows`, `ttl_max_ms`), in one line.
#[derive(Debug, Clone, Copy, PartialEq, thiserror::Error)]
pub enum TtlMaxError {
    /// Both fields given.
    #[error("`ttl_max_windows` and `ttl_max_ms` both given: declare the TTL once, in windows or in ms")]
    Both,
    /// A number of windows that is not a positive number.
    #[error(
        "`ttl_max_windows` = {windows} must be a positive number of windows (a daily cap on a 50 ms window: 1872000; or declare `ttl_max_ms`)"
    )]
    Windows { windows: f64 },
    /// `ttl_max_ms = 0`.
    #[error("`ttl_max_ms` = 0 must be a positive number of milliseconds")]
    ZeroMs,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn points_at_line_and_column() {
        let src = "name = \"x\"\n[limit]\nwindow_ms = -3\n";
        let start = src.find("-3").unwrap();
        let err = ScenarioError::at(Path::new("s.toml"), src, Some(start..start + 2), "bad")
            .with_help("use a positive number");
        assert_eq!((err.line, err.column), (3, 13));
        let shown = err.to_string();
        assert!(shown.starts_with("s.toml:3:13: bad"), "{shown}");
        assert!(shown.contains("3 | window_ms = -3"), "{shown}");
        assert!(shown.contains("help: use a positive number"), "{shown}");
    }

    #[test]
    fn a_refused_window_lists_every_value_out_of_range() {
        let too_long = |what: &str, to_ms, max_ms| OutOfRange {
            what: what.into(),
            to_ms,
            max_ms,
        };
        let err = AdjustError::Window(RescaleError {
            window_ms: 86_400_000,
            scenario: "s".into(),
            factor: 86_400.0,
            too_long: vec![
                too_long("phase `traffic`", 172_800_000, 3_600_000),
                too_long("fault 0's pause_ms", 86_400_000, 600_000),
            ],
        });
        assert_eq!(
            err.to_string(),
            "--window-ms: a window of 86400000 ms scales `s` by 86400.00: phase `traffic` would be 172800000 ms (at most 3600000); fault 0's pause_ms would be 86400000 ms (at most 600000)"
        );
    }
}
