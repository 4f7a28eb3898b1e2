//! The server as a child process on a free loopback port, for machines without Docker:
//! whichever binary `--server` names (`redis-server`, `valkey-server`), with its libraries'
//! directory in `LD_LIBRARY_PATH` when it brought one.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use async_trait::async_trait;
use tokio::process::{Child, Command};

use super::{Backend, ServerHandle, free_port, server_flag, wait_ready};
use crate::error::SetupError;
use crate::history::ServerRole;
use crate::servers::{LocalServer, local_server};

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

    async fn try_start(&self, port: u16, dir: &Path) -> Result<Child, String> {
        let log = std::fs::File::create(dir.join("redis.log")).map_err(|e| e.to_string())?;
        Command::new(&self.server.binary)
            .envs(self.server.env())
            .args([
                "--port",
                &port.to_string(),
                "--bind",
                "127.0.0.1",
                "--protected-mode",
                "yes",
                "--save",
                "",
                "--appendonly",
                "no",
            ])
            .arg("--dir")
            .arg(dir)
            .args(["--daemonize", "no"])
            .stdin(Stdio::null())
            .stdout(log.try_clone().map_err(|e| e.to_string())?)
            .stderr(log)
            .kill_on_drop(true)
            .spawn()
            .map_err(|e| format!("spawning {}: {e}", self.server.binary.display()))
    }
}

/// The `process_id` the server at `url` reports.
async fn server_pid(url: &str) -> Result<u32, String> {
    let client = redis::Client::open(url).map_err(|e| e.to_string())?;
    let mut conn = client
        .get_multiplexed_async_connection()
        .await
        .map_err(|e| e.to_string())?;
    let info: String = redis::cmd("INFO")
        .arg("server")
        .query_async(&mut conn)
        .await
        .map_err(|e| e.to_string())?;
    info.lines()
        .find_map(|l| l.strip_prefix("process_id:"))
        .and_then(|p| p.trim().parse().ok())
        .ok_or_else(|| "INFO server has no process_id".to_owned())
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

    async fn start(&self, _role: ServerRole, run_id: &str) -> Result<Box<dyn ServerHandle>, SetupError> {
        let fail = |reason: String| SetupError::ServerStart {
            backend: "process".into(),
            reason,
        };
        let dir = tempfile::Builder::new()
            .prefix(&format!("limiter-harness-{run_id}-"))
            .tempdir()
            .map_err(|e| fail(e.to_string()))?;
        let mut last_error = String::new();
        for _attempt in 0..5 {
            let port = free_port().map_err(&fail)?;
            let mut child = self.try_start(port, dir.path()).await.map_err(&fail)?;
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
                    Ok(answered) => Err(format!(
                        "port {port} is answered by process {answered}, not by the server started ({pid})"
                    )),
                    Err(e) => Err(e),
                },
                Err(e) => Err(e),
            };
            match ready {
                Ok(()) => {
                    return Ok(Box::new(ProcessHandle {
                        child,
                        url,
                        pid,
                        pid_file,
                        _dir: dir,
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
    child: Child,
    url: String,
    pid: u32,
    pid_file: PathBuf,
    _dir: tempfile::TempDir,
}

#[async_trait]
impl ServerHandle for ProcessHandle {
    fn url(&self) -> &str {
        &self.url
    }

    fn describe(&self) -> String {
        format!("process {} ({})", self.pid, self.url)
    }

    async fn stop(mut self: Box<Self>) -> Result<(), String> {
        let result = self.child.kill().await.map_err(|e| e.to_string());
        let _ = std::fs::remove_file(&self.pid_file);
        result
    }
}
