//! Resolve a parsed [`ScenarioFile`] into a validated [`Scenario`]; every rejection points
//! at the value that caused it.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use toml::Spanned;

use super::error::ScenarioError;
use super::file::{CheckFile, FaultFile, LimitFile, PhaseFile, ScenarioFile, ServerFile, SetupFile};
use super::model::{
    CLUSTER_ERRORS, CacheTarget, CheckConfig, ClockSkew, CommandFault, CommandFaultAction, Expect, FailoverConnections,
    Fault, FaultKind, GapFault, GapFaultAction, INJECTABLE_ERRORS, Invariant, Limit, MemoryPressure, Persistence,
    Phase, PhaseKind, Pick, REQUESTS_PER_RUN_MAX, Scenario, ServerAction, ServerConfig, ServerErrorPolicy, ServerFault,
    Setup, Spacing, Topology,
};
use crate::keys::{KeyLayout, LayoutSource};

const POLICIES: [&str; 8] = [
    "noeviction",
    "allkeys-lru",
    "allkeys-lfu",
    "allkeys-random",
    "volatile-lru",
    "volatile-lfu",
    "volatile-random",
    "volatile-ttl",
];

/// Parameters the harness sets itself; a scenario may not override them.
const RESERVED: [&str; 6] = [
    "notify-keyspace-events",
    "port",
    "bind",
    "protected-mode",
    "dir",
    "requirepass",
];

/// Where an error lands: the file's path and text.
pub(super) struct Source<'a> {
    pub path: &'a Path,
    pub text: &'a str,
}

impl Source<'_> {
    fn error<T>(&self, spanned: &Spanned<T>, message: impl Into<String>) -> ScenarioError {
        ScenarioError::at(self.path, self.text, Some(spanned.span()), message)
    }

    fn positive(&self, value: &Spanned<i64>, what: &str) -> Result<u64, ScenarioError> {
        u64::try_from(*value.get_ref()).ok().filter(|v| *v > 0).ok_or_else(|| {
            self.error(value, format!("{what} must be a positive whole number"))
                .with_help(format!("write e.g. `{what} = 1000`"))
        })
    }

    fn in_range(
        &self,
        value: &Spanned<i64>,
        what: &str,
        range: std::ops::RangeInclusive<u64>,
    ) -> Result<u64, ScenarioError> {
        u64::try_from(*value.get_ref())
            .ok()
            .filter(|v| range.contains(v))
            .ok_or_else(|| {
                self.error(
                    value,
                    format!(
                        "{what} = {} is out of range; it must be between {} and {}",
                        value.get_ref(),
                        range.start(),
                        range.end()
                    ),
                )
            })
    }

    fn not_for<T>(
        &self,
        value: &Option<Spanned<T>>,
        field: &str,
        kind: &str,
        takes: &str,
    ) -> Result<(), ScenarioError> {
        match value {
            Some(v) => Err(self
                .error(v, format!("`{field}` does not apply to a {kind}"))
                .with_help(format!("a {kind} takes: {takes}"))),
            None => Ok(()),
        }
    }
}

pub(super) fn resolve(file: &ScenarioFile, src: &Source<'_>) -> Result<Scenario, ScenarioError> {
    let name = resolve_name(&file.name, src)?;
    let limit = resolve_limit(&file.limit, src)?;
    let server = match &file.server {
        Some(server) => resolve_server(server.get_ref(), "server", src)?,
        None => ServerConfig::default(),
    };
    let cache_server = file
        .cache_server
        .as_ref()
        .map(|s| resolve_server(s.get_ref(), "cache_server", src))
        .transpose()?;
    let phases = resolve_phases(file, &limit, src)?;
    let faults = file
        .faults
        .iter()
        .map(|f| resolve_fault(f, &limit, &phases, file.cache_server.is_some(), src))
        .collect::<Result<Vec<_>, _>>()?;
    if server.topology.is_cluster() {
        check_cluster_faults(file, server.topology, &faults, src)?;
    } else if let Some((fault, spanned)) = faults
        .iter()
        .zip(&file.faults)
        .find(|(f, _)| FaultKind::ON_A_CLUSTER.contains(&f.kind()))
    {
        let what = match fault.kind() {
            FaultKind::Reshard => "a reshard fault moves a slot between a cluster's primaries",
            FaultKind::NodePause => "a node-pause fault stops a cluster node (`server-pause` is one server's)",
            _ => "a node-failover fault promotes a cluster primary's replica (`failover` is one server's)",
        };
        return Err(src
            .error(&spanned.get_ref().kind, what)
            .with_help("add `topology = \"cluster\"` to [server]"));
    }
    let setup = file
        .setup
        .iter()
        .map(|s| resolve_setup(s.get_ref(), &limit, src))
        .collect::<Result<Vec<_>, _>>()?;
    let check = resolve_check(file.check.get_ref(), &limit, src)?;
    let expect = match &file.expect {
        Some(e) => Expect {
            fail: e.get_ref().fail.iter().map(|l| l.get_ref().clone()).collect(),
            notes: e.get_ref().notes.clone(),
        },
        None => Expect::default(),
    };
    Ok(Scenario {
        name,
        about: file.about.trim().to_owned(),
        seed: file.seed,
        source: src.path.to_owned(),
        shipped: false,
        text: src.text.to_owned(),
        adjusted: super::Adjust::default(),
        server,
        cache_server,
        limit,
        phases,
        faults,
        setup,
        check,
        expect,
    })
}

fn resolve_setup(setup: &SetupFile, limit: &Limit, src: &Source<'_>) -> Result<Setup, ScenarioError> {
    let identity = resolve_setup_identity(setup, limit, src)?;
    match setup.kind.get_ref().as_str() {
        "exhausted-key" => {
            src.not_for(&setup.commands, "commands", "exhausted-key setup", "identity")?;
            Ok(Setup::ExhaustedKey { identity })
        }
        "commands" => {
            let commands = setup.commands.as_ref().ok_or_else(|| {
                src.error(&setup.kind, "a commands setup needs `commands`").with_help(
                    "e.g. commands = [\"SET app:{identity}:count 999\"] ({key} and {identity} are filled in)",
                )
            })?;
            if commands.get_ref().is_empty() {
                return Err(src.error(commands, "`commands` is empty: give at least one command"));
            }
            let parsed = commands
                .get_ref()
                .iter()
                .map(|c| resolve_setup_command(c, src))
                .collect::<Result<Vec<_>, _>>()?;
            Ok(Setup::Commands {
                identity,
                commands: parsed,
            })
        }
        other => Err(src
            .error(&setup.kind, format!("unknown setup kind `{other}`"))
            .with_help("one of: exhausted-key, commands")),
    }
}

