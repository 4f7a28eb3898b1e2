//! The exec adapter: the team's own limiter, in any language, as a process that speaks
//! line-delimited JSON on stdin/stdout (protocol 1, specified in docs/exec-protocol.md).
//!
//! The harness starts the process once per run with `REDIS_URL` pointing at its fault
//! proxy, so every command the limiter sends crosses the proxy, where the nemesis strikes
//! and the wire log is kept. Protocol violations (a malformed reply, an unknown id, no reply
//! in time) become problems in the history and indeterminate or error completions, never a
//! crash and never an admission; more than 1% of them make the run unknown. An adapter that
//! prints a line that is no reply at all (or one over 1 MiB) or misses 3 replies in a row is
//! declared dead at once, and one that exits is gone: a fatal problem, every request waiting
//! fails, later ones are refused.

mod error;
mod reply;

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::backend::Conn;
use async_trait::async_trait;
use redis::{ErrorKind, RedisError, RedisResult};
use serde::{Deserialize, Serialize};
use tokio::io::{AsyncWriteExt, BufReader};
use tokio::process::{Child, ChildStdin, ChildStdout, Command};
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

use self::error::AdapterError;
use self::reply::{
    Answer, Line, MISSED_IN_ROW_MAX, Parsed, Tally, indeterminate, interpret, parse_reply, read_line_capped, violation,
};
use super::{Algorithm, Decision, Limiter, LimiterEnv, OnReply, Plant, Wire};
use crate::clock::RunClock;
use crate::error::SetupError;
use crate::history::{Event, ProblemSource, Recorder};
use crate::keys::{KeyLayout, KeyTemplate, LayoutSource};
use crate::scenario::{Limit, TtlMax, TtlMaxError};

/// The protocol version this harness speaks. Version 2 adds `now_ms` and `instance` to every
/// request line; an adapter that says hello with version 1 is still served (it ignores them).
pub const PROTOCOL_VERSION: u32 = 2;
/// How long the adapter has to print its hello line.
const HELLO_TIMEOUT: Duration = Duration::from_secs(30);
/// How long one request may wait for its reply before it is called indeterminate, when no
/// fault of the scenario holds requests up; one that does adds its longest hold-up (a serial
/// adapter waits out a server pause with every request queued behind it).
const REPLY_TIMEOUT: Duration = Duration::from_secs(5);
/// Ids of `plant` messages: far above any request id.
const PLANT_IDS_FROM: u64 = 1 << 62;
/// The longest line the adapter may print (hello or reply), newline not counted.
const LINE_MAX: usize = 1 << 20;
/// How the cap reads in messages.
const LINE_MAX_TEXT: &str = "1 MiB";
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
    /// How long its keys may live, in windows…
    #[serde(default)]
    ttl_max_windows: Option<f64>,
    /// …or in ms (a daily cap's 26 h, whatever the window).
    #[serde(default)]
    ttl_max_ms: Option<u64>,
    /// Whether it answers `plant` messages.
    #[serde(default)]
    plant: bool,
}

impl Hello {
    fn validate(&self) -> Result<(), AdapterError> {
        if !(1..=PROTOCOL_VERSION).contains(&self.protocol) {
            return Err(AdapterError::Protocol { version: self.protocol });
        }
        if let Some(keys) = &self.keys {
            if keys.is_empty() {
                return Err(AdapterError::EmptyKeys);
            }
            for key in keys {
                KeyTemplate::parse(key).map_err(AdapterError::Keys)?;
            }
        }
        self.ttl_max().map_err(AdapterError::TtlMax)?;
        Ok(())
    }

    fn ttl_max(&self) -> Result<Option<TtlMax>, TtlMaxError> {
        TtlMax::declared(self.ttl_max_windows, self.ttl_max_ms)
    }
}

