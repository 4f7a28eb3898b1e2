//! The explorer without servers: every candidate is a scenario the parser accepts, the seed
//! decides the candidates, the vocabulary covers every fault kind, and shrinking and the
//! search behave on fake trials.

use std::path::Path;
use std::sync::Mutex;
use std::time::Duration;

use proptest::prelude::*;
use proptest::strategy::{Strategy, ValueTree};
use tokio_util::sync::CancellationToken;

use super::*;
use crate::scenario::{FaultKind, Invariant};

fn everything() -> Vocabulary {
    Vocabulary {
        kinds: FaultKind::ALL.to_vec(),
        eviction: true,
        state_loss: true,
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]

    #[test]
    fn every_candidate_is_a_scenario_the_parser_accepts(candidate in candidates(&everything())) {
        let text = to_toml(&candidate, "explore-candidate", "about", 7, &["a header".into(), String::new()]);
        let scenario = to_scenario(&text, Path::new("scenarios/found/x.toml"));
        prop_assert!(scenario.is_ok(), "{}\n{}", scenario.err().map(|e| e.to_string()).unwrap_or_default(), text);
        let scenario = scenario.unwrap();
        prop_assert_eq!(scenario.phases.len(), candidate.phases.len());
        prop_assert_eq!(scenario.check.invariants, INVARIANTS.to_vec());
    }

    #[test]
    fn the_default_search_never_uses_a_fault_no_limiter_survives(candidate in candidates(&Vocabulary::default())) {
        prop_assert!(!candidate.faults.iter().any(FaultSpec::no_limiter_survives), "{candidate:?}");
    }
}

fn first(seed: u64, n: usize) -> Vec<Candidate> {
    let mut runner = seeded_runner(seed);
    let strategy = candidates(&Vocabulary::default());
    (0..n)
        .map(|_| strategy.new_tree(&mut runner).unwrap().current())
        .collect()
}

#[test]
fn the_seed_decides_the_candidates() {
    assert_eq!(first(7, 20), first(7, 20));
    assert_ne!(first(7, 20), first(8, 20));
}

#[test]
fn the_vocabulary_covers_every_fault_kind() {
    let seen: std::collections::BTreeSet<&str> = first(1, 600)
        .iter()
        .flat_map(|c| c.faults.iter().map(|f| f.kind().name()))
        .collect();
    for kind in FaultKind::ALL {
        assert!(seen.contains(kind.name()), "{kind} never drawn");
    }
}

/// The search takes turns: a free candidate, then one holding each fault kind in turn, so
/// every kind is in the first 15 candidates (drawn from one seed, in the search's order).
#[test]
fn every_fault_kind_is_tried_within_the_first_round_of_strata() {
    let vocabulary = Vocabulary::default();
    let strata = strata(&vocabulary);
    assert_eq!(strata.len(), FaultKind::ALL.len() + 1);
    let mut runner = seeded_runner(1);
    for _round in 0..3 {
        for (i, stratum) in strata.iter().enumerate().skip(1) {
            let c = stratum.new_tree(&mut runner).unwrap().current();
            let kind = vocabulary.kinds[i - 1];
            assert_eq!(c.faults[0].kind(), kind, "{c:?}");
            assert!(c.faults.len() <= 2 && !c.faults.iter().any(FaultSpec::no_limiter_survives));
            assert!(render::worst_case_ms(&c) <= WORST_CASE_MS_MAX, "{kind}: {c:?}");
        }
    }
}

#[test]
fn faults_restrict_the_kinds_drawn() {
    let vocabulary = Vocabulary {
        kinds: vec![FaultKind::DropReply],
        ..Vocabulary::default()
    };
    let mut runner = seeded_runner(3);
    let strategy = candidates(&vocabulary);
    for _ in 0..100 {
        let c = strategy.new_tree(&mut runner).unwrap().current();
        assert!(c.faults.iter().all(|f| f.kind() == FaultKind::DropReply));
    }
}

/// A fake limiter's bug: an immortal key whenever an expire fault meets at least 5 requests;
/// `flaky` makes every other run pass.
struct Fake {
    flaky: bool,
    calls: Mutex<u64>,
}

