//! The CI gate on a team's own limiters, as a team lives with it: a repository with a daily
//! cap keyed by the real date (an exec adapter in Python) and a fixed window keyed by the
//! epoch second (a Lua script through its sidecar). Its baseline must read the same run after
//! run — also beside two busy CPU hogs —, a broken limiter must be named as a regression, the
//! suite must split into disjoint shards whose merge is the one run; and a cell whose runs
//! disagree must be reported as flaky, recorded as flaky, and then pass.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures")
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

fn copy_tree(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let target = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            copy_tree(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), target).unwrap();
        }
    }
}

/// The team's repository: its two limiters, the protocol helper `init --adapter python`
/// writes, and a suite over the scenarios where the clock, timing and races show.
fn team_repo() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    copy_tree(&fixtures().join("team"), dir.path());
    let out = harness_in(
        dir.path(),
        &[
            "init",
            "--limiter",
            "exec:python3 ratelimit/daily_cap.py",
            "--name",
            "daily-cap",
            "--adapter",
            "python",
            "--ci",
            "github",
        ],
    );
    assert_eq!(out.status.code(), Some(0), "{}", text_of(&out));
    assert!(dir.path().join("limiter_harness_adapter.py").is_file());
    let workflow = std::fs::read_to_string(dir.path().join(".github/workflows/limiter-harness.yml")).unwrap();
    assert!(workflow.contains("limiter-harness ci --shard"), "{workflow}");
    assert!(workflow.contains("limiter-harness ci merge"), "{workflow}");
    std::fs::write(
        dir.path().join("limiter-harness.toml"),
        r#"[suite]
name = "geocoding"
scenarios = ["steady-control", "immortal-counter", "clock-skew-two-instances", "shared-cache-eviction", "dedicated-noeviction", "burst-import"]
jobs = 4

[server]
backend = "process"

[[limiter]]
name = "daily-cap"
spec = "exec:python3 ratelimit/daily_cap.py"

[[limiter]]
name = "api-window"
spec = "lua:lua/api_window.lua"
window_ms = 1000
"#,
    )
    .unwrap();
    dir
}

/// Two processes that keep a core busy each until dropped, or until this test process is
/// gone (a test run stopped with Ctrl-C or killed leaves no hog spinning).
struct Hogs(Vec<Child>);

impl Hogs {
    fn start() -> Self {
        Self(
            (0..2)
                .map(|_| {
                    Command::new("sh")
                        .args(["-c", "while kill -0 \"$PPID\" 2>/dev/null; do :; done"])
                        .spawn()
                        .expect("sh")
                })
                .collect(),
        )
    }
}

