//! `node-pause`: on a Redis Cluster, the primary that serves an identity's key is stopped
//! (SIGSTOP, `docker pause`) for a while, as a long GC pause, a frozen VM or a saturated host
//! stops one. Longer than the cluster's node timeout, the other nodes mark it failed: its
//! replica, when it has one, wins an election and is promoted (the cluster's own failover),
//! and without one the cluster reports itself down (`CLUSTERDOWN`, on every node while full
//! coverage is required) until the node is back. Then the cluster settles: every node agrees
//! which node serves the slot, each says `cluster_state:ok`, and a demoted node has synced
//! from its successor.

use std::time::Duration;

use redis::aio::MultiplexedConnection;
use tokio::time::Instant;

use super::cluster_view::{cluster_nodes, connect_nodes, serving};
use super::fault_error::FaultError;
use crate::backend::{BackendError, Cluster, key_slot, owner_of};

/// How long the cluster may take to settle once the node goes on.
const SETTLE_WITHIN: Duration = Duration::from_secs(15);

/// How often the other nodes are asked, while the node is stopped and while the cluster
/// settles.
const POLL_EVERY: Duration = Duration::from_millis(50);

/// What a node pause did, for the fault's effect and the outage.
pub struct NodePause {
    pub effect: String,
    /// When the node was stopped, told to go on, and when the cluster had settled, in run
    /// time.
    pub frozen_us: u64,
    pub thawed_us: u64,
    pub settled_us: u64,
    /// Whether another node served the slot afterwards (the paused node's replica).
    pub failed_over: bool,
}

/// Stop the primary serving `key`'s slot for `pause_ms`, watch the others meanwhile, then
/// wait until the cluster has settled.
pub async fn node_pause(
    cluster: &Cluster,
    key: &str,
    pause_ms: u64,
    now_us: impl Fn() -> u64,
) -> Result<NodePause, FaultError> {
    let slot = key_slot(key.as_bytes());
    let mut conns = connect_nodes(cluster).await?;
    let (paused, paused_id) = serving(&mut conns, slot).await?;
    let ids = node_ids(&mut conns).await?;
    cluster.nodes[paused].freeze().await?;
    let frozen_us = now_us();
    let pause = Duration::from_millis(pause_ms);
    let seen = watch_others(&mut conns, slot, (paused, &paused_id), pause).await;
    let thawed_us = now_us();
    cluster.nodes[paused].thaw().await?;
    let settled = settle(&mut conns, slot, (paused, &paused_id)).await;
    let settled_us = now_us();
    let serving_now = settled.owner.as_ref().and_then(|o| ids.iter().position(|id| id == o));
    let failed_over = serving_now.is_some_and(|n| n != paused);
    let after = match serving_now {
        Some(n) if n != paused => format!(
            "node {n}, its replica, was promoted; node {paused} rejoined as its replica{}",
            if settled.synced {
                " and synced from it"
            } else {
                " (it had not yet synced)"
            }
        ),
        Some(_) => format!("node {paused} went on serving the slot"),
        None => "the nodes did not agree on who serves the slot".to_owned(),
    };
    let unsettled = if settled.lagging.is_empty() {
        String::new()
    } else {
        format!(
            "; not settled within {} s: {}",
            SETTLE_WITHIN.as_secs(),
            settled.lagging.join("; ")
        )
    };
    Ok(NodePause {
        effect: format!(
            "paused node {paused} (the primary serving slot {slot}: `{key}`) for {pause_ms} ms (SIGSTOP / docker pause); {}; then {after}, {} ms after it went on{unsettled}",
            seen.describe(),
            (settled_us - thawed_us) / 1000
        ),
        frozen_us,
        thawed_us,
        settled_us,
        failed_over,
    })
}

/// Each node's id, in the cluster's node order.
async fn node_ids(conns: &mut [MultiplexedConnection]) -> Result<Vec<String>, FaultError> {
    let mut ids = Vec::new();
    for conn in conns.iter_mut() {
        let nodes = cluster_nodes(conn).await?;
        let me = nodes.lines().find(|l| l.contains("myself")).unwrap_or_default();
        ids.push(me.split_whitespace().next().unwrap_or_default().to_owned());
    }
    Ok(ids)
}

/// What the other nodes said while the node was stopped: when, from the pause's start, one
/// first marked it failed, first reported the cluster down, first listed another node (its
/// replica) as the slot's primary.
#[derive(Default)]
struct Seen {
    failed_ms: Option<u64>,
    down_ms: Option<u64>,
    promoted_ms: Option<u64>,
}

