//! Runs kept inside one calendar period, so that no verdict depends on the time of day.
//!
//! A limiter that names its keys by the date (incident 2's daily cap, `cap:{org}:{day}`), the
//! hour or the minute counts in a new key when the wall clock crosses that boundary. A run
//! that happens to straddle midnight would then see its counter start again at zero half way
//! through: a different verdict from the same seed on unchanged code, and a CI gate red at
//! 00:00 UTC. So before its traffic (and before any planted state) a run waits, when it has
//! to, until its whole span fits inside one period: the smallest of [`PERIODS_MS`] at least
//! [`SPAN_SHARE`] times the span. Every boundary of a longer period (an hour, a day) is also
//! a minute boundary, so a run kept inside one minute is inside one hour and one day too.
//!
//! Cost: a run of span `s` waits with probability `s / period`, at most `s`, so on average
//! `s² / (2 · period)`, at most 5 % of the run with [`SPAN_SHARE`] = 10. A run longer than a
//! tenth of a day is not kept inside anything (it says so).
//!
//! `LIMITER_HARNESS_CALENDAR_MS` changes the periods (`off`, or a comma-separated list of
//! periods in ms, e.g. `2000` to keep short runs inside one two-second bucket).

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use crate::error::SetupError;

/// A minute, an hour, a day (UTC: Unix time has no leap seconds and no time zones).
pub const PERIODS_MS: [u64; 3] = [60_000, 3_600_000, 86_400_000];

/// A run is kept inside a period at least this many times its span.
pub const SPAN_SHARE: u64 = 10;

/// What the run's setup before traffic (planting, observers, floods) and its last replies
/// may add to the planned phases.
pub const SPAN_MARGIN_MS: u64 = 2_000;

/// The environment variable that overrides [`PERIODS_MS`].
pub const PERIODS_ENV: &str = "LIMITER_HARNESS_CALENDAR_MS";

/// How long to wait before a run, and the period it is then inside.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Wait {
    pub wait_ms: u64,
    pub period_ms: u64,
}

/// The run's span around its start `now_ms`: it reaches `before_ms` back (an instance's clock
/// behind) and `after_ms` ahead (its phases, the margin, a clock ahead). `None` when no period
/// of `periods_ms` is long enough; else the wait (0 when it already fits).
pub fn wait_for(now_ms: u64, before_ms: u64, after_ms: u64, periods_ms: &[u64]) -> Option<Wait> {
    let span_ms = before_ms.saturating_add(after_ms).max(1);
    let period_ms = periods_ms
        .iter()
        .copied()
        .filter(|p| *p > 0 && span_ms.saturating_mul(SPAN_SHARE) <= *p)
        .min()?;
    let first_ms = now_ms.saturating_sub(before_ms);
    let last_ms = now_ms.saturating_add(after_ms);
    let wait_ms = if first_ms / period_ms == last_ms / period_ms {
        0
    } else {
        // The boundary inside the span: start once the span begins at it.
        let boundary_ms = (last_ms / period_ms) * period_ms;
        boundary_ms + before_ms - now_ms
    };
    Some(Wait { wait_ms, period_ms })
}

/// The periods in force: [`PERIODS_ENV`] if set (`off`: none), else [`PERIODS_MS`].
pub fn periods_ms() -> Result<Vec<u64>, SetupError> {
    match std::env::var(PERIODS_ENV) {
        Err(_) => Ok(PERIODS_MS.to_vec()),
        Ok(v) => parse_periods(&v).ok_or(SetupError::BadCalendar {
            env: PERIODS_ENV,
            value: v,
        }),
    }
}

/// `off` (no periods) or periods in ms separated by commas, each above 0.
fn parse_periods(value: &str) -> Option<Vec<u64>> {
    if value.trim() == "off" {
        return Some(Vec::new());
    }
    value
        .split(',')
        .map(|p| p.trim().parse::<u64>().ok().filter(|ms| *ms > 0))
        .collect()
}

/// A period in words, for the message.
pub fn period_name(period_ms: u64) -> String {
    match period_ms {
        60_000 => "minute".into(),
        3_600_000 => "hour".into(),
        86_400_000 => "day".into(),
        ms => format!("{ms} ms period"),
    }
}

/// Wait (on the wall clock) until a run reaching `before_ms` back and `after_ms` ahead fits
/// inside one calendar period, saying so on stderr when it waits; `waited_ms` holds the wait
/// from before it starts (the deadline does not count it).
pub async fn keep_inside_one_period(before_ms: u64, after_ms: u64, periods_ms: &[u64], waited_ms: &AtomicU64) {
    let now_ms = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64);
    let Some(Wait { wait_ms, period_ms }) = wait_for(now_ms, before_ms, after_ms, periods_ms) else {
        return;
    };
    if wait_ms > 0 {
        waited_ms.store(wait_ms, Ordering::Release);
        eprintln!(
            "limiter-harness: waiting {:.1} s so the run fits inside one UTC {} (a limiter that names its keys by the date, hour or minute then sees one key per identity whatever the time of day)",
            wait_ms as f64 / 1000.0,
            period_name(period_ms)
        );
        tokio::time::sleep(Duration::from_millis(wait_ms)).await;
    }
}

