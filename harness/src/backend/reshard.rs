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

/// How long an atomic slot migration and the primaries' agreement on its end may take.
const ATOMIC_WITHIN: Duration = Duration::from_secs(10);

/// Move `slot` from the primary serving it to the next one (in the cluster's order), holding
/// it `migrating` (its keys moved, the slot not yet given away) for that long.
pub async fn move_slot(cluster: &Cluster, slot: u16, migrating: Duration) -> Result<SlotMove, SetupError> {
    let (mut primaries, from, to) = source_and_target(cluster, slot).await?;
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

/// Move `slot` to the next primary by Valkey's atomic slot migration (9.0 and later): `CLUSTER
/// MIGRATESLOTS` on the source, which copies the slot's keys to the target while it goes on
/// serving them and then hands the slot over at once; done when the source reports the job a
/// success and every primary lists the target as the slot's owner.
pub async fn move_slot_atomically(cluster: &Cluster, slot: u16) -> Result<SlotMove, SetupError> {
    let (mut primaries, from, to) = source_and_target(cluster, slot).await?;
    let to_id = primaries[to].id.clone();
    let mut count = redis::cmd("CLUSTER");
    count.arg("COUNTKEYSINSLOT").arg(slot);
    let keys_moved: usize = query(&mut primaries[from].conn, &count, "CLUSTER COUNTKEYSINSLOT").await?;
    let mut start = redis::cmd("CLUSTER");
    start
        .arg("MIGRATESLOTS")
        .arg("SLOTSRANGE")
        .arg(slot)
        .arg(slot)
        .arg("NODE")
        .arg(&to_id);
    let started: redis::RedisResult<()> = start.query_async(&mut primaries[from].conn).await;
    started.map_err(|e| {
        cluster_error(&format!(
            "CLUSTER MIGRATESLOTS (atomic slot migration needs Valkey 9.0 or later): {e}"
        ))
    })?;
    let deadline = tokio::time::Instant::now() + ATOMIC_WITHIN;
    wait_for_export(&mut primaries[from].conn, slot, &to_id, deadline).await?;
    // The others learn the new owner over gossip: done when every primary says so.
    for primary in &mut primaries {
        loop {
            let nodes: String = query(&mut primary.conn, redis::cmd("CLUSTER").arg("NODES"), "CLUSTER NODES").await?;
            if owner_of(&nodes, slot).as_deref() == Some(to_id.as_str()) {
                break;
            }
            if tokio::time::Instant::now() >= deadline {
                return Err(cluster_error(&format!(
                    "the primary at {} still does not list the target as slot {slot}'s owner",
                    primary.url
                )));
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
    Ok(SlotMove {
        slot,
        from: primaries[from].url.clone(),
        to: primaries[to].url.clone(),
        keys_moved,
    })
}

/// Poll the source until its export of `slot` to the node `to_id` is a success (an error if
/// it failed, was cancelled, or is not done by `deadline`).
async fn wait_for_export(
    source: &mut MultiplexedConnection,
    slot: u16,
    to_id: &str,
    deadline: tokio::time::Instant,
) -> Result<(), SetupError> {
    let range = format!("{slot}-{slot}");
    loop {
        let jobs: Vec<redis::Value> = query(
            source,
            redis::cmd("CLUSTER").arg("GETSLOTMIGRATIONS"),
            "CLUSTER GETSLOTMIGRATIONS",
        )
        .await?;
        // This move's job: the source's newest export of the slot to the target (the list
        // keeps recent jobs too, such as an earlier import of the same slot).
        let job = jobs
            .iter()
            .map(fields)
            .filter(|f| {
                f.get("operation").map(String::as_str) == Some("EXPORT")
                    && f.get("slot_ranges") == Some(&range)
                    && f.get("target_node").map(String::as_str) == Some(to_id)
            })
            .max_by_key(|f| f.get("create_time").and_then(|t| t.parse::<u64>().ok()));
        match job.as_ref().and_then(|f| f.get("state")).map(String::as_str) {
            Some("success") => return Ok(()),
            Some(state @ ("failed" | "cancelled")) => {
                let message = job.as_ref().and_then(|f| f.get("message")).cloned().unwrap_or_default();
                return Err(cluster_error(&format!(
                    "the atomic migration of slot {slot} ended {state}: {message}"
                )));
            }
            _ if tokio::time::Instant::now() >= deadline => {
                return Err(cluster_error(&format!(
                    "the atomic migration of slot {slot} did not succeed within {} s",
                    ATOMIC_WITHIN.as_secs()
                )));
            }
            _ => tokio::time::sleep(Duration::from_millis(20)).await,
        }
    }
}

/// A `CLUSTER GETSLOTMIGRATIONS` entry's fields (a map, or in RESP2 a flat list of names and
/// values), as text.
fn fields(job: &redis::Value) -> std::collections::BTreeMap<String, String> {
    let text = |v: &redis::Value| redis::from_redis_value_ref::<String>(v).unwrap_or_default();
    match job {
        redis::Value::Map(pairs) => pairs.iter().map(|(k, v)| (text(k), text(v))).collect(),
        redis::Value::Array(items) => items
            .chunks(2)
            .filter(|p| p.len() == 2)
            .map(|p| (text(&p[0]), text(&p[1])))
            .collect(),
        _ => Default::default(),
    }
}

/// The cluster's primaries (connected, with their ids), the index of the one serving `slot`
/// and of the next one, where it goes.
async fn source_and_target(cluster: &Cluster, slot: u16) -> Result<(Vec<Primary>, usize, usize), SetupError> {
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
    Ok((primaries, from, to))
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
