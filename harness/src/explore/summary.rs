//! The summary printed at the end of `explore`: what was searched, what was found and how
//! it was shrunk, or how much was explored clean. The seed and the confirmed verdicts decide
//! every line but four kinds, which say what this run's timing showed: `unknown:` (which
//! clean candidates could not observe everything), `flaky:` (findings that did not come back
//! in every confirming run), `evidence:` (the request numbers and values of one confirming
//! run) and `time:`.

use super::found::Written;
use super::render;
use super::search::{Exploration, SearchConfig};
use crate::scenario::FaultKind;

pub fn summary(limiter: &str, config: &SearchConfig, out: &Exploration, written: &[Written]) -> Vec<String> {
    let mut lines = vec![format!(
        "explore:   limiter {limiter}, seed {}, {}",
        config.seed,
        vocabulary(config)
    )];
    lines.push(format!(
        "explored:  {} candidates ({} requests planned), {} could not run",
        out.candidates_run,
        out.requests_planned,
        out.errors.len()
    ));
    if out.unknown > 0 {
        lines.push(format!(
            "unknown:   {} candidate(s) broke nothing but could not observe everything on this run (a fault that never struck, too few samples)",
            out.unknown
        ));
    }
    for flaky in &out.flaky {
        lines.push(format!(
            "flaky:     {flaky} broke once but not {k} of {k} times: not reported",
            k = config.shrink.confirm
        ));
    }
    if let Some(e) = out.errors.first() {
        lines.push(format!("error:     {}", e.lines().next().unwrap_or_default()));
    }
    if out.found.is_empty() {
        lines.push(if out.interrupted {
            "found:     nothing before the interruption".into()
        } else {
            format!(
                "found:     nothing: every candidate held every invariant within the {} s budget",
                config.budget.as_secs()
            )
        });
    }
    for (i, found) in out.found.iter().enumerate() {
        lines.extend(found_lines(found, config.shrink.confirm));
        if let Some(w) = written.get(i) {
            lines.push(format!("scenario:  {}", crate::shell::relative(&w.scenario).display()));
            if let Some(report) = &w.report {
                lines.push(format!("report:    {}", crate::shell::relative(report).display()));
            }
            lines.push(format!(
                "reproduce: {}",
                super::found::reproduce_line(&crate::shell::relative(&w.scenario), limiter)
            ));
        }
    }
    let time = if out.found.is_empty() {
        format!("{:.1} s", out.elapsed.as_secs_f64())
    } else {
        let seen: Vec<String> = out
            .found
            .iter()
            .map(|f| format!("{:.1} s", f.seen_after.as_secs_f64()))
            .collect();
        format!(
            "found after {}; {:.1} s in all",
            seen.join(", "),
            out.elapsed.as_secs_f64()
        )
    };
    lines.push(format!("time:      {time}"));
    lines
}

fn vocabulary(config: &SearchConfig) -> String {
    let v = &config.vocabulary;
    let kinds = if v.kinds.len() == FaultKind::ALL.len() {
        format!("every fault kind ({})", v.kinds.len())
    } else {
        v.kinds.iter().map(|k| k.name()).collect::<Vec<_>>().join(",")
    };
    let on_off = |b: bool| if b { "on" } else { "off" };
    format!(
        "faults: {kinds}; eviction {}, state loss {}; {} at a time, {} confirming runs",
        on_off(v.eviction),
        on_off(v.state_loss),
        config.jobs,
        config.shrink.confirm
    )
}

fn found_lines(found: &super::search::Found, confirm: usize) -> Vec<String> {
    let mut lines = Vec::new();
    let (o, m) = (&found.original, &found.shrunk.minimal);
    let kinds: Vec<_> = m.faults.iter().map(|f| f.kind().name()).collect();
    let kinds = if kinds.is_empty() {
        String::new()
    } else {
        format!(" ({})", kinds.join(", "))
    };
    lines.push(format!(
        "found:     {} in candidate {}, {k} of {k} runs",
        found.target,
        found.candidate,
        k = confirm
    ));
    lines.push(format!(
        "shrunk:    {} phase(s), {} fault(s), {} requests -> {} phase(s), {} fault(s){}, {} requests; {} step(s) kept of {} tried ({})",
        o.phases.len(),
        render::faults(o),
        render::requests(o),
        m.phases.len(),
        render::faults(m),
        kinds,
        render::requests(m),
        found.shrunk.steps_kept,
        found.shrunk.steps_tried,
        found.shrunk.stopped
    ));
    if m.faults.iter().any(|f| f.no_limiter_survives()) {
        lines.push(
            "by design: its fault destroys every limiter's state (eviction, or a restart that keeps nothing)".into(),
        );
    }
    for e in &found.shrunk.evidence {
        lines.push(format!("evidence:  {}", e.lines().next().unwrap_or_default()));
    }
    lines
}
