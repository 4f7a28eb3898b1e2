//! One run: start the servers, configure them, drive the schedule through the limiter
//! with the nemesis and the observer at work, then check the history and write the
//! report. Servers are stopped on every way out: success, setup error, or a signal.

mod admin;
mod assemble;
mod calendar;
mod driver;
mod error;
mod execute;
mod facts;
mod judge;
mod layout;
mod progress;
mod setup;

use std::path::PathBuf;
use std::sync::Arc;

use futures::future::LocalBoxFuture;

pub use crate::backend::{
    HARNESS_CLIENT_NAME, RESPONSE_TIMEOUT, configure_after_restart, connect, restore as restore_settings,
};
pub use error::JudgeError;
pub use execute::NEEDS_NEWER_SERVER;
pub use facts::RunFacts;
pub use judge::{Judgement, judge_history};
pub use layout::resolve_layout;
pub use progress::Progress;

use crate::backend::Backend;
use crate::clock::RunClock;
use crate::error::SetupError;
use crate::history::{Event, HistoryError, LimiterFacts, ProblemSource, Recorder};
use crate::keys::KeyLayout;
use crate::limiter::Limiter;
use crate::report::{Report, TimelineLimits, write_report, write_timeline};
use crate::scenario::{CacheTarget, Fault, Scenario};
use crate::signals;
use execute::RunState;
use setup::Servers;

/// Everything one run needs.
pub struct RunConfig {
    pub scenario: Scenario,
    pub limiter: Arc<dyn Limiter>,
    pub backend: Arc<dyn Backend>,
    pub seed: u64,
    /// Where report.md, report.json and history.jsonl go.
    pub report_dir: PathBuf,
    /// The user allowed reconfiguring and flooding a server the harness did not start.
    pub allow_reconfigure: bool,
    /// Route a built-in limiter's traffic through the fault proxy even when no fault needs
    /// it (exec adapters and faults on replies always go through it).
    pub via_proxy: bool,
    pub show_progress: bool,
    /// The command that reproduces this run, for the report.
    pub reproduce: String,
}

/// The command line that reproduces a run. `adjust` holds the flags that changed the
/// scenario (`--keys`, `--window-ms`), already quoted.
pub fn reproduce_line(
    scenario: &str,
    limiter: &str,
    seed: u64,
    backend: &dyn Backend,
    allow_reconfigure: bool,
    via_proxy: bool,
    adjust: &str,
) -> String {
    let mut line = format!(
        "limiter-harness run {scenario} --limiter {} --seed {seed} {}",
        crate::shell::quote(limiter),
        backend.reproduce_flags()
    );
    if allow_reconfigure {
        line.push_str(" --allow-reconfigure");
    }
    if via_proxy {
        line.push_str(" --via-proxy");
    }
    line.push_str(adjust);
    line
}

/// What a finished run produced.
#[derive(Debug)]
pub struct RunOutcome {
    pub report: Report,
    pub report_dir: PathBuf,
    /// Servers that could not be stopped (the user should run `limiter-harness clean`).
    pub leftovers: Vec<String>,
    /// Set when the history file could not be written in full.
    pub history_error: Option<HistoryError>,
}

/// [`run`] on a thread of its own with a single-threaded runtime, as every run is made
/// (`run`, each cell of `matrix` and `ci`, `bench`), so that one verdict is reached the same
/// way by each command. The operating system then shares the cores between a run and what
/// else runs (the server, other cells), and the run's tasks never wake each other across
/// threads: on two cores shared with the server, a second runtime thread costs the driver
/// a fifth of its throughput (docs/performance.md).
pub async fn run_on_own_thread(config: RunConfig) -> Result<RunOutcome, SetupError> {
    let (tx, rx) = tokio::sync::oneshot::channel();
    std::thread::Builder::new()
        .name("run".into())
        .spawn(move || {
            let result = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .map_err(|e| SetupError::RunThread(format!("cannot start its runtime: {e}")))
                .and_then(|rt| rt.block_on(run(config)));
            let _ = tx.send(result);
        })
        .map_err(|e| SetupError::RunThread(format!("cannot start it: {e}")))?;
    rx.await
        .unwrap_or_else(|_| Err(SetupError::RunThread("it died without a result (a harness bug)".into())))
}

