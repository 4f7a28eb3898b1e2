//! The command line: `run`, `matrix`, `explore`, `check`, `ci`, `init`, `list`, `scenarios export`, `clean`, `image`, `server install`/`server list`, `bench`, `audit`. Exit codes: 0 every invariant holds,
//! 1 an invariant is violated, 2 unknown (the run could not observe enough), 3 setup or
//! usage error.

mod args;
mod audit;
mod bench;
mod ci;
mod commands;
mod exit;
mod explore;
mod proxy_bench;
mod servers;

pub use args::{BackendArgs, Cli, Command, ExploreArgs, MatrixArgs, RunArgs};
pub use exit::ExitCode;

use clap::Parser;

/// The binary's `main`: a tokio runtime, then [`main`] on it. Here rather than in `main.rs`,
/// so that the CLI's async code is compiled once, in the library, not again in the binary
/// (docs/performance.md: the binary's build went from about 2 min to seconds).
pub fn run() -> std::process::ExitCode {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("start the tokio runtime");
    runtime.block_on(main()).into()
}

/// Parse the process arguments and run; returns the exit code.
pub async fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => {
            let code = if e.use_stderr() {
                ExitCode::Setup
            } else {
                ExitCode::Valid
            };
            let _ = e.print();
            return code;
        }
    };
    if let Err(e) = crate::signals::install() {
        eprintln!("error: cannot handle SIGINT/SIGTERM: {e}");
        return ExitCode::Setup;
    }
    let result = match cli.command {
        Command::Run(args) => commands::run(args).await,
        Command::Matrix(args) => commands::matrix(args).await,
        Command::Explore(args) => explore::explore(args).await,
        Command::Check(args) => commands::check(&args.run_dir),
        Command::Ci(args) => ci::ci(args).await,
        Command::Init(args) => ci::init(&args),
        Command::List => commands::list(),
        Command::Scenarios(args::ScenariosCommand::Export { dir, force }) => commands::export_scenarios(&dir, force),
        Command::Clean(args) => commands::clean(args.all).await,
        Command::Image(args) => commands::image(args).await,
        Command::Server(args::ServerCommand::Install { names, force }) => servers::install(&names, force),
        Command::Server(args::ServerCommand::List) => servers::list(),
        Command::Bench(args) => bench::bench(args).await,
        Command::Audit(args) => audit::audit(args).await,
    };
    match result {
        Ok(code) => code,
        Err(e @ crate::error::SetupError::Interrupted) => {
            eprintln!("limiter-harness: {e}");
            ExitCode::Unknown
        }
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::Setup
        }
    }
}
