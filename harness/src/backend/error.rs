//! Why a server could not be started, reached, restarted, paused or stopped, below the
//! user-facing tier: a start that fails becomes [`SetupError::ServerStart`], a fault that
//! fails becomes a problem in the history.

use std::net::AddrParseError;
use std::path::PathBuf;

use nix::sys::signal::Signal;
use nix::unistd::Pid;
use testcontainers::TestcontainersError;

use crate::error::SetupError;
use crate::text::joined;

/// A backend's server could not do what the run asked of it.
#[derive(Debug, thiserror::Error)]
pub enum BackendError {
    /// A Redis client error, as the client says it.
    #[error(transparent)]
    Redis(#[from] redis::RedisError),
    /// A file or socket error, as the system says it.
    #[error(transparent)]
    Io(#[from] std::io::Error),
    /// A Docker error, as testcontainers says it.
    #[error(transparent)]
    Docker(#[from] TestcontainersError),
    /// A user-facing error met on the way (connecting, configuring).
    #[error(transparent)]
    Setup(#[from] Box<SetupError>),
    /// A command the harness sent failed; `command` names it, e.g. "INFO replication".
    #[error("{command}: {source}")]
    Command { command: String, source: redis::RedisError },
    /// A Docker operation on the server's container failed, e.g. "docker pause".
    #[error("{operation}: {source}")]
    Container {
        operation: &'static str,
        source: TestcontainersError,
    },
    /// The server's backend has no way to kill and start it again.
    #[error("this backend cannot restart its server")]
    CannotRestart,
    /// The server's backend has no way to stop and resume its process.
    #[error("this backend cannot pause its server")]
    CannotPause,
    /// The server did not answer PING in time; `last` is the last failure (`None`: no answer).
    #[error("no PONG from {url} within {timeout_ms} ms: {}", last_words(.last))]
    NoPong {
        url: String,
        timeout_ms: u128,
        last: Option<redis::RedisError>,
    },
    /// The server binary could not be started.
    #[error("spawning {binary}: {source}")]
    Spawn { binary: PathBuf, source: std::io::Error },
    /// `INFO server` has no `process_id` field.
    #[error("INFO server has no process_id")]
    NoProcessId,
    /// Another process answers on the port the server was started on.
    #[error("port {port} is answered by process {answered}, not by the server started ({pid})")]
    PortTaken { port: u16, answered: u32, pid: u32 },
    /// Another process took the port while the server was down for a restart.
    #[error("port {port} was taken by process {answered} during the restart")]
    PortTakenOnRestart { port: u16, answered: u32 },
    /// The restarted server did not answer.
    #[error("the restarted server did not come back: {0}")]
    NotBack(#[source] Box<BackendError>),
    /// The server process could not be killed.
    #[error("killing the server: {0}")]
    Kill(#[source] std::io::Error),
    /// A signal could not be sent to the server process.
    #[error("{signal} to {pid}: {source}")]
    Signal {
        signal: Signal,
        pid: Pid,
        source: nix::Error,
    },
    /// A failover relay could not bind its loopback port.
    #[error("relay: binding a loopback port: {0}")]
    RelayBind(#[source] std::io::Error),
    /// A server could not be connected to; `url` names it.
    #[error("{url}: {source}")]
    Connect { url: String, source: redis::RedisError },
    /// A URL whose host is no IP address (a failover relays to an address).
    #[error("{url}: not an IP address and port: {source}")]
    NotIp { url: String, source: AddrParseError },
    /// A URL of a server that is not on TCP (a unix socket).
    #[error("{url}: a failover needs a TCP server, not {addr}")]
    NotTcp { url: String, addr: redis::ConnectionAddr },
    /// A replica's link to its primary was not up in time.
    #[error("the replica's link to its primary was not up within {timeout_s} s")]
    LinkDown { timeout_s: u64 },
    /// A file the image is built from could not be resolved.
    #[error("{path}: {source}")]
    Canonical { path: PathBuf, source: std::io::Error },
    /// Several things failed (each server of a pair, each setting to restore).
    #[error("{}", joined(.0, "; "))]
    Several(Vec<BackendError>),
}

impl BackendError {
    /// Names a failed command: `.map_err(BackendError::command("INFO replication"))`.
    pub fn command(command: impl Into<String>) -> impl FnOnce(redis::RedisError) -> Self {
        let command = command.into();
        move |source| Self::Command { command, source }
    }

    /// Names a failed Docker operation: `.map_err(BackendError::container("docker stop"))`.
    pub fn container(operation: &'static str) -> impl FnOnce(TestcontainersError) -> Self {
        move |source| Self::Container { operation, source }
    }
}

impl From<SetupError> for BackendError {
    fn from(error: SetupError) -> Self {
        Self::Setup(Box::new(error))
    }
}

/// The last failure of a wait for PONG, in words.
fn last_words(last: &Option<redis::RedisError>) -> String {
    last.as_ref()
        .map_or_else(|| "no answer".to_owned(), ToString::to_string)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_name_what_failed_as_before() {
        let refused = || redis::RedisError::from((redis::ErrorKind::Client, "refused"));
        let silent = BackendError::NoPong {
            url: "redis://127.0.0.1:1".into(),
            timeout_ms: 20,
            last: None,
        };
        assert_eq!(
            silent.to_string(),
            "no PONG from redis://127.0.0.1:1 within 20 ms: no answer"
        );
        let both = BackendError::Several(vec![
            BackendError::command("CONFIG SET maxmemory 0")(refused()),
            BackendError::CannotPause,
        ]);
        assert_eq!(
            both.to_string(),
            format!(
                "CONFIG SET maxmemory 0: {}; this backend cannot pause its server",
                refused()
            )
        );
    }
}
