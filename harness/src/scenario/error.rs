//! A scenario error that points at file, line and column and says how to fix it.

use std::fmt;
use std::ops::Range;
use std::path::{Path, PathBuf};

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
}
