//! The TTL bound a run applies to the limiter's keys, and where it comes from: the scenario's
//! `ttl_max_ms`, else what the limiter declares (in windows), else one window — the default
//! for every algorithm here (see [`Algorithm::ttl_default_reason`]).

use serde::Serialize;

use crate::scenario::{Algorithm, CheckConfig, Limit, TtlMax};

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct TtlBound {
    /// The longest a limiter key may live, without the slack.
    pub ttl_max_ms: u64,
    pub ttl_slack_ms: u64,
    /// Where `ttl_max_ms` comes from, in words.
    pub from: String,
    /// Whether it is the default (nobody declared a bound).
    pub default: bool,
    /// The default's windows (one, two for a sliding window counter); not in the report.
    #[serde(skip)]
    pub default_windows: u64,
}

impl TtlBound {
    /// The bound for a run: `config.ttl_max_ms` if the scenario sets it, else what the run
    /// declared for the limiter (`--ttl-max-ms`, a suite's `[[limiter]]`), else what the
    /// limiter declares itself (in windows or in ms), else one window.
    pub fn resolve(limit: &Limit, config: &CheckConfig, algorithm: Algorithm, declared: Option<TtlMax>) -> Self {
        let by_run = config.ttl_declared.map(|d| {
            (
                d,
                "declared for the limiter by the run (--ttl-max-ms/--ttl-max-windows, the suite's [[limiter]])",
            )
        });
        let by_limiter = declared.map(|d| (d, "declared by the limiter"));
        let (ttl_max_ms, from, default) = match (config.ttl_max_ms, by_run.or(by_limiter)) {
            (Some(ms), _) => (ms, "the scenario's ttl_max_ms".to_owned(), false),
            (None, Some((declared, by))) => (
                declared.ms(limit.window_ms),
                format!("{}, {by}", declared.describe()),
                false,
            ),
            (None, None) => (
                limit.window_ms.saturating_mul(algorithm.ttl_default_windows()),
                format!(
                    "{}, the default ({})",
                    windows_in_words(algorithm.ttl_default_windows()),
                    algorithm.ttl_default_reason()
                ),
                true,
            ),
        };
        Self {
            ttl_max_ms,
            ttl_slack_ms: config.ttl_slack_ms,
            from,
            default,
            default_windows: algorithm.ttl_default_windows(),
        }
    }

    /// The longest TTL allowed: the bound plus the slack.
    pub fn bound_ms(&self) -> u64 {
        self.ttl_max_ms.saturating_add(self.ttl_slack_ms)
    }

    /// The rule as `ttl-bounded` states it.
    pub fn rule(&self) -> String {
        if self.default {
            let windows = match self.default_windows {
                1 => String::new(),
                n => format!("{n} × "),
            };
            format!(
                "PTTL <= {windows}window_ms + ttl_slack_ms = {} + {} = {} ms",
                self.ttl_max_ms,
                self.ttl_slack_ms,
                self.bound_ms()
            )
        } else {
            format!(
                "PTTL <= ttl_max + ttl_slack_ms = {} + {} = {} ms (ttl_max: {})",
                self.ttl_max_ms,
                self.ttl_slack_ms,
                self.bound_ms(),
                self.from
            )
        }
    }
}

/// "one window", "2 windows".
fn windows_in_words(windows: u64) -> String {
    match windows {
        1 => "one window".to_owned(),
        n => format!("{n} windows"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::checker::fixtures::{config, limit};

    #[test]
    fn a_sliding_window_counter_lives_two_windows_by_default() {
        let (limit, config) = (limit(), config(&[]));
        assert_eq!(limit.window_ms, 1000);
        let bound = TtlBound::resolve(&limit, &config, Algorithm::SlidingWindowCounter, None);
        assert_eq!(bound.ttl_max_ms, 2000);
        assert!(bound.default);
        assert!(bound.from.starts_with("2 windows, the default"), "{}", bound.from);
        assert_eq!(
            bound.rule(),
            "PTTL <= 2 × window_ms + ttl_slack_ms = 2000 + 0 = 2000 ms"
        );
        let fixed = TtlBound::resolve(&limit, &config, Algorithm::FixedWindow, None);
        assert_eq!(fixed.ttl_max_ms, 1000);
        assert!(fixed.from.starts_with("one window, the default"), "{}", fixed.from);
    }

    #[test]
    fn scenario_beats_limiter_beats_default() {
        let limit = limit();
        let mut config = config(&[]);
        let default = TtlBound::resolve(&limit, &config, Algorithm::FixedWindow, None);
        assert_eq!((default.ttl_max_ms, default.default), (1000, true));
        assert_eq!(default.rule(), "PTTL <= window_ms + ttl_slack_ms = 1000 + 0 = 1000 ms");
        let declared = TtlBound::resolve(&limit, &config, Algorithm::TokenBucket, Some(TtlMax::Windows(2.0)));
        assert_eq!(declared.ttl_max_ms, 2000);
        assert!(
            declared.rule().contains("2 × window_ms, declared by the limiter"),
            "{}",
            declared.rule()
        );
        let daily = TtlBound::resolve(
            &limit,
            &config,
            Algorithm::FixedWindow,
            Some(TtlMax::Windows(26.0 / 24.0)),
        );
        assert_eq!(daily.ttl_max_ms, 1084);
        let absolute = TtlBound::resolve(&limit, &config, Algorithm::FixedWindow, Some(TtlMax::Ms(93_600_000)));
        assert_eq!(absolute.ttl_max_ms, 93_600_000, "26 h, whatever the window");
        assert_eq!(absolute.from, "93600000 ms, declared by the limiter");
        config.ttl_max_ms = Some(5000);
        config.ttl_slack_ms = 10;
        let scenario = TtlBound::resolve(&limit, &config, Algorithm::TokenBucket, Some(TtlMax::Windows(2.0)));
        assert_eq!((scenario.ttl_max_ms, scenario.bound_ms()), (5000, 5010));
        assert!(scenario.from.contains("scenario"));
    }
}
