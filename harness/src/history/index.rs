//! A read-only view of a history, organised for the checkers: requests with their
//! completions, samples, and keyspace events per key.

use crate::scenario::FaultKind;
use std::collections::{BTreeMap, HashMap};

use super::{Event, KeySample, Outcome, PhaseEdge, ProblemSource};
use crate::keys::{KeyLayout, Sighting};

/// How close a `del` and a `restore` of one key are to be one migration (the two nodes notify
/// within a millisecond of each other on loopback; a loaded machine may deliver them later).
pub const MIGRATION_PAIR_US: u64 = 50_000;
/// How late after the nemesis recorded an `expire-between-round-trips` strike the `del` its
/// `PEXPIRE key 1` may have caused can be seen (notifications come on their own connection).
const FAULT_DEL_LATE_US: u64 = 250_000;

/// How many keys outside the layout the index keeps, to name them in hints.
const FOREIGN_KEYS_MAX: usize = 256;
/// How many times the index keeps one key outside the layout that the proxy gave to no
/// request: enough for one to come while a single identity's requests were in flight.
const SIGHTINGS_PER_KEY_MAX: usize = 8;

/// One request: its invocation merged with its completion (absent if the run was cut short).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Request {
    pub id: u64,
    pub identity: u32,
    pub ordinal: u64,
    /// The key the harness handed the limiter (`key_prefix` + identity); a limiter with a
    /// layout of its own may never touch it.
    pub harness_key: String,
    /// The identity's limiter keys (by the run's layout) that the request's commands named:
    /// the keys it actually worked on, learned from the wire.
    pub keys: Vec<String>,
    /// Keys its commands named that the layout does not give to its identity.
    pub other_keys: Vec<String>,
    pub phase: usize,
    /// The limiter instance that decided it (`[limit] instances`).
    pub instance: u32,
    pub invoke_us: u64,
    pub complete_us: Option<u64>,
    pub outcome: Option<Outcome>,
    pub count: Option<i64>,
    pub trips: Vec<String>,
    pub error: Option<String>,
}

impl Request {
    pub fn allowed(&self) -> bool {
        self.outcome == Some(Outcome::Allowed)
    }

    /// Whether the request might have been admitted (allowed, or no definite answer).
    pub fn maybe_allowed(&self) -> bool {
        matches!(self.outcome, None | Some(Outcome::Allowed | Outcome::Indeterminate))
    }

    /// The end of the interval in which the request took effect (`u64::MAX` if it never completed).
    pub fn end_us(&self) -> u64 {
        self.complete_us.unwrap_or(u64::MAX)
    }

    /// Whether the request worked on `key`.
    pub fn touched(&self, key: &str) -> bool {
        self.keys.iter().any(|k| k == key)
    }

    /// The one limiter key the request worked on, when it worked on exactly one: only then is
    /// its count (and its admission) that key's. A request naming a counter and a flag, say,
    /// cannot be told apart.
    pub fn sole_key(&self) -> Option<&str> {
        match self.keys.as_slice() {
            [key] => Some(key),
            _ => None,
        }
    }

    /// Merge its completion (an [`Event::Complete`]) into the request.
    fn complete(&mut self, event: Event, layout: &KeyLayout) {
        let Event::Complete {
            t_us,
            outcome,
            count,
            trips,
            keys,
            error,
            ..
        } = event
        else {
            return;
        };
        self.complete_us = Some(t_us);
        self.outcome = Some(outcome);
        self.count = count;
        self.trips = trips;
        self.error = error;
        self.take_keys(keys, layout);
    }

    /// The keys its completion names: the identity's (by `layout`), and the others.
    fn take_keys(&mut self, keys: Vec<String>, layout: &KeyLayout) {
        let identity = self.identity;
        if keys.iter().all(|k| layout.is_key_of(k, identity)) {
            self.keys = keys;
        } else {
            (self.keys, self.other_keys) = keys.into_iter().partition(|k| layout.is_key_of(k, identity));
        }
    }

