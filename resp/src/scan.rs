//! Reading frames: one header reader shared by the measuring scanner ([`frame_len`],
//! [`FrameScanner`]) and the value builder ([`parse`]), so both accept and reject exactly the same
//! bytes.

use crate::error::{ParseError, escape};
use crate::value::Value;
use crate::{MAX_AGGREGATE_LEN, MAX_BULK_LEN, MAX_DEPTH, MAX_LINE_LEN};

/// Capacity reserved up front for an aggregate, whatever count its header claims.
const PREALLOC_CAP: usize = 1024;

/// One element header as read from the buffer. Scalars are complete (payload and trailing CRLF
/// included); aggregates carry the count of elements that follow.
pub(crate) enum Header<'a> {
    Simple(&'a [u8]),
    Error(&'a [u8]),
    Integer(i64),
    Null,
    Boolean(bool),
    Double(&'a str),
    BigNumber(&'a str),
    Bulk(&'a [u8]),
    NullBulk,
    BlobError(&'a [u8]),
    Verbatim([u8; 3], &'a [u8]),
    NullArray,
    /// `kind` is the type byte (`* % ~ > |`), `count` the number written in the header (pairs for
    /// `%` and `|`).
    Aggregate {
        kind: u8,
        count: u32,
    },
}

/// How many elements follow an aggregate header.
#[inline]
fn children(kind: u8, count: u32) -> u32 {
    // count <= 2^24, so neither can overflow.
    match kind {
        b'%' => count * 2,
        b'|' => count * 2 + 1,
        _ => count,
    }
}

type Read<T> = Result<Option<T>, ParseError>;

/// Unwraps `Ok(Some(x))`, returns `Ok(None)` and `Err` to the caller.
macro_rules! need {
    ($e:expr) => {
        match $e? {
            Some(x) => x,
            None => return Ok(None),
        }
    };
}
pub(crate) use need;

fn bad_number(what: &'static str, buf: &[u8], start: usize, bad: usize) -> ParseError {
    let end = (bad + 1).min(buf.len());
    ParseError::BadNumber {
        what,
        text: escape(&buf[start..end], 24),
        offset: start,
    }
}

/// A canonical decimal `i64` terminated by CRLF, starting at `start`: returns the value and the
/// index just after the LF. Invalid bytes are rejected as soon as they are seen.
#[inline]
pub(crate) fn read_int(buf: &[u8], start: usize, what: &'static str) -> Read<(i64, usize)> {
    let mut i = start;
    let neg = match buf.get(i) {
        None => return Ok(None),
        Some(b'-') => {
            i += 1;
            true
        }
        Some(_) => false,
    };
    let digits = i;
    let mut v: i64 = 0;
    loop {
        let Some(&b) = buf.get(i) else { return Ok(None) };
        match b {
            b'0'..=b'9' => {
                if i > digits && buf[digits] == b'0' {
                    return Err(bad_number(what, buf, start, i));
                }
                let d = i64::from(b - b'0');
                v = match v
                    .checked_mul(10)
                    .and_then(|v| if neg { v.checked_sub(d) } else { v.checked_add(d) })
                {
                    Some(v) => v,
                    None => return Err(bad_number(what, buf, start, i)),
                };
                i += 1;
            }
            b'\r' => {
                if i == digits || (neg && v == 0) {
                    return Err(bad_number(what, buf, start, i));
                }
                return match buf.get(i + 1) {
                    None => Ok(None),
                    Some(b'\n') => Ok(Some((v, i + 2))),
                    Some(_) => Err(ParseError::LoneCr { offset: i }),
                };
            }
            b'\n' => return Err(ParseError::LoneLf { offset: i }),
            _ => return Err(bad_number(what, buf, start, i)),
        }
    }
}

/// A line of at most [`MAX_LINE_LEN`] bytes from `start` up to CRLF: returns the index of the CR
/// and the index after the LF.
#[inline]
fn read_line(buf: &[u8], start: usize) -> Read<(usize, usize)> {
    let limit = start + MAX_LINE_LEN;
    let mut i = start;
    while let Some(&b) = buf.get(i) {
        match b {
            b'\r' => {
                return match buf.get(i + 1) {
                    None => Ok(None),
                    Some(b'\n') => Ok(Some((i, i + 2))),
                    Some(_) => Err(ParseError::LoneCr { offset: i }),
                };
            }
            b'\n' => return Err(ParseError::LoneLf { offset: i }),
            _ if i >= limit => return Err(ParseError::LineTooLong { offset: start - 1 }),
            _ => i += 1,
        }
    }
    Ok(None)
}

/// CRLF at `i`: returns the index after it.
#[inline]
fn expect_crlf(buf: &[u8], i: usize, after: &'static str) -> Read<usize> {
    match buf.get(i) {
        None => return Ok(None),
        Some(b'\r') => {}
        Some(_) => return Err(ParseError::ExpectedCrlf { after, offset: i }),
    }
    match buf.get(i + 1) {
        None => Ok(None),
        Some(b'\n') => Ok(Some(i + 2)),
        Some(_) => Err(ParseError::ExpectedCrlf { after, offset: i }),
    }
}

fn is_big_number(s: &[u8]) -> bool {
    let digits = match s.first() {
        Some(b'-' | b'+') => &s[1..],
        _ => s,
    };
    !digits.is_empty() && digits.iter().all(u8::is_ascii_digit)
}

fn is_double(s: &[u8]) -> Option<&str> {
    let s = std::str::from_utf8(s).ok()?;
    s.parse::<f64>().ok().map(|_| s)
}

/// Reads the element header at `pos` (for scalars: the whole element). Returns the header and the
/// index just after it.
#[inline]
pub(crate) fn read_header(buf: &[u8], pos: usize) -> Read<(Header<'_>, usize)> {
    // Long: the RESP type byte dispatch, kept in one function on the proxy's hot path.
    let Some(&ty) = buf.get(pos) else { return Ok(None) };
    let p = pos + 1;
    let header = match ty {
        b'+' | b'-' => {
            let (cr, next) = need!(read_line(buf, p));
            let s = &buf[p..cr];
            (
                if ty == b'+' {
                    Header::Simple(s)
                } else {
                    Header::Error(s)
                },
                next,
            )
        }
        b':' => {
            let (v, next) = need!(read_int(buf, p, "integer"));
            (Header::Integer(v), next)
        }
        b'$' | b'!' | b'=' => {
            if buf.get(p) == Some(&b'?') {
                return Err(ParseError::Streamed { kind: ty, offset: pos });
            }
            let (len, data) = need!(read_int(buf, p, "length"));
            if len < 0 {
                if len == -1 && ty == b'$' {
                    return Ok(Some((Header::NullBulk, data)));
                }
                return Err(ParseError::BadLength {
                    kind: ty,
                    len,
                    offset: pos,
                });
            }
            if len > MAX_BULK_LEN as i64 {
                return Err(ParseError::BulkTooLong { len, offset: pos });
            }
            if ty == b'=' && len < 4 {
                return Err(ParseError::BadVerbatim { offset: pos });
            }
            let end = data + len as usize;
            let next = need!(expect_crlf(buf, end, "bulk data"));
            let payload = &buf[data..end];
            let h = match ty {
                b'$' => Header::Bulk(payload),
                b'!' => Header::BlobError(payload),
                _ => {
                    if payload[3] != b':' {
                        return Err(ParseError::BadVerbatim { offset: pos });
                    }
                    Header::Verbatim([payload[0], payload[1], payload[2]], &payload[4..])
                }
            };
            (h, next)
        }
        b'*' | b'%' | b'~' | b'>' | b'|' => {
            if buf.get(p) == Some(&b'?') {
                return Err(ParseError::Streamed { kind: ty, offset: pos });
            }
            let (count, next) = need!(read_int(buf, p, "count"));
            if count < 0 {
                if count == -1 && ty == b'*' {
                    return Ok(Some((Header::NullArray, next)));
                }
                return Err(ParseError::BadLength {
                    kind: ty,
                    len: count,
                    offset: pos,
                });
            }
            if count > MAX_AGGREGATE_LEN as i64 {
                return Err(ParseError::TooManyElements { count, offset: pos });
            }
            (
                Header::Aggregate {
                    kind: ty,
                    count: count as u32,
                },
                next,
            )
        }
        b'_' => match buf.get(p) {
            None => return Ok(None),
            Some(b'\r') => (Header::Null, need!(expect_null_lf(buf, p))),
            Some(_) => return Err(ParseError::BadNull { offset: pos }),
        },
        b'#' => {
            let v = match buf.get(p) {
                None => return Ok(None),
                Some(b't') => true,
                Some(b'f') => false,
                Some(_) => return Err(ParseError::BadBoolean { offset: pos }),
            };
            match buf.get(p + 1) {
                None => return Ok(None),
                Some(b'\r') => {}
                Some(_) => return Err(ParseError::BadBoolean { offset: pos }),
            }
            match buf.get(p + 2) {
                None => return Ok(None),
                Some(b'\n') => (Header::Boolean(v), p + 3),
                Some(_) => return Err(ParseError::LoneCr { offset: p + 1 }),
            }
        }
        b',' => {
            let (cr, next) = need!(read_line(buf, p));
            let Some(s) = is_double(&buf[p..cr]) else {
                return Err(ParseError::BadDouble {
                    text: escape(&buf[p..cr], 32),
                    offset: pos,
                });
            };
            (Header::Double(s), next)
        }
        b'(' => {
            let (cr, next) = need!(read_line(buf, p));
            let s = &buf[p..cr];
            if !is_big_number(s) {
                return Err(ParseError::BadBigNumber {
                    text: escape(s, 32),
                    offset: pos,
                });
            }
            // Only ASCII digits and a sign: valid UTF-8.
            let s = std::str::from_utf8(s).unwrap_or_default();
            (Header::BigNumber(s), next)
        }
        _ => return Err(ParseError::BadTypeByte { byte: ty, offset: pos }),
    };
    Ok(Some(header))
}

/// `_` then CR at `cr`: the LF after it.
fn expect_null_lf(buf: &[u8], cr: usize) -> Read<usize> {
    match buf.get(cr + 1) {
        None => Ok(None),
        Some(b'\n') => Ok(Some(cr + 2)),
        Some(_) => Err(ParseError::LoneCr { offset: cr }),
    }
}

/// A resumable measurer of one frame.
///
/// [`frame_len`] starts from scratch on every call, re-reading the headers of a large aggregate
/// each time more bytes arrive. A `FrameScanner` remembers how far it got: call
/// [`scan`](FrameScanner::scan) with the buffer that starts at the frame, and when it answers
/// `Ok(None)` call it again once more bytes have been appended **to the same buffer** (the bytes
/// already seen must not change). When it answers `Ok(Some(n))` it has reset itself for the next
/// frame, which starts at `buf[n..]`. After an `Err` the scanner must be [`reset`](Self::reset)
/// (or dropped, with the connection).
///
/// It never allocates: the pending element counts of the open aggregates live in a fixed array of
/// [`MAX_DEPTH`] entries.
#[derive(Debug, Clone)]
pub struct FrameScanner {
    /// Where the next element header starts, relative to the frame start.
    pos: usize,
    /// Number of open aggregates.
    depth: usize,
    /// Elements still expected by each open aggregate (`pending[..depth]`, all > 0).
    pending: [u32; MAX_DEPTH],
}

impl Default for FrameScanner {
    fn default() -> Self {
        Self::new()
    }
}

impl FrameScanner {
    pub fn new() -> Self {
        FrameScanner {
            pos: 0,
            depth: 0,
            pending: [0; MAX_DEPTH],
        }
    }

    /// Forgets any progress: the next `scan` starts a new frame at `buf[0]`.
    pub fn reset(&mut self) {
        self.pos = 0;
        self.depth = 0;
    }

    /// Bytes of the current frame already known to be well formed (0 right after a reset).
    pub fn progress(&self) -> usize {
        self.pos
    }

    /// The length of the complete frame at the front of `buf`, or `Ok(None)` if more bytes are
    /// needed. Accepts and rejects exactly what [`parse`] does.
    pub fn scan(&mut self, buf: &[u8]) -> Result<Option<usize>, ParseError> {
        loop {
            let Some((header, next)) = read_header(buf, self.pos)? else {
                return Ok(None);
            };
            if let Header::Aggregate { kind, count } = header {
                if self.depth == MAX_DEPTH {
                    return Err(ParseError::TooDeep { offset: self.pos });
                }
                self.pos = next;
                let n = children(kind, count);
                if n > 0 {
                    self.pending[self.depth] = n;
                    self.depth += 1;
                    continue;
                }
            } else {
                self.pos = next;
            }
            // An element is complete: close every aggregate it completes.
            loop {
                if self.depth == 0 {
                    let len = self.pos;
                    self.reset();
                    return Ok(Some(len));
                }
                let top = &mut self.pending[self.depth - 1];
                *top -= 1;
                if *top > 0 {
                    break;
                }
                self.depth -= 1;
            }
        }
    }
}

/// The length in bytes of the complete value at the front of `buf`, `Ok(None)` if `buf` holds only
/// a prefix of one. Accepts and rejects exactly what [`parse`] does, without allocating and without
/// recursion.
#[inline]
pub fn frame_len(buf: &[u8]) -> Result<Option<usize>, ParseError> {
    // Fast path: most replies are a single scalar.
    match read_header(buf, 0)? {
        None => Ok(None),
        Some((Header::Aggregate { kind, count }, next)) => {
            let n = children(kind, count);
            if n == 0 {
                return Ok(Some(next));
            }
            let mut scanner = FrameScanner::new();
            scanner.pos = next;
            scanner.pending[0] = n;
            scanner.depth = 1;
            scanner.scan(buf)
        }
        Some((_, next)) => Ok(Some(next)),
    }
}

/// Parses one complete value from the front of `buf`: `Ok(Some((value, consumed_bytes)))`,
/// `Ok(None)` when `buf` holds only a prefix of a value, `Err` on malformed input.
///
/// The frame is measured first (no allocation), so nothing is allocated for an incomplete or
/// malformed frame, and what is allocated is bounded by the frame's size.
pub fn parse(buf: &[u8]) -> Result<Option<(Value, usize)>, ParseError> {
    let Some(len) = frame_len(buf)? else { return Ok(None) };
    let (value, end) = need!(build(&buf[..len], 0));
    debug_assert_eq!(end, len);
    Ok(Some((value, end)))
}

/// Builds the value at `pos` of a buffer already checked by the scanner (depth included).
pub(crate) fn build(buf: &[u8], pos: usize) -> Read<(Value, usize)> {
    let (header, next) = need!(read_header(buf, pos));
    let value = match header {
        Header::Simple(s) => Value::SimpleString(s.to_vec()),
        Header::Error(s) => Value::Error(s.to_vec()),
        Header::Integer(v) => Value::Integer(v),
        Header::Null => Value::Null,
        Header::Boolean(b) => Value::Boolean(b),
        Header::Double(s) => Value::Double(s.to_owned()),
        Header::BigNumber(s) => Value::BigNumber(s.to_owned()),
        Header::Bulk(b) => Value::Bulk(b.to_vec()),
        Header::NullBulk => Value::NullBulk,
        Header::BlobError(b) => Value::BlobError(b.to_vec()),
        Header::Verbatim(format, text) => Value::Verbatim {
            format,
            text: text.to_vec(),
        },
        Header::NullArray => Value::NullArray,
        Header::Aggregate { kind, count } => {
            let count = count as usize;
            let mut p = next;
            let value = match kind {
                b'%' | b'|' => {
                    let mut pairs = Vec::with_capacity(count.min(PREALLOC_CAP));
                    for _ in 0..count {
                        let (k, q) = need!(build(buf, p));
                        let (v, q) = need!(build(buf, q));
                        pairs.push((k, v));
                        p = q;
                    }
                    if kind == b'%' {
                        Value::Map(pairs)
                    } else {
                        let (v, q) = need!(build(buf, p));
                        p = q;
                        Value::Attribute {
                            attrs: pairs,
                            value: Box::new(v),
                        }
                    }
                }
                _ => {
                    let mut items = Vec::with_capacity(count.min(PREALLOC_CAP));
                    for _ in 0..count {
                        let (v, q) = need!(build(buf, p));
                        items.push(v);
                        p = q;
                    }
                    match kind {
                        b'*' => Value::Array(items),
                        b'~' => Value::Set(items),
                        _ => Value::Push(items),
                    }
                }
            };
            return Ok(Some((value, p)));
        }
    };
    Ok(Some((value, next)))
}
