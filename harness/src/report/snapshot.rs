//! The reviewed snapshot of a report: only what the scenario, the limiter and the seed
//! decide — verdicts, anomaly kinds and the keys they name, what each fault did in kind,
//! the rules applied. Timings, counts that depend on timing or eviction, request ids and
//! where the servers ran stay out (they are in report.md and report.json).

use crate::scenario::FaultKind;
use std::collections::BTreeSet;
use std::fmt::Write;

use super::Report;

pub fn render_snapshot(r: &Report) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "# {} × {}: {}\n",
        r.scenario,
        r.limiter.name,
        r.verdict.name().to_uppercase()
    );
    let _ = writeln!(
        out,
        "- scenario: `{}`, seed {}, {} requests scheduled",
        file_name(&r.scenario_file),
        r.seed,
        r.requests_scheduled
    );
    let _ = writeln!(
        out,
        "- limiter: `{}` ({}, {})",
        r.limiter.name,
        r.limiter.algorithm.name(),
        r.limiter.trips_text()
    );
    let settings = if r.server.settings.is_empty() {
        "none".to_owned()
    } else {
        r.server.settings.join(", ")
    };
    let _ = writeln!(out, "- server settings: {settings}\n");
    let _ = writeln!(out, "| invariant | verdict | anomalies (kind: keys) |\n|---|---|---|");
    for c in &r.invariants {
        let mut kinds: Vec<String> = Vec::new();
        let names: BTreeSet<&str> = c.anomalies.iter().map(|a| a.kind.as_str()).collect();
        for kind in names {
            let keys: BTreeSet<&str> = c
                .anomalies
                .iter()
                .filter(|a| a.kind == kind)
                .map(|a| a.key.as_str())
                .collect();
            kinds.push(format!("{kind}: {}", keys.into_iter().collect::<Vec<_>>().join(", ")));
        }
        let _ = writeln!(out, "| {} | {} | {} |", c.invariant, c.verdict.name(), kinds.join("; "));
    }
    let _ = writeln!(out);
    for f in &r.faults {
        let what = if f.kind == FaultKind::MemoryPressure {
            "applied".to_owned()
        } else if f.fired > 0 && f.fired_every_match {
            "struck at every match (how often: report.md)".to_owned()
        } else if f.fired > 0 {
            format!("struck {} time(s)", f.fired)
        } else {
            f.outcome.clone()
        };
        let _ = writeln!(out, "- fault {}: {} — {what}", f.index, f.spec);
    }
    if !r.faults.is_empty() {
        let _ = writeln!(out);
    }
    let _ = writeln!(out, "Rules:");
    for c in &r.invariants {
        if let Some(rule) = &c.rule {
            let _ = writeln!(out, "- {}: {rule}", c.invariant);
        }
    }
    out
}

/// The scenario file's name without its directory: where the checkout lives is not
/// something the seed decides, and a snapshot must read the same on every machine.
fn file_name(path: &str) -> &str {
    std::path::Path::new(path)
        .file_name()
        .and_then(|n| n.to_str())
        .unwrap_or(path)
}