    /// The key to name in evidence about this request: the first limiter key it worked on,
    /// or its identity when it named none.
    pub fn key_label(&self) -> String {
        self.keys
            .first()
            .cloned()
            .unwrap_or_else(|| format!("identity {} (no limiter key seen)", self.identity))
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct Sample {
    pub t_start_us: u64,
    pub t_end_us: u64,
    pub final_audit: bool,
    pub keys: Vec<KeySample>,
}

/// The history indexed for checking.
#[derive(Debug, Default)]
pub struct HistoryIndex {
    /// Every request, ordered by invocation time.
    pub requests: Vec<Request>,
    /// Request positions (into `requests`) per limiter key they worked on, in invocation order.
    pub by_key: BTreeMap<String, Vec<usize>>,
    /// (identity, request position), sorted: each identity's requests in invocation order.
    by_identity: Vec<(u32, usize)>,
    /// Request position by request id.
    by_id: HashMap<u64, usize>,
    /// Positions in `wire` of each request's round trips, in order.
    wire_by_request: HashMap<u64, Vec<usize>>,
    /// The longest a completed request took, invocation to completion.
    longest_us: u64,
    /// Positions of the requests never answered (the run was cut short), in order.
    unanswered: Vec<usize>,
    pub samples: Vec<Sample>,
    /// Keyspace notifications per key: (t_us, event).
    pub keyspace: BTreeMap<String, Vec<(u64, String)>>,
    /// Problems reported during the run.
    pub problems: Vec<Problem>,
    /// The phases the driver ran, in the order they started (the timeline shades them).
    pub phases: Vec<PhaseSpan>,
    /// Whether the keyspace subscriber was up for the whole run.
    pub keyspace_complete: bool,
    /// What the nemesis did, in order.
    pub faults: Vec<FaultRecord>,
    /// When the server could not answer (server faults), in order.
    pub outages: Vec<Outage>,
    /// Keys the scenario planted before traffic, with when.
    pub planted: BTreeMap<String, u64>,
    /// What the fault proxy saw clients send, in order (empty when no proxy ran).
    pub wire: Vec<WireRecord>,
    /// Keys named on the wire by no request the proxy could tell (outside the layout), with
    /// when: (t_us, key), up to [`SIGHTINGS_PER_KEY_MAX`] times per key and
    /// [`FOREIGN_KEYS_MAX`] in all.
    pub unattributed: Vec<(u64, String)>,
    /// Cache entries the memory-pressure faults wrote: (ok, failed).
    pub cache_writes: (u64, u64),
}

/// A problem reported during the run; a fatal one means the run could not observe what it
/// needed, so nothing it did not see can pass.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Problem {
    pub source: ProblemSource,
    pub detail: String,
    pub fatal: bool,
    /// The report lists it (so it does every fatal one).
    pub noted: bool,
}

/// One phase of the schedule as the driver ran it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PhaseSpan {
    /// Its position in the scenario's [[phase]] list.
    pub index: usize,
    pub name: String,
    pub start_us: u64,
    /// `None` when the run was cut short inside it.
    pub end_us: Option<u64>,
}

/// One round trip through the fault proxy.
#[derive(Debug, Clone, PartialEq)]
pub struct WireRecord {
    pub t_us: u64,
    /// The cluster node whose proxy it crossed (none on one server).
    pub node: Option<u32>,
    pub conn: u64,
    pub request: Option<u64>,
    pub commands: Vec<String>,
}

impl WireRecord {
    /// Which connection it crossed: `conn 3`, or on a cluster `node 1 conn 3`.
    pub fn on(&self) -> String {
        match self.node {
            Some(node) => format!("node {node} conn {}", self.conn),
            None => format!("conn {}", self.conn),
        }
    }
}

/// A time the limiter's server could not answer (a server fault's [`Event::Outage`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Outage {
    pub start_us: u64,
    pub end_us: u64,
    pub fault: usize,
    pub kind: FaultKind,
    pub keys_kept: bool,
    /// When the server answered again.
    pub back_us: u64,
    /// A paused cluster node's replica was promoted meanwhile.
    pub failed_over: bool,
}

