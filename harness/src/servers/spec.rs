//! `--server NAME|PATH` (and `--redis-server`, its old name): parsed without I/O, then
//! resolved to a checked [`LocalServer`].

use std::path::{Path, PathBuf};

use super::binary::{LocalServer, find_binary, local_server};
use super::cache::{self, Installed, cache_root};
use super::catalog::{self, KnownServer};
use crate::error::SetupError;

/// The server binary used when none is named.
pub const DEFAULT_PROGRAM: &str = "redis-server";
/// The installed server used when none is named and `redis-server` is not in PATH: the
/// version the shipped scenarios' expectations are reviewed on.
pub const FALLBACK: &str = "redis-7.0";

/// A server as the user named it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ServerSpec {
    /// Nothing named: `redis-server` in PATH, else an installed [`FALLBACK`].
    Default,
    /// A name `server install` knows (`redis-6.2`).
    Known(&'static KnownServer),
    /// A binary: a path, or a program name looked up in PATH (`valkey-server`).
    Binary(PathBuf),
}

impl ServerSpec {
    pub fn parse(value: Option<&str>) -> Self {
        match value.map(str::trim) {
            None | Some("") => Self::Default,
            Some(v) => catalog::known(v).map_or_else(|| Self::Binary(PathBuf::from(v)), Self::Known),
        }
    }
}

/// The server `value` names, found and checked.
pub fn resolve_server(value: Option<&str>) -> Result<LocalServer, SetupError> {
    match ServerSpec::parse(value) {
        ServerSpec::Default => default_server(),
        ServerSpec::Known(known) => installed_server(known),
        ServerSpec::Binary(path) => {
            let bare = path.components().count() == 1;
            let name = path.to_string_lossy().into_owned();
            if bare && find_binary(&path).is_none() && catalog::looks_like_a_name(&name) {
                return Err(SetupError::ServerUnknown {
                    name,
                    known: catalog::known_names(),
                });
            }
            local_server(&path, None, Some(name))
        }
    }
}

/// `redis-server` in PATH; without one, an installed [`FALLBACK`] (named in the reproduce
/// line, so that the run is repeated on the same version).
fn default_server() -> Result<LocalServer, SetupError> {
    let program = Path::new(DEFAULT_PROGRAM);
    if find_binary(program).is_some() {
        return local_server(program, None, None);
    }
    let known = catalog::known(FALLBACK).expect("the fallback is a known server");
    if let Ok(root) = cache_root()
        && let Installed::Ready { server, .. } = cache::installed(&root, known)
    {
        return Ok(server);
    }
    Err(SetupError::ServerBinary {
        path: program.to_owned(),
        reason: format!("not found in PATH, and `{FALLBACK}` is not installed"),
    })
}

/// A known server from the cache, checked.
fn installed_server(known: &'static KnownServer) -> Result<LocalServer, SetupError> {
    let root = cache_root()?;
    match cache::installed(&root, known) {
        Installed::Ready { server, .. } => Ok(server),
        Installed::Missing => Err(SetupError::ServerNotInstalled {
            name: known.name.to_owned(),
            dir: cache::server_dir(&root, known.name),
        }),
        Installed::Broken(reason) => Err(SetupError::ServerBroken {
            name: known.name.to_owned(),
            reason,
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_known_name_is_a_server_anything_else_a_binary() {
        assert_eq!(ServerSpec::parse(None), ServerSpec::Default);
        assert_eq!(ServerSpec::parse(Some(" ")), ServerSpec::Default);
        assert_eq!(
            ServerSpec::parse(Some("valkey-9.1")),
            ServerSpec::Known(catalog::known("valkey-9.1").unwrap())
        );
        assert_eq!(
            ServerSpec::parse(Some("redis-server")),
            ServerSpec::Binary(PathBuf::from("redis-server"))
        );
        assert_eq!(
            ServerSpec::parse(Some("/opt/valkey/bin/valkey-server")),
            ServerSpec::Binary(PathBuf::from("/opt/valkey/bin/valkey-server"))
        );
    }

    #[test]
    fn an_unknown_server_name_says_which_are_known() {
        let e = resolve_server(Some("redis-7.2")).unwrap_err().to_string();
        assert!(e.contains("unknown server `redis-7.2`"), "{e}");
        assert!(e.contains("redis-6.2, redis-7.0, valkey-8.1, valkey-9.1"), "{e}");
        let e = resolve_server(Some("/nonexistent/redis-server"))
            .unwrap_err()
            .to_string();
        assert!(e.contains("/nonexistent/redis-server"), "{e}");
    }
}
