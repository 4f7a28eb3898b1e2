//! The eviction risk to the limiter's keys, in plain words, from what `INFO` says: a pure
//! function of the server's facts and how many keys matched.

use serde::Serialize;

use super::server::ServerFacts;

/// Which risk; the names are stable (they appear in `--format json`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum RiskKind {
    /// `allkeys-*` with a memory limit on a server that holds other keys too: incident 2.
    SharedEviction,
    /// `allkeys-*` with a memory limit, but only the matched keys on the server (for now).
    LimiterKeysEvicted,
    /// `volatile-*` with a memory limit: keys with a TTL are the only eviction candidates.
    VolatileEviction,
    /// `noeviction` with a memory limit: writes fail with OOM.
    OomOnWrite,
    /// `maxmemory 0`: no eviction limit.
    NoMemoryLimit,
    /// `evicted_keys` > 0: the server has evicted keys already.
    EvictedAlready,
    /// A policy this audit does not know.
    UnknownPolicy,
}

impl RiskKind {
    pub fn name(self) -> &'static str {
        match self {
            Self::SharedEviction => "shared-eviction",
            Self::LimiterKeysEvicted => "limiter-keys-evicted",
            Self::VolatileEviction => "volatile-eviction",
            Self::OomOnWrite => "oom-on-write",
            Self::NoMemoryLimit => "no-memory-limit",
            Self::EvictedAlready => "evicted-already",
            Self::UnknownPolicy => "unknown-policy",
        }
    }
}

/// One risk: what it means for the limiter, and why the audit says so.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Risk {
    pub kind: RiskKind,
    pub says: String,
    pub because: String,
}

/// The risks of `facts` to limiter keys, of which `keys_matched` were found.
pub fn assess(facts: &ServerFacts, keys_matched: u64) -> Vec<Risk> {
    let mut risks = vec![policy_risk(facts, keys_matched)];
    if facts.evicted_keys > 0 {
        risks.push(Risk {
            kind: RiskKind::EvictedAlready,
            says: format!("the server has already evicted {} keys", facts.evicted_keys),
            because: format!(
                "INFO stats evicted_keys is {} (since the server started or CONFIG RESETSTAT); under {} limiter counters may have been among them, each eviction a reset cap",
                facts.evicted_keys, facts.maxmemory_policy
            ),
        });
    }
    risks
}

fn policy_risk(facts: &ServerFacts, keys_matched: u64) -> Risk {
    let policy = facts.maxmemory_policy.as_str();
    if facts.maxmemory_bytes == 0 {
        return no_limit(policy);
    }
    let limit = format!("maxmemory {}", human_bytes(facts.maxmemory_bytes));
    match policy {
        "allkeys-lru" | "allkeys-lfu" | "allkeys-random" => allkeys(facts, keys_matched, &limit),
        "volatile-lru" | "volatile-lfu" | "volatile-random" | "volatile-ttl" => volatile(facts, &limit),
        "noeviction" => Risk {
            kind: RiskKind::OomOnWrite,
            says: "writes fail with OOM at maxmemory: a limiter must surface that error, not admit".into(),
            because: format!(
                "maxmemory-policy noeviction with {limit}: no key is evicted, so caps hold, but at the limit every write (INCR, EXPIRE, EVAL of a write) is refused with `OOM command not allowed`; a limiter that treats that error as an admission lets everything through"
            ),
        },
        other => Risk {
            kind: RiskKind::UnknownPolicy,
            says: format!("maxmemory-policy {other} is not one this audit knows"),
            because: format!("INFO memory says maxmemory_policy:{other} with {limit}; judge its eviction by hand"),
        },
    }
}

fn no_limit(policy: &str) -> Risk {
    let later = if policy.starts_with("allkeys-") {
        format!(
            "; once maxmemory is set, {policy} evicts limiter counters with every other key and each eviction resets a cap"
        )
    } else {
        String::new()
    };
    Risk {
        kind: RiskKind::NoMemoryLimit,
        says: "no eviction limit: nothing is evicted, and the server grows until the machine runs out of memory".into(),
        because: format!("maxmemory is 0 (INFO memory), so the policy {policy} never applies{later}"),
    }
}

