//! The generator: turns a scenario's phases and a seed into a schedule of requests.
//! Nothing here touches Redis; the same seed always gives the same schedule.

mod schedule;

pub use schedule::{PhasePlan, PlannedRequest, Schedule, plan};