/// One setup command: its arguments split on spaces; placeholders other than `{key}` and
/// `{identity}` are refused.
fn resolve_setup_command(command: &Spanned<String>, src: &Source<'_>) -> Result<Vec<String>, ScenarioError> {
    let args: Vec<String> = command.get_ref().split_whitespace().map(str::to_owned).collect();
    if args.is_empty() {
        return Err(src.error(command, "an empty command"));
    }
    for arg in &args {
        let mut rest = arg.as_str();
        while let Some(open) = rest.find('{') {
            let close = rest[open..].find('}').map(|c| open + c);
            let name = close.map(|c| &rest[open..=c]).unwrap_or(&rest[open..]);
            if name != "{key}" && name != "{identity}" {
                return Err(src
                    .error(command, format!("unknown placeholder `{name}` in a setup command"))
                    .with_help("setup commands know {key} (key_prefix + identity) and {identity}"));
            }
            rest = &rest[open + name.len()..];
        }
    }
    Ok(args)
}

fn resolve_setup_identity(setup: &SetupFile, limit: &Limit, src: &Source<'_>) -> Result<u32, ScenarioError> {
    u32::try_from(*setup.identity.get_ref())
        .ok()
        .filter(|id| *id < limit.identities)
        .ok_or_else(|| {
            src.error(
                &setup.identity,
                format!("identity {} does not exist", setup.identity.get_ref()),
            )
            .with_help(format!("identities are numbered 0 to {}", limit.identities - 1))
        })
}

fn resolve_name(name: &Spanned<String>, src: &Source<'_>) -> Result<String, ScenarioError> {
    let ok = !name.get_ref().is_empty()
        && name
            .get_ref()
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-');
    if ok {
        Ok(name.get_ref().clone())
    } else {
        Err(src
            .error(name, "a scenario name is lower-case letters, digits and dashes")
            .with_help("e.g. `name = \"immortal-counter\"`"))
    }
}

fn resolve_limit(limit: &Spanned<LimitFile>, src: &Source<'_>) -> Result<Limit, ScenarioError> {
    let file = limit.get_ref();
    let requests_max = src.positive(&file.requests_max, "requests_max")?;
    let window_ms = src.in_range(&file.window_ms, "window_ms", super::model::WINDOW_MS_RANGE)?;
    let identities = match &file.identities {
        Some(n) => src.in_range(n, "identities", 1..=1_000_000)? as u32,
        None => 1,
    };
    let key_prefix = match &file.key_prefix {
        Some(prefix) => {
            let p = prefix.get_ref();
            if p.is_empty()
                || p.chars()
                    .any(|c| "*?[]\\".contains(c) || c.is_whitespace() || c.is_control())
            {
                return Err(src
                    .error(
                        prefix,
                        "key_prefix must be non-empty, without spaces or glob characters (* ? [ ] \\)",
                    )
                    .with_help("the observer finds the limiter's keys with `SCAN MATCH <prefix>*`"));
            }
            p.clone()
        }
        None => "rl:".to_owned(),
    };
    let keys = match &file.keys {
        Some(keys) => Some(resolve_keys(keys, identities, src)?),
        None => None,
    };
    let instances = match &file.instances {
        Some(n) => src.in_range(n, "instances", 1..=16)? as u32,
        None => 1,
    };
    Ok(Limit {
        requests_max,
        window_ms,
        identities,
        instances,
        key_prefix,
        keys,
    })
}

fn resolve_keys(
    keys: &Spanned<Vec<Spanned<String>>>,
    identities: u32,
    src: &Source<'_>,
) -> Result<KeyLayout, ScenarioError> {
    if keys.get_ref().is_empty() {
        return Err(src
            .error(
                keys,
                "`keys` is empty: leave it out for the default (key_prefix + identity)",
            )
            .with_help("e.g. keys = [\"geocode:calls:{identity}:*\"]"));
    }
    for key in keys.get_ref() {
        crate::keys::KeyTemplate::parse(key.get_ref()).map_err(|why| {
            src.error(key, why.to_string())
                .with_help("a key template: the key with {identity} where the identity's number goes, `*` and `?` for parts that vary (e.g. \"geocode:calls:{identity}:*\")")
        })?;
    }
    let texts: Vec<String> = keys.get_ref().iter().map(|k| k.get_ref().clone()).collect();
    KeyLayout::parse(&texts, identities, LayoutSource::Scenario).map_err(|why| src.error(keys, why.to_string()))
}

fn resolve_server(file: &ServerFile, table: &str, src: &Source<'_>) -> Result<ServerConfig, ScenarioError> {
    let mut settings = BTreeMap::new();
    if let Some(mem) = &file.maxmemory {
        check_memory(mem, src)?;
        settings.insert("maxmemory".to_owned(), mem.get_ref().to_lowercase());
    }
    if let Some(policy) = &file.maxmemory_policy {
        if !POLICIES.contains(&policy.get_ref().as_str()) {
            return Err(src
                .error(policy, format!("unknown maxmemory_policy `{}`", policy.get_ref()))
                .with_help(format!("one of: {}", POLICIES.join(", "))));
        }
        settings.insert("maxmemory-policy".to_owned(), policy.get_ref().clone());
    }
    for (key, value) in &file.config {
        let name = key.get_ref().to_lowercase();
        if RESERVED.contains(&name.as_str()) {
            return Err(src
                .error(key, format!("`{name}` is set by the harness itself"))
                .with_help(format!("remove it from [{table}.config]")));
        }
        if name == "maxmemory" || name == "maxmemory-policy" {
            return Err(src
                .error(
                    key,
                    format!("set `{name}` with the `{}` field of [{table}]", name.replace('-', "_")),
                )
                .with_help("e.g. `maxmemory = \"4mb\"`"));
        }
        settings.insert(name, value.get_ref().clone());
    }
    let topology = resolve_topology(file, table, src)?;
    Ok(ServerConfig { settings, topology })
}

/// `topology`, `primaries` and `replicas` of `[server]`: one server unless it says `cluster`.
fn resolve_topology(file: &ServerFile, table: &str, src: &Source<'_>) -> Result<Topology, ScenarioError> {
    let cluster = match &file.topology {
        None => false,
        Some(t) if t.get_ref() == "single" => false,
        Some(t) if t.get_ref() == "cluster" => true,
        Some(t) => {
            return Err(src
                .error(t, format!("unknown topology `{}`", t.get_ref()))
                .with_help("one of: single, cluster"));
        }
    };
    if cluster && table != "server" {
        let t = file.topology.as_ref().expect("cluster was named");
        return Err(src
            .error(
                t,
                format!("[{table}] is one server: only the limiter's [server] can be a cluster"),
            )
            .with_help("remove `topology` here, or move it to [server]"));
    }
    if !cluster {
        for (field, value) in [("primaries", &file.primaries), ("replicas", &file.replicas)] {
            if let Some(v) = value {
                return Err(src
                    .error(v, format!("`{field}` is a cluster's: [{table}] is one server"))
                    .with_help(format!(
                        "add `topology = \"cluster\"` to [{table}], or remove `{field}`"
                    )));
            }
        }
        return Ok(Topology::Single);
    }
    let count = |value: &Option<Spanned<i64>>, what: &str, range: std::ops::RangeInclusive<u64>, default: usize| {
        value
            .as_ref()
            .map_or(Ok(default), |v| src.in_range(v, what, range).map(|n| n as usize))
    };
    Ok(Topology::Cluster {
        primaries: count(&file.primaries, "primaries", 1..=Topology::PRIMARIES_MAX as u64, 3)?,
        replicas: count(&file.replicas, "replicas", 0..=Topology::REPLICAS_MAX as u64, 0)?,
    })
}

