//! Where installed servers live: `$LIMITER_HARNESS_CACHE/servers/NAME/`, else
//! `$XDG_CACHE_HOME/limiter-harness/servers/NAME/`, else `~/.cache/limiter-harness/...`;
//! each with `bin/PROGRAM`, `lib/` when it brought libraries, and `server.json`.

use std::ffi::OsString;
use std::path::{Path, PathBuf};

use super::ServerError;
use super::binary::{LocalServer, Product, local_server};
use super::catalog::KnownServer;
use crate::error::SetupError;

/// The environment variable that moves the cache (tests, CI caches, shared machines).
pub const CACHE_ENV: &str = "LIMITER_HARNESS_CACHE";
/// The file that says what an install holds, written last.
pub const MANIFEST: &str = "server.json";

/// The cache root as the environment says: [`CACHE_ENV`], else `$XDG_CACHE_HOME/limiter-harness`
/// (when absolute, as the XDG spec asks), else `$HOME/.cache/limiter-harness`.
pub fn cache_root_from(var: impl Fn(&str) -> Option<OsString>) -> Option<PathBuf> {
    let set = |name: &str| var(name).filter(|v| !v.is_empty()).map(PathBuf::from);
    if let Some(dir) = set(CACHE_ENV) {
        return Some(dir);
    }
    if let Some(xdg) = set("XDG_CACHE_HOME").filter(|p| p.is_absolute()) {
        return Some(xdg.join("limiter-harness"));
    }
    set("HOME").map(|home| home.join(".cache").join("limiter-harness"))
}

/// The cache root of this process's environment, absolute (ldd and the image name the
/// libraries of an install by absolute paths).
pub fn cache_root() -> Result<PathBuf, SetupError> {
    let root = cache_root_from(|name| std::env::var_os(name)).ok_or_else(|| {
        SetupError::Usage(format!(
            "no cache directory: HOME, XDG_CACHE_HOME and {CACHE_ENV} are all unset\n  help: set {CACHE_ENV}=DIR to say where installed servers go"
        ))
    })?;
    if root.is_absolute() {
        return Ok(root);
    }
    let cwd = std::env::current_dir().map_err(|e| SetupError::io("cannot read", ".", e))?;
    Ok(cwd.join(root))
}

/// The directory of the installed server `name` under `root`.
pub fn server_dir(root: &Path, name: &str) -> PathBuf {
    root.join("servers").join(name)
}

/// What an install holds (`server.json`); paths are relative to the install's directory.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Manifest {
    pub name: String,
    pub product: Product,
    /// The exact version `--version` said at install, e.g. "6.2.14".
    pub version: String,
    /// e.g. "bin/redis-server".
    pub binary: PathBuf,
    /// e.g. "lib" (Debian's redis-7.0), when it brought libraries.
    pub library_dir: Option<PathBuf>,
    /// The package and file it came from, with its checksum when there is one.
    pub source: String,
}

/// The state of a known server in the cache.
#[derive(Debug)]
#[expect(
    clippy::large_enum_variant,
    reason = "a few per command, read once: boxing would only add noise"
)]
pub enum Installed {
    Missing,
    /// Installed, and its binary passed the check just now.
    Ready {
        server: LocalServer,
        manifest: Manifest,
    },
    /// Something is there but it fails the check (the reason says what).
    Broken(String),
}

/// Look at the install of `known` under `root`, and check it: the manifest reads, the
/// binary runs and `--version` says what the name promises.
pub fn installed(root: &Path, known: &KnownServer) -> Installed {
    let dir = server_dir(root, known.name);
    let path = dir.join(MANIFEST);
    let text = match std::fs::read_to_string(&path) {
        Ok(text) => text,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound && !dir.exists() => return Installed::Missing,
        Err(e) => return Installed::Broken(format!("{}: {e}", path.display())),
    };
    let manifest: Manifest = match serde_json::from_str(&text) {
        Ok(m) => m,
        Err(e) => return Installed::Broken(format!("{}: {e}", path.display())),
    };
    match check(&dir, known, &manifest) {
        Ok(server) => Installed::Ready { server, manifest },
        Err(reason) => Installed::Broken(reason.to_string()),
    }
}

/// The binary the manifest names, run: it must be the product and series `known` promises,
/// and the version recorded at install.
pub fn check(dir: &Path, known: &KnownServer, manifest: &Manifest) -> Result<LocalServer, ServerError> {
    let binary = dir.join(&manifest.binary);
    let library_dir = manifest.library_dir.as_ref().map(|l| dir.join(l));
    let server = local_server(&binary, library_dir, Some(known.name.to_owned()))
        .map_err(|e| ServerError::Unusable(Box::new(e)))?;
    promised(known, &server)?;
    if server.version != manifest.version {
        return Err(ServerError::VersionChanged {
            binary,
            described: server.describe(),
            installed: manifest.version.clone(),
        });
    }
    Ok(server)
}

/// Whether `server` is what the name `known` promises (product and major.minor).
pub fn promised(known: &KnownServer, server: &LocalServer) -> Result<(), ServerError> {
    if server.product == known.product && server.series() == known.series {
        return Ok(());
    }
    Err(ServerError::NotPromised {
        binary: server.binary.clone(),
        described: server.describe(),
        series: known.series,
        name: known.name,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env<'a>(vars: &'a [(&'a str, &'a str)]) -> impl Fn(&str) -> Option<OsString> + 'a {
        move |name| vars.iter().find(|(n, _)| *n == name).map(|(_, v)| OsString::from(v))
    }

    #[test]
    fn the_cache_follows_the_environment() {
        let root = |vars: &[(&str, &str)]| cache_root_from(env(vars));
        assert_eq!(
            root(&[("HOME", "/home/a")]),
            Some(PathBuf::from("/home/a/.cache/limiter-harness"))
        );
        assert_eq!(
            root(&[("HOME", "/home/a"), ("XDG_CACHE_HOME", "/var/cache/a")]),
            Some(PathBuf::from("/var/cache/a/limiter-harness"))
        );
        // A relative XDG_CACHE_HOME is invalid by the spec, and ignored.
        assert_eq!(
            root(&[("HOME", "/home/a"), ("XDG_CACHE_HOME", "cache")]),
            Some(PathBuf::from("/home/a/.cache/limiter-harness"))
        );
        assert_eq!(
            root(&[("HOME", "/home/a"), ("XDG_CACHE_HOME", "/x"), (CACHE_ENV, "/tmp/c")]),
            Some(PathBuf::from("/tmp/c"))
        );
        assert_eq!(
            root(&[(CACHE_ENV, ""), ("HOME", "/h")]),
            Some(PathBuf::from("/h/.cache/limiter-harness"))
        );
        assert_eq!(root(&[]), None);
        assert_eq!(
            server_dir(Path::new("/tmp/c"), "valkey-9.1"),
            PathBuf::from("/tmp/c/servers/valkey-9.1")
        );
    }

    #[test]
    fn a_missing_install_is_missing_and_a_torn_one_broken() {
        let root = tempfile::tempdir().unwrap();
        let known = super::super::catalog::known("redis-6.2").unwrap();
        assert!(matches!(installed(root.path(), known), Installed::Missing));
        std::fs::create_dir_all(server_dir(root.path(), known.name)).unwrap();
        assert!(matches!(installed(root.path(), known), Installed::Broken(_)));
    }
}
