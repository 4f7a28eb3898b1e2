//! Incident 1's limiter: read, then increment in a second round trip.

use async_trait::async_trait;
use redis::RedisResult;

use crate::limiter::{Algorithm, Decision, Limiter, Wire};
use crate::scenario::Limit;

/// GET, then SET-with-expiry or INCR. If the key expires between the GET and the INCR,
/// INCR recreates it with no TTL: a counter that only goes up (incident 1).
#[derive(Debug)]
pub struct GetThenIncr;

#[async_trait]
impl Limiter for GetThenIncr {
    fn name(&self) -> &str {
        "get-then-incr"
    }

    fn commands(&self) -> &str {
        "GET key\n\
         nil          -> SET key 1 PX window   (admit, count 1; the only place a TTL is set)\n\
         count >= max -> reject (no second round trip)\n\
         otherwise    -> INCR key              (admit; recreates the key WITHOUT a TTL if it expired after the GET)"
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
        let count: Option<i64> = wire.cmd(redis::cmd("GET").arg(key)).await?;
        match count {
            None => {
                let () = wire
                    .cmd(redis::cmd("SET").arg(key).arg(1).arg("PX").arg(limit.window_ms))
                    .await?;
                Ok(Decision {
                    allowed: true,
                    count: Some(1),
                })
            }
            Some(count) if count >= limit.requests_max as i64 => Ok(Decision {
                allowed: false,
                count: Some(count),
            }),
            Some(_) => {
                let count: i64 = wire.cmd(redis::cmd("INCR").arg(key)).await?;
                Ok(Decision {
                    allowed: true,
                    count: Some(count),
                })
            }
        }
    }
}
