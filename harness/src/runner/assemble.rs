//! Put the report together from the facts, the index and the verdicts of a history.

use super::facts::RunFacts;
use crate::checker::{CheckResult, Verdict, ms};
use crate::history::{HistoryIndex, LimiterFacts, Outcome, ProblemSource, ServerRole};
use crate::report::{Counts, FaultSummary, KeysSummary, LimiterSummary, Observed, Report, ServerSummary, WireTrace};
use crate::scenario::{
    CacheTarget, CommandFault, CommandFaultAction, Fault, GapFault, GapFaultAction, Scenario, ServerAction,
    ServerFault, Topology,
};

pub fn report(
    facts: &RunFacts,
    limiter: &LimiterFacts,
    scenario: &Scenario,
    index: &HistoryIndex,
    invariants: Vec<CheckResult>,
    keys: KeysSummary,
) -> Report {
    let verdict = invariants.iter().fold(Verdict::Valid, |v, c| v.merge(c.verdict));
    let mut problems: Vec<String> = index
        .problems
        .iter()
        .filter(|p| p.noted)
        .map(|p| {
            if p.fatal {
                format!("{}: {}", p.source, p.detail)
            } else {
                p.detail.clone()
            }
        })
        .collect();
    problems.dedup();
    let observed = observed(facts, limiter, index, &invariants);
    let server = facts.servers.get(&ServerRole::Limiter);
    Report {
        scenario: scenario.name.clone(),
        about: scenario.about.clone(),
        scenario_file: scenario.source.display().to_string(),
        seed: facts.seed,
        limiter: LimiterSummary {
            name: limiter.name.clone(),
            algorithm: limiter.algorithm,
            round_trips_max: limiter.round_trips_max,
            commands: limiter.commands.clone(),
        },
        server: ServerSummary {
            version: server.map_or_else(|| "unknown".into(), |s| s.version.clone()),
            backend: facts.backend.clone(),
            topology: match scenario.server.topology {
                Topology::Single => None,
                Topology::Cluster { primaries, replicas } => Some(format!(
                    "a cluster of {primaries} primaries, {replicas} replica(s) each"
                )),
            },
            settings: server.map(|s| s.settings.clone()).unwrap_or_default(),
            cache_server: facts.servers.get(&ServerRole::Cache).map(|s| {
                let settings = if s.settings.is_empty() {
                    "defaults".to_owned()
                } else {
                    s.settings.join(", ")
                };
                format!("{} ({settings})", s.version)
            }),
        },
        keys,
        verdict,
        invariants,
        faults: faults(facts, limiter, scenario, index),
        requests_scheduled: scenario.planned_requests(),
        reproduce: facts.reproduce.clone(),
        problems,
        timeline: None,
        observed,
    }
}

