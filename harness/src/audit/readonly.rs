//! The audit's only way to the server: a connection that sends nothing but the read
//! commands of [`ALLOWED`], paced by a [`Pacer`].
//!
//! What reaches the wire: redis-rs's connection set-up (`AUTH` when the URL has a
//! password, or `HELLO 3 [AUTH ...]` with `?protocol=resp3`; `SELECT db` when the URL
//! names a database other than 0; its `CLIENT SETINFO LIB-NAME/LIB-VER` pair is turned
//! off), then only commands [`allowed`] lets through. A refused command is an error
//! returned before anything is sent; a refused command in a pipeline stops the whole
//! pipeline.

use std::time::Duration;

use redis::aio::MultiplexedConnection;
use redis::{AsyncConnectionConfig, FromRedisValue, IntoConnectionInfo, RedisError, RedisResult};

use super::pace::Pacer;
use crate::error::SetupError;

/// A command the audit may send: its name, its subcommand when it has several, and how
/// many arguments it may take after them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Allowed {
    pub name: &'static str,
    pub subcommand: Option<&'static str>,
    pub args_min: usize,
    pub args_max: usize,
}

const fn allow(name: &'static str, subcommand: Option<&'static str>, args_min: usize, args_max: usize) -> Allowed {
    Allowed {
        name,
        subcommand,
        args_min,
        args_max,
    }
}

/// Everything the audit sends, and all it may send.
pub const ALLOWED: [Allowed; 6] = [
    allow("SCAN", None, 1, 7),
    allow("PTTL", None, 1, 1),
    allow("INFO", None, 0, 8),
    allow("DBSIZE", None, 0, 0),
    allow("PING", None, 0, 1),
    allow("CONFIG", Some("GET"), 1, 1),
];

const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
const RESPONSE_TIMEOUT: Duration = Duration::from_secs(10);

/// A command the allowlist refused, with what it was.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("refused to send `{command}`: the audit sends only SCAN, PTTL, INFO, DBSIZE, PING and CONFIG GET")]
pub struct Refused {
    pub command: String,
}

