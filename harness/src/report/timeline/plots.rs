//! One lane's plots: its labels; the counter of each key as sampled, with the limit and the
//! counts requests reported; each key's TTL with the bound and the spans without expiry;
//! and the requests by outcome, per bucket.

use std::fmt::Write;

use super::Ctx;
use super::frame::{
    BUCKET_W, BUCKETS, COUNT_H, COUNT_TOP, Frame, ODD_H, ODD_TOP, REQ_H, REQ_TOP, TTL_H, TTL_TOP, X0, X1,
};
use super::series::{KeySeries, LaneData, OUTCOMES, Seen};
use super::svg::{StepPath, clip, esc, n, secs, text, title};

/// One colour per drawn key of a lane (its counter and its TTL).
pub(super) const KEY_COLOURS: [&str; 4] = ["#1a5276", "#7d3c98", "#0e6655", "#a04000"];
/// How many no-TTL spans of a key are named in its hover text and labelled.
const SPANS_NAMED_MAX: usize = 5;
const SPANS_LABELLED_MAX: usize = 24;

/// Draw lane `slot`'s labels and plots.
pub(super) fn lane(out: &mut String, ctx: &Ctx<'_>, slot: usize) {
    let top = Frame::lane_top(slot);
    labels(out, ctx, slot, top);
    counter(out, ctx, slot, top);
    ttl(out, ctx, slot, top);
    requests(out, ctx, slot, top);
    out.push('\n');
}

/// The identity and its keys (in their colours) left of the plots; the rows' names.
fn labels(out: &mut String, ctx: &Ctx<'_>, slot: usize, top: f64) {
    let lane = &ctx.lanes.lanes[slot];
    text(
        out,
        (8.0, top + COUNT_TOP + 10.0),
        "id",
        "",
        &format!("identity {}", lane.identity),
    );
    let mut y = top + COUNT_TOP + 23.0;
    for (k, key) in lane.keys.iter().enumerate() {
        let _ = write!(
            out,
            "<rect x=\"8\" y=\"{}\" width=\"8\" height=\"8\" fill=\"{}\"/>",
            n(y - 8.0),
            KEY_COLOURS[k]
        );
        let _ = write!(
            out,
            "<text x=\"20\" y=\"{}\">{}{}</text>",
            n(y),
            esc(&clip(key, 18)),
            title(key)
        );
        y += 12.0;
    }
    if lane.keys_hidden > 0 {
        text(
            out,
            (8.0, y),
            "dim",
            "",
            &format!("+{} keys not drawn", lane.keys_hidden),
        );
    } else if lane.keys.is_empty() {
        text(out, (8.0, y), "dim", "", "no limiter key seen");
    }
    text(out, (8.0, top + TTL_TOP + 16.0), "dim", "", "TTL");
    text(out, (8.0, top + REQ_TOP + 15.0), "dim", "", "requests");
}

/// A plot's frame.
fn frame_box(out: &mut String, y: f64, h: f64) {
    let _ = write!(
        out,
        "<rect class=\"box\" x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\"/>",
        n(X0),
        n(y),
        n(X1 - X0),
        n(h)
    );
}

/// The counter plot: the limit, the counts requests reported, each key's sampled value.
fn counter(out: &mut String, ctx: &Ctx<'_>, slot: usize, top: f64) {
    let data = &ctx.data[slot];
    let y0 = top + COUNT_TOP;
    let limit = i64::try_from(ctx.limits.requests_max).unwrap_or(i64::MAX);
    let v_max = data.value_max().max(limit).max(1);
    let scale = v_max as f64 * 1.1;
    let y = |v: i64| y0 + COUNT_H - COUNT_H * (v.max(0) as f64 / scale);
    frame_box(out, y0, COUNT_H);
    let y_limit = y(limit);
    let _ = write!(
        out,
        "<path class=\"limit\" d=\"M{} {y}H{}\">{}</path>",
        n(X0),
        n(X1),
        title(&format!(
            "limit: {} requests per {} ms window",
            ctx.limits.requests_max, ctx.limits.window_ms
        )),
        y = n(y_limit)
    );
    text(out, (X1 - 4.0, y_limit - 3.0), "dim", "end", &format!("limit {limit}"));
    text(out, (X0 - 4.0, y_limit + 3.0), "dim", "end", &limit.to_string());
    if y_limit - y(v_max) >= 10.0 {
        text(out, (X0 - 4.0, y(v_max) + 3.0), "dim", "end", &v_max.to_string());
    }
    request_counts(out, data, &y);
    let lane = &ctx.lanes.lanes[slot];
    for (k, series) in data.keys.iter().enumerate() {
        let colour = KEY_COLOURS[k];
        let hover = format!("{}: its value as the observer sampled it", lane.keys[k]);
        let value = |s: &Seen| (s.pttl_ms != -2).then_some(s.value).flatten().map(&y);
        step_line(out, &ctx.frame, series, colour, &hover, value);
    }
}

