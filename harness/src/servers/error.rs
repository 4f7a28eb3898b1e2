//! Why a server binary's libraries could not be listed, or an installed server fails its check.

use std::path::PathBuf;

use crate::error::SetupError;

/// A server binary that `ldd` could not read, or that is not what its install promises.
#[derive(Debug, thiserror::Error)]
pub enum ServerError {
    /// `ldd` could not be run.
    #[error("running ldd: {0}")]
    LddSpawn(#[source] std::io::Error),
    /// `ldd` ran and failed; `stderr` is what it said.
    #[error("ldd {binary}: {stderr}")]
    LddFailed { binary: PathBuf, stderr: String },
    /// The installed binary does not run or say its version (the first line of why).
    #[error("{}", crate::text::first_line(&.0.to_string()))]
    Unusable(#[source] Box<SetupError>),
    /// The binary's version is not the one recorded at install.
    #[error("{binary} says {described}, but {installed} was installed")]
    VersionChanged {
        binary: PathBuf,
        /// What the binary says it is, e.g. "Redis 6.2.14".
        described: String,
        installed: String,
    },
    /// The binary is another product or series than the name promises.
    #[error(
        "{binary} says it is {described}, not the {}.{} that `{name}` promises",
        .series.0,
        .series.1
    )]
    NotPromised {
        binary: PathBuf,
        described: String,
        /// The major.minor the name promises.
        series: (u32, u32),
        name: &'static str,
    },
}
