//! A Redis Cluster of the harness's own, in processes and in containers: three primaries
//! sharing the slots, a replica each, all agreeing, and gone once stopped; the built-in
//! limiters deciding on it through the `redis` crate's cluster client.

use limiter_harness::SetupError;
use limiter_harness::backend::{
    Backend, Cluster, Conn, LABEL_RUN, SLOTS, StartOptions, connect_cluster, slot_range, start_cluster,
};
use limiter_harness::keys::KeyLayout;
use limiter_harness::limiter::{BUILTIN_NAMES, RequestCtx, Wire, builtin};
use limiter_harness::nemesis::NoFaults;
use limiter_harness::scenario::Limit;
use limiter_harness_tests::{Kind, backend};
use redis::aio::MultiplexedConnection;

/// A cluster of this test process's own on `backend`.
async fn cluster_on(
    backend: &dyn Backend,
    tag: &str,
    primaries: usize,
    replicas: usize,
) -> Result<Cluster, SetupError> {
    let run_id = format!("{}-{tag}", std::process::id());
    start_cluster(backend, &run_id, primaries, replicas, StartOptions::default()).await
}

async fn conn(url: &str) -> MultiplexedConnection {
    limiter_harness::runner::connect(url).await.expect("connect")
}

async fn text(conn: &mut MultiplexedConnection, words: &[&str]) -> String {
    let mut cmd = redis::cmd(words[0]);
    for w in &words[1..] {
        cmd.arg(*w);
    }
    cmd.query_async(conn).await.unwrap()
}

#[tokio::test(flavor = "multi_thread")]
async fn a_cluster_of_three_primaries_with_a_replica_each_serves_every_slot_and_stops() {
    let processes = backend(Kind::Process).await.expect("a process backend");
    let started = std::time::Instant::now();
    let cluster = cluster_on(processes.as_ref(), "cluster", 3, 1)
        .await
        .expect("the cluster starts");
    eprintln!("6 nodes ready in {:?}", started.elapsed());
    assert_eq!(cluster.nodes.len(), 6);
    assert!(cluster.nodes.iter().all(|n| n.cluster_bus_port().is_some()));

    every_node_agrees(&cluster).await;
    a_key_is_served_where_its_slot_is(&cluster).await;
    stop_and_check_gone(cluster).await;
}

/// The same cluster in containers (the harness's image, on the host's network, each node's
/// bus on a port of its own): it forms, a key written through the cluster client reads back,
/// and once stopped no node answers and no container of the run is left.
#[tokio::test(flavor = "multi_thread")]
async fn a_cluster_in_containers_forms_serves_a_key_and_leaves_no_container() {
    let Some(containers) = backend(Kind::Container).await else {
        return;
    };
    let tag = "cluster-containers";
    let started = std::time::Instant::now();
    let cluster = cluster_on(containers.as_ref(), tag, 3, 1)
        .await
        .expect("the cluster starts");
    eprintln!("6 nodes in containers ready in {:?}", started.elapsed());
    assert_eq!(cluster.nodes.len(), 6);
    assert!(cluster.nodes.iter().all(|n| n.cluster_bus_port().is_some()));
    every_node_agrees(&cluster).await;
    let label = format!("label={LABEL_RUN}={}-{tag}", std::process::id());
    assert_eq!(docker_ps(&label).len(), 6, "one container per node");

    let seed = vec![cluster.urls()[0].to_owned()];
    let mut client = connect_cluster(&seed).await.expect("a cluster connection");
    let () = redis::cmd("SET")
        .arg("rl:in-containers")
        .arg(7)
        .query_async(&mut client)
        .await
        .unwrap();
    let read: Option<String> = redis::cmd("GET")
        .arg("rl:in-containers")
        .query_async(&mut client)
        .await
        .unwrap();
    assert_eq!(read.as_deref(), Some("7"));
    drop(client);

    stop_and_check_gone(cluster).await;
    let left = docker_ps(&label);
    assert!(left.is_empty(), "containers left with {label}: {left:?}");
}

/// The containers, running or not, that `docker ps -a --filter FILTER` lists.
fn docker_ps(filter: &str) -> Vec<String> {
    let ps = std::process::Command::new("docker")
        .args(["ps", "-a", "-q", "--filter", filter])
        .output()
        .expect("docker ps");
    assert!(ps.status.success(), "docker ps: {ps:?}");
    String::from_utf8_lossy(&ps.stdout).lines().map(str::to_owned).collect()
}

/// Stop every node of `cluster`; then none answers.
async fn stop_and_check_gone(cluster: Cluster) {
    let urls: Vec<String> = cluster.urls().into_iter().map(str::to_owned).collect();
    cluster.stop().await.expect("stopped");
    for url in urls {
        let client = redis::Client::open(url.as_str()).unwrap();
        assert!(
            client.get_multiplexed_async_connection().await.is_err(),
            "{url} still answers"
        );
    }
}

/// Every node sees the whole cluster, every slot served, and has its role.
async fn every_node_agrees(cluster: &Cluster) {
    for url in cluster.urls() {
        let mut c = conn(url).await;
        let info = text(&mut c, &["CLUSTER", "INFO"]).await;
        assert!(info.contains("cluster_state:ok"), "{url}: {info}");
        assert!(
            info.contains(&format!("cluster_slots_assigned:{SLOTS}")),
            "{url}: {info}"
        );
        let known = format!("cluster_known_nodes:{}", cluster.nodes.len());
        assert!(info.contains(&known), "{url}: {info}");
    }
    for (index, url) in cluster.urls().into_iter().enumerate() {
        let mut c = conn(url).await;
        let role: Vec<redis::Value> = redis::cmd("ROLE").query_async(&mut c).await.unwrap();
        let role = match &role[0] {
            redis::Value::BulkString(b) => String::from_utf8_lossy(b).into_owned(),
            other => format!("{other:?}"),
        };
        let expected = if index < cluster.primaries { "master" } else { "slave" };
        assert_eq!(role, expected, "node {index}");
        // Each primary started with an epoch of its own (a replica reports its primary's): a
        // replica that takes over claims its primary's slots with a higher one.
        let info = text(&mut c, &["CLUSTER", "INFO"]).await;
        let epoch = info.lines().find_map(|l| l.strip_prefix("cluster_my_epoch:"));
        let replicas = cluster.nodes.len() / cluster.primaries - 1;
        let primary = if index < cluster.primaries {
            index
        } else {
            (index - cluster.primaries) / replicas
        };
        assert_eq!(
            epoch.map(str::trim),
            Some((primary + 1).to_string().as_str()),
            "node {index}: {info}"
        );
        // A replica has synced with its primary.
        if index >= cluster.primaries {
            let replication = text(&mut c, &["INFO", "replication"]).await;
            assert!(
                replication.contains("master_link_status:up"),
                "node {index}: {replication}"
            );
        }
    }
}

