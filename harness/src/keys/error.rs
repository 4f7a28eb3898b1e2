//! Why a key template or a key layout is refused: each message says what is wrong in one line.

use super::{IDENTITY, TEMPLATES_MAX};

/// A key template or key layout that cannot describe a limiter's keys.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum KeyError {
    /// The template is the empty string.
    #[error("a key template may not be empty")]
    Empty,
    /// A `{` with no `}` after it.
    #[error("`{text}`: a `{{` without its `}}` (write `{{{{` for a literal brace)")]
    Unclosed { text: String },
    /// A `{...}` placeholder other than `{identity}`.
    #[error(
        "`{text}`: unknown placeholder {name}; the only one is {identity} (write `{{{{` and `}}}}` for literal braces)",
        identity = IDENTITY
    )]
    UnknownPlaceholder { text: String, name: String },
    /// A `}` with no `{` before it.
    #[error("`{text}`: a `}}` without its `{{` (write `}}}}` for a literal brace)")]
    Unopened { text: String },
    /// A glob character other than the wildcards `*` and `?`.
    #[error("`{text}`: `{character}` is not supported in key templates (only the wildcards `*` and `?`)")]
    Unsupported { text: String, character: char },
    /// Whitespace or a control character.
    #[error("`{text}`: a key template may not contain spaces or control characters")]
    Whitespace { text: String },
    /// `{identity}` missing, or there more than once.
    #[error(
        "`{text}`: a key template names the identity exactly once, with {identity} (e.g. `rl:{identity}` or `app:{identity}:*`)",
        identity = IDENTITY
    )]
    IdentityCount { text: String },
    /// A layout without a template.
    #[error("a key layout needs at least one template, e.g. [\"rl:{{identity}}\"]")]
    NoTemplates,
    /// A layout of more than [`TEMPLATES_MAX`] templates.
    #[error(
        "a key layout of {count} templates: at most {max} (each is scanned and subscribed to)",
        max = TEMPLATES_MAX
    )]
    TooManyTemplates { count: usize },
}
