//! Which request each proxied command belongs to. The driver registers a request before
//! the limiter decides it and ends it after its completion is recorded; the proxy maps a
//! command to a request by the limiter key it names (the run's [`KeyLayout`] says which keys
//! are whose). With several requests of one identity in flight (burst phases) the oldest one
//! the limiter has not answered yet is taken: an adapter's reply marks its request answered
//! as soon as it is read, since a serial adapter sends the next request's first command
//! right after it (before the completion is recorded, the next command went to the request
//! just answered: 0.2-2.4 % of a burst's requests).

use std::collections::HashMap;
use std::sync::{Mutex, OnceLock};

use crate::keys::KeyLayout;
use crate::nemesis::Hold;
use crate::request::{RequestCtx, TripSummary, keys_at_gap, remember_keys};

/// The round trips of one request the history lists by name; a limiter (or an adapter gone
/// wrong) that sends commands without end in one request has the rest counted.
const TRIPS_SHOWN_MAX: usize = 64;

#[derive(Debug)]
struct Entry {
    ctx: RequestCtx,
    /// The limiter has answered it (an adapter's reply was read): later round trips are
    /// another request's, though its completion may not be recorded yet.
    answered: bool,
    /// The first [`TRIPS_SHOWN_MAX`] round trips' labels.
    trips: Vec<String>,
    /// How many round trips it made, shown or not.
    trips_made: usize,
    /// Every key the request's commands named, in order of first appearance.
    keys: Vec<String>,
    holds: Vec<Hold>,
}

#[derive(Debug, Default)]
pub struct InFlight {
    /// Set once the limiter has said how its keys look (an adapter's hello comes after the
    /// proxy is up); until then no command is attributed.
    layout: OnceLock<KeyLayout>,
    by_identity: Mutex<HashMap<u32, Vec<Entry>>>,
    /// The identity of each request in flight, by id.
    identity_by_id: Mutex<HashMap<u64, u32>>,
}

/// What [`InFlight::end`] hands back: the round trips the proxy saw, the keys they named, and
/// the holds to drop once the completion is in the history.
#[derive(Debug, Default)]
pub struct Ended {
    pub trips: Vec<String>,
    pub keys: Vec<String>,
    pub holds: Vec<Hold>,
}

/// A round trip attributed to a request.
#[derive(Debug, Clone)]
pub struct Found {
    pub ctx: RequestCtx,
    /// The trip's number within the request, counting from 1.
    pub number: usize,
    /// The limiter keys the request works on, for a fault in the gap before this trip.
    pub keys: Vec<String>,
}

impl InFlight {
    pub fn new() -> Self {
        Self::default()
    }

    /// The run's key layout; later calls are ignored (one layout per run).
    pub fn set_layout(&self, layout: KeyLayout) {
        let _ = self.layout.set(layout);
    }

    pub fn begin(&self, ctx: &RequestCtx) {
        self.identity_by_id
            .lock()
            .expect("in-flight lock")
            .insert(ctx.id, ctx.identity);
        self.by_identity
            .lock()
            .expect("in-flight lock")
            .entry(ctx.identity)
            .or_default()
            .push(Entry {
                ctx: ctx.clone(),
                answered: false,
                trips: Vec::new(),
                trips_made: 0,
                keys: Vec::new(),
                holds: Vec::new(),
            });
    }

    pub fn end(&self, ctx: &RequestCtx) -> Ended {
        self.identity_by_id.lock().expect("in-flight lock").remove(&ctx.id);
        let mut map = self.by_identity.lock().expect("in-flight lock");
        let Some(entries) = map.get_mut(&ctx.identity) else {
            return Ended::default();
        };
        let Some(pos) = entries.iter().position(|e| e.ctx.id == ctx.id) else {
            return Ended::default();
        };
        let mut entry = entries.remove(pos);
        if entry.trips_made > entry.trips.len() {
            let more = entry.trips_made - entry.trips.len();
            entry.trips.push(format!("… {more} more round trips"));
        }
        Ended {
            trips: entry.trips,
            keys: entry.keys,
            holds: entry.holds,
        }
    }

    /// The identity whose limiter key this is, by the run's layout.
    pub fn identity_of(&self, key: &[u8]) -> Option<u32> {
        self.layout.get()?.identity_of(key)
    }

    /// Request `id` has been answered (before its completion is recorded): new round trips
    /// of its identity go to the next request in flight.
    pub fn answered(&self, id: u64) {
        let Some(identity) = self.identity_by_id.lock().expect("in-flight lock").get(&id).copied() else {
            return;
        };
        let mut map = self.by_identity.lock().expect("in-flight lock");
        if let Some(entry) = map
            .get_mut(&identity)
            .and_then(|entries| entries.iter_mut().find(|e| e.ctx.id == id))
        {
            entry.answered = true;
        }
    }

