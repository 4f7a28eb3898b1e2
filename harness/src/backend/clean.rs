//! `limiter-harness clean`: remove what crashed or killed runs left behind — containers
//! of runs this user recorded (see [`record_container`]), server processes (`redis-server`, `valkey-server`) named in
//! the pid directory, adapter processes (found by the run id in their environment, even if
//! they left their process group), the runs' temp directories — and put back the settings a killed
//! `--allow-reconfigure` run changed on a server it did not start (saved before the change).
//!
//! A run id starts with the pid of the harness process that owns the run; servers whose
//! owner is still alive belong to a run in progress and are left alone unless `all`.

use std::collections::HashMap;
use std::path::Path;

use futures::future::BoxFuture;
use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use testcontainers::bollard::query_parameters::{ListContainersOptionsBuilder, RemoveContainerOptionsBuilder};

use super::process::pid_dir;
use super::url::redacted;
use super::{BackendError, LABEL, LABEL_RUN};

/// What `clean` removed, left alone, and could not look at.
#[derive(Debug, Default)]
pub struct CleanSummary {
    pub containers_removed: Vec<String>,
    pub processes_killed: Vec<u32>,
    pub adapters_killed: Vec<u32>,
    pub temp_dirs_removed: usize,
    /// Servers whose settings were put back, as "URL (name value, ...)".
    pub settings_restored: Vec<String>,
    /// Servers of runs whose harness process is still alive.
    pub in_use: usize,
    pub problems: Vec<String>,
}

/// Remove leftover containers and processes of this harness; with `all`, also those of
/// runs still in progress.
pub fn clean(all: bool) -> BoxFuture<'static, CleanSummary> {
    Box::pin(clean_unboxed(all))
}

async fn clean_unboxed(all: bool) -> CleanSummary {
    let mut summary = CleanSummary::default();
    clean_containers(all, &mut summary).await;
    clean_processes(all, &mut summary);
    clean_adapters(all, &mut summary);
    clean_temp_dirs(all, &mut summary);
    restore_saved_settings(all, &mut summary).await;
    summary
}

/// The environment variable that carries the run id into an adapter and everything it starts.
pub const RUN_ENV: &str = "LIMITER_HARNESS_RUN";

/// Kill the processes that carry a run id in their environment ([`RUN_ENV`]): an adapter and
/// whatever it started, in its process group or not. `run_id` None: those of every run
/// whose owner is gone (or every run, with `all`). Returns the pids killed.
pub fn kill_run_processes(run_id: Option<&str>, all: bool, summary: &mut CleanSummary) -> Vec<u32> {
    let mut killed = Vec::new();
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return killed;
    };
    let spared = ancestors();
    for entry in entries.flatten() {
        let Some(pid) = entry.file_name().to_str().and_then(|n| n.parse::<u32>().ok()) else {
            continue;
        };
        if spared.contains(&pid) {
            continue;
        }
        // Only a run id the harness makes (`<owner pid>-<hex>`): a variable someone set by
        // hand names no run.
        let Some(run) = run_of(pid).filter(|r| is_run_id(r)) else {
            continue;
        };
        let selected = match run_id {
            Some(wanted) => run == wanted,
            None if !all && owner_alive(&run) => {
                summary.in_use += 1;
                false
            }
            None => true,
        };
        if selected && kill(Pid::from_raw(pid as i32), Signal::SIGKILL).is_ok() {
            killed.push(pid);
        }
    }
    killed
}

/// This process and its ancestors: never killed, whatever their environment says.
fn ancestors() -> Vec<u32> {
    let mut chain = vec![std::process::id()];
    while let Some(&pid) = chain.last() {
        let parent = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok().and_then(|s| {
            s.rsplit_once(')')
                .and_then(|(_, rest)| rest.split_whitespace().nth(1)?.parse::<u32>().ok())
        });
        match parent {
            Some(p) if p > 1 && !chain.contains(&p) => chain.push(p),
            _ => break,
        }
    }
    chain
}

/// `<owner pid>-<hex>`, the shape of the run ids the harness makes.
fn is_run_id(run: &str) -> bool {
    run.split_once('-').is_some_and(|(pid, tag)| {
        !pid.is_empty()
            && pid.bytes().all(|b| b.is_ascii_digit())
            && !tag.is_empty()
            && tag.bytes().all(|b| b.is_ascii_hexdigit())
    })
}

