//! A limiter's connection: to one server, or to a Redis Cluster through the `redis` crate's
//! cluster client, which routes each command by the slot of its keys and follows `MOVED`
//! and `ASK` as a team's cluster client would. The limiter API ([`crate::limiter::Wire`],
//! `prepare`, `plant`) takes this type, so the same limiter code runs on either.

use futures::future::BoxFuture;
use redis::aio::{ConnectionLike, MultiplexedConnection};
use redis::cluster_async::ClusterConnection;
use redis::{Cmd, Pipeline, RedisFuture, Value};

use super::direct::Direct;
use super::settings::{CONNECT_TIMEOUT, RESPONSE_TIMEOUT};
use crate::error::SetupError;

/// A connection a limiter sends its commands on. Cloning shares the connection (both kinds
/// multiplex their callers over it).
#[derive(Clone)]
pub enum Conn {
    /// One server (or the fault proxy in front of it).
    Node(MultiplexedConnection),
    /// A cluster: one connection per node, commands routed by slot.
    Cluster(ClusterConnection),
    /// One server, one caller at a time, without a connection task (a burst worker's own).
    Direct(Direct),
}

impl From<MultiplexedConnection> for Conn {
    fn from(conn: MultiplexedConnection) -> Self {
        Self::Node(conn)
    }
}

impl From<ClusterConnection> for Conn {
    fn from(conn: ClusterConnection) -> Self {
        Self::Cluster(conn)
    }
}

impl ConnectionLike for Conn {
    fn req_packed_command<'a>(&'a mut self, cmd: &'a Cmd) -> RedisFuture<'a, Value> {
        match self {
            Self::Node(conn) => conn.req_packed_command(cmd),
            Self::Cluster(conn) => conn.req_packed_command(cmd),
            Self::Direct(conn) => conn.req_packed_command(cmd),
        }
    }

    fn req_packed_commands<'a>(
        &'a mut self,
        pipeline: &'a Pipeline,
        offset: usize,
        count: usize,
    ) -> RedisFuture<'a, Vec<Value>> {
        match self {
            Self::Node(conn) => conn.req_packed_commands(pipeline, offset, count),
            Self::Cluster(conn) => conn.req_packed_commands(pipeline, offset, count),
            Self::Direct(conn) => conn.req_packed_commands(pipeline, offset, count),
        }
    }

    fn get_db(&self) -> i64 {
        match self {
            Self::Node(conn) => conn.get_db(),
            Self::Cluster(conn) => conn.get_db(),
            Self::Direct(conn) => conn.get_db(),
        }
    }
}

impl std::fmt::Debug for Conn {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Self::Node(_) => "Conn::Node",
            Self::Cluster(_) => "Conn::Cluster",
            Self::Direct(_) => "Conn::Direct",
        })
    }
}

/// A cluster connection with the harness's timeouts, found through `seeds` (any of the
/// cluster's nodes: the client learns the rest from `CLUSTER SLOTS`).
pub fn connect_cluster(seeds: &[String]) -> BoxFuture<'_, Result<ClusterConnection, SetupError>> {
    Box::pin(connect_cluster_unboxed(seeds))
}

async fn connect_cluster_unboxed(seeds: &[String]) -> Result<ClusterConnection, SetupError> {
    let failed = |reason: String| SetupError::Connect {
        url: seeds.join(","),
        reason,
    };
    let client = redis::cluster::ClusterClient::builder(seeds.to_vec())
        .connection_timeout(CONNECT_TIMEOUT)
        .response_timeout(RESPONSE_TIMEOUT)
        .build()
        .map_err(|e| failed(e.to_string()))?;
    client.get_async_connection().await.map_err(|e| failed(e.to_string()))
}
