//! The house rules a newcomer can rely on, checked on the sources: no function runs past 70
//! lines without a one-line reason at its head; the roles do not import each other in a
//! cycle; fault kinds are compared as values, not strings; nothing built is committed.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

const LINES_MAX: usize = 70;

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap().flatten() {
        let path = entry.path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

fn sources() -> Vec<PathBuf> {
    let mut files = Vec::new();
    for dir in ["harness/src", "harness/tests", "resp/src", "tests"] {
        rust_files(&root().join(dir), &mut files);
    }
    files.sort();
    files
}

/// `fn NAME` at the start of a line (after indentation and qualifiers), with a body.
fn function_name(line: &str) -> Option<&str> {
    let mut rest = line.trim_start();
    for qualifier in ["pub(crate) ", "pub(super) ", "pub ", "const ", "async ", "unsafe "] {
        rest = rest.strip_prefix(qualifier).unwrap_or(rest);
    }
    let name = rest.strip_prefix("fn ")?;
    let end = name.find(|c: char| !(c.is_alphanumeric() || c == '_'))?;
    Some(&name[..end])
}

/// Functions longer than [`LINES_MAX`] whose body does not open with a `// Long:` reason:
/// (file:line, name, lines).
fn long_functions_without_reason(path: &Path, text: &str) -> Vec<(String, String, usize)> {
    let lines: Vec<&str> = text.lines().collect();
    let mut found = Vec::new();
    for (i, line) in lines.iter().enumerate() {
        let Some(name) = function_name(line) else { continue };
        let indent = &line[..line.len() - line.trim_start().len()];
        // The body opens on the signature's last line; a one-line body or a declaration ends there.
        let Some(open) = (i..lines.len().min(i + 20)).find(|&j| lines[j].trim_end().ends_with('{')) else {
            continue;
        };
        if lines[i..=open].iter().any(|l| l.trim_end().ends_with(';')) {
            continue;
        }
        let close = format!("{indent}}}");
        let Some(end) = (open + 1..lines.len()).find(|&j| lines[j] == close) else {
            continue;
        };
        let length = end - i + 1;
        let reason = lines
            .get(open + 1)
            .is_some_and(|l| l.trim_start().starts_with("// Long:"));
        if length > LINES_MAX && !reason {
            found.push((format!("{}:{}", path.display(), i + 1), name.to_owned(), length));
        }
    }
    found
}

#[test]
fn no_function_runs_past_70_lines_without_a_reason_at_its_head() {
    let mut offenders = Vec::new();
    for path in sources() {
        let text = std::fs::read_to_string(&path).unwrap();
        offenders.extend(long_functions_without_reason(&path, &text));
    }
    assert!(
        offenders.is_empty(),
        "split these into named steps, or open their body with `// Long: <why>`:\n{}",
        offenders
            .iter()
            .map(|(at, name, n)| format!("  {at} {name}: {n} lines"))
            .collect::<Vec<_>>()
            .join("\n")
    );
}

#[test]
fn the_length_rule_sees_long_functions_and_their_reasons() {
    let body = "    x();\n".repeat(LINES_MAX);
    let long = format!("fn long() {{\n{body}}}\n");
    assert_eq!(long_functions_without_reason(Path::new("x.rs"), &long).len(), 1);
    let excused = format!("fn long() {{\n    // Long: one arm per event kind.\n{body}}}\n");
    assert!(long_functions_without_reason(Path::new("x.rs"), &excused).is_empty());
    let short = "pub async fn short(a: u32) -> u32 {\n    a\n}\n";
    assert!(long_functions_without_reason(Path::new("x.rs"), short).is_empty());
}

/// The top-level modules of `harness/src`, floor by floor from the bottom: a module uses only
/// modules on floors below its own (docs/architecture.md draws the same map). A new module
/// takes its place here.
const FLOORS: &[&[&str]] = &[
    &["clock", "keys", "shell", "signals", "text", "xml"],
    &["request", "scenario"],
    &["error", "workload"],
    &["history", "report_dir", "servers"],
    &["backend", "checker"],
    &["nemesis", "observer", "report"],
    &["audit", "limiter", "proxy"],
    &["runner"],
    &["matrix"],
    &["explore", "suite"],
    &["cli"],
];

/// `text` without comments and without its test module (an inline `#[cfg(test)] mod … {`
/// runs to the end of a file here), so that only what the code uses is read.
fn code_of(text: &str) -> String {
    let mut out = String::new();
    let mut lines = text.lines().peekable();
    while let Some(line) = lines.next() {
        let trimmed = line.trim_start();
        if trimmed == "#[cfg(test)]"
            && lines
                .peek()
                .is_some_and(|l| l.trim_start().starts_with("mod ") && l.ends_with('{'))
        {
            break;
        }
        if trimmed.starts_with("//") {
            continue;
        }
        out.push_str(line.split(" // ").next().unwrap_or(line));
        out.push('\n');
    }
    out
}

/// The names a path prefix (`crate::`, `super::`) leads to in `code`: `prefix::a::…` gives
/// `a`, and `prefix::{a::X, b::{Y, Z}, c}` gives `a`, `b` and `c`.
fn names_after(code: &str, prefix: &str) -> BTreeSet<String> {
    let ident = |s: &str| {
        s.chars()
            .take_while(|c| c.is_alphanumeric() || *c == '_')
            .collect::<String>()
    };
    let mut found = BTreeSet::new();
    for (at, _) in code.match_indices(prefix) {
        let before = code[..at].chars().next_back();
        if before.is_some_and(|c| c.is_alphanumeric() || c == '_' || c == ':') {
            continue;
        }
        let rest = &code[at + prefix.len()..];
        if let Some(group) = rest.strip_prefix('{') {
            let mut depth = 1;
            let mut item_start = true;
            for (i, c) in group.char_indices() {
                match c {
                    '{' => depth += 1,
                    '}' => depth -= 1,
                    ',' if depth == 1 => item_start = true,
                    c if c.is_whitespace() => continue,
                    _ if depth == 1 && item_start => {
                        item_start = false;
                        found.insert(ident(&group[i..]));
                    }
                    _ => {}
                }
                if depth == 0 {
                    break;
                }
            }
        } else {
            found.insert(ident(rest));
        }
    }
    found.remove("");
    found.remove("self");
    found.remove("super");
    found
}

/// The sources of `harness/src` outside test modules, by top-level module: (module, path, code).
fn module_sources() -> Vec<(String, PathBuf, String)> {
    let src = root().join("harness/src");
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    files.sort();
    files
        .into_iter()
        .filter(|p| !p.ends_with("tests.rs") && !p.ends_with("fixtures.rs"))
        .filter_map(|path| {
            let relative = path.strip_prefix(&src).unwrap();
            let first = relative.components().next()?.as_os_str().to_string_lossy().into_owned();
            let module = first.trim_end_matches(".rs").to_owned();
            if module == "lib" || module == "main" {
                return None;
            }
            let code = code_of(&std::fs::read_to_string(&path).unwrap());
            Some((module, path, code))
        })
        .collect()
}

/// The items `lib.rs` re-exports at the crate's root (`pub use error::SetupError;`), by
/// item: the module each comes from, so that `crate::SetupError` counts as a use of `error`.
fn root_items(floors: &[&[&str]]) -> BTreeMap<String, String> {
    let lib = code_of(&std::fs::read_to_string(root().join("harness/src/lib.rs")).unwrap());
    let mut items = BTreeMap::new();
    for module in floors.iter().flat_map(|f| f.iter()) {
        for item in names_after(&lib, &format!("use {module}::")) {
            items.insert(item, (*module).to_owned());
        }
    }
    items
}

/// Imports that do not run down the floors: (file, module, the module it uses).
fn upward_imports(floors: &[&[&str]], files: &[(String, PathBuf, String)]) -> Vec<String> {
    let floor_of = |m: &str| floors.iter().position(|f| f.contains(&m));
    let at_root = root_items(floors);
    let mut found = Vec::new();
    for (module, path, code) in files {
        let Some(own) = floor_of(module) else {
            found.push(format!(
                "{}: module `{module}` is on no floor (add it to FLOORS)",
                path.display()
            ));
            continue;
        };
        for used in names_after(code, "crate::") {
            let used = at_root.get(&used).cloned().unwrap_or(used);
            if used == *module {
                continue;
            }
            match floor_of(&used) {
                Some(floor) if floor < own => {}
                Some(floor) => found.push(format!(
                    "{}: `{module}` (floor {}) uses `{used}` (floor {})",
                    path.display(),
                    own + 1,
                    floor + 1
                )),
                None => {}
            }
        }
    }
    found
}

/// A circle in `edges` (node -> the nodes it uses), as the path that closes it, if any.
fn circle(edges: &BTreeMap<String, BTreeSet<String>>) -> Option<Vec<String>> {
    fn visit(
        node: &str,
        edges: &BTreeMap<String, BTreeSet<String>>,
        path: &mut Vec<String>,
        done: &mut BTreeSet<String>,
    ) -> Option<Vec<String>> {
        if let Some(at) = path.iter().position(|n| n == node) {
            let mut found = path[at..].to_vec();
            found.push(node.to_owned());
            return Some(found);
        }
        if done.contains(node) {
            return None;
        }
        path.push(node.to_owned());
        for next in edges.get(node).into_iter().flatten() {
            if let Some(found) = visit(next, edges, path, done) {
                return Some(found);
            }
        }
        path.pop();
        done.insert(node.to_owned());
        None
    }
    let mut done = BTreeSet::new();
    edges
        .keys()
        .find_map(|node| visit(node, edges, &mut Vec::new(), &mut done))
}

/// Per folder of `harness/src`, which of its files use which siblings (`super::NAME`, or
/// `crate::MODULE::NAME` from a file of MODULE's own folder, or an item the folder's module
/// file re-exports from NAME). Not seen: the module file itself (`mod.rs`, or `NAME.rs` beside
/// folder `NAME/`) as a node — it declares and re-exports its files, and what it defines for
/// them (shared constants, the module's entry points) is above them by construction; a file
/// of a nested folder using a file of its parent's folder; `super::` that reaches the crate's
/// root (the floors check `crate::` paths only); code after an inline `#[cfg(test)] mod`.
fn sibling_edges() -> BTreeMap<PathBuf, BTreeMap<String, BTreeSet<String>>> {
    let src = root().join("harness/src");
    let mut folders: BTreeMap<PathBuf, BTreeMap<String, BTreeSet<String>>> = BTreeMap::new();
    for (_, path, code) in module_sources() {
        let folder = path.parent().unwrap().to_path_buf();
        let stem = path.file_stem().unwrap().to_string_lossy().into_owned();
        if folder == src || stem == "mod" {
            continue;
        }
        let siblings: BTreeSet<String> = std::fs::read_dir(&folder)
            .unwrap()
            .flatten()
            .map(|e| e.path())
            .filter(|p| p.is_dir() || p.extension().is_some_and(|x| x == "rs"))
            .map(|p| p.file_stem().unwrap().to_string_lossy().into_owned())
            .filter(|s| s != "mod" && s != "tests" && *s != stem)
            .collect();
        let module_path = folder.strip_prefix(&src).unwrap().to_string_lossy().replace('/', "::");
        let reexported = reexports(&folder, &siblings);
        let mut used = names_after(&code, "super::");
        used.extend(names_after(&code, &format!("crate::{module_path}::")));
        let used = used
            .into_iter()
            .filter_map(|u| {
                if siblings.contains(&u) {
                    Some(u)
                } else {
                    reexported.get(&u).cloned()
                }
            })
            .filter(|u| *u != stem)
            .collect();
        folders.entry(folder).or_default().insert(stem, used);
    }
    folders
}

/// The items the folder's module file (`mod.rs`, or `NAME.rs` beside folder `NAME/`) takes
/// from its files (`use file::{A, B}`), by item: which file each comes from, so that
/// `super::A` in a sibling counts as a use of that file.
fn reexports(folder: &Path, siblings: &BTreeSet<String>) -> BTreeMap<String, String> {
    let beside = folder.with_extension("rs");
    let module_file = [folder.join("mod.rs"), beside].into_iter().find(|p| p.is_file());
    let Some(code) = module_file.map(|p| code_of(&std::fs::read_to_string(p).unwrap())) else {
        return BTreeMap::new();
    };
    let mut items = BTreeMap::new();
    for stem in siblings {
        for prefix in [format!("use {stem}::"), format!("use self::{stem}::")] {
            for item in names_after(&code, &prefix) {
                items.insert(item, stem.clone());
            }
        }
    }
    items
}

#[test]
fn no_module_uses_one_on_its_floor_or_above() {
    let upward = upward_imports(FLOORS, &module_sources());
    assert!(
        upward.is_empty(),
        "a module uses only those below it (move the item down, or the user up):\n{}",
        upward.join("\n")
    );
}

#[test]
fn no_files_of_a_folder_use_each_other_in_a_circle() {
    let circles: Vec<String> = sibling_edges()
        .into_iter()
        .filter_map(|(folder, edges)| circle(&edges).map(|c| format!("{}: {}", folder.display(), c.join(" -> "))))
        .collect();
    assert!(
        circles.is_empty(),
        "untie these circles (move what both use into a file below them):\n{}",
        circles.join("\n")
    );
}

#[test]
fn the_import_rules_see_upward_imports_and_circles() {
    let code = code_of(
        "use crate::{keys::KeyLayout, history::{Event, Recorder},\n    clock};\n/// [`crate::cli::Exit`]\nfn f() { crate::scenario::load(); } // crate::runner\n#[cfg(test)]\nmod tests {\n    use crate::cli::x;\n}\n",
    );
    let used: Vec<String> = names_after(&code, "crate::").into_iter().collect();
    assert_eq!(used, ["clock", "history", "keys", "scenario"]);
    let floors: &[&[&str]] = &[&["clock"], &["keys", "history"], &["scenario"], &["runner"]];
    let file = |m: &str| (m.to_owned(), PathBuf::from(format!("{m}.rs")), code.clone());
    assert!(upward_imports(floors, &[file("runner")]).is_empty());
    assert!(
        upward_imports(floors, &[file("scenario")]).is_empty(),
        "scenario uses itself and below"
    );
    assert_eq!(
        upward_imports(floors, &[file("keys")]).len(),
        2,
        "keys uses history (its floor) and scenario (above)"
    );
    assert_eq!(
        upward_imports(floors, &[file("nowhere")]).len(),
        1,
        "a module on no floor"
    );

    let edges = |pairs: &[(&str, &str)]| {
        let mut map: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
        for (a, b) in pairs {
            map.entry((*a).to_owned()).or_default().insert((*b).to_owned());
        }
        map
    };
    assert_eq!(circle(&edges(&[("a", "b"), ("b", "c"), ("a", "c")])), None);
    assert_eq!(
        circle(&edges(&[("a", "b"), ("b", "c"), ("c", "a")])),
        Some(vec!["a".to_owned(), "b".to_owned(), "c".to_owned(), "a".to_owned()])
    );
}

#[test]
fn fault_kinds_are_compared_as_values_not_strings() {
    let mut found = Vec::new();
    for path in sources() {
        let text = std::fs::read_to_string(&path).unwrap();
        for (n, line) in text.lines().enumerate() {
            if line.contains("kind == \"") || line.contains("kind != \"") {
                found.push(format!("{}:{}: {}", path.display(), n + 1, line.trim()));
            }
        }
    }
    assert!(found.is_empty(), "compare FaultKind values:\n{}", found.join("\n"));
}

#[test]
fn nothing_built_is_committed() {
    let out = std::process::Command::new("git")
        .args(["ls-files"])
        .current_dir(root())
        .output()
        .expect("git");
    let tracked = String::from_utf8_lossy(&out.stdout);
    let built: Vec<&str> = tracked
        .lines()
        .filter(|f| f.ends_with(".whl") || f.starts_with("target/") || f.ends_with(".so"))
        .collect();
    assert!(built.is_empty(), "{built:?}");
}

#[test]
fn the_unit_test_package_depends_on_what_the_library_does() {
    // harness/unit/ compiles harness/src as the library's unit tests (at opt-level 0): with
    // other dependencies it would not compile, with other features it would build a
    // dependency a second time.
    let manifest =
        |path: &str| -> toml::Table { toml::from_str(&std::fs::read_to_string(root().join(path)).unwrap()).unwrap() };
    let (library, unit) = (manifest("harness/Cargo.toml"), manifest("harness/unit/Cargo.toml"));
    for section in ["dependencies", "dev-dependencies"] {
        assert_eq!(
            library[section], unit[section],
            "[{section}] differs between harness/Cargo.toml and harness/unit/Cargo.toml"
        );
    }
    assert_eq!(unit["lib"]["path"].as_str(), Some("../src/lib.rs"));
    assert_eq!(unit["lib"]["name"], library["lib"]["name"]);
    assert_eq!(
        library["lib"]["test"].as_bool(),
        Some(false),
        "the library's unit tests build once, in harness/unit/"
    );
    // Out of the workspace, `cargo test --workspace` (and `just test`) would run none of them.
    let members = manifest("Cargo.toml")["workspace"]["members"].clone();
    assert!(
        members
            .as_array()
            .is_some_and(|m| m.iter().any(|p| p.as_str() == Some("harness/unit"))),
        "harness/unit is a workspace member: {members}"
    );
}
