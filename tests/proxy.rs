//! The fault proxy against a real server: clients that do not know it is there (redis-rs
//! with pipelines, MULTI/EXEC, EVALSHA, pub/sub, RESP3 pushes; raw sockets), its fault
//! actions, its survival of malformed input, and the built-in limiters' faults applied
//! through it instead of the `Wire` (one mechanism, two places).

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use async_trait::async_trait;
use limiter_harness::checker::Verdict;
use limiter_harness::proxy::{Action, Command, PassThrough, Proxy, ProxyHook};
use limiter_harness_tests::{Kind, TestServer, run_spec, scenario};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// Applies `action` to every `command` on key `target`, and keeps the problems it is told of.
struct OnGet {
    command: &'static str,
    target: &'static str,
    action: Action,
    problems: Mutex<Vec<String>>,
}

#[async_trait]
impl ProxyHook for OnGet {
    async fn before_forward(&self, _conn: u64, trip: &[Command]) -> Vec<Action> {
        trip.iter()
            .map(|c| {
                if c.is(self.command) && c.args.get(1).is_some_and(|k| k == self.target.as_bytes()) {
                    self.action.clone()
                } else {
                    Action::Forward
                }
            })
            .collect()
    }

    fn connection_problem(&self, conn: u64, detail: String) {
        self.problems.lock().unwrap().push(format!("{conn}: {detail}"));
    }
}

fn on_get(target: &'static str, action: Action) -> Arc<OnGet> {
    Arc::new(OnGet {
        command: "GET",
        target,
        action,
        problems: Mutex::default(),
    })
}

fn on_incr(target: &'static str, action: Action) -> Arc<OnGet> {
    Arc::new(OnGet {
        command: "INCR",
        target,
        action,
        problems: Mutex::default(),
    })
}

async fn client(url: &str) -> redis::aio::MultiplexedConnection {
    redis::Client::open(url)
        .unwrap()
        .get_multiplexed_async_connection()
        .await
        .unwrap()
}

