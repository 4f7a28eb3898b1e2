//! INCRBY and EXPIRE pipelined without MULTI (envoy ratelimit, rack-attack), on one key per identity.

use async_trait::async_trait;
use redis::RedisResult;

use crate::limiter::{Algorithm, Decision, Limiter, Wire};
use crate::scenario::Limit;

/// INCRBY key 1 and PEXPIRE key window in one pipeline (no MULTI): one round trip, not
/// atomic. Projects that do this use a key per window; on one key per identity, the
/// PEXPIRE on every request pushes the window's end back while traffic continues.
#[derive(Debug)]
pub struct PipelineIncrExpire;

#[async_trait]
impl Limiter for PipelineIncrExpire {
    fn name(&self) -> &str {
        "pipeline-incr-expire"
    }

    fn commands(&self) -> &str {
        "INCRBY key 1; PEXPIRE key window   (one pipelined round trip, no MULTI)\n\
         admit when count <= max (the PEXPIRE on every request extends the window)"
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

    async fn acquire(&self, wire: &mut Wire<'_>, key: &str, limit: &Limit) -> RedisResult<Decision> {
        let mut pipe = redis::pipe();
        pipe.cmd("INCRBY")
            .arg(key)
            .arg(1)
            .cmd("PEXPIRE")
            .arg(key)
            .arg(limit.window_ms)
            .ignore();
        let (count,): (i64,) = wire.pipe(&pipe).await?;
        Ok(Decision {
            allowed: count <= limit.requests_max as i64,
            count: Some(count),
        })
    }
}
