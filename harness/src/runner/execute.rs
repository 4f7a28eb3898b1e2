//! The traffic part of a run, from connecting to the final audit.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

use redis::aio::MultiplexedConnection;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use super::RunConfig;
use super::admin::{Admin, connect_limiter};
use super::calendar;
use super::driver::Driver;
use super::layout::{plant, refuse_foreign_setup, resolve_layout};
use super::progress::Progress;
use super::setup::Servers;
use crate::backend::{Conn, configure, connect, connect_cluster, key_slot, restore, unlink};
use crate::clock::RunClock;
use crate::error::SetupError;
use crate::history::{Event, HistoryIndex, ProblemSource, Recorder, ServerRole};
use crate::keys::KeyLayout;
use crate::limiter::{Limiter, LimiterEnv, OnReply};
use crate::nemesis::{CACHE_PREFIX, CacheFlood, GapHook, Nemesis, NoFaults, ServerNemesis};
use crate::observer::{
    ExpiryWatch, SampleNow, ServerInfo, keyspace_events_enabled, read_stats, sample_keys, scan_layout, server_info,
    spawn_sampler, subscribe_keyspace, watch_role,
};
use crate::proxy::{InFlight, NemesisHook, Proxy, ProxyHook, WireLog};
use crate::scenario::{CacheTarget, Fault, PhaseKind};
use crate::workload::{Schedule, plan};

/// How long to keep listening for keyspace notifications after the last request.
const TRAILING_EVENTS: Duration = Duration::from_millis(100);

/// What the run needs to clean up after itself, filled in as it goes (so an interrupted
/// run still has what it got to). Everything the report says comes from the history.
#[derive(Default)]
pub struct RunState {
    pub floods: Vec<Arc<CacheFlood>>,
    /// Set once the run has written to a server it did not start.
    pub leave_as_found: Option<LeaveAsFound>,
    /// Settings the run replaced on such a server, node by node: its URL and the old values.
    pub previous_settings: Vec<(String, Vec<(String, String)>)>,
    /// The limiter instances driven, once started (adapter processes, whose hello may name
    /// the limiter and declare its algorithm and keys; or the configured built-in).
    pub limiters: Vec<Arc<dyn Limiter>>,
    /// The keys the run took for the limiter's, once decided.
    pub layout: Option<KeyLayout>,
    /// The run's id (its owner's pid first), which names what it leaves on disk.
    pub run_id: String,
    /// How long the run waits to fit inside one calendar period, set before it waits: that
    /// time does not count against the deadline.
    pub calendar_wait_ms: Arc<std::sync::atomic::AtomicU64>,
}

/// A server the harness did not start, which the run leaves as it found it.
pub struct LeaveAsFound {
    /// Its URL, or a cluster's nodes' (primaries first).
    pub nodes: Vec<String>,
    /// Whether it is a cluster (of one node or more): its keys are deleted a slot at a time.
    pub cluster: bool,
}

/// Background tasks (one per node observed) that are aborted if the run is dropped (interrupted).
struct Background(Vec<JoinHandle<u64>>);

impl Background {
    /// Wait for each task; the sum of what they counted.
    async fn finish(mut self) -> u64 {
        let mut total = 0;
        for handle in std::mem::take(&mut self.0) {
            total += handle.await.unwrap_or(0);
        }
        total
    }
}

impl Drop for Background {
    fn drop(&mut self) {
        for handle in self.0.drain(..) {
            handle.abort();
        }
    }
}

/// The limiter as started for this run, and how its traffic reaches the server.
struct Link {
    /// Every instance (`[limit] instances`); the first speaks for the limiter
    /// ([`Link::limiter`]).
    instances: Vec<Arc<dyn Limiter>>,
    /// The fault proxies: none, one in front of the server, or one per node of a cluster.
    proxies: Vec<Proxy>,
    inflight: Option<Arc<InFlight>>,
    /// Where the limiter's connections go (the proxy, or the server).
    url: String,
    /// A cluster's nodes: the limiter's connections are cluster connections, found through them.
    cluster: Option<Vec<String>>,
}

