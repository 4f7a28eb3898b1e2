//! A candidate as a scenario file: commented TOML that the ordinary scenario parser reads,
//! so what the explorer runs is exactly what `limiter-harness run FILE` runs.

use std::fmt::Write as _;
use std::path::Path;

use super::candidate::{COMMANDS, Candidate, FaultSpec, POLICIES, PhaseSpec, Target};
use crate::scenario::{INJECTABLE_ERRORS, Invariant, Scenario, ScenarioError, parse_scenario};

/// Every invariant the explorer judges: all but `no-leaked-keys`, which is about limiters
/// that keep a key per window.
pub const INVARIANTS: [Invariant; 9] = [
    Invariant::TtlPresent,
    Invariant::TtlBounded,
    Invariant::NoCounterReset,
    Invariant::AdmittedWithinLimit,
    Invariant::NoLockout,
    Invariant::AdmitsUpToLimit,
    Invariant::NoDoubleCount,
    Invariant::ErrorsSurfaced,
    Invariant::FailsAsDeclared,
];

/// A candidate's run may take this long before it is stopped as unknown.
const DEADLINE_MS: u64 = 30_000;

/// The phase names, in order (`steady-1`, `quiet-2`, ...).
fn phase_name(index: usize, phase: &PhaseSpec) -> String {
    let kind = match phase {
        PhaseSpec::Steady { .. } => "steady",
        PhaseSpec::Burst { .. } => "burst",
        PhaseSpec::Quiet { .. } => "quiet",
    };
    format!("{kind}-{}", index + 1)
}

/// The candidate as TOML: `header` (comment lines, without `#`) first, then the scenario.
pub fn to_toml(candidate: &Candidate, name: &str, about: &str, seed: u64, header: &[String]) -> String {
    let mut out = String::new();
    for line in header {
        if line.is_empty() {
            out.push_str("#\n");
        } else {
            let _ = writeln!(out, "# {line}");
        }
    }
    let _ = writeln!(out, "name = {}", quoted(name));
    let _ = writeln!(out, "about = {}", quoted(about));
    let _ = writeln!(out, "seed = {seed}\n");
    if let Some(policy) = memory_policy(candidate) {
        let _ = writeln!(out, "[server]\nmaxmemory = \"2mb\"\nmaxmemory_policy = \"{policy}\"\n");
    }
    let _ = writeln!(
        out,
        "[limit]\nrequests_max = {}\nwindow_ms = {}\nidentities = {}",
        candidate.requests_max, candidate.window_ms, candidate.identities
    );
    if candidate.instances > 1 {
        let _ = writeln!(out, "instances = {}", candidate.instances);
    }
    out.push('\n');
    for (i, phase) in candidate.phases.iter().enumerate() {
        phase_toml(&mut out, &phase_name(i, phase), phase);
    }
    for fault in &candidate.faults {
        fault_toml(&mut out, candidate, fault);
    }
    let names: Vec<String> = INVARIANTS.iter().map(|i| quoted(i.name())).collect();
    let _ = writeln!(
        out,
        "[check]\ninvariants = [{}]\ndeadline_ms = {DEADLINE_MS}",
        names.join(", ")
    );
    out
}

/// The policy of the first memory-pressure fault that has a phase to write in.
fn memory_policy(candidate: &Candidate) -> Option<&'static str> {
    candidate.faults.iter().find_map(|f| match f {
        FaultSpec::MemoryPressure { phase, policy, .. } => traffic_phase(candidate, *phase).map(|_| POLICIES[*policy]),
        _ => None,
    })
}

/// The `n`-th (modulo) phase that sends requests, by name.
fn traffic_phase(candidate: &Candidate, n: usize) -> Option<String> {
    let traffic: Vec<String> = candidate
        .phases
        .iter()
        .enumerate()
        .filter(|(_, p)| !matches!(p, PhaseSpec::Quiet { .. }))
        .map(|(i, p)| phase_name(i, p))
        .collect();
    (!traffic.is_empty()).then(|| traffic[n % traffic.len()].clone())
}

fn any_phase(candidate: &Candidate, n: usize) -> String {
    let i = n % candidate.phases.len();
    phase_name(i, &candidate.phases[i])
}

fn phase_toml(out: &mut String, name: &str, phase: &PhaseSpec) {
    let _ = writeln!(out, "[[phase]]\nname = \"{name}\"");
    match phase {
        PhaseSpec::Steady {
            rate_per_s,
            duration_ms,
            round_robin,
            even,
        } => {
            let pick = if *round_robin { "round-robin" } else { "random" };
            let spacing = if *even { "even" } else { "jittered" };
            let _ = writeln!(
                out,
                "kind = \"steady\"\nrate_per_s = {rate_per_s}\nduration_ms = {duration_ms}\npick = \"{pick}\"\nspacing = \"{spacing}\""
            );
        }
        PhaseSpec::Burst { requests, concurrency } => {
            let _ = writeln!(
                out,
                "kind = \"burst\"\nrequests = {requests}\nconcurrency = {concurrency}"
            );
        }
        PhaseSpec::Quiet { duration_ms } => {
            let _ = writeln!(out, "kind = \"quiet\"\nduration_ms = {duration_ms}");
        }
    }
    out.push('\n');
}

fn target_toml(out: &mut String, candidate: &Candidate, target: &Target, command_field: &str) {
    if let Some(identity) = target.identity {
        let _ = writeln!(out, "identity = {}", identity % candidate.identities);
    }
    let _ = writeln!(out, "request = {}", strikable_request(candidate, target.request));
    let commands = COMMANDS[target.command];
    if !commands.is_empty() {
        let list: Vec<String> = commands.iter().map(|c| quoted(c)).collect();
        let _ = writeln!(out, "{command_field} = [{}]", list.join(", "));
    }
    if let Some(times) = target.times {
        let _ = writeln!(out, "times = {times}");
    } else {
        out.push_str("times = 0\n");
    }
}

