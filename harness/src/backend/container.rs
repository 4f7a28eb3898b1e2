//! Redis in a container started with testcontainers, on a port mapped to 127.0.0.1.

use std::time::Duration;

use async_trait::async_trait;
use testcontainers::core::{IntoContainerPort, WaitFor};
use testcontainers::runners::AsyncRunner;
use testcontainers::{ContainerAsync, GenericImage, ImageExt};

use super::image::{ensure_image, local_redis};
use super::{Backend, BackendOptions, LABEL, LABEL_RUN, ServerHandle, wait_ready};
use crate::error::SetupError;
use crate::history::ServerRole;

/// Starts one container per server, from the harness's own image or `--image`.
#[derive(Debug)]
pub struct ContainerBackend {
    name: String,
    tag: String,
    /// The user named the image (`--image`), so it goes in the reproduce command.
    explicit: bool,
}

impl ContainerBackend {
    /// Check that the Docker engine answers and that the image exists (building it if needed).
    pub async fn connect(opts: &BackendOptions) -> Result<Self, SetupError> {
        docker_ping().await?;
        match &opts.image {
            Some(image) => {
                let (name, tag) = image
                    .rsplit_once(':')
                    .filter(|(_, t)| !t.contains('/'))
                    .unwrap_or((image, "latest"));
                Ok(Self {
                    name: name.to_owned(),
                    tag: tag.to_owned(),
                    explicit: true,
                })
            }
            None => {
                let redis = local_redis(&opts.redis_server)?;
                let (name, tag) = ensure_image(&redis).await?;
                Ok(Self {
                    name,
                    tag,
                    explicit: false,
                })
            }
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
            "--backend container".into()
        }
    }

    async fn start(&self, role: ServerRole, run_id: &str) -> Result<Box<dyn ServerHandle>, SetupError> {
        let fail = |reason: String| SetupError::ServerStart {
            backend: format!("container {}", self.image()),
            reason,
        };
        let request = GenericImage::new(self.name.as_str(), self.tag.as_str())
            .with_exposed_port(6379.tcp())
            .with_wait_for(WaitFor::message_on_stdout("Ready to accept connections"))
            .with_cmd([
                "redis-server",
                "--bind",
                "0.0.0.0",
                "--protected-mode",
                "no",
                "--save",
                "",
                "--appendonly",
                "no",
            ])
            .with_label(LABEL, "server")
            .with_label(LABEL_RUN, run_id)
            .with_label("limiter-harness.role", role_name(role))
            .with_startup_timeout(Duration::from_secs(30));
        let container = request.start().await.map_err(|e| fail(e.to_string()))?;
        let port = match container.get_host_port_ipv4(6379.tcp()).await {
            Ok(port) => port,
            Err(e) => {
                let _ = container.rm().await;
                return Err(fail(e.to_string()));
            }
        };
        let url = format!("redis://127.0.0.1:{port}");
        if let Err(e) = wait_ready(&url, Duration::from_secs(10)).await {
            let _ = container.rm().await;
            return Err(fail(e));
        }
        Ok(Box::new(ContainerHandle {
            container,
            url,
            image: self.image(),
        }))
    }
}

fn role_name(role: ServerRole) -> &'static str {
    match role {
        ServerRole::Limiter => "limiter",
        ServerRole::Cache => "cache",
    }
}

struct ContainerHandle {
    container: ContainerAsync<GenericImage>,
    url: String,
    image: String,
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

    async fn stop(self: Box<Self>) -> Result<(), String> {
        self.container.rm().await.map_err(|e| e.to_string())
    }
}