pub async fn execute(
    config: &RunConfig,
    servers: &Servers,
    recorder: &Recorder,
    clock: RunClock,
    state: &mut RunState,
) -> Result<(), SetupError> {
    // Long: the run's steps in their order, each a named function; the order is the point.
    let scenario = &config.scenario;
    let periods_ms = calendar::periods_ms()?;
    let url = servers.limiter.url().to_owned();
    let mut admin = Admin::connect(servers.limiter.as_ref()).await?;
    let connect_err = |e: redis::RedisError| SetupError::Connect {
        url: url.clone(),
        reason: e.to_string(),
    };
    let info = server_info(&mut admin.server).await.map_err(connect_err)?;
    check_version(config, &info, recorder, clock);

    // The limiter starts first: an adapter's hello may describe its keys, which everything
    // after (the proxy, the observer, the setup, the checks) needs.
    // The nemesis's own connection to the limiter's keys: on a cluster, routed by slot.
    let control: Conn = match admin.cluster.as_deref() {
        Some(seeds) => connect_cluster(seeds).await?.into(),
        None => connect(&url).await?.into(),
    };
    let nemesis = Arc::new(Nemesis::new(scenario, control, recorder.clone(), clock));
    let link = start_limiter_client(config, &url, admin.cluster.as_deref(), &nemesis, recorder, clock, state).await?;
    let layout = decide_keys(config, &link, recorder, clock, state);

    let (events_on, settings) = prepare_server(config, &mut admin, &url, &layout, recorder, clock, state).await?;
    recorder.record(Event::Server {
        t_us: clock.now_us(),
        server: ServerRole::Limiter,
        version: info.version.clone(),
        settings,
        at: servers.limiter.describe(),
    });
    if !events_on {
        let detail = "keyspace notifications are off on this server (notify-keyspace-events lacks Kgxe) and --allow-reconfigure was not given: expirations and evictions cannot be seen";
        note(recorder, clock, ProblemSource::Keyspace, detail);
    }
    let mut cache_conn = match &servers.cache {
        Some(cache) => Some(configure_cache(config, cache.as_ref(), recorder, clock).await?),
        None => None,
    };
    // From the planted state on, the limiter's keys may carry the date: no midnight inside
    // (a limiter whose keys are the harness's own cannot name them by the clock: no wait).
    if link.limiter().keys_follow_the_clock() {
        let (before_ms, after_ms) = calendar_span_ms(scenario);
        calendar::keep_inside_one_period(before_ms, after_ms, &periods_ms, &state.calendar_wait_ms).await;
    }
    prepare_state(config, &link, &layout, &mut admin, recorder, clock).await?;
    let replies_before = match admin.cluster {
        Some(_) if !config.backend.owns_servers() => cluster_reply_counts(&admin).await,
        _ => Vec::new(),
    };
    // The servers' INFO counters before traffic (the report takes the difference to the end).
    recorder.record(
        read_stats(&mut admin.node_conns(), ServerRole::Limiter, clock.now_us())
            .await
            .map_err(connect_err)?,
    );
    if let Some(conn) = cache_conn.as_mut() {
        recorder.record(
            read_stats(std::slice::from_mut(conn), ServerRole::Cache, clock.now_us())
                .await
                .map_err(connect_err)?,
        );
    }

    let stop = CancellationToken::new();
    let expiry = Arc::new(ExpiryWatch::new(config.scenario.limit.window_ms, clock).ask(&url, admin.cluster.as_deref()));
    let (keyspace, sampler, sample_now) =
        observe(config, &admin, &layout, events_on, recorder, clock, &stop, &expiry).await?;
    let floods = make_floods(config, &url, servers, state).await?;
    let schedule = plan(&config.scenario, config.seed);
    let traffic = Traffic {
        schedule,
        nemesis,
        server_nemesis: ServerNemesis::new(
            scenario,
            &layout,
            servers.limiter.as_ref(),
            events_on,
            recorder.clone(),
            clock,
        )
        .with_replication_holds(link.proxies.iter().map(Proxy::replication_hold).collect()),
        layout: &layout,
        floods: &floods,
        sample_now,
        expiry,
    };
    drive(config, &link, traffic, recorder, clock).await?;
    crate::limiter::stop_all(&link.instances).await;
    for proxy in link.proxies {
        proxy.stop().await;
    }
    if scenario.faults.iter().any(|f| {
        matches!(
            f.kind(),
            crate::scenario::FaultKind::ServerRestart | crate::scenario::FaultKind::Failover
        )
    }) {
        // The admin connection did not survive the restart, or was closed on the demoted
        // node; through the endpoint it reaches the server the limiter's keys are on now.
        admin.reconnect(servers.limiter.as_ref()).await?;
    }

    final_audit(&admin, &layout, recorder, clock).await;
    if admin.cluster.is_some() {
        record_cluster_replies(&admin, &replies_before, recorder, clock).await;
    }
    tokio::time::sleep(TRAILING_EVENTS).await;
    stop.cancel();
    sampler.finish().await;
    keyspace.finish().await;
    for flood in &state.floods {
        recorder.record(flood.event(clock.now_us()));
    }
    finish_stats(&mut admin.node_conns(), cache_conn.as_mut(), recorder, clock).await;
    Ok(())
}

/// How far a run reaches back (an instance's clock behind) and ahead (its phases, a burst at
/// 1 ms a request, [`calendar::SPAN_MARGIN_MS`], a clock ahead) from the start of its setup.
fn calendar_span_ms(scenario: &crate::scenario::Scenario) -> (u64, u64) {
    let phases_ms: u64 = scenario
        .phases
        .iter()
        .map(|p| p.kind.planned_ms().unwrap_or_else(|| p.kind.planned_requests()))
        .sum();
    let run_ms = phases_ms.saturating_add(calendar::SPAN_MARGIN_MS);
    let (mut behind_ms, mut ahead_ms) = (0u64, 0u64);
    for fault in &scenario.faults {
        if let Fault::ClockSkew(skew) = fault {
            for off_ms in [skew.off_ms(0), skew.off_ms(run_ms)] {
                behind_ms = behind_ms.max(off_ms.min(0).unsigned_abs());
                ahead_ms = ahead_ms.max(off_ms.max(0).unsigned_abs());
            }
        }
    }
    (behind_ms, run_ms.saturating_add(ahead_ms))
}

