//! Strategies shared by the property tests.
#![allow(dead_code)]

use proptest::collection::vec;
use proptest::prelude::*;
use resp::Value;

/// Bytes for a `+`/`-` line: anything but CR and LF.
pub fn line_bytes() -> impl Strategy<Value = Vec<u8>> {
    vec(
        any::<u8>().prop_filter("no CR/LF", |b| *b != b'\r' && *b != b'\n'),
        0..16,
    )
}

/// Binary payload, biased towards the bytes that matter to framing.
pub fn blob() -> impl Strategy<Value = Vec<u8>> {
    vec(
        prop_oneof![4 => any::<u8>(), 1 => Just(b'\r'), 1 => Just(b'\n'), 1 => Just(b'$'), 1 => Just(b'*')],
        0..24,
    )
}

pub fn double_text() -> impl Strategy<Value = String> {
    prop_oneof![
        any::<f64>().prop_map(|f| f.to_string()),
        any::<f64>().prop_map(|f| format!("{f:e}")),
        (-1000i32..1000).prop_map(|n| n.to_string()),
        prop::sample::select(vec!["inf", "-inf", "nan", "1.5e10", "-0.5", "0", "3.14"]).prop_map(String::from),
    ]
}

pub fn big_number_text() -> impl Strategy<Value = String> {
    prop_oneof!["-?[1-9][0-9]{0,40}", Just("0".to_string())]
}

pub fn leaf() -> impl Strategy<Value = Value> {
    prop_oneof![
        line_bytes().prop_map(Value::SimpleString),
        line_bytes().prop_map(Value::Error),
        any::<i64>().prop_map(Value::Integer),
        prop_oneof![Just(i64::MIN), Just(i64::MAX), Just(0), Just(-1)].prop_map(Value::Integer),
        blob().prop_map(Value::Bulk),
        Just(Value::NullBulk),
        Just(Value::NullArray),
        Just(Value::Null),
        any::<bool>().prop_map(Value::Boolean),
        double_text().prop_map(Value::Double),
        big_number_text().prop_map(Value::BigNumber),
        blob().prop_map(Value::BlobError),
        (any::<[u8; 3]>(), blob()).prop_map(|(format, text)| Value::Verbatim { format, text }),
    ]
}

/// Any value: every variant, nested up to 4 levels.
pub fn value() -> impl Strategy<Value = Value> {
    leaf().prop_recursive(4, 48, 5, |inner| {
        let pairs = vec((inner.clone(), inner.clone()), 0..4);
        prop_oneof![
            vec(inner.clone(), 0..5).prop_map(Value::Array),
            pairs.clone().prop_map(Value::Map),
            vec(inner.clone(), 0..5).prop_map(Value::Set),
            vec(inner.clone(), 0..5).prop_map(Value::Push),
            (pairs, inner).prop_map(|(attrs, value)| Value::Attribute {
                attrs,
                value: Box::new(value)
            }),
        ]
    })
}

/// Chunk sizes for feeding a stream piecewise.
pub fn chunks() -> impl Strategy<Value = Vec<usize>> {
    vec(1usize..17, 1..64)
}

/// Splits `buf` into consecutive chunks of the given sizes (cycling), the last one shorter.
pub fn split<'a>(buf: &'a [u8], sizes: &[usize]) -> Vec<&'a [u8]> {
    let mut out = Vec::new();
    let mut p = 0;
    let mut i = 0;
    while p < buf.len() {
        let n = sizes[i % sizes.len()].min(buf.len() - p);
        out.push(&buf[p..p + n]);
        p += n;
        i += 1;
    }
    out
}