impl Drop for Hogs {
    fn drop(&mut self) {
        for child in &mut self.0 {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

fn ci(dir: &Path, extra: &[&str]) -> Output {
    let mut args = vec!["ci", "--no-progress"];
    args.extend_from_slice(extra);
    harness_in(dir, &args)
}

/// The team's repository with its baseline accepted (`ci --accept`, `extra` added).
fn accepted_team_repo(extra: &[&str]) -> tempfile::TempDir {
    let repo = team_repo();
    let mut args = vec!["--accept"];
    args.extend_from_slice(extra);
    let out = ci(repo.path(), &args);
    assert_eq!(out.status.code(), Some(0), "{}", text_of(&out));
    repo
}

// The gate's life is two tests, each on a repository of its own, so that they run side by
// side: unchanged runs and the same suite in shards; a regression and its repair.

#[test]
fn a_teams_gate_is_green_run_after_run_also_beside_two_cpu_hogs_and_its_shards_merge_to_one_run() {
    let repo = accepted_team_repo(&[]);
    let dir = repo.path();
    let baseline = dir.join("limiter-harness/baseline");
    let mut recorded = String::new();
    for entry in std::fs::read_dir(&baseline).unwrap() {
        recorded.push_str(&std::fs::read_to_string(entry.unwrap().path()).unwrap());
    }
    // Nothing the clock decides: the day's number and the epoch seconds are `<window>`.
    assert!(recorded.contains("geocode:calls:0:<window>"), "{recorded}");
    let day = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs()
        / 86_400;
    assert!(
        !recorded.contains(&format!(":{day}")),
        "a date in the baseline:\n{recorded}"
    );
    assert!(
        !recorded.contains("TTL > window"),
        "the daily cap's 26 h TTL is declared (ttl_max_ms in its hello)"
    );

    // Three whole runs of unchanged code, the last beside two CPU hogs, and the two shards
    // side by side after the first (runs of unchanged code too). The first run is not beside
    // the shards: three suites at once beside the binary's other tests slowed the daily cap's
    // Python adapter until an identity sent fewer than twice its limit per two windows, and
    // `admits-up-to-limit` had only the first span to judge (valid, against the baseline's
    // invalid). The hogs come last: `just test` starts this test beside the binary's other
    // tests, done by then (scripts/test-runner.py).
    assert_green(&ci(dir, &[]), 1);
    let shard_cells = run_shards(dir);
    for run in 2..=3 {
        let _hogs = (run == 3).then(Hogs::start);
        assert_green(&ci(dir, &[]), run);
    }
    let one_summary = std::fs::read_to_string(dir.join(".limiter-harness/reports/SUMMARY.md")).unwrap();
    shards_merge_to(dir, &shard_cells, &one_summary);
}

fn assert_green(out: &Output, run: u32) {
    assert_eq!(
        out.status.code(),
        Some(0),
        "unchanged code, run {run}\n{}",
        text_of(out)
    );
}

#[test]
fn a_regression_in_a_teams_limiter_is_named_by_cell_and_invariant_and_its_repair_is_green() {
    let repo = accepted_team_repo(&["--scenarios", "steady-control,immortal-counter"]);
    let dir = repo.path();
    // The Lua script no longer sets its key's TTL: a regression, named by cell and invariant.
    let script = dir.join("lua/api_window.lua");
    let good = std::fs::read_to_string(&script).unwrap();
    let broken = good.replace("  redis.call('EXPIRE', KEYS[1], ARGV[2])\n", "");
    assert_ne!(good, broken);
    std::fs::write(&script, &broken).unwrap();
    let out = ci(dir, &["--scenarios", "steady-control,immortal-counter"]);
    let all = text_of(&out);
    assert_eq!(out.status.code(), Some(1), "{all}");
    assert!(all.contains("#### steady-control × api-window"), "{all}");
    assert!(
        all.contains("- regression: ttl-present: valid → invalid (immortal-key: api:rl:0:<window>"),
        "{all}"
    );
    assert!(all.contains("regression(s): "), "{all}");
    std::fs::write(&script, &good).unwrap();
    let out = ci(dir, &["--scenarios", "steady-control,immortal-counter"]);
    assert_eq!(out.status.code(), Some(0), "repaired\n{}", text_of(&out));
}

/// The suite in two shards, run at the same time, each in a report directory of its own:
/// the cells of each.
fn run_shards(dir: &Path) -> Vec<Vec<String>> {
    std::thread::scope(|s| {
        let shards: Vec<_> = (1..=2).map(|k| s.spawn(move || run_shard(dir, k))).collect();
        shards.into_iter().map(|h| h.join().unwrap()).collect()
    })
}

/// `ci --shard K/2` with its own report directory `shard-K`: the names of its cells.
fn run_shard(dir: &Path, k: u32) -> Vec<String> {
    let report_dir = format!("shard-{k}");
    let suite = std::fs::read_to_string(dir.join("limiter-harness.toml")).unwrap();
    let sharded = dir.join(format!("shard-{k}.toml"));
    std::fs::write(
        &sharded,
        suite.replace("jobs = 4", &format!("jobs = 4\nreport_dir = \"{report_dir}\"")),
    )
    .unwrap();
    let out = ci(
        dir,
        &["--suite", sharded.to_str().unwrap(), "--shard", &format!("{k}/2")],
    );
    assert_eq!(out.status.code(), Some(0), "shard {k}/2\n{}", text_of(&out));
    let json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join(&report_dir).join("ci.json")).unwrap()).unwrap();
    let names: Vec<String> = json["cells"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| {
            format!(
                "{}--{}",
                c["scenario"].as_str().unwrap(),
                c["limiter"].as_str().unwrap()
            )
        })
        .collect();
    assert!(!names.is_empty(), "shard {k}/2 is empty");
    names
}

/// The shards' cells (`run_shards`): disjoint, covering; merged, `one_summary` (a whole
/// run's).
fn shards_merge_to(dir: &Path, shard_cells: &[Vec<String>], one_summary: &str) {
    assert!(
        shard_cells[0].iter().all(|c| !shard_cells[1].contains(c)),
        "disjoint: {shard_cells:?}"
    );
    assert_eq!(
        shard_cells[0].len() + shard_cells[1].len(),
        12,
        "covering: {shard_cells:?}"
    );
    let out = harness_in(
        dir,
        &[
            "ci",
            "merge",
            "shard-1",
            "shard-2",
            "--summary",
            "merged.md",
            "--junit",
            "merged.xml",
        ],
    );
    assert_eq!(out.status.code(), Some(0), "{}", text_of(&out));
    assert_eq!(std::fs::read_to_string(dir.join("merged.md")).unwrap(), one_summary);
    let out = harness_in(dir, &["ci", "merge", "shard-1"]);
    assert_eq!(out.status.code(), Some(3), "a shard missing: {}", text_of(&out));
    assert!(text_of(&out).contains("shard(s) 2/2 missing"), "{}", text_of(&out));
}

#[test]
fn a_cell_whose_runs_disagree_is_flaky_then_recorded_as_flaky_then_passes() {
    // Long: the flaky cell's life in order — recorded once, found flaky, accepted as flaky
    // (only its file rewritten), then passing whatever its run gives.
    let repo = tempfile::tempdir().unwrap();
    let dir = repo.path();
    copy_tree(&fixtures().join("flaky"), dir);
    std::fs::copy(
        root().join("examples/python/adapter.py"),
        dir.join("limiter_harness_adapter.py"),
    )
    .unwrap();
    std::fs::write(
        dir.join("limiter-harness.toml"),
        r#"[suite]
scenarios = ["steady-control", "burst-import"]

[server]
backend = "process"

[[limiter]]
name = "racy"
spec = "exec:python3 every_other_run.py"

[[limiter]]
spec = "multi-incr-expire-nx"

[[skip]]
cells = "burst-import--*"
reason = "the import path is rate limited upstream (ticket OPS-1)"
"#,
    )
    .unwrap();
    // Recorded from one run each (start 0: the correct one).
    let out = ci(dir, &["--accept", "--reruns", "0", "--cells", "steady-control--racy"]);
    assert_eq!(out.status.code(), Some(0), "{}", text_of(&out));
    let out = ci(
        dir,
        &["--accept", "--reruns", "0", "--limiters", "multi-incr-expire-nx"],
    );
    assert_eq!(out.status.code(), Some(0), "{}", text_of(&out));
    let baseline = dir.join("limiter-harness/baseline");
    let other = std::fs::read_to_string(baseline.join("steady-control--multi-incr-expire-nx.md")).unwrap();
    assert!(
        !baseline.join("burst-import--racy.md").exists(),
        "a skipped cell is not run"
    );

    // Its next runs: broken, correct, broken — they disagree: flaky, with what each gave.
    let out = ci(dir, &["--cells", "steady-control--*", "--junit", "junit.xml"]);
    let all = text_of(&out);
    assert_eq!(
        out.status.code(),
        Some(1),
        "an unrecorded flaky cell fails the gate\n{all}"
    );
    assert!(all.contains("### Flaky (1)"), "{all}");
    assert!(all.contains("- ttl-present: invalid 2 of 3, valid 1 of 3"), "{all}");
    assert!(
        all.contains("reproduce (the run that differed): `limiter-harness run steady-control"),
        "{all}"
    );
    let junit = std::fs::read_to_string(dir.join("junit.xml")).unwrap();
    assert!(junit.contains("<failure type=\"flaky\""), "{junit}");

    // Accepted as flaky: its file only.
    let out = ci(dir, &["--accept", "--cells", "steady-control--racy"]);
    assert_eq!(out.status.code(), Some(0), "{}", text_of(&out));
    let record = std::fs::read_to_string(baseline.join("steady-control--racy.md")).unwrap();
    assert!(record.starts_with("# steady-control × racy: FLAKY"), "{record}");
    assert!(
        record.contains("| ttl-present | invalid, valid | immortal-key |"),
        "{record}"
    );
    assert_eq!(
        std::fs::read_to_string(baseline.join("steady-control--multi-incr-expire-nx.md")).unwrap(),
        other,
        "`--cells` rewrites only the cells it names"
    );

    // Then it passes, whichever way its run goes; the skipped cells say why.
    for _ in 0..2 {
        let out = ci(dir, &[]);
        let all = text_of(&out);
        assert_eq!(out.status.code(), Some(0), "{all}");
        assert!(all.contains("(flaky, as recorded)"), "{all}");
        assert!(all.contains("### Skipped by the suite (2)"), "{all}");
        assert!(
            all.contains("the import path is rate limited upstream (ticket OPS-1)"),
            "{all}"
        );
    }
}

/// An exec adapter keyed by the wall clock's `BUCKET_MS` buckets, writing each request's
/// bucket to `BUCKETS_FILE`.
fn write_bucketed_adapter(dir: &Path) -> PathBuf {
    let adapter = dir.join("bucketed.py");
    std::fs::write(
        &adapter,
        format!(
            r#"import os, sys
sys.path.insert(0, {examples:?})
from adapter import serve

PERIOD_MS = int(os.environ["BUCKET_MS"])
seen = open(os.environ["BUCKETS_FILE"], "a")

def decide(r, request, limit, window_ms):
    bucket = request.now_ms // PERIOD_MS
    seen.write(f"{{bucket}}\n")
    seen.flush()
    key = f"cal:{{request.identity}}:{{bucket}}"
    count = r.incr(key)
    if count == 1:
        r.pexpire(key, 3 * PERIOD_MS)
    return count <= limit, count

serve(decide, "bucketed by the wall clock", keys=["cal:{{identity}}:*"], ttl_max_ms=3 * PERIOD_MS)
"#,
            examples = root().join("examples/python").display().to_string()
        ),
    )
    .unwrap();
    adapter
}

/// 2.5 s of traffic from one identity, far under its limit.
fn write_two_buckets_scenario(dir: &Path) {
    let scenario = dir.join("two-buckets.toml");
    std::fs::write(
        &scenario,
        r#"name = "two-buckets"
about = "2.5 s of traffic from one identity, far under its limit."
seed = 1

[server]
maxmemory_policy = "noeviction"

[limit]
requests_max = 1000
window_ms = 1000
identities = 1

[[phase]]
name = "traffic"
kind = "steady"
rate_per_s = 40
duration_ms = 2500

[check]
invariants = ["admitted-within-limit"]
"#,
    )
    .unwrap();
}

/// A period of 45–90 s (a run of 2.5 s + the 2 s margin fits in a tenth of it) with a
/// boundary 3–4 s from now: inside the span the harness checks (its 2.5 s of traffic and the
/// margin) when it gets there at once, and still when its start-up on a loaded machine (the
/// server, the Python adapter) takes up to 3 s. (At 1.5–2.5 s, a start-up of 1.5 s on a loaded
/// machine let the boundary pass first: no wait, one bucket, and the test failed.)
fn period_with_a_boundary_inside_the_traffic() -> u64 {
    let now_ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64;
    (45_000u64..90_000)
        .find(|p| {
            let boundary = (now_ms + 3_000).div_ceil(*p) * p;
            boundary <= now_ms + 4_000
        })
        .expect("a period with a boundary 3–4 s away")
}

/// A limiter that names its keys by the wall clock's period (incident 2's daily cap keys by
/// the date) must see one key per identity in a run, whatever the time of day: a run that
/// would straddle a boundary of its period waits for it. The period here is one the test
/// picks so that a boundary falls 3–4 s after the run is started, inside its 2.5 s of
/// traffic and margin; `LIMITER_HARNESS_CALENDAR_MS` makes it the harness's period too. A built-in,
/// whose keys no clock names, does not wait.
#[test]
fn a_run_that_would_straddle_a_calendar_boundary_waits_and_sees_one_bucket() {
    let dir = tempfile::tempdir().unwrap();
    let adapter = write_bucketed_adapter(dir.path());
    write_two_buckets_scenario(dir.path());
    let period_ms = period_with_a_boundary_inside_the_traffic();
    let buckets = dir.path().join("buckets.txt");
    let out = Command::new(env!("CARGO_BIN_EXE_limiter-harness"))
        .current_dir(dir.path())
        .args(["run", "two-buckets.toml", "--backend", "process", "--no-progress"])
        .arg("--limiter")
        .arg(format!("exec:python3 {}", adapter.display()))
        .env("LIMITER_HARNESS_CALENDAR_MS", period_ms.to_string())
        .env("BUCKET_MS", period_ms.to_string())
        .env("BUCKETS_FILE", &buckets)
        .output()
        .unwrap();
    let all = text_of(&out);
    assert_eq!(out.status.code(), Some(0), "{all}");
    let seen: std::collections::BTreeSet<String> = std::fs::read_to_string(&buckets)
        .unwrap()
        .lines()
        .map(str::to_owned)
        .collect();
    assert_eq!(seen.len(), 1, "one bucket for the whole run: {seen:?}\n{all}");
    assert!(all.contains("so the run fits inside one UTC"), "{all}");

    // A built-in's keys are the harness's own (`rl:0`): no clock names them, so its run does
    // not wait, boundary or not.
    let out = Command::new(env!("CARGO_BIN_EXE_limiter-harness"))
        .current_dir(dir.path())
        .args(["run", "two-buckets.toml", "--backend", "process", "--no-progress"])
        .args(["--limiter", "multi-incr-expire-nx"])
        .env(
            "LIMITER_HARNESS_CALENDAR_MS",
            period_with_a_boundary_inside_the_traffic().to_string(),
        )
        .output()
        .unwrap();
    let all = text_of(&out);
    assert_eq!(out.status.code(), Some(0), "{all}");
    assert!(!all.contains("so the run fits inside one UTC"), "{all}");

    // And a malformed setting is an error that names it, before any server starts.
    let out = Command::new(env!("CARGO_BIN_EXE_limiter-harness"))
        .current_dir(dir.path())
        .args(["run", "two-buckets.toml", "--backend", "process", "--no-progress"])
        .args(["--limiter", "multi-incr-expire-nx"])
        .env("LIMITER_HARNESS_CALENDAR_MS", "a day")
        .output()
        .unwrap();
    let all = text_of(&out);
    assert_ne!(out.status.code(), Some(0), "{all}");
    assert!(all.contains("LIMITER_HARNESS_CALENDAR_MS=\"a day\""), "{all}");
}
