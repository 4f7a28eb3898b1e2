//! One run: start the servers, configure them, drive the schedule through the limiter
//! with the nemesis and the observer at work, then check the history and write the
//! report. Servers are stopped on every way out: success, setup error, or a signal.

mod assemble;
mod driver;
mod execute;
mod keys;
mod progress;
mod setup;

use std::path::PathBuf;
use std::sync::Arc;

pub use keys::resolve_layout;
pub use progress::Progress;
pub use setup::{RESPONSE_TIMEOUT, connect, restore as restore_settings};

use crate::backend::Backend;
use crate::checker::{self, CheckInput, TtlBound};
use crate::clock::RunClock;
use crate::error::SetupError;
use crate::history::{Event, HistoryIndex, Recorder};
use crate::keys::KeyLayout;
use crate::limiter::Limiter;
use crate::report::{KeysSummary, Report, TimelineLimits, write_report, write_timeline};
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
    pub history_error: Option<String>,
}

/// Run the scenario. Setup problems are errors; everything the limiter does, good or bad,
/// is in the returned report.
pub async fn run(config: RunConfig) -> Result<RunOutcome, SetupError> {
    // Long: every way out (done, error, signal, deadline) goes through one clean-up, kept in one place.
    refuse_disruption(&config)?;
    // From here a signal stops the run instead of the process: servers, adapters and
    // settings are put back on the way out.
    let _guard = signals::guard();
    let clock = RunClock::start();
    let run_id = format!("{}-{}", std::process::id(), clock_id());
    let _lock = lock_report_dir(&config.report_dir)?;
    let (recorder, history) = Recorder::to_file(&config.report_dir.join("history.jsonl"))?;
    if signals::interrupted() {
        return Err(SetupError::Interrupted);
    }
    let servers = Servers::start(config.backend.as_ref(), needs_cache_server(&config.scenario), &run_id).await?;
    let mut state = RunState {
        run_id: run_id.clone(),
        ..RunState::default()
    };
    let executed = tokio::select! {
        biased;
        () = signals::token().cancelled() => {
            recorder.record(Event::Problem {
                t_us: clock.now_us(),
                source: "interrupt".into(),
                detail: "the run was interrupted by a signal; the history holds what happened until then".into(),
                fatal: true,
            });
            Ok(())
        }
        result = execute::execute(&config, &servers, &recorder, clock, &mut state) => result,
        () = tokio::time::sleep(config.scenario.deadline()) => {
            recorder.record(Event::Problem {
                t_us: clock.now_us(),
                source: "deadline".into(),
                detail: format!(
                    "the run was stopped after {} s, its deadline (set `[check] deadline_ms` to change it); the history holds what happened until then",
                    config.scenario.deadline().as_secs_f64()
                ),
                fatal: true,
            });
            Ok(())
        }
    };
    // An adapter process is stopped on every way out (a no-op when execute already did).
    if let Some(limiter) = &state.limiter {
        limiter.stop().await;
    }
    let (layout, ttl) = keys_decided(&config, &state);
    let wall_ms = clock.now_us() / 1000;
    drop(recorder);
    let (events, history_error) = history.finish();
    let mut index = HistoryIndex::new(events, &layout);
    // A server the harness did not start is left as found, on every way out too: the keys
    // the history says the run created are deleted by name.
    if let Some(url) = state.leave_as_found.take() {
        execute::leave_server_as_found(&url, &layout, &mut index, &mut state).await;
    }
    let servers_described = servers.describe();
    let leftovers = servers.stop().await;
    executed?;
    let judged = Judged {
        layout: &layout,
        ttl,
        servers: servers_described,
        wall_ms,
    };
    let mut report = judge(&config, &state, &index, judged);
    let limits = TimelineLimits {
        requests_max: config.scenario.limit.requests_max,
        window_ms: config.scenario.limit.window_ms,
        layout: &layout,
    };
    write_timeline(&mut report, &index, &limits, &config.report_dir);
    write_report(&report, &config.report_dir)?;
    Ok(RunOutcome {
        report,
        report_dir: config.report_dir,
        leftovers,
        history_error,
    })
}

/// The key layout and TTL bound of the run. They are decided once the limiter has started;
/// a run cut short before that takes what the scenario and the configured limiter say.
fn keys_decided(config: &RunConfig, state: &RunState) -> (KeyLayout, TtlBound) {
    let limiter = state.limiter.as_ref().unwrap_or(&config.limiter);
    let layout = state
        .layout
        .clone()
        .unwrap_or_else(|| resolve_layout(&config.scenario.limit, limiter.as_ref()).0);
    let ttl = state.ttl.clone().unwrap_or_else(|| {
        TtlBound::resolve(
            &config.scenario.limit,
            &config.scenario.check,
            limiter.algorithm(),
            limiter.ttl_max_windows(),
        )
    });
    (layout, ttl)
}

/// What the report needs besides the configuration, the state and the history.
struct Judged<'a> {
    layout: &'a KeyLayout,
    ttl: TtlBound,
    servers: Vec<String>,
    wall_ms: u64,
}

/// Check the history against the scenario's invariants and put the report together.
fn judge(config: &RunConfig, state: &RunState, index: &HistoryIndex, judged: Judged<'_>) -> Report {
    let limiter = state.limiter.as_ref().unwrap_or(&config.limiter);
    let results = checker::check(&CheckInput {
        limit: &config.scenario.limit,
        config: &config.scenario.check,
        algorithm: limiter.algorithm(),
        layout: judged.layout,
        ttl: &judged.ttl,
        history: index,
    });
    let unseen = (!index.saw_limiter_keys()).then(|| checker::layout_hint(judged.layout, &index.foreign_keys()));
    let keys = KeysSummary::new(judged.layout, state.layout_note.clone(), judged.ttl, unseen);
    assemble::report(config, state, index, results, keys, judged.servers, judged.wall_ms)
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
    crate::scratch::create_report_dir(dir)?;
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
