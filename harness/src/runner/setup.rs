//! Before traffic: start the servers, connect, configure them, check the limiter fits.

use std::time::Duration;

use redis::AsyncConnectionConfig;
use redis::aio::MultiplexedConnection;

use crate::backend::{Backend, FailoverPair, ServerHandle, StartOptions};
use crate::error::SetupError;
use crate::history::ServerRole;
use crate::observer::KEYSPACE_FLAGS;
use crate::scenario::ServerConfig;

/// How long the harness waits for any reply before calling a request indeterminate.
pub const RESPONSE_TIMEOUT: Duration = Duration::from_secs(2);

/// The client name of the harness's own connections (observer, nemesis, setup): a
/// `client-kill` fault spares them and kills the limiter's.
pub const HARNESS_CLIENT_NAME: &str = "lh-harness";

/// A new multiplexed connection of the harness's own, with its timeouts, named
/// [`HARNESS_CLIENT_NAME`].
pub async fn connect(url: &str) -> Result<MultiplexedConnection, SetupError> {
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
        .set_connection_timeout(Some(Duration::from_secs(2)))
        .set_response_timeout(Some(RESPONSE_TIMEOUT));
    client
        .get_multiplexed_async_connection_with_config(&config)
        .await
        .map_err(|e| SetupError::Connect {
            url: url.to_owned(),
            reason: e.to_string(),
        })
}

/// The servers of one run; stopped by [`Servers::stop`] on every path out of a run.
pub struct Servers {
    pub limiter: Box<dyn ServerHandle>,
    pub cache: Option<Box<dyn ServerHandle>>,
}

impl Servers {
    pub async fn start(
        backend: &dyn Backend,
        needs_cache: bool,
        run_id: &str,
        options: StartOptions,
    ) -> Result<Self, SetupError> {
        let (limiter, cache) = if needs_cache {
            let (limiter, cache) = tokio::join!(
                start_limiter(backend, run_id, options),
                backend.start(ServerRole::Cache, run_id, StartOptions::default())
            );
            (limiter, Some(cache))
        } else {
            (start_limiter(backend, run_id, options).await, None)
        };
        match (limiter, cache) {
            (Ok(limiter), None) => Ok(Self { limiter, cache: None }),
            (Ok(limiter), Some(Ok(cache))) => Ok(Self {
                limiter,
                cache: Some(cache),
            }),
            (Ok(server), Some(Err(e))) | (Err(e), Some(Ok(server))) => {
                let _ = server.stop().await;
                Err(e)
            }
            (Err(e), _) => Err(e),
        }
    }

    /// Stop every server; returns the ones that could not be stopped.
    pub async fn stop(self) -> Vec<String> {
        let mut failed = Vec::new();
        for server in std::iter::once(self.limiter).chain(self.cache) {
            let name = server.describe();
            if let Err(e) = server.stop().await {
                failed.push(format!("{name}: {e}"));
            }
        }
        failed
    }
}

/// The limiter's server; with [`StartOptions::replica`], a primary and its replica behind
/// one endpoint ([`FailoverPair`]).
async fn start_limiter(
    backend: &dyn Backend,
    run_id: &str,
    options: StartOptions,
) -> Result<Box<dyn ServerHandle>, SetupError> {
    if !options.replica {
        return backend.start(ServerRole::Limiter, run_id, options).await;
    }
    if !backend.owns_servers() {
        return Err(SetupError::Usage(
            "a failover fault needs a primary and a replica that the harness starts: use --backend process or container".into(),
        ));
    }
    let (primary, replica) = tokio::join!(
        backend.start(ServerRole::Limiter, run_id, options),
        backend.start(ServerRole::Replica, run_id, options)
    );
    let (primary, replica) = match (primary, replica) {
        (Ok(p), Ok(r)) => (p, r),
        (Ok(server), Err(e)) | (Err(e), Ok(server)) => {
            let _ = server.stop().await;
            return Err(e);
        }
        (Err(e), Err(_)) => return Err(e),
    };
    let describe = primary.describe();
    let paired = FailoverPair::new(primary, replica).await;
    match paired {
        Ok(pair) => Ok(Box::new(pair)),
        Err(reason) => Err(SetupError::ServerStart {
            backend: backend.name().into(),
            reason: format!("making a replica of {describe}: {reason}"),
        }),
    }
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
pub async fn configure_after_restart(url: &str, config: &ServerConfig, with_events: bool) -> Result<(), String> {
    let mut conn = connect(url).await.map_err(|e| e.to_string())?;
    configure(&mut conn, config, with_events, &mut Vec::new(), &|_| Ok(()))
        .await
        .map(drop)
        .map_err(|e| e.to_string())
}

/// Put back settings replaced by [`configure`] (servers the harness did not start).
pub async fn restore(conn: &mut MultiplexedConnection, previous: &[(String, String)]) -> Vec<String> {
    let mut failed = Vec::new();
    for (name, value) in previous {
        let set: redis::RedisResult<()> = redis::cmd("CONFIG")
            .arg("SET")
            .arg(name)
            .arg(value)
            .query_async(conn)
            .await;
        if let Err(e) = set {
            failed.push(format!("CONFIG SET {name} {value}: {e}"));
        }
    }
    failed
}

/// UNLINK `keys` (the run's own keys on a server it did not start), in batches.
pub async fn unlink(conn: &mut MultiplexedConnection, keys: &[String]) -> redis::RedisResult<usize> {
    let mut total = 0;
    for batch in keys.chunks(1000) {
        total += redis::cmd("UNLINK").arg(batch).query_async::<usize>(conn).await?;
    }
    Ok(total)
}
