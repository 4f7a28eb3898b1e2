//! Where Redis runs: containers carry labels and are removed, `clean` removes leftovers,
//! a server the harness did not start is never reconfigured or flooded without consent,
//! and a run that loses its server ends Unknown with its history saved.

use std::collections::HashMap;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use limiter_harness::SetupError;
use limiter_harness::backend::{Direct, LABEL_RUN, UrlBackend, clean};
use limiter_harness::checker::Verdict;
use limiter_harness::history::{Event, ServerRole, read_history};
use limiter_harness::limiter::builtin;
use limiter_harness::runner::{self, RunConfig};
use limiter_harness::scenario::{Scenario, parse_scenario};
use limiter_harness_tests::{Kind, TestServer, backend, scenario};
use testcontainers::bollard::models::ContainerCreateBody;
use testcontainers::bollard::query_parameters::{ListContainersOptionsBuilder, RemoveContainerOptionsBuilder};

async fn containers_of_run(run_id: &str) -> usize {
    let docker = testcontainers::core::client::docker_client_instance().await.unwrap();
    let filters = HashMap::from([("label".to_owned(), vec![format!("{LABEL_RUN}={run_id}")])]);
    let options = ListContainersOptionsBuilder::new().all(true).filters(&filters).build();
    docker.list_containers(Some(options)).await.unwrap().len()
}

#[tokio::test(flavor = "multi_thread")]
async fn containers_are_labelled_answer_and_are_removed_on_stop() {
    let Some(backend) = backend(Kind::Container).await else {
        return;
    };
    let run_id = format!("{}-smoke", std::process::id());
    let server = backend
        .start(ServerRole::Limiter, &run_id, Default::default())
        .await
        .unwrap();
    assert!(
        server.describe().contains("limiter-harness/redis:"),
        "{}",
        server.describe()
    );
    let mut conn = runner::connect(server.url()).await.unwrap();
    let pong: String = redis::cmd("PING").query_async(&mut conn).await.unwrap();
    assert_eq!(pong, "PONG");
    assert_eq!(containers_of_run(&run_id).await, 1);
    server.stop().await.unwrap();
    assert_eq!(containers_of_run(&run_id).await, 0);
}

