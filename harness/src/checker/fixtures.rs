//! Hand-written histories for the checkers' unit tests.
//!
//! Times are written in milliseconds since the run started and stored in microseconds, as
//! the recorder does. Identity `n`'s key is `rl:n` (the default [`limit`]'s prefix).

use crate::scenario::FaultKind;
use std::collections::BTreeMap;

use super::{CheckInput, CheckResult, TtlBound, check};
use crate::history::{Event, HistoryIndex, KeySample, Outcome, PhaseEdge, ProblemSource};
use crate::keys::KeyLayout;
use crate::scenario::Algorithm;
use crate::scenario::{CheckConfig, Invariant, Limit};

/// How long a sample written with [`HistoryBuilder::sample`] takes: it spans
/// `[t_ms, t_ms + SAMPLE_SPAN_US)`.
pub(crate) const SAMPLE_SPAN_US: u64 = 1_000;

pub(crate) fn us(ms: u64) -> u64 {
    ms * 1000
}

/// The key of `identity` under the default limit.
pub(crate) fn key(identity: u32) -> String {
    limit().key(identity)
}

/// 10 requests per 1000 ms window, two identities, prefix `rl:`.
pub(crate) fn limit() -> Limit {
    Limit {
        requests_max: 10,
        window_ms: 1000,
        identities: 2,
        instances: 1,
        key_prefix: "rl:".into(),
        keys: None,
    }
}

/// The given invariants, no TTL slack, the default sample interval for a 1000 ms window.
pub(crate) fn config(invariants: &[Invariant]) -> CheckConfig {
    CheckConfig {
        invariants: invariants.to_vec(),
        sample_interval_ms: 250,
        ttl_slack_ms: 0,
        ttl_max_ms: None,
        ttl_declared: None,
        deadline_ms: None,
        on_server_error: Default::default(),
    }
}

/// Builds a history event by event, in the order written (the index sorts what it must).
#[derive(Debug, Default)]
pub(crate) struct HistoryBuilder {
    events: Vec<Event>,
    ordinals: BTreeMap<u32, u64>,
}

impl HistoryBuilder {
    pub(crate) fn new() -> Self {
        Self::default()
    }

    /// A request by `identity` on its key, sent at `invoke_ms` and answered at `complete_ms`.
    #[allow(clippy::too_many_arguments)] // mirrors the Invoke + Complete pair field by field
    pub(crate) fn request(
        self,
        id: u64,
        identity: u32,
        invoke_ms: u64,
        complete_ms: u64,
        outcome: Outcome,
        count: Option<i64>,
        trips: &[&str],
    ) -> Self {
        self.request_us(id, identity, us(invoke_ms), us(complete_ms), outcome, count, trips)
    }