/// The limiter's own preparation (loading a script, say), then the scenario's planted state.
async fn prepare_state(
    config: &RunConfig,
    link: &Link,
    layout: &KeyLayout,
    admin: &mut Admin,
    recorder: &Recorder,
    clock: RunClock,
) -> Result<(), SetupError> {
    let scenario = &config.scenario;
    link.limiter()
        .prepare(&mut admin.keys.clone(), &scenario.limit)
        .await
        .map_err(|e| SetupError::LimiterPrepare {
            limiter: link.limiter().name().to_owned(),
            reason: e.to_string(),
        })?;
    if !config.backend.owns_servers() {
        // A user's server: every [[setup]] command is checked before any is sent.
        refuse_foreign_setup(&scenario.setup, &scenario.limit, layout, &mut admin.server).await?;
    }
    plant(
        &scenario.setup,
        &scenario.limit,
        link.limiter().as_ref(),
        layout,
        admin,
        recorder,
        clock,
    )
    .await
}

fn problem(recorder: &Recorder, clock: RunClock, source: ProblemSource, detail: &str, fatal: bool) {
    recorder.record(problem_event(clock, source, detail, fatal));
}

/// A problem the report lists for a reviewer, though the run can still be judged.
fn note(recorder: &Recorder, clock: RunClock, source: ProblemSource, detail: &str) {
    recorder.record(note_event(clock, source, detail));
}

fn problem_event(clock: RunClock, source: ProblemSource, detail: &str, fatal: bool) -> Event {
    Event::Problem {
        t_us: clock.now_us(),
        source,
        detail: detail.into(),
        fatal,
        noted: fatal,
    }
}

fn note_event(clock: RunClock, source: ProblemSource, detail: &str) -> Event {
    Event::Problem {
        t_us: clock.now_us(),
        source,
        detail: detail.into(),
        fatal: false,
        noted: true,
    }
}

impl Link {
    /// The first instance: its name, keys and preparation are the limiter's.
    fn limiter(&self) -> &Arc<dyn Limiter> {
        &self.instances[0]
    }
}

/// Start the fault proxy when the limiter or the faults need it, then the limiter (an
/// adapter process is spawned here and says hello). On a cluster, one proxy per node, each
/// node announcing its proxy's port, so that the cluster's redirections and topology
/// replies send clients through the proxies (the bus stays direct).
async fn start_limiter_client(
    config: &RunConfig,
    url: &str,
    cluster: Option<&[String]>,
    nemesis: &Arc<Nemesis>,
    recorder: &Recorder,
    clock: RunClock,
    state: &mut RunState,
) -> Result<Link, SetupError> {
    let wanted = config.via_proxy
        || nemesis.needs_proxy()
        || config.limiter.needs_proxy()
        || config.scenario.holds_replication();
    let (proxies, inflight) = if wanted {
        let inflight = Arc::new(InFlight::new());
        // Only a replication hold needs the nodes to announce their proxies (a replica syncs
        // with its primary at the address the primary announces).
        let announce = config.backend.owns_servers() && config.scenario.holds_replication();
        let proxies = start_proxies(url, cluster, announce, nemesis, &inflight, recorder, clock).await?;
        (proxies, Some(inflight))
    } else {
        (Vec::new(), None)
    };
    let proxy_urls: Vec<String> = proxies.iter().map(Proxy::url).collect();
    let client_url = proxy_urls.first().cloned().unwrap_or_else(|| url.to_owned());
    // One start per instance: an adapter process each; a built-in is the same code, with
    // connections of its own per instance (the driver's).
    for _ in 0..config.scenario.limit.instances {
        let limiter = config
            .limiter
            .start(&LimiterEnv {
                redis_url: client_url.clone(),
                cluster: cluster.is_some(),
                limit: config.scenario.limit.clone(),
                recorder: recorder.clone(),
                clock,
                report_dir: config.report_dir.clone(),
                run_id: state.run_id.clone(),
                fault_hold_up: Duration::from_millis(config.scenario.hold_up_ms_max()),
                on_reply: inflight.as_ref().map(|f| {
                    let inflight = Arc::clone(f);
                    Arc::new(move |id| inflight.answered(id)) as OnReply
                }),
            })
            .await?
            .unwrap_or_else(|| Arc::clone(&config.limiter));
        state.limiters.push(limiter);
    }
    // On a cluster the driver's cluster connections find the nodes through the proxies too.
    let cluster = cluster.map(|nodes| {
        if proxy_urls.is_empty() {
            nodes.to_vec()
        } else {
            proxy_urls
        }
    });
    Ok(Link {
        instances: state.limiters.clone(),
        proxies,
        inflight,
        url: client_url,
        cluster,
    })
}

