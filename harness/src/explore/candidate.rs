//! The candidates the explorer tries: whole scenarios as plain values (phases, faults and
//! the requests they strike), which [`super::strategy`] generates and [`super::render`]
//! writes as scenario files.

use crate::scenario::FaultKind;

/// One scenario the explorer runs: the limit, the phases and the faults. Indices that refer
/// to other parts (an identity, a phase, an instance) are taken modulo what exists when the
/// candidate is rendered, so every value the strategy makes is a valid scenario.
#[derive(Debug, Clone, PartialEq)]
pub struct Candidate {
    pub requests_max: u64,
    pub window_ms: u64,
    pub identities: u32,
    pub instances: u32,
    pub phases: Vec<PhaseSpec>,
    pub faults: Vec<FaultSpec>,
}

#[derive(Debug, Clone, PartialEq)]
pub enum PhaseSpec {
    Steady {
        rate_per_s: u64,
        duration_ms: u64,
        round_robin: bool,
        even: bool,
    },
    Burst {
        requests: u64,
        concurrency: u32,
    },
    Quiet {
        duration_ms: u64,
    },
}

impl PhaseSpec {
    /// The requests the phase plans.
    pub fn requests(&self) -> u64 {
        match self {
            Self::Steady {
                rate_per_s,
                duration_ms,
                ..
            } => rate_per_s * duration_ms / 1000,
            Self::Burst { requests, .. } => *requests,
            Self::Quiet { .. } => 0,
        }
    }
}

/// Which requests a rule strikes: an identity (any when `None`), from its `request`-th on,
/// `times` times (every matching one when `None`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Target {
    pub identity: Option<u32>,
    pub request: u64,
    pub times: Option<u64>,
    /// An index into [`COMMANDS`]: 0 is any command.
    pub command: usize,
}

/// The commands a rule may name (`before_command`, `command`); the first, empty, is any.
pub const COMMANDS: [&[&str]; 8] = [
    &[],
    &["INCR", "INCRBY"],
    &["EXPIRE", "PEXPIRE"],
    &["GET"],
    &["EXISTS"],
    &["SET"],
    &["EVALSHA"],
    &["EXEC"],
];

/// The eviction policies memory pressure may run under: only `noeviction` unless the
/// explorer was allowed eviction (`--eviction`), which no limiter survives.
pub const POLICIES: [&str; 4] = ["noeviction", "allkeys-lru", "volatile-lru", "allkeys-lfu"];

#[derive(Debug, Clone, PartialEq)]
pub enum FaultSpec {
    ExpireBetween(Target),
    StallBetween {
        target: Target,
        stall_ms: u64,
    },
    ClientDiesBetween(Target),
    DelayReply {
        target: Target,
        delay_ms: u64,
    },
    DropReply(Target),
    /// `error` indexes [`INJECTABLE_ERRORS`].
    InjectError {
        target: Target,
        error: usize,
    },
    ResetConnection(Target),
    /// `phase` indexes the candidate's phases that send requests; `policy` indexes [`POLICIES`].
    MemoryPressure {
        phase: usize,
        value_bytes: u64,
        writes_per_request: u32,
        cache_ttl: bool,
        policy: usize,
    },
    ServerRestart {
        phase: usize,
        after_ms: u64,
        aof: bool,
    },
    ServerPause {
        phase: usize,
        after_ms: u64,
        pause_ms: u64,
    },
    ScriptFlush {
        phase: usize,
        after_ms: u64,
    },
    ClientKill {
        phase: usize,
        after_ms: u64,
    },
    ClockSkew {
        instance: u32,
        offset_ms: i64,
        drift_ms_per_s: i64,
    },
    /// `stay`: open connections stay with the demoted node.
    Failover {
        phase: usize,
        after_ms: u64,
        lose_writes_ms: u64,
        stay: bool,
    },
}

impl FaultSpec {
    /// The requests a rule strikes, for the faults that strike requests.
    pub fn target(&self) -> Option<Target> {
        self.clone().target_mut_ref().copied()
    }

    /// Aim the rule at `target` instead (nothing for a fault that strikes no request).
    pub fn set_target(&mut self, target: Target) {
        if let Some(t) = self.target_mut_ref() {
            *t = target;
        }
    }

    fn target_mut_ref(&mut self) -> Option<&mut Target> {
        match self {
            Self::ExpireBetween(t)
            | Self::ClientDiesBetween(t)
            | Self::DropReply(t)
            | Self::ResetConnection(t)
            | Self::StallBetween { target: t, .. }
            | Self::DelayReply { target: t, .. }
            | Self::InjectError { target: t, .. } => Some(t),
            Self::MemoryPressure { .. }
            | Self::ServerRestart { .. }
            | Self::ServerPause { .. }
            | Self::ScriptFlush { .. }
            | Self::ClientKill { .. }
            | Self::ClockSkew { .. }
            | Self::Failover { .. } => None,
        }
    }

    pub fn kind(&self) -> FaultKind {
        match self {
            Self::ExpireBetween(_) => FaultKind::ExpireBetweenRoundTrips,
            Self::StallBetween { .. } => FaultKind::StallBetweenRoundTrips,
            Self::ClientDiesBetween(_) => FaultKind::ClientDiesBetweenRoundTrips,
            Self::DelayReply { .. } => FaultKind::DelayReply,
            Self::DropReply(_) => FaultKind::DropReply,
            Self::InjectError { .. } => FaultKind::InjectError,
            Self::ResetConnection(_) => FaultKind::ResetConnection,
            Self::MemoryPressure { .. } => FaultKind::MemoryPressure,
            Self::ServerRestart { .. } => FaultKind::ServerRestart,
            Self::ServerPause { .. } => FaultKind::ServerPause,
            Self::ScriptFlush { .. } => FaultKind::ScriptFlush,
            Self::ClientKill { .. } => FaultKind::ClientKill,
            Self::ClockSkew { .. } => FaultKind::ClockSkew,
            Self::Failover { .. } => FaultKind::Failover,
        }
    }

    /// Whether this fault destroys every limiter's state by design (eviction of its keys, a
    /// restart that keeps nothing): what it finds is a deployment problem, not a limiter bug.
    pub fn no_limiter_survives(&self) -> bool {
        match self {
            Self::MemoryPressure { policy, .. } => POLICIES[*policy] != "noeviction",
            Self::ServerRestart { aof, .. } => !aof,
            // Lost writes roll every limiter back; connections left on a demoted node are
            // the client's to reopen (the built-ins' client keeps them).
            Self::Failover {
                lose_writes_ms, stay, ..
            } => *lose_writes_ms > 0 || *stay,
            _ => false,
        }
    }
}