impl Seen {
    fn describe(&self) -> String {
        let at = |what: &str, ms: Option<u64>| ms.map(|ms| format!("{what} {ms} ms into the pause"));
        let said: Vec<String> = [
            at("the others marked it failed", self.failed_ms),
            at("reported the cluster down", self.down_ms),
            at("listed its replica as the primary", self.promoted_ms),
        ]
        .into_iter()
        .flatten()
        .collect();
        if said.is_empty() {
            "the others went on as before (the pause was shorter than the node timeout)".to_owned()
        } else {
            said.join(", ")
        }
    }
}

/// Ask the nodes other than `paused` every [`POLL_EVERY`] until `pause` has passed (a node
/// that does not answer in time is asked again next time): the pause lasts `pause` whatever
/// they do.
async fn watch_others(
    conns: &mut [MultiplexedConnection],
    slot: u16,
    (paused, paused_id): (usize, &str),
    pause: Duration,
) -> Seen {
    let start = Instant::now();
    let deadline = start + pause;
    let mut seen = Seen::default();
    loop {
        for (_, conn) in conns.iter_mut().enumerate().filter(|(i, _)| *i != paused) {
            let Ok(Ok((info, nodes))) = tokio::time::timeout_at(deadline, states(conn)).await else {
                continue;
            };
            let ms = start.elapsed().as_millis() as u64;
            let line = nodes.lines().find(|l| l.starts_with(paused_id)).unwrap_or_default();
            let flags = line.split_whitespace().nth(2).unwrap_or_default();
            if flags.split(',').any(|f| f == "fail") {
                seen.failed_ms.get_or_insert(ms);
            }
            if info.contains("cluster_state:fail") {
                seen.down_ms.get_or_insert(ms);
            }
            if owner_of(&nodes, slot).is_some_and(|o| o != paused_id) {
                seen.promoted_ms.get_or_insert(ms);
            }
        }
        let now = Instant::now();
        if now >= deadline {
            return seen;
        }
        tokio::time::sleep_until(deadline.min(now + POLL_EVERY)).await;
    }
}

/// A node's `CLUSTER INFO` and `CLUSTER NODES`.
async fn states(conn: &mut MultiplexedConnection) -> Result<(String, String), FaultError> {
    let info: String = redis::cmd("CLUSTER")
        .arg("INFO")
        .query_async(conn)
        .await
        .map_err(BackendError::command("CLUSTER INFO"))?;
    Ok((info, cluster_nodes(conn).await?))
}

/// How the cluster stood when it had settled, or at the bound.
struct Settled {
    /// The id of the node every node lists as the slot's primary (the last one asked's, at
    /// the bound).
    owner: Option<String>,
    /// A demoted paused node replicates its successor, link up.
    synced: bool,
    /// What had not settled at the bound.
    lagging: Vec<String>,
}

/// Wait until every node says `cluster_state:ok` and lists the same primary for `slot`,
/// and, when that is not the paused node any more, the paused node's link to it is up.
async fn settle(conns: &mut [MultiplexedConnection], slot: u16, (paused, paused_id): (usize, &str)) -> Settled {
    let deadline = Instant::now() + SETTLE_WITHIN;
    loop {
        let mut lagging = Vec::new();
        let mut owners = Vec::new();
        for (i, conn) in conns.iter_mut().enumerate() {
            match tokio::time::timeout_at(deadline, states(conn)).await {
                Ok(Ok((info, nodes))) => {
                    if !info.contains("cluster_state:ok") {
                        lagging.push(format!("node {i} reported the cluster down"));
                    }
                    owners.push(owner_of(&nodes, slot));
                }
                Ok(Err(e)) => lagging.push(format!("node {i} did not answer ({e})")),
                Err(_) => lagging.push(format!("node {i} did not answer")),
            }
        }
        let owner = owners.last().cloned().flatten();
        if owners.iter().any(|o| *o != owner) || owner.is_none() {
            lagging.push("the nodes listed different primaries for the slot".to_owned());
        }
        let moved = owner.as_ref().is_some_and(|o| o != paused_id);
        let synced = moved && linked(&mut conns[paused]).await;
        if moved && !synced {
            lagging.push(format!("node {paused} had not synced from the new primary"));
        }
        if lagging.is_empty() || Instant::now() >= deadline {
            return Settled { owner, synced, lagging };
        }
        tokio::time::sleep(POLL_EVERY).await;
    }
}

/// Whether a node replicates a primary, its link up.
async fn linked(conn: &mut MultiplexedConnection) -> bool {
    let info: redis::RedisResult<String> = redis::cmd("INFO").arg("replication").query_async(conn).await;
    info.is_ok_and(|info| info.contains("role:slave") && info.contains("master_link_status:up"))
}