/// The faults a cluster runs with so far: a reshard (with two primaries or more), a limiter
/// instance's clock, and memory pressure on a separate cache server. Any other is refused at
/// its `kind`, saying which run.
fn check_cluster_faults(
    file: &ScenarioFile,
    topology: Topology,
    faults: &[Fault],
    src: &Source<'_>,
) -> Result<(), ScenarioError> {
    for (fault, spanned) in faults.iter().zip(&file.faults) {
        let runs = match fault {
            Fault::ClockSkew(_) => true,
            Fault::Server(s) if s.action.kind() == FaultKind::Reshard => {
                if let Topology::Cluster { primaries: 1, .. } = topology {
                    return Err(src
                        .error(
                            &spanned.get_ref().kind,
                            "a reshard moves a slot to another primary: this cluster has one",
                        )
                        .with_help("set `primaries = 2` or more in [server]"));
                }
                true
            }
            Fault::Server(s) if s.action.kind() == FaultKind::NodeFailover => {
                if let Topology::Cluster { replicas: 0, .. } = topology {
                    return Err(src
                        .error(
                            &spanned.get_ref().kind,
                            "a node-failover promotes a primary's replica: this cluster has none",
                        )
                        .with_help("set `replicas = 1` in [server]"));
                }
                true
            }
            Fault::Server(s) if s.action.kind() == FaultKind::NodePause => true,
            Fault::MemoryPressure(p) => p.target == CacheTarget::CacheServer,
            // Applied by the fault proxy in front of each node.
            Fault::OnCommand(_) => true,
            // Between a request's round trips; the nemesis reaches a key on the node serving it.
            Fault::ExpireBetweenRoundTrips(_)
            | Fault::StallBetweenRoundTrips(_)
            | Fault::ClientDiesBetweenRoundTrips(_) => true,
            _ => false,
        };
        if !runs {
            return Err(src
                .error(
                    &spanned.get_ref().kind,
                    format!("fault `{}` does not run on topology = \"cluster\" yet", fault.kind().name()),
                )
                .with_help(
                    "on a cluster: reshard, node-failover, node-pause, clock-skew, the faults between round trips (expire-, stall- and client-dies-between-round-trips), the faults on a command's reply (delay-reply, drop-reply, inject-error, reset-connection), and memory-pressure with target = \"cache-server\"; or drop `topology = \"cluster\"` to run it on one server",
                ));
        }
    }
    Ok(())
}

fn check_memory(mem: &Spanned<String>, src: &Source<'_>) -> Result<(), ScenarioError> {
    let text = mem.get_ref().to_lowercase();
    let digits = text.trim_end_matches(|c: char| c.is_ascii_alphabetic());
    let unit = &text[digits.len()..];
    let ok = !digits.is_empty()
        && digits.chars().all(|c| c.is_ascii_digit())
        && ["", "b", "k", "kb", "m", "mb", "g", "gb"].contains(&unit);
    if ok {
        Ok(())
    } else {
        Err(src
            .error(
                mem,
                format!("`{}` is not a memory size Redis understands", mem.get_ref()),
            )
            .with_help("write e.g. \"4mb\", \"512kb\" or \"1gb\""))
    }
}

fn resolve_phases(file: &ScenarioFile, limit: &Limit, src: &Source<'_>) -> Result<Vec<Phase>, ScenarioError> {
    if file.phases.is_empty() {
        return Err(src
            .error(&file.name, "the scenario has no [[phase]]")
            .with_help("add e.g. [[phase]] kind = \"steady\" rate_per_s = 100 duration_ms = 3000"));
    }
    let mut names = BTreeSet::new();
    let mut phases = Vec::new();
    let mut planned = 0u64;
    for (index, phase) in file.phases.iter().enumerate() {
        let resolved = resolve_phase(phase.get_ref(), index, limit, src)?;
        planned = planned.saturating_add(resolved.kind.planned_requests());
        if planned > REQUESTS_PER_RUN_MAX {
            let p = phase.get_ref();
            let at = p
                .requests
                .as_ref()
                .map(|r| r.span())
                .or_else(|| p.rate_per_s.as_ref().map(|r| r.span()));
            return Err(ScenarioError::at(
                src.path,
                src.text,
                at.or(Some(phase.span())),
                format!(
                    "the scenario plans {planned} requests up to phase `{}`; a run may plan at most {REQUESTS_PER_RUN_MAX}",
                    resolved.name
                ),
            )
            .with_help("every request is kept in memory until the run is judged (about 1 GB at the cap): lower rate_per_s, duration_ms or requests, or split the scenario"));
        }
        if !names.insert(resolved.name.clone()) {
            let at = phase.get_ref().name.as_ref().map_or(phase.span(), |n| n.span());
            return Err(ScenarioError::at(
                src.path,
                src.text,
                Some(at),
                format!("two phases are named `{}`", resolved.name),
            )
            .with_help("give each phase its own name"));
        }
        phases.push(resolved);
    }
    Ok(phases)
}

fn resolve_phase(phase: &PhaseFile, index: usize, limit: &Limit, src: &Source<'_>) -> Result<Phase, ScenarioError> {
    let kind_name = phase.kind.get_ref().as_str();
    let kind = match kind_name {
        "steady" => resolve_steady(phase, limit, src)?,
        "burst" => resolve_burst(phase, limit, src)?,
        "quiet" => resolve_quiet(phase, src)?,
        other => {
            return Err(src
                .error(&phase.kind, format!("unknown phase kind `{other}`"))
                .with_help("one of: steady, burst, quiet"));
        }
    };
    let name = match &phase.name {
        Some(n) if n.get_ref().trim().is_empty() => {
            return Err(src.error(n, "a phase name may not be empty"));
        }
        Some(n) => n.get_ref().clone(),
        None => format!("{kind_name}-{}", index + 1),
    };
    Ok(Phase { name, kind })
}

const STEADY_TAKES: &str = "name, rate_per_s, duration_ms, identities, pick, spacing, clear_of_expiry_ms";
const BURST_TAKES: &str = "name, requests, concurrency, connections, identities, pick";
const QUIET_TAKES: &str = "name, duration_ms";

