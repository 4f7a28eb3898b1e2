//! `limiter-harness bench`: the request driver against `redis-benchmark` sending the very
//! command the limiter sends for a request (its `EVALSHA`, with the same key and arguments),
//! on the same server with the same number of connections, in one run: equal work on both
//! sides, so the ratio measures the driver, not the script.

use std::path::Path;
use std::process::Command;
use std::sync::{Arc, Mutex};

use async_trait::async_trait;

use super::args::BenchArgs;
use super::exit::ExitCode;
use crate::backend::{Backend, Conn, ProcessBackend, UrlBackend};
use crate::error::SetupError;
use crate::history::{Event, PhaseEdge, ServerRole, read_history};
use crate::keys::KeyLayout;
use crate::limiter::{BUILTIN_NAMES, Limiter, RequestCtx, Wire, builtin};
use crate::nemesis::NoFaults;
use crate::proxy::{Action, Proxy, ProxyHook};
use crate::runner::{self, RunConfig};
use crate::scenario::{Scenario, parse_scenario};

pub async fn bench(args: BenchArgs) -> Result<ExitCode, SetupError> {
    if args.proxy {
        return super::proxy_bench::bench_proxy(&args).await;
    }
    let limiter = builtin(&args.limiter).ok_or_else(|| SetupError::UnknownLimiter {
        name: args.limiter.clone(),
        known: BUILTIN_NAMES.join(", "),
    })?;
    let processes = ProcessBackend::from_server(crate::servers::resolve_server(args.server.as_deref())?);
    let server = processes
        .start(
            ServerRole::Limiter,
            &format!("{}-bench", std::process::id()),
            Default::default(),
        )
        .await?;
    let url = server.url().to_owned();
    let result = measure(&args, limiter, &url).await;
    let _ = server.stop().await;
    let (command, benchmark_rps, harness_rps) = result?;
    println!("server: a fresh {} process ({url})", processes.server().describe());
    println!(
        "redis-benchmark -c {c} -n {n} {command}: {benchmark_rps:>9.0} requests/s",
        c = args.connections,
        n = args.requests
    );
    println!(
        "harness burst, {} with {} clients on {} connections, {} requests: {harness_rps:>9.0} requests/s",
        args.limiter, args.connections, args.connections, args.requests
    );
    println!(
        "ratio harness / redis-benchmark: {:.0} %",
        100.0 * harness_rps / benchmark_rps
    );
    Ok(ExitCode::Valid)
}

/// The command a request sends, as redis-benchmark runs it, then both figures: the
/// benchmark's requests/s and the driver's.
async fn measure(args: &BenchArgs, limiter: Arc<dyn Limiter>, url: &str) -> Result<(String, f64, f64), SetupError> {
    let port = url.rsplit(':').next().unwrap_or_default();
    let scenario = bench_scenario(args)?;
    let command = request_command(limiter.as_ref(), &scenario, url).await?;
    let benchmark_rps = redis_benchmark(port, args.connections, args.requests, &command)?;
    // The driver starts from an empty key too.
    let key = scenario.limit.key(0);
    let mut conn = runner::connect(url).await?;
    let () = redis::cmd("DEL")
        .arg(&key)
        .query_async(&mut conn)
        .await
        .map_err(|e| SetupError::Usage(format!("bench: DEL {key}: {e}")))?;
    let harness_rps = drive(args, limiter, scenario, url).await?;
    Ok((command.join(" "), benchmark_rps, harness_rps))
}

/// One identity's burst of `--requests` on `--connections` (every request on one key, as
/// redis-benchmark's).
fn bench_scenario(args: &BenchArgs) -> Result<Scenario, SetupError> {
    let text = format!(
        "name = \"bench\"\n[limit]\nrequests_max = 100\nwindow_ms = 600000\nkey_prefix = \"bench:\"\n\
         [[phase]]\nname = \"import\"\nkind = \"burst\"\nrequests = {n}\nconcurrency = {c}\nconnections = {c}\n\
         [check]\ninvariants = [\"admitted-within-limit\"]\nsample_interval_ms = 1000\n",
        n = args.requests,
        c = args.connections
    );
    Ok(parse_scenario(Path::new("bench.toml"), &text)?)
}

/// The driver's requests/s over the burst, from the run's phase edges.
async fn drive(args: &BenchArgs, limiter: Arc<dyn Limiter>, scenario: Scenario, url: &str) -> Result<f64, SetupError> {
    let dir =
        tempfile::tempdir().map_err(|e| SetupError::io("cannot create a temp dir in", std::env::temp_dir(), e))?;
    runner::run_on_own_thread(RunConfig {
        scenario,
        limiter,
        backend: Arc::new(UrlBackend::new(url.to_owned())),
        seed: 1,
        report_dir: dir.path().to_owned(),
        allow_reconfigure: true,
        via_proxy: false,
        show_progress: false,
        reproduce: String::new(),
    })
    .await?;
    let history = read_history(&dir.path().join("history.jsonl"))?;
    let edge = |want: PhaseEdge| {
        history.iter().find_map(|e| match e {
            Event::Phase { t_us, edge, .. } if *edge == want => Some(*t_us),
            _ => None,
        })
    };
    let (Some(start), Some(end)) = (edge(PhaseEdge::Start), edge(PhaseEdge::End)) else {
        return Err(SetupError::Usage("the benchmark run recorded no phase".into()));
    };
    Ok(args.requests as f64 / ((end - start) as f64 / 1e6))
}

