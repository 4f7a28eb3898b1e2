//! When each identity's keys are due to expire, as keyspace notifications tell it: a key
//! given a TTL (`expire`) is taken to expire a window later — the fixed-window convention,
//! and what a limiter that sets its TTL on every request keeps moving — and is forgotten
//! when it expires, is evicted or deleted. A steady phase with `clear_of_expiry_ms` holds
//! an identity's request while one of its keys is due, so that no window ends while a
//! request is between its round trips by chance (on a machine whose round trips sometimes
//! take tens of ms); the races the catalog shows are the ones its faults make.
//!
//! The notification says which keys have a TTL; when they expire, the server says: before
//! a held phase's request starts, one pipelined `PTTL` on the harness's own connection asks
//! for every such key of its identity (at most [`ASKED_KEYS_MAX`], those due first; any
//! others keep their estimate). A key at most the margin (plus that round trip) from
//! its expiry holds the request until just after it. Asking, rather than counting a window
//! from the notification, keeps the hold right when notifications arrive late (a loaded
//! machine: the window would end before the estimate, between a request's round trips) and
//! for TTLs that are not one window (a token bucket's two, a daily cap's 26 h). When the
//! server cannot answer within the margin (paused, restarting) the estimate decides: a
//! notification reaches the harness after the server set the TTL, so the estimated due time
//! is never earlier than the real one. The driver holds only limiters with a gap between
//! round trips (`Driver::held_clear_of_expiry`).

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Duration;

use crate::backend::Conn;
use crate::clock::RunClock;

/// After the due time, this much more before the held request goes (the server's clock and
/// the harness's read the same machine's clock, but the expiry runs on the server's loop).
const SETTLE_US: u64 = 2_000;

#[derive(Debug)]
pub struct ExpiryWatch {
    window_us: u64,
    clock: RunClock,
    /// identity → key → when it is due to expire (µs on the run's clock).
    due: Mutex<HashMap<u32, HashMap<String, u64>>>,
    /// When each key last arrived by `restore` (a cluster's migration: the node it left
    /// notifies `del` at about the same time, and that `del` is no end of the key).
    restored_us: Mutex<HashMap<String, u64>>,
    /// The harness's own connection to the limiter's server, to ask for PTTLs; `None`: the
    /// estimates decide.
    server: Mutex<Option<Asking>>,
}

/// Where to ask, and the connection while it works (a restart or a failover closes it: it is
/// opened again, at most every [`RECONNECT_EVERY_US`]).
#[derive(Debug)]
struct Asking {
    url: String,
    /// A cluster's nodes: the PTTLs go through a cluster connection, routed by key.
    cluster: Option<Vec<String>>,
    conn: Option<Conn>,
    retry_at_us: u64,
}

const RECONNECT_EVERY_US: u64 = 100_000;

/// The PTTLs of `keys`: one pipeline to one server; on a cluster each key on its own, all at
/// once (a pipeline must stay inside one slot there, and an identity's keys need not).
async fn pttls_ms(conn: &mut Conn, keys: &[String]) -> redis::RedisResult<Vec<i64>> {
    if matches!(conn, Conn::Cluster(_)) && keys.len() > 1 {
        let asks = keys.iter().map(|key| {
            let mut conn = conn.clone();
            async move { redis::cmd("PTTL").arg(key).query_async::<i64>(&mut conn).await }
        });
        return futures::future::try_join_all(asks).await;
    }
    let mut pipe = redis::pipe();
    for key in keys {
        pipe.cmd("PTTL").arg(key);
    }
    pipe.query_async(conn).await
}

impl ExpiryWatch {
    pub fn new(window_ms: u64, clock: RunClock) -> Self {
        Self {
            window_us: window_ms * 1000,
            clock,
            due: Mutex::new(HashMap::new()),
            restored_us: Mutex::new(HashMap::new()),
            server: Mutex::new(None),
        }
    }

    /// Ask the server at `url` (on a connection of the harness's own) how long the keys have
    /// left, rather than estimating it from when their TTL was seen.
    /// `cluster`: the nodes of the cluster `url` belongs to, when it is one.
    pub fn ask(self, url: &str, cluster: Option<&[String]>) -> Self {
        *self.server.lock().expect("expiry watch lock") = Some(Asking {
            url: url.to_owned(),
            cluster: cluster.map(<[String]>::to_vec),
            conn: None,
            retry_at_us: 0,
        });
        self
    }

