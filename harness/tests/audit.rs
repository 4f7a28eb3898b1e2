//! `limiter-harness audit` against fresh redis-server processes, as a user with a read-only
//! ACL: the counts it reports, the exit codes, and — watched by MONITOR, the server's own
//! command table and ACL LOG — that it sends nothing but reads.
//!
//! The ACL is the one docs/audit.md recommends: `resetkeys %R~*` (keys may be read, not
//! written), `resetchannels`, `-@all` and then only the commands the audit sends. Not
//! `+@read` (it grants GET, HGETALL, ...: key values) nor `+@connection` (it grants CLIENT
//! KILL and CLIENT PAUSE).

use std::collections::{BTreeMap, BTreeSet};
use std::process::Output;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures::StreamExt;
use limiter_harness::backend::{Backend, ProcessBackend, ServerHandle};
use limiter_harness::history::ServerRole;
use redis::aio::MultiplexedConnection;

const AUDITOR_ACL: &str = "on >pw resetkeys %R~* resetchannels -@all +scan +pttl +info +dbsize +ping";

/// A fresh redis-server process and an admin connection to it.
struct Server {
    handle: Box<dyn ServerHandle>,
    admin: MultiplexedConnection,
    port: String,
}

impl Server {
    async fn start(name: &str) -> Self {
        let backend = ProcessBackend::new(std::path::Path::new("redis-server")).expect("these tests need redis-server");
        let handle = backend
            .start(
                ServerRole::Limiter,
                &format!("{}-audit-{name}", std::process::id()),
                Default::default(),
            )
            .await
            .expect("start redis-server");
        let admin = redis::Client::open(handle.url())
            .unwrap()
            .get_multiplexed_async_connection()
            .await
            .expect("connect as admin");
        let port = handle.url().rsplit(':').next().unwrap().to_owned();
        Self { handle, admin, port }
    }

    async fn cmd<T: redis::FromRedisValue>(&mut self, args: &[&str]) -> T {
        let mut cmd = redis::Cmd::new();
        for arg in args {
            cmd.arg(*arg);
        }
        cmd.query_async(&mut self.admin)
            .await
            .unwrap_or_else(|e| panic!("{args:?}: {e}"))
    }

    /// `SET` each (key, PX or none) in pipelines of 1000.
    async fn write(&mut self, keys: &[(String, Option<u64>)]) {
        for chunk in keys.chunks(1000) {
            let mut pipe = redis::pipe();
            for (key, px) in chunk {
                match px {
                    Some(ms) => pipe.cmd("SET").arg(key).arg(1).arg("PX").arg(*ms).ignore(),
                    None => pipe.cmd("SET").arg(key).arg(1).ignore(),
                };
            }
            let () = pipe.query_async(&mut self.admin).await.unwrap();
        }
    }

    async fn add_auditor(&mut self, extra: &str) {
        let mut args = vec!["ACL", "SETUSER", "auditor"];
        args.extend(AUDITOR_ACL.split(' '));
        args.extend(extra.split_whitespace());
        let () = self.cmd(&args).await;
        let () = self.cmd(&["ACL", "LOG", "RESET"]).await;
    }

    fn auditor_url(&self) -> String {
        format!("redis://auditor:pw@127.0.0.1:{}", self.port)
    }

    /// `(reason, object)` of every ACL LOG entry.
    async fn acl_denials(&mut self) -> Vec<(String, String)> {
        let entries: Vec<BTreeMap<String, redis::Value>> = self.cmd(&["ACL", "LOG"]).await;
        let text =
            |e: &BTreeMap<String, redis::Value>, field: &str| redis::from_redis_value_ref::<String>(&e[field]).unwrap();
        entries.iter().map(|e| (text(e, "reason"), text(e, "object"))).collect()
    }

    /// A counter of INFO stats.
    async fn stat(&mut self, name: &str) -> u64 {
        let stats: String = self.cmd(&["INFO", "stats"]).await;
        limiter_harness::observer::info_field(&stats, name).expect("an INFO stats field")
    }

    /// Times the server has run `command` (INFO commandstats).
    async fn calls(&mut self, command: &str) -> u64 {
        let stats: String = self.cmd(&["INFO", "commandstats"]).await;
        stats
            .lines()
            .find_map(|l| l.strip_prefix(&format!("cmdstat_{command}:calls=")))
            .and_then(|rest| rest.split(',').next()?.parse().ok())
            .unwrap_or(0)
    }
}

async fn audit(args: &[&str]) -> Output {
    audit_child(args).wait_with_output().await.expect("run limiter-harness")
}

