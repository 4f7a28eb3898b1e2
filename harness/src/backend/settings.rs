//! The harness's own connections to a server and the settings it changes there: connect
//! (named, with the harness's timeouts), CONFIG SET with the old values kept, put them back,
//! UNLINK a run's keys. Below every role that talks to a server (the runner, the nemesis,
//! the observer, `clean`).

use std::time::Duration;

use futures::future::BoxFuture;
use redis::AsyncConnectionConfig;
use redis::aio::MultiplexedConnection;

use super::BackendError;
use crate::error::SetupError;
use crate::scenario::ServerConfig;

/// `notify-keyspace-events` flags the harness sets on servers it owns: keyspace channel (K),
/// generic commands such as DEL and EXPIRE (g), expiry (x) and eviction (e).
pub const KEYSPACE_FLAGS: &str = "Kgxe";

/// How long the harness waits for any reply before calling a request indeterminate.
pub const RESPONSE_TIMEOUT: Duration = Duration::from_secs(2);

/// How long the harness waits for a connection to a server to open.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(2);

/// The client name of the harness's own connections (observer, nemesis, setup): a
/// `client-kill` fault spares them and kills the limiter's.
pub const HARNESS_CLIENT_NAME: &str = "lh-harness";

/// A new multiplexed connection of the harness's own, with its timeouts, named
/// [`HARNESS_CLIENT_NAME`].
pub fn connect(url: &str) -> BoxFuture<'_, Result<MultiplexedConnection, SetupError>> {
    Box::pin(connect_unboxed(url))
}

async fn connect_unboxed(url: &str) -> Result<MultiplexedConnection, SetupError> {
    let mut conn = connect_client(url).await?;
    let named: redis::RedisResult<()> = redis::cmd("CLIENT")
        .arg("SETNAME")
        .arg(HARNESS_CLIENT_NAME)
        .query_async(&mut conn)
        .await;
    named.map_err(|e| SetupError::Connect {
        url: url.to_owned(),
        reason: format!("CLIENT SETNAME: {e}"),
    })?;
    Ok(conn)
}

/// A new multiplexed connection with the harness's timeouts, unnamed: the limiter's.
pub async fn connect_client(url: &str) -> Result<MultiplexedConnection, SetupError> {
    let client = redis::Client::open(url).map_err(|e| SetupError::Connect {
        url: url.to_owned(),
        reason: e.to_string(),
    })?;
    let config = AsyncConnectionConfig::new()
        .set_connection_timeout(Some(CONNECT_TIMEOUT))
        .set_response_timeout(Some(RESPONSE_TIMEOUT));
    client
        .get_multiplexed_async_connection_with_config(&config)
        .await
        .map_err(|e| SetupError::Connect {
            url: url.to_owned(),
            reason: e.to_string(),
        })
}

/// Keeps the values a run is about to replace (see [`configure`]).
pub type SaveSettings<'a> = dyn Fn(&[(String, String)]) -> Result<(), SetupError> + 'a;

/// Apply `config` with CONFIG SET (and the keyspace flags when `with_events`); returns the
/// settings applied as "name value". The values they replaced go into `previous` one by
/// one, so that a failure half-way still leaves what to restore, and `save` is given them
/// before each change (a server the harness did not start keeps them on disk for `clean`).
pub async fn configure(
    conn: &mut MultiplexedConnection,
    config: &ServerConfig,
    with_events: bool,
    previous: &mut Vec<(String, String)>,
    save: &SaveSettings<'_>,
) -> Result<Vec<String>, SetupError> {
    let mut settings: Vec<(String, String)> = config.settings.iter().map(|(k, v)| (k.clone(), v.clone())).collect();
    if with_events {
        settings.push(("notify-keyspace-events".into(), KEYSPACE_FLAGS.into()));
    }
    let mut applied = Vec::new();
    for (name, value) in settings {
        let old: Vec<String> = redis::cmd("CONFIG")
            .arg("GET")
            .arg(&name)
            .query_async(conn)
            .await
            .unwrap_or_default();
        if let Some(old) = old.get(1) {
            previous.push((name.clone(), old.clone()));
            save(previous)?;
        }
        let set: redis::RedisResult<()> = redis::cmd("CONFIG")
            .arg("SET")
            .arg(&name)
            .arg(&value)
            .query_async(conn)
            .await;
        set.map_err(|e| SetupError::ServerConfig {
            setting: name.clone(),
            value: value.clone(),
            reason: e.to_string(),
        })?;
        applied.push(format!("{name} {value}"));
    }
    Ok(applied)
}

/// Apply the scenario's settings again on a server the nemesis restarted (on a server the
/// harness started: nothing to save or restore).
pub async fn configure_after_restart(url: &str, config: &ServerConfig, with_events: bool) -> Result<(), SetupError> {
    let mut conn = connect(url).await?;
    configure(&mut conn, config, with_events, &mut Vec::new(), &|_| Ok(()))
        .await
        .map(drop)
}

/// Put back settings replaced by [`configure`] (servers the harness did not start); returns
/// the ones that could not be.
pub async fn restore(conn: &mut MultiplexedConnection, previous: &[(String, String)]) -> Vec<BackendError> {
    let mut failed = Vec::new();
    for (name, value) in previous {
        let set: redis::RedisResult<()> = redis::cmd("CONFIG")
            .arg("SET")
            .arg(name)
            .arg(value)
            .query_async(conn)
            .await;
        if let Err(e) = set {
            failed.push(BackendError::command(format!("CONFIG SET {name} {value}"))(e));
        }
    }
    failed
}

/// UNLINK `keys` (the run's own keys on a server it did not start), in batches. On a
/// cluster connection the keys must share one hash slot (the caller groups them).
pub async fn unlink<C: redis::aio::ConnectionLike>(conn: &mut C, keys: &[String]) -> redis::RedisResult<usize> {
    let mut total = 0;
    for batch in keys.chunks(1000) {
        total += redis::cmd("UNLINK").arg(batch).query_async::<usize>(conn).await?;
    }
    Ok(total)
}
