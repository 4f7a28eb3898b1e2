//! Scenario files: parse ([`file::ScenarioFile`], mirrors the TOML) then resolve
//! ([`Scenario`], validated, what the runner sees). Every error carries file:line:column.

mod error;
pub mod file;
mod load;
mod model;
mod resolve;

pub use error::ScenarioError;
pub use load::{find_scenario, list_scenarios, load_scenario, parse_scenario, scenario_dirs};
pub use model::{
    Algorithm, CacheTarget, CheckConfig, CommandFault, CommandFaultAction, Expect, Fault, FaultKind, GapFault,
    GapFaultAction, INJECTABLE_ERRORS, Invariant, Limit, MemoryPressure, Phase, PhaseKind, Pick, Scenario,
    ServerConfig, Setup, Spacing,
};

#[cfg(test)]
mod tests;
