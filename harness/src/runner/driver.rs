//! The driver: sends the schedule's requests through the limiter, recording each request's
//! invocation and its one completion.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use tokio::task::JoinSet;
use tokio::time::Instant;

use super::progress::Progress;
use crate::backend::Conn;
use crate::clock::RunClock;
use crate::history::{Event, Outcome, PhaseEdge, Recorder};
use crate::keys::KeyLayout;
use crate::limiter::{Limiter, RequestCtx, Wire, remember_keys};
use crate::nemesis::{CacheFlood, GapHook};
use crate::observer::{ExpiryWatch, SampleNow};
use crate::proxy::InFlight;
use crate::scenario::{ClockSkew, Limit};
use crate::workload::{PhasePlan, PlannedRequest};

/// Open-loop phases stop launching (and wait) when this many requests are in flight.
const IN_FLIGHT_MAX: usize = 4096;

/// Everything one request needs, shared by every task of the run.
pub struct Driver {
    /// The limiter's instances (`[limit] instances`): request `r` goes to `instances[r.instance]`.
    pub instances: Vec<Arc<dyn Limiter>>,
    /// The instances whose clocks are off (`clock-skew`).
    pub clock_skews: Vec<ClockSkew>,
    pub limit: Limit,
    /// Which keys are the limiter's (for the nemesis in the gaps of the `Wire`).
    pub layout: KeyLayout,
    /// Gates requests while the nemesis strikes (`before_request`).
    pub hook: Arc<dyn GapHook>,
    /// Consulted between the limiter's round trips: the nemesis, or nothing when the fault
    /// proxy applies the rules instead.
    pub wire_hook: Arc<dyn GapHook>,
    /// Set when the limiter's traffic crosses the fault proxy: how it finds the request.
    pub inflight: Option<Arc<InFlight>>,
    pub recorder: Recorder,
    pub clock: RunClock,
    /// Client connections, a pool per instance; request `i` of a steady phase uses slot
    /// `i % len` of its instance's pool, worker `k` of a burst uses slot `k % len`. A
    /// connection the fault proxy closed (or lost) is replaced by a new one for the requests
    /// after it, as a client's pool would.
    pub conns: Vec<Vec<std::sync::Mutex<Conn>>>,
    /// Where `conns` connect.
    pub url: String,
    /// A cluster's nodes, when `conns` are cluster connections found through them.
    pub cluster: Option<Vec<String>>,
    /// `conns` are direct connections (each burst worker holds one of its own).
    pub direct: bool,
    pub progress: Progress,
    /// Asks for a sample of the limiter's keys when a quarter, half and three quarters of a
    /// phase's requests are decided, and at the end of every phase that sent requests.
    pub sample_now: SampleNow,
    /// When the identities' keys are due to expire (steady phases' `clear_of_expiry_ms`).
    pub expiry: Arc<ExpiryWatch>,
    /// The most round trips a completed request of the run took so far (0: none completed).
    pub trips_seen_max: AtomicUsize,
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
            PhasePlan::Steady {
                requests,
                duration_us,
                clear_of_expiry_us,
            } => {
                self.steady(index, requests, *duration_us, *clear_of_expiry_us, flood)
                    .await
            }
            PhasePlan::Burst {
                requests,
                concurrency,
                connections,
            } => self.burst(index, requests, *concurrency, *connections, flood).await,
            PhasePlan::Quiet { duration_us } => tokio::time::sleep(Duration::from_micros(*duration_us)).await,
        }
        if !plan.requests().is_empty() {
            self.sample_now.ask();
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
        clear_of_expiry_us: u64,
        flood: Option<Arc<CacheFlood>>,
    ) {
        let driver = Arc::clone(self);
        let marks = sample_marks(requests);
        pace(requests, duration_us, move |req| {
            let (driver, flood) = (Arc::clone(&driver), flood.clone());
            async move {
                if clear_of_expiry_us > 0 && driver.held_clear_of_expiry(req.instance) {
                    driver.expiry.clear(req.identity, clear_of_expiry_us).await;
                }
                let slot = req.id as usize % driver.conns[0].len();
                let mut conn = driver.conn(req.instance, slot);
                driver.one(&mut conn, slot, req, phase, flood.as_deref()).await;
                if marks.contains(&req.id) {
                    driver.sample_now.ask();
                }
            }
        })
        .await;
    }

    async fn burst(
        self: &Arc<Self>,
        phase: usize,
        requests: &[PlannedRequest],
        concurrency: u32,
        connections: u32,
        flood: Option<Arc<CacheFlood>>,
    ) {
        let marks = sample_marks(requests);
        let requests: Arc<[PlannedRequest]> = requests.into();
        let next = Arc::new(AtomicUsize::new(0));
        // Every client starts at once: the phase's concurrency is real from its first request.
        let start = Arc::new(tokio::sync::Barrier::new(concurrency as usize));
        let mut workers = JoinSet::new();
        for worker in 0..concurrency as usize {
            let driver = Arc::clone(self);
            let (requests, next, flood) = (Arc::clone(&requests), Arc::clone(&next), flood.clone());
            let start = Arc::clone(&start);
            let slot = worker % (connections as usize).min(self.conns[0].len());
            workers.spawn(async move {
                start.wait().await;
                while let Some(&req) = requests.get(next.fetch_add(1, Ordering::Relaxed)) {
                    let mut conn = driver.conn(req.instance, slot);
                    driver.one(&mut conn, slot, req, phase, flood.as_deref()).await;
                    if marks.contains(&req.id) {
                        driver.sample_now.ask();
                    }
                }
            });
        }
        while workers.join_next().await.is_some() {}
    }

    fn conn(&self, instance: u32, slot: usize) -> Conn {
        self.conns[instance as usize][slot]
            .lock()
            .expect("connection slot")
            .clone()
    }

    /// Replace a connection that was closed under the client.
    async fn reconnect(&self, instance: u32, slot: usize) {
        let connect = super::admin::connect_limiter(&self.url, self.cluster.as_deref(), self.direct);
        if let Ok(Ok(fresh)) = tokio::time::timeout(Duration::from_secs(1), connect).await {
            *self.conns[instance as usize][slot].lock().expect("connection slot") = fresh;
        }
    }

    /// What instance `instance`'s clock says now, in Unix ms: the machine's clock (the
    /// server's too, on loopback), moved by the instance's `clock-skew`.
    fn now_ms(&self, instance: u32) -> u64 {
        let wall_ms = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_millis() as u64);
        let elapsed_ms = self.clock.now_us() / 1000;
        let off_ms: i64 = self
            .clock_skews
            .iter()
            .filter(|s| s.instance == instance)
            .map(|s| s.off_ms(elapsed_ms))
            .sum();
        wall_ms.saturating_add_signed(off_ms)
    }

    /// Whether a steady phase's `clear_of_expiry_ms` holds the requests of instance
    /// `instance`. The hold keeps a window from ending between a request's round trips by
    /// chance; a limiter that decides in one round trip has no such gap, so it is not held —
    /// holding it would only shape its traffic (a GCRA's key expires when it may admit again:
    /// held until then, an identity sends at the limiter's pace, never above it, and
    /// `admits-up-to-limit` has nothing to judge). One round trip as the limiter declares it,
    /// or, for an exec adapter that does not, as every request of the run so far took.
    fn held_clear_of_expiry(&self, instance: u32) -> bool {
        match self.instances[instance as usize].round_trips_max() {
            0 | 1 => false,
            u32::MAX => self.trips_seen_max.load(Ordering::Relaxed) != 1,
            _ => true,
        }
    }

    /// One request: invoke, decide through the limiter, complete; then the phase's cache writes.
    async fn one(&self, conn: &mut Conn, slot: usize, req: PlannedRequest, phase: usize, flood: Option<&CacheFlood>) {
        let key = self.limit.key(req.identity);
        self.hook.before_request(&request_ctx(&req, key.clone(), 0)).await;
        self.recorder.record(Event::Invoke {
            id: req.id,
            t_us: self.clock.now_us(),
            identity: req.identity,
            ordinal: req.ordinal,
            key: key.clone(),
            phase,
            instance: req.instance,
        });
        let ctx = request_ctx(&req, key, self.now_ms(req.instance));
        if let Some(inflight) = &self.inflight {
            inflight.begin(&ctx);
        }
        let mut wire = Wire::new(conn, self.wire_hook.as_ref(), &ctx, &self.layout);
        let limiter = &self.instances[req.instance as usize];
        let decided = limiter.acquire(&mut wire, &ctx.key, &self.limit).await;
        let (mut trips, mut keys) = wire.finish();
        // Holds of strikes in the proxy last until the completion is in the history.
        let ended = self.inflight.as_ref().map(|f| f.end(&ctx)).unwrap_or_default();
        if trips.is_empty() {
            trips = ended.trips;
        }
        remember_keys(&mut keys, ended.keys);
        self.trips_seen_max.fetch_max(trips.len(), Ordering::Relaxed);
        if self.held_clear_of_expiry(req.instance) {
            for key in &keys {
                self.expiry.named(req.identity, key);
            }
        }
        let lost = matches!(&decided, Err(e) if e.is_connection_dropped() || e.is_unrecoverable_error());
        let (outcome, count, error) = match decided {
            Ok(d) => (Outcome::of(d.allowed), d.count, None),
            Err(e) => (classify(&e), None, Some(e.to_string())),
        };
        self.recorder.record(Event::Complete {
            id: req.id,
            t_us: self.clock.now_us(),
            outcome,
            count,
            trips,
            keys,
            error,
        });
        drop(ended.holds);
        if lost {
            self.reconnect(req.instance, slot).await;
        }
        if let Some(flood) = flood {
            flood.write_for_request().await;
        }
        self.progress.request_done();
    }
}

