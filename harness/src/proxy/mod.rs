//! The fault proxy: a Redis-protocol-aware TCP proxy between any client and the server.
//!
//! It parses the client's commands (RESP2/RESP3 arrays or inline, pipelines, MULTI/EXEC,
//! EVALSHA) and the server's replies (including RESP3 pushes), and for every round trip —
//! the commands a client sent together — asks its [`ProxyHook`] what to do: forward,
//! hold the reply, drop the reply and close, answer with an injected error, or reset the
//! connection. The hook of a run is [`faults::NemesisHook`]: the same [`crate::nemesis`]
//! rules the built-in limiters' [`crate::limiter::Wire`] consults, applied at command
//! boundaries for clients the harness does not control. A malformed command or reply
//! closes that one connection with a reason; the proxy and the run go on.
//!
//! What the proxy buffers is bounded across connections, not only per frame: every
//! connection counts its buffers, its parsed round trip and its queue of replies to come in
//! one [`budget`](Proxy::start_with_budget) shared by all ([`DEFAULT_BUDGET`], 256 MiB). A
//! connection whose next growth would go over it is closed, and the hook is told why
//! ([`ProxyHook::connection_problem`]); the others go on.

mod budget;
mod conn;
mod faults;
mod inflight;
mod topology;
mod wirelog;

use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use async_trait::async_trait;
use tokio::net::TcpListener;
use tokio::sync::watch;
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;

use budget::Budget;
pub use budget::DEFAULT_BUDGET;
pub use faults::NemesisHook;
pub use inflight::InFlight;
pub use resp::Command;
pub use topology::Addresses;
pub use wirelog::{WIRE_LOG_MAX, WireLog};

/// What the proxy does with one command of a round trip.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Action {
    Forward,
    /// Forward, then hold the reply this long.
    DelayReply(Duration),
    /// Forward (the command executes), drop the reply and close the connection.
    DropReply,
    /// Do not forward; answer with these bytes (an error reply).
    Inject(Vec<u8>),
    /// Close the connection instead of forwarding.
    Reset,
}

/// Decides, per round trip, what the proxy does with each command.
#[async_trait]
pub trait ProxyHook: Send + Sync {
    /// Called with the commands one client sent together, before any is forwarded; may
    /// take its time (a stall, a forced expiry). Returns one action per command.
    async fn before_forward(&self, conn: u64, trip: &[Command]) -> Vec<Action>;
    /// A connection was closed because of a protocol problem, or (connection 0) the listener
    /// could not accept one (logged in the history).
    fn connection_problem(&self, _conn: u64, _detail: String) {}
    /// A reply (a redirection, a topology listing) named `address`, a node no proxy of the
    /// run stands in front of: a client that follows it leaves the proxies. Called once per
    /// address in a run, for the first [`topology::SIGHTED_MAX`] addresses, then once more
    /// saying that no more are listed.
    fn unknown_node(&self, _conn: u64, _address: &str) {}
}

/// Forwards everything (the benchmark's baseline for the proxy's own cost).
#[derive(Debug)]
pub struct PassThrough;

#[async_trait]
impl ProxyHook for PassThrough {
    async fn before_forward(&self, _conn: u64, trip: &[Command]) -> Vec<Action> {
        vec![Action::Forward; trip.len()]
    }
}

/// A running proxy; stopped (every connection closed) by [`Proxy::stop`] or on drop.
pub struct Proxy {
    addr: SocketAddr,
    upstream_url: String,
    stop: CancellationToken,
    task: Option<std::thread::JoinHandle<()>>,
    connections: Arc<AtomicU64>,
    budget: Arc<Budget>,
    /// Whether replicas' streams through this proxy are held.
    replication: watch::Sender<bool>,
    /// Node addresses its replies name, and their proxies' ([`Proxy::name_proxies`]).
    addresses: Arc<OnceLock<Addresses>>,
}

impl Proxy {
    /// Listen on 127.0.0.1 (a free port) in front of the server at `upstream_url`, with the
    /// default memory budget ([`DEFAULT_BUDGET`]).
    pub async fn start(upstream_url: &str, hook: Arc<dyn ProxyHook>) -> std::io::Result<Self> {
        Self::start_with_budget(upstream_url, hook, DEFAULT_BUDGET).await
    }