fn immortal() -> Finding {
    Finding {
        invariant: Invariant::TtlPresent,
        anomaly: "immortal-key".into(),
    }
}

#[async_trait::async_trait]
impl Trials for Fake {
    async fn run(&self, batch: &[Candidate]) -> Vec<TrialResult> {
        batch
            .iter()
            .map(|c| {
                let mut calls = self.calls.lock().unwrap();
                *calls += 1;
                let bug = c.faults.iter().any(|f| matches!(f, FaultSpec::ExpireBetween(_))) && requests(c) >= 5;
                let shows = bug && !(self.flaky && (*calls).is_multiple_of(2));
                TrialResult {
                    findings: if shows { vec![immortal()] } else { Vec::new() },
                    evidence: vec!["ttl-present: rl:0 has no TTL".into()],
                    ..TrialResult::default()
                }
            })
            .collect()
    }
}

fn limits() -> ShrinkLimits {
    ShrinkLimits {
        confirm: 3,
        steps_max: 500,
        time_max: Duration::from_secs(60),
    }
}

fn failing_tree(seed: u64) -> (impl ValueTree<Value = Candidate>, Candidate) {
    let vocabulary = Vocabulary {
        kinds: vec![FaultKind::ExpireBetweenRoundTrips, FaultKind::ServerPause],
        ..Vocabulary::default()
    };
    let mut runner = seeded_runner(seed);
    let strategy = candidates(&vocabulary);
    loop {
        let tree = strategy.new_tree(&mut runner).unwrap();
        let c = tree.current();
        if c.faults.len() == 2
            && c.faults.iter().any(|f| matches!(f, FaultSpec::ExpireBetween(_)))
            && requests(&c) >= 50
        {
            return (tree, c);
        }
    }
}

/// Shrink `tree` towards the immortal-key finding on fake trials that always reproduce it.
async fn shrink_on_reliable_trials<T: ValueTree<Value = Candidate>>(tree: &mut T) -> Shrunk {
    let fake = Fake {
        flaky: false,
        calls: Mutex::new(0),
    };
    shrink(
        tree,
        &immortal(),
        limits(),
        &fake,
        &|_, _| {},
        &CancellationToken::new(),
    )
    .await
}

#[tokio::test]
async fn shrinking_keeps_only_what_reproduces_and_ends_small() {
    let (mut tree, original) = failing_tree(5);
    let shrunk = shrink_on_reliable_trials(&mut tree).await;
    let m = &shrunk.minimal;
    assert_eq!(m.faults.len(), 1, "{m:?}");
    assert!(matches!(m.faults[0], FaultSpec::ExpireBetween(_)));
    assert!(
        requests(m) >= 5 && requests(m) < requests(&original),
        "{} requests",
        requests(m)
    );
    assert!(shrunk.steps_kept > 0 && shrunk.steps_kept <= shrunk.steps_tried);
}

#[tokio::test]
async fn a_flaky_step_is_never_kept() {
    let (mut tree, original) = failing_tree(5);
    let fake = Fake {
        flaky: true,
        calls: Mutex::new(0),
    };
    let shrunk = shrink(
        &mut tree,
        &immortal(),
        limits(),
        &fake,
        &|_, _| {},
        &CancellationToken::new(),
    )
    .await;
    // Every proposal runs 3 times and the fake fails only every other run: nothing is kept.
    assert_eq!(shrunk.steps_kept, 0);
    assert_eq!(shrunk.minimal, original);
}

#[tokio::test]
async fn a_seeded_search_on_fake_trials_is_deterministic() {
    let config = SearchConfig {
        seed: 11,
        budget: Duration::from_secs(30),
        jobs: 4,
        vocabulary: Vocabulary::default(),
        shrink: limits(),
        findings_max: 1,
        show_progress: false,
    };
    let run = || async {
        let fake = Fake {
            flaky: false,
            calls: Mutex::new(0),
        };
        let out = search(&config, &fake, &CancellationToken::new()).await;
        let found = out.found.into_iter().next().expect("the fake bug is found");
        (
            out.candidates_run,
            found.candidate,
            found.shrunk.minimal,
            found.shrunk.steps_tried,
        )
    };
    assert_eq!(run().await, run().await);
}

