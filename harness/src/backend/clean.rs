//! `limiter-harness clean`: remove what crashed or killed runs left behind — containers
//! labelled [`super::LABEL`] and `redis-server` processes named in the pid directory.

use std::collections::HashMap;

use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use testcontainers::bollard::query_parameters::{ListContainersOptionsBuilder, RemoveContainerOptionsBuilder};

use super::LABEL;
use super::process::pid_dir;

/// What `clean` removed, and what it could not look at.
#[derive(Debug, Default)]
pub struct CleanSummary {
    pub containers_removed: Vec<String>,
    pub processes_killed: Vec<u32>,
    pub problems: Vec<String>,
}

/// Remove leftover containers and processes of this harness (of any run).
pub async fn clean() -> CleanSummary {
    let mut summary = CleanSummary::default();
    clean_containers(&mut summary).await;
    clean_processes(&mut summary);
    summary
}

async fn clean_containers(summary: &mut CleanSummary) {
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
        let remove = RemoveContainerOptionsBuilder::new().force(true).v(true).build();
        match docker.remove_container(&id, Some(remove)).await {
            Ok(()) => summary.containers_removed.push(id.chars().take(12).collect()),
            Err(e) => summary.problems.push(format!("removing container {id}: {e}")),
        }
    }
}

fn clean_processes(summary: &mut CleanSummary) {
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
        let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
        let is_ours = String::from_utf8_lossy(&cmdline).contains("limiter-harness-");
        if is_ours {
            match kill(Pid::from_raw(pid as i32), Signal::SIGKILL) {
                Ok(()) => summary.processes_killed.push(pid),
                Err(e) => summary.problems.push(format!("killing process {pid}: {e}")),
            }
        }
        let _ = std::fs::remove_file(&path);
    }
}
