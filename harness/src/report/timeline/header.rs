//! What frames the lanes: the document and its styles, the title and the legend, the
//! phases shaded behind everything, the time axis, and the note on what was not drawn.

use std::fmt::Write;

use super::Ctx;
use super::frame::{HEADER_H, PHASE_ROW_Y, WIDTH, X0, X1};
use super::lanes::anomalies;
use super::series::{OUTCOMES, outcome_of};
use super::svg::{clip, n, secs, text, title};

/// The styles every element refers to by class.
const STYLE: &str = "text{font-family:sans-serif;font-size:11px;fill:#333}\
.title{font-size:15px;font-weight:bold}.dim{fill:#777;font-size:10px}.id{font-weight:bold}\
.ph0{fill:#e9eef6}.ph1{fill:#f5f7fb}.grid{stroke:#dde1e6}\
.box{fill:#fff;fill-opacity:.6;stroke:#ccd}\
.limit{stroke:#c0392b;stroke-dasharray:5 3}.bound{stroke:#2471a3;stroke-dasharray:2 3}\
.line{fill:none;stroke-width:1.5}.dots{stroke:none}\
.counts{fill:#555;fill-opacity:.3}\
.no-ttl{fill:#e74c3c}.no-ttl-text{fill:#fff;font-weight:bold;font-size:10px}\
.ok{fill:#27ae60}.rej{fill:#e67e22}.err{fill:#8e44ad}.ind{fill:#95a5a6}\
.kl{fill:none;stroke-opacity:.5}.kh{stroke:none}\
.expired{stroke:#34495e;fill:#34495e}.expired .kl{stroke-dasharray:2 2}\
.evicted{stroke:#c0392b;fill:#c0392b}.del{stroke:#7f8c8d;fill:#7f8c8d}\
.planted{stroke:#117864;fill:#117864}\
.fault .kl{stroke:#b7950b;stroke-dasharray:1 2}.fault .kh{fill:#f1c40f;stroke:#7d6608}\
.anomaly line{stroke:#c0392b;stroke-width:1.5}\
.anomaly text{fill:#c0392b;font-weight:bold;font-size:10px;paint-order:stroke;stroke:#fff;stroke-width:3px}";

/// The document's opening: root, styles, background, title, summary line and legend.
pub(super) fn open(out: &mut String, ctx: &Ctx<'_>) {
    let height = ctx.frame.height();
    let _ = writeln!(
        out,
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{w}\" height=\"{h}\" viewBox=\"0 0 {w} {h}\">",
        w = n(WIDTH),
        h = n(height)
    );
    let r = ctx.report;
    let heading = format!(
        "{} × {}: {}",
        r.scenario,
        r.limiter.name,
        r.verdict.name().to_uppercase()
    );
    let _ = writeln!(out, "{}", title(&format!("timeline of {heading}")));
    let _ = writeln!(out, "<style>{STYLE}</style>");
    let _ = writeln!(out, "<rect width=\"100%\" height=\"100%\" fill=\"#fff\"/>");
    text(out, (8.0, 20.0), "title", "", &heading);
    text(out, (8.0, 36.0), "dim", "", &summary_line(ctx));
    legend(out, 8.0, 51.0);
    out.push('\n');
}

/// The limit and what the requests came to, in one line.
fn summary_line(ctx: &Ctx<'_>) -> String {
    let mut totals = [0u64; OUTCOMES];
    for r in &ctx.index.requests {
        totals[outcome_of(r)] += 1;
    }
    format!(
        "limit {} per {} ms window · {} requests: {} allowed, {} rejected, {} errors, {} without answer · seconds since the run started",
        ctx.limits.requests_max,
        ctx.limits.window_ms,
        ctx.index.requests.len(),
        totals[0],
        totals[1],
        totals[2],
        totals[3]
    )
}