/// A key is served by the primary whose range holds its slot; the others send the client
/// there with MOVED.
async fn a_key_is_served_where_its_slot_is(cluster: &Cluster) {
    let (owner, slot) = owner_of(cluster, "rl:0").await;
    let mut at_owner = conn(cluster.urls()[owner]).await;
    let () = redis::cmd("SET")
        .arg("rl:0")
        .arg(1)
        .query_async(&mut at_owner)
        .await
        .unwrap();
    let mut elsewhere = conn(cluster.urls()[(owner + 1) % 3]).await;
    let moved = redis::cmd("GET")
        .arg("rl:0")
        .query_async::<Option<String>>(&mut elsewhere)
        .await;
    let e = moved.expect_err("another primary does not serve the key");
    let owner_addr = cluster.urls()[owner].trim_start_matches("redis://").to_owned();
    let said = e.to_string();
    assert!(
        said.to_uppercase().contains("MOVED") && said.contains(&format!("{slot} {owner_addr}")),
        "{said}"
    );
}

/// The same cluster on Valkey 9.1 (installed as CI installs it), with one primary fewer.
#[tokio::test(flavor = "multi_thread")]
async fn a_valkey_cluster_forms_too() {
    let valkey = limiter_harness_tests::installed_backend("valkey-9.1").await;
    let cluster = cluster_on(valkey.as_ref(), "cluster-valkey", 2, 1)
        .await
        .expect("the cluster starts");
    assert_eq!(cluster.nodes.len(), 4);
    every_node_agrees(&cluster).await;
    cluster.stop().await.expect("stopped");
}

/// Redis 6.2 has neither `cluster-port` nor `CLUSTER ADDSLOTSRANGE`: asked for a cluster, it
/// is refused before any node starts, with what would do.
#[tokio::test(flavor = "multi_thread")]
async fn a_cluster_on_redis_6_2_is_refused_with_the_version_it_needs() {
    let old = limiter_harness_tests::installed_backend("redis-6.2").await;
    let refused = cluster_on(old.as_ref(), "cluster-6.2", 3, 0)
        .await
        .expect_err("no cluster on 6.2");
    let said = refused.to_string();
    assert!(
        said.contains("needs Redis 7.0 or later") && said.contains("6.2"),
        "{said}"
    );
}

/// Every built-in decides on a cluster through the `redis` crate's cluster client (the
/// limiter API's [`Conn::Cluster`]): its script is loaded where its key lives, its commands
/// reach the primary that owns the key's slot, and it admits the limit, then rejects, with a
/// TTL on the key there — or on its keys, tagged with it. The untagged multi-key built-ins
/// are refused with CROSSSLOT on every request.
#[tokio::test(flavor = "multi_thread")]
async fn every_builtin_decides_on_a_cluster_through_the_cluster_client() {
    let processes = backend(Kind::Process).await.expect("a process backend");
    let cluster = cluster_on(processes.as_ref(), "cluster-builtins", 3, 0)
        .await
        .expect("the cluster starts");
    let seed = vec![cluster.urls()[0].to_owned()];
    let mut client = Conn::from(connect_cluster(&seed).await.expect("a cluster connection"));
    let limit = Limit {
        requests_max: 10,
        window_ms: 60_000,
        identities: 1,
        instances: 1,
        key_prefix: "rl:".into(),
        keys: None,
    };
    let layout = KeyLayout::default_for(&limit.key_prefix, limit.identities);
    let mut owners = std::collections::BTreeSet::new();
    for (n, name) in BUILTIN_NAMES.iter().enumerate() {
        let limiter = builtin(name).unwrap();
        limiter.prepare(&mut client, &limit).await.unwrap();
        let key = format!("cluster:{name}");
        let mut allowed = Vec::new();
        for i in 0..15 {
            let ctx = RequestCtx {
                id: (n * 100 + i) as u64,
                identity: 0,
                ordinal: i as u64 + 1,
                key: key.clone(),
                instance: 0,
                now_ms: std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .unwrap()
                    .as_millis() as u64,
            };
            let mut wire = Wire::new(&mut client, &NoFaults, &ctx, &layout);
            let decision = limiter.acquire(&mut wire, &key, &limit).await;
            if name.ends_with("-untagged") {
                // Its two keys hash to different slots: the server refuses every request.
                let error = decision.expect_err("CROSSSLOT").to_string();
                assert!(error.to_uppercase().contains("CROSSSLOT"), "{name}: {error}");
                continue;
            }
            allowed.push(decision.unwrap_or_else(|e| panic!("{name}: {e}")).allowed);
        }
        if name.ends_with("-untagged") {
            continue;
        }
        assert_eq!(allowed, [vec![true; 10], vec![false; 5]].concat(), "{name}");
        // The key, or the keys tagged with it (`{key}.tokens`): all in the key's slot.
        let (owner, _) = owner_of(&cluster, &key).await;
        let mut node = conn(cluster.urls()[owner]).await;
        let keys: Vec<String> = redis::cmd("KEYS")
            .arg(format!("*{key}*"))
            .query_async(&mut node)
            .await
            .unwrap();
        assert!(!keys.is_empty(), "{name}: no key on node {owner}");
        let windows = if limiter.declared_keys(&limit).is_some() { 2 } else { 1 };
        for key in keys {
            let pttl: i64 = redis::cmd("PTTL").arg(&key).query_async(&mut node).await.unwrap();
            assert!(
                pttl > 0 && pttl <= windows * 60_000,
                "{name}: PTTL {pttl} of {key} on node {owner}"
            );
        }
        owners.insert(owner);
    }
    assert!(owners.len() > 1, "the keys fell on one node only: {owners:?}");
    cluster.stop().await.expect("stopped");
}

/// The primary (of three) whose slot range holds `key`, and the key's slot.
async fn owner_of(cluster: &Cluster, key: &str) -> (usize, i64) {
    let slot: i64 = redis::cmd("CLUSTER")
        .arg("KEYSLOT")
        .arg(key)
        .query_async(&mut conn(cluster.urls()[0]).await)
        .await
        .unwrap();
    let owner = (0..3)
        .find(|&i| {
            let (a, b) = slot_range(i, 3);
            (a as i64..=b as i64).contains(&slot)
        })
        .unwrap();
    (owner, slot)
}