/// The run id in a process's environment, if it has one.
fn run_of(pid: u32) -> Option<String> {
    let environ = std::fs::read(format!("/proc/{pid}/environ")).ok()?;
    let prefix = format!("{RUN_ENV}=");
    environ
        .split(|b| *b == 0)
        .find_map(|var| var.strip_prefix(prefix.as_bytes()))
        .map(|run| String::from_utf8_lossy(run).into_owned())
}

fn clean_adapters(all: bool, summary: &mut CleanSummary) {
    let killed = kill_run_processes(None, all, summary);
    summary.adapters_killed.extend(killed);
}

/// `limiter-harness-<run id>-…` directories in the temp dir whose run is over.
fn clean_temp_dirs(all: bool, summary: &mut CleanSummary) {
    let Ok(entries) = std::fs::read_dir(std::env::temp_dir()) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        let Some(rest) = name.strip_prefix("limiter-harness-") else {
            continue;
        };
        // `limiter-harness-<pid>-<hex>-<random>`, made by this user: a run's. Other names
        // (the pid directory, a user's own) are left alone.
        let mut parts = rest.splitn(3, '-');
        let run = match (parts.next(), parts.next(), parts.next()) {
            (Some(pid), Some(tag), Some(_)) => format!("{pid}-{tag}"),
            _ => continue,
        };
        if !is_run_id(&run) || !owned_by_me(&entry.path()) || (!all && owner_alive(&run)) {
            continue;
        }
        if entry.file_type().is_ok_and(|t| t.is_dir()) && std::fs::remove_dir_all(entry.path()).is_ok() {
            summary.temp_dirs_removed += 1;
        }
    }
}

fn owned_by_me(path: &std::path::Path) -> bool {
    use std::os::unix::fs::MetadataExt;
    std::fs::symlink_metadata(path).is_ok_and(|m| m.uid() == nix::unistd::geteuid().as_raw())
}

/// Settings saved by runs that changed a server they did not start (`--allow-reconfigure`).
fn settings_dir() -> std::path::PathBuf {
    std::env::temp_dir().join("limiter-harness-settings")
}

/// What a run is about to change on a server it did not start, saved before the change.
#[derive(Debug, serde::Serialize, serde::Deserialize)]
struct SavedSettings {
    url: String,
    /// (name, value before the run), in the order they were changed.
    previous: Vec<(String, String)>,
}

/// Save the values a run replaces on `url` before it replaces them, as `run_id` (a run's id,
/// or its [`settings_key`] for one node of several), so that `clean` can put them back if the
/// run is killed. Readable by the owner only (the URL may hold a password).
pub fn save_settings(run_id: &str, url: &str, previous: &[(String, String)]) -> std::io::Result<()> {
    use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
    // Private to this user: `clean` applies what it finds there to servers.
    match std::fs::DirBuilder::new().mode(0o700).create(settings_dir()) {
        Err(e) if e.kind() != std::io::ErrorKind::AlreadyExists => return Err(e),
        _ => {}
    }
    if !owned_by_me(&settings_dir()) {
        return Err(std::io::Error::other(format!(
            "{} belongs to another user",
            settings_dir().display()
        )));
    }
    let path = settings_dir().join(format!("{run_id}.json"));
    let tmp = path.with_extension("tmp");
    let text = serde_json::to_vec(&SavedSettings {
        url: url.to_owned(),
        previous: previous.to_vec(),
    })?;
    let mut file = std::fs::OpenOptions::new()
        .create(true)
        .write(true)
        .truncate(true)
        .mode(0o600)
        .open(&tmp)?;
    std::io::Write::write_all(&mut file, &text)?;
    file.sync_all()?;
    std::fs::rename(tmp, path)
}

/// What the settings a run replaced on node `index` of its server (0: the server, or a
/// cluster's first node) are saved as: the run's id, then the node's index after the first.
pub fn settings_key(run_id: &str, index: usize) -> String {
    match index {
        0 => run_id.to_owned(),
        i => format!("{run_id}-node{i}"),
    }
}