/// The lowest to the highest count requests reported, per bucket, as a faint band (at least
/// 1.5 px thick): one closed shape per stretch of buckets with counts. Where counts fill
/// most buckets, three buckets make one cell, which keeps a dense run's band small.
fn request_counts(out: &mut String, data: &LaneData, y: &impl Fn(i64) -> f64) {
    let occupied = data.counts.iter().filter(|c| c.is_some()).count();
    let per_cell = if occupied <= BUCKETS / 4 { 1 } else { 3 };
    let cells: Vec<Option<(i64, i64)>> = data
        .counts
        .chunks(per_cell)
        .map(|chunk| {
            chunk
                .iter()
                .flatten()
                .copied()
                .reduce(|a, b| (a.0.min(b.0), a.1.max(b.1)))
        })
        .collect();
    let cell_w = BUCKET_W * per_cell as f64;
    let mut d = String::new();
    let mut c = 0;
    while c < cells.len() {
        let from = c;
        while c < cells.len() && cells[c].is_some() {
            c += 1;
        }
        if c == from {
            c += 1;
            continue;
        }
        let edges: Vec<(f64, f64)> = cells[from..c]
            .iter()
            .flatten()
            .map(|&(lo, hi)| (y(hi), y(lo).max(y(hi) + 1.5)))
            .collect();
        band(&mut d, X0 + from as f64 * cell_w, cell_w, &edges);
    }
    if !d.is_empty() {
        let _ = write!(
            out,
            "<path class=\"counts\" d=\"{d}\">{}</path>",
            title("the count each request's limiter reported (lowest to highest per moment)")
        );
    }
}

/// One closed shape over cells of width `w` from `x0`: along the upper edges (the first of
/// each pair), back along the lower ones.
fn band(d: &mut String, x0: f64, w: f64, edges: &[(f64, f64)]) {
    let x_left = |i: usize| x0 + i as f64 * w;
    let last = edges.len() - 1;
    let _ = write!(d, "M{} {}", n(x_left(0)), n(edges[0].0));
    for i in 1..=last {
        if n(edges[i].0) != n(edges[i - 1].0) {
            let _ = write!(d, "H{}V{}", n(x_left(i)), n(edges[i].0));
        }
    }
    let _ = write!(d, "H{}V{}", n(x_left(last) + w), n(edges[last].1));
    for i in (0..last).rev() {
        if n(edges[i].1) != n(edges[i + 1].1) {
            let _ = write!(d, "H{}V{}", n(x_left(i + 1)), n(edges[i].1));
        }
    }
    let _ = write!(d, "H{}Z", n(x_left(0)));
}