/// Run the scenario. Setup problems are errors; everything the limiter does, good or bad,
/// is in the returned report — judged from the run's history alone ([`judge_history`]).
pub fn run(config: RunConfig) -> LocalBoxFuture<'static, Result<RunOutcome, SetupError>> {
    Box::pin(run_unboxed(config))
}

async fn run_unboxed(config: RunConfig) -> Result<RunOutcome, SetupError> {
    // Long: every way out (done, error, signal, deadline) goes through one clean-up, kept in one place.
    refuse_disruption(&config)?;
    refuse_on_cluster(&config)?;
    // From here a signal stops the run instead of the process: servers, adapters and
    // settings are put back on the way out.
    let _guard = signals::guard();
    let clock = RunClock::start();
    let run_id = format!("{}-{}", std::process::id(), clock_id());
    let _lock = lock_report_dir(&config.report_dir)?;
    let history_path = config.report_dir.join("history.jsonl");
    let (recorder, history) = Recorder::to_file(&history_path)?;
    recorder.record(header(&config));
    recorder.record(limiter_event(
        config.limiter.as_ref(),
        resolve_layout(&config.scenario.limit, config.limiter.as_ref()),
        None,
        clock,
    ));
    if signals::interrupted() {
        return Err(SetupError::Interrupted);
    }
    let options = crate::backend::StartOptions {
        appendonly: config.scenario.keeps_aof(),
        replica: config.scenario.needs_replica(),
        cluster_node: false,
    };
    let servers = Servers::start(
        config.backend.as_ref(),
        needs_cache_server(&config.scenario),
        &run_id,
        config.scenario.server.topology,
        options,
    )
    .await?;
    let mut state = RunState {
        run_id: run_id.clone(),
        ..RunState::default()
    };
    let history_failed = history.failed();
    let calendar_wait_ms = Arc::clone(&state.calendar_wait_ms);
    let executed = tokio::select! {
        biased;
        // A history that cannot be written (a full disk) ends the run at once: going on would
        // judge what no file keeps. Why is recorded below, from the writer's error.
        () = history_failed.cancelled() => Ok(()),
        () = signals::token().cancelled() => {
            recorder.record(Event::Problem {
                t_us: clock.now_us(),
                source: ProblemSource::Interrupt,
                detail: "the run was interrupted by a signal; the history holds what happened until then".into(),
                fatal: true,
                noted: true,
            });
            Ok(())
        }
        result = execute::execute(&config, &servers, &recorder, clock, &mut state) => result,
        () = calendar::deadline_besides_the_wait(config.scenario.deadline(), &calendar_wait_ms) => {
            recorder.record(Event::Problem {
                t_us: clock.now_us(),
                source: ProblemSource::Deadline,
                detail: format!(
                    "the run was stopped after {} s, its deadline (set `[check] deadline_ms` to change it); the history holds what happened until then",
                    config.scenario.deadline().as_secs_f64()
                ),
                fatal: true,
                noted: true,
            });
            Ok(())
        }
    };
    // An adapter process is stopped on every way out (a no-op when execute already did).
    crate::limiter::stop_all(&state.limiters).await;
    drop(recorder);
    let (mut events, mut history_error) = history.finish();
    if let Some(e) = &history_error {
        events.push(Event::Problem {
            t_us: clock.now_us(),
            source: ProblemSource::History,
            detail: format!(
                "the history could not be written ({e}): the run was stopped there, and what it saw is judged from memory; the file keeps what was written before"
            ),
            fatal: true,
            noted: true,
        });
    }
    // A server the harness did not start is left as found, on every way out too: the keys
    // the history says the run created are deleted by name. What that finds is recorded.
    if let Some(server) = state.leave_as_found.take() {
        let layout = state
            .layout
            .clone()
            .unwrap_or_else(|| resolve_layout(&config.scenario.limit, config.limiter.as_ref()).0);
        let after = execute::leave_server_as_found(&server, &layout, &events, &mut state, clock).await;
        // After a failed write the file is given up on: its last line may be torn.
        if history_error.is_none()
            && let Err(e) = crate::history::append_history(&history_path, &after)
        {
            history_error.get_or_insert(e);
        }
        events.extend(after);
    }
    let leftovers = servers.stop().await;
    executed?;
    if let Some(peak) = resident_peak_bytes() {
        let resources = Event::Resources {
            t_us: clock.now_us(),
            resident_peak_bytes: peak,
        };
        if history_error.is_none()
            && let Err(e) = crate::history::append_history(&history_path, std::slice::from_ref(&resources))
        {
            history_error.get_or_insert(e);
        }
        events.push(resources);
    }
    let mut judged = judge_history(events).map_err(|e| SetupError::BadHistory {
        path: history_path.clone(),
        reason: e.to_string(),
    })?;
    write_judged(&mut judged, &config.report_dir)?;
    Ok(RunOutcome {
        report: judged.report,
        report_dir: config.report_dir,
        leftovers,
        history_error,
    })
}

