//! Server faults: at a moment of a phase, the nemesis restarts the limiter's server, pauses
//! it, flushes its scripts or kills the limiter's connections, and records what it did — a
//! [`Event::Fault`] for each strike and an [`Event::Outage`] for the time the server could
//! not answer, so the checkers can attribute what followed to it.

use std::time::Duration;

use futures::future::join_all;
use tokio_util::sync::CancellationToken;

use crate::backend::ServerHandle;
use crate::clock::RunClock;
use crate::history::{Event, Recorder};
use crate::runner::{HARNESS_CLIENT_NAME, configure_after_restart, connect};
use crate::scenario::{Fault, Persistence, Scenario, ServerAction, ServerConfig, ServerFault};

/// The scenario's server faults, and what they act on.
pub struct ServerNemesis<'a> {
    faults: Vec<(usize, ServerFault)>,
    server: &'a dyn ServerHandle,
    /// What a restarted server must be given again (CONFIG SET does not survive a restart).
    settings: ServerConfig,
    events_on: bool,
    recorder: Recorder,
    clock: RunClock,
}

impl<'a> ServerNemesis<'a> {
    pub fn new(
        scenario: &Scenario,
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
        Self {
            faults,
            server,
            settings: scenario.server.clone(),
            events_on,
            recorder,
            clock,
        }
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
        let struck = match action {
            ServerAction::Restart { persistence } => self.restart(persistence, &mut outage).await,
            ServerAction::Pause { pause_ms } => self.pause(pause_ms, &mut outage).await,
            ServerAction::ScriptFlush => self.script_flush().await,
            ServerAction::ClientKill => self.client_kill().await,
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
                    });
                }
            }
            Err(e) => self.recorder.record(Event::Problem {
                t_us: self.clock.now_us(),
                source: "server-fault".into(),
                detail: format!("fault {index} ({}) could not strike: {e}", action.kind()),
                fatal: true,
                noted: true,
            }),
        }
    }

    /// Kill, start again, then give the server back what the run configured (and the
    /// keyspace notifications the observer listens to).
    async fn restart(&self, persistence: Persistence, outage: &mut Option<(u64, u64, u64)>) -> Result<String, String> {
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

    async fn pause(&self, pause_ms: u64, outage: &mut Option<(u64, u64, u64)>) -> Result<String, String> {
        self.server.freeze().await?;
        let frozen_us = self.clock.now_us();
        tokio::time::sleep(Duration::from_millis(pause_ms)).await;
        let told_us = self.clock.now_us();
        let thawed = self.server.thaw().await;
        *outage = Some((frozen_us, told_us, self.clock.now_us()));
        thawed?;
        Ok(format!("paused the server (SIGSTOP / docker pause) for {pause_ms} ms"))
    }

    async fn script_flush(&self) -> Result<String, String> {
        let mut conn = connect(self.server.url()).await.map_err(|e| e.to_string())?;
        let () = redis::cmd("SCRIPT")
            .arg("FLUSH")
            .query_async(&mut conn)
            .await
            .map_err(|e| format!("SCRIPT FLUSH: {e}"))?;
        Ok("SCRIPT FLUSH: every loaded script is gone (as after a restart or a failover)".into())
    }

    /// Kill every client connection but the harness's own ([`HARNESS_CLIENT_NAME`]) and the
    /// keyspace subscriber's: what is left is the limiter's (or the fault proxy's on its behalf).
    async fn client_kill(&self) -> Result<String, String> {
        let mut conn = connect(self.server.url()).await.map_err(|e| e.to_string())?;
        let list: String = redis::cmd("CLIENT")
            .arg("LIST")
            .query_async(&mut conn)
            .await
            .map_err(|e| format!("CLIENT LIST: {e}"))?;
        let victims = limiter_clients(&list);
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

/// Whether the server comes back from the fault with its keys.
fn outage_keeps_keys(action: ServerAction) -> bool {
    match action {
        ServerAction::Restart { persistence } => persistence == Persistence::Aof,
        ServerAction::Pause { .. } | ServerAction::ScriptFlush | ServerAction::ClientKill => true,
    }
}

/// The ids of the connections in a `CLIENT LIST` reply that are not the harness's: not
/// named [`HARNESS_CLIENT_NAME`], not subscribed (the keyspace observer).
pub fn limiter_clients(list: &str) -> Vec<String> {
    list.lines()
        .filter_map(|line| {
            let field = |name: &str| {
                line.split(' ')
                    .find_map(|f| f.strip_prefix(name).and_then(|v| v.strip_prefix('=')))
            };
            let harness = field("name").is_some_and(|n| n.starts_with(HARNESS_CLIENT_NAME));
            let subscriber = field("flags").is_some_and(|f| f.contains('P'))
                || field("psub").is_some_and(|n| n != "0")
                || field("sub").is_some_and(|n| n != "0");
            (!harness && !subscriber)
                .then(|| field("id").map(str::to_owned))
                .flatten()
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
        assert_eq!(limiter_clients(list), vec!["5".to_owned(), "6".to_owned()]);
    }
}
