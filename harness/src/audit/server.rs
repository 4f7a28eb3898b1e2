//! What the server says about itself: version, memory limit and policy, eviction and
//! expiry counters, how many keys it holds, and whether it publishes keyspace events. Read
//! with `INFO` (no CONFIG permission needed) and one `CONFIG GET`, which may be denied.

use std::collections::BTreeMap;

use super::readonly::{ReadError, ReadOnly};
use crate::observer::{info_field, info_value, parse_server_info};

/// The keys of one database, as `INFO keyspace` counts them.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct DbKeys {
    pub keys: u64,
    /// Keys with a TTL.
    pub expires: u64,
}

/// Whether the server publishes keyspace notifications (`notify-keyspace-events`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum KeyspaceEvents {
    Off,
    On {
        flags: String,
    },
    /// CONFIG GET was denied or failed: why, in plain words.
    Unknown {
        reason: String,
    },
}

impl KeyspaceEvents {
    /// e.g. "on (notify-keyspace-events Kgxe)", "off", "unknown: CONFIG GET not permitted".
    pub fn describe(&self) -> String {
        match self {
            Self::Off => "off (notify-keyspace-events is empty)".into(),
            Self::On { flags } => format!("on (notify-keyspace-events {flags})"),
            Self::Unknown { reason } => format!("unknown: {reason}"),
        }
    }
}

/// The server as the audit saw it before scanning.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServerFacts {
    /// e.g. "redis 7.0.15".
    pub version: String,
    /// 0: no limit.
    pub maxmemory_bytes: u64,
    pub maxmemory_policy: String,
    pub evicted_keys: u64,
    pub expired_keys: u64,
    /// The database the URL selects.
    pub db: i64,
    /// DBSIZE of that database.
    pub dbsize: u64,
    /// `INFO keyspace`, by database name ("db0", ...).
    pub keyspace: BTreeMap<String, DbKeys>,
    pub keyspace_events: KeyspaceEvents,
}

impl ServerFacts {
    /// Keys in every database (eviction is the whole server's, not one database's).
    pub fn keys_total(&self) -> u64 {
        self.keyspace.values().map(|d| d.keys).sum()
    }

    /// Keys with a TTL in every database.
    pub fn expires_total(&self) -> u64 {
        self.keyspace.values().map(|d| d.expires).sum()
    }
}

/// The text of the four `INFO` sections the audit reads.
#[derive(Debug, Clone, Default)]
pub struct InfoSections {
    pub server: String,
    pub memory: String,
    pub stats: String,
    pub keyspace: String,
}

/// Read the server's facts: four `INFO` sections, `DBSIZE`, `CONFIG GET notify-keyspace-events`.
pub async fn read_facts(conn: &mut ReadOnly, db: i64) -> Result<ServerFacts, ReadError> {
    let mut info = InfoSections::default();
    for (name, text) in [
        ("server", &mut info.server),
        ("memory", &mut info.memory),
        ("stats", &mut info.stats),
        ("keyspace", &mut info.keyspace),
    ] {
        *text = conn.query(&[b"INFO", name.as_bytes()]).await?;
    }
    let dbsize: u64 = conn.query(&[b"DBSIZE"]).await?;
    let events = conn
        .query::<BTreeMap<String, String>>(&[b"CONFIG", b"GET", b"notify-keyspace-events"])
        .await
        .map(|mut reply| reply.remove("notify-keyspace-events"));
    Ok(parse_facts(&info, db, dbsize, keyspace_events(events)))
}

/// The facts the INFO sections state (a missing field reads as 0, a missing policy as "unknown").
pub fn parse_facts(info: &InfoSections, db: i64, dbsize: u64, keyspace_events: KeyspaceEvents) -> ServerFacts {
    ServerFacts {
        version: parse_server_info(&info.server).version,
        maxmemory_bytes: info_field(&info.memory, "maxmemory").unwrap_or(0),
        maxmemory_policy: info_value(&info.memory, "maxmemory_policy")
            .unwrap_or("unknown")
            .to_owned(),
        evicted_keys: info_field(&info.stats, "evicted_keys").unwrap_or(0),
        expired_keys: info_field(&info.stats, "expired_keys").unwrap_or(0),
        db,
        dbsize,
        keyspace: parse_keyspace(&info.keyspace),
        keyspace_events,
    }
}

/// `CONFIG GET notify-keyspace-events` (the flags it returned, if any) in plain words; a
/// denial is an answer, not a failure.
fn keyspace_events(flags: Result<Option<String>, ReadError>) -> KeyspaceEvents {
    match flags {
        Ok(Some(flags)) if flags.is_empty() => KeyspaceEvents::Off,
        Ok(Some(flags)) => KeyspaceEvents::On { flags },
        Ok(None) => KeyspaceEvents::Unknown {
            reason: "CONFIG GET returned no notify-keyspace-events".into(),
        },
        Err(ReadError::Server(e)) if e.code() == Some("NOPERM") => KeyspaceEvents::Unknown {
            reason: "CONFIG GET not permitted".into(),
        },
        Err(e) => KeyspaceEvents::Unknown {
            reason: format!("CONFIG GET failed: {e}"),
        },
    }
}

/// `db0:keys=12,expires=3,avg_ttl=0` lines, by database name.
pub fn parse_keyspace(info: &str) -> BTreeMap<String, DbKeys> {
    info.lines()
        .filter_map(|line| {
            let (db, fields) = line.trim().split_once(':')?;
            if !db.starts_with("db") {
                return None;
            }
            let field = |name: &str| {
                fields
                    .split(',')
                    .find_map(|f| f.strip_prefix(name)?.strip_prefix('=')?.parse().ok())
            };
            Some((
                db.to_owned(),
                DbKeys {
                    keys: field("keys")?,
                    expires: field("expires").unwrap_or(0),
                },
            ))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_the_keyspace_of_every_database() {
        let info = "# Keyspace\r\ndb0:keys=5000,expires=3000,avg_ttl=599000\r\ndb3:keys=7,expires=0,avg_ttl=0\r\n";
        let keyspace = parse_keyspace(info);
        assert_eq!(
            keyspace.get("db0"),
            Some(&DbKeys {
                keys: 5000,
                expires: 3000
            })
        );
        assert_eq!(keyspace.get("db3"), Some(&DbKeys { keys: 7, expires: 0 }));
        assert_eq!(keyspace.len(), 2);
        assert!(parse_keyspace("# Keyspace\r\n").is_empty());
    }

    #[test]
    fn a_denied_config_get_is_unknown_in_plain_words() {
        let denied = redis::RedisError::from((
            redis::ErrorKind::Server(redis::ServerErrorKind::NoPerm),
            "this user has no permissions to run the 'config|get' command",
        ));
        assert_eq!(
            keyspace_events(Err(ReadError::Server(denied))).describe(),
            "unknown: CONFIG GET not permitted"
        );
        let off = keyspace_events(Ok(Some(String::new())));
        assert_eq!(off, KeyspaceEvents::Off);
        let on = keyspace_events(Ok(Some("xKE".into())));
        assert_eq!(on.describe(), "on (notify-keyspace-events xKE)");
    }
}
