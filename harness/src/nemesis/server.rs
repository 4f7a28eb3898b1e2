//! Server faults: at a moment of a phase, the nemesis restarts the limiter's server, pauses
//! it, flushes its scripts or kills the limiter's connections, and records what it did — a
//! [`Event::Fault`] for each strike and an [`Event::Outage`] for the time the server could
//! not answer, so the checkers can attribute what followed to it.

use std::time::Duration;

use futures::future::join_all;
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use super::fault_error::FaultError;
use super::node_failover::{node_failover, repl_offset};
use super::node_pause::node_pause;
use crate::backend::{BackendError, HARNESS_CLIENT_NAME, configure_after_restart, connect};
use crate::backend::{ServerHandle, key_slot, move_slot, move_slot_atomically, socket_addr};
use crate::clock::RunClock;
use crate::history::{Event, ProblemSource, Recorder};
use crate::keys::KeyLayout;
use redis::aio::MultiplexedConnection;

use crate::scenario::{FailoverConnections, Fault, Persistence, Scenario, ServerAction, ServerConfig, ServerFault};

/// The scenario's server faults, and what they act on.
pub struct ServerNemesis<'a> {
    faults: Vec<(usize, ServerFault)>,
    server: &'a dyn ServerHandle,
    /// What a restarted server must be given again (CONFIG SET does not survive a restart).
    settings: ServerConfig,
    events_on: bool,
    recorder: Recorder,
    clock: RunClock,
    /// Each identity's first key the run's layout names in full (a reshard moves its slot);
    /// `None` when every template has a wildcard part.
    keys: Vec<Option<String>>,
    /// On a cluster behind fault proxies, each node's replication hold (its proxy's).
    holds: Vec<watch::Sender<bool>>,
}

impl<'a> ServerNemesis<'a> {
    pub fn new(
        scenario: &Scenario,
        layout: &KeyLayout,
        server: &'a dyn ServerHandle,
        events_on: bool,
        recorder: Recorder,
        clock: RunClock,
    ) -> Self {
        let faults = scenario
            .faults
            .iter()
            .enumerate()
            .filter_map(|(i, f)| match f {
                Fault::Server(s) => Some((i, s.clone())),
                _ => None,
            })
            .collect();
        let keys = (0..scenario.limit.identities)
            .map(|identity| layout.templates.iter().find_map(|t| t.key_for(identity)))
            .collect();
        Self {
            faults,
            server,
            settings: scenario.server.clone(),
            events_on,
            recorder,
            clock,
            keys,
            holds: Vec::new(),
        }
    }

    /// Each node's replication hold, in the cluster's node order (the fault proxies'): what a
    /// `node-failover` with writes to lose holds.
    pub fn with_replication_holds(mut self, holds: Vec<watch::Sender<bool>>) -> Self {
        self.holds = holds;
        self
    }

    /// Strike every server fault of `phase` at its moment, while the phase runs; a fault
    /// whose moment comes after the phase `ended` does not strike (the report says so).
    /// Returns once every strike that began has finished (a pause has been lifted).
    pub async fn strike_in(&self, phase: &str, ended: &CancellationToken) {
        let start = tokio::time::Instant::now();
        let strikes = self
            .faults
            .iter()
            .filter(|(_, f)| f.phase == phase)
            .map(|(i, fault)| async move {
                tokio::select! {
                    biased;
                    () = ended.cancelled() => {}
                    () = tokio::time::sleep_until(start + Duration::from_millis(fault.after_ms)) => {
                        self.strike(*i, fault.action).await;
                    }
                }
            });
        join_all(strikes).await;
    }

    async fn strike(&self, index: usize, action: ServerAction) {
        let t_us = self.clock.now_us();
        // The outage, when there is one, is only the time the server surely could not answer:
        // from when it was down (killed, frozen) to when it was told to go on.
        let mut outage = None;
        // A cluster node's pause after which its replica had been promoted.
        let mut failed_over = false;
        let struck = match action {
            ServerAction::Restart { persistence } => self.restart(persistence, &mut outage).await,
            ServerAction::Pause { pause_ms } => self.pause(pause_ms, &mut outage).await,
            ServerAction::ScriptFlush => self.script_flush().await,
            ServerAction::ClientKill => self.client_kill().await,
            ServerAction::Failover {
                lose_writes_ms,
                connections,
            } => self.failover(lose_writes_ms, connections, &mut outage).await,
            ServerAction::Reshard {
                identity,
                migrating_ms,
                atomic,
            } => self.reshard(identity, migrating_ms, atomic).await,
            ServerAction::NodeFailover {
                identity,
                lose_writes_ms,
            } => self.node_failover(identity, lose_writes_ms, &mut outage).await,
            ServerAction::NodePause { identity, pause_ms } => {
                self.node_pause(identity, pause_ms, &mut outage, &mut failed_over).await
            }
        };
        match struck {
            Ok(effect) => {
                self.recorder.record(Event::Fault {
                    t_us,
                    fault: index,
                    kind: action.kind(),
                    request: None,
                    key: None,
                    command: None,
                    effect,
                });
                if let Some((t_start_us, t_end_us, t_back_us)) = outage {
                    self.recorder.record(Event::Outage {
                        t_start_us,
                        t_end_us,
                        fault: index,
                        kind: action.kind(),
                        keys_kept: outage_keeps_keys(action),
                        t_back_us,
                        failed_over,
                    });
                }
            }
            Err(e) => self.recorder.record(Event::Problem {
                t_us: self.clock.now_us(),
                source: ProblemSource::ServerFault,
                detail: format!("fault {index} ({}) could not strike: {e}", action.kind()),
                fatal: true,
                noted: true,
            }),
        }
    }

