//! Laravel's RateLimiter before laravel/framework#20641: add the key, then increment it.

use async_trait::async_trait;
use redis::RedisResult;

use crate::limiter::{Algorithm, Decision, Limiter, Wire};
use crate::scenario::Limit;

/// SET key 0 NX PX window (Cache::add), then INCRBY key 1 (Cache::increment): two round
/// trips on every request. If the key expires between them, INCRBY recreates it with no TTL.
#[derive(Debug)]
pub struct SetNxThenIncr;

#[async_trait]
impl Limiter for SetNxThenIncr {
    fn name(&self) -> &str {
        "set-nx-then-incr"
    }

    fn commands(&self) -> &str {
        "SET key 0 NX PX window   (creates the window when the key is missing)\n\
         INCRBY key 1              (second round trip; admit when count <= max)"
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
        let _created: Option<String> = wire
            .cmd(
                redis::cmd("SET")
                    .arg(key)
                    .arg(0)
                    .arg("NX")
                    .arg("PX")
                    .arg(limit.window_ms),
            )
            .await?;
        let count: i64 = wire.cmd(redis::cmd("INCRBY").arg(key).arg(1)).await?;
        Ok(Decision {
            allowed: count <= limit.requests_max as i64,
            count: Some(count),
        })
    }
}
