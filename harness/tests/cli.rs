//! The binary as a user meets it: exit codes, error messages, `list`, and Ctrl-C.

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

fn harness() -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_limiter-harness"));
    cmd.current_dir(Path::new(env!("CARGO_MANIFEST_DIR")).join(".."));
    cmd
}

fn run(args: &[&str]) -> Output {
    harness().args(args).output().expect("run limiter-harness")
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

fn write_scenario(dir: &Path, body: &str) -> PathBuf {
    let path = dir.join("bad.toml");
    std::fs::write(&path, body).unwrap();
    path
}

#[test]
fn a_malformed_scenario_exits_3_pointing_at_file_line_and_column() {
    let dir = tempfile::tempdir().unwrap();
    let path = write_scenario(
        dir.path(),
        "name = \"bad\"\n[limit]\nrequests_max = 10\nwindow_ms = 1000\n[[phase]]\nkind = \"steady\"\nrate_per_s = 10\nduration_ms = 100\nburst_size = 3\n[check]\ninvariants = [\"ttl-present\"]\n",
    );
    let out = run(&["run", path.to_str().unwrap(), "--limiter", "get-then-incr"]);
    assert_eq!(out.status.code(), Some(3));
    let err = text(&out.stderr);
    assert!(
        err.contains(&format!("{}:9:1: unknown field `burst_size`", path.display())),
        "{err}"
    );
    assert!(err.contains("help:"), "{err}");
}

#[test]
fn an_invalid_value_exits_3_pointing_at_the_value() {
    let dir = tempfile::tempdir().unwrap();
    let path = write_scenario(
        dir.path(),
        "name = \"bad\"\n[limit]\nrequests_max = 10\nwindow_ms = 1000\n[[phase]]\nkind = \"quiet\"\nduration_ms = 100\n[check]\ninvariants = [\"ttl-present\", \"no-such-thing\"]\n",
    );
    let out = run(&["run", path.to_str().unwrap(), "--limiter", "get-then-incr"]);
    assert_eq!(out.status.code(), Some(3));
    let err = text(&out.stderr);
    assert!(err.contains(":9:30: unknown invariant `no-such-thing`"), "{err}");
    assert!(err.contains("one of: ttl-present, ttl-bounded"), "{err}");
}

#[test]
fn an_unknown_limiter_exits_3_listing_the_known_ones() {
    let out = run(&["run", "steady-control", "--limiter", "leaky-bucket"]);
    assert_eq!(out.status.code(), Some(3));
    let err = text(&out.stderr);
    assert!(err.contains("unknown limiter `leaky-bucket`"), "{err}");
    assert!(
        err.contains("get-then-incr, incr-then-expire, multi-incr-expire-nx, lua-fixed-window"),
        "{err}"
    );
}

#[test]
fn an_unknown_scenario_and_bad_usage_exit_3() {
    let out = run(&["run", "no-such-scenario", "--limiter", "get-then-incr"]);
    assert_eq!(out.status.code(), Some(3));
    assert!(text(&out.stderr).contains("known scenarios: "), "{}", text(&out.stderr));
    let out = run(&["run", "steady-control"]);
    assert_eq!(
        out.status.code(),
        Some(3),
        "a usage error is 3, not clap's 2 (which means unknown)"
    );
    assert_eq!(run(&["--help"]).status.code(), Some(0));
}

#[test]
fn list_shows_scenarios_and_limiters_with_their_commands() {
    let out = run(&["list"]);
    assert_eq!(out.status.code(), Some(0));
    let listing = text(&out.stdout);
    for name in [
        "immortal-counter",
        "shared-cache-eviction",
        "dedicated-noeviction",
        "steady-control",
    ] {
        assert!(listing.contains(name), "{listing}");
    }
    assert!(
        listing.contains("MULTI; INCR key; PEXPIRE key window NX; EXEC"),
        "{listing}"
    );
    assert!(listing.contains("GET key"), "{listing}");
    assert!(
        listing.contains("keys: <key_prefix><identity>, one per identity (e.g. rl:0); TTL bound: one window"),
        "each built-in's layout and TTL bound: {listing}"
    );
}

#[test]
fn keys_and_window_from_the_command_line_are_checked_and_reproduced() {
    let out = run(&["run", "steady-control", "-l", "get-then-incr", "--keys", "rl:{id}"]);
    assert_eq!(out.status.code(), Some(3));
    let err = text(&out.stderr);
    assert!(err.contains("--keys: `rl:{id}`: unknown placeholder {id}"), "{err}");
    let out = run(&["run", "steady-control", "-l", "get-then-incr", "--window-ms", "10"]);
    assert_eq!(out.status.code(), Some(3), "a window below 50 ms is refused");

    // A layout that matches nothing the limiter touches: unknown (exit 2), ending with the
    // hint, and a reproduce line that carries both flags.
    let dir = tempfile::tempdir().unwrap();
    let out = run(&[
        "run",
        "window-boundary-burst",
        "-l",
        "lua-fixed-window",
        "--backend",
        "process",
        "--keys",
        "app:{identity}:*",
        "--window-ms",
        "1000",
        "--report-dir",
        dir.path().to_str().unwrap(),
    ]);
    let stdout = text(&out.stdout);
    assert_eq!(out.status.code(), Some(2), "{stdout}");
    let hint = stdout
        .lines()
        .find(|l| l.starts_with("keys:"))
        .unwrap_or_else(|| panic!("{stdout}"));
    assert!(
        hint.contains("no key matching `app:{identity}:*`") && hint.contains("--keys 'rl:{identity}'"),
        "{hint}"
    );
    assert!(
        stdout.contains("--backend process --keys 'app:{identity}:*' --window-ms 1000"),
        "{stdout}"
    );
}

#[test]
fn exit_codes_say_valid_invalid_and_unknown() {
    let dir = tempfile::tempdir().unwrap();
    let report = |name: &str| dir.path().join(name).to_str().unwrap().to_owned();
    let out = run(&[
        "run",
        "immortal-counter",
        "-l",
        "get-then-incr",
        "--backend",
        "process",
        "--report-dir",
        &report("bad"),
    ]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stdout));
    let stdout = text(&out.stdout);
    assert!(stdout.contains("reproduce: limiter-harness run scenarios/immortal-counter.toml --limiter get-then-incr --seed 7 --backend process"), "{stdout}");
    for file in ["report.md", "report.json", "history.jsonl"] {
        assert!(dir.path().join("bad").join(file).is_file(), "{file}");
    }
    let out = run(&[
        "run",
        "immortal-counter",
        "-l",
        "lua-fixed-window",
        "--backend",
        "process",
        "--report-dir",
        &report("good"),
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stdout));

    let no_quiet = write_scenario(
        dir.path(),
        "name = \"no-quiet\"\n[limit]\nrequests_max = 5\nwindow_ms = 200\n[[phase]]\nkind = \"steady\"\nrate_per_s = 50\nduration_ms = 300\n[check]\ninvariants = [\"no-lockout\"]\n",
    );
    let out = run(&[
        "run",
        no_quiet.to_str().unwrap(),
        "-l",
        "lua-fixed-window",
        "--backend",
        "process",
        "--report-dir",
        &report("unknown"),
    ]);
    assert_eq!(
        out.status.code(),
        Some(2),
        "no quiet period: no-lockout cannot be judged\n{}",
        text(&out.stdout)
    );
}

