//! `limiter-harness init`: a commented starter suite for one limiter, and what a team should
//! not have to write itself: the exec protocol's helper for its adapter's language, and the
//! CI workflow that runs the suite in shards and merges them.

use std::path::{Path, PathBuf};

use super::resolve::{DEFAULT_BASELINE, SUITE_FILE};
use crate::error::SetupError;

/// The starter suite's text for the limiter `spec`, named `name`.
pub fn starter_suite(name: &str, spec: &str) -> String {
    let spec_toml = toml_string(spec);
    let name_toml = toml_string(name);
    format!(
        r#"# limiter-harness suite: what `limiter-harness ci` runs on every pull request.
#
#   limiter-harness ci --accept   # run the suite and record its baseline (review, then commit it)
#   limiter-harness ci            # exit 0 when every cell is as in the baseline, 1 on any difference
#
# A cell is one scenario × one limiter, judged on a fresh Redis server. Its baseline file
# ({DEFAULT_BASELINE}/SCENARIO--LIMITER.md) holds what the seed decides: the verdict of every
# invariant, the anomalies' kinds and keys (what the clock decides in a key written <window>),
# what each fault did. A change in any of them — a regression or an improvement, also inside a
# cell that already failed — makes `ci` exit 1 until `ci --accept --cells SCENARIO--LIMITER`
# records it and the pull request shows the change. A cell whose runs disagree is flaky.
# The reference: docs/ci.md in the harness's repository.

[suite]
# Scenarios: shipped names or globs over names (`limiter-harness list`), scenario files,
# directories of them, or globs such as "scenarios/*.toml" (paths are relative to this file;
# ./scenarios/NAME.toml here wins over a shipped NAME). `limiter-harness scenarios export
# scenarios` writes the shipped ones out to adapt.
scenarios = ["*"]
# exclude = ["many-identities"]
# The reviewed baseline: commit this directory.
baseline = "{DEFAULT_BASELINE}"
# Reports, histories and timelines of the last run (a scratch directory git ignores).
report_dir = ".limiter-harness/reports"
# Cells running at once (each on its own server).
jobs = 4
# seed = 7          # override every scenario's seed
# reruns = 2        # more runs of a cell that differs from its baseline: runs that disagree are flaky
# flaky = "fail"    # an unrecorded flaky cell fails the gate ("pass": reported, not failing)

[server]
# auto: a local redis-server per cell when one is installed, else a container per cell.
backend = "auto"
# The server: an installed one (`limiter-harness server install redis-6.2`, then
# `limiter-harness server list`) or a binary's path. Default: redis-server in PATH.
# server = "redis-7.0"

[[limiter]]
# A short name: it names the cells and their baseline files.
name = {name_toml}
# Any --limiter spec: a built-in name, lua:PATH (a Lua script), exec:COMMAND (your code in
# any language, speaking JSON lines: docs/exec-protocol.md).
spec = {spec_toml}
# Its keys, when they are not `rl:<identity>` and the limiter does not declare them:
# keys = ["app:ratelimit:{{identity}}"]
# Whole-second windows? Run every scenario with a window of this many ms (durations scale):
# window_ms = 1000
# How long its keys may live, when not one window (and it does not declare it): in ms
# whatever the window (a daily cap's EXPIRE 26 h), or in windows.
# ttl_max_ms = 93600000
# ttl_max_windows = 2

# A cell left out, with its reason (the summary shows it):
# [[skip]]
# cells = "server-pause-timeouts--{name}"
# reason = "why, and until when"
"#
    )
}

/// A TOML basic string.
fn toml_string(text: &str) -> String {
    toml::Value::String(text.to_owned()).to_string()
}

/// Write the starter suite into `dir` (refusing to overwrite one unless `force`).
pub fn write_starter(dir: &Path, name: &str, spec: &str, force: bool) -> Result<PathBuf, SetupError> {
    write_new(&dir.join(SUITE_FILE), &starter_suite(name, spec), force)
}

/// Write `text` to `path`, creating its directory; an existing file is kept unless `force`.
fn write_new(path: &Path, text: &str, force: bool) -> Result<PathBuf, SetupError> {
    if path.exists() && !force {
        return Err(SetupError::Usage(format!(
            "{} exists\n  help: edit it, or pass --force to replace it",
            path.display()
        )));
    }
    if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
        std::fs::create_dir_all(parent).map_err(|e| SetupError::io("cannot create", parent, e))?;
    }
    std::fs::write(path, text).map_err(|e| SetupError::io("cannot write", path, e))?;
    Ok(path.to_owned())
}

/// A language the harness has an exec-protocol helper for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum AdapterLanguage {
    /// `limiter_harness_adapter.py` (redis-py): `serve(decide, name, keys=..., ttl_max_ms=...)`.
    Python,
}

/// The Python helper: the exec protocol's plumbing (hello, one JSON line per request, errors
/// mapped), the same file the harness's own examples import.
const PYTHON_HELPER: &str = include_str!("../../../examples/python/adapter.py");

/// Write the helper for `language` into `dir`.
pub fn write_adapter_helper(dir: &Path, language: AdapterLanguage, force: bool) -> Result<PathBuf, SetupError> {
    match language {
        AdapterLanguage::Python => write_new(&dir.join("limiter_harness_adapter.py"), PYTHON_HELPER, force),
    }
}

