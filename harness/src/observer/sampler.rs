//! Periodic samples of the limiter's keys.

use std::collections::HashSet;
use std::time::Duration;

use redis::aio::MultiplexedConnection;
use redis::{RedisResult, Value};
use tokio::sync::mpsc;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use crate::clock::RunClock;
use crate::history::{Event, KeySample, ProblemSource, Recorder};
use crate::keys::KeyLayout;

/// Every limiter key on the servers that hold them (`nodes`: one server, or each primary of
/// a cluster): SCAN MATCH each of the layout's globs on each, keeping the keys the layout says
/// are the run's (a glob matches more than its template does).
pub async fn scan_layout(nodes: &mut [MultiplexedConnection], layout: &KeyLayout) -> RedisResult<Vec<String>> {
    scan_patterns(nodes, layout, &layout.patterns()).await
}

/// The keys of one identity, by the layout, on `nodes`.
pub async fn scan_identity(
    nodes: &mut [MultiplexedConnection],
    layout: &KeyLayout,
    identity: u32,
) -> RedisResult<Vec<String>> {
    let keys = scan_patterns(nodes, layout, &layout.patterns_for(identity)).await?;
    Ok(keys.into_iter().filter(|k| layout.is_key_of(k, identity)).collect())
}

async fn scan_patterns(
    nodes: &mut [MultiplexedConnection],
    layout: &KeyLayout,
    patterns: &[String],
) -> RedisResult<Vec<String>> {
    let mut keys: Vec<String> = Vec::new();
    for conn in nodes.iter_mut() {
        for pattern in patterns {
            let found = scan_matching(conn, pattern).await?;
            keys.extend(found.into_iter().filter(|k| layout.identity_of(k.as_bytes()).is_some()));
        }
    }
    keys.sort();
    keys.dedup();
    Ok(keys)
}

/// Every key matching the glob `pattern` (SCAN, never KEYS).
pub async fn scan_matching(conn: &mut MultiplexedConnection, pattern: &str) -> RedisResult<Vec<String>> {
    let mut keys = Vec::new();
    let mut scan = Scan::new(pattern);
    while let Some(batch) = scan.next_batch(conn).await? {
        keys.extend(batch);
    }
    Ok(keys)
}

/// A SCAN MATCH over the keyspace, a batch at a time (the server's cursor; a key may come
/// twice, as SCAN promises no more).
struct Scan<'a> {
    pattern: &'a str,
    /// `None` once the server said the scan is complete.
    cursor: Option<u64>,
}

impl<'a> Scan<'a> {
    fn new(pattern: &'a str) -> Self {
        Self {
            pattern,
            cursor: Some(0),
        }
    }

    /// The next batch of keys, or `None` when the scan is over.
    async fn next_batch(&mut self, conn: &mut MultiplexedConnection) -> RedisResult<Option<Vec<String>>> {
        let Some(cursor) = self.cursor else {
            return Ok(None);
        };
        let (next, batch): (u64, Vec<String>) = redis::cmd("SCAN")
            .arg(cursor)
            .arg("MATCH")
            .arg(self.pattern)
            .arg("COUNT")
            .arg(1000)
            .query_async(conn)
            .await?;
        self.cursor = (next != 0).then_some(next);
        Ok(Some(batch))
    }
}

/// One pass over every limiter key: each SCAN batch's keys are read (PTTL and GET,
/// pipelined) as soon as the batch arrives, so a key that lives a fraction of the scan's
/// time (a token bucket a request or two below full lives window / max) is read while it
/// still exists; reading only after the whole scan missed such keys on a large keyspace.
/// PTTL does not touch the LRU clock; GET does, like any read of the application would.
/// On a cluster (`cluster`), each primary in turn: a key lives on one; each read is preceded
/// by `ASKING`, so that a key a reshard has just moved is read on the primary importing it
/// (which answers `MOVED` otherwise, until the slot is its own).
pub async fn sample_keys(
    nodes: &mut [MultiplexedConnection],
    layout: &KeyLayout,
    cluster: bool,
) -> RedisResult<Vec<KeySample>> {
    let mut samples = Vec::new();
    // A key two globs match is read once.
    let mut listed: HashSet<String> = HashSet::new();
    for conn in nodes.iter_mut() {
        for pattern in layout.patterns() {
            let mut scan = Scan::new(&pattern);
            while let Some(batch) = scan.next_batch(conn).await? {
                let keys: Vec<String> = batch
                    .into_iter()
                    .filter(|k| layout.identity_of(k.as_bytes()).is_some() && listed.insert(k.clone()))
                    .collect();
                read_keys(conn, &keys, cluster, &mut samples).await?;
            }
        }
    }
    samples.sort_by(|a, b| a.key.cmp(&b.key));
    Ok(samples)
}

