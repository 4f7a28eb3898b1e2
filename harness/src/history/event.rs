//! History events. Times are microseconds since the run started (`t_us`).

use serde::{Deserialize, Serialize};

use crate::keys::LayoutSource;
use crate::scenario::{Adjust, Algorithm, FaultKind, TtlMax};

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "kebab-case")]
pub enum Event {
    /// The first line: what ran — enough, with the events after it, to judge the run again
    /// from its history alone (`limiter-harness check`).
    Run {
        scenario: String,
        /// The limiter as the command line named it.
        limiter: String,
        seed: u64,
        backend: String,
        /// The command that reproduces the run.
        #[serde(default)]
        reproduce: String,
        /// The scenario file's path as given (a label for a shipped scenario).
        #[serde(default)]
        scenario_file: String,
        /// The scenario file's text, as parsed.
        #[serde(default)]
        scenario_text: String,
        /// Whether the scenario came from the catalog in the binary.
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        shipped: bool,
        /// What the command line changed in the scenario (`--keys`, `--window-ms`).
        #[serde(default, skip_serializing_if = "Adjust::is_empty")]
        adjust: Adjust,
    },
    /// The limiter as the run took it, and the keys it judged as the limiter's. Recorded for
    /// the configured limiter when the run starts, and again once the started limiter has
    /// said what it declares (an adapter's hello): the last one holds.
    Limiter {
        t_us: u64,
        #[serde(flatten)]
        limiter: LimiterFacts,
    },
    /// A server the run used: its version, the settings the run applied, and where it ran.
    Server {
        t_us: u64,
        server: ServerRole,
        version: String,
        /// Settings applied with CONFIG SET, as "name value".
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        settings: Vec<String>,
        /// Where it ran (a container id, a port): varies from run to run.
        at: String,
    },
    /// Keys under the limiter's layout that someone else wrote during the run (on a server
    /// the harness did not start): no checker judges them.
    Foreign { t_us: u64, keys: Vec<String> },
    /// State the scenario planted before traffic (e.g. an exhausted key without TTL).
    Setup { t_us: u64, key: String, detail: String },
    Phase {
        t_us: u64,
        index: usize,
        name: String,
        edge: PhaseEdge,
    },
    /// A request is sent to the limiter.
    Invoke {
        id: u64,
        t_us: u64,
        identity: u32,
        /// The identity's n-th request, counting from 1.
        ordinal: u64,
        key: String,
        phase: usize,
        /// The limiter instance it went to (`[limit] instances`; 0 when there is one).
        #[serde(default, skip_serializing_if = "is_zero")]
        instance: u32,
    },
    /// The request's one completion.
    Complete {
        id: u64,
        t_us: u64,
        outcome: Outcome,
        /// The count the limiter saw (its counter's value for this decision), if it reports one.
        #[serde(skip_serializing_if = "Option::is_none")]
        count: Option<i64>,
        /// The round trips the limiter made, each as the commands it sent (e.g. "GET", "INCR").
        trips: Vec<String>,
        /// Every key the request's commands named, as the `Wire` or the fault proxy saw them
        /// (the limiter's own keys, whatever their layout).
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        keys: Vec<String>,
        #[serde(skip_serializing_if = "Option::is_none")]
        error: Option<String>,
    },
    /// The nemesis did something.
    Fault {
        t_us: u64,
        /// Index of the fault in the scenario's [[fault]] list.
        fault: usize,
        kind: FaultKind,
        #[serde(skip_serializing_if = "Option::is_none")]
        request: Option<u64>,
        #[serde(skip_serializing_if = "Option::is_none")]
        key: Option<String>,
        /// The command a fault on a reply acted on (upper case).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        command: Option<String>,
        effect: String,
    },
    /// One pass of the observer over the limiter's keys (SCAN + PTTL/GET).
    Sample {
        t_start_us: u64,
        t_end_us: u64,
        /// The audit after the last request completed: nothing was in flight.
        final_audit: bool,
        keys: Vec<KeySample>,
    },
    /// A keyspace notification for a limiter key (expired, evicted, del, ...).
    Keyspace { t_us: u64, key: String, event: String },
    Stats {
        t_us: u64,
        server: ServerRole,
        evicted_keys: u64,
        expired_keys: u64,
        used_memory_bytes: u64,
    },
    /// Cache entries a memory-pressure fault wrote during a phase.
    Flood {
        t_us: u64,
        phase: String,
        server: ServerRole,
        writes_ok: u64,
        writes_failed: u64,
        #[serde(skip_serializing_if = "Option::is_none")]
        first_error: Option<String>,
    },
    /// A round trip the fault proxy forwarded: the commands a client actually sent on one
    /// connection, and the request they belong to when the proxy could tell.
    Wire {
        t_us: u64,
        /// On a cluster, the node whose proxy the round trip crossed (its index: primaries
        /// first, then each primary's replicas).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        node: Option<u32>,
        conn: u64,
        #[serde(skip_serializing_if = "Option::is_none")]
        request: Option<u64>,
        commands: Vec<String>,
        /// The keys those commands named.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        keys: Vec<String>,
    },
    /// A server fault made the limiter's server unable to answer, from `t_start_us` until it
    /// answered again at `t_end_us` (a pause, a restart).
    Outage {
        t_start_us: u64,
        t_end_us: u64,
        /// Index of the fault in the scenario's [[fault]] list.
        fault: usize,
        kind: FaultKind,
        /// The server came back with its keys (a restart with an append-only file, a pause).
        keys_kept: bool,
        /// When it answered again (after `t_end_us`: it may answer a moment before the
        /// nemesis knows).
        #[serde(default)]
        t_back_us: u64,
        /// A cluster node's pause after which its replica had been promoted (the cluster's
        /// own failover): what the node acknowledged and its replica lacked is lost.
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        failed_over: bool,
    },
    /// A cluster primary's redirections and cluster errors, from its `INFO errorstats` at the
    /// run's end (a fresh node starts at none): `MOVED`, `ASK`, `TRYAGAIN`, `CROSSSLOT`,
    /// `CLUSTERDOWN` replies it sent, by kind.
    ClusterReplies {
        t_us: u64,
        node: String,
        replies: std::collections::BTreeMap<String, u64>,
    },
    /// What the harness process itself used, at the run's end.
    Resources {
        t_us: u64,
        /// Its peak resident memory (`VmHWM`) so far.
        resident_peak_bytes: u64,
    },
    /// Something stopped the harness from seeing or doing what it needed.
    Problem {
        t_us: u64,
        source: ProblemSource,
        detail: String,
        /// The run could not observe enough to judge (e.g. the server was lost).
        fatal: bool,
        /// A reviewer should read it: the report lists it (fatal problems always are).
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        noted: bool,
    },
}

