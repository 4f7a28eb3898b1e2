//! limiter-harness against real Redis servers, one area per module: the built-in limiters,
//! the nemesis, the shipped scenarios, the backends, exec adapters, the fault proxy,
//! timelines, bounds, load, the hold around expiry and a cluster of the harness's own (the
//! reviewed snapshots are a binary of their own: `snapshots.rs`). One test binary: one link,
//! and the areas' tests run side by side (`cargo test -p limiter-harness-tests --test
//! integration -- proxy::` runs one area).

mod adapters;
mod backends;
mod bounds;
mod cluster;
mod expiry;
mod faults;
mod limiters;
mod load;
mod proxy;
mod scenarios;
mod timeline;
