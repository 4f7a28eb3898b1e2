//! The clients under test: rate limiters that talk to Redis through a [`Wire`], which
//! hands every gap between two round trips to the nemesis.

mod builtin;
mod error;
mod exec;
mod script;
mod template;
mod wire;

use std::path::PathBuf;
use std::sync::Arc;

use crate::backend::Conn;
use async_trait::async_trait;
use redis::RedisResult;

pub use crate::request::{KEYS_PER_REQUEST_MAX, RequestCtx, TripSummary, keys_at_gap, remember_keys};
pub use crate::scenario::Algorithm;
pub use builtin::{BUILTIN_NAMES, BUILTINS, Builtin, builtin};
pub use error::LimiterError;
pub use exec::{ExecSpec, PROTOCOL_VERSION};
pub use script::{ResultMapping, ScriptConvention, ScriptLimiter, decide, parse_convention};
pub use wire::Wire;

use crate::clock::RunClock;
use crate::error::SetupError;
use crate::history::Recorder;
use crate::keys::KeyLayout;
use crate::scenario::{Limit, TtlMax};

/// Every placeholder a sidecar template may use (the templates and their errors read it).
pub const PLACEHOLDERS: [&str; 11] = [
    "key",
    "identity",
    "requests_max",
    "window_ms",
    "window_s",
    "rate_per_s",
    "cost",
    "now_ms",
    "now_s",
    "now_us",
    "request_id",
];

/// A `--limiter` argument: a built-in name, `lua:PATH` or `exec:COMMAND`.
pub fn resolve(spec: &str) -> Result<Arc<dyn Limiter>, SetupError> {
    if spec.starts_with("lua:") {
        return Ok(Arc::new(ScriptLimiter::load(spec)?));
    }
    if spec.starts_with("exec:") {
        return Ok(Arc::new(ExecSpec::parse(spec)?));
    }
    builtin(spec).ok_or_else(|| SetupError::UnknownLimiter {
        name: spec.to_owned(),
        known: format!(
            "{}, lua:PATH (a Lua script), exec:COMMAND (an adapter process)",
            BUILTIN_NAMES.join(", ")
        ),
    })
}

/// Told the id of every request an adapter has replied to, as soon as the reply is read:
/// the request's round trips are over (the fault proxy stops putting new ones down to it).
pub type OnReply = std::sync::Arc<dyn Fn(u64) + Send + Sync>;

/// What a limiter may need to start for one run.
pub struct LimiterEnv {
    /// Where its Redis traffic must go (the fault proxy when it needs one; on a cluster, a
    /// seed node: the first node's proxy).
    pub redis_url: String,
    /// The server is a Redis Cluster: an adapter gets `REDIS_CLUSTER=1` and is to use its
    /// language's cluster client.
    pub cluster: bool,
    pub limit: Limit,
    pub recorder: Recorder,
    pub clock: RunClock,
    /// The run's report directory (an adapter's stderr goes there).
    pub report_dir: PathBuf,
    /// The run's id: an adapter carries it in its environment (`LIMITER_HARNESS_RUN`), so
    /// that what it starts can be found and stopped.
    pub run_id: String,
    /// The longest one strike of the scenario's faults can hold a request up
    /// ([`crate::scenario::Scenario::hold_up_ms_max`]): an adapter's reply may be that late.
    pub fault_hold_up: std::time::Duration,
    /// Called with each request id an adapter replies to (when the fault proxy runs).
    pub on_reply: Option<OnReply>,
}

/// What planting an identity's exhausted state came to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Plant {
    /// Written; what was done, e.g. "SET rl:0 20 (no TTL)".
    Planted(String),
    /// The limiter cannot say how its state looks: why, and what would let it.
    Unsupported(String),
}

/// Plant a counter over the limit, without a TTL, at `key`: the exhausted state of a limiter
/// that keeps its count as a string at the harness's key.
pub async fn plant_counter(conn: &mut Conn, key: &str, limit: &Limit) -> RedisResult<Plant> {
    let value = limit.requests_max * 2;
    let () = redis::cmd("SET").arg(key).arg(value).query_async(conn).await?;
    Ok(Plant::Planted(format!("SET {key} {value} (no TTL)")))
}

