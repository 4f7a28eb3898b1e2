//! Incident 1's fix, with incident 1's clock: the expiry is an absolute time computed from
//! the app server's own clock (`EXAT now + window`, as incident 1's code set it).

use async_trait::async_trait;
use redis::RedisResult;

use crate::limiter::{Algorithm, Decision, Limiter, Wire};
use crate::scenario::Limit;

/// MULTI; INCR; PEXPIREAT key now_ms+window NX; EXEC — atomic and correct while every app
/// server's clock agrees with the server's. An instance whose clock runs ahead gives a new
/// key a TTL longer than the window (its users wait longer); one whose clock runs behind by
/// more than a window sets an expiry in the past, and the server deletes the counter at once.
#[derive(Debug)]
pub struct IncrPexpireatClientClock;

#[async_trait]
impl Limiter for IncrPexpireatClientClock {
    fn name(&self) -> &str {
        "incr-pexpireat-client-clock"
    }

    fn commands(&self) -> &str {
        "MULTI; INCR key; PEXPIREAT key <app clock now + window> NX; EXEC   (one round trip)\n\
         admit when count <= max; the expiry comes from the app server's clock, not the server's"
    }

    fn round_trips_max(&self) -> u32 {
        1
    }

    fn algorithm(&self) -> Algorithm {
        Algorithm::FixedWindow
    }

    fn keys_follow_the_clock(&self) -> bool {
        false
    }

    fn count_at_key(&self) -> bool {
        true
    }

    fn redis_version_min(&self) -> (u32, u32) {
        (7, 0)
    }

    async fn acquire(&self, wire: &mut Wire<'_>, key: &str, limit: &Limit) -> RedisResult<Decision> {
        let expire_at_ms = wire.request().now_ms + limit.window_ms;
        super::multi_incr_expire_nx::incr_with_expiry_nx(wire, key, limit, "PEXPIREAT", expire_at_ms).await
    }
}
