//! A Redis Cluster of the harness's own: `primaries` nodes sharing the 16384 hash slots in
//! equal ranges, each with `replicas` replicas, started by a backend as cluster nodes
//! (`cluster-enabled`, a bus port of their own), joined with `CLUSTER MEET`, and ready when
//! every node reports `cluster_state:ok` and the same slot map. Stopped node by node, like
//! any server the harness starts (`clean` finds a node as it finds a server).

use std::collections::BTreeSet;
use std::time::Duration;

use async_trait::async_trait;
use futures::future::BoxFuture;
use redis::aio::MultiplexedConnection;

use super::{Backend, BackendError, ServerHandle, StartOptions, connect, socket_addr};
use crate::error::SetupError;
use crate::history::ServerRole;

/// The hash slots of a Redis Cluster.
pub const SLOTS: u16 = 16384;

/// How long a new cluster may take to agree on its slot map.
const READY_WITHIN: Duration = Duration::from_secs(15);

/// The nodes of a started cluster: the primaries first, then each primary's replicas in turn.
pub struct Cluster {
    pub nodes: Vec<Box<dyn ServerHandle>>,
    pub primaries: usize,
    /// Whether the harness started it (and may move its slots, fail its nodes over, make
    /// them announce the fault proxies): not a cluster reached through `--backend url`.
    pub owned: bool,
}

impl std::fmt::Debug for Cluster {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Cluster")
            .field("nodes", &self.urls())
            .field("primaries", &self.primaries)
            .finish()
    }
}

impl Cluster {
    /// A cluster the harness did not start: its `nodes` (primaries first), as found.
    pub fn external(nodes: Vec<Box<dyn ServerHandle>>, primaries: usize) -> Self {
        Self {
            nodes,
            primaries,
            owned: false,
        }
    }

    /// Every node's URL, primaries first.
    pub fn urls(&self) -> Vec<&str> {
        self.nodes.iter().map(|n| n.url()).collect()
    }

    /// The primaries' URLs: where every key is served, each by one of them.
    pub fn primary_urls(&self) -> Vec<&str> {
        self.nodes.iter().take(self.primaries).map(|n| n.url()).collect()
    }

    /// Stop every node.
    pub fn stop(self) -> BoxFuture<'static, Result<(), BackendError>> {
        Box::pin(self.stop_unboxed())
    }

    async fn stop_unboxed(self) -> Result<(), BackendError> {
        let mut first_error = None;
        for node in self.nodes {
            if let Err(e) = node.stop().await {
                first_error.get_or_insert(e);
            }
        }
        first_error.map_or(Ok(()), Err)
    }
}

/// A cluster is the limiter's server of a cluster run: its URL is the first primary's (a seed
/// node: a cluster client learns the rest from it), and it stops node by node.
#[async_trait]
impl ServerHandle for Cluster {
    fn url(&self) -> &str {
        self.nodes[0].url()
    }

    fn describe(&self) -> String {
        let replicas = self.nodes.len() - self.primaries;
        let nodes: Vec<String> = self.nodes.iter().map(|n| n.describe()).collect();
        let whose = if self.owned { "" } else { " the harness did not start" };
        format!(
            "a Redis Cluster{whose} of {} primaries and {replicas} replicas: {}",
            self.primaries,
            nodes.join(", ")
        )
    }

    async fn stop(self: Box<Self>) -> Result<(), BackendError> {
        Cluster::stop(*self).await
    }

    fn as_cluster(&self) -> Option<&Cluster> {
        Some(self)
    }
}

/// The slots primary `index` of `primaries` serves: an equal share, in one range.
pub fn slot_range(index: usize, primaries: usize) -> (u16, u16) {
    let share = |i: usize| (i * SLOTS as usize / primaries) as u16;
    (share(index), share(index + 1) - 1)
}

/// The hash slot of `key`, as a cluster computes it: CRC16 (XMODEM) of the key, or of its hash
/// tag — the part between the first `{` and the next `}`, when that part is not empty —
/// modulo 16384.
pub fn key_slot(key: &[u8]) -> u16 {
    let hashed = key
        .iter()
        .position(|&b| b == b'{')
        .and_then(|open| {
            let rest = &key[open + 1..];
            rest.iter()
                .position(|&b| b == b'}')
                .filter(|&len| len > 0)
                .map(|len| &rest[..len])
        })
        .unwrap_or(key);
    crc16_xmodem(hashed) % SLOTS
}

