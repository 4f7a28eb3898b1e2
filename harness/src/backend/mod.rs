//! Where Redis runs: a container the harness starts (default when Docker answers), a
//! server child process, or an existing server at a URL that the harness must not
//! reconfigure unless told to. Which server binary the first two run is [`crate::servers`]'s
//! (`--server NAME|PATH`).

mod clean;
mod cluster;
mod conn;
mod container;
mod direct;
mod error;
mod image;
mod pair;
mod process;
mod relay;
mod reshard;
mod settings;
mod url;

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use futures::future::BoxFuture;

pub use clean::{CleanSummary, RUN_ENV, clean, forget_settings, kill_run_processes, save_settings, settings_key};
pub use cluster::{Cluster, SLOTS, announce_ports, key_slot, primary_of_slot, slot_range, start_cluster};
pub use conn::{Conn, connect_cluster};
pub use container::{ContainerBackend, docker_ping};
pub use direct::Direct;
pub use error::BackendError;
pub use image::{ensure_image, image_name};
pub use pair::{FailoverPair, wait_link_up};
pub use process::{ProcessBackend, pid_dir};
pub use relay::socket_addr;
pub use reshard::{SlotMove, move_slot, move_slot_atomically, owner_of};
pub use settings::{
    HARNESS_CLIENT_NAME, KEYSPACE_FLAGS, RESPONSE_TIMEOUT, SaveSettings, configure, configure_after_restart, connect,
    connect_client, restore, unlink,
};
pub use url::{UrlBackend, join_cluster, redacted};

use crate::error::SetupError;
use crate::history::ServerRole;
use crate::servers::{LocalServer, resolve_server};
use crate::text::first_line;

/// Label on the harness's image (`image`) and on every container it starts (`server`);
/// `clean` removes a container only when it also names a run this user recorded.
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
    /// A container image to use instead of the one built from the server binary.
    pub image: Option<String>,
    /// `--server NAME|PATH`: an installed server or a binary; `None`: `redis-server` in PATH
    /// (else an installed redis-7.0).
    pub server: Option<String>,
    pub allow_reconfigure: bool,
}

impl Default for BackendOptions {
    fn default() -> Self {
        Self {
            choice: BackendChoice::Auto,
            url: None,
            image: None,
            server: None,
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
    async fn start(
        &self,
        role: ServerRole,
        run_id: &str,
        options: StartOptions,
    ) -> Result<Box<dyn ServerHandle>, SetupError>;
}

/// How a server is started, beyond what every run needs.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct StartOptions {
    /// Keep an append-only file, fsynced on every write (`--appendonly yes --appendfsync
    /// always`), so that a restart loses nothing acknowledged.
    pub appendonly: bool,
    /// Start a replica beside the limiter's server, behind one endpoint (a failover fault).
    pub replica: bool,
    /// Start it as a Redis Cluster node (`cluster-enabled`, its bus on a port of its own):
    /// one node of a [`Cluster`].
    pub cluster_node: bool,
}

impl StartOptions {
    /// The server's persistence flags.
    pub fn persistence_args(self) -> [&'static str; 6] {
        if self.appendonly {
            ["--save", "", "--appendonly", "yes", "--appendfsync", "always"]
        } else {
            ["--save", "", "--appendonly", "no", "--appendfsync", "everysec"]
        }
    }
}

/// A running server. `stop` removes it (container) or kills it (process); `kill` and
/// `start_again`, `freeze` and `thaw` are the nemesis's server faults.
#[async_trait]
pub trait ServerHandle: Send + Sync {
    fn url(&self) -> &str;
    /// e.g. "container 3f2a9c1b (limiter-harness/redis:7.0.15)".
    fn describe(&self) -> String;
    async fn stop(self: Box<Self>) -> Result<(), BackendError>;
    /// Kill the server, as a crash would (SIGKILL, `docker stop -t 0`); returns once it is gone.
    async fn kill(&self) -> Result<(), BackendError> {
        Err(BackendError::CannotRestart)
    }
    /// Start the killed server again on the same port and directory; returns once it answers
    /// PING. It keeps what its [`StartOptions`] persist.
    async fn start_again(&self) -> Result<(), BackendError> {
        Err(BackendError::CannotRestart)
    }
    /// Stop the server's process (SIGSTOP, `docker pause`); returns once it is stopped.
    async fn freeze(&self) -> Result<(), BackendError> {
        Err(BackendError::CannotPause)
    }
    /// Let a frozen server go on (SIGCONT, `docker unpause`).
    async fn thaw(&self) -> Result<(), BackendError> {
        Err(BackendError::CannotPause)
    }
    /// A primary with its replica (a scenario with a failover fault), or `None`.
    fn as_pair(&self) -> Option<&FailoverPair> {
        None
    }
    /// A Redis Cluster (a scenario with `topology = "cluster"`), or `None`.
    fn as_cluster(&self) -> Option<&Cluster> {
        None
    }
    /// The port of its cluster bus, when it was started as a cluster node.
    fn cluster_bus_port(&self) -> Option<u16> {
        None
    }
}

impl BackendOptions {
    /// `auto` for many runs (a matrix, a suite, an exploration): a local server process per
    /// run when the server binary is here — one fresh server per run either way, the same
    /// binary the image is built from, and cheaper to start than a container.
    pub fn preferring_processes(mut self) -> Self {
        if self.choice == BackendChoice::Auto
            && self.url.is_none()
            && self.image.is_none()
            && resolve_server(self.server.as_deref()).is_ok()
        {
            self.choice = BackendChoice::Process;
        }
        self
    }
}

/// Pick the backend the options ask for, checking its prerequisites.
pub fn select_backend(opts: &BackendOptions) -> BoxFuture<'_, Result<Arc<dyn Backend>, SetupError>> {
    Box::pin(select_backend_unboxed(opts))
}

