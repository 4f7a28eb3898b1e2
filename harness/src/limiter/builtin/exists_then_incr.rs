//! Django's cache `incr` pattern: check the key exists, then increment it.

use async_trait::async_trait;
use redis::RedisResult;

use crate::limiter::{Algorithm, Decision, Limiter, Wire};
use crate::scenario::Limit;

/// EXISTS, then SET-with-expiry or INCRBY in a second round trip (django-redis `incr`
/// checks the key exists first). If the key expires between the two, INCRBY recreates it
/// with no TTL.
#[derive(Debug)]
pub struct ExistsThenIncr;

#[async_trait]
impl Limiter for ExistsThenIncr {
    fn name(&self) -> &str {
        "exists-then-incr"
    }

    fn commands(&self) -> &str {
        "EXISTS key\n\
         0 -> SET key 1 PX window   (admit, count 1)\n\
         1 -> INCRBY key 1          (admit when count <= max; recreates the key WITHOUT a TTL if it expired after EXISTS)"
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
        let exists: i64 = wire.cmd(redis::cmd("EXISTS").arg(key)).await?;
        let count = if exists == 0 {
            let () = wire
                .cmd(redis::cmd("SET").arg(key).arg(1).arg("PX").arg(limit.window_ms))
                .await?;
            1
        } else {
            wire.cmd(redis::cmd("INCRBY").arg(key).arg(1)).await?
        };
        Ok(Decision {
            allowed: count <= limit.requests_max as i64,
            count: Some(count),
        })
    }
}
