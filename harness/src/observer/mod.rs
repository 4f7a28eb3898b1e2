//! The observer: the harness's read-only view of the limiter's server. It samples every
//! limiter key — every key the run's key layout describes — (SCAN + pipelined PTTL/GET),
//! listens to keyspace notifications for them
//! (`expired`, `evicted`, `del`, ...) and reads `INFO` counters. Everything it sees goes
//! into the history; it never writes a key.

mod expiry;
mod keyspace;
mod sampler;
mod stats;

pub use expiry::ExpiryWatch;
pub use keyspace::{KEYSPACE_FLAGS, keyspace_events_enabled, subscribe_keyspace, watch_role};
pub use sampler::{SampleNow, sample_keys, scan_identity, scan_layout, scan_matching, spawn_sampler};
pub use stats::{ServerInfo, info_field, info_value, parse_server_info, read_stats, server_info};