/// Start a run, wait until it sends requests, interrupt it; returns its output and report dir.
fn interrupted_run(backend: &str, servers_of: impl Fn(i32) -> Vec<String>) -> (Output, tempfile::TempDir, Vec<String>) {
    let dir = tempfile::tempdir().unwrap();
    let child = spawn_until_sending(
        &["run", "steady-control", "-l", "get-then-incr", "--backend", backend],
        dir.path(),
    );
    let pid = child.id() as i32;
    let history = dir.path().join("history.jsonl");
    let servers = servers_of(pid);
    assert_eq!(servers.len(), 1, "one server for the run");
    nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), nix::sys::signal::Signal::SIGINT).unwrap();
    let out = child.wait_with_output().unwrap();
    assert_eq!(
        out.status.code(),
        Some(2),
        "interrupted: unknown\n{}{}",
        text(&out.stdout),
        text(&out.stderr)
    );
    let saved = std::fs::read_to_string(&history).unwrap();
    assert!(saved.contains("interrupted by a signal"), "{saved}");
    assert!(dir.path().join("report.md").is_file());
    (out, dir, servers)
}

#[test]
fn ctrl_c_ends_the_run_unknown_saves_the_history_and_kills_the_process() {
    let (_, _dir, servers) = interrupted_run("process", redis_servers_of);
    for server in servers {
        assert!(
            !Path::new(&format!("/proc/{server}")).exists() || zombie(&server),
            "redis-server {server} still runs"
        );
    }
}

