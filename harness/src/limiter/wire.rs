//! The wire between a limiter and Redis: one call per round trip, with the nemesis
//! consulted in every gap between two round trips of the same request.

use crate::backend::Conn;
use redis::{Cmd, ErrorKind, FromRedisValue, Pipeline, RedisError, RedisResult};

use crate::keys::KeyLayout;
use crate::nemesis::{GapHook, Hold};
use crate::request::{RequestCtx, TripSummary, keys_at_gap, remember_keys};

/// A limiter's connection for one request. Every round trip goes through [`Wire::cmd`]
/// or [`Wire::pipe`]; the commands sent and the keys they name are kept for the history.
pub struct Wire<'a> {
    conn: &'a mut Conn,
    hook: &'a dyn GapHook,
    ctx: &'a RequestCtx,
    layout: &'a KeyLayout,
    trips: Vec<String>,
    /// Every key the request's commands named so far, in order of first appearance.
    keys: Vec<String>,
    /// Strikes on this request hold the identity's other requests until it is done.
    holds: Vec<Hold>,
}

impl<'a> Wire<'a> {
    pub fn new(conn: &'a mut Conn, hook: &'a dyn GapHook, ctx: &'a RequestCtx, layout: &'a KeyLayout) -> Self {
        Self {
            conn,
            hook,
            ctx,
            layout,
            trips: Vec::new(),
            keys: Vec::new(),
            holds: Vec::new(),
        }
    }

    /// One round trip with one command.
    pub async fn cmd<T: FromRedisValue>(&mut self, cmd: &Cmd) -> RedisResult<T> {
        self.before(TripSummary::of_cmd(cmd)).await?;
        cmd.query_async(self.conn).await
    }

    /// One round trip with a pipeline (MULTI/EXEC around it when it is atomic).
    pub async fn pipe<T: FromRedisValue>(&mut self, pipe: &Pipeline) -> RedisResult<T> {
        self.before(TripSummary::of_pipe(pipe)).await?;
        pipe.query_async(self.conn).await
    }

    async fn before(&mut self, next: TripSummary) -> RedisResult<()> {
        if !self.trips.is_empty() {
            let keys = keys_at_gap(self.layout, self.ctx.identity, &self.keys, &next);
            let outcome = self
                .hook
                .before_trip(self.ctx, self.trips.len() + 1, &keys, &next)
                .await;
            self.holds.extend(outcome.hold);
            if let Some(why) = outcome.client_dies {
                return Err(RedisError::from((
                    ErrorKind::Io,
                    "the client died between round trips",
                    why,
                )));
            }
        }
        self.trips.push(next.label());
        remember_keys(&mut self.keys, next.keys);
        Ok(())
    }

    /// The request being decided (its id makes a unique member for log-based limiters).
    pub fn request(&self) -> &RequestCtx {
        self.ctx
    }

    /// The round trips made, as history strings, and every key their commands named.
    pub fn finish(self) -> (Vec<String>, Vec<String>) {
        (self.trips, self.keys)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::request::KEYS_PER_REQUEST_MAX;

    #[test]
    fn a_request_remembers_each_key_once_and_not_without_bound() {
        let mut record = vec!["rl:0".to_owned()];
        remember_keys(&mut record, ["rl:0".to_owned(), "rl:0:ts".to_owned()]);
        assert_eq!(record, ["rl:0", "rl:0:ts"]);
        remember_keys(&mut record, (0..1000).map(|i| format!("k{i}")));
        assert_eq!(record.len(), KEYS_PER_REQUEST_MAX);
    }

    #[test]
    fn summaries_name_commands_and_keys() {
        let mut pipe = redis::pipe();
        pipe.atomic()
            .cmd("INCR")
            .arg("rl:0")
            .cmd("PEXPIRE")
            .arg("rl:0")
            .arg(1000)
            .arg("NX");
        let s = TripSummary::of_pipe(&pipe);
        assert_eq!(s.label(), "MULTI INCR PEXPIRE EXEC");
        assert_eq!(s.keys, vec!["rl:0".to_owned()]);

        let mut evalsha = redis::cmd("evalsha");
        evalsha.arg("abc").arg(1).arg("rl:7").arg(1000);
        let s = TripSummary::of_cmd(&evalsha);
        assert_eq!((s.label(), s.keys), ("EVALSHA".to_owned(), vec!["rl:7".to_owned()]));
    }
}
