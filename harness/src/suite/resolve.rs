//! The suite as `ci` runs it: the file validated, its paths made relative to its directory,
//! its scenarios found and loaded. Errors point at file:line:column.

use std::path::{Path, PathBuf};

use toml::Spanned;

use super::file::{LimiterEntry, ServerSection, SuiteFile, SuiteSection};
use crate::backend::BackendChoice;
use crate::error::SetupError;
use crate::limiter::BUILTIN_NAMES;
use crate::matrix::glob_match;
use crate::scenario::{
    Adjust, Scenario, ScenarioError, ScenarioRef, TtlMax, WINDOW_MS_RANGE, shipped_names, toml_files,
};

/// The suite file's name, looked for in the current directory and its ancestors.
pub const SUITE_FILE: &str = "limiter-harness.toml";
/// Where the reviewed baseline goes unless the suite says otherwise (relative to the suite).
pub const DEFAULT_BASELINE: &str = "limiter-harness/baseline";

/// A validated suite. Paths are relative to [`Suite::dir`], where `ci` runs.
#[derive(Debug, Clone)]
pub struct Suite {
    pub path: PathBuf,
    /// The suite file's directory.
    pub dir: PathBuf,
    pub name: String,
    pub limiters: Vec<SuiteLimiter>,
    /// The scenarios as the suite names them, in the order they were named.
    pub scenarios: Vec<ScenarioRef>,
    pub baseline: PathBuf,
    pub report_dir: PathBuf,
    pub table: Option<PathBuf>,
    pub jobs: usize,
    pub seed: Option<u64>,
    pub server: SuiteServer,
    /// More runs of a cell that differs from its baseline, before it is reported.
    pub reruns: u32,
    /// Whether an unrecorded flaky cell fails the gate.
    pub flaky: FlakyPolicy,
    /// Cells left out, each with its reason.
    pub skips: Vec<Skip>,
}

/// What a flaky cell that its baseline does not record as flaky does to the gate.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum FlakyPolicy {
    /// It fails the gate (the default): record it with `ci --accept`, or fix it.
    Fail,
    /// It is reported, and does not fail the gate.
    Pass,
}

/// `[[skip]]`: cells (a glob over `SCENARIO--LIMITER`) not run, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Skip {
    pub cells: String,
    pub reason: String,
}

/// How many more runs a cell that differs from its baseline gets unless the suite says.
pub const DEFAULT_RERUNS: u32 = 2;

/// One limiter of the suite.
#[derive(Debug, Clone, PartialEq)]
pub struct SuiteLimiter {
    /// The short name: the cell's column and its baseline file's name.
    pub name: String,
    /// Any `--limiter` spec.
    pub spec: String,
    pub adjust: Adjust,
}

/// Where the suite's servers run.
#[derive(Debug, Clone)]
pub struct SuiteServer {
    pub backend: BackendChoice,
    pub url: Option<String>,
    /// `--server NAME|PATH`; `None`: the default (redis-server in PATH).
    pub server: Option<String>,
    pub image: Option<String>,
    pub via_proxy: bool,
    pub allow_reconfigure: bool,
}

/// The suite file for the current directory: `limiter-harness.toml` here or in the nearest
/// ancestor that has one (as cargo finds `Cargo.toml`).
pub fn discover_suite(from: &Path) -> Option<PathBuf> {
    from.ancestors().map(|d| d.join(SUITE_FILE)).find(|p| p.is_file())
}

/// Read and validate the suite file at `path`.
pub fn load_suite(path: &Path) -> Result<Suite, SetupError> {
    let text = std::fs::read_to_string(path).map_err(|e| SetupError::io("cannot read suite", path, e))?;
    Ok(parse_suite(path, &text)?)
}

