//! The one error type of the crate: why a buffer is not RESP.

use std::fmt;

use crate::{MAX_AGGREGATE_LEN, MAX_BULK_LEN, MAX_DEPTH, MAX_INLINE_LEN, MAX_LINE_LEN};

/// Why the bytes at the front of a buffer are not a valid frame.
///
/// Offsets count from the start of the buffer handed to the parsing function. Every variant has a
/// one-line human reason through [`Display`](fmt::Display), suitable for the log line written when
/// the proxy closes the connection.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum ParseError {
    /// The byte where a frame starts is not a RESP2/RESP3 type byte.
    BadTypeByte { byte: u8, offset: usize },
    /// A length, count or integer is not a canonical decimal `i64` (digits only, an optional
    /// leading `-`, no leading zeros, no `-0`, no overflow). `text` is what was seen, escaped.
    BadNumber {
        what: &'static str,
        text: String,
        offset: usize,
    },
    /// A negative length or count that the type does not allow (only `$-1` and `*-1` exist).
    BadLength { kind: u8, len: i64, offset: usize },
    /// A `$`, `!` or `=` length over [`MAX_BULK_LEN`].
    BulkTooLong { len: i64, offset: usize },
    /// An aggregate count over [`MAX_AGGREGATE_LEN`].
    TooManyElements { count: i64, offset: usize },
    /// An aggregate nested more than [`MAX_DEPTH`] levels deep.
    TooDeep { offset: usize },
    /// The two bytes after a bulk payload are not CRLF (the length does not match the data).
    ExpectedCrlf { after: &'static str, offset: usize },
    /// A line feed without the carriage return before it.
    LoneLf { offset: usize },
    /// A carriage return not followed by a line feed.
    LoneCr { offset: usize },
    /// A `+ - , (` line longer than [`MAX_LINE_LEN`] bytes without its CRLF.
    LineTooLong { offset: usize },
    /// `_` followed by anything but CRLF.
    BadNull { offset: usize },
    /// `#` followed by anything but `t` or `f` and CRLF.
    BadBoolean { offset: usize },
    /// A `,` line that is not a floating point number (`1.5`, `-2e10`, `inf`, `-inf`, `nan`).
    BadDouble { text: String, offset: usize },
    /// A `(` line that is not an optional sign followed by decimal digits.
    BadBigNumber { text: String, offset: usize },
    /// A `=` payload shorter than 4 bytes or without `:` after its 3-byte format.
    BadVerbatim { offset: usize },
    /// RESP3 streamed strings and aggregates (`$?`, `*?` …) are not supported.
    Streamed { kind: u8, offset: usize },
    /// An element of a client's command array is not a bulk string (or is `$-1`).
    BadCommandElement { byte: u8, offset: usize },
    /// An inline command line longer than [`MAX_INLINE_LEN`] without a newline.
    InlineTooLong { offset: usize },
    /// An inline command with an unterminated quote, or a closing quote not followed by a space.
    UnbalancedQuotes { offset: usize },
}

impl ParseError {
    /// The buffer offset the error refers to.
    pub fn offset(&self) -> usize {
        match *self {
            ParseError::BadTypeByte { offset, .. }
            | ParseError::BadNumber { offset, .. }
            | ParseError::BadLength { offset, .. }
            | ParseError::BulkTooLong { offset, .. }
            | ParseError::TooManyElements { offset, .. }
            | ParseError::TooDeep { offset }
            | ParseError::ExpectedCrlf { offset, .. }
            | ParseError::LoneLf { offset }
            | ParseError::LoneCr { offset }
            | ParseError::LineTooLong { offset }
            | ParseError::BadNull { offset }
            | ParseError::BadBoolean { offset }
            | ParseError::BadDouble { offset, .. }
            | ParseError::BadBigNumber { offset, .. }
            | ParseError::BadVerbatim { offset }
            | ParseError::Streamed { offset, .. }
            | ParseError::BadCommandElement { offset, .. }
            | ParseError::InlineTooLong { offset }
            | ParseError::UnbalancedQuotes { offset } => offset,
        }
    }
}

/// `'x'` for a printable ASCII byte, `0x0a` otherwise.
struct ByteName(u8);