/// Why a command brought no reply.
#[derive(Debug, thiserror::Error)]
pub enum ReadError {
    #[error(transparent)]
    Refused(#[from] Refused),
    #[error(transparent)]
    Server(#[from] RedisError),
}

/// Whether `args` (name first) is one of the [`ALLOWED`] read commands, in any letter case
/// and with a number of arguments it takes.
pub fn allowed(args: &[&[u8]]) -> Result<(), Refused> {
    let refused = || Refused {
        command: args
            .iter()
            .take(2)
            .map(|a| String::from_utf8_lossy(a).into_owned())
            .collect::<Vec<_>>()
            .join(" "),
    };
    let Some(name) = args.first() else {
        return Err(refused());
    };
    let found = ALLOWED.iter().find(|a| {
        name.eq_ignore_ascii_case(a.name.as_bytes())
            && a.subcommand
                .is_none_or(|sub| args.get(1).is_some_and(|arg| arg.eq_ignore_ascii_case(sub.as_bytes())))
    });
    let Some(command) = found else {
        return Err(refused());
    };
    let rest = args.len() - 1 - usize::from(command.subcommand.is_some());
    if !(command.args_min..=command.args_max).contains(&rest) {
        return Err(refused());
    }
    Ok(())
}

/// A paced connection that refuses, in code, every command but the [`ALLOWED`] ones.
pub struct ReadOnly {
    conn: MultiplexedConnection,
    pacer: Pacer,
    db: i64,
}

impl ReadOnly {
    /// Connect without redis-rs's `CLIENT SETINFO`; at most `ops_per_s` commands a second.
    pub async fn connect(url: &str, ops_per_s: u32) -> Result<Self, SetupError> {
        let bad_url = |e: RedisError| SetupError::AuditUrl {
            url: redact_url(url),
            reason: e.to_string(),
        };
        let info = url.into_connection_info().map_err(bad_url)?;
        let settings = info.redis_settings().clone().set_skip_set_lib_name();
        let db = settings.db();
        let client = redis::Client::open(info.set_redis_settings(settings)).map_err(bad_url)?;
        let config = AsyncConnectionConfig::new()
            .set_connection_timeout(Some(CONNECT_TIMEOUT))
            .set_response_timeout(Some(RESPONSE_TIMEOUT));
        let conn = client
            .get_multiplexed_async_connection_with_config(&config)
            .await
            .map_err(|e| match e.kind() {
                redis::ErrorKind::AuthenticationFailed => SetupError::AuditAuth {
                    url: redact_url(url),
                    reason: e.to_string(),
                },
                _ => SetupError::Connect {
                    url: redact_url(url),
                    reason: e.to_string(),
                },
            })?;
        Ok(Self {
            conn,
            pacer: Pacer::new(ops_per_s),
            db,
        })
    }

    /// The database the URL selects.
    pub fn db(&self) -> i64 {
        self.db
    }

    /// One command, if allowed, once the pacer lets it go.
    pub async fn query<T: FromRedisValue>(&mut self, args: &[&[u8]]) -> Result<T, ReadError> {
        allowed(args)?;
        let mut cmd = redis::Cmd::new();
        for arg in args {
            cmd.arg(*arg);
        }
        self.pacer.admit(1).await;
        Ok(cmd.query_async(&mut self.conn).await?)
    }

    /// Several commands in one round trip, each with its own reply or error; none is sent
    /// if any is refused.
    pub async fn pipeline<T: FromRedisValue>(
        &mut self,
        commands: &[Vec<&[u8]>],
    ) -> Result<Vec<RedisResult<T>>, ReadError> {
        for args in commands {
            allowed(args)?;
        }
        let mut pipe = redis::pipe();
        pipe.ignore_errors();
        for args in commands {
            pipe.cmd(std::str::from_utf8(args[0]).expect("allowed names are ASCII"));
            for arg in &args[1..] {
                pipe.arg(*arg);
            }
        }
        self.pacer.admit(commands.len() as u64).await;
        Ok(pipe.query_async(&mut self.conn).await?)
    }

    /// The most commands one pipeline should carry, so that no burst exceeds a tenth of a
    /// second's budget.
    pub fn burst_max(&self) -> usize {
        self.pacer.burst_max()
    }

    /// Commands sent so far (the connection's set-up not included).
    pub fn commands_sent(&self) -> u64 {
        self.pacer.sent()
    }
}

/// `url` with its password masked, for messages and reports.
pub fn redact_url(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else {
        return url.to_owned();
    };
    let authority_end = rest.find('/').unwrap_or(rest.len());
    let Some(at) = rest[..authority_end].rfind('@') else {
        return url.to_owned();
    };
    match rest[..at].split_once(':') {
        Some((user, _)) => format!("{scheme}://{user}:***{}", &rest[at..]),
        None => url.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn passwords_are_masked() {
        assert_eq!(
            redact_url("redis://auditor:s3cret@host:6379/2"),
            "redis://auditor:***@host:6379/2"
        );
        assert_eq!(redact_url("redis://:s3cret@host:6379"), "redis://:***@host:6379");
        assert_eq!(redact_url("redis://host:6379/0"), "redis://host:6379/0");
        assert_eq!(redact_url("redis://auditor@host"), "redis://auditor@host");
    }

    fn check(line: &str) -> Result<(), Refused> {
        let args: Vec<&[u8]> = line.split(' ').map(str::as_bytes).collect();
        allowed(&args)
    }

    #[test]
    fn the_read_commands_the_audit_sends_are_allowed() {
        for line in [
            "SCAN 0 MATCH rl:* COUNT 1000",
            "scan 17 match LIMITS:LIMITER/* count 10",
            "PTTL rl:0",
            "INFO memory",
            "INFO",
            "DBSIZE",
            "PING",
            "CONFIG GET notify-keyspace-events",
            "config get maxmemory-policy",
        ] {
            assert_eq!(check(line), Ok(()), "{line}");
        }
    }

    #[test]
    fn writes_and_reconfiguration_are_refused() {
        for line in [
            "SET rl:0 1",
            "DEL rl:0",
            "UNLINK rl:0",
            "EXPIRE rl:0 10",
            "PEXPIRE rl:0 10",
            "PERSIST rl:0",
            "INCR rl:0",
            "FLUSHALL",
            "FLUSHDB ASYNC",
            "CONFIG SET maxmemory 0",
            "config set notify-keyspace-events Kx",
            "CONFIG RESETSTAT",
            "CONFIG REWRITE",
            "CONFIG",
            "EVAL return 1 0",
            "EVALSHA abc 0",
            "FCALL f 0",
            "SCRIPT FLUSH",
            "MULTI",
            "CLIENT KILL ID 3",
            "CLIENT SETINFO LIB-NAME x",
            "SHUTDOWN NOSAVE",
            "DEBUG SLEEP 1",
            "ACL SETUSER x on",
            "SWAPDB 0 1",
            "MOVE rl:0 1",
            "RENAME rl:0 rl:1",
            "KEYS *",
            "GET rl:0",
            "OBJECT FREQ rl:0",
            "MONITOR",
            "",
        ] {
            assert!(check(line).is_err(), "`{line}` must be refused");
        }
    }

    #[test]
    fn an_allowed_name_with_the_wrong_arguments_is_refused() {
        for line in [
            "PTTL",
            "PTTL rl:0 rl:1",
            "SCAN",
            "DBSIZE now",
            "CONFIG GET",
            "CONFIG GET a b",
        ] {
            assert!(check(line).is_err(), "`{line}` must be refused");
        }
        assert_eq!(
            check("CONFIG SET maxmemory 0").unwrap_err().to_string(),
            "refused to send `CONFIG SET`: the audit sends only SCAN, PTTL, INFO, DBSIZE, PING and CONFIG GET"
        );
    }
}