    /// Kill, start again, then give the server back what the run configured (and the
    /// keyspace notifications the observer listens to).
    async fn restart(
        &self,
        persistence: Persistence,
        outage: &mut Option<(u64, u64, u64)>,
    ) -> Result<String, FaultError> {
        self.server.kill().await?;
        let down_us = self.clock.now_us();
        // Until it is told to start it surely cannot answer; it may answer a moment before
        // `start_again` returns.
        let told_us = self.clock.now_us();
        let started = self.server.start_again().await;
        *outage = Some((down_us, told_us, self.clock.now_us()));
        started?;
        configure_after_restart(self.server.url(), &self.settings, self.events_on).await?;
        Ok(match persistence {
            Persistence::None => {
                "killed and restarted the server without persistence: every key and every loaded script was lost".into()
            }
            Persistence::Aof => "killed and restarted the server with its append-only file (fsync always): keys kept, loaded scripts lost".into(),
        })
    }

    async fn pause(&self, pause_ms: u64, outage: &mut Option<(u64, u64, u64)>) -> Result<String, FaultError> {
        self.server.freeze().await?;
        let frozen_us = self.clock.now_us();
        tokio::time::sleep(Duration::from_millis(pause_ms)).await;
        let told_us = self.clock.now_us();
        let thawed = self.server.thaw().await;
        *outage = Some((frozen_us, told_us, self.clock.now_us()));
        thawed?;
        Ok(format!("paused the server (SIGSTOP / docker pause) for {pause_ms} ms"))
    }

    /// Move the slot of `identity`'s key to the next primary, its keys with it.
    async fn reshard(&self, identity: u32, migrating_ms: u64, atomic: bool) -> Result<String, FaultError> {
        let cluster = self.server.as_cluster().ok_or(FaultError::NotACluster)?;
        let key = self.key_of(identity)?;
        if atomic {
            let moved = move_slot_atomically(cluster, key_slot(key.as_bytes())).await?;
            return Ok(format!(
                "moved slot {} (identity {identity}'s key `{key}`) from the primary at {} to the one at {} by atomic slot migration (CLUSTER MIGRATESLOTS): {} key(s) copied while the source served them, TTLs kept, then the slot handed over at once (MOVED)",
                moved.slot, moved.from, moved.to, moved.keys_moved
            ));
        }
        let moved = move_slot(cluster, key_slot(key.as_bytes()), Duration::from_millis(migrating_ms)).await?;
        Ok(format!(
            "moved slot {} (identity {identity}'s key `{key}`) from the primary at {} to the one at {}: {} key(s) moved with MIGRATE, TTLs kept; the slot migrated for {migrating_ms} ms (ASK), then belonged to its new primary (MOVED)",
            moved.slot, moved.from, moved.to, moved.keys_moved
        ))
    }

    /// The key of `identity` the layout names in full: its slot is the one a cluster fault
    /// acts on.
    fn key_of(&self, identity: u32) -> Result<String, FaultError> {
        self.keys
            .get(identity as usize)
            .cloned()
            .flatten()
            .ok_or(FaultError::NoKeyToMove { identity })
    }

    async fn node_failover(
        &self,
        identity: u32,
        lose_writes_ms: u64,
        outage: &mut Option<(u64, u64, u64)>,
    ) -> Result<String, FaultError> {
        let cluster = self.server.as_cluster().ok_or(FaultError::NotACluster)?;
        let key = self.key_of(identity)?;
        let done = node_failover(cluster, &key, lose_writes_ms, &self.holds, || self.clock.now_us()).await?;
        *outage = Some((done.started_us, done.agreed_us, done.agreed_us));
        Ok(done.effect)
    }

