//! Malformed input is an error (never a panic, never Ok), and parse / frame_len agree on every
//! input, valid or not.

mod common;

use proptest::collection::vec;
use proptest::prelude::*;
use resp::{ParseError, command_len, frame_len, parse, parse_command};

/// `parse` and `frame_len` give the same answer; returns it.
fn both(buf: &[u8]) -> Result<Option<usize>, ParseError> {
    let measured = frame_len(buf);
    let parsed = parse(buf).map(|o| o.map(|(_, n)| n));
    assert_eq!(
        measured,
        parsed,
        "parse and frame_len disagree on {:?}",
        String::from_utf8_lossy(buf)
    );
    measured
}

fn err(buf: &[u8]) -> ParseError {
    match both(buf) {
        Err(e) => e,
        other => panic!("{:?} gave {other:?}", String::from_utf8_lossy(buf)),
    }
}

#[test]
fn malformed_values_are_errors() {
    let huge_count = format!("*{}\r\n", resp::MAX_AGGREGATE_LEN + 1);
    let huge_map = format!("%{}\r\n", resp::MAX_AGGREGATE_LEN + 1);
    let deep = "*1\r\n".repeat(1000);
    let just_too_deep = format!("{}:1\r\n", "*1\r\n".repeat(resp::MAX_DEPTH + 1));
    let long_line = format!("+{}", "a".repeat(resp::MAX_LINE_LEN + 1));
    let cases: &[&[u8]] = &[
        b"A\r\n",
        b"\r\n",
        b"$2\r\nabc\r\n",
        b"$5\r\nabc\r\nxy",
        b"$3\r\nfooXY",
        b"$3\r\nfoo\rX",
        b"$-2\r\n",
        b"*-5\r\n",
        b"!-1\r\n",
        b"=-1\r\n",
        b"%-1\r\n",
        b"~-1\r\n",
        b">-1\r\n",
        b"|-1\r\n",
        b"$2000000000\r\n",
        b"$536870913\r\n",
        b"$99999999999999999999\r\n",
        huge_count.as_bytes(),
        huge_map.as_bytes(),
        b"$abc\r\n",
        b"$\r\n",
        b"$+3\r\nfoo\r\n",
        b"$03\r\nfoo\r\n",
        b"*x\r\n",
        b":12a\r\n",
        b":\r\n",
        b":-\r\n",
        b":-0\r\n",
        b":01\r\n",
        b":+1\r\n",
        b":1 \r\n",
        b":9223372036854775808\r\n",
        b":-9223372036854775809\r\n",
        deep.as_bytes(),
        just_too_deep.as_bytes(),
        b"+OK\n",
        b":1\n",
        b"$3\nfoo\r\n",
        b"*1\n:1\r\n",
        b"+O\rK\r\n",
        b"$3\r\nfoo\n\r",
        long_line.as_bytes(),
        b"_x\r\n",
        b"_\rx",
        b"#x\r\n",
        b"#tt\r\n",
        b"#t\rx",
        b",abc\r\n",
        b",\r\n",
        b", 1\r\n",
        b"(12x\r\n",
        b"(\r\n",
        b"(-\r\n",
        b"=3\r\ntxt\r\n",
        b"=5\r\ntxtab\r\n",
        b"$?\r\n",
        b"*?\r\n",
        b";3\r\nabc\r\n",
        b".\r\n",
        b"*2\r\n:1\r\nX",
        b"%1\r\n+k\r\n\r\n",
    ];
    for case in cases {
        let e = err(case);
        // Every error has a reason.
        assert!(!e.to_string().is_empty());
    }
}

#[test]
fn error_messages_say_why() {
    assert_eq!(err(b"A\r\n").to_string(), "bad type byte 0x41 'A' at offset 0");
    assert_eq!(
        err(b"$2000000000\r\n").to_string(),
        "bulk length 2000000000 over the 512 MiB limit at offset 0"
    );
    assert_eq!(
        err("*1\r\n".repeat(1000).as_bytes()).to_string(),
        "nesting deeper than 64 at offset 256"
    );
    assert_eq!(
        err(b"$2\r\nabc\r\n").to_string(),
        "expected CRLF after bulk data at offset 6"
    );
    assert_eq!(
        err(b":12a\r\n").to_string(),
        "integer is not a number: \"12a\" at offset 1"
    );
    assert_eq!(err(b"+OK\n").to_string(), "LF without CR at offset 3");
    assert_eq!(
        err(b"$-2\r\n").to_string(),
        "length -2 is not allowed for type '$' at offset 0"
    );
    assert_eq!(err(b"*2\r\n:1\r\nX").offset(), 8);
}

#[test]
fn valid_prefixes_of_malformed_looking_input_wait() {
    // "$5\r\nabc\r\n" is a prefix of "$5\r\nabc\r\n\r\n" (payload "abc\r\n"): incomplete, not wrong.
    assert_eq!(both(b"$5\r\nabc\r\n"), Ok(None));
    assert_eq!(both(b"$5\r\nabc\r\n\r\n"), Ok(Some(11)));
    assert_eq!(both(b"$1073741824"), Ok(None));
    assert_eq!(both(b"*1\r\n*1\r\n"), Ok(None));
    assert_eq!(both(b"+OK\r"), Ok(None));
    // A long but bounded line is fine.
    let line = format!("+{}\r\n", "a".repeat(resp::MAX_LINE_LEN));
    assert_eq!(both(line.as_bytes()), Ok(Some(line.len())));
    // Lengths at the limits are accepted (before the data arrives).
    assert_eq!(both(format!("${}\r\n", resp::MAX_BULK_LEN).as_bytes()), Ok(None));
    assert_eq!(both(format!("*{}\r\n", resp::MAX_AGGREGATE_LEN).as_bytes()), Ok(None));
}

