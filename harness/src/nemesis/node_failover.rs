//! `node-failover`: on a Redis Cluster, the primary that serves an identity's key fails over
//! to its replica. With writes to lose, the replica's stream is held in the primary's fault
//! proxy (a cluster's replicas sync through it once every node announces its proxy) and the
//! replica then takes over at once, as after a lost primary: what the primary acknowledged
//! meanwhile never reaches the new one. Without, a clean `CLUSTER FAILOVER`.

use std::time::Duration;

use redis::aio::MultiplexedConnection;
use tokio::sync::watch;

use super::cluster_view::{cluster_nodes, connect_nodes, serving};
use super::fault_error::FaultError;
use crate::backend::{BackendError, Cluster, key_slot, owner_of};

/// How long the cluster may take to agree on the promoted replica.
const AGREE_WITHIN: Duration = Duration::from_secs(10);

/// What a node failover did, for the fault's effect and the outage.
pub struct NodeFailover {
    pub effect: String,
    /// When the promotion was asked for, and when every node agreed and the demoted primary
    /// had synced from the new one (when it had not within the bound, when they agreed), in
    /// run time.
    pub started_us: u64,
    pub agreed_us: u64,
}

/// Fail over the primary of `key`'s slot to its replica; `holds[i]` holds node `i`'s
/// replication (empty when no fault proxy runs, so no write can be lost on purpose).
pub async fn node_failover(
    cluster: &Cluster,
    key: &str,
    lose_writes_ms: u64,
    holds: &[watch::Sender<bool>],
    now_us: impl Fn() -> u64,
) -> Result<NodeFailover, FaultError> {
    let slot = key_slot(key.as_bytes());
    let mut conns = connect_nodes(cluster).await?;
    let (primary, primary_id) = serving(&mut conns, slot).await?;
    let replica = replica_of(&mut conns, &primary_id).await?;
    // Released however this ends (an error included): replication is never left held.
    let (how, _held) = hold_back(&mut conns, (primary, replica), lose_writes_ms, holds).await?;
    let started_us = now_us();
    let mut failover = redis::cmd("CLUSTER");
    failover.arg("FAILOVER");
    if lose_writes_ms > 0 {
        failover.arg("TAKEOVER");
    }
    let asked: redis::RedisResult<()> = failover.query_async(&mut conns[replica]).await;
    // The promotion is what the fault is. A demoted primary slow to resync (seen in a
    // container, and under a suite's load: over 10 s) is said, not a failed strike, and the
    // outage ends when the cluster agreed. Nodes slow to learn of a promotion that took (the
    // promoted node a primary in its own view) are said too, and the outage ends at the bound.
    let mut resynced = true;
    let mut agreed_us = 0;
    let agreed = match asked {
        Ok(()) => match agree(&mut conns, replica, slot).await {
            Ok(lagging) => {
                agreed_us = now_us();
                resynced = lagging.is_empty() && synced(&mut conns[primary]).await.is_ok();
                Ok(lagging)
            }
            Err(e) => Err(e),
        },
        Err(e) => Err(BackendError::command("CLUSTER FAILOVER")(e).into()),
    };
    drop(_held);
    let lagging = agreed?;
    if resynced {
        agreed_us = now_us();
    }
    let agreement = if lagging.is_empty() {
        let synced_or_not = if resynced { "had" } else { "had not yet" };
        format!("the cluster agreed, and node {primary} {synced_or_not} synced from it as its replica")
    } else {
        format!("{} within {} s", lagging.join("; "), AGREE_WITHIN.as_secs())
    };
    Ok(NodeFailover {
        effect: format!(
            "node {replica} (the replica of node {primary}, which served slot {slot}: `{key}`) became its primary: {how}; {agreement}, in {} ms",
            (agreed_us - started_us) / 1000
        ),
        started_us,
        agreed_us,
    })
}

/// Hold `primary`'s replication for `lose_writes_ms` (none when 0): how the failover goes,
/// and the hold, released when dropped.
async fn hold_back<'a>(
    conns: &mut [MultiplexedConnection],
    (primary, replica): (usize, usize),
    lose_writes_ms: u64,
    holds: &'a [watch::Sender<bool>],
) -> Result<(String, Option<Held<'a>>), FaultError> {
    if lose_writes_ms == 0 {
        return Ok(("CLUSTER FAILOVER (the replica caught up first)".to_owned(), None));
    }
    let held = Held::new(holds.get(primary).ok_or(FaultError::NoProxyToHold)?);
    tokio::time::sleep(Duration::from_millis(lose_writes_ms)).await;
    let behind = repl_offset(&mut conns[primary], "master_repl_offset")
        .await?
        .saturating_sub(repl_offset(&mut conns[replica], "slave_repl_offset").await?);
    let how = format!(
        "replication held back {lose_writes_ms} ms in the primary's proxy (the replica {behind} bytes behind), then CLUSTER FAILOVER TAKEOVER"
    );
    Ok((how, Some(held)))
}