/// Keeps the commands of every round trip it sees, exactly as sent.
#[derive(Default)]
struct Capture(Mutex<Vec<Vec<Vec<u8>>>>);

#[async_trait]
impl ProxyHook for Capture {
    async fn before_forward(&self, _conn: u64, trip: &[crate::proxy::Command]) -> Vec<Action> {
        let mut trips = self.0.lock().expect("capture lock");
        trips.extend(trip.iter().map(|c| c.args.clone()));
        vec![Action::Forward; trip.len()]
    }
}

/// The one command the limiter sends for a request of identity 0, seen on the wire through
/// a proxy (after its `prepare`, so a script is loaded on the server). A limiter that makes
/// more than one round trip, or sends a binary argument, has no redis-benchmark equivalent.
async fn request_command(limiter: &dyn Limiter, scenario: &Scenario, url: &str) -> Result<Vec<String>, SetupError> {
    let capture = Arc::new(Capture::default());
    let proxy = Proxy::start(url, Arc::clone(&capture) as Arc<dyn ProxyHook>)
        .await
        .map_err(|e| SetupError::Usage(format!("bench: the capturing proxy did not start: {e}")))?;
    let result = async {
        let mut conn = Conn::from(runner::connect(&proxy.url()).await?);
        let limit = &scenario.limit;
        limiter
            .prepare(&mut conn, limit)
            .await
            .map_err(|e| SetupError::Usage(format!("bench: {} could not prepare: {e}", limiter.name())))?;
        capture.0.lock().expect("capture lock").clear();
        let key = limit.key(0);
        let ctx = RequestCtx {
            id: 0,
            identity: 0,
            ordinal: 0,
            key: key.clone(),
            instance: 0,
            now_ms: 0,
        };
        let layout = KeyLayout::default_for(&limit.key_prefix, limit.identities);
        let mut wire = Wire::new(&mut conn, &NoFaults, &ctx, &layout);
        limiter
            .acquire(&mut wire, &key, limit)
            .await
            .map_err(|e| SetupError::Usage(format!("bench: {}'s request failed: {e}", limiter.name())))?;
        // Gone again: the benchmark and the driver start from an empty key.
        let () = redis::cmd("DEL")
            .arg(&key)
            .query_async(&mut conn)
            .await
            .map_err(|e| SetupError::Usage(format!("bench: DEL {key}: {e}")))?;
        Ok::<_, SetupError>(())
    }
    .await;
    proxy.stop().await;
    result?;
    let sent = std::mem::take(&mut *capture.0.lock().expect("capture lock"));
    // The DEL above is the last command seen.
    let request = &sent[..sent.len().saturating_sub(1)];
    let [command] = request else {
        return Err(SetupError::Usage(format!(
            "bench: {} sends {} commands for a request; redis-benchmark repeats one (use a single-command limiter, e.g. lua-incr-expire-if-first)",
            limiter.name(),
            request.len()
        )));
    };
    command
        .iter()
        .map(|arg| {
            String::from_utf8(arg.clone())
                .ok()
                .filter(|a| !a.is_empty() && !a.contains(char::is_whitespace))
                .ok_or_else(|| {
                    SetupError::Usage(format!(
                        "bench: {}'s command has an argument redis-benchmark cannot pass",
                        limiter.name()
                    ))
                })
        })
        .collect()
}

fn redis_benchmark(port: &str, connections: u32, requests: u64, command: &[String]) -> Result<f64, SetupError> {
    let output = Command::new("redis-benchmark")
        .args([
            "-p",
            port,
            "-c",
            &connections.to_string(),
            "-n",
            &requests.to_string(),
            "--csv",
        ])
        .args(command)
        .output()
        .map_err(|e| {
            SetupError::Usage(format!(
                "redis-benchmark could not run ({e}): `apt-get install redis-tools`"
            ))
        })?;
    let text = String::from_utf8_lossy(&output.stdout);
    // The last CSV line: "<the command>","<requests/s>",…
    text.lines()
        .rev()
        .find_map(|l| {
            let mut fields = l.split("\",\"");
            let _name = fields.next()?;
            fields.next()?.trim_matches('"').parse::<f64>().ok()
        })
        .ok_or_else(|| SetupError::Usage(format!("redis-benchmark printed no figure: {}", text.trim())))
}