/// This process's peak resident memory so far (`VmHWM` in /proc/self/status), if the system
/// says.
fn resident_peak_bytes() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let kib: u64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))?
        .trim()
        .strip_suffix("kB")?
        .trim()
        .parse()
        .ok()?;
    Some(kib * 1024)
}

/// Judge a saved run again from its `history.jsonl` and rewrite its report (`limiter-harness
/// check RUN_DIR`): the checkers of this build on the history as recorded. `dir` is the run's
/// directory (or the history file itself, whose directory gets the report).
pub fn recheck(dir: &std::path::Path) -> Result<Judgement, SetupError> {
    let (dir, history_path) = if dir.is_file() {
        (
            dir.parent().unwrap_or(std::path::Path::new(".")).to_owned(),
            dir.to_owned(),
        )
    } else {
        (dir.to_owned(), dir.join("history.jsonl"))
    };
    if !history_path.is_file() {
        return Err(SetupError::BadHistory {
            path: dir,
            reason: "it holds no history.jsonl".into(),
        });
    }
    let _lock = lock_report_dir(&dir)?;
    let events = crate::history::read_history(&history_path)?;
    let mut judged = judge_history(events).map_err(|e| SetupError::BadHistory {
        path: history_path,
        reason: e.to_string(),
    })?;
    write_judged(&mut judged, &dir)?;
    Ok(judged)
}

/// Write a judged run's files into `dir`: `timeline.svg` (a failure there is a problem in
/// the report, never a lost report), then `report.json` and `report.md`.
fn write_judged(judged: &mut Judgement, dir: &std::path::Path) -> Result<(), SetupError> {
    let limits = TimelineLimits {
        requests_max: judged.scenario.limit.requests_max,
        window_ms: judged.scenario.limit.window_ms,
        layout: &judged.layout,
    };
    write_timeline(&mut judged.report, &judged.index, &limits, dir);
    write_report(&judged.report, dir)
}

/// The history's first line: what ran, with the scenario's text, so the history alone
/// rebuilds the run's scenario.
fn header(config: &RunConfig) -> Event {
    let scenario = &config.scenario;
    Event::Run {
        scenario: scenario.name.clone(),
        limiter: config.limiter.name().to_owned(),
        seed: config.seed,
        backend: config.backend.name().to_owned(),
        reproduce: config.reproduce.clone(),
        scenario_file: scenario.source.display().to_string(),
        scenario_text: scenario.text.clone(),
        shipped: scenario.shipped,
        adjust: scenario.adjusted.clone(),
    }
}

/// The limiter as the run takes it, with its keys (`layout`, and the note saying why they
/// are not the ones it declared) and how its traffic reaches the server.
pub(crate) fn limiter_event(
    limiter: &dyn Limiter,
    (layout, keys_note): (KeyLayout, Option<String>),
    proxy: Option<String>,
    clock: RunClock,
) -> Event {
    let (ttl_max_windows, ttl_max_ms) = LimiterFacts::ttl_fields(limiter.ttl_max());
    Event::Limiter {
        t_us: clock.now_us(),
        limiter: LimiterFacts {
            name: limiter.name().to_owned(),
            algorithm: limiter.algorithm(),
            round_trips_max: limiter.round_trips_max(),
            commands: limiter.commands().to_owned(),
            ttl_max_windows,
            ttl_max_ms,
            keys: layout.texts(),
            keys_from: layout.source,
            keys_note,
            proxy,
        },
    }
}