/// Parse and validate a suite from its text (`path` names it in errors and anchors its paths).
pub fn parse_suite(path: &Path, text: &str) -> Result<Suite, ScenarioError> {
    let file: SuiteFile = toml::from_str(text).map_err(|e| {
        ScenarioError::at(path, text, e.span(), e.message().trim())
            .with_help("the suite's fields are listed in `limiter-harness init`'s starter file and docs/ci.md (\"The suite file\")")
    })?;
    let at = |span: std::ops::Range<usize>, message: String| ScenarioError::at(path, text, Some(span), message);
    let dir = path.parent().map(Path::to_owned).unwrap_or_default();
    let section = file.suite.as_ref().map(|s| s.get_ref());
    let default_section = SuiteSection::default();
    let section = section.unwrap_or(&default_section);
    if file.limiters.is_empty() {
        return Err(at(0..0, "the suite names no limiter".into()).with_help(
            "add a [[limiter]] table with `name` and `spec` (any --limiter spec: a built-in, lua:PATH, exec:COMMAND)",
        ));
    }
    let mut limiters: Vec<SuiteLimiter> = Vec::new();
    for entry in &file.limiters {
        let limiter = limiter(entry, &at)?;
        if let Some(twin) = limiters.iter().find(|l| l.name == limiter.name) {
            return Err(at(entry.span(), format!("two limiters are named `{}`", twin.name))
                .with_help("give each [[limiter]] a `name` of its own: it names the cells and their baseline files"));
        }
        limiters.push(limiter);
    }
    let jobs = match &section.jobs {
        Some(j) if *j.get_ref() == 0 || *j.get_ref() > 64 => {
            return Err(at(j.span(), format!("jobs = {}: between 1 and 64", j.get_ref())));
        }
        Some(j) => *j.get_ref(),
        None => 4,
    };
    let relative = |value: &Option<Spanned<String>>, default: &str| -> PathBuf {
        PathBuf::from(value.as_ref().map_or(default, |v| v.get_ref().as_str()))
    };
    let server = server(file.server.as_ref());
    let scenarios = scenarios(section, &dir, &at)?;
    let (reruns, flaky) = gate(section, &at)?;
    let skips = skips(&file, &at)?;
    Ok(Suite {
        path: path.to_owned(),
        name: section.name.clone().unwrap_or_else(|| {
            std::fs::canonicalize(&dir)
                .ok()
                .and_then(|d| d.file_name().map(|n| n.to_string_lossy().into_owned()))
                .unwrap_or_else(|| "suite".into())
        }),
        dir,
        limiters,
        scenarios,
        baseline: relative(&section.baseline, DEFAULT_BASELINE),
        report_dir: relative(&section.report_dir, ".limiter-harness/reports"),
        table: section.table.as_ref().map(|t| PathBuf::from(t.get_ref())),
        jobs,
        seed: section.seed,
        server,
        reruns,
        flaky,
        skips,
    })
}

/// The gate's settings: `reruns` and `flaky`.
fn gate(section: &SuiteSection, at: &At<'_>) -> Result<(u32, FlakyPolicy), ScenarioError> {
    let reruns = match &section.reruns {
        Some(r) if *r.get_ref() > 20 => {
            return Err(at(r.span(), format!("reruns = {}: between 0 and 20", r.get_ref())));
        }
        Some(r) => *r.get_ref(),
        None => DEFAULT_RERUNS,
    };
    let flaky = match section.flaky.as_ref() {
        None => FlakyPolicy::Fail,
        Some(f) if f.get_ref() == "fail" => FlakyPolicy::Fail,
        Some(f) if f.get_ref() == "pass" => FlakyPolicy::Pass,
        Some(f) => {
            return Err(
                at(f.span(), format!("flaky = \"{}\": \"fail\" or \"pass\"", f.get_ref()))
                    .with_help("what a flaky cell the baseline does not record as flaky does to the gate"),
            );
        }
    };
    Ok((reruns, flaky))
}

/// The suite's `[[skip]]` entries: each with a non-empty glob and a reason.
fn skips(file: &SuiteFile, at: &At<'_>) -> Result<Vec<Skip>, ScenarioError> {
    let mut out = Vec::new();
    for entry in &file.skips {
        let e = entry.get_ref();
        if !e.cells.get_ref().contains("--") {
            return Err(at(
                e.cells.span(),
                format!("cells = \"{}\": a cell is SCENARIO--LIMITER", e.cells.get_ref()),
            )
            .with_help("e.g. \"server-pause-timeouts--daily-cap\", or a glob such as \"*--daily-cap\""));
        }
        if e.reason.get_ref().trim().is_empty() {
            return Err(at(e.reason.span(), "a skipped cell needs its reason".into())
                .with_help("the summary shows it: say why the cell is left out, and until when"));
        }
        out.push(Skip {
            cells: e.cells.get_ref().clone(),
            reason: e.reason.get_ref().trim().to_owned(),
        });
    }
    Ok(out)
}

type At<'a> = dyn Fn(std::ops::Range<usize>, String) -> ScenarioError + 'a;

