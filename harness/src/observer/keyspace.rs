//! Keyspace notifications for the limiter's keys: `expired`, `evicted`, `del`, `expire`...

use futures::StreamExt;
use redis::aio::MultiplexedConnection;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use crate::clock::RunClock;
use crate::history::{Event, Recorder};
use crate::keys::KeyLayout;

/// `notify-keyspace-events` flags the harness sets on servers it owns: keyspace channel (K),
/// generic commands such as DEL and EXPIRE (g), expiry (x) and eviction (e).
pub const KEYSPACE_FLAGS: &str = "Kgxe";

/// Whether the server already publishes what the observer needs (for servers it must not
/// reconfigure).
pub async fn keyspace_events_enabled(conn: &mut MultiplexedConnection) -> redis::RedisResult<bool> {
    let (_, flags): (String, String) = redis::cmd("CONFIG")
        .arg("GET")
        .arg("notify-keyspace-events")
        .query_async(conn)
        .await?;
    // 'A' is the alias for every class but K, E, m and n.
    let has = |c: char| flags.contains(c) || flags.contains('A');
    Ok(flags.contains('K') && has('g') && has('x') && has('e'))
}

/// Subscribe to `__keyspace@<db>__:<glob>` for each of the layout's globs (in the database
/// the URL selects) and record every notification for a limiter key until `stop`. Returns
/// once the subscription is active, so no event of the run is missed.
pub async fn subscribe_keyspace(
    url: &str,
    layout: KeyLayout,
    recorder: Recorder,
    clock: RunClock,
    stop: CancellationToken,
) -> redis::RedisResult<JoinHandle<u64>> {
    let client = redis::Client::open(url)?;
    let db = client.get_connection_info().redis_settings().db();
    let channel_prefix = format!("__keyspace@{db}__:");
    let patterns: Vec<String> = layout
        .patterns()
        .iter()
        .map(|p| format!("{channel_prefix}{p}"))
        .collect();
    // With several globs, a key matching two is notified twice: keep its first glob's copy.
    let channels: Vec<String> = layout
        .templates
        .iter()
        .map(|t| format!("{channel_prefix}{}", t.pattern()))
        .collect();
    let overlapping = patterns.len() > 1;
    let mut pubsub = psubscribe(&client, &patterns).await?;
    Ok(tokio::spawn(async move {
        let mut seen = 0u64;
        loop {
            let mut messages = pubsub.on_message();
            let lost = loop {
                tokio::select! {
                    () = stop.cancelled() => break false,
                    msg = messages.next() => match msg {
                        Some(msg) => {
                            let key = msg.get_channel_name().strip_prefix(channel_prefix.as_str()).unwrap_or_default().to_owned();
                            // Only the keys the layout says are the run's (a glob matches more).
                            if layout.identity_of(key.as_bytes()).is_none() {
                                continue;
                            }
                            if overlapping {
                                let first = layout.template_of(key.as_bytes()).map(|t| channels[t].as_str());
                                if msg.get_pattern::<String>().ok().as_deref() != first {
                                    continue;
                                }
                            }
                            let event: String = msg.get_payload().unwrap_or_default();
                            seen += 1;
                            recorder.record(Event::Keyspace { t_us: clock.now_us(), key, event });
                        }
                        None => break true,
                    }
                }
            };
            drop(messages);
            if !lost {
                break;
            }
            // The server went away (a restart): subscribe again once it is back.
            let t_lost_us = clock.now_us();
            match resubscribe(&client, &patterns, &stop).await {
                Some(again) => {
                    pubsub = again;
                    recorder.record(Event::Problem {
                        t_us: clock.now_us(),
                        source: "keyspace-gap".into(),
                        detail: format!(
                            "the keyspace-notification connection closed at {} ms and was subscribed again at {} ms: notifications in between were not seen",
                            t_lost_us / 1000,
                            clock.now_us() / 1000
                        ),
                        fatal: false,
                        noted: false,
                    });
                }
                None => {
                    recorder.record(Event::Problem {
                        t_us: clock.now_us(),
                        source: "keyspace".into(),
                        detail:
                            "the keyspace-notification connection closed; later expirations and evictions were not seen"
                                .into(),
                        fatal: false,
                        noted: false,
                    });
                    break;
                }
            }
        }
        seen
    }))
}

async fn psubscribe(client: &redis::Client, channels: &[String]) -> redis::RedisResult<redis::aio::PubSub> {
    let mut pubsub = client.get_async_pubsub().await?;
    for channel in channels {
        pubsub.psubscribe(channel).await?;
    }
    Ok(pubsub)
}

/// Try to subscribe again for up to ten seconds (a restarting server), unless the run ends.
async fn resubscribe(
    client: &redis::Client,
    channels: &[String],
    stop: &CancellationToken,
) -> Option<redis::aio::PubSub> {
    let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(10);
    while tokio::time::Instant::now() < deadline && !stop.is_cancelled() {
        if let Ok(pubsub) = psubscribe(client, channels).await {
            return Some(pubsub);
        }
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    None
}
