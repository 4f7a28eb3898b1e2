//! The limiter's keys in a run: which layout the run takes, and the state the scenario plants
//! on it before traffic.

use redis::aio::MultiplexedConnection;

use crate::clock::RunClock;
use crate::error::SetupError;
use crate::history::{Event, Recorder};
use crate::keys::KeyLayout;
use crate::limiter::{Limiter, Plant};
use crate::observer::scan_identity;
use crate::scenario::{Limit, Setup};

/// The run's key layout: `--keys` or the scenario's `[limit] keys` when given, else what the
/// limiter declares (an adapter's hello, a Lua sidecar), else `key_prefix` + identity. The
/// note says when the scenario overrode a different declaration.
pub fn resolve_layout(limit: &Limit, limiter: &dyn Limiter) -> (KeyLayout, Option<String>) {
    let declared = limiter.declared_keys(limit);
    match (&limit.keys, declared) {
        (Some(given), Some(declared)) if given.templates != declared.templates => (
            given.clone(),
            Some(format!(
                "{} ({}) overrides the keys the limiter declares ({})",
                given.source,
                given.describe(),
                declared.describe()
            )),
        ),
        (Some(given), _) => (given.clone(), None),
        (None, Some(declared)) => (declared, None),
        (None, None) => (KeyLayout::default_for(&limit.key_prefix, limit.identities), None),
    }
}

/// Write the scenario's `[[setup]]` state before traffic: an identity's exhausted state in the
/// limiter's own representation (the limiter writes it), or raw commands. The keys planted
/// are the identity's keys by the layout found afterwards. A setup the limiter cannot write,
/// or one that leaves no key of the layout, is a fatal problem: the run cannot pass, since
/// what the scenario is about never happened.
pub async fn plant(
    setups: &[Setup],
    limit: &Limit,
    limiter: &dyn Limiter,
    layout: &KeyLayout,
    admin: &mut MultiplexedConnection,
    recorder: &Recorder,
    clock: RunClock,
) -> Result<(), SetupError> {
    for setup in setups {
        let identity = setup.identity();
        let key = limit.key(identity);
        let failed = |e: redis::RedisError| SetupError::LimiterPrepare {
            limiter: limiter.name().to_owned(),
            reason: format!("planting identity {identity}'s [[setup]]: {e}"),
        };
        let done = match setup {
            Setup::ExhaustedKey { .. } => limiter.plant_exhausted(admin, identity, &key, limit).await,
            Setup::Commands { commands, .. } => send_commands(admin, commands, identity, &key).await,
        };
        let done = match done {
            Ok(done) => done,
            Err(e) => {
                // What a plant wrote before it failed is the run's: recorded, so that a run on
                // a server the harness did not start deletes it too.
                for key in scan_identity(admin, layout, identity).await.unwrap_or_default() {
                    recorder.record(Event::Setup {
                        t_us: clock.now_us(),
                        key,
                        detail: "written by a [[setup]] that then failed".into(),
                    });
                }
                return Err(failed(e));
            }
        };
        let unplanted = |why: String| {
            recorder.record(Event::Problem {
                t_us: clock.now_us(),
                source: "setup".into(),
                detail: why,
                fatal: true,
                noted: false,
            });
        };
        let detail = match done {
            Plant::Planted(detail) => detail,
            Plant::Unsupported(why) => {
                unplanted(format!(
                    "the scenario plants identity {identity}'s exhausted state, but {why}: give the adapter a `plant` message (docs/exec-protocol.md) or the Lua sidecar a `plant` list, or write the state with [[setup]] kind = \"commands\""
                ));
                continue;
            }
        };
        let keys = scan_identity(admin, layout, identity).await.map_err(failed)?;
        if keys.is_empty() {
            unplanted(format!(
                "the [[setup]] for identity {identity} ({detail}) left no key matching {}: describe the limiter's keys with `keys`",
                layout.describe()
            ));
        }
        for key in keys {
            recorder.record(Event::Setup {
                t_us: clock.now_us(),
                key,
                detail: detail.clone(),
            });
        }
    }
    Ok(())
}

/// `[[setup]] kind = "commands"`: each command with `{key}` and `{identity}` filled in.
async fn send_commands(
    admin: &mut MultiplexedConnection,
    commands: &[Vec<String>],
    identity: u32,
    key: &str,
) -> redis::RedisResult<Plant> {
    let mut sent = Vec::new();
    for command in commands {
        let args: Vec<String> = command
            .iter()
            .map(|a| a.replace("{key}", key).replace("{identity}", &identity.to_string()))
            .collect();
        let mut cmd = redis::cmd(&args[0]);
        for arg in &args[1..] {
            cmd.arg(arg);
        }
        let _: redis::Value = cmd.query_async(admin).await?;
        sent.push(args.join(" "));
    }
    Ok(Plant::Planted(sent.join("; ")))
}
