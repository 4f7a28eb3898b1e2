//! The built-in limiters against a real Redis server (a container the test starts):
//! their decisions, counts, TTLs and round trips.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use limiter_harness::backend::Conn;
use limiter_harness::keys::KeyLayout;
use limiter_harness::limiter::{BUILTIN_NAMES, Decision, Limiter, Plant, RequestCtx, Wire, builtin};
use limiter_harness::nemesis::NoFaults;
use limiter_harness::scenario::{Algorithm, Limit};
use limiter_harness_tests::{Kind, TestServer};

fn limit(window_ms: u64) -> Limit {
    Limit {
        requests_max: 10,
        window_ms,
        identities: 1,
        instances: 1,
        key_prefix: "rl:".into(),
        keys: None,
    }
}

/// Request ids are unique in a run (log-based limiters use them as members).
static NEXT_ID: AtomicU64 = AtomicU64::new(0);

fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64
}

async fn acquire(limiter: &dyn Limiter, conn: &mut Conn, key: &str, limit: &Limit) -> (Decision, Vec<String>) {
    let ctx = RequestCtx {
        id: NEXT_ID.fetch_add(1, Ordering::Relaxed),
        identity: 0,
        ordinal: 1,
        key: key.to_owned(),
        instance: 0,
        now_ms: now_ms(),
    };
    let layout = KeyLayout::default_for(&limit.key_prefix, limit.identities);
    let mut wire = Wire::new(conn, &NoFaults, &ctx, &layout);
    let decision = limiter.acquire(&mut wire, key, limit).await.expect("a decision");
    (decision, wire.finish().0)
}

async fn pttl(conn: &mut Conn, key: &str) -> i64 {
    redis::cmd("PTTL").arg(key).query_async(conn).await.unwrap()
}

/// The keys a limiter wrote for the harness's key `key`: the key itself, or the keys built
/// on it (`{key}.tokens`, `key:cur`, …) by a limiter with several per identity — not the keys
/// of a key it is the start of (`admit:x` is not `admit:x-untagged`'s).
async fn keys_of(conn: &mut Conn, key: &str) -> Vec<String> {
    let mut keys: Vec<String> = redis::cmd("KEYS")
        .arg(format!("*{key}*"))
        .query_async(conn)
        .await
        .unwrap();
    keys.retain(|k| {
        k.match_indices(key).any(|(at, _)| {
            k[at + key.len()..]
                .chars()
                .next()
                .is_none_or(|c| !(c.is_ascii_alphanumeric() || c == '-' || c == '_'))
        })
    });
    keys.sort();
    keys
}

/// How long a built-in's keys may live: one window, two for those with several keys per
/// identity (a bucket kept two refill periods, a sliding window counter's two windows).
fn ttl_bound_ms(limiter: &dyn Limiter, limit: &Limit) -> i64 {
    let windows = if limiter.declared_keys(limit).is_some() { 2 } else { 1 };
    windows * limit.window_ms as i64
}