impl Outage {
    /// Whether the outage lies within [`from_us`, `to_us`].
    pub fn within(&self, from_us: u64, to_us: u64) -> bool {
        from_us <= self.start_us && self.end_us <= to_us
    }

    /// Whether this failover comes between a request sent at `sent_us` and one that ended at
    /// `ended_us`, so that what the second saw may lack what the first wrote. One server's
    /// failover is the moment its endpoint moved (`end_us`); a cluster node's spans from the
    /// promotion (or the pause that led the cluster to fail it over) to when the cluster had
    /// settled, and any overlap counts (until then the demoted node still shows what was lost).
    pub fn fails_over_between(&self, sent_us: u64, ended_us: u64) -> bool {
        let overlaps = sent_us <= self.back_us && self.start_us <= ended_us;
        match self.kind {
            FaultKind::Failover => sent_us <= self.end_us && self.end_us <= ended_us,
            FaultKind::NodeFailover => overlaps,
            FaultKind::NodePause => self.failed_over && overlaps,
            _ => false,
        }
    }
}

/// One thing the nemesis did.
#[derive(Debug, Clone, PartialEq)]
pub struct FaultRecord {
    pub t_us: u64,
    pub fault: usize,
    pub kind: FaultKind,
    pub request: Option<u64>,
    pub key: Option<String>,
    /// The command a fault on a reply acted on.
    pub command: Option<String>,
    pub effect: String,
}

impl HistoryIndex {
    /// Index `events` (taken over, not copied), with `layout` saying which keys are the
    /// limiter's and whose.
    pub fn new(events: Vec<Event>, layout: &KeyLayout) -> Self {
        let mut index = Self {
            keyspace_complete: true,
            ..Self::default()
        };
        let mut pending: BTreeMap<u64, usize> = BTreeMap::new();
        let mut foreign = std::collections::BTreeSet::new();
        for event in events {
            match event {
                Event::Foreign { keys, .. } => foreign.extend(keys),
                event => index.add(event, layout, &mut pending),
            }
        }
        index.requests.sort_by_key(|r| (r.invoke_us, r.id));
        for (pos, request) in index.requests.iter().enumerate() {
            for key in &request.keys {
                index.by_key.entry(key.clone()).or_default().push(pos);
            }
            index.by_identity.push((request.identity, pos));
            index.by_id.insert(request.id, pos);
            match request.complete_us {
                Some(end_us) => index.longest_us = index.longest_us.max(end_us.saturating_sub(request.invoke_us)),
                None => index.unanswered.push(pos),
            }
        }
        index.by_identity.sort_unstable();
        for (pos, trip) in index.wire.iter().enumerate() {
            if let Some(id) = trip.request {
                index.wire_by_request.entry(id).or_default().push(pos);
            }
        }
        index.add_unanswered(layout);
        index.pair_migrations();
        index.pair_fault_expiries();
        index.samples.sort_by_key(|s| s.t_start_us);
        if !foreign.is_empty() {
            index.forget_keys(&foreign);
        }
        index
    }

    /// A request never answered (the run was cut short) has no record of the keys it named:
    /// it counts as on every key of its identity, so that nothing is judged as if it had not
    /// been in flight.
    fn add_unanswered(&mut self, layout: &KeyLayout) {
        let unanswered: Vec<usize> = (0..self.requests.len())
            .filter(|&p| self.requests[p].complete_us.is_none())
            .collect();
        if unanswered.is_empty() {
            return;
        }
        let keys: Vec<String> = self.by_key.keys().chain(self.planted.keys()).cloned().collect();
        for key in keys {
            let Some(identity) = layout.identity_of(key.as_bytes()) else {
                continue;
            };
            let positions = self.by_key.entry(key).or_default();
            for &p in unanswered.iter().filter(|&&p| self.requests[p].identity == identity) {
                if let Err(at) = positions.binary_search(&p) {
                    positions.insert(at, p);
                }
            }
        }
    }