#[test]
fn ctrl_c_ends_the_run_unknown_saves_the_history_and_removes_the_container() {
    let (_, _dir, containers) = interrupted_run("container", containers_of);
    let left: Vec<String> = containers.iter().filter(|id| docker_has(id)).cloned().collect();
    assert!(left.is_empty(), "containers left behind: {left:?}");
}

/// Ids of containers whose run label names harness process `owner`.
fn containers_of(owner: i32) -> Vec<String> {
    let out = Command::new("docker")
        .args([
            "ps",
            "-a",
            "--filter",
            "label=limiter-harness.run",
            "--format",
            "{{.ID}} {{.Label \"limiter-harness.run\"}}",
        ])
        .output()
        .expect("docker CLI");
    text(&out.stdout)
        .lines()
        .filter_map(|line| line.split_once(' '))
        .filter(|(_, run)| run.starts_with(&format!("{owner}-")))
        .map(|(id, _)| id.to_owned())
        .collect()
}

fn docker_has(id: &str) -> bool {
    Command::new("docker")
        .args(["inspect", id])
        .output()
        .is_ok_and(|o| o.status.success())
}

/// Pids of redis-server processes whose pid file names a run of harness process `owner`.
fn redis_servers_of(owner: i32) -> Vec<String> {
    let dir = std::env::temp_dir().join("limiter-harness-processes");
    std::fs::read_dir(dir)
        .map(|entries| {
            entries
                .flatten()
                .filter(|e| {
                    std::fs::read_to_string(e.path())
                        .unwrap_or_default()
                        .contains(&format!("\n{owner}-"))
                })
                .filter_map(|e| e.file_name().to_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default()
}

fn zombie(pid: &str) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|s| s.contains(") Z "))
}

#[test]
fn matrix_writes_the_table_and_exits_by_the_scenarios_expectations() {
    let dir = tempfile::tempdir().unwrap();
    let out = run(&[
        "matrix",
        "--scenarios",
        "steady-*",
        "--limiters",
        "lua-fixed-window,pipeline-incr-expire",
        "--no-progress",
        "--out",
        dir.path().to_str().unwrap(),
    ]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "both cells as steady-control expects\n{}",
        text(&out.stderr)
    );
    let table = std::fs::read_to_string(dir.path().join("MATRIX.md")).unwrap();
    assert!(
        table.contains("| scenario | lua-fixed-window | pipeline-incr-expire |"),
        "{table}"
    );
    assert!(table.contains("| steady-control | pass | **starved** |"), "{table}");
    assert!(table.contains("Every cell is what its scenario expects."), "{table}");
    assert!(
        dir.path()
            .join("runs/matrix/steady-control/pipeline-incr-expire/report.md")
            .is_file()
    );
    assert!(
        text(&out.stderr).contains("steady-control × pipeline-incr-expire: INVALID"),
        "cells are reported as they finish"
    );

    let none = run(&[
        "matrix",
        "--scenarios",
        "no-such-*",
        "--out",
        dir.path().to_str().unwrap(),
    ]);
    assert_eq!(none.status.code(), Some(3));
    assert!(
        text(&none.stderr).contains("no scenario matches `no-such-*`"),
        "{}",
        text(&none.stderr)
    );
}

#[test]
fn ctrl_c_stops_the_matrix_without_writing_the_table_or_leaving_servers() {
    interrupted_matrix(nix::sys::signal::Signal::SIGINT);
}

#[test]
fn sigterm_stops_the_matrix_as_ctrl_c_does() {
    interrupted_matrix(nix::sys::signal::Signal::SIGTERM);
}

/// Ctrl-C, or SIGTERM (what CI systems and `timeout` send), while the container is still
/// starting: the run stops it and ends unknown; nothing of it is left.
#[test]
fn a_signal_during_server_start_up_leaves_no_container() {
    use nix::sys::signal::Signal;
    for (attempt, signal) in [Signal::SIGINT, Signal::SIGTERM, Signal::SIGTERM]
        .into_iter()
        .enumerate()
    {
        let dir = tempfile::tempdir().unwrap();
        let mut child = harness()
            .args([
                "run",
                "steady-control",
                "-l",
                "get-then-incr",
                "--backend",
                "container",
                "--report-dir",
            ])
            .arg(dir.path())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let pid = child.id() as i32;
        let started = Instant::now();
        // The container exists before it is ready: the signal lands while it starts.
        while containers_of(pid).is_empty() {
            assert!(
                child.try_wait().unwrap().is_none(),
                "the run ended before its server started"
            );
            assert!(started.elapsed() < Duration::from_secs(60), "no container started");
            std::thread::sleep(Duration::from_millis(10));
        }
        let seen = containers_of(pid);
        nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), signal).unwrap();
        let out = child.wait_with_output().unwrap();
        assert_eq!(
            out.status.code(),
            Some(2),
            "attempt {attempt} ({signal}): interrupted: unknown\n{}",
            text(&out.stderr)
        );
        let left: Vec<String> = seen.iter().filter(|id| docker_has(id)).cloned().collect();
        assert!(left.is_empty(), "attempt {attempt}: containers left behind: {left:?}");
    }
}