fn faults(facts: &RunFacts, limiter: &LimiterFacts, scenario: &Scenario, index: &HistoryIndex) -> Vec<FaultSummary> {
    // Long: one report line per kind of fault, in that kind's words.
    scenario
        .faults
        .iter()
        .enumerate()
        .map(|(i, fault)| {
            let count = index.faults.iter().filter(|f| f.fault == i).count() as u64;
            let (spec, outcome, fired) = match fault {
                Fault::ExpireBetweenRoundTrips(gap)
                | Fault::StallBetweenRoundTrips(gap)
                | Fault::ClientDiesBetweenRoundTrips(gap) => (
                    gap_spec(fault.kind().name(), gap),
                    gap_outcome(limiter, index, i, gap, count),
                    count,
                ),
                Fault::OnCommand(c) => {
                    let outcome = if count > 0 {
                        let first = index
                            .faults
                            .iter()
                            .find(|f| f.fault == i)
                            .map(|f| f.effect.clone())
                            .unwrap_or_default();
                        format!("struck {count} time(s); first: {first}")
                    } else {
                        format!(
                            "never struck: no request{} sent {} through the fault proxy",
                            c.identity.map(|id| format!(" of identity {id}")).unwrap_or_default(),
                            if c.command.is_empty() {
                                "a command on its key".to_owned()
                            } else {
                                c.command.join(" or ")
                            }
                        )
                    };
                    (command_spec(c), outcome, count)
                }
                Fault::MemoryPressure(p) => {
                    let (writes_ok, writes_failed, first_error) =
                        facts.floods.get(&p.phase).cloned().unwrap_or_default();
                    let target = match p.target {
                        CacheTarget::LimiterServer => "the limiter's own server",
                        CacheTarget::CacheServer => "the separate cache server",
                    };
                    let ttl = if p.ttl_s == 0 {
                        "no TTL".to_owned()
                    } else {
                        format!("TTL {} s", p.ttl_s)
                    };
                    let spec = format!(
                        "memory-pressure: {} cache write(s) of {} bytes ({ttl}) per request of phase `{}`, to {target}",
                        p.writes_per_request, p.value_bytes, p.phase
                    );
                    let mut outcome = format!("wrote {writes_ok} cache entries, {writes_failed} failed");
                    if let Some(e) = first_error {
                        outcome.push_str(&format!(" (first error: {e})"));
                    }
                    (spec, outcome, writes_ok)
                }
                Fault::Server(s) => (server_spec(s), server_outcome(index, i, s), count),
                Fault::ClockSkew(skew) => {
                    let skewed = index.requests.iter().filter(|r| r.instance == skew.instance).count() as u64;
                    let spec = format!(
                        "clock-skew: instance {}'s clock {} ms {}{}",
                        skew.instance,
                        skew.offset_ms.unsigned_abs(),
                        if skew.offset_ms < 0 { "behind" } else { "ahead" },
                        if skew.drift_ms_per_s == 0.0 {
                            String::new()
                        } else {
                            format!(", drifting {:+} ms per second", skew.drift_ms_per_s)
                        }
                    );
                    let outcome = format!(
                        "the `now_ms` of {skewed} request(s) decided by instance {}",
                        skew.instance
                    );
                    (spec, outcome, skewed)
                }
            };
            let fired_every_match = match fault {
                Fault::ExpireBetweenRoundTrips(gap)
                | Fault::StallBetweenRoundTrips(gap)
                | Fault::ClientDiesBetweenRoundTrips(gap) => gap.times.is_none(),
                Fault::OnCommand(c) => c.times.is_none(),
                Fault::MemoryPressure(_) | Fault::Server(_) | Fault::ClockSkew(_) => false,
            };
            FaultSummary {
                index: i,
                kind: fault.kind(),
                spec,
                fired,
                fired_every_match,
                outcome,
            }
        })
        .collect()
}

fn server_spec(fault: &ServerFault) -> String {
    let what = match fault.action {
        ServerAction::Restart { persistence } => format!("server-restart (persistence {})", persistence.name()),
        ServerAction::Pause { pause_ms } => format!("server-pause for {pause_ms} ms"),
        ServerAction::ScriptFlush => "script-flush".to_owned(),
        ServerAction::ClientKill => "client-kill of the limiter's connections".to_owned(),
        ServerAction::NodeFailover {
            identity,
            lose_writes_ms,
        } => {
            let how = if lose_writes_ms == 0 {
                "a clean CLUSTER FAILOVER".to_owned()
            } else {
                format!("replication held back {lose_writes_ms} ms first, then TAKEOVER")
            };
            format!("node-failover: identity {identity}'s primary to its replica ({how})")
        }
        ServerAction::NodePause { identity, pause_ms } => {
            format!("node-pause: identity {identity}'s primary stopped for {pause_ms} ms")
        }
        ServerAction::Reshard {
            identity, atomic: true, ..
        } => format!("reshard: identity {identity}'s slot to the next primary, by atomic slot migration"),
        ServerAction::Reshard {
            identity, migrating_ms, ..
        } => {
            format!("reshard: identity {identity}'s slot to the next primary, migrating for {migrating_ms} ms")
        }
        ServerAction::Failover {
            lose_writes_ms,
            connections,
        } => {
            let held = if lose_writes_ms == 0 {
                "writes paused until the replica caught up".to_owned()
            } else {
                format!("replication held back {lose_writes_ms} ms first")
            };
            format!(
                "failover to the replica ({held}; open connections {})",
                connections.name()
            )
        }
    };
    format!("{what}, {} ms into phase `{}`", fault.after_ms, fault.phase)
}