    fn add(&mut self, event: Event, layout: &KeyLayout, pending: &mut BTreeMap<u64, usize>) {
        // Long: one arm per kind of history event; the long arms are methods.
        match event {
            Event::Invoke {
                id,
                t_us,
                identity,
                ordinal,
                key,
                phase,
                instance,
            } => {
                pending.insert(id, self.requests.len());
                self.requests.push(Request {
                    id,
                    identity,
                    ordinal,
                    harness_key: key,
                    phase,
                    instance,
                    invoke_us: t_us,
                    ..Request::default()
                });
            }
            Event::Complete { id, .. } => {
                if let Some(pos) = pending.remove(&id) {
                    self.requests[pos].complete(event, layout);
                }
            }
            Event::Sample {
                t_start_us,
                t_end_us,
                final_audit,
                mut keys,
            } => {
                keys.retain(|k| layout.identity_of(k.key.as_bytes()).is_some());
                self.samples.push(Sample {
                    t_start_us,
                    t_end_us,
                    final_audit,
                    keys,
                });
            }
            Event::Keyspace { t_us, key, event } => {
                if layout.identity_of(key.as_bytes()).is_some() {
                    self.keyspace.entry(key).or_default().push((t_us, event));
                }
            }
            Event::Problem {
                source,
                detail,
                fatal,
                noted,
                ..
            } => {
                if source == ProblemSource::Keyspace {
                    self.keyspace_complete = false;
                }
                self.problems.push(Problem {
                    source,
                    detail,
                    fatal,
                    noted: noted || fatal,
                });
            }
            Event::Phase {
                t_us,
                index,
                name,
                edge,
            } => self.add_phase_edge(t_us, index, name, edge),
            fault @ Event::Fault { .. } => self.add_fault(fault),
            Event::Setup { t_us, key, .. } => {
                self.planted.insert(key, t_us);
            }
            Event::Wire {
                t_us,
                node,
                conn,
                request,
                commands,
                keys,
            } => {
                if request.is_none() {
                    self.add_unattributed(t_us, keys, layout);
                }
                self.wire.push(WireRecord {
                    t_us,
                    node,
                    conn,
                    request,
                    commands,
                });
            }
            Event::Outage {
                t_start_us,
                t_end_us,
                fault,
                kind,
                keys_kept,
                t_back_us,
                failed_over,
            } => self.outages.push(Outage {
                start_us: t_start_us,
                end_us: t_end_us,
                fault,
                kind,
                keys_kept,
                back_us: t_back_us.max(t_end_us),
                failed_over,
            }),
            Event::Flood {
                writes_ok,
                writes_failed,
                ..
            } => self.cache_writes = (self.cache_writes.0 + writes_ok, self.cache_writes.1 + writes_failed),
            // What ran and where: the run's facts, read by [`crate::runner::judge_history`].
            Event::Run { .. }
            | Event::Limiter { .. }
            | Event::Server { .. }
            | Event::Stats { .. }
            | Event::Foreign { .. }
            | Event::ClusterReplies { .. }
            | Event::Resources { .. } => {}
        }
    }

    fn add_phase_edge(&mut self, t_us: u64, index: usize, name: String, edge: PhaseEdge) {
        match edge {
            PhaseEdge::Start => self.phases.push(PhaseSpan {
                index,
                name,
                start_us: t_us,
                end_us: None,
            }),
            PhaseEdge::End => {
                if let Some(span) = self.phases.iter_mut().rev().find(|p| p.index == index) {
                    span.end_us = Some(t_us);
                }
            }
        }
    }

    fn add_fault(&mut self, fault: Event) {
        let Event::Fault {
            t_us,
            fault,
            kind,
            request,
            key,
            command,
            effect,
        } = fault
        else {
            return;
        };
        self.faults.push(FaultRecord {
            t_us,
            fault,
            kind,
            request,
            key,
            command,
            effect,
        });
    }

