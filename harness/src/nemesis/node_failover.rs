//! `node-failover`: on a Redis Cluster, the primary that serves an identity's key fails over
//! to its replica. With writes to lose, the replica's stream is held in the primary's fault
//! proxy (a cluster's replicas sync through it once every node announces its proxy) and the
//! replica then takes over at once, as after a lost primary: what the primary acknowledged
//! meanwhile never reaches the new one. Without, a clean `CLUSTER FAILOVER`.

use std::time::Duration;

use redis::aio::MultiplexedConnection;
use tokio::sync::watch;

use super::fault_error::FaultError;
use crate::backend::{BackendError, Cluster, connect, key_slot};

/// How long the cluster may take to agree on the promoted replica.
const AGREE_WITHIN: Duration = Duration::from_secs(10);

/// What a node failover did, for the fault's effect and the outage.
pub struct NodeFailover {
    pub effect: String,
    /// When the promotion was asked for, and when every node agreed and the demoted primary
    /// had synced from the new one, in run time.
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
    let mut conns = Vec::new();
    for url in cluster.urls() {
        conns.push(connect(url).await?);
    }
    let (primary, primary_id) = serving(&mut conns, slot).await?;
    let replica = replica_of(&mut conns, &primary_id).await?;
    // Released however this ends (an error included): replication is never left held.
    let mut _held = None;
    let how = if lose_writes_ms > 0 {
        let hold = holds.get(primary).ok_or(FaultError::NoProxyToHold)?;
        _held = Some(Held::new(hold));
        tokio::time::sleep(Duration::from_millis(lose_writes_ms)).await;
        let behind = repl_offset(&mut conns[primary], "master_repl_offset")
            .await?
            .saturating_sub(repl_offset(&mut conns[replica], "slave_repl_offset").await?);
        format!(
            "replication held back {lose_writes_ms} ms in the primary's proxy (the replica {behind} bytes behind), then CLUSTER FAILOVER TAKEOVER"
        )
    } else {
        "CLUSTER FAILOVER (the replica caught up first)".to_owned()
    };
    // The demoted primary's full sync from the new one starts at once (not after the
    // default 5 s of waiting for more replicas): the failover is over when it has synced.
    let mut at_once = redis::cmd("CONFIG");
    at_once.arg("SET").arg("repl-diskless-sync-delay").arg(0);
    let set: redis::RedisResult<()> = at_once.query_async(&mut conns[replica]).await;
    set.map_err(BackendError::command("CONFIG SET repl-diskless-sync-delay 0"))?;
    let started_us = now_us();
    let mut failover = redis::cmd("CLUSTER");
    failover.arg("FAILOVER");
    if lose_writes_ms > 0 {
        failover.arg("TAKEOVER");
    }
    let asked: redis::RedisResult<()> = failover.query_async(&mut conns[replica]).await;
    // The promotion is what the fault is; a demoted primary slow to resync (seen once in a
    // container) ends the outage at the bound and is said, not a failed strike.
    let mut resynced = true;
    let agreed = match asked {
        Ok(()) => match agree(&mut conns, replica).await {
            Ok(()) => {
                resynced = synced(&mut conns[primary]).await.is_ok();
                Ok(())
            }
            Err(e) => Err(e),
        },
        Err(e) => Err(BackendError::command("CLUSTER FAILOVER")(e).into()),
    };
    drop(_held);
    agreed?;
    let agreed_us = now_us();
    let synced_or_not = if resynced { "had" } else { "had not yet" };
    Ok(NodeFailover {
        effect: format!(
            "node {replica} (the replica of node {primary}, which served slot {slot}: `{key}`) became its primary: {how}; the cluster agreed, and node {primary} {synced_or_not} synced from it as its replica, in {} ms",
            (agreed_us - started_us) / 1000
        ),
        started_us,
        agreed_us,
    })
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

/// The node serving `slot` now, and its id.
async fn serving(conns: &mut [MultiplexedConnection], slot: u16) -> Result<(usize, String), FaultError> {
    for (i, conn) in conns.iter_mut().enumerate() {
        let nodes = cluster_nodes(conn).await?;
        let Some(me) = nodes.lines().find(|l| l.contains("myself")) else {
            continue;
        };
        let fields: Vec<&str> = me.split_whitespace().collect();
        if fields.len() > 8 && fields[2].contains("master") && fields[8..].iter().any(|r| in_range(r, slot)) {
            return Ok((i, fields[0].to_owned()));
        }
    }
    Err(FaultError::NoReplica)
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

/// Wait until every node lists node `promoted` as a primary.
async fn agree(conns: &mut [MultiplexedConnection], promoted: usize) -> Result<(), FaultError> {
    let id = {
        let nodes = cluster_nodes(&mut conns[promoted]).await?;
        let me = nodes.lines().find(|l| l.contains("myself")).unwrap_or_default();
        me.split_whitespace().next().unwrap_or_default().to_owned()
    };
    let deadline = tokio::time::Instant::now() + AGREE_WITHIN;
    loop {
        let mut all = true;
        for conn in conns.iter_mut() {
            let nodes = cluster_nodes(conn).await?;
            let line = nodes.lines().find(|l| l.starts_with(&id)).unwrap_or_default();
            all &= line.split_whitespace().nth(2).is_some_and(|f| f.contains("master"));
        }
        if all {
            return Ok(());
        }
        if tokio::time::Instant::now() >= deadline {
            return Err(FaultError::NotCaughtUp {
                timeout_s: AGREE_WITHIN.as_secs(),
            });
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
            return Err(FaultError::NotCaughtUp {
                timeout_s: AGREE_WITHIN.as_secs(),
            });
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

async fn cluster_nodes(conn: &mut MultiplexedConnection) -> Result<String, FaultError> {
    let nodes: String = redis::cmd("CLUSTER")
        .arg("NODES")
        .query_async(conn)
        .await
        .map_err(BackendError::command("CLUSTER NODES"))?;
    Ok(nodes)
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

/// Whether a `CLUSTER NODES` slot field (`5461-10922`, `42`) covers `slot` (a migrating
/// marker `[…]` does not).
fn in_range(field: &str, slot: u16) -> bool {
    if field.starts_with('[') {
        return false;
    }
    let (first, last) = field.split_once('-').unwrap_or((field, field));
    match (first.parse::<u16>(), last.parse::<u16>()) {
        (Ok(first), Ok(last)) => first <= slot && slot <= last,
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn slot_fields_cover_their_ranges() {
        assert!(super::in_range("0-5460", 0) && super::in_range("0-5460", 5460));
        assert!(!super::in_range("0-5460", 5461));
        assert!(super::in_range("42", 42) && !super::in_range("42", 43));
        assert!(!super::in_range("[42->-abc]", 42));
    }
}
