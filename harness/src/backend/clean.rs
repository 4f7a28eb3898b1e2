//! `limiter-harness clean`: remove what crashed or killed runs left behind — containers
//! labelled [`super::LABEL`] and `redis-server` processes named in the pid directory.
//!
//! A run id starts with the pid of the harness process that owns the run; servers whose
//! owner is still alive belong to a run in progress and are left alone unless `all`.

use std::collections::HashMap;
use std::path::Path;

use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use testcontainers::bollard::query_parameters::{ListContainersOptionsBuilder, RemoveContainerOptionsBuilder};

use super::process::pid_dir;
use super::{LABEL, LABEL_RUN};

/// What `clean` removed, left alone, and could not look at.
#[derive(Debug, Default)]
pub struct CleanSummary {
    pub containers_removed: Vec<String>,
    pub processes_killed: Vec<u32>,
    /// Servers of runs whose harness process is still alive.
    pub in_use: usize,
    pub problems: Vec<String>,
}

/// Remove leftover containers and processes of this harness; with `all`, also those of
/// runs still in progress.
pub async fn clean(all: bool) -> CleanSummary {
    let mut summary = CleanSummary::default();
    clean_containers(all, &mut summary).await;
    clean_processes(all, &mut summary);
    summary
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
    for container in containers {
        let Some(id) = container.id else { continue };
        let run = container
            .labels
            .as_ref()
            .and_then(|l| l.get(LABEL_RUN))
            .cloned()
            .unwrap_or_default();
        if !all && owner_alive(&run) {
            summary.in_use += 1;
            continue;
        }
        let remove = RemoveContainerOptionsBuilder::new().force(true).v(true).build();
        match docker.remove_container(&id, Some(remove)).await {
            Ok(()) => summary.containers_removed.push(id.chars().take(12).collect()),
            Err(e) if e.to_string().contains("already in progress") => {}
            Err(e) => summary.problems.push(format!("removing container {id}: {e}")),
        }
    }
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
        // Redis rewrites its command line, but it runs in the temp dir the harness made.
        let cwd = std::fs::read_link(format!("/proc/{pid}/cwd")).unwrap_or_default();
        if cwd.to_string_lossy().contains("limiter-harness-") {
            match kill(Pid::from_raw(pid as i32), Signal::SIGKILL) {
                Ok(()) => summary.processes_killed.push(pid),
                Err(e) => summary.problems.push(format!("killing process {pid}: {e}")),
            }
        }
        let _ = std::fs::remove_file(&path);
    }
}