fn crc16_xmodem(bytes: &[u8]) -> u16 {
    let mut crc: u16 = 0;
    for &byte in bytes {
        crc ^= u16::from(byte) << 8;
        for _ in 0..8 {
            crc = if crc & 0x8000 != 0 {
                (crc << 1) ^ 0x1021
            } else {
                crc << 1
            };
        }
    }
    crc
}

/// Which of `primaries` primaries (in [`slot_range`]'s equal ranges) serves `slot`.
pub fn primary_of_slot(slot: u16, primaries: usize) -> usize {
    (0..primaries)
        .find(|&i| slot <= slot_range(i, primaries).1)
        .unwrap_or(primaries.saturating_sub(1))
}

/// Start a cluster of `primaries` primaries with `replicas` replicas each on `backend`, and
/// wait until it is ready. On an error every node started so far is stopped.
pub fn start_cluster<'a>(
    backend: &'a dyn Backend,
    run_id: &'a str,
    primaries: usize,
    replicas: usize,
    options: StartOptions,
) -> BoxFuture<'a, Result<Cluster, SetupError>> {
    Box::pin(start_cluster_unboxed(backend, run_id, primaries, replicas, options))
}

async fn start_cluster_unboxed(
    backend: &dyn Backend,
    run_id: &str,
    primaries: usize,
    replicas: usize,
    options: StartOptions,
) -> Result<Cluster, SetupError> {
    if primaries == 0 {
        return Err(cluster_error("a cluster needs at least one primary"));
    }
    let options = StartOptions {
        cluster_node: true,
        ..options
    };
    let mut cluster = Cluster {
        nodes: Vec::new(),
        primaries,
        owned: true,
    };
    // The nodes start side by side: a primary becomes writable only 2 s after it started
    // (the server's own delay before a master turns its state `ok`), and started one after
    // another those delays would add up the nodes' start times.
    let starts = (0..primaries * (1 + replicas)).map(|_| backend.start(ServerRole::Limiter, run_id, options));
    let mut failed = None;
    for started in futures::future::join_all(starts).await {
        match started {
            Ok(node) => cluster.nodes.push(node),
            Err(e) => failed = failed.or(Some(e)),
        }
    }
    if let Some(e) = failed {
        let _ = cluster.stop().await;
        return Err(e);
    }
    match form(&cluster, replicas).await {
        Ok(()) => Ok(cluster),
        Err(e) => {
            let _ = cluster.stop().await;
            Err(e)
        }
    }
}