fn limiter(entry: &Spanned<LimiterEntry>, at: &At<'_>) -> Result<SuiteLimiter, ScenarioError> {
    let e = entry.get_ref();
    let spec = e.spec.get_ref().trim().to_owned();
    if spec.is_empty() {
        return Err(at(e.spec.span(), "an empty limiter spec".into()));
    }
    let name = match &e.name {
        Some(n) => {
            let name = n.get_ref();
            let ok = !name.is_empty()
                && name.len() <= 64
                && name
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'));
            if !ok {
                return Err(at(
                    n.span(),
                    format!("limiter name `{name}`: use letters, digits, `-`, `_` or `.` (at most 64)"),
                )
                .with_help("the name names the cells and their baseline files, e.g. `api-limiter`"));
            }
            name.clone()
        }
        None if BUILTIN_NAMES.contains(&spec.as_str()) => spec.clone(),
        None => {
            return Err(at(entry.span(), format!("limiter `{spec}` needs a `name`"))
                .with_help("add `name = \"...\"`: a short name for its cells and baseline files"));
        }
    };
    if let Some(w) = &e.window_ms
        && !WINDOW_MS_RANGE.contains(w.get_ref())
    {
        return Err(at(
            w.span(),
            format!(
                "window_ms = {}: between {} and {}",
                w.get_ref(),
                WINDOW_MS_RANGE.start(),
                WINDOW_MS_RANGE.end()
            ),
        ));
    }
    let (ttl_max_ms, ttl_max_windows) = (
        e.ttl_max_ms.as_ref().map(|v| *v.get_ref()),
        e.ttl_max_windows.as_ref().map(|v| *v.get_ref()),
    );
    if let Err(e) = TtlMax::declared(ttl_max_windows, ttl_max_ms) {
        let span = entry.get_ref().ttl_max_ms.as_ref().map_or_else(
            || {
                entry
                    .get_ref()
                    .ttl_max_windows
                    .as_ref()
                    .map_or(entry.span(), Spanned::span)
            },
            Spanned::span,
        );
        return Err(at(span, e.to_string()));
    }
    Ok(SuiteLimiter {
        name,
        spec,
        adjust: Adjust {
            keys: e.keys.clone(),
            window_ms: e.window_ms.as_ref().map(|w| *w.get_ref()),
            ttl_max_ms,
            ttl_max_windows,
        },
    })
}

fn server(section: Option<&ServerSection>) -> SuiteServer {
    let default = ServerSection::default();
    let s = section.unwrap_or(&default);
    SuiteServer {
        backend: s.backend.unwrap_or(if s.url.is_some() {
            BackendChoice::Url
        } else {
            BackendChoice::Auto
        }),
        url: s.url.clone(),
        server: s.server.clone(),
        image: s.image.clone(),
        via_proxy: s.via_proxy,
        allow_reconfigure: s.allow_reconfigure,
    }
}

/// The scenarios the suite names, each once, in the order named. An entry with a `/` or
/// ending in `.toml` is a path (relative to the suite): a file, a directory (its `*.toml`) or
/// a glob of files; any other entry is a name or a glob over names, found as
/// `scenarios/NAME.toml` beside the suite first, then in the shipped catalog.
fn scenarios(section: &SuiteSection, dir: &Path, at: &At<'_>) -> Result<Vec<ScenarioRef>, ScenarioError> {
    let default = vec![Spanned::new(0..0, "*".to_owned())];
    let entries: &[Spanned<String>] = section.scenarios.as_ref().map_or(&default, |s| s.get_ref());
    let mut found: Vec<(String, ScenarioRef)> = Vec::new();
    for entry in entries {
        let pattern = entry.get_ref().as_str();
        let matched = scenario_entry(pattern, dir);
        if matched.is_empty() {
            return Err(at(entry.span(), format!("`{pattern}` names no scenario"))
                .with_help("a shipped name or glob (`limiter-harness list`), a file, a directory of .toml files, or a glob such as `scenarios/*.toml`"));
        }
        for (name, r) in matched {
            if section.exclude.iter().any(|x| glob_match(x, &name)) || found.iter().any(|(n, _)| *n == name) {
                continue;
            }
            found.push((name, r));
        }
    }
    Ok(found.into_iter().map(|(_, r)| r).collect())
}