/// One request, harness → adapter.
#[derive(Debug, Serialize)]
struct RequestLine<'a> {
    id: u64,
    identity: u32,
    key: &'a str,
    cost: u32,
    /// The time on the instance's clock, Unix ms (protocol 2): a limiter that needs the time
    /// must use it, not its own clock, so that `clock-skew` reaches it.
    now_ms: u64,
    /// The limiter instance (adapter process) deciding it (protocol 2).
    instance: u32,
}

/// Plant a state before traffic, harness → adapter (only to an adapter whose hello offers it).
#[derive(Debug, Serialize)]
struct PlantLine<'a> {
    id: u64,
    plant: &'a str,
    identity: u32,
    key: &'a str,
}

/// Where a reply goes: the request waiting for it.
type Waiter = oneshot::Sender<RedisResult<Answer>>;

/// What the session and the task reading the adapter's replies share.
struct Adapter {
    pending: Mutex<HashMap<u64, Waiter>>,
    /// Set when the adapter has gone (exited, or declared dead): later requests fail at once.
    gone: Mutex<Option<String>>,
    /// Set once the harness has asked it to exit: its going is no failure then.
    stopping: AtomicBool,
    tally: Mutex<Tally>,
    pgid: Option<i32>,
    recorder: Recorder,
    clock: RunClock,
    /// [`REPLY_TIMEOUT`] plus the scenario's longest fault hold-up.
    reply_timeout: Duration,
    /// Told each replied-to id as the reply is read, before the request's waiter wakes.
    on_reply: Option<OnReply>,
    /// Where its stderr goes: an adapter that goes away during the run is quoted from it.
    stderr_path: PathBuf,
}

impl Adapter {
    fn problem(&self, detail: String, fatal: bool) {
        self.recorder.record(Event::Problem {
            t_us: self.clock.now_us(),
            source: ProblemSource::ExecAdapter,
            detail,
            fatal,
            noted: false,
        });
    }

    /// A waiting place for the reply to `id`, unless the adapter has gone.
    fn enlist(&self, id: u64) -> RedisResult<oneshot::Receiver<RedisResult<Answer>>> {
        let (tx, rx) = oneshot::channel();
        // Checked under the pending lock, which `end` holds while it drains: a request is
        // either drained or refused, never left waiting.
        let mut pending = self.pending.lock().expect("pending lock");
        if let Some(why) = self.gone.lock().expect("gone lock").clone() {
            return Err(RedisError::from((ErrorKind::Client, "the adapter is not running", why)));
        }
        pending.insert(id, tx);
        Ok(rx)
    }

    fn withdraw(&self, id: u64) -> Option<Waiter> {
        self.pending.lock().expect("pending lock").remove(&id)
    }

    /// The adapter's part in the run is over: it went away (`dead` = false) or it is declared
    /// dead (and its process group killed). During the run that is a fatal problem. Every
    /// request waiting fails as indeterminate; later ones are refused. Only the first call counts.
    fn end(&self, reason: &str, dead: bool) {
        let during_run = !self.stopping.load(Ordering::Acquire);
        let mut pending = self.pending.lock().expect("pending lock");
        let mut gone = self.gone.lock().expect("gone lock");
        if gone.is_some() {
            return;
        }
        let headline = if dead {
            format!("the adapter is declared dead: {reason}")
        } else {
            reason.to_owned()
        };
        self.problem(
            if during_run && !dead {
                // Its last words (a traceback, a panic) say why it went.
                format!("{headline} during the run; {}", stderr_hint(&self.stderr_path))
            } else {
                headline.clone()
            },
            during_run,
        );
        if dead && during_run {
            kill_group(self.pgid);
        }
        for (_, waiter) in pending.drain() {
            let _ = waiter.send(Err(indeterminate(format!("{headline} (before replying)"))));
        }
        *gone = Some(headline);
    }