    async fn node_pause(
        &self,
        identity: u32,
        pause_ms: u64,
        outage: &mut Option<(u64, u64, u64)>,
        failed_over: &mut bool,
    ) -> Result<String, FaultError> {
        let cluster = self.server.as_cluster().ok_or(FaultError::NotACluster)?;
        let key = self.key_of(identity)?;
        let done = node_pause(cluster, &key, pause_ms, || self.clock.now_us()).await?;
        *outage = Some((done.frozen_us, done.thawed_us, done.settled_us));
        *failed_over = done.failed_over;
        Ok(done.effect)
    }

    async fn script_flush(&self) -> Result<String, FaultError> {
        let mut conn = connect(self.server.url()).await?;
        let () = redis::cmd("SCRIPT")
            .arg("FLUSH")
            .query_async(&mut conn)
            .await
            .map_err(BackendError::command("SCRIPT FLUSH"))?;
        Ok("SCRIPT FLUSH: every loaded script is gone (as after a restart or a failover)".into())
    }

    /// Kill every client connection but the harness's own ([`HARNESS_CLIENT_NAME`]) and the
    /// keyspace subscriber's: what is left is the limiter's (or the fault proxy's on its behalf).
    async fn client_kill(&self) -> Result<String, FaultError> {
        let mut conn = connect(self.server.url()).await?;
        let list: String = redis::cmd("CLIENT")
            .arg("LIST")
            .query_async(&mut conn)
            .await
            .map_err(BackendError::command("CLIENT LIST"))?;
        let victims: Vec<String> = clients(&list)
            .into_iter()
            .filter(|c| !c.harness)
            .map(|c| c.id)
            .collect();
        for id in &victims {
            // A client that left meanwhile is not an error.
            let _: redis::RedisResult<i64> = redis::cmd("CLIENT")
                .arg("KILL")
                .arg("ID")
                .arg(id)
                .query_async(&mut conn)
                .await;
        }
        Ok(format!(
            "CLIENT KILL of the limiter's connections ({} open)",
            victims.len()
        ))
    }
}

impl ServerNemesis<'_> {
    /// Promote the replica: hold replication back first (its writes are lost) or pause
    /// writes until the replica has them all; cut the replica's link, promote it, move the
    /// endpoint to it, make the old primary its replica, and close the harness's own
    /// connections there (and, `connections = "move"`, the limiter's) so they reconnect
    /// through the endpoint. The outage is the time from the hold or pause to the move.
    async fn failover(
        &self,
        lose_writes_ms: u64,
        connections: FailoverConnections,
        outage: &mut Option<(u64, u64, u64)>,
    ) -> Result<String, FaultError> {
        let pair = self.server.as_pair().ok_or(FaultError::NoReplica)?;
        let mut old = connect(pair.primary_url()).await?;
        let mut new = connect(pair.replica_url()).await?;
        // The promoted node must have what the run configured (CONFIG SET is not replicated).
        configure_after_restart(pair.replica_url(), &self.settings, self.events_on).await?;
        let start_us = self.clock.now_us();
        if lose_writes_ms > 0 {
            pair.hold_replication();
            tokio::time::sleep(Duration::from_millis(lose_writes_ms)).await;
        } else {
            command(&mut old, &["CLIENT", "PAUSE", "10000", "WRITE"]).await?;
            caught_up(&mut old, &mut new, Duration::from_secs(5)).await?;
        }
        let behind_bytes = repl_offset(&mut old, "master_repl_offset")
            .await?
            .saturating_sub(repl_offset(&mut new, "slave_repl_offset").await?);
        pair.cut_replication();
        command(&mut new, &["REPLICAOF", "NO", "ONE"]).await?;
        let (new_url, _) = pair.switch_endpoint()?;
        let end_us = self.clock.now_us();
        let new_port = socket_addr(&new_url)?.port().to_string();
        command(&mut old, &["REPLICAOF", "127.0.0.1", &new_port]).await?;
        let closed = close_connections(&mut old, connections).await?;
        if lose_writes_ms == 0 {
            command(&mut old, &["CLIENT", "UNPAUSE"]).await?;
        }
        *outage = Some((start_us, end_us, self.clock.now_us()));
        let how = if lose_writes_ms > 0 {
            format!(
                "replication held back for {lose_writes_ms} ms, then the replica promoted {behind_bytes} bytes of replication stream behind: the writes acknowledged meanwhile were lost"
            )
        } else {
            "writes paused until the replica had them all, then the replica promoted: nothing lost".to_owned()
        };
        let stayed = match connections {
            FailoverConnections::Stay => {
                "the limiter's open connections stay with the demoted node (READONLY on writes)"
            }
            FailoverConnections::Move => {
                "the limiter's open connections were closed (it reconnects to the new primary)"
            }
        };
        Ok(format!(
            "failover: {how}; the endpoint moved to it and the old primary became its replica; {stayed} ({closed} connection(s) closed there)"
        ))
    }
}

