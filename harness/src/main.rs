//! The `limiter-harness` binary; see `limiter-harness --help`.

fn main() -> std::process::ExitCode {
    limiter_harness::cli::run()
}
