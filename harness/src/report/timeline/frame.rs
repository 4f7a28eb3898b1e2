//! The picture's geometry: where the plot is, how a moment of the run maps to x, the
//! buckets everything dense is counted in, and where each lane and its sub-plots sit.

/// The whole picture's width, in pixels.
pub(super) const WIDTH: f64 = 1200.0;
/// The plot's left edge (labels live left of it) and right edge.
pub(super) const X0: f64 = 150.0;
pub(super) const X1: f64 = 1180.0;
/// The width of one bucket: requests, samples, markers closer than this share one.
pub(super) const BUCKET_W: f64 = 2.0;
/// How many buckets span the plot.
pub(super) const BUCKETS: usize = ((X1 - X0) / BUCKET_W) as usize;

/// The title, the legend and the phase row above the first lane.
pub(super) const HEADER_H: f64 = 76.0;
/// The row of phase names and run-wide markers, inside the header's last 18 px.
pub(super) const PHASE_ROW_Y: f64 = HEADER_H - 18.0;
/// The time axis below the last lane.
pub(super) const AXIS_H: f64 = 30.0;
/// The note about identities not drawn, below the axis.
pub(super) const FOOTER_H: f64 = 22.0;

/// One lane's rows, as offsets from its top, and its height.
pub(super) const COUNT_TOP: f64 = 10.0;
pub(super) const COUNT_H: f64 = 60.0;
pub(super) const TTL_TOP: f64 = COUNT_TOP + COUNT_H + 5.0;
pub(super) const TTL_H: f64 = 26.0;
pub(super) const REQ_TOP: f64 = TTL_TOP + TTL_H + 5.0;
/// Admissions go up from the middle of this row, rejections down.
pub(super) const REQ_H: f64 = 24.0;
/// Errors (upper half) and unanswered requests (lower half).
pub(super) const ODD_TOP: f64 = REQ_TOP + REQ_H + 2.0;
pub(super) const ODD_H: f64 = 10.0;
pub(super) const LANE_H: f64 = ODD_TOP + ODD_H + 12.0;

/// The run's time span on the x axis: 0 to `end_us`.
#[derive(Debug, Clone, Copy)]
pub(super) struct Frame {
    pub end_us: u64,
    pub lanes: usize,
}

impl Frame {
    /// x of a moment (clamped to the plot).
    pub(super) fn x(&self, t_us: u64) -> f64 {
        X0 + (X1 - X0) * (t_us.min(self.end_us) as f64 / self.end_us as f64)
    }

    /// The bucket a moment falls in.
    pub(super) fn bucket(&self, t_us: u64) -> usize {
        let b = u128::from(t_us.min(self.end_us)) * BUCKETS as u128 / u128::from(self.end_us);
        (b as usize).min(BUCKETS - 1)
    }

    /// The left edge of bucket `b`.
    pub(super) fn bucket_x(b: usize) -> f64 {
        X0 + b as f64 * BUCKET_W
    }

    /// The top of lane `slot`.
    pub(super) fn lane_top(slot: usize) -> f64 {
        HEADER_H + slot as f64 * LANE_H
    }

    /// The bottom of the last lane: where the axis starts.
    pub(super) fn lanes_bottom(&self) -> f64 {
        Self::lane_top(self.lanes)
    }

    pub(super) fn height(&self) -> f64 {
        self.lanes_bottom() + AXIS_H + FOOTER_H
    }

    /// Axis ticks: a round step giving at most about ten of them, with labels.
    pub(super) fn ticks(&self) -> Vec<(u64, String)> {
        let step_us = tick_step_us(self.end_us);
        let decimals = match step_us {
            s if s >= 1_000_000 => 0,
            s if s >= 100_000 => 1,
            s if s >= 10_000 => 2,
            _ => 3,
        };
        (0..)
            .map(|i| i * step_us)
            .take_while(|&t| t <= self.end_us)
            .map(|t| (t, format!("{:.*} s", decimals, t as f64 / 1e6)))
            .collect()
    }
}

/// 1, 2 or 5 times a power of ten microseconds, so that `end_us` holds at most ten steps.
fn tick_step_us(end_us: u64) -> u64 {
    let mut unit = 1u64;
    loop {
        for m in [1, 2, 5] {
            let step = unit.saturating_mul(m);
            if end_us / step <= 10 {
                return step;
            }
        }
        unit = unit.saturating_mul(10);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ticks_are_round_and_few() {
        let f = Frame {
            end_us: 3_700_000,
            lanes: 1,
        };
        let ticks = f.ticks();
        assert_eq!(ticks[1], (500_000, "0.5 s".to_owned()));
        assert_eq!(ticks.len(), 8);
        assert_eq!(f.bucket(0), 0);
        assert_eq!(f.bucket(3_700_000), BUCKETS - 1);
        assert_eq!(f.x(3_700_000), X1);
    }
}