/// A scenario that reconfigures or floods its server may only run against a server the
/// harness started, unless the user said otherwise.
fn refuse_disruption(config: &RunConfig) -> Result<(), SetupError> {
    if config.backend.owns_servers() || config.allow_reconfigure {
        return Ok(());
    }
    let reasons = config.scenario.disrupts_server();
    if reasons.is_empty() {
        return Ok(());
    }
    Err(SetupError::UrlRefused {
        url: config.backend.reproduce_flags(),
        reasons: reasons
            .iter()
            .map(|r| format!("  - scenario `{}`: {r}", config.scenario.name))
            .collect::<Vec<_>>()
            .join("\n"),
    })
}

/// A cluster scenario runs on a cluster the harness starts, or on one of the user's
/// (`--backend url` naming one of its nodes). Its limiter reaches the cluster through a
/// cluster client: the `redis` crate's for a built-in, its language's for an exec adapter
/// (`REDIS_CLUSTER=1`), through a fault proxy per node when it needs the proxy. On a cluster
/// the harness did not start, nothing moves its slots, fails its nodes over, stops them or
/// floods them, whatever `--allow-reconfigure` says (refused before anything is sent).
fn refuse_on_cluster(config: &RunConfig) -> Result<(), SetupError> {
    if !config.scenario.server.topology.is_cluster() || config.backend.owns_servers() {
        return Ok(());
    }
    let reasons: Vec<String> = config
        .scenario
        .faults
        .iter()
        .filter_map(|fault| match fault {
            Fault::Server(s) => Some(format!(
                "  - fault {} (phase `{}`) acts on the cluster's nodes themselves",
                s.action.kind(),
                s.phase
            )),
            Fault::MemoryPressure(p) if p.target == CacheTarget::LimiterServer => Some(format!(
                "  - fault memory-pressure (phase `{}`) floods the cluster to evict keys",
                p.phase
            )),
            _ => None,
        })
        .collect();
    if reasons.is_empty() {
        return Ok(());
    }
    Err(SetupError::ClusterRefused {
        url: config.backend.reproduce_flags(),
        reasons: reasons.join("\n"),
    })
}

fn needs_cache_server(scenario: &Scenario) -> bool {
    scenario.cache_server.is_some()
        && scenario
            .faults
            .iter()
            .any(|f| matches!(f, Fault::MemoryPressure(p) if p.target == CacheTarget::CacheServer))
}

/// Hold the report directory for this run: a second run writing the same history would
/// interleave its lines. The lock goes with the process, however it ends.
fn lock_report_dir(dir: &std::path::Path) -> Result<std::fs::File, SetupError> {
    use std::io::{Read, Seek, Write};
    crate::report_dir::create_report_dir(dir)?;
    let path = dir.join(".lock");
    let mut file = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .read(true)
        .write(true)
        .open(&path)
        .map_err(|e| SetupError::io("cannot create", &path, e))?;
    match file.try_lock() {
        Ok(()) => {
            let _ = file.set_len(0);
            let _ = writeln!(file, "process {}", std::process::id());
            Ok(file)
        }
        Err(std::fs::TryLockError::WouldBlock) => {
            let mut holder = String::new();
            let _ = file.rewind().and_then(|()| file.read_to_string(&mut holder));
            Err(SetupError::ReportDirInUse {
                dir: dir.to_owned(),
                holder: holder.trim().to_owned(),
            })
        }
        Err(std::fs::TryLockError::Error(e)) => Err(SetupError::io("cannot lock", &path, e)),
    }
}

/// A short id distinguishing runs of the same process (not a harness choice: no seed use).
fn clock_id() -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0);
    format!("{:x}", nanos & 0xffff_ffff)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// One builder for every reproduce line: the flags that changed the run are all in it,
    /// and a limiter spec with spaces survives a shell.
    #[test]
    fn the_reproduce_line_carries_every_flag_and_quotes_the_limiter() {
        let backend = crate::backend::UrlBackend::new("redis://127.0.0.1:6379".into());
        let line = reproduce_line(
            "scenarios/steady-control.toml",
            "exec:python3 adapter.py",
            7,
            &backend,
            true,
            true,
            " --window-ms 1000",
        );
        assert_eq!(
            line,
            "limiter-harness run scenarios/steady-control.toml --limiter 'exec:python3 adapter.py' --seed 7 --backend url --url redis://127.0.0.1:6379 --allow-reconfigure --via-proxy --window-ms 1000"
        );
    }
}
