//! Why an adapter breaks the protocol: a hello that cannot be used, a line that is no reply,
//! a reply that carries no decision.

use std::process::ExitStatus;

use super::{HELLO_TIMEOUT, LINE_MAX_TEXT, PROTOCOL_VERSION};
use crate::keys::KeyError;
use crate::scenario::TtlMaxError;

/// What an exec adapter printed (or did not print) that the protocol does not allow.
#[derive(Debug, thiserror::Error)]
pub enum AdapterError {
    /// A hello with a protocol version this harness does not speak.
    #[error("it speaks protocol {version} and this harness speaks 1 to {PROTOCOL_VERSION}")]
    Protocol { version: u32 },
    /// A hello with `"keys": []`.
    #[error("its hello's `keys` is empty: leave it out, or give the templates of its keys")]
    EmptyKeys,
    /// A hello's key template that is no key template.
    #[error("its hello's `keys`: {0}")]
    Keys(#[source] KeyError),
    /// A hello's `ttl_max_windows`/`ttl_max_ms` that is no TTL declaration.
    #[error("its hello's {0}")]
    TtlMax(#[source] TtlMaxError),
    /// No first line within [`HELLO_TIMEOUT`].
    #[error(
        "no hello line within {secs} s (the adapter must first print {{\"protocol\": 1}})",
        secs = HELLO_TIMEOUT.as_secs()
    )]
    NoHello,
    /// A first line longer than the cap on a line.
    #[error(
        "its first line exceeds {LINE_MAX_TEXT}, the cap on a line (a hello is one JSON object: {{\"protocol\": 1, ...}})"
    )]
    HelloTooLong,
    /// Its stdout closed before the hello: how it exited (`None`: it still runs).
    #[error("the adapter exited before its hello line ({})", exit_words(.status))]
    ExitedBeforeHello { status: Option<ExitStatus> },
    /// A first line that is no hello object; `line` is quoted (cut to 200 bytes).
    #[error("its first line is not a hello ({{\"protocol\": 1, ...}}): {why}: `{line}`")]
    NotHello { why: String, line: String },
    /// A failed hello, with where the adapter's stderr is and how it ends.
    #[error("{reason}; {stderr}")]
    WithStderr { reason: Box<AdapterError>, stderr: String },
    /// A line that is no reply at all (the adapter is declared dead); `line` is quoted.
    #[error("it printed a line that is not a reply line ({why}): `{line}`")]
    NotAReply { why: String, line: String },
    /// A reply with a count below zero.
    #[error("a negative `count` ({count})")]
    NegativeCount { count: i64 },
    /// A reply to `plant` that says neither what was planted nor why not.
    #[error("a reply to `plant` with neither `planted` nor `error`")]
    PlantUnanswered,
    /// A reply to a request that says neither the decision nor an error.
    #[error("a reply with neither `allowed` nor `error`")]
    NoDecision,
}

/// How an adapter that closed its stdout exited, in words.
fn exit_words(status: &Option<ExitStatus>) -> String {
    status.map_or_else(|| "still running with its stdout closed".to_owned(), |s| s.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_failed_hello_reads_as_before() {
        let running = AdapterError::WithStderr {
            reason: Box::new(AdapterError::ExitedBeforeHello { status: None }),
            stderr: "its stderr is in e.log (empty)".into(),
        };
        assert_eq!(
            running.to_string(),
            "the adapter exited before its hello line (still running with its stdout closed); its stderr is in e.log (empty)"
        );
        assert_eq!(
            AdapterError::NoHello.to_string(),
            "no hello line within 30 s (the adapter must first print {\"protocol\": 1})"
        );
        assert_eq!(
            AdapterError::Protocol { version: 3 }.to_string(),
            "it speaks protocol 3 and this harness speaks 1 to 2"
        );
    }
}