/// Send `words` as one command; an error reply names it.
async fn command(conn: &mut MultiplexedConnection, words: &[&str]) -> Result<(), BackendError> {
    let mut cmd = redis::cmd(words[0]);
    for word in &words[1..] {
        cmd.arg(*word);
    }
    cmd.query_async::<redis::Value>(conn)
        .await
        .map(drop)
        .map_err(BackendError::command(words.join(" ")))
}

/// Wait until the replica has processed everything the (write-paused) primary sent.
async fn caught_up(
    primary: &mut MultiplexedConnection,
    replica: &mut MultiplexedConnection,
    timeout: Duration,
) -> Result<(), FaultError> {
    let deadline = tokio::time::Instant::now() + timeout;
    loop {
        let sent = repl_offset(primary, "master_repl_offset").await?;
        if repl_offset(replica, "slave_repl_offset").await? >= sent {
            return Ok(());
        }
        if tokio::time::Instant::now() >= deadline {
            return Err(FaultError::NotCaughtUp {
                timeout_s: timeout.as_secs(),
            });
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

/// Close, on the demoted node, the harness's own connections (they come back through the
/// endpoint) and with `Move` the limiter's too. Returns how many were closed.
async fn close_connections(
    conn: &mut MultiplexedConnection,
    connections: FailoverConnections,
) -> Result<usize, BackendError> {
    let list: String = redis::cmd("CLIENT")
        .arg("LIST")
        .query_async(conn)
        .await
        .map_err(BackendError::command("CLIENT LIST"))?;
    let own: i64 = redis::cmd("CLIENT")
        .arg("ID")
        .query_async(conn)
        .await
        .map_err(BackendError::command("CLIENT ID"))?;
    let mut closed = 0;
    for client in clients(&list) {
        if client.id == own.to_string() || (!client.harness && connections == FailoverConnections::Stay) {
            continue;
        }
        let killed: redis::RedisResult<i64> = redis::cmd("CLIENT")
            .arg("KILL")
            .arg("ID")
            .arg(&client.id)
            .query_async(conn)
            .await;
        closed += usize::from(killed.is_ok_and(|n| n > 0));
    }
    Ok(closed)
}

/// Whether the server comes back from the fault with its keys.
fn outage_keeps_keys(action: ServerAction) -> bool {
    match action {
        ServerAction::Restart { persistence } => persistence == Persistence::Aof,
        ServerAction::Pause { .. }
        | ServerAction::ScriptFlush
        | ServerAction::ClientKill
        | ServerAction::Failover { .. }
        | ServerAction::Reshard { .. }
        | ServerAction::NodeFailover { .. }
        | ServerAction::NodePause { .. } => true,
    }
}

/// One connection of a `CLIENT LIST` reply.
#[derive(Debug, PartialEq)]
pub struct Client {
    pub id: String,
    /// Named [`HARNESS_CLIENT_NAME`], or subscribed (the keyspace observer).
    pub harness: bool,
}

/// The connections of a `CLIENT LIST` reply, the harness's told apart.
pub fn clients(list: &str) -> Vec<Client> {
    list.lines()
        .filter_map(|line| {
            let field = |name: &str| {
                line.split(' ')
                    .find_map(|f| f.strip_prefix(name).and_then(|v| v.strip_prefix('=')))
            };
            let named = field("name").is_some_and(|n| n.starts_with(HARNESS_CLIENT_NAME));
            let subscriber = field("flags").is_some_and(|f| f.contains('P'))
                || field("psub").is_some_and(|n| n != "0")
                || field("sub").is_some_and(|n| n != "0");
            field("id").map(|id| Client {
                id: id.to_owned(),
                harness: named || subscriber,
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn client_kill_spares_the_harness_and_the_subscriber() {
        let list = "id=3 addr=127.0.0.1:1 name=lh-harness age=1 flags=N sub=0 psub=0 cmd=client|list\n\
                    id=4 addr=127.0.0.1:2 name= age=1 flags=P sub=0 psub=1 cmd=psubscribe\n\
                    id=5 addr=127.0.0.1:3 name= age=1 flags=N sub=0 psub=0 cmd=evalsha\n\
                    id=6 addr=127.0.0.1:4 name=app-7 age=1 flags=N sub=0 psub=0 cmd=incr\n";
        let limiter: Vec<String> = clients(list).into_iter().filter(|c| !c.harness).map(|c| c.id).collect();
        assert_eq!(limiter, vec!["5".to_owned(), "6".to_owned()]);
    }
}
