//! When each identity's keys are due to expire, as keyspace notifications tell it: a key
//! given a TTL (`expire`) is taken to expire a window later — the fixed-window convention,
//! and what a limiter that sets its TTL on every request keeps moving — and is forgotten
//! when it expires, is evicted or deleted. A steady phase with `clear_of_expiry_ms` holds
//! an identity's request while one of its keys is due, so that no window ends while a
//! request is between its round trips by chance (on a machine whose round trips sometimes
//! take tens of ms); the races the catalog shows are the ones its faults make.
//!
//! The notification reaches the harness after the server set the TTL, so the due time is
//! never earlier than the real one: a request held until it has passed finds the key gone.

use std::collections::HashMap;
use std::sync::Mutex;

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
}

impl ExpiryWatch {
    pub fn new(window_ms: u64, clock: RunClock) -> Self {
        Self {
            window_us: window_ms * 1000,
            clock,
            due: Mutex::new(HashMap::new()),
        }
    }

    /// A keyspace notification `event` for `key` of `identity`, seen now.
    pub fn seen(&self, identity: u32, key: &str, event: &str) {
        self.seen_at(identity, key, event, self.clock.now_us());
    }

    fn seen_at(&self, identity: u32, key: &str, event: &str, t_us: u64) {
        let mut due = self.due.lock().expect("expiry watch lock");
        match event {
            "expire" => {
                due.entry(identity)
                    .or_default()
                    .insert(key.to_owned(), t_us + self.window_us);
            }
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
            let now_us = self.clock.now_us();
            let Some(until_us) = self.hold_until(identity, now_us, clear_us) else {
                return;
            };
            tokio::time::sleep(std::time::Duration::from_micros(until_us.saturating_sub(now_us))).await;
        }
    }
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