    /// The connection to ask on, opened (again) when it is time to; `None`: not now.
    async fn connection(&self, within: Duration) -> Option<Conn> {
        let (url, cluster) = {
            let server = self.server.lock().expect("expiry watch lock");
            let asking = server.as_ref()?;
            if let Some(conn) = &asking.conn {
                return Some(conn.clone());
            }
            if self.clock.now_us() < asking.retry_at_us {
                return None;
            }
            (asking.url.clone(), asking.cluster.clone())
        };
        let open = async {
            match &cluster {
                Some(seeds) => crate::backend::connect_cluster(seeds).await.map(Conn::from),
                None => crate::backend::connect(&url).await.map(Conn::from),
            }
        };
        let opened = tokio::time::timeout(within, open).await;
        let mut server = self.server.lock().expect("expiry watch lock");
        let asking = server.as_mut()?;
        match opened {
            Ok(Ok(conn)) => {
                asking.conn = Some(conn.clone());
                Some(conn)
            }
            _ => {
                asking.retry_at_us = self.clock.now_us() + RECONNECT_EVERY_US;
                None
            }
        }
    }

    /// The connection failed: open another one later.
    fn lost_connection(&self) {
        if let Some(asking) = self.server.lock().expect("expiry watch lock").as_mut() {
            asking.conn = None;
            asking.retry_at_us = self.clock.now_us() + RECONNECT_EVERY_US;
        }
    }

    /// A key a request of `identity` named: due a window later while its TTL is not known
    /// (its `expire` notification may have been lost, as when the notification connection
    /// closes with a server restart); the PTTL asked before the identity's next held request
    /// corrects that, or forgets the key.
    pub fn named(&self, identity: u32, key: &str) {
        let now_us = self.clock.now_us();
        let mut due = self.due.lock().expect("expiry watch lock");
        due.entry(identity)
            .or_default()
            .entry(key.to_owned())
            .or_insert(now_us + self.window_us);
    }

    /// A keyspace notification `event` for `key` of `identity`, seen now.
    pub fn seen(&self, identity: u32, key: &str, event: &str) {
        self.seen_at(identity, key, event, self.clock.now_us());
    }

    fn seen_at(&self, identity: u32, key: &str, event: &str, t_us: u64) {
        let mut due = self.due.lock().expect("expiry watch lock");
        match event {
            // A key restored (moved in, its TTL with it) is due again: the estimate until
            // the server is asked.
            "expire" | "restore" => {
                due.entry(identity)
                    .or_default()
                    .insert(key.to_owned(), t_us + self.window_us);
                if event == "restore" {
                    self.restored_us
                        .lock()
                        .expect("expiry watch lock")
                        .insert(key.to_owned(), t_us);
                }
            }
            "del"
                if self
                    .restored_us
                    .lock()
                    .expect("expiry watch lock")
                    .get(key)
                    .is_some_and(|r| r.abs_diff(t_us) <= crate::history::MIGRATION_PAIR_US) => {}
            "expired" | "evicted" | "del" => {
                if let Some(keys) = due.get_mut(&identity) {
                    keys.remove(key);
                }
            }
            _ => {}
        }
    }

    /// Until when a request of `identity` starting at `t_us` should wait so that it does
    /// not start within `clear_us` before one of its keys is due; `None`: it may go.
    pub fn hold_until(&self, identity: u32, t_us: u64, clear_us: u64) -> Option<u64> {
        let due = self.due.lock().expect("expiry watch lock");
        due.get(&identity)?
            .values()
            .filter(|&&d| t_us + clear_us >= d && t_us < d + SETTLE_US)
            .map(|&d| d + SETTLE_US)
            .max()
    }

    /// Wait, if need be, until a request of `identity` may start clear of its keys' expiry.
    pub async fn clear(&self, identity: u32, clear_us: u64) {
        // A new TTL may be seen while waiting: look again after each wait.
        for _ in 0..8 {
            let until_us = match self.ask_server(identity, clear_us).await {
                Some(told) => told,
                None => self.hold_until(identity, self.clock.now_us(), clear_us),
            };
            let Some(until_us) = until_us else {
                return;
            };
            let now_us = self.clock.now_us();
            tokio::time::sleep(Duration::from_micros(until_us.saturating_sub(now_us))).await;
        }
    }