    /// Route one line of the adapter's stdout; `Err` when it is no reply at all (the adapter
    /// is then declared dead, with that reason).
    fn route(&self, line: &[u8]) -> Result<(), AdapterError> {
        if line.trim_ascii().is_empty() {
            return Ok(());
        }
        match parse_reply(line) {
            Parsed::NotAReply(why) => Err(AdapterError::NotAReply {
                why,
                line: cut(&String::from_utf8_lossy(line)),
            }),
            Parsed::Malformed { id, why } => {
                self.replied(id);
                let quoted = cut(&String::from_utf8_lossy(line));
                self.violated(id, format!("a malformed reply ({why}): `{quoted}`"));
                Ok(())
            }
            Parsed::Reply(reply) => {
                let id = reply.id;
                self.replied(id);
                match interpret(reply) {
                    Ok(answer) => self.answer(id, answer),
                    Err(why) => self.violated(id, why.to_string()),
                }
                Ok(())
            }
        }
    }

    /// The adapter replied to `id`: whatever it sends from now on is another request's. Said
    /// at once, not when the request's waiter has woken and its completion been recorded: a
    /// serial adapter sends the next request's first command right after the reply.
    fn replied(&self, id: u64) {
        if let Some(on_reply) = &self.on_reply {
            on_reply(id);
        }
    }

    /// A well-formed reply: to the request waiting for it, if any.
    fn answer(&self, id: u64, answer: RedisResult<Answer>) {
        match self.withdraw(id) {
            Some(waiter) => {
                self.tally.lock().expect("tally lock").good();
                let _ = waiter.send(answer);
            }
            None => self.unsolicited(id, None),
        }
    }

    /// A reply that breaks the protocol: the request waiting for it (if any) fails as an error.
    fn violated(&self, id: u64, why: String) {
        match self.withdraw(id) {
            Some(waiter) => {
                self.tally.lock().expect("tally lock").violation();
                self.problem(format!("protocol violation: the reply to request #{id}: {why}"), false);
                let _ = waiter.send(Err(violation(why)));
            }
            None => self.unsolicited(id, Some(&why)),
        }
    }

    /// A reply to no waiting request: a violation, recorded while there have not been many.
    fn unsolicited(&self, id: u64, why: Option<&str>) {
        let Some(note) = self.tally.lock().expect("tally lock").unsolicited() else {
            return;
        };
        let why = why.map(|w| format!(" ({w})")).unwrap_or_default();
        self.problem(
            format!("protocol violation: a reply for unknown or finished request id {id}{why}{note}"),
            false,
        );
    }

    /// A reply not sent (or a request not read) in time: a violation, and after
    /// [`MISSED_IN_ROW_MAX`] in a row the adapter is declared dead.
    fn missed(&self, detail: String) {
        let dead = self.tally.lock().expect("tally lock").missed();
        self.problem(detail, false);
        if dead {
            self.end(
                &format!(
                    "it missed {MISSED_IN_ROW_MAX} replies in a row (none within {} ms)",
                    self.reply_timeout.as_millis()
                ),
                true,
            );
        }
    }

    /// No reply to `id` in time. The reply may have come (or the adapter been declared dead)
    /// as the time ran out: then that is the answer.
    async fn timed_out(&self, id: u64, rx: oneshot::Receiver<RedisResult<Answer>>) -> RedisResult<Answer> {
        if self.withdraw(id).is_none() {
            return rx
                .await
                .unwrap_or_else(|_| Err(indeterminate("the adapter went away before replying".into())));
        }
        let detail = format!(
            "protocol violation: no reply within {} ms to request #{id}",
            self.reply_timeout.as_millis()
        );
        self.missed(detail.clone());
        Err(indeterminate(detail))
    }
}

