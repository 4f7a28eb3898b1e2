//! `limiter-harness bench`: the request driver against `redis-benchmark -t incr`, on the
//! same server with the same number of connections, in one run.

use std::path::Path;
use std::process::Command;
use std::sync::Arc;

use super::args::BenchArgs;
use super::exit::ExitCode;
use crate::backend::{Backend, ProcessBackend, UrlBackend};
use crate::error::SetupError;
use crate::history::{Event, PhaseEdge, ServerRole, read_history};
use crate::limiter::{BUILTIN_NAMES, builtin};
use crate::runner::{self, RunConfig};
use crate::scenario::parse_scenario;

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
    let (benchmark_rps, harness_rps) = result?;
    println!("server: a fresh {} process ({url})", processes.server().describe());
    println!(
        "redis-benchmark -t incr -c {c} -n {n}: {benchmark_rps:>9.0} requests/s",
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

async fn measure(
    args: &BenchArgs,
    limiter: Arc<dyn crate::limiter::Limiter>,
    url: &str,
) -> Result<(f64, f64), SetupError> {
    let port = url.rsplit(':').next().unwrap_or_default();
    let benchmark_rps = redis_benchmark(port, args.connections, args.requests)?;
    let text = format!(
        "name = \"bench\"\n[limit]\nrequests_max = 100\nwindow_ms = 600000\nkey_prefix = \"bench:\"\n\
         [[phase]]\nname = \"import\"\nkind = \"burst\"\nrequests = {n}\nconcurrency = {c}\nconnections = {c}\n\
         [check]\ninvariants = [\"admitted-within-limit\"]\nsample_interval_ms = 1000\n",
        n = args.requests,
        c = args.connections
    );
    let scenario = parse_scenario(Path::new("bench.toml"), &text)?;
    let dir =
        tempfile::tempdir().map_err(|e| SetupError::io("cannot create a temp dir in", std::env::temp_dir(), e))?;
    runner::run(RunConfig {
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
    let harness_rps = args.requests as f64 / ((end - start) as f64 / 1e6);
    Ok((benchmark_rps, harness_rps))
}

fn redis_benchmark(port: &str, connections: u32, requests: u64) -> Result<f64, SetupError> {
    let output = Command::new("redis-benchmark")
        .args([
            "-p",
            port,
            "-t",
            "incr",
            "-c",
            &connections.to_string(),
            "-n",
            &requests.to_string(),
            "--csv",
        ])
        .output()
        .map_err(|e| {
            SetupError::Usage(format!(
                "redis-benchmark could not run ({e}): `apt-get install redis-tools`"
            ))
        })?;
    let text = String::from_utf8_lossy(&output.stdout);
    text.lines()
        .find(|l| l.starts_with("\"INCR\""))
        .and_then(|l| l.split(',').nth(1))
        .and_then(|rps| rps.trim_matches('"').parse().ok())
        .ok_or_else(|| SetupError::Usage(format!("redis-benchmark printed no INCR figure: {}", text.trim())))
}
