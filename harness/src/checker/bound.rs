//! The TTL bound a run applies to the limiter's keys, and where it comes from: the scenario's
//! `ttl_max_ms`, else what the limiter declares (in windows), else one window — the default
//! for every algorithm here (see [`Algorithm::ttl_default_reason`]).

use serde::Serialize;

use crate::scenario::Algorithm;
use crate::scenario::{CheckConfig, Limit};

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct TtlBound {
    /// The longest a limiter key may live, without the slack.
    pub ttl_max_ms: u64,
    pub ttl_slack_ms: u64,
    /// Where `ttl_max_ms` comes from, in words.
    pub from: String,
    /// Whether it is the default of one window (nobody declared a bound).
    pub default: bool,
}

impl TtlBound {
    /// The bound for a run: `config.ttl_max_ms` if the scenario sets it, else
    /// `declared_windows` × the window if the limiter declares it, else one window.
    pub fn resolve(limit: &Limit, config: &CheckConfig, algorithm: Algorithm, declared_windows: Option<f64>) -> Self {
        let (ttl_max_ms, from, default) = match (config.ttl_max_ms, declared_windows) {
            (Some(ms), _) => (ms, "the scenario's ttl_max_ms".to_owned(), false),
            (None, Some(windows)) => (
                // `as` saturates: an absurd declaration is a huge bound, never a wrapped one.
                (windows * limit.window_ms as f64).ceil() as u64,
                format!("{} × window_ms, declared by the limiter", trim_float(windows)),
                false,
            ),
            (None, None) => (
                limit.window_ms,
                format!("one window, the default ({})", algorithm.ttl_default_reason()),
                true,
            ),
        };
        Self {
            ttl_max_ms,
            ttl_slack_ms: config.ttl_slack_ms,
            from,
            default,
        }
    }

    /// The longest TTL allowed: the bound plus the slack.
    pub fn bound_ms(&self) -> u64 {
        self.ttl_max_ms.saturating_add(self.ttl_slack_ms)
    }

    /// The rule as `ttl-bounded` states it.
    pub fn rule(&self) -> String {
        if self.default {
            format!(
                "PTTL <= window_ms + ttl_slack_ms = {} + {} = {} ms",
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

/// `2` rather than `2.0`, `1.083` rather than `1.0833333`.
fn trim_float(x: f64) -> String {
    let text = format!("{x:.3}");
    text.trim_end_matches('0').trim_end_matches('.').to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::checker::fixtures::{config, limit};

    #[test]
    fn scenario_beats_limiter_beats_default() {
        let limit = limit();
        let mut config = config(&[]);
        let default = TtlBound::resolve(&limit, &config, Algorithm::FixedWindow, None);
        assert_eq!((default.ttl_max_ms, default.default), (1000, true));
        assert_eq!(default.rule(), "PTTL <= window_ms + ttl_slack_ms = 1000 + 0 = 1000 ms");
        let declared = TtlBound::resolve(&limit, &config, Algorithm::TokenBucket, Some(2.0));
        assert_eq!(declared.ttl_max_ms, 2000);
        assert!(
            declared.rule().contains("2 × window_ms, declared by the limiter"),
            "{}",
            declared.rule()
        );
        let daily = TtlBound::resolve(&limit, &config, Algorithm::FixedWindow, Some(26.0 / 24.0));
        assert_eq!(daily.ttl_max_ms, 1084);
        config.ttl_max_ms = Some(5000);
        config.ttl_slack_ms = 10;
        let scenario = TtlBound::resolve(&limit, &config, Algorithm::TokenBucket, Some(2.0));
        assert_eq!((scenario.ttl_max_ms, scenario.bound_ms()), (5000, 5010));
        assert!(scenario.from.contains("scenario"));
    }
}
