//! Finding and reading scenario files.

use std::path::{Path, PathBuf};

use super::error::ScenarioError;
use super::file::ScenarioFile;
use super::model::Scenario;
use super::resolve::{Source, resolve};

/// A scenario that cannot be found, read or validated, or a catalog that cannot be written.
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    /// A file that does not parse or validate (file:line:column).
    #[error(transparent)]
    Invalid(#[from] ScenarioError),

    /// A name that is no file, no `./scenarios/NAME.toml` and no shipped scenario.
    #[error(
        "unknown scenario `{name}`: looked for {searched}\n  known scenarios: {known}\n  help: pass a path to a .toml file, or one of the names above"
    )]
    Unknown {
        name: String,
        searched: String,
        known: String,
    },

    /// A scenario file that cannot be read.
    #[error("cannot read scenario {}: {source}", .path.display())]
    Read { path: PathBuf, source: std::io::Error },

    /// `scenarios export`: the directory or a file that cannot be written.
    #[error("cannot {what} {}: {source}", .path.display())]
    Export {
        what: &'static str,
        path: PathBuf,
        source: std::io::Error,
    },

    /// `scenarios export` without `--force` over files that differ.
    #[error("these files exist and differ from the shipped scenarios: {}\n  help: pass --force to overwrite them", .0.join(", "))]
    CatalogConflicts(Vec<String>),
}

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
        Some("add the field; docs/scenarios.md (\"The file\") lists every field")
    } else if message.contains("invalid type") {
        Some("check the value's type: numbers unquoted, names and sizes in quotes")
    } else {
        None
    }
}

/// Read, parse and validate the scenario file at `path`.
pub fn load_scenario(path: &Path) -> Result<Scenario, LoadError> {
    let text = std::fs::read_to_string(path).map_err(|source| LoadError::Read {
        path: path.to_owned(),
        source,
    })?;
    Ok(parse_scenario(path, &text)?)
}

mod catalog {
    include!(concat!(env!("OUT_DIR"), "/catalog.rs"));
}

/// The names of the scenarios shipped in the binary, sorted.
pub fn shipped_names() -> Vec<&'static str> {
    catalog::SHIPPED.iter().map(|(name, _)| *name).collect()
}

/// The text of the shipped scenario `name`.
pub fn shipped_text(name: &str) -> Option<&'static str> {
    catalog::SHIPPED.iter().find(|(n, _)| *n == name).map(|(_, text)| *text)
}

/// Where a scenario comes from: a file, or the catalog shipped in the binary.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ScenarioRef {
    /// A scenario embedded in the binary, by name.
    Shipped(String),
    /// A scenario file.
    File(PathBuf),
}

impl ScenarioRef {
    /// The scenario's name: the shipped name, or the file's stem.
    pub fn name(&self) -> String {
        match self {
            Self::Shipped(name) => name.clone(),
            Self::File(path) => path.file_stem().unwrap_or_default().to_string_lossy().into_owned(),
        }
    }

    /// Read, parse and validate it.
    pub fn load(&self) -> Result<Scenario, LoadError> {
        match self {
            Self::Shipped(name) => {
                let text = shipped_text(name).ok_or_else(|| unknown_scenario(name))?;
                // Errors in a shipped scenario (a harness bug) point at its place in the source.
                let mut scenario = parse_scenario(&Path::new("scenarios").join(format!("{name}.toml")), text)?;
                scenario.shipped = true;
                Ok(scenario)
            }
            Self::File(path) => load_scenario(path),
        }
    }
}

/// Where a scenario name is looked up first: `./scenarios`, then the shipped catalog.
pub const LOCAL_SCENARIO_DIR: &str = "scenarios";

