//! The exec adapter: the team's own limiter, in any language, as a process that speaks
//! line-delimited JSON on stdin/stdout (protocol 1, specified in docs/exec-protocol.md).
//!
//! The harness starts the process once per run with `REDIS_URL` pointing at its fault
//! proxy, so every command the limiter sends crosses the proxy, where the nemesis strikes
//! and the wire log is kept. Protocol violations (bad JSON, unknown id, no reply in time,
//! the process exiting) become problems in the history and indeterminate or error
//! completions, never a crash and never an admission.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use redis::aio::MultiplexedConnection;
use redis::{ErrorKind, RedisError, RedisResult};
use serde::{Deserialize, Serialize};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader, Lines};
use tokio::process::{Child, ChildStdin, ChildStdout, Command};
use tokio::sync::oneshot;

use super::{Algorithm, Decision, Limiter, LimiterEnv, Plant, Wire};
use crate::clock::RunClock;
use crate::error::SetupError;
use crate::history::{Event, Recorder};
use crate::keys::{KeyLayout, KeyTemplate, LayoutSource};
use crate::scenario::Limit;

/// The protocol version this harness speaks.
pub const PROTOCOL_VERSION: u32 = 1;
/// How long the adapter has to print its hello line.
const HELLO_TIMEOUT: Duration = Duration::from_secs(30);
/// How long one request may wait for its reply before it is called indeterminate.
const REPLY_TIMEOUT: Duration = Duration::from_secs(5);
/// Ids of `plant` messages: far above any request id.
const PLANT_IDS_FROM: u64 = 1 << 62;
/// How much of the adapter's stderr a start-up error quotes.
const STDERR_TAIL_LINES: usize = 5;

/// `exec:CMD`: the command line as the user gave it; started per run by [`Limiter::start`].
#[derive(Debug)]
pub struct ExecSpec {
    name: String,
    command: String,
}

impl ExecSpec {
    pub fn parse(spec: &str) -> Result<Self, SetupError> {
        let command = spec.strip_prefix("exec:").unwrap_or(spec).trim();
        if command.is_empty() {
            return Err(SetupError::Usage(
                "`exec:` needs a command, e.g. --limiter \"exec:python3 examples/fixed_window.py\"".into(),
            ));
        }
        Ok(Self {
            name: format!("exec:{command}"),
            command: command.to_owned(),
        })
    }
}

#[async_trait]
impl Limiter for ExecSpec {
    fn name(&self) -> &str {
        &self.name
    }

    fn commands(&self) -> &str {
        "whatever the adapter process sends (recorded per connection by the fault proxy)"
    }

    fn round_trips_max(&self) -> u32 {
        // Unknown in advance: the proxy counts them. More than one lets gap faults apply.
        u32::MAX
    }

    /// Until its hello says otherwise.
    fn algorithm(&self) -> Algorithm {
        Algorithm::FixedWindow
    }

    fn needs_proxy(&self) -> bool {
        true
    }

    async fn start(&self, env: &LimiterEnv) -> Result<Option<Arc<dyn Limiter>>, SetupError> {
        let session = ExecSession::spawn(self, env).await?;
        Ok(Some(Arc::new(session)))
    }

    async fn acquire(&self, _wire: &mut Wire<'_>, _key: &str, _limit: &Limit) -> RedisResult<Decision> {
        Err(RedisError::from((
            ErrorKind::Client,
            "the exec adapter was not started",
        )))
    }
}

/// The adapter's first line.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Hello {
    protocol: u32,
    #[serde(default)]
    name: Option<String>,
    #[serde(default)]
    algorithm: Option<Algorithm>,
    #[serde(default)]
    round_trips_max: Option<u32>,
    /// Templates of the keys it keeps per identity, e.g. `["app:{identity}:*"]`.
    #[serde(default)]
    keys: Option<Vec<String>>,
    /// How long its keys may live, in windows.
    #[serde(default)]
    ttl_max_windows: Option<f64>,
    /// Whether it answers `plant` messages.
    #[serde(default)]
    plant: bool,
}

