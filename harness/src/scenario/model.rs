//! The validated scenario: what the runner, the generator, the nemesis and the checkers see.

use std::collections::BTreeMap;
use std::fmt;
use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use super::TtlMax;
use super::adjust::Adjust;
use super::error::{AdjustError, OutOfRange, RescaleError};
use crate::keys::{KeyError, KeyLayout};

/// A validated scenario. Built only by [`super::parse_scenario`].
#[derive(Debug, Clone, Serialize)]
pub struct Scenario {
    pub name: String,
    pub about: String,
    /// The seed written in the file, if any (the command line may override it).
    pub seed: Option<u64>,
    #[serde(skip)]
    pub source: PathBuf,
    /// Loaded from the catalog embedded in the binary (then `source` is only a label).
    #[serde(skip)]
    pub shipped: bool,
    /// The scenario file's text, as parsed: a run records it, so its history alone
    /// rebuilds the scenario (`limiter-harness check`).
    #[serde(skip)]
    pub text: String,
    /// What the command line changed (`--keys`, `--window-ms`), already applied.
    #[serde(skip)]
    pub adjusted: Adjust,
    pub server: ServerConfig,
    /// A second server for the cache, when the scenario separates cache and counters.
    pub cache_server: Option<ServerConfig>,
    pub limit: Limit,
    pub phases: Vec<Phase>,
    pub faults: Vec<Fault>,
    /// State written before traffic starts.
    pub setup: Vec<Setup>,
    pub check: CheckConfig,
    pub expect: Expect,
}

/// What the matrix expects of each limiter on this scenario.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Expect {
    /// Limiters expected to fail; every other limiter is expected to pass.
    pub fail: Vec<String>,
    /// Explanations of cells, by limiter name.
    pub notes: BTreeMap<String, String>,
}

/// State the scenario plants before traffic.
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub enum Setup {
    /// The limiter's own state for an identity that used up its limit, with no TTL: what
    /// incident 1 leaves behind. The limiter writes it in its own representation.
    ExhaustedKey { identity: u32 },
    /// Raw commands, each as its arguments, with `{key}` and `{identity}` filled in.
    Commands { identity: u32, commands: Vec<Vec<String>> },
}

impl Setup {
    pub fn identity(&self) -> u32 {
        match self {
            Self::ExhaustedKey { identity } | Self::Commands { identity, .. } => *identity,
        }
    }
}

impl Scenario {
    /// How a command line names this scenario: the shipped name, or the file's path relative
    /// to the current directory, quoted for a shell.
    pub fn reproduce_arg(&self) -> String {
        if self.shipped {
            self.name.clone()
        } else {
            crate::shell::quote(&crate::shell::relative(&self.source).display().to_string())
        }
    }

    /// How far instance `instance`'s clock is off `elapsed_ms` into the run (`clock-skew`).
    pub fn clock_off_ms(&self, instance: u32, elapsed_ms: u64) -> i64 {
        self.faults
            .iter()
            .filter_map(|f| match f {
                Fault::ClockSkew(skew) if skew.instance == instance => Some(skew.off_ms(elapsed_ms)),
                _ => None,
            })
            .sum()
    }

    /// Whether a `node-failover` holds replication back: the replicas then sync through the
    /// fault proxy of their primary, which the run starts whatever the limiter.
    pub fn holds_replication(&self) -> bool {
        self.faults.iter().any(|f| {
            matches!(
                f,
                Fault::Server(ServerFault {
                    action: ServerAction::NodeFailover {
                        lose_writes_ms: 1..,
                        ..
                    },
                    ..
                })
            )
        })
    }

    /// Whether a failover fault needs a replica beside the limiter's server.
    pub fn needs_replica(&self) -> bool {
        self.faults.iter().any(|f| f.kind() == FaultKind::Failover)
    }

    /// Whether a server fault restarts the server with its append-only file: the server must
    /// keep one from the start.
    pub fn keeps_aof(&self) -> bool {
        self.faults.iter().any(|f| {
            matches!(
                f,
                Fault::Server(ServerFault {
                    action: ServerAction::Restart {
                        persistence: Persistence::Aof
                    },
                    ..
                })
            )
        })
    }

    /// Whether running this scenario changes a server's configuration or floods it.
    pub fn disrupts_server(&self) -> Vec<String> {
        let mut reasons = Vec::new();
        for (name, value) in &self.server.settings {
            reasons.push(format!("it sets `{name} {value}` with CONFIG SET"));
        }
        for fault in &self.faults {
            if let Fault::MemoryPressure(pressure) = fault
                && pressure.target == CacheTarget::LimiterServer
            {
                reasons.push(format!(
                    "fault memory-pressure writes cold cache entries during phase `{}` to evict keys",
                    pressure.phase
                ));
            }
        }
        for fault in &self.faults {
            if let Fault::Server(s) = fault {
                reasons.push(format!(
                    "fault {} acts on the whole server during phase `{}`",
                    s.action.kind(),
                    s.phase
                ));
            }
        }
        for setup in &self.setup {
            reasons.push(match setup {
                Setup::ExhaustedKey { identity } => {
                    format!("its [[setup]] writes the key of identity {identity} without a TTL")
                }
                Setup::Commands { identity, commands } => {
                    format!(
                        "its [[setup]] sends {} command(s) for identity {identity}",
                        commands.len()
                    )
                }
            });
        }
        reasons
    }