/// Which part of the harness reported a [`Event::Problem`]: written in the history as its
/// kebab-case name (`"fault-proxy"`), shown so in reports.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ProblemSource {
    /// The planted setup.
    Setup,
    /// A signal that ended the run.
    Interrupt,
    /// The run's deadline.
    Deadline,
    /// The history file.
    History,
    /// The limiter's adapter process.
    ExecAdapter,
    /// The key sampler.
    Sampler,
    /// A fault on the server (restart, pause, failover).
    ServerFault,
    /// The fault proxy.
    FaultProxy,
    /// The keyspace-notification listener.
    Keyspace,
    /// A gap in the keyspace notifications, subscribed again.
    KeyspaceGap,
    /// A server setting the run changed.
    Reconfigure,
    /// The final audit of the limiter's keys.
    FinalAudit,
    /// The server's version.
    ServerVersion,
    /// Restoring a user's server as it was found.
    LeaveAsFound,
    /// Keys of identities the run never used.
    ForeignKeys,
}

impl ProblemSource {
    /// The name the history and the reports use.
    pub fn name(self) -> &'static str {
        match self {
            Self::Setup => "setup",
            Self::Interrupt => "interrupt",
            Self::Deadline => "deadline",
            Self::History => "history",
            Self::ExecAdapter => "exec-adapter",
            Self::Sampler => "sampler",
            Self::ServerFault => "server-fault",
            Self::FaultProxy => "fault-proxy",
            Self::Keyspace => "keyspace",
            Self::KeyspaceGap => "keyspace-gap",
            Self::Reconfigure => "reconfigure",
            Self::FinalAudit => "final-audit",
            Self::ServerVersion => "server-version",
            Self::LeaveAsFound => "leave-as-found",
            Self::ForeignKeys => "foreign-keys",
        }
    }
}

