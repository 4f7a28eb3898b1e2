//! A read-only view of a history, organised for the checkers: requests with their
//! completions, samples, and keyspace events per key.

use std::collections::BTreeMap;

use super::{Event, KeySample, Outcome};

/// One request: its invocation merged with its completion (absent if the run was cut short).
#[derive(Debug, Clone, PartialEq)]
pub struct Request {
    pub id: u64,
    pub identity: u32,
    pub ordinal: u64,
    pub key: String,
    pub phase: usize,
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
    /// Request positions (into `requests`) per key, in invocation order.
    pub by_key: BTreeMap<String, Vec<usize>>,
    pub samples: Vec<Sample>,
    /// Keyspace notifications per key: (t_us, event).
    pub keyspace: BTreeMap<String, Vec<(u64, String)>>,
    /// Problems reported during the run: (source, detail, fatal).
    pub problems: Vec<(String, String, bool)>,
    /// Phase boundaries: (index, name, start_us, end_us).
    pub phases: Vec<(usize, String, u64, Option<u64>)>,
    /// Whether the keyspace subscriber was up for the whole run.
    pub keyspace_complete: bool,
    /// What the nemesis did, in order.
    pub faults: Vec<FaultRecord>,
    /// Keys the scenario planted before traffic, with when.
    pub planted: BTreeMap<String, u64>,
    /// What the fault proxy saw clients send, in order (empty when no proxy ran).
    pub wire: Vec<WireRecord>,
}

/// One round trip through the fault proxy.
#[derive(Debug, Clone, PartialEq)]
pub struct WireRecord {
    pub t_us: u64,
    pub conn: u64,
    pub request: Option<u64>,
    pub commands: Vec<String>,
}

/// One thing the nemesis did.
#[derive(Debug, Clone, PartialEq)]
pub struct FaultRecord {
    pub t_us: u64,
    pub fault: usize,
    pub kind: String,
    pub request: Option<u64>,
    pub key: Option<String>,
    /// The command a fault on a reply acted on.
    pub command: Option<String>,
    pub effect: String,
}

impl HistoryIndex {
    pub fn new(events: &[Event]) -> Self {
        let mut index = Self {
            keyspace_complete: true,
            ..Self::default()
        };
        let mut pending: BTreeMap<u64, usize> = BTreeMap::new();
        for event in events {
            index.add(event, &mut pending);
        }
        index.requests.sort_by_key(|r| (r.invoke_us, r.id));
        for (pos, request) in index.requests.iter().enumerate() {
            index.by_key.entry(request.key.clone()).or_default().push(pos);
        }
        index.samples.sort_by_key(|s| s.t_start_us);
        index
    }

    fn add(&mut self, event: &Event, pending: &mut BTreeMap<u64, usize>) {
        match event {
            Event::Invoke {
                id,
                t_us,
                identity,
                ordinal,
                key,
                phase,
            } => {
                pending.insert(*id, self.requests.len());
                self.requests.push(Request {
                    id: *id,
                    identity: *identity,
                    ordinal: *ordinal,
                    key: key.clone(),
                    phase: *phase,
                    invoke_us: *t_us,
                    complete_us: None,
                    outcome: None,
                    count: None,
                    trips: Vec::new(),
                    error: None,
                });
            }
            Event::Complete {
                id,
                t_us,
                outcome,
                count,
                trips,
                error,
            } => {
                if let Some(pos) = pending.remove(id) {
                    let r = &mut self.requests[pos];
                    r.complete_us = Some(*t_us);
                    r.outcome = Some(*outcome);
                    r.count = *count;
                    r.trips.clone_from(trips);
                    r.error.clone_from(error);
                }
            }
            Event::Sample {
                t_start_us,
                t_end_us,
                final_audit,
                keys,
            } => self.samples.push(Sample {
                t_start_us: *t_start_us,
                t_end_us: *t_end_us,
                final_audit: *final_audit,
                keys: keys.clone(),
            }),
            Event::Keyspace { t_us, key, event } => {
                self.keyspace
                    .entry(key.clone())
                    .or_default()
                    .push((*t_us, event.clone()));
            }
            Event::Problem {
                source, detail, fatal, ..
            } => {
                if source == "keyspace" {
                    self.keyspace_complete = false;
                }
                self.problems.push((source.clone(), detail.clone(), *fatal));
            }
            Event::Phase {
                t_us,
                index,
                name,
                edge,
            } => match edge {
                super::PhaseEdge::Start => self.phases.push((*index, name.clone(), *t_us, None)),
                super::PhaseEdge::End => {
                    if let Some(p) = self.phases.iter_mut().find(|p| p.0 == *index) {
                        p.3 = Some(*t_us);
                    }
                }
            },
            Event::Fault {
                t_us,
                fault,
                kind,
                request,
                key,
                command,
                effect,
            } => self.faults.push(FaultRecord {
                t_us: *t_us,
                fault: *fault,
                kind: kind.clone(),
                request: *request,
                key: key.clone(),
                command: command.clone(),
                effect: effect.clone(),
            }),
            Event::Setup { t_us, key, .. } => {
                self.planted.insert(key.clone(), *t_us);
            }
            Event::Wire {
                t_us,
                conn,
                request,
                commands,
            } => self.wire.push(WireRecord {
                t_us: *t_us,
                conn: *conn,
                request: *request,
                commands: commands.clone(),
            }),
            Event::Run { .. } | Event::Stats { .. } | Event::Flood { .. } => {}
        }
    }

    /// Requests on `key`, in invocation order.
    pub fn requests_on<'a>(&'a self, key: &str) -> impl Iterator<Item = &'a Request> + 'a {
        self.by_key
            .get(key)
            .into_iter()
            .flatten()
            .map(|&pos| &self.requests[pos])
    }

    /// When the first request on `key` was answered, if any was.
    pub fn first_answer_on(&self, key: &str) -> Option<u64> {
        self.requests_on(key).filter_map(|r| r.complete_us).min()
    }

    /// The first fatal problem, if the run lost what it needed to judge.
    pub fn fatal_problem(&self) -> Option<&(String, String, bool)> {
        self.problems.iter().find(|p| p.2)
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
