//! Keyspace notifications for the limiter's keys: `expired`, `evicted`, `del`, `expire`...

use futures::StreamExt;
use redis::aio::MultiplexedConnection;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use super::expiry::ExpiryWatch;
use crate::backend::connect;
use crate::clock::RunClock;
use crate::error::SetupError;
use crate::history::{Event, ProblemSource, Recorder};
use crate::keys::KeyLayout;

pub use crate::backend::KEYSPACE_FLAGS;

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

/// How often a cluster node's role is asked (see [`watch_role`]).
const ROLE_EVERY: Duration = Duration::from_millis(50);

/// Subscribe to `__keyspace@<db>__:<glob>` for each of the layout's globs (in the database
/// the URL selects) and record every notification for a limiter key until `stop`. Returns
/// once the subscription is active, so no event of the run is missed. With `primary` (a
/// cluster node's role, from [`watch_role`]), what the node notifies counts while it is a
/// primary (see `Filter::keeps`): a replica's notifications replay its primary's (an expiry
/// arrives as a `del`), and a failover makes a replica a primary.
pub async fn subscribe_keyspace(
    url: &str,
    layout: KeyLayout,
    recorder: Recorder,
    clock: RunClock,
    stop: CancellationToken,
    (watch, primary): (Arc<ExpiryWatch>, Option<Arc<AtomicBool>>),
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
    let filter = Filter {
        overlapping: patterns.len() > 1,
        channel_prefix,
        layout,
        channels,
        primary,
    };
    let mut pubsub = psubscribe(&client, &patterns).await?;
    Ok(tokio::spawn(async move {
        let mut seen = 0u64;
        while listen(&mut pubsub, &filter, &recorder, &clock, &stop, &watch, &mut seen).await {
            // The server went away (a restart): subscribe again once it is back.
            let t_lost_us = clock.now_us();
            let again = resubscribe(&client, &patterns, &stop).await;
            note_loss(&recorder, &clock, t_lost_us, again.is_some());
            match again {
                Some(again) => pubsub = again,
                None => break,
            }
        }
        seen
    }))
}

/// Which notifications are the run's: a key of the layout, once per glob.
struct Filter {
    channel_prefix: String,
    layout: KeyLayout,
    /// Each template's channel pattern, to keep the first glob's copy of a key two globs match.
    channels: Vec<String>,
    overlapping: bool,
    /// A cluster node's role: its notifications count while it is a primary.
    primary: Option<Arc<AtomicBool>>,
}

impl Filter {
    /// Whether a notification of `event` counts: on a cluster node last seen as a replica,
    /// only `expired` and `evicted`, which only a primary sends (a replica neither expires
    /// nor evicts keys: it replays its primary's `del`s) — so a promoted node's expiries
    /// count before its new role is seen, and a demoted node's replays do not.
    fn keeps(&self, event: &str) -> bool {
        let replica = self.primary.as_ref().is_some_and(|p| !p.load(Ordering::Relaxed));
        counts_from(replica, event)
    }
}

/// Whether a notification of `event` counts from a node (last seen as a replica or not).
fn counts_from(replica: bool, event: &str) -> bool {
    !replica || matches!(event, "expired" | "evicted")
}

impl Filter {
    /// The notification's key and the identity it belongs to, when it is one of the run's.
    fn key_of(&self, msg: &redis::Msg) -> Option<(u32, String)> {
        let key = msg.get_channel_name().strip_prefix(self.channel_prefix.as_str())?;
        // Only the keys the layout says are the run's (a glob matches more).
        let identity = self.layout.identity_of(key.as_bytes())?;
        if self.overlapping {
            let first = self
                .layout
                .template_of(key.as_bytes())
                .map(|t| self.channels[t].as_str());
            if msg.get_pattern::<String>().ok().as_deref() != first {
                return None;
            }
        }
        Some((identity, key.to_owned()))
    }
}

/// Record the run's notifications until `stop` (false) or until the connection is lost (true).
async fn listen(
    pubsub: &mut redis::aio::PubSub,
    filter: &Filter,
    recorder: &Recorder,
    clock: &RunClock,
    stop: &CancellationToken,
    watch: &ExpiryWatch,
    seen: &mut u64,
) -> bool {
    {
        let mut messages = pubsub.on_message();
        loop {
            tokio::select! {
                () = stop.cancelled() => return false,
                msg = messages.next() => match msg {
                    Some(msg) => {
                        let Some((identity, key)) = filter.key_of(&msg) else { continue };
                        let event: String = msg.get_payload().unwrap_or_default();
                        if !filter.keeps(&event) {
                            continue;
                        }
                        *seen += 1;
                        watch.seen(identity, &key, &event);
                        recorder.record(Event::Keyspace { t_us: clock.now_us(), key, event });
                    }
                    None => break,
                }
            }
        }
    }
    true
}

/// A lost notification connection: a gap when it was subscribed again, the end of the
/// notifications (so the checkers know they are incomplete) when not.
fn note_loss(recorder: &Recorder, clock: &RunClock, t_lost_us: u64, resubscribed: bool) {
    let (source, detail) = if resubscribed {
        (
            ProblemSource::KeyspaceGap,
            format!(
                "the keyspace-notification connection closed at {} ms and was subscribed again at {} ms: notifications in between were not seen",
                t_lost_us / 1000,
                clock.now_us() / 1000
            ),
        )
    } else {
        (
            ProblemSource::Keyspace,
            "the keyspace-notification connection closed; later expirations and evictions were not seen".to_owned(),
        )
    };
    recorder.record(Event::Problem {
        t_us: clock.now_us(),
        source,
        detail,
        fatal: false,
        noted: false,
    });
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

/// Whether the node at `url` is a primary, kept current until `stop` (its `ROLE` asked every
/// [`ROLE_EVERY`]; a node that does not answer, paused, keeps its last role).
pub async fn watch_role(url: &str, stop: CancellationToken) -> Result<(Arc<AtomicBool>, JoinHandle<u64>), SetupError> {
    let mut conn = connect(url).await?;
    let primary = Arc::new(AtomicBool::new(is_primary(&mut conn).await.unwrap_or(true)));
    let role = Arc::clone(&primary);
    let task = tokio::spawn(async move {
        loop {
            tokio::select! {
                () = stop.cancelled() => return 0,
                () = tokio::time::sleep(ROLE_EVERY) => {}
            }
            if let Some(now) = is_primary(&mut conn).await {
                role.store(now, Ordering::Relaxed);
            }
        }
    });
    Ok((primary, task))
}

/// Whether a node's `ROLE` is `master` (`None` when it did not answer).
async fn is_primary(conn: &mut MultiplexedConnection) -> Option<bool> {
    let reply: Vec<redis::Value> = redis::cmd("ROLE").query_async(conn).await.ok()?;
    Some(matches!(reply.first(), Some(redis::Value::BulkString(role)) if role == b"master"))
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_replica_counts_only_what_a_primary_alone_sends() {
        for event in ["expired", "evicted", "del", "expire", "rename_to"] {
            assert!(super::counts_from(false, event), "a primary's {event}");
        }
        assert!(super::counts_from(true, "expired") && super::counts_from(true, "evicted"));
        assert!(
            !super::counts_from(true, "del"),
            "a replayed DEL (its primary's expiry)"
        );
        assert!(!super::counts_from(true, "expire"));
    }
}