    /// [`Self::request`] with times in microseconds, for requests closer than a millisecond.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn request_us(
        self,
        id: u64,
        identity: u32,
        invoke_us: u64,
        complete_us: u64,
        outcome: Outcome,
        count: Option<i64>,
        trips: &[&str],
    ) -> Self {
        let keys = [key(identity)];
        let keys: Vec<&str> = keys.iter().map(String::as_str).collect();
        self.request_on(id, identity, (invoke_us, complete_us), outcome, count, trips, &keys)
    }

    /// A request whose commands named `keys` (the wire's record), times `(invoke_us,
    /// complete_us)` in microseconds.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn request_on(
        mut self,
        id: u64,
        identity: u32,
        (invoke_us, complete_us): (u64, u64),
        outcome: Outcome,
        count: Option<i64>,
        trips: &[&str],
        keys: &[&str],
    ) -> Self {
        self = self.invoke_us(id, identity, invoke_us);
        self.events.push(Event::Complete {
            id,
            t_us: complete_us,
            outcome,
            count,
            trips: trips.iter().map(|t| (*t).to_owned()).collect(),
            keys: keys.iter().map(|k| (*k).to_owned()).collect(),
            error: None,
        });
        self
    }

    /// A request answered with the error reply `error`, times in milliseconds.
    pub(crate) fn failed(mut self, id: u64, identity: u32, (invoke_ms, complete_ms): (u64, u64), error: &str) -> Self {
        self = self.invoke_us(id, identity, invoke_ms * 1000);
        self.events.push(Event::Complete {
            id,
            t_us: complete_ms * 1000,
            outcome: Outcome::Error,
            count: None,
            trips: vec!["EVALSHA".to_owned()],
            keys: Vec::new(),
            error: Some(error.to_owned()),
        });
        self
    }

    /// An allowed request with count `count` on `keys`, times in milliseconds.
    pub(crate) fn allowed_on(
        self,
        id: u64,
        identity: u32,
        at_ms: (u64, u64),
        count: Option<i64>,
        keys: &[&str],
    ) -> Self {
        self.request_on(
            id,
            identity,
            (us(at_ms.0), us(at_ms.1)),
            Outcome::Allowed,
            count,
            &["EVALSHA"],
            keys,
        )
    }

    /// An allowed request that saw `count`, with the round trips of an INCR-then-EXPIRE limiter.
    pub(crate) fn allowed(self, id: u64, identity: u32, invoke_ms: u64, complete_ms: u64, count: i64) -> Self {
        self.request(
            id,
            identity,
            invoke_ms,
            complete_ms,
            Outcome::Allowed,
            Some(count),
            &["INCR", "EXPIRE"],
        )
    }

    /// A rejected request that saw `count`.
    pub(crate) fn rejected(self, id: u64, identity: u32, invoke_ms: u64, complete_ms: u64, count: i64) -> Self {
        self.request(
            id,
            identity,
            invoke_ms,
            complete_ms,
            Outcome::Rejected,
            Some(count),
            &["INCR"],
        )
    }

    /// A request that was sent and never answered (the run was cut short).
    pub(crate) fn unanswered(self, id: u64, identity: u32, invoke_ms: u64) -> Self {
        self.invoke_us(id, identity, us(invoke_ms))
    }

    fn invoke_us(mut self, id: u64, identity: u32, invoke_us: u64) -> Self {
        let ordinal = self.ordinals.entry(identity).or_default();
        *ordinal += 1;
        self.events.push(Event::Invoke {
            id,
            t_us: invoke_us,
            identity,
            ordinal: *ordinal,
            key: key(identity),
            phase: 0,
            instance: 0,
        });
        self
    }

    /// One observer pass at `t_ms` (lasting [`SAMPLE_SPAN_US`]): `(key, pttl_ms, value)`.
    pub(crate) fn sample(mut self, t_ms: u64, final_audit: bool, keys: &[(&str, i64, Option<&str>)]) -> Self {
        self.events.push(Event::Sample {
            t_start_us: us(t_ms),
            t_end_us: us(t_ms) + SAMPLE_SPAN_US,
            final_audit,
            keys: keys
                .iter()
                .map(|&(key, pttl_ms, value)| KeySample {
                    key: key.to_owned(),
                    pttl_ms,
                    value: value.map(str::to_owned),
                })
                .collect(),
        });
        self
    }

    /// Phase `index` named `name`, from `start_ms` to `end_ms`.
    pub(crate) fn phase(mut self, index: usize, name: &str, start_ms: u64, end_ms: u64) -> Self {
        for (t_ms, edge) in [(start_ms, PhaseEdge::Start), (end_ms, PhaseEdge::End)] {
            self.events.push(Event::Phase {
                t_us: us(t_ms),
                index,
                name: name.to_owned(),
                edge,
            });
        }
        self
    }

    /// The scenario's [[setup]] planted `key` at `t_ms` (e.g. an exhausted counter without TTL).
    pub(crate) fn setup(mut self, t_ms: u64, key: &str, detail: &str) -> Self {
        self.events.push(Event::Setup {
            t_us: us(t_ms),
            key: key.to_owned(),
            detail: detail.to_owned(),
        });
        self
    }

    /// The final audit at `t_ms` found no limiter key.
    pub(crate) fn empty_final_audit(self, t_ms: u64) -> Self {
        self.sample(t_ms, true, &[])
    }

    /// A keyspace notification (`expired`, `evicted`, `del`, ...).
    pub(crate) fn keyspace(mut self, t_ms: u64, key: &str, event: &str) -> Self {
        self.events.push(Event::Keyspace {
            t_us: us(t_ms),
            key: key.to_owned(),
            event: event.to_owned(),
        });
        self
    }

    /// The nemesis applied fault `kind` (fault 0 of the scenario) to `request` on `key`.
    pub(crate) fn fault(mut self, t_ms: u64, kind: FaultKind, request: Option<u64>, key: Option<&str>) -> Self {
        self.events.push(Event::Fault {
            t_us: us(t_ms),
            fault: 0,
            kind,
            request,
            key: key.map(str::to_owned),
            command: None,
            effect: "applied".into(),
        });
        self
    }

    /// Fault 0 of `kind` acting on `command` of `request` (a fault on a reply, in the proxy).
    pub(crate) fn command_fault(mut self, t_ms: u64, kind: FaultKind, request: u64, command: &str) -> Self {
        let identity = self
            .events
            .iter()
            .find_map(|e| match e {
                Event::Invoke { id, identity, .. } if *id == request => Some(*identity),
                _ => None,
            })
            .unwrap_or(0);
        self.events.push(Event::Fault {
            t_us: us(t_ms),
            fault: 0,
            kind,
            request: Some(request),
            key: Some(key(identity)),
            command: Some(command.to_owned()),
            effect: format!("{kind} on {command}"),
        });
        self
    }

    /// What the fault proxy saw `request` send at `t_ms` (on connection 1).
    pub(crate) fn wire(mut self, t_ms: u64, request: u64, commands: &[&str]) -> Self {
        self.events.push(Event::Wire {
            t_us: us(t_ms),
            node: None,
            conn: 1,
            request: Some(request),
            commands: commands.iter().map(|c| (*c).to_owned()).collect(),
            keys: Vec::new(),
        });
        self
    }

    /// What the fault proxy saw at `t_ms` that it could give to no request: commands on `keys`.
    pub(crate) fn unattributed(mut self, t_ms: u64, keys: &[&str]) -> Self {
        self.events.push(Event::Wire {
            t_us: us(t_ms),
            node: None,
            conn: 1,
            request: None,
            commands: keys.iter().map(|k| format!("INCR {k}")).collect(),
            keys: keys.iter().map(|k| (*k).to_owned()).collect(),
        });
        self
    }

    /// A problem from `source`; [`ProblemSource::Keyspace`] marks the notifications incomplete.
    pub(crate) fn problem_from(mut self, source: ProblemSource, fatal: bool) -> Self {
        self.events.push(Event::Problem {
            t_us: 0,
            source,
            detail: format!("{source} went away"),
            fatal,
            noted: fatal,
        });
        self
    }

    /// A problem from the runner (e.g. the server was lost).
    pub(crate) fn problem(self, fatal: bool) -> Self {
        self.problem_from(ProblemSource::FinalAudit, fatal)
    }

    /// A server fault that left the server unable to answer from `start_ms` to `end_ms`.
    pub(crate) fn outage(mut self, start_ms: u64, end_ms: u64, kind: FaultKind, keys_kept: bool) -> Self {
        self.events.push(Event::Outage {
            t_start_us: us(start_ms),
            t_end_us: us(end_ms),
            fault: 0,
            kind,
            keys_kept,
            t_back_us: us(end_ms),
            failed_over: kind == FaultKind::NodePause,
        });
        self
    }

    /// The keyspace subscriber was lost: notifications are incomplete.
    pub(crate) fn keyspace_lost(self) -> Self {
        self.problem_from(ProblemSource::Keyspace, false)
    }

    pub(crate) fn events(&self) -> &[Event] {
        &self.events
    }

    /// Judge `invariants` with the default [`limit`] and [`config`], as a fixed window's history.
    pub(crate) fn check(&self, invariants: &[Invariant]) -> Vec<CheckResult> {
        self.check_with(&limit(), &config(invariants))
    }

    /// Judge one invariant with the default [`limit`] and [`config`].
    pub(crate) fn check_one(&self, invariant: Invariant) -> CheckResult {
        self.check(&[invariant]).remove(0)
    }

    /// Judge one invariant with the default [`limit`] and [`config`], as `algorithm`'s history.
    pub(crate) fn check_one_as(&self, algorithm: Algorithm, invariant: Invariant) -> CheckResult {
        run(self.events(), &limit(), &config(&[invariant]), algorithm).remove(0)
    }

    pub(crate) fn check_with(&self, limit: &Limit, config: &CheckConfig) -> Vec<CheckResult> {
        run(self.events(), limit, config, Algorithm::FixedWindow)
    }
}