fn resolve_steady(p: &PhaseFile, limit: &Limit, src: &Source<'_>) -> Result<PhaseKind, ScenarioError> {
    src.not_for(&p.requests, "requests", "steady phase", STEADY_TAKES)?;
    src.not_for(&p.concurrency, "concurrency", "steady phase", STEADY_TAKES)?;
    src.not_for(&p.connections, "connections", "steady phase", STEADY_TAKES)?;
    let rate = p.rate_per_s.as_ref().ok_or_else(|| {
        src.error(&p.kind, "a steady phase needs `rate_per_s`")
            .with_help("e.g. `rate_per_s = 100` (requests per second, all identities together)")
    })?;
    if !(rate.get_ref().is_finite() && *rate.get_ref() > 0.0 && *rate.get_ref() <= 1_000_000.0) {
        return Err(src.error(rate, "rate_per_s must be above 0 and at most 1000000"));
    }
    let duration = p.duration_ms.as_ref().ok_or_else(|| {
        src.error(&p.kind, "a steady phase needs `duration_ms`")
            .with_help("e.g. `duration_ms = 3000`")
    })?;
    Ok(PhaseKind::Steady {
        rate_per_s: *rate.get_ref(),
        duration_ms: src.in_range(duration, "duration_ms", 1..=3_600_000)?,
        identities: resolve_identities(p.identities.as_ref(), limit, src)?,
        pick: resolve_pick(p.pick.as_ref(), src)?,
        spacing: match p.spacing.as_ref().map(|s| s.get_ref().as_str()) {
            None | Some("jittered") => Spacing::Jittered,
            Some("even") => Spacing::Even,
            Some(other) => {
                return Err(src
                    .error(
                        p.spacing.as_ref().expect("matched Some"),
                        format!("unknown spacing `{other}`"),
                    )
                    .with_help("one of: jittered (default), even"));
            }
        },
        clear_of_expiry_ms: match &p.clear_of_expiry_ms {
            Some(c) => src.in_range(c, "clear_of_expiry_ms", 0..=60_000)?,
            None => 0,
        },
    })
}

fn resolve_burst(p: &PhaseFile, limit: &Limit, src: &Source<'_>) -> Result<PhaseKind, ScenarioError> {
    src.not_for(&p.rate_per_s, "rate_per_s", "burst phase", BURST_TAKES)?;
    src.not_for(&p.duration_ms, "duration_ms", "burst phase", BURST_TAKES)?;
    src.not_for(&p.spacing, "spacing", "burst phase", BURST_TAKES)?;
    src.not_for(&p.clear_of_expiry_ms, "clear_of_expiry_ms", "burst phase", BURST_TAKES)?;
    let requests = p.requests.as_ref().ok_or_else(|| {
        src.error(&p.kind, "a burst phase needs `requests`")
            .with_help("e.g. `requests = 20000` (sent as fast as replies come)")
    })?;
    let concurrency = match &p.concurrency {
        Some(c) => src.in_range(c, "concurrency", 1..=1024)? as u32,
        None => 1,
    };
    let connections = match &p.connections {
        Some(c) => src.in_range(c, "connections", 1..=u64::from(concurrency))? as u32,
        None => concurrency.min(8),
    };
    Ok(PhaseKind::Burst {
        requests: src.in_range(requests, "requests", 1..=100_000_000)?,
        concurrency,
        connections,
        identities: resolve_identities(p.identities.as_ref(), limit, src)?,
        pick: resolve_pick(p.pick.as_ref(), src)?,
    })
}

fn resolve_quiet(p: &PhaseFile, src: &Source<'_>) -> Result<PhaseKind, ScenarioError> {
    src.not_for(&p.rate_per_s, "rate_per_s", "quiet phase", QUIET_TAKES)?;
    src.not_for(&p.requests, "requests", "quiet phase", QUIET_TAKES)?;
    src.not_for(&p.concurrency, "concurrency", "quiet phase", QUIET_TAKES)?;
    src.not_for(&p.connections, "connections", "quiet phase", QUIET_TAKES)?;
    src.not_for(&p.identities, "identities", "quiet phase", QUIET_TAKES)?;
    src.not_for(&p.pick, "pick", "quiet phase", QUIET_TAKES)?;
    src.not_for(&p.spacing, "spacing", "quiet phase", QUIET_TAKES)?;
    src.not_for(&p.clear_of_expiry_ms, "clear_of_expiry_ms", "quiet phase", QUIET_TAKES)?;
    let duration = p.duration_ms.as_ref().ok_or_else(|| {
        src.error(&p.kind, "a quiet phase needs `duration_ms`")
            .with_help("e.g. `duration_ms = 1200` (at least one window for no-lockout)")
    })?;
    Ok(PhaseKind::Quiet {
        duration_ms: src.in_range(duration, "duration_ms", 1..=3_600_000)?,
    })
}

fn resolve_pick(pick: Option<&Spanned<String>>, src: &Source<'_>) -> Result<Pick, ScenarioError> {
    match pick.map(|p| p.get_ref().as_str()) {
        None | Some("random") => Ok(Pick::Random),
        Some("round-robin") => Ok(Pick::RoundRobin),
        Some(other) => Err(src
            .error(pick.expect("matched Some"), format!("unknown pick `{other}`"))
            .with_help("one of: random (default), round-robin")),
    }
}

fn resolve_identities(
    ids: Option<&Spanned<Vec<i64>>>,
    limit: &Limit,
    src: &Source<'_>,
) -> Result<Vec<u32>, ScenarioError> {
    let Some(ids) = ids else {
        return Ok((0..limit.identities).collect());
    };
    if ids.get_ref().is_empty() {
        return Err(src.error(ids, "identities may not be empty; leave it out to use all identities"));
    }
    ids.get_ref()
        .iter()
        .map(|&id| {
            u32::try_from(id)
                .ok()
                .filter(|id| *id < limit.identities)
                .ok_or_else(|| {
                    src.error(ids, format!("identity {id} does not exist"))
                        .with_help(format!(
                            "identities are numbered 0 to {} ([limit] identities = {})",
                            limit.identities - 1,
                            limit.identities
                        ))
                })
        })
        .collect()
}

const GAP_TAKES: &str = "identity, request, before_command, times";
const STALL_TAKES: &str = "identity, request, before_command, times, stall_ms";
const PRESSURE_TAKES: &str = "phase, value_bytes, ttl_s, writes_per_request, target";
const COMMAND_TAKES: &str = "identity, request, command, times (delay-reply: delay_ms; inject-error: error)";

/// The fault's `kind`, one the harness knows.
fn fault_kind(f: &FaultFile, src: &Source<'_>) -> Result<FaultKind, ScenarioError> {
    FaultKind::parse(f.kind.get_ref()).ok_or_else(|| {
        let known: Vec<&str> = FaultKind::ALL
            .iter()
            .chain(&FaultKind::ON_A_CLUSTER)
            .map(|k| k.name())
            .collect();
        src.error(&f.kind, format!("unknown fault kind `{}`", f.kind.get_ref()))
            .with_help(format!("one of: {}", known.join(", ")))
    })
}

