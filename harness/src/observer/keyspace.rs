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
    let mut pubsub = client.get_async_pubsub().await?;
    let channel_prefix = format!("__keyspace@{db}__:");
    let patterns = layout.patterns();
    // With several globs, a key matching two is notified twice: keep its first glob's copy.
    let channels: Vec<String> = layout
        .templates
        .iter()
        .map(|t| format!("{channel_prefix}{}", t.pattern()))
        .collect();
    let overlapping = patterns.len() > 1;
    for pattern in &patterns {
        pubsub.psubscribe(format!("{channel_prefix}{pattern}")).await?;
    }
    Ok(tokio::spawn(async move {
        let mut messages = pubsub.on_message();
        let mut seen = 0u64;
        loop {
            tokio::select! {
                () = stop.cancelled() => break,
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
                    None => {
                        recorder.record(Event::Problem {
                            t_us: clock.now_us(),
                            source: "keyspace".into(),
                            detail: "the keyspace-notification connection closed; later expirations and evictions were not seen".into(),
                            fatal: false,
                            noted: false,
                        });
                        break;
                    }
                }
            }
        }
        seen
    }))
}
