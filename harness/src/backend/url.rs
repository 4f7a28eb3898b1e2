//! An existing server the user points at — one server, or a Redis Cluster through one of its
//! nodes. The harness did not start it, so it never reconfigures, floods or flushes it unless
//! `--allow-reconfigure` says so (checked by the runner before anything is sent), and on a
//! cluster it never moves slots or fails nodes over.

use async_trait::async_trait;

use super::{Backend, BackendError, Cluster, ServerHandle, connect, wait_ready};
use crate::error::SetupError;
use crate::history::ServerRole;

#[derive(Debug)]
pub struct UrlBackend {
    url: String,
}

impl UrlBackend {
    pub fn new(url: String) -> Self {
        Self { url }
    }
}

#[async_trait]
impl Backend for UrlBackend {
    fn name(&self) -> &'static str {
        "url"
    }

    fn owns_servers(&self) -> bool {
        false
    }

    fn reproduce_flags(&self) -> String {
        format!("--backend url --url {}", self.url)
    }

    async fn start(
        &self,
        role: ServerRole,
        _run_id: &str,
        options: super::StartOptions,
    ) -> Result<Box<dyn ServerHandle>, SetupError> {
        if role == ServerRole::Cache {
            return Err(SetupError::Usage(
                "this scenario puts its cache on a separate server ([cache_server]), which --backend url cannot start; run it with the container or process backend".into(),
            ));
        }
        wait_ready(&self.url, std::time::Duration::from_secs(3))
            .await
            .map_err(|e| SetupError::Connect {
                url: self.url.clone(),
                reason: e.to_string(),
            })?;
        let cluster = cluster_enabled(&self.url).await?;
        if cluster != options.cluster_node {
            return Err(SetupError::Usage(if cluster {
                format!(
                    "{} is a Redis Cluster node (cluster_enabled:1), and this scenario runs on one server: run a scenario with `topology = \"cluster\"` in [server] against it (e.g. cluster-steady), or point --url at a server that is not in a cluster",
                    self.url
                )
            } else {
                format!(
                    "this scenario runs on a Redis Cluster (`topology = \"cluster\"`), and {} is not a cluster node (cluster_enabled:0): point --url at a node of your cluster, or run the scenario with --backend process or container (a cluster the harness starts)",
                    self.url
                )
            }));
        }
        Ok(Box::new(External { url: self.url.clone() }))
    }
}

/// Whether the server at `url` is a cluster node (`INFO cluster`).
async fn cluster_enabled(url: &str) -> Result<bool, SetupError> {
    let mut conn = connect(url).await?;
    let info: String = redis::cmd("INFO")
        .arg("cluster")
        .query_async(&mut conn)
        .await
        .map_err(|e| SetupError::Connect {
            url: url.to_owned(),
            reason: format!("INFO cluster: {e}"),
        })?;
    Ok(info.lines().any(|l| l.trim() == "cluster_enabled:1"))
}

/// The cluster that the node at `seed` belongs to, as its `CLUSTER NODES` lists it: each
/// primary, then each replica, at the address the cluster gives, reached with the seed's
/// scheme and credentials. Nodes the cluster marks failed (or without an address) are left
/// out. Nothing is sent but `CLUSTER INFO` and `CLUSTER NODES`; the nodes are not the
/// harness's, and stopping them does nothing.
pub async fn join_cluster(seed: Box<dyn ServerHandle>) -> Result<Cluster, SetupError> {
    let url = seed.url().to_owned();
    let read = |what: &'static str, e: redis::RedisError| SetupError::Connect {
        url: url.clone(),
        reason: format!("{what}: {e}"),
    };
    let mut conn = connect(&url).await?;
    let info: String = redis::cmd("CLUSTER")
        .arg("INFO")
        .query_async(&mut conn)
        .await
        .map_err(|e| read("CLUSTER INFO", e))?;
    if !info.lines().any(|l| l.trim() == "cluster_state:ok") {
        return Err(SetupError::Usage(format!(
            "the cluster of {url} is not ready (its CLUSTER INFO does not say cluster_state:ok): a run on it would judge the cluster's outage, not the limiter"
        )));
    }
    let nodes: String = redis::cmd("CLUSTER")
        .arg("NODES")
        .query_async(&mut conn)
        .await
        .map_err(|e| read("CLUSTER NODES", e))?;
    let (primaries, replicas) = node_addresses(&nodes);
    if primaries.is_empty() {
        return Err(SetupError::Usage(format!(
            "the CLUSTER NODES of {url} lists no primary serving slots"
        )));
    }
    let count = primaries.len();
    let nodes = primaries
        .into_iter()
        .chain(replicas)
        .map(|address| {
            Box::new(External {
                url: with_address(&url, &address),
            }) as Box<dyn ServerHandle>
        })
        .collect();
    Ok(Cluster::external(nodes, count))
}