/// A scenario with `topology = "cluster"` runs through the runner like any other: the
/// harness starts three primaries, the built-in decides through the cluster client, and the
/// observer samples and listens on every primary — the keys sampled and the windows seen
/// ending come from all three nodes, not only from the seed node the run's URL names.
#[tokio::test(flavor = "multi_thread")]
async fn a_cluster_scenario_is_observed_on_every_primary() {
    use limiter_harness::backend::{key_slot, primary_of_slot};
    use limiter_harness::history::Event;
    let (report, events) = valid_run("cluster-steady").await;
    let topology = report.server.topology.as_deref().unwrap_or_default();
    assert!(topology.contains("3 primaries"), "{topology:?}");
    let (mut sampled, mut expired) = (std::collections::BTreeSet::new(), std::collections::BTreeSet::new());
    for event in &events {
        match event {
            Event::Sample { keys, .. } => sampled.extend(keys.iter().map(|k| k.key.clone())),
            Event::Keyspace { key, event, .. } if event == "expired" => {
                expired.insert(key.clone());
            }
            _ => {}
        }
    }
    let owners = |keys: &std::collections::BTreeSet<String>| -> std::collections::BTreeSet<usize> {
        keys.iter()
            .map(|k| primary_of_slot(key_slot(k.as_bytes()), 3))
            .collect()
    };
    assert_eq!(sampled.len(), 8, "every identity's key sampled: {sampled:?}");
    assert_eq!(owners(&sampled).len(), 3, "sampled on every primary: {sampled:?}");
    assert_eq!(
        owners(&expired).len(),
        3,
        "expiries heard from every primary: {expired:?}"
    );
}

/// The harness's slot function agrees with the server's `CLUSTER KEYSLOT`.
#[tokio::test(flavor = "multi_thread")]
async fn the_harness_computes_a_keys_slot_as_the_cluster_does() {
    let processes = backend(Kind::Process).await.expect("a process backend");
    let cluster = cluster_on(processes.as_ref(), "cluster-keyslot", 1, 0)
        .await
        .expect("the cluster starts");
    let mut c = conn(cluster.urls()[0]).await;
    for key in ["rl:0", "rl:7", "{rl:3}:prev", "app:{}:x", "a{b}c{d}", "123456789", ""] {
        let theirs: u16 = redis::cmd("CLUSTER")
            .arg("KEYSLOT")
            .arg(key)
            .query_async(&mut c)
            .await
            .unwrap();
        assert_eq!(limiter_harness::backend::key_slot(key.as_bytes()), theirs, "{key:?}");
    }
    cluster.stop().await.expect("stopped");
}

/// A run on a cluster the harness did not start (`--backend url` naming one of its nodes),
/// returning the setup error instead of panicking; with the run's history.
async fn run_on_url(
    scenario: limiter_harness::scenario::Scenario,
    spec: &str,
    seed: &str,
    allow_reconfigure: bool,
) -> Result<(limiter_harness::report::Report, Vec<limiter_harness::history::Event>), SetupError> {
    let dir = tempfile::tempdir().unwrap();
    let outcome = limiter_harness::runner::run(limiter_harness::runner::RunConfig {
        scenario,
        limiter: limiter_harness::limiter::resolve(spec).unwrap(),
        backend: std::sync::Arc::new(limiter_harness::backend::UrlBackend::new(seed.to_owned())),
        seed: 1,
        report_dir: dir.path().to_owned(),
        allow_reconfigure,
        via_proxy: false,
        show_progress: false,
        reproduce: String::new(),
    })
    .await?;
    let events = limiter_harness::history::read_history(&dir.path().join("history.jsonl")).unwrap();
    Ok((outcome.report, events))
}

/// `cluster-steady` as a team would run it on its own cluster: without the scenario's
/// `maxmemory_policy`, so that nothing needs `--allow-reconfigure`.
fn cluster_steady_as_is() -> limiter_harness::scenario::Scenario {
    let path = limiter_harness_tests::scenario_path("cluster-steady");
    let text = std::fs::read_to_string(&path)
        .unwrap()
        .replace("maxmemory_policy = \"noeviction\"", "");
    limiter_harness::scenario::parse_scenario(&path, &text).expect("parses")
}

/// `CONFIG GET name` on the node at `url`: its value.
async fn config_get(url: &str, name: &str) -> String {
    let pair: Vec<String> = redis::cmd("CONFIG")
        .arg("GET")
        .arg(name)
        .query_async(&mut conn(url).await)
        .await
        .unwrap();
    pair.get(1).cloned().unwrap_or_default()
}

/// `CONFIG SET name value` on every node of `cluster`.
async fn config_set_everywhere(cluster: &Cluster, name: &str, value: &str) {
    for url in cluster.urls() {
        let () = redis::cmd("CONFIG")
            .arg("SET")
            .arg(name)
            .arg(value)
            .query_async(&mut conn(url).await)
            .await
            .unwrap();
    }
}

/// Every key of every primary of `cluster` matching `pattern`.
async fn keys_on(cluster: &Cluster, pattern: &str) -> Vec<String> {
    let mut all = Vec::new();
    for url in cluster.primary_urls() {
        let mut keys: Vec<String> = redis::cmd("KEYS")
            .arg(pattern)
            .query_async(&mut conn(url).await)
            .await
            .unwrap();
        all.append(&mut keys);
    }
    all.sort();
    all
}

/// Three primaries in processes, started by this test as a user's cluster would be: publishing
/// the keyspace notifications the observer needs.
async fn users_cluster(tag: &str) -> Cluster {
    let processes = backend(Kind::Process).await.expect("a process backend");
    let cluster = cluster_on(processes.as_ref(), tag, 3, 0)
        .await
        .expect("the user's cluster starts");
    config_set_everywhere(&cluster, "notify-keyspace-events", "KA").await;
    cluster
}

/// The team's limiter on a cluster: the Python exec adapter on redis-py's `RedisCluster`.
fn python_cluster_adapter() -> String {
    format!(
        "exec:python3 {}",
        limiter_harness_tests::example("python/fixed_window_cluster.py").display()
    )
}