/// Give the primaries their slots, introduce every node to the first, make the replicas
/// replicate, and wait until all agree.
async fn form(cluster: &Cluster, replicas: usize) -> Result<(), SetupError> {
    let mut conns = Vec::new();
    for node in &cluster.nodes {
        conns.push(connect(node.url()).await?);
    }
    // Each node its own config epoch before they meet, as `redis-cli --cluster create` gives
    // them: left to the cluster, equal epochs are told apart only over gossip rounds, and a
    // replica still sharing its primary's when it takes over (`CLUSTER FAILOVER TAKEOVER`)
    // claims the slots with no higher epoch and is demoted again.
    for (index, conn) in conns.iter_mut().enumerate() {
        let mut epoch = redis::cmd("CLUSTER");
        epoch.arg("SET-CONFIG-EPOCH").arg(index + 1);
        run::<()>(conn, &epoch, "CLUSTER SET-CONFIG-EPOCH").await?;
    }
    for (index, conn) in conns.iter_mut().take(cluster.primaries).enumerate() {
        let (first, last) = slot_range(index, cluster.primaries);
        let mut add = redis::cmd("CLUSTER");
        add.arg("ADDSLOTSRANGE").arg(first).arg(last);
        run::<()>(conn, &add, "CLUSTER ADDSLOTSRANGE").await?;
    }
    for node in cluster.nodes.iter().skip(1) {
        let addr = socket_addr(node.url()).map_err(|e| cluster_error(&e.to_string()))?;
        let bus_port = node
            .cluster_bus_port()
            .ok_or_else(|| cluster_error(&format!("{} was not started as a cluster node", node.url())))?;
        let mut meet = redis::cmd("CLUSTER");
        meet.arg("MEET")
            .arg(addr.ip().to_string())
            .arg(addr.port())
            .arg(bus_port);
        run::<()>(&mut conns[0], &meet, "CLUSTER MEET").await?;
    }
    let mut ids = Vec::new();
    for conn in conns.iter_mut() {
        let id: String = run(conn, redis::cmd("CLUSTER").arg("MYID"), "CLUSTER MYID").await?;
        ids.push(id);
    }
    wait_until(&mut conns, "every node knows every other", |_, nodes: &str| {
        known_ids(nodes).len() == ids.len() && !nodes.contains("handshake")
    })
    .await?;
    for (offset, conn) in conns.iter_mut().skip(cluster.primaries).enumerate() {
        let primary = &ids[offset / replicas.max(1)];
        let mut replicate = redis::cmd("CLUSTER");
        replicate.arg("REPLICATE").arg(primary);
        run::<()>(conn, &replicate, "CLUSTER REPLICATE").await?;
    }
    let (primaries, replicas_all) = (cluster.primaries, cluster.nodes.len() - cluster.primaries);
    let what = "cluster_state:ok, and every node sees the same primaries and replicas";
    wait_until(&mut conns, what, move |info, nodes| {
        info.contains("cluster_state:ok")
            && known_ids(nodes).len() == ids.len()
            && masters_with_slots(nodes) == primaries
            && replica_count(nodes) == replicas_all
    })
    .await?;
    wait_replicas(&mut conns, None).await
}

/// Make node `i` of `urls` announce `ports[i]` (its fault proxy's) as its client port, so
/// that `MOVED`, `ASK` and `CLUSTER SLOTS`/`SHARDS`/`NODES` send clients there; its bus port
/// stays its own (`cluster-port`). Returns once every node lists every node at its
/// announced port (the cluster's gossip carries the change, within a second or so).
pub async fn announce_ports(urls: &[String], ports: &[u16]) -> Result<(), SetupError> {
    let mut conns = Vec::new();
    for (url, port) in urls.iter().zip(ports) {
        let mut conn = connect(url).await?;
        let mut set = redis::cmd("CONFIG");
        set.arg("SET").arg("cluster-announce-port").arg(port);
        run::<()>(&mut conn, &set, "CONFIG SET cluster-announce-port").await?;
        conns.push(conn);
    }
    let want: BTreeSet<u16> = ports.iter().copied().collect();
    wait_until(&mut conns, "every node lists every node at its proxy's port", {
        let want = want.clone();
        move |_, nodes| announced_ports(nodes) == want
    })
    .await?;
    wait_replicas(&mut conns, Some(&want)).await
}