    /// What the server says of `identity`'s keys with a TTL: `Some(None)` the request may
    /// go, `Some(Some(until))` it waits until then; `None` when there is no answer within
    /// the margin (no connection, an error, a paused or restarting server).
    async fn ask_server(&self, identity: u32, clear_us: u64) -> Option<Option<u64>> {
        let (keys, unasked) = {
            let due = self.due.lock().expect("expiry watch lock");
            due.get(&identity).map(keys_to_ask).unwrap_or_default()
        };
        if keys.is_empty() {
            return Some(None);
        }
        let within = Duration::from_micros(clear_us.max(1_000));
        let mut conn = self.connection(within).await?;
        let sent_us = self.clock.now_us();
        let asked = tokio::time::timeout(within, pttls_ms(&mut conn, &keys)).await;
        let replied_us = self.clock.now_us();
        let pttls_ms = match asked {
            Ok(Ok(pttls_ms)) => pttls_ms,
            // Slow (a paused server): the estimate decides this time.
            Err(_) => return None,
            Ok(Err(_)) => {
                self.lost_connection();
                return None;
            }
        };
        let mut due = self.due.lock().expect("expiry watch lock");
        let known = due.entry(identity).or_default();
        for (key, &pttl_ms) in keys.iter().zip(&pttls_ms) {
            // Gone or without a TTL: nothing is due; else it is due no earlier than this.
            if pttl_ms < 0 {
                known.remove(key);
            } else if let Some(d) = known.get_mut(key) {
                *d = sent_us + pttl_ms as u64 * 1000;
            }
        }
        drop(due);
        let told = hold_from_pttls(&pttls_ms, sent_us, replied_us, clear_us);
        if !unasked {
            return Some(told);
        }
        // Keys beyond those asked: their estimates decide for them.
        Some(told.max(self.hold_until(identity, replied_us, clear_us)))
    }
}

/// At most this many of an identity's keys are asked for at once (a limiter may keep a key
/// per request, each with a TTL): those due first by the estimate.
const ASKED_KEYS_MAX: usize = 16;

/// The keys to ask for (the [`ASKED_KEYS_MAX`] due first), and whether some were left out.
fn keys_to_ask(due: &HashMap<String, u64>) -> (Vec<String>, bool) {
    let mut keys: Vec<(&String, u64)> = due.iter().map(|(k, &d)| (k, d)).collect();
    if keys.len() > ASKED_KEYS_MAX {
        keys.sort_by_key(|&(k, d)| (d, k.clone()));
        keys.truncate(ASKED_KEYS_MAX);
    }
    let unasked = due.len() > keys.len();
    (keys.into_iter().map(|(k, _)| k.clone()).collect(), unasked)
}