/// What a limiter decided for one request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Decision {
    pub allowed: bool,
    /// The counter value the decision was based on, when the limiter has one.
    pub count: Option<i64>,
}

/// A rate limiter under test. `acquire` decides one request and must send every command
/// through `wire`, one call per round trip, so that faults land between round trips.
#[async_trait]
pub trait Limiter: Send + Sync {
    fn name(&self) -> &str;
    /// The exact command sequence, as documentation for `list` and the report.
    fn commands(&self) -> &str;
    /// The most round trips one decision takes (1 means there is no gap to fault).
    fn round_trips_max(&self) -> u32;
    fn algorithm(&self) -> Algorithm;
    /// The oldest Redis version the command sequence works on, e.g. (7, 0) for `EXPIRE NX`.
    fn redis_version_min(&self) -> (u32, u32) {
        (2, 6)
    }
    /// Whether its Redis traffic can only be faulted in the harness's proxy (it is not
    /// harness code, so there is no [`Wire`] to strike in).
    fn needs_proxy(&self) -> bool {
        false
    }
    /// Start what the limiter needs for one run (an adapter process); `Some` is the
    /// instance to drive instead of this one.
    async fn start(&self, _env: &LimiterEnv) -> Result<Option<Arc<dyn Limiter>>, SetupError> {
        Ok(None)
    }
    /// Stop what [`Limiter::start`] started.
    async fn stop(&self) {}
    /// Know that the run is ending, before any instance is stopped: from now on, what
    /// started going away is the run's end, not a failure during it.
    fn stopping(&self) {}
    /// One-time setup on the server before traffic (e.g. SCRIPT LOAD).
    async fn prepare(&self, _conn: &mut Conn, _limit: &Limit) -> RedisResult<()> {
        Ok(())
    }
    /// The keys it keeps per identity, when it describes them itself (an exec adapter's
    /// hello, a Lua sidecar); `None`: the harness's key, `key_prefix` + identity.
    fn declared_keys(&self, _limit: &Limit) -> Option<KeyLayout> {
        None
    }
    /// How long its keys may live, when it says so: in windows (a token bucket kept for two
    /// refill periods declares 2) or in ms (a daily cap's 26 h); `None`: one window, the
    /// default for every algorithm.
    fn ttl_max(&self) -> Option<TtlMax> {
        None
    }
    /// Whether it keeps its count as an integer at the harness's key (planting an exhausted
    /// state is then a SET of a count over the limit).
    fn count_at_key(&self) -> bool {
        false
    }
    /// Whether the names of its keys may follow the wall clock (a daily cap's
    /// `cap:{org}:{day}`): a run then waits, when it must, to fit inside one calendar period
    /// (`runner/calendar.rs`). Only a limiter whose keys are exactly the ones the harness
    /// hands it (the built-ins: `key_prefix` + identity) says no; a script or an adapter may
    /// name its keys as it likes.
    fn keys_follow_the_clock(&self) -> bool {
        true
    }
    /// Write this limiter's own state for `identity` (whose harness key is `key`) as it is
    /// once the identity has used up its limit, with no TTL: what incident 1 leaves behind.
    async fn plant_exhausted(&self, conn: &mut Conn, _identity: u32, key: &str, limit: &Limit) -> RedisResult<Plant> {
        if self.count_at_key() {
            return plant_counter(conn, key, limit).await;
        }
        Ok(Plant::Unsupported(format!(
            "`{}` does not say how its exhausted state looks",
            self.name()
        )))
    }
    async fn acquire(&self, wire: &mut Wire<'_>, key: &str, limit: &Limit) -> RedisResult<Decision>;
}

/// Stop a run's limiter instances together. They share the run's id, and stopping one ends
/// every process carrying it (an adapter's children that left its group too): each must know
/// it is being stopped before any is killed, or the others' adapters would seem to die during
/// the run. Then they stop at the same time (each may wait for its adapter to exit).
pub async fn stop_all(limiters: &[Arc<dyn Limiter>]) {
    for limiter in limiters {
        limiter.stopping();
    }
    futures::future::join_all(limiters.iter().map(|l| l.stop())).await;
}