    /// [`Proxy::start`] with a memory budget of `budget` bytes: the most the proxy buffers at
    /// once, all connections together.
    pub async fn start_with_budget(
        upstream_url: &str,
        hook: Arc<dyn ProxyHook>,
        budget: usize,
    ) -> std::io::Result<Self> {
        let upstream = host_port(upstream_url).ok_or_else(|| {
            std::io::Error::new(
                std::io::ErrorKind::InvalidInput,
                format!("the fault proxy needs a redis://HOST:PORT server, not `{upstream_url}`"),
            )
        })?;
        let listener = std::net::TcpListener::bind("127.0.0.1:0")?;
        listener.set_nonblocking(true)?;
        let addr = listener.local_addr()?;
        let stop = CancellationToken::new();
        let connections = Arc::new(AtomicU64::new(0));
        let budget = Arc::new(Budget::new(budget));
        let (replication, held) = watch::channel(false);
        let addresses = Arc::new(OnceLock::new());
        // A thread and a single-threaded runtime of its own: both directions of every
        // connection are polled on one core without cross-thread wake-ups, and the proxy
        // does not compete with the run's own tasks for the run's workers.
        let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
        let accept = Accept {
            upstream,
            hook,
            stop: stop.clone(),
            connections: Arc::clone(&connections),
            shared: conn::Shared {
                budget: Arc::clone(&budget),
                hold: held,
                addresses: Arc::clone(&addresses),
            },
        };
        let task = std::thread::Builder::new()
            .name("fault-proxy".into())
            .spawn(move || runtime.block_on(accept.run(listener)))?;
        Ok(Self {
            addr,
            upstream_url: upstream_url.to_owned(),
            stop,
            task: Some(task),
            connections,
            budget,
            replication,
            addresses,
        })
    }

    /// From now on the cluster's redirections and topology replies (`MOVED`, `ASK`,
    /// `CLUSTER SLOTS`/`SHARDS`/`NODES`) through this proxy name each node in `addresses` by
    /// its proxy's address, so that clients stay inside the proxies of a cluster whose nodes
    /// announce their own. Set once; later calls change nothing.
    pub fn name_proxies(&self, addresses: Addresses) {
        let _ = self.addresses.set(addresses.answered_by(&self.upstream()));
    }

    /// Hold the replication streams through this proxy (a cluster's replicas sync through
    /// their primary's proxy): the replicas fall behind, and what the primary acknowledges
    /// meanwhile reaches no replica until [`Proxy::release_replication`].
    pub fn hold_replication(&self) {
        self.replication.send_replace(true);
    }

    pub fn release_replication(&self) {
        self.replication.send_replace(false);
    }

    /// The switch [`Proxy::hold_replication`] turns, for a fault that holds it from elsewhere.
    pub fn replication_hold(&self) -> watch::Sender<bool> {
        self.replication.clone()
    }

    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// The server's `host:port`, as its URL gives it.
    pub fn upstream(&self) -> String {
        host_port(&self.upstream_url).unwrap_or_default()
    }

    /// The server's URL with the proxy's address in place of the server's.
    pub fn url(&self) -> String {
        replace_host_port(&self.upstream_url, &self.addr.to_string())
    }

    /// Client connections accepted so far.
    pub fn connections(&self) -> u64 {
        self.connections.load(Ordering::Relaxed)
    }

    /// The memory budget, in bytes.
    pub fn budget(&self) -> usize {
        self.budget.limit()
    }

    /// Bytes the proxy holds now, all connections together, as counted in its budget.
    pub fn buffered_bytes(&self) -> usize {
        self.budget.used()
    }

    /// The most bytes the proxy has held at once since it started; never over the budget.
    pub fn buffered_bytes_peak(&self) -> usize {
        self.budget.peak()
    }

    pub async fn stop(mut self) {
        self.stop.cancel();
        if let Some(task) = self.task.take() {
            let _ = tokio::task::spawn_blocking(move || task.join()).await;
        }
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        self.stop.cancel();
    }
}

/// The proxy's accepting loop, on its own thread and runtime.
struct Accept {
    upstream: String,
    hook: Arc<dyn ProxyHook>,
    stop: CancellationToken,
    connections: Arc<AtomicU64>,
    shared: conn::Shared,
}