impl Hello {
    fn validate(&self) -> Result<(), String> {
        if self.protocol != PROTOCOL_VERSION {
            return Err(format!(
                "it speaks protocol {} and this harness speaks {PROTOCOL_VERSION}",
                self.protocol
            ));
        }
        if let Some(keys) = &self.keys {
            if keys.is_empty() {
                return Err("its hello's `keys` is empty: leave it out, or give the templates of its keys".into());
            }
            for key in keys {
                KeyTemplate::parse(key).map_err(|e| format!("its hello's `keys`: {e}"))?;
            }
        }
        if let Some(windows) = self.ttl_max_windows
            && !(windows.is_finite() && windows > 0.0 && windows <= 1e6)
        {
            return Err(format!(
                "its hello's `ttl_max_windows` = {windows} must be a positive number of windows"
            ));
        }
        Ok(())
    }
}

/// One request, harness → adapter.
#[derive(Debug, Serialize)]
struct RequestLine<'a> {
    id: u64,
    identity: u32,
    key: &'a str,
    cost: u32,
}

/// Plant a state before traffic, harness → adapter (only to an adapter whose hello offers it).
#[derive(Debug, Serialize)]
struct PlantLine<'a> {
    id: u64,
    plant: &'a str,
    identity: u32,
    key: &'a str,
}

/// One reply, adapter → harness.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ReplyLine {
    id: u64,
    #[serde(default)]
    allowed: Option<bool>,
    #[serde(default)]
    count: Option<i64>,
    #[serde(default)]
    error: Option<String>,
    /// The adapter does not know whether its command took effect (a lost reply).
    #[serde(default)]
    indeterminate: bool,
    /// The answer to a `plant` message: what it wrote.
    #[serde(default)]
    planted: Option<String>,
}

type Pending = Arc<Mutex<HashMap<u64, oneshot::Sender<RedisResult<ReplyLine>>>>>;

/// A running adapter process.
pub struct ExecSession {
    name: String,
    commands: String,
    algorithm: Algorithm,
    round_trips_max: u32,
    keys: Option<Vec<String>>,
    ttl_max_windows: Option<f64>,
    plants: bool,
    next_plant_id: AtomicU64,
    stdin: tokio::sync::Mutex<Option<ChildStdin>>,
    pending: Pending,
    /// Set when the process has gone: later requests fail at once.
    gone: Arc<Mutex<Option<String>>>,
    child: Mutex<Option<Child>>,
    pgid: Option<i32>,
    stopping: Arc<AtomicBool>,
    recorder: Recorder,
    clock: RunClock,
}

impl ExecSession {
    async fn spawn(spec: &ExecSpec, env: &LimiterEnv) -> Result<Self, SetupError> {
        let fail = |reason: String| SetupError::AdapterStart {
            limiter: spec.name.clone(),
            reason,
        };
        std::fs::create_dir_all(&env.report_dir).map_err(|e| SetupError::io("cannot create", &env.report_dir, e))?;
        let stderr_path: PathBuf = env.report_dir.join("adapter.stderr.log");
        let mut child = start_process(spec, env, &stderr_path)?;
        let pgid = child.id().map(|p| p as i32);
        let mut lines = BufReader::new(child.stdout.take().expect("piped stdout")).lines();
        let hello = match read_hello(&mut child, &mut lines, &stderr_path).await {
            Ok(hello) => hello,
            Err(reason) => {
                kill_group(pgid);
                return Err(fail(reason));
            }
        };
        let stdin = child.stdin.take();
        let pending: Pending = Arc::default();
        let gone: Arc<Mutex<Option<String>>> = Arc::default();
        let stopping = Arc::new(AtomicBool::new(false));
        tokio::spawn(read_replies(
            lines,
            Arc::clone(&pending),
            Arc::clone(&gone),
            Arc::clone(&stopping),
            env.recorder.clone(),
            env.clock,
        ));
        let name = hello
            .name
            .map_or_else(|| spec.name.clone(), |n| format!("{} ({n})", spec.name));
        Ok(Self {
            name,
            commands: spec.commands().to_owned(),
            algorithm: hello.algorithm.unwrap_or(spec.algorithm()),
            round_trips_max: hello.round_trips_max.unwrap_or(u32::MAX),
            keys: hello.keys,
            ttl_max_windows: hello.ttl_max_windows,
            plants: hello.plant,
            next_plant_id: AtomicU64::new(PLANT_IDS_FROM),
            stdin: tokio::sync::Mutex::new(stdin),
            pending,
            gone,
            child: Mutex::new(Some(child)),
            pgid,
            stopping,
            recorder: env.recorder.clone(),
            clock: env.clock,
        })
    }