fn interrupted_matrix(signal: nix::sys::signal::Signal) {
    let dir = tempfile::tempdir().unwrap();
    let child = harness()
        .args([
            "matrix",
            "--scenarios",
            "steady-control",
            "--backend",
            "process",
            "--jobs",
            "2",
            "--no-progress",
            "--out",
        ])
        .arg(dir.path())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let pid = child.id() as i32;
    let started = Instant::now();
    while redis_servers_of(pid).is_empty() {
        assert!(started.elapsed() < Duration::from_secs(60), "no cell started");
        std::thread::sleep(Duration::from_millis(50));
    }
    nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), signal).unwrap();
    let out = child.wait_with_output().unwrap();
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "interrupted: unknown\n{stderr}");
    assert!(stderr.contains("interrupted after"), "{stderr}");
    assert!(!dir.path().join("MATRIX.md").exists(), "no table from a partial matrix");
    let left: Vec<String> = redis_servers_of(pid).into_iter().filter(|p| !zombie(p)).collect();
    assert!(left.is_empty(), "servers left behind: {left:?}");
}

/// Tests that run `clean` (which removes what every killed run left) one at a time: one
/// test's `clean` must not tidy up what another test is about to look at.
static CLEANING: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// Spawn `limiter-harness ARGS --report-dir DIR` and wait until it sends requests.
fn spawn_until_sending(args: &[&str], dir: &Path) -> std::process::Child {
    let mut child = harness()
        .args(args)
        .arg("--report-dir")
        .arg(dir)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let history = dir.join("history.jsonl");
    let started = Instant::now();
    while !std::fs::read_to_string(&history)
        .unwrap_or_default()
        .contains("\"type\":\"invoke\"")
    {
        assert!(child.try_wait().unwrap().is_none(), "the run ended before sending");
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "the run never started sending"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    child
}

fn sigkill(child: std::process::Child) -> Output {
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(child.id() as i32),
        nix::sys::signal::Signal::SIGKILL,
    )
    .unwrap();
    child.wait_with_output().unwrap()
}

/// Temp directories of runs owned by harness process `owner`.
fn temp_dirs_of(owner: i32) -> Vec<PathBuf> {
    std::fs::read_dir(std::env::temp_dir())
        .unwrap()
        .flatten()
        .filter(|e| {
            e.file_name()
                .to_string_lossy()
                .starts_with(&format!("limiter-harness-{owner}-"))
        })
        .map(|e| e.path())
        .collect()
}

