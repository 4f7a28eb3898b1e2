//! `timeline.svg`: a picture of a run, one lane per identity over the run's time — each
//! key's counter and TTL as the observer sampled them (a key without expiry in red), the
//! limit, the requests admitted and rejected, keyspace events, fault strikes, phases, and
//! every anomaly of the report at its moment (`class="anomaly"` with `data-kind` and
//! `data-key`, for tools and tests).
//!
//! A pure function of the history, the report and the scenario's limit: the same run gives
//! the same bytes. Bounded whatever the run: at most [`lanes::LANES_MAX`] lanes, and
//! everything dense drawn per [`frame::BUCKET_W`]-pixel bucket (a 500,000-request burst
//! stays a few hundred KB). Self-contained: inline styles, no script, no external font.

mod frame;
mod header;
mod lanes;
mod marks;
mod plots;
mod series;
mod svg;
#[cfg(test)]
mod tests;

use std::fmt::Write;
use std::path::Path;

use crate::history::HistoryIndex;
use crate::keys::KeyLayout;

use super::Report;
use frame::Frame;
use lanes::{Lanes, Placer};
use series::LaneData;

/// The file a run writes beside `report.md`.
pub const TIMELINE_FILE: &str = "timeline.svg";

/// What the timeline needs besides the history and the report: the scenario's limit and
/// window, and the run's key layout (which puts each key on its identity's lane).
#[derive(Debug, Clone, Copy)]
pub struct TimelineLimits<'a> {
    pub requests_max: u64,
    pub window_ms: u64,
    pub layout: &'a KeyLayout,
}

/// Everything the drawing steps read.
struct Ctx<'a> {
    index: &'a HistoryIndex,
    report: &'a Report,
    limits: &'a TimelineLimits<'a>,
    frame: Frame,
    placer: Placer<'a>,
    lanes: Lanes,
    data: Vec<LaneData>,
}

/// The run as one SVG document.
pub fn render_timeline(index: &HistoryIndex, report: &Report, limits: &TimelineLimits<'_>) -> String {
    let placer = Placer::new(index, report, limits.layout);
    let lanes = Lanes::choose(index, report, &placer);
    let frame = Frame {
        end_us: end_us(index, report),
        lanes: lanes.lanes.len(),
    };
    let data = series::gather(index, &lanes, &placer, &frame);
    let ctx = Ctx {
        index,
        report,
        limits,
        frame,
        placer,
        lanes,
        data,
    };
    let mut out = String::new();
    header::open(&mut out, &ctx);
    header::phases(&mut out, &ctx);
    for slot in 0..ctx.lanes.lanes.len() {
        let _ = write!(
            out,
            "<g class=\"lane\" data-identity=\"{}\">",
            ctx.lanes.lanes[slot].identity
        );
        plots::lane(&mut out, &ctx, slot);
        marks::lane(&mut out, &ctx, slot);
        let _ = writeln!(out, "</g>");
    }
    marks::run_wide_faults(&mut out, &ctx);
    marks::anomalies(&mut out, &ctx);
    header::axis(&mut out, &ctx);
    header::footer(&mut out, &ctx);
    let _ = writeln!(out, "</svg>");
    out
}

/// Render the timeline and write it into `dir`, noting in the report that it is there. A
/// file that cannot be written is a problem of the report, never an error: the run keeps
/// its report.
pub fn write_timeline(report: &mut Report, index: &HistoryIndex, limits: &TimelineLimits<'_>, dir: &Path) {
    let svg = render_timeline(index, report, limits);
    let path = dir.join(TIMELINE_FILE);
    match std::fs::write(&path, svg) {
        Ok(()) => report.timeline = Some(TIMELINE_FILE.to_owned()),
        Err(e) => report.problems.push(format!(
            "timeline: cannot write {}: {e} (the report is complete without it)",
            path.display()
        )),
    }
}

/// The end of the time axis: the last moment the history or the report names (at least 1 ms).
fn end_us(index: &HistoryIndex, report: &Report) -> u64 {
    let requests = index.requests.iter().map(|r| r.complete_us.unwrap_or(r.invoke_us));
    let samples = index.samples.iter().map(|s| s.t_end_us);
    let keyspace = index.keyspace.values().flatten().map(|(t, _)| *t);
    let faults = index.faults.iter().map(|f| f.t_us);
    let phases = index.phases.iter().map(|p| p.end_us.unwrap_or(p.start_us));
    let anomalies = lanes::anomalies(report).map(|a| a.t_us);
    requests
        .chain(samples)
        .chain(keyspace)
        .chain(faults)
        .chain(phases)
        .chain(anomalies)
        .chain(index.planted.values().copied())
        .max()
        .unwrap_or(0)
        .max(1000)
}
