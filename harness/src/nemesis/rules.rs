//! Gap rules: data saying at which gap between round trips a fault strikes.

use std::sync::atomic::{AtomicU64, Ordering};

use crate::request::{RequestCtx, TripSummary};
use crate::scenario::{CommandFault, CommandFaultAction, GapFault, GapFaultAction};

/// Which gaps a rule matches: the identity, from which of its requests on, before which commands.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GapMatch {
    pub identity: Option<u32>,
    pub request: u64,
    /// Any of these commands next (any gap when empty).
    pub before_command: Vec<String>,
}

impl GapMatch {
    pub fn matches(&self, req: &RequestCtx, next: &TripSummary) -> bool {
        self.identity.is_none_or(|id| id == req.identity)
            && req.ordinal >= self.request
            && (self.before_command.is_empty() || next.commands.iter().any(|n| self.before_command.contains(n)))
    }
}

/// How many times a rule may still fire: at most `times_max` (unbounded when `None`).
#[derive(Debug)]
pub struct Budget {
    pub times_max: Option<u64>,
    fired: AtomicU64,
}

impl Budget {
    pub fn new(times_max: Option<u64>) -> Self {
        Self {
            times_max,
            fired: AtomicU64::new(0),
        }
    }

    /// Take one firing if any is left.
    pub fn take(&self) -> bool {
        self.fired
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| {
                self.times_max.is_none_or(|max| n < max).then_some(n + 1)
            })
            .is_ok()
    }

    pub fn fired(&self) -> u64 {
        self.fired.load(Ordering::Acquire)
    }
}

/// A fault rule that strikes in the gap before a round trip, with its budget.
#[derive(Debug)]
pub struct GapRule {
    /// Index of the fault in the scenario.
    pub fault: usize,
    pub matcher: GapMatch,
    pub action: GapFaultAction,
    pub budget: Budget,
}

impl GapRule {
    pub fn new(fault: usize, spec: &GapFault) -> Self {
        Self {
            fault,
            matcher: GapMatch {
                identity: spec.identity,
                request: spec.request,
                before_command: spec.before_command.clone(),
            },
            action: spec.action,
            budget: Budget::new(spec.times),
        }
    }

    /// Claims one firing if the gap matches and the budget allows; true means "strike now".
    pub fn claim(&self, req: &RequestCtx, next: &TripSummary) -> bool {
        self.matcher.matches(req, next) && self.budget.take()
    }

    pub fn fired(&self) -> u64 {
        self.budget.fired()
    }
}

/// A rule on one command's reply, applied by the fault proxy; same matching and budget
/// as a gap rule, except that it may strike a request's first round trip too.
#[derive(Debug)]
pub struct CommandRule {
    pub fault: usize,
    pub matcher: GapMatch,
    pub action: CommandFaultAction,
    pub budget: Budget,
}

impl CommandRule {
    pub fn new(fault: usize, spec: &CommandFault) -> Self {
        Self {
            fault,
            matcher: GapMatch {
                identity: spec.identity,
                request: spec.request,
                before_command: spec.command.clone(),
            },
            action: spec.action.clone(),
            budget: Budget::new(spec.times),
        }
    }

    /// Claims one firing for `command` (a one-command summary) of the request. A rule that
    /// names no command strikes commands on the request's key only (not MULTI, PING, …).
    pub fn claim(&self, req: &RequestCtx, command: &TripSummary) -> bool {
        let names_a_key_or_is_named = !self.matcher.before_command.is_empty() || !command.keys.is_empty();
        names_a_key_or_is_named && self.matcher.matches(req, command) && self.budget.take()
    }

    pub fn fired(&self) -> u64 {
        self.budget.fired()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn req(identity: u32, ordinal: u64) -> RequestCtx {
        RequestCtx {
            id: ordinal,
            identity,
            ordinal,
            key: format!("rl:{identity}"),
            instance: 0,
            now_ms: 0,
        }
    }

    fn trip(commands: &[&str]) -> TripSummary {
        TripSummary {
            commands: commands.iter().map(|c| (*c).to_owned()).collect(),
            keys: vec![],
        }
    }

    #[test]
    fn matches_identity_ordinal_and_next_command_within_budget() {
        let spec = GapFault {
            identity: Some(0),
            request: 12,
            before_command: vec!["INCR".into()],
            times: Some(1),
            action: GapFaultAction::ExpireKey,
        };
        let rule = GapRule::new(0, &spec);
        assert!(!rule.claim(&req(0, 11), &trip(&["INCR"])), "before its request");
        assert!(!rule.claim(&req(1, 20), &trip(&["INCR"])), "other identity");
        assert!(!rule.claim(&req(0, 12), &trip(&["SET"])), "other command");
        assert!(rule.claim(&req(0, 13), &trip(&["INCR"])));
        assert!(!rule.claim(&req(0, 14), &trip(&["INCR"])), "budget spent");
        assert_eq!(rule.fired(), 1);
    }

    #[test]
    fn unbounded_rule_fires_every_time() {
        let spec = GapFault {
            identity: None,
            request: 1,
            before_command: vec![],
            times: None,
            action: GapFaultAction::Stall { stall_ms: 5 },
        };
        let rule = GapRule::new(3, &spec);
        for n in 1..=50 {
            assert!(rule.claim(&req(n as u32 % 3, n), &trip(&["PEXPIRE"])));
        }
        assert_eq!(rule.fired(), 50);
    }
}