/// The fault proxy in front of the server; on a cluster one per node (primaries first), each
/// rewriting the nodes' addresses in the cluster's replies to the proxies' (with `announce`,
/// each node also announces its proxy's port). One wire log and one account of requests in
/// flight for all of them.
async fn start_proxies(
    url: &str,
    cluster: Option<&[String]>,
    announce: bool,
    nemesis: &Arc<Nemesis>,
    inflight: &Arc<InFlight>,
    recorder: &Recorder,
    clock: RunClock,
) -> Result<Vec<Proxy>, SetupError> {
    let wire = Arc::new(WireLog::default());
    let nodes: Vec<&str> = cluster.map_or_else(|| vec![url], |c| c.iter().map(String::as_str).collect());
    let mut proxies = Vec::new();
    for (index, node) in nodes.iter().enumerate() {
        let hook = Arc::new(NemesisHook {
            nemesis: Arc::clone(nemesis),
            inflight: Arc::clone(inflight),
            recorder: recorder.clone(),
            clock,
            wire: Arc::clone(&wire),
            node: cluster.map(|_| index as u32),
            listening: std::sync::OnceLock::new(),
        });
        let proxy = Proxy::start(node, Arc::clone(&hook) as Arc<dyn ProxyHook>)
            .await
            .map_err(|e| SetupError::ServerStart {
                backend: "fault proxy".into(),
                reason: e.to_string(),
            })?;
        let _ = hook.listening.set(proxy.addr());
        proxies.push(proxy);
    }
    if let Some(cluster) = cluster {
        // The nodes' redirections and topology replies name the proxies: the proxies rewrite
        // the nodes' addresses in them. The harness's own connections, which do not cross
        // the proxies, keep seeing the nodes themselves. With `announce` each node also
        // announces its proxy's port, so that its replicas sync through it (a replication
        // hold needs that; only on a cluster the harness started).
        let mut addresses = crate::proxy::Addresses::new(proxies.iter().map(|p| (p.upstream(), p.addr())));
        for node in cluster {
            addresses = addresses.with_hostnames(&cluster_nodes(node).await?);
        }
        for proxy in &proxies {
            proxy.name_proxies(addresses.clone());
        }
        if announce {
            let ports: Vec<u16> = proxies.iter().map(|p| p.addr().port()).collect();
            crate::backend::announce_ports(cluster, &ports).await?;
        }
    }
    Ok(proxies)
}

/// The `CLUSTER NODES` of the node at `url`: its view of the cluster, hostnames included.
async fn cluster_nodes(url: &str) -> Result<String, SetupError> {
    let mut conn = crate::backend::connect(url).await?;
    redis::cmd("CLUSTER")
        .arg("NODES")
        .query_async(&mut conn)
        .await
        .map_err(|e| SetupError::Connect {
            url: crate::backend::redacted(url),
            reason: format!("CLUSTER NODES: {e}"),
        })
}

/// The run's key layout, now that the limiter has said what it declares: the proxy
/// attributes commands by it from here on, and the history records it with the limiter.
fn decide_keys(
    config: &RunConfig,
    link: &Link,
    recorder: &Recorder,
    clock: RunClock,
    state: &mut RunState,
) -> KeyLayout {
    let (layout, note) = resolve_layout(&config.scenario.limit, link.limiter().as_ref());
    if let Some(inflight) = &link.inflight {
        inflight.set_layout(layout.clone());
    }
    let addrs: Vec<String> = link.proxies.iter().map(|p| p.addr().to_string()).collect();
    let proxy = match addrs.len() {
        0 => None,
        1 => Some(format!(
            "the limiter's traffic went through the fault proxy at {} (faults at command boundaries; wire log in the history)",
            addrs[0]
        )),
        _ => Some(format!(
            "the limiter's traffic went through a fault proxy per cluster node, at {} (node by node, the cluster's replies naming the proxies; faults at command boundaries; wire log in the history, each line with its node)",
            addrs.join(", ")
        )),
    };
    recorder.record(super::limiter_event(
        link.limiter().as_ref(),
        (layout.clone(), note),
        proxy,
        clock,
    ));
    state.layout = Some(layout.clone());
    layout
}

/// On a server the harness did not start, refuse one that already holds the limiter's keys;
/// configure the server when the run may. Returns whether keyspace notifications are on,
/// and the settings applied.
async fn prepare_server(
    config: &RunConfig,
    admin: &mut Admin,
    url: &str,
    layout: &KeyLayout,
    recorder: &Recorder,
    clock: RunClock,
    state: &mut RunState,
) -> Result<(bool, Vec<String>), SetupError> {
    let owned = config.backend.owns_servers();
    // Every node the run touches: the server, or the cluster's nodes (primaries first).
    let nodes = admin.cluster.clone().unwrap_or_else(|| vec![url.to_owned()]);
    if !owned {
        refuse_existing_keys(&mut admin.node_conns(), url, layout).await?;
        // From here on the run writes to a server it did not start: whatever happens next
        // (an error, Ctrl-C), `run` deletes the run's keys and restores the settings.
        state.leave_as_found = Some(LeaveAsFound {
            nodes: nodes.clone(),
            cluster: admin.cluster.is_some(),
        });
    }
    let may_configure = owned || config.allow_reconfigure;
    let events_on = may_configure || keyspace_events_everywhere(admin).await;
    if !owned && may_configure {
        warn_server_wide(&config.scenario.server, recorder, clock);
    }
    if !may_configure {
        return Ok((events_on, Vec::new()));
    }
    let mut settings = Vec::new();
    // A cluster's nodes all take the same settings, replicas too (a failover promotes one).
    for (index, node) in nodes.iter().enumerate() {
        // The values replaced on a server the harness did not start are saved before each
        // change: if the run is killed, `clean` puts them back.
        let saved_as = crate::backend::settings_key(&state.run_id, index);
        let save = |previous: &[(String, String)]| -> Result<(), SetupError> {
            if owned {
                return Ok(());
            }
            crate::backend::save_settings(&saved_as, node, previous).map_err(|e| {
                SetupError::io(
                    "cannot save the server's settings (nothing was changed) in",
                    std::env::temp_dir(),
                    e,
                )
            })
        };
        let mut conn = if index == 0 {
            admin.server.clone()
        } else {
            connect(node).await?
        };
        let mut previous = Vec::new();
        let applied = configure(&mut conn, &config.scenario.server, true, &mut previous, &save).await;
        if !owned {
            state.previous_settings.push((node.clone(), previous));
        }
        let applied = applied?;
        if index == 0 {
            settings = applied;
        }
    }
    Ok((events_on, settings))
}

