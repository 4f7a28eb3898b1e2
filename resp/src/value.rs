//! RESP2/RESP3 values and their encoding.

/// A RESP2 or RESP3 value.
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    /// `+OK`
    SimpleString(Vec<u8>),
    /// `-ERR …`: the text after `-`, without CRLF.
    Error(Vec<u8>),
    /// `:42`
    Integer(i64),
    /// `$3\r\nfoo`
    Bulk(Vec<u8>),
    /// `$-1` (RESP2 null)
    NullBulk,
    /// `*n`
    Array(Vec<Value>),
    /// `*-1` (RESP2 null array)
    NullArray,
    /// `_` (RESP3)
    Null,
    /// `#t` / `#f`
    Boolean(bool),
    /// `,1.5`: the textual form is kept (`inf`, `-inf`, `nan`, `1.5e10`) so round trips are exact.
    Double(String),
    /// `(3492890328409238509324850943850943825024385`
    BigNumber(String),
    /// `!n`
    BlobError(Vec<u8>),
    /// `=n\r\ntxt:…`
    Verbatim { format: [u8; 3], text: Vec<u8> },
    /// `%n` (n pairs)
    Map(Vec<(Value, Value)>),
    /// `~n`
    Set(Vec<Value>),
    /// `|n` pairs followed by the value they annotate.
    Attribute {
        attrs: Vec<(Value, Value)>,
        value: Box<Value>,
    },
    /// `>n` (RESP3 out-of-band data: pub/sub messages, invalidations)
    Push(Vec<Value>),
}

/// Appends the decimal form of `n`.
#[inline]
pub(crate) fn push_int(out: &mut Vec<u8>, n: i64) {
    if n < 0 {
        out.push(b'-');
    }
    push_uint(out, n.unsigned_abs());
}