/// A Redis Cluster the harness did not start, reached through one node (`--backend url`):
/// the harness finds the other nodes itself, and the team's own limiter — an exec adapter on
/// redis-py's `RedisCluster`, behind a fault proxy per node — is judged as on a cluster the
/// harness starts. Nothing of the cluster is reconfigured: the proxies rewrite the nodes'
/// addresses in `CLUSTER SLOTS` and in redirections instead of the nodes announcing them, so
/// every node's traffic still crosses its proxy. A multi-key limiter without hash tags meets
/// `CROSSSLOT` there too. Afterwards the run's keys are gone from every primary, and a key of
/// the user's, the nodes' announced ports and their counters of redirections are as they were.
#[tokio::test(flavor = "multi_thread")]
async fn a_cluster_the_harness_did_not_start_is_tested_through_one_node_and_left_as_found() {
    use limiter_harness::checker::Verdict;
    use limiter_harness::history::Event;
    let cluster = users_cluster("users-cluster").await;
    let seed = cluster.urls()[1].to_owned();
    let mut users = connect_cluster(std::slice::from_ref(&seed))
        .await
        .expect("a cluster connection");
    let () = redis::cmd("SET")
        .arg("user:keep")
        .arg("theirs")
        .query_async(&mut users)
        .await
        .unwrap();
    // The user's clients have met redirections before the run: not the run's to count.
    for url in cluster.primary_urls() {
        let _: redis::RedisResult<Option<String>> = redis::cmd("GET")
            .arg("user:keep")
            .query_async(&mut conn(url).await)
            .await;
    }

    let adapter = python_cluster_adapter();
    let (report, events) = run_on_url(cluster_steady_as_is(), &adapter, &seed, false)
        .await
        .expect("the run starts");
    assert_eq!(report.verdict, Verdict::Valid, "{:#?}", report.invariants);
    assert_eq!(
        proxies_crossed(&events),
        (0..3).collect(),
        "requests crossed every primary's proxy"
    );
    let server = events.iter().find_map(|e| match e {
        Event::Server { at, .. } => Some(at.clone()),
        _ => None,
    });
    assert!(server.unwrap().contains("the harness did not start of 3 primaries"));
    untagged_keys_meet_crossslot_there_too(&seed).await;

    assert_eq!(
        keys_on(&cluster, "rl:*").await,
        Vec::<String>::new(),
        "the run's keys are deleted"
    );
    assert_eq!(
        keys_on(&cluster, "user:*").await,
        ["user:keep"],
        "the user's key is left"
    );
    for url in cluster.urls() {
        assert_eq!(config_get(url, "cluster-announce-port").await, "0", "{url}");
        assert_eq!(config_get(url, "notify-keyspace-events").await, "AK", "{url}");
    }
    cluster.stop().await.expect("stopped");
}

/// A cluster that names its nodes by hostname (`cluster-announce-hostname` with
/// `cluster-preferred-endpoint-type hostname`, as managed clusters do): its `CLUSTER SLOTS` and
/// redirections say `localhost:PORT`. The proxies learn each node's hostname from its
/// `CLUSTER NODES` and rewrite it as they do an IP, so the limiter's traffic still crosses
/// every primary's proxy (the team's adapter on redis-py's `RedisCluster`), and no reply
/// named an address the proxies did not know.
#[tokio::test(flavor = "multi_thread")]
async fn a_cluster_naming_its_nodes_by_hostname_keeps_the_limiter_inside_the_proxies() {
    use limiter_harness::checker::Verdict;
    use limiter_harness::history::Event;
    let cluster = users_cluster("hostnames").await;
    config_set_everywhere(&cluster, "cluster-announce-hostname", "localhost").await;
    config_set_everywhere(&cluster, "cluster-preferred-endpoint-type", "hostname").await;
    // The hostnames travel by gossip: until every node names every node by one.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    for url in cluster.urls() {
        while text(&mut conn(url).await, &["CLUSTER", "NODES"])
            .await
            .matches(",localhost")
            .count()
            < 3
        {
            assert!(
                std::time::Instant::now() < deadline,
                "{url}: the hostnames never spread"
            );
            tokio::time::sleep(std::time::Duration::from_millis(100)).await;
        }
    }
    let seed = cluster.urls()[2].to_owned();
    let mut plain = conn(&seed).await;
    let slots: redis::Value = redis::cmd("CLUSTER")
        .arg("SLOTS")
        .query_async(&mut plain)
        .await
        .unwrap();
    assert!(
        format!("{slots:?}").contains("localhost"),
        "the cluster names its nodes by hostname: {slots:?}"
    );

    let adapter = python_cluster_adapter();
    let (report, events) = run_on_url(cluster_steady_as_is(), &adapter, &seed, false)
        .await
        .expect("the run starts");
    assert_eq!(report.verdict, Verdict::Valid, "{:#?}", report.invariants);
    for event in &events {
        if let Event::Problem { detail, .. } = event {
            assert!(!detail.contains("no fault proxy"), "{detail}");
        }
    }
    assert_eq!(
        proxies_crossed(&events),
        (0..3).collect(),
        "requests crossed every primary's proxy"
    );
    cluster.stop().await.expect("stopped");
}

/// The nodes whose proxies the limiter's requests crossed, by the run's wire lines.
fn proxies_crossed(events: &[limiter_harness::history::Event]) -> std::collections::BTreeSet<u32> {
    let mut through = std::collections::BTreeSet::new();
    for event in events {
        if let limiter_harness::history::Event::Wire {
            node, request: Some(_), ..
        } = event
        {
            through.insert(node.expect("on a cluster every wire line names its node"));
        }
    }
    through
}

/// `two-key-token-bucket-untagged` on the user's cluster of `seed`: every request meets
/// `CROSSSLOT`, and the report counts the run's own redirections only.
async fn untagged_keys_meet_crossslot_there_too(seed: &str) {
    let (untagged, _) = run_on_url(cluster_steady_as_is(), "two-key-token-bucket-untagged", seed, false)
        .await
        .expect("the run starts");
    assert_eq!(
        untagged.verdict,
        limiter_harness::checker::Verdict::Invalid,
        "{:#?}",
        untagged.invariants
    );
    let crossslot = untagged.observed.cluster_replies.join("; ");
    assert!(crossslot.contains("CROSSSLOT"), "{crossslot}");
    assert!(
        !crossslot.contains("MOVED"),
        "only this run's replies are counted: {crossslot}"
    );
}

