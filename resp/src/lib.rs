//! RESP2/RESP3 frames for the fault proxy of limiter-harness: incremental parsing, cheap frame
//! measuring, encoding, and command inspection. Only `std`; no `unsafe`.
//!
//! # What is supported
//!
//! * Every RESP2 type (`+ - : $ *`, with `$-1` and `*-1` nulls) and every RESP3 type (`_ # , ( !
//!   = % ~ | >`), as [`Value`]. An attribute (`|`) and the value it annotates form one frame and
//!   one [`Value::Attribute`]. RESP3 *streamed* strings and aggregates (`$?`, `*?`, `;`, `.`) are
//!   rejected ([`ParseError::Streamed`]); redis-server never sends them.
//! * [`parse`] reads one value from the front of a buffer; [`frame_len`] only measures it, without
//!   allocating and without recursion (a fixed stack of pending element counts), and is the fast
//!   path for forwarding replies; [`FrameScanner`] is the same measurer, resumable across reads;
//!   [`Decoder`] buffers a stream and pops complete values. `parse` and `frame_len` share one
//!   header reader, so they accept and reject exactly the same bytes. [`peek_kind`] tells the
//!   type byte of the next frame (see [`kind`]).
//! * [`Value::encode`] / [`Value::to_bytes`] write any value back; for every buffer `parse`
//!   accepts, re-encoding the value gives back exactly the bytes consumed. [`error_reply`] builds
//!   an injected `-ERR …` reply.
//! * [`parse_command`] reads a client command as redis-server does: an array of bulk strings
//!   (when the buffer starts with `*`) or an inline line (`PING\r\n`, `SET a "b c"\n`, split like
//!   redis-server's `sdssplitargs`, with double and single quotes and their escapes).
//!   [`Command::keys`] names the keys of the commands rate limiters use; [`Command::display`] is a
//!   short printable form for logs.
//!
//! # Strictness and limits
//!
//! Malformed input is an [`Err`] with a one-line reason, never a panic; nothing is allocated
//! before a frame is known to be complete and valid, and never more than its size.
//!
//! * CRLF must be exact: a lone `\n` or a `\r` not followed by `\n` is an error (inline commands
//!   may end with `\n` alone, as redis-server accepts).
//! * Lengths, counts and integers are canonical decimal `i64`s as redis-server writes and accepts
//!   them: digits with an optional `-`, no `+`, no leading zeros, no `-0`.
//! * Negative lengths: only `$-1` and `*-1`. In a client command, elements must be `$n` with
//!   `n >= 0`; `*0` and `*-1` are empty commands (redis-server skips them).
//! * `,` doubles must parse as `f64` (`1.5`, `-2e10`, `inf`, `-inf`, `nan`); the text is kept.
//!   `(` big numbers are an optional sign and digits. `=` verbatim payloads are at least
//!   `xxx:` (a 3-byte format and a colon).
//! * [`MAX_BULK_LEN`] (512 MiB) for `$ ! =`, [`MAX_AGGREGATE_LEN`] (2^24) elements or pairs per
//!   aggregate, [`MAX_DEPTH`] (64) nested aggregates, [`MAX_LINE_LEN`] (64 KiB) for a `+ - , (`
//!   line, [`MAX_INLINE_LEN`] (64 KiB) for an inline command line.
//!   These bound one frame; a user holding many frames at once (the fault proxy, across its
//!   connections) bounds their sum itself.
//! * An incomplete buffer is `Ok(None)` as long as it can still become a valid frame: a number
//!   with a bad digit, a bad type byte or a missing CRLF after bulk data is reported as soon as it
//!   is seen.

mod command;
mod decoder;
mod error;
mod scan;
mod value;

pub use command::{Command, command_len, parse_command};
pub use decoder::Decoder;
pub use error::ParseError;
pub use scan::{FrameScanner, frame_len, parse};
pub use value::{Value, error_reply};

/// Longest bulk string (`$`, `!`, `=`) accepted: 512 MiB, redis-server's default
/// `proto-max-bulk-len`.
pub const MAX_BULK_LEN: usize = 512 * 1024 * 1024;
/// Most elements (pairs for maps and attributes) an aggregate may announce: 2^24.
pub const MAX_AGGREGATE_LEN: usize = 1 << 24;
/// Deepest nesting of aggregates: 64 (a top-level array is depth 1).
pub const MAX_DEPTH: usize = 64;
/// Longest inline command line (before its newline): 64 KiB, as redis-server.
pub const MAX_INLINE_LEN: usize = 64 * 1024;
/// Longest `+ - , (` line (before its CRLF): 64 KiB.
pub const MAX_LINE_LEN: usize = 64 * 1024;

/// The type bytes [`peek_kind`] can return for a valid frame.
pub mod kind {
    pub const SIMPLE_STRING: u8 = b'+';
    pub const ERROR: u8 = b'-';
    pub const INTEGER: u8 = b':';
    pub const BULK: u8 = b'$';
    pub const ARRAY: u8 = b'*';
    pub const NULL: u8 = b'_';
    pub const BOOLEAN: u8 = b'#';
    pub const DOUBLE: u8 = b',';
    pub const BIG_NUMBER: u8 = b'(';
    pub const BLOB_ERROR: u8 = b'!';
    pub const VERBATIM: u8 = b'=';
    pub const MAP: u8 = b'%';
    pub const SET: u8 = b'~';
    pub const ATTRIBUTE: u8 = b'|';
    pub const PUSH: u8 = b'>';

    /// `-` or `!`.
    pub fn is_error(kind: u8) -> bool {
        kind == ERROR || kind == BLOB_ERROR
    }
}

/// The type byte of the frame at the front of `buf` (its first byte), `None` if `buf` is empty.
/// Nothing is validated. A push behind an attribute (`|…>`) shows as `|`.
#[inline]
pub fn peek_kind(buf: &[u8]) -> Option<u8> {
    buf.first().copied()
}
