//! The nemesis against a real Redis server: expiry in the gap between round trips, client
//! stalls that let the key expire on its own, and memory pressure.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use limiter_harness::backend::Conn;
use limiter_harness::clock::RunClock;
use limiter_harness::history::{Event, Recorder, ServerRole};
use limiter_harness::keys::KeyLayout;
use limiter_harness::limiter::{Decision, Limiter, RequestCtx, Wire, builtin};
use limiter_harness::nemesis::{CacheFlood, GapHook, Nemesis};
use limiter_harness::observer::read_stats;
use limiter_harness::scenario::{Fault, Scenario, parse_scenario};
use limiter_harness_tests::{Kind, TestServer};

fn scenario(window_ms: u64, faults: &str) -> Scenario {
    let text = format!(
        "name = \"t\"\n[limit]\nrequests_max = 10\nwindow_ms = {window_ms}\n[[phase]]\nkind = \"burst\"\nrequests = 1\n{faults}\n[check]\ninvariants = [\"ttl-present\"]\n"
    );
    parse_scenario(Path::new("inline.toml"), &text).expect("test scenario parses")
}

async fn acquire(
    limiter: &dyn Limiter,
    conn: &mut Conn,
    hook: &dyn GapHook,
    ordinal: u64,
    s: &Scenario,
) -> (Decision, Vec<String>) {
    let ctx = RequestCtx {
        id: ordinal - 1,
        identity: 0,
        ordinal,
        key: s.limit.key(0),
        instance: 0,
        now_ms: 0,
    };
    let layout = layout(s);
    let mut wire = Wire::new(conn, hook, &ctx, &layout);
    let decision = limiter
        .acquire(&mut wire, &ctx.key, &s.limit)
        .await
        .expect("a decision");
    (decision, wire.finish().0)
}

fn layout(s: &Scenario) -> KeyLayout {
    KeyLayout::default_for(&s.limit.key_prefix, s.limit.identities)
}

async fn pttl(conn: &mut Conn, key: &str) -> i64 {
    redis::cmd("PTTL").arg(key).query_async(conn).await.unwrap()
}