/// `request` taken modulo the requests one identity plans (at least one), so that a rule
/// aimed at a request strikes one: a fault that never strikes tells nothing.
fn strikable_request(candidate: &Candidate, request: u64) -> u64 {
    let per_identity = (requests(candidate) / u64::from(candidate.identities.max(1))).max(1);
    1 + request.saturating_sub(1) % per_identity
}

fn fault_toml(out: &mut String, candidate: &Candidate, fault: &FaultSpec) {
    let Some(body) = fault_body(candidate, fault) else {
        return;
    };
    let _ = writeln!(out, "[[fault]]\nkind = \"{}\"\n{body}", fault.kind());
}

/// The fields of one fault; `None` when it has nothing to strike (memory pressure without
/// a phase that sends requests).
fn fault_body(candidate: &Candidate, fault: &FaultSpec) -> Option<String> {
    // Long: one arm per fault kind, each writing the fields only that kind takes.
    let mut out = String::new();
    let (before, on) = ("before_command", "command");
    match fault {
        FaultSpec::ExpireBetween(t) | FaultSpec::ClientDiesBetween(t) => target_toml(&mut out, candidate, t, before),
        FaultSpec::StallBetween { target, stall_ms } => {
            target_toml(&mut out, candidate, target, before);
            let _ = writeln!(out, "stall_ms = {stall_ms}");
        }
        FaultSpec::DelayReply { target, delay_ms } => {
            target_toml(&mut out, candidate, target, on);
            let _ = writeln!(out, "delay_ms = {delay_ms}");
        }
        FaultSpec::DropReply(t) | FaultSpec::ResetConnection(t) => target_toml(&mut out, candidate, t, on),
        FaultSpec::InjectError { target, error } => {
            target_toml(&mut out, candidate, target, on);
            let _ = writeln!(out, "error = \"{}\"", INJECTABLE_ERRORS[*error].0);
        }
        FaultSpec::MemoryPressure {
            phase,
            value_bytes,
            writes_per_request,
            cache_ttl,
            ..
        } => {
            let phase = traffic_phase(candidate, *phase)?;
            let ttl_s = if *cache_ttl { 604_800 } else { 0 };
            let _ = writeln!(
                out,
                "phase = \"{phase}\"\nvalue_bytes = {value_bytes}\nwrites_per_request = {writes_per_request}\nttl_s = {ttl_s}"
            );
        }
        FaultSpec::ServerRestart { phase, after_ms, aof } => {
            let persistence = if *aof { "aof" } else { "none" };
            let _ = writeln!(
                out,
                "phase = \"{}\"\nafter_ms = {after_ms}\npersistence = \"{persistence}\"",
                any_phase(candidate, *phase)
            );
        }
        FaultSpec::ServerPause {
            phase,
            after_ms,
            pause_ms,
        } => {
            let _ = writeln!(
                out,
                "phase = \"{}\"\nafter_ms = {after_ms}\npause_ms = {pause_ms}",
                any_phase(candidate, *phase)
            );
        }
        FaultSpec::ScriptFlush { phase, after_ms } | FaultSpec::ClientKill { phase, after_ms } => {
            let _ = writeln!(
                out,
                "phase = \"{}\"\nafter_ms = {after_ms}",
                any_phase(candidate, *phase)
            );
        }
        FaultSpec::Failover {
            phase,
            after_ms,
            lose_writes_ms,
            stay,
        } => {
            let connections = if *stay { "stay" } else { "move" };
            let _ = writeln!(
                out,
                "phase = \"{}\"\nafter_ms = {after_ms}\nlose_writes_ms = {lose_writes_ms}\nconnections = \"{connections}\"",
                any_phase(candidate, *phase)
            );
        }
        FaultSpec::ClockSkew {
            instance,
            offset_ms,
            drift_ms_per_s,
        } => {
            let offset_ms = if *offset_ms == 0 && *drift_ms_per_s == 0 {
                500
            } else {
                *offset_ms
            };
            let _ = writeln!(
                out,
                "instance = {}\noffset_ms = {offset_ms}\ndrift_ms_per_s = {drift_ms_per_s}.0",
                instance % candidate.instances
            );
        }
    }
    Some(out)
}

fn quoted(text: &str) -> String {
    toml::Value::String(text.to_owned()).to_string()
}

/// The candidate through the scenario parser, as `run` would read the file at `path`.
pub fn to_scenario(text: &str, path: &Path) -> Result<Scenario, ScenarioError> {
    let mut scenario = parse_scenario(path, text)?;
    scenario.source = path.to_path_buf();
    scenario.text = text.to_owned();
    Ok(scenario)
}

/// How long the candidate's run can take at worst ([`Scenario::worst_case_ms`]).
pub fn worst_case_ms(candidate: &Candidate) -> u64 {
    let text = to_toml(candidate, "explore-candidate", "", 0, &[]);
    to_scenario(&text, Path::new("candidate.toml")).map_or(u64::MAX, |s| s.worst_case_ms())
}

/// How many requests a candidate plans, over every phase.
pub fn requests(candidate: &Candidate) -> u64 {
    candidate.phases.iter().map(PhaseSpec::requests).sum()
}

/// How many faults the rendered scenario holds (a memory pressure without a phase to write
/// in is left out).
pub fn faults(candidate: &Candidate) -> usize {
    candidate
        .faults
        .iter()
        .filter(|f| fault_body(candidate, f).is_some())
        .count()
}