#[inline]
pub(crate) fn push_uint(out: &mut Vec<u8>, mut n: u64) {
    let mut digits = [0u8; 20];
    let mut i = digits.len();
    loop {
        i -= 1;
        digits[i] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    out.extend_from_slice(&digits[i..]);
}

/// `ty` + decimal `n` + CRLF.
#[inline]
pub(crate) fn push_header(out: &mut Vec<u8>, ty: u8, n: usize) {
    out.push(ty);
    push_uint(out, n as u64);
    out.extend_from_slice(b"\r\n");
}

/// `ty` + `line` + CRLF, with any CR or LF in `line` replaced by a space so the frame stays well
/// formed.
#[inline]
pub(crate) fn push_line(out: &mut Vec<u8>, ty: u8, line: &[u8]) {
    out.push(ty);
    let start = out.len();
    out.extend_from_slice(line);
    for b in &mut out[start..] {
        if *b == b'\r' || *b == b'\n' {
            *b = b' ';
        }
    }
    out.extend_from_slice(b"\r\n");
}

#[inline]
pub(crate) fn push_blob(out: &mut Vec<u8>, ty: u8, data: &[u8]) {
    push_header(out, ty, data.len());
    out.extend_from_slice(data);
    out.extend_from_slice(b"\r\n");
}

impl Value {
    /// Appends the RESP encoding of this value.
    ///
    /// Encoding does not validate: a line type (`SimpleString`, `Error`, `Double`, `BigNumber`)
    /// has any CR or LF replaced by a space so the output is always one well-formed frame, but a
    /// `Double` or `BigNumber` whose text is not a number, or a tree nested deeper than
    /// [`MAX_DEPTH`](crate::MAX_DEPTH), encodes to bytes that [`parse`](crate::parse) rejects.
    pub fn encode(&self, out: &mut Vec<u8>) {
        match self {
            Value::SimpleString(s) => push_line(out, b'+', s),
            Value::Error(s) => push_line(out, b'-', s),
            Value::Integer(n) => {
                out.push(b':');
                push_int(out, *n);
                out.extend_from_slice(b"\r\n");
            }
            Value::Bulk(b) => push_blob(out, b'$', b),
            Value::NullBulk => out.extend_from_slice(b"$-1\r\n"),
            Value::Array(items) => encode_items(out, b'*', items),
            Value::NullArray => out.extend_from_slice(b"*-1\r\n"),
            Value::Null => out.extend_from_slice(b"_\r\n"),
            Value::Boolean(true) => out.extend_from_slice(b"#t\r\n"),
            Value::Boolean(false) => out.extend_from_slice(b"#f\r\n"),
            Value::Double(s) => push_line(out, b',', s.as_bytes()),
            Value::BigNumber(s) => push_line(out, b'(', s.as_bytes()),
            Value::BlobError(b) => push_blob(out, b'!', b),
            Value::Verbatim { format, text } => {
                push_header(out, b'=', text.len() + 4);
                out.extend_from_slice(format);
                out.push(b':');
                out.extend_from_slice(text);
                out.extend_from_slice(b"\r\n");
            }
            Value::Map(pairs) => encode_pairs(out, b'%', pairs),
            Value::Set(items) => encode_items(out, b'~', items),
            Value::Attribute { attrs, value } => {
                encode_pairs(out, b'|', attrs);
                value.encode(out);
            }
            Value::Push(items) => encode_items(out, b'>', items),
        }
    }

    /// The RESP encoding of this value.
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut out = Vec::new();
        self.encode(&mut out);
        out
    }

    /// `Error` or `BlobError` (an error inside an attribute counts too).
    pub fn is_error(&self) -> bool {
        match self {
            Value::Error(_) | Value::BlobError(_) => true,
            Value::Attribute { value, .. } => value.is_error(),
            _ => false,
        }
    }

    /// A RESP3 push (`>`), possibly behind an attribute.
    pub fn is_push(&self) -> bool {
        match self {
            Value::Push(_) => true,
            Value::Attribute { value, .. } => value.is_push(),
            _ => false,
        }
    }

    /// The error text of an `Error` or `BlobError` (e.g. `ERR unknown command`).
    pub fn error_text(&self) -> Option<&[u8]> {
        match self {
            Value::Error(s) | Value::BlobError(s) => Some(s),
            Value::Attribute { value, .. } => value.error_text(),
            _ => None,
        }
    }

    /// The kind of a pub/sub message (`message`, `pmessage`, `smessage`, `subscribe`,
    /// `unsubscribe`, `psubscribe`, `punsubscribe`, `ssubscribe`, `sunsubscribe`, lower case as
    /// sent): for any RESP3 push, the first element if it is a string; for a RESP2 array, the first
    /// element if it is one of those names.
    ///
    /// A RESP2 array is only a pub/sub message on a connection in subscribed mode: an ordinary
    /// reply (`LRANGE` of a list whose first item is `message`) looks the same, so callers must
    /// know the connection's state.
    pub fn pubsub_kind(&self) -> Option<&[u8]> {
        const KINDS: [&[u8]; 9] = [
            b"message",
            b"pmessage",
            b"smessage",
            b"subscribe",
            b"unsubscribe",
            b"psubscribe",
            b"punsubscribe",
            b"ssubscribe",
            b"sunsubscribe",
        ];
        match self {
            Value::Push(items) => match items.first() {
                Some(Value::Bulk(s) | Value::SimpleString(s)) => Some(s),
                _ => None,
            },
            Value::Array(items) => match items.first() {
                Some(Value::Bulk(s)) if KINDS.contains(&s.as_slice()) => Some(s),
                _ => None,
            },
            Value::Attribute { value, .. } => value.pubsub_kind(),
            _ => None,
        }
    }

    /// The bytes of a `Bulk`, `SimpleString` or `Verbatim` text.
    pub fn as_bytes(&self) -> Option<&[u8]> {
        match self {
            Value::Bulk(b) | Value::SimpleString(b) => Some(b),
            Value::Verbatim { text, .. } => Some(text),
            _ => None,
        }
    }
}

fn encode_items(out: &mut Vec<u8>, ty: u8, items: &[Value]) {
    push_header(out, ty, items.len());
    for item in items {
        item.encode(out);
    }
}

fn encode_pairs(out: &mut Vec<u8>, ty: u8, pairs: &[(Value, Value)]) {
    push_header(out, ty, pairs.len());
    for (k, v) in pairs {
        k.encode(out);
        v.encode(out);
    }
}

/// An error reply for the proxy to inject: `-` + `text` + CRLF, any CR or LF in `text` replaced by
/// a space. `error_reply("OOM command not allowed when used memory > 'maxmemory'.")`.
pub fn error_reply(text: &str) -> Vec<u8> {
    let mut out = Vec::with_capacity(text.len() + 3);
    push_line(&mut out, b'-', text.as_bytes());
    out
}
