//! Striking in the gap between two round trips of one request.

use std::time::Duration;

use async_trait::async_trait;
use redis::aio::MultiplexedConnection;

use super::rules::GapRule;
use crate::clock::RunClock;
use crate::history::{Event, Recorder};
use crate::limiter::{RequestCtx, TripSummary};
use crate::scenario::{Fault, GapFaultAction, Scenario};

/// Called by a [`crate::limiter::Wire`] before every round trip that follows another one
/// in the same request.
#[async_trait]
pub trait GapHook: Send + Sync {
    /// `trip` counts from 1, so the first call of a request is for trip 2.
    async fn before_trip(&self, req: &RequestCtx, trip: usize, next: &TripSummary);
}

/// A hook that never strikes.
#[derive(Debug)]
pub struct NoFaults;

#[async_trait]
impl GapHook for NoFaults {
    async fn before_trip(&self, _req: &RequestCtx, _trip: usize, _next: &TripSummary) {}
}

/// The nemesis of one run: the scenario's gap rules, a control connection of its own to
/// make keys expire, and the history.
pub struct Nemesis {
    rules: Vec<GapRule>,
    control: MultiplexedConnection,
    recorder: Recorder,
    clock: RunClock,
}

impl Nemesis {
    pub fn new(scenario: &Scenario, control: MultiplexedConnection, recorder: Recorder, clock: RunClock) -> Self {
        let rules = scenario
            .faults
            .iter()
            .enumerate()
            .filter_map(|(i, fault)| match fault {
                Fault::ExpireBetweenRoundTrips(spec) | Fault::StallBetweenRoundTrips(spec) => {
                    Some(GapRule::new(i, spec))
                }
                Fault::MemoryPressure(_) => None,
            })
            .collect();
        Self {
            rules,
            control,
            recorder,
            clock,
        }
    }

    /// How many times each gap fault struck, by fault index.
    pub fn fired(&self) -> Vec<(usize, u64)> {
        self.rules.iter().map(|r| (r.fault, r.fired())).collect()
    }

    async fn strike(&self, rule: &GapRule, req: &RequestCtx, trip: usize, next: &TripSummary) {
        let place = format!(
            "before round trip {trip} ({}) of request #{} (identity {}, its request {})",
            next.label(),
            req.id,
            req.identity,
            req.ordinal
        );
        let (kind, effect) = match rule.action {
            GapFaultAction::ExpireKey => ("expire-between-round-trips", self.expire(&req.key, &place).await),
            GapFaultAction::Stall { stall_ms } => {
                tokio::time::sleep(Duration::from_millis(stall_ms)).await;
                ("stall-between-round-trips", format!("stalled {stall_ms} ms {place}"))
            }
        };
        self.recorder.record(Event::Fault {
            t_us: self.clock.now_us(),
            fault: rule.fault,
            kind: kind.to_owned(),
            request: Some(req.id),
            key: Some(req.key.clone()),
            effect,
        });
    }

    /// Make `key` expire for real (PEXPIRE 1, then wait until PTTL says it is gone), so the
    /// server's own expiry runs and publishes its `expired` event.
    async fn expire(&self, key: &str, place: &str) -> String {
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
    async fn before_trip(&self, req: &RequestCtx, trip: usize, next: &TripSummary) {
        for rule in &self.rules {
            if rule.claim(req, trip, next) {
                self.strike(rule, req, trip, next).await;
            }
        }
    }
}
