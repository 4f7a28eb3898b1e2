//! Moving a hash slot of a running cluster to another primary, as `redis-cli --cluster
//! reshard` does: the target `IMPORTING` the slot, the source `MIGRATING` it, every key of the
//! slot moved with `MIGRATE` (its TTL with it), then the slot given to the target on every
//! primary. While the slot migrates, a command on a key already moved gets `ASK` from the
//! source (a multi-key command `TRYAGAIN`); once it is given away, `MOVED`.

use std::time::Duration;

use redis::aio::MultiplexedConnection;

use super::cluster::{Cluster, cluster_error, run as query};
use super::connect;
use super::relay::socket_addr;
use crate::error::SetupError;

/// Keys moved per `MIGRATE`.
const BATCH: usize = 100;
/// How long one `MIGRATE` may take.
const MIGRATE_TIMEOUT_MS: u64 = 5_000;

/// What a slot move did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SlotMove {
    pub slot: u16,
    /// The primaries' URLs, where it was and where it is.
    pub from: String,
    pub to: String,
    pub keys_moved: usize,
}

/// One primary: its URL, the harness's connection and its node id.
struct Primary {
    url: String,
    conn: MultiplexedConnection,
    id: String,
}

/// Move `slot` from the primary serving it to the next one (in the cluster's order), holding
/// it `migrating` (its keys moved, the slot not yet given away) for that long.
pub async fn move_slot(cluster: &Cluster, slot: u16, migrating: Duration) -> Result<SlotMove, SetupError> {
    let mut primaries = Vec::new();
    for url in cluster.primary_urls() {
        let mut conn = connect(url).await?;
        let id: String = query(&mut conn, redis::cmd("CLUSTER").arg("MYID"), "CLUSTER MYID").await?;
        primaries.push(Primary {
            url: url.to_owned(),
            conn,
            id,
        });
    }
    if primaries.len() < 2 {
        return Err(cluster_error(
            "a reshard needs two primaries or more: `primaries = 2` at least",
        ));
    }
    let nodes: String = query(
        &mut primaries[0].conn,
        redis::cmd("CLUSTER").arg("NODES"),
        "CLUSTER NODES",
    )
    .await?;
    let owner = owner_of(&nodes, slot).ok_or_else(|| cluster_error(&format!("no primary serves slot {slot}")))?;
    let from = primaries.iter().position(|p| p.id == owner).ok_or_else(|| {
        cluster_error(&format!(
            "slot {slot}'s owner {owner} is not one of the run's primaries"
        ))
    })?;
    let to = (from + 1) % primaries.len();
    let (from_id, to_id) = (primaries[from].id.clone(), primaries[to].id.clone());
    setslot(&mut primaries[to].conn, slot, "IMPORTING", &from_id).await?;
    setslot(&mut primaries[from].conn, slot, "MIGRATING", &to_id).await?;
    let target = socket_addr(&primaries[to].url).map_err(|e| cluster_error(&e.to_string()))?;
    let mut keys_moved = migrate_all(&mut primaries[from].conn, slot, target).await?;
    tokio::time::sleep(migrating).await;
    // A key written meanwhile to one that still existed on the source stayed there.
    keys_moved += migrate_all(&mut primaries[from].conn, slot, target).await?;
    // The target first, then the source, then the rest (as redis-cli does).
    for index in std::iter::once(to)
        .chain(std::iter::once(from))
        .chain((0..primaries.len()).filter(|i| *i != to && *i != from))
    {
        setslot(&mut primaries[index].conn, slot, "NODE", &to_id).await?;
    }
    Ok(SlotMove {
        slot,
        from: primaries[from].url.clone(),
        to: primaries[to].url.clone(),
        keys_moved,
    })
}

/// Every key of `slot` on the source, moved to `target`; how many.
async fn migrate_all(
    source: &mut MultiplexedConnection,
    slot: u16,
    target: std::net::SocketAddr,
) -> Result<usize, SetupError> {
    let mut moved = 0;
    loop {
        let mut get = redis::cmd("CLUSTER");
        get.arg("GETKEYSINSLOT").arg(slot).arg(BATCH);
        let keys: Vec<Vec<u8>> = query(source, &get, "CLUSTER GETKEYSINSLOT").await?;
        if keys.is_empty() {
            return Ok(moved);
        }
        let mut migrate = redis::cmd("MIGRATE");
        migrate
            .arg(target.ip().to_string())
            .arg(target.port())
            .arg("")
            .arg(0)
            .arg(MIGRATE_TIMEOUT_MS)
            .arg("KEYS")
            .arg(&keys);
        // "NOKEY" when every key went meanwhile (expired): nothing moved, and no error.
        let reply: redis::Value = query(source, &migrate, "MIGRATE").await?;
        if !matches!(&reply, redis::Value::SimpleString(s) if s == "NOKEY") {
            moved += keys.len();
        }
    }
}

async fn setslot(conn: &mut MultiplexedConnection, slot: u16, state: &str, node: &str) -> Result<(), SetupError> {
    let mut cmd = redis::cmd("CLUSTER");
    cmd.arg("SETSLOT").arg(slot).arg(state).arg(node);
    query(conn, &cmd, &format!("CLUSTER SETSLOT {slot} {state}")).await
}

/// The id of the primary a `CLUSTER NODES` reply says serves `slot` (its ranges follow the
/// 8 fixed fields; `[slot->-id]` entries are migrations in progress, not ranges); a node
/// flagged failed (`fail`, or `fail?` in this node's view) serves nothing.
pub fn owner_of(nodes: &str, slot: u16) -> Option<String> {
    nodes.lines().find_map(|line| {
        let fields: Vec<&str> = line.split_whitespace().collect();
        if fields.get(2).is_none_or(|flags| flags.contains("fail")) {
            return None;
        }
        let serves = fields.get(8..)?.iter().filter(|r| !r.starts_with('[')).any(|range| {
            let (first, last) = range.split_once('-').unwrap_or((range, range));
            matches!((first.parse::<u16>(), last.parse::<u16>()), (Ok(a), Ok(b)) if (a..=b).contains(&slot))
        });
        serves.then(|| fields[0].to_owned())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_owner_of_a_slot_is_read_from_cluster_nodes() {
        let nodes = "\
a1 127.0.0.1:7000@17000 myself,master - 0 0 1 connected 0-5460 [5461->-b2]
b2 127.0.0.1:7001@17001 master - 0 1700000000000 2 connected 5461-10921
c3 127.0.0.1:7002@17002 master - 0 1700000000000 3 connected 10922-16382 16383
d4 127.0.0.1:7003@17003 slave a1 0 1700000000000 1 connected
";
        assert_eq!(owner_of(nodes, 0).as_deref(), Some("a1"));
        assert_eq!(owner_of(nodes, 5461).as_deref(), Some("b2"));
        assert_eq!(owner_of(nodes, 16383).as_deref(), Some("c3"));
        assert_eq!(owner_of(nodes, 12000).as_deref(), Some("c3"));
        let failed = nodes.replace("b2 127.0.0.1:7001@17001 master", "b2 127.0.0.1:7001@17001 master,fail");
        assert_eq!(owner_of(&failed, 6000), None, "a failed primary does not serve");
    }
}
