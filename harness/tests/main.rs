//! The binary as a user meets it, one area per module: `audit`, `ci`, the CLI, `explore`, the
//! CI gate on a team's own limiters, the house rules, installing, server versions. One test
//! binary: one link, and the areas' tests run side by side (`cargo test -p limiter-harness
//! --test binary -- gate::` runs one area).

mod audit;
mod ci;
mod cli;
mod explore;
mod gate;
mod house;
mod install;
mod servers;