/// Whether every node holding keys already publishes the keyspace notifications the
/// observer needs (on servers the run may not reconfigure).
async fn keyspace_events_everywhere(admin: &Admin) -> bool {
    for mut conn in admin.node_conns() {
        if !keyspace_events_enabled(&mut conn).await.unwrap_or(false) {
            return false;
        }
    }
    true
}

/// `maxmemory` and its policy are the whole server's, not the database's: on a server the
/// harness did not start they may evict keys that have nothing to do with the run.
fn warn_server_wide(server: &crate::scenario::ServerConfig, recorder: &Recorder, clock: RunClock) {
    let wide: Vec<&str> = server
        .settings
        .keys()
        .map(String::as_str)
        .filter(|name| name.starts_with("maxmemory"))
        .collect();
    if wide.is_empty() {
        return;
    }
    let verb = if wide.len() == 1 { "applies" } else { "apply" };
    let warning = format!(
        "--allow-reconfigure: {} {verb} to the whole server, every database: while the run lasts, keys that are not the run's may be evicted",
        wide.join(", ")
    );
    eprintln!("warning: {warning}");
    note(recorder, clock, ProblemSource::Reconfigure, &warning);
}

/// Keyspace notifications (when on) and the periodic sampler, for the layout's keys.
#[allow(clippy::too_many_arguments)]
async fn observe(
    config: &RunConfig,
    admin: &Admin,
    layout: &KeyLayout,
    events_on: bool,
    recorder: &Recorder,
    clock: RunClock,
    stop: &CancellationToken,
    expiry: &Arc<ExpiryWatch>,
) -> Result<(Background, Background, SampleNow), SetupError> {
    let mut keyspace = Background(Vec::new());
    // Each node notifies of its own keys. On a cluster every node is listened to, each while
    // it is a primary (a failover promotes a replica).
    let listened: Vec<&String> = match &admin.cluster {
        Some(all) => all.iter().collect(),
        None => admin.nodes.iter().map(|(url, _)| url).collect(),
    };
    for url in listened.into_iter().filter(|_| events_on) {
        let role = match admin.cluster {
            Some(_) => {
                let (primary, task) = watch_role(url, stop.clone()).await?;
                keyspace.0.push(task);
                Some(primary)
            }
            None => None,
        };
        let watch = (Arc::clone(expiry), role);
        match subscribe_keyspace(url, layout.clone(), recorder.clone(), clock, stop.clone(), watch).await {
            Ok(handle) => keyspace.0.push(handle),
            Err(e) => {
                let detail = format!("could not subscribe to keyspace notifications on {url}: {e}");
                note(recorder, clock, ProblemSource::Keyspace, &detail);
            }
        }
    }
    let interval = Duration::from_millis(config.scenario.check.sample_interval_ms);
    let mut nodes = Vec::new();
    for (url, _) in &admin.nodes {
        nodes.push((url.clone(), connect(url).await?));
    }
    let cluster = admin.cluster.is_some();
    let (sampler, sample_now) = spawn_sampler(
        nodes,
        cluster,
        layout.clone(),
        interval,
        recorder.clone(),
        clock,
        stop.clone(),
    );
    Ok((keyspace, Background(vec![sampler]), sample_now))
}

/// The audit after the last request completed: nothing is in flight.
async fn final_audit(admin: &Admin, layout: &KeyLayout, recorder: &Recorder, clock: RunClock) {
    let t_start_us = clock.now_us();
    match sample_keys(&mut admin.node_conns(), layout, admin.cluster.is_some()).await {
        Ok(keys) => recorder.record(Event::Sample {
            t_start_us,
            t_end_us: clock.now_us(),
            final_audit: true,
            keys,
        }),
        Err(e) => problem(
            recorder,
            clock,
            ProblemSource::FinalAudit,
            &format!("the final audit of the limiter's keys failed (server lost?): {e}"),
            true,
        ),
    }
}

/// Each primary's redirections and cluster errors so far (`INFO errorstats`), by node.
async fn cluster_reply_counts(admin: &Admin) -> Vec<(String, BTreeMap<String, u64>)> {
    let mut counts = Vec::new();
    for (url, conn) in &admin.nodes {
        let info: redis::RedisResult<String> = redis::cmd("INFO")
            .arg("errorstats")
            .query_async(&mut conn.clone())
            .await;
        if let Ok(info) = info {
            counts.push((url.clone(), cluster_replies(&info)));
        }
    }
    counts
}