fn allkeys(facts: &ServerFacts, keys_matched: u64, limit: &str) -> Risk {
    let policy = &facts.maxmemory_policy;
    let total = facts.keys_total();
    let others = total.saturating_sub(keys_matched);
    if others == 0 {
        return Risk {
            kind: RiskKind::LimiterKeysEvicted,
            says: "at maxmemory limiter counters are evicted, and each eviction resets a cap".into(),
            because: format!(
                "maxmemory-policy {policy} with {limit} evicts any key when memory is full; the server holds only the {keys_matched} matched keys now, so nothing else competes for memory yet"
            ),
        };
    }
    Risk {
        kind: RiskKind::SharedEviction,
        says: "limiter counters are evicted with the cache and the cap resets (incident 2)".into(),
        because: format!(
            "maxmemory-policy {policy} with {limit} evicts any key when memory is full, and the server holds {others} keys besides the {keys_matched} matched (DBSIZE {} in db{}, {total} in all databases): when the others fill memory, limiter counters are evicted too, and an evicted counter starts again from 0",
            facts.dbsize, facts.db
        ),
    }
}

fn volatile(facts: &ServerFacts, limit: &str) -> Risk {
    let total = facts.keys_total();
    let with_ttl = facts.expires_total();
    Risk {
        kind: RiskKind::VolatileEviction,
        says: "limiter keys (they have TTLs) are the first eviction candidates whenever other keys have none".into(),
        because: format!(
            "maxmemory-policy {} with {limit} evicts only keys with a TTL: {with_ttl} of the server's {total} keys have one and {} have none; at maxmemory the keys with TTLs, the limiter's counters among them, are evicted and each eviction resets a cap",
            facts.maxmemory_policy,
            total.saturating_sub(with_ttl)
        ),
    }
}

