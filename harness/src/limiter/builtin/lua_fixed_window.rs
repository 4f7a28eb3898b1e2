//! A fixed window in one Lua script that repairs a key which lost its TTL.

use async_trait::async_trait;
use redis::aio::MultiplexedConnection;
use redis::{ErrorKind, RedisResult, Script};

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
/// lost its TTL (by any path) heals on its next request. Loaded with SCRIPT LOAD; after a
/// NOSCRIPT reply it loads the script again and retries, as real clients do.
#[derive(Debug)]
pub struct LuaFixedWindow {
    script: Script,
}

impl LuaFixedWindow {
    pub fn new() -> Self {
        Self {
            script: Script::new(SOURCE),
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

    async fn prepare(&self, conn: &mut MultiplexedConnection, _limit: &Limit) -> RedisResult<()> {
        let sha: String = redis::cmd("SCRIPT").arg("LOAD").arg(SOURCE).query_async(conn).await?;
        debug_assert_eq!(sha, self.script.get_hash());
        Ok(())
    }

    async fn acquire(&self, wire: &mut Wire<'_>, key: &str, limit: &Limit) -> RedisResult<Decision> {
        let mut evalsha = redis::cmd("EVALSHA");
        evalsha.arg(self.script.get_hash()).arg(1).arg(key).arg(limit.window_ms);
        let count: i64 = match wire.cmd(&evalsha).await {
            Err(e) if e.kind() == ErrorKind::Server(redis::ServerErrorKind::NoScript) => {
                let _: String = wire.cmd(redis::cmd("SCRIPT").arg("LOAD").arg(SOURCE)).await?;
                wire.cmd(&evalsha).await?
            }
            other => other?,
        };
        Ok(Decision {
            allowed: count <= limit.requests_max as i64,
            count: Some(count),
        })
    }
}