    /// Send one line carrying `id` and wait for the adapter's reply to it.
    async fn exchange(&self, id: u64, mut line: Vec<u8>) -> RedisResult<ReplyLine> {
        let (tx, rx) = oneshot::channel();
        {
            // Checked under the pending lock, which the reader holds while it drains: a
            // request is either drained or refused, never left waiting.
            let mut pending = self.pending.lock().expect("pending lock");
            if let Some(why) = self.gone.lock().expect("gone lock").clone() {
                return Err(RedisError::from((ErrorKind::Client, "the adapter is not running", why)));
            }
            pending.insert(id, tx);
        }
        line.push(b'\n');
        // An adapter that stops reading fills the pipe: the write gives up with the reply.
        let written = tokio::time::timeout(REPLY_TIMEOUT, async {
            let mut stdin = self.stdin.lock().await;
            match stdin.as_mut() {
                Some(s) => s.write_all(&line).await.and(s.flush().await),
                None => Err(std::io::Error::other("stdin closed")),
            }
        })
        .await
        .unwrap_or_else(|_| Err(std::io::Error::other("the adapter has not read its stdin for 5 s")));
        if let Err(e) = written {
            self.pending.lock().expect("pending lock").remove(&id);
            return Err(RedisError::from((
                ErrorKind::Client,
                "could not write to the adapter",
                e.to_string(),
            )));
        }
        match tokio::time::timeout(REPLY_TIMEOUT, rx).await {
            Ok(Ok(result)) => result,
            Ok(Err(_)) => Err(indeterminate("the adapter went away before replying".into())),
            Err(_) => {
                self.pending.lock().expect("pending lock").remove(&id);
                let detail = format!(
                    "protocol violation: no reply within {} ms to request #{id}",
                    REPLY_TIMEOUT.as_millis()
                );
                self.recorder.record(Event::Problem {
                    t_us: self.clock.now_us(),
                    source: "exec-adapter".into(),
                    detail: detail.clone(),
                    fatal: false,
                });
                Err(indeterminate(detail))
            }
        }
    }
}

/// `sh -c COMMAND` in a process group of its own, with the run's environment.
fn start_process(spec: &ExecSpec, env: &LimiterEnv, stderr_path: &Path) -> Result<Child, SetupError> {
    let stderr = std::fs::File::create(stderr_path).map_err(|e| SetupError::io("cannot create", stderr_path, e))?;
    Command::new("sh")
        .arg("-c")
        .arg(&spec.command)
        .env("REDIS_URL", &env.redis_url)
        .env("LIMITER_HARNESS_PROTOCOL", PROTOCOL_VERSION.to_string())
        .env("LIMIT_REQUESTS_MAX", env.limit.requests_max.to_string())
        .env("LIMIT_WINDOW_MS", env.limit.window_ms.to_string())
        .env("LIMIT_KEY_PREFIX", &env.limit.key_prefix)
        .env("PYTHONUNBUFFERED", "1")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::from(stderr))
        .process_group(0)
        .kill_on_drop(true)
        .spawn()
        .map_err(|e| SetupError::AdapterStart {
            limiter: spec.name.clone(),
            reason: format!("could not start `sh -c {}`: {e}", spec.command),
        })
}

/// The adapter's first line, validated; the error says why not, quoting its stderr.
async fn read_hello(
    child: &mut Child,
    lines: &mut Lines<BufReader<ChildStdout>>,
    stderr_path: &Path,
) -> Result<Hello, String> {
    let hello = match tokio::time::timeout(HELLO_TIMEOUT, lines.next_line()).await {
        Err(_) => Err(format!(
            "no hello line within {} s (the adapter must first print {{\"protocol\": 1}})",
            HELLO_TIMEOUT.as_secs()
        )),
        Ok(Ok(None)) | Ok(Err(_)) => {
            // Its stdout is closed but it may still run (stdout redirected): let it see
            // EOF on stdin, give it a moment; the group is killed by the caller either way.
            drop(child.stdin.take());
            let status = match tokio::time::timeout(Duration::from_secs(2), child.wait()).await {
                Ok(Ok(status)) => status.to_string(),
                _ => "still running with its stdout closed".to_owned(),
            };
            Err(format!("the adapter exited before its hello line ({status})"))
        }
        Ok(Ok(Some(line))) => serde_json::from_str::<Hello>(&line).map_err(|e| {
            format!(
                "its first line is not a hello ({{\"protocol\": 1, ...}}): {e}: `{}`",
                cut(&line)
            )
        }),
    };
    hello
        .and_then(|h| h.validate().map(|()| h))
        .map_err(|reason| format!("{reason}; {}", stderr_hint(stderr_path)))
}