/// Whether a request about to start at `replied_us` must wait, given the keys' PTTLs (ms)
/// asked at `sent_us`: a key expires between `sent_us + pttl` and `replied_us + pttl`, so
/// one that may expire within `clear_us` of the start holds it until just after its latest
/// possible expiry. `None`: it may go.
pub fn hold_from_pttls(pttls_ms: &[i64], sent_us: u64, replied_us: u64, clear_us: u64) -> Option<u64> {
    pttls_ms
        .iter()
        .filter(|&&p| p >= 0)
        .map(|&p| p as u64 * 1000)
        .filter(|&left_us| sent_us + left_us <= replied_us + clear_us)
        .map(|left_us| replied_us + left_us + SETTLE_US)
        .max()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn watch() -> ExpiryWatch {
        ExpiryWatch::new(510, RunClock::start())
    }

    #[test]
    fn a_request_due_within_the_margin_before_an_expiry_waits_past_it() {
        let w = watch();
        w.seen_at(0, "rl:0", "expire", 1_000);
        // Due at 511 ms: a request at 480 ms with a 40 ms margin waits until 513 ms.
        assert_eq!(w.hold_until(0, 480_000, 40_000), Some(513_000));
        assert_eq!(w.hold_until(0, 470_000, 40_000), None, "earlier than the margin: goes");
        assert_eq!(w.hold_until(0, 514_000, 40_000), None, "after the settle time: goes");
        assert_eq!(w.hold_until(1, 480_000, 40_000), None, "another identity is not held");
    }

    /// A key a request named, with no `expire` seen (lost in a gap of the notification
    /// connection), is held for as if its TTL were set then; a later name moves nothing.
    #[test]
    fn a_key_a_request_named_is_held_for_without_its_notification() {
        let w = watch();
        assert_eq!(w.hold_until(0, 480_000, 40_000), None, "nothing known");
        w.named(0, "rl:0");
        let held = w.hold_until(0, 480_000, 40_000).expect("due about 510 ms from now");
        assert!((512_000..600_000).contains(&held), "{held}");
        w.seen_at(0, "rl:0", "expire", 200_000);
        w.named(0, "rl:0");
        assert_eq!(
            w.hold_until(0, 680_000, 40_000),
            Some(712_000),
            "the notification decides"
        );
    }

    #[test]
    fn a_new_ttl_moves_the_due_time_and_an_expiry_forgets_it() {
        let w = watch();
        w.seen_at(0, "rl:0", "expire", 1_000);
        w.seen_at(0, "rl:0", "expire", 200_000);
        assert_eq!(
            w.hold_until(0, 480_000, 40_000),
            None,
            "the TTL was set again at 200 ms"
        );
        assert_eq!(w.hold_until(0, 680_000, 40_000), Some(712_000));
        w.seen_at(0, "rl:0", "expired", 705_000);
        assert_eq!(w.hold_until(0, 680_000, 40_000), None);
        w.seen_at(0, "rl:0", "expire", 800_000);
        w.seen_at(0, "rl:0", "incrby", 900_000);
        assert_eq!(
            w.hold_until(0, 1_300_000, 40_000),
            Some(1_312_000),
            "other events change nothing"
        );
        w.seen_at(0, "rl:0", "evicted", 1_000_000);
        assert_eq!(w.hold_until(0, 1_300_000, 40_000), None);
    }

    #[test]
    fn the_servers_pttl_holds_a_request_whatever_the_estimate() {
        // Asked at 100 ms, answered at 101 ms, a 40 ms margin.
        assert_eq!(hold_from_pttls(&[30], 100_000, 101_000, 40_000), Some(133_000));
        assert_eq!(
            hold_from_pttls(&[41], 100_000, 101_000, 40_000),
            Some(144_000),
            "within the margin once the round trip counts"
        );
        assert_eq!(hold_from_pttls(&[42], 100_000, 101_000, 40_000), None);
        assert_eq!(
            hold_from_pttls(&[-1, -2], 100_000, 101_000, 40_000),
            None,
            "no TTL, or gone: nothing due"
        );
        assert_eq!(
            hold_from_pttls(&[0, 500, 12], 100_000, 101_000, 40_000),
            Some(115_000),
            "the latest of those due decides"
        );
        assert_eq!(hold_from_pttls(&[], 100_000, 101_000, 40_000), None);
    }

    #[test]
    fn a_limiter_with_many_keys_is_asked_for_those_due_first() {
        let few: HashMap<String, u64> = [("a".to_owned(), 5), ("b".to_owned(), 1)].into();
        let (mut asked, unasked) = keys_to_ask(&few);
        asked.sort();
        assert_eq!((asked, unasked), (vec!["a".to_owned(), "b".to_owned()], false));
        let many: HashMap<String, u64> = (0..100u64).map(|i| (format!("k{i}"), 1_000 - i)).collect();
        let (asked, unasked) = keys_to_ask(&many);
        assert!(unasked);
        assert_eq!(asked.len(), ASKED_KEYS_MAX);
        assert!(
            asked.contains(&"k99".to_owned()) && !asked.contains(&"k0".to_owned()),
            "the earliest due: {asked:?}"
        );
    }

    #[test]
    fn of_several_keys_due_the_latest_decides() {
        let w = watch();
        w.seen_at(0, "rl:0:a", "expire", 1_000);
        w.seen_at(0, "rl:0:b", "expire", 21_000);
        assert_eq!(w.hold_until(0, 495_000, 40_000), Some(533_000));
        assert_eq!(
            w.hold_until(0, 490_000, 40_000),
            Some(513_000),
            "only the first is due within 40 ms"
        );
    }
}