/// A key's sampled series as a step line (the value holds until the next sample), with a
/// dot per sample when they are sparse enough to tell apart; dense samples draw the lowest,
/// highest and last value per cell. `value` gives a sample's y, or
/// `None` where the line breaks (gone, or nothing to draw).
fn step_line(
    out: &mut String,
    frame: &Frame,
    series: &KeySeries,
    colour: &str,
    hover: &str,
    value: impl Fn(&Seen) -> Option<f64>,
) {
    // Samples denser than a bucket in two: three buckets make one cell of the line.
    let per_cell = if series.points.len() > BUCKETS / 2 { 3 } else { 1 };
    let mut line = StepPath::default();
    let mut dots = String::new();
    let mut dot_buckets = 0usize;
    let mut last_bucket = None;
    let mut last_x = X0;
    for (t_us, seen) in &series.points {
        let b = frame.bucket(*t_us);
        let x = Frame::bucket_x(b - b % per_cell);
        last_x = x;
        match seen.as_ref().and_then(&value) {
            Some(y) => {
                line.point(x, y);
                if last_bucket != Some(b) {
                    let _ = write!(dots, "M{} {}h3v3h-3z", n(x - 1.5), n(y - 1.5));
                    dot_buckets += 1;
                    last_bucket = Some(b);
                }
            }
            None => line.cut(x),
        }
    }
    let d = line.finish(last_x);
    if d.is_empty() {
        return;
    }
    let _ = write!(
        out,
        "<path class=\"line\" stroke=\"{colour}\" d=\"{d}\">{}</path>",
        title(hover)
    );
    if dot_buckets <= BUCKETS / 4 {
        let _ = write!(out, "<path class=\"dots\" fill=\"{colour}\" d=\"{dots}\"/>");
    }
}

/// The TTL plot: the bound, the spans each key had no expiry, each key's sampled TTL.
fn ttl(out: &mut String, ctx: &Ctx<'_>, slot: usize, top: f64) {
    let data = &ctx.data[slot];
    let y0 = top + TTL_TOP;
    let bound = &ctx.report.keys.ttl_bound;
    let bound_ms = bound.ttl_max_ms.saturating_add(bound.ttl_slack_ms);
    let t_max = (bound_ms as f64).max(data.ttl_max_ms() as f64).max(1.0);
    let scale = t_max * 1.1;
    let y = |ms: i64| y0 + TTL_H - TTL_H * (ms.max(0) as f64 / scale);
    frame_box(out, y0, TTL_H);
    let y_bound = y(i64::try_from(bound_ms).unwrap_or(i64::MAX));
    let _ = write!(
        out,
        "<path class=\"bound\" d=\"M{} {y}H{}\">{}</path>",
        n(X0),
        n(X1),
        title(&format!(
            "TTL bound: {} ms + slack {} ms ({})",
            bound.ttl_max_ms, bound.ttl_slack_ms, bound.from
        )),
        y = n(y_bound)
    );
    text(out, (X0 - 4.0, y_bound + 3.0), "dim", "end", &format!("{bound_ms} ms"));
    let lane = &ctx.lanes.lanes[slot];
    for (k, series) in data.keys.iter().enumerate() {
        no_ttl(out, &ctx.frame, &lane.keys[k], series, (y0, TTL_H));
    }
    for (k, series) in data.keys.iter().enumerate() {
        let hover = format!("{}: its TTL (PTTL) as the observer sampled it", lane.keys[k]);
        let value = |s: &Seen| (s.pttl_ms >= 0).then(|| y(s.pttl_ms));
        step_line(out, &ctx.frame, series, KEY_COLOURS[k], &hover, value);
    }
}

/// The spans in which samples found `key` without expiry (PTTL -1), from the first such
/// sample to the next sample that did not (or the run's end), merged per bucket.
fn no_ttl_spans(frame: &Frame, series: &KeySeries) -> Vec<(u64, u64)> {
    let mut spans: Vec<(u64, u64)> = Vec::new();
    let mut open: Option<u64> = None;
    for (t_us, seen) in &series.points {
        let immortal = seen.is_some_and(|s| s.pttl_ms == -1);
        match (immortal, open) {
            (true, None) => open = Some(*t_us),
            (false, Some(from)) => {
                open = None;
                match spans.last_mut() {
                    Some(last) if frame.bucket(from) <= frame.bucket(last.1) + 1 => last.1 = *t_us,
                    _ => spans.push((from, *t_us)),
                }
            }
            _ => {}
        }
    }
    if let Some(from) = open {
        spans.push((from, frame.end_us));
    }
    spans
}