fn server_outcome(index: &HistoryIndex, i: usize, fault: &ServerFault) -> String {
    match index.faults.iter().find(|f| f.fault == i) {
        Some(struck) => {
            let outage = index
                .outages
                .iter()
                .find(|o| o.fault == i)
                .map(|o| format!("; the server was down for {}", ms(o.back_us.saturating_sub(o.start_us))))
                .unwrap_or_default();
            format!("struck at {}: {}{outage}", ms(struck.t_us), struck.effect)
        }
        None if index.problems.iter().any(|p| p.source == ProblemSource::ServerFault) => {
            "could not strike (see the problems)".to_owned()
        }
        None => format!(
            "never struck: phase `{}` ended before {} ms",
            fault.phase, fault.after_ms
        ),
    }
}

fn gap_spec(kind: &str, gap: &GapFault) -> String {
    let mut parts = Vec::new();
    match gap.identity {
        Some(id) => parts.push(format!("identity {id}")),
        None => parts.push("any identity".into()),
    }
    if gap.request > 1 {
        parts.push(format!("from its request {}", gap.request));
    }
    if !gap.before_command.is_empty() {
        parts.push(format!("before {}", gap.before_command.join(" or ")));
    }
    if let GapFaultAction::Stall { stall_ms } = gap.action {
        parts.push(format!("{stall_ms} ms"));
    }
    parts.push(match gap.times {
        Some(1) => "once".into(),
        Some(n) => format!("up to {n} times"),
        None => "every time".into(),
    });
    format!("{kind}: {}", parts.join(", "))
}

fn command_spec(c: &CommandFault) -> String {
    let gap = GapFault {
        identity: c.identity,
        request: c.request,
        before_command: Vec::new(),
        times: c.times,
        action: GapFaultAction::ClientDies,
    };
    let on = if c.command.is_empty() {
        "on any command of the request".to_owned()
    } else {
        format!("on {}", c.command.join(" or "))
    };
    let what = match &c.action {
        CommandFaultAction::DelayReply { delay_ms } => format!("{delay_ms} ms, "),
        CommandFaultAction::InjectError { error } => format!("`{error}`, "),
        _ => String::new(),
    };
    gap_spec(c.action.kind().name(), &gap).replacen(": ", &format!(": {what}{on}, "), 1)
}

fn gap_outcome(limiter: &LimiterFacts, index: &HistoryIndex, fault: usize, gap: &GapFault, fired: u64) -> String {
    if fired > 0 {
        let first = index
            .faults
            .iter()
            .find(|f| f.fault == fault)
            .map(|f| f.effect.clone())
            .unwrap_or_default();
        return format!("struck {fired} time(s); first: {first}");
    }
    if limiter.round_trips_max <= 1 {
        return format!(
            "never struck: `{}` makes one round trip per request, so there is no gap between round trips to fault",
            limiter.name
        );
    }
    let mut which = String::from("no request");
    if let Some(id) = gap.identity {
        which.push_str(&format!(" of identity {id}"));
    }
    if gap.request > 1 {
        which.push_str(&format!(" from its request {} on", gap.request));
    }
    let command = if gap.before_command.is_empty() {
        String::new()
    } else {
        format!(" sending {}", gap.before_command.join(" or "))
    };
    format!("never struck: {which} made a round trip{command} after an earlier round trip")
}

