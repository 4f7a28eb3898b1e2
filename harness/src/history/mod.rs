//! The history: every request's invocation and exactly one completion, every fault the
//! nemesis applied and every observation of the server, in the order they happened.
//! Written as JSON lines while the run goes on, so an interrupted run keeps what it saw.

mod event;
mod index;
mod recorder;

pub use event::{Event, KeySample, LimiterFacts, Outcome, PhaseEdge, ProblemSource, ServerRole};
pub use index::{
    FaultRecord, HistoryIndex, MIGRATION_PAIR_US, Outage, PhaseSpan, Problem, Request, Sample, WireRecord,
};
pub use recorder::{HistoryError, Recorder, RecorderHandle, append_history, read_history};