/// With `--allow-reconfigure`, a scenario's settings go to every node of a cluster the
/// harness did not start, saved before each change, and each node gets its own values back
/// at the end.
#[tokio::test(flavor = "multi_thread")]
async fn a_users_cluster_run_with_allow_reconfigure_gets_every_nodes_settings_back() {
    use limiter_harness::history::Event;
    let processes = backend(Kind::Process).await.expect("a process backend");
    let cluster = cluster_on(processes.as_ref(), "users-settings", 3, 0)
        .await
        .expect("the user's cluster starts");
    config_set_everywhere(&cluster, "maxmemory-policy", "allkeys-lru").await;
    let scenario = limiter_harness_tests::scenario("cluster-steady");
    let (report, events) = run_on_url(scenario, "lua-fixed-window", cluster.urls()[0], true)
        .await
        .expect("the run starts");
    assert_eq!(
        report.verdict,
        limiter_harness::checker::Verdict::Valid,
        "{:#?}",
        report.invariants
    );
    let applied = events
        .iter()
        .find_map(|e| match e {
            Event::Server { settings, .. } => Some(settings.join(", ")),
            _ => None,
        })
        .unwrap();
    assert!(applied.contains("maxmemory-policy noeviction"), "{applied}");
    // Valid with notifications on: every primary published them during the run (a node
    // that did not would leave its keys' expiries unseen, and their count drops resets).
    for url in cluster.urls() {
        assert_eq!(config_get(url, "maxmemory-policy").await, "allkeys-lru", "{url}");
        assert_eq!(config_get(url, "notify-keyspace-events").await, "", "{url}");
    }
    // Every node's saved values are gone once it has them back.
    let saved = std::env::temp_dir().join("limiter-harness-settings");
    for file in std::fs::read_dir(&saved).into_iter().flatten().flatten() {
        let text = std::fs::read_to_string(file.path()).unwrap_or_default();
        let kept = cluster.urls().into_iter().find(|url| text.contains(*url));
        assert!(kept.is_none(), "{} still holds {kept:?}", file.path().display());
    }
    cluster.stop().await.expect("stopped");
}

/// On a cluster the harness did not start, what would reconfigure it or act on its nodes is
/// refused before anything is sent, and so is a key of the layout already on any primary; a
/// cluster scenario on a server that is not a cluster node, and a one-server scenario on a
/// cluster node, are refused saying what would run them.
#[tokio::test(flavor = "multi_thread")]
async fn what_a_users_cluster_cannot_take_is_refused_by_name() {
    let processes = backend(Kind::Process).await.expect("a process backend");
    let cluster = cluster_on(processes.as_ref(), "users-refusals", 3, 0)
        .await
        .expect("the user's cluster starts");
    let seed = cluster.urls()[0].to_owned();

    let reshard = limiter_harness_tests::scenario("cluster-resharding");
    let refused = run_on_url(reshard, "lua-fixed-window", &seed, true)
        .await
        .expect_err("a reshard of the user's cluster");
    assert!(
        matches!(refused, SetupError::ClusterRefused { .. }) && refused.to_string().contains("fault reshard"),
        "{refused}"
    );

    let alone = limiter_harness_tests::scenario("steady-control");
    let refused = run_on_url(alone, "lua-fixed-window", &seed, true)
        .await
        .expect_err("a one-server scenario on a cluster node");
    assert!(refused.to_string().contains("is a Redis Cluster node"), "{refused}");

    // A key of the layout on the last primary, which the seed does not serve.
    let last = cluster.primaries - 1;
    let (first, end) = slot_range(last, cluster.primaries);
    let key = (0..8)
        .map(|i| format!("rl:{i}"))
        .find(|k| (first..=end).contains(&limiter_harness::backend::key_slot(k.as_bytes())))
        .expect("one of the eight identities' keys is on the last primary");
    let mut users = connect_cluster(std::slice::from_ref(&seed))
        .await
        .expect("a cluster connection");
    let () = redis::cmd("SET")
        .arg(&key)
        .arg(3)
        .query_async(&mut users)
        .await
        .unwrap();
    let refused = run_on_url(cluster_steady_as_is(), "lua-fixed-window", &seed, false)
        .await
        .expect_err("a layout key already there");
    assert!(
        matches!(refused, SetupError::UrlRefused { .. }) && refused.to_string().contains(&format!("`{key}`")),
        "{refused}"
    );
    assert_eq!(
        keys_on(&cluster, "rl:*").await,
        [key],
        "nothing written, nothing deleted"
    );
    cluster.stop().await.expect("stopped");

    let server = limiter_harness_tests::TestServer::start(Kind::Process)
        .await
        .expect("a server");
    let refused = run_on_url(cluster_steady_as_is(), "lua-fixed-window", &server.url, false)
        .await
        .expect_err("a cluster scenario on a server that is not a cluster node");
    assert!(refused.to_string().contains("is not a cluster node"), "{refused}");
    server.stop().await;
}

/// `cluster-resharding`: identity 0's slot moves to another primary mid-traffic. A limiter
/// whose script call follows `ASK` and `MOVED` (the cluster client does, for one command)
/// passes; the move is in the report with each primary's redirections, the key arrives on its
/// new node with its TTL, and the `del` its old node notifies is no deletion.
#[tokio::test(flavor = "multi_thread")]
async fn a_reshard_moves_a_slot_mid_traffic_and_the_limiter_follows_it() {
    use limiter_harness::history::Event;
    let (report, events) = valid_run("cluster-resharding").await;
    // Identity 0's requests follow ASK, then MOVED: none ends in an error.
    assert_eq!(report.observed.counts.errors, 0, "{:?}", report.observed.counts);
    let redirected = report.observed.cluster_replies.join("; ");
    assert!(
        redirected.contains("ASK") && redirected.contains("MOVED"),
        "{redirected}"
    );
    // The key is moved (unless it had just expired: then the limiter writes it anew on the
    // importing primary, after ASK); either way the samples see it while the slot migrates.
    if !report.faults[0].outcome.contains(": 0 key(s) moved") {
        let notified = |what: &str| {
            events
                .iter()
                .any(|e| matches!(e, Event::Keyspace { key, event, .. } if key == "rl:0" && event == what))
        };
        assert!(
            notified("restore") && notified("del"),
            "the move is notified by both nodes"
        );
    }
    let struck_us = report_fault_time(&events);
    let migrating = struck_us + 20_000..struck_us + 280_000;
    let seen: Vec<Option<i64>> = events
        .iter()
        .filter_map(|e| match e {
            Event::Sample { t_start_us, keys, .. } if migrating.contains(t_start_us) => {
                Some(keys.iter().find(|k| k.key == "rl:0").map(|k| k.pttl_ms))
            }
            _ => None,
        })
        .collect();
    assert!(
        seen.iter().flatten().any(|&pttl| pttl > 0),
        "rl:0 while its slot migrated: {seen:?}"
    );
}