/// "its stderr is in PATH", with its last lines when it wrote any (read from its last 8 KB).
fn stderr_hint(path: &Path) -> String {
    let text = stderr_tail(path).unwrap_or_default();
    let lines: Vec<&str> = text.lines().filter(|l| !l.trim().is_empty()).collect();
    let tail = &lines[lines.len().saturating_sub(STDERR_TAIL_LINES)..];
    if tail.is_empty() {
        format!("its stderr is in {} (empty)", path.display())
    } else {
        format!(
            "its stderr is in {}, ending with:\n    {}",
            path.display(),
            tail.iter().map(|l| cut(l)).collect::<Vec<_>>().join("\n    ")
        )
    }
}

fn stderr_tail(path: &Path) -> std::io::Result<String> {
    use std::io::{Read, Seek, SeekFrom};
    let mut file = std::fs::File::open(path)?;
    let len = file.metadata()?.len();
    file.seek(SeekFrom::Start(len.saturating_sub(8192)))?;
    let mut bytes = Vec::new();
    file.read_to_end(&mut bytes)?;
    Ok(String::from_utf8_lossy(&bytes).into_owned())
}

/// Route each reply line to the request waiting for it until the adapter's stdout closes;
/// then fail every request still waiting.
async fn read_replies(
    mut lines: Lines<BufReader<ChildStdout>>,
    pending: Pending,
    gone: Arc<Mutex<Option<String>>>,
    stopping: Arc<AtomicBool>,
    recorder: Recorder,
    clock: RunClock,
) {
    let problem = |detail: String, fatal: bool| {
        recorder.record(Event::Problem {
            t_us: clock.now_us(),
            source: "exec-adapter".into(),
            detail,
            fatal,
        });
    };
    let end = loop {
        let line = match lines.next_line().await {
            Ok(Some(line)) => line,
            Ok(None) => break "the adapter closed its stdout (exited?)".to_owned(),
            Err(e) => break format!("reading the adapter's stdout failed: {e}"),
        };
        if line.trim().is_empty() {
            continue;
        }
        let reply = match serde_json::from_str::<ReplyLine>(&line) {
            Ok(r) => r,
            Err(e) => {
                problem(
                    format!("protocol violation: not a reply line ({e}): `{}`", cut(&line)),
                    false,
                );
                continue;
            }
        };
        let Some(waiter) = pending.lock().expect("pending lock").remove(&reply.id) else {
            problem(
                format!(
                    "protocol violation: a reply for unknown or finished request id {}",
                    reply.id
                ),
                false,
            );
            continue;
        };
        let _ = waiter.send(Ok(reply));
    };
    // Going away before the harness asked it to is the adapter's failure: what it would have
    // decided afterwards is unknown, so the run cannot pass.
    let during_run = !stopping.load(Ordering::Acquire);
    problem(
        if during_run {
            format!("{end} during the run")
        } else {
            end.clone()
        },
        during_run,
    );
    let mut pending = pending.lock().expect("pending lock");
    *gone.lock().expect("gone lock") = Some(end.clone());
    for (_, waiter) in pending.drain() {
        let _ = waiter.send(Err(indeterminate(format!("{end} before replying"))));
    }
}

fn decision(reply: ReplyLine) -> RedisResult<Decision> {
    if let Some(error) = reply.error {
        return Err(if reply.indeterminate {
            indeterminate(format!("the adapter reported: {error}"))
        } else {
            RedisError::from((ErrorKind::Client, "the adapter reported an error", error))
        });
    }
    if reply.indeterminate {
        return Err(indeterminate("the adapter says the outcome is unknown".into()));
    }
    match reply.allowed {
        Some(allowed) => Ok(Decision {
            allowed,
            count: reply.count,
        }),
        None => Err(RedisError::from((
            ErrorKind::Client,
            "protocol violation",
            "a reply with neither `allowed` nor `error`".to_owned(),
        ))),
    }
}

/// An outcome the harness cannot know (classified Indeterminate by the driver).
fn indeterminate(detail: String) -> RedisError {
    RedisError::from(std::io::Error::new(std::io::ErrorKind::TimedOut, detail))
}

fn cut(line: &str) -> String {
    if line.len() <= 200 {
        return line.to_owned();
    }
    let mut end = 200;
    while !line.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…", &line[..end])
}

