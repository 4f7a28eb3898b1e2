//! The wire between a limiter and Redis: one call per round trip, with the nemesis
//! consulted in every gap between two round trips of the same request.

use redis::aio::MultiplexedConnection;
use redis::{Arg, Cmd, ErrorKind, FromRedisValue, Pipeline, RedisError, RedisResult};

use crate::keys::KeyLayout;
use crate::nemesis::{GapHook, Hold};

/// The request a limiter is deciding, as the nemesis sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RequestCtx {
    pub id: u64,
    pub identity: u32,
    /// The identity's n-th request, counting from 1.
    pub ordinal: u64,
    pub key: String,
}

/// The commands of one round trip: names (upper case) and the keys they name.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TripSummary {
    pub commands: Vec<String>,
    pub keys: Vec<String>,
}

impl TripSummary {
    pub fn of_cmd(cmd: &Cmd) -> Self {
        let mut summary = Self::default();
        summary.add(cmd);
        summary
    }

    pub fn of_pipe(pipe: &Pipeline) -> Self {
        let mut summary = Self::default();
        if pipe.is_transaction() {
            summary.commands.push("MULTI".into());
        }
        for cmd in pipe.cmd_iter() {
            summary.add(cmd);
        }
        if pipe.is_transaction() {
            summary.commands.push("EXEC".into());
        }
        summary
    }

    /// The summary of commands as the fault proxy parsed them off the wire.
    pub fn of_commands<'c>(commands: impl IntoIterator<Item = &'c resp::Command>) -> Self {
        let mut summary = Self::default();
        for command in commands {
            summary.push(command);
        }
        summary
    }

    fn add(&mut self, cmd: &Cmd) {
        let args = cmd.args_iter().filter_map(|a| match a {
            Arg::Simple(bytes) => Some(bytes),
            _ => None,
        });
        self.push(&resp::Command::new(args));
    }

    /// One command: its name, and the keys it names (by the RESP crate's table, the same
    /// for the `Wire` and the fault proxy).
    fn push(&mut self, command: &resp::Command) {
        if command.args.is_empty() {
            return;
        }
        for key in command.keys() {
            let key = String::from_utf8_lossy(key).into_owned();
            if !self.keys.contains(&key) {
                self.keys.push(key);
            }
        }
        self.commands.push(command.name_upper());
    }

    /// The round trip as one history string, e.g. "MULTI INCR PEXPIRE EXEC".
    pub fn label(&self) -> String {
        self.commands.join(" ")
    }
}

/// How many distinct keys a request's record keeps (a command naming thousands of keys
/// would otherwise grow the history without bound).
pub const KEYS_PER_REQUEST_MAX: usize = 64;

/// Add `keys` to a request's record of the keys it named: each once, at most
/// [`KEYS_PER_REQUEST_MAX`].
pub fn remember_keys(record: &mut Vec<String>, keys: impl IntoIterator<Item = String>) {
    for key in keys {
        if record.len() >= KEYS_PER_REQUEST_MAX {
            return;
        }
        if !record.contains(&key) {
            record.push(key);
        }
    }
}

/// The limiter keys a request works on at a gap, as the nemesis sees them: the keys of
/// `identity` (by `layout`) that the request named in its earlier round trips, else those
/// its next round trip names.
pub fn keys_at_gap(layout: &KeyLayout, identity: u32, named: &[String], next: &TripSummary) -> Vec<String> {
    let of_identity =
        |keys: &[String]| -> Vec<String> { keys.iter().filter(|k| layout.is_key_of(k, identity)).cloned().collect() };
    let before = of_identity(named);
    if before.is_empty() {
        of_identity(&next.keys)
    } else {
        before
    }
}

/// A limiter's connection for one request. Every round trip goes through [`Wire::cmd`]
/// or [`Wire::pipe`]; the commands sent and the keys they name are kept for the history.
pub struct Wire<'a> {
    conn: &'a mut MultiplexedConnection,
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
    pub fn new(
        conn: &'a mut MultiplexedConnection,
        hook: &'a dyn GapHook,
        ctx: &'a RequestCtx,
        layout: &'a KeyLayout,
    ) -> Self {
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