/// A primary's replication held until this is dropped.
struct Held<'a>(&'a watch::Sender<bool>);

impl<'a> Held<'a> {
    fn new(hold: &'a watch::Sender<bool>) -> Self {
        hold.send_replace(true);
        Self(hold)
    }
}

impl Drop for Held<'_> {
    fn drop(&mut self) {
        self.0.send_replace(false);
    }
}

/// A node replicating the node `primary_id`.
async fn replica_of(conns: &mut [MultiplexedConnection], primary_id: &str) -> Result<usize, FaultError> {
    for (i, conn) in conns.iter_mut().enumerate() {
        let nodes = cluster_nodes(conn).await?;
        let me = nodes.lines().find(|l| l.contains("myself")).unwrap_or_default();
        let fields: Vec<&str> = me.split_whitespace().collect();
        if fields.len() > 3 && fields[2].contains("slave") && fields[3] == primary_id {
            return Ok(i);
        }
    }
    Err(FaultError::NoReplica)
}

/// Wait until every node lists node `promoted` as the primary serving `slot` (the demoted
/// node included: until it has given the slot up it goes on answering as its primary): no
/// lagging node, or, at the bound, what each lagging node still says. An error when the
/// promoted node is not a primary even in its own view (the promotion did not take).
async fn agree(conns: &mut [MultiplexedConnection], promoted: usize, slot: u16) -> Result<Vec<String>, FaultError> {
    let id = {
        let nodes = cluster_nodes(&mut conns[promoted]).await?;
        let me = nodes.lines().find(|l| l.contains("myself")).unwrap_or_default();
        me.split_whitespace().next().unwrap_or_default().to_owned()
    };
    let deadline = tokio::time::Instant::now() + AGREE_WITHIN;
    loop {
        let mut lagging = Vec::new();
        let mut promoted_flags = String::new();
        for (i, conn) in conns.iter_mut().enumerate() {
            let nodes = cluster_nodes(conn).await?;
            let line = nodes.lines().find(|l| l.starts_with(&id)).unwrap_or_default();
            let flags = line.split_whitespace().nth(2).unwrap_or("nothing").to_owned();
            if i == promoted {
                promoted_flags.clone_from(&flags);
            }
            match owner_of(&nodes, slot) {
                Some(owner) if owner == id => {}
                Some(owner) => lagging.push(format!("node {i} still listed {owner} as the slot's primary")),
                None => lagging.push(format!("node {i} listed no primary for the slot")),
            }
        }
        if lagging.is_empty() {
            return Ok(Vec::new());
        }
        if tokio::time::Instant::now() >= deadline {
            if !promoted_flags.contains("master") {
                return Err(FaultError::NotPromoted {
                    node: promoted,
                    flags: promoted_flags,
                    timeout_s: AGREE_WITHIN.as_secs(),
                });
            }
            return Ok(lagging);
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Wait until the demoted primary has synced from the new one (its link up): until then it
/// still holds, and its reads show, what the failover lost.
async fn synced(demoted: &mut MultiplexedConnection) -> Result<(), FaultError> {
    let deadline = tokio::time::Instant::now() + AGREE_WITHIN;
    loop {
        let info: String = redis::cmd("INFO")
            .arg("replication")
            .query_async(demoted)
            .await
            .map_err(BackendError::command("INFO replication"))?;
        if info.contains("role:slave") && info.contains("master_link_status:up") {
            return Ok(());
        }
        if tokio::time::Instant::now() >= deadline {
            return Err(FaultError::NotResynced {
                timeout_s: AGREE_WITHIN.as_secs(),
            });
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// A field of `INFO replication` (0 when absent, as a replica's master offset is).
pub(super) async fn repl_offset(conn: &mut MultiplexedConnection, field: &str) -> Result<u64, BackendError> {
    let info: String = redis::cmd("INFO")
        .arg("replication")
        .query_async(conn)
        .await
        .map_err(BackendError::command("INFO replication"))?;
    Ok(info
        .lines()
        .find_map(|l| l.strip_prefix(field)?.strip_prefix(':'))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(0))
}
