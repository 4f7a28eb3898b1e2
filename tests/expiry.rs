//! The hold around expiry (`clear_of_expiry_ms`) against a real server: it asks the server
//! how long a key has left, so a TTL that is not one window, or a notification that arrived
//! late, does not let a request start just before its key expires.

use std::time::Duration;

use limiter_harness::clock::RunClock;
use limiter_harness::observer::ExpiryWatch;
use limiter_harness_tests::{Kind, TestServer};
use redis::aio::MultiplexedConnection;

async fn pttl(conn: &mut MultiplexedConnection, key: &str) -> i64 {
    redis::cmd("PTTL").arg(key).query_async(conn).await.unwrap()
}

/// A key given 300 ms against a 2 s window, and the moment it has at most 35 ms left.
async fn key_about_to_expire(conn: &mut MultiplexedConnection, key: &str) {
    loop {
        let () = redis::cmd("SET")
            .arg(key)
            .arg(1)
            .arg("PX")
            .arg(300)
            .query_async(conn)
            .await
            .unwrap();
        loop {
            let left_ms = pttl(conn, key).await;
            if (1..=35).contains(&left_ms) {
                return;
            }
            if left_ms < 0 {
                break; // Overshot (a busy machine): again.
            }
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_request_is_held_until_the_key_the_server_says_is_expiring_is_gone() {
    let server = TestServer::start(Kind::Process).await.expect("a server");
    let mut conn = server.conn().await;
    let clock = RunClock::start();

    // Counted from the notification, the key would be due a window (2 s) later and nothing
    // would hold a request 35 ms before its real expiry. Asking the server, the request
    // waits until the key has expired.
    let asking = ExpiryWatch::new(2_000, clock).ask(&server.url, None);
    key_about_to_expire(&mut conn, "rl:1").await;
    asking.seen(1, "rl:1", "expire");
    asking.clear(1, 40_000).await;
    assert_eq!(pttl(&mut conn, "rl:1").await, -2, "held until the key expired");

    // A key far from its expiry does not hold anything.
    let () = redis::cmd("SET")
        .arg("rl:2")
        .arg(1)
        .arg("PX")
        .arg(60_000)
        .query_async(&mut conn)
        .await
        .unwrap();
    asking.seen(2, "rl:2", "expire");
    let started = std::time::Instant::now();
    asking.clear(2, 40_000).await;
    assert!(
        started.elapsed() < Duration::from_secs(1),
        "not held: {:?}",
        started.elapsed()
    );
    assert!(pttl(&mut conn, "rl:2").await > 50_000);
    server.stop().await;
}
