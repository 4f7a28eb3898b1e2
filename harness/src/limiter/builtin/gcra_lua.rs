//! GCRA in one Lua script, timed by the server's clock (go-redis/redis_rate's algorithm).

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
local interval = window / tonumber(ARGV[2])
local tat = tonumber(redis.call('GET', KEYS[1]) or '0')
if tat < now then
  tat = now
end
local new_tat = tat + interval
if new_tat - now > window + 0.5 then
  return {0, math.ceil((tat - now) / interval - 0.001)}
end
redis.call('SET', KEYS[1], string.format('%.0f', new_tat), 'PX', math.max(1, math.ceil((new_tat - now) / 1000)))
return {1, math.ceil((new_tat - now) / interval - 0.001)}
";

const PLANT: &str = r"
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
redis.call('SET', KEYS[1], string.format('%.0f', now + tonumber(ARGV[1]) * 1000))
return 0
";

/// EVALSHA of a script that keeps the theoretical arrival time (TAT, µs, server TIME):
/// one emission per window/limit, bursts up to the limit. The key expires when the TAT
/// is reached.
#[derive(Debug)]
pub struct GcraLua {
    script: LuaScript,
}

impl GcraLua {
    pub fn new() -> Self {
        Self {
            script: LuaScript::new(SOURCE),
        }
    }
}

#[async_trait]
impl Limiter for GcraLua {
    fn name(&self) -> &str {
        "gcra-lua"
    }

    fn commands(&self) -> &str {
        "EVALSHA <sha> 1 key window max   (one round trip)\n\
         script: now = TIME (µs); tat = max(GET key, now); new = tat + window/max;\n\
         new - now > window -> reject; else SET key new PX <new - now>; admit (count = emissions in flight)"
    }

    fn round_trips_max(&self) -> u32 {
        1
    }

    fn algorithm(&self) -> Algorithm {
        Algorithm::Gcra
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

    async fn plant_exhausted(&self, conn: &mut Conn, _identity: u32, key: &str, limit: &Limit) -> RedisResult<Plant> {
        let _: i64 = redis::cmd("EVAL")
            .arg(PLANT)
            .arg(1)
            .arg(key)
            .arg(limit.window_ms)
            .query_async(conn)
            .await?;
        Ok(Plant::Planted(format!("SET {key} <server now + window> (no TTL)")))
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