    /// Keys outside the layout that the proxy could give to no request. (Keys of the layout
    /// it could not attribute — a plant, a reply after the harness gave up — are the
    /// limiter's: not foreign.)
    /// Each key is kept a few times: a sighting while requests of several identities were in
    /// flight tells no identity, a later one may (a loaded machine overlaps the requests).
    fn add_unattributed(&mut self, t_us: u64, keys: Vec<String>, layout: &KeyLayout) {
        for key in keys.into_iter().filter(|k| layout.identity_of(k.as_bytes()).is_none()) {
            let times = self.unattributed.iter().filter(|(_, k)| *k == key).count();
            if times < SIGHTINGS_PER_KEY_MAX && self.unattributed.len() < FOREIGN_KEYS_MAX {
                self.unattributed.push((t_us, key));
            }
        }
    }

    /// Drop what the observer saw of `keys` (keys another client wrote): no checker judges them.
    pub fn forget_keys(&mut self, keys: &std::collections::BTreeSet<String>) {
        self.keyspace.retain(|key, _| !keys.contains(key));
        for sample in &mut self.samples {
            sample.keys.retain(|k| !keys.contains(&k.key));
        }
    }

    /// Whether the run saw any limiter key at all (by its layout): a request's command named
    /// one, the observer sampled one, the server notified about one, or the setup planted one.
    /// Without that, no verdict about keys, TTLs or windows rests on anything.
    pub fn saw_limiter_keys(&self) -> bool {
        !self.by_key.is_empty()
            || self.samples.iter().any(|s| !s.keys.is_empty())
            || !self.keyspace.is_empty()
            || !self.planted.is_empty()
    }

    /// Keys the limiter named that the layout does not give to the requester, each with the
    /// identity of the request that named it when the history tells: the request itself, or
    /// the only request in flight when the proxy saw it.
    pub fn foreign_keys(&self) -> Vec<Sighting> {
        let mut seen: Vec<Sighting> = Vec::new();
        for r in &self.requests {
            for key in &r.other_keys {
                if seen.len() < FOREIGN_KEYS_MAX
                    && !seen.iter().any(|s| s.key == *key && s.identity == Some(r.identity))
                {
                    seen.push(Sighting {
                        key: key.clone(),
                        identity: Some(r.identity),
                    });
                }
            }
        }
        // Each key with every identity its sightings tell, or once with none when none does.
        let mut keys: Vec<&str> = Vec::new();
        for (_, key) in &self.unattributed {
            if !keys.contains(&key.as_str()) {
                keys.push(key);
            }
        }
        for key in keys {
            let mut told: Vec<u32> = Vec::new();
            for (t_us, _) in self.unattributed.iter().filter(|(_, k)| k == key) {
                if let Some(identity) = self.sole_identity_in_flight(*t_us)
                    && !told.contains(&identity)
                {
                    told.push(identity);
                }
            }
            if told.is_empty() {
                seen.push(Sighting {
                    key: key.to_owned(),
                    identity: None,
                });
            }
            seen.extend(told.into_iter().map(|identity| Sighting {
                key: key.to_owned(),
                identity: Some(identity),
            }));
        }
        seen
    }

    /// The identity of the requests in flight at `t_us`, when they are all of one identity.
    fn sole_identity_in_flight(&self, t_us: u64) -> Option<u32> {
        let started = self.requests.partition_point(|r| r.invoke_us <= t_us);
        let mut identity = None;
        // Requests are sorted by invocation; look back over a bounded number of them.
        for r in self.requests[..started].iter().rev().take(10_000) {
            if r.end_us() >= t_us {
                match identity {
                    None => identity = Some(r.identity),
                    Some(i) if i != r.identity => return None,
                    Some(_) => {}
                }
            }
        }
        identity
    }

