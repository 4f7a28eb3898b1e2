//! One audit wired together: connect read-only, read the server's facts, scan, assess.

use std::time::Instant;

use super::progress::ScanProgress;
use super::readonly::{ReadOnly, redact_url};
use super::report::AuditReport;
use super::risk::assess;
use super::scan::{ScanOptions, scan_keys};
use super::server::read_facts;
use crate::error::SetupError;

/// What to audit and how gently.
#[derive(Debug, Clone)]
pub struct AuditOptions {
    pub url: String,
    pub scan: ScanOptions,
    pub ops_per_s: u32,
    pub show_progress: bool,
}

/// Audit the server at `options.url`. A signal or a lost server mid-scan ends the audit
/// early with what it saw (the report says it is partial); a signal before the scan, a
/// server that cannot be reached or that refuses INFO/DBSIZE is a setup error.
pub async fn audit(options: &AuditOptions) -> Result<AuditReport, SetupError> {
    let started = Instant::now();
    // SIGINT or SIGTERM from here on stops the audit and reports, instead of ending the process.
    let _guard = crate::signals::guard();
    let cancel = crate::signals::token();
    let url = redact_url(&options.url);
    let (mut conn, facts) = tokio::select! {
        () = cancel.cancelled() => return Err(SetupError::Interrupted),
        ready = prepare(options) => ready?,
    };
    let estimate = facts.dbsize.saturating_mul(options.scan.patterns.len() as u64);
    let progress = ScanProgress::new(estimate, options.show_progress);
    let (tally, completion) = scan_keys(&mut conn, &options.scan, &progress, cancel).await;
    progress.finish();
    let risks = assess(&facts, tally.matched);
    Ok(AuditReport {
        url,
        patterns: options.scan.patterns.clone(),
        ttl_max_ms: options.scan.ttl_max_ms,
        ops_per_s: options.ops_per_s,
        facts,
        tally,
        completion,
        risks,
        commands_sent: conn.commands_sent(),
        elapsed_ms: started.elapsed().as_millis() as u64,
    })
}

async fn prepare(options: &AuditOptions) -> Result<(ReadOnly, super::server::ServerFacts), SetupError> {
    let mut conn = ReadOnly::connect(&options.url, options.ops_per_s).await?;
    let db = conn.db();
    let facts = read_facts(&mut conn, db).await.map_err(|e| SetupError::AuditRead {
        url: redact_url(&options.url),
        reason: e.to_string(),
    })?;
    Ok((conn, facts))
}
