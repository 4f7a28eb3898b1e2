//! Before traffic: start the run's servers (connecting to and configuring them is
//! `backend`'s: [`crate::backend::connect`], [`crate::backend::configure`]).

use crate::backend::{Backend, FailoverPair, ServerHandle, StartOptions, join_cluster, start_cluster};
use crate::error::SetupError;
use crate::history::ServerRole;
use crate::scenario::Topology;

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
        topology: Topology,
        options: StartOptions,
    ) -> Result<Self, SetupError> {
        let (limiter, cache) = if needs_cache {
            let (limiter, cache) = tokio::join!(
                start_limiter_server(backend, run_id, topology, options),
                backend.start(ServerRole::Cache, run_id, StartOptions::default())
            );
            (limiter, Some(cache))
        } else {
            (start_limiter_server(backend, run_id, topology, options).await, None)
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

/// Start the limiter's server; with [`StartOptions::replica`], a primary and its replica behind
/// one endpoint ([`FailoverPair`]); for a cluster topology, the whole [`crate::backend::Cluster`].
async fn start_limiter_server(
    backend: &dyn Backend,
    run_id: &str,
    topology: Topology,
    options: StartOptions,
) -> Result<Box<dyn ServerHandle>, SetupError> {
    if let Topology::Cluster { primaries, replicas } = topology {
        if !backend.owns_servers() {
            // A cluster of the user's, as it is (whatever its size): found through its node.
            let options = StartOptions {
                cluster_node: true,
                ..options
            };
            let seed = backend.start(ServerRole::Limiter, run_id, options).await?;
            return Ok(Box::new(join_cluster(seed).await?));
        }
        let cluster = start_cluster(backend, run_id, primaries, replicas, options).await?;
        return Ok(Box::new(cluster));
    }
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
        Err(e) => Err(SetupError::ServerStart {
            backend: backend.name().into(),
            reason: format!("making a replica of {describe}: {e}"),
        }),
    }
}
