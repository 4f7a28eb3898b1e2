//! Installing anywhere: the release binary (what `cargo install --path harness` builds) names
//! nothing in the checkout, and copied out, it works in a fresh service directory as the
//! README shows — `init`, `ci`, `ci --accept`, `ci`, a shipped scenario, `scenarios export`,
//! `audit`. (It used to `cargo install --locked` a copy of the checkout and delete the copy,
//! which also caught a stale `Cargo.lock` or a build input git ignores, at the cost of
//! compiling the harness a second time, ~3 minutes of every `just test`; now the binary runs
//! while the checkout is still there, and only a checkout path in its data is caught.)

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

/// The read-only data of the binary at `path` (its string literals), by `objcopy`.
fn rodata_of(path: &Path, tmp: &Path) -> Vec<u8> {
    let dump = tmp.join("rodata");
    let out = Command::new("objcopy")
        .arg("--dump-section")
        .arg(format!(".rodata={}", dump.display()))
        .arg(path)
        .arg(tmp.join("objcopy.out"))
        .stdin(Stdio::null())
        .output()
        .expect("objcopy (binutils, installed with any C toolchain)");
    assert!(out.status.success(), "objcopy failed\n{}", text_of(&out));
    std::fs::read(dump).unwrap()
}

#[test]
fn an_installed_binary_names_nothing_in_the_checkout_and_works_in_a_fresh_directory() {
    // Long: the README's path for a new user, step by step, each depending on the one before.
    let tmp = tempfile::tempdir().unwrap();
    // The release binary, as `cargo install --path harness` builds it, copied out. Nothing in
    // it may name the checkout (an `env!("CARGO_MANIFEST_DIR")`, a build script's OUT_DIR):
    // such a path would be gone for a user whose checkout is (only the debug line tables,
    // which nothing reads at run time, name it).
    let built = Path::new(env!("CARGO_BIN_EXE_limiter-harness"));
    let checkout = root().to_string_lossy().into_owned();
    let rodata = rodata_of(built, tmp.path());
    assert!(
        !rodata.windows(checkout.len()).any(|w| w == checkout.as_bytes()),
        "the binary's data names the checkout {checkout}: an installed binary would look there"
    );
    let install = tmp.path().join("install");
    std::fs::create_dir_all(install.join("bin")).unwrap();
    std::fs::copy(built, install.join("bin/limiter-harness")).unwrap();
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
        !stdout.contains(&checkout),
        "nothing points into the checkout: {stdout}"
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
