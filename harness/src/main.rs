//! The `limiter-harness` binary; see `limiter-harness --help`.

fn main() -> std::process::ExitCode {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("start the tokio runtime");
    let code = runtime.block_on(limiter_harness::cli::main());
    code.into()
}
