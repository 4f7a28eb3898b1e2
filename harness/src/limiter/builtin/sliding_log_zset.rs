//! A sliding log in a sorted set, timed by the server's clock.

use crate::backend::Conn;
use async_trait::async_trait;
use redis::RedisResult;

use super::lua::LuaScript;
use crate::limiter::{Algorithm, Decision, Limiter, Plant, Wire};
use crate::scenario::Limit;

const SOURCE: &str = r"
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local window = tonumber(ARGV[1]) * 1000
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now - window)
local n = redis.call('ZCARD', KEYS[1])
if n < tonumber(ARGV[2]) then
  redis.call('ZADD', KEYS[1], now, ARGV[3])
  redis.call('PEXPIRE', KEYS[1], ARGV[1])
  return {1, n + 1}
end
return {0, n}
";

const PLANT: &str = r"
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
for i = 1, tonumber(ARGV[1]) do
  redis.call('ZADD', KEYS[1], now, 'planted-' .. i)
end
return redis.call('ZCARD', KEYS[1])
";

/// EVALSHA of a script that drops log entries older than the window (server TIME, µs),
/// admits when fewer than the limit remain, and logs the admission (member: the request
/// id). The key's TTL is the window, renewed on each admission.
#[derive(Debug)]
pub struct SlidingLogZset {
    script: LuaScript,
}

impl SlidingLogZset {
    pub fn new() -> Self {
        Self {
            script: LuaScript::new(SOURCE),
        }
    }
}

#[async_trait]
impl Limiter for SlidingLogZset {
    fn name(&self) -> &str {
        "sliding-log-zset"
    }

    fn commands(&self) -> &str {
        "EVALSHA <sha> 1 key window max request-id   (one round trip)\n\
         script: now = TIME (µs); ZREMRANGEBYSCORE key -inf now-window; n = ZCARD key;\n\
         n < max -> ZADD key now request-id; PEXPIRE key window; admit (count n+1); else reject (count n)"
    }

    fn round_trips_max(&self) -> u32 {
        1
    }

    fn algorithm(&self) -> Algorithm {
        Algorithm::SlidingLog
    }

    fn keys_follow_the_clock(&self) -> bool {
        false
    }

    fn redis_version_min(&self) -> (u32, u32) {
        (5, 0)
    }

    async fn prepare(&self, conn: &mut Conn, _limit: &Limit) -> RedisResult<()> {
        self.script.load(conn).await
    }

    async fn plant_exhausted(&self, conn: &mut Conn, _identity: u32, key: &str, limit: &Limit) -> RedisResult<Plant> {
        let n: i64 = redis::cmd("EVAL")
            .arg(PLANT)
            .arg(1)
            .arg(key)
            .arg(limit.requests_max)
            .query_async(conn)
            .await?;
        Ok(Plant::Planted(format!(
            "ZADD {key} with {n} entries at the server's now (no TTL)"
        )))
    }

    async fn acquire(&self, wire: &mut Wire<'_>, key: &str, limit: &Limit) -> RedisResult<Decision> {
        let member = wire.request().id.to_string();
        let (allowed, count): (i64, i64) = self
            .script
            .eval(wire, &[key], (limit.window_ms, limit.requests_max, member))
            .await?;
        Ok(Decision {
            allowed: allowed == 1,
            count: Some(count),
        })
    }
}
