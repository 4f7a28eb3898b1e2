//! Exit codes, documented in docs/running.md ("Exit codes").

use crate::checker::Verdict;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum ExitCode {
    /// Every invariant holds.
    Valid = 0,
    /// An invariant is violated.
    Invalid = 1,
    /// The run could not observe what it needed (server lost, interrupted, no quiet period...).
    Unknown = 2,
    /// Setup or usage error: bad scenario, unknown limiter, no Docker, ...
    Setup = 3,
}

impl From<Verdict> for ExitCode {
    fn from(v: Verdict) -> Self {
        match v {
            Verdict::Valid => Self::Valid,
            Verdict::Invalid => Self::Invalid,
            Verdict::Unknown => Self::Unknown,
        }
    }
}

impl From<ExitCode> for std::process::ExitCode {
    fn from(code: ExitCode) -> Self {
        std::process::ExitCode::from(code as u8)
    }
}
