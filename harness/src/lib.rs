//! limiter-harness: a fault-injection test harness for rate limiters built on Redis.
//!
//! The crate follows Jepsen's roles, one module each:
//! [`scenario`] (file → validated [`scenario::Scenario`]), [`workload`] (the seeded
//! generator), [`limiter`] (the clients under test), [`nemesis`] (faults), [`observer`]
//! (the harness's read-only view of the server), [`history`] (every invocation, completion
//! and observation), [`checker`] (invariants → verdicts with evidence) and [`report`].
//! [`keys`] describes the keys a limiter keeps per identity (its key layout).
//! [`proxy`] is the Redis-protocol fault proxy that applies the nemesis's rules to clients
//! the harness does not control. [`backend`] decides where Redis runs, [`servers`] which server binary (and installs known versions); [`runner`] wires one run together; [`cli`] is the
//! command line. [`audit`] is the read-only audit of a server in production (`limiter-harness audit`).
//!
//! The async functions other crates await (the tests, the binary's tests) return a boxed
//! future (`runner::run`, `suite::run_ci`, `backend::select_backend`, …; the body is the
//! private `…_unboxed`): an `async fn`'s body, and every body it awaits, is compiled in each
//! crate that awaits it, and behind the box those crates call this one's compiled code
//! (docs/architecture.md). The unit tests build from this source as `harness/unit/`.

pub mod audit;
pub mod backend;
pub mod checker;
pub mod cli;
pub mod clock;
pub mod error;
pub mod explore;
pub mod history;
pub mod keys;
pub mod limiter;
pub mod matrix;
pub mod nemesis;
pub mod observer;
pub mod proxy;
pub mod report;
pub mod report_dir;
pub mod request;
pub mod runner;
pub mod scenario;
pub mod servers;
pub mod shell;
pub mod signals;
pub mod suite;
pub mod text;
pub mod workload;
pub mod xml;

pub use error::SetupError;