    /// The request a round trip on `identity`'s keys belongs to — the oldest in flight not yet
    /// answered (the oldest, when every one is) — and records the trip and its keys.
    pub fn trip(&self, identity: u32, trip: &TripSummary) -> Option<Found> {
        let layout = self.layout.get()?;
        let mut map = self.by_identity.lock().expect("in-flight lock");
        let entries = map.get_mut(&identity)?;
        let at = entries.iter().position(|e| !e.answered).unwrap_or(0);
        let entry = entries.get_mut(at)?;
        let keys = keys_at_gap(layout, identity, &entry.keys, trip);
        entry.trips_made += 1;
        if entry.trips.len() < TRIPS_SHOWN_MAX {
            entry.trips.push(trip.label());
        }
        remember_keys(&mut entry.keys, trip.keys.iter().cloned());
        Some(Found {
            ctx: entry.ctx.clone(),
            number: entry.trips_made,
            keys,
        })
    }

    /// Keep `hold` until the request ends.
    pub fn hold(&self, ctx: &RequestCtx, hold: Hold) {
        let mut map = self.by_identity.lock().expect("in-flight lock");
        if let Some(entry) = map
            .get_mut(&ctx.identity)
            .and_then(|entries| entries.iter_mut().find(|e| e.ctx.id == ctx.id))
        {
            entry.holds.push(hold);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::keys::LayoutSource;

    fn ctx(id: u64, identity: u32) -> RequestCtx {
        RequestCtx {
            id,
            identity,
            ordinal: id,
            key: format!("rl:{identity}"),
            instance: 0,
            now_ms: 0,
        }
    }

    fn trip(label: &str, keys: &[&str]) -> TripSummary {
        TripSummary {
            commands: vec![label.to_owned()],
            keys: keys.iter().map(|k| (*k).to_owned()).collect(),
        }
    }

    #[test]
    fn keys_map_to_identities_by_the_layout() {
        let f = InFlight::new();
        assert_eq!(f.identity_of(b"rl:7"), None, "no layout yet: nothing is attributed");
        f.set_layout(
            KeyLayout::parse(
                &["rl:{identity}".into(), "day:{identity}:*".into()],
                12,
                LayoutSource::Scenario,
            )
            .unwrap(),
        );
        assert_eq!(f.identity_of(b"rl:7"), Some(7));
        assert_eq!(f.identity_of(b"day:11:20261201"), Some(11));
        assert_eq!(f.identity_of(b"rl:12"), None, "no such identity");
        assert_eq!(f.identity_of(b"rl:7:log"), None, "not in the layout");
        assert_eq!(f.identity_of(b"cache:7"), None);
    }

    #[test]
    fn trips_count_per_request_oldest_first_with_their_keys() {
        let f = InFlight::new();
        f.set_layout(KeyLayout::default_for("rl:", 2));
        assert!(f.trip(0, &trip("GET", &["rl:0"])).is_none(), "no request in flight");
        f.begin(&ctx(1, 0));
        f.begin(&ctx(2, 0));
        let first = f.trip(0, &trip("GET", &["rl:0"])).unwrap();
        assert_eq!((first.ctx.id, first.number), (1, 1));
        assert_eq!(first.keys, vec!["rl:0"], "before its first trip: the trip's own keys");
        let second = f.trip(0, &trip("INCR", &["rl:0", "other"])).unwrap();
        assert_eq!(
            (second.ctx.id, second.number, second.keys),
            (1, 2, vec!["rl:0".to_owned()])
        );
        let ended = f.end(&ctx(1, 0));
        assert_eq!(ended.trips, vec!["GET", "INCR"]);
        assert_eq!(ended.keys, vec!["rl:0", "other"]);
        assert_eq!(
            f.trip(0, &trip("GET", &["rl:0"])).map(|t| (t.ctx.id, t.number)),
            Some((2, 1))
        );
        assert!(f.end(&ctx(9, 1)).trips.is_empty());
    }

    #[test]
    fn a_request_of_endless_round_trips_lists_the_first_and_counts_the_rest() {
        let f = InFlight::new();
        f.set_layout(KeyLayout::default_for("rl:", 1));
        f.begin(&ctx(1, 0));
        let mut last = 0;
        for _ in 0..1000 {
            last = f.trip(0, &trip("GET", &["rl:0"])).unwrap().number;
        }
        assert_eq!(last, 1000, "every trip is numbered");
        let trips = f.end(&ctx(1, 0)).trips;
        assert_eq!(trips.len(), TRIPS_SHOWN_MAX + 1);
        assert_eq!(trips.last().unwrap(), "… 936 more round trips");
    }

    #[test]
    fn an_answered_request_gets_no_more_trips_though_it_has_not_ended() {
        let f = InFlight::new();
        f.set_layout(KeyLayout::default_for("rl:", 2));
        f.begin(&ctx(1, 0));
        f.begin(&ctx(2, 0));
        assert_eq!(f.trip(0, &trip("INCR", &["rl:0"])).map(|t| t.ctx.id), Some(1));
        f.answered(1);
        f.answered(99); // not in flight: nothing to do
        let next = f.trip(0, &trip("INCR", &["rl:0"])).unwrap();
        assert_eq!((next.ctx.id, next.number), (2, 1), "the next request's first trip");
        assert_eq!(f.end(&ctx(1, 0)).trips, vec!["INCR"]);
        f.answered(2);
        assert_eq!(
            f.trip(0, &trip("EXPIRE", &["rl:0"])).map(|t| t.ctx.id),
            Some(2),
            "every one answered: the oldest, as before"
        );
    }
}