/// The `host:port` of each primary serving slots and of each replica in a `CLUSTER NODES`
/// reply, in its order; an empty host (`:7000`, a node that does not know its address) is left
/// empty for [`with_address`] to fill in.
fn node_addresses(nodes: &str) -> (Vec<String>, Vec<String>) {
    let (mut primaries, mut replicas) = (Vec::new(), Vec::new());
    for line in nodes.lines() {
        let fields: Vec<&str> = line.split_whitespace().collect();
        let (Some(address), Some(flags)) = (fields.get(1), fields.get(2)) else {
            continue;
        };
        let flags: Vec<&str> = flags.split(',').collect();
        if flags.iter().any(|f| matches!(*f, "fail" | "noaddr" | "handshake")) {
            continue;
        }
        let endpoint = address.split(['@', ',']).next().unwrap_or_default().to_owned();
        if flags.contains(&"master") && fields.len() > 8 {
            primaries.push(endpoint);
        } else if flags.contains(&"slave") {
            replicas.push(endpoint);
        }
    }
    (primaries, replicas)
}

/// `seed` (`redis://[user:pass@]host:port[/db]`) with `address` in place of its `host:port`
/// (the seed's host where `address` has none).
fn with_address(seed: &str, address: &str) -> String {
    let (scheme, rest) = seed.split_once("://").unwrap_or(("redis", seed));
    let (authority, path) = rest.split_once('/').map_or((rest, ""), |(a, p)| (a, p));
    let (credentials, host_port) = authority.rsplit_once('@').map_or(("", authority), |(c, h)| (c, h));
    let seed_host = host_port.rsplit_once(':').map_or(host_port, |(h, _)| h);
    let address = match address.strip_prefix(':').filter(|port| !port.contains(':')) {
        Some(port) => format!("{seed_host}:{port}"),
        // An IPv6 host (`::1:7000`, as the cluster writes it) is bracketed in a URL.
        None => match address.rsplit_once(':') {
            Some((host, port)) if host.contains(':') => format!("[{host}]:{port}"),
            _ => address.to_owned(),
        },
    };
    let credentials = if credentials.is_empty() {
        String::new()
    } else {
        format!("{credentials}@")
    };
    let path = if path.is_empty() {
        String::new()
    } else {
        format!("/{path}")
    };
    format!("{scheme}://{credentials}{address}{path}")
}

pub use crate::text::redacted;

struct External {
    url: String,
}

#[async_trait]
impl ServerHandle for External {
    fn url(&self) -> &str {
        &self.url
    }

    fn describe(&self) -> String {
        // In the report and the history: without the password.
        format!("external server {}", redacted(&self.url))
    }

    async fn stop(self: Box<Self>) -> Result<(), BackendError> {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_clusters_nodes_are_read_from_cluster_nodes_primaries_first() {
        let nodes = "\
a1 127.0.0.1:7000@17000 myself,master - 0 0 1 connected 0-5460
r1 127.0.0.1:7003@17003 slave a1 0 1 4 connected
b2 127.0.0.1:7001@17001,host-b master - 0 1 2 connected 5461-10922
c3 :7002@17002 master - 0 1 3 connected 10923-16383
d4 127.0.0.1:7004@17004 master - 0 1 5 connected
f5 127.0.0.1:7005@17005 master,fail - 0 1 6 disconnected 1-2
";
        let (primaries, replicas) = node_addresses(nodes);
        assert_eq!(primaries, ["127.0.0.1:7000", "127.0.0.1:7001", ":7002"]);
        assert_eq!(replicas, ["127.0.0.1:7003"]);
    }

    #[test]
    fn a_server_is_described_without_its_password() {
        let server = External {
            url: "redis://app:s3cret@10.0.0.2:7001/0".into(),
        };
        assert_eq!(server.describe(), "external server redis://…@10.0.0.2:7001/0");
    }

    #[test]
    fn a_nodes_url_keeps_the_seeds_scheme_credentials_and_database() {
        assert_eq!(
            with_address("redis://127.0.0.1:7000", "10.0.0.2:7001"),
            "redis://10.0.0.2:7001"
        );
        assert_eq!(
            with_address("redis://app:s%40cret@db.example:7000/0", "10.0.0.2:7001"),
            "redis://app:s%40cret@10.0.0.2:7001/0"
        );
        assert_eq!(
            with_address("redis://db.example:7000", ":7002"),
            "redis://db.example:7002"
        );
        assert_eq!(with_address("redis://[::1]:7000", "::1:7001"), "redis://[::1]:7001");
    }
}