/// `cluster-resharding` with Valkey 9's atomic slot migration (`method = "atomic"`) on
/// Valkey 9.1: the slot moves while traffic runs, with no `ASK` (the source serves the slot
/// until it hands it over) and no `del` of the source's copy (a window that ends during the
/// copy is a DEL the source sends, after its `expired`); the key arrives with its TTL,
/// the limiter follows `MOVED`, and every invariant holds.
#[tokio::test(flavor = "multi_thread")]
async fn an_atomic_slot_migration_on_valkey_moves_the_slot_and_the_limiter_follows_it() {
    use limiter_harness::history::Event;
    let path = limiter_harness_tests::scenario_path("cluster-resharding");
    let text = std::fs::read_to_string(&path)
        .unwrap()
        .replace("migrating_ms = 300", "method = \"atomic\"");
    assert!(
        text.contains("method = \"atomic\""),
        "the reshard's migrating_ms is replaced"
    );
    let scenario = limiter_harness::scenario::parse_scenario(&path, &text).expect("parses");
    let valkey = limiter_harness_tests::installed_backend("valkey-9.1").await;
    let (report, dir) = limiter_harness_tests::run_on(scenario, "lua-fixed-window", valkey, false).await;
    assert_eq!(
        report.verdict,
        limiter_harness::checker::Verdict::Valid,
        "{:#?}\n{:?}",
        report.invariants,
        report.faults
    );
    let outcome = &report.faults[0].outcome;
    assert!(
        outcome.contains("by atomic slot migration (CLUSTER MIGRATESLOTS)"),
        "{outcome}"
    );
    assert_eq!(report.observed.counts.errors, 0, "{:?}", report.observed.counts);
    let redirected = report.observed.cluster_replies.join("; ");
    assert!(!redirected.contains("ASK"), "no ASK: {redirected}");
    let events = limiter_harness::history::read_history(&dir.path().join("history.jsonl")).unwrap();
    // A window that ends while the slot is copied ends on both nodes: the source notifies
    // `expired` and sends the target a DEL, notified `del` there a few ms later. Any other
    // `del` would be the source's copy going.
    let ends: Vec<(u64, &str)> = events
        .iter()
        .filter_map(|e| match e {
            Event::Keyspace { t_us, key, event } if key == "rl:0" && (event == "del" || event == "expired") => {
                Some((*t_us, event.as_str()))
            }
            _ => None,
        })
        .collect();
    let deleted: Vec<u64> = ends
        .iter()
        .filter(|&&(t_us, event)| {
            event == "del"
                && !ends
                    .iter()
                    .any(|&(e_us, e)| e == "expired" && e_us <= t_us && t_us - e_us <= 100_000)
        })
        .map(|&(t_us, _)| t_us)
        .collect();
    assert!(
        deleted.is_empty(),
        "the source's copy goes without a `del`: {deleted:?} in {ends:?}"
    );
}

/// `cluster-steady` with `faults` added (and `errors-surfaced` checked when `surfaced`),
/// run on `limiter` in processes: its report and history.
async fn cluster_steady_with(
    faults: &str,
    limiter: &str,
    surfaced: bool,
) -> (limiter_harness::report::Report, Vec<limiter_harness::history::Event>) {
    let path = limiter_harness_tests::scenario_path("cluster-steady");
    let mut text = std::fs::read_to_string(&path).unwrap() + faults;
    if surfaced {
        text = text.replace("invariants = [", "invariants = [\"errors-surfaced\", ");
    }
    let scenario = limiter_harness::scenario::parse_scenario(&path, &text).expect("parses");
    let (report, dir) = limiter_harness_tests::run(scenario, limiter, Kind::Process)
        .await
        .expect("a process backend");
    let events = limiter_harness::history::read_history(&dir.path().join("history.jsonl")).unwrap();
    (report, events)
}

/// No error was swallowed: `errors-surfaced` is valid.
fn surfaced_valid(report: &limiter_harness::report::Report) {
    let surfaced = checked(report, limiter_harness::scenario::Invariant::ErrorsSurfaced);
    assert_eq!(
        surfaced.verdict,
        limiter_harness::checker::Verdict::Valid,
        "{surfaced:#?}"
    );
}

/// What `report` says of `invariant` (which the run checked).
fn checked(
    report: &limiter_harness::report::Report,
    invariant: limiter_harness::scenario::Invariant,
) -> &limiter_harness::checker::CheckResult {
    report
        .invariants
        .iter()
        .find(|c| c.invariant == invariant)
        .unwrap_or_else(|| panic!("{invariant:?} checked"))
}

/// The shipped cluster scenario `name` with `lua-fixed-window` in processes: valid; its
/// report and history.
async fn valid_run(name: &str) -> (limiter_harness::report::Report, Vec<limiter_harness::history::Event>) {
    let scenario = limiter_harness_tests::scenario(name);
    let (report, dir) = limiter_harness_tests::run(scenario, "lua-fixed-window", Kind::Process)
        .await
        .expect("a process backend");
    assert_eq!(
        report.verdict,
        limiter_harness::checker::Verdict::Valid,
        "{name}: {:#?}",
        report.invariants
    );
    let events = limiter_harness::history::read_history(&dir.path().join("history.jsonl")).unwrap();
    (report, events)
}

/// When the run's (only) fault struck.
fn report_fault_time(events: &[limiter_harness::history::Event]) -> u64 {
    events
        .iter()
        .find_map(|e| match e {
            limiter_harness::history::Event::Fault { t_us, .. } => Some(*t_us),
            _ => None,
        })
        .expect("the reshard struck")
}

/// An exec adapter on a cluster: given a seed node and `REDIS_CLUSTER=1`, redis-py's
/// `RedisCluster` finds every node through its fault proxy (the proxies rewrite the nodes'
/// addresses in `CLUSTER SLOTS` and in redirections), follows the reshard's `ASK` and `MOVED`
/// there, and every command it sends is in the wire log with the node it went to.
#[tokio::test(flavor = "multi_thread")]
async fn an_exec_adapter_on_a_cluster_reaches_every_node_through_its_proxy() {
    use limiter_harness::history::Event;
    let adapter = python_cluster_adapter();
    let scenario = limiter_harness_tests::scenario("cluster-resharding");
    let (report, dir) = limiter_harness_tests::run_spec(scenario, &adapter, Kind::Process, false)
        .await
        .expect("a process backend");
    assert_eq!(
        report.verdict,
        limiter_harness::checker::Verdict::Valid,
        "{:#?}",
        report.invariants
    );
    let redirected = report.observed.cluster_replies.join("; ");
    assert!(redirected.contains("MOVED"), "{redirected}");
    let events = limiter_harness::history::read_history(&dir.path().join("history.jsonl")).unwrap();
    let mut nodes = std::collections::BTreeSet::new();
    let mut decided_through = std::collections::BTreeSet::new();
    for event in &events {
        if let Event::Wire { node, request, .. } = event {
            let node = node.expect("on a cluster every wire line names its node");
            nodes.insert(node);
            if request.is_some() {
                decided_through.insert(node);
            }
        }
    }
    assert_eq!(nodes, (0..3).collect(), "every primary's proxy carried traffic");
    assert_eq!(
        decided_through,
        (0..3).collect(),
        "requests were attributed on every node"
    );
    let limiter = events.iter().find_map(|e| match e {
        Event::Limiter { limiter, .. } => limiter.proxy.clone(),
        _ => None,
    });
    assert!(
        limiter
            .as_deref()
            .is_some_and(|p| p.contains("a fault proxy per cluster node")),
        "{limiter:?}"
    );
}

