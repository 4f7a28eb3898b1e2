//! The nemesis: faults. Faults that strike between a request's round trips are rules
//! matched on commands ([`rules`]: which request, which command next, which round trip),
//! so the same rules can later drive a network proxy. Memory pressure floods a server with
//! cold cache entries alongside a phase's requests ([`flood`]). Faults on a command's reply
//! ([`rules::CommandRule`]) are applied by the fault proxy ([`crate::proxy`]), which asks
//! the same [`Nemesis`] for gap strikes too: one set of rules, two places to apply them.

mod cluster_view;
mod fault_error;
mod flood;
mod gap;
mod gate;
mod node_failover;
mod node_pause;
mod rules;
mod server;

pub use fault_error::FaultError;
pub use flood::{CACHE_PREFIX, CacheFlood, FloodTotals};
pub use gap::{GapHook, GapOutcome, Nemesis, NoFaults};
pub use gate::Hold;
pub use rules::{CommandRule, GapMatch, GapRule};
pub use server::{ServerNemesis, clients};