    /// The seed a run of this scenario takes: the one given (`--seed`, a suite's `seed`),
    /// else the file's `seed`, else `otherwise()` — a fresh random seed for `run` (printed
    /// with its reproduce line), 0 for the matrix and `ci`, whose tables must not change
    /// from run to run.
    pub fn seed_or(&self, given: Option<u64>, otherwise: impl FnOnce() -> u64) -> u64 {
        given.or(self.seed).unwrap_or_else(otherwise)
    }

    /// How many requests its schedule sends (whatever the seed: the seed places them).
    pub fn planned_requests(&self) -> u64 {
        self.phases.iter().map(|p| p.kind.planned_requests()).sum()
    }

    /// How long a run of this scenario may take before it is stopped and called unknown:
    /// `[check] deadline_ms` if set, else a minute plus twice [`Scenario::worst_case_ms`].
    /// Generous: it ends a run that hangs, not one that is merely slow.
    pub fn deadline(&self) -> std::time::Duration {
        if let Some(ms) = self.check.deadline_ms {
            return std::time::Duration::from_millis(ms);
        }
        std::time::Duration::from_millis(60_000u64.saturating_add(self.worst_case_ms().saturating_mul(2)))
    }

    /// How long a run can take at worst, before any margin: every timed phase, 5 ms per
    /// burst request (a slow adapter answers in well under 1 ms) and what every strike of a
    /// fault can hold a request up (a stall, a reply delay, 5 s for a lost reply, a pause,
    /// 10 s for another server fault).
    pub fn worst_case_ms(&self) -> u64 {
        let mut ms: u64 = 0;
        for phase in &self.phases {
            ms = ms.saturating_add(match phase.kind.planned_ms() {
                Some(planned) => planned,
                None => phase.kind.planned_requests().saturating_mul(5),
            });
        }
        let requests = self.planned_requests();
        for fault in &self.faults {
            // What one strike can hold a request up, times the strikes (every request at
            // most, when the fault strikes every matching gap or command).
            let (delay_ms, times) = strike_hold_up_ms(fault);
            let strikes = times.unwrap_or(requests).min(requests);
            ms = ms.saturating_add(delay_ms.saturating_mul(strikes));
        }
        ms
    }

    /// The longest one strike of any of the scenario's faults can hold a request up (a
    /// stall, a reply delay, 5 s for a lost reply, a pause, 10 s for another server fault);
    /// 0 without such a fault. An exec adapter's reply timeout is stretched by it.
    pub fn hold_up_ms_max(&self) -> u64 {
        self.faults.iter().map(|f| strike_hold_up_ms(f).0).max().unwrap_or(0)
    }

    /// Describe the limiter's keys from the command line (`--keys`), overriding the file.
    pub fn override_keys(&mut self, templates: &[String]) -> Result<(), KeyError> {
        self.limit.keys = Some(KeyLayout::parse(
            templates,
            self.limit.identities,
            crate::keys::LayoutSource::CommandLine,
        )?);
        self.adjusted.keys = templates.to_vec();
        Ok(())
    }

    /// Run the scenario with a window of `window_ms` instead (`--window-ms`): every duration,
    /// rate and time-based setting scales with the window, so the run keeps its shape (the
    /// same requests in the same places relative to the windows). For limiters whose windows
    /// come in whole seconds.
    ///
    /// Refused (the scenario unchanged) when a scaled value would leave the range the
    /// scenario file allows: a phase longer than an hour, a stall or delay over ten minutes.
    pub fn rescale_window(&mut self, window_ms: u64) -> Result<(), RescaleError> {
        let mut by = Rescale {
            factor: window_ms as f64 / self.limit.window_ms as f64,
            too_long: Vec::new(),
        };
        let mut scaled = self.clone();
        scaled.limit.window_ms = window_ms;
        for phase in &mut scaled.phases {
            let what = format!("phase `{}`", phase.name);
            match &mut phase.kind {
                PhaseKind::Steady {
                    rate_per_s,
                    duration_ms,
                    ..
                } => {
                    *rate_per_s /= by.factor;
                    *duration_ms = by.ms(*duration_ms, &what, 3_600_000);
                }
                PhaseKind::Quiet { duration_ms } => *duration_ms = by.ms(*duration_ms, &what, 3_600_000),
                PhaseKind::Burst { .. } => {}
            }
        }
        for (i, fault) in scaled.faults.iter_mut().enumerate() {
            by.fault(i, fault);
        }
        let check = &mut scaled.check;
        check.sample_interval_ms = by.ms(check.sample_interval_ms, "", u64::MAX).clamp(5, 60_000);
        check.ttl_slack_ms = by.ms(check.ttl_slack_ms, "", u64::MAX);
        check.ttl_max_ms = check.ttl_max_ms.map(|ms| by.ms(ms, "", u64::MAX));
        check.deadline_ms = check
            .deadline_ms
            .map(|ms| by.ms(ms, "`[check] deadline_ms`", 86_400_000));
        if !by.too_long.is_empty() {
            return Err(RescaleError {
                window_ms,
                scenario: self.name.clone(),
                factor: by.factor,
                too_long: by.too_long,
            });
        }
        scaled.adjusted.window_ms = Some(window_ms);
        *self = scaled;
        Ok(())
    }
}

