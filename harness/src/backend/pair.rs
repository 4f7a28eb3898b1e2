//! A primary and its replica behind one endpoint, for the `failover` fault. Everything
//! reaches the primary through the endpoint relay (its URL is the pair's); the replica
//! replicates through a second relay, which the fault can hold (the replica falls behind)
//! and cut. A failover moves the endpoint: new connections reach the promoted replica,
//! open ones stay where they were.

use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use async_trait::async_trait;
use futures::future::BoxFuture;

use super::relay::{Relay, socket_addr};
use super::{BackendError, ServerHandle};

pub struct FailoverPair {
    nodes: [Box<dyn ServerHandle>; 2],
    /// Which node is the primary now.
    primary: AtomicUsize,
    endpoint: Relay,
    url: String,
    /// The replica's link to the primary, until the failover cuts it.
    replication: Mutex<Option<Relay>>,
}

impl FailoverPair {
    /// Make `replica` replicate `primary` (through the relay) and wait until its link is up.
    pub fn new(
        primary: Box<dyn ServerHandle>,
        replica: Box<dyn ServerHandle>,
    ) -> BoxFuture<'static, Result<Self, BackendError>> {
        Box::pin(Self::new_unboxed(primary, replica))
    }

    async fn new_unboxed(primary: Box<dyn ServerHandle>, replica: Box<dyn ServerHandle>) -> Result<Self, BackendError> {
        let primary_addr = socket_addr(primary.url())?;
        // A fresh replica's full sync starts at once, not after the default wait for more.
        let () = redis::cmd("CONFIG")
            .arg("SET")
            .arg("repl-diskless-sync-delay")
            .arg("0")
            .query_async(&mut admin(primary.url()).await?)
            .await
            .map_err(BackendError::command(
                "CONFIG SET repl-diskless-sync-delay 0 on the primary",
            ))?;
        let endpoint = Relay::start(primary_addr).await?;
        let replication = Relay::start(primary_addr).await?;
        let mut conn = admin(replica.url()).await?;
        let () = redis::cmd("REPLICAOF")
            .arg("127.0.0.1")
            .arg(replication.port())
            .query_async(&mut conn)
            .await
            .map_err(BackendError::command("REPLICAOF on the replica"))?;
        wait_link_up(&mut conn, Duration::from_secs(10)).await?;
        Ok(Self {
            nodes: [primary, replica],
            primary: AtomicUsize::new(0),
            url: endpoint.url(),
            endpoint,
            replication: Mutex::new(Some(replication)),
        })
    }

    fn current(&self) -> &dyn ServerHandle {
        self.nodes[self.primary.load(Ordering::SeqCst)].as_ref()
    }

    /// The primary's own URL (not the endpoint's).
    pub fn primary_url(&self) -> &str {
        self.current().url()
    }

    /// The replica's own URL.
    pub fn replica_url(&self) -> &str {
        self.nodes[1 - self.primary.load(Ordering::SeqCst)].url()
    }

    /// From now on the replica receives nothing more of the primary's writes.
    pub fn hold_replication(&self) {
        if let Some(relay) = self.replication.lock().unwrap_or_else(|e| e.into_inner()).as_ref() {
            relay.hold();
        }
    }

    /// Cut the replica's link to the primary (what it has not received is lost to it).
    pub fn cut_replication(&self) {
        if let Some(relay) = self.replication.lock().unwrap_or_else(|e| e.into_inner()).take() {
            relay.cut();
        }
    }

    /// Point the endpoint at the replica and call it the primary; returns the URLs of the
    /// new primary and of the old one.
    pub fn switch_endpoint(&self) -> Result<(String, String), BackendError> {
        let old = self.primary.load(Ordering::SeqCst);
        let new = 1 - old;
        self.endpoint.switch(socket_addr(self.nodes[new].url())?);
        self.primary.store(new, Ordering::SeqCst);
        Ok((self.nodes[new].url().to_owned(), self.nodes[old].url().to_owned()))
    }
}

/// A plain connection of the pair's own, for its replication commands.
async fn admin(url: &str) -> Result<redis::aio::MultiplexedConnection, BackendError> {
    let client = redis::Client::open(url)?;
    client
        .get_multiplexed_async_connection()
        .await
        .map_err(|source| BackendError::Connect {
            url: url.to_owned(),
            source,
        })
}

/// Wait until a replica's `INFO replication` says `master_link_status:up`.
pub async fn wait_link_up(conn: &mut redis::aio::MultiplexedConnection, timeout: Duration) -> Result<(), BackendError> {
    let deadline = tokio::time::Instant::now() + timeout;
    loop {
        let info: String = redis::cmd("INFO")
            .arg("replication")
            .query_async(conn)
            .await
            .map_err(BackendError::command("INFO replication"))?;
        if info.lines().any(|l| l.trim() == "master_link_status:up") {
            return Ok(());
        }
        if tokio::time::Instant::now() >= deadline {
            return Err(BackendError::LinkDown {
                timeout_s: timeout.as_secs(),
            });
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[async_trait]
impl ServerHandle for FailoverPair {
    fn url(&self) -> &str {
        &self.url
    }

    fn describe(&self) -> String {
        format!(
            "{} with replica {}, behind endpoint {}",
            self.nodes[0].describe(),
            self.nodes[1].describe(),
            self.url
        )
    }

    async fn stop(self: Box<Self>) -> Result<(), BackendError> {
        let Self { nodes, .. } = *self;
        let mut failed = Vec::new();
        for node in nodes {
            if let Err(e) = node.stop().await {
                failed.push(e);
            }
        }
        if failed.is_empty() {
            Ok(())
        } else {
            Err(BackendError::Several(failed))
        }
    }

    async fn kill(&self) -> Result<(), BackendError> {
        self.current().kill().await
    }

    async fn start_again(&self) -> Result<(), BackendError> {
        self.current().start_again().await
    }

    async fn freeze(&self) -> Result<(), BackendError> {
        self.current().freeze().await
    }

    async fn thaw(&self) -> Result<(), BackendError> {
        self.current().thaw().await
    }

    fn as_pair(&self) -> Option<&FailoverPair> {
        Some(self)
    }
}
