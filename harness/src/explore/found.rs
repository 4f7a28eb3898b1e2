//! The found scenario: the minimal candidate as a commented TOML file under
//! `scenarios/found/`, named after the limiter, the invariant and the seed, with the report
//! of its last confirming run beside it — ready to commit as a regression test.

use std::path::{Path, PathBuf};

use super::render;
use super::search::Found;
use crate::error::SetupError;

/// What `write` wrote.
#[derive(Debug)]
pub struct Written {
    pub scenario: PathBuf,
    pub report: Option<PathBuf>,
    pub name: String,
}

/// The scenario's name: `<limiter>-<invariant>-<seed>`, in the letters a name may use.
pub fn found_name(limiter: &str, found: &Found, seed: u64) -> String {
    let mut name: String = limiter
        .to_lowercase()
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '-' })
        .collect();
    while name.contains("--") {
        name = name.replace("--", "-");
    }
    let name = name.trim_matches('-');
    format!("{name}-{}-{seed}", found.target.invariant)
}

/// The header comments: what it found, how, and how to reproduce it.
/// `search_again` is the `explore` command line that runs the same search (seed, fault
/// vocabulary, batch size, confirmations).
pub fn header(limiter: &str, found: &Found, seed: u64, path: &Path, confirm: usize, search_again: &str) -> Vec<String> {
    let minimal = &found.shrunk.minimal;
    let mut lines = vec![
        format!(
            "{} — found by `limiter-harness explore`, not written by hand.",
            found_name(limiter, found, seed)
        ),
        String::new(),
        format!("Found: limiter `{limiter}` breaks {} with seed {seed}.", found.target),
        format!(
            "Candidate {} of the search; shrunk from {} phase(s), {} fault(s), {} requests to {} phase(s), {} fault(s), {} requests",
            found.candidate,
            found.original.phases.len(),
            render::faults(&found.original),
            render::requests(&found.original),
            minimal.phases.len(),
            render::faults(minimal),
            render::requests(minimal),
        ),
        format!(
            "in {} shrink step(s) kept of {} tried ({}); every kept step broke it {confirm} of {confirm} times on fresh servers.",
            found.shrunk.steps_kept, found.shrunk.steps_tried, found.shrunk.stopped
        ),
    ];
    if minimal.faults.iter().any(|f| f.no_limiter_survives()) {
        lines.push("By design: its fault destroys every limiter's state (eviction, or a restart that keeps nothing): a deployment problem, not this limiter's.".into());
    }
    // Only what the seed and the confirmed verdicts decide: the request numbers and
    // values of a failure depend on the server's timing, so they are in the report beside
    // this file, not here (exploring again with the seed rewrites this file unchanged).
    lines.push(format!(
        "What a failure looks like, from one confirming run: {}",
        report_path(path).display()
    ));
    lines.push(format!("Reproduce: {}", reproduce_line(path, limiter)));
    lines.push(format!("Search again: {search_again}"));
    lines.push(String::new());
    lines
}

/// The report directory beside a found scenario: `<name>.report/report.md`.
fn report_path(scenario: &Path) -> PathBuf {
    scenario.with_extension("report").join("report.md")
}

/// The command that runs a found scenario again.
pub fn reproduce_line(scenario: &Path, limiter: &str) -> String {
    format!(
        "limiter-harness run {} --limiter {} --backend process",
        crate::shell::quote(&scenario.display().to_string()),
        crate::shell::quote(limiter)
    )
}

/// Write the scenario (and its report directory, `<name>.report/`) under `dir`.
pub fn write(
    dir: &Path,
    limiter: &str,
    found: &Found,
    seed: u64,
    confirm: usize,
    search_again: &str,
) -> Result<Written, SetupError> {
    std::fs::create_dir_all(dir).map_err(|e| SetupError::io("cannot create", dir, e))?;
    let name = found_name(limiter, found, seed);
    let path = dir.join(format!("{name}.toml"));
    let shown = crate::shell::relative(&path);
    let about = format!("Found by explore: `{limiter}` breaks {}.", found.target);
    let header = header(limiter, found, seed, &shown, confirm, search_again);
    let text = render::to_toml(&found.shrunk.minimal, &name, &about, seed, &header);
    std::fs::write(&path, &text).map_err(|e| SetupError::io("cannot write", &path, e))?;
    let report = match &found.shrunk.report_dir {
        Some(from) => {
            let to = dir.join(format!("{name}.report"));
            let _ = std::fs::remove_dir_all(&to);
            copy_dir(from, &to).map_err(|e| SetupError::io("cannot copy the report to", &to, e))?;
            let retitled = Retitle {
                name: &name,
                text: &text,
                file: &shown,
                reproduce: reproduce_line(&shown, limiter),
            };
            retitle(&to, &retitled)?;
            Some(to.join("report.md"))
        }
        None => None,
    };
    Ok(Written {
        scenario: path,
        report,
        name,
    })
}

/// What the copied report is about: the found scenario, not the trial's candidate.
struct Retitle<'a> {
    name: &'a str,
    text: &'a str,
    file: &'a Path,
    reproduce: String,
}

/// Make the copied trial report the found scenario's: the history's first line names the
/// trial's candidate (`explore-candidate`, no reproduce line); it gets the found file's name,
/// text and reproduce command, and the report is judged again from that history
/// (`limiter-harness check`), so report.md, report.json and timeline.svg say the same.
/// The candidate is the same; only its name and comments differ.
fn retitle(dir: &Path, to: &Retitle) -> Result<(), SetupError> {
    use crate::history::Event;
    let history = dir.join("history.jsonl");
    let mut events = crate::history::read_history(&history)?;
    if let Some(Event::Run {
        scenario,
        reproduce,
        scenario_file,
        scenario_text,
        ..
    }) = events.first_mut()
    {
        *scenario = to.name.to_owned();
        *reproduce = to.reproduce.clone();
        *scenario_file = to.file.display().to_string();
        *scenario_text = to.text.to_owned();
    }
    std::fs::write(&history, "").map_err(|e| SetupError::io("cannot write", &history, e))?;
    crate::history::append_history(&history, &events).map_err(SetupError::usage)?;
    crate::runner::recheck(dir)?;
    Ok(())
}

fn copy_dir(from: &Path, to: &Path) -> std::io::Result<()> {
    std::fs::create_dir_all(to)?;
    for entry in std::fs::read_dir(from)? {
        let entry = entry?;
        if entry.file_type()?.is_file() {
            std::fs::copy(entry.path(), to.join(entry.file_name()))?;
        }
    }
    Ok(())
}
