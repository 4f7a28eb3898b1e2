//! The run's clock: microseconds since the run started, from a monotonic source.

use std::time::{Duration, Instant};

/// A monotonic clock shared by every role of one run; `now_us` is what the history records.
#[derive(Debug, Clone, Copy)]
pub struct RunClock {
    started: Instant,
}

impl RunClock {
    pub fn start() -> Self {
        Self {
            started: Instant::now(),
        }
    }

    /// Microseconds since the run started.
    pub fn now_us(&self) -> u64 {
        u64::try_from(self.started.elapsed().as_micros()).unwrap_or(u64::MAX)
    }

    /// The instant `offset_us` after the run started (for schedules).
    pub fn instant_at(&self, offset_us: u64) -> Instant {
        self.started + Duration::from_micros(offset_us)
    }
}
