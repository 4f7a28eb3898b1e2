//! Seeded schedules: which identity sends each request, and when (for open-loop phases).

use rand::{RngExt, SeedableRng};
use rand_chacha::ChaCha8Rng;

use crate::scenario::{PhaseKind, Pick, Scenario, Spacing};

/// One request the driver will send.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PlannedRequest {
    /// Global request id, 0-based, in schedule order.
    pub id: u64,
    pub identity: u32,
    /// The identity's n-th request over the whole run, counting from 1.
    pub ordinal: u64,
    /// Send time from the phase's start (open-loop phases; 0 in bursts).
    pub offset_us: u64,
    /// The limiter instance that decides it (`[limit] instances`), chosen by the seed.
    pub instance: u32,
}

#[derive(Debug, Clone, PartialEq)]
pub enum PhasePlan {
    /// Send each request at its `offset_us`, whatever the replies.
    Steady {
        requests: Vec<PlannedRequest>,
        duration_us: u64,
        /// Hold an identity's request this long before one of its keys is due to expire.
        clear_of_expiry_us: u64,
    },
    /// `concurrency` clients send the requests in order, each as soon as its previous reply
    /// came, over `connections` connections.
    Burst {
        requests: Vec<PlannedRequest>,
        concurrency: u32,
        connections: u32,
    },
    Quiet {
        duration_us: u64,
    },
}

impl PhasePlan {
    pub fn requests(&self) -> &[PlannedRequest] {
        match self {
            Self::Steady { requests, .. } | Self::Burst { requests, .. } => requests,
            Self::Quiet { .. } => &[],
        }
    }
}

/// The whole run's schedule, one plan per phase.
#[derive(Debug, Clone, PartialEq)]
pub struct Schedule {
    pub phases: Vec<PhasePlan>,
}

impl Schedule {
    pub fn total_requests(&self) -> u64 {
        self.phases.iter().map(|p| p.requests().len() as u64).sum()
    }
}

/// Plan every phase of `scenario` from `seed`.
pub fn plan(scenario: &Scenario, seed: u64) -> Schedule {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let mut next_id = 0u64;
    let mut ordinals = vec![0u64; scenario.limit.identities as usize];
    let mut make = |identity: u32, offset_us: u64| {
        ordinals[identity as usize] += 1;
        let req = PlannedRequest {
            id: next_id,
            identity,
            ordinal: ordinals[identity as usize],
            offset_us,
            instance: 0,
        };
        next_id += 1;
        req
    };
    let phases = scenario
        .phases
        .iter()
        .map(|phase| match &phase.kind {
            PhaseKind::Steady {
                rate_per_s,
                duration_ms,
                identities,
                pick,
                spacing,
                clear_of_expiry_ms,
            } => {
                let interval_us = 1_000_000.0 / rate_per_s;
                let count = phase.kind.planned_requests();
                let requests = (0..count)
                    .map(|slot| {
                        let jitter: f64 = match spacing {
                            Spacing::Jittered => rng.random_range(0.0..1.0),
                            Spacing::Even => 0.0,
                        };
                        let offset_us = ((slot as f64 + jitter) * interval_us) as u64;
                        let identity = choose(&mut rng, identities, *pick, slot);
                        make(identity, offset_us)
                    })
                    .collect();
                PhasePlan::Steady {
                    requests,
                    duration_us: duration_ms * 1000,
                    clear_of_expiry_us: clear_of_expiry_ms * 1000,
                }
            }
            PhaseKind::Burst {
                requests,
                concurrency,
                connections,
                identities,
                pick,
            } => PhasePlan::Burst {
                requests: (0..*requests)
                    .map(|i| make(choose(&mut rng, identities, *pick, i), 0))
                    .collect(),
                concurrency: *concurrency,
                connections: *connections,
            },
            PhaseKind::Quiet { duration_ms } => PhasePlan::Quiet {
                duration_us: duration_ms * 1000,
            },
        })
        .collect();
    let mut schedule = Schedule { phases };
    spread_over_instances(&mut schedule, scenario.limit.instances, seed);
    schedule
}

/// Give each request a limiter instance, uniformly by the seed — from a generator of its own,
/// so that a scenario with one instance keeps the schedule it had before instances existed.
fn spread_over_instances(schedule: &mut Schedule, instances: u32, seed: u64) {
    if instances <= 1 {
        return;
    }
    let mut rng = ChaCha8Rng::seed_from_u64(seed ^ 0x1a57_a4ce);
    for phase in &mut schedule.phases {
        let requests = match phase {
            PhasePlan::Steady { requests, .. } | PhasePlan::Burst { requests, .. } => requests,
            PhasePlan::Quiet { .. } => continue,
        };
        for request in requests {
            request.instance = rng.random_range(0..instances);
        }
    }
}

fn choose(rng: &mut ChaCha8Rng, identities: &[u32], pick: Pick, nth: u64) -> u32 {
    match pick {
        Pick::Random => identities[rng.random_range(0..identities.len())],
        Pick::RoundRobin => identities[(nth % identities.len() as u64) as usize],
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scenario::parse_scenario;
    use std::path::Path;

    /// The report counts the scheduled requests from the scenario alone, without planning.
    #[test]
    fn every_catalog_schedule_sends_what_its_scenario_plans() {
        for (name, source) in crate::scenario::list_scenarios() {
            let scenario = source.load().unwrap();
            for seed in [0, 1, 36] {
                assert_eq!(
                    plan(&scenario, seed).total_requests(),
                    scenario.planned_requests(),
                    "{name}, seed {seed}"
                );
            }
        }
    }

    fn scenario() -> Scenario {
        let text = r#"
name = "t"
[limit]
requests_max = 10
window_ms = 1000
identities = 3
[[phase]]
kind = "steady"
rate_per_s = 200
duration_ms = 1000
[[phase]]
kind = "quiet"
duration_ms = 100
[[phase]]
kind = "burst"
requests = 50
concurrency = 4
identities = [2]
[check]
invariants = ["ttl-present"]
"#;
        parse_scenario(Path::new("t.toml"), text).unwrap()
    }

    #[test]
    fn same_seed_same_schedule_other_seed_other_schedule() {
        let s = scenario();
        assert_eq!(plan(&s, 7), plan(&s, 7));
        assert_ne!(plan(&s, 7), plan(&s, 8));
    }

    #[test]
    fn steady_rate_ids_and_ordinals() {
        let schedule = plan(&scenario(), 1);
        let steady = schedule.phases[0].requests();
        assert_eq!(steady.len(), 200);
        assert!(steady.windows(2).all(|w| w[0].offset_us < w[1].offset_us));
        assert!(steady.last().unwrap().offset_us < 1_000_000);
        let all: Vec<_> = schedule.phases.iter().flat_map(|p| p.requests().to_vec()).collect();
        assert!(all.iter().enumerate().all(|(i, r)| r.id == i as u64));
        for identity in 0..3 {
            let ordinals: Vec<u64> = all
                .iter()
                .filter(|r| r.identity == identity)
                .map(|r| r.ordinal)
                .collect();
            assert_eq!(ordinals, (1..=ordinals.len() as u64).collect::<Vec<_>>());
        }
        assert!(schedule.phases[2].requests().iter().all(|r| r.identity == 2));
        assert_eq!(schedule.total_requests(), 250);
    }
}
