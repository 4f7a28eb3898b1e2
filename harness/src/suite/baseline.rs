//! The reviewed baseline: one file per cell, committed in the team's repository. A stable
//! cell's file is its deterministic snapshot (the verdict per invariant, the anomaly kinds and
//! keys, what each fault did, the rules); a flaky cell's file is its [`FlakyRecord`] (every
//! verdict, anomaly kind and other line its runs showed). [`judge`] sets a cell's runs
//! against its file: the same, a change (labelled regression, improvement or changed), new,
//! or flaky; and says what `--accept` would write.

use std::path::{Path, PathBuf};

use super::verdicts::{Change, FlakyRecord, changes, overall, same_but_keys, tally, verdicts};
use super::{Label, SuiteError};

/// The baseline file of a cell.
pub fn baseline_file(dir: &Path, scenario: &str, limiter: &str) -> PathBuf {
    dir.join(format!("{scenario}--{limiter}.md"))
}

/// What a cell's baseline file holds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Recorded {
    /// No file: the cell is new.
    Missing,
    /// The snapshot every run must give.
    Stable(String),
    /// What the cell's runs may give.
    Flaky(FlakyRecord),
}

/// Read a cell's baseline file. A file that exists but cannot be read (or is not UTF-8), or
/// is a symbolic link, is an error naming it, never "no baseline yet".
pub fn read(file: &Path) -> Result<Recorded, SuiteError> {
    refuse_symlink(file)?;
    match std::fs::read_to_string(file) {
        Ok(text) => Ok(FlakyRecord::parse(&text).map_or(Recorded::Stable(text), Recorded::Flaky)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Recorded::Missing),
        Err(source) => Err(SuiteError::Read {
            file: file.to_owned(),
            source,
        }),
    }
}

fn refuse_symlink(file: &Path) -> Result<(), SuiteError> {
    if std::fs::symlink_metadata(file).is_ok_and(|m| m.file_type().is_symlink()) {
        return Err(SuiteError::Symlink { file: file.to_owned() });
    }
    Ok(())
}

/// Write a cell's baseline file: a new file renamed over the old one, so a symbolic link in
/// its place is replaced, never written through.
pub fn write(file: &Path, text: &str) -> Result<(), SuiteError> {
    refuse_symlink(file)?;
    let name = file
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let tmp = file.with_file_name(format!(".{name}.{}.tmp", std::process::id()));
    std::fs::write(&tmp, text)
        .and_then(|()| std::fs::rename(&tmp, file))
        .map_err(|source| {
            let _ = std::fs::remove_file(&tmp);
            SuiteError::Write {
                file: file.to_owned(),
                source,
            }
        })
}

/// How a cell stands against its baseline.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Standing {
    /// As in the baseline.
    Same,
    /// Recorded flaky, and this run is among what was seen.
    SameFlaky,
    /// No baseline file yet.
    New,
    /// Its runs agree, and differ from the baseline for the worse.
    Regression,
    /// Its runs agree, and differ from the baseline for the better.
    Improvement,
    /// Its runs agree, and differ from the baseline otherwise (keys, a fault, a rule).
    Changed,
    /// Its runs disagree, beyond what the baseline records.
    Flaky,
    /// Its runs disagree only in which keys their anomalies name: each has the baseline's
    /// verdicts, anomaly kinds and other lines. Which key a race or an eviction hits is
    /// timing's, not the seed's: it passes, and the baseline stays.
    KeysVary,
    /// It could not run.
    Error,
    /// The suite leaves it out (`[[skip]]`).
    Skipped,
}

impl Standing {
    /// Whether the cell differs from its baseline (in any way `ci` reports).
    pub fn differs(self) -> bool {
        matches!(
            self,
            Self::New | Self::Regression | Self::Improvement | Self::Changed | Self::Flaky
        )
    }

    /// The word the summary's table puts after the cell's verdict.
    pub fn mark(self) -> &'static str {
        match self {
            Self::Same | Self::Skipped => "",
            Self::SameFlaky => " (flaky, as recorded)",
            Self::New => " ⚠ new",
            Self::Regression => " ⚠ regression",
            Self::Improvement => " ⚠ improved",
            Self::Changed => " ⚠ changed",
            Self::Flaky => " ⚠ flaky",
            Self::KeysVary => " (keys vary)",
            Self::Error => " ⚠ could not run",
        }
    }
}

/// A cell's runs set against its baseline.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Judged {
    pub standing: Standing,
    /// What differs, labelled.
    pub changes: Vec<Change>,
    /// For runs that disagree: what each invariant gave ("ttl-present: invalid 1 of 3").
    pub tally: Vec<String>,
    /// The index of the first run that differs from the baseline, when one does.
    pub differing_run: Option<usize>,
    /// What `--accept` writes to the cell's file, when that changes it.
    pub record: Option<String>,
}