/// The faults on a command's reply run on a cluster, in the proxy of the node the command went
/// to: a `TRYAGAIN` and a `CLUSTERDOWN` injected on two identities' commands strike on the
/// primaries that own their keys, and the run is judged (the cluster client retries them or
/// surfaces them: it never admits on them).
#[tokio::test(flavor = "multi_thread")]
async fn a_cluster_error_is_injected_by_the_proxy_of_the_node_that_owns_the_key() {
    use limiter_harness::history::Event;
    let faults = "\n[[fault]]\nkind = \"inject-error\"\nidentity = 0\nrequest = 5\nerror = \"TRYAGAIN\"\ntimes = 2\n\
           \n[[fault]]\nkind = \"inject-error\"\nidentity = 1\nrequest = 10\nerror = \"CLUSTERDOWN\"\n";
    let (report, events) = cluster_steady_with(faults, "lua-fixed-window", true).await;
    assert_ne!(
        report.verdict,
        limiter_harness::checker::Verdict::Unknown,
        "{:#?}",
        report.invariants
    );
    let struck: Vec<(usize, u64)> = events
        .iter()
        .filter_map(|e| match e {
            Event::Fault {
                fault,
                request: Some(id),
                ..
            } => Some((*fault, *id)),
            _ => None,
        })
        .collect();
    assert_eq!(struck.iter().filter(|(f, _)| *f == 0).count(), 2, "{struck:?}");
    assert_eq!(struck.iter().filter(|(f, _)| *f == 1).count(), 1, "{struck:?}");
    for (fault, id) in struck {
        let identity = fault as u32;
        let key = format!("rl:{identity}");
        let owner = limiter_harness::backend::primary_of_slot(limiter_harness::backend::key_slot(key.as_bytes()), 3);
        let nodes: Vec<Option<u32>> = events
            .iter()
            .filter_map(|e| match e {
                Event::Wire {
                    node, request: Some(r), ..
                } if *r == id => Some(*node),
                _ => None,
            })
            .collect();
        assert!(
            !nodes.is_empty() && nodes.iter().all(|n| *n == Some(owner as u32)),
            "request #{id} of {key}: wire lines on nodes {nodes:?}, its key on node {owner}"
        );
    }
    surfaced_valid(&report);
}

/// Incident 1 on a cluster: identity 0's key expires between `get-then-incr`'s GET and its
/// INCR (the nemesis's cluster connection sends the `PEXPIRE` to the node serving its slot),
/// and the INCR mints a key without a TTL there.
#[tokio::test(flavor = "multi_thread")]
async fn a_key_expiring_between_round_trips_on_a_cluster_is_the_immortal_counter_there_too() {
    use limiter_harness::checker::Verdict;
    use limiter_harness::history::Event;
    use limiter_harness::scenario::Invariant;
    let faults =
        "\n[[fault]]\nkind = \"expire-between-round-trips\"\nidentity = 0\nrequest = 12\nbefore_command = [\"INCR\"]\n";
    let (report, events) = cluster_steady_with(faults, "get-then-incr", false).await;
    let effects: Vec<&str> = events
        .iter()
        .filter_map(|e| match e {
            Event::Fault { effect, .. } => Some(effect.as_str()),
            _ => None,
        })
        .collect();
    assert!(
        effects.len() == 1 && effects[0].contains("PEXPIRE rl:0 1") && effects[0].contains("the key expired"),
        "{effects:?}"
    );
    let ttl = checked(&report, Invariant::TtlPresent);
    assert_eq!(ttl.verdict, Verdict::Invalid, "{ttl:#?}");
    assert!(
        ttl.anomalies
            .iter()
            .any(|a| (a.kind.as_str(), a.key.as_str()) == ("immortal-key", "rl:0")),
        "{ttl:#?}"
    );
}