#[tokio::test(flavor = "multi_thread")]
async fn every_builtin_admits_the_limit_then_rejects_with_a_bounded_ttl() {
    let Some(server) = TestServer::start(Kind::Container).await else {
        return;
    };
    let mut conn = Conn::from(server.conn().await);
    // A minute's window: the refilling built-ins (GCRA, the token buckets) gain a request
    // every 6 s, so the 15 requests below see none even on a loaded machine (at 5 s, a GCRA
    // took 12 when its requests took over a second beside the other tests).
    let limit = limit(60_000);
    for name in BUILTIN_NAMES {
        let limiter = builtin(name).unwrap();
        limiter.prepare(&mut conn, &limit).await.unwrap();
        let key = format!("admit:{name}");
        let mut decisions = Vec::new();
        for _ in 0..15 {
            decisions.push(acquire(limiter.as_ref(), &mut conn, &key, &limit).await.0);
        }
        let allowed: Vec<bool> = decisions.iter().map(|d| d.allowed).collect();
        assert_eq!(allowed, [vec![true; 10], vec![false; 5]].concat(), "{name}");
        let counts: Vec<Option<i64>> = decisions.iter().take(10).map(|d| d.count).collect();
        if limiter.algorithm() == Algorithm::SlidingWindowCounter {
            // A weighted sum of two windows is no count: it reports none.
            assert_eq!(counts, vec![None; 10], "{name}");
        } else {
            assert_eq!(
                counts,
                (1..=10).map(Some).collect::<Vec<_>>(),
                "{name} reports the count it saw"
            );
        }
        let keys = keys_of(&mut conn, &key).await;
        assert!(!keys.is_empty(), "{name} wrote no key");
        for key in keys {
            let ttl = pttl(&mut conn, &key).await;
            let bound = ttl_bound_ms(limiter.as_ref(), &limit);
            assert!(ttl > 0 && ttl <= bound, "{name}: PTTL {ttl} of {key}, bound {bound}");
        }
    }
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn every_builtin_admits_again_once_its_window_expires() {
    let Some(server) = TestServer::start(Kind::Container).await else {
        return;
    };
    let mut conn = Conn::from(server.conn().await);
    let limit = limit(200);
    for name in BUILTIN_NAMES {
        let limiter = builtin(name).unwrap();
        limiter.prepare(&mut conn, &limit).await.unwrap();
        let mut attempt = 0;
        let key = loop {
            // A burst slower than a token's refill (window / limit), or straddling a window
            // of the clock, may be admitted by a correct limiter: on a loaded machine it is
            // tried again on a fresh key, at most three times.
            attempt += 1;
            let key = format!("window:{name}:{attempt}");
            let started_ms = now_ms();
            for _ in 0..12 {
                acquire(limiter.as_ref(), &mut conn, &key, &limit).await;
            }
            let allowed = acquire(limiter.as_ref(), &mut conn, &key, &limit).await.0.allowed;
            let ended_ms = now_ms();
            let slow = ended_ms - started_ms >= limit.window_ms / limit.requests_max
                || started_ms / limit.window_ms != ended_ms / limit.window_ms;
            assert!(
                !allowed || (slow && attempt < 3),
                "{name} rejects over the limit (attempt {attempt}, the burst took {} ms)",
                ended_ms - started_ms
            );
            if !allowed {
                break key;
            }
        };
        tokio::time::sleep(Duration::from_millis(260)).await;
        let (decision, _) = acquire(limiter.as_ref(), &mut conn, &key, &limit).await;
        let count = (limiter.algorithm() != Algorithm::SlidingWindowCounter).then_some(1);
        assert_eq!(
            (decision.allowed, decision.count),
            (true, count),
            "{name} starts a new window"
        );
    }
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn round_trips_are_the_documented_command_sequences() {
    let Some(server) = TestServer::start(Kind::Container).await else {
        return;
    };
    let mut conn = Conn::from(server.conn().await);
    let limit = Limit {
        requests_max: 2,
        ..limit(5_000)
    };
    let expected: [(&str, [&[&str]; 3]); 12] = [
        ("get-then-incr", [&["GET", "SET"], &["GET", "INCR"], &["GET"]]),
        ("incr-then-expire", [&["INCR", "PEXPIRE"], &["INCR"], &["INCR"]]),
        (
            "multi-incr-expire-nx",
            [
                &["MULTI INCR PEXPIRE EXEC"],
                &["MULTI INCR PEXPIRE EXEC"],
                &["MULTI INCR PEXPIRE EXEC"],
            ],
        ),
        ("lua-fixed-window", [&["EVALSHA"], &["EVALSHA"], &["EVALSHA"]]),
        (
            "exists-then-incr",
            [&["EXISTS", "SET"], &["EXISTS", "INCRBY"], &["EXISTS", "INCRBY"]],
        ),
        (
            "set-nx-then-incr",
            [&["SET", "INCRBY"], &["SET", "INCRBY"], &["SET", "INCRBY"]],
        ),
        (
            "pipeline-incr-expire",
            [&["INCRBY PEXPIRE"], &["INCRBY PEXPIRE"], &["INCRBY PEXPIRE"]],
        ),
        ("lua-incr-expire-if-first", [&["EVALSHA"], &["EVALSHA"], &["EVALSHA"]]),
        ("sliding-log-zset", [&["EVALSHA"], &["EVALSHA"], &["EVALSHA"]]),
        ("token-bucket-lua", [&["EVALSHA"], &["EVALSHA"], &["EVALSHA"]]),
        ("gcra-lua", [&["EVALSHA"], &["EVALSHA"], &["EVALSHA"]]),
        (
            "incr-pexpireat-client-clock",
            [
                &["MULTI INCR PEXPIREAT EXEC"],
                &["MULTI INCR PEXPIREAT EXEC"],
                &["MULTI INCR PEXPIREAT EXEC"],
            ],
        ),
    ];
    for (name, trips) in expected {
        let limiter = builtin(name).unwrap();
        limiter.prepare(&mut conn, &limit).await.unwrap();
        for want in trips {
            let (_, got) = acquire(limiter.as_ref(), &mut conn, &format!("trips:{name}"), &limit).await;
            assert_eq!(got, want, "{name}");
        }
        assert!(limiter.round_trips_max() as usize >= trips.iter().map(|t| t.len()).max().unwrap());
    }
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn only_the_fixes_repair_a_key_that_lost_its_ttl() {
    let Some(server) = TestServer::start(Kind::Container).await else {
        return;
    };
    let mut conn = Conn::from(server.conn().await);
    let limit = limit(1_000);
    let repairs = [
        ("get-then-incr", false),
        ("incr-then-expire", false),
        ("multi-incr-expire-nx", true),
        ("lua-fixed-window", true),
        ("exists-then-incr", false),
        ("set-nx-then-incr", false),
        ("pipeline-incr-expire", true),
        ("lua-incr-expire-if-first", false),
        ("incr-pexpireat-client-clock", true),
    ];
    for (name, heals) in repairs {
        let limiter = builtin(name).unwrap();
        limiter.prepare(&mut conn, &limit).await.unwrap();
        let key = format!("immortal:{name}");
        let () = redis::cmd("SET").arg(&key).arg(3).query_async(&mut conn).await.unwrap();
        acquire(limiter.as_ref(), &mut conn, &key, &limit).await;
        let ttl = pttl(&mut conn, &key).await;
        assert_eq!(
            ttl > 0,
            heals,
            "{name}: PTTL {ttl} after one request on a key without TTL"
        );
    }
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn lua_fixed_window_reloads_its_script_after_script_flush() {
    let Some(server) = TestServer::start(Kind::Container).await else {
        return;
    };
    let mut conn = Conn::from(server.conn().await);
    let limit = limit(1_000);
    let limiter = builtin("lua-fixed-window").unwrap();
    limiter.prepare(&mut conn, &limit).await.unwrap();
    let () = redis::cmd("SCRIPT").arg("FLUSH").query_async(&mut conn).await.unwrap();
    let (decision, trips) = acquire(limiter.as_ref(), &mut conn, "flushed", &limit).await;
    assert_eq!((decision.allowed, decision.count), (true, Some(1)));
    assert_eq!(trips, ["EVALSHA", "SCRIPT", "EVALSHA"]);
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn server_clock_limiters_heal_their_own_exhausted_state_within_a_window() {
    let Some(server) = TestServer::start(Kind::Container).await else {
        return;
    };
    let mut conn = Conn::from(server.conn().await);
    let limit = limit(300);
    for name in ["sliding-log-zset", "token-bucket-lua", "gcra-lua", "lua-fixed-window"] {
        let limiter = builtin(name).unwrap();
        limiter.prepare(&mut conn, &limit).await.unwrap();
        let key = format!("planted:{name}");
        let planted = limiter.plant_exhausted(&mut conn, 0, &key, &limit).await.unwrap();
        assert!(matches!(planted, Plant::Planted(_)), "{name}: {planted:?}");
        assert_eq!(pttl(&mut conn, &key).await, -1, "{name}: planted without a TTL");
        assert!(
            !acquire(limiter.as_ref(), &mut conn, &key, &limit).await.0.allowed,
            "{name}: exhausted"
        );
        tokio::time::sleep(Duration::from_millis(350)).await;
        let (decision, _) = acquire(limiter.as_ref(), &mut conn, &key, &limit).await;
        assert!(decision.allowed, "{name}: admitted again a window later");
        let ttl = pttl(&mut conn, &key).await;
        assert!(ttl > 0 && ttl <= 300, "{name}: healed, PTTL {ttl}");
    }
    server.stop().await;
}