impl fmt::Display for ByteName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.0.is_ascii_graphic() {
            write!(f, "0x{:02x} '{}'", self.0, self.0 as char)
        } else {
            write!(f, "0x{:02x}", self.0)
        }
    }
}

impl fmt::Display for ParseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // Long: one message per parse error.
        match self {
            ParseError::BadTypeByte { byte, offset } => {
                write!(f, "bad type byte {} at offset {offset}", ByteName(*byte))
            }
            ParseError::BadNumber { what, text, offset } => {
                write!(f, "{what} is not a number: \"{text}\" at offset {offset}")
            }
            ParseError::BadLength { kind, len, offset } => {
                write!(
                    f,
                    "length {len} is not allowed for type '{}' at offset {offset}",
                    *kind as char
                )
            }
            ParseError::BulkTooLong { len, offset } => {
                write!(
                    f,
                    "bulk length {len} over the {} MiB limit at offset {offset}",
                    MAX_BULK_LEN >> 20
                )
            }
            ParseError::TooManyElements { count, offset } => {
                write!(
                    f,
                    "aggregate count {count} over the {MAX_AGGREGATE_LEN} limit at offset {offset}"
                )
            }
            ParseError::TooDeep { offset } => write!(f, "nesting deeper than {MAX_DEPTH} at offset {offset}"),
            ParseError::ExpectedCrlf { after, offset } => {
                write!(f, "expected CRLF after {after} at offset {offset}")
            }
            ParseError::LoneLf { offset } => write!(f, "LF without CR at offset {offset}"),
            ParseError::LoneCr { offset } => write!(f, "CR not followed by LF at offset {offset}"),
            ParseError::LineTooLong { offset } => {
                write!(
                    f,
                    "line longer than {MAX_LINE_LEN} bytes without CRLF at offset {offset}"
                )
            }
            ParseError::BadNull { offset } => write!(f, "null ('_') must be followed by CRLF at offset {offset}"),
            ParseError::BadBoolean { offset } => write!(f, "boolean is not #t or #f at offset {offset}"),
            ParseError::BadDouble { text, offset } => {
                write!(f, "double is not a number: \"{text}\" at offset {offset}")
            }
            ParseError::BadBigNumber { text, offset } => {
                write!(f, "big number is not a number: \"{text}\" at offset {offset}")
            }
            ParseError::BadVerbatim { offset } => {
                write!(f, "verbatim string without a 3-byte format and ':' at offset {offset}")
            }
            ParseError::Streamed { kind, offset } => {
                write!(
                    f,
                    "streamed '{}?' frames are not supported at offset {offset}",
                    *kind as char
                )
            }
            ParseError::BadCommandElement { byte, offset } => {
                write!(
                    f,
                    "command element is not a bulk string (type byte {}) at offset {offset}",
                    ByteName(*byte)
                )
            }
            ParseError::InlineTooLong { offset } => {
                write!(
                    f,
                    "inline command longer than {MAX_INLINE_LEN} bytes without a newline at offset {offset}"
                )
            }
            ParseError::UnbalancedQuotes { offset } => {
                write!(f, "unbalanced quotes in inline command at offset {offset}")
            }
        }
    }
}

impl std::error::Error for ParseError {}

/// Printable form of untrusted bytes: printable ASCII as is, `\\` for a backslash, `\xNN` for the
/// rest. At most `max` input bytes are shown; `…` marks a cut.
pub(crate) fn escape_into(out: &mut String, bytes: &[u8], max: usize) {
    for &b in bytes.iter().take(max) {
        match b {
            b'\\' => out.push_str("\\\\"),
            0x20..=0x7e => out.push(b as char),
            _ => {
                const HEX: &[u8; 16] = b"0123456789abcdef";
                out.push_str("\\x");
                out.push(HEX[usize::from(b >> 4)] as char);
                out.push(HEX[usize::from(b & 0xf)] as char);
            }
        }
    }
    if bytes.len() > max {
        out.push('…');
    }
}

pub(crate) fn escape(bytes: &[u8], max: usize) -> String {
    let mut s = String::new();
    escape_into(&mut s, bytes, max);
    s
}
