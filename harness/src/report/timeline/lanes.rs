//! Which identities get a lane (those with anomalies first, then the lowest numbers, at
//! most [`LANES_MAX`]), which of their keys are drawn, and on whose lane an anomaly or a
//! fault belongs.

use std::collections::{BTreeMap, BTreeSet};

use crate::checker::Anomaly;
use crate::history::{FaultRecord, HistoryIndex};
use crate::keys::KeyLayout;

use super::super::Report;

/// At most this many identity lanes.
pub(super) const LANES_MAX: usize = 12;
/// At most this many keys drawn per lane.
pub(super) const KEYS_PER_LANE_MAX: usize = 4;

/// Puts keys, anomalies and faults on their identity.
pub(super) struct Placer<'a> {
    layout: &'a KeyLayout,
    /// The identity of each request an anomaly or a fault names.
    requests: BTreeMap<u64, u32>,
}

impl<'a> Placer<'a> {
    pub(super) fn new(index: &HistoryIndex, report: &Report, layout: &'a KeyLayout) -> Self {
        let wanted: BTreeSet<u64> = anomalies(report)
            .flat_map(|a| a.requests.iter().copied())
            .chain(index.faults.iter().filter_map(|f| f.request))
            .collect();
        let requests = if wanted.is_empty() {
            BTreeMap::new()
        } else {
            index
                .requests
                .iter()
                .filter(|r| wanted.contains(&r.id))
                .map(|r| (r.id, r.identity))
                .collect()
        };
        Self { layout, requests }
    }

    pub(super) fn key(&self, key: &str) -> Option<u32> {
        self.layout.identity_of(key.as_bytes())
    }

    /// An anomaly's identity: its key's, else its first witness's, else the number in an
    /// "identity N (...)" label.
    pub(super) fn anomaly(&self, a: &Anomaly) -> Option<u32> {
        self.key(&a.key)
            .or_else(|| a.requests.iter().find_map(|id| self.requests.get(id).copied()))
            .or_else(|| {
                let rest = a.key.strip_prefix("identity ")?;
                rest.split(|c: char| !c.is_ascii_digit()).next()?.parse().ok()
            })
    }

    /// A fault's identity: its key's, else its request's.
    pub(super) fn fault(&self, f: &FaultRecord) -> Option<u32> {
        f.key
            .as_deref()
            .and_then(|k| self.key(k))
            .or_else(|| f.request.and_then(|id| self.requests.get(&id).copied()))
    }
}

/// Every anomaly the report lists, invariant by invariant.
pub(super) fn anomalies(report: &Report) -> impl Iterator<Item = &Anomaly> {
    report.invariants.iter().flat_map(|c| c.anomalies.iter())
}

/// One identity's lane.
#[derive(Debug)]
pub(super) struct Lane {
    pub identity: u32,
    /// The keys drawn, in order.
    pub keys: Vec<String>,
    pub keys_hidden: usize,
}

/// The lanes drawn, and what did not fit.
#[derive(Debug)]
pub(super) struct Lanes {
    pub lanes: Vec<Lane>,
    pub identities_hidden: usize,
    slots: BTreeMap<u32, usize>,
}

impl Lanes {
    /// Lanes for the identities the history shows: those with anomalies first (and on top),
    /// then the others by number.
    pub(super) fn choose(index: &HistoryIndex, report: &Report, placer: &Placer<'_>) -> Self {
        let keys = keys_by_identity(index, placer);
        let mut identities: BTreeSet<u32> = index.requests.iter().map(|r| r.identity).collect();
        identities.extend(keys.keys().copied());
        let flagged: BTreeSet<u32> = anomalies(report).filter_map(|a| placer.anomaly(a)).collect();
        identities.extend(flagged.iter().copied());
        let order = flagged
            .iter()
            .copied()
            .chain(identities.iter().copied().filter(|i| !flagged.contains(i)));
        let lanes: Vec<Lane> = order
            .take(LANES_MAX)
            .map(|identity| {
                let all = keys.get(&identity).cloned().unwrap_or_default();
                Lane {
                    identity,
                    keys_hidden: all.len().saturating_sub(KEYS_PER_LANE_MAX),
                    keys: all.into_iter().take(KEYS_PER_LANE_MAX).collect(),
                }
            })
            .collect();
        let slots = lanes.iter().enumerate().map(|(slot, l)| (l.identity, slot)).collect();
        Self {
            identities_hidden: identities.len() - lanes.len(),
            lanes,
            slots,
        }
    }

    /// The lane of `identity`, if it is drawn.
    pub(super) fn slot(&self, identity: u32) -> Option<usize> {
        self.slots.get(&identity).copied()
    }

    /// The lane and the key's position in it, if both are drawn.
    pub(super) fn key_slot(&self, placer: &Placer<'_>, key: &str) -> Option<(usize, usize)> {
        let slot = self.slot(placer.key(key)?)?;
        let k = self.lanes[slot].keys.iter().position(|k| k == key)?;
        Some((slot, k))
    }
}

/// Every limiter key the history shows, by identity: named by requests, sampled, notified,
/// planted.
fn keys_by_identity(index: &HistoryIndex, placer: &Placer<'_>) -> BTreeMap<u32, BTreeSet<String>> {
    let mut seen: BTreeSet<&str> = index.by_key.keys().map(String::as_str).collect();
    seen.extend(index.keyspace.keys().map(String::as_str));
    seen.extend(index.planted.keys().map(String::as_str));
    for sample in &index.samples {
        seen.extend(sample.keys.iter().map(|k| k.key.as_str()));
    }
    let mut keys: BTreeMap<u32, BTreeSet<String>> = BTreeMap::new();
    for key in seen {
        if let Some(identity) = placer.key(key) {
            keys.entry(identity).or_default().insert(key.to_owned());
        }
    }
    keys
}
