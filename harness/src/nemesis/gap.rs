//! Striking in the gap between two round trips of one request.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;

use super::gate::{Gate, Hold};
use super::rules::{CommandRule, GapRule};
use crate::backend::{Conn, key_slot};
use crate::clock::RunClock;
use crate::history::{Event, Recorder};
use crate::request::{RequestCtx, TripSummary};
use crate::scenario::FaultKind;
use crate::scenario::{CommandFaultAction, GapFaultAction, Scenario, redirection};

/// What the client does after a gap.
#[derive(Debug, Default)]
pub struct GapOutcome {
    /// The client dies here: the rest of the request is never sent (the reason says why).
    pub client_dies: Option<String>,
    /// Holds the identity's other requests back until the struck request is done (dropped
    /// with the [`crate::limiter::Wire`]).
    pub hold: Option<Hold>,
}

/// Called by a [`crate::limiter::Wire`] before every round trip that follows another one
/// in the same request.
#[async_trait]
pub trait GapHook: Send + Sync {
    /// Called before a request's first round trip; may hold it back while the nemesis
    /// strikes another request of the same client.
    async fn before_request(&self, _req: &RequestCtx) {}
    /// `trip` counts from 1, so the first call of a request is for trip 2. `keys` are the
    /// limiter keys the request works on (see [`crate::request::keys_at_gap`]).
    async fn before_trip(&self, req: &RequestCtx, trip: usize, keys: &[String], next: &TripSummary) -> GapOutcome;
}

/// A hook that never strikes.
#[derive(Debug)]
pub struct NoFaults;

#[async_trait]
impl GapHook for NoFaults {
    async fn before_trip(&self, _req: &RequestCtx, _trip: usize, _keys: &[String], _next: &TripSummary) -> GapOutcome {
        GapOutcome::default()
    }
}

/// The nemesis of one run: the scenario's gap rules, a control connection of its own to
/// make keys expire, and the history.
///
/// While a rule strikes a request, the other requests of the same identity (of every
/// identity, for a rule without one) wait before their first round trip: a stalled client
/// sends nothing else, and a forced expiry lands without racing the client's other
/// requests, so a fault's effect does not depend on which request happened to be next.
pub struct Nemesis {
    rules: Vec<GapRule>,
    command_rules: Vec<CommandRule>,
    /// Held for writing while a strike is in progress: by identity, and for all.
    gates: HashMap<Option<u32>, Arc<Gate>>,
    control: Conn,
    recorder: Recorder,
    clock: RunClock,
}

impl Nemesis {
    /// `control` reaches the limiter's keys: a connection to its server, or on a cluster a
    /// cluster connection (each key's commands go to the node serving its slot).
    pub fn new(scenario: &Scenario, control: impl Into<Conn>, recorder: Recorder, clock: RunClock) -> Self {
        let rules = scenario
            .faults
            .iter()
            .enumerate()
            .filter_map(|(i, fault)| fault.gap().map(|spec| GapRule::new(i, spec)))
            .collect::<Vec<_>>();
        let command_rules = scenario
            .faults
            .iter()
            .enumerate()
            .filter_map(|(i, fault)| fault.on_command().map(|spec| CommandRule::new(i, spec)))
            .collect::<Vec<_>>();
        let gates = rules
            .iter()
            .map(|r| (r.matcher.identity, Arc::new(Gate::default())))
            .collect();
        Self {
            rules,
            command_rules,
            gates,
            control: control.into(),
            recorder,
            clock,
        }
    }

    /// How many times each gap fault struck, by fault index.
    pub fn fired(&self) -> Vec<(usize, u64)> {
        self.rules
            .iter()
            .map(|r| (r.fault, r.fired()))
            .chain(self.command_rules.iter().map(|r| (r.fault, r.fired())))
            .collect()
    }

    /// Whether the scenario has faults that only the fault proxy can apply.
    pub fn needs_proxy(&self) -> bool {
        !self.command_rules.is_empty()
    }

