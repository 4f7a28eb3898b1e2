//! The harness's own connections to where a run's limiter keys live: one server, or each
//! primary of a Redis Cluster. Scans, samples and `INFO` counters go to every such node;
//! writes on keys (a `[[setup]]`, a limiter's preparation) go through a connection that
//! routes them by slot on a cluster.

use redis::aio::MultiplexedConnection;

use crate::backend::{Conn, Direct, ServerHandle, connect, connect_client, connect_cluster};
use crate::error::SetupError;

pub struct Admin {
    /// The limiter's server (a cluster's first primary): `INFO`, `CONFIG`, what is the
    /// server's own.
    pub server: MultiplexedConnection,
    /// Each server that holds keys, with its URL: the one server, or every primary.
    pub nodes: Vec<(String, MultiplexedConnection)>,
    /// Commands on keys: the server's connection, or a cluster connection.
    pub keys: Conn,
    /// Every node of a cluster (primaries first), or `None` for one server.
    pub cluster: Option<Vec<String>>,
}

impl Admin {
    /// Connect to the limiter's server, and on a cluster to each of its nodes.
    pub async fn connect(limiter: &dyn ServerHandle) -> Result<Self, SetupError> {
        let server = connect(limiter.url()).await?;
        let Some(cluster) = limiter.as_cluster() else {
            return Ok(Self {
                nodes: vec![(limiter.url().to_owned(), server.clone())],
                keys: Conn::from(server.clone()),
                server,
                cluster: None,
            });
        };
        let mut nodes = Vec::new();
        for url in cluster.primary_urls() {
            let mut conn = connect(url).await?;
            // A primary a node failover demotes goes on answering the samples' reads.
            let readonly: redis::RedisResult<()> = redis::cmd("READONLY").query_async(&mut conn).await;
            readonly.map_err(|e| SetupError::Connect {
                url: url.to_owned(),
                reason: format!("READONLY: {e}"),
            })?;
            nodes.push((url.to_owned(), conn));
        }
        let seeds: Vec<String> = cluster.urls().into_iter().map(str::to_owned).collect();
        Ok(Self {
            server,
            nodes,
            keys: Conn::from(connect_cluster(&seeds).await?),
            cluster: Some(seeds),
        })
    }

    /// The connections to the nodes holding keys, for a scan or a sample.
    pub fn node_conns(&self) -> Vec<MultiplexedConnection> {
        self.nodes.iter().map(|(_, conn)| conn.clone()).collect()
    }

    /// Connect again (after a server restart or a failover closed the connections).
    pub async fn reconnect(&mut self, limiter: &dyn ServerHandle) -> Result<(), SetupError> {
        *self = Self::connect(limiter).await?;
        Ok(())
    }
}

/// One connection of a limiter's: to the server (or the proxy), multiplexed or `direct`
/// (one caller at a time, see [`Direct`]), or a cluster connection.
pub async fn connect_limiter(url: &str, cluster: Option<&[String]>, direct: bool) -> Result<Conn, SetupError> {
    match cluster {
        Some(seeds) => Ok(connect_cluster(seeds).await?.into()),
        None if direct => Ok(Conn::Direct(Direct::connect(url).await?)),
        None => Ok(connect_client(url).await?.into()),
    }
}
