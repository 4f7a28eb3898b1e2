//! `INFO` counters and the server's identity.

use futures::future::BoxFuture;
use redis::RedisResult;
use redis::aio::MultiplexedConnection;

use crate::history::{Event, ServerRole};

/// Read `evicted_keys`, `expired_keys` and `used_memory` as a history event: of one server,
/// or summed over `nodes` (a cluster's primaries).
pub fn read_stats(
    nodes: &mut [MultiplexedConnection],
    role: ServerRole,
    t_us: u64,
) -> BoxFuture<'_, RedisResult<Event>> {
    Box::pin(read_stats_unboxed(nodes, role, t_us))
}

async fn read_stats_unboxed(nodes: &mut [MultiplexedConnection], role: ServerRole, t_us: u64) -> RedisResult<Event> {
    let (mut evicted_keys, mut expired_keys, mut used_memory_bytes) = (0, 0, 0);
    for conn in nodes.iter_mut() {
        let (stats, memory): (String, String) = redis::pipe()
            .cmd("INFO")
            .arg("stats")
            .cmd("INFO")
            .arg("memory")
            .query_async(conn)
            .await?;
        evicted_keys += info_field(&stats, "evicted_keys").unwrap_or(0);
        expired_keys += info_field(&stats, "expired_keys").unwrap_or(0);
        used_memory_bytes += info_field(&memory, "used_memory").unwrap_or(0);
    }
    Ok(Event::Stats {
        t_us,
        server: role,
        evicted_keys,
        expired_keys,
        used_memory_bytes,
    })
}

/// A numeric field of an INFO section.
pub fn info_field(info: &str, name: &str) -> Option<u64> {
    info_value(info, name)?.parse().ok()
}

/// A field of an INFO section, as text.
pub fn info_value<'a>(info: &'a str, name: &str) -> Option<&'a str> {
    info.lines()
        .find_map(|line| Some(line.strip_prefix(name)?.strip_prefix(':')?.trim()))
}

/// What the server says it is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServerInfo {
    /// e.g. "redis 7.0.15" or "valkey 9.1.2".
    pub version: String,
    /// (major, minor) of the Redis version whose commands it speaks: Redis's own version;
    /// for Valkey, the `redis_version` it reports for compatibility (7.2 for Valkey 8 and 9).
    pub redis_api: (u32, u32),
}

pub async fn server_info(conn: &mut MultiplexedConnection) -> RedisResult<ServerInfo> {
    let info: String = redis::cmd("INFO").arg("server").query_async(conn).await?;
    Ok(parse_server_info(&info))
}

/// What an `INFO server` reply says the server is. Valkey reports both `valkey_version`
/// (its own, e.g. 9.1.2) and `redis_version` (7.2.4, the Redis it is compatible with, for
/// clients that check it): the report names Valkey by its own version, and the limiters'
/// minimum versions (`EXPIRE NX` needs Redis 7.0) are compared with `redis_version`.
pub fn parse_server_info(info: &str) -> ServerInfo {
    let field = |name: &str| {
        info.lines()
            .find_map(|l| l.strip_prefix(name)?.strip_prefix(':').map(|v| v.trim().to_owned()))
    };
    let redis = field("redis_version");
    let version = match field("valkey_version") {
        Some(v) => format!("valkey {v}"),
        None => format!("redis {}", redis.as_deref().unwrap_or("unknown")),
    };
    ServerInfo {
        version,
        redis_api: crate::servers::series(redis.as_deref().unwrap_or_default()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_info_fields() {
        let info = "# Stats\r\ntotal_connections_received:3\r\nexpired_keys:12\r\nevicted_keys:0\r\n";
        assert_eq!(info_field(info, "expired_keys"), Some(12));
        assert_eq!(info_field(info, "evicted_keys"), Some(0));
        assert_eq!(info_field(info, "missing"), None);
    }

    #[test]
    fn names_valkey_by_its_own_version_and_speaks_its_redis_api() {
        let valkey = "# Server\r\nredis_version:7.2.4\r\nserver_name:valkey\r\nvalkey_version:9.1.2\r\n";
        let info = parse_server_info(valkey);
        assert_eq!(info.version, "valkey 9.1.2");
        assert_eq!(info.redis_api, (7, 2));
        let redis = parse_server_info("# Server\r\nredis_version:6.2.14\r\nredis_git_sha1:00000000\r\n");
        assert_eq!(redis.version, "redis 6.2.14");
        assert_eq!(redis.redis_api, (6, 2));
    }
}
