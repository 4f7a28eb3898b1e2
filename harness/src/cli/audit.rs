//! `limiter-harness audit`: the read-only audit of a server in production (see
//! [`crate::audit`]). Exit codes: 0 nothing found, 1 keys without TTL (or above
//! `--ttl-max-ms`), 2 partial (interrupted, server lost, keys unchecked), 3 setup error.

use std::io::IsTerminal;

use super::args::{AuditArgs, AuditFormat};
use super::commands::say;
use super::exit::ExitCode;
use crate::audit::{AuditOptions, ScanOptions, render_json, render_text};
use crate::error::SetupError;

pub async fn audit(args: AuditArgs) -> Result<ExitCode, SetupError> {
    let options = audit_options(&args)?;
    let report = crate::audit::audit(&options).await?;
    match args.format {
        AuditFormat::Text => say(&render_text(&report)),
        AuditFormat::Json => say(&render_json(&report)),
    }
    Ok(report.verdict().into())
}

/// The flags, checked: at least one `--keys`, none empty.
fn audit_options(args: &AuditArgs) -> Result<AuditOptions, SetupError> {
    if args.keys.is_empty() {
        return Err(SetupError::AuditPattern {
            problem: "no --keys given: the audit needs to know which keys are the limiter's".into(),
        });
    }
    if args.keys.iter().any(String::is_empty) {
        return Err(SetupError::AuditPattern {
            problem: "--keys '' is empty: it would match no key".into(),
        });
    }
    Ok(AuditOptions {
        url: args.url.clone(),
        scan: ScanOptions {
            patterns: args.keys.clone(),
            scan_count: args.scan_count,
            ttl_max_ms: args.ttl_max_ms,
            examples_max: args.examples,
        },
        ops_per_s: args.ops_per_s,
        show_progress: !args.no_progress && std::io::stderr().is_terminal(),
    })
}
