//! Marks at moments: keyspace events and planted keys on their key's lane, fault strikes on
//! their identity's lane (or across the run), and every anomaly of the report. Marks closer
//! than a bucket share one; each group of marks carries one hover text, so their size is
//! bounded by the buckets, not by the events.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write;

use super::Ctx;
use super::frame::{COUNT_TOP, Frame, HEADER_H, ODD_H, ODD_TOP, PHASE_ROW_Y, TTL_H, TTL_TOP, X1};
use super::series::KEY_ENDS;
use super::svg::{esc, n, secs, text, title};
use crate::checker::Anomaly;
use crate::history::FaultRecord;

/// Moments that share one mark group: the buckets they fall in, how many, the first and last.
#[derive(Debug, Default)]
struct Moments {
    buckets: BTreeSet<usize>,
    count: usize,
    first_us: u64,
    last_us: u64,
}

impl Moments {
    fn add(&mut self, frame: &Frame, t_us: u64) {
        if self.count == 0 || t_us < self.first_us {
            self.first_us = t_us;
        }
        self.last_us = self.last_us.max(t_us);
        self.count += 1;
        self.buckets.insert(frame.bucket(t_us));
    }

    /// "at 1.234 s", or "3 times, 1.234 s – 2.345 s".
    fn when(&self) -> String {
        if self.count == 1 {
            format!("at {}", secs(self.first_us))
        } else {
            format!("{} times, {} – {}", self.count, secs(self.first_us), secs(self.last_us))
        }
    }

    /// A group of marks: a line from `y0` to `y1` and a head drawn by `head` at each bucket.
    fn draw(&self, out: &mut String, class: &str, (y0, y1): (f64, f64), head: impl Fn(f64) -> String, hover: &str) {
        let mut lines = String::new();
        let mut heads = String::new();
        for &b in &self.buckets {
            let x = Frame::bucket_x(b) + 1.0;
            let _ = write!(lines, "M{} {}V{}", n(x), n(y0), n(y1));
            heads.push_str(&head(x));
        }
        let _ = write!(
            out,
            "<g class=\"{class}\">{}<path class=\"kl\" d=\"{lines}\"/><path class=\"kh\" d=\"{heads}\"/></g>",
            title(hover)
        );
    }
}

/// A triangle pointing down at the top of the counter plot.
fn triangle(y: f64) -> impl Fn(f64) -> String {
    move |x| format!("M{} {}h6l-3 5z", n(x - 3.0), n(y))
}

/// A diamond whose top is at `y`.
fn diamond(y: f64) -> impl Fn(f64) -> String {
    move |x| format!("M{} {}l4 4.5l-4 4.5l-4-4.5z", n(x), n(y))
}

/// Lane `slot`'s keyspace events, planted keys and fault strikes.
pub(super) fn lane(out: &mut String, ctx: &Ctx<'_>, slot: usize) {
    let top = Frame::lane_top(slot);
    let span = (top + COUNT_TOP, top + TTL_TOP + TTL_H);
    for key in &ctx.lanes.lanes[slot].keys {
        let events = ctx.index.keyspace.get(key).map(Vec::as_slice).unwrap_or_default();
        for kind in KEY_ENDS {
            let mut moments = Moments::default();
            for (t_us, _) in events.iter().filter(|(_, e)| e == kind) {
                moments.add(&ctx.frame, *t_us);
            }
            if moments.count > 0 {
                let hover = format!("{key} {kind} {} (keyspace notification)", moments.when());
                moments.draw(out, kind, span, triangle(span.0), &hover);
            }
        }
        if let Some(&t_us) = ctx.index.planted.get(key) {
            let mut moments = Moments::default();
            moments.add(&ctx.frame, t_us);
            let hover = format!("{key} planted by the scenario's [[setup]] {}", moments.when());
            moments.draw(out, "planted", span, triangle(span.0), &hover);
        }
    }
    let identity = ctx.lanes.lanes[slot].identity;
    let strikes = faults_where(ctx, |f| ctx.placer.fault(f) == Some(identity));
    for (fault, (moments, first)) in &strikes {
        let hover = fault_hover(*fault, moments, first);
        moments.draw(out, "fault", (top + 9.0, top + ODD_TOP + ODD_H), diamond(top), &hover);
    }
    out.push('\n');
}

/// Faults that struck no identity the history can tell: across every lane, marked in the
/// phase row.
pub(super) fn run_wide_faults(out: &mut String, ctx: &Ctx<'_>) {
    let strikes = faults_where(ctx, |f| ctx.placer.fault(f).is_none());
    for (fault, (moments, first)) in &strikes {
        let hover = fault_hover(*fault, moments, first);
        let span = (PHASE_ROW_Y + 9.0, ctx.frame.lanes_bottom());
        moments.draw(out, "fault", span, diamond(PHASE_ROW_Y), &hover);
    }
}

