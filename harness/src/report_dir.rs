//! Where reports go by default: `.limiter-harness/` in the current directory (or next to a
//! suite file), a scratch directory that ignores itself in git — never the source tree
//! unless the user asks for it (`--report-dir`, `--out`, a suite's `report_dir`).

use std::path::{Path, PathBuf};

use crate::error::SetupError;

/// The scratch directory's name.
pub const SCRATCH_DIR: &str = ".limiter-harness";

/// The default report root under `base`: `BASE/.limiter-harness/reports`.
pub fn default_report_root(base: &Path) -> PathBuf {
    base.join(SCRATCH_DIR).join("reports")
}

/// Create `dir`; when it lies inside a `.limiter-harness` directory, give that directory a
/// `.gitignore` that ignores everything in it, so reports never show up in `git status`.
pub fn create_report_dir(dir: &Path) -> Result<(), SetupError> {
    std::fs::create_dir_all(dir).map_err(|e| SetupError::io("cannot create report directory", dir, e))?;
    let scratch = dir
        .ancestors()
        .find(|a| a.file_name().is_some_and(|n| n == SCRATCH_DIR));
    if let Some(scratch) = scratch {
        let ignore = scratch.join(".gitignore");
        if !ignore.exists() {
            std::fs::write(
                &ignore,
                "# Written by limiter-harness: reports and scratch files, not for commits.\n*\n",
            )
            .map_err(|e| SetupError::io("cannot write", &ignore, e))?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_scratch_report_dir_ignores_itself() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = default_report_root(tmp.path()).join("runs/a/b");
        create_report_dir(&dir).unwrap();
        assert!(dir.is_dir());
        let ignore = std::fs::read_to_string(tmp.path().join(".limiter-harness/.gitignore")).unwrap();
        assert!(ignore.lines().any(|l| l == "*"));
        let elsewhere = tmp.path().join("reports/x");
        create_report_dir(&elsewhere).unwrap();
        assert!(!tmp.path().join("reports/.gitignore").exists());
    }
}
