//! A team's CI as the binary serves it: `init`, `ci`, `ci --accept`, the baseline's verdict on
//! a deliberate regression (also inside a cell that already failed), JUnit XML that validates
//! against the JUnit schema, the Markdown summary and GitHub's step summary, `check` (the
//! report and the timeline rebuilt from the history alone).

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn harness_in(dir: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_limiter-harness"))
        .current_dir(dir)
        .args(args)
        .env_remove("GITHUB_STEP_SUMMARY")
        .output()
        .expect("run limiter-harness")
}

fn text_of(out: &Output) -> String {
    format!(
        "exit {:?}\n--- stdout\n{}\n--- stderr\n{}",
        out.status.code(),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// The JUnit schema (Jenkins/surefire's junit-10.xsd, which `just test-deps` takes from
/// pytest's source distribution), and `xmlschema` to validate against it.
fn validate_junit(xml: &Path) {
    let xsd = std::env::var_os("LIMITER_HARNESS_JUNIT_XSD")
        .map(PathBuf::from)
        .unwrap_or_else(|| root().join("target/test-deps/junit-10.xsd"));
    assert!(
        xsd.is_file(),
        "the JUnit schema is missing at {}: run `just test-deps`",
        xsd.display()
    );
    let out = Command::new("python3")
        .args([
            "-c",
            "import sys, xmlschema; xmlschema.XMLSchema(sys.argv[1]).validate(sys.argv[2])",
        ])
        .arg(&xsd)
        .arg(xml)
        .output()
        .expect("python3");
    assert!(
        out.status.success(),
        "{} does not validate against {} (or xmlschema is missing: `just test-deps`):\n{}",
        xml.display(),
        xsd.display(),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Every cell's `report.md` under `dir`'s report directory (its problems say why a verdict
/// was unknown), for a failure's message: the temporary repository is gone after it.
fn reports_in(dir: &Path) -> String {
    let mut text = String::new();
    let runs = dir.join(".limiter-harness/reports/runs");
    for scenario in std::fs::read_dir(&runs).into_iter().flatten().flatten() {
        for cell in std::fs::read_dir(scenario.path()).into_iter().flatten().flatten() {
            if let Ok(report) = std::fs::read_to_string(cell.path().join("report.md")) {
                text.push_str(&format!("\n--- {}\n{report}", cell.path().display()));
            }
        }
    }
    text
}

/// A service's repository with a limiter of its own: the example adapter of incident 1's
/// fix, copied in, and a starter suite for it narrowed to two scenarios — one it passes and
/// one no limiter survives (a deployment problem).
fn service_repo() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let limiter = dir.path().join("ratelimit");
    std::fs::create_dir_all(&limiter).unwrap();
    for file in ["adapter.py", "fixed_window_fixed.py"] {
        std::fs::copy(root().join("examples/python").join(file), limiter.join(file)).unwrap();
    }
    let out = harness_in(
        dir.path(),
        &[
            "init",
            "--limiter",
            "exec:python3 ratelimit/fixed_window_fixed.py",
            "--name",
            "api",
        ],
    );
    assert_eq!(out.status.code(), Some(0), "{}", text_of(&out));
    let suite = dir.path().join("limiter-harness.toml");
    let text = std::fs::read_to_string(&suite).unwrap();
    assert!(text.contains("name = \"api\""), "{text}");
    let narrowed = text
        .replace(
            "scenarios = [\"*\"]",
            "scenarios = [\"steady-control\", \"shared-cache-eviction\"]",
        )
        .replace("backend = \"auto\"", "backend = \"process\"");
    std::fs::write(&suite, narrowed).unwrap();
    dir
}

#[test]
fn a_regression_is_named_by_cell_and_invariant_even_in_a_cell_that_already_failed() {
    // Long: one pull request's life: no baseline, accept, unchanged, then a regression, in order.
    let repo = service_repo();
    let dir = repo.path();
    let out = harness_in(dir, &["ci", "--no-progress"]);
    assert_eq!(
        out.status.code(),
        Some(1),
        "no baseline yet is a difference\n{}",
        text_of(&out)
    );
    assert!(text_of(&out).contains("no baseline yet"), "{}", text_of(&out));

    let out = harness_in(dir, &["ci", "--accept", "--no-progress"]);
    assert_eq!(out.status.code(), Some(0), "{}", text_of(&out));
    let baseline = dir.join("limiter-harness/baseline");
    let failing = std::fs::read_to_string(baseline.join("shared-cache-eviction--api.md")).unwrap();
    assert!(
        failing.contains("| no-counter-reset | invalid |"),
        "the accepted cell already fails:\n{failing}"
    );
    assert!(failing.contains("| ttl-bounded | valid |"), "{failing}");
    assert!(baseline.join("steady-control--api.md").is_file());

    // A sub-directory finds the suite upward, as cargo finds Cargo.toml; a file it names is
    // where it stands.
    let out = harness_in(&dir.join("ratelimit"), &["ci", "--no-progress", "--summary", "here.md"]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "unchanged: identical\n{}{}",
        text_of(&out),
        reports_in(dir)
    );
    assert!(String::from_utf8_lossy(&out.stdout).contains("every one as in the baseline"));
    assert!(
        dir.join("ratelimit/here.md").is_file(),
        "relative to the caller's directory"
    );

    // The regression: the window's TTL set three times too long.
    let adapter = dir.join("ratelimit/fixed_window_fixed.py");
    let code = std::fs::read_to_string(&adapter).unwrap();
    let broken = code.replace(
        "pipe.pexpire(key, window_ms, nx=True)",
        "pipe.pexpire(key, window_ms * 3, nx=True)",
    );
    assert_ne!(code, broken, "the example adapter sets its TTL as this test expects");
    std::fs::write(&adapter, broken).unwrap();
    let step_summary = dir.join("step-summary.md");
    std::fs::write(&step_summary, "earlier steps\n").unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_limiter-harness"))
        .current_dir(dir)
        .args([
            "ci",
            "--no-progress",
            "--junit",
            "out/junit.xml",
            "--summary",
            "out/summary.md",
        ])
        .env("GITHUB_STEP_SUMMARY", &step_summary)
        .output()
        .unwrap();
    let all = text_of(&out);
    assert_eq!(out.status.code(), Some(1), "{all}");
    assert!(
        all.contains("#### shared-cache-eviction × api"),
        "the failing cell is named: {all}"
    );
    assert!(
        all.contains("- regression: ttl-bounded: valid → invalid"),
        "with the new broken invariant, labelled: {all}"
    );
    assert!(all.contains("### Regressions ("), "{all}");
    assert!(all.contains("#### steady-control × api"), "{all}");
    assert!(
        all.contains("--- limiter-harness/baseline/shared-cache-eviction--api.md"),
        "and its diff: {all}"
    );

    validate_junit(&dir.join("out/junit.xml"));
    let junit = std::fs::read_to_string(dir.join("out/junit.xml")).unwrap();
    assert!(
        junit.contains("<testcase classname=\"limiter-harness.api\" name=\"shared-cache-eviction\""),
        "{junit}"
    );
    assert!(junit.contains("ttl-bounded: valid → invalid"), "{junit}");
    assert!(junit.contains("<failure type=\"regression\""), "{junit}");
    assert!(
        junit.contains("Reproduce: limiter-harness run shared-cache-eviction --limiter"),
        "{junit}"
    );
    let summary = std::fs::read_to_string(dir.join("out/summary.md")).unwrap();
    assert!(
        summary.contains("| shared-cache-eviction | **TTL > window, reset, over limit** ⚠ regression |"),
        "{summary}"
    );
    let github = std::fs::read_to_string(&step_summary).unwrap();
    assert!(
        github.starts_with("earlier steps\n") && github.ends_with(&summary),
        "appended: {github}"
    );
    let json = harness_in(dir, &["ci", "--no-progress", "--format", "json"]);
    let parsed: serde_json::Value = serde_json::from_slice(&json.stdout).expect("one JSON document");
    assert_eq!(parsed["identical"], false);
    assert_eq!(parsed["passed"], false);
    assert_eq!(parsed["cells"][1]["standing"], "regression", "{parsed}");
    assert_eq!(parsed["cells"][1]["invariants"]["ttl-bounded"], "invalid", "{parsed}");
}

/// The example suite (examples/ci: a Python adapter and a Lua script) is as its committed
/// baseline says, and its JUnit report validates.
#[test]
fn the_example_suite_is_as_in_its_baseline() {
    let out_dir = tempfile::tempdir().unwrap();
    let junit = out_dir.path().join("junit.xml");
    let out = harness_in(
        &root(),
        &[
            "ci",
            "--suite",
            "examples/ci/limiter-harness.toml",
            "--no-progress",
            "--junit",
            junit.to_str().unwrap(),
        ],
    );
    assert_eq!(out.status.code(), Some(0), "{}", text_of(&out));
    validate_junit(&junit);
    let xml = std::fs::read_to_string(&junit).unwrap();
    assert!(xml.contains("tests=\"10\" failures=\"0\" errors=\"0\""), "{xml}");
}

#[test]
fn ci_without_a_suite_or_with_a_bad_one_says_what_to_do() {
    let dir = tempfile::tempdir().unwrap();
    let out = harness_in(dir.path(), &["ci"]);
    assert_eq!(out.status.code(), Some(3), "{}", text_of(&out));
    assert!(
        text_of(&out).contains("limiter-harness init --limiter SPEC"),
        "{}",
        text_of(&out)
    );

    std::fs::write(
        dir.path().join("limiter-harness.toml"),
        "[suite]\nscenarios = [\"no-such-*\"]\n\n[[limiter]]\nspec = \"get-then-incr\"\n",
    )
    .unwrap();
    let out = harness_in(dir.path(), &["ci"]);
    assert_eq!(out.status.code(), Some(3));
    assert!(
        text_of(&out).contains("limiter-harness.toml:2:14: `no-such-*` names no scenario"),
        "{}",
        text_of(&out)
    );

    std::fs::write(
        dir.path().join("limiter-harness.toml"),
        "[[limiter]]\nspec = \"exec:python3 x.py\"\n",
    )
    .unwrap();
    let out = harness_in(dir.path(), &["ci"]);
    assert_eq!(out.status.code(), Some(3));
    assert!(
        text_of(&out).contains("limiter `exec:python3 x.py` needs a `name`"),
        "{}",
        text_of(&out)
    );

    let out = harness_in(dir.path(), &["init", "--limiter", "get-then-incr"]);
    assert_eq!(out.status.code(), Some(3), "an existing suite is not overwritten");
    assert!(text_of(&out).contains("--force"), "{}", text_of(&out));
}

/// Rewrite a saved history so that its final audit saw the key with no TTL. (The sampler
/// may still take a sample or two after the final audit, while the run waits for trailing
/// notifications: the final audit is the line that says so, not the last sample.)
fn forge_an_immortal_key(run_dir: &std::path::Path) {
    let history = std::fs::read_to_string(run_dir.join("history.jsonl")).unwrap();
    let forged: Vec<String> = history
        .lines()
        .map(|line| {
            if line.starts_with("{\"type\":\"sample\"") && line.contains("\"final_audit\":true") {
                assert!(line.contains("\"pttl_ms\":"), "the final audit saw the key: {line}");
                line.replacen("\"pttl_ms\":", "\"pttl_ms\":-1,\"was\":", 1)
            } else {
                line.to_owned()
            }
        })
        .collect();
    assert_ne!(forged.join("\n") + "\n", history, "a final audit in the history");
    std::fs::write(run_dir.join("history.jsonl"), forged.join("\n") + "\n").unwrap();
}

/// `check RUN_DIR` judges a saved history again: the same report, byte for byte; and a
/// history changed by hand (a key's TTL gone) changes the verdict.
#[test]
fn check_rejudges_a_saved_run_from_its_history_alone() {
    let dir = tempfile::tempdir().unwrap();
    let run_dir = dir.path().join("run");
    let out = harness_in(
        &root(),
        &[
            "run",
            "steady-control",
            "--limiter",
            "lua-fixed-window",
            "--backend",
            "process",
            "--no-progress",
            "--report-dir",
            run_dir.to_str().unwrap(),
        ],
    );
    assert_eq!(out.status.code(), Some(0), "{}", text_of(&out));
    let report = std::fs::read_to_string(run_dir.join("report.json")).unwrap();
    let markdown = std::fs::read_to_string(run_dir.join("report.md")).unwrap();
    let timeline = std::fs::read_to_string(run_dir.join("timeline.svg")).unwrap();
    let out = harness_in(dir.path(), &["check", run_dir.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(0), "{}", text_of(&out));
    assert_eq!(
        std::fs::read_to_string(run_dir.join("report.json")).unwrap(),
        report,
        "the same report.json"
    );
    assert_eq!(
        std::fs::read_to_string(run_dir.join("report.md")).unwrap(),
        markdown,
        "the same report.md"
    );
    assert_eq!(
        std::fs::read_to_string(run_dir.join("timeline.svg")).unwrap(),
        timeline,
        "the same picture"
    );

    // The final audit now says the key has no TTL: an immortal key.
    forge_an_immortal_key(&run_dir);
    let out = harness_in(dir.path(), &["check", run_dir.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1), "{}", text_of(&out));
    assert!(
        text_of(&out).contains("the verdict was valid, it is now invalid"),
        "{}",
        text_of(&out)
    );
    assert!(
        text_of(&out).contains("ttl-present            invalid"),
        "{}",
        text_of(&out)
    );

    let out = harness_in(dir.path(), &["check", dir.path().to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(3), "a directory without a history");
    assert!(text_of(&out).contains("holds no history.jsonl"), "{}", text_of(&out));
}
