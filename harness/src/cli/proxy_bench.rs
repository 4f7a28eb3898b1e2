//! `limiter-harness bench --proxy`: the fault proxy's own cost. The same
//! `redis-benchmark -t get,set,incr` load against one fresh server, directly and through
//! the proxy with no fault rules, alternating, in one run.

use std::process::Command;
use std::sync::Arc;

use super::args::BenchArgs;
use super::exit::ExitCode;
use crate::backend::{Backend, ProcessBackend};
use crate::error::SetupError;
use crate::history::ServerRole;
use crate::proxy::{PassThrough, Proxy};

/// One redis-benchmark figure: requests per second and median latency.
#[derive(Debug, Clone, Copy, Default)]
struct Figure {
    rps: f64,
    p50_ms: f64,
}

const TESTS: [&str; 3] = ["SET", "GET", "INCR"];

pub async fn bench_proxy(args: &BenchArgs) -> Result<ExitCode, SetupError> {
    let processes = ProcessBackend::from_server(crate::servers::resolve_server(args.server.as_deref())?);
    let server = processes
        .start(
            ServerRole::Limiter,
            &format!("{}-proxy-bench", std::process::id()),
            Default::default(),
        )
        .await?;
    let url = server.url().to_owned();
    let result = async {
        let proxy = Proxy::start(&url, Arc::new(PassThrough))
            .await
            .map_err(|e| SetupError::ServerStart {
                backend: "fault proxy".into(),
                reason: e.to_string(),
            })?;
        let direct_port = url.rsplit(':').next().unwrap_or_default().to_owned();
        let proxy_port = proxy.addr().port().to_string();
        let (mut direct, mut proxied) = (Vec::new(), Vec::new());
        // Alternate, so that a change in the machine's load hits both sides alike.
        for _ in 0..args.rounds.max(1) {
            direct.push(run_benchmark(&direct_port, args).await?);
            proxied.push(run_benchmark(&proxy_port, args).await?);
        }
        proxy.stop().await;
        Ok::<_, SetupError>((direct, proxied))
    }
    .await;
    let _ = server.stop().await;
    let (direct, proxied) = result?;
    println!(
        "server: a fresh redis-server process; load: redis-benchmark -t set,get,incr -c {} -n {} -P {}, {} round(s) each side, alternating; figures are medians over rounds",
        args.connections,
        args.requests,
        args.pipeline.max(1),
        args.rounds.max(1)
    );
    println!(
        "{:<6} {:>14} {:>14} {:>7} {:>12} {:>12} {:>10}",
        "test", "direct rps", "proxy rps", "ratio", "direct p50", "proxy p50", "added p50"
    );
    for (i, test) in TESTS.iter().enumerate() {
        let d = median(direct.iter().map(|r| r[i]));
        let p = median(proxied.iter().map(|r| r[i]));
        println!(
            "{test:<6} {:>14.0} {:>14.0} {:>6.0}% {:>9.0} µs {:>9.0} µs {:>7.0} µs",
            d.rps,
            p.rps,
            100.0 * p.rps / d.rps,
            d.p50_ms * 1000.0,
            p.p50_ms * 1000.0,
            (p.p50_ms - d.p50_ms) * 1000.0
        );
    }
    Ok(ExitCode::Valid)
}

fn median(figures: impl Iterator<Item = Figure>) -> Figure {
    let mut all: Vec<Figure> = figures.collect();
    all.sort_by(|a, b| a.rps.total_cmp(&b.rps));
    let mid = all.len() / 2;
    let rps = all[mid].rps;
    all.sort_by(|a, b| a.p50_ms.total_cmp(&b.p50_ms));
    Figure {
        rps,
        p50_ms: all[mid].p50_ms,
    }
}

async fn run_benchmark(port: &str, args: &BenchArgs) -> Result<[Figure; 3], SetupError> {
    let argv = [
        "-p".to_owned(),
        port.to_owned(),
        "-t".into(),
        "set,get,incr".into(),
        "-c".into(),
        args.connections.to_string(),
        "-n".into(),
        args.requests.to_string(),
        "-P".into(),
        args.pipeline.max(1).to_string(),
        "--csv".into(),
    ];
    // redis-benchmark blocks: off the runtime's workers, so the proxy keeps running.
    let output = tokio::task::spawn_blocking(move || Command::new("redis-benchmark").args(&argv).output())
        .await
        .expect("the benchmark thread")
        .map_err(|e| {
            SetupError::Usage(format!(
                "redis-benchmark could not run ({e}): `apt-get install redis-tools`"
            ))
        })?;
    let text = String::from_utf8_lossy(&output.stdout);
    let mut figures = [Figure::default(); 3];
    for (i, test) in TESTS.iter().enumerate() {
        figures[i] = parse_csv_line(&text, test)
            .ok_or_else(|| SetupError::Usage(format!("redis-benchmark printed no {test} figure: {}", text.trim())))?;
    }
    Ok(figures)
}

/// `"SET","98716.68","0.271","0.072","0.255",...`: test, rps, avg, min, p50, ...
fn parse_csv_line(text: &str, test: &str) -> Option<Figure> {
    let line = text.lines().find(|l| l.starts_with(&format!("\"{test}\"")))?;
    let fields: Vec<f64> = line
        .split(',')
        .skip(1)
        .filter_map(|f| f.trim_matches('"').parse().ok())
        .collect();
    Some(Figure {
        rps: *fields.first()?,
        p50_ms: *fields.get(3)?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_redis_benchmark_csv() {
        let text = "\"test\",\"rps\",\"avg_latency_ms\",\"min_latency_ms\",\"p50_latency_ms\",\"p95_latency_ms\"\n\"SET\",\"98716.68\",\"0.271\",\"0.072\",\"0.255\",\"0.4\"\n";
        let f = parse_csv_line(text, "SET").unwrap();
        assert_eq!((f.rps, f.p50_ms), (98716.68, 0.255));
        assert!(parse_csv_line(text, "GET").is_none());
    }
}