/// The run's deadline, not counting its calendar wait (`waited_ms`, set before the wait
/// starts): sleeps `deadline`, then as much more as the run waited.
pub async fn deadline_besides_the_wait(deadline: Duration, waited_ms: &AtomicU64) {
    let mut slept = Duration::ZERO;
    loop {
        let due = deadline + Duration::from_millis(waited_ms.load(Ordering::Acquire));
        if due <= slept {
            return;
        }
        tokio::time::sleep(due - slept).await;
        slept = due;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const DAY_MS: u64 = 86_400_000;
    const MIDNIGHT_MS: u64 = 20_428 * DAY_MS;

    #[test]
    fn a_run_clear_of_a_boundary_starts_at_once() {
        let w = wait_for(MIDNIGHT_MS + 10_000, 0, 5_700, &PERIODS_MS).unwrap();
        assert_eq!(
            w,
            Wait {
                wait_ms: 0,
                period_ms: 60_000
            }
        );
    }

    #[test]
    fn a_run_that_would_straddle_midnight_waits_for_it() {
        // 3 s before midnight, a 5.7 s span: start at midnight, inside the new minute and day.
        let w = wait_for(MIDNIGHT_MS - 3_000, 0, 5_700, &PERIODS_MS).unwrap();
        assert_eq!(
            w,
            Wait {
                wait_ms: 3_000,
                period_ms: 60_000
            }
        );
        let start = MIDNIGHT_MS - 3_000 + w.wait_ms;
        assert_eq!(start / DAY_MS, (start + 5_700) / DAY_MS);
        // Ending exactly on the boundary's last millisecond is inside.
        assert_eq!(wait_for(MIDNIGHT_MS - 5_701, 0, 5_700, &PERIODS_MS).unwrap().wait_ms, 0);
        assert_eq!(
            wait_for(MIDNIGHT_MS - 5_700, 0, 5_700, &PERIODS_MS).unwrap().wait_ms,
            5_700
        );
    }

    #[test]
    fn a_clock_behind_reaches_back_over_the_boundary() {
        // One instance 2 s behind, just after midnight: its clock still says yesterday.
        let w = wait_for(MIDNIGHT_MS + 500, 2_000, 3_000, &PERIODS_MS).unwrap();
        assert_eq!(w.wait_ms, 1_500);
        let start = MIDNIGHT_MS + 500 + w.wait_ms;
        assert_eq!((start - 2_000) / DAY_MS, (start + 3_000) / DAY_MS);
    }

    #[test]
    fn the_smallest_period_ten_times_the_span_is_kept() {
        assert_eq!(wait_for(0, 0, 6_000, &PERIODS_MS).unwrap().period_ms, 60_000);
        assert_eq!(wait_for(0, 0, 6_001, &PERIODS_MS).unwrap().period_ms, 3_600_000);
        assert_eq!(wait_for(0, 0, 360_001, &PERIODS_MS).unwrap().period_ms, DAY_MS);
        assert_eq!(wait_for(0, 0, DAY_MS / 10 + 1, &PERIODS_MS), None);
        assert_eq!(wait_for(0, 0, 100, &[]), None);
        // An hour boundary is a minute boundary: kept inside a minute, inside the hour too.
        let w = wait_for(3_600_000 - 1_000, 0, 5_000, &PERIODS_MS).unwrap();
        assert_eq!(w.wait_ms, 1_000);
    }

    #[test]
    fn the_waits_average_at_most_five_percent_of_the_span() {
        // Every start millisecond of a minute, a 6 s span (the longest kept inside a minute).
        let span_ms = 6_000;
        let total_ms: u64 = (0..60_000)
            .map(|now| wait_for(now, 0, span_ms, &PERIODS_MS).unwrap().wait_ms)
            .sum();
        let mean_ms = total_ms as f64 / 60_000.0;
        assert!(mean_ms <= span_ms as f64 * 0.05 + 1.0, "mean wait {mean_ms} ms");
        assert!(mean_ms > 0.0);
    }

    #[test]
    fn periods_parse_or_are_refused() {
        assert_eq!(parse_periods("off"), Some(vec![]));
        assert_eq!(parse_periods("2000, 60000"), Some(vec![2_000, 60_000]));
        assert_eq!(parse_periods("0"), None);
        assert_eq!(parse_periods("a minute"), None);
        assert_eq!(parse_periods(""), None);
    }

    #[tokio::test(start_paused = true)]
    async fn the_deadline_does_not_count_the_calendar_wait() {
        let start = tokio::time::Instant::now();
        let waited = AtomicU64::new(0);
        deadline_besides_the_wait(Duration::from_secs(2), &waited).await;
        assert_eq!(start.elapsed(), Duration::from_secs(2));
        // A wait of 5 s announced while the deadline runs (before it would fire).
        let start = tokio::time::Instant::now();
        let waited = std::sync::Arc::new(AtomicU64::new(0));
        let announce = {
            let waited = std::sync::Arc::clone(&waited);
            async move {
                tokio::time::sleep(Duration::from_millis(500)).await;
                waited.store(5_000, Ordering::Release);
            }
        };
        tokio::join!(deadline_besides_the_wait(Duration::from_secs(2), &waited), announce);
        assert_eq!(start.elapsed(), Duration::from_secs(7));
    }

    #[test]
    fn period_names_are_words() {
        assert_eq!(period_name(86_400_000), "day");
        assert_eq!(period_name(2_000), "2000 ms period");
    }
}