/// One row of swatches saying what each mark means.
fn legend(out: &mut String, x0: f64, y: f64) {
    let items: [(&str, &str); 14] = [
        ("<rect class=\"ok\" width=\"8\" height=\"8\"/>", "allowed"),
        ("<rect class=\"rej\" width=\"8\" height=\"8\"/>", "rejected"),
        ("<rect class=\"err\" width=\"8\" height=\"8\"/>", "error"),
        ("<rect class=\"ind\" width=\"8\" height=\"8\"/>", "no answer"),
        (
            "<path class=\"line\" stroke=\"#1a5276\" d=\"M0 6H4V2H10\"/>",
            "counter (sampled)",
        ),
        (
            "<rect class=\"counts\" x=\"2\" width=\"3\" height=\"9\"/>",
            "count a request saw",
        ),
        ("<path class=\"limit\" d=\"M0 4H12\"/>", "limit"),
        ("<path class=\"line\" stroke=\"#1a5276\" d=\"M0 1L4 7H6L10 1\"/>", "TTL"),
        ("<rect class=\"no-ttl\" width=\"12\" height=\"8\"/>", "no TTL (PTTL -1)"),
        ("<path class=\"expired kh\" d=\"M1 1h6l-3 5z\"/>", "expired"),
        ("<path class=\"evicted kh\" d=\"M1 1h6l-3 5z\"/>", "evicted"),
        ("<path class=\"del kh\" d=\"M1 1h6l-3 5z\"/>", "del"),
        (
            "<g class=\"fault\"><path class=\"kh\" d=\"M4 0l4 4.5l-4 4.5l-4-4.5z\"/></g>",
            "fault",
        ),
        ("<path d=\"M4 0V9\" stroke=\"#c0392b\" stroke-width=\"2\"/>", "anomaly"),
    ];
    let mut x = x0;
    for (swatch, label) in items {
        let _ = write!(out, "<g transform=\"translate({} {})\">{swatch}</g>", n(x), n(y - 8.0));
        text(out, (x + 15.0, y), "dim", "", label);
        x += 22.0 + label.chars().count() as f64 * 5.4;
    }
}

/// Phases as shaded spans behind the lanes, named in the row above them; and the grid.
pub(super) fn phases(out: &mut String, ctx: &Ctx<'_>) {
    let frame = &ctx.frame;
    let bottom = frame.lanes_bottom();
    for (i, phase) in ctx.index.phases.iter().enumerate() {
        let end_us = phase.end_us.unwrap_or(frame.end_us);
        let (x0, x1) = (frame.x(phase.start_us), frame.x(end_us));
        let _ = write!(
            out,
            "<rect class=\"ph{}\" x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\">{}</rect>",
            i % 2,
            n(x0),
            n(PHASE_ROW_Y),
            n((x1 - x0).max(0.5)),
            n(bottom - PHASE_ROW_Y),
            title(&format!(
                "phase {}: {} – {}",
                phase.name,
                secs(phase.start_us),
                secs(end_us)
            ))
        );
        let room = ((x1 - x0 - 6.0) / 6.0).floor().max(0.0) as usize;
        if room >= 2 {
            text(out, (x0 + 3.0, PHASE_ROW_Y + 12.0), "dim", "", &clip(&phase.name, room));
        }
    }
    for (t_us, _) in frame.ticks() {
        let x = frame.x(t_us);
        let _ = write!(
            out,
            "<path class=\"grid\" d=\"M{x} {}V{}\"/>",
            n(HEADER_H),
            n(bottom),
            x = n(x)
        );
    }
    out.push('\n');
}

/// The time axis under the last lane.
pub(super) fn axis(out: &mut String, ctx: &Ctx<'_>) {
    let frame = &ctx.frame;
    let y = frame.lanes_bottom();
    let _ = write!(out, "<path stroke=\"#555\" d=\"M{} {y}H{}\"/>", n(X0), n(X1), y = n(y));
    for (t_us, label) in frame.ticks() {
        let x = frame.x(t_us);
        let _ = write!(out, "<path stroke=\"#555\" d=\"M{} {}v4\"/>", n(x), n(y));
        text(out, (x, y + 15.0), "", "middle", &label);
    }
    out.push('\n');
}

/// What the picture leaves out, said at its foot.
pub(super) fn footer(out: &mut String, ctx: &Ctx<'_>) {
    let mut notes = Vec::new();
    if ctx.lanes.identities_hidden > 0 {
        notes.push(format!(
            "+{} identities not drawn (lanes: identities with anomalies first, then the lowest numbers)",
            ctx.lanes.identities_hidden
        ));
    }
    let off_lane = anomalies(ctx.report)
        .filter(|a| ctx.placer.anomaly(a).is_some_and(|i| ctx.lanes.slot(i).is_none()))
        .count();
    if off_lane > 0 {
        notes.push(format!("{off_lane} anomalies on identities not drawn"));
    }
    let unlisted: usize = ctx
        .report
        .invariants
        .iter()
        .map(|c| c.anomalies_total.saturating_sub(c.anomalies.len()))
        .sum();
    if unlisted > 0 {
        notes.push(format!(
            "{unlisted} more anomalies than the report lists are not marked (report.json counts them)"
        ));
    }
    if ctx.lanes.lanes.is_empty() {
        notes.push("no identity sent a request or had a key sampled: nothing to draw".to_owned());
    }
    if !notes.is_empty() {
        let y = ctx.frame.lanes_bottom() + 40.0;
        text(out, (8.0, y), "dim", "", &notes.join(" · "));
    }
}
