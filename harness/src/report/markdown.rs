//! `report.md`: the report for a reviewer, evidence first.

use std::fmt::Write;

use super::Report;
use crate::checker::{CheckResult, Verdict};

pub fn render_markdown(r: &Report) -> String {
    super::printable(&markdown(r))
}

fn markdown(r: &Report) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "# {} × {}: {}\n",
        r.scenario,
        r.limiter.name,
        r.verdict.name().to_uppercase()
    );
    if !r.about.is_empty() {
        let _ = writeln!(out, "> {}\n", r.about.replace('\n', " "));
    }
    header(&mut out, r);
    verdicts(&mut out, r);
    if let Some(file) = &r.timeline {
        let _ = writeln!(
            out,
            "![timeline: per identity, counters and TTLs, requests, faults and anomalies]({file})\n"
        );
    }
    for result in r
        .invariants
        .iter()
        .filter(|c| c.verdict != Verdict::Valid || !c.notes.is_empty())
    {
        evidence(&mut out, result);
    }
    faults(&mut out, r);
    let _ = writeln!(
        out,
        "## Limiter `{}`\n\n```text\n{}\n```\n",
        r.limiter.name, r.limiter.commands
    );
    observed(&mut out, r);
    out
}

fn header(out: &mut String, r: &Report) {
    let _ = writeln!(out, "| | |\n|---|---|");
    let _ = writeln!(out, "| scenario | `{}` |", r.scenario_file);
    let trips = r.limiter.trips_text();
    let _ = writeln!(
        out,
        "| limiter | `{}` ({}, {trips}) |",
        r.limiter.name,
        serde_json::to_value(r.limiter.algorithm)
            .ok()
            .and_then(|v| v.as_str().map(str::to_owned))
            .unwrap_or_default(),
    );
    let settings = if r.server.settings.is_empty() {
        "defaults".to_owned()
    } else {
        r.server.settings.join(", ")
    };
    let topology = r.server.topology.as_ref().map(|t| format!("{t}; ")).unwrap_or_default();
    let _ = writeln!(
        out,
        "| server | {} ({}; {topology}{settings}) |",
        r.server.version, r.server.backend
    );
    if let Some(cache) = &r.server.cache_server {
        let _ = writeln!(out, "| cache server | {cache} |");
    }
    let templates: Vec<String> = r.keys.templates.iter().map(|t| format!("`{t}`")).collect();
    let _ = writeln!(
        out,
        "| limiter keys | {} ({}) |",
        escape(&templates.join(", ")),
        r.keys.from
    );
    if let Some(note) = &r.keys.note {
        let _ = writeln!(out, "| keys note | {} |", escape(note));
    }
    if let Some(unseen) = &r.keys.unseen {
        let _ = writeln!(out, "| **keys never seen** | {} |", escape(unseen));
    }
    let bound = &r.keys.ttl_bound;
    let _ = writeln!(
        out,
        "| TTL bound | {} ms + slack {} ms: {} |",
        bound.ttl_max_ms,
        bound.ttl_slack_ms,
        escape(&bound.from)
    );
    let _ = writeln!(out, "| seed | {} |", r.seed);
    let _ = writeln!(out, "| requests scheduled | {} |", r.requests_scheduled);
    let _ = writeln!(out, "| reproduce | `{}` |\n", r.reproduce);
    for problem in &r.problems {
        let _ = writeln!(out, "**Problem:** {problem}\n");
    }
}

fn verdicts(out: &mut String, r: &Report) {
    let _ = writeln!(out, "## Verdicts\n\n| invariant | verdict | summary |\n|---|---|---|");
    for c in &r.invariants {
        let verdict = match c.verdict {
            Verdict::Valid => "valid".to_owned(),
            other => format!("**{}**", other.name()),
        };
        let _ = writeln!(out, "| {} | {verdict} | {} |", c.invariant, escape(&c.summary));
    }
    let _ = writeln!(out);
}