fn kill_group(pgid: Option<i32>) {
    if let Some(pgid) = pgid {
        let _ = nix::sys::signal::killpg(nix::unistd::Pid::from_raw(pgid), nix::sys::signal::Signal::SIGKILL);
    }
}

impl Drop for ExecSession {
    /// An interrupted run: the adapter (unless already reaped) and its group go with it.
    fn drop(&mut self) {
        if self.child.get_mut().is_ok_and(|c| c.is_some()) {
            kill_group(self.pgid);
        }
    }
}

#[async_trait]
impl Limiter for ExecSession {
    fn name(&self) -> &str {
        &self.name
    }

    fn commands(&self) -> &str {
        &self.commands
    }

    fn round_trips_max(&self) -> u32 {
        self.round_trips_max
    }

    fn algorithm(&self) -> Algorithm {
        self.algorithm
    }

    fn needs_proxy(&self) -> bool {
        true
    }

    fn declared_keys(&self, limit: &Limit) -> Option<KeyLayout> {
        let keys = self.keys.as_ref()?;
        KeyLayout::parse(
            keys,
            limit.identities,
            LayoutSource::Limiter("the adapter's hello".into()),
        )
        .ok()
    }

    fn ttl_max_windows(&self) -> Option<f64> {
        self.ttl_max_windows
    }

    async fn plant_exhausted(
        &self,
        _conn: &mut MultiplexedConnection,
        identity: u32,
        key: &str,
        _limit: &Limit,
    ) -> RedisResult<Plant> {
        if !self.plants {
            return Ok(Plant::Unsupported(
                "the adapter's hello does not offer `plant` (\"plant\": true)".into(),
            ));
        }
        let id = self.next_plant_id.fetch_add(1, Ordering::Relaxed);
        let line = serde_json::to_vec(&PlantLine {
            id,
            plant: "exhausted",
            identity,
            key,
        })
        .expect("a plant line serializes");
        let reply = self.exchange(id, line).await?;
        match (reply.planted, reply.error) {
            (_, Some(error)) => Err(RedisError::from((
                ErrorKind::Client,
                "the adapter could not plant",
                error,
            ))),
            (Some(planted), None) => Ok(Plant::Planted(planted)),
            (None, None) => Err(RedisError::from((
                ErrorKind::Client,
                "protocol violation",
                "a reply to `plant` with neither `planted` nor `error`".to_owned(),
            ))),
        }
    }

    async fn acquire(&self, wire: &mut Wire<'_>, key: &str, _limit: &Limit) -> RedisResult<Decision> {
        let req = wire.request();
        let line = serde_json::to_vec(&RequestLine {
            id: req.id,
            identity: req.identity,
            key,
            cost: 1,
        })
        .expect("a request line serializes");
        decision(self.exchange(req.id, line).await?)
    }

    async fn stop(&self) {
        self.stopping.store(true, Ordering::Release);
        // EOF on stdin asks the adapter to exit; it gets a moment, then the group is killed
        // (with what it started). Once reaped, its group id may be reused: no more signals.
        self.stdin.lock().await.take();
        let child = self.child.lock().expect("child lock").take();
        if let Some(mut child) = child {
            if tokio::time::timeout(Duration::from_secs(2), child.wait())
                .await
                .is_err()
            {
                kill_group(self.pgid);
                let _ = child.wait().await;
            } else {
                kill_group(self.pgid);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hello(json: &str) -> Result<(), String> {
        serde_json::from_str::<Hello>(json)
            .map_err(|e| e.to_string())?
            .validate()
    }

    #[test]
    fn hello_fields_are_checked() {
        assert!(hello(r#"{"protocol": 1}"#).is_ok());
        assert!(hello(r#"{"protocol": 1, "keys": ["app:{identity}:*"], "ttl_max_windows": 2, "plant": true}"#).is_ok());
        assert!(hello(r#"{"protocol": 2}"#).unwrap_err().contains("protocol 2"));
        assert!(
            hello(r#"{"protocol": 1, "keys": ["app:{id}"]}"#)
                .unwrap_err()
                .contains("unknown placeholder")
        );
        assert!(hello(r#"{"protocol": 1, "keys": []}"#).unwrap_err().contains("empty"));
        assert!(
            hello(r#"{"protocol": 1, "ttl_max_windows": 0}"#)
                .unwrap_err()
                .contains("positive")
        );
        assert!(
            hello(r#"{"protocol": 1, "keyz": []}"#)
                .unwrap_err()
                .contains("unknown field")
        );
    }
}