/// What one strike of `fault` can hold a request up, in ms, and how many times it strikes
/// (`None`: every matching gap or command).
fn strike_hold_up_ms(fault: &Fault) -> (u64, Option<u64>) {
    match fault {
        Fault::StallBetweenRoundTrips(GapFault {
            action: GapFaultAction::Stall { stall_ms },
            times,
            ..
        }) => (*stall_ms, *times),
        Fault::OnCommand(CommandFault { action, times, .. }) => match action {
            CommandFaultAction::DelayReply { delay_ms } => (*delay_ms, *times),
            // A lost reply or connection costs a client's reply timeout (5 s at most).
            CommandFaultAction::DropReply | CommandFaultAction::ResetConnection => (5_000, *times),
            CommandFaultAction::InjectError { .. } => (0, *times),
        },
        // A pause holds every request in flight for its length; a restart takes seconds.
        Fault::Server(ServerFault {
            action: ServerAction::Pause { pause_ms },
            ..
        }) => (*pause_ms, Some(1)),
        // A node's pause, then up to 10 s for the cluster to settle.
        Fault::Server(ServerFault {
            action: ServerAction::NodePause { pause_ms, .. },
            ..
        }) => (pause_ms + 10_000, Some(1)),
        Fault::Server(_) => (10_000, Some(1)),
        _ => (0, None),
    }
}

/// [`Scenario::rescale_window`]'s factor, and the values it would take out of their range.
struct Rescale {
    factor: f64,
    too_long: Vec<OutOfRange>,
}

impl Scenario {
    /// Apply `adjust` (after any made before: they add up). The error names the flag at
    /// fault. [`Scenario::override_keys`] and [`Scenario::rescale_window`] remember what they
    /// changed in `adjusted`, however they are called.
    pub fn adjust(&mut self, adjust: &Adjust) -> Result<(), AdjustError> {
        if !adjust.keys.is_empty() {
            self.override_keys(&adjust.keys).map_err(AdjustError::Keys)?;
            self.adjusted.keys.clone_from(&adjust.keys);
        }
        if let Some(window_ms) = adjust.window_ms {
            self.rescale_window(window_ms).map_err(AdjustError::Window)?;
            self.adjusted.window_ms = Some(window_ms);
        }
        if let Some(declared) =
            TtlMax::declared(adjust.ttl_max_windows, adjust.ttl_max_ms).map_err(AdjustError::TtlMax)?
        {
            self.check.ttl_declared = Some(declared);
            self.adjusted.ttl_max_ms = adjust.ttl_max_ms;
            self.adjusted.ttl_max_windows = adjust.ttl_max_windows;
        }
        Ok(())
    }
}

impl Rescale {
    /// `ms` scaled: a zero stays zero (`after_ms = 0`: at the phase's start;
    /// `lose_writes_ms = 0`: a clean failover), anything else stays at least 1 ms.
    fn ms(&mut self, ms: u64, what: &str, max: u64) -> u64 {
        let to = if ms == 0 {
            0
        } else {
            ((ms as f64 * self.factor).round() as u64).max(1)
        };
        if to > max {
            self.too_long.push(OutOfRange {
                what: what.to_owned(),
                to_ms: to,
                max_ms: max,
            });
        }
        to
    }

    /// A fault's durations and moments (its request numbers stay: the requests are the same).
    fn fault(&mut self, i: usize, fault: &mut Fault) {
        match fault {
            Fault::StallBetweenRoundTrips(GapFault {
                action: GapFaultAction::Stall { stall_ms },
                ..
            }) => *stall_ms = self.ms(*stall_ms, &format!("fault {i}'s stall_ms"), 600_000),
            Fault::OnCommand(CommandFault {
                action: CommandFaultAction::DelayReply { delay_ms },
                ..
            }) => *delay_ms = self.ms(*delay_ms, &format!("fault {i}'s delay_ms"), 600_000),
            // A server fault strikes at the same place relative to the windows, for as many
            // windows (a pause, writes held back from the replica).
            Fault::Server(server) => {
                server.after_ms = self.ms(server.after_ms, &format!("fault {i}'s after_ms"), 3_600_000);
                match &mut server.action {
                    ServerAction::Pause { pause_ms } => {
                        *pause_ms = self.ms(*pause_ms, &format!("fault {i}'s pause_ms"), 600_000);
                    }
                    ServerAction::Failover { lose_writes_ms, .. }
                    | ServerAction::NodeFailover { lose_writes_ms, .. } => {
                        *lose_writes_ms = self.ms(*lose_writes_ms, &format!("fault {i}'s lose_writes_ms"), 60_000);
                    }
                    ServerAction::Reshard { migrating_ms, .. } => {
                        *migrating_ms = self.ms(*migrating_ms, &format!("fault {i}'s migrating_ms"), 60_000);
                    }
                    // What a node's pause does is set by the cluster's node timeout (2 s: a
                    // longer pause is a failure), not by the window: its length stays.
                    ServerAction::NodePause { .. } => {}
                    ServerAction::Restart { .. } | ServerAction::ScriptFlush | ServerAction::ClientKill => {}
                }
            }
            // A clock as many windows off (a drift in ms per second is a ratio: unchanged).
            Fault::ClockSkew(skew) => {
                let off = self.ms(
                    skew.offset_ms.unsigned_abs(),
                    &format!("fault {i}'s offset_ms"),
                    86_400_000,
                );
                skew.offset_ms = off as i64 * skew.offset_ms.signum();
            }
            Fault::ExpireBetweenRoundTrips(_)
            | Fault::StallBetweenRoundTrips(_)
            | Fault::ClientDiesBetweenRoundTrips(_)
            | Fault::OnCommand(_)
            | Fault::MemoryPressure(_) => {}
        }
    }
}

