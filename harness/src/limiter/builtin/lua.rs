//! Lua-script limiters' plumbing: SCRIPT LOAD once, EVALSHA per request, and after a
//! NOSCRIPT reply (restart, failover, SCRIPT FLUSH) load again and retry, as clients do.

use crate::backend::Conn;
use redis::{ErrorKind, FromRedisValue, RedisResult, Script, ServerErrorKind, ToRedisArgs};

use crate::limiter::Wire;

#[derive(Debug)]
pub struct LuaScript {
    source: String,
    script: Script,
}

impl LuaScript {
    pub fn new(source: &str) -> Self {
        Self {
            source: source.to_owned(),
            script: Script::new(source),
        }
    }

    pub async fn load(&self, conn: &mut Conn) -> RedisResult<()> {
        let _sha: String = redis::cmd("SCRIPT")
            .arg("LOAD")
            .arg(&self.source)
            .query_async(conn)
            .await?;
        Ok(())
    }

    /// EVALSHA with `keys` and `args`; one round trip, three after a NOSCRIPT.
    pub async fn eval<T: FromRedisValue>(
        &self,
        wire: &mut Wire<'_>,
        keys: &[&str],
        args: impl ToRedisArgs,
    ) -> RedisResult<T> {
        let mut evalsha = redis::cmd("EVALSHA");
        evalsha.arg(self.script.get_hash()).arg(keys.len()).arg(keys).arg(args);
        match wire.cmd(&evalsha).await {
            Err(e) if e.kind() == ErrorKind::Server(ServerErrorKind::NoScript) => {
                let _: String = wire.cmd(redis::cmd("SCRIPT").arg("LOAD").arg(&self.source)).await?;
                wire.cmd(&evalsha).await
            }
            other => other,
        }
    }
}