/// Poll every node's `INFO replication` until each replica's link to its primary is up (at
/// one of `ports`, when given: a primary's proxy), within [`READY_WITHIN`]: a replica that
/// has not synced yet could not be promoted (its data too old), nor be held back.
async fn wait_replicas(conns: &mut [MultiplexedConnection], ports: Option<&BTreeSet<u16>>) -> Result<(), SetupError> {
    let deadline = tokio::time::Instant::now() + READY_WITHIN;
    loop {
        let mut behind = None;
        for (index, conn) in conns.iter_mut().enumerate() {
            let info: String = run(conn, redis::cmd("INFO").arg("replication"), "INFO replication").await?;
            if !replica_ready(&info, ports) {
                behind = Some((index, info));
                break;
            }
        }
        let Some((index, info)) = behind else {
            return Ok(());
        };
        if tokio::time::Instant::now() >= deadline {
            return Err(cluster_error(&format!(
                "not ready within {} s (every replica synced with its primary{}): node {index} says\n{info}",
                READY_WITHIN.as_secs(),
                if ports.is_some() {
                    " through the primary's proxy"
                } else {
                    ""
                }
            )));
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Whether an `INFO replication` reply is a primary's, or a replica's whose link is up (to
/// one of `ports`, when given).
fn replica_ready(info: &str, ports: Option<&BTreeSet<u16>>) -> bool {
    let field = |name: &str| {
        info.lines()
            .find_map(|l| l.strip_prefix(name)?.strip_prefix(':'))
            .map(str::trim)
    };
    if field("role") != Some("slave") {
        return true;
    }
    let at = field("master_port").and_then(|p| p.parse::<u16>().ok());
    field("master_link_status") == Some("up") && ports.is_none_or(|ports| at.is_some_and(|p| ports.contains(&p)))
}

/// The client ports a `CLUSTER NODES` reply gives its nodes (`ip:port@cport[,hostname]`).
fn announced_ports(nodes: &str) -> BTreeSet<u16> {
    nodes
        .lines()
        .filter_map(|l| l.split_whitespace().nth(1))
        .filter_map(|addr| addr.split('@').next()?.rsplit(':').next()?.parse().ok())
        .collect()
}

/// Send one command; an error names it.
pub(super) async fn run<T: redis::FromRedisValue>(
    conn: &mut MultiplexedConnection,
    cmd: &redis::Cmd,
    what: &str,
) -> Result<T, SetupError> {
    cmd.query_async(conn)
        .await
        .map_err(|e| cluster_error(&format!("{what}: {e}")))
}

/// Poll every node's `CLUSTER INFO` and `CLUSTER NODES` until `ok` holds for all, within
/// [`READY_WITHIN`]; else an error with what the first node that disagreed says.
async fn wait_until(
    conns: &mut [MultiplexedConnection],
    what: &str,
    ok: impl Fn(&str, &str) -> bool,
) -> Result<(), SetupError> {
    let deadline = tokio::time::Instant::now() + READY_WITHIN;
    loop {
        let mut behind = None;
        for (index, conn) in conns.iter_mut().enumerate() {
            let info: String = run(conn, redis::cmd("CLUSTER").arg("INFO"), "CLUSTER INFO").await?;
            let nodes: String = run(conn, redis::cmd("CLUSTER").arg("NODES"), "CLUSTER NODES").await?;
            if !ok(&info, &nodes) {
                behind = Some((index, info, nodes));
                break;
            }
        }
        let Some((index, info, nodes)) = behind else {
            return Ok(());
        };
        if tokio::time::Instant::now() >= deadline {
            let state = info.lines().find(|l| l.starts_with("cluster_state")).unwrap_or("");
            return Err(cluster_error(&format!(
                "not ready within {} s ({what}): node {index} says {state}, and knows {} node(s):\n{nodes}",
                READY_WITHIN.as_secs(),
                known_ids(&nodes).len()
            )));
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// The node ids a `CLUSTER NODES` reply lists.
fn known_ids(nodes: &str) -> BTreeSet<&str> {
    nodes.lines().filter_map(|l| l.split_whitespace().next()).collect()
}

/// How many primaries serving slots a `CLUSTER NODES` reply lists (a line's flags hold
/// `master`; its slot ranges follow the 8 fixed fields).
fn masters_with_slots(nodes: &str) -> usize {
    nodes
        .lines()
        .filter(|l| {
            let fields: Vec<&str> = l.split_whitespace().collect();
            fields.len() > 8 && fields[2].split(',').any(|f| f == "master")
        })
        .count()
}

/// How many replicas a `CLUSTER NODES` reply lists.
fn replica_count(nodes: &str) -> usize {
    nodes
        .lines()
        .filter(|l| {
            l.split_whitespace()
                .nth(2)
                .is_some_and(|f| f.split(',').any(|f| f == "slave"))
        })
        .count()
}

pub(super) fn cluster_error(reason: &str) -> SetupError {
    SetupError::ServerStart {
        backend: "cluster".into(),
        reason: reason.to_owned(),
    }
}

/// A cluster node's settings, whichever backend starts it: its bus on `bus_port`
/// (`cluster-port`, Redis 7.0 and later; the default, the port + 10000, may be taken or out
/// of range), its `nodes.conf` in the server's directory (a process's temporary directory, a
/// container's working directory), failures noticed after 2 s, a replica's full sync sent at
/// once (not after 5 s of waiting for more replicas to sync with). Nothing when `None`.
pub(super) fn node_args(bus_port: Option<u16>) -> Vec<String> {
    let Some(bus_port) = bus_port else {
        return Vec::new();
    };
    [
        "--cluster-enabled",
        "yes",
        "--cluster-config-file",
        "nodes.conf",
        "--cluster-node-timeout",
        "2000",
        "--repl-diskless-sync-delay",
        "0",
        "--cluster-port",
        &bus_port.to_string(),
    ]
    .map(str::to_owned)
    .to_vec()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_replica_is_ready_when_its_link_is_up_at_a_proxy_when_one_is_asked_for() {
        let primary = "# Replication\r\nrole:master\r\nconnected_slaves:1\r\n";
        let replica = |port: u16, link: &str| {
            format!(
                "# Replication\r\nrole:slave\r\nmaster_host:127.0.0.1\r\nmaster_port:{port}\r\nmaster_link_status:{link}\r\n"
            )
        };
        let proxies = BTreeSet::from([7000u16, 7001]);
        assert!(replica_ready(primary, None) && replica_ready(primary, Some(&proxies)));
        assert!(replica_ready(&replica(6379, "up"), None));
        assert!(!replica_ready(&replica(6379, "down"), None));
        assert!(!replica_ready(&replica(6379, "up"), Some(&proxies)), "still direct");
        assert!(replica_ready(&replica(7001, "up"), Some(&proxies)));
    }

    #[test]
    fn the_slots_are_shared_in_equal_ranges_that_cover_them_all() {
        assert_eq!(slot_range(0, 1), (0, 16383));
        assert_eq!(slot_range(0, 3), (0, 5460));
        assert_eq!(slot_range(1, 3), (5461, 10921));
        assert_eq!(slot_range(2, 3), (10922, 16383));
        for primaries in 1..=7 {
            let mut next = 0u16;
            for i in 0..primaries {
                let (first, last) = slot_range(i, primaries);
                assert_eq!(first, next, "{primaries} primaries: contiguous");
                assert!(last >= first);
                next = last + 1;
            }
            assert_eq!(next, SLOTS, "{primaries} primaries: every slot");
        }
    }

    #[test]
    fn a_keys_slot_is_the_servers_own_hash_tags_included() {
        // Values from `CLUSTER KEYSLOT` on a Redis 7.0 cluster.
        assert_eq!(key_slot(b"foo"), 12182);
        assert_eq!(key_slot(b"bar"), 5061);
        assert_eq!(key_slot(b"123456789"), 0x31C3);
        assert_eq!(key_slot(b"{user1000}.following"), key_slot(b"user1000"));
        assert_eq!(key_slot(b"{user1000}.followers"), key_slot(b"{user1000}.following"));
        // An empty tag hashes the whole key; only the first `{` counts.
        assert_eq!(key_slot(b"foo{}{bar}"), crc16_xmodem(b"foo{}{bar}") % SLOTS);
        assert_eq!(key_slot(b"foo{{bar}}zap"), key_slot(b"{bar"));
        assert_eq!(primary_of_slot(0, 3), 0);
        assert_eq!(primary_of_slot(5461, 3), 1);
        assert_eq!(primary_of_slot(16383, 3), 2);
    }

    #[test]
    fn cluster_nodes_lines_are_read_for_ids_and_serving_primaries() {
        let nodes = "\
a1 127.0.0.1:7000@17000 myself,master - 0 0 1 connected 0-5460
b2 127.0.0.1:7001@17001 master - 0 1700000000000 2 connected 5461-10921
c3 127.0.0.1:7002@17002 master - 0 1700000000000 3 connected 10922-16383
d4 127.0.0.1:7003@17003 slave a1 0 1700000000000 1 connected
e5 127.0.0.1:7004@17004 master - 0 1700000000000 0 connected
";
        assert_eq!(known_ids(nodes).len(), 5);
        assert_eq!(masters_with_slots(nodes), 3, "a master without slots does not count");
        assert_eq!(replica_count(nodes), 1);
    }
}
