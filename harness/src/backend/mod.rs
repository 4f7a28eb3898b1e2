//! Where Redis runs: a container the harness starts (default when Docker answers), a
//! `redis-server` child process, or an existing server at a URL that the harness must not
//! reconfigure unless told to.

mod clean;
mod container;
mod image;
mod process;
mod url;

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;

pub use clean::{CleanSummary, RUN_ENV, clean, forget_settings, kill_run_processes, save_settings};
pub use container::{ContainerBackend, docker_ping};
pub use image::{LocalRedis, ensure_image, local_redis};
pub use process::ProcessBackend;
pub use url::UrlBackend;

use crate::error::SetupError;
use crate::history::ServerRole;

/// Label on every container the harness starts; `clean` removes what carries it.
pub const LABEL: &str = "limiter-harness";
/// Label naming the run a container belongs to.
pub const LABEL_RUN: &str = "limiter-harness.run";

/// Which backend the user asked for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum BackendChoice {
    /// A container when a Docker engine answers, otherwise a local process.
    Auto,
    Container,
    Process,
    Url,
}

/// Everything the backends need from the command line.
#[derive(Debug, Clone)]
pub struct BackendOptions {
    pub choice: BackendChoice,
    pub url: Option<String>,
    /// A container image to use instead of the one built from the local binary.
    pub image: Option<String>,
    pub redis_server: PathBuf,
    pub allow_reconfigure: bool,
}

impl Default for BackendOptions {
    fn default() -> Self {
        Self {
            choice: BackendChoice::Auto,
            url: None,
            image: None,
            redis_server: PathBuf::from("redis-server"),
            allow_reconfigure: false,
        }
    }
}

/// Starts Redis servers for a run.
#[async_trait]
pub trait Backend: Send + Sync {
    /// `container`, `process` or `url`.
    fn name(&self) -> &'static str;
    /// Whether the servers are the harness's own (fresh, safe to configure and flood).
    fn owns_servers(&self) -> bool;
    /// The command-line flags that select this backend again (for the reproduce command).
    fn reproduce_flags(&self) -> String;
    /// Start one server for `role`. `run_id` must start with the pid of the process that
    /// owns the run and a dash (`clean` spares servers whose owner is alive).
    async fn start(&self, role: ServerRole, run_id: &str) -> Result<Box<dyn ServerHandle>, SetupError>;
}

/// A running server. `stop` removes it (container) or kills it (process).
#[async_trait]
pub trait ServerHandle: Send + Sync {
    fn url(&self) -> &str;
    /// e.g. "container 3f2a9c1b (limiter-harness/redis:7.0.15)".
    fn describe(&self) -> String;
    async fn stop(self: Box<Self>) -> Result<(), String>;
}

/// Pick the backend the options ask for, checking its prerequisites.
pub async fn select_backend(opts: &BackendOptions) -> Result<Arc<dyn Backend>, SetupError> {
    match opts.choice {
        BackendChoice::Container => Ok(Arc::new(ContainerBackend::connect(opts).await?)),
        BackendChoice::Process => Ok(Arc::new(ProcessBackend::new(&opts.redis_server)?)),
        BackendChoice::Url => {
            let url = opts
                .url
                .clone()
                .ok_or_else(|| SetupError::Usage("--backend url needs --url redis://HOST:PORT".into()))?;
            Ok(Arc::new(UrlBackend::new(url)))
        }
        BackendChoice::Auto => {
            if opts.url.is_some() {
                return Ok(Arc::new(UrlBackend::new(opts.url.clone().expect("checked"))));
            }
            let docker = match ContainerBackend::connect(opts).await {
                Ok(backend) => return Ok(Arc::new(backend)),
                Err(e) => e.to_string(),
            };
            match ProcessBackend::new(&opts.redis_server) {
                Ok(backend) => {
                    eprintln!(
                        "note: no usable Docker engine ({}); using --backend process",
                        first_line(&docker)
                    );
                    Ok(Arc::new(backend))
                }
                Err(e) => Err(SetupError::NoBackend {
                    docker: first_line(&docker).to_owned(),
                    binary: first_line(&e.to_string()).to_owned(),
                }),
            }
        }
    }
}

fn first_line(text: &str) -> &str {
    text.lines().next().unwrap_or_default()
}

/// Wait until the server at `url` answers PING (a fresh server takes a moment).
pub async fn wait_ready(url: &str, timeout: Duration) -> Result<(), String> {
    let deadline = tokio::time::Instant::now() + timeout;
    let mut last = String::from("no answer");
    while tokio::time::Instant::now() < deadline {
        match ping(url).await {
            Ok(()) => return Ok(()),
            Err(e) => last = e,
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    Err(format!("no PONG from {url} within {} ms: {last}", timeout.as_millis()))
}

async fn ping(url: &str) -> Result<(), String> {
    let client = redis::Client::open(url).map_err(|e| e.to_string())?;
    let mut conn = client
        .get_multiplexed_async_connection()
        .await
        .map_err(|e| e.to_string())?;
    redis::cmd("PING")
        .query_async::<String>(&mut conn)
        .await
        .map(drop)
        .map_err(|e| e.to_string())
}

/// A port on 127.0.0.1 that was free a moment ago (the caller retries if it is taken).
pub(crate) fn free_port() -> Result<u16, String> {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").map_err(|e| e.to_string())?;
    Ok(listener.local_addr().map_err(|e| e.to_string())?.port())
}