/// A running adapter process.
pub struct ExecSession {
    name: String,
    commands: String,
    algorithm: Algorithm,
    round_trips_max: u32,
    keys: Option<Vec<String>>,
    ttl_max: Option<TtlMax>,
    plants: bool,
    next_plant_id: AtomicU64,
    stdin: tokio::sync::Mutex<Option<ChildStdin>>,
    adapter: Arc<Adapter>,
    reader: Mutex<Option<JoinHandle<()>>>,
    child: Mutex<Option<Child>>,
    pgid: Option<i32>,
    /// The run id in the adapter's environment: whatever it started, in its process group
    /// or not, is found by it.
    run_id: String,
    /// Whether the share of protocol violations has been judged (at the first stop).
    judged: AtomicBool,
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
        let mut stdout = BufReader::new(child.stdout.take().expect("piped stdout"));
        let hello = match read_hello(&mut child, &mut stdout, &stderr_path).await {
            Ok(hello) => hello,
            Err(reason) => {
                // `child.id()` is None once the adapter is reaped: its group id is then no
                // longer its own to signal.
                kill_group(child.id().map(|p| p as i32));
                crate::backend::kill_run_processes(Some(&env.run_id), true, &mut Default::default());
                return Err(fail(reason.to_string()));
            }
        };
        let adapter = Arc::new(Adapter {
            pending: Mutex::default(),
            gone: Mutex::default(),
            stopping: AtomicBool::new(false),
            tally: Mutex::default(),
            pgid,
            recorder: env.recorder.clone(),
            clock: env.clock,
            reply_timeout: REPLY_TIMEOUT + env.fault_hold_up,
            on_reply: env.on_reply.clone(),
            stderr_path,
        });
        let reader = tokio::spawn(read_replies(stdout, Arc::clone(&adapter)));
        let ttl_max = hello.ttl_max().unwrap_or_default();
        let name = hello
            .name
            .map_or_else(|| spec.name.clone(), |n| format!("{} ({n})", spec.name));
        Ok(Self {
            name,
            commands: spec.commands().to_owned(),
            algorithm: hello.algorithm.unwrap_or(spec.algorithm()),
            round_trips_max: hello.round_trips_max.unwrap_or(u32::MAX),
            ttl_max,
            keys: hello.keys,
            plants: hello.plant,
            next_plant_id: AtomicU64::new(PLANT_IDS_FROM),
            stdin: tokio::sync::Mutex::new(child.stdin.take()),
            adapter,
            reader: Mutex::new(Some(reader)),
            child: Mutex::new(Some(child)),
            pgid,
            run_id: env.run_id.clone(),
            judged: AtomicBool::new(false),
        })
    }

    /// Kill the adapter's process group, and whatever it started outside that group. Only
    /// while the adapter is unreaped: a reaped leader's group id may already be another
    /// process's.
    fn kill_everything(&self) {
        kill_group(self.pgid);
        crate::backend::kill_run_processes(Some(&self.run_id), true, &mut Default::default());
    }

    /// Send one line carrying `id` and wait for the adapter's answer to it.
    async fn exchange(&self, id: u64, line: Vec<u8>) -> RedisResult<Answer> {
        let mut rx = self.adapter.enlist(id)?;
        self.send(id, line).await?;
        match tokio::time::timeout(self.adapter.reply_timeout, &mut rx).await {
            Ok(Ok(result)) => result,
            Ok(Err(_)) => Err(indeterminate("the adapter went away before replying".into())),
            Err(_) => self.adapter.timed_out(id, rx).await,
        }
    }

    /// Write one line to the adapter. An adapter that stops reading fills the pipe: the
    /// write gives up with the reply, and counts as a missed reply.
    async fn send(&self, id: u64, mut line: Vec<u8>) -> RedisResult<()> {
        line.push(b'\n');
        let written = tokio::time::timeout(self.adapter.reply_timeout, async {
            let mut stdin = self.stdin.lock().await;
            match stdin.as_mut() {
                Some(s) => s.write_all(&line).await.and(s.flush().await),
                None => Err(std::io::Error::other("stdin closed")),
            }
        })
        .await;
        let (error, stalled) = match written {
            Ok(Ok(())) => return Ok(()),
            Ok(Err(e)) => (e.to_string(), false),
            Err(_) => (
                format!(
                    "the adapter has not read its stdin for {} ms",
                    self.adapter.reply_timeout.as_millis()
                ),
                true,
            ),
        };
        if self.adapter.withdraw(id).is_some() && stalled {
            self.adapter
                .missed(format!("protocol violation: request #{id} not read: {error}"));
        }
        Err(RedisError::from((
            ErrorKind::Client,
            "could not write to the adapter",
            error,
        )))
    }

    /// Let the reply reader see the end of the adapter's stdout (its group is gone by now).
    async fn finish_reader(&self) {
        let reader = self.reader.lock().expect("reader lock").take();
        if let Some(mut reader) = reader
            && tokio::time::timeout(Duration::from_secs(2), &mut reader).await.is_err()
        {
            reader.abort();
        }
    }
}

