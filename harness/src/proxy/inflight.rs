//! Which request each proxied command belongs to. The driver registers a request before
//! the limiter decides it and ends it after its completion is recorded; the proxy maps a
//! command to a request by the key it names (`key_prefix` + identity). With several
//! requests of one identity in flight (burst phases) the oldest one is taken.

use std::collections::HashMap;
use std::sync::Mutex;

use crate::limiter::RequestCtx;
use crate::nemesis::Hold;

#[derive(Debug)]
struct Entry {
    ctx: RequestCtx,
    trips: Vec<String>,
    holds: Vec<Hold>,
}

#[derive(Debug)]
pub struct InFlight {
    prefix: String,
    identities: u32,
    by_identity: Mutex<HashMap<u32, Vec<Entry>>>,
}

/// What [`InFlight::end`] hands back: the round trips the proxy saw, and the holds to drop
/// once the completion is in the history.
#[derive(Debug, Default)]
pub struct Ended {
    pub trips: Vec<String>,
    pub holds: Vec<Hold>,
}

impl InFlight {
    pub fn new(prefix: &str, identities: u32) -> Self {
        Self {
            prefix: prefix.to_owned(),
            identities,
            by_identity: Mutex::default(),
        }
    }

    pub fn begin(&self, ctx: &RequestCtx) {
        self.by_identity
            .lock()
            .expect("in-flight lock")
            .entry(ctx.identity)
            .or_default()
            .push(Entry {
                ctx: ctx.clone(),
                trips: Vec::new(),
                holds: Vec::new(),
            });
    }

    pub fn end(&self, ctx: &RequestCtx) -> Ended {
        let mut map = self.by_identity.lock().expect("in-flight lock");
        let Some(entries) = map.get_mut(&ctx.identity) else {
            return Ended::default();
        };
        let Some(pos) = entries.iter().position(|e| e.ctx.id == ctx.id) else {
            return Ended::default();
        };
        let entry = entries.remove(pos);
        Ended {
            trips: entry.trips,
            holds: entry.holds,
        }
    }

    /// The identity whose key this is: the prefix, then the identity's number, then
    /// anything (a script may keep `rl:7:log` beside `rl:7`).
    pub fn identity_of(&self, key: &[u8]) -> Option<u32> {
        let rest = key.strip_prefix(self.prefix.as_bytes())?;
        let digits = rest.iter().take_while(|b| b.is_ascii_digit()).count();
        if digits == 0 || rest.get(digits).is_some_and(u8::is_ascii_digit) {
            return None;
        }
        let identity: u32 = std::str::from_utf8(&rest[..digits]).ok()?.parse().ok()?;
        (identity < self.identities).then_some(identity)
    }

    /// The request a round trip on `identity`'s key belongs to, and the trip's number
    /// (counting from 1); records the trip.
    pub fn trip(&self, identity: u32, label: &str) -> Option<(RequestCtx, usize)> {
        let mut map = self.by_identity.lock().expect("in-flight lock");
        let entry = map.get_mut(&identity)?.first_mut()?;
        entry.trips.push(label.to_owned());
        Some((entry.ctx.clone(), entry.trips.len()))
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

    fn ctx(id: u64, identity: u32) -> RequestCtx {
        RequestCtx {
            id,
            identity,
            ordinal: id,
            key: format!("rl:{identity}"),
        }
    }

    #[test]
    fn keys_map_to_identities() {
        let f = InFlight::new("rl:", 12);
        assert_eq!(f.identity_of(b"rl:7"), Some(7));
        assert_eq!(f.identity_of(b"rl:11:log"), Some(11));
        assert_eq!(f.identity_of(b"rl:12"), None, "no such identity");
        assert_eq!(f.identity_of(b"rl:"), None);
        assert_eq!(f.identity_of(b"cache:7"), None);
    }

    #[test]
    fn trips_count_per_request_oldest_first() {
        let f = InFlight::new("rl:", 2);
        assert!(f.trip(0, "GET").is_none(), "no request in flight");
        f.begin(&ctx(1, 0));
        f.begin(&ctx(2, 0));
        assert_eq!(f.trip(0, "GET").map(|(c, n)| (c.id, n)), Some((1, 1)));
        assert_eq!(f.trip(0, "INCR").map(|(c, n)| (c.id, n)), Some((1, 2)));
        assert_eq!(f.end(&ctx(1, 0)).trips, vec!["GET", "INCR"]);
        assert_eq!(f.trip(0, "GET").map(|(c, n)| (c.id, n)), Some((2, 1)));
        assert!(f.end(&ctx(9, 1)).trips.is_empty());
    }
}