/// Server parameters applied with `CONFIG SET` before the run, by Redis name, and the
/// shape of the deployment the limiter runs on.
#[derive(Debug, Clone, Default, Serialize)]
pub struct ServerConfig {
    pub settings: BTreeMap<String, String>,
    /// One server (the default), or a Redis Cluster the harness starts. Written to a report
    /// only when it is a cluster (a single server's reports stay as they were).
    #[serde(skip_serializing_if = "Topology::is_single")]
    pub topology: Topology,
}

/// The deployment the limiter's keys live on.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub enum Topology {
    /// One server (with a replica behind the same endpoint for a failover fault).
    #[default]
    Single,
    /// A Redis Cluster: `primaries` sharing the 16384 slots in equal ranges, each with
    /// `replicas` replicas; the settings apply to every node.
    Cluster { primaries: usize, replicas: usize },
}

impl Topology {
    /// The most primaries a scenario may ask for (each is a server of its own on this machine).
    pub const PRIMARIES_MAX: usize = 9;
    /// The most replicas per primary.
    pub const REPLICAS_MAX: usize = 2;

    pub fn is_single(&self) -> bool {
        *self == Self::Single
    }

    pub fn is_cluster(&self) -> bool {
        matches!(self, Self::Cluster { .. })
    }
}

/// The algorithm a limiter implements; the checkers pick their bounds from it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Algorithm {
    /// A counter per identity that lives for one window from its first request.
    FixedWindow,
    /// A log of admissions per identity; a request is admitted when fewer than the limit
    /// fall within the last window.
    SlidingLog,
    /// A bucket of `requests_max` tokens refilled at `requests_max` per window.
    TokenBucket,
    /// The generic cell rate algorithm: one emission per window/limit, bursts up to the limit.
    Gcra,
    /// Two counters per identity, the current window's and the previous one's; a request is
    /// admitted when the previous count, weighted by how much of its window is left, plus the
    /// current count stays within the limit. The windows rotate (a `RENAME` of the current
    /// counter onto the previous one, a new current counter at 0): deliberate writes.
    SlidingWindowCounter,
}

impl Algorithm {
    pub fn name(self) -> &'static str {
        match self {
            Self::FixedWindow => "fixed window",
            Self::SlidingLog => "sliding log",
            Self::TokenBucket => "token bucket",
            Self::Gcra => "GCRA",
            Self::SlidingWindowCounter => "sliding window counter",
        }
    }

    /// Whether the limiter's count only grows within a window (a drop is then a reset).
    pub fn counts_only_grow(self) -> bool {
        matches!(self, Self::FixedWindow)
    }

    /// Why a key of this algorithm lives at most one window, when the limiter declares
    /// nothing else: the default TTL bound.
    pub fn ttl_default_reason(self) -> &'static str {
        match self {
            Self::FixedWindow => "a fixed window's counter lives one window",
            Self::SlidingLog => "a sliding log's entries are older than a window once it ends",
            Self::TokenBucket => "an emptied token bucket is full again after one window",
            Self::Gcra => "a GCRA arrival time is at most one window ahead",
            Self::SlidingWindowCounter => {
                "a sliding window counter counts the current window, then weighs in as the previous one for another"
            }
        }
    }

    /// How many windows a key lives at most when the limiter declares nothing else.
    pub fn ttl_default_windows(self) -> u64 {
        match self {
            Self::SlidingWindowCounter => 2,
            _ => 1,
        }
    }
}

/// The limit every limiter under test enforces.
#[derive(Debug, Clone, Serialize)]
pub struct Limit {
    pub requests_max: u64,
    pub window_ms: u64,
    pub identities: u32,
    /// How many instances of the limiter share the server (app servers, each with its own
    /// connections, or its own adapter process); requests are spread over them by the seed.
    #[serde(skip_serializing_if = "is_one")]
    pub instances: u32,
    pub key_prefix: String,
    /// The limiter's keys as the scenario (or `--keys`) describes them; `None` leaves it to
    /// the limiter's own declaration, else the default (`key_prefix` + identity).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub keys: Option<KeyLayout>,
}

fn is_one(n: &u32) -> bool {
    *n == 1
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

impl Limit {
    /// The key the harness hands the limiter for one identity (`key_prefix` + identity); a
    /// limiter with a layout of its own builds its keys itself and ignores it.
    pub fn key(&self, identity: u32) -> String {
        format!("{}{identity}", self.key_prefix)
    }
}

#[derive(Debug, Clone, Serialize)]
pub struct Phase {
    pub name: String,
    #[serde(flatten)]
    pub kind: PhaseKind,
}

#[derive(Debug, Clone, Serialize)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub enum PhaseKind {
    /// Open-loop traffic: requests arrive at `rate_per_s` (total) whatever the replies.
    Steady {
        rate_per_s: f64,
        duration_ms: u64,
        identities: Vec<u32>,
        pick: Pick,
        spacing: Spacing,
        /// An identity's request does not start within this many ms before one of its keys
        /// is due to expire (as keyspace notifications tell it): no window then ends while a
        /// request is between its round trips by chance. 0: off.
        #[serde(skip_serializing_if = "is_zero")]
        clear_of_expiry_ms: u64,
    },
    /// Closed-loop traffic: `requests` sent by `concurrency` clients as fast as replies
    /// come, over `connections` connections (clients share them, pipelining their commands).
    Burst {
        requests: u64,
        concurrency: u32,
        connections: u32,
        identities: Vec<u32>,
        pick: Pick,
    },
    /// No traffic at all.
    Quiet { duration_ms: u64 },
}

/// The windows a limit may have, in milliseconds: from 50 ms (shorter is below the timer
/// resolution the checkers rely on) to a day. Scenarios, suites and `--window-ms` take these.
pub const WINDOW_MS_RANGE: std::ops::RangeInclusive<u64> = 50..=86_400_000;