fn audit_child(args: &[&str]) -> tokio::process::Child {
    tokio::process::Command::new(env!("CARGO_BIN_EXE_limiter-harness"))
        .arg("audit")
        .args(args)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("spawn limiter-harness")
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

fn json(out: &Output) -> serde_json::Value {
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{e}: {}{}", text(&out.stdout), text(&out.stderr)))
}

/// Every line MONITOR shows, collected on a task of its own until the sentinel PING.
struct Watch {
    lines: Arc<Mutex<Vec<String>>>,
}

impl Watch {
    async fn start(server: &Server) -> Self {
        let client = redis::Client::open(server.handle.url()).unwrap();
        let mut monitor = client.get_async_monitor().await.expect("MONITOR");
        let lines = Arc::new(Mutex::new(Vec::new()));
        let sink = lines.clone();
        tokio::spawn(async move {
            let mut stream = monitor.on_message::<String>();
            while let Some(line) = stream.next().await {
                sink.lock().unwrap().push(line);
            }
        });
        Self { lines }
    }

    /// The commands (arguments unquoted) from clients other than `admin_addr`, once the
    /// admin's sentinel PING has shown up (everything before it has been seen).
    async fn commands_except(&self, server: &mut Server, admin_addr: &str) -> Vec<Vec<String>> {
        let _: String = server.cmd(&["PING", "audit-watch-done"]).await;
        let started = Instant::now();
        while !self
            .lines
            .lock()
            .unwrap()
            .iter()
            .any(|l| l.contains("audit-watch-done"))
        {
            assert!(
                started.elapsed() < Duration::from_secs(10),
                "MONITOR never showed the sentinel"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        self.lines
            .lock()
            .unwrap()
            .iter()
            .filter(|l| !l.contains(&format!(" {admin_addr}]")))
            .map(|l| monitor_args(l))
            .collect()
    }
}

/// `1700000000.123 [0 127.0.0.1:5555] "SCAN" "0" "MATCH" "rl:*"` → ["SCAN", "0", "MATCH", "rl:*"].
fn monitor_args(line: &str) -> Vec<String> {
    let rest = &line[line.find("] ").expect("a MONITOR line") + 2..];
    rest.split("\" \"")
        .map(|a| a.trim_matches('"').replace("\\\"", "\""))
        .collect()
}

/// 3000 limiter keys `rl:NNNNN`: 20 without TTL (every 150th), 30 with a day's TTL (every
/// 100th, offset 7), the rest 10 minutes; and 2000 cache keys without TTL.
fn incident_keys() -> Vec<(String, Option<u64>)> {
    let limiter = (0..3000u32).map(|i| {
        let px = if i % 150 == 0 {
            None
        } else if i % 100 == 7 {
            Some(86_400_000)
        } else {
            Some(600_000)
        };
        (format!("rl:{i:05}"), px)
    });
    let cache = (0..2000u32).map(|i| (format!("cache:page:{i}"), None));
    limiter.chain(cache).collect()
}

#[tokio::test]
async fn an_audit_of_a_server_with_both_incidents_reads_only_and_exits_1() {
    let mut server = Server::start("incidents").await;
    server.write(&incident_keys()).await;
    let () = server.cmd(&["CONFIG", "SET", "maxmemory", "64mb"]).await;
    let () = server.cmd(&["CONFIG", "SET", "maxmemory-policy", "allkeys-lru"]).await;
    server.add_auditor("+config|get").await;
    let info: String = server.cmd(&["CLIENT", "INFO"]).await;
    let admin_addr = info
        .split(' ')
        .find_map(|f| f.strip_prefix("addr="))
        .unwrap()
        .to_owned();
    let watch = Watch::start(&server).await;
    let errors_before = server.stat("total_error_replies").await;

    let url = server.auditor_url();
    let out = audit(&[
        "--url",
        &url,
        "--keys",
        "rl:*",
        "--ttl-max-ms",
        "3600000",
        "--format",
        "json",
        "--no-progress",
    ])
    .await;
    assert_eq!(out.status.code(), Some(1), "{}{}", text(&out.stdout), text(&out.stderr));
    assert_incidents_found(&json(&out), &server.port);

    let seen = watch.commands_except(&mut server, &admin_addr).await;
    assert_reads_only(&mut server, &seen).await;
    let pttls = seen.iter().filter(|c| c[0] == "PTTL").count();
    assert_eq!(pttls, 3000, "one PTTL per key, none twice");
    assert!(seen.iter().any(|c| c[0] == "SCAN" && c.contains(&"rl:*".to_owned())));
    // redis-rs's CLIENT SETINFO is turned off: on a server without it (7.0) it would not show
    // in MONITOR but as two more error replies (the test's own connections' are counted before).
    assert!(!seen.iter().any(|c| c[0].eq_ignore_ascii_case("CLIENT")), "{seen:?}");
    assert_eq!(
        server.stat("total_error_replies").await,
        errors_before,
        "no command of the audit was refused"
    );
    assert_eq!(
        server.acl_denials().await,
        Vec::<(String, String)>::new(),
        "nothing denied"
    );
    server.handle.stop().await.unwrap();
}

/// The JSON of the audit of [`incident_keys`] on a 64 MiB allkeys-lru server.
fn assert_incidents_found(doc: &serde_json::Value, port: &str) {
    assert_eq!(doc["verdict"], "invalid");
    assert_eq!(doc["complete"], true);
    assert_eq!(doc["url"], format!("redis://auditor:***@127.0.0.1:{port}"));
    assert_eq!(doc["keys_matched"], 3000);
    assert_eq!(doc["keys_without_ttl"], 20);
    assert_eq!(doc["keys_above_ttl_max"], 30);
    assert_eq!(doc["keys_with_ttl"], 2980);
    assert_eq!(doc["keys_vanished"], 0);
    assert_eq!(doc["ttl_max_ms"], 3_600_000);
    let first: Vec<String> = (0..10).map(|n| format!("rl:{:05}", n * 150)).collect();
    assert_eq!(doc["keys_without_ttl_examples"], serde_json::json!(first));
    assert_eq!(doc["keys_above_ttl_max_examples"][0], "rl:00007");
    assert!(doc["ttl_longest_ms"].as_i64().unwrap() > 3_600_000);
    assert_eq!(doc["server"]["maxmemory_policy"], "allkeys-lru");
    assert_eq!(doc["server"]["maxmemory_bytes"], 64 << 20);
    assert_eq!(doc["server"]["dbsize"], 5000);
    assert_eq!(doc["server"]["keys_total"], 5000);
    assert_eq!(
        doc["server"]["keyspace_notifications"],
        "off (notify-keyspace-events is empty)"
    );
    assert_eq!(doc["risks"][0]["kind"], "shared-eviction");
    let because = doc["risks"][0]["because"].as_str().unwrap();
    assert!(
        because.contains("holds 2000 keys besides the 3000 matched"),
        "{because}"
    );
}

/// Every command is one the audit may send (AUTH is redis-rs's connection set-up), and the
/// server's own command table says none of them writes. MONITOR does not show admin
/// commands such as CONFIG: the ACL LOG check covers those.
async fn assert_reads_only(server: &mut Server, seen: &[Vec<String>]) {
    assert!(!seen.is_empty(), "MONITOR saw the audit");
    let names: BTreeSet<String> = seen.iter().map(|c| c[0].to_uppercase()).collect();
    for command in seen {
        if command[0] == "AUTH" {
            continue;
        }
        let args: Vec<&[u8]> = command.iter().map(|a| a.as_bytes()).collect();
        assert_eq!(limiter_harness::audit::allowed(&args), Ok(()), "{command:?}");
    }
    for name in &names {
        // COMMAND INFO: [[name, arity, flags, first key, last key, step, ACL categories, ...]]
        let info: Vec<Vec<redis::Value>> = server.cmd(&["COMMAND", "INFO", name]).await;
        let strings = |v: &redis::Value| redis::from_redis_value_ref::<Vec<String>>(v).unwrap();
        let (flags, categories) = (strings(&info[0][2]), strings(&info[0][6]));
        assert!(!flags.contains(&"write".to_owned()), "{name} is a write: {flags:?}");
        assert!(
            !categories.contains(&"@write".to_owned()),
            "{name} is a write: {categories:?}"
        );
    }
    let expected: BTreeSet<String> = ["AUTH", "INFO", "DBSIZE", "SCAN", "PTTL"].map(String::from).into();
    assert_eq!(names, expected);
}

#[tokio::test]
async fn only_keys_with_ttls_exit_0_and_a_denied_config_get_is_said_unknown() {
    let mut server = Server::start("ttls").await;
    let keys: Vec<(String, Option<u64>)> = (0..500)
        .map(|i| (format!("LIMITS:LIMITER/u{i}/60"), Some(60_000)))
        .collect();
    server.write(&keys).await;
    server.add_auditor("").await;
    let url = server.auditor_url();
    let out = audit(&[
        "--url",
        &url,
        "--keys",
        "LIMITS:LIMITER/*",
        "--ttl-max-ms",
        "60000",
        "--no-progress",
    ])
    .await;
    let stdout = text(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{stdout}{}", text(&out.stderr));
    assert!(stdout.contains("keys:      500 matched: 500 with a TTL"), "{stdout}");
    assert!(
        stdout.contains("keyspace notifications unknown: CONFIG GET not permitted"),
        "{stdout}"
    );
    assert!(
        stdout.contains("risk:      no-memory-limit: no eviction limit"),
        "{stdout}"
    );
    assert!(
        stdout.contains("verdict:   VALID — all 500 matched keys have a TTL, none above 60000 ms"),
        "{stdout}"
    );
    // The fallback's one denial, and nothing else.
    assert_eq!(
        server.acl_denials().await,
        vec![("command".to_owned(), "config|get".to_owned())]
    );
    server.handle.stop().await.unwrap();
}

#[tokio::test]
async fn a_server_without_such_keys_exits_2_saying_nothing_matched() {
    let mut server = Server::start("empty").await;
    server
        .write(&[("cache:a".to_owned(), None), ("cache:b".to_owned(), None)])
        .await;
    server.add_auditor("+config|get").await;
    let url = server.auditor_url();
    let out = audit(&["--url", &url, "--keys", "rl:*", "--format", "json"]).await;
    assert_eq!(
        out.status.code(),
        Some(2),
        "nothing checked is unknown, not a pass\n{}",
        text(&out.stderr)
    );
    let doc = json(&out);
    assert_eq!(doc["keys_matched"], 0);
    let summary = doc["summary"].as_str().unwrap();
    assert!(
        summary.starts_with("nothing matched `rl:*` in db0 (DBSIZE 2): no limiter key was checked"),
        "{summary}"
    );
    assert!(!summary.contains("all "), "not a vacuous all-good: {summary}");
    server.handle.stop().await.unwrap();
}

#[tokio::test]
async fn an_interrupted_or_lost_audit_is_partial_and_exits_2() {
    let mut server = Server::start("partial").await;
    let keys: Vec<(String, Option<u64>)> = (0..2000).map(|i| (format!("rl:{i}"), Some(600_000))).collect();
    server.write(&keys).await;
    server.add_auditor("+config|get").await;
    let url = server.auditor_url();
    let slow = [
        "--url",
        url.as_str(),
        "--keys",
        "rl:*",
        "--ops-per-s",
        "500",
        "--no-progress",
    ];

    let child = audit_child(&slow);
    wait_until_scanning(&mut server, 0).await;
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(child.id().unwrap() as i32),
        nix::sys::signal::Signal::SIGINT,
    )
    .unwrap();
    let out = child.wait_with_output().await.unwrap();
    let stdout = text(&out.stdout);
    assert_eq!(out.status.code(), Some(2), "{stdout}{}", text(&out.stderr));
    assert!(
        stdout.contains("PARTIAL: interrupted by a signal (SIGINT or SIGTERM); what follows is what was seen before"),
        "{stdout}"
    );
    assert!(
        stdout.contains("verdict:   UNKNOWN — no key without TTL among the"),
        "{stdout}"
    );

    let before = server.calls("pttl").await;
    let child = audit_child(&slow);
    wait_until_scanning(&mut server, before).await;
    server.handle.stop().await.unwrap();
    let out = child.wait_with_output().await.unwrap();
    let stdout = text(&out.stdout);
    assert_eq!(out.status.code(), Some(2), "{stdout}{}", text(&out.stderr));
    assert!(
        stdout.contains("PARTIAL: the server stopped answering mid-scan"),
        "{stdout}"
    );
}

/// Wait until the server has run PTTL more than `before` times.
async fn wait_until_scanning(server: &mut Server, before: u64) {
    let started = Instant::now();
    while server.calls("pttl").await <= before {
        assert!(
            started.elapsed() < Duration::from_secs(20),
            "the audit never started scanning"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test]
async fn setup_errors_exit_3_with_a_help_line() {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let unreachable = format!("redis://127.0.0.1:{port}");
    for (args, says) in [
        (
            vec!["--url", unreachable.as_str(), "--keys", "rl:*"],
            "could not connect to",
        ),
        (vec!["--url", "redis://127.0.0.1:1"], "no --keys given"),
        (vec!["--url", "redis://127.0.0.1:1", "--keys", ""], "--keys '' is empty"),
        (
            vec!["--url", "http://example.invalid", "--keys", "rl:*"],
            "not a server address",
        ),
    ] {
        let out = audit(&args).await;
        let stderr = text(&out.stderr);
        assert_eq!(out.status.code(), Some(3), "{args:?}: {stderr}");
        assert!(stderr.contains(says), "{args:?}: {stderr}");
        assert!(stderr.contains("help: "), "{args:?}: {stderr}");
    }
}