/// The values saved as `key` (a run's [`settings_key`]) are back on their server: nothing to
/// restore there.
pub fn forget_settings(key: &str) {
    let _ = std::fs::remove_file(settings_dir().join(format!("{key}.json")));
}

async fn restore_saved_settings(all: bool, summary: &mut CleanSummary) {
    let Ok(entries) = std::fs::read_dir(settings_dir()) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        let Some(run) = path.file_stem().and_then(|s| s.to_str()).map(str::to_owned) else {
            continue;
        };
        if path.extension().is_none_or(|e| e != "json") || !owned_by_me(&path) || (!all && owner_alive(&run)) {
            continue;
        }
        let saved: SavedSettings = match std::fs::read(&path)
            .map_err(|e| e.to_string())
            .and_then(|b| serde_json::from_slice(&b).map_err(|e| e.to_string()))
        {
            Ok(saved) => saved,
            Err(e) => {
                summary.problems.push(format!("{}: {e}", path.display()));
                continue;
            }
        };
        match restore_on(&saved).await {
            Ok(()) => {
                let list: Vec<String> = saved.previous.iter().map(|(n, v)| format!("{n} {v}")).collect();
                summary.settings_restored.push(format!("{} ({})", redacted(&saved.url), list.join(", ")));
                let _ = std::fs::remove_file(&path);
            }
            Err(e) => summary.problems.push(format!(
                "could not restore the settings saved in {} on {}: {e} (the file is kept; run `clean` again when the server is back)",
                path.display(),
                redacted(&saved.url)
            )),
        }
    }
}

async fn restore_on(saved: &SavedSettings) -> Result<(), BackendError> {
    let mut conn = super::connect(&saved.url).await?;
    let failed = super::restore(&mut conn, &saved.previous).await;
    if failed.is_empty() {
        Ok(())
    } else {
        Err(BackendError::Several(failed))
    }
}

/// Whether the harness process that owns `run_id` is alive.
fn owner_alive(run_id: &str) -> bool {
    run_id
        .split('-')
        .next()
        .and_then(|pid| pid.parse::<u32>().ok())
        .is_some_and(|pid| Path::new(&format!("/proc/{pid}")).exists())
}

async fn clean_containers(all: bool, summary: &mut CleanSummary) {
    let docker = match testcontainers::core::client::docker_client_instance().await {
        Ok(d) => d,
        Err(e) => {
            summary
                .problems
                .push(format!("Docker not reachable, containers not checked: {e}"));
            return;
        }
    };
    let filters = HashMap::from([("label".to_owned(), vec![LABEL.to_owned()])]);
    let options = ListContainersOptionsBuilder::new().all(true).filters(&filters).build();
    let containers = match docker.list_containers(Some(options)).await {
        Ok(c) => c,
        Err(e) => {
            summary.problems.push(format!("listing containers: {e}"));
            return;
        }
    };
    let recorded = recorded_runs();
    // A record whose run is over and has no container left (removed by its own run, whose
    // record stayed when it was killed at the wrong moment) is dropped.
    let listed: std::collections::HashSet<String> = containers
        .iter()
        .filter_map(|c| c.labels.as_ref()?.get(LABEL_RUN).cloned())
        .collect();
    for run in recorded.iter().filter(|r| !listed.contains(*r) && !owner_alive(r)) {
        forget_run_containers(run);
    }
    // A run's records go once every container of it found here is gone.
    let mut emptied = std::collections::BTreeSet::new();
    let mut kept = std::collections::BTreeSet::new();
    for container in containers {
        let Some(id) = container.id else { continue };
        let labels = container.labels.unwrap_or_default();
        let run = labels.get(LABEL_RUN).cloned().unwrap_or_default();
        // Only a server the harness started, for a run this user recorded: a container
        // someone started from the harness's image inherits its label, but names no
        // recorded run (and a label set by hand is not a record).
        if labels.get(LABEL).map(String::as_str) != Some(CONTAINER_LABEL) || !recorded.contains(&run) {
            continue;
        }
        if !all && owner_alive(&run) {
            summary.in_use += 1;
            continue;
        }
        let remove = RemoveContainerOptionsBuilder::new().force(true).v(true).build();
        match docker.remove_container(&id, Some(remove)).await {
            Ok(()) => {
                summary.containers_removed.push(id.chars().take(12).collect());
                emptied.insert(run);
            }
            Err(e) if e.to_string().contains("already in progress") => {}
            Err(e) => {
                summary.problems.push(format!("removing container {id}: {e}"));
                kept.insert(run);
            }
        }
    }
    // A container that could not be removed keeps its run's record, for the next `clean`.
    for run in emptied.difference(&kept) {
        forget_run_containers(run);
    }
}

