//! Incident 1's fix: increment and expiry in one transaction, the expiry only if missing.

use async_trait::async_trait;
use redis::RedisResult;

use crate::limiter::{Algorithm, Decision, Limiter, Wire};
use crate::scenario::Limit;

/// MULTI; INCR; PEXPIRE key window NX; EXEC — one round trip. NX sets the expiry only when
/// the key has none: a new key gets the window, a live window is not extended, and a key
/// that lost its TTL gets one back. Needs Redis 7.0 (EXPIRE NX).
#[derive(Debug)]
pub struct MultiIncrExpireNx;

#[async_trait]
impl Limiter for MultiIncrExpireNx {
    fn name(&self) -> &str {
        "multi-incr-expire-nx"
    }

    fn commands(&self) -> &str {
        "MULTI; INCR key; PEXPIRE key window NX; EXEC   (one round trip)\n\
         admit when count <= max (every request is counted, rejected ones too)"
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
        incr_with_expiry_nx(wire, key, limit, "PEXPIRE", limit.window_ms).await
    }
}

/// MULTI; INCR key; `expire` key `value` NX; EXEC in one round trip, admitting when the count
/// is within the limit: incident 1's fix, with the expiry command the caller names (a
/// relative PEXPIRE, or a PEXPIREAT from the app's clock).
pub(super) async fn incr_with_expiry_nx(
    wire: &mut Wire<'_>,
    key: &str,
    limit: &Limit,
    expire: &str,
    value: u64,
) -> RedisResult<Decision> {
    let mut pipe = redis::pipe();
    // `Pipeline::incr` would send INCRBY; the fix is written with INCR.
    pipe.atomic()
        .cmd("INCR")
        .arg(key)
        .cmd(expire)
        .arg(key)
        .arg(value)
        .arg("NX")
        .ignore();
    let (count,): (i64,) = wire.pipe(&pipe).await?;
    Ok(Decision {
        allowed: count <= limit.requests_max as i64,
        count: Some(count),
    })
}