/// The most requests one run may plan. Every request is kept in memory until the run is
/// judged (about 0.9 KB each, history and index together), so this bounds a run near 1 GB.
pub const REQUESTS_PER_RUN_MAX: u64 = 1_000_000;

impl PhaseKind {
    /// How many requests the phase sends (the schedule plans exactly these).
    pub fn planned_requests(&self) -> u64 {
        match self {
            PhaseKind::Steady {
                rate_per_s,
                duration_ms,
                ..
            } => (rate_per_s * *duration_ms as f64 / 1000.0).floor() as u64,
            PhaseKind::Burst { requests, .. } => *requests,
            PhaseKind::Quiet { .. } => 0,
        }
    }

    /// How long the phase is planned to last; a burst lasts as long as its replies take.
    pub fn planned_ms(&self) -> Option<u64> {
        match self {
            PhaseKind::Steady { duration_ms, .. } | PhaseKind::Quiet { duration_ms } => Some(*duration_ms),
            PhaseKind::Burst { .. } => None,
        }
    }
}

/// How an open-loop phase spaces its requests.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Spacing {
    /// Request i at a seeded random time within its slot [i, i+1) × 1/rate.
    Jittered,
    /// Request i exactly at i × 1/rate.
    Even,
}

/// How a phase picks the identity of each request.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Pick {
    /// Uniformly at random (from the seed).
    Random,
    /// In turn: request i goes to identities[i % len].
    RoundRobin,
}

#[derive(Debug, Clone, Serialize)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub enum Fault {
    ExpireBetweenRoundTrips(GapFault),
    StallBetweenRoundTrips(GapFault),
    ClientDiesBetweenRoundTrips(GapFault),
    /// A fault on one command's reply, applied in the fault proxy.
    OnCommand(CommandFault),
    MemoryPressure(MemoryPressure),
    /// Something happens to the limiter's server itself, at a moment of a phase.
    Server(ServerFault),
    /// One limiter instance's clock is off: the `now_ms` it is given runs ahead or behind.
    ClockSkew(ClockSkew),
}

/// A limiter instance whose clock disagrees with the others'.
#[derive(Debug, Clone, Copy, Serialize, PartialEq)]
pub struct ClockSkew {
    pub instance: u32,
    /// Ahead (positive) or behind (negative) from the run's start.
    pub offset_ms: i64,
    /// And drifting further by this much per second of the run.
    pub drift_ms_per_s: f64,
}

impl ClockSkew {
    /// How far the instance's clock is off `elapsed_ms` into the run.
    pub fn off_ms(&self, elapsed_ms: u64) -> i64 {
        self.offset_ms + (self.drift_ms_per_s * elapsed_ms as f64 / 1000.0).round() as i64
    }
}

/// The kinds of fault, as scenario files, the history and reports name them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum FaultKind {
    ExpireBetweenRoundTrips,
    StallBetweenRoundTrips,
    ClientDiesBetweenRoundTrips,
    MemoryPressure,
    DelayReply,
    DropReply,
    InjectError,
    ResetConnection,
    ServerRestart,
    ServerPause,
    ScriptFlush,
    ClientKill,
    ClockSkew,
    Failover,
    Reshard,
    NodeFailover,
    NodePause,
}

impl FaultKind {
    /// Every kind that runs on one server (what `explore` draws from).
    pub const ALL: [FaultKind; 14] = [
        Self::ExpireBetweenRoundTrips,
        Self::StallBetweenRoundTrips,
        Self::ClientDiesBetweenRoundTrips,
        Self::DelayReply,
        Self::DropReply,
        Self::InjectError,
        Self::ResetConnection,
        Self::MemoryPressure,
        Self::ServerRestart,
        Self::ServerPause,
        Self::ScriptFlush,
        Self::ClientKill,
        Self::ClockSkew,
        Self::Failover,
    ];

    /// The kinds that run on a Redis Cluster only.
    pub const ON_A_CLUSTER: [FaultKind; 3] = [Self::Reshard, Self::NodeFailover, Self::NodePause];

    /// A failover, of one server's endpoint or of a cluster node, or a cluster node's pause
    /// (its replica may be promoted meanwhile): acknowledged writes may be lost, and what
    /// follows is the new primary's.
    pub fn fails_over(self) -> bool {
        matches!(self, Self::Failover | Self::NodeFailover | Self::NodePause)
    }

    /// The kind a scenario file names.
    pub fn parse(name: &str) -> Option<Self> {
        Self::ALL
            .into_iter()
            .chain(Self::ON_A_CLUSTER)
            .find(|k| k.name() == name)
    }

    pub fn name(self) -> &'static str {
        match self {
            Self::ExpireBetweenRoundTrips => "expire-between-round-trips",
            Self::StallBetweenRoundTrips => "stall-between-round-trips",
            Self::ClientDiesBetweenRoundTrips => "client-dies-between-round-trips",
            Self::MemoryPressure => "memory-pressure",
            Self::DelayReply => "delay-reply",
            Self::DropReply => "drop-reply",
            Self::InjectError => "inject-error",
            Self::ResetConnection => "reset-connection",
            Self::ServerRestart => "server-restart",
            Self::ServerPause => "server-pause",
            Self::ScriptFlush => "script-flush",
            Self::ClientKill => "client-kill",
            Self::ClockSkew => "clock-skew",
            Self::Failover => "failover",
            Self::Reshard => "reshard",
            Self::NodeFailover => "node-failover",
            Self::NodePause => "node-pause",
        }
    }
}

