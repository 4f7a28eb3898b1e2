//! Redis in a container started with testcontainers, on the host's network, listening on
//! 127.0.0.1 only (protected mode on). A cluster node's bus listens there too, on a port of
//! its own: `CLUSTER MEET 127.0.0.1 PORT BUS-PORT` joins containers as it joins processes,
//! with no address or port to announce.

use std::time::Duration;

use async_trait::async_trait;
use futures::future::BoxFuture;
use testcontainers::core::WaitFor;
use testcontainers::runners::AsyncRunner;
use testcontainers::{ContainerAsync, GenericImage, ImageExt};

use super::clean::{CONTAINER_LABEL, forget_container, record_container};
use super::cluster::node_args;
use super::image::ensure_image;
use super::{
    Backend, BackendError, BackendOptions, LABEL, LABEL_RUN, ServerHandle, StartOptions, free_port, server_flag,
    server_for, wait_ready,
};
use crate::error::SetupError;
use crate::history::ServerRole;
use crate::servers::{LocalServer, Product, series};

/// Starts one container per server, from the harness's own image or `--image`.
#[derive(Debug)]
pub struct ContainerBackend {
    name: String,
    tag: String,
    /// The user named the image (`--image`), so it goes in the reproduce command.
    explicit: bool,
    /// The server program inside the image (`redis-server`, `valkey-server`).
    program: String,
    /// The `--server` value the image was built from, for the reproduce command.
    server_spec: Option<String>,
    /// The product and version of the server the image was built from; `None` for an image
    /// of the user's own, whose version is its server's to say.
    built_from: Option<(Product, String)>,
}

impl ContainerBackend {
    /// Check that the Docker engine answers and that the image exists (building it from the
    /// server `--server` names if needed).
    pub fn connect(opts: &BackendOptions) -> BoxFuture<'_, Result<Self, SetupError>> {
        Box::pin(Self::connect_unboxed(opts))
    }

    async fn connect_unboxed(opts: &BackendOptions) -> Result<Self, SetupError> {
        let server = match &opts.image {
            Some(_) => None,
            None => Some(server_for(opts)?),
        };
        Self::connect_with(opts.image.as_deref(), server.as_ref()).await
    }

    /// As [`ContainerBackend::connect`], with the server already found: `image` when given,
    /// else the image built from `server`.
    pub async fn connect_with(image: Option<&str>, server: Option<&LocalServer>) -> Result<Self, SetupError> {
        docker_ping().await?;
        match (image, server) {
            (Some(image), _) => {
                let (name, tag) = image
                    .rsplit_once(':')
                    .filter(|(_, t)| !t.contains('/'))
                    .unwrap_or((image, "latest"));
                Ok(Self {
                    name: name.to_owned(),
                    tag: tag.to_owned(),
                    explicit: true,
                    program: "redis-server".into(),
                    server_spec: None,
                    built_from: None,
                })
            }
            (None, Some(server)) => {
                let (name, tag) = ensure_image(server).await?;
                Ok(Self {
                    name,
                    tag,
                    explicit: false,
                    program: server.program(),
                    server_spec: server.spec.clone(),
                    built_from: Some((server.product, server.version.clone())),
                })
            }
            (None, None) => Err(SetupError::Usage(
                "a container needs an image: --image NAME:TAG, or a server binary to build one from (--server)".into(),
            )),
        }
    }

    pub fn image(&self) -> String {
        format!("{}:{}", self.name, self.tag)
    }
}

/// Fails with a clear message when no Docker engine answers within a few seconds.
pub async fn docker_ping() -> Result<(), SetupError> {
    let docker = testcontainers::core::client::docker_client_instance()
        .await
        .map_err(|e| SetupError::DockerUnavailable(e.to_string()))?;
    match tokio::time::timeout(Duration::from_secs(5), docker.ping()).await {
        Ok(Ok(_)) => Ok(()),
        Ok(Err(e)) => Err(SetupError::DockerUnavailable(e.to_string())),
        Err(_) => Err(SetupError::DockerUnavailable("no answer within 5 s".into())),
    }
}

