//! Property tests: values round-trip through encode / parse / frame_len, at every split point and
//! through the incremental decoder.

mod common;

use common::{chunks, split, value};
use proptest::collection::vec;
use proptest::prelude::*;
use resp::{Decoder, FrameScanner, Value, frame_len, parse};

/// Pops every complete frame from `buf` with `parse`, checking `frame_len` agrees; returns the
/// values and the bytes consumed.
fn pop_all(buf: &[u8]) -> (Vec<Value>, usize) {
    let mut values = Vec::new();
    let mut p = 0;
    loop {
        let rest = &buf[p..];
        let len = frame_len(rest).expect("frame_len of a valid stream prefix");
        match parse(rest).expect("parse of a valid stream prefix") {
            Some((v, n)) => {
                assert_eq!(len, Some(n), "frame_len disagrees with parse");
                values.push(v);
                p += n;
            }
            None => {
                assert_eq!(len, None, "frame_len disagrees with parse");
                return (values, p);
            }
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    #[test]
    fn encode_then_parse_gives_the_value_back(v in value(), trailing in vec(any::<u8>(), 0..8)) {
        let bytes = v.to_bytes();
        let mut buf = bytes.clone();
        buf.extend_from_slice(&trailing);
        prop_assert_eq!(parse(&buf), Ok(Some((v.clone(), bytes.len()))));
        prop_assert_eq!(frame_len(&buf), Ok(Some(bytes.len())));
        prop_assert_eq!(frame_len(&bytes), Ok(Some(bytes.len())));
        // encode appends
        let mut out = b"xy".to_vec();
        v.encode(&mut out);
        prop_assert_eq!(&out[2..], &bytes[..]);
    }

    #[test]
    fn every_strict_prefix_is_incomplete(v in value()) {
        let bytes = v.to_bytes();
        for k in 0..bytes.len() {
            prop_assert_eq!(parse(&bytes[..k]), Ok(None), "prefix of {} bytes", k);
            prop_assert_eq!(frame_len(&bytes[..k]), Ok(None), "prefix of {} bytes", k);
        }
    }

    #[test]
    fn a_pipeline_split_anywhere_yields_the_complete_frames(values in vec(value(), 1..4)) {
        let mut buf = Vec::new();
        let mut ends = Vec::new();
        for v in &values {
            v.encode(&mut buf);
            ends.push(buf.len());
        }
        for k in 0..=buf.len() {
            let (got, consumed) = pop_all(&buf[..k]);
            let complete = ends.iter().filter(|&&e| e <= k).count();
            prop_assert_eq!(&got[..], &values[..complete], "cut at {}", k);
            prop_assert_eq!(consumed, if complete == 0 { 0 } else { ends[complete - 1] });
        }
    }

    #[test]
    fn the_decoder_fed_in_chunks_yields_the_sequence(values in vec(value(), 1..4), sizes in chunks()) {
        let mut buf = Vec::new();
        for v in &values {
            v.encode(&mut buf);
        }
        let mut decoder = Decoder::new();
        let mut got = Vec::new();
        for chunk in split(&buf, &sizes) {
            decoder.push(chunk);
            while let Some(v) = decoder.next_value().expect("valid stream") {
                got.push(v);
            }
        }
        prop_assert_eq!(got, values);
        prop_assert!(decoder.pending().is_empty());
    }

    #[test]
    fn the_raw_decoder_yields_the_encodings(values in vec(value(), 1..4), sizes in chunks()) {
        let mut buf = Vec::new();
        for v in &values {
            v.encode(&mut buf);
        }
        let mut decoder = Decoder::new();
        let mut got = Vec::new();
        for chunk in split(&buf, &sizes) {
            decoder.push(chunk);
            while let Some(raw) = decoder.next_raw().expect("valid stream") {
                got.push(raw);
            }
        }
        let want: Vec<Vec<u8>> = values.iter().map(Value::to_bytes).collect();
        prop_assert_eq!(got, want);
    }

    #[test]
    fn a_resumed_scanner_agrees_with_frame_len(v in value(), sizes in chunks()) {
        let bytes = v.to_bytes();
        let mut scanner = FrameScanner::new();
        let mut have = 0;
        let mut answer = None;
        for chunk in split(&bytes, &sizes) {
            have += chunk.len();
            answer = scanner.scan(&bytes[..have]).expect("valid frame");
            if have < bytes.len() {
                prop_assert_eq!(answer, None);
                prop_assert!(scanner.progress() <= have);
            }
        }
        prop_assert_eq!(answer, Some(bytes.len()));
        // Reset by the complete answer: scans the next frame from scratch.
        prop_assert_eq!(scanner.progress(), 0);
        prop_assert_eq!(scanner.scan(&bytes), Ok(Some(bytes.len())));
    }
}

#[test]
fn examples_of_every_type() {
    let cases: Vec<(&[u8], Value)> = vec![
        (b"+OK\r\n", Value::SimpleString(b"OK".to_vec())),
        (b"-ERR bad\r\n", Value::Error(b"ERR bad".to_vec())),
        (b":-42\r\n", Value::Integer(-42)),
        (b":9223372036854775807\r\n", Value::Integer(i64::MAX)),
        (b":-9223372036854775808\r\n", Value::Integer(i64::MIN)),
        (b"$3\r\nfoo\r\n", Value::Bulk(b"foo".to_vec())),
        (b"$0\r\n\r\n", Value::Bulk(Vec::new())),
        (b"$4\r\na\r\nb\r\n", Value::Bulk(b"a\r\nb".to_vec())),
        (b"$-1\r\n", Value::NullBulk),
        (b"*-1\r\n", Value::NullArray),
        (b"*0\r\n", Value::Array(vec![])),
        (
            b"*2\r\n:1\r\n$-1\r\n",
            Value::Array(vec![Value::Integer(1), Value::NullBulk]),
        ),
        (b"_\r\n", Value::Null),
        (b"#t\r\n", Value::Boolean(true)),
        (b"#f\r\n", Value::Boolean(false)),
        (b",1.5e10\r\n", Value::Double("1.5e10".into())),
        (b",-inf\r\n", Value::Double("-inf".into())),
        (b",nan\r\n", Value::Double("nan".into())),
        (
            b"(-123456789012345678901234567890\r\n",
            Value::BigNumber("-123456789012345678901234567890".into()),
        ),
        (b"!8\r\nSYNTAX x\r\n", Value::BlobError(b"SYNTAX x".to_vec())),
        (
            b"=8\r\ntxt:abcd\r\n",
            Value::Verbatim {
                format: *b"txt",
                text: b"abcd".to_vec(),
            },
        ),
        (
            b"=4\r\nmkd:\r\n",
            Value::Verbatim {
                format: *b"mkd",
                text: vec![],
            },
        ),
        (
            b"%1\r\n+k\r\n:1\r\n",
            Value::Map(vec![(Value::SimpleString(b"k".to_vec()), Value::Integer(1))]),
        ),
        (
            b"~2\r\n#t\r\n_\r\n",
            Value::Set(vec![Value::Boolean(true), Value::Null]),
        ),
        (
            b"|1\r\n+ttl\r\n:3\r\n$1\r\nv\r\n",
            Value::Attribute {
                attrs: vec![(Value::SimpleString(b"ttl".to_vec()), Value::Integer(3))],
                value: Box::new(Value::Bulk(b"v".to_vec())),
            },
        ),
        (
            b">3\r\n$7\r\nmessage\r\n$2\r\nch\r\n$2\r\nhi\r\n",
            Value::Push(vec![
                Value::Bulk(b"message".to_vec()),
                Value::Bulk(b"ch".to_vec()),
                Value::Bulk(b"hi".to_vec()),
            ]),
        ),
    ];
    for (bytes, want) in cases {
        assert_eq!(
            parse(bytes),
            Ok(Some((want.clone(), bytes.len()))),
            "{}",
            String::from_utf8_lossy(bytes)
        );
        assert_eq!(frame_len(bytes), Ok(Some(bytes.len())));
        assert_eq!(want.to_bytes(), bytes);
    }
}

#[test]
fn nesting_up_to_the_limit_is_accepted() {
    let mut buf = b"*1\r\n".repeat(resp::MAX_DEPTH);
    buf.extend_from_slice(b":1\r\n");
    assert_eq!(frame_len(&buf), Ok(Some(buf.len())));
    let (mut v, n) = parse(&buf).unwrap().unwrap();
    assert_eq!(n, buf.len());
    let mut depth = 0;
    while let Value::Array(mut items) = v {
        depth += 1;
        v = items.pop().unwrap();
    }
    assert_eq!(depth, resp::MAX_DEPTH);
    assert_eq!(v, Value::Integer(1));
}

#[test]
fn helpers_classify_replies() {
    assert!(Value::Error(b"ERR x".to_vec()).is_error());
    assert!(Value::BlobError(b"ERR x".to_vec()).is_error());
    assert!(!Value::SimpleString(b"ERR".to_vec()).is_error());
    let push = Value::Push(vec![Value::Bulk(b"invalidate".to_vec()), Value::Array(vec![])]);
    assert!(push.is_push());
    assert_eq!(push.pubsub_kind(), Some(&b"invalidate"[..]));
    let resp2 = Value::Array(vec![Value::Bulk(b"message".to_vec()), Value::Bulk(b"c".to_vec())]);
    assert_eq!(resp2.pubsub_kind(), Some(&b"message"[..]));
    assert_eq!(Value::Array(vec![Value::Bulk(b"x".to_vec())]).pubsub_kind(), None);
    assert_eq!(resp::peek_kind(b">2\r\n"), Some(resp::kind::PUSH));
    assert_eq!(resp::peek_kind(b""), None);
    assert!(resp::kind::is_error(resp::peek_kind(b"-ERR\r\n").unwrap()));
}

#[test]
fn error_reply_is_one_well_formed_line() {
    let r = resp::error_reply("OOM command not allowed when used memory > 'maxmemory'.");
    assert_eq!(r, b"-OOM command not allowed when used memory > 'maxmemory'.\r\n");
    let r = resp::error_reply("ERR a\r\nb\nc");
    assert_eq!(r, b"-ERR a  b c\r\n");
    assert_eq!(parse(&r), Ok(Some((Value::Error(b"ERR a  b c".to_vec()), r.len()))));
    // Encoding sanitises line types the same way.
    assert_eq!(Value::SimpleString(b"a\nb".to_vec()).to_bytes(), b"+a b\r\n");
}