fn scenario_entry(pattern: &str, dir: &Path) -> Vec<(String, ScenarioRef)> {
    let file = |path: PathBuf| {
        let r = ScenarioRef::File(path);
        (r.name(), r)
    };
    if pattern.contains('/') || pattern.ends_with(".toml") {
        let path = dir.join(pattern);
        if path.is_dir() {
            return toml_files(&path).into_iter().map(file).collect();
        }
        if path.is_file() {
            return vec![file(path)];
        }
        // A glob over the files of one directory: `scenarios/*.toml`.
        let (Some(parent), Some(glob)) = (path.parent(), path.file_name().and_then(|n| n.to_str())) else {
            return Vec::new();
        };
        return toml_files(parent)
            .into_iter()
            .filter(|p| {
                p.file_name()
                    .and_then(|n| n.to_str())
                    .is_some_and(|n| glob_match(glob, n))
            })
            .map(file)
            .collect();
    }
    let local: Vec<(String, ScenarioRef)> = toml_files(&dir.join(crate::scenario::LOCAL_SCENARIO_DIR))
        .into_iter()
        .map(file)
        .filter(|(name, _)| glob_match(pattern, name))
        .collect();
    let mut all = local;
    for name in shipped_names() {
        if glob_match(pattern, name) && !all.iter().any(|(n, _)| n == name) {
            all.push((name.to_owned(), ScenarioRef::Shipped(name.to_owned())));
        }
    }
    all.sort_by(|a, b| a.0.cmp(&b.0));
    all
}

impl Suite {
    /// Load every scenario the suite names.
    pub fn load_scenarios(&self) -> Result<Vec<Scenario>, SetupError> {
        self.scenarios
            .iter()
            .map(|r| r.load().map_err(SetupError::from))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const LIMITER: &str = "\n[[limiter]]\nspec = \"lua-fixed-window\"\n";

    #[test]
    fn the_server_section_names_a_server_and_keeps_the_old_key() {
        let suite = |server: &str| {
            parse_suite(
                Path::new("limiter-harness.toml"),
                &format!("[server]\n{server}{LIMITER}"),
            )
        };
        let named = suite("server = \"redis-6.2\"\n").unwrap();
        assert_eq!(named.server.server.as_deref(), Some("redis-6.2"));
        let old = suite("redis_server = \"/usr/bin/redis-server\"\n").unwrap();
        assert_eq!(old.server.server.as_deref(), Some("/usr/bin/redis-server"));
        let none = suite("backend = \"process\"\n").unwrap();
        assert_eq!(none.server.server, None);
        let both = suite("server = \"redis-6.2\"\nredis_server = \"redis-server\"\n").unwrap_err();
        assert!(both.to_string().contains("duplicate field"), "{both}");
    }

    #[test]
    fn the_gate_settings_skips_and_ttl_declarations_are_checked_where_written() {
        let parse = |text: &str| parse_suite(Path::new("limiter-harness.toml"), text);
        let plain = parse(LIMITER).unwrap();
        assert_eq!((plain.reruns, plain.flaky), (DEFAULT_RERUNS, FlakyPolicy::Fail));
        let set = parse(&format!("[suite]\nreruns = 4\nflaky = \"pass\"\n{LIMITER}")).unwrap();
        assert_eq!((set.reruns, set.flaky), (4, FlakyPolicy::Pass));
        let err = parse(&format!("[suite]\nflaky = \"ignore\"\n{LIMITER}"))
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("limiter-harness.toml:2:9") && err.contains("\"fail\" or \"pass\""),
            "{err}"
        );
        let err = parse(&format!("[suite]\nreruns = 99\n{LIMITER}"))
            .unwrap_err()
            .to_string();
        assert!(err.contains("between 0 and 20"), "{err}");
        let skip = parse(&format!("{LIMITER}\n[[skip]]\ncells = \"x--*\"\nreason = \"OPS-1\"\n")).unwrap();
        assert_eq!(
            skip.skips,
            vec![Skip {
                cells: "x--*".into(),
                reason: "OPS-1".into()
            }]
        );
        let err = parse(&format!("{LIMITER}\n[[skip]]\ncells = \"x\"\nreason = \"y\"\n")).unwrap_err();
        assert!(err.to_string().contains("a cell is SCENARIO--LIMITER"), "{err}");
        let err = parse(&format!("{LIMITER}\n[[skip]]\ncells = \"x--y\"\nreason = \" \"\n")).unwrap_err();
        assert!(err.to_string().contains("needs its reason"), "{err}");
        let daily = parse(&format!("{LIMITER}ttl_max_ms = 93600000\n")).unwrap();
        assert_eq!(daily.limiters[0].adjust.ttl_max_ms, Some(93_600_000));
        let err = parse(&format!("{LIMITER}ttl_max_ms = 5\nttl_max_windows = 2.0\n")).unwrap_err();
        assert!(err.to_string().contains("both given"), "{err}");
    }
}