/// The value of [`LABEL`] on a server container the harness starts (its image carries
/// `image`, which every container made from it inherits).
pub const CONTAINER_LABEL: &str = "server";

/// Private to this user: one empty file per container a run is starting, `<run id>.<port>`.
fn containers_dir() -> std::path::PathBuf {
    std::env::temp_dir().join(format!("limiter-harness-containers-{}", nix::unistd::geteuid()))
}

/// Record that `run_id` is starting a container on `port`, before it starts (a run killed
/// while it starts is still found): `clean` removes only containers of recorded runs.
pub fn record_container(run_id: &str, port: u16) -> std::io::Result<()> {
    use std::os::unix::fs::DirBuilderExt;
    let dir = containers_dir();
    match std::fs::DirBuilder::new().mode(0o700).create(&dir) {
        Err(e) if e.kind() != std::io::ErrorKind::AlreadyExists => return Err(e),
        _ => {}
    }
    if !owned_by_me(&dir) || std::fs::symlink_metadata(&dir).is_ok_and(|m| !m.is_dir()) {
        return Err(std::io::Error::other(format!(
            "{} is not this user's directory",
            dir.display()
        )));
    }
    std::fs::write(dir.join(format!("{run_id}.{port}")), b"")
}

/// The container of `run_id` on `port` is gone: its record too.
pub fn forget_container(run_id: &str, port: u16) {
    let _ = std::fs::remove_file(containers_dir().join(format!("{run_id}.{port}")));
}

/// Every record of `run_id` (`clean` removed its containers).
fn forget_run_containers(run_id: &str) {
    let Ok(entries) = std::fs::read_dir(containers_dir()) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        if name.rsplit_once('.').is_some_and(|(run, _)| run == run_id) {
            let _ = std::fs::remove_file(entry.path());
        }
    }
}

/// The run ids this user's runs recorded containers for (files this user owns, in its own
/// directory).
fn recorded_runs() -> std::collections::HashSet<String> {
    let dir = containers_dir();
    if !owned_by_me(&dir) {
        return Default::default();
    }
    let Ok(entries) = std::fs::read_dir(&dir) else {
        return Default::default();
    };
    entries
        .flatten()
        .filter(|e| owned_by_me(&e.path()))
        .filter_map(|e| {
            let name = e.file_name().to_string_lossy().into_owned();
            let (run, port) = name.rsplit_once('.')?;
            (is_run_id(run) && port.parse::<u16>().is_ok()).then(|| run.to_owned())
        })
        .collect()
}

fn clean_processes(all: bool, summary: &mut CleanSummary) {
    let Ok(entries) = std::fs::read_dir(pid_dir()) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        let Some(pid) = path
            .file_name()
            .and_then(|n| n.to_str())
            .and_then(|n| n.parse::<u32>().ok())
        else {
            continue;
        };
        let run = std::fs::read_to_string(&path)
            .unwrap_or_default()
            .lines()
            .nth(1)
            .unwrap_or_default()
            .to_owned();
        if !all && owner_alive(&run) {
            summary.in_use += 1;
            continue;
        }
        // Redis and Valkey rewrite their command line, but run in the temp dir the harness made
        // for the run (`--dir`, `limiter-harness-<run id>-…`), whatever the binary is called:
        // a pid reused by anything else, another run's server included, is left alone.
        let cwd = std::fs::read_link(format!("/proc/{pid}/cwd")).unwrap_or_default();
        let runs_dir = cwd
            .file_name()
            .is_some_and(|d| d.to_string_lossy().starts_with(&format!("limiter-harness-{run}-")));
        if runs_dir {
            match kill(Pid::from_raw(pid as i32), Signal::SIGKILL) {
                Ok(()) => summary.processes_killed.push(pid),
                Err(e) => summary.problems.push(format!("killing process {pid}: {e}")),
            }
        }
        let _ = std::fs::remove_file(&path);
    }
}
