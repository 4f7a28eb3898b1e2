//! Periodic samples of the limiter's keys.

use std::time::Duration;

use redis::aio::MultiplexedConnection;
use redis::{RedisResult, Value};
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use crate::clock::RunClock;
use crate::history::{Event, KeySample, Recorder};

/// One pass over every key under `prefix`: SCAN MATCH, then PTTL and GET pipelined.
/// PTTL does not touch the LRU clock; GET does, like any read of the application would.
pub async fn sample_keys(conn: &mut MultiplexedConnection, prefix: &str) -> RedisResult<Vec<KeySample>> {
    let pattern = format!("{prefix}*");
    let mut cursor: u64 = 0;
    let mut keys: Vec<String> = Vec::new();
    loop {
        let (next, batch): (u64, Vec<String>) = redis::cmd("SCAN")
            .arg(cursor)
            .arg("MATCH")
            .arg(&pattern)
            .arg("COUNT")
            .arg(1000)
            .query_async(conn)
            .await?;
        keys.extend(batch);
        if next == 0 {
            break;
        }
        cursor = next;
    }
    keys.sort();
    keys.dedup();
    let mut samples = Vec::with_capacity(keys.len());
    for chunk in keys.chunks(500) {
        let mut pipe = redis::pipe();
        pipe.ignore_errors();
        for key in chunk {
            pipe.cmd("PTTL").arg(key).cmd("GET").arg(key);
        }
        let replies: Vec<RedisResult<Value>> = pipe.query_async(conn).await?;
        for (key, pair) in chunk.iter().zip(replies.chunks(2)) {
            let pttl_ms = match &pair[0] {
                Ok(Value::Int(n)) => *n,
                _ => continue,
            };
            if pttl_ms == -2 {
                continue;
            }
            let value = match &pair[1] {
                Ok(Value::BulkString(bytes)) => Some(String::from_utf8_lossy(bytes).into_owned()),
                Ok(Value::Int(n)) => Some(n.to_string()),
                _ => None,
            };
            samples.push(KeySample {
                key: key.clone(),
                pttl_ms,
                value,
            });
        }
    }
    Ok(samples)
}

/// Sample every `interval` until `stop`; failures are recorded as problems, not fatal.
pub fn spawn_sampler(
    mut conn: MultiplexedConnection,
    prefix: String,
    interval: Duration,
    recorder: Recorder,
    clock: RunClock,
    stop: CancellationToken,
) -> JoinHandle<u64> {
    tokio::spawn(async move {
        let mut ticker = tokio::time::interval(interval);
        ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let mut failing = false;
        let mut taken = 0u64;
        loop {
            tokio::select! {
                () = stop.cancelled() => break,
                _ = ticker.tick() => {}
            }
            let t_start_us = clock.now_us();
            match sample_keys(&mut conn, &prefix).await {
                Ok(keys) => {
                    taken += 1;
                    failing = false;
                    recorder.record(Event::Sample {
                        t_start_us,
                        t_end_us: clock.now_us(),
                        final_audit: false,
                        keys,
                    });
                }
                Err(e) if !failing => {
                    failing = true;
                    recorder.record(Event::Problem {
                        t_us: clock.now_us(),
                        source: "sampler".into(),
                        detail: format!("sampling the limiter's keys failed: {e}"),
                        fatal: false,
                    });
                }
                Err(_) => {}
            }
        }
        taken
    })
}