impl std::fmt::Display for ProblemSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum PhaseEdge {
    Start,
    End,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Outcome {
    Allowed,
    Rejected,
    /// The server answered with an error: the limiter decided nothing.
    Error,
    /// No answer (timeout, connection lost): the request may or may not have taken effect.
    Indeterminate,
}

impl Outcome {
    /// A limiter's decision.
    pub fn of(allowed: bool) -> Self {
        if allowed { Self::Allowed } else { Self::Rejected }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ServerRole {
    Limiter,
    Cache,
    /// The limiter server's replica (a scenario with a failover fault).
    Replica,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct KeySample {
    pub key: String,
    /// PTTL: -1 exists without expiry, -2 gone.
    pub pttl_ms: i64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub value: Option<String>,
}

/// What a history says about the limiter a run drove.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LimiterFacts {
    pub name: String,
    pub algorithm: Algorithm,
    pub round_trips_max: u32,
    /// Its command sequence, in words.
    pub commands: String,
    /// How long its keys may live, in windows, when it says so in windows.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ttl_max_windows: Option<f64>,
    /// How long its keys may live, in ms, when it says so in absolute time.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ttl_max_ms: Option<u64>,
    /// The key templates the run took for the limiter's keys, and who described them.
    pub keys: Vec<String>,
    pub keys_from: LayoutSource,
    /// Why the run's keys are not the ones the limiter declared, when they are not.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub keys_note: Option<String>,
    /// How its traffic reached the server, when through the fault proxy.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub proxy: Option<String>,
}

impl LimiterFacts {
    /// How long its keys may live, as it declared it (in windows or in ms).
    pub fn ttl_max(&self) -> Option<TtlMax> {
        match (self.ttl_max_windows, self.ttl_max_ms) {
            (Some(windows), _) => Some(TtlMax::Windows(windows)),
            (None, Some(ms)) => Some(TtlMax::Ms(ms)),
            (None, None) => None,
        }
    }

    /// The declaration as the history's two fields.
    pub fn ttl_fields(declared: Option<TtlMax>) -> (Option<f64>, Option<u64>) {
        match declared {
            Some(TtlMax::Windows(windows)) => (Some(windows), None),
            Some(TtlMax::Ms(ms)) => (None, Some(ms)),
            None => (None, None),
        }
    }
}

fn is_zero(n: &u32) -> bool {
    *n == 0
}

#[cfg(test)]
mod tests {
    use super::ProblemSource;

    #[test]
    fn a_problem_source_is_written_and_shown_by_one_name() {
        for name in [
            "setup",
            "interrupt",
            "deadline",
            "history",
            "exec-adapter",
            "sampler",
            "server-fault",
            "fault-proxy",
            "keyspace",
            "keyspace-gap",
            "reconfigure",
            "final-audit",
            "server-version",
            "leave-as-found",
            "foreign-keys",
        ] {
            let source: ProblemSource = serde_json::from_str(&format!("\"{name}\"")).unwrap();
            assert_eq!(source.to_string(), name);
            assert_eq!(serde_json::to_string(&source).unwrap(), format!("\"{name}\""));
        }
    }
}