fn resolve_fault(
    fault: &Spanned<FaultFile>,
    limit: &Limit,
    phases: &[Phase],
    has_cache_server: bool,
    src: &Source<'_>,
) -> Result<Fault, ScenarioError> {
    let f = fault.get_ref();
    let kind = fault_kind(f, src)?;
    match kind {
        FaultKind::ExpireBetweenRoundTrips => {
            src.not_for(&f.stall_ms, "stall_ms", "expire-between-round-trips fault", GAP_TAKES)?;
            reject_pressure_fields(f, "expire-between-round-trips fault", GAP_TAKES, src)?;
            reject_command_fields(f, "expire-between-round-trips fault", GAP_TAKES, src)?;
            Ok(Fault::ExpireBetweenRoundTrips(resolve_gap(
                f,
                limit,
                GapFaultAction::ExpireKey,
                src,
            )?))
        }
        FaultKind::StallBetweenRoundTrips => {
            reject_pressure_fields(f, "stall-between-round-trips fault", STALL_TAKES, src)?;
            reject_command_fields(f, "stall-between-round-trips fault", STALL_TAKES, src)?;
            let stall = f.stall_ms.as_ref().ok_or_else(|| {
                src.error(&f.kind, "a stall-between-round-trips fault needs `stall_ms`")
                    .with_help("e.g. `stall_ms = 1000` (as long as the window lets the key expire)")
            })?;
            let stall_ms = src.in_range(stall, "stall_ms", 1..=600_000)?;
            Ok(Fault::StallBetweenRoundTrips(resolve_gap(
                f,
                limit,
                GapFaultAction::Stall { stall_ms },
                src,
            )?))
        }
        FaultKind::ClientDiesBetweenRoundTrips => {
            src.not_for(
                &f.stall_ms,
                "stall_ms",
                "client-dies-between-round-trips fault",
                GAP_TAKES,
            )?;
            reject_pressure_fields(f, "client-dies-between-round-trips fault", GAP_TAKES, src)?;
            reject_command_fields(f, "client-dies-between-round-trips fault", GAP_TAKES, src)?;
            Ok(Fault::ClientDiesBetweenRoundTrips(resolve_gap(
                f,
                limit,
                GapFaultAction::ClientDies,
                src,
            )?))
        }
        FaultKind::MemoryPressure => resolve_pressure(f, phases, has_cache_server, src).map(Fault::MemoryPressure),
        FaultKind::DelayReply | FaultKind::DropReply | FaultKind::InjectError | FaultKind::ResetConnection => {
            resolve_command_fault(f, kind, limit, src).map(Fault::OnCommand)
        }
        FaultKind::ServerRestart
        | FaultKind::ServerPause
        | FaultKind::ScriptFlush
        | FaultKind::ClientKill
        | FaultKind::Failover
        | FaultKind::Reshard
        | FaultKind::NodeFailover
        | FaultKind::NodePause => resolve_server_fault(f, kind, limit, phases, src).map(Fault::Server),
        FaultKind::ClockSkew => resolve_clock_skew(f, limit, src).map(Fault::ClockSkew),
    }
}

const SKEW_TAKES: &str = "instance, offset_ms, drift_ms_per_s";

/// One limiter instance's clock, off by `offset_ms` and drifting by `drift_ms_per_s`.
fn resolve_clock_skew(f: &FaultFile, limit: &Limit, src: &Source<'_>) -> Result<ClockSkew, ScenarioError> {
    let what = "clock-skew fault";
    src.not_for(&f.identity, "identity", what, SKEW_TAKES)?;
    src.not_for(&f.request, "request", what, SKEW_TAKES)?;
    src.not_for(&f.before_command, "before_command", what, SKEW_TAKES)?;
    src.not_for(&f.times, "times", what, SKEW_TAKES)?;
    src.not_for(&f.stall_ms, "stall_ms", what, SKEW_TAKES)?;
    reject_command_fields(f, what, SKEW_TAKES, src)?;
    reject_moment_and_memory_fields(f, what, SKEW_TAKES, src)?;
    let instance = match &f.instance {
        Some(i) => u32::try_from(*i.get_ref())
            .ok()
            .filter(|i| *i < limit.instances)
            .ok_or_else(|| {
                src.error(i, format!("instance {} does not exist", i.get_ref()))
                    .with_help(format!(
                        "instances are numbered 0 to {} ([limit] instances = {})",
                        limit.instances - 1,
                        limit.instances
                    ))
            })?,
        // As documented: the first (with one instance, the only) limiter instance.
        None => 0,
    };
    let offset_ms = match &f.offset_ms {
        Some(v) => {
            let ms = *v.get_ref();
            if ms.unsigned_abs() > 86_400_000 {
                return Err(src.error(v, "offset_ms must be within a day either way (-86400000 to 86400000)"));
            }
            ms
        }
        None => 0,
    };
    let drift_ms_per_s = match &f.drift_ms_per_s {
        Some(v) if !v.get_ref().is_finite() || v.get_ref().abs() > 1000.0 => {
            return Err(src.error(v, "drift_ms_per_s must be between -1000 and 1000"));
        }
        Some(v) => *v.get_ref(),
        None => 0.0,
    };
    if offset_ms == 0 && drift_ms_per_s == 0.0 {
        return Err(src
            .error(&f.kind, "a clock-skew fault needs `offset_ms` or `drift_ms_per_s`")
            .with_help("e.g. `offset_ms = -1500` (1.5 s behind) or `drift_ms_per_s = 50`"));
    }
    Ok(ClockSkew {
        instance,
        offset_ms,
        drift_ms_per_s,
    })
}

const SERVER_TAKES: &str = "phase, after_ms (server-restart: persistence; server-pause: pause_ms; failover: lose_writes_ms, connections; reshard: identity, migrating_ms, method; node-failover: identity, lose_writes_ms; node-pause: identity, pause_ms)";

/// A `reshard`: by `SETSLOT` and `MIGRATE` (held migrating `migrating_ms`, 200 by default),
/// or atomic (`method = "atomic"`, nothing held migrating).
fn reshard(f: &FaultFile, limit: &Limit, src: &Source<'_>) -> Result<ServerAction, ScenarioError> {
    let atomic = match &f.method {
        None => false,
        Some(m) => match m.get_ref().as_str() {
            "migrate" => false,
            "atomic" => true,
            other => {
                return Err(src
                    .error(m, format!("unknown method `{other}`"))
                    .with_help("`migrate` (SETSLOT and MIGRATE, the default) or `atomic` (Valkey 9.0 and later: CLUSTER MIGRATESLOTS)"));
            }
        },
    };
    let migrating_ms = match (&f.migrating_ms, atomic) {
        (Some(v), true) => {
            return Err(src
                .error(v, "an atomic slot migration holds no slot migrating")
                .with_help("drop `migrating_ms`, or use `method = \"migrate\"`"));
        }
        (Some(v), false) => src.in_range(v, "migrating_ms", 0..=60_000)?,
        (None, true) => 0,
        (None, false) => 200,
    };
    Ok(ServerAction::Reshard {
        identity: fault_identity(f, limit, src)?,
        migrating_ms,
        atomic,
    })
}

