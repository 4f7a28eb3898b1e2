//! The proptest [`Strategy`] that generates the explorer's candidates (and shrinks them:
//! fewer phases and faults, lower rates, shorter durations, faults at earlier requests and
//! on any command).

use proptest::prelude::*;
use proptest::strategy::{BoxedStrategy, Union};

use super::candidate::{COMMANDS, Candidate, FaultSpec, POLICIES, PhaseSpec, Target};
use crate::scenario::{FaultKind, INJECTABLE_ERRORS};

/// What the search may use.
#[derive(Debug, Clone)]
pub struct Vocabulary {
    /// The fault kinds to draw from (every kind by default).
    pub kinds: Vec<FaultKind>,
    /// Memory pressure may run under eviction policies (every limiter loses keys).
    pub eviction: bool,
    /// Server restarts may keep nothing and failovers may lose writes or leave connections
    /// on the demoted node (every limiter loses its state, or every built-in its server).
    pub state_loss: bool,
}

impl Default for Vocabulary {
    fn default() -> Self {
        Self {
            kinds: FaultKind::ALL.to_vec(),
            eviction: false,
            state_loss: false,
        }
    }
}

/// The longest a candidate's run may take at worst ([`super::render::worst_case_ms`]): a
/// candidate that could hold the search up longer (a reply delay on every request, lost
/// replies by the dozen) is not drawn, and a shrink step never proposes one.
pub const WORST_CASE_MS_MAX: u64 = 8_000;

/// Every candidate: 1–4 phases, 0–2 faults from the vocabulary, a short window so that a run
/// takes a few seconds (at worst [`WORST_CASE_MS_MAX`]).
pub fn candidates(vocabulary: &Vocabulary) -> BoxedStrategy<Candidate> {
    let faults = match fault_strategy(vocabulary) {
        Some(fault) => prop::collection::vec(fault, 0..=2).boxed(),
        None => Just(Vec::new()).boxed(),
    };
    candidates_with(faults)
}

/// The strategies the search takes turns with: [`candidates`], then one per fault kind of
/// the vocabulary whose candidates always hold that kind (and maybe one more fault). So
/// every kind is tried within the first few candidates, and as often as any other after:
/// a bug only one kind of fault shows (a retry after a lost reply) is not left to the
/// luck of a draw from fourteen.
pub fn strata(vocabulary: &Vocabulary) -> Vec<BoxedStrategy<Candidate>> {
    let mut out = vec![candidates(vocabulary)];
    let Some(any) = fault_strategy(vocabulary) else {
        return out;
    };
    for kind in &vocabulary.kinds {
        let Some(first) = kind_strategy(*kind, vocabulary) else {
            continue;
        };
        let faults = (first, prop::collection::vec(any.clone(), 0..=1))
            .prop_map(|(first, more)| std::iter::once(first).chain(more).collect())
            .boxed();
        out.push(candidates_with(faults));
    }
    out
}

fn candidates_with(faults: BoxedStrategy<Vec<FaultSpec>>) -> BoxedStrategy<Candidate> {
    (
        2u64..=12,
        (2u64..=10).prop_map(|n| n * 50),
        1u32..=3,
        1u32..=2,
        prop::collection::vec(phase_strategy(), 1..=4),
        faults,
    )
        .prop_map(
            |(requests_max, window_ms, identities, instances, phases, faults)| Candidate {
                requests_max,
                window_ms,
                identities,
                instances,
                phases,
                faults,
            },
        )
        .prop_filter("a candidate that could take too long", |c| {
            super::render::worst_case_ms(c) <= WORST_CASE_MS_MAX
        })
        .boxed()
}

fn phase_strategy() -> BoxedStrategy<PhaseSpec> {
    let steady = (
        10u64..=200,
        (1u64..=15).prop_map(|n| n * 100),
        any::<bool>(),
        any::<bool>(),
    )
        .prop_map(|(rate_per_s, duration_ms, round_robin, even)| PhaseSpec::Steady {
            rate_per_s,
            duration_ms,
            round_robin,
            even,
        });
    let burst = (5u64..=200, 1u32..=8).prop_map(|(requests, concurrency)| PhaseSpec::Burst { requests, concurrency });
    let quiet = (1u64..=15).prop_map(|n| PhaseSpec::Quiet { duration_ms: n * 100 });
    prop_oneof![3 => steady, 2 => quiet, 1 => burst].boxed()
}

fn target_strategy() -> BoxedStrategy<Target> {
    let times = prop_oneof![4 => Just(Some(1u64)), 1 => (2u64..=3).prop_map(Some), 1 => Just(None)];
    // Any command as often as a named one: a rule naming a command the limiter never sends
    // strikes nothing.
    let command = prop_oneof![Just(0usize), 1..COMMANDS.len()];
    (prop::option::of(0u32..3), 1u64..=40, times, command)
        .prop_map(|(identity, request, times, command)| Target {
            identity,
            request,
            times,
            command,
        })
        .boxed()
}