async fn select_backend_unboxed(opts: &BackendOptions) -> Result<Arc<dyn Backend>, SetupError> {
    if opts.image.is_some() && opts.server.is_some() {
        return Err(SetupError::Usage(
            "--image and --server both say which server runs: pass one (--server builds the harness's image from that binary)".into(),
        ));
    }
    match opts.choice {
        BackendChoice::Container => Ok(Arc::new(ContainerBackend::connect(opts).await?)),
        BackendChoice::Process => Ok(Arc::new(ProcessBackend::from_server(server_for(opts)?))),
        BackendChoice::Url => {
            let url = opts
                .url
                .clone()
                .ok_or_else(|| SetupError::Usage("--backend url needs --url redis://HOST:PORT".into()))?;
            Ok(Arc::new(UrlBackend::new(url)))
        }
        BackendChoice::Auto => select_auto(opts).await,
    }
}

/// A container when Docker answers, else a process; a server named with `--server` that
/// cannot be had is its own error (with its own help), not "no backend".
async fn select_auto(opts: &BackendOptions) -> Result<Arc<dyn Backend>, SetupError> {
    if let Some(url) = &opts.url {
        return Ok(Arc::new(UrlBackend::new(url.clone())));
    }
    let server = match server_for(opts) {
        Ok(server) => Some(server),
        Err(e) if opts.server.is_some() => return Err(e),
        // An image of the user's own needs no binary; anything else does.
        Err(_) if opts.image.is_some() => None,
        Err(e) => {
            let docker = match docker_ping().await {
                Ok(()) => "answers, but there is no server binary to build the image from".to_owned(),
                Err(d) => d.to_string(),
            };
            return Err(SetupError::NoBackend {
                docker: first_line(&docker).to_owned(),
                binary: first_line(&e.to_string()).to_owned(),
            });
        }
    };
    let docker = match ContainerBackend::connect_with(opts.image.as_deref(), server.as_ref()).await {
        Ok(backend) => return Ok(Arc::new(backend)),
        Err(e) => e.to_string(),
    };
    match server {
        Some(server) => {
            eprintln!(
                "note: no usable Docker engine ({}); using --backend process",
                first_line(&docker)
            );
            Ok(Arc::new(ProcessBackend::from_server(server)))
        }
        None => Err(SetupError::NoBackend {
            docker: first_line(&docker).to_owned(),
            binary: "none needed for --image, and Docker is needed to run it".into(),
        }),
    }
}

/// The server binary `--server` names (default: `redis-server` in PATH, else an installed
/// redis-7.0, which it says), found and checked.
pub fn server_for(opts: &BackendOptions) -> Result<LocalServer, SetupError> {
    let server = resolve_server(opts.server.as_deref())?;
    if opts.server.is_none()
        && let Some(name) = &server.spec
    {
        eprintln!(
            "note: no redis-server in PATH; using the installed {name} ({}, {})",
            server.describe(),
            server.binary.display()
        );
    }
    Ok(server)
}

/// ` --server SPEC` for a reproduce command, or nothing for the default server.
pub(crate) fn server_flag(spec: Option<&str>) -> String {
    spec.map(|s| format!(" --server {}", crate::shell::quote(s)))
        .unwrap_or_default()
}

/// Wait until the server at `url` answers PING (a fresh server takes a moment).
pub async fn wait_ready(url: &str, timeout: Duration) -> Result<(), BackendError> {
    let deadline = tokio::time::Instant::now() + timeout;
    let mut last = None;
    while tokio::time::Instant::now() < deadline {
        match ping(url).await {
            Ok(()) => return Ok(()),
            Err(e) => last = Some(e),
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    Err(BackendError::NoPong {
        url: url.to_owned(),
        timeout_ms: timeout.as_millis(),
        last,
    })
}

async fn ping(url: &str) -> redis::RedisResult<()> {
    let client = redis::Client::open(url)?;
    let mut conn = client.get_multiplexed_async_connection().await?;
    redis::cmd("PING").query_async::<String>(&mut conn).await.map(drop)
}

/// A port on 127.0.0.1 that was free a moment ago (the caller retries if it is taken).
pub(crate) fn free_port() -> std::io::Result<u16> {
    let listener = std::net::TcpListener::bind("127.0.0.1:0")?;
    Ok(listener.local_addr()?.port())
}