/// A fault of the server itself: the phase it strikes in and when, from the phase's start.
fn resolve_server_fault(
    f: &FaultFile,
    kind: FaultKind,
    limit: &Limit,
    phases: &[Phase],
    src: &Source<'_>,
) -> Result<ServerFault, ScenarioError> {
    let what = format!("{kind} fault");
    if !FaultKind::ON_A_CLUSTER.contains(&kind) {
        src.not_for(&f.identity, "identity", &what, SERVER_TAKES)?;
    }
    if kind != FaultKind::Reshard {
        src.not_for(&f.migrating_ms, "migrating_ms", &what, SERVER_TAKES)?;
        src.not_for(&f.method, "method", &what, SERVER_TAKES)?;
    }
    src.not_for(&f.request, "request", &what, SERVER_TAKES)?;
    src.not_for(&f.before_command, "before_command", &what, SERVER_TAKES)?;
    src.not_for(&f.times, "times", &what, SERVER_TAKES)?;
    src.not_for(&f.stall_ms, "stall_ms", &what, SERVER_TAKES)?;
    reject_command_fields(f, &what, SERVER_TAKES, src)?;
    src.not_for(&f.value_bytes, "value_bytes", &what, SERVER_TAKES)?;
    src.not_for(&f.instance, "instance", &what, SERVER_TAKES)?;
    src.not_for(&f.offset_ms, "offset_ms", &what, SERVER_TAKES)?;
    src.not_for(&f.drift_ms_per_s, "drift_ms_per_s", &what, SERVER_TAKES)?;
    src.not_for(&f.ttl_s, "ttl_s", &what, SERVER_TAKES)?;
    src.not_for(&f.writes_per_request, "writes_per_request", &what, SERVER_TAKES)?;
    src.not_for(&f.target, "target", &what, SERVER_TAKES)?;
    if kind != FaultKind::ServerPause && kind != FaultKind::NodePause {
        src.not_for(&f.pause_ms, "pause_ms", &what, SERVER_TAKES)?;
    }
    if kind != FaultKind::ServerRestart {
        src.not_for(&f.persistence, "persistence", &what, SERVER_TAKES)?;
    }
    if kind != FaultKind::Failover && kind != FaultKind::NodeFailover {
        src.not_for(&f.lose_writes_ms, "lose_writes_ms", &what, SERVER_TAKES)?;
    }
    if kind != FaultKind::Failover {
        src.not_for(&f.connections, "connections", &what, SERVER_TAKES)?;
    }
    let phase = f.phase.as_ref().ok_or_else(|| {
        src.error(
            &f.kind,
            format!("a {kind} fault needs `phase`: the phase it strikes in"),
        )
        .with_help("e.g. `phase = \"steady\"` and `after_ms = 500` (from the phase's start)")
    })?;
    if !phases.iter().any(|p| &p.name == phase.get_ref()) {
        let known: Vec<_> = phases.iter().map(|p| p.name.as_str()).collect();
        return Err(src
            .error(phase, format!("no phase is named `{}`", phase.get_ref()))
            .with_help(format!("phases: {}", known.join(", "))));
    }
    let after_ms = match &f.after_ms {
        Some(v) => src.in_range(v, "after_ms", 0..=3_600_000)?,
        None => 0,
    };
    let action = server_action(f, kind, limit, src)?;
    Ok(ServerFault {
        phase: phase.get_ref().clone(),
        after_ms,
        action,
    })
}

/// A pause's `pause_ms`, which it needs (`example` says what a value does).
fn pause_ms(f: &FaultFile, example: &str, src: &Source<'_>) -> Result<u64, ScenarioError> {
    let pause = f.pause_ms.as_ref().ok_or_else(|| {
        src.error(&f.kind, format!("a {} fault needs `pause_ms`", f.kind.get_ref()))
            .with_help(example)
    })?;
    src.in_range(pause, "pause_ms", 1..=600_000)
}

/// The identity a cluster fault acts on (default 0).
fn fault_identity(f: &FaultFile, limit: &Limit, src: &Source<'_>) -> Result<u32, ScenarioError> {
    match &f.identity {
        Some(id) => identity_in(id, limit, src),
        None => Ok(0),
    }
}

/// A failover's `connections` (default `stay`).
fn failover_connections(f: &FaultFile, src: &Source<'_>) -> Result<FailoverConnections, ScenarioError> {
    let Some(c) = f.connections.as_ref() else {
        return Ok(FailoverConnections::Stay);
    };
    match c.get_ref().as_str() {
        "stay" => Ok(FailoverConnections::Stay),
        "move" => Ok(FailoverConnections::Move),
        other => Err(src.error(c, format!("unknown connections `{other}`")).with_help(
            "one of: stay (open connections stay with the demoted node and get READONLY), move (they are closed; the client reconnects to the new primary)",
        )),
    }
}

/// What a server fault does: the fields each kind takes.
fn server_action(
    f: &FaultFile,
    kind: FaultKind,
    limit: &Limit,
    src: &Source<'_>,
) -> Result<ServerAction, ScenarioError> {
    Ok(match kind {
        FaultKind::ServerRestart => ServerAction::Restart {
            persistence: match f.persistence.as_ref() {
                None => Persistence::None,
                Some(p) => match p.get_ref().as_str() {
                    "none" => Persistence::None,
                    "aof" => Persistence::Aof,
                    other => {
                        return Err(src
                            .error(p, format!("unknown persistence `{other}`"))
                            .with_help("one of: none (every key lost), aof (append-only file, fsync always)"));
                    }
                },
            },
        },
        FaultKind::ServerPause => ServerAction::Pause {
            pause_ms: pause_ms(
                f,
                "e.g. `pause_ms = 3000` (longer than the clients' 2 s reply timeout makes them time out)",
                src,
            )?,
        },
        FaultKind::NodePause => ServerAction::NodePause {
            identity: fault_identity(f, limit, src)?,
            pause_ms: pause_ms(
                f,
                "e.g. `pause_ms = 4000` (longer than the cluster's 2 s node timeout: the node is marked failed, and its replica promoted)",
                src,
            )?,
        },
        FaultKind::ScriptFlush => ServerAction::ScriptFlush,
        FaultKind::Reshard => reshard(f, limit, src)?,
        FaultKind::NodeFailover => ServerAction::NodeFailover {
            identity: fault_identity(f, limit, src)?,
            lose_writes_ms: match &f.lose_writes_ms {
                Some(v) => src.in_range(v, "lose_writes_ms", 0..=60_000)?,
                None => 0,
            },
        },
        FaultKind::Failover => ServerAction::Failover {
            lose_writes_ms: match &f.lose_writes_ms {
                Some(v) => src.in_range(v, "lose_writes_ms", 0..=60_000)?,
                None => 0,
            },
            connections: failover_connections(f, src)?,
        },
        _ => ServerAction::ClientKill,
    })
}