impl Accept {
    async fn run(self, listener: std::net::TcpListener) {
        let Ok(listener) = TcpListener::from_std(listener) else {
            return;
        };
        let mut live = JoinSet::new();
        let mut backoff = AcceptBackoff::default();
        loop {
            tokio::select! {
                () = self.stop.cancelled() => break,
                accepted = listener.accept() => {
                    let client = match accepted {
                        Ok((client, _)) => {
                            backoff.accepted();
                            client
                        }
                        Err(e) => {
                            // Out of file descriptors (EMFILE, ENFILE) or another failure: the
                            // connection waits in the backlog. Retrying at once would spin a
                            // core; wait, and keep serving the connections there are.
                            let (pause, first) = backoff.failed();
                            if first {
                                self.hook.connection_problem(
                                    0,
                                    format!("the proxy could not accept a connection ({e}); it waits and tries again (noted once)"),
                                );
                            }
                            tokio::select! {
                                () = self.stop.cancelled() => break,
                                () = tokio::time::sleep(pause) => {}
                            }
                            continue;
                        }
                    };
                    let id = self.connections.fetch_add(1, Ordering::Relaxed) + 1;
                    live.spawn(conn::serve(
                        client,
                        self.upstream.clone(),
                        Arc::clone(&self.hook),
                        id,
                        self.stop.clone(),
                        self.shared.clone(),
                    ));
                }
                Some(_) = live.join_next(), if !live.is_empty() => {}
            }
        }
        live.shutdown().await;
    }
}

/// How long the accepting loop waits after a failed accept: 5 ms, doubling to 200 ms while
/// they keep failing; the first failure of a run is the one noted.
#[derive(Debug, Default)]
struct AcceptBackoff {
    pause: Option<std::time::Duration>,
    noted: bool,
}

impl AcceptBackoff {
    const FIRST: std::time::Duration = std::time::Duration::from_millis(5);
    const MAX: std::time::Duration = std::time::Duration::from_millis(200);

    fn accepted(&mut self) {
        self.pause = None;
    }

    /// The pause before the next try, and whether this failure is the first noted.
    fn failed(&mut self) -> (std::time::Duration, bool) {
        let pause = self.pause.map_or(Self::FIRST, |p| (p * 2).min(Self::MAX));
        self.pause = Some(pause);
        let first = !self.noted;
        self.noted = true;
        (pause, first)
    }
}

/// `redis://[user:pass@]HOST:PORT[/db]` → `HOST:PORT`.
fn host_port(url: &str) -> Option<String> {
    let rest = url.strip_prefix("redis://")?;
    let authority = rest.split('/').next()?;
    let host_port = authority.rsplit('@').next()?;
    host_port.contains(':').then(|| host_port.to_owned())
}

fn replace_host_port(url: &str, with: &str) -> String {
    let Some(rest) = url.strip_prefix("redis://") else {
        return format!("redis://{with}");
    };
    let (authority, path) = rest.split_at(rest.find('/').unwrap_or(rest.len()));
    let credentials = authority
        .rsplit_once('@')
        .map(|(c, _)| format!("{c}@"))
        .unwrap_or_default();
    format!("redis://{credentials}{with}{path}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn failed_accepts_back_off_and_are_noted_once() {
        let mut backoff = AcceptBackoff::default();
        let pauses: Vec<(u64, bool)> = (0..8)
            .map(|_| {
                let (p, first) = backoff.failed();
                (p.as_millis() as u64, first)
            })
            .collect();
        assert_eq!(
            pauses,
            vec![
                (5, true),
                (10, false),
                (20, false),
                (40, false),
                (80, false),
                (160, false),
                (200, false),
                (200, false)
            ]
        );
        backoff.accepted();
        assert_eq!(backoff.failed(), (std::time::Duration::from_millis(5), false));
    }

    #[test]
    fn urls_keep_credentials_and_database() {
        assert_eq!(host_port("redis://127.0.0.1:6379").as_deref(), Some("127.0.0.1:6379"));
        assert_eq!(
            host_port("redis://u:p@10.0.0.1:7000/3").as_deref(),
            Some("10.0.0.1:7000")
        );
        assert_eq!(host_port("unix:///tmp/x.sock"), None);
        assert_eq!(
            replace_host_port("redis://u:p@10.0.0.1:7000/3", "127.0.0.1:5"),
            "redis://u:p@127.0.0.1:5/3"
        );
        assert_eq!(replace_host_port("redis://h:1", "127.0.0.1:5"), "redis://127.0.0.1:5");
    }
}
