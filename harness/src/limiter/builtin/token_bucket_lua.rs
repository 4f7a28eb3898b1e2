//! A token bucket in one Lua script, timed by the server's clock.

use crate::backend::Conn;
use async_trait::async_trait;
use redis::RedisResult;

use super::lua::LuaScript;
use crate::limiter::{Algorithm, Decision, Limiter, Plant, Wire};
use crate::scenario::Limit;

const SOURCE: &str = r"
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + tonumber(t[2]) / 1000
local window = tonumber(ARGV[1])
local cap = tonumber(ARGV[2])
local rate = cap / window
local state = redis.call('HMGET', KEYS[1], 'tokens', 'ts')
local tokens = tonumber(state[1]) or cap
local ts = tonumber(state[2]) or now
tokens = math.min(cap, tokens + math.max(0, now - ts) * rate)
local allowed = 0
if tokens >= 1 then
  tokens = tokens - 1
  allowed = 1
end
redis.call('HSET', KEYS[1], 'tokens', string.format('%.6f', tokens), 'ts', string.format('%.3f', now))
redis.call('PEXPIRE', KEYS[1], math.max(1, math.ceil((cap - tokens) / rate)))
return {allowed, cap - math.floor(tokens)}
";

const PLANT: &str = r"
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + tonumber(t[2]) / 1000
redis.call('HSET', KEYS[1], 'tokens', '0', 'ts', string.format('%.3f', now))
return 0
";

/// EVALSHA of a script that refills the bucket (capacity = the limit, refilled at the
/// limit per window, server TIME) and takes a token when one is there. The key expires
/// when the bucket would be full again.
#[derive(Debug)]
pub struct TokenBucketLua {
    script: LuaScript,
}

impl TokenBucketLua {
    pub fn new() -> Self {
        Self {
            script: LuaScript::new(SOURCE),
        }
    }
}

#[async_trait]
impl Limiter for TokenBucketLua {
    fn name(&self) -> &str {
        "token-bucket-lua"
    }

    fn commands(&self) -> &str {
        "EVALSHA <sha> 1 key window max   (one round trip)\n\
         script: now = TIME; HMGET key tokens ts; refill max per window up to max; take 1 if >= 1;\n\
         HSET key tokens ts; PEXPIRE key <time until full>; count = tokens in use"
    }

    fn round_trips_max(&self) -> u32 {
        1
    }

    fn algorithm(&self) -> Algorithm {
        Algorithm::TokenBucket
    }

    fn keys_follow_the_clock(&self) -> bool {
        false
    }

    fn redis_version_min(&self) -> (u32, u32) {
        (4, 0)
    }

    async fn prepare(&self, conn: &mut Conn, _limit: &Limit) -> RedisResult<()> {
        self.script.load(conn).await
    }

    async fn plant_exhausted(&self, conn: &mut Conn, _identity: u32, key: &str, _limit: &Limit) -> RedisResult<Plant> {
        let _: i64 = redis::cmd("EVAL").arg(PLANT).arg(1).arg(key).query_async(conn).await?;
        Ok(Plant::Planted(format!("HSET {key} tokens 0 ts <server now> (no TTL)")))
    }

    async fn acquire(&self, wire: &mut Wire<'_>, key: &str, limit: &Limit) -> RedisResult<Decision> {
        let (allowed, count): (i64, i64) = self
            .script
            .eval(wire, &[key], (limit.window_ms, limit.requests_max))
            .await?;
        Ok(Decision {
            allowed: allowed == 1,
            count: Some(count),
        })
    }
}