#[tokio::test(flavor = "multi_thread")]
async fn clients_see_the_server_through_it() {
    // Long: one client feature after another through the same proxy.
    let server = TestServer::start(Kind::Process).await.unwrap();
    let proxy = Proxy::start(&server.url, Arc::new(PassThrough)).await.unwrap();
    let mut conn = client(&proxy.url()).await;

    let () = redis::cmd("SET")
        .arg("k")
        .arg("v")
        .query_async(&mut conn)
        .await
        .unwrap();
    let v: String = redis::cmd("GET").arg("k").query_async(&mut conn).await.unwrap();
    assert_eq!(v, "v");
    // A pipeline of 1,000 commands and a transaction.
    let mut pipe = redis::pipe();
    for i in 0..1000 {
        pipe.cmd("INCR").arg(format!("c{}", i % 7));
    }
    let counts: Vec<i64> = pipe.query_async(&mut conn).await.unwrap();
    assert_eq!(counts.len(), 1000);
    assert_eq!(counts[999], 143);
    let (n, ttl): (i64, i64) = redis::pipe()
        .atomic()
        .cmd("INCR")
        .arg("t")
        .cmd("PEXPIRE")
        .arg("t")
        .arg(5000)
        .query_async(&mut conn)
        .await
        .unwrap();
    assert_eq!((n, ttl), (1, 1));
    // A script, and a large binary value.
    let script = redis::Script::new("return redis.call('INCRBY', KEYS[1], ARGV[1])");
    let n: i64 = script.key("s").arg(5).invoke_async(&mut conn).await.unwrap();
    assert_eq!(n, 5);
    let big: Vec<u8> = (0..2_000_000u32).map(|i| (i % 251) as u8).collect();
    let () = redis::cmd("SET")
        .arg("big")
        .arg(&big)
        .query_async(&mut conn)
        .await
        .unwrap();
    let back: Vec<u8> = redis::cmd("GET").arg("big").query_async(&mut conn).await.unwrap();
    assert_eq!(back, big);

    // Pub/sub: replies stop being one per command; the proxy passes them through.
    let mut subscriber = TcpStream::connect(proxy.addr()).await.unwrap();
    subscriber
        .write_all(b"*2\r\n$9\r\nSUBSCRIBE\r\n$2\r\nch\r\n")
        .await
        .unwrap();
    let mut buf = vec![0u8; 256];
    let n = subscriber.read(&mut buf).await.unwrap();
    assert!(String::from_utf8_lossy(&buf[..n]).contains("subscribe"));
    let receivers: i64 = redis::cmd("PUBLISH")
        .arg("ch")
        .arg("hello")
        .query_async(&mut conn)
        .await
        .unwrap();
    assert_eq!(receivers, 1);
    let n = subscriber.read(&mut buf).await.unwrap();
    assert!(String::from_utf8_lossy(&buf[..n]).contains("hello"));

    // RESP3 and an inline command from a raw socket.
    let mut raw = TcpStream::connect(proxy.addr()).await.unwrap();
    raw.write_all(b"HELLO 3\r\nPING\r\n").await.unwrap();
    let mut got = Vec::new();
    while !got.ends_with(b"+PONG\r\n") {
        let n = raw.read(&mut buf).await.unwrap();
        assert!(n > 0, "closed early: {}", String::from_utf8_lossy(&got));
        got.extend_from_slice(&buf[..n]);
    }
    assert!(got.starts_with(b"%"), "HELLO 3 answers a RESP3 map");
    assert!(proxy.connections() >= 3);
    proxy.stop().await;
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_malformed_command_closes_that_connection_only() {
    let server = TestServer::start(Kind::Process).await.unwrap();
    let hook = on_get("none", Action::Forward);
    let proxy = Proxy::start(&server.url, hook.clone()).await.unwrap();
    let mut bad = TcpStream::connect(proxy.addr()).await.unwrap();
    bad.write_all(b"*2\r\n$3\r\nGET\r\n:1\r\n").await.unwrap();
    let mut buf = [0u8; 64];
    let n = tokio::time::timeout(Duration::from_secs(2), bad.read(&mut buf))
        .await
        .expect("closed, not hung")
        .unwrap_or(0);
    assert_eq!(n, 0, "the connection is closed");
    // The reason is logged as the connection closes.
    let mut problems = Vec::new();
    for _ in 0..100 {
        problems = hook.problems.lock().unwrap().clone();
        if !problems.is_empty() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert!(problems.iter().any(|p| p.contains("malformed command")), "{problems:?}");
    // The proxy goes on serving.
    let mut conn = client(&proxy.url()).await;
    let pong: String = redis::cmd("PING").query_async(&mut conn).await.unwrap();
    assert_eq!(pong, "PONG");
    proxy.stop().await;
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn fault_actions_act_on_the_matched_command() {
    // Long: each fault action checked against the server's own count, in a row on one server.
    let server = TestServer::start(Kind::Process).await.unwrap();
    let mut direct = server.conn().await;
    let () = redis::cmd("SET")
        .arg("x")
        .arg("1")
        .query_async(&mut direct)
        .await
        .unwrap();

    // Injected error: the client gets it, the server never sees the command.
    let proxy = Proxy::start(&server.url, on_incr("x", Action::Inject(b"-OOM injected\r\n".to_vec())))
        .await
        .unwrap();
    let mut conn = client(&proxy.url()).await;
    let err = redis::cmd("INCR")
        .arg("x")
        .query_async::<i64>(&mut conn)
        .await
        .unwrap_err();
    assert!(err.to_string().contains("OOM"), "{err}");
    assert_eq!(value(&mut direct).await, 1, "the INCR never reached the server");
    let other: i64 = redis::cmd("INCR").arg("y").query_async(&mut conn).await.unwrap();
    assert_eq!(other, 1, "other commands pass on the same connection");
    proxy.stop().await;

    // Injected error in the middle of a pipeline: the replies stay in order.
    let proxy = Proxy::start(&server.url, on_incr("x", Action::Inject(b"-OOM injected\r\n".to_vec())))
        .await
        .unwrap();
    let mut conn = client(&proxy.url()).await;
    let replies: Vec<redis::Value> = redis::pipe()
        .cmd("INCR")
        .arg("y")
        .cmd("INCR")
        .arg("x")
        .cmd("INCR")
        .arg("y")
        .ignore_errors()
        .query_async(&mut conn)
        .await
        .unwrap();
    assert_eq!(replies.len(), 3);
    assert_eq!(replies[0], redis::Value::Int(2));
    assert!(matches!(replies[1], redis::Value::ServerError(_)), "{:?}", replies[1]);
    assert_eq!(replies[2], redis::Value::Int(3));
    assert_eq!(value(&mut direct).await, 1);
    proxy.stop().await;

    // Delayed reply.
    let proxy = Proxy::start(
        &server.url,
        on_incr("x", Action::DelayReply(Duration::from_millis(300))),
    )
    .await
    .unwrap();
    let mut conn = client(&proxy.url()).await;
    let started = Instant::now();
    let v: i64 = redis::cmd("INCR").arg("x").query_async(&mut conn).await.unwrap();
    assert_eq!(v, 2);
    assert!(started.elapsed() >= Duration::from_millis(300));
    proxy.stop().await;

    // Dropped reply: the INCR ran, the client lost the answer.
    let proxy = Proxy::start(&server.url, on_incr("x", Action::DropReply))
        .await
        .unwrap();
    let mut conn = client(&proxy.url()).await;
    let err = redis::cmd("INCR")
        .arg("x")
        .query_async::<i64>(&mut conn)
        .await
        .unwrap_err();
    assert!(
        err.is_connection_dropped() || err.is_io_error() || err.is_unrecoverable_error(),
        "{err}"
    );
    assert_eq!(value(&mut direct).await, 3, "the INCR whose reply was dropped ran");
    proxy.stop().await;

    // Reset: closed before forwarding.
    let proxy = Proxy::start(&server.url, on_incr("x", Action::Reset)).await.unwrap();
    let mut conn = client(&proxy.url()).await;
    assert!(redis::cmd("INCR").arg("x").query_async::<i64>(&mut conn).await.is_err());
    assert_eq!(value(&mut direct).await, 3, "the reset INCR never ran");
    proxy.stop().await;
    server.stop().await;
}

async fn value(direct: &mut redis::aio::MultiplexedConnection) -> i64 {
    redis::cmd("GET").arg("x").query_async(direct).await.unwrap()
}

#[tokio::test(flavor = "multi_thread")]
async fn built_in_faults_land_the_same_through_the_proxy() {
    // The gap fault of incident 1, applied by the proxy instead of the limiter's Wire.
    let (report, _dir) = run_spec(scenario("immortal-counter"), "get-then-incr", Kind::Process, true)
        .await
        .unwrap();
    assert_eq!(report.verdict, Verdict::Invalid, "{report:#?}");
    assert_eq!(report.faults[0].fired, 1);
    assert!(
        report.observed.proxy.is_some(),
        "the run says it went through the proxy"
    );
    assert!(!report.observed.wire.is_empty());
    let (report, _dir) = run_spec(
        scenario("immortal-counter"),
        "multi-incr-expire-nx",
        Kind::Process,
        true,
    )
    .await
    .unwrap();
    assert_eq!(report.verdict, Verdict::Valid, "{report:#?}");
}

const MIB: usize = 1 << 20;

/// What a client sending one command saw: the start of a reply, or the connection closed.
#[derive(Debug, PartialEq)]
enum Outcome {
    Replied(Vec<u8>),
    Closed,
}

/// Sends `command` on a fresh connection and waits for the start of its reply or the close.
async fn send_one(addr: std::net::SocketAddr, command: Vec<u8>) -> Outcome {
    let exchange = async {
        let mut socket = TcpStream::connect(addr).await.unwrap();
        if socket.write_all(&command).await.is_err() {
            return Outcome::Closed;
        }
        let mut buf = [0u8; 64];
        match socket.read(&mut buf).await {
            Ok(0) | Err(_) => Outcome::Closed,
            Ok(n) => Outcome::Replied(buf[..n].to_vec()),
        }
    };
    tokio::time::timeout(Duration::from_secs(60), exchange)
        .await
        .expect("answered or closed, not hung")
}

/// The problems the hook was told of that contain `needle`, once there are `at_least`.
async fn problems_naming(hook: &OnGet, needle: &str, at_least: usize) -> Vec<String> {
    let mut found = Vec::new();
    for _ in 0..500 {
        found = hook.problems.lock().unwrap().clone();
        found.retain(|p| p.contains(needle));
        if found.len() >= at_least {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    found
}

/// Waits until the proxy holds at most `bytes` (connections that ended gave theirs back).
async fn settles_under(proxy: &Proxy, bytes: usize) -> usize {
    for _ in 0..500 {
        if proxy.buffered_bytes() <= bytes {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    proxy.buffered_bytes()
}

#[tokio::test(flavor = "multi_thread")]
async fn the_memory_budget_bounds_all_connections_together() {
    const BUDGET: usize = 8 * MIB;
    let server = TestServer::start(Kind::Process).await.unwrap();
    let hook = on_get("none", Action::Forward);
    let proxy = Proxy::start_with_budget(&server.url, hook.clone(), BUDGET)
        .await
        .unwrap();
    assert_eq!(proxy.budget(), BUDGET);
    // Four clients at once, each with a command over half the budget.
    let value = vec![b'v'; 5 * MIB];
    let sends: Vec<_> = (0..4)
        .map(|i| {
            let command = Command::new([b"SET".as_slice(), format!("big:{i}").as_bytes(), value.as_slice()]).to_bytes();
            tokio::spawn(send_one(proxy.addr(), command))
        })
        .collect();
    let mut outcomes = Vec::new();
    for send in sends {
        outcomes.push(send.await.unwrap());
    }
    for outcome in &outcomes {
        if let Outcome::Replied(reply) = outcome {
            assert!(reply.starts_with(b"+OK\r\n"), "{}", String::from_utf8_lossy(reply));
        }
    }
    let closed = outcomes.iter().filter(|o| **o == Outcome::Closed).count();
    assert!(closed >= 1, "no connection was closed: {outcomes:?}");
    let peak = proxy.buffered_bytes_peak();
    assert!(
        peak <= BUDGET,
        "{peak} bytes buffered at once, over the {BUDGET}-byte budget"
    );
    assert!(peak > BUDGET / 2, "the large commands were counted: peak {peak}");
    // Each closed connection is a problem naming the budget.
    let problems = problems_naming(&hook, "memory budget of 8 MiB", closed).await;
    assert_eq!(problems.len(), closed, "{problems:?}");
    assert!(problems[0].contains("closed: buffering"), "{problems:?}");

    // What they held is given back, and the proxy serves a normal client.
    let held = settles_under(&proxy, MIB).await;
    assert!(held <= MIB, "{held} bytes still held after the large clients went");
    let mut conn = client(&proxy.url()).await;
    let pong: String = redis::cmd("PING").query_async(&mut conn).await.unwrap();
    assert_eq!(pong, "PONG");
    let n: i64 = redis::cmd("INCR").arg("after").query_async(&mut conn).await.unwrap();
    assert_eq!(n, 1);
    assert!(proxy.buffered_bytes_peak() <= BUDGET);
    proxy.stop().await;
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_command_within_the_budget_passes_and_announced_lengths_are_not_allocated() {
    const BUDGET: usize = 8 * MIB;
    let server = TestServer::start(Kind::Process).await.unwrap();
    let hook = on_get("none", Action::Forward);
    let proxy = Proxy::start_with_budget(&server.url, hook.clone(), BUDGET)
        .await
        .unwrap();
    // A command announcing a 400 MB value and sending 1 KB of it: the proxy holds what came.
    let mut announced = TcpStream::connect(proxy.addr()).await.unwrap();
    announced
        .write_all(b"*3\r\n$3\r\nSET\r\n$4\r\nhuge\r\n$400000000\r\n")
        .await
        .unwrap();
    announced.write_all(&[b'x'; 1024]).await.unwrap();
    tokio::time::sleep(Duration::from_millis(200)).await;
    let mut buf = [0u8; 16];
    let still_open = tokio::time::timeout(Duration::from_millis(100), announced.read(&mut buf)).await;
    assert!(still_open.is_err(), "the connection waits for the rest: {still_open:?}");
    let peak = proxy.buffered_bytes_peak();
    assert!(peak < MIB, "{peak} bytes buffered for 1 KB received");
    drop(announced);

    // A 2 MB value, through and back intact, on a delayed reply too.
    let mut conn = client(&proxy.url()).await;
    let big: Vec<u8> = (0..2_000_000u32).map(|i| (i % 251) as u8).collect();
    let () = redis::cmd("SET")
        .arg("big")
        .arg(&big)
        .query_async(&mut conn)
        .await
        .unwrap();
    let back: Vec<u8> = redis::cmd("GET").arg("big").query_async(&mut conn).await.unwrap();
    assert_eq!(back, big);
    let peak = proxy.buffered_bytes_peak();
    assert!(peak > 2_000_000 && peak <= BUDGET, "peak {peak}");
    proxy.stop().await;

    let proxy = Proxy::start_with_budget(
        &server.url,
        on_get("big", Action::DelayReply(Duration::from_millis(100))),
        BUDGET,
    )
    .await
    .unwrap();
    let mut conn = client(&proxy.url()).await;
    let back: Vec<u8> = redis::cmd("GET").arg("big").query_async(&mut conn).await.unwrap();
    assert_eq!(back, big, "held for its delay, counted, then forwarded");
    let peak = proxy.buffered_bytes_peak();
    assert!(
        peak > 2_000_000 && peak <= BUDGET,
        "the held reply was counted: peak {peak}"
    );
    assert!(hook.problems.lock().unwrap().is_empty());
    proxy.stop().await;
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_client_that_never_reads_its_replies_is_closed_not_grown() {
    const BUDGET: usize = MIB;
    let server = TestServer::start(Kind::Process).await.unwrap();
    let hook = on_get("none", Action::Forward);
    let proxy = Proxy::start_with_budget(&server.url, hook.clone(), BUDGET)
        .await
        .unwrap();
    // PINGs as fast as the proxy takes them, never a reply read: the replies back up, and
    // the proxy's queue of replies to come grows until the budget stops it.
    let mut socket = TcpStream::connect(proxy.addr()).await.unwrap();
    let batch = b"*1\r\n$4\r\nPING\r\n".repeat(4096);
    let deadline = Instant::now() + Duration::from_secs(90);
    let mut sent = 0usize;
    let closed = loop {
        if Instant::now() > deadline {
            break false;
        }
        match tokio::time::timeout(Duration::from_secs(30), socket.write_all(&batch)).await {
            Ok(Ok(())) => sent += batch.len(),
            Ok(Err(_)) => break true,
            Err(_) => panic!("the proxy stopped reading without closing after {sent} bytes"),
        }
    };
    assert!(closed, "still open after {sent} bytes of PINGs never answered");
    let problems = problems_naming(&hook, "memory budget of 1 MiB", 1).await;
    assert_eq!(problems.len(), 1, "{problems:?}");
    assert!(proxy.buffered_bytes_peak() <= BUDGET);
    let mut conn = client(&proxy.url()).await;
    let pong: String = redis::cmd("PING").query_async(&mut conn).await.unwrap();
    assert_eq!(pong, "PONG");
    proxy.stop().await;
    server.stop().await;
}

/// A client that pipelines without end (1,000 GETs a round trip, replies read) fills the
/// wire log up to its cap and no further: each line shows at most 32 commands and counts the
/// rest, the cut is recorded once, and after it only a key outside the layout not shown yet
/// gets a line.
#[tokio::test(flavor = "multi_thread")]
async fn the_wire_log_is_cut_at_its_cap_and_a_long_pipeline_is_counted_not_listed() {
    // Long: the proxy's hook assembled by hand, a client's flood, then what the log kept.
    use limiter_harness::clock::RunClock;
    use limiter_harness::history::{Event, Recorder};
    use limiter_harness::keys::KeyLayout;
    use limiter_harness::nemesis::Nemesis;
    use limiter_harness::proxy::{InFlight, NemesisHook, WireLog};

    let Some(server) = TestServer::start(Kind::Process).await else {
        return;
    };
    let s = scenario("steady-control");
    let (recorder, history) = Recorder::in_memory();
    let clock = RunClock::start();
    let inflight = Arc::new(InFlight::new());
    inflight.set_layout(KeyLayout::default_for("rl:", 2));
    let cap = 256 * 1024;
    let hook = Arc::new(NemesisHook {
        nemesis: Arc::new(Nemesis::new(&s, server.conn().await, recorder.clone(), clock)),
        inflight,
        recorder: recorder.clone(),
        clock,
        wire: Arc::new(WireLog::new(cap)),
        node: None,
        listening: std::sync::OnceLock::new(),
    });
    let proxy = Proxy::start(&server.url, hook).await.unwrap();
    let mut conn = client(&proxy.url()).await;
    for round in 0..200 {
        let mut pipe = redis::pipe();
        for _ in 0..1000 {
            pipe.cmd("GET").arg("lh-wire:a");
        }
        if round == 150 {
            // After the cut: a key the log has not shown yet still gets its line.
            pipe.cmd("GET").arg("lh-wire:late");
        }
        let _: Vec<Option<String>> = pipe.query_async(&mut conn).await.unwrap();
    }
    proxy.stop().await;
    drop(recorder);
    let (events, _) = history.finish();
    let lines: Vec<&Vec<String>> = events
        .iter()
        .filter_map(|e| match e {
            Event::Wire { commands, .. } => Some(commands),
            _ => None,
        })
        .collect();
    let cuts: Vec<&String> = events
        .iter()
        .filter_map(|e| match e {
            Event::Problem { detail, .. } if detail.contains("wire log reached its cap") => Some(detail),
            _ => None,
        })
        .collect();
    assert_eq!(cuts.len(), 1, "the cut is recorded once: {cuts:?}");
    assert!(
        lines.iter().all(|c| c.len() <= 33),
        "at most 32 commands and a count per line"
    );
    assert!(
        lines
            .iter()
            .any(|c| c.last().is_some_and(|l| l.ends_with("more commands"))),
        "a long pipeline's rest is counted"
    );
    let text: usize = lines.iter().flat_map(|c| c.iter()).map(|c| c.len() + 40).sum();
    assert!(text <= cap, "{text} bytes of wire lines against a cap of {cap}");
    assert!(
        lines.len() < 200,
        "the log stopped before the client did: {} lines",
        lines.len()
    );
    let late = events
        .iter()
        .any(|e| matches!(e, Event::Wire { keys, .. } if keys.iter().any(|k| k == "lh-wire:late")));
    assert!(late, "a new key outside the layout after the cut has its line");
}

/// A replica that syncs through the proxy (as a cluster's replicas do once every node
/// announces its proxy): its `PSYNC`, the `+FULLRESYNC`, the RDB payload and the replication
/// stream after it pass through untouched, and writes on the primary reach the replica.
#[tokio::test(flavor = "multi_thread")]
async fn a_replica_syncs_through_the_proxy() {
    let primary = TestServer::start(Kind::Process).await.unwrap();
    let replica = TestServer::start(Kind::Process).await.unwrap();
    let mut on_primary = primary.conn().await;
    // The full sync starts after 2 s (not the default 5 s of waiting for more replicas);
    // meanwhile the primary sends the replica a newline a second, before any reply.
    let () = redis::cmd("CONFIG")
        .arg("SET")
        .arg("repl-diskless-sync-delay")
        .arg(2)
        .query_async(&mut on_primary)
        .await
        .unwrap();
    let () = redis::cmd("SET")
        .arg("lh-sync:before")
        .arg("1")
        .query_async(&mut on_primary)
        .await
        .unwrap();
    let proxy = Proxy::start(&primary.url, Arc::new(PassThrough)).await.unwrap();
    let mut on_replica = replica.conn().await;
    let () = redis::cmd("REPLICAOF")
        .arg("127.0.0.1")
        .arg(proxy.addr().port())
        .query_async(&mut on_replica)
        .await
        .unwrap();
    let () = redis::cmd("SET")
        .arg("lh-sync:after")
        .arg("2")
        .query_async(&mut on_primary)
        .await
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    let synced = loop {
        let got: (Option<String>, Option<String>) = redis::pipe()
            .cmd("GET")
            .arg("lh-sync:before")
            .cmd("GET")
            .arg("lh-sync:after")
            .query_async(&mut on_replica)
            .await
            .unwrap();
        if got == (Some("1".into()), Some("2".into())) || Instant::now() > deadline {
            break got;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    let info: String = redis::cmd("INFO")
        .arg("replication")
        .query_async(&mut on_replica)
        .await
        .unwrap();
    assert_eq!(synced, (Some("1".into()), Some("2".into())), "{info}");
    assert!(info.contains("master_link_status:up"), "{info}");
    proxy.stop().await;
    replica.stop().await;
    primary.stop().await;
}