/// `clean` kills a dead run's server by its pid file only if that pid still runs in the
/// run's own directory: a pid reused by another run's server (or anything else) is spared.
#[test]
fn clean_kills_a_recorded_pid_only_in_its_own_runs_directory() {
    let _one = CLEANING.lock().unwrap_or_else(|e| e.into_inner());
    // A run id whose owner is gone (no pid that large: pid_max is at most 2^22).
    let dead_run = "4194999-abc";
    let own = tempfile::Builder::new()
        .prefix(&format!("limiter-harness-{dead_run}-"))
        .tempdir()
        .unwrap();
    let other = tempfile::Builder::new()
        .prefix("limiter-harness-4194998-def-")
        .tempdir()
        .unwrap();
    let spawn_in = |dir: &Path| Command::new("sleep").arg("60").current_dir(dir).spawn().unwrap();
    let (mut ours, mut theirs) = (spawn_in(own.path()), spawn_in(other.path()));
    let pid_dir = limiter_harness::backend::pid_dir();
    std::fs::create_dir_all(&pid_dir).unwrap();
    for child in [&ours, &theirs] {
        std::fs::write(
            pid_dir.join(child.id().to_string()),
            format!("redis-server\n{dead_run}\n"),
        )
        .unwrap();
    }
    let out = run(&["clean"]);
    assert_eq!(out.status.code(), Some(0), "{}", text_of(&out));
    std::thread::sleep(Duration::from_millis(200));
    assert!(
        ours.try_wait().unwrap().is_some(),
        "the run's own server is killed: {}",
        text_of(&out)
    );
    assert!(
        theirs.try_wait().unwrap().is_none(),
        "a pid in another run's directory is spared: {}",
        text_of(&out)
    );
    assert!(
        !pid_dir.join(theirs.id().to_string()).exists(),
        "the stale pid file is gone"
    );
    theirs.kill().unwrap();
    let _ = theirs.wait();
    let _ = ours.wait();
}

/// SIGKILL cannot be handled: the history must still parse line by line, and `clean`
/// removes the server and the temp directory the run left.
#[test]
fn a_killed_run_leaves_whole_history_lines_and_clean_removes_what_it_left() {
    let _one = CLEANING.lock().unwrap_or_else(|e| e.into_inner());
    let dir = tempfile::tempdir().unwrap();
    let child = spawn_until_sending(
        &["run", "steady-control", "-l", "get-then-incr", "--backend", "process"],
        dir.path(),
    );
    let pid = child.id() as i32;
    std::thread::sleep(Duration::from_millis(700));
    let servers = redis_servers_of(pid);
    let temp_dirs = temp_dirs_of(pid);
    assert_eq!(servers.len(), 1, "one server");
    assert!(!temp_dirs.is_empty(), "the server's temp dir");
    sigkill(child);
    let history = dir.path().join("history.jsonl");
    let text = std::fs::read_to_string(&history).unwrap();
    assert!(text.ends_with('\n'), "the last line is whole");
    let events = limiter_harness::history::read_history(&history).expect("every line parses");
    assert!(events.len() > 10, "{} events", events.len());

    let out = run(&["clean"]);
    assert_eq!(out.status.code(), Some(0), "{}", text_of(&out));
    std::thread::sleep(Duration::from_millis(200));
    for server in servers {
        assert!(
            !Path::new(&format!("/proc/{server}")).exists() || zombie(&server),
            "redis-server {server} still runs: {}",
            text_of(&out)
        );
    }
    let left: Vec<PathBuf> = temp_dirs.into_iter().filter(|d| d.exists()).collect();
    assert!(left.is_empty(), "temp dirs left: {left:?}\n{}", text_of(&out));
}

fn text_of(out: &Output) -> String {
    format!("{}{}", text(&out.stdout), text(&out.stderr))
}

/// Two runs writing one report directory would interleave their histories: the second is
/// refused with a clear error, and the first's history stays whole.
#[test]
fn a_second_run_on_the_same_report_directory_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let first = spawn_until_sending(
        &[
            "run",
            "steady-control",
            "-l",
            "lua-fixed-window",
            "--backend",
            "process",
        ],
        dir.path(),
    );
    let second = harness()
        .args([
            "run",
            "steady-control",
            "-l",
            "lua-fixed-window",
            "--backend",
            "process",
            "--report-dir",
        ])
        .arg(dir.path())
        .output()
        .unwrap();
    assert_eq!(second.status.code(), Some(3), "{}", text_of(&second));
    assert!(
        text(&second.stderr).contains(&format!("in use by another run (process {})", first.id())),
        "{}",
        text_of(&second)
    );
    let out = first.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", text_of(&out));
    limiter_harness::history::read_history(&dir.path().join("history.jsonl")).expect("every line parses");
}

/// A server this test runs itself, as a user's would be; killed when dropped.
struct UsersServer {
    child: std::process::Child,
    port: u16,
}