fn faults(events: &[Event]) -> Vec<String> {
    events
        .iter()
        .filter_map(|e| {
            if let Event::Fault { effect, .. } = e {
                Some(effect.clone())
            } else {
                None
            }
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread")]
async fn expiry_between_get_and_incr_mints_an_immortal_key() {
    let Some(server) = TestServer::start(Kind::Container).await else {
        return;
    };
    let s = scenario(
        5_000,
        "[[fault]]\nkind = \"expire-between-round-trips\"\nidentity = 0\nrequest = 2\nbefore_command = \"INCR\"",
    );
    let (recorder, history) = Recorder::in_memory();
    let nemesis = Nemesis::new(&s, server.conn().await, recorder.clone(), RunClock::start());
    let limiter = builtin("get-then-incr").unwrap();
    let mut conn = Conn::from(server.conn().await);

    let (first, trips) = acquire(limiter.as_ref(), &mut conn, &nemesis, 1, &s).await;
    assert_eq!(
        (first.count, trips),
        (Some(1), vec!["GET".to_owned(), "SET".to_owned()])
    );
    assert!(pttl(&mut conn, "rl:0").await > 0);
    let (second, trips) = acquire(limiter.as_ref(), &mut conn, &nemesis, 2, &s).await;
    assert_eq!(trips, ["GET", "INCR"]);
    assert_eq!(second.count, Some(1), "INCR recreated the expired key from nothing");
    assert_eq!(
        pttl(&mut conn, "rl:0").await,
        -1,
        "the recreated key has no TTL: incident 1"
    );
    assert_eq!(nemesis.fired(), vec![(0, 1)]);

    drop(recorder);
    let effects = faults(&history.finish().0);
    assert_eq!(effects.len(), 1);
    assert!(effects[0].contains("the key expired"), "{effects:?}");
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn one_round_trip_limiters_leave_the_fault_no_gap() {
    let Some(server) = TestServer::start(Kind::Container).await else {
        return;
    };
    let s = scenario(5_000, "[[fault]]\nkind = \"expire-between-round-trips\"\ntimes = 0");
    for name in ["multi-incr-expire-nx", "lua-fixed-window"] {
        let (recorder, _history) = Recorder::in_memory();
        let nemesis = Nemesis::new(&s, server.conn().await, recorder, RunClock::start());
        let limiter = builtin(name).unwrap();
        let mut conn = Conn::from(server.conn().await);
        limiter.prepare(&mut conn, &s.limit).await.unwrap();
        let _: () = redis::cmd("DEL").arg("rl:0").query_async(&mut conn).await.unwrap();
        for ordinal in 1..=5 {
            acquire(limiter.as_ref(), &mut conn, &nemesis, ordinal, &s).await;
        }
        assert_eq!(nemesis.fired(), vec![(0, 0)], "{name}");
        assert!(pttl(&mut conn, "rl:0").await > 0, "{name}");
    }
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_stall_between_round_trips_lets_the_key_expire_on_its_own() {
    let Some(server) = TestServer::start(Kind::Container).await else {
        return;
    };
    let s = scenario(
        300,
        "[[fault]]\nkind = \"stall-between-round-trips\"\nstall_ms = 400\nrequest = 2\nbefore_command = \"INCR\"",
    );
    let (recorder, history) = Recorder::in_memory();
    let nemesis = Nemesis::new(&s, server.conn().await, recorder.clone(), RunClock::start());
    let limiter = builtin("get-then-incr").unwrap();
    let mut conn = Conn::from(server.conn().await);
    acquire(limiter.as_ref(), &mut conn, &nemesis, 1, &s).await;
    let started = std::time::Instant::now();
    let (second, _) = acquire(limiter.as_ref(), &mut conn, &nemesis, 2, &s).await;
    assert!(started.elapsed() >= Duration::from_millis(400), "the client stalled");
    assert_eq!(second.count, Some(1));
    assert_eq!(
        pttl(&mut conn, "rl:0").await,
        -1,
        "natural expiry during the stall, then INCR: immortal key"
    );
    drop(recorder);
    assert!(faults(&history.finish().0)[0].starts_with("stalled 400 ms"));
    server.stop().await;
}

fn pressure(policy: &str) -> Scenario {
    let text = format!(
        "name = \"p\"\n[server]\nmaxmemory = \"2mb\"\nmaxmemory_policy = \"{policy}\"\n[limit]\nrequests_max = 10\nwindow_ms = 1000\n[[phase]]\nname = \"import\"\nkind = \"burst\"\nrequests = 1\n[[fault]]\nkind = \"memory-pressure\"\nphase = \"import\"\nvalue_bytes = 1024\n[check]\ninvariants = [\"ttl-present\"]\n"
    );
    parse_scenario(Path::new("inline.toml"), &text).unwrap()
}

async fn flood(server: &TestServer, s: &Scenario, writes: usize) -> CacheFlood {
    let mut conn = Conn::from(server.conn().await);
    for (name, value) in &s.server.settings {
        let () = redis::cmd("CONFIG")
            .arg("SET")
            .arg(name)
            .arg(value)
            .query_async(&mut conn)
            .await
            .unwrap();
    }
    let Fault::MemoryPressure(spec) = s.faults[0].clone() else {
        unreachable!()
    };
    let flood = CacheFlood::new(spec, ServerRole::Limiter, server.conn().await, "lh-cache:".into());
    for _ in 0..writes {
        flood.write_for_request().await;
    }
    flood
}

#[tokio::test(flavor = "multi_thread")]
async fn memory_pressure_evicts_under_allkeys_lru_and_fails_writes_under_noeviction() {
    let Some(lru) = TestServer::start(Kind::Container).await else {
        return;
    };
    let flooded = flood(&lru, &pressure("allkeys-lru"), 5_000).await;
    assert_eq!(flooded.totals().writes_ok, 5_000);
    let Event::Stats { evicted_keys, .. } = read_stats(&mut [lru.conn().await], ServerRole::Limiter, 0)
        .await
        .unwrap()
    else {
        unreachable!()
    };
    assert!(
        evicted_keys > 1_000,
        "the flood pushed the server past maxmemory: {evicted_keys} evictions"
    );
    lru.stop().await;

    let Some(strict) = TestServer::start(Kind::Container).await else {
        return;
    };
    let flooded = Arc::new(flood(&strict, &pressure("noeviction"), 5_000).await);
    let totals = flooded.totals();
    assert!(totals.writes_failed > 1_000, "{totals:?}");
    assert!(
        totals.first_error.as_deref().is_some_and(|e| e.contains("OOM")),
        "{totals:?}"
    );
    strict.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_client_that_dies_between_incr_and_expire_leaves_a_key_without_ttl() {
    let Some(server) = TestServer::start(Kind::Container).await else {
        return;
    };
    let s = scenario(
        5_000,
        "[[fault]]\nkind = \"client-dies-between-round-trips\"\nbefore_command = [\"EXPIRE\", \"PEXPIRE\"]",
    );
    let (recorder, history) = Recorder::in_memory();
    let nemesis = Nemesis::new(&s, server.conn().await, recorder.clone(), RunClock::start());
    let limiter = builtin("incr-then-expire").unwrap();
    let mut conn = Conn::from(server.conn().await);
    let ctx = RequestCtx {
        id: 0,
        identity: 0,
        ordinal: 1,
        key: s.limit.key(0),
        instance: 0,
        now_ms: 0,
    };
    let layout = layout(&s);
    let mut wire = Wire::new(&mut conn, &nemesis, &ctx, &layout);
    let died = limiter.acquire(&mut wire, &ctx.key, &s.limit).await;
    assert_eq!(wire.finish().0, ["INCR"], "the PEXPIRE was never sent");
    let error = died.expect_err("the request has no answer");
    assert!(
        error.is_io_error(),
        "an I/O error, so the driver records it as indeterminate: {error}"
    );
    assert_eq!(
        pttl(&mut conn, "rl:0").await,
        -1,
        "INCR created the key; nothing gave it a TTL"
    );
    let (decision, _) = acquire(limiter.as_ref(), &mut conn, &nemesis, 2, &s).await;
    assert_eq!(
        decision.count,
        Some(2),
        "the next request counts on, and never sets the TTL"
    );
    assert_eq!(pttl(&mut conn, "rl:0").await, -1);
    drop(recorder);
    assert!(faults(&history.finish().0)[0].contains("the client died"));
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn while_the_nemesis_strikes_the_identitys_other_requests_wait() {
    let Some(server) = TestServer::start(Kind::Container).await else {
        return;
    };
    let s = scenario(
        5_000,
        "[[fault]]\nkind = \"stall-between-round-trips\"\nstall_ms = 300\nrequest = 2",
    );
    let (recorder, _history) = Recorder::in_memory();
    let nemesis = Arc::new(Nemesis::new(&s, server.conn().await, recorder, RunClock::start()));
    let limiter = builtin("get-then-incr").unwrap();
    let mut conn = Conn::from(server.conn().await);
    acquire(limiter.as_ref(), &mut conn, nemesis.as_ref(), 1, &s).await;
    let stalled = {
        let (nemesis, limiter, s) = (Arc::clone(&nemesis), Arc::clone(&limiter), s.clone());
        let mut conn = Conn::from(server.conn().await);
        tokio::spawn(async move { acquire(limiter.as_ref(), &mut conn, nemesis.as_ref(), 2, &s).await })
    };
    tokio::time::sleep(Duration::from_millis(50)).await;
    let started = std::time::Instant::now();
    let third = RequestCtx {
        id: 2,
        identity: 0,
        ordinal: 3,
        key: s.limit.key(0),
        instance: 0,
        now_ms: 0,
    };
    nemesis.before_request(&third).await;
    let waited = started.elapsed();
    assert!(
        waited >= Duration::from_millis(200),
        "the third request waited for the strike: {waited:?}"
    );
    let (second, trips) = stalled.await.unwrap();
    assert_eq!(
        (second.count, trips),
        (Some(2), vec!["GET".to_owned(), "INCR".to_owned()]),
        "the struck request went on"
    );
    let other = RequestCtx {
        id: 3,
        identity: 1,
        ordinal: 1,
        key: s.limit.key(1),
        instance: 0,
        now_ms: 0,
    };
    let rule_is_for_identity_0 = s.faults[0].gap().unwrap().identity;
    assert_eq!(
        rule_is_for_identity_0, None,
        "this rule has no identity: everyone waits"
    );
    let started = std::time::Instant::now();
    nemesis.before_request(&other).await;
    assert!(
        started.elapsed() < Duration::from_millis(50),
        "nothing is being struck now"
    );
    server.stop().await;
}
