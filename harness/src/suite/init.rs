//! `limiter-harness init`: a commented starter suite for one limiter.

use std::path::Path;

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
# invariant, the anomalies' kinds and keys, what each fault did. A change in any of them — a
# regression or an improvement, also inside a cell that already failed — makes `ci` exit 1
# until `ci --accept` rewrites the file and the pull request shows the change.

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
"#
    )
}

/// A TOML basic string.
fn toml_string(text: &str) -> String {
    toml::Value::String(text.to_owned()).to_string()
}

/// Write the starter suite into `dir` (refusing to overwrite one unless `force`).
pub fn write_starter(dir: &Path, name: &str, spec: &str, force: bool) -> Result<std::path::PathBuf, SetupError> {
    let path = dir.join(SUITE_FILE);
    if path.exists() && !force {
        return Err(SetupError::Usage(format!(
            "{} exists\n  help: edit it, or pass --force to replace it with a starter",
            path.display()
        )));
    }
    std::fs::write(&path, starter_suite(name, spec)).map_err(|e| SetupError::io("cannot write", &path, e))?;
    Ok(path)
}

#[cfg(test)]
mod tests {
    use super::*;

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
