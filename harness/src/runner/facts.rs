//! What a history says about its run besides the requests (the scenario, the limiter, the
//! servers, their counters), read in one pass from its events: the facts a report is
//! assembled from.

use std::collections::BTreeMap;
use std::path::Path;

use super::error::JudgeError;
use crate::history::{Event, LimiterFacts, ServerRole};
use crate::scenario::{Scenario, parse_scenario};

/// What a history says about its run besides the requests: read in one pass before the
/// events are indexed.
#[derive(Debug, Clone, Default)]
pub struct RunFacts {
    pub scenario_name: String,
    pub limiter_spec: String,
    pub seed: u64,
    pub backend: String,
    pub reproduce: String,
    /// The last [`Event::Limiter`]: the limiter as started, else as configured.
    pub limiter: Option<LimiterFacts>,
    /// Per server role: version, settings, where it ran.
    pub servers: BTreeMap<ServerRole, ServerFacts>,
    /// Per server role: the first and the last `INFO` counters.
    pub stats: BTreeMap<ServerRole, (Counters, Counters)>,
    /// Per memory-pressure phase: writes ok, failed, the first error.
    pub floods: BTreeMap<String, (u64, u64, Option<String>)>,
    /// The latest time any event names: how long the run lasted.
    pub wall_ms: u64,
    /// The harness's peak resident memory at the run's end (histories before it: none).
    pub resident_peak_bytes: Option<u64>,
    /// On a cluster: each primary's redirections and cluster errors, by kind.
    pub cluster_replies: Vec<(String, BTreeMap<String, u64>)>,
}

/// A server's `INFO` counters at one moment: (evicted_keys, expired_keys).
pub type Counters = (u64, u64);

#[derive(Debug, Clone, Default)]
pub struct ServerFacts {
    pub version: String,
    pub settings: Vec<String>,
    pub at: String,
}

impl RunFacts {
    /// The facts of `events`, and the scenario its header records (parsed and adjusted as
    /// the run had it). An error says what the history lacks.
    pub fn read(events: &[Event]) -> Result<(Self, Scenario), JudgeError> {
        let Some(Event::Run {
            scenario,
            limiter,
            seed,
            backend,
            reproduce,
            scenario_file,
            scenario_text,
            shipped,
            adjust,
        }) = events.first()
        else {
            return Err(JudgeError::NoHeader);
        };
        if scenario_text.is_empty() {
            return Err(JudgeError::NoScenarioText);
        }
        let mut parsed =
            parse_scenario(Path::new(scenario_file), scenario_text).map_err(|e| JudgeError::Scenario(Box::new(e)))?;
        parsed.shipped = *shipped;
        parsed.adjust(adjust)?;
        let mut facts = Self {
            scenario_name: scenario.clone(),
            limiter_spec: limiter.clone(),
            seed: *seed,
            backend: backend.clone(),
            reproduce: reproduce.clone(),
            ..Self::default()
        };
        for event in events {
            facts.take(event);
        }
        Ok((facts, parsed))
    }

    fn take(&mut self, event: &Event) {
        if let Some(t_us) = event_time(event) {
            self.wall_ms = self.wall_ms.max(t_us / 1000);
        }
        match event {
            Event::Limiter { limiter, .. } => self.limiter = Some(limiter.clone()),
            Event::Server {
                server,
                version,
                settings,
                at,
                ..
            } => {
                self.servers.insert(
                    *server,
                    ServerFacts {
                        version: version.clone(),
                        settings: settings.clone(),
                        at: at.clone(),
                    },
                );
            }
            Event::Resources {
                resident_peak_bytes, ..
            } => self.resident_peak_bytes = Some(*resident_peak_bytes),
            Event::ClusterReplies { node, replies, .. } => self.cluster_replies.push((node.clone(), replies.clone())),
            Event::Stats {
                server,
                evicted_keys,
                expired_keys,
                ..
            } => {
                let now = (*evicted_keys, *expired_keys);
                self.stats
                    .entry(*server)
                    .and_modify(|(_, last)| *last = now)
                    .or_insert((now, now));
            }
            Event::Flood {
                phase,
                writes_ok,
                writes_failed,
                first_error,
                ..
            } => {
                let entry = self.floods.entry(phase.clone()).or_insert((0, 0, None));
                entry.0 += writes_ok;
                entry.1 += writes_failed;
                if entry.2.is_none() {
                    entry.2.clone_from(first_error);
                }
            }
            _ => {}
        }
    }

    /// Keys `role`'s server evicted and expired during the run (by its INFO counters).
    pub fn evicted_expired(&self, role: ServerRole) -> Option<(u64, u64)> {
        self.stats
            .get(&role)
            .map(|((e0, x0), (e1, x1))| (e1.saturating_sub(*e0), x1.saturating_sub(*x0)))
    }
}

fn event_time(event: &Event) -> Option<u64> {
    match event {
        // Written after the servers stopped: not part of how long the run lasted.
        Event::Run { .. } | Event::Resources { .. } | Event::ClusterReplies { .. } => None,
        Event::Sample { t_end_us, .. } | Event::Outage { t_end_us, .. } => Some(*t_end_us),
        Event::Invoke { t_us, .. }
        | Event::Complete { t_us, .. }
        | Event::Limiter { t_us, .. }
        | Event::Server { t_us, .. }
        | Event::Foreign { t_us, .. }
        | Event::Setup { t_us, .. }
        | Event::Phase { t_us, .. }
        | Event::Fault { t_us, .. }
        | Event::Keyspace { t_us, .. }
        | Event::Stats { t_us, .. }
        | Event::Flood { t_us, .. }
        | Event::Wire { t_us, .. }
        | Event::Problem { t_us, .. } => Some(*t_us),
    }
}
