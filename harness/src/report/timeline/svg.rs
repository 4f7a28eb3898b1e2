//! The few SVG primitives the timeline is written with: escaped text, fixed number
//! formatting (the same input gives the same bytes), and a path builder that draws a step
//! line bounded by the number of buckets, not by the number of points.

use std::fmt::Write;

pub(super) use crate::xml::escape as esc;

/// `text` cut to `chars_max` characters (with an ellipsis), for labels; the full text goes
/// in a `<title>` or a `data-` attribute.
pub(super) fn clip(text: &str, chars_max: usize) -> String {
    if text.chars().count() <= chars_max {
        return text.to_owned();
    }
    let mut out: String = text.chars().take(chars_max.saturating_sub(1)).collect();
    out.push('…');
    out
}

/// A coordinate with at most one decimal, never `-0`.
pub(super) fn n(v: f64) -> String {
    let tenths = (v * 10.0).round() as i64;
    if tenths % 10 == 0 {
        format!("{}", tenths / 10)
    } else {
        let sign = if tenths < 0 { "-" } else { "" };
        format!("{sign}{}.{}", tenths.abs() / 10, tenths.abs() % 10)
    }
}

/// Seconds since the run started, to the millisecond: "1.234 s".
pub(super) fn secs(t_us: u64) -> String {
    format!("{}.{:03} s", t_us / 1_000_000, (t_us % 1_000_000) / 1000)
}

/// A `<title>` (hover text) element.
pub(super) fn title(text: &str) -> String {
    format!("<title>{}</title>", esc(text))
}

/// `<text>` at (x, y) with an optional class and anchor.
pub(super) fn text(out: &mut String, (x, y): (f64, f64), class: &str, anchor: &str, body: &str) {
    let _ = write!(out, "<text x=\"{}\" y=\"{}\"", n(x), n(y));
    if !class.is_empty() {
        let _ = write!(out, " class=\"{class}\"");
    }
    if !anchor.is_empty() {
        let _ = write!(out, " text-anchor=\"{anchor}\"");
    }
    let _ = write!(out, ">{}</text>", esc(body));
}

/// A step line through points given bucket by bucket: the value holds until the next point
/// (the observer saw it then; it knows nothing in between). Within one bucket only the
/// lowest, the highest and the last value are drawn, and a break inside a bucket that goes
/// on is not drawn, so the path stays small whatever the number of points.
#[derive(Debug, Default)]
pub(super) struct StepPath {
    d: String,
    /// The open stretch's bucket x and the values seen in it: (x, first y, min, max, last).
    open: Option<(f64, f64, f64, f64, f64)>,
    /// Where the open stretch ends unless a point in its bucket follows.
    cut_at: Option<f64>,
}

impl StepPath {
    /// A point at bucket position `x` with value `y` (both in pixels).
    pub(super) fn point(&mut self, x: f64, y: f64) {
        if let Some(cut) = self.cut_at.take()
            && self.open.is_some_and(|open| open.0 != x)
        {
            self.end(cut);
        }
        match &mut self.open {
            Some((bx, _, lo, hi, last)) if *bx == x => {
                *lo = lo.min(y);
                *hi = hi.max(y);
                *last = y;
            }
            Some(_) => {
                self.flush();
                let _ = write!(self.d, "H{}V{}", n(x), n(y));
                self.open = Some((x, y, y, y, y));
            }
            None => {
                let _ = write!(self.d, "M{} {}", n(x), n(y));
                self.open = Some((x, y, y, y, y));
            }
        }
    }

    /// End the stretch at `x` (the key was gone, or had no value to draw), unless the next
    /// point is in the same bucket.
    pub(super) fn cut(&mut self, x: f64) {
        if self.open.is_some() && self.cut_at.is_none() {
            self.cut_at = Some(x);
        }
    }

    fn end(&mut self, x: f64) {
        if let Some(open) = self.open {
            self.flush();
            if n(x) != n(open.0) {
                let _ = write!(self.d, "H{}", n(x));
            }
            self.open = None;
        }
    }

    /// Emit the vertical extent of the open bucket, ending on its last value: to the nearer
    /// extreme first, then the other, then the last.
    fn flush(&mut self) {
        let Some((_, first, lo, hi, last)) = self.open else {
            return;
        };
        let order = if (first - lo).abs() <= (first - hi).abs() {
            [lo, hi, last]
        } else {
            [hi, lo, last]
        };
        let mut at = first;
        for y in order {
            if n(y) != n(at) {
                let _ = write!(self.d, "V{}", n(y));
                at = y;
            }
        }
        if let Some(open) = &mut self.open {
            *open = (open.0, last, last, last, last);
        }
    }

    /// The path data, ended at `x_end` when a stretch is still open.
    pub(super) fn finish(mut self, x_end: f64) -> String {
        let at = self.cut_at.take().unwrap_or(x_end);
        self.end(at);
        self.d
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_have_one_fixed_form() {
        assert_eq!(n(0.0), "0");
        assert_eq!(n(-0.04), "0");
        assert_eq!(n(12.25), "12.3");
        assert_eq!(n(-3.5), "-3.5");
        assert_eq!(n(-0.5), "-0.5");
        assert_eq!(n(1030.0), "1030");
        assert_eq!(secs(1_234_567), "1.234 s");
    }

    #[test]
    fn text_is_escaped_and_made_legal_xml() {
        assert_eq!(esc("a<b&\"c'>"), "a&lt;b&amp;&quot;c&#39;&gt;");
        assert_eq!(esc("k\u{1}y"), "k\u{fffd}y");
        assert_eq!(clip("abcdef", 4), "abc…");
        assert_eq!(clip("abc", 4), "abc");
    }

    #[test]
    fn a_step_path_keeps_three_values_per_bucket() {
        let mut p = StepPath::default();
        for y in [5.0, 9.0, 1.0, 4.0, 3.0] {
            p.point(10.0, y);
        }
        p.point(12.0, 7.0);
        p.cut(12.0);
        p.point(12.0, 8.0);
        p.cut(14.0);
        p.point(16.0, 2.0);
        assert_eq!(p.finish(20.0), "M10 5V1V9V3H12V7V8H14M16 2H20");
    }
}