/// A fault's `identity`, one of the scenario's.
fn identity_in(id: &Spanned<i64>, limit: &Limit, src: &Source<'_>) -> Result<u32, ScenarioError> {
    u32::try_from(*id.get_ref())
        .ok()
        .filter(|id| *id < limit.identities)
        .ok_or_else(|| {
            src.error(id, format!("identity {} does not exist", id.get_ref()))
                .with_help(format!("identities are numbered 0 to {}", limit.identities - 1))
        })
}

/// The fields only faults on a command's reply take.
fn reject_command_fields(f: &FaultFile, kind: &str, takes: &str, src: &Source<'_>) -> Result<(), ScenarioError> {
    src.not_for(&f.command, "command", kind, takes)?;
    src.not_for(&f.delay_ms, "delay_ms", kind, takes)?;
    src.not_for(&f.error, "error", kind, takes)
}

fn resolve_command_fault(
    f: &FaultFile,
    kind: FaultKind,
    limit: &Limit,
    src: &Source<'_>,
) -> Result<CommandFault, ScenarioError> {
    // Long: each field of a command fault is checked where its error can point at it.
    let what = format!("{kind} fault");
    reject_pressure_fields(f, &what, COMMAND_TAKES, src)?;
    src.not_for(&f.stall_ms, "stall_ms", &what, COMMAND_TAKES)?;
    if let Some(b) = &f.before_command {
        return Err(src
            .error(b, format!("a {kind} fault acts on a command, not before one"))
            .with_help("write `command = \"INCR\"` (the command whose reply it acts on)"));
    }
    if kind != FaultKind::DelayReply {
        src.not_for(&f.delay_ms, "delay_ms", &what, COMMAND_TAKES)?;
    }
    if kind != FaultKind::InjectError {
        src.not_for(&f.error, "error", &what, COMMAND_TAKES)?;
    }
    let action = match kind {
        FaultKind::DelayReply => {
            let delay = f.delay_ms.as_ref().ok_or_else(|| {
                src.error(&f.kind, "a delay-reply fault needs `delay_ms`")
                    .with_help("e.g. `delay_ms = 300`")
            })?;
            CommandFaultAction::DelayReply {
                delay_ms: src.in_range(delay, "delay_ms", 1..=600_000)?,
            }
        }
        FaultKind::DropReply => CommandFaultAction::DropReply,
        FaultKind::ResetConnection => CommandFaultAction::ResetConnection,
        _ => {
            let errors = INJECTABLE_ERRORS.iter().chain(&CLUSTER_ERRORS);
            let known = errors.clone().map(|(k, _)| *k).collect::<Vec<_>>().join(", ");
            let error = f.error.as_ref().ok_or_else(|| {
                src.error(&f.kind, "an inject-error fault needs `error`")
                    .with_help(format!("one of: {known}"))
            })?;
            let name = error.get_ref().to_uppercase();
            let Some((_, text)) = errors.clone().find(|(k, _)| *k == name) else {
                return Err(src
                    .error(error, format!("unknown error `{}`", error.get_ref()))
                    .with_help(format!("one of: {known}")));
            };
            CommandFaultAction::InjectError {
                error: (*text).to_owned(),
            }
        }
    };
    // The matching fields are the gap rule's, with `command` in place of `before_command`.
    let as_gap = FaultFile {
        kind: f.kind.clone(),
        identity: f.identity.clone(),
        request: f.request.clone(),
        before_command: f.command.clone(),
        command: None,
        times: f.times.clone(),
        stall_ms: None,
        delay_ms: None,
        error: None,
        phase: None,
        value_bytes: None,
        ttl_s: None,
        writes_per_request: None,
        target: None,
        after_ms: None,
        pause_ms: None,
        persistence: None,
        lose_writes_ms: None,
        migrating_ms: None,
        method: None,
        connections: None,
        instance: None,
        offset_ms: None,
        drift_ms_per_s: None,
    };
    let gap = resolve_gap(&as_gap, limit, GapFaultAction::ClientDies, src)?;
    Ok(CommandFault {
        identity: gap.identity,
        request: gap.request,
        command: gap.before_command,
        times: gap.times,
        action,
    })
}

fn reject_pressure_fields(f: &FaultFile, kind: &str, takes: &str, src: &Source<'_>) -> Result<(), ScenarioError> {
    reject_skew_fields(f, kind, takes, src)?;
    reject_moment_and_memory_fields(f, kind, takes, src)
}

fn reject_skew_fields(f: &FaultFile, kind: &str, takes: &str, src: &Source<'_>) -> Result<(), ScenarioError> {
    src.not_for(&f.instance, "instance", kind, takes)?;
    src.not_for(&f.offset_ms, "offset_ms", kind, takes)?;
    src.not_for(&f.drift_ms_per_s, "drift_ms_per_s", kind, takes)
}

fn reject_moment_and_memory_fields(
    f: &FaultFile,
    kind: &str,
    takes: &str,
    src: &Source<'_>,
) -> Result<(), ScenarioError> {
    src.not_for(&f.after_ms, "after_ms", kind, takes)?;
    src.not_for(&f.pause_ms, "pause_ms", kind, takes)?;
    src.not_for(&f.lose_writes_ms, "lose_writes_ms", kind, takes)?;
    src.not_for(&f.connections, "connections", kind, takes)?;
    src.not_for(&f.persistence, "persistence", kind, takes)?;
    src.not_for(&f.migrating_ms, "migrating_ms", kind, takes)?;
    src.not_for(&f.method, "method", kind, takes)?;
    src.not_for(&f.phase, "phase", kind, takes)?;
    src.not_for(&f.value_bytes, "value_bytes", kind, takes)?;
    src.not_for(&f.ttl_s, "ttl_s", kind, takes)?;
    src.not_for(&f.writes_per_request, "writes_per_request", kind, takes)?;
    src.not_for(&f.target, "target", kind, takes)
}