/// Set a cell's runs (their snapshots, the first run first; an empty one could not run)
/// against what its file records. Runs that all agree are a stable cell: the same as a stable
/// baseline, or within a flaky record, or else a change. Runs that disagree are flaky, unless
/// a flaky record admits every one of them — or unless none of them is as recorded and they
/// agree on every verdict (only which keys a race hit varies): that is a change, labelled,
/// recorded as flaky. Runs against a stable baseline that disagree only in which keys their
/// anomalies name, each with the baseline's verdicts, anomaly kinds and other lines, keep
/// the baseline: their keys vary, nothing else does.
pub fn judge(scenario: &str, limiter: &str, recorded: &Recorded, runs: &[String]) -> Judged {
    let first = runs.first().map(String::as_str).unwrap_or_default();
    let agree = runs.iter().all(|r| r == first);
    let same_verdicts = !first.is_empty() && runs.iter().all(|r| verdicts(r) == verdicts(first));
    let flaky_record = || FlakyRecord::of(runs).render(scenario, limiter);
    let mut judged = Judged {
        standing: Standing::Same,
        changes: Vec::new(),
        tally: if agree { Vec::new() } else { tally(runs) },
        differing_run: None,
        record: None,
    };
    match recorded {
        Recorded::Missing => {
            judged.standing = Standing::New;
            judged.record = Some(if agree { first.to_owned() } else { flaky_record() });
        }
        Recorded::Stable(old) => {
            judged.differing_run = runs.iter().position(|r| r != old);
            let Some(i) = judged.differing_run else {
                return judged;
            };
            judged.changes = changes(old, &runs[i]);
            let none_as_recorded = runs.iter().all(|r| r != old);
            if agree {
                judged.standing = standing_of(overall(&judged.changes));
                judged.record = Some(first.to_owned());
            } else if runs.iter().all(|r| same_but_keys(old, r)) {
                judged.standing = Standing::KeysVary;
            } else if none_as_recorded && same_verdicts {
                judged.standing = standing_of(overall(&judged.changes));
                judged.record = Some(flaky_record());
            } else {
                judged.standing = Standing::Flaky;
                judged.record = Some(flaky_record());
            }
        }
        Recorded::Flaky(record) => {
            judged.differing_run = runs.iter().position(|r| !record.admits(r));
            let Some(i) = judged.differing_run else {
                judged.standing = Standing::SameFlaky;
                return judged;
            };
            judged.changes = record.outside(&runs[i]);
            let none_admitted = runs.iter().all(|r| !record.admits(r));
            if agree {
                judged.standing = standing_of(overall(&judged.changes));
                judged.record = Some(first.to_owned());
            } else if none_admitted && same_verdicts {
                judged.standing = standing_of(overall(&judged.changes));
                judged.record = Some(flaky_record());
            } else {
                judged.standing = Standing::Flaky;
                judged.record = Some(flaky_record());
            }
        }
    }
    judged
}

fn standing_of(label: Label) -> Standing {
    match label {
        Label::Regression => Standing::Regression,
        Label::Improvement => Standing::Improvement,
        Label::Changed => Standing::Changed,
    }
}

/// Baseline files in `dir` that no cell of the suite has (named `SCENARIO--LIMITER.md`).
pub fn stale(dir: &Path, cells: &[(String, String)]) -> Vec<PathBuf> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut stale: Vec<PathBuf> = entries
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| {
            p.extension().is_some_and(|x| x == "md")
                && p.file_stem().is_some_and(|s| s.to_string_lossy().contains("--"))
        })
        .filter(|p| !cells.iter().any(|(s, l)| baseline_file(dir, s, l) == *p))
        .collect();
    stale.sort();
    stale
}