#[test]
fn malformed_commands_are_errors() {
    let cases: &[&[u8]] = &[
        b"*2\r\n$3\r\nGET\r\n:1\r\n",
        b"*1\r\n:1\r\n",
        b"*1\r\n+GET\r\n",
        b"*1\r\n*1\r\n$1\r\na\r\n",
        b"*1\r\n$-1\r\n",
        b"*-5\r\n",
        b"*-2\r\n",
        b"*abc\r\n",
        b"*1\n$4\r\nPING\r\n",
        b"*1\r\n$4\r\nPINGXX",
        b"*1\r\n$5\r\nPING\r\n\r\n",
        b"*1\r\n$600000000\r\n",
        b"*20000000\r\n",
        b"SET a \"b\r\n",
        b"SET a \"b\"c\r\n",
        b"SET a 'b\n",
    ];
    for case in cases {
        let got = parse_command(case);
        assert!(got.is_err(), "{:?} gave {got:?}", String::from_utf8_lossy(case));
        assert_eq!(command_len(case), got.map(|o| o.map(|(_, n)| n)));
    }
    let long_inline = vec![b'a'; resp::MAX_INLINE_LEN + 1];
    assert_eq!(
        parse_command(&long_inline),
        Err(ParseError::InlineTooLong { offset: 0 })
    );
    // Up to the limit it waits for the newline.
    assert_eq!(parse_command(&long_inline[..resp::MAX_INLINE_LEN]), Ok(None));
    assert_eq!(
        parse_command(b"*2\r\n$3\r\nGET\r\n:1\r\n").unwrap_err().to_string(),
        "command element is not a bulk string (type byte 0x3a ':') at offset 13"
    );
}

/// Bytes that are likely to form RESP, or almost.
fn resp_ish() -> impl Strategy<Value = Vec<u8>> {
    let token = prop_oneof![
        Just(b"\r\n".to_vec()),
        Just(b"\r".to_vec()),
        Just(b"\n".to_vec()),
        prop::sample::select(b"+-:$*_#,(!=%~|>;?.".to_vec()).prop_map(|b| vec![b]),
        prop::sample::select(vec!["0", "1", "2", "3", "-1", "-2", "4", "10", "t", "f", "txt:", "inf"])
            .prop_map(|s| s.as_bytes().to_vec()),
        vec(any::<u8>(), 1..4),
    ];
    vec(token, 0..24).prop_map(|t| t.concat())
}

/// Checks parse / frame_len agreement, and that whatever parses re-encodes to the bytes consumed.
fn check_value_input(buf: &[u8]) {
    let measured = frame_len(buf);
    match parse(buf) {
        Ok(Some((v, n))) => {
            assert_eq!(measured, Ok(Some(n)));
            assert!(n <= buf.len());
            assert_eq!(v.to_bytes(), &buf[..n], "re-encoding differs");
        }
        other => assert_eq!(measured, other.map(|o| o.map(|(_, n)| n))),
    }
}

fn check_command_input(buf: &[u8]) {
    let measured = command_len(buf);
    match parse_command(buf) {
        Ok(Some((c, n))) => {
            assert_eq!(measured, Ok(Some(n)));
            assert!(n <= buf.len());
            if buf[0] == b'*' && !c.args.is_empty() {
                assert_eq!(c.to_bytes(), &buf[..n]);
            }
            // Exercise the inspection helpers on arbitrary commands.
            let _ = (c.keys(), c.display(), c.name_upper());
        }
        other => assert_eq!(measured, other.map(|o| o.map(|(_, n)| n))),
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 2048, ..ProptestConfig::default() })]

    #[test]
    fn random_bytes_never_panic_and_parsers_agree(buf in vec(any::<u8>(), 0..64)) {
        check_value_input(&buf);
        check_command_input(&buf);
    }

    #[test]
    fn resp_like_bytes_never_panic_and_parsers_agree(buf in resp_ish()) {
        check_value_input(&buf);
        check_command_input(&buf);
        let mut star = b"*".to_vec();
        star.extend_from_slice(&buf);
        check_command_input(&star);
    }

    #[test]
    fn mutated_encodings_never_panic_and_parsers_agree(
        v in common::value(),
        edits in vec((any::<prop::sample::Index>(), any::<u8>(), 0u8..3), 1..4),
    ) {
        let mut buf = v.to_bytes();
        for (at, byte, op) in edits {
            if buf.is_empty() {
                break;
            }
            let i = at.index(buf.len());
            match op {
                0 => buf[i] = byte,
                1 => buf.insert(i, byte),
                _ => {
                    buf.remove(i);
                }
            }
        }
        check_value_input(&buf);
        // And every prefix of it.
        for k in 0..buf.len() {
            check_value_input(&buf[..k]);
        }
    }
}