/// What the harness starts listens on 127.0.0.1 only, with protected mode on: nothing is
/// published on another interface, while the run lasts or after a crash.
#[tokio::test(flavor = "multi_thread")]
async fn servers_listen_on_loopback_only_with_protected_mode() {
    for kind in [Kind::Container, Kind::Process] {
        let Some(backend) = backend(kind).await else {
            continue;
        };
        let run_id = format!("{}-loopback", std::process::id());
        let server = backend
            .start(ServerRole::Limiter, &run_id, Default::default())
            .await
            .unwrap();
        assert!(server.url().starts_with("redis://127.0.0.1:"), "{}", server.url());
        let mut conn = runner::connect(server.url()).await.unwrap();
        for (setting, want) in [("bind", "127.0.0.1"), ("protected-mode", "yes")] {
            let got: Vec<String> = redis::cmd("CONFIG")
                .arg("GET")
                .arg(setting)
                .query_async(&mut conn)
                .await
                .unwrap();
            assert_eq!(got.get(1).map(String::as_str), Some(want), "{kind:?}: {setting}");
        }
        if kind == Kind::Container {
            let docker = testcontainers::core::client::docker_client_instance().await.unwrap();
            let filters = HashMap::from([("label".to_owned(), vec![format!("{LABEL_RUN}={run_id}")])]);
            let options = ListContainersOptionsBuilder::new().all(true).filters(&filters).build();
            let listed = docker.list_containers(Some(options)).await.unwrap();
            let published: Vec<_> = listed
                .iter()
                .flat_map(|c| c.ports.clone().unwrap_or_default())
                .filter(|p| p.public_port.is_some())
                .collect();
            assert!(published.is_empty(), "ports published on the host: {published:?}");
        }
        server.stop().await.unwrap();
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn clean_removes_leftover_containers_and_processes() {
    // Long: one leftover of each kind and a user's own container, then one `clean` over all.
    // The run id names its owner's pid; this one names no live process: a crashed run.
    let run_id = format!("999999999-{:x}", std::process::id());
    let Some(containers) = backend(Kind::Container).await else {
        return;
    };
    let container = containers
        .start(ServerRole::Limiter, &run_id, Default::default())
        .await
        .unwrap();
    let process = backend(Kind::Process)
        .await
        .unwrap()
        .start(ServerRole::Limiter, &run_id, Default::default())
        .await
        .unwrap();
    let pid: i32 = {
        let client = redis::Client::open(process.url()).unwrap();
        let mut conn = client.get_multiplexed_async_connection().await.unwrap();
        let info: String = redis::cmd("INFO").arg("server").query_async(&mut conn).await.unwrap();
        info.lines()
            .find_map(|l| l.strip_prefix("process_id:"))
            .expect("INFO server names its process_id")
            .trim()
            .parse()
            .unwrap()
    };
    // A container a user made from the harness's image: it inherits the image's label, and
    // even a run label set by hand (of a dead owner) names no run this user recorded.
    let image = container
        .describe()
        .rsplit_once('(')
        .and_then(|(_, rest)| rest.strip_suffix(')'))
        .expect("describe names the image")
        .to_owned();
    let users_run = format!("999999998-{:x}", std::process::id());
    let docker = testcontainers::core::client::docker_client_instance().await.unwrap();
    let users = docker
        .create_container(
            None,
            ContainerCreateBody {
                image: Some(image),
                cmd: Some(vec!["redis-server".into()]),
                labels: Some(HashMap::from([(LABEL_RUN.to_owned(), users_run.clone())])),
                ..Default::default()
            },
        )
        .await
        .unwrap();
    // A crashed run: nothing stops these servers.
    std::mem::forget(container);
    std::mem::forget(process);
    assert_eq!(containers_of_run(&run_id).await, 1);

    let summary = clean(false).await;
    let users_left = containers_of_run(&users_run).await;
    let _ = docker
        .remove_container(
            &users.id,
            Some(RemoveContainerOptionsBuilder::new().force(true).build()),
        )
        .await;
    assert_eq!(users_left, 1, "clean removed a container the user made: {summary:?}");
    assert!(!summary.containers_removed.is_empty(), "{summary:?}");
    assert!(summary.processes_killed.contains(&(pid as u32)), "{summary:?}");
    assert_eq!(containers_of_run(&run_id).await, 0);
    tokio::time::sleep(Duration::from_millis(200)).await;
    let state = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    assert!(
        state.is_empty() || state.contains(") Z "),
        "process {pid} still running: {state}"
    );
}

fn quiet_scenario(extra: &str) -> Scenario {
    let text = format!(
        "name = \"u\"\n{extra}\n[limit]\nrequests_max = 5\nwindow_ms = 500\nkey_prefix = \"harness-test:\"\n[[phase]]\nkind = \"steady\"\nrate_per_s = 50\nduration_ms = 600\n[check]\ninvariants = [\"ttl-present\", \"admitted-within-limit\"]\n"
    );
    parse_scenario(Path::new("inline.toml"), &text).unwrap()
}

fn url_run(scenario: Scenario, url: &str, dir: &Path, allow: bool) -> RunConfig {
    RunConfig {
        scenario,
        limiter: builtin("multi-incr-expire-nx").unwrap(),
        backend: Arc::new(UrlBackend::new(url.to_owned())),
        seed: 1,
        report_dir: dir.to_owned(),
        allow_reconfigure: allow,
        via_proxy: false,
        show_progress: false,
        reproduce: "(test)".into(),
    }
}

async fn config_get(conn: &mut redis::aio::MultiplexedConnection, name: &str) -> String {
    let pair: Vec<String> = redis::cmd("CONFIG")
        .arg("GET")
        .arg(name)
        .query_async(conn)
        .await
        .unwrap();
    pair[1].clone()
}

#[tokio::test(flavor = "multi_thread")]
async fn a_server_the_harness_did_not_start_is_left_as_found() {
    // Long: the steps of one story on one server (refused, run, cleaned up, refused again).
    let Some(server) = TestServer::start(Kind::Process).await else {
        return;
    };
    let mut conn = server.conn().await;
    let dir = tempfile::tempdir().unwrap();

    let refused = runner::run(url_run(
        scenario("shared-cache-eviction"),
        &server.url,
        dir.path(),
        false,
    ))
    .await;
    let Err(SetupError::UrlRefused { reasons, .. }) = refused else {
        panic!("expected a refusal, got {refused:?}")
    };
    assert!(
        reasons.contains("maxmemory-policy") && reasons.contains("memory-pressure"),
        "{reasons}"
    );
    assert_eq!(config_get(&mut conn, "maxmemory-policy").await, "noeviction");
    assert_eq!(config_get(&mut conn, "maxmemory").await, "0");

    let () = redis::cmd("SET")
        .arg("someone-elses-key")
        .arg(1)
        .query_async(&mut conn)
        .await
        .unwrap();
    let outcome = runner::run(url_run(quiet_scenario(""), &server.url, dir.path(), false))
        .await
        .unwrap();
    assert_eq!(
        outcome.report.verdict,
        Verdict::Valid,
        "{:#?}",
        outcome.report.invariants
    );
    assert!(
        outcome
            .report
            .problems
            .iter()
            .any(|p| p.contains("keyspace notifications are off")),
        "{:?}",
        outcome.report.problems
    );
    assert_eq!(
        config_get(&mut conn, "notify-keyspace-events").await,
        "",
        "not reconfigured"
    );
    let keys: Vec<String> = redis::cmd("KEYS").arg("*").query_async(&mut conn).await.unwrap();
    assert_eq!(
        keys,
        ["someone-elses-key"],
        "the run's own keys are gone, nothing else touched"
    );

    let () = redis::cmd("SET")
        .arg("harness-test:0")
        .arg(1)
        .query_async(&mut conn)
        .await
        .unwrap();
    let refused = runner::run(url_run(quiet_scenario(""), &server.url, dir.path(), false)).await;
    assert!(
        matches!(refused, Err(SetupError::UrlRefused { ref reasons, .. }) if reasons.contains("already exist")),
        "{refused:?}"
    );
    server.stop().await;
}

async fn keys(conn: &mut redis::aio::MultiplexedConnection, pattern: &str) -> Vec<String> {
    let mut keys: Vec<String> = redis::cmd("KEYS").arg(pattern).query_async(conn).await.unwrap();
    keys.sort();
    keys
}

/// On a user's server the run deletes what it created, by name: a user's key under the
/// cache prefix survives a run that wrote cache entries, and one that wrote none.
#[tokio::test(flavor = "multi_thread")]
async fn the_url_backend_deletes_only_the_keys_it_created() {
    let Some(server) = TestServer::start(Kind::Process).await else {
        return;
    };
    let mut conn = server.conn().await;
    let dir = tempfile::tempdir().unwrap();
    let () = redis::cmd("SET")
        .arg("lh-cache:mine")
        .arg(1)
        .query_async(&mut conn)
        .await
        .unwrap();
    for flood in [
        "",
        "[[fault]]\nkind = \"memory-pressure\"\nphase = \"steady-1\"\nvalue_bytes = 64",
    ] {
        let allow = !flood.is_empty();
        let outcome = runner::run(url_run(quiet_scenario(flood), &server.url, dir.path(), allow))
            .await
            .unwrap();
        assert_eq!(outcome.report.verdict, Verdict::Valid, "{:#?}", outcome.report);
        if allow {
            assert!(
                outcome.report.faults.iter().any(|f| f.fired > 0),
                "{:#?}",
                outcome.report.faults
            );
        }
        assert_eq!(keys(&mut conn, "*").await, ["lh-cache:mine"], "flood: {flood:?}");
    }
    server.stop().await;
}

/// A [[setup]] that fails half-way on a user's server: the run stops with the error, and
/// what the setup wrote before failing is deleted with the rest.
#[tokio::test(flavor = "multi_thread")]
async fn a_setup_that_fails_half_way_leaves_nothing_behind() {
    let Some(server) = TestServer::start(Kind::Process).await else {
        return;
    };
    let mut conn = server.conn().await;
    let dir = tempfile::tempdir().unwrap();
    // INCR of a value that is no integer fails on the server, after the SET wrote it.
    let setup = "[[setup]]\nkind = \"commands\"\nidentity = 0\ncommands = [\"SET {key} abc\", \"INCR {key}\"]";
    let outcome = runner::run(url_run(quiet_scenario(setup), &server.url, dir.path(), true)).await;
    let Err(SetupError::LimiterPrepare { reason, .. }) = outcome else {
        panic!("expected the setup's error, got {outcome:?}")
    };
    assert!(reason.contains("planting identity 0"), "{reason}");
    assert_eq!(
        keys(&mut conn, "*").await,
        Vec::<String>::new(),
        "the half-planted key is gone"
    );
    server.stop().await;
}

/// Another client writing under the limiter's layout during the run: its key is neither
/// judged as the limiter's nor deleted; the run is unknown and names it.
#[tokio::test(flavor = "multi_thread")]
async fn a_key_someone_else_writes_under_the_layout_makes_the_run_unknown_and_is_kept() {
    let Some(server) = TestServer::start(Kind::Process).await else {
        return;
    };
    let mut conn = server.conn().await;
    let dir = tempfile::tempdir().unwrap();
    let scenario = parse_scenario(
        Path::new("inline.toml"),
        "name = \"u\"\n[limit]\nrequests_max = 5\nwindow_ms = 500\nidentities = 2\nkey_prefix = \"harness-test:\"\n[[phase]]\nkind = \"steady\"\nrate_per_s = 50\nduration_ms = 1500\nidentities = [0]\n[check]\ninvariants = [\"ttl-present\", \"admitted-within-limit\"]\n",
    )
    .unwrap();
    let writer = tokio::spawn({
        let mut conn = server.conn().await;
        async move {
            // Once the run is under way (its own key exists), not before its start-up check.
            while !redis::cmd("EXISTS")
                .arg("harness-test:0")
                .query_async::<bool>(&mut conn)
                .await
                .unwrap()
            {
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            let () = redis::cmd("SET")
                .arg("harness-test:1")
                .arg("theirs")
                .query_async(&mut conn)
                .await
                .unwrap();
        }
    });
    let outcome = runner::run(url_run(scenario, &server.url, dir.path(), false))
        .await
        .unwrap();
    writer.await.unwrap();
    assert_eq!(
        outcome.report.verdict,
        Verdict::Unknown,
        "{:#?}",
        outcome.report.invariants
    );
    assert!(
        outcome
            .report
            .problems
            .iter()
            .any(|p| p.contains("harness-test:1") && p.contains("another client")),
        "{:?}",
        outcome.report.problems
    );
    assert_eq!(
        keys(&mut conn, "*").await,
        ["harness-test:1"],
        "theirs kept, the run's deleted"
    );
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn allow_reconfigure_applies_the_scenario_and_restores_the_settings() {
    let Some(server) = TestServer::start(Kind::Process).await else {
        return;
    };
    let mut conn = server.conn().await;
    let dir = tempfile::tempdir().unwrap();
    let scenario = quiet_scenario("[server]\nmaxmemory_policy = \"allkeys-lru\"");
    let outcome = runner::run(url_run(scenario, &server.url, dir.path(), true))
        .await
        .unwrap();
    assert_eq!(
        outcome.report.verdict,
        Verdict::Valid,
        "{:#?}",
        outcome.report.invariants
    );
    assert!(
        outcome
            .report
            .server
            .settings
            .contains(&"maxmemory-policy allkeys-lru".to_owned())
    );
    assert_eq!(
        config_get(&mut conn, "maxmemory-policy").await,
        "noeviction",
        "restored"
    );
    assert_eq!(config_get(&mut conn, "notify-keyspace-events").await, "", "restored");
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn losing_the_server_mid_run_is_unknown_with_the_history_saved() {
    let Some(server) = TestServer::start(Kind::Process).await else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let mut scenario = quiet_scenario("");
    scenario.phases[0].kind = limiter_harness::scenario::PhaseKind::Steady {
        rate_per_s: 50.0,
        duration_ms: 2_000,
        identities: vec![0],
        pick: limiter_harness::scenario::Pick::Random,
        spacing: limiter_harness::scenario::Spacing::Jittered,
        clear_of_expiry_ms: 0,
    };
    let config = url_run(scenario, &server.url, dir.path(), true);
    let url = server.url.clone();
    let mut conn = server.conn().await;
    let killer = tokio::spawn(async move {
        // Mid-traffic, whenever the traffic starts (a run may first wait to fit inside one
        // calendar minute): once the limiter's key exists, a little later.
        let started = std::time::Instant::now();
        while redis::cmd("DBSIZE").query_async::<u64>(&mut conn).await.unwrap() == 0 {
            assert!(
                started.elapsed() < Duration::from_secs(20),
                "the run never sent a request"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        tokio::time::sleep(Duration::from_millis(300)).await;
        server.stop().await;
    });
    let outcome = runner::run(config)
        .await
        .expect("the run ends with a report, not an error");
    killer.await.unwrap();
    assert_eq!(
        outcome.report.verdict,
        Verdict::Unknown,
        "{:#?}",
        outcome.report.invariants
    );
    assert!(outcome.report.observed.counts.indeterminate > 0);
    let history = read_history(&dir.path().join("history.jsonl")).unwrap();
    assert!(matches!(history.first(), Some(Event::Run { .. })));
    assert!(history.iter().any(|e| matches!(e, Event::Problem { fatal: true, .. })));
    let invokes = history.iter().filter(|e| matches!(e, Event::Invoke { .. })).count();
    let completes = history.iter().filter(|e| matches!(e, Event::Complete { .. })).count();
    assert_eq!(invokes, completes, "every invocation has its one completion");
    // The settings it could not put back are kept for `clean`; this server is gone for good.
    let saved: Vec<_> = std::fs::read_dir(std::env::temp_dir().join("limiter-harness-settings"))
        .unwrap()
        .flatten()
        .filter(|e| std::fs::read_to_string(e.path()).is_ok_and(|t| t.contains(&format!("\"{url}\""))))
        .collect();
    assert_eq!(saved.len(), 1, "the old settings are kept for clean");
    std::fs::remove_file(saved[0].path()).unwrap();
}

#[tokio::test(flavor = "multi_thread")]
async fn a_setting_the_server_refuses_half_way_still_restores_the_ones_applied() {
    let Some(server) = TestServer::start(Kind::Process).await else {
        return;
    };
    let mut conn = server.conn().await;
    let dir = tempfile::tempdir().unwrap();
    // maxmemory-policy is applied, then the server refuses the unknown parameter.
    let scenario =
        quiet_scenario("[server]\nmaxmemory_policy = \"allkeys-lru\"\nconfig = { no-such-parameter = \"1\" }");
    let err = runner::run(url_run(scenario, &server.url, dir.path(), true))
        .await
        .expect_err("the server refuses the setting");
    assert!(err.to_string().contains("no-such-parameter"), "{err}");
    assert_eq!(
        config_get(&mut conn, "maxmemory-policy").await,
        "noeviction",
        "the setting applied before the failure is restored"
    );
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn keyspace_notifications_follow_the_database_the_url_selects() {
    let Some(server) = TestServer::start(Kind::Process).await else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let url = format!("{}/3", server.url);
    let outcome = runner::run(url_run(quiet_scenario(""), &url, dir.path(), true))
        .await
        .unwrap();
    assert!(
        outcome.report.observed.keyspace_events > 0,
        "expirations in db 3 were seen: {:#?}",
        outcome.report.observed
    );
    server.stop().await;
}

/// A sample reads every key of the layout once, with its PTTL and value, in key order, and
/// nothing else: not a key past the identities, not another application's key. (Each SCAN
/// batch is read as it arrives; this is the same result the scan-then-read did.)
#[tokio::test(flavor = "multi_thread")]
async fn a_sample_reads_every_layout_key_once_and_nothing_else() {
    use limiter_harness::keys::{KeyLayout, LayoutSource};
    use limiter_harness::observer::sample_keys;
    let server = TestServer::start(Kind::Process).await.expect("a process server");
    let mut conn = server.conn().await;
    let mut pipe = redis::pipe();
    for i in 0..5000u32 {
        pipe.cmd("SET")
            .arg(format!("rl:{i}"))
            .arg(i)
            .arg("PX")
            .arg(60_000)
            .ignore();
    }
    // Matched by both globs (rl:* and rl:*:log), read once.
    pipe.cmd("SET").arg("rl:7:log").arg("x").arg("PX").arg(60_000).ignore();
    pipe.cmd("PERSIST").arg("rl:3").ignore();
    pipe.cmd("SET").arg("other:1").arg("1").ignore();
    let _: () = pipe.query_async(&mut conn).await.unwrap();
    let layout = KeyLayout::parse(
        &["rl:{identity}".to_owned(), "rl:{identity}:log".to_owned()],
        4000,
        LayoutSource::Scenario,
    )
    .unwrap();

    let samples = sample_keys(std::slice::from_mut(&mut conn), &layout, false)
        .await
        .unwrap();

    let mut expected: Vec<String> = (0..4000).map(|i| format!("rl:{i}")).collect();
    expected.push("rl:7:log".to_owned());
    expected.sort();
    let keys: Vec<&str> = samples.iter().map(|s| s.key.as_str()).collect();
    assert_eq!(keys, expected.iter().map(String::as_str).collect::<Vec<_>>());
    for s in &samples {
        match s.key.as_str() {
            "rl:3" => assert_eq!((s.pttl_ms, s.value.as_deref()), (-1, Some("3"))),
            "rl:7:log" => assert_eq!(s.value.as_deref(), Some("x")),
            key => {
                assert!((1..=60_000).contains(&s.pttl_ms), "{s:?}");
                assert_eq!(s.value.as_deref(), key.strip_prefix("rl:"), "{s:?}");
            }
        }
    }
    server.stop().await;
}

/// On a user's server a [[setup]] may touch only the run's own keys, with or without
/// --allow-reconfigure: FLUSHALL, a keyless command or another key is refused before anything
/// is sent, naming the command and what is allowed; the user's keys, in every database, stay.
#[tokio::test(flavor = "multi_thread")]
async fn a_setup_on_a_users_server_touches_only_the_runs_own_keys() {
    let Some(server) = TestServer::start(Kind::Process).await else {
        return;
    };
    let mut conn = server.conn().await;
    for db in [0, 3] {
        let () = redis::cmd("SELECT").arg(db).query_async(&mut conn).await.unwrap();
        let () = redis::cmd("SET")
            .arg("users:key")
            .arg(db)
            .query_async(&mut conn)
            .await
            .unwrap();
    }
    let () = redis::cmd("SELECT").arg(0).query_async(&mut conn).await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    for (command, why) in [
        ("FLUSHALL", "FLUSHALL acts on the whole server"),
        ("DEL users:key", "it names `users:key`"),
        ("SET other:x 1", "it names `other:x`"),
        ("PING", "names no key"),
        ("EVAL \\\"return 1\\\" 0", "EVAL acts on the whole server"),
    ] {
        for allow in [false, true] {
            let setup =
                format!("[[setup]]\nkind = \"commands\"\nidentity = 0\ncommands = [\"SET {{key}} 99\", \"{command}\"]");
            let outcome = runner::run(url_run(quiet_scenario(&setup), &server.url, dir.path(), allow)).await;
            match outcome {
                // Without the flag a setup on a user's server is refused as a whole, as before.
                Err(SetupError::UrlRefused { reasons, .. }) if !allow => {
                    assert!(reasons.contains("[[setup]]"), "{reasons}");
                }
                // With it, each command is checked before any is sent.
                Err(SetupError::Usage(message)) if allow => {
                    assert!(
                        message.contains(why) && message.contains("only the run's own keys"),
                        "{message}"
                    );
                }
                other => panic!("{command} (allow {allow}): expected a refusal, got {other:?}"),
            }
            assert_eq!(keys(&mut conn, "*").await, ["users:key"], "{command}: nothing was sent");
        }
    }
    let () = redis::cmd("SELECT").arg(3).query_async(&mut conn).await.unwrap();
    assert_eq!(keys(&mut conn, "*").await, ["users:key"]);
    server.stop().await;
}

/// The driver's direct connection (a burst worker's own) answers as a multiplexed one does:
/// replies, server errors, transactions (a command refused while queuing fails the whole);
/// it authenticates and selects the URL's database; a request cancelled half-way, or a
/// connection the server closed, costs that request only: the next one is answered on a
/// new socket, never with the stale reply of the one before.
#[tokio::test(flavor = "multi_thread")]
async fn a_direct_connection_answers_like_a_multiplexed_one_and_recovers_from_a_broken_socket() {
    let server = TestServer::start(Kind::Process).await.unwrap();
    let mut admin = server.conn().await;
    let mut direct = Direct::connect(&server.url).await.unwrap();
    direct_answers(&mut direct).await;
    direct_recovers(&mut direct, &mut admin).await;
    direct_authenticates(&server.url, &mut admin).await;
    server.stop().await;
}

async fn direct_answers(direct: &mut Direct) {
    let () = redis::cmd("SET")
        .arg("d:text")
        .arg("abc")
        .query_async(direct)
        .await
        .unwrap();
    let text: String = redis::cmd("GET").arg("d:text").query_async(direct).await.unwrap();
    assert_eq!(text, "abc");
    let refused = redis::cmd("INCR")
        .arg("d:text")
        .query_async::<i64>(direct)
        .await
        .unwrap_err();
    assert_eq!(refused.code(), Some("ERR"), "{refused}");
    let (count, set): (i64, i64) = redis::pipe()
        .atomic()
        .cmd("INCR")
        .arg("d:n")
        .cmd("PEXPIRE")
        .arg("d:n")
        .arg(60_000)
        .query_async(direct)
        .await
        .unwrap();
    assert_eq!((count, set), (1, 1));
    let aborted = redis::pipe()
        .atomic()
        .cmd("INCR")
        .arg("d:n")
        .cmd("NO-SUCH-COMMAND")
        .query_async::<(i64, i64)>(direct)
        .await;
    assert!(aborted.is_err(), "{aborted:?}");
    let n: i64 = redis::cmd("GET").arg("d:n").query_async(direct).await.unwrap();
    assert_eq!(n, 1, "the aborted transaction did not run");
}

async fn direct_recovers(direct: &mut Direct, admin: &mut redis::aio::MultiplexedConnection) {
    // Cancelled while its reply is awaited: the late reply must not answer the next request.
    let mut blpop = redis::cmd("BLPOP");
    blpop.arg("d:list").arg(0.3);
    let blocked = blpop.query_async::<redis::Value>(direct);
    assert!(tokio::time::timeout(Duration::from_millis(50), blocked).await.is_err());
    let () = redis::cmd("RPUSH")
        .arg("d:list")
        .arg("late")
        .query_async(admin)
        .await
        .unwrap();
    let text: String = redis::cmd("GET").arg("d:text").query_async(direct).await.unwrap();
    assert_eq!(text, "abc");

    // Closed by the server: that request fails as a dropped connection, the next is answered.
    let id: i64 = redis::cmd("CLIENT").arg("ID").query_async(direct).await.unwrap();
    let killed: i64 = redis::cmd("CLIENT")
        .arg("KILL")
        .arg("ID")
        .arg(id)
        .query_async(admin)
        .await
        .unwrap();
    assert_eq!(killed, 1);
    let lost = redis::cmd("GET")
        .arg("d:text")
        .query_async::<String>(direct)
        .await
        .unwrap_err();
    assert!(lost.is_connection_dropped(), "{lost}");
    let text: String = redis::cmd("GET").arg("d:text").query_async(direct).await.unwrap();
    assert_eq!(text, "abc");
}

/// The URL's password and database.
async fn direct_authenticates(url: &str, admin: &mut redis::aio::MultiplexedConnection) {
    let () = redis::cmd("CONFIG")
        .arg("SET")
        .arg("requirepass")
        .arg("s3cret")
        .query_async(admin)
        .await
        .unwrap();
    let port = url.rsplit(':').next().unwrap();
    let mut on_db3 = Direct::connect(&format!("redis://:s3cret@127.0.0.1:{port}/3"))
        .await
        .unwrap();
    let info: String = redis::cmd("CLIENT").arg("INFO").query_async(&mut on_db3).await.unwrap();
    assert!(info.contains(" db=3 "), "{info}");
    assert!(
        Direct::connect(&format!("redis://:wrong@127.0.0.1:{port}/3"))
            .await
            .is_err()
    );
}
