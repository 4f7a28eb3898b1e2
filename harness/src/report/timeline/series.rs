//! What each lane shows, gathered from the history in one pass over its samples and one
//! over its requests: each drawn key's samples and ends, and the requests counted per bucket.

use std::collections::BTreeMap;

use crate::history::{HistoryIndex, Outcome, Request};

use super::frame::{BUCKETS, Frame};
use super::lanes::{Lanes, Placer};

/// What the observer saw of a key in one sample.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Seen {
    /// PTTL: -1 no expiry, -2 gone.
    pub pttl_ms: i64,
    /// The value, when it is an integer (a counter).
    pub value: Option<i64>,
}

/// One key, sample by sample: (when, what was seen; `None` when the sample did not find it,
/// or when a keyspace event ended the key).
#[derive(Debug, Default)]
pub(super) struct KeySeries {
    pub points: Vec<(u64, Option<Seen>)>,
}

/// The keyspace events that end a key (a window's real end among them): its line breaks
/// there, and they are marked on its lane.
pub(super) const KEY_ENDS: [&str; 3] = ["expired", "evicted", "del"];

/// The outcomes a lane's requests are counted by: allowed, rejected, error, no answer
/// (indeterminate or never answered).
pub(super) const OUTCOMES: usize = 4;

/// Where a request counts among the [`OUTCOMES`].
pub(super) fn outcome_of(r: &Request) -> usize {
    match r.outcome {
        Some(Outcome::Allowed) => 0,
        Some(Outcome::Rejected) => 1,
        Some(Outcome::Error) => 2,
        Some(Outcome::Indeterminate) | None => 3,
    }
}

/// One lane's data.
#[derive(Debug)]
pub(super) struct LaneData {
    /// Parallel to the lane's keys.
    pub keys: Vec<KeySeries>,
    /// Per bucket, the requests invoked in it by outcome.
    pub outcomes: Vec<[u32; OUTCOMES]>,
    /// Per bucket, the lowest and the highest count a request reported.
    pub counts: Vec<Option<(i64, i64)>>,
    /// Requests by outcome over the whole run.
    pub totals: [u64; OUTCOMES],
}

impl LaneData {
    fn new(keys: usize) -> Self {
        Self {
            keys: (0..keys).map(|_| KeySeries::default()).collect(),
            outcomes: vec![[0; OUTCOMES]; BUCKETS],
            counts: vec![None; BUCKETS],
            totals: [0; OUTCOMES],
        }
    }

    /// The highest counter value or count the lane shows.
    pub(super) fn value_max(&self) -> i64 {
        let sampled = self
            .keys
            .iter()
            .flat_map(|k| k.points.iter())
            .filter_map(|(_, seen)| seen.and_then(|s| s.value))
            .max();
        let counted = self.counts.iter().flatten().map(|&(_, hi)| hi).max();
        sampled.max(counted).unwrap_or(0)
    }

    /// The longest TTL the lane's samples show.
    pub(super) fn ttl_max_ms(&self) -> i64 {
        self.keys
            .iter()
            .flat_map(|k| k.points.iter())
            .filter_map(|(_, seen)| seen.map(|s| s.pttl_ms))
            .max()
            .unwrap_or(0)
    }
}

/// Gather every drawn lane's data.
pub(super) fn gather(index: &HistoryIndex, lanes: &Lanes, placer: &Placer<'_>, frame: &Frame) -> Vec<LaneData> {
    let mut data: Vec<LaneData> = lanes.lanes.iter().map(|l| LaneData::new(l.keys.len())).collect();
    add_samples(index, lanes, placer, &mut data);
    add_ends(index, lanes, &mut data);
    add_requests(index, lanes, frame, &mut data);
    data
}

/// Every sample is a point of every drawn key: what it saw of the key, or that it was gone.
fn add_samples(index: &HistoryIndex, lanes: &Lanes, placer: &Placer<'_>, data: &mut [LaneData]) {
    let mut slots: BTreeMap<&str, (usize, usize)> = BTreeMap::new();
    for lane in &lanes.lanes {
        for key in &lane.keys {
            if let Some(slot) = lanes.key_slot(placer, key) {
                slots.insert(key.as_str(), slot);
            }
        }
    }
    for sample in &index.samples {
        let t_us = sample.t_start_us + (sample.t_end_us.saturating_sub(sample.t_start_us)) / 2;
        for lane in data.iter_mut() {
            for key in &mut lane.keys {
                key.points.push((t_us, None));
            }
        }
        for seen in &sample.keys {
            if let Some(&(slot, k)) = slots.get(seen.key.as_str()) {
                let point = data[slot].keys[k].points.last_mut().expect("pushed above");
                point.1 = Some(Seen {
                    pttl_ms: seen.pttl_ms,
                    value: seen.value.as_deref().and_then(|v| v.trim().parse().ok()),
                });
            }
        }
    }
}

/// A key that expired, was evicted or deleted is gone from then to the next sample: its
/// value and TTL do not hold past that moment.
fn add_ends(index: &HistoryIndex, lanes: &Lanes, data: &mut [LaneData]) {
    for (lane, lane_data) in lanes.lanes.iter().zip(data.iter_mut()) {
        for (key, series) in lane.keys.iter().zip(lane_data.keys.iter_mut()) {
            let events = index.keyspace.get(key).map(Vec::as_slice).unwrap_or_default();
            let ends = events.iter().filter(|(_, e)| KEY_ENDS.contains(&e.as_str()));
            let before = series.points.len();
            series.points.extend(ends.map(|(t_us, _)| (*t_us, None)));
            if series.points.len() > before {
                series.points.sort_by_key(|(t_us, _)| *t_us);
            }
        }
    }
}

/// Each request counts in the bucket of its invocation, by outcome, with its count.
fn add_requests(index: &HistoryIndex, lanes: &Lanes, frame: &Frame, data: &mut [LaneData]) {
    for r in &index.requests {
        let Some(slot) = lanes.slot(r.identity) else {
            continue;
        };
        let lane = &mut data[slot];
        let b = frame.bucket(r.invoke_us);
        let outcome = outcome_of(r);
        lane.outcomes[b][outcome] += 1;
        lane.totals[outcome] += 1;
        if let Some(count) = r.count {
            let range = lane.counts[b].get_or_insert((count, count));
            *range = (range.0.min(count), range.1.max(count));
        }
    }
}
