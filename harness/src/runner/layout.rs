//! The limiter's keys in a run: which layout the run takes, and the state the scenario plants
//! on it before traffic.

use redis::aio::MultiplexedConnection;

use super::admin::Admin;
use super::error::SetupRefused;
use crate::backend::Conn;
use crate::clock::RunClock;
use crate::error::SetupError;
use crate::history::{Event, ProblemSource, Recorder};
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

/// The limiter writes identity `identity`'s exhausted state, on a limiter's connection.
async fn plant_exhausted(
    limiter: &dyn Limiter,
    admin: &Admin,
    identity: u32,
    key: &str,
    limit: &Limit,
) -> redis::RedisResult<Plant> {
    let mut conn = admin.keys.clone();
    limiter.plant_exhausted(&mut conn, identity, key, limit).await
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
    admin: &mut Admin,
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
            Setup::ExhaustedKey { .. } => plant_exhausted(limiter, admin, identity, &key, limit).await,
            Setup::Commands { commands, .. } => send_commands(&mut admin.keys, commands, identity, &key).await,
        };
        let done = match done {
            Ok(done) => done,
            Err(e) => {
                record_partial_plant(admin, layout, identity, recorder, clock).await;
                return Err(failed(e));
            }
        };
        let unplanted = |why: String| {
            recorder.record(Event::Problem {
                t_us: clock.now_us(),
                source: ProblemSource::Setup,
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
        let keys = scan_identity(&mut admin.node_conns(), layout, identity)
            .await
            .map_err(failed)?;
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

/// What a plant wrote before it failed is the run's: recorded, so that a run on a server the
/// harness did not start deletes it too.
async fn record_partial_plant(admin: &Admin, layout: &KeyLayout, identity: u32, recorder: &Recorder, clock: RunClock) {
    let written = scan_identity(&mut admin.node_conns(), layout, identity).await;
    for key in written.unwrap_or_default() {
        recorder.record(Event::Setup {
            t_us: clock.now_us(),
            key,
            detail: "written by a [[setup]] that then failed".into(),
        });
    }
}

/// Commands no `[[setup]]` may send to a server the harness did not start, whatever keys
/// they name: they act on the whole server (or on keys a script chooses).
const SERVER_WIDE: [&str; 26] = [
    "FLUSHALL",
    "FLUSHDB",
    "CONFIG",
    "SCRIPT",
    "FUNCTION",
    "DEBUG",
    "SHUTDOWN",
    "SWAPDB",
    "MOVE",
    "MIGRATE",
    "CLIENT",
    "ACL",
    "MODULE",
    "SAVE",
    "BGSAVE",
    "BGREWRITEAOF",
    "REPLICAOF",
    "SLAVEOF",
    "FAILOVER",
    "CLUSTER",
    "EVAL",
    "EVALSHA",
    "EVAL_RO",
    "EVALSHA_RO",
    "FCALL",
    "FCALL_RO",
];

/// On a server the harness did not start (`--backend url`), with or without
/// `--allow-reconfigure`, a `[[setup]]` command may touch only the run's own keys: every key
/// it names (as the server itself says, `COMMAND GETKEYS`) must be its identity's by the
/// layout. Commands acting on the whole server, keyless commands and commands naming any
/// other key are refused before anything is sent, naming the command and what is allowed.
pub async fn refuse_foreign_setup(
    setups: &[Setup],
    limit: &Limit,
    layout: &KeyLayout,
    admin: &mut MultiplexedConnection,
) -> Result<(), SetupError> {
    for setup in setups {
        let Setup::Commands { identity, commands } = setup else {
            continue;
        };
        let key = limit.key(*identity);
        for command in commands {
            let args = filled(command, *identity, &key);
            if let Err(why) = foreign(&args, *identity, layout, admin).await {
                return Err(SetupError::Usage(format!(
                    "[[setup]] for identity {identity}: `{}` is refused on a server the harness did not start: {why}\n  help: there a setup may write only the run's own keys — identity {identity}'s keys by the layout {} (e.g. `SET {key} 99`, `HSET {key} tokens 0`); run it on a server the harness starts (--backend process or container) for anything else",
                    args.join(" "),
                    layout.describe()
                )));
            }
        }
    }
    Ok(())
}

/// Why `args` may not be sent to a user's server for `identity`, if it may not.
async fn foreign(
    args: &[String],
    identity: u32,
    layout: &KeyLayout,
    admin: &mut MultiplexedConnection,
) -> Result<(), SetupRefused> {
    let name = args.first().map(|a| a.to_ascii_uppercase()).unwrap_or_default();
    if SERVER_WIDE.contains(&name.as_str()) {
        return Err(SetupRefused::ServerWide { command: name });
    }
    let mut getkeys = redis::cmd("COMMAND");
    getkeys.arg("GETKEYS");
    for arg in args {
        getkeys.arg(arg);
    }
    let keys: Vec<String> = getkeys.query_async(admin).await.map_err(SetupRefused::KeysUnknown)?;
    if keys.is_empty() {
        return Err(SetupRefused::NoKey);
    }
    match keys.into_iter().find(|k| !layout.is_key_of(k, identity)) {
        Some(key) => Err(SetupRefused::OtherKey { key, identity }),
        None => Ok(()),
    }
}

/// A `[[setup]]` command with `{key}` and `{identity}` filled in.
fn filled(command: &[String], identity: u32, key: &str) -> Vec<String> {
    command
        .iter()
        .map(|a| a.replace("{key}", key).replace("{identity}", &identity.to_string()))
        .collect()
}

/// `[[setup]] kind = "commands"`: each command with `{key}` and `{identity}` filled in.
async fn send_commands(
    admin: &mut Conn,
    commands: &[Vec<String>],
    identity: u32,
    key: &str,
) -> redis::RedisResult<Plant> {
    let mut sent = Vec::new();
    for command in commands {
        let args = filled(command, identity, key);
        let mut cmd = redis::cmd(&args[0]);
        for arg in &args[1..] {
            cmd.arg(arg);
        }
        let _: redis::Value = cmd.query_async(admin).await?;
        sent.push(args.join(" "));
    }
    Ok(Plant::Planted(sent.join("; ")))
}
