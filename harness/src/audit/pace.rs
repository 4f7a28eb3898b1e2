//! Pacing: the audit never sends more than `ops_per_s` commands a second.

use std::time::Duration;

use tokio::time::Instant;

/// Paces commands so that, counted from the first one, no more than `ops_per_s` ×
/// seconds elapsed have been sent: each batch waits for its own budget before it goes, and
/// time spent idle earns no credit for a later burst.
#[derive(Debug)]
pub struct Pacer {
    interval: Duration,
    ops_per_s: u32,
    /// When the budget for everything admitted so far has accrued.
    paid_until: Option<Instant>,
    sent: u64,
}

impl Pacer {
    pub fn new(ops_per_s: u32) -> Self {
        let ops_per_s = ops_per_s.max(1);
        Self {
            interval: Duration::from_secs(1) / ops_per_s,
            ops_per_s,
            paid_until: None,
            sent: 0,
        }
    }

    /// Wait until `n` more commands may go.
    pub async fn admit(&mut self, n: u64) {
        let due = self.reserve(n, Instant::now());
        tokio::time::sleep_until(due).await;
        self.sent += n;
    }

    /// When `n` commands asked for at `now` may go; books their budget.
    fn reserve(&mut self, n: u64, now: Instant) -> Instant {
        let from = self.paid_until.map_or(now, |paid| paid.max(now));
        let due = from + self.interval * u32::try_from(n).unwrap_or(u32::MAX);
        self.paid_until = Some(due);
        due
    }

    /// A tenth of a second's budget: the most one pipeline should carry.
    pub fn burst_max(&self) -> usize {
        (self.ops_per_s as usize / 10).max(1)
    }

    pub fn sent(&self) -> u64 {
        self.sent
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_batch_waits_for_its_own_budget_and_idle_time_earns_no_credit() {
        let mut pacer = Pacer::new(1000);
        let t0 = Instant::now();
        assert_eq!(pacer.reserve(1, t0), t0 + Duration::from_millis(1));
        assert_eq!(pacer.reserve(100, t0), t0 + Duration::from_millis(101));
        // Idle for a second: the next batch still pays for itself from now.
        let later = t0 + Duration::from_secs(2);
        assert_eq!(pacer.reserve(10, later), later + Duration::from_millis(10));
        assert_eq!(pacer.burst_max(), 100);
        assert_eq!(Pacer::new(5).burst_max(), 1);
    }

    #[tokio::test]
    async fn a_thousand_commands_at_10000_per_s_take_at_least_a_tenth_of_a_second() {
        let mut pacer = Pacer::new(10_000);
        let t0 = Instant::now();
        for _ in 0..20 {
            pacer.admit(50).await;
        }
        assert_eq!(pacer.sent(), 1000);
        let elapsed = t0.elapsed();
        assert!(elapsed >= Duration::from_millis(100), "{elapsed:?}");
        assert!(elapsed < Duration::from_secs(2), "{elapsed:?}");
    }
}