impl fmt::Display for FaultKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl Fault {
    pub fn kind(&self) -> FaultKind {
        match self {
            Self::ExpireBetweenRoundTrips(_) => FaultKind::ExpireBetweenRoundTrips,
            Self::StallBetweenRoundTrips(_) => FaultKind::StallBetweenRoundTrips,
            Self::ClientDiesBetweenRoundTrips(_) => FaultKind::ClientDiesBetweenRoundTrips,
            Self::OnCommand(c) => c.action.kind(),
            Self::MemoryPressure(_) => FaultKind::MemoryPressure,
            Self::Server(s) => s.action.kind(),
            Self::ClockSkew(_) => FaultKind::ClockSkew,
        }
    }

    /// The server fault, if this is one.
    pub fn server(&self) -> Option<&ServerFault> {
        match self {
            Self::Server(s) => Some(s),
            _ => None,
        }
    }

    /// The rule of a fault that acts on a command's reply (in the fault proxy).
    pub fn on_command(&self) -> Option<&CommandFault> {
        match self {
            Self::OnCommand(c) => Some(c),
            _ => None,
        }
    }

    /// The gap rule of a fault that strikes between round trips.
    pub fn gap(&self) -> Option<&GapFault> {
        match self {
            Self::ExpireBetweenRoundTrips(g)
            | Self::StallBetweenRoundTrips(g)
            | Self::ClientDiesBetweenRoundTrips(g) => Some(g),
            Self::OnCommand(_) | Self::MemoryPressure(_) | Self::Server(_) | Self::ClockSkew(_) => None,
        }
    }
}

/// A fault that strikes in the gap between two round trips of one request.
#[derive(Debug, Clone, Serialize)]
pub struct GapFault {
    /// Only requests of this identity (any identity when absent).
    pub identity: Option<u32>,
    /// From this request of the identity on, counting from 1.
    pub request: u64,
    /// Only a gap followed by a round trip that sends one of these commands (upper case;
    /// empty: any gap).
    pub before_command: Vec<String>,
    /// How many gaps to strike; `None` strikes every matching gap.
    pub times: Option<u64>,
    pub action: GapFaultAction,
}

#[derive(Debug, Clone, Copy, Serialize, PartialEq, Eq)]
#[serde(tag = "action", rename_all = "kebab-case")]
pub enum GapFaultAction {
    /// The limiter's key expires (PEXPIRE 1, then confirmed gone) before the next round trip.
    ExpireKey,
    /// The client stalls this long before the next round trip.
    Stall { stall_ms: u64 },
    /// The client dies: the rest of the request is never sent (its reply is indeterminate).
    ClientDies,
}

/// A fault on the reply to one command of a request: only the fault proxy, which sits
/// between any client and the server, can apply it.
#[derive(Debug, Clone, Serialize)]
pub struct CommandFault {
    pub identity: Option<u32>,
    pub request: u64,
    /// The command it applies to (upper case; empty: any command naming the identity's key).
    pub command: Vec<String>,
    pub times: Option<u64>,
    pub action: CommandFaultAction,
}

#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
#[serde(tag = "action", rename_all = "kebab-case")]
pub enum CommandFaultAction {
    /// The reply is held this long before the client gets it.
    DelayReply { delay_ms: u64 },
    /// The command executes; its reply is dropped and the connection closed (an ambiguous
    /// outcome: a client that retries may count twice).
    DropReply,
    /// The command is not forwarded; the client gets this error reply instead.
    InjectError { error: String },
    /// The connection is closed before the command is forwarded.
    ResetConnection,
}

impl CommandFaultAction {
    pub fn kind(&self) -> FaultKind {
        match self {
            Self::DelayReply { .. } => FaultKind::DelayReply,
            Self::DropReply => FaultKind::DropReply,
            Self::InjectError { .. } => FaultKind::InjectError,
            Self::ResetConnection => FaultKind::ResetConnection,
        }
    }
}

/// The errors `inject-error` knows, with the text a real server sends.
pub const INJECTABLE_ERRORS: [(&str, &str); 5] = [
    ("OOM", "OOM command not allowed when used memory > 'maxmemory'."),
    ("NOSCRIPT", "NOSCRIPT No matching script. Please use EVAL."),
    ("LOADING", "LOADING Redis is loading the dataset in memory"),
    ("READONLY", "READONLY You can't write against a read only replica."),
    (
        "BUSY",
        "BUSY Redis is busy running a script. You can only call SCRIPT KILL or SHUTDOWN NOSCRIPT.",
    ),
];

/// The errors of a Redis Cluster `inject-error` knows too (on one server as well: a client
/// that meets them there has a cluster client's handling to show), with the server's text.
/// Not among the errors `explore` draws from. The redirections are filled in where they are
/// sent ([`redirection`]): [`SLOT`] is the slot of the command's first key, [`NODE`] the
/// address the node the command went to announces (its fault proxy's) — a client that follows
/// `MOVED` or `ASK` (with `ASKING`) is sent back to the node it asked, which owns the slot.
pub const CLUSTER_ERRORS: [(&str, &str); 5] = [
    ("CLUSTERDOWN", "CLUSTERDOWN The cluster is down"),
    ("TRYAGAIN", "TRYAGAIN Multiple keys request during rehashing of slot"),
    ("CROSSSLOT", "CROSSSLOT Keys in request don't hash to the same slot"),
    ("MOVED", "MOVED {slot} {node}"),
    ("ASK", "ASK {slot} {node}"),
];