fn request_ctx(req: &PlannedRequest, key: String, now_ms: u64) -> RequestCtx {
    RequestCtx {
        id: req.id,
        identity: req.identity,
        ordinal: req.ordinal,
        key,
        instance: req.instance,
        now_ms,
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

/// The requests after which a phase asks for a sample of the limiter's keys: its quarter,
/// half and three-quarter marks (none in a phase of fewer than 4). A phase is sampled at
/// the same points of its traffic whatever the machine's speed: a burst that ends within
/// one sample interval (`[check] sample_interval_ms`) is still seen in its middle, not
/// only before its first request and after its last — where a key that its own traffic
/// keeps deleting (eviction under a cache's flood) may happen to be gone.
fn sample_marks(requests: &[PlannedRequest]) -> [u64; 3] {
    let n = requests.len();
    if n < 4 {
        return [u64::MAX; 3]; // No request has that id.
    }
    [n / 4, n / 2, 3 * n / 4].map(|i| requests[i].id)
}

/// An open-loop phase's pacing: each request is started at its offset from the phase's
/// start whatever the replies (`send` in a task of its own), except that one identity is
/// one client: its request waits for its previous one to finish. Returns when the phase's
/// time is over and every request is done.
pub(super) async fn pace<F, Fut>(requests: &[PlannedRequest], duration_us: u64, send: F)
where
    F: Fn(PlannedRequest) -> Fut,
    Fut: std::future::Future<Output = ()> + Send + 'static,
{
    let start = Instant::now();
    let mut tasks = JoinSet::new();
    let mut clients: HashMap<u32, Arc<tokio::sync::Mutex<()>>> = HashMap::new();
    for &req in requests {
        tokio::time::sleep_until(start + Duration::from_micros(req.offset_us)).await;
        while tasks.len() >= IN_FLIGHT_MAX {
            tasks.join_next().await;
        }
        while tasks.try_join_next().is_some() {}
        let client = Arc::clone(clients.entry(req.identity).or_default());
        let sending = send(req);
        tasks.spawn(async move {
            let _turn = client.lock().await;
            sending.await;
        });
    }
    tokio::time::sleep_until(start + Duration::from_micros(duration_us)).await;
    while tasks.join_next().await.is_some() {}
}

#[cfg(test)]
mod pace_tests {
    //! The pacing on tokio's paused clock: exact, instant and without a server.

    use std::sync::Mutex;

    use super::*;

    #[test]
    fn a_phase_is_sampled_at_its_quarter_half_and_three_quarter_marks() {
        let requests: Vec<PlannedRequest> = (0..8).map(|i| at(100 + i, 0, 0)).collect();
        assert_eq!(sample_marks(&requests), [102, 104, 106]);
        assert!(sample_marks(&requests[..3]).iter().all(|&m| m == u64::MAX), "none in 3");
    }

    fn at(id: u64, identity: u32, offset_ms: u64) -> PlannedRequest {
        PlannedRequest {
            id,
            identity,
            ordinal: id + 1,
            offset_us: offset_ms * 1000,
            instance: 0,
        }
    }

    /// When each request started, in ms from the phase's start, with each request taking
    /// `busy_ms` of identity 0's time.
    async fn started(requests: &[PlannedRequest], duration_ms: u64, busy_ms: u64) -> (Vec<(u64, u64)>, u64) {
        let begin = Instant::now();
        let seen = Arc::new(Mutex::new(Vec::new()));
        let log = Arc::clone(&seen);
        pace(requests, duration_ms * 1000, move |req| {
            let log = Arc::clone(&log);
            async move {
                log.lock().unwrap().push((req.id, begin.elapsed().as_millis() as u64));
                if req.identity == 0 {
                    tokio::time::sleep(Duration::from_millis(busy_ms)).await;
                }
            }
        })
        .await;
        let mut seen = seen.lock().unwrap().clone();
        seen.sort();
        (seen, begin.elapsed().as_millis() as u64)
    }

    #[tokio::test(start_paused = true)]
    async fn requests_start_at_their_offsets_and_the_phase_lasts_its_duration() {
        let plan = [at(0, 0, 0), at(1, 1, 10), at(2, 0, 20), at(3, 1, 30)];
        let (seen, took) = started(&plan, 100, 0).await;
        assert_eq!(seen, vec![(0, 0), (1, 10), (2, 20), (3, 30)]);
        assert_eq!(took, 100);
    }

    #[tokio::test(start_paused = true)]
    async fn an_identity_waits_for_its_previous_reply_the_others_do_not() {
        // Identity 0's requests take 25 ms: its second (due at 10 ms) starts at 25 ms, its
        // third (due at 20 ms) at 50 ms; identity 1's starts on time.
        let plan = [at(0, 0, 0), at(1, 0, 10), at(2, 1, 15), at(3, 0, 20)];
        let (seen, took) = started(&plan, 40, 25).await;
        assert_eq!(seen, vec![(0, 0), (1, 25), (2, 15), (3, 50)]);
        assert_eq!(took, 75, "the phase ends when its last request is done");
    }
}
