//! Three-valued verdicts and the evidence behind them.

use serde::Serialize;

use crate::scenario::Invariant;

/// Valid, Invalid, or Unknown (the run could not observe what it needed: never a pass).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Verdict {
    Valid,
    Unknown,
    Invalid,
}

impl Verdict {
    /// Invalid beats Unknown beats Valid.
    pub fn merge(self, other: Self) -> Self {
        self.max(other)
    }

    pub fn name(self) -> &'static str {
        match self {
            Self::Valid => "valid",
            Self::Unknown => "unknown",
            Self::Invalid => "invalid",
        }
    }
}

/// One violation, with enough evidence to see why from the report alone.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Anomaly {
    /// e.g. "immortal-key", "reset-by-eviction", "over-admission", "lockout".
    pub kind: String,
    pub key: String,
    /// Request ids that witness it (see history.jsonl).
    pub requests: Vec<u64>,
    /// The values seen, e.g. "PTTL -1", "count 57 -> 1".
    pub seen: Vec<String>,
    /// When, in microseconds since the run started.
    pub t_us: u64,
    /// One line: why this breaks the invariant.
    pub because: String,
}

/// The judgement of one invariant.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct CheckResult {
    pub invariant: Invariant,
    pub verdict: Verdict,
    /// One line for the summary table.
    pub summary: String,
    /// The rule applied, when it needs stating (e.g. the admission bound and why).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rule: Option<String>,
    /// The first anomalies (at most [`ANOMALIES_SHOWN`]); `anomalies_total` counts all.
    pub anomalies: Vec<Anomaly>,
    pub anomalies_total: usize,
    /// Things a reviewer should know that are not violations.
    pub notes: Vec<String>,
}

/// How many anomalies per invariant a report lists.
pub const ANOMALIES_SHOWN: usize = 10;

impl CheckResult {
    /// A result from its anomalies: Invalid if any, else `otherwise`.
    pub fn from_anomalies(invariant: Invariant, mut anomalies: Vec<Anomaly>, otherwise: (Verdict, String)) -> Self {
        anomalies.sort_by_key(|a| (a.t_us, a.key.clone()));
        let total = anomalies.len();
        let (verdict, summary) = if total > 0 {
            let first = &anomalies[0];
            let more = if total > 1 {
                format!(" (+{} more)", total - 1)
            } else {
                String::new()
            };
            (Verdict::Invalid, format!("{}{more}", first.because))
        } else {
            otherwise
        };
        anomalies.truncate(ANOMALIES_SHOWN);
        Self {
            invariant,
            verdict,
            summary,
            rule: None,
            anomalies,
            anomalies_total: total,
            notes: Vec::new(),
        }
    }

    pub fn unknown(invariant: Invariant, why: impl Into<String>) -> Self {
        Self::from_anomalies(invariant, Vec::new(), (Verdict::Unknown, why.into()))
    }

    pub fn with_rule(mut self, rule: impl Into<String>) -> Self {
        self.rule = Some(rule.into());
        self
    }

    pub fn with_note(mut self, note: impl Into<String>) -> Self {
        self.notes.push(note.into());
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn invalid_beats_unknown_beats_valid() {
        use Verdict::*;
        assert_eq!(Valid.merge(Unknown), Unknown);
        assert_eq!(Unknown.merge(Invalid), Invalid);
        assert_eq!(Invalid.merge(Valid), Invalid);
        assert_eq!(Valid.merge(Valid), Valid);
    }
}
