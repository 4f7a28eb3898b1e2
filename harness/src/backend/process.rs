//! The server as a child process on a free loopback port, for machines without Docker:
//! whichever binary `--server` names (`redis-server`, `valkey-server`), with its libraries'
//! directory in `LD_LIBRARY_PATH` when it brought one.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use async_trait::async_trait;
use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use tokio::process::{Child, Command};
use tokio::sync::Mutex;

use super::cluster::node_args;
use super::{Backend, BackendError, ServerHandle, StartOptions, free_port, server_flag, wait_ready};
use crate::error::SetupError;
use crate::history::ServerRole;
use crate::servers::{LocalServer, Product, local_server};

/// Directory of pid files naming the servers a harness process started; `clean` reads it.
pub fn pid_dir() -> PathBuf {
    std::env::temp_dir().join("limiter-harness-processes")
}

/// Starts server processes in temporary directories.
#[derive(Debug)]
pub struct ProcessBackend {
    server: LocalServer,
}

impl ProcessBackend {
    /// The binary at `binary` (a path, or a name looked up in PATH), checked.
    pub fn new(binary: &Path) -> Result<Self, SetupError> {
        Ok(Self::from_server(local_server(binary, None, None)?))
    }

    pub fn from_server(server: LocalServer) -> Self {
        Self { server }
    }

    /// The server binary it starts.
    pub fn server(&self) -> &LocalServer {
        &self.server
    }
}

/// Spawn `server` on `port` with its files in `dir` (its log appended to `dir/redis.log`);
/// a cluster node's bus on `bus_port`.
fn spawn_server(
    server: &LocalServer,
    port: u16,
    bus_port: Option<u16>,
    dir: &Path,
    options: StartOptions,
) -> Result<Child, BackendError> {
    let log = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(dir.join("redis.log"))?;
    Command::new(&server.binary)
        .envs(server.env())
        .args([
            "--port",
            &port.to_string(),
            "--bind",
            "127.0.0.1",
            "--protected-mode",
            "yes",
        ])
        .args(options.persistence_args())
        .args(node_args(bus_port))
        .arg("--dir")
        .arg(dir)
        .args(["--daemonize", "no"])
        .stdin(Stdio::null())
        .stdout(log.try_clone()?)
        .stderr(log)
        // A group of its own: when the harness runs detached (`nohup`, a CI step's background
        // job), its own group can be orphaned, and the kernel then sends SIGCONT to every
        // stopped member when any process of the group exits — thawing a server the nemesis
        // paused with SIGSTOP (every `server-pause` cell of a matrix answered during its pause).
        .process_group(0)
        .kill_on_drop(true)
        .spawn()
        .map_err(|source| BackendError::Spawn {
            binary: server.binary.clone(),
            source,
        })
}

/// The `process_id` the server at `url` reports.
async fn server_pid(url: &str) -> Result<u32, BackendError> {
    let client = redis::Client::open(url)?;
    let mut conn = client.get_multiplexed_async_connection().await?;
    let info: String = redis::cmd("INFO").arg("server").query_async(&mut conn).await?;
    info.lines()
        .find_map(|l| l.strip_prefix("process_id:"))
        .and_then(|p| p.trim().parse().ok())
        .ok_or(BackendError::NoProcessId)
}

