//! The shared libraries a binary links, as `ldd` lists them: the image build copies the
//! ones found, the install fetches the ones missing.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::Command;

use super::ServerError;

/// What `ldd` said about a binary.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Linked {
    /// Absolute paths of the libraries found, the dynamic loader included.
    pub found: Vec<PathBuf>,
    /// Sonames ldd could not find (`libjemalloc.so.2 => not found`).
    pub missing: Vec<String>,
}

/// Run `ldd binary` with `env` (a library directory in `LD_LIBRARY_PATH`).
pub fn linked(binary: &Path, env: &[(OsString, OsString)]) -> Result<Linked, ServerError> {
    let output = Command::new("ldd")
        .arg(binary)
        .envs(env.iter().cloned())
        .output()
        .map_err(ServerError::LddSpawn)?;
    if !output.status.success() {
        return Err(ServerError::LddFailed {
            binary: binary.to_owned(),
            stderr: String::from_utf8_lossy(&output.stderr).trim().to_owned(),
        });
    }
    Ok(parse_ldd(&String::from_utf8_lossy(&output.stdout)))
}

/// Parse `ldd` output.
pub fn parse_ldd(text: &str) -> Linked {
    let mut linked = Linked::default();
    for line in text.lines() {
        let (name, path) = match line.split_once("=>") {
            Some((left, right)) => (left.trim(), right.split_whitespace().next().unwrap_or_default()),
            None => ("", line.split_whitespace().next().unwrap_or_default()),
        };
        if path.starts_with('/') {
            linked.found.push(PathBuf::from(path));
        } else if path == "not" && !name.is_empty() {
            linked.missing.push(name.to_owned());
        }
    }
    linked
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_found_and_missing_libraries() {
        let ldd = "\tlinux-vdso.so.1 (0x00007ffd)\n\tlibm.so.6 => /lib/x86_64-linux-gnu/libm.so.6 (0x1)\n\tlibjemalloc.so.2 => not found\n\t/lib64/ld-linux-x86-64.so.2 (0x2)\n";
        let linked = parse_ldd(ldd);
        assert_eq!(
            linked.found,
            vec![
                PathBuf::from("/lib/x86_64-linux-gnu/libm.so.6"),
                PathBuf::from("/lib64/ld-linux-x86-64.so.2")
            ]
        );
        assert_eq!(linked.missing, vec!["libjemalloc.so.2".to_owned()]);
    }
}