impl UsersServer {
    fn start() -> Self {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let child = Command::new("redis-server")
            .args([
                "--port",
                &port.to_string(),
                "--bind",
                "127.0.0.1",
                "--save",
                "",
                "--appendonly",
                "no",
            ])
            .stdout(Stdio::null())
            .spawn()
            .expect("redis-server");
        let server = Self { child, port };
        let started = Instant::now();
        while server.cli(&["PING"]) != "PONG" {
            assert!(
                started.elapsed() < Duration::from_secs(10),
                "redis-server did not start"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
        server
    }

    fn cli(&self, args: &[&str]) -> String {
        let out = Command::new("redis-cli")
            .args(["-p", &self.port.to_string()])
            .args(args)
            .output()
            .expect("redis-cli");
        text(&out.stdout).trim().to_owned()
    }

    fn url(&self) -> String {
        format!("redis://127.0.0.1:{}", self.port)
    }
}

impl Drop for UsersServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `--allow-reconfigure` warns that maxmemory is server-wide; a run killed while the server
/// is reconfigured saved the old values first, and `clean` puts them back.
#[test]
fn clean_restores_the_settings_of_a_killed_reconfiguring_run() {
    let _one = CLEANING.lock().unwrap_or_else(|e| e.into_inner());
    let server = UsersServer::start();
    let before = server.cli(&["CONFIG", "GET", "maxmemory"]);
    let dir = tempfile::tempdir().unwrap();
    let scenario = dir.path().join("reconfigure.toml");
    std::fs::write(
        &scenario,
        "name = \"reconfigure\"\n[server]\nmaxmemory = \"7mb\"\n[limit]\nrequests_max = 10\nwindow_ms = 500\nkey_prefix = \"lh-test-reconfigure:\"\n[[phase]]\nkind = \"steady\"\nrate_per_s = 50\nduration_ms = 20000\n[check]\ninvariants = [\"ttl-present\"]\n",
    )
    .unwrap();
    let reports = dir.path().join("report");
    let url = server.url();
    let child = spawn_until_sending(
        &[
            "run",
            scenario.to_str().unwrap(),
            "-l",
            "lua-fixed-window",
            "--backend",
            "url",
            "--url",
            &url,
            "--allow-reconfigure",
        ],
        &reports,
    );
    assert_eq!(
        server.cli(&["CONFIG", "GET", "maxmemory"]),
        "maxmemory\n7340032",
        "the run's setting"
    );
    let out = sigkill(child);
    assert!(
        text(&out.stderr).contains("applies to the whole server"),
        "{}",
        text_of(&out)
    );
    assert_eq!(
        server.cli(&["CONFIG", "GET", "maxmemory"]),
        "maxmemory\n7340032",
        "left as the run set it"
    );

    let cleaned = run(&["clean"]);
    assert!(
        text(&cleaned.stdout).contains("restored the settings"),
        "{}",
        text_of(&cleaned)
    );
    assert_eq!(
        server.cli(&["CONFIG", "GET", "maxmemory"]),
        before,
        "{}",
        text_of(&cleaned)
    );
}

/// Live processes whose environment carries a run id of harness process `owner`.
fn adapter_processes_of(owner: i32) -> Vec<String> {
    let wanted = format!("LIMITER_HARNESS_RUN={owner}-");
    std::fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter_map(|e| e.file_name().to_str().map(str::to_owned))
        .filter(|pid| pid.bytes().all(|b| b.is_ascii_digit()) && !zombie(pid))
        .filter(|pid| {
            std::fs::read(format!("/proc/{pid}/environ"))
                .is_ok_and(|env| env.split(|b| *b == 0).any(|var| var.starts_with(wanted.as_bytes())))
        })
        .collect()
}

/// An adapter that starts a process outside its process group: the run stops it when it
/// ends, and after a SIGKILL of the harness `clean` does.
#[test]
fn adapter_processes_are_stopped_even_outside_their_process_group() {
    let _one = CLEANING.lock().unwrap_or_else(|e| e.into_inner());
    let escaping = "exec:setsid sleep 300 & exec python3 examples/python/fixed_window_fixed.py";
    let dir = tempfile::tempdir().unwrap();
    let child = harness()
        .args([
            "run",
            "steady-control",
            "-l",
            escaping,
            "--backend",
            "process",
            "--report-dir",
        ])
        .arg(dir.path())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let owner = child.id() as i32;
    let out = child.wait_with_output().unwrap();
    assert!(matches!(out.status.code(), Some(0..=2)), "{}", text_of(&out));
    let finished = adapter_processes_of(owner);
    assert!(finished.is_empty(), "left running after the run: {finished:?}");

    let dir = tempfile::tempdir().unwrap();
    let child = spawn_until_sending(
        &["run", "steady-control", "-l", escaping, "--backend", "process"],
        dir.path(),
    );
    let pid = child.id() as i32;
    assert!(
        adapter_processes_of(pid).len() >= 2,
        "the adapter and its escaped sleep"
    );
    sigkill(child);
    assert!(!adapter_processes_of(pid).is_empty(), "SIGKILL leaves them");
    let cleaned = run(&["clean"]);
    // A process sent SIGKILL dies when it next runs: on a loaded machine (the gate test's CPU
    // hogs beside this one) that can take longer than a moment. `sleep 300` never ends alone.
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while !adapter_processes_of(pid).is_empty() && std::time::Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
    }
    assert_eq!(adapter_processes_of(pid), Vec::<String>::new(), "{}", text_of(&cleaned));
}

/// The catalog is in the binary: from a directory with no scenarios, a shipped name runs,
/// `scenarios export` writes the catalog out, a local file of the same name shadows the
/// shipped one (and says so), and reproduce lines name what was run, relative to here.
#[test]
fn the_shipped_catalog_works_from_any_directory_and_a_local_file_shadows_it() {
    // Long: one newcomer's walk from an empty directory to a local copy that wins, in order.
    let dir = tempfile::tempdir().unwrap();
    let in_dir = |args: &[&str]| {
        Command::new(env!("CARGO_BIN_EXE_limiter-harness"))
            .current_dir(dir.path())
            .args(args)
            .output()
            .expect("run limiter-harness")
    };
    let out = in_dir(&["list"]);
    assert_eq!(out.status.code(), Some(0));
    assert!(text(&out.stdout).contains("immortal-counter"), "{}", text(&out.stdout));

    let out = in_dir(&[
        "run",
        "immortal-counter",
        "--limiter",
        "get-then-incr",
        "--backend",
        "process",
        "--no-progress",
        "--seed",
        "3",
    ]);
    assert_eq!(out.status.code(), Some(1), "{}{}", text(&out.stdout), text(&out.stderr));
    let stdout = text(&out.stdout);
    assert!(
        stdout.contains(
            "reproduce: limiter-harness run immortal-counter --limiter get-then-incr --seed 3 --backend process"
        ),
        "a shipped scenario is reproduced by its name: {stdout}"
    );
    let report = dir
        .path()
        .join(".limiter-harness/reports/runs/immortal-counter/get-then-incr/report.md");
    assert!(report.is_file(), "reports go to the scratch directory: {stdout}");
    assert!(dir.path().join(".limiter-harness/.gitignore").is_file());

    let out = in_dir(&["scenarios", "export", "scenarios"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let exported = dir.path().join("scenarios/immortal-counter.toml");
    let shipped =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("../scenarios/immortal-counter.toml"))
            .unwrap();
    assert_eq!(std::fs::read_to_string(&exported).unwrap(), shipped);
    let out = in_dir(&["scenarios", "export", "scenarios"]);
    assert_eq!(out.status.code(), Some(0), "exporting the same files again is fine");

    // A changed local copy wins, and says it shadows the shipped scenario.
    std::fs::write(&exported, shipped.replace("requests_max = ", "requests_max = 1 + ")).unwrap();
    let out = in_dir(&["scenarios", "export", "scenarios"]);
    assert_eq!(
        out.status.code(),
        Some(3),
        "a changed file is not overwritten without --force"
    );
    assert!(text(&out.stderr).contains("--force"), "{}", text(&out.stderr));
    let out = in_dir(&[
        "run",
        "immortal-counter",
        "--limiter",
        "get-then-incr",
        "--backend",
        "process",
    ]);
    assert_eq!(
        out.status.code(),
        Some(3),
        "the local copy (now malformed) is the one loaded"
    );
    let err = text(&out.stderr);
    assert!(err.contains("shadows the shipped scenario `immortal-counter`"), "{err}");
    assert!(
        err.contains("scenarios/immortal-counter.toml:"),
        "the error points into the local file: {err}"
    );
}