/// `sh -c COMMAND` in a process group of its own, with the run's environment.
fn start_process(spec: &ExecSpec, env: &LimiterEnv, stderr_path: &Path) -> Result<Child, SetupError> {
    let stderr = std::fs::File::create(stderr_path).map_err(|e| SetupError::io("cannot create", stderr_path, e))?;
    let mut command = Command::new("sh");
    if env.cluster {
        command.env("REDIS_CLUSTER", "1");
    } else {
        command.env_remove("REDIS_CLUSTER");
    }
    command
        .arg("-c")
        .arg(&spec.command)
        .env("REDIS_URL", &env.redis_url)
        .env("LIMITER_HARNESS_PROTOCOL", PROTOCOL_VERSION.to_string())
        .env(crate::backend::RUN_ENV, &env.run_id)
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
    stdout: &mut BufReader<ChildStdout>,
    stderr_path: &Path,
) -> Result<Hello, AdapterError> {
    let hello = match tokio::time::timeout(HELLO_TIMEOUT, read_line_capped(stdout, LINE_MAX)).await {
        Err(_) => Err(AdapterError::NoHello),
        Ok(Ok(Line::TooLong)) => Err(AdapterError::HelloTooLong),
        Ok(Ok(Line::Eof) | Err(_)) => Err(exited_before_hello(child).await),
        Ok(Ok(Line::Text(line))) => parse_hello(&line),
    };
    hello
        .and_then(|h| h.validate().map(|()| h))
        .map_err(|reason| AdapterError::WithStderr {
            reason: Box::new(reason),
            stderr: stderr_hint(stderr_path),
        })
}

/// Its stdout is closed but it may still run (stdout redirected): let it see EOF on stdin,
/// give it a moment; the group is killed by the caller either way.
async fn exited_before_hello(child: &mut Child) -> AdapterError {
    drop(child.stdin.take());
    let status = match tokio::time::timeout(Duration::from_secs(2), child.wait()).await {
        Ok(Ok(status)) => Some(status),
        _ => None,
    };
    AdapterError::ExitedBeforeHello { status }
}

