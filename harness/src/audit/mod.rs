//! `limiter-harness audit`: a read-only audit of a server in production for the incidents'
//! signs — limiter keys with no TTL (incident 1) and an eviction policy that evicts limiter
//! counters (incident 2).
//!
//! Every command goes through [`ReadOnly`], which refuses in code anything but SCAN, PTTL,
//! INFO, DBSIZE, PING and CONFIG GET, and paces them ([`Pacer`]). No key is written, no
//! setting changed, no value read.

mod pace;
mod progress;
mod readonly;
mod report;
mod risk;
mod run;
mod scan;
mod server;

pub use pace::Pacer;
pub use readonly::{ALLOWED, Allowed, ReadError, ReadOnly, Refused, allowed, redact_url};
pub use report::{AuditReport, display_key, render_json, render_text};
pub use risk::{Risk, RiskKind, assess, human_bytes};
pub use run::{AuditOptions, audit};
pub use scan::{Completion, Examples, KeyTally, ScanOptions, scan_keys};
pub use server::{DbKeys, InfoSections, KeyspaceEvents, ServerFacts, parse_facts, parse_keyspace, read_facts};