#[async_trait]
impl Backend for ProcessBackend {
    fn name(&self) -> &'static str {
        "process"
    }

    fn owns_servers(&self) -> bool {
        true
    }

    fn reproduce_flags(&self) -> String {
        format!("--backend process{}", server_flag(self.server.spec.as_deref()))
    }

    async fn start(
        &self,
        _role: ServerRole,
        run_id: &str,
        options: StartOptions,
    ) -> Result<Box<dyn ServerHandle>, SetupError> {
        let fail = |reason: String| SetupError::ServerStart {
            backend: "process".into(),
            reason,
        };
        if options.cluster_node && self.server.product == Product::Redis && self.server.series() < (7, 0) {
            return Err(fail(format!(
                "a cluster node needs Redis 7.0 or later (its bus on a port of its own, `cluster-port`; `CLUSTER ADDSLOTSRANGE`): {} is {}",
                self.server.binary.display(),
                self.server.version
            )));
        }
        let dir = tempfile::Builder::new()
            .prefix(&format!("limiter-harness-{run_id}-"))
            .tempdir()
            .map_err(|e| fail(e.to_string()))?;
        let mut last_error = String::new();
        for _attempt in 0..5 {
            let port = free_port().map_err(|e| fail(e.to_string()))?;
            let bus_port = match options.cluster_node {
                true => Some(free_port().map_err(|e| fail(e.to_string()))?),
                false => None,
            };
            let mut child =
                spawn_server(&self.server, port, bus_port, dir.path(), options).map_err(|e| fail(e.to_string()))?;
            let url = format!("redis://127.0.0.1:{port}");
            let pid = child.id().unwrap_or_default();
            // Recorded at once, so that `clean` finds it even if the harness dies while it starts.
            let pid_file = pid_dir().join(pid.to_string());
            let _ = std::fs::create_dir_all(pid_dir());
            let _ = std::fs::write(&pid_file, format!("{}\n{run_id}\n", self.server.binary.display()));
            // Another run may have taken the port between `free_port` and the bind: then our
            // server exits and the PONG comes from theirs. Only our own process will do.
            let ready = match wait_ready(&url, Duration::from_secs(5)).await {
                Ok(()) => match server_pid(&url).await {
                    Ok(answered) if answered == pid && matches!(child.try_wait(), Ok(None)) => Ok(()),
                    Ok(answered) => Err(BackendError::PortTaken { port, answered, pid }),
                    Err(e) => Err(e),
                },
                Err(e) => Err(e),
            };
            match ready {
                Ok(()) => {
                    return Ok(Box::new(ProcessHandle {
                        child: Mutex::new(Running { child, pid, pid_file }),
                        url,
                        port,
                        bus_port,
                        server: self.server.clone(),
                        options,
                        run_id: run_id.to_owned(),
                        dir,
                    }));
                }
                Err(e) => {
                    let _ = child.kill().await;
                    let _ = std::fs::remove_file(&pid_file);
                    let log = std::fs::read_to_string(dir.path().join("redis.log")).unwrap_or_default();
                    last_error = format!("{e}; server log: {}", log.lines().last().unwrap_or("(empty)"));
                }
            }
        }
        Err(fail(last_error))
    }
}

struct ProcessHandle {
    child: Mutex<Running>,
    url: String,
    port: u16,
    bus_port: Option<u16>,
    server: LocalServer,
    options: StartOptions,
    run_id: String,
    dir: tempfile::TempDir,
}

/// The server process now running (a restart replaces it).
struct Running {
    child: Child,
    pid: u32,
    pid_file: PathBuf,
}

#[async_trait]
impl ServerHandle for ProcessHandle {
    fn url(&self) -> &str {
        &self.url
    }

    fn describe(&self) -> String {
        format!("process on {}", self.url)
    }

    async fn stop(self: Box<Self>) -> Result<(), BackendError> {
        let mut running = self.child.into_inner();
        let result = running.child.kill().await.map_err(BackendError::Io);
        let _ = std::fs::remove_file(&running.pid_file);
        result
    }

    async fn kill(&self) -> Result<(), BackendError> {
        let mut running = self.child.lock().await;
        running.child.kill().await.map_err(BackendError::Kill)?;
        let _ = std::fs::remove_file(&running.pid_file);
        Ok(())
    }

    /// The port was the killed process's: it is free again (Redis binds with SO_REUSEADDR),
    /// unless someone else took it meanwhile, which the pid check catches.
    async fn start_again(&self) -> Result<(), BackendError> {
        let mut running = self.child.lock().await;
        let mut child = spawn_server(&self.server, self.port, self.bus_port, self.dir.path(), self.options)?;
        let pid = child.id().unwrap_or_default();
        let pid_file = pid_dir().join(pid.to_string());
        let _ = std::fs::write(
            &pid_file,
            format!("{}\n{}\n", self.server.binary.display(), self.run_id),
        );
        let answered = match wait_ready(&self.url, Duration::from_secs(10)).await {
            Ok(()) => server_pid(&self.url).await,
            Err(e) => Err(e),
        };
        match answered {
            Ok(answered) if answered == pid && matches!(child.try_wait(), Ok(None)) => {
                *running = Running { child, pid, pid_file };
                Ok(())
            }
            other => {
                let _ = child.kill().await;
                let _ = std::fs::remove_file(&pid_file);
                Err(match other {
                    Ok(answered) => BackendError::PortTakenOnRestart {
                        port: self.port,
                        answered,
                    },
                    Err(e) => BackendError::NotBack(Box::new(e)),
                })
            }
        }
    }

    async fn freeze(&self) -> Result<(), BackendError> {
        self.signal(Signal::SIGSTOP).await
    }

    fn cluster_bus_port(&self) -> Option<u16> {
        self.bus_port
    }

    async fn thaw(&self) -> Result<(), BackendError> {
        self.signal(Signal::SIGCONT).await
    }
}

impl ProcessHandle {
    async fn signal(&self, signal: Signal) -> Result<(), BackendError> {
        let pid = Pid::from_raw(self.child.lock().await.pid as i32);
        kill(pid, signal).map_err(|source| BackendError::Signal { signal, pid, source })
    }
}