/// Run [`check`] on `events` as the history of a limiter implementing `algorithm`.
pub(crate) fn run(events: &[Event], limit: &Limit, config: &CheckConfig, algorithm: Algorithm) -> Vec<CheckResult> {
    run_declared(events, limit, config, algorithm, None)
}

/// [`run`] for a limiter that declares its keys may live `ttl_windows` windows. The layout
/// is the limit's `keys`, else `key_prefix` + identity.
pub(crate) fn run_declared(
    events: &[Event],
    limit: &Limit,
    config: &CheckConfig,
    algorithm: Algorithm,
    ttl_windows: Option<f64>,
) -> Vec<CheckResult> {
    let layout = limit
        .keys
        .clone()
        .unwrap_or_else(|| KeyLayout::default_for(&limit.key_prefix, limit.identities));
    let ttl = TtlBound::resolve(
        limit,
        config,
        algorithm,
        ttl_windows.map(crate::scenario::TtlMax::Windows),
    );
    let history = HistoryIndex::new(events.to_vec(), &layout);
    check(&CheckInput {
        limit,
        config,
        algorithm,
        layout: &layout,
        ttl: &ttl,
        history: &history,
    })
}

/// The default limit with its keys described by `templates`.
pub(crate) fn limit_with_keys(templates: &[&str]) -> Limit {
    let mut limit = limit();
    let texts: Vec<String> = templates.iter().map(|t| (*t).to_owned()).collect();
    limit.keys =
        Some(KeyLayout::parse(&texts, limit.identities, crate::keys::LayoutSource::Scenario).expect("valid templates"));
    limit
}
