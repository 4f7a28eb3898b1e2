//! Installing anywhere: `cargo install --path harness` from a copy of the checkout, the copy
//! then deleted, and the installed binary used in a fresh service directory as the README
//! shows — `init`, `ci`, `ci --accept`, `ci`, a shipped scenario, `scenarios export`, `audit`.
//! It builds in the workspace's `target/`, so after `cargo build --release` only the copy's
//! own crates are compiled.

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..").canonicalize().unwrap()
}

fn text_of(out: &Output) -> String {
    format!(
        "exit {:?}\n--- stdout\n{}\n--- stderr\n{}",
        out.status.code(),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// The checkout's files: tracked, and new ones git does not ignore; without git (a source
/// tarball), every file but the build outputs and the reports.
fn checkout_files() -> Vec<PathBuf> {
    let listed = Command::new("git")
        .current_dir(root())
        .args(["ls-files", "-z", "--cached", "--others", "--exclude-standard"])
        .output();
    if let Some(listed) = listed.ok().filter(|l| l.status.success()) {
        return listed
            .stdout
            .split(|b| *b == 0)
            .filter(|n| !n.is_empty())
            .map(|n| PathBuf::from(std::str::from_utf8(n).unwrap()))
            .collect();
    }
    fn walk(dir: &Path, rel: &Path, out: &mut Vec<PathBuf>) {
        for entry in std::fs::read_dir(dir).unwrap().flatten() {
            let name = entry.file_name();
            if [".git", "target", ".limiter-harness"].iter().any(|skip| name == *skip) {
                continue;
            }
            let path = entry.path();
            if path.is_dir() {
                walk(&path, &rel.join(&name), out);
            } else {
                out.push(rel.join(&name));
            }
        }
    }
    let mut files = Vec::new();
    walk(&root(), Path::new(""), &mut files);
    files
}

/// Copy the checkout's files into `to`.
fn copy_checkout(to: &Path) {
    for name in checkout_files() {
        let from = root().join(&name);
        if !from.is_file() {
            continue; // deleted in the work tree
        }
        let dest = to.join(&name);
        std::fs::create_dir_all(dest.parent().unwrap()).unwrap();
        std::fs::copy(&from, &dest).unwrap();
    }
}

#[test]
fn an_installed_binary_works_in_a_fresh_directory_after_the_checkout_is_gone() {
    // Long: the README's path for a new user, step by step, each depending on the one before.
    let tmp = tempfile::tempdir().unwrap();
    let checkout = tmp.path().join("checkout");
    copy_checkout(&checkout);
    let install = tmp.path().join("install");
    let out = Command::new(env!("CARGO"))
        .args(["install", "--locked", "--quiet", "--path"])
        .arg(checkout.join("harness"))
        .arg("--root")
        .arg(&install)
        // The workspace's own target directory: the release build `.ci/run` (or `just build`)
        // made has every dependency compiled already, so only the copy's two crates are
        // built (a target directory of its own built everything a second time: minutes).
        .env("CARGO_TARGET_DIR", root().join("target"))
        .stdin(Stdio::null())
        .output()
        .expect("cargo install");
    assert!(
        out.status.success(),
        "cargo install --path harness failed\n{}",
        text_of(&out)
    );
    std::fs::remove_dir_all(&checkout).unwrap();
    let binary = install.join("bin/limiter-harness");

    let service = tmp.path().join("service");
    std::fs::create_dir_all(service.join("ratelimit")).unwrap();
    for file in ["adapter.py", "fixed_window_fixed.py"] {
        std::fs::copy(
            root().join("examples/python").join(file),
            service.join("ratelimit").join(file),
        )
        .unwrap();
    }
    let run = |args: &[&str]| -> Output {
        Command::new(&binary)
            .current_dir(&service)
            .args(args)
            .env_remove("GITHUB_STEP_SUMMARY")
            .output()
            .expect("run the installed binary")
    };

    let out = run(&[
        "run",
        "immortal-counter",
        "--limiter",
        "get-then-incr",
        "--backend",
        "process",
        "--no-progress",
    ]);
    assert_eq!(
        out.status.code(),
        Some(1),
        "a shipped scenario from the binary\n{}",
        text_of(&out)
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains(
            "reproduce: limiter-harness run immortal-counter --limiter get-then-incr --seed 7 --backend process"
        ),
        "{stdout}"
    );
    assert!(
        !stdout.contains(checkout.to_str().unwrap()),
        "nothing points into the deleted checkout: {stdout}"
    );

    let out = run(&[
        "init",
        "--limiter",
        "exec:python3 ratelimit/fixed_window_fixed.py",
        "--name",
        "api",
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", text_of(&out));
    let suite = service.join("limiter-harness.toml");
    let text = std::fs::read_to_string(&suite).unwrap();
    std::fs::write(
        &suite,
        text.replace(
            "scenarios = [\"*\"]",
            "scenarios = [\"immortal-counter\", \"steady-control\"]",
        ),
    )
    .unwrap();
    let out = run(&["ci", "--no-progress"]);
    assert_eq!(out.status.code(), Some(1), "no baseline yet\n{}", text_of(&out));
    let out = run(&["ci", "--accept", "--no-progress"]);
    assert_eq!(out.status.code(), Some(0), "{}", text_of(&out));
    assert!(
        service
            .join("limiter-harness/baseline/immortal-counter--api.md")
            .is_file()
    );
    let out = run(&["ci", "--no-progress"]);
    assert_eq!(out.status.code(), Some(0), "as in the baseline\n{}", text_of(&out));

    let out = run(&["scenarios", "export", "scenarios"]);
    assert_eq!(out.status.code(), Some(0), "{}", text_of(&out));
    assert!(service.join("scenarios/shared-cache-eviction.toml").is_file());

    audit_a_server(&binary, &service);
}

/// `audit` of a server holding limiter keys, one without a TTL: exit 1, naming it.
fn audit_a_server(binary: &Path, dir: &Path) {
    let port = free_port();
    let mut server = Command::new("redis-server")
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
        .expect("redis-server (apt-get install redis-server)");
    let url = format!("redis://127.0.0.1:{port}");
    let cli = |args: &[&str]| {
        for _ in 0..100 {
            let out = Command::new("redis-cli")
                .args(["-p", &port.to_string()])
                .args(args)
                .output()
                .unwrap();
            if out.status.success() && !String::from_utf8_lossy(&out.stdout).contains("Connection refused") {
                return;
            }
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
        panic!("redis-cli {args:?} failed");
    };
    cli(&["SET", "rl:1", "3", "PX", "60000"]);
    cli(&["SET", "rl:2", "9"]);
    let out = Command::new(binary)
        .current_dir(dir)
        .args(["audit", "--url", &url, "--keys", "rl:*", "--no-progress"])
        .output()
        .unwrap();
    let _ = server.kill();
    let _ = server.wait();
    assert_eq!(out.status.code(), Some(1), "a key without TTL\n{}", text_of(&out));
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("rl:2"),
        "{}",
        text_of(&out)
    );
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}