/// Two bugs: an immortal key (an expire fault and at least 5 requests, as [`Fake`]) and a
/// double count whenever a reply is dropped.
struct TwoBugs;

fn double_count() -> Finding {
    Finding {
        invariant: Invariant::NoDoubleCount,
        anomaly: "double-count".into(),
    }
}

#[async_trait::async_trait]
impl Trials for TwoBugs {
    async fn run(&self, batch: &[Candidate]) -> Vec<TrialResult> {
        batch
            .iter()
            .map(|c| {
                let mut findings = Vec::new();
                if c.faults.iter().any(|f| matches!(f, FaultSpec::ExpireBetween(_))) && requests(c) >= 5 {
                    findings.push(immortal());
                }
                if c.faults.iter().any(|f| f.kind() == FaultKind::DropReply) {
                    findings.push(double_count());
                }
                findings.sort();
                TrialResult {
                    findings,
                    ..TrialResult::default()
                }
            })
            .collect()
    }
}

/// The search goes on after its first finding, for invariants nothing broke yet: each is
/// confirmed, shrunk and reported once; `findings_max` stops it early.
#[tokio::test]
async fn the_search_goes_on_for_other_invariants_and_reports_each_once() {
    let config = |findings_max| SearchConfig {
        seed: 11,
        budget: Duration::from_secs(30),
        jobs: 4,
        vocabulary: Vocabulary {
            kinds: vec![FaultKind::ExpireBetweenRoundTrips, FaultKind::DropReply],
            ..Vocabulary::default()
        },
        shrink: limits(),
        findings_max,
        show_progress: false,
    };
    let out = search(&config(2), &TwoBugs, &CancellationToken::new()).await;
    let mut targets: Vec<Invariant> = out.found.iter().map(|f| f.target.invariant).collect();
    targets.sort();
    assert_eq!(targets, vec![Invariant::TtlPresent, Invariant::NoDoubleCount]);
    for found in &out.found {
        assert_eq!(found.shrunk.minimal.faults.len(), 1, "{:?}", found.shrunk.minimal);
    }
    let first = search(&config(1), &TwoBugs, &CancellationToken::new()).await;
    assert_eq!(first.found.len(), 1);
    assert_eq!(first.found[0].target, out.found[0].target, "the same first finding");
}

/// A value tree that cannot simplify at all (as proptest's can stop after a few steps on a
/// timing race): the greedy pass over [`reductions`] still ends at one phase, one fault and
/// a handful of requests.
#[tokio::test]
async fn the_greedy_pass_shrinks_what_the_value_tree_could_not() {
    let (_, original) = failing_tree(5);
    let mut tree = Just(original.clone()).new_tree(&mut seeded_runner(1)).unwrap();
    let shrunk = shrink_on_reliable_trials(&mut tree).await;
    let m = &shrunk.minimal;
    assert_eq!(m.phases.len(), 1, "{m:?}");
    assert_eq!(m.faults.len(), 1, "{m:?}");
    assert!(matches!(m.faults[0], FaultSpec::ExpireBetween(_)));
    assert!((5..=20).contains(&requests(m)), "{} requests: {m:?}", requests(m));
    assert!(shrunk.steps_kept > 0, "{} of {original:?}", shrunk.steps_tried);
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]

    #[test]
    fn a_reduction_is_always_a_smaller_candidate_the_search_could_draw(candidate in candidates(&everything())) {
        for r in reductions(&candidate) {
            prop_assert_ne!(&r, &candidate);
            prop_assert!(r.phases.len() <= candidate.phases.len() && r.faults.len() <= candidate.faults.len());
            prop_assert!(requests(&r) <= requests(&candidate), "{r:?}");
            prop_assert!(render::worst_case_ms(&r) <= WORST_CASE_MS_MAX);
        }
    }
}
