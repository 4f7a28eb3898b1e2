//! A server binary on this machine and what it says it is (`--version`).

use std::ffi::OsString;
use std::path::{Path, PathBuf};

use crate::error::SetupError;

/// Which server a binary is, from the first word of its `--version` line.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Product {
    Redis,
    Valkey,
}

impl Product {
    /// "redis" or "valkey", as reports and image names say it.
    pub fn name(self) -> &'static str {
        match self {
            Self::Redis => "redis",
            Self::Valkey => "valkey",
        }
    }

    fn from_word(word: &str) -> Option<Self> {
        match word.to_ascii_lowercase().as_str() {
            "redis" => Some(Self::Redis),
            "valkey" => Some(Self::Valkey),
            _ => None,
        }
    }
}

/// A server binary found on this machine, checked: it ran and said its version.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LocalServer {
    /// The binary as found (not canonicalized: its file name is the program's name,
    /// `redis-server` or `valkey-server`, which Redis reads from `argv[0]`).
    pub binary: PathBuf,
    pub product: Product,
    /// e.g. "7.0.15", from `--version`.
    pub version: String,
    /// Shared libraries installed beside it (Debian's redis-7.0): put in `LD_LIBRARY_PATH`
    /// wherever the binary runs, `ldd` included.
    pub library_dir: Option<PathBuf>,
    /// The `--server` value that picks this binary again (for reproduce lines); `None` when
    /// it is the default `redis-server` in PATH.
    pub spec: Option<String>,
}

impl LocalServer {
    /// "redis 7.0.15", "valkey 9.1.2": the words the report uses (from INFO).
    pub fn describe(&self) -> String {
        format!("{} {}", self.product.name(), self.version)
    }

    /// (major, minor) of [`LocalServer::version`].
    pub fn series(&self) -> (u32, u32) {
        series(&self.version)
    }

    /// The program's name: the binary's file name.
    pub fn program(&self) -> String {
        self.binary
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_else(|| format!("{}-server", self.product.name()))
    }

    /// The environment the binary needs (its libraries' directory in `LD_LIBRARY_PATH`).
    pub fn env(&self) -> Vec<(OsString, OsString)> {
        let Some(dir) = &self.library_dir else {
            return Vec::new();
        };
        let mut paths = vec![dir.clone()];
        if let Some(existing) = std::env::var_os("LD_LIBRARY_PATH") {
            paths.extend(std::env::split_paths(&existing));
        }
        let joined = std::env::join_paths(paths).unwrap_or_else(|_| dir.clone().into_os_string());
        vec![(OsString::from("LD_LIBRARY_PATH"), joined)]
    }
}

/// (major, minor) of a dotted version; missing or odd parts are 0.
pub fn series(version: &str) -> (u32, u32) {
    let mut parts = version.split('.').map(|p| p.parse::<u32>().unwrap_or(0));
    (parts.next().unwrap_or(0), parts.next().unwrap_or(0))
}

/// What `--version` printed: "Redis server v=7.0.15 sha=..." or "Valkey server v=9.1.2 ...".
pub fn parse_version_output(text: &str) -> Option<(Product, String)> {
    let line = text.lines().find(|l| l.contains("v="))?;
    let product = Product::from_word(line.split_whitespace().next()?)?;
    let version = line.split_whitespace().find_map(|word| word.strip_prefix("v="))?;
    let plausible = !version.is_empty() && version.chars().all(|c| c.is_ascii_alphanumeric() || c == '.');
    plausible.then(|| (product, version.to_owned()))
}

/// Check `binary` (a path, or a name looked up in PATH): it exists, is executable, and
/// `--version` says it is Redis or Valkey, and which version.
pub fn local_server(
    binary: &Path,
    library_dir: Option<PathBuf>,
    spec: Option<String>,
) -> Result<LocalServer, SetupError> {
    let missing = |path: &Path, reason: String| SetupError::ServerBinary {
        path: path.to_owned(),
        reason,
    };
    let resolved = find_binary(binary).ok_or_else(|| missing(binary, "no such file, and not found in PATH".into()))?;
    if !is_executable(&resolved) {
        return Err(missing(&resolved, "not executable".into()));
    }
    let mut server = LocalServer {
        binary: resolved.clone(),
        product: Product::Redis,
        version: String::new(),
        library_dir,
        spec,
    };
    let output = std::process::Command::new(&resolved)
        .arg("--version")
        .envs(server.env())
        .output()
        .map_err(|e| missing(&resolved, e.to_string()))?;
    let text = String::from_utf8_lossy(&output.stdout);
    let (product, version) = parse_version_output(&text).ok_or_else(|| {
        let said = format!("{} {}", text.trim(), String::from_utf8_lossy(&output.stderr).trim());
        missing(
            &resolved,
            format!(
                "`--version` did not say `Redis server v=…` or `Valkey server v=…`: {}",
                said.trim()
            ),
        )
    })?;
    server.product = product;
    server.version = version;
    Ok(server)
}

/// A path (with a `/`) as it is; a bare name looked up in PATH.
pub fn find_binary(binary: &Path) -> Option<PathBuf> {
    if binary.components().count() > 1 {
        return binary.is_file().then(|| binary.to_owned());
    }
    let paths = std::env::var_os("PATH")?;
    std::env::split_paths(&paths)
        .map(|dir| dir.join(binary))
        .find(|p| p.is_file() && is_executable(p))
}

fn is_executable(path: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(path).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_the_product_and_version_of_redis_and_valkey() {
        let cases = [
            (
                "Redis server v=7.0.15 sha=00000000:0 malloc=jemalloc-5.3.0 bits=64 build=c4fd2e8d6b5a21ad\n",
                Product::Redis,
                "7.0.15",
            ),
            (
                "Redis server v=6.2.14 sha=40305114:0 malloc=libc bits=64 build=dff95a8e7a99d269\n",
                Product::Redis,
                "6.2.14",
            ),
            (
                "Valkey server v=8.1.8 sha=00000000:1 malloc=libc bits=64 build=7eb4ebc9d7e91f4e\n",
                Product::Valkey,
                "8.1.8",
            ),
            (
                "Valkey server v=9.1.2 sha=00000000:1 malloc=libc bits=64 build=1536df31c0395150\n",
                Product::Valkey,
                "9.1.2",
            ),
        ];
        for (text, product, version) in cases {
            assert_eq!(
                parse_version_output(text),
                Some((product, version.to_owned())),
                "{text}"
            );
        }
        assert_eq!(series("9.1.2"), (9, 1));
        assert_eq!(series("7.0.15"), (7, 0));
    }

    #[test]
    fn refuses_what_is_not_a_server_version() {
        assert_eq!(parse_version_output(""), None);
        assert_eq!(parse_version_output("Python 3.11.7\n"), None);
        assert_eq!(parse_version_output("KeyDB server v=6.3.4 sha=0\n"), None);
        assert_eq!(parse_version_output("Redis server v= sha=0\n"), None);
        assert_eq!(parse_version_output("Redis server v=$(rm) sha=0\n"), None);
    }
}
