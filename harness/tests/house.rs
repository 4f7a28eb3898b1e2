//! The house rules a newcomer can rely on, checked on the sources: no function runs past 70
//! lines without a one-line reason at its head; the roles do not import each other in a
//! cycle; fault kinds are compared as values, not strings; nothing built is committed.

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

/// Lines of the `harness/src/<module>` sources that import `crate::<other>`.
fn imports(module: &str, other: &str) -> Vec<String> {
    let mut files = Vec::new();
    let dir = root().join("harness/src").join(module);
    if dir.is_dir() {
        rust_files(&dir, &mut files);
    } else {
        files.push(root().join("harness/src").join(format!("{module}.rs")));
    }
    let needle = format!("use crate::{other}");
    files
        .iter()
        .flat_map(|path| {
            std::fs::read_to_string(path)
                .unwrap()
                .lines()
                .filter(|l| l.trim_start().starts_with(&needle))
                .map(|l| format!("{}: {}", path.display(), l.trim()))
                .collect::<Vec<_>>()
        })
        .collect()
}

#[test]
fn the_roles_do_not_import_each_other_in_a_cycle() {
    // The limiter's Wire consults the nemesis; the nemesis and the proxy speak of requests
    // and round trips through `trip`, not through the limiter.
    assert_eq!(imports("nemesis", "limiter"), Vec::<String>::new());
    assert_eq!(imports("proxy", "limiter"), Vec::<String>::new());
    assert_eq!(imports("trip", "limiter"), Vec::<String>::new());
    // What the checkers and reports judge by (the algorithm, the limit) is the scenario's.
    assert_eq!(imports("checker", "limiter"), Vec::<String>::new());
    assert_eq!(imports("report", "limiter"), Vec::<String>::new());
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