/// One strategy per fault kind of the vocabulary; a new `FaultKind` does not compile until
/// it has one.
fn fault_strategy(vocabulary: &Vocabulary) -> Option<BoxedStrategy<FaultSpec>> {
    let arms: Vec<BoxedStrategy<FaultSpec>> = vocabulary
        .kinds
        .iter()
        .filter_map(|k| kind_strategy(*k, vocabulary))
        .collect();
    (!arms.is_empty()).then(|| Union::new(arms).boxed())
}

/// How to draw a fault of `kind`; `None` for a kind exploration does not draw (a cluster's:
/// exploration runs on one server).
fn kind_strategy(kind: FaultKind, vocabulary: &Vocabulary) -> Option<BoxedStrategy<FaultSpec>> {
    // Long: one arm per fault kind, exhaustive on purpose (a new kind must be given one).
    let t = target_strategy;
    let moment = || (0usize..4, (0u64..=10).prop_map(|n| n * 100));
    Some(match kind {
        FaultKind::Reshard | FaultKind::NodeFailover | FaultKind::NodePause => return None,
        FaultKind::ExpireBetweenRoundTrips => t().prop_map(FaultSpec::ExpireBetween).boxed(),
        FaultKind::StallBetweenRoundTrips => (t(), (1u64..=30).prop_map(|n| n * 50))
            .prop_map(|(target, stall_ms)| FaultSpec::StallBetween { target, stall_ms })
            .boxed(),
        FaultKind::ClientDiesBetweenRoundTrips => t().prop_map(FaultSpec::ClientDiesBetween).boxed(),
        FaultKind::DelayReply => (t(), (1u64..=30).prop_map(|n| n * 50))
            .prop_map(|(target, delay_ms)| FaultSpec::DelayReply { target, delay_ms })
            .boxed(),
        FaultKind::DropReply => t().prop_map(FaultSpec::DropReply).boxed(),
        FaultKind::InjectError => (t(), 0..INJECTABLE_ERRORS.len())
            .prop_map(|(target, error)| FaultSpec::InjectError { target, error })
            .boxed(),
        FaultKind::ResetConnection => t().prop_map(FaultSpec::ResetConnection).boxed(),
        FaultKind::MemoryPressure => {
            let policies = if vocabulary.eviction { POLICIES.len() } else { 1 };
            (
                0usize..4,
                (1u64..=8).prop_map(|n| n * 1024),
                1u32..=20,
                any::<bool>(),
                0..policies,
            )
                .prop_map(
                    |(phase, value_bytes, writes_per_request, cache_ttl, policy)| FaultSpec::MemoryPressure {
                        phase,
                        value_bytes,
                        writes_per_request,
                        cache_ttl,
                        policy,
                    },
                )
                .boxed()
        }
        FaultKind::ServerRestart => {
            let state_loss = vocabulary.state_loss;
            (moment(), any::<bool>())
                .prop_map(move |((phase, after_ms), keep)| FaultSpec::ServerRestart {
                    phase,
                    after_ms,
                    aof: keep || !state_loss,
                })
                .boxed()
        }
        FaultKind::ServerPause => (moment(), (1u64..=25).prop_map(|n| n * 100))
            .prop_map(|((phase, after_ms), pause_ms)| FaultSpec::ServerPause {
                phase,
                after_ms,
                pause_ms,
            })
            .boxed(),
        FaultKind::ScriptFlush => moment()
            .prop_map(|(phase, after_ms)| FaultSpec::ScriptFlush { phase, after_ms })
            .boxed(),
        FaultKind::ClientKill => moment()
            .prop_map(|(phase, after_ms)| FaultSpec::ClientKill { phase, after_ms })
            .boxed(),
        FaultKind::Failover => {
            let state_loss = vocabulary.state_loss;
            (moment(), 0u64..=5, any::<bool>())
                .prop_map(move |((phase, after_ms), lose, stay)| FaultSpec::Failover {
                    phase,
                    after_ms,
                    lose_writes_ms: if state_loss { lose * 200 } else { 0 },
                    stay: stay && state_loss,
                })
                .boxed()
        }
        FaultKind::ClockSkew => (0u32..2, -30i64..=30, -20i64..=20)
            .prop_map(|(instance, offset, drift_ms_per_s)| FaultSpec::ClockSkew {
                instance,
                offset_ms: offset * 100,
                drift_ms_per_s,
            })
            .boxed(),
    })
}
