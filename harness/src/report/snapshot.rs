//! The reviewed snapshot of a report: only what the scenario, the limiter and the seed
//! decide — verdicts, anomaly kinds and the keys they name, what each fault did in kind,
//! the rules applied. Timings, counts that depend on timing or eviction, request ids and
//! where the servers ran stay out (they are in report.md and report.json), and what the
//! clock decides in a key (a date, epoch seconds, a window's number) is written as
//! `<window>` (`geocode:calls:0:<window>`): the same limiter gives the same bytes today and
//! tomorrow, while report.md keeps the real names.

use crate::keys::{KeyLayout, LayoutSource, stable_text};
use crate::scenario::FaultKind;
use std::collections::BTreeSet;
use std::fmt::Write;

use super::Report;

pub fn render_snapshot(r: &Report) -> String {
    super::printable(&snapshot(r))
}

fn snapshot(r: &Report) -> String {
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
    if let Some(topology) = &r.server.topology {
        let _ = writeln!(out, "- server: {topology}");
    }
    let _ = writeln!(out, "- server settings: {settings}\n");
    let _ = writeln!(out, "| invariant | verdict | anomalies (kind: keys) |\n|---|---|---|");
    for c in &r.invariants {
        let _ = writeln!(
            out,
            "| {} | {} | {} |",
            c.invariant,
            c.verdict.name(),
            anomaly_keys(r, c)
        );
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
            stable_text(&f.outcome)
        };
        let _ = writeln!(out, "- fault {}: {} — {what}", f.index, stable_text(&f.spec));
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

/// An invariant's anomalies as "kind: keys; kind: keys", each key in its stable form.
fn anomaly_keys(r: &Report, c: &crate::checker::CheckResult) -> String {
    // Any identity's number: the snapshot only renames keys, it judges nothing.
    let layout = KeyLayout::parse(&r.keys.templates, u32::MAX, LayoutSource::Default).ok();
    let stable = |key: &str| layout.as_ref().map_or_else(|| stable_text(key), |l| l.stable_name(key));
    let names: BTreeSet<&str> = c.anomalies.iter().map(|a| a.kind.as_str()).collect();
    let mut kinds: Vec<String> = Vec::new();
    for kind in names {
        let keys: BTreeSet<String> = c
            .anomalies
            .iter()
            .filter(|a| a.kind == kind)
            .map(|a| stable(&a.key))
            .collect();
        kinds.push(format!("{kind}: {}", keys.into_iter().collect::<Vec<_>>().join(", ")));
    }
    kinds.join("; ")
}

/// The scenario file's name without its directory: where the checkout lives is not
/// something the seed decides, and a snapshot must read the same on every machine.
fn file_name(path: &str) -> &str {
    std::path::Path::new(path)
        .file_name()
        .and_then(|n| n.to_str())
        .unwrap_or(path)
}