/// Each primary's redirections and cluster errors during the run, for the report: the
/// counts since `before` (taken before traffic on a cluster the harness did not start, whose
/// counters hold its own past; empty on one it started).
async fn record_cluster_replies(
    admin: &Admin,
    before: &[(String, BTreeMap<String, u64>)],
    recorder: &Recorder,
    clock: RunClock,
) {
    for (url, mut replies) in cluster_reply_counts(admin).await {
        let earlier = before.iter().find(|(node, _)| *node == url).map(|(_, counts)| counts);
        for (kind, count) in &mut replies {
            *count = count.saturating_sub(earlier.and_then(|e| e.get(kind)).copied().unwrap_or(0));
        }
        replies.retain(|_, count| *count > 0);
        recorder.record(Event::ClusterReplies {
            t_us: clock.now_us(),
            // `host:port`, without the URL's credentials or database.
            node: url
                .split_once("://")
                .map_or(url.as_str(), |(_, rest)| rest)
                .split('/')
                .next()
                .and_then(|authority| authority.rsplit('@').next())
                .unwrap_or_default()
                .to_owned(),
            replies,
        });
    }
}

/// The cluster's own replies in an `INFO errorstats` section (`errorstat_ASK:count=12`).
fn cluster_replies(info: &str) -> BTreeMap<String, u64> {
    const KINDS: [&str; 5] = ["MOVED", "ASK", "TRYAGAIN", "CROSSSLOT", "CLUSTERDOWN"];
    info.lines()
        .filter_map(|line| {
            let (kind, rest) = line.strip_prefix("errorstat_")?.split_once(':')?;
            let count = rest
                .split(',')
                .find_map(|f| f.strip_prefix("count="))?
                .trim()
                .parse()
                .ok()?;
            KINDS.contains(&kind).then(|| (kind.to_owned(), count))
        })
        .collect()
}

/// The start of the note a run records when its limiter needs a newer server than it got
/// (the matrix explains such a cell with it).
pub const NEEDS_NEWER_SERVER: &str = "needs a newer server:";

/// A limiter that declares a newer Redis than the server speaks still runs: what its
/// commands do on this server (an error on every request, for `EXPIRE … NX` on 6.2) is
/// what a deployment on it would see, judged like any other run. The report says why.
fn check_version(config: &RunConfig, info: &ServerInfo, recorder: &Recorder, clock: RunClock) {
    let need = config.limiter.redis_version_min();
    if info.redis_api >= need {
        return;
    }
    let detail = format!(
        "{NEEDS_NEWER_SERVER} limiter `{}` uses commands of Redis {}.{} and later, and the server is {} (Redis {}.{} commands): expect them to fail; run it on a newer server, e.g. `--server redis-7.0`",
        config.limiter.name(),
        need.0,
        need.1,
        info.version,
        info.redis_api.0,
        info.redis_api.1
    );
    note(recorder, clock, ProblemSource::ServerVersion, &detail);
}

async fn refuse_existing_keys(
    nodes: &mut [MultiplexedConnection],
    url: &str,
    layout: &KeyLayout,
) -> Result<(), SetupError> {
    let existing = scan_layout(nodes, layout).await.map_err(|e| SetupError::Connect {
        url: url.to_owned(),
        reason: format!("could not check for existing keys matching {}: {e}", layout.describe()),
    })?;
    if existing.is_empty() {
        return Ok(());
    }
    Err(SetupError::UrlRefused {
        url: url.to_owned(),
        reasons: format!(
            "  - {} key(s) matching the limiter's keys {} already exist (e.g. `{}`): the run would judge data it did not write (set another key_prefix in [limit], or other keys)",
            existing.len(),
            layout.describe(),
            existing[0]
        ),
    })
}

async fn configure_cache(
    config: &RunConfig,
    cache: &dyn crate::backend::ServerHandle,
    recorder: &Recorder,
    clock: RunClock,
) -> Result<MultiplexedConnection, SetupError> {
    let url = cache.url();
    let mut conn = connect(url).await?;
    let cache_config = config.scenario.cache_server.clone().unwrap_or_default();
    let settings = configure(&mut conn, &cache_config, false, &mut Vec::new(), &|_| Ok(())).await?;
    let info = server_info(&mut conn).await.map_err(|e| SetupError::Connect {
        url: url.to_owned(),
        reason: e.to_string(),
    })?;
    recorder.record(Event::Server {
        t_us: clock.now_us(),
        server: ServerRole::Cache,
        version: info.version,
        settings,
        at: cache.describe(),
    });
    Ok(conn)
}

async fn make_floods(
    config: &RunConfig,
    url: &str,
    servers: &Servers,
    state: &mut RunState,
) -> Result<BTreeMap<String, Arc<CacheFlood>>, SetupError> {
    let mut floods = BTreeMap::new();
    for fault in &config.scenario.faults {
        let Fault::MemoryPressure(spec) = fault else { continue };
        let (target_url, role) = match (spec.target, &servers.cache) {
            (CacheTarget::CacheServer, Some(cache)) => (cache.url().to_owned(), ServerRole::Cache),
            _ => (url.to_owned(), ServerRole::Limiter),
        };
        let prefix = if config.backend.owns_servers() {
            CACHE_PREFIX.to_owned()
        } else {
            format!("{CACHE_PREFIX}{}:", state.run_id)
        };
        let flood = Arc::new(CacheFlood::new(spec.clone(), role, connect(&target_url).await?, prefix));
        state.floods.push(Arc::clone(&flood));
        floods.insert(spec.phase.clone(), flood);
    }
    Ok(floods)
}

/// What the traffic needs besides the limiter.
struct Traffic<'a> {
    schedule: Schedule,
    nemesis: Arc<Nemesis>,
    server_nemesis: ServerNemesis<'a>,
    layout: &'a KeyLayout,
    floods: &'a BTreeMap<String, Arc<CacheFlood>>,
    sample_now: SampleNow,
    expiry: Arc<ExpiryWatch>,
}