/// Resolve a command-line scenario argument: a path to a file; else `./scenarios/NAME.toml`
/// (saying so on stderr when it shadows a shipped scenario with other content); else the
/// shipped scenario NAME.
pub fn find_scenario(arg: &str) -> Result<ScenarioRef, LoadError> {
    let as_path = PathBuf::from(arg);
    if as_path.is_file() {
        return Ok(ScenarioRef::File(as_path));
    }
    let name = arg.trim_end_matches(".toml");
    let local = Path::new(LOCAL_SCENARIO_DIR).join(format!("{name}.toml"));
    if local.is_file() {
        if let Some(text) = shipped_text(name)
            && std::fs::read_to_string(&local).is_ok_and(|t| t != text)
        {
            eprintln!(
                "note: {} shadows the shipped scenario `{name}` (remove it, or rename it, to run the shipped one)",
                local.display()
            );
        }
        return Ok(ScenarioRef::File(local));
    }
    if shipped_text(name).is_some() {
        return Ok(ScenarioRef::Shipped(name.to_owned()));
    }
    Err(unknown_scenario(arg))
}

/// Read, parse and validate the scenario a command-line argument names ([`find_scenario`]).
pub fn open_scenario(arg: &str) -> Result<Scenario, LoadError> {
    find_scenario(arg)?.load()
}

fn unknown_scenario(arg: &str) -> LoadError {
    let name = arg.trim_end_matches(".toml");
    let known: Vec<String> = list_scenarios().into_iter().map(|(n, _)| n).collect();
    LoadError::Unknown {
        name: arg.to_owned(),
        searched: format!(
            "the file {arg}, {} and the shipped catalog",
            Path::new(LOCAL_SCENARIO_DIR).join(format!("{name}.toml")).display()
        ),
        known: if known.is_empty() {
            "(none found)".to_owned()
        } else {
            known.join(", ")
        },
    }
}

/// The `*.toml` files directly in `dir`, sorted.
pub fn toml_files(dir: &Path) -> Vec<PathBuf> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut paths: Vec<PathBuf> = entries
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.is_file() && p.extension().is_some_and(|x| x == "toml"))
        .collect();
    paths.sort();
    paths
}

/// Every scenario a name can reach: the files in `./scenarios`, then the shipped ones they
/// do not shadow; by name, sorted.
pub fn list_scenarios() -> Vec<(String, ScenarioRef)> {
    let mut found: Vec<(String, ScenarioRef)> = toml_files(Path::new(LOCAL_SCENARIO_DIR))
        .into_iter()
        .map(|path| {
            let r = ScenarioRef::File(path);
            (r.name(), r)
        })
        .collect();
    for name in shipped_names() {
        if !found.iter().any(|(n, _)| n == name) {
            found.push((name.to_owned(), ScenarioRef::Shipped(name.to_owned())));
        }
    }
    found.sort_by(|a, b| a.0.cmp(&b.0));
    found
}

/// Write the shipped catalog to `dir` as NAME.toml files, for a team to copy and adapt.
/// Refuses to overwrite a file that differs unless `force`. Returns the files written.
pub fn export_catalog(dir: &Path, force: bool) -> Result<Vec<PathBuf>, LoadError> {
    std::fs::create_dir_all(dir).map_err(|source| LoadError::Export {
        what: "create directory",
        path: dir.to_owned(),
        source,
    })?;
    let mut conflicts = Vec::new();
    for (name, text) in catalog::SHIPPED {
        let path = dir.join(format!("{name}.toml"));
        if !force && path.exists() && std::fs::read_to_string(&path).map_or(true, |t| t != *text) {
            conflicts.push(path.display().to_string());
        }
    }
    if !conflicts.is_empty() {
        return Err(LoadError::CatalogConflicts(conflicts));
    }
    let mut written = Vec::new();
    for (name, text) in catalog::SHIPPED {
        let path = dir.join(format!("{name}.toml"));
        std::fs::write(&path, text).map_err(|source| LoadError::Export {
            what: "write scenario",
            path: path.clone(),
            source,
        })?;
        written.push(path);
    }
    Ok(written)
}