/// A unified diff from the baseline file's text to the run's snapshot (empty when equal).
pub fn diff(file: &Path, old: &str, new: &str) -> String {
    similar::TextDiff::from_lines(old, new)
        .unified_diff()
        .context_radius(2)
        .header(&file.display().to_string(), "now")
        .to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    const PASS: &str = "# s × l: VALID\n\n| invariant | verdict | anomalies (kind: keys) |\n|---|---|---|\n| ttl-present | valid |  |\n\nRules:\n- x\n";

    fn fail() -> String {
        PASS.replace("VALID", "INVALID").replace(
            "| ttl-present | valid |  |",
            "| ttl-present | invalid | immortal-key: rl:0 |",
        )
    }

    #[test]
    fn the_same_runs_are_the_same_and_other_runs_that_agree_are_a_labelled_change() {
        let stable = Recorded::Stable(PASS.to_owned());
        assert_eq!(judge("s", "l", &stable, &[PASS.to_owned()]).standing, Standing::Same);
        let regressed = judge("s", "l", &stable, &[fail(), fail(), fail()]);
        assert_eq!(regressed.standing, Standing::Regression);
        assert_eq!(regressed.record.as_deref(), Some(fail().as_str()));
        let improved = judge(
            "s",
            "l",
            &Recorded::Stable(fail()),
            &[PASS.to_owned(), PASS.to_owned(), PASS.to_owned()],
        );
        assert_eq!(improved.standing, Standing::Improvement);
    }

    #[test]
    fn runs_that_disagree_are_flaky_and_a_record_of_them_admits_each() {
        let stable = Recorded::Stable(PASS.to_owned());
        let runs = [fail(), PASS.to_owned(), PASS.to_owned()];
        let flaky = judge("s", "l", &stable, &runs);
        assert_eq!(flaky.standing, Standing::Flaky);
        assert_eq!(flaky.tally, vec!["ttl-present: invalid 1 of 3, valid 2 of 3"]);
        assert_eq!(flaky.differing_run, Some(0));
        let record = flaky.record.unwrap();
        let recorded = Recorded::Flaky(FlakyRecord::parse(&record).unwrap());
        // Accepted as flaky: each verdict it showed passes.
        assert_eq!(judge("s", "l", &recorded, &[fail()]).standing, Standing::SameFlaky);
        assert_eq!(
            judge("s", "l", &recorded, &[PASS.to_owned()]).standing,
            Standing::SameFlaky
        );
        // Stable again outside the record: a change.
        let unknown = PASS.replace("| ttl-present | valid |  |", "| ttl-present | unknown |  |");
        let judged = judge("s", "l", &recorded, &[unknown.clone(), unknown.clone(), unknown]);
        assert_eq!(judged.standing, Standing::Changed);
    }

    #[test]
    fn runs_that_all_regress_alike_are_a_regression_even_when_their_keys_vary() {
        let stable = Recorded::Stable(PASS.to_owned());
        let other_key = fail().replace("rl:0", "rl:1");
        let judged = judge("s", "l", &stable, &[fail(), other_key.clone(), fail()]);
        assert_eq!(judged.standing, Standing::Regression);
        assert_eq!(judged.tally, vec!["ttl-present: other anomalies from run to run"]);
        // Accepted, it is recorded as flaky: which key a race hits is timing's.
        let record = judged.record.unwrap();
        assert!(record.contains(": FLAKY"), "{record}");
        // One run as recorded: flaky.
        assert_eq!(
            judge("s", "l", &stable, &[fail(), PASS.to_owned(), other_key]).standing,
            Standing::Flaky
        );
    }

    #[test]
    fn runs_that_disagree_only_in_their_keys_keep_a_stable_baseline() {
        let stable = Recorded::Stable(fail());
        let more_keys = fail().replace("rl:0", "rl:0, rl:1");
        let judged = judge("s", "l", &stable, &[more_keys.clone(), fail(), fail()]);
        assert_eq!(judged.standing, Standing::KeysVary);
        assert!(!judged.standing.differs());
        assert_eq!(judged.record, None, "the baseline stays");
        assert_eq!(judged.differing_run, Some(0));
        // None as recorded, disagreeing on keys only: still the baseline's verdicts and kinds.
        let other_key = fail().replace("rl:0", "rl:1");
        assert_eq!(
            judge("s", "l", &stable, &[more_keys.clone(), other_key]).standing,
            Standing::KeysVary
        );
        // Every run on other keys: they moved for good, a change.
        let moved = judge(
            "s",
            "l",
            &stable,
            &[more_keys.clone(), more_keys.clone(), more_keys.clone()],
        );
        assert_eq!(moved.standing, Standing::Changed);
        // Another anomaly kind or another line among them: flaky, keys or not.
        let other_kind = fail().replace("immortal-key", "ttl-too-long");
        assert_eq!(
            judge("s", "l", &stable, &[other_kind, fail(), fail()]).standing,
            Standing::Flaky
        );
        let other_rule = more_keys.replace("- x", "- y");
        assert_eq!(
            judge("s", "l", &stable, &[other_rule, fail(), fail()]).standing,
            Standing::Flaky
        );
    }

    #[test]
    fn a_missing_file_is_new_and_an_unreadable_one_an_error_naming_it() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("s--l.md");
        assert!(matches!(read(&file), Ok(Recorded::Missing)));
        assert_eq!(
            judge("s", "l", &Recorded::Missing, &[PASS.to_owned()]).standing,
            Standing::New
        );
        std::fs::write(&file, [0xff, 0xfe, 0x00]).unwrap();
        let err = read(&file).unwrap_err().to_string();
        assert!(err.contains("s--l.md"), "{err}");
        // A link is neither read nor written through.
        let elsewhere = dir.path().join("elsewhere.md");
        std::fs::write(&elsewhere, PASS).unwrap();
        let link = dir.path().join("t--l.md");
        std::os::unix::fs::symlink(&elsewhere, &link).unwrap();
        assert!(read(&link).unwrap_err().to_string().contains("symbolic link"));
        assert!(write(&link, "x").unwrap_err().to_string().contains("symbolic link"));
        assert_eq!(std::fs::read_to_string(&elsewhere).unwrap(), PASS);
        write(&file, PASS).unwrap();
        assert_eq!(read(&file).unwrap(), Recorded::Stable(PASS.to_owned()));
    }
}