/// Where a redirection's slot goes in its text ([`CLUSTER_ERRORS`]).
pub const SLOT: &str = "{slot}";
/// Where a redirection's node address goes in its text ([`CLUSTER_ERRORS`]).
pub const NODE: &str = "{node}";

/// An injected error's text with a redirection's [`SLOT`] and [`NODE`] filled in (other
/// errors unchanged).
pub fn redirection(error: &str, slot: u16, node: &str) -> String {
    error.replace(SLOT, &slot.to_string()).replace(NODE, node)
}

/// A fault of the server itself: at `after_ms` from the start of `phase`, the nemesis acts
/// on the limiter's server (a backend the harness started; a server at a URL refuses them).
#[derive(Debug, Clone, Serialize)]
pub struct ServerFault {
    pub phase: String,
    pub after_ms: u64,
    pub action: ServerAction,
}

#[derive(Debug, Clone, Copy, Serialize, PartialEq, Eq)]
#[serde(tag = "action", rename_all = "kebab-case")]
pub enum ServerAction {
    /// Stop the server and start it again on the same port.
    Restart { persistence: Persistence },
    /// Stop the server's process (SIGSTOP, `docker pause`) for `pause_ms`: clients time out.
    Pause { pause_ms: u64 },
    /// `SCRIPT FLUSH`: every loaded script is gone (as after a restart or a failover).
    ScriptFlush,
    /// `CLIENT KILL` of every connection that is not the harness's own (the limiter's).
    ClientKill,
    /// Promote the replica and point the limiter's endpoint at it; the old primary becomes
    /// its replica. Replication is held back for `lose_writes_ms` first (the writes
    /// acknowledged meanwhile are lost); with 0, writes are paused until the replica has
    /// caught up (a clean failover). `connections`: whether the limiter's open connections
    /// stay with the demoted node or are closed.
    Failover {
        lose_writes_ms: u64,
        connections: FailoverConnections,
    },
    /// On a cluster: move the hash slot of `identity`'s key to the next primary while traffic
    /// runs, as `redis-cli --cluster reshard` does — `SETSLOT IMPORTING`/`MIGRATING`, the
    /// slot's keys moved with `MIGRATE` (TTLs included), the slot held in that state for
    /// `migrating_ms` (clients get `ASK`, multi-key commands `TRYAGAIN`), then `SETSLOT NODE`
    /// on every primary (clients get `MOVED`). With `atomic` (`method = "atomic"`, Valkey 9.0
    /// and later), Valkey's atomic slot migration instead: `CLUSTER MIGRATESLOTS` on the
    /// source, which copies the slot to the target while the source serves it and hands it
    /// over at once (no `ASK`, no slot held migrating: `migrating_ms` is 0), then `MOVED`.
    Reshard {
        identity: u32,
        migrating_ms: u64,
        #[serde(skip_serializing_if = "std::ops::Not::not")]
        atomic: bool,
    },
    /// On a cluster with replicas: the primary of `identity`'s key fails over to its replica.
    /// With `lose_writes_ms`, replication is held back that long in the primary's fault proxy
    /// first and the replica takes over at once (`CLUSTER FAILOVER TAKEOVER`): the writes the
    /// primary acknowledged meanwhile are lost. With 0, a clean `CLUSTER FAILOVER` (the
    /// replica catches up first).
    NodeFailover { identity: u32, lose_writes_ms: u64 },
    /// On a cluster: the primary of `identity`'s key is stopped (SIGSTOP, `docker pause`) for
    /// `pause_ms`. Longer than the cluster's node timeout (2 s), the other nodes mark it failed:
    /// its replica, when it has one, is promoted; without one, the cluster is down
    /// (`CLUSTERDOWN`) until it is back.
    NodePause { identity: u32, pause_ms: u64 },
}

/// What a failover does to the connections open at that moment.
#[derive(Debug, Clone, Copy, Serialize, PartialEq, Eq)]
#[serde(rename_all = "kebab-case")]
pub enum FailoverConnections {
    /// They stay with the demoted node (as with a moved DNS name or virtual IP): their
    /// writes get `READONLY` until the client reconnects; new connections reach the new primary.
    Stay,
    /// They are closed (as a Sentinel-aware client does on `+switch-master`): the client
    /// reconnects, to the new primary.
    Move,
}

impl FailoverConnections {
    pub fn name(self) -> &'static str {
        match self {
            Self::Stay => "stay",
            Self::Move => "move",
        }
    }
}

impl ServerAction {
    pub fn kind(&self) -> FaultKind {
        match self {
            Self::Restart { .. } => FaultKind::ServerRestart,
            Self::Pause { .. } => FaultKind::ServerPause,
            Self::ScriptFlush => FaultKind::ScriptFlush,
            Self::ClientKill => FaultKind::ClientKill,
            Self::Failover { .. } => FaultKind::Failover,
            Self::Reshard { .. } => FaultKind::Reshard,
            Self::NodeFailover { .. } => FaultKind::NodeFailover,
            Self::NodePause { .. } => FaultKind::NodePause,
        }
    }
}

/// What a restarted server keeps.
#[derive(Debug, Clone, Copy, Serialize, PartialEq, Eq)]
#[serde(rename_all = "kebab-case")]
pub enum Persistence {
    /// No RDB, no AOF: every key is lost.
    None,
    /// An append-only file with `appendfsync always`: every acknowledged write is kept.
    Aof,
}

impl Persistence {
    pub fn name(self) -> &'static str {
        match self {
            Self::None => "none",
            Self::Aof => "aof",
        }
    }
}