/// Send the whole schedule, phase by phase.
async fn drive(
    config: &RunConfig,
    link: &Link,
    traffic: Traffic<'_>,
    recorder: &Recorder,
    clock: RunClock,
) -> Result<(), SetupError> {
    let Traffic {
        schedule,
        nemesis,
        server_nemesis,
        layout,
        floods,
        sample_now,
        expiry,
    } = traffic;
    let scenario = &config.scenario;
    let direct = link.cluster.is_none() && workers_own_connections(scenario);
    let conns = driver_conns(scenario, &link.url, link.cluster.as_deref(), direct).await?;
    let progress = Progress::new(schedule.total_requests(), config.show_progress);
    let wire_hook: Arc<dyn GapHook> = if link.inflight.is_some() {
        Arc::new(NoFaults)
    } else {
        Arc::clone(&nemesis) as Arc<dyn GapHook>
    };
    let driver = Arc::new(Driver {
        instances: link.instances.clone(),
        clock_skews: scenario
            .faults
            .iter()
            .filter_map(|f| match f {
                Fault::ClockSkew(skew) => Some(*skew),
                _ => None,
            })
            .collect(),
        limit: scenario.limit.clone(),
        layout: layout.clone(),
        hook: nemesis,
        wire_hook,
        inflight: link.inflight.clone(),
        recorder: recorder.clone(),
        clock,
        conns,
        url: link.url.clone(),
        cluster: link.cluster.clone(),
        direct,
        progress: progress.clone(),
        sample_now,
        expiry,
        trips_seen_max: Default::default(),
    });
    for (index, (phase, plan)) in scenario.phases.iter().zip(&schedule.phases).enumerate() {
        let ended = CancellationToken::new();
        let run = async {
            driver
                .run_phase(index, &phase.name, plan, floods.get(&phase.name).cloned())
                .await;
            ended.cancel();
        };
        tokio::join!(run, server_nemesis.strike_in(&phase.name, &ended));
    }
    progress.finish();
    Ok(())
}

/// Whether every request of the run is sent by a burst worker with a connection of its own:
/// every phase that sends requests is a burst with `concurrency <= connections` (worker `k`
/// uses connection `k`). The driver's connections are then direct, as each of
/// redis-benchmark's clients is: no connection task between a worker and its socket. Steady
/// phases (any identity's request on any connection, each at its time, whatever is in
/// flight) and bursts whose workers share connections multiplex.
fn workers_own_connections(scenario: &crate::scenario::Scenario) -> bool {
    scenario.phases.iter().all(|p| match p.kind {
        PhaseKind::Burst {
            concurrency,
            connections,
            ..
        } => concurrency <= connections,
        PhaseKind::Steady { .. } => false,
        PhaseKind::Quiet { .. } => true,
    })
}

/// The driver's connections: per limiter instance, as many as the widest burst (at least 4);
/// on a cluster, cluster connections.
async fn driver_conns(
    scenario: &crate::scenario::Scenario,
    url: &str,
    cluster: Option<&[String]>,
    direct: bool,
) -> Result<Vec<Vec<std::sync::Mutex<Conn>>>, SetupError> {
    let pool = scenario
        .phases
        .iter()
        .filter_map(|p| match p.kind {
            PhaseKind::Burst { connections, .. } => Some(connections as usize),
            _ => None,
        })
        .max()
        .unwrap_or(1)
        .max(4);
    let instances = scenario.limit.instances as usize;
    let conns: Vec<Conn> =
        futures::future::try_join_all((0..pool * instances).map(|_| connect_limiter(url, cluster, direct))).await?;
    let mut conns = conns.into_iter();
    Ok((0..instances)
        .map(|_| conns.by_ref().take(pool).map(std::sync::Mutex::new).collect())
        .collect())
}

/// The servers' `INFO` counters at the end (the report takes the difference to the start).
async fn finish_stats(
    admin: &mut [MultiplexedConnection],
    cache: Option<&mut MultiplexedConnection>,
    recorder: &Recorder,
    clock: RunClock,
) {
    if let Ok(end) = read_stats(admin, ServerRole::Limiter, clock.now_us()).await {
        recorder.record(end);
    }
    if let Some(conn) = cache
        && let Ok(end) = read_stats(std::slice::from_mut(conn), ServerRole::Cache, clock.now_us()).await
    {
        recorder.record(end);
    }
}