/// A CI system `init` writes a workflow for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum CiSystem {
    /// GitHub Actions: `.github/workflows/limiter-harness.yml`.
    Github,
}

/// Write the workflow for `system` into `dir`.
pub fn write_workflow(dir: &Path, system: CiSystem, force: bool) -> Result<PathBuf, SetupError> {
    match system {
        CiSystem::Github => write_new(
            &dir.join(".github/workflows/limiter-harness.yml"),
            GITHUB_WORKFLOW,
            force,
        ),
    }
}

/// The GitHub Actions workflow: the suite in two shards (one job each, the job matrix is the
/// distributed engine), then one job merging their results into one summary, one JUnit file
/// and one verdict. docs/ci.md ("GitHub Actions") shows the same file (a test keeps them equal).
pub const GITHUB_WORKFLOW: &str = r#"# limiter-harness: the suite (limiter-harness.toml) against its reviewed baseline, on every
# pull request. The cells are split over SHARDS jobs (`ci --shard K/N`); the `verdict` job
# merges their results into one summary (the run's page), one JUnit file and one exit code.
# Written by `limiter-harness init --ci github`; change what you need.
name: limiter-harness

on:
  pull_request:
  push:
    branches: [main]

env:
  SHARDS: 2
  # How the jobs get the harness (it is not on crates.io yet): from the git repository your
  # organisation keeps it in, or a path to a vendored checkout (`cargo install --path ...`).
  INSTALL_HARNESS: cargo install --locked --git https://github.com/your-org/limiter-harness limiter-harness

jobs:
  cells:
    runs-on: ubuntu-latest
    strategy:
      fail-fast: false
      matrix:
        shard: [1, 2]  # 1..SHARDS
    steps:
      - uses: actions/checkout@v4
      - name: Redis, and what the limiters' adapters need
        run: |
          sudo apt-get update -qq
          sudo apt-get install -y -qq redis-server
          # python3 -m pip install redis   # a Python exec adapter
      - uses: actions/cache@v4
        with:
          path: ~/.cargo/bin/limiter-harness
          key: limiter-harness-${{ runner.os }}-${{ hashFiles('limiter-harness.toml') }}
      - name: Install the harness
        run: command -v limiter-harness || $INSTALL_HARNESS
      - name: Cells of shard ${{ matrix.shard }}
        run: limiter-harness ci --shard ${{ matrix.shard }}/$SHARDS --no-progress
      - uses: actions/upload-artifact@v4
        if: always()
        with:
          name: limiter-harness-shard-${{ matrix.shard }}
          path: .limiter-harness/reports

  verdict:
    needs: cells
    if: always()
    runs-on: ubuntu-latest
    steps:
      - uses: actions/cache@v4
        with:
          path: ~/.cargo/bin/limiter-harness
          key: limiter-harness-${{ runner.os }}-${{ hashFiles('limiter-harness.toml') }}
      - name: Install the harness
        run: command -v limiter-harness || $INSTALL_HARNESS
      - uses: actions/download-artifact@v4
        with:
          pattern: limiter-harness-shard-*
          path: shards
      - name: One summary, one JUnit file, one verdict
        run: limiter-harness ci merge shards/* --junit junit.xml --summary summary.md
      - uses: actions/upload-artifact@v4
        if: always()
        with:
          name: limiter-harness-results
          path: |
            junit.xml
            summary.md
            shards
"#;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_workflow_docs_show_is_the_one_init_writes() {
        let docs = include_str!("../../../docs/ci.md");
        let body = GITHUB_WORKFLOW
            .split_once("name: limiter-harness")
            .map(|(_, rest)| rest)
            .unwrap();
        assert!(
            docs.contains(&format!("name: limiter-harness{body}")),
            "docs/ci.md's workflow differs from `init --ci github`'s"
        );
        let dir = tempfile::tempdir().unwrap();
        let path = write_workflow(dir.path(), CiSystem::Github, false).unwrap();
        assert!(path.ends_with(".github/workflows/limiter-harness.yml"));
        assert!(
            write_workflow(dir.path(), CiSystem::Github, false).is_err(),
            "kept unless --force"
        );
        let helper = write_adapter_helper(dir.path(), AdapterLanguage::Python, false).unwrap();
        let text = std::fs::read_to_string(helper).unwrap();
        assert!(text.contains("def serve(") && text.contains("ttl_max_ms"), "{text}");
    }

    #[test]
    fn the_starter_suite_parses_and_names_its_limiter() {
        let text = starter_suite("api", "exec:python3 \"rate limit\"/adapter.py");
        let suite = super::super::parse_suite(Path::new("/tmp/x/limiter-harness.toml"), &text).unwrap();
        assert_eq!(suite.limiters.len(), 1);
        assert_eq!(suite.limiters[0].name, "api");
        assert_eq!(suite.limiters[0].spec, "exec:python3 \"rate limit\"/adapter.py");
        assert_eq!(suite.baseline, Path::new(DEFAULT_BASELINE));
        assert!(suite.scenarios.len() >= 10, "every shipped scenario");
    }
}
