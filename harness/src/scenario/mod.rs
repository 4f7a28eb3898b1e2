//! Scenario files: parse ([`file::ScenarioFile`], mirrors the TOML) then resolve
//! ([`Scenario`], validated, what the runner sees). Every error carries file:line:column.

mod adjust;
mod error;
pub mod file;
mod load;
mod model;
mod resolve;
mod ttl;

pub use adjust::Adjust;
pub use error::{AdjustError, OutOfRange, RescaleError, ScenarioError, TtlMaxError};
pub use load::{
    LOCAL_SCENARIO_DIR, LoadError, ScenarioRef, export_catalog, find_scenario, list_scenarios, load_scenario,
    open_scenario, parse_scenario, shipped_names, shipped_text, toml_files,
};
pub use model::{
    Algorithm, CLUSTER_ERRORS, CacheTarget, CheckConfig, ClockSkew, CommandFault, CommandFaultAction, Expect,
    FailoverConnections, Fault, FaultKind, GapFault, GapFaultAction, INJECTABLE_ERRORS, Invariant, Limit,
    MemoryPressure, Persistence, Phase, PhaseKind, Pick, Scenario, ServerAction, ServerConfig, ServerErrorPolicy,
    ServerFault, Setup, Spacing, Topology, WINDOW_MS_RANGE, redirection,
};
pub use ttl::TtlMax;

#[cfg(test)]
mod tests;
