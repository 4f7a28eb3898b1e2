//! A run's judgement as a pure function of its history: the scenario, the limiter, the
//! servers and every count come from recorded events, so a saved `history.jsonl` gives the
//! same report again (`limiter-harness check RUN_DIR`), and a checker fix can be tried on
//! old histories.

use super::assemble;
use super::error::JudgeError;
use super::facts::RunFacts;
use crate::checker::{self, CheckInput, TtlBound};
use crate::history::{Event, HistoryIndex};
use crate::keys::KeyLayout;
use crate::report::{KeysSummary, Report};
use crate::scenario::Scenario;

/// A history judged: the report, the index the checkers read, and the scenario it ran.
#[derive(Debug)]
pub struct Judgement {
    pub report: Report,
    pub index: HistoryIndex,
    pub scenario: Scenario,
    /// The keys the run judged as the limiter's.
    pub layout: KeyLayout,
}

/// Judge a run from its history alone. The error says why the history cannot be judged.
pub fn judge_history(events: Vec<Event>) -> Result<Judgement, JudgeError> {
    let (facts, scenario) = RunFacts::read(&events)?;
    let limiter = facts.limiter.clone().ok_or(JudgeError::NoLimiter)?;
    let layout = KeyLayout::parse(&limiter.keys, scenario.limit.identities, limiter.keys_from.clone())
        .map_err(JudgeError::Layout)?;
    let ttl = TtlBound::resolve(&scenario.limit, &scenario.check, limiter.algorithm, limiter.ttl_max());
    let index = HistoryIndex::new(events, &layout);
    let results = checker::check(&CheckInput {
        limit: &scenario.limit,
        config: &scenario.check,
        algorithm: limiter.algorithm,
        layout: &layout,
        ttl: &ttl,
        history: &index,
    });
    let unseen = (!index.saw_limiter_keys()).then(|| checker::layout_hint(&layout, &index.foreign_keys()));
    let keys = KeysSummary::new(&layout, limiter.keys_note.clone(), ttl, unseen);
    let report = assemble::report(&facts, &limiter, &scenario, &index, results, keys);
    Ok(Judgement {
        report,
        index,
        scenario,
        layout,
    })
}