/// The harness's own cluster connections reach the nodes, never the fault proxies: after a
/// reshard's `MOVED` makes them read the slot map again, the nemesis's `PEXPIRE` between a
/// proxied limiter's round trips still goes straight to the node (no `wire` line of the
/// proxies carries it, nor the observer's `PTTL`), and it still strikes.
#[tokio::test(flavor = "multi_thread")]
async fn the_harness_own_cluster_connections_stay_off_the_proxies_after_a_reshard() {
    use limiter_harness::history::Event;
    let path = limiter_harness_tests::scenario_path("cluster-resharding");
    let text = std::fs::read_to_string(&path).unwrap()
        + "\n[[fault]]\nkind = \"expire-between-round-trips\"\nidentity = 0\nrequest = 45\nbefore_command = [\"INCR\"]\n";
    let scenario = limiter_harness::scenario::parse_scenario(&path, &text).expect("parses");
    let (_, dir) = limiter_harness_tests::run_spec(scenario, "get-then-incr", Kind::Process, true)
        .await
        .expect("a process backend");
    let events = limiter_harness::history::read_history(&dir.path().join("history.jsonl")).unwrap();
    let struck: Vec<&str> = events
        .iter()
        .filter_map(|e| match e {
            Event::Fault { effect, .. } if effect.contains("PEXPIRE rl:0") => Some(effect.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(struck.len(), 1, "the gap fault struck after the reshard: {struck:?}");
    let mut identity_0 = Vec::new();
    for event in &events {
        if let Event::Wire {
            commands, node, keys, ..
        } = event
        {
            let harness = commands
                .iter()
                .find(|c| c.starts_with("PEXPIRE") || c.starts_with("PTTL"));
            assert!(
                harness.is_none(),
                "the harness's own command crossed a proxy: {commands:?}"
            );
            if keys.iter().any(|k| k == "rl:0") {
                identity_0.push(node.expect("on a cluster every wire line names its node"));
            }
        }
    }
    // The limiter followed the move through the proxies: identity 0's last commands crossed
    // the proxy of the primary its slot moved to.
    let (first, last) = (identity_0.first(), identity_0.last());
    assert!(
        first.is_some() && first != last,
        "identity 0's commands through the proxies, by node: {identity_0:?}"
    );
}

/// An injected `MOVED` (identity 0) and `ASK` (identity 1) name the slot of the command's key
/// and the proxy that answered: the `redis` crate's cluster client follows each (`ASKING`
/// first for `ASK`) back to the node that owns the slot, and the struck requests are decided.
#[tokio::test(flavor = "multi_thread")]
async fn an_injected_moved_or_ask_is_followed_back_to_the_node_that_owns_the_slot() {
    use limiter_harness::history::{Event, Outcome};
    let faults = "\n[[fault]]\nkind = \"inject-error\"\nidentity = 0\nrequest = 5\nerror = \"MOVED\"\n\
           \n[[fault]]\nkind = \"inject-error\"\nidentity = 1\nrequest = 10\nerror = \"ask\"\n";
    let (report, events) = cluster_steady_with(faults, "lua-fixed-window", true).await;
    let mut struck = Vec::new();
    for e in &events {
        if let Event::Fault {
            fault,
            request: Some(id),
            effect,
            ..
        } = e
        {
            struck.push((*fault, *id, effect.clone()));
        }
    }
    assert_eq!(struck.len(), 2, "{struck:?}");
    for (fault, id, effect) in struck {
        let key = format!("rl:{fault}");
        let slot = limiter_harness::backend::key_slot(key.as_bytes());
        let redirect = ["MOVED", "ASK"][fault];
        assert!(effect.contains(&format!("`-{redirect} {slot} <its node>`")), "{effect}");
        let outcome = events.iter().find_map(|e| match e {
            Event::Complete { id: done, outcome, .. } if *done == id => Some(*outcome),
            _ => None,
        });
        assert!(
            matches!(outcome, Some(Outcome::Allowed | Outcome::Rejected)),
            "request #{id} struck by {redirect}: {outcome:?}"
        );
    }
    let asking = events.iter().any(
        |e| matches!(e, Event::Wire { commands, .. } if commands.iter().any(|c| c.eq_ignore_ascii_case("ASKING"))),
    );
    assert!(asking, "the ASK was followed with ASKING");
    surfaced_valid(&report);
}

/// `cluster-failover-lost-writes` with a Python adapter on redis-py's `RedisCluster`: the
/// replicas sync through their primaries' proxies, identity 0's is held back and its replica
/// takes over; the client follows to the new primary through its proxy, and the counter's
/// rollback is found and put on the failover.
#[tokio::test(flavor = "multi_thread")]
async fn a_node_failover_loses_the_held_writes_and_the_checkers_put_the_reset_on_it() {
    use limiter_harness::checker::Verdict;
    use limiter_harness::history::Event;
    use limiter_harness::scenario::Invariant;
    let adapter = python_cluster_adapter();
    let scenario = limiter_harness_tests::scenario("cluster-failover-lost-writes");
    let (report, dir) = limiter_harness_tests::run_spec(scenario, &adapter, Kind::Process, false)
        .await
        .expect("a process backend");
    let reset = checked(&report, Invariant::NoCounterReset);
    assert_eq!(reset.verdict, Verdict::Invalid, "{reset:#?}");
    assert!(
        reset.summary.contains("promoted by fault 0"),
        "the reset is put on the failover: {}",
        reset.summary
    );
    assert!(
        report.faults[0].outcome.contains("then CLUSTER FAILOVER TAKEOVER"),
        "{}",
        report.faults[0].outcome
    );
    let events = limiter_harness::history::read_history(&dir.path().join("history.jsonl")).unwrap();
    let struck_us = report_fault_time(&events);
    // After the failover the adapter's requests reach the promoted replica (a node after the
    // three primaries) through its proxy.
    let promoted: std::collections::BTreeSet<u32> = events
        .iter()
        .filter_map(|e| match e {
            Event::Wire {
                t_us,
                node: Some(node),
                request: Some(_),
                ..
            } if *t_us > struck_us && *node >= 3 => Some(*node),
            _ => None,
        })
        .collect();
    assert_eq!(
        promoted.len(),
        1,
        "requests decided on the promoted replica: {promoted:?}"
    );
}

/// `cluster-node-pause` with `lua-fixed-window`, its window shortened to 2010 ms so that
/// identity 0's key expires on the promoted replica after the pause: the cluster fails the
/// stopped primary over (the outage says so, the effect names the replica), and the observer
/// follows the promotion. The expiry is heard from the new primary as `expired`; the `del`
/// the old one replays as its replica is not taken for a reset.
#[tokio::test(flavor = "multi_thread")]
async fn a_node_pause_fails_the_primary_over_and_the_observer_follows_the_promoted_replica() {
    use limiter_harness::checker::Verdict;
    use limiter_harness::history::Event;
    use limiter_harness::scenario::parse_scenario;
    let path = limiter_harness_tests::scenario_path("cluster-node-pause");
    let text = std::fs::read_to_string(&path).unwrap();
    assert!(text.contains("window_ms = 20000"), "the catalog's window");
    let scenario = parse_scenario(&path, &text.replace("window_ms = 20000", "window_ms = 2010")).unwrap();
    let (report, dir) = limiter_harness_tests::run(scenario, "lua-fixed-window", Kind::Process)
        .await
        .expect("a process backend");
    assert_eq!(report.verdict, Verdict::Valid, "{:#?}", report.invariants);
    let outcome = &report.faults[0].outcome;
    assert!(
        outcome.contains("its replica, was promoted") && outcome.contains("rejoined as its replica"),
        "{outcome}"
    );
    let events = limiter_harness::history::read_history(&dir.path().join("history.jsonl")).unwrap();
    let (back_us, failed_over) = events
        .iter()
        .find_map(|e| match e {
            Event::Outage {
                t_back_us, failed_over, ..
            } => Some((*t_back_us, *failed_over)),
            _ => None,
        })
        .expect("the pause's outage");
    assert!(failed_over, "the outage records the cluster's failover");
    let after: Vec<&str> = events
        .iter()
        .filter_map(|e| match e {
            Event::Keyspace { t_us, key, event } if *t_us > back_us && key == "rl:0" => Some(event.as_str()),
            _ => None,
        })
        .collect();
    assert!(
        after.contains(&"expired"),
        "the promoted replica's expiries are heard: {after:?}"
    );
    assert!(
        !after.contains(&"del"),
        "the demoted node's replayed DEL is not: {after:?}"
    );
}
