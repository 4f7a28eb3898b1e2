//! The driver: sends the schedule's requests through the limiter, recording each request's
//! invocation and its one completion.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use redis::aio::MultiplexedConnection;
use tokio::task::JoinSet;
use tokio::time::Instant;

use super::progress::Progress;
use crate::clock::RunClock;
use crate::history::{Event, Outcome, PhaseEdge, Recorder};
use crate::limiter::{Limiter, RequestCtx, Wire};
use crate::nemesis::{CacheFlood, GapHook};
use crate::scenario::Limit;
use crate::workload::{PhasePlan, PlannedRequest};

/// Open-loop phases stop launching (and wait) when this many requests are in flight.
const IN_FLIGHT_MAX: usize = 4096;

/// Everything one request needs, shared by every task of the run.
pub struct Driver {
    pub limiter: Arc<dyn Limiter>,
    pub limit: Limit,
    pub hook: Arc<dyn GapHook>,
    pub recorder: Recorder,
    pub clock: RunClock,
    /// Client connections; request `i` of a steady phase uses `conns[i % len]`, worker `k`
    /// of a burst uses `conns[k % len]`.
    pub conns: Vec<MultiplexedConnection>,
    pub progress: Progress,
}

impl Driver {
    /// Run one phase to its end: every request sent has completed when this returns.
    pub async fn run_phase(
        self: &Arc<Self>,
        index: usize,
        name: &str,
        plan: &PhasePlan,
        flood: Option<Arc<CacheFlood>>,
    ) {
        self.recorder.record(Event::Phase {
            t_us: self.clock.now_us(),
            index,
            name: name.to_owned(),
            edge: PhaseEdge::Start,
        });
        self.progress.phase(name);
        match plan {
            PhasePlan::Steady { requests, duration_us } => self.steady(index, requests, *duration_us, flood).await,
            PhasePlan::Burst {
                requests,
                concurrency,
                connections,
            } => self.burst(index, requests, *concurrency, *connections, flood).await,
            PhasePlan::Quiet { duration_us } => tokio::time::sleep(Duration::from_micros(*duration_us)).await,
        }
        self.recorder.record(Event::Phase {
            t_us: self.clock.now_us(),
            index,
            name: name.to_owned(),
            edge: PhaseEdge::End,
        });
    }

    /// Open-loop: each request is sent at its time whatever the replies, but each identity
    /// is one client, which sends its requests one after another: a request whose time has
    /// come waits for the identity's previous reply (concurrency within one identity is
    /// what burst phases are for).
    async fn steady(
        self: &Arc<Self>,
        phase: usize,
        requests: &[PlannedRequest],
        duration_us: u64,
        flood: Option<Arc<CacheFlood>>,
    ) {
        let start = Instant::now();
        let mut tasks = JoinSet::new();
        let mut clients: HashMap<u32, Arc<tokio::sync::Mutex<()>>> = HashMap::new();
        for &req in requests {
            tokio::time::sleep_until(start + Duration::from_micros(req.offset_us)).await;
            while tasks.len() >= IN_FLIGHT_MAX {
                tasks.join_next().await;
            }
            while tasks.try_join_next().is_some() {}
            let driver = Arc::clone(self);
            let flood = flood.clone();
            let client = Arc::clone(clients.entry(req.identity).or_default());
            let mut conn = self.conns[req.id as usize % self.conns.len()].clone();
            tasks.spawn(async move {
                let _turn = client.lock().await;
                driver.one(&mut conn, req, phase, flood.as_deref()).await;
            });
        }
        tokio::time::sleep_until(start + Duration::from_micros(duration_us)).await;
        while tasks.join_next().await.is_some() {}
    }

    async fn burst(
        self: &Arc<Self>,
        phase: usize,
        requests: &[PlannedRequest],
        concurrency: u32,
        connections: u32,
        flood: Option<Arc<CacheFlood>>,
    ) {
        let requests: Arc<[PlannedRequest]> = requests.into();
        let next = Arc::new(AtomicUsize::new(0));
        // Every client starts at once: the phase's concurrency is real from its first request.
        let start = Arc::new(tokio::sync::Barrier::new(concurrency as usize));
        let mut workers = JoinSet::new();
        for worker in 0..concurrency as usize {
            let driver = Arc::clone(self);
            let (requests, next, flood) = (Arc::clone(&requests), Arc::clone(&next), flood.clone());
            let start = Arc::clone(&start);
            let mut conn = self.conns[worker % (connections as usize).min(self.conns.len())].clone();
            workers.spawn(async move {
                start.wait().await;
                while let Some(&req) = requests.get(next.fetch_add(1, Ordering::Relaxed)) {
                    driver.one(&mut conn, req, phase, flood.as_deref()).await;
                }
            });
        }
        while workers.join_next().await.is_some() {}
    }

    /// One request: invoke, decide through the limiter, complete; then the phase's cache writes.
    async fn one(
        &self,
        conn: &mut MultiplexedConnection,
        req: PlannedRequest,
        phase: usize,
        flood: Option<&CacheFlood>,
    ) {
        let key = self.limit.key(req.identity);
        let ctx = RequestCtx {
            id: req.id,
            identity: req.identity,
            ordinal: req.ordinal,
            key: key.clone(),
        };
        self.hook.before_request(&ctx).await;
        self.recorder.record(Event::Invoke {
            id: req.id,
            t_us: self.clock.now_us(),
            identity: req.identity,
            ordinal: req.ordinal,
            key: key.clone(),
            phase,
        });
        let ctx = RequestCtx {
            id: req.id,
            identity: req.identity,
            ordinal: req.ordinal,
            key,
        };
        let mut wire = Wire::new(conn, self.hook.as_ref(), &ctx);
        let decided = self.limiter.acquire(&mut wire, &ctx.key, &self.limit).await;
        let trips = wire.into_trips();
        let (outcome, count, error) = match decided {
            Ok(d) => (
                if d.allowed { Outcome::Allowed } else { Outcome::Rejected },
                d.count,
                None,
            ),
            Err(e) => (classify(&e), None, Some(e.to_string())),
        };
        self.recorder.record(Event::Complete {
            id: req.id,
            t_us: self.clock.now_us(),
            outcome,
            count,
            trips,
            error,
        });
        if let Some(flood) = flood {
            flood.write_for_request().await;
        }
        self.progress.request_done();
    }
}

/// A server's error reply, or a refused connection, decided nothing (Error); a lost or
/// late reply may have taken effect (Indeterminate).
fn classify(e: &redis::RedisError) -> Outcome {
    if e.is_connection_refusal() {
        Outcome::Error
    } else if e.is_timeout() || e.is_connection_dropped() || e.is_io_error() {
        Outcome::Indeterminate
    } else {
        Outcome::Error
    }
}
