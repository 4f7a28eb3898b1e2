//! A fixed window in one Lua script that repairs a key which lost its TTL.

use crate::backend::Conn;
use async_trait::async_trait;
use redis::RedisResult;

use super::lua::LuaScript;
use crate::limiter::{Algorithm, Decision, Limiter, Wire};
use crate::scenario::Limit;

const SOURCE: &str = r"
local count = redis.call('INCR', KEYS[1])
if redis.call('PTTL', KEYS[1]) == -1 then
  redis.call('PEXPIRE', KEYS[1], ARGV[1])
end
return count
";

/// EVALSHA of a script that INCRs and sets the expiry whenever PTTL is -1, so a key that
/// lost its TTL (by any path) heals on its next request (rate-limiter-flexible,
/// rate-limit-redis).
#[derive(Debug)]
pub struct LuaFixedWindow {
    script: LuaScript,
}

impl LuaFixedWindow {
    pub fn new() -> Self {
        Self {
            script: LuaScript::new(SOURCE),
        }
    }
}

#[async_trait]
impl Limiter for LuaFixedWindow {
    fn name(&self) -> &str {
        "lua-fixed-window"
    }

    fn commands(&self) -> &str {
        "EVALSHA <sha> 1 key window   (one round trip; SCRIPT LOAD + retry after NOSCRIPT)\n\
         script: count = INCR key; if PTTL key == -1 then PEXPIRE key window end; return count\n\
         admit when count <= max"
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
        let count: i64 = self.script.eval(wire, &[key], limit.window_ms).await?;
        Ok(Decision {
            allowed: count <= limit.requests_max as i64,
            count: Some(count),
        })
    }
}
