//! The exec adapter: the team's own limiter, in any language, as a process that speaks
//! line-delimited JSON on stdin/stdout (protocol 1, specified in docs/exec-protocol.md).
//!
//! The harness starts the process once per run with `REDIS_URL` pointing at its fault
//! proxy, so every command the limiter sends crosses the proxy, where the nemesis strikes
//! and the wire log is kept. Protocol violations (bad JSON, unknown id, no reply in time,
//! the process exiting) become problems in the history and indeterminate or error
//! completions, never a crash and never an admission.

use std::collections::HashMap;
use std::path::PathBuf;
use std::process::Stdio;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use redis::{ErrorKind, RedisError, RedisResult};
use serde::{Deserialize, Serialize};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::process::{Child, ChildStdin, Command};
use tokio::sync::oneshot;

use super::{Algorithm, Decision, Limiter, LimiterEnv, Wire};
use crate::error::SetupError;
use crate::history::Event;
use crate::scenario::Limit;

/// The protocol version this harness speaks.
pub const PROTOCOL_VERSION: u32 = 1;
/// How long the adapter has to print its hello line.
const HELLO_TIMEOUT: Duration = Duration::from_secs(30);
/// How long one request may wait for its reply before it is called indeterminate.
const REPLY_TIMEOUT: Duration = Duration::from_secs(5);

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
}

/// One request, harness → adapter.
#[derive(Debug, Serialize)]
struct RequestLine<'a> {
    id: u64,
    identity: u32,
    key: &'a str,
    cost: u32,
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
}

type Pending = Arc<Mutex<HashMap<u64, oneshot::Sender<RedisResult<Decision>>>>>;

/// A running adapter process.
pub struct ExecSession {
    name: String,
    commands: String,
    algorithm: Algorithm,
    round_trips_max: u32,
    stdin: tokio::sync::Mutex<Option<ChildStdin>>,
    pending: Pending,
    /// Set when the process has gone: later requests fail at once.
    gone: Arc<Mutex<Option<String>>>,
    child: Mutex<Option<Child>>,
    pgid: Option<i32>,
    stopping: Arc<AtomicBool>,
    recorder: crate::history::Recorder,
    clock: crate::clock::RunClock,
}

impl ExecSession {
    async fn spawn(spec: &ExecSpec, env: &LimiterEnv) -> Result<Self, SetupError> {
        let fail = |reason: String| SetupError::AdapterStart {
            limiter: spec.name.clone(),
            reason,
        };
        std::fs::create_dir_all(&env.report_dir).map_err(|e| SetupError::io("cannot create", &env.report_dir, e))?;
        let stderr_path: PathBuf = env.report_dir.join("adapter.stderr.log");
        let stderr =
            std::fs::File::create(&stderr_path).map_err(|e| SetupError::io("cannot create", &stderr_path, e))?;
        let mut child = Command::new("sh")
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
            .map_err(|e| fail(format!("could not start `sh -c {}`: {e}", spec.command)))?;
        let pgid = child.id().map(|p| p as i32);
        let mut lines = BufReader::new(child.stdout.take().expect("piped stdout")).lines();
        let stderr_hint = format!("its stderr is in {}", stderr_path.display());

        let hello = match tokio::time::timeout(HELLO_TIMEOUT, lines.next_line()).await {
            Err(_) => Err(format!(
                "no hello line within {} s (the adapter must first print {{\"protocol\": 1}}); {stderr_hint}",
                HELLO_TIMEOUT.as_secs()
            )),
            Ok(Ok(None)) | Ok(Err(_)) => {
                // Its stdout is closed but it may still run (stdout redirected): let it see
                // EOF on stdin, give it a moment; the group is killed below either way.
                drop(child.stdin.take());
                let status = match tokio::time::timeout(Duration::from_secs(2), child.wait()).await {
                    Ok(Ok(status)) => status.to_string(),
                    _ => "still running with its stdout closed".to_owned(),
                };
                Err(format!(
                    "the adapter exited before its hello line ({status}); {stderr_hint}"
                ))
            }
            Ok(Ok(Some(line))) => serde_json::from_str::<Hello>(&line).map_err(|e| {
                format!(
                    "its first line is not a hello ({{\"protocol\": 1, ...}}): {e}: `{}`",
                    cut(&line)
                )
            }),
        };
        let stdin = child.stdin.take();
        let hello = match hello {
            Ok(h) => h,
            Err(reason) => {
                kill_group(pgid);
                return Err(fail(reason));
            }
        };
        if hello.protocol != PROTOCOL_VERSION {
            kill_group(pgid);
            return Err(fail(format!(
                "it speaks protocol {} and this harness speaks {PROTOCOL_VERSION}",
                hello.protocol
            )));
        }

        let pending: Pending = Arc::default();
        let gone: Arc<Mutex<Option<String>>> = Arc::default();
        let stopping = Arc::new(AtomicBool::new(false));
        let (recorder, clock) = (env.recorder.clone(), env.clock);
        {
            let (pending, gone, stopping) = (Arc::clone(&pending), Arc::clone(&gone), Arc::clone(&stopping));
            tokio::spawn(async move {
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
                    let _ = waiter.send(decision(reply));
                };
                // Going away before the harness asked it to is the adapter's failure: what it
                // would have decided afterwards is unknown, so the run cannot pass.
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
            });
        }

        let name = hello
            .name
            .map_or_else(|| spec.name.clone(), |n| format!("{} ({n})", spec.name));
        Ok(Self {
            name,
            commands: spec.commands().to_owned(),
            algorithm: hello.algorithm.unwrap_or(spec.algorithm()),
            round_trips_max: hello.round_trips_max.unwrap_or(u32::MAX),
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

    async fn acquire(&self, wire: &mut Wire<'_>, key: &str, _limit: &Limit) -> RedisResult<Decision> {
        let req = wire.request();
        let (tx, rx) = oneshot::channel();
        {
            // Checked under the pending lock, which the reader holds while it drains: a
            // request is either drained or refused, never left waiting.
            let mut pending = self.pending.lock().expect("pending lock");
            if let Some(why) = self.gone.lock().expect("gone lock").clone() {
                return Err(RedisError::from((ErrorKind::Client, "the adapter is not running", why)));
            }
            pending.insert(req.id, tx);
        }
        let mut line = serde_json::to_vec(&RequestLine {
            id: req.id,
            identity: req.identity,
            key,
            cost: 1,
        })
        .expect("a request line serializes");
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
            self.pending.lock().expect("pending lock").remove(&req.id);
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
                self.pending.lock().expect("pending lock").remove(&req.id);
                let detail = format!(
                    "protocol violation: no reply within {} ms to request #{}",
                    REPLY_TIMEOUT.as_millis(),
                    req.id
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