fn observed(facts: &RunFacts, limiter: &LimiterFacts, index: &HistoryIndex, invariants: &[CheckResult]) -> Observed {
    let mut counts = Counts::default();
    for r in &index.requests {
        counts.requests += 1;
        match r.outcome {
            Some(Outcome::Allowed) => counts.allowed += 1,
            Some(Outcome::Rejected) => counts.rejected += 1,
            Some(Outcome::Error) => {
                counts.errors += 1;
                *counts
                    .errors_by_code
                    .entry(error_code(r.error.as_deref().unwrap_or_default()))
                    .or_default() += 1;
            }
            Some(Outcome::Indeterminate) | None => counts.indeterminate += 1,
        }
    }
    let (ok, failed) = index.cache_writes;
    let (evicted, expired) = facts.evicted_expired(ServerRole::Limiter).unwrap_or_default();
    Observed {
        wall_ms: facts.wall_ms,
        counts,
        samples: index.samples.len(),
        keyspace_events: index.keyspace.values().map(Vec::len).sum(),
        limiter_server_evicted_keys: evicted,
        limiter_server_expired_keys: expired,
        cache_server_evicted_keys: facts.evicted_expired(ServerRole::Cache).map(|(e, _)| e),
        cache_writes_ok: ok,
        cache_writes_failed: failed,
        servers: facts.servers.values().map(|s| s.at.clone()).collect(),
        resident_peak_bytes: facts.resident_peak_bytes,
        cluster_replies: facts
            .cluster_replies
            .iter()
            .map(|(node, replies)| {
                let counts: Vec<String> = replies.iter().map(|(kind, n)| format!("{kind} {n}")).collect();
                let counts = if counts.is_empty() {
                    "none".to_owned()
                } else {
                    counts.join(", ")
                };
                format!("{node}: {counts}")
            })
            .collect(),
        proxy: limiter.proxy.clone(),
        wire: wire_traces(index, invariants),
    }
}

/// For the first anomaly of each key (three keys at most): the proxy's record of every
/// round trip of the requests on that key up to the last witness, the last 16 of them.
fn wire_traces(index: &HistoryIndex, invariants: &[CheckResult]) -> Vec<WireTrace> {
    if index.wire.is_empty() {
        return Vec::new();
    }
    let mut traces: Vec<WireTrace> = Vec::new();
    for a in invariants.iter().flat_map(|c| &c.anomalies) {
        if traces.len() >= 3 || traces.iter().any(|t| t.key == a.key) {
            continue;
        }
        let Some(last) = a.requests.iter().max() else { continue };
        let on_key: std::collections::BTreeSet<u64> = index
            .by_key
            .get(&a.key)
            .map(|positions| positions.iter().map(|&p| index.requests[p].id).collect())
            .unwrap_or_default();
        let lines: Vec<String> = index
            .wire
            .iter()
            .filter(|w| w.request.is_some_and(|r| r <= *last && on_key.contains(&r)))
            .map(|w| {
                format!(
                    "{:.3} s conn {} request #{}: {}",
                    w.t_us as f64 / 1e6,
                    w.conn,
                    w.request.unwrap_or_default(),
                    w.commands.join(" | ")
                )
            })
            .collect();
        let skip = lines.len().saturating_sub(16);
        traces.push(WireTrace {
            key: a.key.clone(),
            anomaly: a.kind.clone(),
            lines: lines.into_iter().skip(skip).collect(),
        });
    }
    traces
}

/// The code of an error reply as redis-rs shows it (`"OOM": command not allowed ...`).
fn error_code(message: &str) -> String {
    let code = match message.strip_prefix('"') {
        Some(rest) => rest.split('"').next().unwrap_or_default(),
        None => message.split([':', ' ']).next().unwrap_or_default(),
    };
    if code.is_empty() {
        "error".to_owned()
    } else {
        code.to_owned()
    }
}