    /// What the fault proxy does with one command of `req` (in round trip `trip`):
    /// the first command rule that claims it strikes, and the strike is in the history.
    pub fn on_command(&self, req: &RequestCtx, trip: usize, command: &TripSummary) -> Option<CommandFaultAction> {
        let rule = self.command_rules.iter().find(|r| r.claim(req, command))?;
        let place = format!(
            "{} in round trip {trip} of request #{} (identity {}, its request {})",
            command.label(),
            req.id,
            req.identity,
            req.ordinal
        );
        let effect = match &rule.action {
            CommandFaultAction::DelayReply { delay_ms } => format!("held the reply to {place} for {delay_ms} ms"),
            CommandFaultAction::DropReply => {
                format!("let {place} execute, then dropped its reply and closed the connection")
            }
            CommandFaultAction::InjectError { error } => {
                let slot = key_slot(command.keys.first().unwrap_or(&req.key).as_bytes());
                let error = redirection(error, slot, "<its node>");
                format!("answered {place} with `-{error}` instead of forwarding it")
            }
            CommandFaultAction::ResetConnection => format!("closed the connection instead of forwarding {place}"),
        };
        self.recorder.record(Event::Fault {
            t_us: self.clock.now_us(),
            fault: rule.fault,
            kind: rule.action.kind(),
            request: Some(req.id),
            key: Some(command.keys.first().unwrap_or(&req.key).clone()),
            command: command.commands.first().cloned(),
            effect,
        });
        Some(rule.action.clone())
    }

    async fn strike(
        &self,
        rule: &GapRule,
        req: &RequestCtx,
        trip: usize,
        keys: &[String],
        next: &TripSummary,
    ) -> GapOutcome {
        let gate = Arc::clone(self.gates.get(&rule.matcher.identity).expect("a gate per rule"));
        let mut outcome = GapOutcome {
            client_dies: None,
            hold: Some(gate.take(req.id).await),
        };
        let place = format!(
            "before round trip {trip} ({}) of request #{} (identity {}, its request {})",
            next.label(),
            req.id,
            req.identity,
            req.ordinal
        );
        let (kind, effect) = match rule.action {
            GapFaultAction::ExpireKey => (FaultKind::ExpireBetweenRoundTrips, self.expire(keys, &place).await),
            GapFaultAction::Stall { stall_ms } => {
                tokio::time::sleep(Duration::from_millis(stall_ms)).await;
                (
                    FaultKind::StallBetweenRoundTrips,
                    format!("stalled {stall_ms} ms {place}"),
                )
            }
            GapFaultAction::ClientDies => {
                let effect = format!("the client died {place}: it never sent {}", next.label());
                outcome.client_dies = Some(effect.clone());
                (FaultKind::ClientDiesBetweenRoundTrips, effect)
            }
        };
        self.recorder.record(Event::Fault {
            t_us: self.clock.now_us(),
            fault: rule.fault,
            kind,
            request: Some(req.id),
            key: Some(keys.first().unwrap_or(&req.key).clone()),
            command: None,
            effect,
        });
        outcome
    }

    /// Make the request's limiter keys expire for real, one after the other.
    async fn expire(&self, keys: &[String], place: &str) -> String {
        if keys.is_empty() {
            return format!("nothing to expire {place}: the request named no limiter key (see the run's key layout)");
        }
        let mut effects = Vec::new();
        for key in keys {
            effects.push(self.expire_one(key, place).await);
        }
        effects.join("; ")
    }

    /// Make `key` expire for real (PEXPIRE 1, then wait until PTTL says it is gone), so the
    /// server's own expiry runs and publishes its `expired` event.
    async fn expire_one(&self, key: &str, place: &str) -> String {
        let mut conn = self.control.clone();
        let set: redis::RedisResult<i64> = redis::cmd("PEXPIRE").arg(key).arg(1).query_async(&mut conn).await;
        match set {
            Ok(1) => {}
            Ok(_) => return format!("PEXPIRE {key} 1 {place}: the key did not exist, nothing to expire"),
            Err(e) => return format!("PEXPIRE {key} 1 {place} failed: {e}"),
        }
        for waited_ms in 1..=500u64 {
            tokio::time::sleep(Duration::from_millis(1)).await;
            let pttl: redis::RedisResult<i64> = redis::cmd("PTTL").arg(key).query_async(&mut conn).await;
            if let Ok(-2) = pttl {
                return format!("PEXPIRE {key} 1 {place}: the key expired (PTTL -2 after {waited_ms} ms)");
            }
        }
        format!("PEXPIRE {key} 1 {place}: the key was still there 500 ms later")
    }
}

#[async_trait]
impl GapHook for Nemesis {
    async fn before_request(&self, req: &RequestCtx) {
        for key in [None, Some(req.identity)] {
            if let Some(gate) = self.gates.get(&key) {
                gate.pass(req.id).await;
            }
        }
    }

    async fn before_trip(&self, req: &RequestCtx, trip: usize, keys: &[String], next: &TripSummary) -> GapOutcome {
        // One strike per gap: the first rule that claims it.
        for rule in &self.rules {
            if rule.claim(req, next) {
                return self.strike(rule, req, trip, keys, next).await;
            }
        }
        GapOutcome::default()
    }
}
