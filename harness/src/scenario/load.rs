//! Finding and reading scenario files.

use std::path::{Path, PathBuf};

use super::error::ScenarioError;
use super::file::ScenarioFile;
use super::model::Scenario;
use super::resolve::{Source, resolve};
use crate::error::SetupError;

/// Parse and validate a scenario from its text; `path` is only used in error messages.
pub fn parse_scenario(path: &Path, text: &str) -> Result<Scenario, ScenarioError> {
    let file: ScenarioFile = toml::from_str(text).map_err(|e| {
        let err = ScenarioError::at(path, text, e.span(), e.message().trim());
        match hint_for(e.message()) {
            Some(help) => err.with_help(help),
            None => err,
        }
    })?;
    resolve(&file, &Source { path, text })
}

fn hint_for(message: &str) -> Option<&'static str> {
    if message.starts_with("unknown field") {
        Some("remove the field or fix its spelling; the expected fields are listed above")
    } else if message.starts_with("missing field") {
        Some("add the field; README.md (\"Writing a scenario\") lists every field")
    } else if message.contains("invalid type") {
        Some("check the value's type: numbers unquoted, names and sizes in quotes")
    } else {
        None
    }
}

/// Read, parse and validate the scenario file at `path`.
pub fn load_scenario(path: &Path) -> Result<Scenario, SetupError> {
    let text = std::fs::read_to_string(path).map_err(|e| SetupError::io("cannot read scenario", path, e))?;
    Ok(parse_scenario(path, &text)?)
}

/// Where scenarios are looked up by name: `./scenarios`, then the ones shipped with the source.
pub fn scenario_dirs() -> Vec<PathBuf> {
    let mut dirs = vec![PathBuf::from("scenarios")];
    let shipped = Path::new(env!("CARGO_MANIFEST_DIR")).join("../scenarios");
    if shipped.is_dir() && !dirs.iter().any(|d| same_dir(d, &shipped)) {
        dirs.push(shipped);
    }
    dirs
}

fn same_dir(a: &Path, b: &Path) -> bool {
    match (a.canonicalize(), b.canonicalize()) {
        (Ok(a), Ok(b)) => a == b,
        _ => false,
    }
}

/// Resolve a command-line scenario argument: a path to a file, or a name in [`scenario_dirs`].
pub fn find_scenario(arg: &str) -> Result<PathBuf, SetupError> {
    let as_path = PathBuf::from(arg);
    if as_path.is_file() {
        return Ok(as_path);
    }
    let dirs = scenario_dirs();
    let name = arg.trim_end_matches(".toml");
    for dir in &dirs {
        let candidate = dir.join(format!("{name}.toml"));
        if candidate.is_file() {
            return Ok(candidate);
        }
    }
    let searched: Vec<String> = std::iter::once(arg.to_owned())
        .chain(
            dirs.iter()
                .map(|d| d.join(format!("{name}.toml")).display().to_string()),
        )
        .collect();
    let known: Vec<String> = list_scenarios().into_iter().map(|(n, _)| n).collect();
    Err(SetupError::UnknownScenario {
        name: arg.to_owned(),
        searched: searched.join(", "),
        known: if known.is_empty() {
            "(none found)".to_owned()
        } else {
            known.join(", ")
        },
    })
}

/// Every `*.toml` in [`scenario_dirs`], by name (the first directory wins), sorted.
pub fn list_scenarios() -> Vec<(String, PathBuf)> {
    let mut found: Vec<(String, PathBuf)> = Vec::new();
    for dir in scenario_dirs() {
        let Ok(entries) = std::fs::read_dir(&dir) else { continue };
        let mut paths: Vec<PathBuf> = entries
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.extension().is_some_and(|x| x == "toml"))
            .collect();
        paths.sort();
        for path in paths {
            let name = path.file_stem().unwrap_or_default().to_string_lossy().into_owned();
            if !found.iter().any(|(n, _)| *n == name) {
                found.push((name, path));
            }
        }
    }
    found.sort();
    found
}