#[async_trait]
impl Backend for ContainerBackend {
    fn name(&self) -> &'static str {
        "container"
    }

    fn owns_servers(&self) -> bool {
        true
    }

    fn reproduce_flags(&self) -> String {
        if self.explicit {
            format!("--backend container --image {}", self.image())
        } else {
            format!("--backend container{}", server_flag(self.server_spec.as_deref()))
        }
    }

    /// The container shares the host's network and its server binds 127.0.0.1 with
    /// protected mode on: nothing off this machine can reach it, while it runs or after.
    async fn start(
        &self,
        role: ServerRole,
        run_id: &str,
        options: StartOptions,
    ) -> Result<Box<dyn ServerHandle>, SetupError> {
        let fail = |reason: String| SetupError::ServerStart {
            backend: format!("container {}", self.image()),
            reason,
        };
        if options.cluster_node
            && let Some((Product::Redis, version)) = &self.built_from
            && series(version) < (7, 0)
        {
            return Err(fail(format!(
                "a cluster node needs Redis 7.0 or later (its bus on a port of its own, `cluster-port`; `CLUSTER ADDSLOTSRANGE`): the image's server is redis {version}"
            )));
        }
        let mut last_error = String::new();
        // Another process may take the port (or a cluster node's bus port) between
        // `free_port` and the bind: the server then exits before it is ready, and the next
        // attempt takes other ports.
        for _attempt in 0..5 {
            let port = free_port().map_err(|e| fail(e.to_string()))?;
            let bus_port = match options.cluster_node {
                true => Some(free_port().map_err(|e| fail(e.to_string()))?),
                false => None,
            };
            // Recorded before it starts: `clean` removes only containers of recorded runs.
            record_container(run_id, port)
                .map_err(|e| fail(format!("could not record the container for `clean`: {e}")))?;
            let container = match self.request(role, run_id, port, bus_port, options).start().await {
                Ok(container) => container,
                Err(e) => {
                    forget_container(run_id, port);
                    let bus = bus_port.map(|b| format!(" (bus {b})")).unwrap_or_default();
                    last_error = format!("port {port}{bus}: {e}");
                    continue;
                }
            };
            let url = format!("redis://127.0.0.1:{port}");
            if let Err(e) = wait_ready(&url, Duration::from_secs(10)).await {
                let _ = container.rm().await;
                forget_container(run_id, port);
                return Err(fail(e.to_string()));
            }
            return Ok(Box::new(ContainerHandle {
                container,
                url,
                image: self.image(),
                run_id: run_id.to_owned(),
                port,
                bus_port,
            }));
        }
        Err(fail(last_error))
    }
}

impl ContainerBackend {
    fn request(
        &self,
        role: ServerRole,
        run_id: &str,
        port: u16,
        bus_port: Option<u16>,
        options: StartOptions,
    ) -> testcontainers::ContainerRequest<GenericImage> {
        let port = port.to_string();
        // `nodes.conf` goes in the server's working directory: the image's `/` (FROM scratch,
        // run as root), where an append-only file goes too.
        let node_args = node_args(bus_port);
        let mut cmd = vec![
            self.program.as_str(),
            "--port",
            &port,
            "--bind",
            "127.0.0.1",
            "--protected-mode",
            "yes",
        ];
        cmd.extend(options.persistence_args());
        cmd.extend(node_args.iter().map(String::as_str));
        // Either stream: a server that exits at once says why on stderr (an image of the
        // user's own too old for a flag: "Bad directive"), and the error then quotes it.
        GenericImage::new(self.name.as_str(), self.tag.as_str())
            .with_wait_for(WaitFor::message_on_either_std("Ready to accept connections"))
            .with_network("host")
            .with_cmd(cmd)
            .with_label(LABEL, CONTAINER_LABEL)
            .with_label(LABEL_RUN, run_id)
            .with_label("limiter-harness.role", role_name(role))
            .with_startup_timeout(Duration::from_secs(30))
    }
}

fn role_name(role: ServerRole) -> &'static str {
    match role {
        ServerRole::Limiter => "limiter",
        ServerRole::Cache => "cache",
        ServerRole::Replica => "replica",
    }
}

struct ContainerHandle {
    container: ContainerAsync<GenericImage>,
    url: String,
    image: String,
    run_id: String,
    port: u16,
    bus_port: Option<u16>,
}

#[async_trait]
impl ServerHandle for ContainerHandle {
    fn url(&self) -> &str {
        &self.url
    }

    fn describe(&self) -> String {
        let id: String = self.container.id().chars().take(12).collect();
        format!("container {id} ({})", self.image)
    }

    async fn stop(self: Box<Self>) -> Result<(), BackendError> {
        self.container.rm().await?;
        forget_container(&self.run_id, self.port);
        Ok(())
    }

    /// `docker stop -t 0`: SIGKILL at once, as a crash. The container's filesystem, and so an
    /// append-only file, survives for [`ServerHandle::start_again`] (`docker start`).
    async fn kill(&self) -> Result<(), BackendError> {
        self.container
            .stop_with_timeout(Some(0))
            .await
            .map_err(BackendError::container("docker stop"))
    }

    async fn start_again(&self) -> Result<(), BackendError> {
        self.container
            .start()
            .await
            .map_err(BackendError::container("docker start"))?;
        wait_ready(&self.url, Duration::from_secs(10)).await
    }

    async fn freeze(&self) -> Result<(), BackendError> {
        self.container
            .pause()
            .await
            .map_err(BackendError::container("docker pause"))
    }

    async fn thaw(&self) -> Result<(), BackendError> {
        self.container
            .unpause()
            .await
            .map_err(BackendError::container("docker unpause"))
    }

    fn cluster_bus_port(&self) -> Option<u16> {
        self.bus_port
    }
}
