//! Why a Lua script's sidecar convention is refused, and why a script's reply decides nothing.

use redis::Value;

use super::PLACEHOLDERS;
use crate::keys::KeyError;
use crate::scenario::TtlMaxError;

/// A sidecar convention (or one of its templates) that cannot be used, or a script reply that
/// does not fit its convention.
#[derive(Debug, thiserror::Error)]
pub enum LimiterError {
    /// A template's `{` with no `}` after it.
    #[error("`{text}`: a `{{` without its `}}` (write `{{{{` for a literal brace)")]
    Unclosed { text: String },
    /// A template's `{name}` that is no placeholder.
    #[error("`{text}`: unknown placeholder {{{name}}}; known: {known}", known = placeholders())]
    UnknownPlaceholder { text: String, name: String },
    /// A template's `}` with no `{` before it.
    #[error("`{text}`: a `}}` without its `{{` (write `}}}}` for a literal brace)")]
    Unopened { text: String },
    /// A `layout` template that is no key template.
    #[error("layout: {0}")]
    Layout(#[source] KeyError),
    /// `layout = []`.
    #[error("`layout` is empty: leave it out to take the KEYS templates")]
    EmptyLayout,
    /// `ttl_max_windows`/`ttl_max_ms` is no TTL declaration.
    #[error(transparent)]
    TtlMax(#[from] TtlMaxError),
    /// A KEYS template naming the identity that makes no key template (without a `layout`).
    #[error("KEYS template `{key}` cannot describe the script's keys ({source}): give them with `layout`")]
    KeysTemplate { key: String, source: KeyError },
    /// `[result] allowed_value` without `allowed_index` or `count_index`.
    #[error("[result] allowed_value needs allowed_index")]
    AllowedValueAlone,
    /// The reply has no element at a 1-based index the convention names.
    #[error("the reply has {len} element(s), no element {index}")]
    NoElement { len: usize, index: usize },
    /// The convention names an element, and the reply is not an array.
    #[error("expected an array reply, got {reply:?}")]
    NotAnArray { reply: Value },
    /// A nil where the count goes.
    #[error("expected a count, got nil (a script that returns nothing, nil or false decides nothing)")]
    NilCount,
    /// A count below zero.
    #[error("expected a count, got {count} (a negative count decides nothing)")]
    NegativeCount { count: i64 },
    /// Text that is no integer (at most 40 characters of it).
    #[error("expected an integer, got {text:?}")]
    NotAnInteger { text: String },
    /// Bytes that are not UTF-8 where a number goes.
    #[error("expected an integer, got {len} bytes that are not text")]
    NotText { len: usize },
    /// A reply of a kind that holds no number.
    #[error("expected an integer, got {reply:?}")]
    NotANumber { reply: Value },
}

/// Every placeholder, in braces: "{key} {identity} …".
fn placeholders() -> String {
    PLACEHOLDERS.map(|p| format!("{{{p}}}")).join(" ")
}