/// Red bands over the TTL plot where `key` had no expiry, loud on purpose.
fn no_ttl(out: &mut String, frame: &Frame, key: &str, series: &KeySeries, (y0, h): (f64, f64)) {
    let spans = no_ttl_spans(frame, series);
    if spans.is_empty() {
        return;
    }
    let named: Vec<String> = spans
        .iter()
        .take(SPANS_NAMED_MAX)
        .map(|&(from, to)| {
            let to = if to >= frame.end_us {
                "the run's end".to_owned()
            } else {
                secs(to)
            };
            format!("{} – {to}", secs(from))
        })
        .collect();
    let more = match spans.len().saturating_sub(SPANS_NAMED_MAX) {
        0 => String::new(),
        m => format!(", and {m} more spans"),
    };
    let mut d = String::new();
    for &(from, to) in &spans {
        let (x0, x1) = (frame.x(from), frame.x(to));
        let _ = write!(
            d,
            "M{} {}h{}v{}h{}z",
            n(x0),
            n(y0),
            n((x1 - x0).max(1.0)),
            n(h),
            n(-(x1 - x0).max(1.0))
        );
    }
    let _ = write!(
        out,
        "<g class=\"no-ttl\" data-key=\"{}\">{}<path d=\"{d}\"/>",
        esc(key),
        title(&format!("{key} had no TTL (PTTL -1): {}{more}", named.join(", ")))
    );
    for &(from, to) in spans.iter().take(SPANS_LABELLED_MAX) {
        let (x0, x1) = (frame.x(from), frame.x(to));
        if x1 - x0 >= 44.0 {
            text(
                out,
                ((x0 + x1) / 2.0, y0 + h / 2.0 + 4.0),
                "no-ttl-text",
                "middle",
                "no TTL",
            );
        }
    }
    out.push_str("</g>");
}

/// The requests by outcome, per bucket: admissions up from the middle, rejections down, each
/// as tall as its share of the bucket's requests; errors and requests without answer below.
fn requests(out: &mut String, ctx: &Ctx<'_>, slot: usize, top: f64) {
    let data = &ctx.data[slot];
    let identity = ctx.lanes.lanes[slot].identity;
    let mid = top + REQ_TOP + REQ_H / 2.0;
    let half = REQ_H / 2.0 - 1.0;
    let _ = write!(out, "<path class=\"grid\" d=\"M{} {m}H{}\"/>", n(X0), n(X1), m = n(mid));
    // Admissions and rejections as their share of the bucket's requests; the rare kinds
    // full height wherever there is one.
    let height = |o: usize, full: f64, share: bool| {
        move |c: &[u32; OUTCOMES]| match c[o] {
            0 => 0.0,
            _ if !share => full,
            k => (full * f64::from(k) / f64::from(c.iter().sum::<u32>()))
                .round()
                .max(2.0),
        }
    };
    let odd_mid = top + ODD_TOP + ODD_H / 2.0;
    let rows: [(usize, &str, f64, f64, &str); OUTCOMES] = [
        (0, "ok", mid, -1.0, "allowed"),
        (1, "rej", mid, 1.0, "rejected"),
        (2, "err", odd_mid, -1.0, "errors (the server answered with an error)"),
        (
            3,
            "ind",
            odd_mid,
            1.0,
            "without answer (indeterminate, or never answered)",
        ),
    ];
    for (o, class, base, dir, what) in rows {
        if data.totals[o] == 0 {
            continue;
        }
        let share = o < 2;
        let full = if share { half } else { ODD_H / 2.0 };
        let heights = data.outcomes.iter().map(height(o, full, share));
        let hover = format!("identity {identity}: {} {what}", data.totals[o]);
        let _ = write!(
            out,
            "<path class=\"{class}\" d=\"{}\">{}</path>",
            area(base, dir, heights),
            title(&hover)
        );
    }
}

/// A filled step area along `base`, `dir` -1 upwards and 1 downwards, one height per bucket.
fn area(base: f64, dir: f64, heights: impl Iterator<Item = f64>) -> String {
    let mut d = format!("M{} {}", n(X0), n(base));
    let mut at = 0.0;
    for (b, h) in heights.enumerate() {
        if n(h) != n(at) {
            let _ = write!(d, "H{}V{}", n(Frame::bucket_x(b)), n(base + dir * h));
            at = h;
        }
    }
    let _ = write!(d, "H{}V{}Z", n(X1), n(base));
    d
}