/// A hello is a JSON object (serde would read an array such as `[1]` field by field).
fn parse_hello(line: &[u8]) -> Result<Hello, AdapterError> {
    let not_hello = |why: String| AdapterError::NotHello {
        why,
        line: cut(&String::from_utf8_lossy(line)),
    };
    let value = serde_json::from_slice::<serde_json::Value>(line).map_err(|e| not_hello(e.to_string()))?;
    if !value.is_object() {
        return Err(not_hello("not a JSON object".into()));
    }
    // From the bytes: a key given twice is an error, not the last one's value.
    serde_json::from_slice::<Hello>(line).map_err(|e| not_hello(e.to_string()))
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

/// Route each reply line to the request waiting for it until the adapter's stdout closes or
/// the adapter is declared dead; then fail every request still waiting.
async fn read_replies(mut stdout: BufReader<ChildStdout>, adapter: Arc<Adapter>) {
    let (end, dead) = loop {
        match read_line_capped(&mut stdout, LINE_MAX).await {
            Ok(Line::Text(line)) => {
                if let Err(reason) = adapter.route(&line) {
                    break (reason.to_string(), true);
                }
            }
            Ok(Line::TooLong) => {
                break (
                    format!("it printed a line longer than {LINE_MAX_TEXT}, the cap on a line"),
                    true,
                );
            }
            Ok(Line::Eof) => break ("the adapter closed its stdout (exited?)".to_owned(), false),
            Err(e) => break (format!("reading its stdout failed: {e}"), true),
        }
    };
    // Going away before the harness asked it to is the adapter's failure: what it would have
    // decided afterwards is unknown, so the run cannot pass.
    adapter.end(&end, dead);
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

/// Wait, at most `within`, until process `pid` (a child of ours) has exited, without reaping
/// it: a zombie keeps its pid and its group id its own until it is waited for.
async fn exits_within(pid: u32, within: Duration) {
    use nix::sys::wait::{Id, WaitPidFlag, WaitStatus, waitid};
    let deadline = tokio::time::Instant::now() + within;
    let flags = WaitPidFlag::WEXITED | WaitPidFlag::WNOWAIT | WaitPidFlag::WNOHANG;
    while tokio::time::Instant::now() < deadline {
        match waitid(Id::Pid(nix::unistd::Pid::from_raw(pid as i32)), flags) {
            Ok(WaitStatus::StillAlive) => tokio::time::sleep(Duration::from_millis(10)).await,
            _ => return, // exited (a zombie now), or no such child
        }
    }
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
            self.kill_everything();
        }
        if let Some(reader) = self.reader.get_mut().ok().and_then(Option::take) {
            reader.abort();
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

    fn ttl_max(&self) -> Option<TtlMax> {
        self.ttl_max
    }

    async fn plant_exhausted(&self, _conn: &mut Conn, identity: u32, key: &str, _limit: &Limit) -> RedisResult<Plant> {
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
        match self.exchange(id, line).await? {
            Answer::Planted(planted) => Ok(Plant::Planted(planted)),
            Answer::Decision(_) => Err(violation("a decision in reply to `plant`".into())),
        }
    }

    async fn acquire(&self, wire: &mut Wire<'_>, key: &str, _limit: &Limit) -> RedisResult<Decision> {
        let req = wire.request();
        let line = serde_json::to_vec(&RequestLine {
            id: req.id,
            identity: req.identity,
            key,
            cost: 1,
            now_ms: req.now_ms,
            instance: req.instance,
        })
        .expect("a request line serializes");
        match self.exchange(req.id, line).await? {
            Answer::Decision(decision) => Ok(decision),
            Answer::Planted(_) => Err(violation("`planted` in reply to a request".into())),
        }
    }

    fn stopping(&self) {
        self.adapter.stopping.store(true, Ordering::Release);
    }

    /// Called before the history is finished: problems recorded here count.
    async fn stop(&self) {
        self.stopping();
        // EOF on stdin asks the adapter to exit; it gets a moment, then the group is killed
        // (with what it started). Once reaped, its group id may be reused: no more signals.
        self.stdin.lock().await.take();
        let child = self.child.lock().expect("child lock").take();
        if let Some(mut child) = child {
            // Its group is killed while it is at most a zombie, never after it is reaped: a
            // reaped leader's group id may already be another process's (another cell's
            // adapter, under a pid that wrapped around).
            if let Some(pid) = child.id() {
                exits_within(pid, Duration::from_secs(2)).await;
            }
            self.kill_everything();
            let _ = child.wait().await;
        }
        self.finish_reader().await;
        // Judged once: `stop` is called again on the run's way out.
        if self.judged.swap(true, Ordering::AcqRel) {
            return;
        }
        let tally = *self.adapter.tally.lock().expect("tally lock");
        if let Some(excess) = tally.excess() {
            self.adapter.problem(excess, true);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The adapter's group is killed while its leader is a zombie, not after it is reaped:
    /// `exits_within` waits for the exit and leaves the zombie (its pid, its group id) in place.
    #[tokio::test]
    async fn an_exited_adapter_stays_a_zombie_until_it_is_waited_for() {
        let mut child = tokio::process::Command::new("sh")
            .args(["-c", "exit 3"])
            .spawn()
            .unwrap();
        let pid = child.id().unwrap();
        exits_within(pid, Duration::from_secs(5)).await;
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
        let state = stat
            .rsplit_once(')')
            .unwrap()
            .1
            .split_whitespace()
            .next()
            .unwrap()
            .to_owned();
        assert_eq!(state, "Z", "exited, not reaped: {stat}");
        assert_eq!(child.wait().await.unwrap().code(), Some(3));
        assert!(!std::path::Path::new(&format!("/proc/{pid}")).exists(), "reaped");
        // A live child: back after the time given, still running.
        let mut sleeper = tokio::process::Command::new("sleep").arg("5").spawn().unwrap();
        let started = std::time::Instant::now();
        exits_within(sleeper.id().unwrap(), Duration::from_millis(100)).await;
        assert!(started.elapsed() < Duration::from_secs(2));
        assert!(sleeper.try_wait().unwrap().is_none(), "still running");
        sleeper.kill().await.unwrap();
    }

    fn hello(json: &str) -> Result<(), AdapterError> {
        parse_hello(json.as_bytes())?.validate()
    }

    /// Why the hello `json` is refused.
    fn refused(json: &str) -> String {
        hello(json).unwrap_err().to_string()
    }

    #[test]
    fn hello_fields_are_checked() {
        assert!(hello(r#"{"protocol": 1}"#).is_ok());
        assert!(hello(r#"{"protocol": 2}"#).is_ok());
        assert!(refused(r#"{"protocol": 3}"#).contains("1 to 2"));
        assert!(hello(r#"{"protocol": 1, "keys": ["app:{identity}:*"], "ttl_max_windows": 2, "plant": true}"#).is_ok());
        assert!(refused(r#"{"protocol": 0}"#).contains("protocol 0"));
        assert!(refused(r#"{"protocol": 1, "keys": ["app:{id}"]}"#).contains("unknown placeholder"));
        assert!(refused(r#"{"protocol": 1, "keys": []}"#).contains("empty"));
        assert!(refused(r#"{"protocol": 1, "ttl_max_windows": 0}"#).contains("positive"));
        // A daily cap: 26 h in windows of 50 ms, or in ms; not both.
        assert!(hello(r#"{"protocol": 2, "ttl_max_windows": 1872000}"#).is_ok());
        assert!(hello(r#"{"protocol": 2, "ttl_max_ms": 93600000}"#).is_ok());
        assert!(refused(r#"{"protocol": 2, "ttl_max_ms": 1, "ttl_max_windows": 1}"#).contains("both"));
        assert!(refused(r#"{"protocol": 1, "keyz": []}"#).contains("unknown field"));
        // Serde reads a sequence into a struct field by field: not for a hello.
        assert!(refused("[1]").contains("not a JSON object"));
        assert!(hello("[1, null, null, null, null, null, false]").is_err());
    }

    fn adapter() -> (Arc<Adapter>, crate::history::RecorderHandle) {
        let (recorder, handle) = Recorder::in_memory();
        let adapter = Arc::new(Adapter {
            pending: Mutex::default(),
            gone: Mutex::default(),
            stopping: AtomicBool::new(false),
            tally: Mutex::default(),
            pgid: None,
            recorder,
            clock: RunClock::start(),
            reply_timeout: REPLY_TIMEOUT,
            on_reply: None,
            stderr_path: PathBuf::from("no-such-dir/adapter.stderr.log"),
        });
        (adapter, handle)
    }

    /// The problems recorded: (detail, fatal).
    fn problems(adapter: Arc<Adapter>, handle: crate::history::RecorderHandle) -> Vec<(String, bool)> {
        drop(adapter);
        handle
            .finish()
            .0
            .into_iter()
            .filter_map(|e| match e {
                Event::Problem { detail, fatal, .. } => Some((detail, fatal)),
                _ => None,
            })
            .collect()
    }

    #[tokio::test]
    async fn a_line_that_is_no_reply_declares_the_adapter_dead_at_once() {
        let (adapter, handle) = adapter();
        let waiting = [adapter.enlist(5).unwrap(), adapter.enlist(6).unwrap()];
        let reason = adapter
            .route(b"[5, true, 3, null, false, null]")
            .unwrap_err()
            .to_string();
        assert!(reason.contains("not a reply line (a JSON array"), "{reason}");
        adapter.end(&reason, true);
        for rx in waiting {
            let error = rx.await.unwrap().unwrap_err();
            assert!(error.is_timeout(), "indeterminate: {error}");
            assert!(error.to_string().contains("declared dead"), "{error}");
        }
        let refused = adapter.enlist(7).unwrap_err();
        assert!(refused.to_string().contains("not running"), "{refused}");
        adapter.end("the adapter closed its stdout (exited?)", false);
        let problems = problems(adapter, handle);
        assert_eq!(problems.len(), 1, "only the first end counts: {problems:?}");
        assert!(
            problems[0]
                .0
                .starts_with("the adapter is declared dead: it printed a line that is not a reply line")
        );
        assert!(problems[0].1, "fatal");
    }

    #[tokio::test]
    async fn replies_without_a_decision_fail_their_request_as_errors_and_are_counted() {
        let (adapter, handle) = adapter();
        for (id, line) in [
            (5, r#"{"id": 5, "allowd": true}"#),
            (6, r#"{"id": 6, "allowed": true, "count": -2}"#),
            (7, r#"{"id": 7, "count": 2}"#),
        ] {
            let rx = adapter.enlist(id).unwrap();
            adapter.route(line.as_bytes()).unwrap();
            let error = rx.await.unwrap().unwrap_err();
            assert!(!error.is_timeout(), "an error, not indeterminate: {error}");
            assert!(error.to_string().contains("protocol violation"), "{error}");
        }
        let rx = adapter.enlist(8).unwrap();
        adapter.route(br#"{"id": 8, "allowed": true, "count": 1}"#).unwrap();
        assert!(matches!(rx.await.unwrap(), Ok(Answer::Decision(d)) if d.allowed));
        adapter.route(br#"{"id": 8, "allowed": true, "count": 1}"#).unwrap();
        let tally = *adapter.tally.lock().unwrap();
        assert_eq!((tally.violations, tally.replies), (4, 5));
        let problems = problems(adapter, handle);
        assert_eq!(problems.len(), 4, "{problems:?}");
        assert!(problems.iter().all(|(_, fatal)| !fatal), "{problems:?}");
        assert!(
            problems[3].0.contains("unknown or finished request id 8"),
            "{problems:?}"
        );
    }

    #[tokio::test]
    async fn three_missed_replies_in_a_row_declare_the_adapter_dead() {
        let (adapter, handle) = adapter();
        let rx = adapter.enlist(1).unwrap();
        assert!(adapter.timed_out(1, rx).await.unwrap_err().is_timeout());
        let rx = adapter.enlist(2).unwrap();
        assert!(adapter.timed_out(2, rx).await.is_err());
        let waiting = adapter.enlist(4).unwrap();
        let rx = adapter.enlist(3).unwrap();
        assert!(adapter.timed_out(3, rx).await.is_err());
        let error = waiting.await.unwrap().unwrap_err();
        assert!(error.to_string().contains("missed 3 replies in a row"), "{error}");
        assert!(adapter.enlist(5).is_err(), "later requests are refused at once");
        let problems = problems(adapter, handle);
        let fatal: Vec<_> = problems.iter().filter(|(_, fatal)| *fatal).collect();
        assert_eq!(fatal.len(), 1, "{problems:?}");
        assert!(
            fatal[0]
                .0
                .contains("declared dead: it missed 3 replies in a row (none within 5000 ms)")
        );
    }
}