/// The strikes of the faults `pick` keeps, per fault of the scenario, with the first strike.
fn faults_where<'a>(
    ctx: &'a Ctx<'_>,
    pick: impl Fn(&FaultRecord) -> bool,
) -> BTreeMap<usize, (Moments, &'a FaultRecord)> {
    let mut strikes: BTreeMap<usize, (Moments, &FaultRecord)> = BTreeMap::new();
    for f in ctx.index.faults.iter().filter(|f| pick(f)) {
        let entry = strikes.entry(f.fault).or_insert_with(|| (Moments::default(), f));
        entry.0.add(&ctx.frame, f.t_us);
    }
    strikes
}

/// "expire-between-round-trips (fault 0) at 1.234 s: PEXPIRE rl:0 1 ..."
fn fault_hover(fault: usize, moments: &Moments, first: &FaultRecord) -> String {
    let what = if moments.count == 1 { "" } else { "first: " };
    format!(
        "{} (fault {fault}) {}; {what}{}",
        first.kind,
        moments.when(),
        first.effect
    )
}

/// Anomalies of one kind on one lane close enough to share a label.
struct Group<'a> {
    slot: Option<usize>,
    members: Vec<&'a Anomaly>,
}

/// Anomalies within this many pixels of their group's first share its label.
const LABEL_GROUP_PX: f64 = 80.0;

/// Every anomaly the report lists, at its moment: on its identity's lane, or across every
/// lane when no identity is known (anomalies of identities not drawn are counted in the
/// footer). Each has its own mark; a label names a group of one kind (`×N`), and the labels
/// of a lane take turns on three rows.
pub(super) fn anomalies(out: &mut String, ctx: &Ctx<'_>) {
    let mut turn: BTreeMap<Option<usize>, usize> = BTreeMap::new();
    for group in groups(ctx) {
        let row = turn.entry(group.slot).or_default();
        let (y0, y1, label_y) = match group.slot {
            Some(s) => {
                let top = Frame::lane_top(s);
                (
                    top + 2.0,
                    top + ODD_TOP + ODD_H,
                    top + COUNT_TOP + 15.0 + 11.0 * (*row % 3) as f64,
                )
            }
            None => (PHASE_ROW_Y, ctx.frame.lanes_bottom(), HEADER_H - 4.0),
        };
        *row += 1;
        let label = match group.members.len() {
            1 => group.members[0].kind.clone(),
            k => format!("{} ×{k}", group.members[0].kind),
        };
        for (i, a) in group.members.iter().enumerate() {
            anomaly(out, ctx, a, (y0, y1), (i == 0).then_some((label.as_str(), label_y)));
        }
    }
    out.push('\n');
}

/// The anomalies to draw, grouped by lane and kind and nearness, in the order of their lane
/// and first moment.
fn groups<'a>(ctx: &Ctx<'a>) -> Vec<Group<'a>> {
    let mut by_kind: BTreeMap<(Option<usize>, &str), Vec<&Anomaly>> = BTreeMap::new();
    for a in super::lanes::anomalies(ctx.report) {
        let slot = match ctx.placer.anomaly(a) {
            Some(identity) => match ctx.lanes.slot(identity) {
                Some(slot) => Some(slot),
                None => continue,
            },
            None => None,
        };
        by_kind.entry((slot, a.kind.as_str())).or_default().push(a);
    }
    let mut groups: Vec<Group<'a>> = Vec::new();
    for ((slot, _), mut members) in by_kind {
        members.sort_by_key(|a| a.t_us);
        for a in members {
            match groups.last_mut() {
                Some(g)
                    if g.slot == slot
                        && g.members[0].kind == a.kind
                        && ctx.frame.x(a.t_us) - ctx.frame.x(g.members[0].t_us) < LABEL_GROUP_PX =>
                {
                    g.members.push(a);
                }
                _ => groups.push(Group { slot, members: vec![a] }),
            }
        }
    }
    groups.sort_by_key(|g| (g.slot, g.members[0].t_us));
    groups
}

/// One anomaly: a vertical line, and its group's label if it carries it, with the evidence
/// as hover text.
fn anomaly(out: &mut String, ctx: &Ctx<'_>, a: &Anomaly, (y0, y1): (f64, f64), label: Option<(&str, f64)>) {
    let x = ctx.frame.x(a.t_us);
    let _ = write!(
        out,
        "<g class=\"anomaly\" data-kind=\"{}\" data-key=\"{}\" data-t-us=\"{}\">{}",
        esc(&a.kind),
        esc(&a.key),
        a.t_us,
        title(&format!("{} {} at {}: {}", a.kind, a.key, secs(a.t_us), a.because))
    );
    let _ = write!(
        out,
        "<line x1=\"{x}\" y1=\"{}\" x2=\"{x}\" y2=\"{}\"/>",
        n(y0),
        n(y1),
        x = n(x)
    );
    if let Some((label, label_y)) = label {
        let (label_x, anchor) = if x > X1 - 110.0 {
            (x - 4.0, "end")
        } else {
            (x + 4.0, "")
        };
        text(out, (label_x, label_y), "", anchor, label);
    }
    out.push_str("</g>");
}