/// What a limiter should answer while its server cannot (paused, restarting), as a scenario
/// declares it: `fails-as-declared` checks it.
#[derive(Debug, Clone, Copy, Default, Serialize, PartialEq, Eq)]
#[serde(rename_all = "kebab-case")]
pub enum ServerErrorPolicy {
    /// The caller is told: the request ends as an error (the caller decides).
    #[default]
    Error,
    /// The request is rejected.
    FailClosed,
    /// The request is admitted.
    FailOpen,
}

impl ServerErrorPolicy {
    pub const ALL: [ServerErrorPolicy; 3] = [Self::Error, Self::FailClosed, Self::FailOpen];

    pub fn name(self) -> &'static str {
        match self {
            Self::Error => "error",
            Self::FailClosed => "fail-closed",
            Self::FailOpen => "fail-open",
        }
    }
}

/// Cold cache entries written alongside a phase's requests to push memory over maxmemory.
#[derive(Debug, Clone, Serialize)]
pub struct MemoryPressure {
    pub phase: String,
    pub value_bytes: u64,
    /// Cache entries' TTL; 0 writes them without one.
    pub ttl_s: u64,
    pub writes_per_request: u32,
    pub target: CacheTarget,
}

#[derive(Debug, Clone, Copy, Serialize, PartialEq, Eq)]
#[serde(rename_all = "kebab-case")]
pub enum CacheTarget {
    /// The cache shares the limiter's server (incident 2).
    LimiterServer,
    /// The cache has its own server, `[cache_server]` (incident 2's fix).
    CacheServer,
}

#[derive(Debug, Clone, Serialize)]
pub struct CheckConfig {
    pub invariants: Vec<Invariant>,
    pub sample_interval_ms: u64,
    pub ttl_slack_ms: u64,
    /// The longest a limiter key may live, when the scenario says (it overrides the
    /// limiter's declaration and the algorithm's default).
    pub ttl_max_ms: Option<u64>,
    /// How long the limiter's keys may live as the run declared it for the limiter
    /// (`--ttl-max-ms`/`--ttl-max-windows`, a suite's `[[limiter]]`): it stands for the
    /// limiter's own declaration, under the scenario's `ttl_max_ms`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ttl_declared: Option<TtlMax>,
    /// How long a run may take before it is stopped as unknown, when the scenario says
    /// (otherwise derived from the phases and faults: [`Scenario::deadline`]).
    pub deadline_ms: Option<u64>,
    /// What the limiter should answer while its server cannot (`fails-as-declared`).
    pub on_server_error: ServerErrorPolicy,
}

/// An invariant the checker can judge.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Invariant {
    TtlPresent,
    TtlBounded,
    NoCounterReset,
    AdmittedWithinLimit,
    NoLockout,
    AdmitsUpToLimit,
    NoLeakedKeys,
    NoDoubleCount,
    ErrorsSurfaced,
    FailsAsDeclared,
    RecoversAfterFault,
}

impl Invariant {
    pub const ALL: [Invariant; 11] = [
        Self::TtlPresent,
        Self::TtlBounded,
        Self::NoCounterReset,
        Self::AdmittedWithinLimit,
        Self::NoLockout,
        Self::AdmitsUpToLimit,
        Self::NoLeakedKeys,
        Self::NoDoubleCount,
        Self::ErrorsSurfaced,
        Self::FailsAsDeclared,
        Self::RecoversAfterFault,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Self::TtlPresent => "ttl-present",
            Self::TtlBounded => "ttl-bounded",
            Self::NoCounterReset => "no-counter-reset",
            Self::AdmittedWithinLimit => "admitted-within-limit",
            Self::NoLockout => "no-lockout",
            Self::AdmitsUpToLimit => "admits-up-to-limit",
            Self::NoLeakedKeys => "no-leaked-keys",
            Self::NoDoubleCount => "no-double-count",
            Self::ErrorsSurfaced => "errors-surfaced",
            Self::FailsAsDeclared => "fails-as-declared",
            Self::RecoversAfterFault => "recovers-after-fault",
        }
    }

    pub fn from_name(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|i| i.name() == name)
    }

    /// One line on what the invariant promises.
    pub fn promise(self) -> &'static str {
        match self {
            Self::TtlPresent => "no limiter key exists without an expiry (PTTL -1)",
            Self::TtlBounded => {
                "no limiter key's TTL is longer than its bound: one window, or what the limiter or the scenario declares (plus the slack)"
            }
            Self::NoCounterReset => "a counter never disappears or drops while its window is live",
            Self::AdmittedWithinLimit => "an identity is never admitted more than the algorithm's bound allows",
            Self::NoLockout => "after a quiet period of one window, an identity is admitted again",
            Self::AdmitsUpToLimit => "an identity sending above its limit is still admitted the limit per window",
            Self::NoLeakedKeys => "a key is gone once its identity has been quiet for a window",
            Self::NoDoubleCount => "the server counts each request at most once, lost replies included",
            Self::ErrorsSurfaced => {
                "an error the server answered with reaches the caller, never a silent admit or reject"
            }
            Self::FailsAsDeclared => {
                "while the server cannot answer (paused, restarting), a request ends as the scenario declares: an error, a rejection (fail-closed) or an admission (fail-open)"
            }
            Self::RecoversAfterFault => {
                "once a server fault is over (restart, pause, script flush, killed connections, failover), the limiter decides requests again"
            }
        }
    }
}

impl fmt::Display for Invariant {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}
