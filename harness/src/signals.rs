//! SIGINT and SIGTERM, handled the same way and installed before anything starts a server.
//!
//! Outside a run (listing, cleaning, building the image) a signal ends the process at once,
//! as it would without a handler. While a run or a matrix holds a [`Guard`], the first
//! signal cancels [`token`] instead: the run stops its traffic, stops its servers and
//! adapters, restores what it changed and reports `unknown`; a second signal ends the
//! process at once.

use std::sync::OnceLock;
use std::sync::atomic::{AtomicUsize, Ordering};

use tokio::signal::unix::{SignalKind, signal};
use tokio_util::sync::CancellationToken;

static TOKEN: OnceLock<CancellationToken> = OnceLock::new();
static GUARDS: AtomicUsize = AtomicUsize::new(0);

/// Cancelled by the first SIGINT or SIGTERM that arrives while a [`Guard`] is held.
pub fn token() -> &'static CancellationToken {
    TOKEN.get_or_init(CancellationToken::new)
}

/// Whether a signal asked the run to stop.
pub fn interrupted() -> bool {
    token().is_cancelled()
}

/// Take SIGINT and SIGTERM from the default action. Call once, inside the runtime, before
/// anything that starts a server or a process: from here on no signal kills the harness
/// between starting something and recording how to stop it.
pub fn install() -> std::io::Result<()> {
    let mut int = signal(SignalKind::interrupt())?;
    let mut term = signal(SignalKind::terminate())?;
    tokio::spawn(async move {
        loop {
            let number = tokio::select! {
                _ = int.recv() => 2,
                _ = term.recv() => 15,
            };
            if GUARDS.load(Ordering::Acquire) == 0 || token().is_cancelled() {
                eprintln!("limiter-harness: interrupted");
                std::process::exit(128 + number);
            }
            eprintln!(
                "limiter-harness: {} received: stopping the run and its servers (again to quit at once)",
                if number == 2 { "SIGINT" } else { "SIGTERM" }
            );
            token().cancel();
        }
    });
    Ok(())
}

/// While held, a signal stops the work gracefully instead of ending the process.
#[derive(Debug)]
#[must_use = "the guard protects the run only while it is held"]
pub struct Guard(());

/// Hold it for as long as servers, adapters or settings may need to be put back.
pub fn guard() -> Guard {
    GUARDS.fetch_add(1, Ordering::AcqRel);
    Guard(())
}

impl Drop for Guard {
    fn drop(&mut self) {
        GUARDS.fetch_sub(1, Ordering::AcqRel);
    }
}
