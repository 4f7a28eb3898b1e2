//! Incident 2's limiter (and the Redis docs' "rate limiter 2"): INCR, then EXPIRE on the first.

use async_trait::async_trait;
use redis::RedisResult;

use crate::limiter::{Algorithm, Decision, Limiter, Wire};
use crate::scenario::Limit;

/// INCR; when the count is 1, PEXPIRE in a second round trip. Atomic enough on a quiet
/// server; an evicted counter starts again from 1 (incident 2), and a lost PEXPIRE leaves
/// a key without a TTL.
#[derive(Debug)]
pub struct IncrThenExpire;

#[async_trait]
impl Limiter for IncrThenExpire {
    fn name(&self) -> &str {
        "incr-then-expire"
    }

    fn commands(&self) -> &str {
        "INCR key                  -> count\n\
         count == 1 -> PEXPIRE key window   (second round trip, first request of a window only)\n\
         admit when count <= max"
    }

    fn round_trips_max(&self) -> u32 {
        2
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

    async fn acquire(&self, wire: &mut Wire<'_>, key: &str, limit: &Limit) -> RedisResult<Decision> {
        let count: i64 = wire.cmd(redis::cmd("INCR").arg(key)).await?;
        if count == 1 {
            let _: i64 = wire.cmd(redis::cmd("PEXPIRE").arg(key).arg(limit.window_ms)).await?;
        }
        Ok(Decision {
            allowed: count <= limit.requests_max as i64,
            count: Some(count),
        })
    }
}