/// e.g. "64 MiB (67108864 bytes)".
pub fn human_bytes(bytes: u64) -> String {
    const UNITS: [(&str, u64); 3] = [("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)];
    match UNITS.iter().find(|(_, size)| bytes >= *size) {
        Some((unit, size)) if bytes.is_multiple_of(*size) => format!("{} {unit} ({bytes} bytes)", bytes / size),
        Some((unit, size)) => format!("{:.1} {unit} ({bytes} bytes)", bytes as f64 / *size as f64),
        None => format!("{bytes} bytes"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::audit::server::{InfoSections, KeyspaceEvents, parse_facts};

    /// A server as hand-written `INFO memory` and `INFO keyspace` replies describe it
    /// (db0 selected; DBSIZE as db0's keys).
    fn server(policy: &str, maxmemory_bytes: u64, dbs: &[(&str, u64, u64)]) -> ServerFacts {
        let keyspace: String = dbs
            .iter()
            .map(|(name, keys, expires)| format!("{name}:keys={keys},expires={expires},avg_ttl=0\r\n"))
            .collect();
        let info = InfoSections {
            server: "# Server\r\nredis_version:7.0.15\r\nredis_mode:standalone\r\n".into(),
            memory: format!(
                "# Memory\r\nused_memory:1033536\r\nmaxmemory:{maxmemory_bytes}\r\nmaxmemory_human:0B\r\nmaxmemory_policy:{policy}\r\n"
            ),
            stats: "# Stats\r\nexpired_keys:0\r\nevicted_keys:0\r\n".into(),
            keyspace: format!("# Keyspace\r\n{keyspace}"),
        };
        let dbsize = dbs.iter().find(|d| d.0 == "db0").map_or(0, |d| d.1);
        parse_facts(&info, 0, dbsize, KeyspaceEvents::Off)
    }

    fn kinds(risks: &[Risk]) -> Vec<RiskKind> {
        risks.iter().map(|r| r.kind).collect()
    }

    #[test]
    fn allkeys_with_a_limit_and_cache_keys_is_incident_2() {
        let risks = assess(&server("allkeys-lru", 64 << 20, &[("db0", 5000, 3000)]), 3000);
        assert_eq!(kinds(&risks), [RiskKind::SharedEviction]);
        assert!(risks[0].says.contains("incident 2"), "{}", risks[0].says);
        assert!(
            risks[0]
                .because
                .contains("holds 2000 keys besides the 3000 matched (DBSIZE 5000 in db0, 5000 in all databases)"),
            "{}",
            risks[0].because
        );
        assert!(risks[0].because.contains("maxmemory 64 MiB (67108864 bytes)"));
    }

    #[test]
    fn cache_keys_in_another_database_count_too() {
        let risks = assess(
            &server("allkeys-lfu", 1 << 30, &[("db0", 3000, 3000), ("db1", 10, 0)]),
            3000,
        );
        assert_eq!(kinds(&risks), [RiskKind::SharedEviction]);
        assert!(
            risks[0].because.contains("holds 10 keys besides"),
            "{}",
            risks[0].because
        );
    }

    #[test]
    fn allkeys_with_only_limiter_keys_still_evicts_them() {
        let risks = assess(&server("allkeys-random", 1 << 20, &[("db0", 300, 300)]), 300);
        assert_eq!(kinds(&risks), [RiskKind::LimiterKeysEvicted]);
    }

    #[test]
    fn volatile_policies_make_keys_with_ttls_the_candidates() {
        let risks = assess(&server("volatile-ttl", 1 << 20, &[("db0", 500, 300)]), 300);
        assert_eq!(kinds(&risks), [RiskKind::VolatileEviction]);
        assert!(
            risks[0]
                .says
                .contains("first eviction candidates whenever other keys have none")
        );
        assert!(
            risks[0]
                .because
                .contains("300 of the server's 500 keys have one and 200 have none")
        );
    }

    #[test]
    fn noeviction_means_oom_errors_a_limiter_must_surface() {
        let risks = assess(&server("noeviction", 1 << 20, &[("db0", 5, 5)]), 5);
        assert_eq!(kinds(&risks), [RiskKind::OomOnWrite]);
        assert!(risks[0].says.contains("must surface that error, not admit"));
    }

    #[test]
    fn maxmemory_0_is_no_limit_whatever_the_policy() {
        let risks = assess(&server("allkeys-lru", 0, &[("db0", 5000, 3000)]), 3000);
        assert_eq!(kinds(&risks), [RiskKind::NoMemoryLimit]);
        assert!(risks[0].because.contains("once maxmemory is set, allkeys-lru evicts"));
        let risks = assess(&server("noeviction", 0, &[]), 0);
        assert_eq!(kinds(&risks), [RiskKind::NoMemoryLimit]);
        assert!(!risks[0].because.contains("once maxmemory is set"));
    }

    #[test]
    fn evictions_already_seen_are_named() {
        let info = InfoSections {
            memory: "maxmemory:1048576\r\nmaxmemory_policy:allkeys-lru\r\n".into(),
            stats: "# Stats\r\nexpired_keys:7\r\nevicted_keys:42\r\nevicted_clients:0\r\n".into(),
            keyspace: "db0:keys=10,expires=10,avg_ttl=1000\r\n".into(),
            ..InfoSections::default()
        };
        let facts = parse_facts(&info, 0, 10, KeyspaceEvents::Off);
        assert_eq!((facts.evicted_keys, facts.expired_keys), (42, 7));
        let risks = assess(&facts, 10);
        assert_eq!(kinds(&risks), [RiskKind::LimiterKeysEvicted, RiskKind::EvictedAlready]);
        assert_eq!(risks[1].says, "the server has already evicted 42 keys");
    }

    #[test]
    fn an_unknown_policy_is_said_to_be_unknown() {
        let risks = assess(&server("allkeys-mystery", 1 << 20, &[]), 0);
        assert_eq!(kinds(&risks), [RiskKind::UnknownPolicy]);
    }

    #[test]
    fn bytes_read_as_people_write_them() {
        assert_eq!(human_bytes(64 << 20), "64 MiB (67108864 bytes)");
        assert_eq!(human_bytes(1536), "1.5 KiB (1536 bytes)");
        assert_eq!(human_bytes(100), "100 bytes");
    }
}
