//! What a cluster's nodes say about each other (`CLUSTER NODES`): which node serves a slot
//! in its own view. Shared by the cluster faults that move a slot's primary.

use redis::aio::MultiplexedConnection;

use super::fault_error::FaultError;
use crate::backend::{BackendError, Cluster, connect};

/// A connection of the harness's own to each node, in the cluster's node order.
pub(super) async fn connect_nodes(cluster: &Cluster) -> Result<Vec<MultiplexedConnection>, FaultError> {
    let mut conns = Vec::new();
    for url in cluster.urls() {
        conns.push(connect(url).await?);
    }
    Ok(conns)
}

/// The node serving `slot` now, and its id.
pub(super) async fn serving(conns: &mut [MultiplexedConnection], slot: u16) -> Result<(usize, String), FaultError> {
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

pub(super) async fn cluster_nodes(conn: &mut MultiplexedConnection) -> Result<String, FaultError> {
    let nodes: String = redis::cmd("CLUSTER")
        .arg("NODES")
        .query_async(conn)
        .await
        .map_err(BackendError::command("CLUSTER NODES"))?;
    Ok(nodes)
}

/// Whether a `CLUSTER NODES` slot field (`5461-10922`, `42`) covers `slot` (a migrating
/// marker `[…]` does not).
pub(super) fn in_range(field: &str, slot: u16) -> bool {
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