/// PTTL and GET of `keys`, pipelined 500 keys at a time (each after `ASKING` when `asking`);
/// a key gone meanwhile is left out.
async fn read_keys(
    conn: &mut MultiplexedConnection,
    keys: &[String],
    asking: bool,
    samples: &mut Vec<KeySample>,
) -> RedisResult<()> {
    for chunk in keys.chunks(500) {
        let mut pipe = redis::pipe();
        pipe.ignore_errors();
        for key in chunk {
            if asking {
                pipe.cmd("ASKING").ignore();
            }
            pipe.cmd("PTTL").arg(key);
            if asking {
                pipe.cmd("ASKING").ignore();
            }
            pipe.cmd("GET").arg(key);
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
    Ok(())
}

/// Asks the sampler for a sample as soon as it can (the driver asks at the end of every phase
/// that sent requests, so that a run's keys are sampled whatever the machine's speed). It
/// does not wait: the run's timing stays the scenario's.
#[derive(Debug, Clone)]
pub struct SampleNow {
    tx: mpsc::Sender<()>,
}

impl SampleNow {
    pub fn ask(&self) {
        // Full: a sample is already asked for, and it will do.
        let _ = self.tx.try_send(());
    }
}

/// Sample every `interval`, and whenever [`SampleNow::take`] asks, until `stop`; failures are
/// recorded as problems, not fatal.
/// `nodes`: each server holding the limiter's keys, its URL and the harness's connection to it.
pub fn spawn_sampler(
    nodes: Vec<(String, MultiplexedConnection)>,
    cluster: bool,
    layout: KeyLayout,
    interval: Duration,
    recorder: Recorder,
    clock: RunClock,
    stop: CancellationToken,
) -> (JoinHandle<u64>, SampleNow) {
    let (tx, mut asked) = mpsc::channel::<()>(1);
    let (urls, mut conns): (Vec<String>, Vec<MultiplexedConnection>) = nodes.into_iter().unzip();
    let handle = tokio::spawn(async move {
        let mut ticker = tokio::time::interval(interval);
        ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let mut failing = false;
        let mut taken = 0u64;
        loop {
            tokio::select! {
                () = stop.cancelled() => break,
                _ = ticker.tick() => {}
                Some(()) = asked.recv() => {}
            }
            let t_start_us = clock.now_us();
            match sample_keys(&mut conns, &layout, cluster).await {
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
                Err(e) => {
                    if !failing {
                        failing = true;
                        recorder.record(Event::Problem {
                            t_us: clock.now_us(),
                            source: ProblemSource::Sampler,
                            detail: format!("sampling the limiter's keys failed: {e}"),
                            fatal: false,
                            noted: false,
                        });
                    }
                    // A restarted server: the old connection is gone for good.
                    if e.is_connection_dropped() || e.is_io_error() || e.is_unrecoverable_error() {
                        reconnect(&urls, &mut conns).await;
                    }
                }
            }
        }
        taken
    });
    (handle, SampleNow { tx })
}

/// Open each node's connection again (those that answer within a second).
async fn reconnect(urls: &[String], conns: &mut [MultiplexedConnection]) {
    for (url, conn) in urls.iter().zip(conns.iter_mut()) {
        if let Ok(Ok(fresh)) = tokio::time::timeout(Duration::from_secs(1), crate::backend::connect(url)).await {
            *conn = fresh;
        }
    }
}