fn evidence(out: &mut String, c: &CheckResult) {
    let _ = writeln!(out, "### {}: {}\n", c.invariant, c.verdict.name());
    let _ = writeln!(out, "Promise: {}.", c.invariant.promise());
    if let Some(rule) = &c.rule {
        let _ = writeln!(out, "Rule: {rule}.");
    }
    let _ = writeln!(out);
    for a in &c.anomalies {
        let requests: Vec<String> = a.requests.iter().map(|id| format!("#{id}")).collect();
        let _ = writeln!(
            out,
            "- **{}** `{}` at {:.3} s{}: {}",
            a.kind,
            a.key,
            a.t_us as f64 / 1e6,
            if requests.is_empty() {
                String::new()
            } else {
                format!(" (requests {})", requests.join(", "))
            },
            a.because
        );
        let _ = writeln!(out, "  - seen: {}", a.seen.join("; "));
    }
    if c.anomalies_total > c.anomalies.len() {
        let _ = writeln!(
            out,
            "- … and {} more (all in report.json's count; history.jsonl has every event)",
            c.anomalies_total - c.anomalies.len()
        );
    }
    for note in &c.notes {
        let _ = writeln!(out, "- note: {note}");
    }
    let _ = writeln!(out);
}

fn faults(out: &mut String, r: &Report) {
    if r.faults.is_empty() {
        let _ = writeln!(out, "## Faults\n\nNone: this scenario runs without faults.\n");
        return;
    }
    let _ = writeln!(
        out,
        "## Faults\n\n| # | fault | fired | what happened |\n|---|---|---|---|"
    );
    for f in &r.faults {
        let _ = writeln!(
            out,
            "| {} | {} | {} | {} |",
            f.index,
            escape(&f.spec),
            f.fired,
            escape(&f.outcome)
        );
    }
    let _ = writeln!(out);
}

fn observed(out: &mut String, r: &Report) {
    let o = &r.observed;
    let c = &o.counts;
    let _ = writeln!(out, "## Figures that vary between runs\n");
    let _ = writeln!(
        out,
        "Timing, the server's eviction sampling and the machine decide these; the verdicts above do not depend on their exact values.\n"
    );
    let _ = writeln!(
        out,
        "- requests: {} (allowed {}, rejected {}, errors {}, indeterminate {})",
        c.requests, c.allowed, c.rejected, c.errors, c.indeterminate
    );
    if c.errors > 0 {
        let codes: Vec<String> = c.errors_by_code.iter().map(|(code, n)| format!("{code} {n}")).collect();
        let _ = writeln!(
            out,
            "- errors by reply: {}; each is a request the limiter decided nothing for (it surfaced the error to its caller, which picks fail-open or fail-closed); none counts as an admission",
            codes.join(", ")
        );
    }
    let _ = writeln!(
        out,
        "- limiter server: {} key(s) evicted, {} expired; {} sample(s), {} keyspace event(s)",
        o.limiter_server_evicted_keys, o.limiter_server_expired_keys, o.samples, o.keyspace_events
    );
    if o.cache_writes_ok + o.cache_writes_failed > 0 {
        let _ = writeln!(
            out,
            "- cache writes: {} ok, {} failed",
            o.cache_writes_ok, o.cache_writes_failed
        );
    }
    if let Some(evicted) = o.cache_server_evicted_keys {
        let _ = writeln!(out, "- cache server: {evicted} key(s) evicted");
    }
    if !o.cluster_replies.is_empty() {
        let _ = writeln!(
            out,
            "- cluster redirections and errors each primary replied, to every client, the harness's own reads included (INFO errorstats): {}",
            o.cluster_replies.join("; ")
        );
    }
    let _ = writeln!(out, "- wall time: {} ms; servers: {}", o.wall_ms, o.servers.join(", "));
    if let Some(peak) = o.resident_peak_bytes {
        let _ = writeln!(
            out,
            "- harness peak resident memory: {:.1} MiB (the process's, at the run's end, before judging)",
            peak as f64 / (1024.0 * 1024.0)
        );
    }
    if let Some(proxy) = &o.proxy {
        let _ = writeln!(out, "- {proxy}");
    }
    for trace in &o.wire {
        let _ = writeln!(
            out,
            "\n### Commands on the wire for `{}` ({})\n\nWhat the client sent through the fault proxy for the requests on this key, up to the anomaly's last witness:\n\n```text",
            trace.key, trace.anomaly
        );
        for line in &trace.lines {
            let _ = writeln!(out, "{line}");
        }
        let _ = writeln!(out, "```");
    }
}

fn escape(text: &str) -> String {
    text.replace('|', "\\|").replace('\n', " ")
}
