//! Command lines for people to paste: quoting for a POSIX shell.

/// Quote an argument for a POSIX shell when it needs it.
pub fn quote(arg: &str) -> String {
    if !arg.is_empty() && arg.chars().all(|c| c.is_ascii_alphanumeric() || "-_./:=@".contains(c)) {
        arg.to_owned()
    } else {
        format!("'{}'", arg.replace('\'', "'\\''"))
    }
}

/// `path` relative to the current directory when it lies under it or near it (`../x`), for
/// command lines people paste; otherwise as given.
pub fn relative(path: &std::path::Path) -> std::path::PathBuf {
    match std::env::current_dir() {
        Ok(cwd) => relative_to(path, &cwd),
        Err(_) => path.to_owned(),
    }
}

/// `path` relative to `base` (both made absolute against `base`), with at most two `..`.
pub fn relative_to(path: &std::path::Path, base: &std::path::Path) -> std::path::PathBuf {
    use std::path::{Component, PathBuf};
    let absolute = |p: &std::path::Path| -> PathBuf {
        let joined = if p.is_absolute() { p.to_owned() } else { base.join(p) };
        let mut out = PathBuf::new();
        for c in joined.components() {
            match c {
                Component::CurDir => {}
                Component::ParentDir => {
                    out.pop();
                }
                other => out.push(other),
            }
        }
        out
    };
    let (target, from) = (absolute(path), absolute(base));
    let t: Vec<_> = target.components().collect();
    let f: Vec<_> = from.components().collect();
    let common = t.iter().zip(&f).take_while(|(a, b)| a == b).count();
    let ups = f.len() - common;
    if common <= 1 || ups > 2 {
        return if path.is_absolute() { path.to_owned() } else { target };
    }
    let mut out = PathBuf::new();
    for _ in 0..ups {
        out.push("..");
    }
    for c in &t[common..] {
        out.push(c);
    }
    if out.as_os_str().is_empty() {
        PathBuf::from(".")
    } else {
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quotes_only_what_needs_it() {
        assert_eq!(quote("get-then-incr"), "get-then-incr");
        assert_eq!(quote("exec:python3 a.py"), "'exec:python3 a.py'");
        assert_eq!(quote("it's"), "'it'\\''s'");
        assert_eq!(quote("app:{identity}:*"), "'app:{identity}:*'");
        assert_eq!(quote(""), "''");
    }

    #[test]
    fn paths_are_made_relative_to_the_base() {
        use std::path::Path;
        let base = Path::new("/home/me/service");
        assert_eq!(
            relative_to(Path::new("/home/me/service/lh/a.toml"), base),
            Path::new("lh/a.toml")
        );
        assert_eq!(relative_to(Path::new("lh/./a.toml"), base), Path::new("lh/a.toml"));
        assert_eq!(
            relative_to(Path::new("/home/me/other/a.lua"), base),
            Path::new("../other/a.lua")
        );
        assert_eq!(
            relative_to(Path::new("/opt/x/y/a.lua"), base),
            Path::new("/opt/x/y/a.lua")
        );
        assert_eq!(relative_to(Path::new("/home/me/service"), base), Path::new("."));
    }
}
