//! The explorer (`limiter-harness explore`): seeded proptest strategies generate whole
//! scenarios (phases, limits, instances, faults from the whole vocabulary), each run on a
//! fresh server; a failure is confirmed, shrunk on real servers (a step is kept only when
//! it fails the same way k of k times) and written as a commented scenario under
//! `scenarios/found/` that `run` reproduces.

mod candidate;
mod found;
mod render;
mod search;
mod shrink;
mod strategy;
mod summary;
mod trial;

pub use candidate::{COMMANDS, Candidate, FaultSpec, POLICIES, PhaseSpec, Target};
pub use found::{Written, found_name, write};
pub use render::{INVARIANTS, requests, to_scenario, to_toml};
pub use search::{Exploration, Found, SearchConfig, search, seeded_runner};
pub use shrink::{ShrinkLimits, Shrunk, reductions, shrink};
pub use strategy::{Vocabulary, WORST_CASE_MS_MAX, candidates, strata};
pub use summary::summary;
pub use trial::{Finding, ServerTrials, TrialResult, Trials};

#[cfg(test)]
mod tests;
