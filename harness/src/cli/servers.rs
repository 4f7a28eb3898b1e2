//! `server install NAME...` and `server list`.

use std::path::Path;

use super::commands::say;
use super::exit::ExitCode;
use crate::error::SetupError;
use crate::servers::{self, DEFAULT_PROGRAM, Done, FALLBACK, Installed, KNOWN};

/// Install each named server (all names are checked first), saying what each took.
pub fn install(names: &[String], force: bool) -> Result<ExitCode, SetupError> {
    let known = names
        .iter()
        .map(|name| {
            servers::known(name).ok_or_else(|| SetupError::ServerUnknown {
                name: name.clone(),
                known: servers::known_names(),
            })
        })
        .collect::<Result<Vec<_>, _>>()?;
    let root = servers::cache_root()?;
    for server in known {
        eprintln!(
            "limiter-harness server install {}: {}",
            server.name,
            server.source.describe()
        );
        let done = servers::install(&root, server, force)?;
        let what = done.server.describe();
        let at = done.server.binary.display();
        match &done.done {
            Done::AlreadyThere => say(&format!(
                "{} is already installed: {what} at {at} (checked now; `--force` fetches it again)",
                server.name
            )),
            Done::Installed => say(&format!(
                "installed {}: {what} in {:.1} s at {at}\n  from {}",
                server.name,
                done.elapsed.as_secs_f64(),
                done.manifest.source
            )),
            Done::Replaced(why) => say(&format!(
                "installed {} again ({why}): {what} in {:.1} s at {at}\n  from {}",
                server.name,
                done.elapsed.as_secs_f64(),
                done.manifest.source
            )),
        }
    }
    if let Some(last) = names.last() {
        say(&format!(
            "use it with --server {last}, e.g. `limiter-harness run steady-control --limiter lua-fixed-window --server {last}`"
        ));
    }
    Ok(ExitCode::Valid)
}

/// The known servers, which are installed (each checked now) and where, and the local one.
pub fn list() -> Result<ExitCode, SetupError> {
    let root = servers::cache_root()?;
    say(&format!(
        "Servers `limiter-harness server install NAME` fetches, without root (into {}):",
        root.join("servers").display()
    ));
    for known in KNOWN {
        let (state, detail) = match servers::installed(&root, known) {
            Installed::Ready { server, manifest } => (
                format!("{:<14} installed at {}", server.describe(), server.binary.display()),
                manifest.source,
            ),
            Installed::Missing => ("not installed".to_owned(), known.source.describe()),
            Installed::Broken(reason) => (
                format!("broken: {reason}"),
                format!(
                    "`limiter-harness server install --force {}` fetches it again",
                    known.name
                ),
            ),
        };
        say(&format!("  {:<11} {state}\n  {:<11} {detail}", known.name, ""));
    }
    say(&local_line());
    say(&format!(
        "Runs use {DEFAULT_PROGRAM} from PATH, else an installed {FALLBACK}; `--server NAME|PATH` picks another (run, matrix --servers a,b, and a suite's [server] server = \"...\")."
    ));
    Ok(ExitCode::Valid)
}

fn local_line() -> String {
    match servers::find_binary(Path::new(DEFAULT_PROGRAM)) {
        None => format!("Local: no {DEFAULT_PROGRAM} in PATH"),
        Some(path) => match servers::local_server(&path, None, None) {
            Ok(server) => format!(
                "Local: {DEFAULT_PROGRAM} in PATH: {} ({})",
                path.display(),
                server.describe()
            ),
            Err(e) => format!(
                "Local: {DEFAULT_PROGRAM} in PATH at {} does not work: {}",
                path.display(),
                e.to_string().lines().next().unwrap_or_default()
            ),
        },
    }
}