    /// Requests on `key`, in invocation order.
    pub fn requests_on<'a>(&'a self, key: &str) -> impl Iterator<Item = &'a Request> + 'a {
        self.by_key
            .get(key)
            .into_iter()
            .flatten()
            .map(|&pos| &self.requests[pos])
    }

    /// Requests on `key` and, among them in invocation order, the requests of the same
    /// identities whose keys were never learned: sent while another request of the identity
    /// was in flight, their round trips may have been put down to that one (the proxy takes
    /// the oldest), so they may have worked on `key` too.
    pub fn requests_maybe_on(&self, key: &str) -> Vec<&Request> {
        let Some(on) = self.by_key.get(key) else {
            return Vec::new();
        };
        let mut identities: Vec<u32> = on.iter().map(|&p| self.requests[p].identity).collect();
        identities.sort_unstable();
        identities.dedup();
        let mut positions = on.clone();
        for identity in identities {
            positions.extend(
                self.positions_of(identity)
                    .iter()
                    .map(|&(_, p)| p)
                    .filter(|&p| self.requests[p].keys.is_empty()),
            );
        }
        positions.sort_unstable();
        positions.dedup();
        positions.into_iter().map(|p| &self.requests[p]).collect()
    }

    /// The request numbered `id`.
    pub fn request(&self, id: u64) -> Option<&Request> {
        self.by_id.get(&id).map(|&p| &self.requests[p])
    }

    /// The round trips the fault proxy put down to request `id`, in order.
    pub fn wire_of(&self, id: u64) -> impl Iterator<Item = &WireRecord> {
        self.wire_by_request
            .get(&id)
            .into_iter()
            .flatten()
            .map(|&p| &self.wire[p])
    }

    /// Whether a request of `identity` other than `id` was in flight at `t_us`.
    pub fn another_in_flight(&self, identity: u32, id: u64, t_us: u64) -> bool {
        self.in_flight(identity, t_us).iter().any(|r| r.id != id)
    }

    /// The requests of `identity` in flight at `t_us` (invoked, not yet complete), in
    /// invocation order. Only those invoked within the longest request's time before `t_us`
    /// are looked at, and the unanswered ones.
    pub fn in_flight(&self, identity: u32, t_us: u64) -> Vec<&Request> {
        let positions = self.positions_of(identity);
        let invoked_us = |p: usize| self.requests[p].invoke_us;
        let to = positions.partition_point(|&(_, p)| invoked_us(p) <= t_us);
        let earliest_us = t_us.saturating_sub(self.longest_us);
        let from = positions[..to].partition_point(|&(_, p)| invoked_us(p) < earliest_us);
        let answered = positions[from..to]
            .iter()
            .map(|&(_, p)| p)
            .filter(|&p| self.requests[p].complete_us.is_some_and(|end_us| t_us <= end_us));
        let unanswered = self
            .unanswered
            .iter()
            .copied()
            .filter(|&p| self.requests[p].identity == identity && invoked_us(p) <= t_us);
        let mut found: Vec<usize> = answered.chain(unanswered).collect();
        found.sort_unstable();
        found.into_iter().map(|p| &self.requests[p]).collect()
    }

    /// The positions of `identity`'s requests, in invocation order.
    fn positions_of(&self, identity: u32) -> &[(u32, usize)] {
        let from = self.by_identity.partition_point(|&(id, _)| id < identity);
        let to = self.by_identity.partition_point(|&(id, _)| id <= identity);
        &self.by_identity[from..to]
    }

    /// The first request of `identity` sent after `t_us` that worked on a limiter key.
    pub fn next_with_keys(&self, identity: u32, t_us: u64) -> Option<&Request> {
        let positions = self.positions_of(identity);
        let sent = positions.partition_point(|&(_, p)| self.requests[p].invoke_us <= t_us);
        positions[sent..]
            .iter()
            .map(|&(_, p)| &self.requests[p])
            .find(|r| !r.keys.is_empty())
    }

    /// The last request of `identity` sent at or before `t_us` that worked on a limiter key.
    pub fn last_with_keys(&self, identity: u32, t_us: u64) -> Option<&Request> {
        let positions = self.positions_of(identity);
        let sent = positions.partition_point(|&(_, p)| self.requests[p].invoke_us <= t_us);
        positions[..sent]
            .iter()
            .rev()
            .map(|&(_, p)| &self.requests[p])
            .find(|r| !r.keys.is_empty())
    }

    /// The first request on `key` sent at or after `t_us`.
    pub fn first_on_after(&self, key: &str, t_us: u64) -> Option<&Request> {
        let positions = self.by_key.get(key)?;
        let from = positions.partition_point(|&p| self.requests[p].invoke_us < t_us);
        positions.get(from).map(|&p| &self.requests[p])
    }

    /// When the first request on `key` was answered, if any was.
    pub fn first_answer_on(&self, key: &str) -> Option<u64> {
        self.requests_on(key).filter_map(|r| r.complete_us).min()
    }

    /// A key `MIGRATE`d to another node of a cluster is notified twice: `restore` by the node
    /// it arrives on and `del` by the one it left, at once (the two nodes' notifications come
    /// in either order). Such a `del`, after a reshard struck, is a move, not an end of the
    /// key: it becomes `migrated`, which no checker takes for an expiry, an eviction or a
    /// deletion. (A run without a reshard keeps every `del`.)
    fn pair_migrations(&mut self) {
        let Some(resharded_us) = self
            .faults
            .iter()
            .filter(|f| f.kind == FaultKind::Reshard)
            .map(|f| f.t_us)
            .min()
        else {
            return;
        };
        for events in self.keyspace.values_mut() {
            events.sort_by_key(|(t_us, _)| *t_us);
            let restores: Vec<u64> = events.iter().filter(|(_, e)| e == "restore").map(|(t, _)| *t).collect();
            if restores.is_empty() {
                continue;
            }
            for (t_us, event) in events.iter_mut().filter(|(t, e)| e == "del" && *t >= resharded_us) {
                if restores.iter().any(|r| r.abs_diff(*t_us) <= MIGRATION_PAIR_US) {
                    *event = "migrated".into();
                }
            }
        }
    }

    /// The nemesis makes a key expire with `PEXPIRE key 1` (`expire-between-round-trips`). A
    /// server that finds that millisecond already past when it checks — Redis before 7.2 reads
    /// its clock twice in the command, and a loaded machine can tick in between — deletes the
    /// key at once and notifies `del`, not `expired`: the expiry the fault meant all the same,
    /// not a deletion by the limiter. For each such strike, the first `del` of each key the
    /// struck request named, from the request's start to the strike's record (plus how late a
    /// notification may come), becomes `expired` when no `expired` of that key is there.
    fn pair_fault_expiries(&mut self) {
        for fault in self
            .faults
            .iter()
            .filter(|f| f.kind == FaultKind::ExpireBetweenRoundTrips)
        {
            let request = fault
                .request
                .and_then(|id| self.by_id.get(&id))
                .map(|&p| &self.requests[p]);
            let from_us = request.map_or(fault.t_us, |r| r.invoke_us);
            let to_us = fault.t_us.saturating_add(FAULT_DEL_LATE_US);
            let keys = request.into_iter().flat_map(|r| r.keys.iter()).chain(fault.key.iter());
            for key in keys {
                let Some(events) = self.keyspace.get_mut(key) else {
                    continue;
                };
                let within = |t: u64| t >= from_us && t <= to_us;
                if events.iter().any(|(t, e)| within(*t) && e == "expired") {
                    continue;
                }
                if let Some((_, event)) = events
                    .iter_mut()
                    .filter(|(t, e)| within(*t) && e == "del")
                    .min_by_key(|(t, _)| *t)
                {
                    *event = "expired".into();
                }
            }
        }
    }

    /// The first fatal problem, if the run lost what it needed to judge.
    pub fn fatal_problem(&self) -> Option<&Problem> {
        self.problems.iter().find(|p| p.fatal)
    }

    /// Keyspace events on `key` with `from_us <= t <= to_us`.
    pub fn keyspace_between<'a>(
        &'a self,
        key: &str,
        from_us: u64,
        to_us: u64,
    ) -> impl Iterator<Item = &'a (u64, String)> + 'a {
        self.keyspace
            .get(key)
            .into_iter()
            .flatten()
            .filter(move |(t, _)| *t >= from_us && *t <= to_us)
    }
}
