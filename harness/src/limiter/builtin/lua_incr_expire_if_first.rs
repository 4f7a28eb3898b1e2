//! Python `limits`' fixed window: atomic, but never repairs a key that lost its TTL.

use crate::backend::Conn;
use async_trait::async_trait;
use redis::RedisResult;

use super::lua::LuaScript;
use crate::limiter::{Algorithm, Decision, Limiter, Wire};
use crate::scenario::Limit;

const SOURCE: &str = r"
local count = redis.call('INCRBY', KEYS[1], ARGV[2])
if count == tonumber(ARGV[2]) then
  redis.call('PEXPIRE', KEYS[1], ARGV[1])
end
return count
";

/// EVALSHA of INCRBY key cost; PEXPIRE only when the count equals the cost (the first
/// request of a window). One atomic round trip — but a key that already lost its TTL is
/// never given one back.
#[derive(Debug)]
pub struct LuaIncrExpireIfFirst {
    script: LuaScript,
}

impl LuaIncrExpireIfFirst {
    pub fn new() -> Self {
        Self {
            script: LuaScript::new(SOURCE),
        }
    }
}

#[async_trait]
impl Limiter for LuaIncrExpireIfFirst {
    fn name(&self) -> &str {
        "lua-incr-expire-if-first"
    }

    fn commands(&self) -> &str {
        "EVALSHA <sha> 1 key window 1   (one round trip)\n\
         script: count = INCRBY key 1; if count == 1 then PEXPIRE key window end; return count\n\
         admit when count <= max (never repairs a key without TTL)"
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

    async fn prepare(&self, conn: &mut Conn, _limit: &Limit) -> RedisResult<()> {
        self.script.load(conn).await
    }

    async fn acquire(&self, wire: &mut Wire<'_>, key: &str, limit: &Limit) -> RedisResult<Decision> {
        let count: i64 = self.script.eval(wire, &[key], (limit.window_ms, 1)).await?;
        Ok(Decision {
            allowed: count <= limit.requests_max as i64,
            count: Some(count),
        })
    }
}