/// On a server the harness did not start: delete the keys the run created — by name, never
/// by pattern: the limiter keys its requests named and the setup planted, the cache entries
/// its faults wrote — and put back any setting it changed (only possible with
/// --allow-reconfigure). Keys under the layout that no command of the run named are left
/// alone ([`unnamed_keys`]): those of identities the run never used were written by someone
/// else, and the run cannot be judged (a fatal problem names them). Called by
/// [`super::run`] on every way out once the run has written to such a server, after the
/// history is closed.
pub async fn leave_server_as_found(
    server: &LeaveAsFound,
    layout: &KeyLayout,
    events: &[Event],
    state: &mut RunState,
    clock: RunClock,
) -> Vec<Event> {
    let index = HistoryIndex::new(events.to_vec(), layout);
    let mut after = Vec::new();
    let mut noted = |detail: String| after.push(note_event(clock, ProblemSource::LeaveAsFound, &detail));
    let (strangers, unclaimed) = unnamed_keys(layout, &index);
    if !unclaimed.is_empty() {
        noted(format!(
            "left on the server: keys under the layout that no command of the run named (built inside a script, or by a request cut short): {} — delete them if they are the limiter's",
            some_of(&unclaimed)
        ));
    }
    // In the history: the nodes' URLs without their passwords.
    let scrubbed = |text: String| {
        server.nodes.iter().fold(text, |text, url| {
            text.replace(url.as_str(), &crate::backend::redacted(url))
        })
    };
    let named: Vec<String> = index.by_key.keys().chain(index.planted.keys()).cloned().collect();
    for e in delete_keys(server, &named, &state.floods).await {
        noted(scrubbed(format!("could not delete the run's keys: {e}")));
    }
    for (at, (node, previous)) in std::mem::take(&mut state.previous_settings).into_iter().enumerate() {
        let failed: Vec<String> = match connect(&node).await {
            Ok(mut conn) => restore(&mut conn, &previous)
                .await
                .into_iter()
                .map(|e| e.to_string())
                .collect(),
            Err(e) => vec![format!("could not reconnect to {node} to restore its settings: {e}")],
        };
        if failed.is_empty() {
            // This node's saved values are no longer needed (`clean` restores the others).
            crate::backend::forget_settings(&crate::backend::settings_key(&state.run_id, at));
        }
        failed.into_iter().map(&scrubbed).for_each(&mut noted);
    }
    if !strangers.is_empty() {
        after.push(Event::Foreign {
            t_us: clock.now_us(),
            keys: strangers.iter().cloned().collect(),
        });
        after.push(problem_event(
            clock,
            ProblemSource::ForeignKeys,
            &format!(
                "keys of identities the run never used appeared under the limiter's layout during the run: {} — another client writes there; the run cannot tell its keys from theirs (they were left alone)",
                some_of(&strangers)
            ),
            true,
        ));
    }
    after
}

/// UNLINK the run's `keys` and its floods' on `server`; on a cluster a batch per hash slot
/// (a command's keys must share one). Every batch is tried; what failed is returned.
async fn delete_keys(server: &LeaveAsFound, keys: &[String], floods: &[Arc<CacheFlood>]) -> Vec<SetupError> {
    let failed = |e: redis::RedisError| SetupError::Connect {
        url: crate::backend::redacted(&server.nodes[0]),
        reason: format!("UNLINK: {e}"),
    };
    let mut errors = Vec::new();
    if server.cluster {
        let mut conn = match connect_cluster(&server.nodes).await {
            Ok(conn) => conn,
            Err(e) => return vec![e],
        };
        let mut by_slot: BTreeMap<u16, Vec<String>> = BTreeMap::new();
        for key in keys {
            by_slot.entry(key_slot(key.as_bytes())).or_default().push(key.clone());
        }
        for keys in by_slot.values() {
            if let Err(e) = unlink(&mut conn, keys).await {
                errors.push(failed(e));
            }
        }
        // Floods are refused on a cluster the harness did not start: none to delete.
        return errors;
    }
    let mut conn = match connect(&server.nodes[0]).await {
        Ok(conn) => conn,
        Err(e) => return vec![e],
    };
    let floods = floods.iter().flat_map(|flood| flood.written_keys());
    // Named after the run, generated a batch at a time.
    let mut names = keys.iter().cloned().chain(floods).peekable();
    while names.peek().is_some() {
        let batch: Vec<String> = names.by_ref().take(1000).collect();
        if let Err(e) = unlink(&mut conn, &batch).await {
            errors.push(failed(e));
            break;
        }
    }
    errors
}

/// The first few of `keys`, and how many more.
fn some_of(keys: &BTreeSet<String>) -> String {
    let shown: Vec<&str> = keys.iter().take(3).map(String::as_str).collect();
    match keys.len() {
        0..=3 => shown.join(", "),
        n => format!("{} (+{})", shown.join(", "), n - 3),
    }
}

/// Keys of the layout the observer saw that no request of the run named and no setup
/// planted: (strangers, unclaimed). Strangers belong to identities the run never sent a
/// request for nor planted — someone else's. Unclaimed ones belong to identities the run
/// used: a key its limiter built inside a script, or one a request cut short wrote; the run
/// cannot prove it created them, so it leaves them (and says so) rather than judge them
/// foreign.
fn unnamed_keys(layout: &KeyLayout, index: &HistoryIndex) -> (BTreeSet<String>, BTreeSet<String>) {
    let ours = |key: &String| index.by_key.contains_key(key) || index.planted.contains_key(key);
    let mut seen: BTreeSet<String> = index.keyspace.keys().filter(|k| !ours(k)).cloned().collect();
    for sample in &index.samples {
        seen.extend(sample.keys.iter().map(|k| &k.key).filter(|k| !ours(k)).cloned());
    }
    let used: BTreeSet<u32> = index
        .requests
        .iter()
        .map(|r| r.identity)
        .chain(index.planted.keys().filter_map(|k| layout.identity_of(k.as_bytes())))
        .collect();
    seen.into_iter().partition(|k| {
        layout
            .identity_of(k.as_bytes())
            .is_none_or(|identity| !used.contains(&identity))
    })
}