fn resolve_gap(
    f: &FaultFile,
    limit: &Limit,
    action: GapFaultAction,
    src: &Source<'_>,
) -> Result<GapFault, ScenarioError> {
    let identity = match &f.identity {
        Some(id) => Some(identity_in(id, limit, src)?),
        None => None,
    };
    let request = match &f.request {
        Some(r) => src.positive(r, "request")?,
        None => 1,
    };
    let before_command = match &f.before_command {
        Some(c) => {
            let names = &c.get_ref().0;
            if names.is_empty() || names.iter().any(|n| n.is_empty() || n.contains(char::is_whitespace)) {
                return Err(src
                    .error(c, "before_command is a command name, or an array of them")
                    .with_help("e.g. before_command = \"INCR\" or before_command = [\"INCR\", \"INCRBY\"]"));
            }
            names.iter().map(|n| n.to_uppercase()).collect()
        }
        None => Vec::new(),
    };
    let times = match &f.times {
        Some(t) if *t.get_ref() == 0 => None,
        Some(t) => Some(src.positive(t, "times")?),
        None => Some(1),
    };
    Ok(GapFault {
        identity,
        request,
        before_command,
        times,
        action,
    })
}

fn resolve_pressure(
    f: &FaultFile,
    phases: &[Phase],
    has_cache_server: bool,
    src: &Source<'_>,
) -> Result<MemoryPressure, ScenarioError> {
    // Long: each field of a memory-pressure fault is resolved and range-checked where its error can point at it.
    let kind = "memory-pressure fault";
    src.not_for(&f.identity, "identity", kind, PRESSURE_TAKES)?;
    src.not_for(&f.request, "request", kind, PRESSURE_TAKES)?;
    src.not_for(&f.before_command, "before_command", kind, PRESSURE_TAKES)?;
    src.not_for(&f.times, "times", kind, PRESSURE_TAKES)?;
    src.not_for(&f.stall_ms, "stall_ms", kind, PRESSURE_TAKES)?;
    src.not_for(&f.instance, "instance", kind, PRESSURE_TAKES)?;
    src.not_for(&f.offset_ms, "offset_ms", kind, PRESSURE_TAKES)?;
    src.not_for(&f.drift_ms_per_s, "drift_ms_per_s", kind, PRESSURE_TAKES)?;
    src.not_for(&f.after_ms, "after_ms", kind, PRESSURE_TAKES)?;
    src.not_for(&f.pause_ms, "pause_ms", kind, PRESSURE_TAKES)?;
    src.not_for(&f.persistence, "persistence", kind, PRESSURE_TAKES)?;
    src.not_for(&f.migrating_ms, "migrating_ms", kind, PRESSURE_TAKES)?;
    src.not_for(&f.method, "method", kind, PRESSURE_TAKES)?;
    reject_command_fields(f, kind, PRESSURE_TAKES, src)?;
    let phase = f.phase.as_ref().ok_or_else(|| {
        src.error(
            &f.kind,
            "a memory-pressure fault needs `phase`: the phase whose requests write the cache",
        )
        .with_help("e.g. `phase = \"import\"` naming a steady or burst [[phase]]")
    })?;
    match phases.iter().find(|p| &p.name == phase.get_ref()) {
        Some(Phase {
            kind: PhaseKind::Quiet { .. },
            ..
        }) => {
            return Err(src.error(
                phase,
                format!(
                    "phase `{}` is quiet: it sends no requests to write alongside",
                    phase.get_ref()
                ),
            ));
        }
        Some(_) => {}
        None => {
            let known: Vec<_> = phases.iter().map(|p| p.name.as_str()).collect();
            return Err(src
                .error(phase, format!("no phase is named `{}`", phase.get_ref()))
                .with_help(format!("phases: {}", known.join(", "))));
        }
    }
    let target = match f.target.as_ref().map(|t| t.get_ref().as_str()) {
        None | Some("limiter-server") => CacheTarget::LimiterServer,
        Some("cache-server") if has_cache_server => CacheTarget::CacheServer,
        Some("cache-server") => {
            return Err(src
                .error(
                    f.target.as_ref().expect("matched Some"),
                    "target = \"cache-server\" needs a [cache_server] table",
                )
                .with_help("add [cache_server] with its maxmemory and maxmemory_policy"));
        }
        Some(other) => {
            return Err(src
                .error(
                    f.target.as_ref().expect("matched Some"),
                    format!("unknown target `{other}`"),
                )
                .with_help("one of: limiter-server, cache-server"));
        }
    };
    Ok(MemoryPressure {
        phase: phase.get_ref().clone(),
        value_bytes: match &f.value_bytes {
            Some(v) => src.in_range(v, "value_bytes", 1..=1_048_576)?,
            None => 1024,
        },
        ttl_s: match &f.ttl_s {
            Some(v) => src.in_range(v, "ttl_s", 0..=315_360_000)?,
            None => 604_800,
        },
        writes_per_request: match &f.writes_per_request {
            Some(v) => src.in_range(v, "writes_per_request", 1..=1000)? as u32,
            None => 1,
        },
        target,
    })
}

fn resolve_check(file: &CheckFile, limit: &Limit, src: &Source<'_>) -> Result<CheckConfig, ScenarioError> {
    let mut invariants = Vec::new();
    for name in file.invariants.get_ref() {
        let invariant = Invariant::from_name(name.get_ref()).ok_or_else(|| {
            let known: Vec<_> = Invariant::ALL.iter().map(|i| i.name()).collect();
            src.error(name, format!("unknown invariant `{}`", name.get_ref()))
                .with_help(format!("one of: {}", known.join(", ")))
        })?;
        if invariants.contains(&invariant) {
            return Err(src.error(name, format!("invariant `{invariant}` is listed twice")));
        }
        invariants.push(invariant);
    }
    if invariants.is_empty() {
        return Err(src
            .error(
                &file.invariants,
                "[check] invariants is empty: a run must check something",
            )
            .with_help("e.g. invariants = [\"ttl-present\", \"no-counter-reset\"]"));
    }
    let default_interval = (limit.window_ms / 4).clamp(20, 250);
    Ok(CheckConfig {
        invariants,
        sample_interval_ms: match &file.sample_interval_ms {
            Some(v) => src.in_range(v, "sample_interval_ms", 5..=60_000)?,
            None => default_interval,
        },
        ttl_slack_ms: match &file.ttl_slack_ms {
            Some(v) => src.in_range(v, "ttl_slack_ms", 0..=86_400_000)?,
            None => 0,
        },
        ttl_max_ms: match &file.ttl_max_ms {
            Some(v) => Some(src.in_range(v, "ttl_max_ms", 1..=31_536_000_000)?),
            None => None,
        },
        ttl_declared: None,
        deadline_ms: match &file.deadline_ms {
            Some(v) => Some(src.in_range(v, "deadline_ms", 1..=86_400_000)?),
            None => None,
        },
        on_server_error: match &file.on_server_error {
            None => ServerErrorPolicy::Error,
            Some(v) => ServerErrorPolicy::ALL
                .into_iter()
                .find(|p| p.name() == v.get_ref())
                .ok_or_else(|| {
                    src.error(v, format!("unknown on_server_error `{}`", v.get_ref()))
                        .with_help("one of: error (the caller is told), fail-closed (rejected), fail-open (admitted)")
                })?,
        },
    })
}
